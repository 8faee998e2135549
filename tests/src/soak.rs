//! The soak: many requests through the whole stack (retry budget, failover
//! over three targets, a bulkhead and a breaker per target, a per-attempt
//! timeout, hyper) against three providers on 127.0.0.1 that mix every
//! answer a real one gives: 200s, whole and cut streams, streams that fail
//! in-band, 429s with and without a wait, 503s, hangs, and an outage of the
//! primary part-way through.
//!
//! What it checks ([`SoakReport::violations`]): every request answered
//! exactly once and within its deadline; at the end, every bulkhead permit
//! back, and every breaker able to probe and close (a leaked probe slot
//! would keep one half-open and refusing); memory flat (resident set at
//! the end against a quarter of the way in).
//!
//! `cargo test -p integration-tests --test soak` runs a short one; the long
//! one is `cargo run --release -p integration-tests --bin soak -- 1000000`.
//! [`keys`] measures the heap a tracked model costs (`--bin keys`, and
//! `tests/memory_per_key.rs`), in a binary of its own: dhat's accounting
//! would slow the soak and count its allocations.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderValue, Request, Response, StatusCode, Uri};
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Frame;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use levee_core::breaker::{BreakerConfig, Cooldown};
use levee_core::gate::GateConfig;
use tokio::net::TcpListener;
use tower::{BoxError, Service, ServiceBuilder, ServiceExt};
use tower_levee::breaker::{BreakerLayer, RequestHead};
use tower_levee::bulkhead::BulkheadLayer;
use tower_levee::failover::{Failover, FailoverHandle, Target};
use tower_levee::retry::{RetryBudget, RetryBudgetLayer};

use crate::{Chunk, ReceiverStream};

/// How a soak runs.
#[derive(Clone, Copy, Debug)]
pub struct SoakConfig {
    /// Requests in all.
    pub requests: u64,
    /// Requests in flight at once.
    pub concurrency: usize,
    /// Seeds the providers' mix of answers.
    pub seed: u64,
}

/// What a soak saw.
#[derive(Debug, Default)]
pub struct SoakReport {
    /// Requests sent.
    pub requests: u64,
    /// Requests that got an answer (a response read to its end, or an error).
    pub answered: u64,
    /// Answers by kind: `200`, `429`, … for responses; the error's type
    /// for errors (`CircuitOpen`, `NoTargetAvailable`, `Elapsed`, …).
    pub answers: BTreeMap<String, u64>,
    /// Calls the providers received.
    pub upstream_calls: u64,
    /// Wall-clock time of the requests.
    pub elapsed: Duration,
    /// Resident set (KiB) after each quarter of the requests.
    pub rss_kib: Vec<u64>,
    /// The process's peak resident set (KiB).
    pub peak_rss_kib: u64,
    /// Broken promises; empty when the soak passed.
    pub violations: Vec<String>,
}

impl SoakReport {
    /// Requests per second.
    pub fn rate(&self) -> f64 {
        self.requests as f64 / self.elapsed.as_secs_f64()
    }
}

/// A resident-set figure from `/proc/self/status` (`VmRSS`, `VmHWM`), in KiB.
pub fn proc_status_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

// === the providers ===

const CHUNK: &str = "data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\n";
const DONE: &str = "data: [DONE]\n\n";
const IN_BAND: &str =
    "event: error\ndata: {\"error\":{\"type\":\"server_error\",\"message\":\"overloaded\"}}\n\n";

/// What a provider answers: by a hash of its request count, or by
/// `x-soak: ok` (always a 200, for the end-of-run probes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Answer {
    Json,
    Stream,
    CutStream,
    InBandError,
    Throttled,
    ThrottledNoHint,
    Unavailable,
    Hang,
}

fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The answer to a provider's `n`th call. The primary (`target` 0) is out
/// for a stretch of the run: every call then gets a 503.
fn answer(seed: u64, target: u64, n: u64, outage: std::ops::Range<u64>) -> Answer {
    if target == 0 && outage.contains(&n) {
        return Answer::Unavailable;
    }
    match splitmix(seed ^ (target << 56) ^ n) % 1000 {
        0..800 => Answer::Json,
        800..900 => Answer::Stream,
        900..910 => Answer::CutStream,
        910..920 => Answer::InBandError,
        920..925 => Answer::Throttled,
        925..928 => Answer::ThrottledNoHint,
        928..948 => Answer::Unavailable,
        948..951 => Answer::Hang,
        _ => Answer::Json,
    }
}

type ProviderBody = http_body_util::combinators::BoxBody<Bytes, std::io::Error>;

fn json(status: StatusCode, body: &'static str) -> Response<ProviderBody> {
    let mut res = Response::new(
        Full::new(Bytes::from_static(body.as_bytes()))
            .map_err(|never| match never {})
            .boxed(),
    );
    *res.status_mut() = status;
    res.headers_mut()
        .insert("content-type", HeaderValue::from_static("application/json"));
    res
}

fn stream(chunks: Vec<&'static str>, cut: bool) -> Response<ProviderBody> {
    let (tx, rx) = tokio::sync::mpsc::channel::<Chunk>(4);
    tokio::spawn(async move {
        for c in chunks {
            if tx
                .send(Ok(Frame::data(Bytes::from_static(c.as_bytes()))))
                .await
                .is_err()
            {
                return;
            }
        }
        if cut {
            // Let the server flush what was sent: a cut before the first
            // output is a failed attempt that Levee replaces unseen, and
            // this answer is the cut after it, which reaches the caller.
            tokio::time::sleep(Duration::from_millis(5)).await;
            let _ = tx.send(Err(std::io::Error::other("cut"))).await;
        }
    });
    let body = StreamBody::new(ReceiverStream(rx));
    let mut res = Response::new(body.boxed());
    res.headers_mut().insert(
        "content-type",
        HeaderValue::from_static("text/event-stream"),
    );
    res
}

async fn respond(answer: Answer) -> Response<ProviderBody> {
    match answer {
        Answer::Json => json(
            StatusCode::OK,
            r#"{"choices":[{"message":{"content":"Hi"}}]}"#,
        ),
        Answer::Stream => stream(vec![CHUNK, CHUNK, DONE], false),
        Answer::CutStream => stream(vec![CHUNK], true),
        Answer::InBandError => stream(vec![CHUNK, IN_BAND], false),
        Answer::Throttled => {
            let mut res = json(
                StatusCode::TOO_MANY_REQUESTS,
                r#"{"error":{"code":"rate_limit_exceeded","message":"Rate limit reached. Please try again in 20ms."}}"#,
            );
            res.headers_mut()
                .insert("retry-after-ms", HeaderValue::from_static("20"));
            res
        }
        Answer::ThrottledNoHint => json(
            StatusCode::TOO_MANY_REQUESTS,
            r#"{"error":{"code":"rate_limit_exceeded","message":"Rate limit reached."}}"#,
        ),
        Answer::Unavailable => json(
            StatusCode::SERVICE_UNAVAILABLE,
            r#"{"error":{"type":"server_error","message":"The server is overloaded."}}"#,
        ),
        Answer::Hang => {
            // Past the client's per-attempt timeout, then an answer nobody reads.
            tokio::time::sleep(Duration::from_secs(2)).await;
            json(StatusCode::OK, "{}")
        }
    }
}

/// Serves one provider on a free loopback port; counts its calls.
async fn provider(
    target: u64,
    seed: u64,
    outage: std::ops::Range<u64>,
    calls: Arc<AtomicU64>,
) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let (calls, outage) = (calls.clone(), outage.clone());
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                    let n = calls.fetch_add(1, Ordering::Relaxed);
                    let a = if req.headers().contains_key("x-soak-ok") {
                        Answer::Json
                    } else {
                        answer(seed, target, n, outage.clone())
                    };
                    async move { Ok::<_, Infallible>(respond(a).await) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    addr
}

