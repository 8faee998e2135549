//! How long the retry layer waits, and when it refuses to: provider hints,
//! backoff, deadlines. All in paused tokio time; timings are read from
//! `tokio::time::Instant`, never from a wall clock.

use std::sync::Arc;
use std::time::Duration;

use http::{Request, StatusCode};
use levee_core::classify::{Classification, Verdict};
use tokio::time::Instant;
use tokio_test::{assert_pending, assert_ready, task};
use tower::{Service, ServiceExt};
use tower_layer::Layer;
use tower_levee::retry::{Deadline, RetryBudget, RetryBudgetLayer, RetryOutcome, Stop};

mod scripted;

/// A provider answering each call with the next status of its script (the
/// last one repeats), tagged with the verdict the breaker layer would put on it.
type Provider = scripted::Provider<(StatusCode, Option<Classification>)>;

fn throttled(wait: Duration) -> (StatusCode, Option<Classification>) {
    let c = Classification::new(Verdict::Throttled, "test:rate_limited").with_wait(Some(wait));
    (StatusCode::TOO_MANY_REQUESTS, Some(c))
}

fn ok() -> (StatusCode, Option<Classification>) {
    (StatusCode::OK, Some(Classification::success()))
}

#[tokio::test(start_paused = true)]
async fn a_429_with_a_2s_hint_is_retried_once_after_at_least_2s_never_sooner() {
    let provider = Provider::new(vec![throttled(Duration::from_secs(2)), ok()]);
    let mut svc = RetryBudgetLayer::with_defaults().layer(provider.clone());
    let start = Instant::now();
    let mut fut = task::spawn(svc.ready().await.unwrap().call(Request::new(String::new())));

    assert_pending!(fut.poll());
    tokio::time::advance(Duration::from_millis(1999)).await;
    assert_pending!(fut.poll());
    assert_eq!(provider.calls().len(), 1, "not retried before the hint");

    tokio::time::advance(Duration::from_millis(1)).await;
    let response = assert_ready!(fut.poll()).unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let calls = provider.calls();
    assert_eq!(calls.len(), 2, "retried exactly once");
    assert!(calls[1] - calls[0] >= Duration::from_secs(2));
    assert!(calls[0] == start);
}

#[tokio::test(start_paused = true)]
async fn a_fractional_hint_is_rounded_up_never_early() {
    let provider = Provider::new(vec![throttled(Duration::from_micros(1_200_300)), ok()]);
    let svc = RetryBudgetLayer::with_defaults().layer(provider.clone());
    svc.oneshot(Request::new(String::new())).await.unwrap();
    let calls = provider.calls();
    assert_eq!(calls.len(), 2);
    assert!(calls[1] - calls[0] >= Duration::from_micros(1_200_300));
}

#[tokio::test(start_paused = true)]
async fn a_429_with_a_600s_hint_under_a_30s_deadline_is_returned_not_slept_on() {
    let provider = Provider::new(vec![throttled(Duration::from_secs(600)), ok()]);
    let budget = Arc::new(RetryBudget::default());
    let svc = RetryBudgetLayer::builder(budget.clone())
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap()
        .layer(provider.clone());
    let start = Instant::now();
    let response = svc.oneshot(Request::new(String::new())).await.unwrap();

    assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(
        Instant::now(),
        start,
        "no time passed: nothing was slept on"
    );
    assert_eq!(provider.calls().len(), 1);
    let outcome = response.extensions().get::<RetryOutcome>().unwrap();
    assert_eq!((outcome.attempts, outcome.stop), (1, Stop::Deadline));
    assert_eq!(
        budget.snapshot().retries,
        0,
        "no token spent on a retry that did not happen"
    );
}

#[tokio::test(start_paused = true)]
async fn a_deadline_request_extension_is_honoured_like_the_layer_timeout() {
    let hint = throttled(Duration::from_secs(20));
    let provider = Provider::new(vec![hint.clone(), hint, ok()]);
    let svc = RetryBudgetLayer::with_defaults().layer(provider.clone());
    let mut request = Request::new(String::new());
    request
        .extensions_mut()
        .insert(Deadline(Instant::now() + Duration::from_secs(10)));
    let response = svc.clone().oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(provider.calls().len(), 1);

    // The same hint fits a later deadline: waited out, then retried.
    let mut request = Request::new(String::new());
    request
        .extensions_mut()
        .insert(Deadline(Instant::now() + Duration::from_secs(25)));
    let response = svc.oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(provider.calls().len(), 3);
}

#[tokio::test(start_paused = true)]
async fn a_hint_longer_than_max_wait_is_returned_even_without_a_deadline() {
    let provider = Provider::new(vec![throttled(Duration::from_secs(61)), ok()]);
    let svc = RetryBudgetLayer::with_defaults().layer(provider.clone());
    let response = svc.oneshot(Request::new(String::new())).await.unwrap();
    assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(provider.calls().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn without_a_hint_backoff_grows_from_base_within_full_jitter_and_is_reproducible() {
    let run = |seed| async move {
        let unavailable = (StatusCode::SERVICE_UNAVAILABLE, None);
        let provider = Provider::new(vec![unavailable]);
        let svc = RetryBudgetLayer::builder(Arc::new(RetryBudget::default()))
            .max_attempts(5)
            .seed(seed)
            .build()
            .unwrap()
            .layer(provider.clone());
        let response = svc.oneshot(Request::new(String::new())).await.unwrap();
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        let outcome = response.extensions().get::<RetryOutcome>().unwrap();
        assert_eq!((outcome.attempts, outcome.stop), (5, Stop::MaxAttempts));
        let calls = provider.calls();
        calls.windows(2).map(|w| w[1] - w[0]).collect::<Vec<_>>()
    };
    let gaps = run(7).await;
    assert_eq!(gaps.len(), 4);
    for (n, gap) in gaps.iter().enumerate() {
        // Before attempt n+2: up to 500 ms × 2ⁿ (ms-rounded by the timer).
        let ceiling = Duration::from_millis(500 << n) + Duration::from_millis(1);
        assert!(*gap <= ceiling, "gap {n} was {gap:?}");
    }
    assert_eq!(gaps, run(7).await, "same seed, same waits");
}
