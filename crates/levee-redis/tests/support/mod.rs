//! Replicas of one service, each a full breaker layer over its own scripted
//! upstream, sharing nothing but a fleet store.

#![allow(dead_code, unreachable_pub)]

pub mod redis_server;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::{Request, Response};
use http_body_util::BodyExt;
use levee_redis::{BreakerPolicy, Fleet, FleetBuilder, FleetHandle, Store};
use tower::{BoxError, ServiceBuilder, ServiceExt};
use tower_levee::breaker::{BreakerHandle, BreakerLayer, RequestHead};

/// The account every replica calls; with no model named it is the failure
/// domain, the quota scope and the billing scope.
pub const ACCOUNT: &str = "api.openai.com";

pub const INSUFFICIENT_QUOTA: &str = r#"{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","code":"insufficient_quota"}}"#;

/// What an upstream answers: status, headers, body.
#[derive(Clone)]
pub struct Answer(pub u16, pub Vec<(&'static str, String)>, pub String);

impl Answer {
    pub fn ok() -> Self {
        Answer(200, vec![], r#"{"id":"chatcmpl-1"}"#.into())
    }
    pub fn throttled(secs: u64) -> Self {
        Answer(
            429,
            vec![("retry-after", secs.to_string())],
            r#"{"error":{"code":"rate_limit_exceeded"}}"#.into(),
        )
    }
    pub fn status(code: u16) -> Self {
        Answer(code, vec![], String::new())
    }
}

pub struct Replica {
    pub id: String,
    pub handle: BreakerHandle,
    pub fleet: FleetHandle,
    layer: BreakerLayer,
    answer: Arc<Mutex<Answer>>,
    delay: Arc<Mutex<Duration>>,
    calls: Arc<AtomicUsize>,
}

impl Replica {
    pub fn new<S: Store>(store: S, id: &str, policy: BreakerPolicy) -> Self {
        Self::with(store, id, |fleet| fleet.policy(policy))
    }

    /// A replica whose fleet `configure` sets up (namespace and id given).
    pub fn with<S: Store>(
        store: S,
        id: &str,
        configure: impl FnOnce(FleetBuilder) -> FleetBuilder,
    ) -> Self {
        let layer = BreakerLayer::new();
        let handle = layer.handle();
        let fleet = configure(Fleet::builder().namespace("test").replica(id))
            .attach(&handle)
            .spawn(store)
            .unwrap();
        Replica {
            id: id.into(),
            handle,
            fleet,
            layer,
            answer: Arc::new(Mutex::new(Answer::ok())),
            delay: Arc::new(Mutex::new(Duration::ZERO)),
            calls: Arc::new(AtomicUsize::new(0)),
        }
    }

    pub fn answer(&self, answer: Answer) {
        *self.answer.lock().unwrap() = answer;
    }

    /// How long the upstream takes to answer from now on.
    pub fn delay(&self, delay: Duration) {
        *self.delay.lock().unwrap() = delay;
    }

    /// Upstream calls made so far.
    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    /// One call through the layer, its body read to the end: the status
    /// the caller saw, or the error.
    pub async fn call(&self) -> Result<u16, BoxError> {
        let answer = self.answer.clone();
        let calls = self.calls.clone();
        let delay = *self.delay.lock().unwrap();
        let upstream = tower::service_fn(move |_req: Request<String>| {
            calls.fetch_add(1, Ordering::SeqCst);
            let Answer(status, headers, body) = answer.lock().unwrap().clone();
            async move {
                if !delay.is_zero() {
                    tokio::time::sleep(delay).await;
                }
                let mut res = Response::builder().status(status);
                for (k, v) in headers {
                    res = res.header(k, v);
                }
                Ok::<_, BoxError>(res.body(body).unwrap())
            }
        });
        let svc = ServiceBuilder::new()
            .layer(self.layer.clone())
            .service(upstream);
        let res = svc.oneshot(request()).await?;
        let status = res.status().as_u16();
        res.into_body().collect().await?;
        Ok(status)
    }

    /// Five 503s in a row: the breaker opens (its default threshold).
    pub async fn trip(&self) {
        self.answer(Answer::status(503));
        for _ in 0..5 {
            self.call().await.unwrap();
        }
        let refused = self.refuses().expect("open");
        assert!(
            refused.is::<tower_levee::breaker::CircuitOpen>(),
            "{refused}"
        );
    }

    /// Whether the layer would refuse a call now, and why.
    pub fn refuses(&self) -> Option<BoxError> {
        self.handle.admits(&RequestHead::of(&request())).err()
    }
}

pub fn request() -> Request<String> {
    Request::post("https://api.openai.com/v1/chat/completions")
        .body(String::new())
        .unwrap()
}

/// Whether `store` holds no decision, streak or lease (the replicas'
/// heartbeats aside).
pub fn holds_no_decision(store: &levee_redis::MemoryStore) -> bool {
    store.keys().iter().all(|k| k.contains(":s:member:"))
}

/// Lets the fleets' tasks run (paused time advances by `ms`).
pub async fn settle(ms: u64) {
    tokio::time::sleep(Duration::from_millis(ms)).await;
}

/// Waits (in real time, at most `secs`) until `done` holds; whether it did.
pub async fn eventually(secs: u64, mut done: impl FnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    while !done() {
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    true
}
