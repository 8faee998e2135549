//! What another replica reports, adopted through the handle: gates, parks
//! and breaker opens refuse here at once, nothing is counted, waits are
//! bounded like local ones, and every event says where it came from.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::{Request, Response};
use http_body_util::BodyExt;
use levee_core::breaker::BreakerStatus;
use levee_core::gate::GateConfig;
use tower::{BoxError, Service, ServiceBuilder, ServiceExt};
use tower_levee::breaker::{
    BreakerHandle, BreakerLayer, CircuitOpen, EventSubscriber, FleetUpdate, Origin, Parked,
    RequestHead, Throttled,
};

fn openai() -> Request<String> {
    Request::post("https://api.openai.com/v1/chat/completions")
        .body(String::new())
        .unwrap()
}

/// With no model named, the account is the failure domain, the quota
/// scope and the billing scope.
const ACCOUNT: &str = "api.openai.com";

/// Events as (mechanism, to, origin).
type Seen = Arc<Mutex<Vec<(&'static str, &'static str, Origin)>>>;

fn recorder(handle: &BreakerHandle) -> Seen {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    handle.subscribe(EventSubscriber::new(move |e| {
        s.lock()
            .unwrap()
            .push((e.mechanism().as_str(), e.to().as_str(), e.origin()));
    }));
    seen
}

