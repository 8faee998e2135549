//! What the retry layer retries, and what it returns at once.

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use http::{Request, Response, StatusCode};
use levee_core::classify::{Classification, Verdict};
use tokio::time::Instant;
use tower::ServiceExt;
use tower_layer::Layer;
use tower_levee::BoxError;
use tower_levee::breaker::{CircuitOpen, Parked, Throttled};
use tower_levee::bulkhead::BulkheadFull;
use tower_levee::retry::{RetryBudget, RetryBudgetLayer, RetryOutcome, Stop};

/// A service that fails every call with `make()`, counting calls.
fn failing<F>(
    calls: Arc<AtomicUsize>,
    make: F,
) -> impl tower::Service<
    Request<String>,
    Response = Response<String>,
    Error = BoxError,
    Future = impl Future<Output = Result<Response<String>, BoxError>>,
> + Clone
where
    F: Fn() -> BoxError + Clone,
{
    tower::service_fn(move |_req: Request<String>| {
        calls.fetch_add(1, Ordering::SeqCst);
        let err = make();
        async move { Err::<Response<String>, _>(err) }
    })
}

/// A service answering every call with `status` and `classification`.
fn answering(
    calls: Arc<AtomicUsize>,
    status: StatusCode,
    classification: Option<Classification>,
) -> impl tower::Service<
    Request<String>,
    Response = Response<String>,
    Error = BoxError,
    Future = impl Future<Output = Result<Response<String>, BoxError>>,
> + Clone {
    tower::service_fn(move |_req: Request<String>| {
        calls.fetch_add(1, Ordering::SeqCst);
        let mut response = Response::builder()
            .status(status)
            .body(String::new())
            .unwrap();
        if let Some(c) = classification.clone() {
            response.extensions_mut().insert(c);
        }
        async move { Ok::<_, BoxError>(response) }
    })
}

#[tokio::test(start_paused = true)]
async fn levee_rejections_are_returned_at_once_and_the_inner_service_is_called_once() {
    type MakeError = fn() -> BoxError;
    let rejections: Vec<(&str, MakeError)> = vec![
        ("CircuitOpen", || {
            Box::new(CircuitOpen::new("api", Duration::from_secs(5)))
        }),
        ("Throttled", || {
            Box::new(Throttled::new("org/gpt", Duration::from_secs(2)))
        }),
        ("Parked", || {
            Box::new(Parked::new("org", Duration::from_secs(3600)))
        }),
        ("BulkheadFull", || Box::new(BulkheadFull::new("llm", 8))),
    ];
    for (name, make) in rejections {
        let calls = Arc::new(AtomicUsize::new(0));
        let budget = Arc::new(RetryBudget::default());
        let svc = RetryBudgetLayer::new(budget.clone()).layer(failing(calls.clone(), make));
        let start = Instant::now();
        let err = svc.oneshot(Request::new(String::new())).await.unwrap_err();
        assert_eq!(err.to_string(), make().to_string(), "{name} returned as is");
        assert_eq!(calls.load(Ordering::SeqCst), 1, "{name} not retried");
        assert_eq!(Instant::now(), start, "{name} not slept on");
        assert_eq!(budget.snapshot().retries, 0);
    }
}

#[tokio::test(start_paused = true)]
async fn transport_errors_are_availability_failures_and_are_retried() {
    let calls = Arc::new(AtomicUsize::new(0));
    let timed_out = || -> BoxError { Box::new(io::Error::from(io::ErrorKind::TimedOut)) };
    let svc = RetryBudgetLayer::with_defaults().layer(failing(calls.clone(), timed_out));
    let err = svc.oneshot(Request::new(String::new())).await.unwrap_err();
    assert_eq!(calls.load(Ordering::SeqCst), 3, "3 attempts in all");
    assert_eq!(
        err.downcast_ref::<io::Error>().unwrap().kind(),
        io::ErrorKind::TimedOut
    );
}

