//! Shared pieces of the failover tests: scripted targets and a classifier
//! that knows the one quota body the tests use.

#![allow(dead_code, unreachable_pub)]

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use http::{Request, Response, StatusCode};
use levee_core::classify::{
    Classification, Classify, ProviderClassifier, ResponseView, TransportFailure, Verdict,
};
use levee_core::gate::GateConfig;
use levee_core::park::ParkConfig;
use tower::{BoxError, Service};
use tower_levee::breaker::{BreakerLayer, ScopeEvent};

pub type Reply = Arc<dyn Fn(&Request<String>) -> Reply1 + Send + Sync>;

/// One scripted answer: a response now, a response after a delay, an
/// error, or never.
pub enum Reply1 {
    Now(Response<String>),
    After(Duration, Response<String>),
    Error(BoxError),
    Hang,
}

/// A target's inner service: counts its calls, remembers the URIs it saw,
/// answers with a script.
#[derive(Clone)]
pub struct Scripted {
    pub calls: Arc<AtomicUsize>,
    pub uris: Arc<Mutex<Vec<String>>>,
    reply: Reply,
}

impl Scripted {
    pub fn new(reply: impl Fn(&Request<String>) -> Reply1 + Send + Sync + 'static) -> Self {
        Scripted {
            calls: Arc::new(AtomicUsize::new(0)),
            uris: Arc::new(Mutex::new(Vec::new())),
            reply: Arc::new(reply),
        }
    }

    /// Always answers `status`, with `retry-after` when given (and a body
    /// on a success: an empty one is a failure of its own).
    pub fn status(status: u16, retry_after: Option<&'static str>) -> Self {
        let body = if (200..300).contains(&status) {
            "{}"
        } else {
            ""
        };
        Scripted::new(move |_| Reply1::Now(response(status, retry_after, body)))
    }

    pub fn ok() -> Self {
        Scripted::status(200, None)
    }

    pub fn hang() -> Self {
        Scripted::new(|_| Reply1::Hang)
    }

    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

pub fn response(status: u16, retry_after: Option<&str>, body: &str) -> Response<String> {
    let mut b = Response::builder().status(StatusCode::from_u16(status).unwrap());
    if let Some(r) = retry_after {
        b = b.header("retry-after", r);
    }
    b.body(body.to_owned()).unwrap()
}

/// The body the [`TestClassifier`] reads as an exhausted quota.
pub const QUOTA_BODY: &str = r#"{"error":{"code":"insufficient_quota"}}"#;

impl Service<Request<String>> for Scripted {
    type Response = Response<String>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Response<String>, BoxError>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<String>) -> Self::Future {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.uris.lock().unwrap().push(req.uri().to_string());
        match (self.reply)(&req) {
            Reply1::Now(r) => Box::pin(async move { Ok(r) }),
            Reply1::After(d, r) => Box::pin(async move {
                tokio::time::sleep(d).await;
                Ok(r)
            }),
            Reply1::Error(e) => Box::pin(async move { Err(e) }),
            Reply1::Hang => Box::pin(std::future::pending()),
        }
    }
}

/// The provider classifier, plus: a body naming `insufficient_quota` is a
/// quota verdict (the real dialects land with the classifier work; the
/// tests must not depend on them).
#[derive(Clone, Debug, Default)]
pub struct TestClassifier(ProviderClassifier);

impl Classify for TestClassifier {
    fn classify_response(&self, r: &ResponseView<'_>) -> Classification {
        if r.body.windows(18).any(|w| w == b"insufficient_quota") {
            return Classification::new(Verdict::Quota, "test:insufficient_quota");
        }
        self.0.classify_response(r)
    }

    fn classify_transport(&self, f: TransportFailure) -> Classification {
        self.0.classify_transport(f)
    }
}

/// A breaker layer for one target: seeded, the test classifier, throttles
/// gated for exactly `gate` when the response carries no parsed hint (the
/// tests send `retry-after` with the same value), parks for `park`.
pub fn breaker(gate: Duration, park: Duration) -> BreakerLayer<TestClassifier> {
    BreakerLayer::builder()
        .seed(7)
        .classifier(TestClassifier::default())
        .gate(gate_config(gate))
        .park(ParkConfig::builder().default_park(park).build().unwrap())
        .build()
        .unwrap()
}

/// As [`breaker`], also recording every transition.
pub fn recorded_breaker(
    gate: Duration,
    log: Arc<Mutex<Vec<String>>>,
) -> BreakerLayer<TestClassifier> {
    BreakerLayer::builder()
        .seed(7)
        .classifier(TestClassifier::default())
        .gate(gate_config(gate))
        .on_event(move |e: &ScopeEvent| {
            log.lock().unwrap().push(format!(
                "{} {}->{}",
                e.mechanism().as_str(),
                e.from(),
                e.to()
            ))
        })
        .build()
        .unwrap()
}

fn gate_config(wait: Duration) -> GateConfig {
    GateConfig::builder()
        .default_wait(wait)
        .jitter(0.0)
        .build()
        .unwrap()
}

pub fn req() -> Request<String> {
    Request::post("https://api.example.com/v1/chat/completions")
        .body("{}".to_owned())
        .unwrap()
}
