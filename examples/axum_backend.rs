//! An axum backend with two dependencies, each behind a Levee stack built
//! from one config file (`examples/config/levee.toml`):
//!
//! ```text
//! POST /v1/chat      RetryBudget → Failover ─┬─ Bulkhead → Breaker → timeout → hyper   openai, key of org-a
//!                                            ├─ Bulkhead → Breaker → timeout → hyper   openai, key of org-b
//!                                            └─ Bulkhead → Breaker → timeout → hyper   anthropic
//! GET  /crm/contact  RetryBudget → Bulkhead → Breaker → timeout → hyper                the CRM
//! GET  /health/providers  both stacks' health as JSON (tower_levee::axum::health_handler)
//! ```
//!
//! Levee's refusals become `429`/`503` JSON answers with `Retry-After` and a
//! stable `code` through the `axum` feature (`LeveeError`, `?`).
//!
//! Run with `cargo run -p examples --example axum_backend [CONFIG.toml]`. It
//! is self-contained and checks itself in a second or so: it starts fake
//! providers and a fake CRM on 127.0.0.1, the backend in front of them, then
//! drives each mechanism to a known state with sequential requests (no
//! timing in what it asserts), prints what happened and `ok`, and exits 0
//! (non-zero if any check fails).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
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
use tokio::net::TcpListener;
use tokio::sync::Notify;
use tower::util::BoxCloneSyncService;
use tower::{BoxError, ServiceBuilder, ServiceExt};
use tower_levee::axum::{HealthGroup, LeveeError, health_handler};
use tower_levee::config::LeveeConfig;
use tower_levee::failover::{Failover, ServedBy, Target};

type HttpClient = Client<HttpConnector, Full<Bytes>>;
/// A dependency behind its Levee stack, boxed so the app state names one type.
type Dependency = BoxCloneSyncService<Request<Full<Bytes>>, Response, BoxError>;

// === The backend ===

#[derive(Clone)]
struct App {
    llm: Dependency,
    crm: Dependency,
}

/// `POST /v1/chat`: the caller's body goes to whichever LLM target can take
/// it. A Levee refusal is answered by `LeveeError` (`?`).
async fn chat(State(app): State<App>, body: Bytes) -> Result<Response, LeveeError> {
    // The URI and credentials are each target's to set (its rewrite).
    let req = Request::post("http://llm.invalid/v1/chat/completions")
        .header(CONTENT_TYPE, "application/json")
        .body(Full::new(body))?;
    let mut res = app.llm.oneshot(req).await?;
    if let Some(by) = res.extensions().get::<ServedBy>().copied() {
        res.headers_mut()
            .insert("x-served-by", HeaderValue::from_static(by.target));
    }
    Ok(res)
}

/// `GET /crm/contact`: a call to the CRM through its own stack.
async fn contact(State(app): State<App>) -> Result<Response, LeveeError> {
    let req = Request::get("http://crm.invalid/contact").body(Full::default())?;
    Ok(app.crm.oneshot(req).await?)
}

/// The services' settings: `[llm]` and `[crm]` tables of `LeveeConfig`.
fn load_config(path: &str) -> Result<(LeveeConfig, LeveeConfig), BoxError> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {path}: {e}"))?;
    let mut services: HashMap<String, LeveeConfig> =
        toml::from_str(&text).map_err(|e| format!("{path}: {e}"))?;
    let mut take = |name: &str| {
        services
            .remove(name)
            .ok_or_else(|| format!("{path}: no [{name}] table"))
    };
    Ok((take("llm")?, take("crm")?))
}