/// An upstream that counts its calls and answers `status`.
fn upstream(
    calls: Arc<AtomicUsize>,
    status: u16,
) -> impl tower::Service<Request<String>, Response = Response<String>, Error = BoxError, Future: Send>
+ Clone {
    tower::service_fn(move |_req: Request<String>| {
        calls.fetch_add(1, Ordering::SeqCst);
        async move {
            Ok::<_, BoxError>(
                Response::builder()
                    .status(status)
                    .body(r#"{"id":"chatcmpl-1"}"#.to_owned())
                    .unwrap(),
            )
        }
    })
}

/// One call, its body read to the end (the outcome is recorded there).
async fn call<S>(svc: &S)
where
    S: tower::Service<Request<String>, Error = BoxError> + Clone,
    S::Response: Into<Response<tower_levee::body::ResponseBody<String>>>,
{
    let res: Response<_> = svc.clone().oneshot(openai()).await.unwrap().into();
    res.into_body().collect().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn an_adopted_gate_refuses_unsent_until_its_wait_then_admits() {
    let layer = BreakerLayer::new();
    let handle = layer.handle();
    let quota = ACCOUNT;
    let seen = recorder(&handle);
    let calls = Arc::new(AtomicUsize::new(0));
    let svc = ServiceBuilder::new()
        .layer(layer)
        .service(upstream(calls.clone(), 200));

    let wait = Duration::from_secs(30);
    assert!(handle.adopt(FleetUpdate::Gated {
        scope: quota,
        wait,
        reason: "status:429"
    }));
    let err = svc.clone().oneshot(openai()).await.unwrap_err();
    let throttled = err.downcast_ref::<Throttled>().expect("throttled");
    assert_eq!(throttled.retry_after(), wait);
    assert_eq!(calls.load(Ordering::SeqCst), 0, "refused unsent");
    assert_eq!(seen.lock().unwrap()[0], ("gate", "gated", Origin::Fleet));

    // A shorter report never shortens it; a longer one extends it.
    assert!(!handle.adopt(FleetUpdate::Gated {
        scope: quota,
        wait: Duration::from_secs(5),
        reason: "status:429"
    }));
    tokio::time::advance(wait).await;
    call(&svc).await;
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(
        handle.breaker_status("api.openai.com"),
        Some(BreakerStatus::Closed)
    );
}

#[tokio::test(start_paused = true)]
async fn a_gate_closed_after_a_clone_found_none_for_its_scope_refuses_its_next_call() {
    let layer = BreakerLayer::new();
    let handle = layer.handle();
    let calls = Arc::new(AtomicUsize::new(0));
    let mut svc = ServiceBuilder::new()
        .layer(layer)
        .service(upstream(calls.clone(), 200));
    let gate = |scope| FleetUpdate::Gated {
        scope,
        wait: Duration::from_secs(30),
        reason: "status:429",
    };
    // Another scope gated: this clone's calls look for a gate of their own
    // and find none, twice.
    assert!(handle.adopt(gate("api.anthropic.com")));
    for _ in 0..2 {
        let res = svc.ready().await.unwrap().call(openai()).await.unwrap();
        res.into_body().collect().await.unwrap();
    }
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert!(handle.adopt(gate(ACCOUNT)));
    let err = svc.ready().await.unwrap().call(openai()).await.unwrap_err();
    let throttled = err.downcast_ref::<Throttled>().expect("throttled");
    assert_eq!(throttled.scope(), ACCOUNT);
    assert_eq!(calls.load(Ordering::SeqCst), 2, "refused unsent");
}

#[tokio::test(start_paused = true)]
async fn an_adopted_gate_is_capped_at_the_gates_max_wait() {
    let gate = GateConfig::builder()
        .max_wait(Duration::from_secs(60))
        .build()
        .unwrap();
    let layer = BreakerLayer::builder().gate(gate).build().unwrap();
    let handle = layer.handle();
    let quota = ACCOUNT;
    handle.adopt(FleetUpdate::Gated {
        scope: quota,
        wait: Duration::from_secs(86_400),
        reason: "x",
    });
    let retry_after = handle.retry_after(&RequestHead::of(&openai())).unwrap();
    assert_eq!(retry_after, Duration::from_secs(60));
}

#[tokio::test(start_paused = true)]
async fn an_adopted_open_refuses_without_counting_and_the_breaker_probes_after_it() {
    let layer = BreakerLayer::new();
    let handle = layer.handle();
    let seen = recorder(&handle);
    let calls = Arc::new(AtomicUsize::new(0));
    let svc = ServiceBuilder::new()
        .layer(layer)
        .service(upstream(calls.clone(), 200));

    let wait = Duration::from_secs(10);
    assert!(handle.adopt(FleetUpdate::Opened {
        scope: "api.openai.com",
        wait,
        reason: "2 replicas"
    }));
    let err = svc.clone().oneshot(openai()).await.unwrap_err();
    assert!(err.is::<CircuitOpen>());
    assert_eq!(calls.load(Ordering::SeqCst), 0);
    assert!(
        handle
            .failure_breakdown("api.openai.com")
            .unwrap()
            .is_empty(),
        "nothing counted"
    );

    tokio::time::advance(wait).await;
    call(&svc).await;
    assert_eq!(calls.load(Ordering::SeqCst), 1, "the probe");
    assert_eq!(
        handle.breaker_status("api.openai.com"),
        Some(BreakerStatus::Closed)
    );
    let seen = seen.lock().unwrap();
    assert_eq!(seen[0], ("breaker", "open", Origin::Fleet));
    assert!(seen[1..].iter().all(|e| e.2 == Origin::Traffic), "{seen:?}");
}

#[tokio::test(start_paused = true)]
async fn a_recovery_elsewhere_ends_the_cooloff_so_the_next_call_is_a_probe() {
    let layer = BreakerLayer::new();
    let handle = layer.handle();
    let calls = Arc::new(AtomicUsize::new(0));
    let svc = ServiceBuilder::new()
        .layer(layer)
        .service(upstream(calls.clone(), 200));
    handle.adopt(FleetUpdate::Opened {
        scope: "api.openai.com",
        wait: Duration::from_secs(600),
        reason: "x",
    });
    assert!(handle.adopt(FleetUpdate::Recovered {
        scope: "api.openai.com"
    }));
    call(&svc).await;
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(
        handle.breaker_status("api.openai.com"),
        Some(BreakerStatus::Closed)
    );
    assert!(!handle.adopt(FleetUpdate::Recovered {
        scope: "unknown.example"
    }));
}

#[tokio::test(start_paused = true)]
async fn an_operators_isolate_close_and_unpark_travel_as_themselves() {
    let layer = BreakerLayer::new();
    let handle = layer.handle();
    let (domain, billing) = (ACCOUNT, ACCOUNT);
    let seen = recorder(&handle);

    assert!(handle.adopt(FleetUpdate::Isolated { scope: domain }));
    assert!(
        !handle.adopt(FleetUpdate::Recovered { scope: domain }),
        "isolation holds"
    );
    assert!(
        handle
            .admits(&RequestHead::of(&openai()))
            .unwrap_err()
            .is::<CircuitOpen>()
    );
    assert!(handle.adopt(FleetUpdate::Closed { scope: domain }));
    assert_eq!(handle.breaker_status(domain), Some(BreakerStatus::Closed));

    let wait = Duration::from_secs(3600);
    assert!(handle.adopt(FleetUpdate::Parked {
        scope: billing,
        wait,
        reason: "quota:insufficient_quota"
    }));
    let err = handle.admits(&RequestHead::of(&openai())).unwrap_err();
    assert!(err.is::<Parked>());
    assert!(handle.adopt(FleetUpdate::Unparked { scope: billing }));
    assert!(handle.admits(&RequestHead::of(&openai())).is_ok());

    // Local manual changes say so, and fleet ones say so.
    handle.open(domain);
    let seen = seen.lock().unwrap();
    let origins: Vec<_> = seen.iter().map(|e| (e.0, e.1, e.2)).collect();
    assert_eq!(
        origins,
        [
            ("breaker", "open", Origin::Fleet),
            ("breaker", "closed", Origin::Fleet),
            ("park", "parked", Origin::Fleet),
            ("park", "active", Origin::Fleet),
            ("breaker", "open", Origin::Manual),
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn a_local_throttle_is_an_event_of_traffic_origin() {
    let layer = BreakerLayer::new();
    let handle = layer.handle();
    let seen = recorder(&handle);
    let calls = Arc::new(AtomicUsize::new(0));
    let svc = ServiceBuilder::new()
        .layer(layer)
        .service(upstream(calls, 429));
    let res = svc.oneshot(openai()).await.unwrap();
    assert_eq!(res.status(), 429);
    assert_eq!(seen.lock().unwrap()[0], ("gate", "gated", Origin::Traffic));
}

#[tokio::test(start_paused = true)]
async fn an_adopted_open_never_runs_a_custom_schedule_past_its_range() {
    use levee_core::breaker::{BreakerConfig, Cooldown};
    // 2^n overflows (and panics in a debug build) long before u32::MAX.
    let schedule = Cooldown::custom(|n| Duration::from_secs(10 * 2u64.pow(n)));
    let config = BreakerConfig::builder().cooldown(schedule).build().unwrap();
    let layer = BreakerLayer::builder().breaker(config).build().unwrap();
    let handle = layer.handle();
    let wait = Duration::from_secs(30 * 24 * 3600);
    assert!(handle.adopt(FleetUpdate::Opened {
        scope: ACCOUNT,
        wait,
        reason: "x"
    }));
    let left = handle.retry_after(&RequestHead::of(&openai())).unwrap();
    assert_eq!(left, tower_levee::breaker::MAX_ADOPTED_OPEN);
}

#[tokio::test(start_paused = true)]
async fn a_subscriber_may_subscribe_another_from_its_callback() {
    let layer = BreakerLayer::new();
    let handle = layer.handle();
    let inner = handle.clone();
    let later = Arc::new(AtomicUsize::new(0));
    let count = later.clone();
    let once = std::sync::Once::new();
    handle.subscribe(EventSubscriber::new(move |_| {
        once.call_once(|| {
            let count = count.clone();
            inner.subscribe(EventSubscriber::new(move |_| {
                count.fetch_add(1, Ordering::SeqCst);
            }));
        });
    }));
    handle.open(ACCOUNT);
    handle.close(ACCOUNT);
    assert_eq!(
        later.load(Ordering::SeqCst),
        1,
        "the one added heard the next event"
    );
}

/// What a coordinated layer signals, as (kind, failures).
type Signals = Arc<Mutex<Vec<(&'static str, u32)>>>;

fn coordinated(handle: &BreakerHandle) -> Signals {
    use tower_levee::breaker::{FleetSignal, FleetSignals};
    let signals = Arc::new(Mutex::new(Vec::new()));
    let s = signals.clone();
    handle.coordinate(FleetSignals::new(move |signal| {
        let seen = match *signal {
            FleetSignal::Streak { scope, failures } => {
                assert_eq!(scope, ACCOUNT);
                ("streak", failures)
            }
            FleetSignal::ProbeWanted { scope } => {
                assert_eq!(scope, ACCOUNT);
                ("probe?", 0)
            }
            _ => ("other", 0),
        };
        s.lock().unwrap().push(seen);
    }));
    signals
}

/// A layer over an upstream whose status can change between calls.
struct Scripted<S> {
    svc: S,
    /// Upstream calls made.
    calls: Arc<AtomicUsize>,
    /// The status the upstream answers.
    status: Arc<Mutex<u16>>,
}

/// `layer` over an upstream answering `status` at first.
fn scripted(
    layer: BreakerLayer,
    status: u16,
) -> Scripted<
    tower_levee::breaker::Breaker<
        impl tower::Service<
            Request<String>,
            Response = Response<String>,
            Error = BoxError,
            Future: Send,
        > + Clone,
    >,
> {
    let (calls, status) = (Arc::new(AtomicUsize::new(0)), Arc::new(Mutex::new(status)));
    let (counted, answer) = (calls.clone(), status.clone());
    let upstream = tower::service_fn(move |_req: Request<String>| {
        counted.fetch_add(1, Ordering::SeqCst);
        let status = *answer.lock().unwrap();
        let body = if status == 200 {
            r#"{"id":"chatcmpl-1"}"#
        } else {
            ""
        };
        async move {
            Ok::<_, BoxError>(
                Response::builder()
                    .status(status)
                    .body(body.to_owned())
                    .unwrap(),
            )
        }
    });
    let svc = ServiceBuilder::new().layer(layer).service(upstream);
    Scripted { svc, calls, status }
}

#[tokio::test(start_paused = true)]
async fn a_coordinated_layer_signals_streaks_on_the_failure_path_only() {
    let layer = BreakerLayer::new();
    let handle = layer.handle();
    let signals = coordinated(&handle);
    let Scripted {
        svc,
        calls: _,
        status,
    } = scripted(layer, 200);
    for _ in 0..3 {
        call(&svc).await;
    }
    assert!(
        signals.lock().unwrap().is_empty(),
        "successes signal nothing"
    );
    *status.lock().unwrap() = 503;
    call(&svc).await;
    call(&svc).await;
    *status.lock().unwrap() = 200;
    call(&svc).await;
    call(&svc).await;
    assert_eq!(
        *signals.lock().unwrap(),
        [("streak", 1), ("streak", 2), ("streak", 0)],
        "two failures, and the success that ended them"
    );
    // The failure that opens the breaker is told too: the fleet counts it.
    signals.lock().unwrap().clear();
    *status.lock().unwrap() = 503;
    for _ in 0..5 {
        call(&svc).await;
    }
    assert_eq!(signals.lock().unwrap().last(), Some(&("streak", 5)));
    assert_eq!(handle.breaker_status(ACCOUNT), Some(BreakerStatus::Open));
}

#[tokio::test(start_paused = true)]
async fn a_coordinated_breaker_asks_once_per_cool_off_and_probes_only_when_granted() {
    let layer = BreakerLayer::new();
    let handle = layer.handle();
    let signals = coordinated(&handle);
    let Scripted { svc, calls, status } = scripted(layer, 503);
    for _ in 0..5 {
        call(&svc).await;
    }
    assert_eq!(handle.breaker_status(ACCOUNT), Some(BreakerStatus::Open));
    signals.lock().unwrap().clear();
    tokio::time::advance(Duration::from_secs(10)).await;

    // The cool-off is over: the call asks who probes, and is refused.
    let err = svc.clone().oneshot(openai()).await.unwrap_err();
    let open = err
        .downcast_ref::<CircuitOpen>()
        .expect("refused while asking");
    assert_eq!(open.retry_after(), tower_levee::breaker::FLEET_ASK_WAIT);
    assert!(svc.clone().oneshot(openai()).await.is_err());
    assert_eq!(*signals.lock().unwrap(), [("probe?", 0)], "asked once");
    assert_eq!(calls.load(Ordering::SeqCst), 5);

    // Another replica holds the probe: refused until its verdict.
    assert!(handle.adopt(FleetUpdate::ProbeHeld {
        scope: ACCOUNT,
        wait: Duration::from_secs(3),
    }));
    tokio::time::advance(Duration::from_secs(2)).await;
    assert!(svc.clone().oneshot(openai()).await.is_err());
    assert_eq!(signals.lock().unwrap().len(), 1, "no ask while held");
    tokio::time::advance(Duration::from_secs(1)).await;
    assert!(svc.clone().oneshot(openai()).await.is_err(), "asks again");
    assert_eq!(signals.lock().unwrap().len(), 2);

    // Granted: the next call is the probe, and it closes the breaker.
    assert!(handle.adopt(FleetUpdate::ProbeGranted {
        scope: ACCOUNT,
        reopens: 0,
    }));
    *status.lock().unwrap() = 200;
    call(&svc).await;
    assert_eq!(calls.load(Ordering::SeqCst), 6);
    assert_eq!(handle.breaker_status(ACCOUNT), Some(BreakerStatus::Closed));
}

#[tokio::test(start_paused = true)]
async fn a_layer_coordinated_for_streaks_only_probes_on_its_own_cool_off() {
    use tower_levee::breaker::FleetSignals;
    let layer = BreakerLayer::new();
    let handle = layer.handle();
    handle.coordinate(FleetSignals::new(|_| {}).probes(false));
    let Scripted {
        svc,
        calls: _,
        status,
    } = scripted(layer, 503);
    for _ in 0..5 {
        call(&svc).await;
    }
    tokio::time::advance(Duration::from_secs(10)).await;
    *status.lock().unwrap() = 200;
    call(&svc).await;
    assert_eq!(handle.breaker_status(ACCOUNT), Some(BreakerStatus::Closed));
}

#[tokio::test(start_paused = true)]
async fn other_replicas_failures_open_a_breaker_whose_own_last_call_failed() {
    let layer = BreakerLayer::new();
    let handle = layer.handle();
    let seen = recorder(&handle);
    let Scripted { svc, .. } = scripted(layer, 503);
    // Others fail before this replica ever called: nothing opens.
    assert!(!handle.adopt(FleetUpdate::Failing {
        scope: ACCOUNT,
        failures: 4,
    }));
    assert_eq!(handle.breaker_status(ACCOUNT), Some(BreakerStatus::Closed));
    // Its own first failure makes five.
    call(&svc).await;
    assert_eq!(handle.breaker_status(ACCOUNT), Some(BreakerStatus::Open));
    // Published as this replica's own open (its traffic took part).
    assert_eq!(
        seen.lock().unwrap().last(),
        Some(&("breaker", "open", Origin::Traffic))
    );
}

#[tokio::test(start_paused = true)]
async fn a_layer_no_longer_coordinated_probes_on_its_own_cool_off() {
    let layer = BreakerLayer::new();
    let handle = layer.handle();
    let signals = coordinated(&handle);
    let Scripted {
        svc,
        calls: _,
        status,
    } = scripted(layer, 503);
    for _ in 0..5 {
        call(&svc).await;
    }
    handle.uncoordinate();
    signals.lock().unwrap().clear();
    tokio::time::advance(Duration::from_secs(10)).await;
    *status.lock().unwrap() = 200;
    call(&svc).await;
    assert_eq!(handle.breaker_status(ACCOUNT), Some(BreakerStatus::Closed));
    assert!(signals.lock().unwrap().is_empty(), "nothing signalled");
}

#[tokio::test(start_paused = true)]
async fn streaks_are_signalled_under_consecutive_tripping_only() {
    use levee_core::breaker::{BreakerConfig, Tripping};
    let rolling = BreakerConfig::builder()
        .tripping(Tripping::Rolling {
            window: Duration::from_secs(10),
            min_calls: 100,
            failure_ratio: 0.5,
        })
        .build()
        .unwrap();
    let layer = BreakerLayer::builder().breaker(rolling).build().unwrap();
    let handle = layer.handle();
    let signals = coordinated(&handle);
    let Scripted {
        svc,
        calls,
        status: _,
    } = scripted(layer, 503);
    for _ in 0..3 {
        call(&svc).await;
    }
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    assert!(
        signals.lock().unwrap().is_empty(),
        "the fleet cannot use them"
    );
}

/// Each of `replicas` replicas spreads its calls at its share of the rate
/// a provider's headers report: calls every 100 ms for 8 s against 60 a
/// minute; how many the layer let through.
async fn admitted_sharing_with(replicas: u32) -> usize {
    let layer = BreakerLayer::new();
    let handle = layer.handle();
    if replicas > 1 {
        assert!(handle.adopt(FleetUpdate::Replicas { count: replicas }));
    }
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = calls.clone();
    let upstream = tower::service_fn(move |_req: Request<String>| {
        counted.fetch_add(1, Ordering::SeqCst);
        async move {
            Ok::<_, BoxError>(
                Response::builder()
                    .status(200)
                    .header("x-ratelimit-limit-requests", "60")
                    .header("x-ratelimit-remaining-requests", "59")
                    .header("x-ratelimit-reset-requests", "1s")
                    .body(r#"{"id":"chatcmpl-1"}"#.to_owned())
                    .unwrap(),
            )
        }
    });
    let svc = ServiceBuilder::new().layer(layer).service(upstream);
    for _ in 0..80 {
        if let Ok(res) = svc.clone().oneshot(openai()).await {
            res.into_body().collect().await.unwrap();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    calls.load(Ordering::SeqCst)
}

#[tokio::test(start_paused = true)]
async fn a_replica_of_a_fleet_spreads_its_calls_at_its_share_of_the_reported_rate() {
    let alone = admitted_sharing_with(1).await;
    let one_of_four = admitted_sharing_with(4).await;
    assert!(
        (8..=11).contains(&alone),
        "a second's worth, then one a second: {alone}"
    );
    assert!(
        (2..=4).contains(&one_of_four),
        "a quarter of the rate: {one_of_four} (alone {alone})"
    );
}
