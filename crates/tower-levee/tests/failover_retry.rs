//! The retry layer over a failover: the one rejection it waits out is a
//! `NoTargetAvailable` whose targets are all only throttled, at the earliest
//! reopen, when that fits the deadline.

mod failover_support;

use std::sync::Arc;
use std::time::Duration;

use http::StatusCode;
use tokio::time::Instant;
use tower::{Service, ServiceBuilder, ServiceExt};
use tower_levee::failover::{Failover, NoTargetAvailable, Target};
use tower_levee::retry::{RetryBudget, RetryBudgetLayer};

use failover_support::{Reply1, Scripted, TestClassifier, breaker, req, response};

const PARK: Duration = Duration::from_secs(600);

/// Answers 429 (with `retry-after: secs`) the first time, 200 after.
fn throttled_once(secs: &'static str) -> Scripted {
    let first = Arc::new(std::sync::atomic::AtomicBool::new(true));
    Scripted::new(move |_| {
        if first.swap(false, std::sync::atomic::Ordering::SeqCst) {
            Reply1::Now(response(429, Some(secs), ""))
        } else {
            Reply1::Now(response(200, None, "{}"))
        }
    })
}

fn two_targets(
    a: &Scripted,
    gate_a: Duration,
    b: &Scripted,
    gate_b: Duration,
) -> Failover<String, String, Scripted, TestClassifier> {
    let t = |name: &'static str, s: &Scripted, gate| -> Target<Scripted, String, TestClassifier> {
        Target::new(name, s.clone()).breaker(breaker(gate, PARK))
    };
    Failover::builder()
        .target(t("a", a, gate_a))
        .target(t("b", b, gate_b))
        .build()
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_no_target_available_of_only_throttled_targets_is_retried_at_the_earliest_reopen() {
    let (a, b) = (throttled_once("8"), throttled_once("3"));
    let mut failover = two_targets(&a, Duration::from_secs(8), &b, Duration::from_secs(3));
    // Gate both: a then b answer 429.
    let res = failover.ready().await.unwrap().call(req()).await.unwrap();
    assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);

    let budget = Arc::new(RetryBudget::default());
    let mut svc = ServiceBuilder::new()
        .layer(
            RetryBudgetLayer::builder(budget.clone())
                .timeout(Duration::from_secs(30))
                .build()
                .unwrap(),
        )
        .service(failover);
    let start = Instant::now();
    let res = svc.ready().await.unwrap().call(req()).await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    // Waited for b's reopen (3 s), the earliest, not a's (8 s); never
    // earlier, and at most a quarter later (the spread that keeps the
    // callers waiting on one reopen from arriving together).
    let waited = start.elapsed();
    assert!(waited >= Duration::from_secs(3), "{waited:?}");
    assert!(waited <= Duration::from_millis(3_751), "{waited:?}");
    assert_eq!((a.calls(), b.calls()), (1, 2));
    assert_eq!(budget.snapshot().retries, 1, "the wait cost a budget token");
}

#[tokio::test(start_paused = true)]
async fn a_no_target_available_with_an_open_breaker_is_returned_at_once() {
    let (a, b) = (throttled_once("3"), Scripted::ok());
    let failover = two_targets(&a, Duration::from_secs(3), &b, Duration::from_secs(3));
    let handle = failover.handle();
    let mut svc = ServiceBuilder::new()
        .layer(
            RetryBudgetLayer::builder(Default::default())
                .timeout(Duration::from_secs(30))
                .build()
                .unwrap(),
        )
        .service(failover);
    svc.ready().await.unwrap().call(req()).await.unwrap(); // a gated, b served
    handle.breaker("b").unwrap().open("api.example.com");
    let start = Instant::now();
    let err = svc.ready().await.unwrap().call(req()).await.unwrap_err();
    let none = err.downcast_ref::<NoTargetAvailable>().expect("typed");
    assert!(!none.all_throttled());
    assert_eq!(
        start.elapsed(),
        Duration::ZERO,
        "no wait for a reopen that is not known to come"
    );
}

#[tokio::test(start_paused = true)]
async fn a_reopen_past_the_deadline_is_not_waited_for() {
    let (a, b) = (throttled_once("8"), throttled_once("8"));
    let mut failover = two_targets(&a, Duration::from_secs(8), &b, Duration::from_secs(8));
    failover.ready().await.unwrap().call(req()).await.unwrap();
    let mut svc = ServiceBuilder::new()
        .layer(
            RetryBudgetLayer::builder(Default::default())
                .timeout(Duration::from_secs(5))
                .build()
                .unwrap(),
        )
        .service(failover);
    let start = Instant::now();
    let err = svc.ready().await.unwrap().call(req()).await.unwrap_err();
    let none = err.downcast_ref::<NoTargetAvailable>().expect("typed");
    assert!(none.all_throttled());
    assert_eq!(none.retry_after(), Duration::from_secs(8));
    assert_eq!(start.elapsed(), Duration::ZERO);
    assert_eq!((a.calls(), b.calls()), (1, 1));
}
