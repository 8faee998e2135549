//! Hedging and demotion: a first call late for its target goes once more
//! to the next target, the first success wins and the other call is
//! dropped; a target late three times in a row is tried after the others
//! until a trial finds it fast again; hedges stay within their budget.

mod failover_support;

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use http::{Request, Response};
use http_body_util::BodyExt;
use proptest::prelude::*;
use tokio::time::Instant;
use tower::{BoxError, Service, ServiceExt};
use tower_levee::breaker::ShadowProbe;
use tower_levee::failover::{Failover, FailoverBuilder, Hedging, ServedBy, ShadowProbes, Target};

use failover_support::{TestClassifier, breaker, req, response};

/// A target that answers 200 after its current latency, counting calls
/// started, answered, and dropped before answering.
#[derive(Clone, Default)]
struct Timed {
    latency_ms: Arc<AtomicU64>,
    started: Arc<AtomicUsize>,
    answered: Arc<AtomicUsize>,
    dropped: Arc<AtomicUsize>,
    /// Calls that were shadow probes.
    copies: Arc<AtomicUsize>,
}

impl Timed {
    fn new(ms: u64) -> Self {
        let t = Timed::default();
        t.set(ms);
        t
    }

    fn set(&self, ms: u64) {
        self.latency_ms.store(ms, Ordering::SeqCst);
    }

    fn started(&self) -> usize {
        self.started.load(Ordering::SeqCst)
    }

    fn copies(&self) -> usize {
        self.copies.load(Ordering::SeqCst)
    }

    /// Calls of callers' requests: those started that were not copies.
    fn callers(&self) -> usize {
        self.started() - self.copies()
    }
}

/// Counts a call dropped before it answered.
struct Pending {
    dropped: Arc<AtomicUsize>,
    done: bool,
}

impl Drop for Pending {
    fn drop(&mut self) {
        if !self.done {
            self.dropped.fetch_add(1, Ordering::SeqCst);
        }
    }
}

