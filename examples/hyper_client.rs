//! A hyper client behind Levee's full stack, against a fake provider on
//! 127.0.0.1 that throttles once, streams, then has an outage.
//!
//! `hyper_util::client::legacy::Client` is already a
//! `Service<http::Request<B>>`: the layers go straight on it.
//!
//! Run with `cargo run -p examples --example hyper_client`.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use levee_core::breaker::BreakerConfig;
use levee_core::classify::Classification;
use tokio::net::TcpListener;
use tower::{Service, ServiceBuilder, ServiceExt};
use tower_levee::retry::RetryOutcome;
use tower_levee::{BoxError, BreakerLayer, BulkheadLayer, RetryBudgetLayer};

#[path = "support.rs"]
mod support;
use support::{check, rejection_name};

/// What each request must end in: a throttle waited out, a stream read
/// whole, an outage retried within budget until the breaker opens, then a
/// refusal without a call.
const EXPECTED: [&str; 4] = [
    "200 OK",
    "200 OK",
    "503 Service Unavailable (Availability after 3 attempts)",
    "refused: CircuitOpen",
];

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let addr = fake_provider().await?;

    let breaker = BreakerLayer::builder()
        .breaker(BreakerConfig::builder().threshold(3).build()?)
        .on_event(|e| {
            println!(
                "  event: {} {} -> {}: {}",
                e.scope(),
                e.from(),
                e.to(),
                e.reason()
            )
        })
        .build()?;
    let health = breaker.handle();
    let client = Client::builder(TokioExecutor::new()).build_http::<String>();
    let mut stack = ServiceBuilder::new()
        .timeout(Duration::from_secs(30)) // the caller's overall deadline
        .layer(RetryBudgetLayer::with_defaults()) // the one place that retries
        .layer(BulkheadLayer::named("llm", 16)) // fail fast past 16 in flight
        .layer(breaker) // breaker + throttle gate + park
        .timeout(Duration::from_secs(10)) // per attempt
        .service(client);

    let mut seen = Vec::new();
    for path in ["/throttled-once", "/stream", "/outage", "/outage"] {
        println!("POST {path}");
        let req = Request::post(format!("http://{addr}/v1/chat/completions{path}"))
            .header("authorization", "Bearer sk-example")
            .header("content-type", "application/json")
            .body(r#"{"model":"gpt-4o","messages":[]}"#.to_owned())?;
        match stack.ready().await?.call(req).await {
            Ok(res) => {
                let status = res.status();
                // On a final non-success: what the layers saw and did.
                let verdict = res.extensions().get::<Classification>().map(|c| c.verdict);
                let attempts = res.extensions().get::<RetryOutcome>().map(|o| o.attempts);
                let body = res.into_body().collect().await?.to_bytes();
                let mut outcome = status.to_string();
                if let (Some(verdict), Some(attempts)) = (verdict, attempts) {
                    outcome += &format!(" ({verdict:?} after {attempts} attempts)");
                }
                println!("  -> {outcome}, {} bytes", body.len());
                seen.push(outcome);
            }
            Err(err) => {
                println!("  -> refused: {err}");
                seen.push(format!("refused: {}", rejection_name(&err)));
            }
        }
    }
    println!("health: {:?}", health.states());
    check(&seen, &EXPECTED)
}

/// A provider on 127.0.0.1: `/throttled-once` answers 429 with a 200 ms hint
/// the first time, `/stream` streams SSE, `/outage` answers 503.
async fn fake_provider() -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let throttled = Arc::new(AtomicUsize::new(0));
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let throttled = throttled.clone();
            let svc = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                let first = req.uri().path().ends_with("/throttled-once")
                    && throttled.fetch_add(1, Ordering::SeqCst) == 0;
                async move {
                    let path = req.uri().path();
                    let res = if first {
                        Response::builder()
                            .status(429)
                            .header("retry-after-ms", "200")
                            .body(r#"{"error":{"code":"rate_limit_exceeded"}}"#)
                    } else if path.ends_with("/outage") {
                        Response::builder().status(503).body("upstream unavailable")
                    } else if path.ends_with("/stream") {
                        Response::builder()
                            .header("content-type", "text/event-stream")
                            .body("data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\ndata: [DONE]\n\n")
                    } else {
                        Response::builder().body(r#"{"choices":[{"message":{"content":"hi"}}]}"#)
                    };
                    Ok::<_, Infallible>(
                        res.unwrap()
                            .map(|b| Full::new(Bytes::from_static(b.as_bytes()))),
                    )
                }
            });
            tokio::spawn(async move {
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    Ok(addr)
}
