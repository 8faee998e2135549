//! The `levee.retry` and `levee.failover` spans: one per call, with the
//! target, attempt and verdict, never a secret; and none at all when the
//! level is disabled.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use http::{Request, Response};
use tower::{BoxError, Service, ServiceBuilder, ServiceExt};
use tower_levee::failover::{Failover, Target};
use tower_levee::retry::RetryBudgetLayer;
use tracing::level_filters::LevelFilter;

const BEARER: &str = "sk-SECRET-proj-0123456789abcdef";
const API_KEY: &str = "sk-ant-SECRET-api03-fedcba9876543210";
const USERINFO: &str = "sk-SECRET-userinfo-42";

// === a subscriber that keeps every span's fields, and every event ===

#[derive(Debug)]
struct Span {
    name: &'static str,
    metadata: &'static tracing::Metadata<'static>,
    fields: BTreeMap<&'static str, String>,
}

#[derive(Clone)]
struct Capture {
    level: LevelFilter,
    spans: Arc<Mutex<BTreeMap<u64, Span>>>,
    events: Arc<Mutex<String>>,
    ids: Arc<AtomicU64>,
    /// Entered spans, innermost last (the tests run on one thread).
    entered: Arc<Mutex<Vec<u64>>>,
}

impl Capture {
    fn new(level: LevelFilter) -> Self {
        Capture {
            level,
            spans: Arc::default(),
            events: Arc::default(),
            ids: Arc::default(),
            entered: Arc::default(),
        }
    }

    /// The spans named `name`, in creation order, as their fields.
    fn spans(&self, name: &str) -> Vec<BTreeMap<&'static str, String>> {
        let spans = self.spans.lock().unwrap();
        spans
            .values()
            .filter(|s| s.name == name)
            .map(|s| s.fields.clone())
            .collect()
    }

    /// Every span field and event, as text.
    fn text(&self) -> String {
        let mut out = self.events.lock().unwrap().clone();
        for s in self.spans.lock().unwrap().values() {
            let _ = writeln!(out, "{} {:?}", s.name, s.fields);
        }
        out
    }
}

struct Fields<'a>(&'a mut BTreeMap<&'static str, String>);

impl tracing::field::Visit for Fields<'_> {
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        self.0.insert(field.name(), value.to_owned());
    }

    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name(), format!("{value:?}"));
    }
}

impl tracing::Subscriber for Capture {
    fn enabled(&self, metadata: &tracing::Metadata<'_>) -> bool {
        self.level >= *metadata.level()
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        Some(self.level)
    }

    fn new_span(&self, attrs: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        let id = self.ids.fetch_add(1, Ordering::Relaxed) + 1;
        let mut span = Span {
            name: attrs.metadata().name(),
            metadata: attrs.metadata(),
            fields: BTreeMap::new(),
        };
        attrs.record(&mut Fields(&mut span.fields));
        self.spans.lock().unwrap().insert(id, span);
        tracing::span::Id::from_u64(id)
    }

    fn record(&self, id: &tracing::span::Id, values: &tracing::span::Record<'_>) {
        let mut spans = self.spans.lock().unwrap();
        let span = spans.get_mut(&id.into_u64()).expect("a known span");
        values.record(&mut Fields(&mut span.fields));
    }

    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}

    fn event(&self, event: &tracing::Event<'_>) {
        let mut fields = BTreeMap::new();
        event.record(&mut Fields(&mut fields));
        let _ = writeln!(self.events.lock().unwrap(), "{fields:?}");
    }

    fn enter(&self, id: &tracing::span::Id) {
        self.entered.lock().unwrap().push(id.into_u64());
    }

    fn exit(&self, id: &tracing::span::Id) {
        let mut entered = self.entered.lock().unwrap();
        if let Some(at) = entered.iter().rposition(|e| *e == id.into_u64()) {
            entered.remove(at);
        }
    }

    fn current_span(&self) -> tracing_core::span::Current {
        let Some(id) = self.entered.lock().unwrap().last().copied() else {
            return tracing_core::span::Current::none();
        };
        let spans = self.spans.lock().unwrap();
        match spans.get(&id) {
            Some(span) => {
                tracing_core::span::Current::new(tracing::span::Id::from_u64(id), span.metadata)
            }
            None => tracing_core::span::Current::none(),
        }
    }
}

// === services ===

/// Answers 503 (echoing the key, as some providers do) while `down`, else 200.
#[derive(Clone)]
struct Provider {
    down: Arc<AtomicBool>,
}

impl Provider {
    fn new(down: bool) -> Self {
        Provider {
            down: Arc::new(AtomicBool::new(down)),
        }
    }
}