/// The LLM stack: a failover across two keys of one provider and a second
/// provider, each target with a breaker and bulkhead from `config`.
fn llm_stack(
    config: &LeveeConfig,
    client: &HttpClient,
    openai: SocketAddr,
    anthropic: SocketAddr,
) -> Result<(Dependency, tower_levee::failover::FailoverHandle), BoxError> {
    // The per-attempt timeout, innermost: a hung call is an availability failure.
    let attempt = ServiceBuilder::new()
        .timeout(Duration::from_secs(5))
        .service(client.clone());
    let openai_uri: Uri = format!("http://{openai}/v1/chat/completions").parse()?;
    let anthropic_uri: Uri = format!("http://{anthropic}/v1/messages").parse()?;
    let key = |name: &'static str, value: &'static str, uri: &Uri| {
        let uri = uri.clone();
        move |req: &mut Request<Full<Bytes>>| {
            *req.uri_mut() = uri.clone();
            req.headers_mut()
                .insert(name, HeaderValue::from_static(value));
        }
    };
    let target = |name: &'static str, provider: &'static str| -> Result<_, BoxError> {
        Ok(Target::new(name, attempt.clone())
            .breaker(config.breaker_layer()?.build()?)
            .bulkhead(config.bulkhead.layer()?)
            .provider(provider))
    };
    let failover = Failover::builder()
        .target(target("openai-org-a", "openai")?.rewrite(key(
            "authorization",
            "Bearer sk-org-a",
            &openai_uri,
        )))
        .target(target("openai-org-b", "openai")?.rewrite(key(
            "authorization",
            "Bearer sk-org-b",
            &openai_uri,
        )))
        .target(target("anthropic", "anthropic")?.rewrite(key(
            "x-api-key",
            "sk-ant",
            &anthropic_uri,
        )))
        // The body is mapped into axum's below: keep `ServedBy` as an
        // extension too (three allocations a response, here irrelevant).
        .served_by_extension(true)
        .build()?;
    let handle = failover.handle();
    let llm = ServiceBuilder::new()
        .layer(config.retry.layer()?)
        .service(failover)
        .map_response(|res| res.map(Body::new));
    Ok((BoxCloneSyncService::new(llm), handle))
}

/// The CRM stack: retry layer, bulkhead, breaker, all from `config`.
fn crm_stack(
    config: &LeveeConfig,
    client: &HttpClient,
    crm: SocketAddr,
) -> Result<(Dependency, tower_levee::BreakerHandle), BoxError> {
    let breaker = config.breaker_layer()?.build()?;
    let handle = breaker.handle();
    let uri: Uri = format!("http://{crm}/contact").parse()?;
    let stack = ServiceBuilder::new()
        // The CRM's address first: the breaker's scope is its authority.
        .map_request(move |mut req: Request<Full<Bytes>>| {
            *req.uri_mut() = uri.clone();
            req
        })
        .layer(config.retry.layer()?)
        .layer(config.bulkhead.layer()?)
        .layer(breaker)
        .timeout(Duration::from_secs(2))
        .service(client.clone())
        .map_response(|res| res.map(Body::new));
    Ok((BoxCloneSyncService::new(stack), handle))
}

// === The fake dependencies ===

/// A provider that serves each key `quota` requests, then answers `429`
/// with `retry-after: 30` and its dialect's error body for that key.
#[derive(Clone)]
struct FakeProvider {
    quota: usize,
    throttled_body: &'static str,
    calls: Arc<Mutex<HashMap<String, usize>>>,
}

impl FakeProvider {
    fn calls(&self) -> usize {
        self.calls.lock().unwrap().values().sum()
    }
}

async fn complete(State(p): State<FakeProvider>, headers: HeaderMap) -> Response {
    let key = headers
        .get(AUTHORIZATION)
        .or_else(|| headers.get("x-api-key"))
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let n = {
        let mut calls = p.calls.lock().unwrap();
        let n = calls.entry(key).or_default();
        *n += 1;
        *n
    };
    if n > p.quota {
        let throttled = [(RETRY_AFTER, "30"), (CONTENT_TYPE, "application/json")];
        return (StatusCode::TOO_MANY_REQUESTS, throttled, p.throttled_body).into_response();
    }
    let body = r#"{"choices":[{"message":{"role":"assistant","content":"hello"}}]}"#;
    ([(CONTENT_TYPE, "application/json")], body).into_response()
}

const CRM_UP: u8 = 0;
const CRM_DOWN: u8 = 1;
const CRM_HOLD: u8 = 2;

/// A CRM that is up, down (`503`), or holds each call until released.
#[derive(Clone, Default)]
struct FakeCrm {
    mode: Arc<AtomicU8>,
    calls: Arc<AtomicUsize>,
    arrived: Arc<Notify>,
    release: Arc<Notify>,
}

async fn crm_contact(State(crm): State<FakeCrm>) -> Response {
    crm.calls.fetch_add(1, Ordering::SeqCst);
    match crm.mode.load(Ordering::SeqCst) {
        CRM_DOWN => (StatusCode::SERVICE_UNAVAILABLE, "crm down").into_response(),
        mode => {
            if mode == CRM_HOLD {
                crm.arrived.notify_one();
                crm.release.notified().await;
            }
            let body = r#"{"name":"Ada Lovelace"}"#;
            ([(CONTENT_TYPE, "application/json")], body).into_response()
        }
    }
}

