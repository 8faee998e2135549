//! Pacing through the breaker layer: a quota scope whose limit reaches its
//! reserve is refused unsent with `Throttled` (reason `paced`) until enough
//! has refilled, then admits again with no probe; its breaker never counts.
//! Requests are spread at the provider's rate, a second of it at once.

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
use tower_levee::breaker::{Scope, ScopeEvent, Throttled};

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

/// Pacing on the reserve alone: a burst goes as long as the count allows.
fn unspread() -> PaceConfig {
    PaceConfig::builder().spread(false).build().unwrap()
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
        .pace(unspread())
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
        .pace(PaceConfig::builder().enabled(false).build().unwrap())
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
    let layer = BreakerLayer::builder().pace(unspread()).build().unwrap();
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
        (left.dimension.as_str(), left.remaining, left.limit),
        ("requests", 25, Some(60))
    );
    assert_eq!(left.reset, Some(Duration::from_secs(35)));
    assert_eq!(gate.closings.map(|c| (c.throttled, c.paced)), Some((0, 0)));
}

/// A provider that says its request limit is `limit` (a minute's, or with
/// `azure` ten seconds'), and counts what was sent.
fn limited(
    limit: u64,
    azure: bool,
    sent: Arc<AtomicU64>,
) -> impl Service<Request<String>, Response = Response<String>, Error = Infallible, Future: Send> + Clone
{
    tower::service_fn(move |_req: Request<String>| {
        let n = sent.fetch_add(1, Ordering::SeqCst) + 1;
        let mut res = Response::builder()
            .header("x-ratelimit-limit-requests", limit.to_string())
            .header(
                "x-ratelimit-remaining-requests",
                limit.saturating_sub(n).to_string(),
            )
            .header("x-ratelimit-reset-requests", "1s");
        if azure {
            res = res.header("apim-request-id", "7e1d");
        }
        let res = res.body("{}".to_owned()).unwrap();
        async move { Ok::<_, Infallible>(res) }
    })
}

/// Against a provider of ten requests a second: the first answer teaches the
/// rate, a second's worth then goes at once, and the next call is refused
/// unsent until 100 ms later.
async fn burst_of_ten_then_refused_for_100ms<S>(svc: &mut S, sent: &AtomicU64)
where
    S: Service<Request<String>, Error = tower_levee::BoxError>,
{
    assert!(send(svc, call()).await.is_ok());
    for _ in 0..10 {
        assert!(send(svc, call()).await.is_ok(), "within a second's worth");
    }
    let Err(refused) = send(svc, call()).await else {
        panic!("refused past a second's worth")
    };
    let throttled = refused.downcast_ref::<Throttled>().expect("Throttled");
    assert_eq!(throttled.retry_after(), Duration::from_millis(100));
    assert_eq!(sent.load(Ordering::SeqCst), 11, "refused unsent");
}

#[tokio::test(start_paused = true)]
async fn a_burst_past_a_second_of_the_providers_rate_is_refused_unsent_then_spread() {
    let sent = Arc::new(AtomicU64::new(0));
    let events = Arc::new(Mutex::new(Vec::new()));
    let seen = events.clone();
    let layer = BreakerLayer::builder()
        .on_event(move |e: &ScopeEvent| seen.lock().unwrap().push(e.reason().to_owned()))
        .build()
        .unwrap();
    let handle = layer.handle();
    // 600 a minute: ten a second, one every 100 ms.
    let mut svc = layer.layer(limited(600, false, sent.clone()));
    burst_of_ten_then_refused_for_100ms(&mut svc, &sent).await;
    let reasons = events.lock().unwrap().clone();
    assert!(
        reasons
            .iter()
            .any(|r| r == "paced for 100ms (requests spread at the provider's rate)"),
        "{reasons:?}"
    );
    // Then one every 100 ms, with no probe; the breaker never hears of it.
    for _ in 0..5 {
        tokio::time::advance(Duration::from_millis(100)).await;
        send(&mut svc, call()).await.expect("one more at the rate");
        assert!(send(&mut svc, call()).await.is_err(), "but not two");
    }
    assert_eq!(sent.load(Ordering::SeqCst), 16);
    assert_eq!(
        handle.breaker_status("api.openai.com"),
        Some(BreakerStatus::Closed)
    );
    let states = handle.states();
    let gate = states.iter().find(|s| s.mechanism == "gate").expect("gate");
    assert_eq!(gate.closings.map(|c| (c.throttled, c.paced)), Some((0, 6)));
}

