//! The caller of a retrying stack always gets the provider's own answer,
//! never a refusal the retry itself ran into, and a retry never goes
//! sooner than the breaker beneath would let it. Paused tokio time.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use http::{Request, Response};
use http_body_util::BodyExt;
use levee_core::breaker::{BreakerConfig, Cooldown};
use tokio::time::Instant;
use tower::{Service, ServiceBuilder, ServiceExt};
use tower_levee::breaker::{BreakerHandle, Reopening};
use tower_levee::retry::{Deadline, RetryBudget, RetryBudgetLayer, RetryOutcome, Stop};
use tower_levee::{BoxError, BreakerLayer};

/// Waits for `svc` to be ready and sends it `req`.
async fn send<S: Service<R>, R>(svc: &mut S, req: R) -> Result<S::Response, S::Error> {
    svc.ready().await?.call(req).await
}

mod scripted;

/// A provider answering each call with the next `(status, body)` of its
/// script (the last one repeats), tagged `x-request-id: req-<n>`.
type Provider = scripted::Provider<(u16, &'static str)>;

/// A primary and a backup account over `primary` and `backup`, each with
/// its own breaker layer seeded from `seed`.
fn two_accounts(
    primary: &Provider,
    backup: &Provider,
    seed: u64,
) -> tower_levee::Failover<String, String, Provider> {
    use tower_levee::failover::{Failover, Target};
    let seeded = |seed| BreakerLayer::builder().seed(seed).build().unwrap();
    Failover::builder()
        .target(Target::new("primary", primary.clone()).breaker(seeded(seed)))
        .target(Target::new("backup", backup.clone()).breaker(seeded(seed + 1)))
        .build()
        .unwrap()
}

const RATE_LIMITED: &str =
    r#"{"error":{"code":"rate_limit_exceeded","message":"Rate limit reached for gpt-4o"}}"#;
const OVERLOADED: &str =
    r#"{"error":{"code":"server_error","message":"The server is overloaded"}}"#;

/// A breaker that, opened, stays open a minute: longer than any retry here
/// waits.
fn opened_for_a_minute() -> BreakerLayer {
    let config = BreakerConfig::builder()
        .cooldown(Cooldown::fixed(Duration::from_secs(60)))
        .build()
        .unwrap();
    BreakerLayer::builder()
        .seed(1)
        .breaker(config)
        .build()
        .unwrap()
}

fn request(deadline: Option<Duration>) -> Request<String> {
    let mut req = Request::post("https://api.openai.com/v1/chat/completions")
        .body(String::from("{}"))
        .unwrap();
    if let Some(d) = deadline {
        req.extensions_mut().insert(Deadline(Instant::now() + d));
    }
    req
}

/// Retry (seeded) → breaker (seeded) → `provider`.
fn stack(
    provider: Provider,
    breaker: BreakerLayer,
) -> (
    impl Service<
        Request<String>,
        Response = Response<impl http_body::Body<Data = bytes::Bytes, Error = BoxError>>,
        Error = BoxError,
    >,
    Arc<RetryBudget>,
    BreakerHandle,
) {
    let budget = Arc::new(RetryBudget::default());
    let handle = breaker.handle();
    let svc = ServiceBuilder::new()
        .layer(
            RetryBudgetLayer::builder(budget.clone())
                .seed(7)
                .build()
                .unwrap(),
        )
        .layer(breaker)
        .service(provider);
    (svc, budget, handle)
}

async fn body_of<B: http_body::Body<Data = bytes::Bytes, Error = BoxError>>(
    res: Response<B>,
) -> (u16, String, String) {
    let status = res.status().as_u16();
    let id = res.headers()["x-request-id"].to_str().unwrap().to_owned();
    let bytes = res.into_body().collect().await.unwrap().to_bytes();
    (status, id, String::from_utf8(bytes.to_vec()).unwrap())
}

#[tokio::test(start_paused = true)]
async fn a_hintless_429_whose_gate_outlasts_the_deadline_is_answered_at_once_with_the_real_429() {
    let provider = Provider::new(vec![(429, RATE_LIMITED), (200, "{}")]);
    let breaker = BreakerLayer::builder().seed(1).build().unwrap();
    let (mut svc, budget, _) = stack(provider.clone(), breaker);
    let started = Instant::now();
    // The gate closes for about 5 s (no hint); the caller has 2 s.
    let res = send(&mut svc, request(Some(Duration::from_secs(2))))
        .await
        .expect("the provider's answer, not a refusal");
    assert_eq!(Instant::now(), started, "answered at once, nothing slept");
    let outcome = *res.extensions().get::<RetryOutcome>().unwrap();
    assert_eq!((outcome.attempts, outcome.stop), (1, Stop::Deadline));
    assert_eq!(
        body_of(res).await,
        (429, "req-1".into(), RATE_LIMITED.into())
    );
    assert_eq!(provider.calls().len(), 1);
    assert_eq!(
        budget.snapshot().retries,
        0,
        "no token for a retry not made"
    );
}

#[tokio::test(start_paused = true)]
async fn a_hintless_429_is_retried_once_its_gate_reopens_when_that_fits_the_deadline() {
    let provider = Provider::new(vec![(429, RATE_LIMITED), (200, "{\"ok\":1}")]);
    let breaker = BreakerLayer::builder().seed(1).build().unwrap();
    let (mut svc, budget, handle) = stack(provider.clone(), breaker);
    let res = send(&mut svc, request(Some(Duration::from_secs(30))))
        .await
        .unwrap();
    assert_eq!(
        body_of(res).await,
        (200, "req-2".into(), "{\"ok\":1}".into())
    );
    let calls = provider.calls();
    assert_eq!(calls.len(), 2);
    // The gate's default wait is 5 s ± 20%: the retry came no sooner.
    let waited = calls[1] - calls[0];
    assert!(waited >= Duration::from_secs(4), "{waited:?}");
    assert_eq!(handle.rejections().gate, 0, "the retry was never refused");
    assert_eq!(budget.snapshot().retries, 1);
}

#[tokio::test(start_paused = true)]
async fn a_breaker_that_opens_on_the_retry_hands_the_caller_the_503_that_opened_it() {
    let provider = Provider::new(vec![(503, OVERLOADED)]);
    let config = BreakerConfig::builder()
        .threshold(2)
        .cooldown(Cooldown::fixed(Duration::from_secs(30)))
        .build()
        .unwrap();
    let breaker = BreakerLayer::builder().breaker(config).build().unwrap();
    let (mut svc, budget, handle) = stack(provider.clone(), breaker);
    let res = send(&mut svc, request(Some(Duration::from_secs(10))))
        .await
        .expect("the provider's 503, not CircuitOpen");
    let reopening = res
        .extensions()
        .get::<Reopening>()
        .copied()
        .expect("the breaker says when");
    assert!(reopening.at >= Instant::now() + Duration::from_secs(29));
    let outcome = *res.extensions().get::<RetryOutcome>().unwrap();
    assert_eq!((outcome.attempts, outcome.stop), (2, Stop::Deadline));
    assert_eq!(body_of(res).await, (503, "req-2".into(), OVERLOADED.into()));
    assert_eq!(provider.calls().len(), 2);
    assert_eq!(
        handle.rejections().breaker,
        0,
        "no retry ran into the open breaker"
    );
    assert_eq!(
        budget.snapshot().retries,
        1,
        "one retry, none for the refused one"
    );
}

#[tokio::test(start_paused = true)]
async fn a_retry_refused_because_a_scope_closed_meanwhile_returns_the_answer_before_it() {
    let provider = Provider::new(vec![(503, OVERLOADED), (200, "{}")]);
    let breaker = opened_for_a_minute();
    let (svc, _, handle) = stack(provider.clone(), breaker);
    let mut svc = svc;
    let call = svc.ready().await.unwrap().call(request(None));
    let mut call = tokio_test::task::spawn(call);
    // The first attempt answers 503; the retry waits out its backoff ...
    assert!(call.poll().is_pending());
    assert_eq!(provider.calls().len(), 1);
    // ... and meanwhile an operator takes the account out of rotation.
    handle.open("api.openai.com");
    tokio::time::advance(Duration::from_secs(10)).await;
    let std::task::Poll::Ready(res) = call.poll() else {
        panic!("answered once the retry was refused")
    };
    let res = res.expect("the real 503");
    let outcome = *res.extensions().get::<RetryOutcome>().unwrap();
    assert_eq!((outcome.attempts, outcome.stop), (1, Stop::Refused));
    assert_eq!(body_of(res).await, (503, "req-1".into(), OVERLOADED.into()));
    assert_eq!(
        provider.calls().len(),
        1,
        "the refused retry was never sent"
    );
    assert_eq!(handle.rejections().breaker, 1);
}

#[tokio::test(start_paused = true)]
async fn over_a_failover_whose_targets_all_throttled_the_retry_waits_for_the_first_to_reopen() {
    use tower_levee::failover::ServedBy;
    let primary = Provider::new(vec![(429, RATE_LIMITED), (200, "{\"by\":\"primary\"}")]);
    let backup = Provider::new(vec![(429, RATE_LIMITED)]);
    let failover = two_accounts(&primary, &backup, 1);
    let budget = Arc::new(RetryBudget::default());
    let mut svc = ServiceBuilder::new()
        .layer(
            RetryBudgetLayer::builder(budget.clone())
                .seed(7)
                .build()
                .unwrap(),
        )
        .service(failover);

    // Under a 2 s deadline: both gates close for about 5 s, so the real 429
    // comes back at once, marked with the earlier reopening.
    let started = Instant::now();
    let res = send(&mut svc, request(Some(Duration::from_secs(2))))
        .await
        .expect("a real 429");
    assert_eq!(Instant::now(), started);
    assert_eq!(res.status(), 429);
    assert_eq!(ServedBy::of(&res).unwrap().target, "backup");
    let reopening = res
        .extensions()
        .get::<Reopening>()
        .copied()
        .expect("both targets gated");
    assert!(reopening.at > Instant::now() + Duration::from_secs(3));
    assert_eq!(budget.snapshot().retries, 0);

    // With time to spare, each retry goes when the first gate reopens, to
    // whichever target that is, until the primary serves it.
    tokio::time::advance(Duration::from_secs(60)).await;
    let primary_again = Provider::new(vec![(429, RATE_LIMITED), (200, "{\"by\":\"primary\"}")]);
    let backup_again = Provider::new(vec![(429, RATE_LIMITED)]);
    let failover = two_accounts(&primary_again, &backup_again, 3);
    let mut svc = ServiceBuilder::new()
        .layer(
            RetryBudgetLayer::builder(budget.clone())
                .seed(7)
                .build()
                .unwrap(),
        )
        .service(failover);
    let res = send(&mut svc, request(Some(Duration::from_secs(30))))
        .await
        .unwrap();
    assert_eq!(ServedBy::of(&res).unwrap().target, "primary");
    assert_eq!(body_of(res).await.2, "{\"by\":\"primary\"}");
    let (p, b) = (primary_again.calls(), backup_again.calls());
    assert_eq!(p.len(), 2);
    // The gates' default wait is 5 s ± 20%: no target was called again
    // while its gate was closed.
    assert!(p[1] - p[0] >= Duration::from_secs(4), "{p:?}");
    assert!(
        b.windows(2).all(|w| w[1] - w[0] >= Duration::from_secs(4)),
        "{b:?}"
    );
    assert!(b.len() <= 2);
}

// === tower's Retry with BudgetPolicy: the same promises ===

#[tokio::test(start_paused = true)]
async fn with_towers_retry_a_refused_retry_also_returns_the_answer_before_it() {
    use tower::retry::RetryLayer;
    use tower_levee::retry::BudgetPolicy;
    let provider = Provider::new(vec![(503, OVERLOADED), (200, "{}")]);
    let breaker = opened_for_a_minute();
    let handle = breaker.handle();
    let policy = BudgetPolicy::builder(Arc::new(RetryBudget::default()))
        .build()
        .unwrap();
    let mut svc = ServiceBuilder::new()
        .layer(RetryLayer::new(policy))
        .layer(breaker)
        .service(provider.clone());
    let call = svc.ready().await.unwrap().call(request(None));
    let mut call = tokio_test::task::spawn(call);
    assert!(call.poll().is_pending());
    handle.open("api.openai.com");
    tokio::time::advance(Duration::from_secs(10)).await;
    let std::task::Poll::Ready(res) = call.poll() else {
        panic!("answered once the retry was refused")
    };
    let res = res.expect("the real 503, not CircuitOpen");
    assert_eq!(body_of(res).await, (503, "req-1".into(), OVERLOADED.into()));
    assert_eq!(provider.calls().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn with_towers_retry_a_failover_of_only_throttled_targets_is_waited_out() {
    use tower::retry::RetryLayer;
    use tower_levee::failover::{NoTargetAvailable, ServedBy};
    use tower_levee::retry::BudgetPolicy;
    let primary = Provider::new(vec![(429, RATE_LIMITED), (200, "{\"by\":\"primary\"}")]);
    let backup = Provider::new(vec![(429, RATE_LIMITED), (200, "{\"by\":\"backup\"}")]);
    let failover = two_accounts(&primary, &backup, 1);
    // Both accounts throttle once: every target is gated for about 5 s.
    let mut plain = failover.clone();
    let res = send(&mut plain, request(None)).await.unwrap();
    assert_eq!(res.status(), 429);
    let err = send(&mut plain, request(None)).await.unwrap_err();
    assert!(
        err.downcast_ref::<NoTargetAvailable>()
            .is_some_and(|e| e.all_throttled())
    );

    let policy = BudgetPolicy::builder(Arc::new(RetryBudget::default()))
        .build()
        .unwrap();
    let mut svc = ServiceBuilder::new()
        .layer(RetryLayer::new(policy))
        .service(failover);
    let started = Instant::now();
    let res = send(&mut svc, request(Some(Duration::from_secs(30))))
        .await
        .expect("served once a gate reopened");
    assert!(Instant::now() - started >= Duration::from_secs(4));
    assert!(ServedBy::of(&res).is_some());
    assert_eq!(res.status(), 200);
}

// === the failover's last answer ===

#[tokio::test(start_paused = true)]
async fn a_failover_stopped_by_a_refusal_returns_the_real_answer_an_earlier_target_gave() {
    use tower_levee::failover::{Failover, Target};
    let primary = Provider::new(vec![(503, OVERLOADED)]);
    // The backup never answers: the first request holds its one permit.
    let hanging = tower::service_fn(|_req: Request<String>| {
        std::future::pending::<Result<Response<String>, Infallible>>()
    });
    let mut svc = Failover::builder()
        // Two service types: each target boxed.
        .target(Target::new("primary", primary.clone()).boxed())
        .target(Target::new("backup", hanging).max_concurrent(1).boxed())
        // Go on after a failure, but stop at a refusal.
        .fallback_on(|a| a.refusal.is_none() && a.default_policy())
        .build()
        .unwrap();
    let holding = svc.ready().await.unwrap().call(request(None));
    let mut holding = tokio_test::task::spawn(holding);
    assert!(holding.poll().is_pending(), "the backup holds its permit");
    // The primary fails, the backup's bulkhead refuses, the hook stops there:
    // the caller gets the primary's 503, not BulkheadFull.
    let res = send(&mut svc, request(None)).await.expect("the real 503");
    assert_eq!(body_of(res).await, (503, "req-2".into(), OVERLOADED.into()));
}

#[tokio::test(start_paused = true)]
async fn a_failovers_last_answer_says_no_reopening_when_some_target_admits_now() {
    use tower_levee::failover::{Failover, ServedBy, Target};
    // The primary fails without closing anything; the backup gates.
    let primary = Provider::new(vec![(503, OVERLOADED)]);
    let backup = Provider::new(vec![(429, RATE_LIMITED)]);
    let mut svc = Failover::builder()
        .target(Target::new("primary", primary))
        .target(Target::new("backup", backup))
        .build()
        .unwrap();
    let res = send(&mut svc, request(None)).await.unwrap();
    assert_eq!(ServedBy::of(&res).unwrap().target, "backup");
    assert_eq!(res.status(), 429);
    assert!(
        res.extensions().get::<Reopening>().is_none(),
        "the primary admits a retry now: a retry need not wait for the backup's gate"
    );
}
