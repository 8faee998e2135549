//! An axum backend that calls two LLM providers through the full Levee stack:
//!
//! ```text
//! RetryBudget → Failover ─┬─ Bulkhead → Breaker → timeout → hyper client   openai, key of org-a
//!                         ├─ Bulkhead → Breaker → timeout → hyper client   openai, key of org-b
//!                         └─ Bulkhead → Breaker → timeout → hyper client   anthropic
//! ```
//!
//! It turns Levee's refusals into `429`/`503` with `Retry-After`, and serves
//! every target's health at `GET /health/providers`.
//!
//! Run with `cargo run -p examples --example axum_backend`. It is
//! self-contained: it starts two fake providers on 127.0.0.1 (each key
//! rate-limited to a few requests a second, answering `429` + `retry-after`
//! over it), starts the backend, sends it more traffic than any one key can
//! carry, prints what happened and the health snapshot, and exits.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use bytes::Bytes;
use http::header::{AUTHORIZATION, CONTENT_TYPE, RETRY_AFTER};
use http::{HeaderMap, HeaderValue, Request, StatusCode, Uri};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use levee_core::gate::GateConfig;
use tokio::net::TcpListener;
use tokio::time::Instant;
use tower::{BoxError, ServiceBuilder, ServiceExt};
use tower_levee::breaker::{BreakerLayer, CircuitOpen, Parked, Throttled};
use tower_levee::bulkhead::BulkheadFull;
use tower_levee::failover::{Failover, FailoverHandle, NoTargetAvailable, ServedBy, Target};
use tower_levee::retry::{Retry, RetryBudgetLayer};

type Upstream = hyper::body::Incoming;
type Llm = Retry<Failover<Full<Bytes>, Upstream>>;

const REQUESTS: usize = 120;
const OFFERED_PER_SEC: f64 = 15.0;
const BURST: usize = 60;

// === The backend ===

#[derive(Clone)]
struct App {
    llm: Llm,
    health: FailoverHandle,
}

/// `POST /v1/chat`: the caller's body goes to whichever target can take it.
async fn chat(State(app): State<App>, body: Bytes) -> Response {
    // The URI and credentials are each target's to set (its rewrite).
    let req = Request::post("http://llm.invalid/v1/chat/completions")
        .header(CONTENT_TYPE, "application/json")
        .body(Full::new(body))
        .expect("a valid request");
    match app.llm.oneshot(req).await {
        Ok(res) => {
            let served = res.extensions().get::<ServedBy>().copied();
            let (parts, body) = res.into_parts();
            let mut out = Response::from_parts(parts, Body::new(body));
            if let Some(by) = served {
                out.headers_mut()
                    .insert("x-served-by", HeaderValue::from_static(by.target));
            }
            out
        }
        Err(e) => levee_error(&e),
    }
}

/// Levee's refusals as HTTP: `429` when the providers are only busy, `503`
/// otherwise, always with `Retry-After`; anything else is a `502`.
fn levee_error(e: &BoxError) -> Response {
    if let Some(none) = e.downcast_ref::<NoTargetAvailable>() {
        let body = serde_json::json!({"error": {"code": none.code(), "message": none.to_string()}});
        return none
            .to_response(Body::from(body.to_string()))
            .into_response();
    }
    let (status, code, wait) = if let Some(t) = e.downcast_ref::<Throttled>() {
        (
            StatusCode::TOO_MANY_REQUESTS,
            "provider_rate_limited",
            t.retry_after(),
        )
    } else if let Some(p) = e.downcast_ref::<Parked>() {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "quota_exhausted",
            p.retry_after(),
        )
    } else if let Some(o) = e.downcast_ref::<CircuitOpen>() {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "provider_unavailable",
            o.retry_after(),
        )
    } else if let Some(b) = e.downcast_ref::<BulkheadFull>() {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "overloaded",
            b.retry_after(),
        )
    } else {
        let body =
            serde_json::json!({"error": {"code": "upstream_error", "message": e.to_string()}});
        return (StatusCode::BAD_GATEWAY, body.to_string()).into_response();
    };
    let body = serde_json::json!({"error": {"code": code, "message": e.to_string()}});
    let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    (status, [(RETRY_AFTER, secs.to_string())], body.to_string()).into_response()
}