#[tokio::test(start_paused = true)]
async fn azure_request_limits_count_ten_seconds_and_are_spread_over_them() {
    let sent = Arc::new(AtomicU64::new(0));
    let layer = BreakerLayer::builder().build().unwrap();
    // Azure's limit-requests is a sixth of the RPM, per ten seconds: 100
    // here is 600 a minute, ten a second, as above.
    let mut svc = layer.layer(limited(100, true, sent.clone()));
    burst_of_ten_then_refused_for_100ms(&mut svc, &sent).await;
}

#[tokio::test(start_paused = true)]
async fn with_spreading_off_a_burst_goes_as_far_as_the_reported_count() {
    let sent = Arc::new(AtomicU64::new(0));
    let layer = BreakerLayer::builder().pace(unspread()).build().unwrap();
    let mut svc = layer.layer(limited(600, false, sent.clone()));
    for _ in 0..100 {
        send(&mut svc, call()).await.expect("far from the reserve");
    }
    assert_eq!(sent.load(Ordering::SeqCst), 100);
}

#[tokio::test(start_paused = true)]
async fn calls_spaced_at_the_providers_rate_are_never_refused() {
    let sent = Arc::new(AtomicU64::new(0));
    let layer = BreakerLayer::builder().build().unwrap();
    let mut svc = layer.layer(limited(600, false, sent.clone()));
    for _ in 0..300 {
        send(&mut svc, call()).await.expect("at the rate");
        tokio::time::advance(Duration::from_millis(100)).await;
    }
    assert_eq!(sent.load(Ordering::SeqCst), 300);
}

#[tokio::test(start_paused = true)]
async fn one_models_rate_does_not_spread_another_models_calls() {
    let sent = Arc::new(AtomicU64::new(0));
    let layer = BreakerLayer::builder().build().unwrap();
    let mut svc = layer.layer(limited(600, false, sent.clone()));
    let call_for = |model: &'static str| {
        let mut req = call();
        req.extensions_mut().insert(Scope::new().model(model));
        req
    };
    // Model a's answers teach its rate, and a second's worth of it is sent.
    for _ in 0..11 {
        send(&mut svc, call_for("a")).await.unwrap();
    }
    assert!(send(&mut svc, call_for("a")).await.is_err(), "a is spread");
    // Model b has limits of its own: its calls go.
    assert!(send(&mut svc, call_for("b")).await.is_ok());
    assert_eq!(sent.load(Ordering::SeqCst), 12);
}

#[tokio::test(start_paused = true)]
async fn behind_the_retry_layer_a_burst_is_spread_not_refused() {
    use tower_levee::RetryBudgetLayer;
    let sent = Arc::new(AtomicU64::new(0));
    let breaker = BreakerLayer::builder().build().unwrap();
    let mut svc = tower::ServiceBuilder::new()
        .layer(RetryBudgetLayer::with_defaults())
        .layer(breaker)
        .service(limited(600, false, sent.clone()));
    // Thirteen calls at once against ten a second: the first eleven go, the
    // other two wait their places (a retry token each) instead of failing.
    let calls: Vec<_> = (0..13)
        .map(|_| {
            let mut svc = svc.clone();
            tokio::spawn(async move { svc.ready().await.unwrap().call(call()).await })
        })
        .collect();
    for c in calls {
        assert!(c.await.unwrap().is_ok());
    }
    assert_eq!(sent.load(Ordering::SeqCst), 13);
    let _ = svc.ready().await;
}