// === the stack ===

/// The breaker settings of each target: short cool-offs so the outage is
/// probed and recovered from within the run, and a probe lease far longer
/// than the run, so a leaked probe slot cannot hide behind its expiry.
fn breaker() -> BreakerLayer {
    let config = BreakerConfig::builder()
        .threshold(5)
        .cooldown(Cooldown::exponential(
            Duration::from_millis(500),
            2.0,
            Duration::from_secs(2),
        ))
        .probe_timeout(Duration::from_secs(3600))
        .build()
        .unwrap();
    // A random 429 closes the whole scope: short waits keep the soak's
    // traffic flowing (a real account's 429s come in runs, not at random).
    let gate = GateConfig::builder()
        .default_wait(Duration::from_millis(20))
        .build()
        .unwrap();
    BreakerLayer::builder()
        .breaker(config)
        .gate(gate)
        .build()
        .unwrap()
}

type Stack = tower::util::BoxCloneSyncService<Request<Full<Bytes>>, Response<ReadBody>, BoxError>;
type ReadBody = tower_levee::body::ResponseBody<hyper::body::Incoming>;

fn stack(addrs: &[SocketAddr]) -> (Stack, FailoverHandle) {
    let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let attempt = ServiceBuilder::new()
        .timeout(Duration::from_millis(250))
        .service(client);
    let mut failover = Failover::builder();
    for (i, addr) in addrs.iter().enumerate() {
        let uri: Uri = format!("http://{addr}/v1/chat/completions")
            .parse()
            .unwrap();
        failover = failover.target(
            Target::new(format!("provider-{i}"), attempt.clone())
                .breaker(breaker())
                .bulkhead(BulkheadLayer::named(format!("provider-{i}"), 48))
                .rewrite(move |req: &mut Request<Full<Bytes>>| *req.uri_mut() = uri.clone()),
        );
    }
    let failover = failover.build().unwrap();
    let handle = failover.handle();
    let retry = RetryBudgetLayer::builder(Arc::new(RetryBudget::default()))
        .timeout(Duration::from_secs(3))
        .seed(7)
        .build()
        .unwrap();
    let stack = ServiceBuilder::new().layer(retry).service(failover);
    (tower::util::BoxCloneSyncService::new(stack), handle)
}

fn request(ok: bool) -> Request<Full<Bytes>> {
    let mut req = Request::post("http://placeholder/v1/chat/completions")
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from_static(
            br#"{"model":"gpt-4o","messages":[]}"#,
        )))
        .unwrap();
    if ok {
        req.headers_mut()
            .insert("x-soak-ok", HeaderValue::from_static("1"));
    }
    req
}

/// What one request came to: the response read to its end, or the error.
async fn send(mut svc: Stack, ok: bool) -> String {
    let res = match svc.ready().await {
        Ok(svc) => svc.call(request(ok)).await,
        Err(e) => Err(e),
    };
    match res {
        Ok(res) => {
            let status = res.status();
            match res.into_body().collect().await {
                Ok(_) => status.as_u16().to_string(),
                Err(_) => format!("{}+body_error", status.as_u16()),
            }
        }
        Err(e) => error_kind(&*e),
    }
}