/// `GET /health/providers`: the failover's health snapshot as JSON.
async fn health(State(app): State<App>) -> Response {
    let json = serde_json::to_string(&app.health.snapshot()).expect("serializable");
    ([(CONTENT_TYPE, "application/json")], json).into_response()
}

/// The Levee stack over a hyper client, for providers at `openai` and
/// `anthropic`.
fn llm_stack(openai: SocketAddr, anthropic: SocketAddr) -> (Llm, FailoverHandle) {
    let client: Client<HttpConnector, Full<Bytes>> =
        Client::builder(TokioExecutor::new()).build_http();
    // The per-attempt timeout, innermost: a hung call is an availability failure.
    let attempt = ServiceBuilder::new()
        .timeout(Duration::from_secs(2))
        .service(client);
    let openai_uri: Uri = format!("http://{openai}/v1/chat/completions")
        .parse()
        .unwrap();
    let anthropic_uri: Uri = format!("http://{anthropic}/v1/messages").parse().unwrap();
    let openai_key = |key: &'static str| {
        let uri = openai_uri.clone();
        move |req: &mut Request<Full<Bytes>>| {
            *req.uri_mut() = uri.clone();
            let bearer = HeaderValue::from_str(&format!("Bearer {key}")).unwrap();
            req.headers_mut().insert(AUTHORIZATION, bearer);
        }
    };
    // Each target gets a breaker layer of its own (its own breaker, gates and
    // parks). A 429 gates for the provider's `retry-after`; one with no
    // usable hint gates for `default_wait`, 1 s here like the fake providers.
    let breaker = || {
        let gate = GateConfig::builder()
            .default_wait(Duration::from_secs(1))
            .build()
            .expect("a valid gate");
        BreakerLayer::builder()
            .gate(gate)
            .build()
            .expect("a valid breaker")
    };
    let failover = Failover::builder()
        .target(
            Target::new("openai-org-a", attempt.clone())
                .breaker(breaker())
                .provider("openai")
                .max_concurrent(16)
                .rewrite(openai_key("sk-org-a")),
        )
        .target(
            Target::new("openai-org-b", attempt.clone())
                .breaker(breaker())
                .provider("openai")
                .max_concurrent(16)
                .rewrite(openai_key("sk-org-b")),
        )
        .target(
            Target::new("anthropic", attempt)
                .breaker(breaker())
                .provider("anthropic")
                .max_concurrent(16)
                .rewrite(move |req: &mut Request<Full<Bytes>>| {
                    *req.uri_mut() = anthropic_uri.clone();
                    req.headers_mut()
                        .insert("x-api-key", HeaderValue::from_static("sk-ant"));
                }),
        )
        .build()
        .expect("a valid failover");
    let handle = failover.handle();
    let llm = ServiceBuilder::new()
        .layer(RetryBudgetLayer::with_defaults().timeout(Duration::from_secs(10)))
        .service(failover);
    (llm, handle)
}

// === The fake providers ===

/// A provider whose every key is rate-limited to `rate` requests a second
/// (a token bucket with a burst of `rate`), answering `429` with
/// `retry-after` over it.
#[derive(Clone)]
struct FakeProvider {
    rate: f64,
    buckets: Arc<Mutex<HashMap<String, (f64, Instant)>>>,
}

async fn complete(State(p): State<FakeProvider>, headers: HeaderMap) -> Response {
    let key = headers
        .get(AUTHORIZATION)
        .or_else(|| headers.get("x-api-key"))
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let admitted = {
        let mut buckets = p.buckets.lock().unwrap();
        let now = Instant::now();
        let (tokens, last) = buckets.entry(key).or_insert((p.rate, now));
        *tokens = (*tokens + now.duration_since(*last).as_secs_f64() * p.rate).min(p.rate);
        *last = now;
        (*tokens >= 1.0).then(|| *tokens -= 1.0).is_some()
    };
    if !admitted {
        let body = r#"{"error":{"message":"Rate limit reached for requests","type":"requests","code":"rate_limit_exceeded"}}"#;
        return (StatusCode::TOO_MANY_REQUESTS, [(RETRY_AFTER, "1")], body).into_response();
    }
    tokio::time::sleep(Duration::from_millis(40)).await;
    let body = r#"{"choices":[{"message":{"role":"assistant","content":"hello"}}]}"#;
    ([(CONTENT_TYPE, "application/json")], body).into_response()
}