async fn serve(app: Router) -> Result<SocketAddr, BoxError> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok(addr)
}

const OPENAI_429: &str = r#"{"error":{"message":"Rate limit reached for requests","type":"requests","code":"rate_limit_exceeded"}}"#;
const ANTHROPIC_429: &str = r#"{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}"#;

async fn fake_provider(
    path: &str,
    throttled_body: &'static str,
) -> Result<(SocketAddr, FakeProvider), BoxError> {
    let provider = FakeProvider {
        quota: 3,
        throttled_body,
        calls: Arc::default(),
    };
    let app = Router::new()
        .route(path, post(complete))
        .with_state(provider.clone());
    Ok((serve(app).await?, provider))
}

// === The self-test ===

/// An answer of the backend: status, `Retry-After` in seconds, the
/// `x-served-by` target and the body.
struct Answer {
    status: StatusCode,
    retry_after: Option<u64>,
    served_by: Option<String>,
    body: Bytes,
}

impl Answer {
    /// The `code` of a JSON error body.
    fn code(&self) -> Option<String> {
        let json: serde_json::Value = serde_json::from_slice(&self.body).ok()?;
        json["error"]["code"].as_str().map(str::to_owned)
    }
}

async fn call(client: &HttpClient, req: Request<Full<Bytes>>) -> Result<Answer, BoxError> {
    let res = client.request(req).await?;
    let header = |name| {
        res.headers()
            .get(name)
            .and_then(|v: &HeaderValue| v.to_str().ok())
            .map(str::to_owned)
    };
    let retry_after = header(RETRY_AFTER.as_str()).and_then(|v| v.parse().ok());
    let served_by = header("x-served-by");
    let status = res.status();
    let body = res.into_body().collect().await?.to_bytes();
    Ok(Answer {
        status,
        retry_after,
        served_by,
        body,
    })
}

async fn chat_once(client: &HttpClient, backend: SocketAddr) -> Result<Answer, BoxError> {
    let body = br#"{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}"#;
    let req = Request::post(format!("http://{backend}/v1/chat"))
        .body(Full::new(Bytes::from_static(body)))?;
    call(client, req).await
}

async fn get_path(
    client: &HttpClient,
    backend: SocketAddr,
    path: &str,
) -> Result<Answer, BoxError> {
    call(
        client,
        Request::get(format!("http://{backend}{path}")).body(Full::default())?,
    )
    .await
}