#[tokio::test(start_paused = true)]
async fn credential_quota_and_request_failures_are_never_retried() {
    for (verdict, status) in [
        (Verdict::Credential, StatusCode::UNAUTHORIZED),
        (Verdict::Quota, StatusCode::TOO_MANY_REQUESTS),
        (Verdict::Request, StatusCode::BAD_REQUEST),
    ] {
        let calls = Arc::new(AtomicUsize::new(0));
        let c = Classification::new(verdict, "test");
        let svc =
            RetryBudgetLayer::with_defaults().layer(answering(calls.clone(), status, Some(c)));
        let response = svc.oneshot(Request::new(String::new())).await.unwrap();
        assert_eq!(response.status(), status);
        assert_eq!(calls.load(Ordering::SeqCst), 1, "{verdict} not retried");
        let outcome = response.extensions().get::<RetryOutcome>().unwrap();
        assert_eq!(outcome.stop, Stop::NotRetryable);
    }
}

#[tokio::test(start_paused = true)]
async fn the_classification_extension_wins_over_the_layers_own_classifier() {
    // A 503 the breaker beneath read as a bad request (say, from its body).
    let calls = Arc::new(AtomicUsize::new(0));
    let c = Classification::new(Verdict::Request, "test:invalid_request");
    let svc = RetryBudgetLayer::with_defaults().layer(answering(
        calls.clone(),
        StatusCode::SERVICE_UNAVAILABLE,
        Some(c),
    ));
    svc.oneshot(Request::new(String::new())).await.unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 1);

    // Without the extension, the layer classifies the 503 itself.
    let calls = Arc::new(AtomicUsize::new(0));
    let svc = RetryBudgetLayer::with_defaults().layer(answering(
        calls.clone(),
        StatusCode::SERVICE_UNAVAILABLE,
        None,
    ));
    svc.oneshot(Request::new(String::new())).await.unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 3);
}

#[tokio::test(start_paused = true)]
async fn x_should_retry_false_forbids_a_retry_and_true_allows_one() {
    let mut forbid = Classification::new(Verdict::Availability, "test:overloaded");
    forbid.should_retry = Some(false);
    let mut allow = Classification::new(Verdict::Request, "test:conflict");
    allow.should_retry = Some(true);
    for (c, expected_calls) in [(forbid, 1), (allow, 3)] {
        let calls = Arc::new(AtomicUsize::new(0));
        let svc = RetryBudgetLayer::with_defaults().layer(answering(
            calls.clone(),
            StatusCode::CONFLICT,
            Some(c),
        ));
        svc.oneshot(Request::new(String::new())).await.unwrap();
        assert_eq!(calls.load(Ordering::SeqCst), expected_calls);
    }
}

#[tokio::test(start_paused = true)]
async fn an_empty_budget_returns_the_last_real_response_and_counts_budget_exhausted() {
    let calls = Arc::new(AtomicUsize::new(0));
    let budget = Arc::new(RetryBudget::new(Duration::from_secs(10), 0, 0.0));
    let svc = RetryBudgetLayer::new(budget.clone()).layer(answering(
        calls.clone(),
        StatusCode::BAD_GATEWAY,
        None,
    ));
    let response = svc.oneshot(Request::new(String::new())).await.unwrap();
    assert_eq!(
        response.status(),
        StatusCode::BAD_GATEWAY,
        "the real response"
    );
    let outcome = response.extensions().get::<RetryOutcome>().unwrap();
    assert_eq!((outcome.attempts, outcome.stop), (1, Stop::BudgetExhausted));
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    let snapshot = budget.snapshot();
    assert_eq!((snapshot.requests, snapshot.budget_exhausted), (1, 1));
}

#[tokio::test(start_paused = true)]
async fn an_empty_budget_returns_the_last_real_error() {
    let calls = Arc::new(AtomicUsize::new(0));
    let budget = Arc::new(RetryBudget::new(Duration::from_secs(10), 0, 0.0));
    let refused = || -> BoxError { Box::new(io::Error::from(io::ErrorKind::ConnectionRefused)) };
    let svc = RetryBudgetLayer::new(budget.clone()).layer(failing(calls.clone(), refused));
    let err = svc.oneshot(Request::new(String::new())).await.unwrap_err();
    assert!(err.is::<io::Error>());
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(budget.snapshot().budget_exhausted, 1);
}

