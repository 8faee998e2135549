//! Pacing through the breaker layer: a quota scope whose limit reaches its
//! reserve is refused unsent with `Throttled` (reason `paced`) until enough
//! has refilled, then admits again with no probe; its breaker never counts.

use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::{Request, Response};
use levee_core::breaker::BreakerStatus;
use levee_core::pace::PaceConfig;
use tower::{Service, ServiceExt};
use tower_layer::Layer;
use tower_levee::BreakerLayer;
use tower_levee::breaker::{ScopeEvent, Throttled};

async fn send<S: Service<R>, R>(svc: &mut S, req: R) -> Result<S::Response, S::Error> {
    svc.ready().await?.call(req).await
}

/// A provider with a 60-request limit that refills over a minute, as
/// OpenAI reports it: every answer says what is left and when it is whole.
#[derive(Clone, Default)]
struct Provider {
    sent: Arc<AtomicU64>,
}

impl Provider {
    fn service(
        &self,
    ) -> impl Service<Request<String>, Response = Response<String>, Error = Infallible, Future: Send>
    + Clone {
        let sent = self.sent.clone();
        tower::service_fn(move |_req: Request<String>| {
            let n = sent.fetch_add(1, Ordering::SeqCst) + 1;
            let remaining = 60u64.saturating_sub(n);
            // Refills at one a second: whole again after what is missing.
            let reset = format!("{}s", 60 - remaining);
            async move {
                Ok::<_, Infallible>(
                    Response::builder()
                        .header("x-ratelimit-limit-requests", "60")
                        .header("x-ratelimit-remaining-requests", remaining.to_string())
                        .header("x-ratelimit-reset-requests", reset)
                        .body("{}".to_owned())
                        .unwrap(),
                )
            }
        })
    }
}

fn call() -> Request<String> {
    Request::post("https://api.openai.com/v1/chat/completions")
        .body(String::new())
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_scope_at_its_reserve_is_refused_unsent_until_one_request_has_refilled() {
    let provider = Provider::default();
    let events = Arc::new(Mutex::new(Vec::new()));
    let seen = events.clone();
    let layer = BreakerLayer::builder()
        .on_event(move |e: &ScopeEvent| seen.lock().unwrap().push(e.reason().to_owned()))
        .build()
        .unwrap();
    let handle = layer.handle();
    let mut svc = layer.layer(provider.service());
    // The reserve is 2% of 60: one request. The 59th answer leaves one.
    for _ in 0..59 {
        send(&mut svc, call()).await.unwrap();
    }
    let refused = send(&mut svc, call()).await.unwrap_err();
    let throttled = refused
        .downcast_ref::<Throttled>()
        .expect("paced: Throttled");
    assert_eq!(throttled.retry_after(), Duration::from_secs(1));
    assert_eq!(provider.sent.load(Ordering::SeqCst), 59, "refused unsent");
    let reasons = events.lock().unwrap().clone();
    assert!(
        reasons
            .iter()
            .any(|r| r.starts_with("paced for 1s (requests")),
        "{reasons:?}"
    );
    // Never the breaker's business.
    assert_eq!(
        handle.breaker_status("api.openai.com"),
        Some(BreakerStatus::Closed)
    );
    // A second later one request is back: the gate reopens with no probe.
    tokio::time::advance(Duration::from_secs(1)).await;
    send(&mut svc, call()).await.expect("admitted again");
    assert_eq!(provider.sent.load(Ordering::SeqCst), 60);
}

#[tokio::test(start_paused = true)]
async fn with_pacing_off_the_layer_sends_until_the_provider_says_429() {
    let provider = Provider::default();
    let layer = BreakerLayer::builder()
        .pace(PaceConfig {
            enabled: false,
            ..PaceConfig::default()
        })
        .build()
        .unwrap();
    let mut svc = layer.layer(provider.service());
    for _ in 0..60 {
        send(&mut svc, call()).await.unwrap();
    }
    assert_eq!(provider.sent.load(Ordering::SeqCst), 60);
}

#[tokio::test(start_paused = true)]
async fn a_scope_far_from_its_limits_is_never_recorded() {
    let provider = Provider::default();
    let layer = BreakerLayer::builder().build().unwrap();
    let handle = layer.handle();
    let mut svc = layer.layer(provider.service());
    // 20 of 60 used: under half, no lock taken, nothing tracked.
    for _ in 0..20 {
        send(&mut svc, call()).await.unwrap();
    }
    assert!(
        handle.states().iter().all(|s| s.mechanism != "gate"),
        "{:?}",
        handle.states()
    );
    // Past half, the scope's allowance is recorded, and shown.
    for _ in 0..15 {
        send(&mut svc, call()).await.unwrap();
    }
    let states = handle.states();
    let gate = states
        .iter()
        .find(|s| s.mechanism == "gate")
        .expect("recorded");
    let left = &gate.remaining[0];
    assert_eq!(
        (left.dimension, left.remaining, left.limit),
        ("requests", 25, Some(60))
    );
    assert_eq!(left.reset, Some(Duration::from_secs(35)));
    assert_eq!(gate.closings.map(|c| (c.throttled, c.paced)), Some((0, 0)));
}
