//! `--live`: the same scenario over real HTTP. The simulated provider is
//! served by a hyper server on 127.0.0.1 (one per stack), the stacks reach
//! it through the hyper-util client, and the clock is the real one,
//! optionally compressed by `--time-scale`.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::Request;
use http_body_util::Full;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;
use tower::Service;
use tower_levee::BoxError;

use crate::body::SimBody;
use crate::provider::{Provider, SimFuture};
use crate::scenario::Scenario;

/// A client reaching a loopback provider server.
#[derive(Clone, Debug)]
pub struct Remote {
    client: Client<HttpConnector, Full<Bytes>>,
    addr: SocketAddr,
}

impl Remote {
    /// Where the providers listen: target `i` at `/t/{i}/`.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Sends one call for target `idx`.
    pub(crate) fn send(&self, idx: usize) -> SimFuture {
        let client = self.client.clone();
        let uri = format!("http://{}/t/{idx}/v1/chat/completions", self.addr);
        Box::pin(async move {
            let req = Request::post(uri).body(Full::new(Bytes::new()))?;
            let res = client.request(req).await.map_err(|e| -> BoxError {
                let kind = if e.is_connect() {
                    io::ErrorKind::ConnectionRefused
                } else {
                    io::ErrorKind::ConnectionReset
                };
                Box::new(io::Error::new(kind, e))
            })?;
            // Passed on as it streams: a slow first token is slow here too.
            Ok(res.map(SimBody::remote))
        })
    }
}

/// Serves `provider` on a fresh loopback port until the runtime stops.
/// A connect error or hang of the simulation closes or stalls the
/// connection, as a real one would.
pub async fn serve(provider: Provider) -> io::Result<Remote> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let provider = provider.clone();
            tokio::spawn(async move {
                let svc = service_fn(move |req: Request<hyper::body::Incoming>| {
                    let idx = req
                        .uri()
                        .path()
                        .split('/')
                        .nth(2)
                        .and_then(|s| s.parse::<usize>().ok())
                        .unwrap_or(0);
                    let fut = provider.target(idx).call(req);
                    async move {
                        let mut res = fut.await.map_err(|e| io::Error::other(e.to_string()))?;
                        // Which target answered, for a client behind a
                        // gateway (`--through`) to tell.
                        res.headers_mut()
                            .insert(crate::through::TARGET_HEADER, http::HeaderValue::from(idx));
                        Ok::<_, io::Error>(res)
                    }
                });
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    let client = Client::builder(TokioExecutor::new())
        .pool_idle_timeout(Duration::from_secs(30))
        .build_http();
    Ok(Remote { client, addr })
}

/// The scenario compressed `scale` times: every duration divided, rates
/// and rate limits multiplied. Levee's own timings (cool-offs, gate
/// defaults) are not scaled.
pub fn scaled(sc: &Scenario, scale: f64) -> Scenario {
    let mut s = shortened(sc, scale);
    let d = |x: Duration| x.div_f64(scale);
    s.load.rate *= scale;
    s.load.timeout = d(s.load.timeout);
    for t in &mut s.targets {
        t.latency = d(t.latency);
        t.rpm = (f64::from(t.rpm) * scale).round() as u32;
        t.tpm = (t.tpm as f64 * scale).round() as u64;
    }
    for f in &mut s.faults {
        f.delay = d(f.delay);
    }
    s
}

/// The scenario's timeline compressed `factor` times: its duration and its
/// faults' windows and flap periods divided; its load, its targets' limits
/// and latencies, and every stack's own timings as they were. The same
/// faults, closer together: how a gateway that keeps real time (whose
/// cool-offs cannot be scaled) runs a long scenario in less time.
pub fn shortened(sc: &Scenario, factor: f64) -> Scenario {
    let mut s = sc.clone();
    let d = |x: Duration| x.div_f64(factor);
    s.duration = d(s.duration);
    for f in &mut s.faults {
        f.from = d(f.from);
        f.to = d(f.to);
        f.period = d(f.period);
    }
    s
}

/// Checks a `--time-scale` or `--shorten` value (the command line names the flag).
pub fn parse_scale(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v >= 1.0 && v.is_finite() => Ok(v),
        _ => Err(format!("expected a number >= 1, got {s:?}")),
    }
}

/// Shares nothing but the scenario: a marker so the runner knows it is live.
pub type LiveScenario = Arc<Scenario>;