/// The LLM: each key's quota in turn, then every target throttled.
async fn check_llm(
    client: &HttpClient,
    backend: SocketAddr,
    openai: &FakeProvider,
    anthropic: &FakeProvider,
) -> Result<(), BoxError> {
    // Three requests per key, then org-a answers 429: its gate closes for
    // the provider's 30 s and the same request goes on to org-b; likewise
    // org-b to anthropic.
    let mut served = Vec::new();
    for _ in 0..9 {
        let a = chat_once(client, backend).await?;
        assert_eq!(a.status, StatusCode::OK, "{:?}", a.body);
        served.push(a.served_by.unwrap_or_default());
    }
    println!("llm: 9 requests served by {served:?}");
    let expected: Vec<_> = ["openai-org-a", "openai-org-b", "anthropic"]
        .iter()
        .flat_map(|t| [t.to_string(), t.to_string(), t.to_string()])
        .collect();
    assert_eq!(served, expected);

    // Anthropic's quota is used up too: its own 429 comes back (the retry
    // layer will not wait 30 s past the 10 s deadline)...
    let a = chat_once(client, backend).await?;
    assert_eq!(a.status, StatusCode::TOO_MANY_REQUESTS);
    let calls = openai.calls() + anthropic.calls();
    // ...and from now on every target is gated: Levee refuses at once,
    // sending nothing, with a 429 whose Retry-After is the earliest reopening.
    let a = chat_once(client, backend).await?;
    println!(
        "llm: every key throttled: {} {:?} Retry-After {:?}",
        a.status,
        a.code(),
        a.retry_after
    );
    assert_eq!(a.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(a.code().as_deref(), Some("provider_rate_limited"));
    assert!(
        a.retry_after.is_some_and(|s| (1..=30).contains(&s)),
        "{:?}",
        a.retry_after
    );
    assert_eq!(
        openai.calls() + anthropic.calls(),
        calls,
        "nothing was sent"
    );
    Ok(())
}

/// The CRM: its bulkhead of 1 full, then its breaker open.
async fn check_crm(
    client: &HttpClient,
    backend: SocketAddr,
    crm: &FakeCrm,
) -> Result<(), BoxError> {
    let a = get_path(client, backend, "/crm/contact").await?;
    assert_eq!(a.status, StatusCode::OK);

    // One call held inside the CRM takes the bulkhead's only permit: a
    // second is refused at once.
    crm.mode.store(CRM_HOLD, Ordering::SeqCst);
    let held = {
        let client = client.clone();
        tokio::spawn(async move { get_path(&client, backend, "/crm/contact").await })
    };
    crm.arrived.notified().await;
    let a = get_path(client, backend, "/crm/contact").await?;
    println!(
        "crm: bulkhead full: {} {:?} Retry-After {:?}",
        a.status,
        a.code(),
        a.retry_after
    );
    assert_eq!(a.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(a.code().as_deref(), Some("bulkhead_full"));
    assert_eq!(a.retry_after, Some(1));
    crm.mode.store(CRM_UP, Ordering::SeqCst);
    crm.release.notify_one();
    assert_eq!(held.await??.status, StatusCode::OK);

    // The CRM goes down: two failures in a row (its threshold; no
    // retries) open its breaker, and the third call is refused unsent.
    crm.mode.store(CRM_DOWN, Ordering::SeqCst);
    for _ in 0..2 {
        let a = get_path(client, backend, "/crm/contact").await?;
        assert_eq!(a.status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(a.code(), None, "the CRM's own answer");
    }
    let calls = crm.calls.load(Ordering::SeqCst);
    let a = get_path(client, backend, "/crm/contact").await?;
    println!(
        "crm: breaker open: {} {:?} Retry-After {:?}",
        a.status,
        a.code(),
        a.retry_after
    );
    assert_eq!(a.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(a.code().as_deref(), Some("circuit_open"));
    assert!(
        a.retry_after.is_some_and(|s| (1..=30).contains(&s)),
        "{:?}",
        a.retry_after
    );
    assert_eq!(crm.calls.load(Ordering::SeqCst), calls, "nothing was sent");
    Ok(())
}

async fn self_test(config_path: &str) -> Result<(), BoxError> {
    let (llm_config, crm_config) = load_config(config_path)?;
    let (openai_addr, openai) = fake_provider("/v1/chat/completions", OPENAI_429).await?;
    let (anthropic_addr, anthropic) = fake_provider("/v1/messages", ANTHROPIC_429).await?;
    let crm = FakeCrm::default();
    let crm_addr = serve(
        Router::new()
            .route("/contact", get(crm_contact))
            .with_state(crm.clone()),
    )
    .await?;

    let client: HttpClient = Client::builder(TokioExecutor::new()).build_http();
    let (llm, llm_health) = llm_stack(&llm_config, &client, openai_addr, anthropic_addr)?;
    let (crm_service, crm_health) = crm_stack(&crm_config, &client, crm_addr)?;
    let health = HealthGroup::new()
        .with("llm", llm_health)
        .with("crm", crm_health);
    let app = Router::new()
        .route("/v1/chat", post(chat))
        .route("/crm/contact", get(contact))
        .route("/health/providers", get(health_handler(health)))
        .with_state(App {
            llm,
            crm: crm_service,
        });
    let backend = serve(app).await?;
    println!("config {config_path}; backend on {backend}");

    check_llm(&client, backend, &openai, &anthropic).await?;
    check_crm(&client, backend, &crm).await?;

    let a = get_path(&client, backend, "/health/providers").await?;
    assert_eq!(a.status, StatusCode::OK);
    let json: serde_json::Value = serde_json::from_slice(&a.body)?;
    println!(
        "GET /health/providers:\n{}",
        serde_json::to_string_pretty(&json)?
    );
    let states: Vec<_> = json["llm"]["targets"]
        .as_array()
        .ok_or("no llm targets")?
        .iter()
        .map(|t| t["state"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(states, ["throttled", "throttled", "throttled"]);
    let crm_open = json["crm"]["scopes"]
        .as_array()
        .ok_or("no crm scopes")?
        .iter()
        .any(|s| s["mechanism"] == "breaker" && s["state"] == "open");
    assert!(crm_open, "the CRM's breaker reads open");
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let default = concat!(env!("CARGO_MANIFEST_DIR"), "/config/levee.toml");
    let path = std::env::args()
        .nth(1)
        .unwrap_or_else(|| default.to_owned());
    tokio::time::timeout(Duration::from_secs(30), self_test(&path))
        .await
        .map_err(|_| "the self-test did not finish in 30 s")??;
    println!("ok");
    Ok(())
}
