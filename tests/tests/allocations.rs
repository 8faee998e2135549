//! The hot paths allocate nothing: a call through a closed breaker (once
//! its clone knows the URI), through the quick-start stack (retry budget →
//! bulkhead → breaker) and through a failover (`ServedBy` travels in the
//! body, each target's future inside the failover's); a refusal by an open
//! breaker, a closed gate or a park allocates only the boxed error every
//! tower error is. A failover passing over a refusing target to the next
//! allocates only its list of refusals. A failover over boxed targets
//! allocates the boxed future, and nothing else.

use std::convert::Infallible;
use std::future::{Ready, ready};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, Uri};
use http_body_util::Empty;
use levee_core::breaker::{BreakerConfig, Cooldown};
use tower::{Layer, Service, ServiceExt};
use tower_levee::breaker::{BreakerLayer, CircuitOpen, FleetUpdate, Parked, Throttled};
use tower_levee::bulkhead::BulkheadLayer;
use tower_levee::failover::{Failover, ServedBy, Target};
use tower_levee::retry::RetryBudgetLayer;

#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

/// Answers 200 at once and allocates nothing.
#[derive(Clone, Copy, Debug)]
struct Bare;

impl Service<Request<()>> for Bare {
    type Response = Response<Empty<Bytes>>;
    type Error = Infallible;
    type Future = Ready<Result<Self::Response, Infallible>>;
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }
    fn call(&mut self, _: Request<()>) -> Self::Future {
        ready(Ok(Response::new(Empty::new())))
    }
}

/// A request whose URI shares a static buffer (cloning it allocates nothing).
fn request(uri: &Uri) -> Request<()> {
    let mut req = Request::new(());
    *req.uri_mut() = uri.clone();
    req
}

/// Heap allocations made by `calls` calls through `svc`, after a warm-up.
fn allocations_per_call<S>(mut svc: S, uri: &Uri, calls: u64) -> f64
where
    S: Service<Request<()>>,
    S::Error: std::fmt::Debug,
{
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(async {
        for _ in 0..10 {
            let _ = svc.ready().await.unwrap().call(request(uri)).await;
        }
        let before = dhat::HeapStats::get().total_blocks;
        for _ in 0..calls {
            let res = svc.ready().await.unwrap().call(request(uri)).await;
            std::hint::black_box(res.is_ok());
        }
        (dhat::HeapStats::get().total_blocks - before) as f64 / calls as f64
    })
}

// Run without the test harness (`harness = false`): dhat counts every
// thread's allocations, and libtest's own threads allocate now and then
// while a test runs (seen on a loaded machine as a few blocks per thousand
// calls). Here the calls measured are all there is.
fn main() {
    the_breakers_hot_paths_allocate_nothing_but_the_error();
    println!("test the_breakers_hot_paths_allocate_nothing_but_the_error ... ok");
    a_failovers_success_allocates_nothing();
    println!("test a_failovers_success_allocates_nothing ... ok");
    passing_over_a_refusing_target_allocates_only_the_list_of_refusals();
    println!("test passing_over_a_refusing_target_allocates_only_the_list_of_refusals ... ok");
    the_quick_start_stacks_success_allocates_nothing();
    println!("test the_quick_start_stacks_success_allocates_nothing ... ok");
    a_fleet_attached_adds_no_allocation_to_a_closed_call();
    println!("test a_fleet_attached_adds_no_allocation_to_a_closed_call ... ok");
}

fn a_fleet_attached_adds_no_allocation_to_a_closed_call() {
    let _profiler = dhat::Profiler::builder().testing().build();
    let openai = Uri::from_static("https://api.openai.com/v1/chat/completions");
    // The fleet's task on its own runtime, connected before the count.
    let fleet_runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_time()
        .build()
        .unwrap();
    let layer = BreakerLayer::new();
    let fleet = {
        let _entered = fleet_runtime.enter();
        // Idle while counting: no sweep falls inside the count.
        levee_redis::Fleet::builder()
            .sweep_every(Duration::from_secs(3600))
            .attach(&layer.handle())
            .spawn(levee_redis::MemoryStore::new())
            .unwrap()
    };
    while !fleet.status().connected {
        std::thread::sleep(Duration::from_millis(1));
    }
    let calls = 1000;
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let mut svc = layer.layer(Bare);
    let per_call = rt.block_on(async {
        for _ in 0..10 {
            let _ = svc.ready().await.unwrap().call(request(&openai)).await;
        }
        let before = dhat::HeapStats::get().total_blocks;
        for _ in 0..calls {
            let res = svc.ready().await.unwrap().call(request(&openai)).await;
            std::hint::black_box(res.is_ok());
        }
        (dhat::HeapStats::get().total_blocks - before) as f64 / calls as f64
    });
    assert_eq!(per_call, 0.0, "closed, with a fleet attached");
    assert!(fleet.status().connected);
    drop(fleet);
}

fn a_failovers_success_allocates_nothing() {
    let _profiler = dhat::Profiler::builder().testing().build();
    let openai = Uri::from_static("https://api.openai.com/v1/chat/completions");
    let one = Failover::builder()
        .target(Target::new("primary", Bare))
        .build()
        .unwrap();
    let two = Failover::builder()
        .target(Target::new("primary", Bare).provider("openai"))
        .target(Target::new("backup", Bare).provider("anthropic"))
        .build()
        .unwrap();
    // Check the answer carries who served it, without an extension.
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let res = rt.block_on(two.clone().oneshot(request(&openai))).unwrap();
    assert_eq!(ServedBy::of(&res).map(|s| s.target), Some("primary"));
    assert!(res.extensions().is_empty());
    for (name, svc) in [("one target", one), ("two targets", two)] {
        assert_eq!(allocations_per_call(svc, &openai, 1000), 0.0, "{name}");
    }
    // Targets of different types, boxed: the boxed future, nothing else.
    let boxed = Failover::builder()
        .target(Target::new("primary", Bare).boxed())
        .target(
            Target::new(
                "backup",
                tower::service_fn(|_: Request<()>| {
                    ready(Ok::<_, Infallible>(Response::new(Empty::<Bytes>::new())))
                }),
            )
            .boxed(),
        )
        .build()
        .unwrap();
    assert_eq!(
        allocations_per_call(boxed, &openai, 1000),
        1.0,
        "boxed targets: the boxed future only"
    );
}