impl Service<Request<String>> for Provider {
    type Response = Response<String>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Response<String>, BoxError>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<String>) -> Self::Future {
        let (status, body) = if self.down.swap(false, Ordering::SeqCst) {
            let key = req.headers().get("x-api-key").unwrap().to_str().unwrap();
            (503, format!("upstream error for key {key}"))
        } else {
            (200, "{}".to_owned())
        };
        let res = Response::builder().status(status).body(body).unwrap();
        Box::pin(async move { Ok(res) })
    }
}

fn request() -> Request<String> {
    Request::post(format!(
        "https://org:{USERINFO}@api.example.com/v1/chat/completions"
    ))
    .header("authorization", format!("Bearer {BEARER}"))
    .header("x-api-key", API_KEY)
    .body(String::new())
    .unwrap()
}

fn failover(primary_down: bool) -> Failover<String, String, Provider> {
    Failover::builder()
        .target(Target::new("primary", Provider::new(primary_down)))
        .target(Target::new("backup", Provider::new(false)))
        .build()
        .unwrap()
}

// === tests ===

#[tokio::test(start_paused = true)]
async fn each_call_gets_a_span_with_target_attempt_and_verdict() {
    let capture = Capture::new(LevelFilter::DEBUG);
    let _guard = tracing::subscriber::set_default(capture.clone());

    // Retry → Failover: the primary fails once, the backup serves.
    let mut client = ServiceBuilder::new()
        .layer(RetryBudgetLayer::with_defaults())
        .service(failover(true));
    let res = client.ready().await.unwrap().call(request()).await.unwrap();
    assert_eq!(res.status(), 200);

    let retry = capture.spans("levee.retry");
    assert_eq!(retry.len(), 1);
    // The failover's span, inside the retry's, names the target; the
    // retry's does too when `ServedBy` is also an extension (below).
    assert!(!retry[0].contains_key("target"), "{:?}", retry[0]);
    assert_eq!(retry[0]["attempt"], "1");
    assert_eq!(retry[0]["verdict"], "success");
    let failover_spans = capture.spans("levee.failover");
    assert_eq!(failover_spans.len(), 1);
    assert_eq!(failover_spans[0]["target"], "backup");
    // The breaker names the scope it admitted (the authority, no userinfo).
    assert_eq!(failover_spans[0]["scope"], "api.example.com");
    assert_eq!(failover_spans[0]["attempt"], "2");
    assert_eq!(failover_spans[0]["verdict"], "success");

    // Retry alone over a provider that fails once: two attempts, one span.
    let mut client = ServiceBuilder::new()
        .layer(RetryBudgetLayer::with_defaults())
        .service(Provider::new(true));
    let res = client.ready().await.unwrap().call(request()).await.unwrap();
    assert_eq!(res.status(), 200);
    let retry = capture.spans("levee.retry");
    assert_eq!(retry.len(), 2);
    assert_eq!(retry[1]["attempt"], "2");
    assert_eq!(retry[1]["verdict"], "success");
    assert!(!retry[1].contains_key("target"));

    // A failure's verdict: a failover whose only target keeps failing.
    let mut single = Failover::builder()
        .target(Target::new("only", Provider::new(true)))
        .build()
        .unwrap();
    let res = single.ready().await.unwrap().call(request()).await.unwrap();
    assert_eq!(res.status(), 503);
    let failover_spans = capture.spans("levee.failover");
    assert_eq!(failover_spans[1]["target"], "only");
    assert_eq!(failover_spans[1]["verdict"], "availability");

    // With `ServedBy` an extension too, the retry's span names the target.
    let traced = Failover::builder()
        .target(Target::new("primary", Provider::new(true)))
        .target(Target::new("backup", Provider::new(false)))
        .served_by_extension(true)
        .build()
        .unwrap();
    let mut client = ServiceBuilder::new()
        .layer(RetryBudgetLayer::with_defaults())
        .service(traced);
    client.ready().await.unwrap().call(request()).await.unwrap();
    let retry = capture.spans("levee.retry");
    assert_eq!(retry.len(), 3);
    assert!(
        retry
            .iter()
            .any(|s| s.get("target").map(String::as_str) == Some("backup"))
    );

    // No key, in any form, in any span field or event.
    let text = capture.text();
    assert!(!text.contains("SECRET"), "a secret reached a span:\n{text}");
    assert!(!text.contains("org:"), "a userinfo reached a span:\n{text}");
}

#[tokio::test(start_paused = true)]
async fn with_debug_disabled_no_span_is_created() {
    let capture = Capture::new(LevelFilter::INFO);
    let _guard = tracing::subscriber::set_default(capture.clone());
    let mut client = ServiceBuilder::new()
        .layer(RetryBudgetLayer::with_defaults())
        .service(failover(true));
    let res = client.ready().await.unwrap().call(request()).await.unwrap();
    assert_eq!(res.status(), 200);
    assert!(capture.spans.lock().unwrap().is_empty());
}