fn error_kind(e: &(dyn std::error::Error + 'static)) -> String {
    let debug = format!("{e:?}");
    let name: String = debug
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    if name.is_empty() {
        "other".into()
    } else {
        name
    }
}

/// Runs a soak.
pub async fn run(config: SoakConfig) -> SoakReport {
    // The primary is out from 30% to 35% of its calls.
    let outage = config.requests * 3 / 10..config.requests * 35 / 100;
    let mut addrs = Vec::new();
    let counters: Vec<Arc<AtomicU64>> = (0..3).map(|_| Arc::new(AtomicU64::new(0))).collect();
    for (target, c) in counters.iter().enumerate() {
        addrs.push(provider(target as u64, config.seed, outage.clone(), c.clone()).await);
    }
    let (svc, handle) = stack(&addrs);

    let next = Arc::new(AtomicU64::new(0));
    let answered = Arc::new(AtomicU64::new(0));
    let quarter = (config.requests / 4).max(1);
    let rss = Arc::new(std::sync::Mutex::new(Vec::new()));
    let start = Instant::now();
    let workers: Vec<_> = (0..config.concurrency)
        .map(|_| {
            let (svc, next, answered, rss) =
                (svc.clone(), next.clone(), answered.clone(), rss.clone());
            tokio::spawn(async move {
                let mut answers = BTreeMap::<String, u64>::new();
                let mut unanswered = 0u64;
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= config.requests {
                        return (answers, unanswered);
                    }
                    // The retry layer's deadline is 3 s: 10 s is a hang.
                    match tokio::time::timeout(Duration::from_secs(10), send(svc.clone(), false))
                        .await
                    {
                        Ok(kind) => *answers.entry(kind).or_default() += 1,
                        Err(_) => unanswered += 1,
                    }
                    let done = answered.fetch_add(1, Ordering::Relaxed) + 1;
                    if done.is_multiple_of(quarter) {
                        rss.lock().unwrap().push(proc_status_kib("VmRSS:"));
                    }
                }
            })
        })
        .collect();
    let mut report = SoakReport {
        requests: config.requests,
        ..SoakReport::default()
    };
    let mut unanswered = 0;
    for w in workers {
        let (answers, missing) = w.await.expect("a worker panicked");
        for (k, v) in answers {
            *report.answers.entry(k).or_default() += v;
        }
        unanswered += missing;
    }
    report.elapsed = start.elapsed();
    report.answered = report.answers.values().sum();
    report.upstream_calls = counters.iter().map(|c| c.load(Ordering::Relaxed)).sum();
    report.rss_kib = rss.lock().unwrap().clone();
    report.peak_rss_kib = proc_status_kib("VmHWM:");

    if unanswered > 0 {
        report
            .violations
            .push(format!("{unanswered} requests unanswered after 10 s"));
    }
    if report.answered + unanswered != config.requests {
        report.violations.push(format!(
            "{} answers for {} requests",
            report.answered + unanswered,
            config.requests
        ));
    }
    check_released(&handle, &addrs, &mut report).await;
    if let [first, .., last] = report.rss_kib[..] {
        // Flat: the last quarter holds no more than the first plus 25%
        // (allocator slack and connection pools), and 64 MiB at most.
        let grown = last.saturating_sub(first);
        if grown > first / 4 && grown > 16 * 1024 || grown > 64 * 1024 {
            report
                .violations
                .push(format!("memory grew from {first} KiB to {last} KiB"));
        }
    }
    report
}

/// At the end: every bulkhead permit back, and every breaker admitting a
/// call once its cool-off is over (a leaked probe slot would keep one
/// half-open and refusing).
async fn check_released(handle: &FailoverHandle, addrs: &[SocketAddr], report: &mut SoakReport) {
    // Hung attempts are cut at 250 ms; streams were read to their end.
    tokio::time::sleep(Duration::from_millis(500)).await;
    for target in handle.targets() {
        let in_flight = handle.bulkhead(target).map_or(0, |b| b.in_flight);
        if in_flight != 0 {
            report.violations.push(format!(
                "{target}: {in_flight} bulkhead permits never returned"
            ));
        }
    }
    // Past the longest cool-off (2 s) and gate (20 ms).
    tokio::time::sleep(Duration::from_millis(2500)).await;
    for (target, addr) in handle.targets().zip(addrs) {
        let breaker = handle.breaker(target).expect("every target has a breaker");
        let req = Request::post(format!("http://{addr}/v1/chat/completions"))
            .body(())
            .unwrap();
        if let Err(e) = breaker.admits(&RequestHead::of(&req)) {
            report
                .violations
                .push(format!("{target}: refuses after the run: {e}"));
        }
    }
}

