//! Levee composed with tower's own `TimeoutLayer` and `Retry`, in the order
//! of DESIGN.md: overall timeout → retry (tower's, over Levee's budget) →
//! bulkhead → breaker → per-attempt timeout → client. Paused time; every
//! proof counts the calls that reached the client.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use http::{Request, Response, StatusCode};
use levee_core::breaker::{BreakerConfig, BreakerStatus};
use tower::retry::RetryLayer;
use tower::timeout::TimeoutLayer;
use tower::timeout::error::Elapsed;
use tower::{Service, ServiceBuilder, ServiceExt};
use tower_levee::breaker::BreakerHandle;
use tower_levee::error::is_rejection;
use tower_levee::failover::{Failover, NoTargetAvailable, Target};
use tower_levee::retry::{BudgetPolicy, RetryBudget};
use tower_levee::{
    BoxError, BreakerLayer, BulkheadFull, BulkheadLayer, CircuitOpen, Parked, Throttled,
};

const PER_ATTEMPT: Duration = Duration::from_secs(1);
const OVERALL: Duration = Duration::from_secs(30);
const THRESHOLD: u32 = 3;

/// The fake provider, by path: `/hang` never answers, `/unavailable`
/// answers 503 asking for a 2 s wait, `/throttled` 429 asking for 120 s (past
/// the retry's 60 s `max_wait`), `/ok` 200.
#[derive(Clone, Default)]
struct Provider {
    calls: Arc<AtomicUsize>,
}

type Fut = Pin<Box<dyn Future<Output = Result<Response<String>, Infallible>> + Send>>;

impl Service<Request<String>> for Provider {
    type Response = Response<String>;
    type Error = Infallible;
    type Future = Fut;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Infallible>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<String>) -> Fut {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let reply = |status: u16, retry_after: Option<&str>| {
            let mut b = Response::builder().status(status);
            if let Some(r) = retry_after {
                b = b.header("retry-after", r);
            }
            Ok(b.body(String::new()).unwrap())
        };
        match req.uri().path() {
            "/hang" => Box::pin(std::future::pending()),
            "/unavailable" => Box::pin(std::future::ready(reply(503, Some("2")))),
            "/throttled" => Box::pin(std::future::ready(reply(429, Some("120")))),
            _ => Box::pin(std::future::ready(reply(200, None))),
        }
    }
}

impl Provider {
    fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

fn req(path: &str) -> Request<String> {
    Request::post(format!("http://api.test{path}"))
        .body("{}".to_owned())
        .unwrap()
}

fn breaker() -> BreakerLayer {
    BreakerLayer::builder()
        .breaker(
            BreakerConfig::builder()
                .threshold(THRESHOLD)
                .build()
                .unwrap(),
        )
        .seed(7)
        .build()
        .unwrap()
}

/// The whole stack, outermost first, as DESIGN.md orders it.
macro_rules! stack {
    ($provider:expr, $budget:expr, $breaker:expr, $overall:expr) => {
        ServiceBuilder::new()
            .layer(TimeoutLayer::new($overall))
            .layer(RetryLayer::new(BudgetPolicy::new($budget.clone())))
            .layer(BulkheadLayer::named("llm", 1))
            .layer($breaker)
            .layer(TimeoutLayer::new(PER_ATTEMPT))
            .service($provider.clone())
    };
}

#[tokio::test(start_paused = true)]
async fn per_attempt_timeouts_are_availability_failures_that_open_the_breaker() {
    let provider = Provider::default();
    let budget = Arc::new(RetryBudget::default());
    let breaker = breaker();
    let health: BreakerHandle = breaker.handle();
    let svc = stack!(provider, budget, breaker, OVERALL);

    // 3 attempts, each cut by the per-attempt timeout beneath the breaker:
    // tower's Retry (with BudgetPolicy) retried the Elapsed twice.
    let err = svc.clone().oneshot(req("/hang")).await.unwrap_err();
    assert!(err.is::<Elapsed>(), "{err}");
    assert_eq!(provider.calls(), 3);
    assert_eq!(budget.snapshot().retries, 2);

    // The breaker counted each Elapsed: three in a row is its threshold.
    assert_eq!(health.breaker_status("api.test"), Some(BreakerStatus::Open));
    let failures = health.failure_breakdown("api.test").unwrap_or_default();
    assert!(
        failures.keys().any(|k| k.contains("timeout")),
        "counted as timeouts: {failures:?}"
    );

    // Now even a healthy path is refused before the client, and the
    // refusal is not retried: no call, no token.
    let err = svc.clone().oneshot(req("/ok")).await.unwrap_err();
    assert!(err.is::<CircuitOpen>(), "{err}");
    assert!(is_rejection(&*err));
    assert_eq!(provider.calls(), 3);
    assert_eq!(budget.snapshot().retries, 2);
}

#[tokio::test(start_paused = true)]
async fn the_overall_timeout_bounds_the_retries_and_their_waits() {
    let provider = Provider::default();
    let budget = Arc::new(RetryBudget::default());
    // The provider asks for 2 s before each retry; 3 s in all allows the
    // first attempt and one retry, which the overall timeout then cuts.
    let svc = stack!(provider, budget, breaker(), Duration::from_secs(3));
    let err = svc.oneshot(req("/unavailable")).await.unwrap_err();
    assert!(err.is::<Elapsed>(), "{err}");
    assert_eq!(provider.calls(), 2);
    assert_eq!(
        budget.snapshot().retries,
        2,
        "the second wait was granted, then cut"
    );
}

#[tokio::test(start_paused = true)]
async fn the_gate_and_the_bulkhead_refusals_are_never_retried() {
    let provider = Provider::default();
    let budget = Arc::new(RetryBudget::default());
    let svc = stack!(provider, budget, breaker(), OVERALL);

    // A 429 asking for 120 s: past BudgetPolicy's max_wait, returned as is;
    // the breaker layer's gate closes for the hint.
    let res = svc.clone().oneshot(req("/throttled")).await.unwrap();
    assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(provider.calls(), 1);
    let err = svc.clone().oneshot(req("/throttled")).await.unwrap_err();
    assert!(err.is::<Throttled>(), "{err}");
    assert_eq!(provider.calls(), 1, "refused by the gate, not retried");

    // One hanging call holds the bulkhead's only permit; the next request
    // is refused at once and not retried.
    let other = Provider::default();
    let budget = Arc::new(RetryBudget::default());
    let svc = stack!(other, budget, breaker(), OVERALL);
    let hanging = tokio::spawn(svc.clone().oneshot(req("/hang")));
    while other.calls() == 0 {
        tokio::task::yield_now().await;
    }
    let err = svc.clone().oneshot(req("/ok")).await.unwrap_err();
    assert!(err.is::<BulkheadFull>(), "{err}");
    assert_eq!(other.calls(), 1);
    assert_eq!(budget.snapshot().retries, 0);
    hanging.abort();
}

/// Makes the error a [`Refusing`] client fails with.
type MakeError = fn() -> BoxError;

/// A client that fails every call with a given error (a Levee rejection,
/// or for contrast a transport error), counting its calls.
#[derive(Clone)]
struct Refusing {
    calls: Arc<AtomicUsize>,
    make: MakeError,
}

impl Service<Request<String>> for Refusing {
    type Response = Response<String>;
    type Error = BoxError;
    type Future = std::future::Ready<Result<Response<String>, BoxError>>;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), BoxError>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: Request<String>) -> Self::Future {
        self.calls.fetch_add(1, Ordering::SeqCst);
        std::future::ready(Err((self.make)()))
    }
}

