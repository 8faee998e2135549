//! Seed 004's fault drill, the parts the retry layer answers for alone: an
//! inner service that always answers 503, 50 sequential requests, and a count
//! of the calls that reach it. (The combined RetryBudget → Breaker →
//! Bulkhead drill lives with the integration tests.)

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use http::{Request, Response, StatusCode};
use levee_core::budget::BudgetConfig;
use tokio::time::Instant;
use tower::retry::{Policy, Retry};
use tower::{Service, ServiceExt};
use tower_layer::Layer;
use tower_levee::retry::{RetryBudget, RetryBudgetLayer};

const REQUESTS: usize = 50;

/// An always-503 dependency that counts the calls reaching it.
fn always_503(
    calls: Arc<AtomicUsize>,
) -> impl Service<
    Request<String>,
    Response = Response<String>,
    Error = Infallible,
    Future = std::future::Ready<Result<Response<String>, Infallible>>,
> + Clone {
    tower::service_fn(move |_req: Request<String>| {
        calls.fetch_add(1, Ordering::SeqCst);
        let response = Response::builder()
            .status(StatusCode::SERVICE_UNAVAILABLE)
            .body(String::new())
            .unwrap();
        std::future::ready(Ok(response))
    })
}

async fn drive<S>(mut svc: S) -> Instant
where
    S: Service<Request<String>, Response = Response<String>>,
    S::Error: std::fmt::Debug,
{
    for _ in 0..REQUESTS {
        let response = svc
            .ready()
            .await
            .unwrap()
            .call(Request::new(String::new()))
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    }
    Instant::now()
}

/// A plain retry policy: up to `n` retries of a 5xx, no budget, no backoff.
#[derive(Clone)]
struct Attempts(usize);

impl<E> Policy<Request<String>, Response<String>, E> for Attempts {
    type Future = std::future::Ready<()>;

    fn retry(
        &mut self,
        _: &mut Request<String>,
        result: &mut Result<Response<String>, E>,
    ) -> Option<Self::Future> {
        let failed = result
            .as_ref()
            .map_or(true, |r| r.status().is_server_error());
        (failed && self.0 > 0).then(|| {
            self.0 -= 1;
            std::future::ready(())
        })
    }

    fn clone_request(&mut self, req: &Request<String>) -> Option<Request<String>> {
        Some(req.clone())
    }
}

#[tokio::test(start_paused = true)]
async fn three_nested_plain_retry_layers_of_3_attempts_turn_50_requests_into_1350_calls() {
    let calls = Arc::new(AtomicUsize::new(0));
    // SDK (3 attempts) inside a decorator (3) inside a queue worker (3).
    let sdk = Retry::new(Attempts(2), always_503(calls.clone()));
    let decorator = Retry::new(Attempts(2), sdk);
    let worker = Retry::new(Attempts(2), decorator);
    drive(worker).await;
    let n = calls.load(Ordering::SeqCst);
    println!("seed 004, no Levee, 3 nested retry layers: {REQUESTS} requests -> {n} calls");
    assert_eq!(n, REQUESTS * 27);
    assert_eq!(n, 1_350);
}

#[tokio::test(start_paused = true)]
async fn retry_budget_alone_over_an_always_503_service_stays_within_requests_plus_the_budget_bound()
{
    // Default layer and budget: 3 attempts, backoff, ttl 10 s, 10/s, 10%.
    let calls = Arc::new(AtomicUsize::new(0));
    let budget = Arc::new(RetryBudget::default());
    let svc = RetryBudgetLayer::builder(budget.clone())
        .seed(4)
        .build()
        .unwrap()
        .layer(always_503(calls.clone()));
    let start = Instant::now();
    let end = drive(svc).await;
    let n = calls.load(Ordering::SeqCst);
    let bound = REQUESTS as u64 + BudgetConfig::default().max_retries(REQUESTS as u64);
    println!(
        "seed 004, RetryBudget alone (defaults): {REQUESTS} requests -> {n} calls \
         (bound {bound}; max_attempts 3 binds first; {:?} of paused time)",
        end - start
    );
    assert!(n as u64 <= bound);
    assert_eq!(
        n,
        REQUESTS * 3,
        "the default reserve covers 3 attempts each"
    );
}

#[tokio::test(start_paused = true)]
async fn when_the_budget_binds_an_always_503_service_sees_exactly_requests_plus_the_bound() {
    // A budget that binds: reserve 1/s × 10 s = 10 tokens, plus 10% of 50.
    let calls = Arc::new(AtomicUsize::new(0));
    let config = BudgetConfig::new(Duration::from_secs(10), 1, 0.1);
    let budget = Arc::new(RetryBudget::from_config(config));
    let svc = RetryBudgetLayer::builder(budget.clone())
        .max_attempts(10)
        .backoff(Duration::from_millis(1), Duration::from_millis(10))
        .seed(4)
        .build()
        .unwrap()
        .layer(always_503(calls.clone()));
    let start = Instant::now();
    let end = drive(svc).await;
    assert!(end - start < config.ttl(), "the run fits one window");
    let n = calls.load(Ordering::SeqCst);
    let bound = REQUESTS as u64 + config.max_retries(REQUESTS as u64);
    println!(
        "seed 004, RetryBudget (10 s, 1/s, 10%), 10 attempts: {REQUESTS} requests -> {n} calls (bound {bound})"
    );
    assert_eq!(n as u64, bound);
    assert_eq!(n, 65);
    let s = budget.snapshot();
    assert_eq!((s.requests, s.retries), (50, 15));
    assert!(s.budget_exhausted > 0);
}

/// A plain `tower::retry` policy that retries any 5xx as long as the budget
/// pays: the budget alone bounds it.
#[derive(Clone)]
struct Budgeted {
    budget: Arc<RetryBudget>,
    deposited: bool,
}

impl<E> Policy<Request<String>, Response<String>, E> for Budgeted {
    type Future = std::future::Ready<()>;

    fn retry(
        &mut self,
        _: &mut Request<String>,
        result: &mut Result<Response<String>, E>,
    ) -> Option<Self::Future> {
        use tower::retry::budget::Budget;
        if !std::mem::replace(&mut self.deposited, true) {
            self.budget.deposit();
        }
        let failed = result
            .as_ref()
            .map_or(true, |r| r.status().is_server_error());
        (failed && Budget::withdraw(&*self.budget)).then(|| std::future::ready(()))
    }

    fn clone_request(&mut self, req: &Request<String>) -> Option<Request<String>> {
        Some(req.clone())
    }
}

#[tokio::test(start_paused = true)]
async fn retry_budget_also_drives_a_plain_tower_retry_and_bounds_it() {
    let calls = Arc::new(AtomicUsize::new(0));
    let budget = Arc::new(RetryBudget::default());
    let policy = Budgeted {
        budget: budget.clone(),
        deposited: false,
    };
    drive(Retry::new(policy, always_503(calls.clone()))).await;
    let n = calls.load(Ordering::SeqCst);
    let bound = REQUESTS as u64 + BudgetConfig::default().max_retries(REQUESTS as u64);
    println!(
        "tower::retry::Retry with RetryBudget, unlimited attempts: {REQUESTS} requests -> {n} calls (bound {bound})"
    );
    assert_eq!(n as u64, bound);
}