// === memory per tracked key ===

/// Heap bytes live now, as dhat counts them: the binary installs
/// `dhat::Alloc` and a profiler runs while [`keys`] measures.
pub fn live_bytes() -> usize {
    dhat::HeapStats::get().curr_bytes
}

/// What tracking many models through one breaker costs.
#[derive(Debug, Default)]
pub struct KeysReport {
    /// Distinct models sent.
    pub models: usize,
    /// The breaker layer's cap on tracked scopes per mechanism.
    pub max_keys: usize,
    /// Heap bytes the layer held halfway through, and after every model.
    pub live_halfway: usize,
    /// Heap bytes the layer held after every model.
    pub live_at_end: usize,
    /// Scopes tracked at the end: breakers, gates.
    pub breakers: usize,
    /// Gates tracked at the end.
    pub gates: usize,
}

impl KeysReport {
    /// Heap bytes per tracked scope at the end.
    pub fn bytes_per_key(&self) -> usize {
        self.live_at_end / (self.breakers + self.gates).max(1)
    }
}

/// Sends `models` distinct models through one breaker layer that keeps a
/// breaker per model (`isolate_by_model`) and at most `max_keys` scopes;
/// every tenth answer is a 429, so gates are tracked too, one model every
/// 10 ms. Needs `dhat::Alloc` as the global allocator (a dhat profiler runs
/// meanwhile), and a current-thread runtime: it pauses tokio's clock.
pub async fn keys(models: usize, max_keys: usize) -> KeysReport {
    use tower::service_fn;
    use tower_levee::breaker::Scope;

    let layer = BreakerLayer::builder()
        .isolate_by_model(true)
        .max_keys(max_keys)
        .build()
        .unwrap();
    let handle = layer.handle();
    let mut svc = tower::Layer::layer(
        &layer,
        service_fn(|req: Request<()>| {
            let throttled = req.uri().path() == "/throttle";
            async move {
                // A body: an empty answer to a POST is a failure of its own.
                let mut res = Response::new(Full::new(Bytes::from_static(b"{}")));
                if throttled {
                    *res.status_mut() = StatusCode::TOO_MANY_REQUESTS;
                }
                Ok::<_, Infallible>(res)
            }
        }),
    );
    let send_model = async |svc: &mut _, i: usize| {
        let path = if i.is_multiple_of(10) {
            "/throttle"
        } else {
            "/ok"
        };
        let mut req = Request::post(format!("https://api.openai.com{path}"))
            .body(())
            .unwrap();
        req.extensions_mut()
            .insert(Scope::new().model(format!("model-{i:06}")));
        let svc: &mut tower_levee::breaker::Breaker<_> = svc;
        let _ = svc.ready().await.unwrap().call(req).await;
    };
    tokio::time::pause();
    // Warm the layer's own allocations (its first key, the pool) first.
    send_model(&mut svc, usize::MAX).await;
    let _profiler = dhat::Profiler::builder().testing().build();
    let base = live_bytes();
    let mut report = KeysReport {
        models,
        max_keys,
        ..KeysReport::default()
    };
    for i in 0..models {
        // A model every 10 ms of (paused) time: a gate's 5 s passes, and its
        // scope becomes idle, as in a real storm of new models.
        tokio::time::advance(Duration::from_millis(10)).await;
        send_model(&mut svc, i).await;
        if i + 1 == models / 2 {
            report.live_halfway = live_bytes().saturating_sub(base);
        }
    }
    report.live_at_end = live_bytes().saturating_sub(base);
    let states = handle.states();
    let count = |m: &str| states.iter().filter(|s| s.mechanism == m).count();
    report.breakers = count("breaker");
    report.gates = count("gate");
    report
}