async fn serve(app: Router) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind 127.0.0.1");
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.expect("serve") });
    addr
}

async fn fake_provider(path: &str, rate: f64) -> SocketAddr {
    let provider = FakeProvider {
        rate,
        buckets: Arc::default(),
    };
    serve(
        Router::new()
            .route(path, post(complete))
            .with_state(provider),
    )
    .await
}

// === The self-test ===

/// Sends `n` requests to the backend at `per_sec` (all at once if
/// infinite); prints and returns the answers by status.
async fn phase(
    client: &Client<HttpConnector, Full<Bytes>>,
    backend: SocketAddr,
    n: usize,
    per_sec: f64,
) -> Result<HashMap<u16, usize>, BoxError> {
    let mut calls = Vec::with_capacity(n);
    for _ in 0..n {
        let client = client.clone();
        let body = br#"{"messages":[{"role":"user","content":"hi"}]}"#;
        let req = Request::post(format!("http://{backend}/v1/chat"))
            .body(Full::new(Bytes::from_static(body)))?;
        calls.push(tokio::spawn(async move {
            let res = client.request(req).await?;
            let status = res.status();
            let served_by = res.headers().get("x-served-by").cloned();
            let retry_after = res.headers().contains_key(RETRY_AFTER);
            res.into_body().collect().await?;
            Ok::<_, BoxError>((status, served_by, retry_after))
        }));
        if per_sec.is_finite() {
            tokio::time::sleep(Duration::from_secs_f64(1.0 / per_sec)).await;
        }
    }
    let mut by_status: HashMap<u16, usize> = HashMap::new();
    let mut by_target: HashMap<String, usize> = HashMap::new();
    for call in calls {
        let (status, served_by, retry_after) = call.await??;
        *by_status.entry(status.as_u16()).or_default() += 1;
        if let Some(t) = served_by.filter(|_| status.is_success()) {
            *by_target.entry(t.to_str()?.to_owned()).or_default() += 1;
        }
        if !status.is_success() {
            assert!(retry_after, "every refusal carries Retry-After ({status})");
            assert!([429, 503].contains(&status.as_u16()), "{status}");
        }
    }
    println!("  answers by status: {by_status:?}");
    println!("  successes by target: {by_target:?}");
    Ok(by_status)
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let openai = fake_provider("/v1/chat/completions", 5.0).await;
    let anthropic = fake_provider("/v1/messages", 8.0).await;
    let (llm, health_handle) = llm_stack(openai, anthropic);
    let app = Router::new()
        .route("/v1/chat", post(chat))
        .route("/health/providers", get(health))
        .with_state(App {
            llm,
            health: health_handle,
        });
    let backend = serve(app).await;
    println!("fake openai on {openai}, fake anthropic on {anthropic}, backend on {backend}");
    println!(
        "sending {REQUESTS} requests at {OFFERED_PER_SEC}/s (each key carries 5/s, anthropic 8/s)"
    );

    let client: Client<HttpConnector, Full<Bytes>> =
        Client::builder(TokioExecutor::new()).build_http();
    // Steady traffic within the sum of the limits: (nearly) every request is
    // served (real time on a shared machine: a stall can cost a few).
    let steady = phase(&client, backend, REQUESTS, OFFERED_PER_SEC).await?;
    assert_eq!(
        steady.values().sum::<usize>(),
        REQUESTS,
        "every request got one answer"
    );
    assert!(
        steady.get(&200).copied().unwrap_or(0) * 100 >= REQUESTS * 95,
        "{steady:?}"
    );
    // A burst of many times what every key has left at once: what cannot be
    // served within the deadline is refused with 429/503 and Retry-After.
    println!("a burst of {BURST} requests at once");
    let burst = phase(&client, backend, BURST, f64::INFINITY).await?;
    assert_eq!(
        burst.values().sum::<usize>(),
        BURST,
        "every request got one answer"
    );

    let res = client
        .request(Request::get(format!("http://{backend}/health/providers")).body(Full::default())?)
        .await?;
    let json: serde_json::Value =
        serde_json::from_slice(&res.into_body().collect().await?.to_bytes())?;
    println!(
        "GET /health/providers:\n{}",
        serde_json::to_string_pretty(&json)?
    );

    assert_eq!(json["targets"].as_array().map(Vec::len), Some(3));
    println!("ok");
    Ok(())
}