fn refusing(calls: Arc<AtomicUsize>, make: MakeError) -> Refusing {
    Refusing { calls, make }
}

#[tokio::test(start_paused = true)]
async fn every_levee_rejection_is_returned_after_one_call() {
    let no_target = no_target_available().await;
    let rejections: [(&str, MakeError); 4] = [
        ("CircuitOpen", || {
            Box::new(CircuitOpen::new("a", Duration::from_secs(1)))
        }),
        // (A `Throttled` of at most a second, a scope spread at its
        // provider's rate, is waited out: see the pacing tests.)
        ("Throttled", || {
            Box::new(Throttled::new("a/m", Duration::from_secs(5)))
        }),
        ("Parked", || {
            Box::new(Parked::new("a", Duration::from_secs(1)))
        }),
        ("BulkheadFull", || Box::new(BulkheadFull::new("llm", 1))),
    ];
    for (name, make) in rejections {
        let calls = Arc::new(AtomicUsize::new(0));
        let budget = Arc::new(RetryBudget::default());
        let svc = ServiceBuilder::new()
            .layer(RetryLayer::new(BudgetPolicy::new(budget.clone())))
            .service(refusing(calls.clone(), make));
        let err = svc.oneshot(req("/ok")).await.unwrap_err();
        assert!(is_rejection(&*err), "{name}");
        assert_eq!(calls.load(Ordering::SeqCst), 1, "{name} was retried");
        assert_eq!(budget.snapshot().retries, 0, "{name}");
    }

    // A NoTargetAvailable from a real failover whose one target is open.
    let (failover, calls) = no_target;
    let budget = Arc::new(RetryBudget::default());
    let svc = ServiceBuilder::new()
        .layer(RetryLayer::new(BudgetPolicy::new(budget.clone())))
        .service(failover);
    let err = svc.oneshot(req("/ok")).await.unwrap_err();
    assert!(err.is::<NoTargetAvailable>(), "{err}");
    assert_eq!(calls.calls(), 0);
    assert_eq!(budget.snapshot().retries, 0);

    // And for contrast: a plain transport error is retried (3 attempts).
    let calls = Arc::new(AtomicUsize::new(0));
    let svc = ServiceBuilder::new()
        .layer(RetryLayer::new(BudgetPolicy::new(Arc::new(
            RetryBudget::default(),
        ))))
        .service(refusing(calls.clone(), || {
            Box::new(std::io::Error::from(std::io::ErrorKind::ConnectionReset))
        }));
    let err = svc.oneshot(req("/ok")).await.unwrap_err();
    assert!(!is_rejection(&*err));
    assert_eq!(calls.load(Ordering::SeqCst), 3);
}

/// A failover with one target whose breaker is opened by hand.
async fn no_target_available() -> (Failover<String, String, Provider>, Provider) {
    let provider = Provider::default();
    let failover = Failover::builder()
        .target(Target::new("a", provider.clone()).breaker(breaker()))
        .build()
        .unwrap();
    failover
        .handle()
        .breaker("a")
        .expect("target a has a breaker")
        .open("api.test");
    (failover, provider)
}