/// A failover passing over a throttled, parked or open target to serve
/// from the next: the refusal is read, not boxed, and noted in the list
/// that a request no target takes is answered with (one allocation, the
/// list's, which a success drops).
fn passing_over_a_refusing_target_allocates_only_the_list_of_refusals() {
    let _profiler = dhat::Profiler::builder().testing().build();
    let openai = Uri::from_static("https://api.openai.com/v1/chat/completions");
    let wait = Duration::from_secs(3600);
    let gated = FleetUpdate::Gated {
        scope: "api.openai.com",
        wait,
        reason: "status:429",
    };
    let parked = FleetUpdate::Parked {
        scope: "api.openai.com",
        wait,
        reason: "quota:insufficient_quota",
    };
    for what in ["throttled", "parked", "open"] {
        let failover = Failover::builder()
            .target(Target::new("primary", Bare))
            .target(Target::new("backup", Bare))
            .build()
            .unwrap();
        let handle = failover.handle();
        let primary = handle.breaker("primary").expect("a target");
        match what {
            "throttled" => assert!(primary.adopt(gated)),
            "parked" => assert!(primary.adopt(parked)),
            _ => primary.open("api.openai.com"),
        }
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let res = rt.block_on(failover.clone().oneshot(request(&openai)));
        let served = res.as_ref().ok().and_then(ServedBy::of).map(|s| s.target);
        assert_eq!(served, Some("backup"), "{what}");
        assert_eq!(allocations_per_call(failover, &openai, 1000), 1.0, "{what}");
    }
}

fn the_quick_start_stacks_success_allocates_nothing() {
    let _profiler = dhat::Profiler::builder().testing().build();
    let openai = Uri::from_static("https://api.openai.com/v1/chat/completions");
    let stack = tower::ServiceBuilder::new()
        .layer(RetryBudgetLayer::with_defaults())
        .layer(BulkheadLayer::named("llm", 64))
        .layer(BreakerLayer::new())
        .service(Bare);
    assert_eq!(
        allocations_per_call(stack, &openai, 1000),
        0.0,
        "retry budget -> bulkhead -> breaker"
    );
}

fn the_breakers_hot_paths_allocate_nothing_but_the_error() {
    let _profiler = dhat::Profiler::builder().testing().build();
    let openai = Uri::from_static("https://api.openai.com/v1/chat/completions");
    let azure = Uri::from_static(
        "https://res.openai.azure.com/openai/deployments/gpt-4o-prod/chat/completions?api-version=2024-10-21",
    );

    assert_eq!(
        allocations_per_call(Bare, &openai, 1000),
        0.0,
        "the bare service"
    );
    for uri in [&openai, &azure] {
        let closed = BreakerLayer::new().layer(Bare);
        assert_eq!(
            allocations_per_call(closed, uri, 1000),
            0.0,
            "closed, {uri}"
        );
    }

    // A rolling window records every success (it counts calls): on the
    // thread's stripe of its bucket, with no copy of its key and no
    // allocation (the stripes are made once, by the domain's first).
    let rolling = BreakerConfig::builder()
        .rolling(Duration::from_secs(30), 5, 0.2)
        .build()
        .unwrap();
    let layer = BreakerLayer::builder().breaker(rolling).build().unwrap();
    assert_eq!(
        allocations_per_call(layer.layer(Bare), &openai, 1000),
        0.0,
        "closed, rolling window"
    );

    let config = BreakerConfig::builder()
        .cooldown(Cooldown::fixed(Duration::from_secs(3600)))
        .build()
        .unwrap();
    let layer = BreakerLayer::builder().breaker(config).build().unwrap();
    layer.handle().open("api.openai.com");
    let open = layer.layer(Bare);
    // Check the refusal is the one measured.
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let err = rt
        .block_on(open.clone().oneshot(request(&openai)))
        .unwrap_err();
    assert!(err.is::<CircuitOpen>());
    assert_eq!(
        allocations_per_call(open, &openai, 1000),
        1.0,
        "an open breaker's refusal: the boxed error only"
    );

    // A closed gate's refusal and a park's, their scope names held in the
    // error rather than copied into an allocation of their own.
    let wait = Duration::from_secs(3600);
    for (update, what) in [
        (
            FleetUpdate::Gated {
                scope: "api.openai.com",
                wait,
                reason: "status:429",
            },
            "a gate's refusal",
        ),
        (
            FleetUpdate::Parked {
                scope: "api.openai.com",
                wait,
                reason: "quota:insufficient_quota",
            },
            "a park's refusal",
        ),
    ] {
        let layer = BreakerLayer::new();
        assert!(layer.handle().adopt(update));
        let refusing = layer.layer(Bare);
        let err = rt
            .block_on(refusing.clone().oneshot(request(&openai)))
            .unwrap_err();
        assert!(err.is::<Throttled>() || err.is::<Parked>(), "{what}: {err}");
        assert_eq!(
            allocations_per_call(refusing, &openai, 1000),
            1.0,
            "{what}: the boxed error only"
        );
    }
}