#[tokio::test(start_paused = true)]
async fn a_success_is_returned_untouched_and_only_deposits() {
    let calls = Arc::new(AtomicUsize::new(0));
    let budget = Arc::new(RetryBudget::default());
    let svc =
        RetryBudgetLayer::new(budget.clone()).layer(answering(calls.clone(), StatusCode::OK, None));
    let response = svc.oneshot(Request::new(String::new())).await.unwrap();
    assert!(response.extensions().get::<RetryOutcome>().is_none());
    let s = budget.snapshot();
    assert_eq!((s.requests, s.retries, s.budget_exhausted), (1, 0, 0));
}

#[tokio::test(start_paused = true)]
async fn a_full_bulkhead_beneath_is_returned_at_once_not_retried() {
    let calls = Arc::new(AtomicUsize::new(0));
    let c = calls.clone();
    let hung = tower::service_fn(move |_req: Request<String>| {
        c.fetch_add(1, Ordering::SeqCst);
        std::future::pending::<Result<Response<String>, BoxError>>()
    });
    let budget = Arc::new(RetryBudget::default());
    let bulkhead = tower_levee::bulkhead::BulkheadLayer::named("llm", 1);
    let svc = RetryBudgetLayer::new(budget.clone()).layer(bulkhead.layer(hung));

    let mut holder = tokio_test::task::spawn(svc.clone().oneshot(Request::new(String::new())));
    tokio_test::assert_pending!(holder.poll());
    let start = Instant::now();
    let err = svc.oneshot(Request::new(String::new())).await.unwrap_err();
    assert!(err.is::<BulkheadFull>());
    assert_eq!(Instant::now(), start);
    assert_eq!(
        calls.load(Ordering::SeqCst),
        1,
        "only the holder reached the dependency"
    );
    assert_eq!(budget.snapshot().retries, 0);
}

#[tokio::test(start_paused = true)]
async fn the_budget_window_slides_with_paused_tokio_time() {
    let budget = RetryBudget::new(Duration::from_secs(1), 0, 1.0);
    budget.deposit();
    // A snapshot (like a withdrawal) collects the pending deposit now.
    assert_eq!(budget.snapshot().available, 1);
    tokio::time::advance(Duration::from_millis(900)).await;
    assert_eq!(budget.snapshot().available, 1, "a deposit counts for ttl");
    tokio::time::advance(Duration::from_millis(200)).await;
    assert_eq!(budget.snapshot().available, 0, "and not after");
    assert!(!budget.withdraw());
}

#[test]
fn retry_builders_refuse_bad_settings_with_the_field_named_never_a_panic() {
    use std::sync::Arc;
    use std::time::Duration;
    use tower_levee::retry::{BudgetPolicy, RetryBudget, RetryBudgetLayer};
    let budget = || Arc::new(RetryBudget::default());
    let secs = Duration::from_secs;
    let layer_errors = [
        RetryBudgetLayer::builder(budget())
            .max_attempts(0)
            .build()
            .unwrap_err(),
        RetryBudgetLayer::builder(budget())
            .backoff(secs(2), secs(1))
            .build()
            .unwrap_err(),
        RetryBudgetLayer::builder(budget())
            .timeout(Duration::ZERO)
            .build()
            .unwrap_err(),
    ];
    let fields: Vec<_> = layer_errors.iter().map(|e| e.field).collect();
    assert_eq!(
        fields,
        ["retry.max_attempts", "retry.backoff_cap", "retry.timeout"]
    );
    let policy_errors = [
        BudgetPolicy::builder(budget())
            .max_attempts(0)
            .build()
            .unwrap_err(),
        BudgetPolicy::builder(budget())
            .backoff(secs(2), secs(1))
            .build()
            .unwrap_err(),
    ];
    let fields: Vec<_> = policy_errors.iter().map(|e| e.field).collect();
    assert_eq!(fields, ["retry.max_attempts", "retry.backoff_cap"]);
    // The same message a configuration file gets.
    assert_eq!(
        layer_errors[0].to_string(),
        "invalid retry.max_attempts: must be at least 1 (it counts the first attempt), got 0"
    );
    assert!(
        RetryBudgetLayer::builder(budget())
            .max_attempts(1)
            .build()
            .is_ok()
    );
    assert!(
        BudgetPolicy::builder(budget())
            .max_attempts(5)
            .build()
            .is_ok()
    );
}