impl Service<Request<String>> for Timed {
    type Response = Response<String>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Response<String>, BoxError>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<String>) -> Self::Future {
        self.started.fetch_add(1, Ordering::SeqCst);
        if req.extensions().get::<ShadowProbe>().is_some() {
            self.copies.fetch_add(1, Ordering::SeqCst);
        }
        let latency = Duration::from_millis(self.latency_ms.load(Ordering::SeqCst));
        let answered = self.answered.clone();
        let guard = Pending {
            dropped: self.dropped.clone(),
            done: false,
        };
        Box::pin(async move {
            // Moved in whole, not just its flag, so that dropping the call
            // drops it.
            let mut guard = guard;
            tokio::time::sleep(latency).await;
            guard.done = true;
            answered.fetch_add(1, Ordering::SeqCst);
            Ok(response(200, None, r#"{"ok":true}"#))
        })
    }
}

type Svc = Failover<String, String, Timed, TestClassifier>;

fn failover(primary: &Timed, fallback: &Timed, hedging: Option<Hedging>) -> Svc {
    builder(primary, fallback, hedging).build().unwrap()
}

/// [`failover`] with `hedging` and shadow probes (their defaults).
fn with_copies(primary: &Timed, fallback: &Timed, hedging: Hedging) -> Svc {
    builder(primary, fallback, Some(hedging))
        .shadow_probes(ShadowProbes::new())
        .build()
        .unwrap()
}

fn builder(
    primary: &Timed,
    fallback: &Timed,
    hedging: Option<Hedging>,
) -> FailoverBuilder<String, String, Timed, TestClassifier> {
    let gate = Duration::from_secs(1);
    let builder = Failover::builder()
        .target(Target::new("primary", primary.clone()).breaker(breaker(gate, gate)))
        .target(Target::new("fallback", fallback.clone()).breaker(breaker(gate, gate)));
    match hedging {
        Some(h) => builder.hedging(h),
        None => builder,
    }
}

/// One request: who served it, and how long it took.
async fn one(svc: &Svc) -> (usize, Duration) {
    let start = Instant::now();
    let res = svc.clone().ready_oneshot_call().await;
    let by = ServedBy::of(&res).expect("served").index;
    assert!(res.status().is_success());
    res.into_body().collect().await.unwrap();
    (by, start.elapsed())
}

trait OneShot {
    fn ready_oneshot_call(
        self,
    ) -> impl Future<Output = Response<tower_levee::body::ResponseBody<String>>>;
}

impl OneShot for Svc {
    async fn ready_oneshot_call(self) -> Response<tower_levee::body::ResponseBody<String>> {
        self.oneshot(req()).await.unwrap()
    }
}

/// Sends `n` requests one after another, so the primary learns its speed.
async fn train(svc: &Svc, n: usize) {
    for _ in 0..n {
        assert_eq!(one(svc).await.0, 0);
    }
}

#[tokio::test(start_paused = true)]
async fn a_late_first_call_is_hedged_to_the_next_target_and_the_first_call_is_cancelled() {
    let (primary, fallback) = (Timed::new(500), Timed::new(100));
    let svc = failover(&primary, &fallback, Some(Hedging::new()));
    train(&svc, 30).await;
    assert_eq!(svc.handle().snapshot().hedges, Some(0));
    let delay = svc.handle().snapshot().targets[0]
        .hedge_delay
        .expect("learned");
    assert!(delay >= Duration::from_millis(500) && delay < Duration::from_millis(800));

    primary.set(10_000);
    let (by, took) = one(&svc).await;
    assert_eq!(by, 1, "the hedge to the fallback served");
    assert_eq!(took, delay + Duration::from_millis(100));
    assert_eq!(
        primary.dropped.load(Ordering::SeqCst),
        1,
        "the late call is dropped"
    );
    assert_eq!(svc.handle().snapshot().hedges, Some(1));
    // Nothing of the dropped call comes back later.
    tokio::time::advance(Duration::from_secs(20)).await;
    assert_eq!(primary.answered.load(Ordering::SeqCst), 30);
}

#[tokio::test(start_paused = true)]
async fn a_first_call_that_answers_before_its_hedge_wins_and_the_hedge_is_cancelled() {
    let (primary, fallback) = (Timed::new(500), Timed::new(5_000));
    let svc = failover(&primary, &fallback, Some(Hedging::new()));
    train(&svc, 30).await;
    let delay = svc.handle().snapshot().targets[0].hedge_delay.unwrap();
    primary.set(delay.as_millis() as u64 + 300);
    let (by, _) = one(&svc).await;
    assert_eq!(by, 0, "the first call answered first");
    assert_eq!(fallback.started(), 1, "a hedge was sent");
    assert_eq!(fallback.dropped.load(Ordering::SeqCst), 1, "and dropped");
}

#[tokio::test(start_paused = true)]
async fn without_hedging_a_slow_target_keeps_its_traffic() {
    let (primary, fallback) = (Timed::new(500), Timed::new(100));
    let svc = failover(&primary, &fallback, None);
    train(&svc, 30).await;
    primary.set(10_000);
    for _ in 0..5 {
        let (by, took) = one(&svc).await;
        assert_eq!((by, took), (0, Duration::from_secs(10)));
    }
    assert_eq!(fallback.started(), 0);
    assert_eq!(svc.handle().snapshot().hedges, None);
}

/// Sends a request every 100 ms (each on its own task) for `run`: each
/// request's (sent at, served by, latency).
async fn drive(svc: &Svc, run: Duration) -> Vec<(Duration, usize, Duration)> {
    let start = Instant::now();
    let log = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    while start.elapsed() < run {
        let (svc, log) = (svc.clone(), log.clone());
        let at = start.elapsed();
        tasks.push(tokio::spawn(async move {
            let (by, took) = one(&svc).await;
            log.lock().unwrap().push((at, by, took));
        }));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for t in tasks {
        t.await.unwrap();
    }
    let mut log = log.lock().unwrap().clone();
    log.sort_by_key(|r| r.0);
    log
}

#[tokio::test(start_paused = true)]
async fn a_slow_target_is_demoted_within_a_few_calls_and_back_within_seconds_of_recovering() {
    let (primary, fallback) = (Timed::new(800), Timed::new(500));
    let svc = failover(&primary, &fallback, Some(Hedging::new()));
    train(&svc, 30).await;
    primary.set(9_600);
    let slow = drive(&svc, Duration::from_secs(20)).await;
    let slow_calls = primary.started();
    let hedges = svc.handle().snapshot().hedges.unwrap();
    primary.set(800);
    let after = drive(&svc, Duration::from_secs(10)).await;

    // Every request of the slowdown waited at most the hedge delay plus
    // the fallback's latency.
    let worst = slow.iter().map(|r| r.2).max().unwrap();
    assert!(worst <= Duration::from_millis(1700), "worst {worst:?}");
    // After the first second the primary was demoted: its calls are the
    // trials only, about one per demotion.
    let primary_calls = slow_calls - 30;
    assert!(
        primary_calls <= 24,
        "{primary_calls} calls to the slow primary"
    );
    println!("slow primary: {primary_calls} calls, {hedges} hedges, worst {worst:?}");
    assert!(hedges <= 30, "{hedges} hedges");
    // Back on the primary within about 2 s of recovering.
    let back = after
        .iter()
        .find(|r| r.1 == 0)
        .expect("the primary serves again");
    assert!(
        back.0 <= Duration::from_millis(2500),
        "back at {:?}",
        back.0
    );
    let tail = after.iter().filter(|r| r.0 >= Duration::from_secs(5));
    assert!(
        tail.clone().all(|r| r.1 == 0),
        "the primary serves everything again"
    );
    assert!(!svc.handle().snapshot().targets[0].demoted);
}

#[tokio::test(start_paused = true)]
async fn a_shadow_probe_in_time_brings_a_demoted_target_back_with_no_caller_waiting_on_it() {
    let (primary, fallback) = (Timed::new(800), Timed::new(500));
    // Demoted for a minute: no trial is due within the test unless a copy
    // finds the primary fast again.
    let minute = Duration::from_secs(60);
    let hedging = Hedging::new().demotion(minute).max_demotion(minute);
    let svc = with_copies(&primary, &fallback, hedging);
    train(&svc, 30).await;
    assert_eq!(primary.copies(), 0, "no copy while the primary is in time");

    primary.set(9_600);
    drive(&svc, Duration::from_secs(10)).await;
    assert!(svc.handle().snapshot().targets[0].demoted);
    let copies = primary.copies();
    // The first copy at once, then at most one a second (a tenth of the
    // requests passed over), a copy in flight kept until it is late.
    assert!((1..=11).contains(&copies), "{copies} copies while slow");
    let callers = primary.callers();

    primary.set(800);
    let after = drive(&svc, Duration::from_secs(5)).await;
    let back = after
        .iter()
        .find(|r| r.1 == 0)
        .expect("the primary serves again");
    // The next copy goes within a second of recovering and answers in
    // 800 ms: its trial is due, and the request after it, the trial, is
    // the primary's.
    assert!(
        back.0 <= Duration::from_millis(2000),
        "back at {:?}",
        back.0
    );
    assert!(primary.copies() > copies, "a copy found it");
    // No caller waited on the primary to learn it: every caller's call to
    // it came after it was back, and was served by it.
    let served = after.iter().filter(|r| r.1 == 0).count();
    assert_eq!(primary.callers() - callers, served);
    let worst = after.iter().map(|r| r.2).max().unwrap();
    assert!(worst <= Duration::from_millis(1000), "worst {worst:?}");
    assert!(!svc.handle().snapshot().targets[0].demoted);
}

#[tokio::test(start_paused = true)]
async fn a_request_hedged_from_a_target_it_demotes_sends_that_target_no_copy() {
    let (primary, fallback) = (Timed::new(800), Timed::new(500));
    let svc = with_copies(&primary, &fallback, Hedging::new());
    train(&svc, 30).await;
    primary.set(9_600);
    // Three late calls in a row, each hedged: the third demotes the
    // primary while its own call is still there.
    for _ in 0..3 {
        assert_eq!(one(&svc).await.0, 1, "the hedge served");
    }
    assert!(svc.handle().snapshot().targets[0].demoted);
    assert_eq!(
        primary.copies(),
        0,
        "its call is in flight: no copy beside it"
    );
    // The next request passes it over: that one sends the first copy.
    assert_eq!(one(&svc).await.0, 1);
    assert_eq!(primary.copies(), 1);
}

#[tokio::test(start_paused = true)]
async fn dropping_a_hedged_request_cancels_both_calls() {
    let (primary, fallback) = (Timed::new(500), Timed::new(500));
    let svc = failover(&primary, &fallback, Some(Hedging::new()));
    train(&svc, 30).await;
    primary.set(10_000);
    fallback.set(10_000);
    let call = tokio::spawn(async move { one(&svc).await });
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(fallback.started(), 1, "hedged");
    call.abort();
    let _ = call.await;
    assert_eq!(primary.dropped.load(Ordering::SeqCst), 1);
    assert_eq!(fallback.dropped.load(Ordering::SeqCst), 1);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// However slow the primary turns, hedges never exceed the burst plus
    /// the ratio of successes.
    #[test]
    fn hedges_stay_within_their_budget(
        ratio in 0.0f64..0.3,
        burst in 0u32..8,
        slow in proptest::collection::vec(any::<bool>(), 10..60),
    ) {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        rt.block_on(async {
            let (primary, fallback) = (Timed::new(300), Timed::new(100));
            // Never demoted: every slow call is a candidate for a hedge.
            let hedging = Hedging::new().ratio(ratio).burst(burst).demote_after(u32::MAX);
            let svc = failover(&primary, &fallback, Some(hedging));
            train(&svc, 30).await;
            for &s in &slow {
                primary.set(if s { 5_000 } else { 300 });
                one(&svc).await;
            }
            let snapshot = svc.handle().snapshot();
            let hedges = snapshot.hedges.unwrap() as f64;
            let bound = f64::from(burst.max(1)) + ratio * snapshot.served as f64;
            prop_assert!(hedges <= bound, "{hedges} hedges, bound {bound}");
            Ok(())
        })?;
    }
}

/// Two accounts in one pool, one persistently slower (in time for its own
/// usual speed, so never late): each's share of `n` requests sent one
/// after another.
async fn pool_shares(hedging: Option<Hedging>, n: usize) -> (usize, usize) {
    let (fast, slow) = (Timed::new(500), Timed::new(800));
    let gate = Duration::from_secs(1);
    let builder = Failover::builder()
        .target(
            Target::new("fast", fast.clone())
                .breaker(breaker(gate, gate))
                .pool("accounts"),
        )
        .target(
            Target::new("slow", slow.clone())
                .breaker(breaker(gate, gate))
                .pool("accounts"),
        );
    let svc: Svc = match hedging {
        Some(h) => builder.hedging(h),
        None => builder,
    }
    .build()
    .unwrap();
    for _ in 0..n {
        one(&svc).await;
    }
    (fast.started(), slow.started())
}

#[tokio::test(start_paused = true)]
async fn with_hedging_a_pool_sends_most_requests_to_its_faster_member() {
    let (fast, slow) = pool_shares(Some(Hedging::new()), 300).await;
    println!("with hedging: fast {fast}, slow {slow}");
    assert!(fast >= 240, "fast {fast}, slow {slow}");
    // The slower one is still tried now and then, as its average fades.
    assert!(slow >= 3, "fast {fast}, slow {slow}");
    let (fast, slow) = pool_shares(None, 300).await;
    println!("without: fast {fast}, slow {slow}");
    assert!((120..=180).contains(&fast), "fast {fast}, slow {slow}");
}
