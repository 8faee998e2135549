//! The breaker layer's cost per call, next to the bare service and peers.
//! `move-only-same-size` is a layer that does nothing but carry a response
//! future as large as the breaker's: the part of the cost that is moving it.
//! `scope-floor` is the least a breaker keyed by the provider's scope does
//! (`common::scope_floor`): what `levee-closed` is read against, beside
//! failsafe's one state for everything.
//!
//! Run: `cargo bench -p benches --bench breaker`. Figures are ns per call;
//! compare within one run (the machine is shared and noisy). The request is
//! built inside every iteration, for every variant alike.
#![allow(missing_docs)]

mod common;
use common::failsafe::Failsafe;
use common::scope_floor::ScopeFloor;
use common::{Bare, contended, single_thread};

use std::task::{Context, Poll};
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use http::Request;
use tower::{Layer, Service};
use tower_levee::breaker::BreakerLayer;

/// A layer that does nothing but carry a future as large as the breaker's:
/// the floor a response future of that size costs to move around.
#[derive(Clone, Copy, Debug)]
struct SameSize<S>(S);

type LeveeFuture = <tower_levee::breaker::Breaker<Bare> as Service<Request<()>>>::Future;
type BareFuture = <Bare as Service<Request<()>>>::Future;
const PAD: usize = std::mem::size_of::<LeveeFuture>() - std::mem::size_of::<BareFuture>();

pin_project_lite::pin_project! {
    struct Padded<F> {
        #[pin]
        inner: F,
        pad: [u8; PAD],
    }
}

impl<F: std::future::Future> std::future::Future for Padded<F> {
    type Output = F::Output;
    fn poll(self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        std::hint::black_box(this.pad);
        this.inner.poll(cx)
    }
}

impl<S: Service<Request<()>>> Service<Request<()>> for SameSize<S> {
    type Response = S::Response;
    type Error = S::Error;
    type Future = Padded<S::Future>;
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.0.poll_ready(cx)
    }
    fn call(&mut self, req: Request<()>) -> Self::Future {
        Padded {
            inner: self.0.call(req),
            pad: std::hint::black_box([0; PAD]),
        }
    }
}

fn levee_closed() -> tower_levee::breaker::Breaker<Bare> {
    BreakerLayer::new().layer(Bare)
}

/// The fleet's task runs here, apart from the calls measured.
static FLEET_RUNTIME: std::sync::LazyLock<tokio::runtime::Runtime> =
    std::sync::LazyLock::new(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_time()
            .build()
            .unwrap()
    });

/// Closed, with a fleet attached and connected (to the simulated store):
/// the fleet hears transitions only, so a closed call must cost the same.
fn levee_closed_with_fleet() -> tower_levee::breaker::Breaker<Bare> {
    let layer = BreakerLayer::new();
    let _runtime = FLEET_RUNTIME.enter();
    let fleet = levee_redis::Fleet::builder()
        .attach(&layer.handle())
        .spawn(levee_redis::MemoryStore::new())
        .unwrap();
    while !fleet.status().connected {
        std::thread::sleep(Duration::from_millis(1));
    }
    // Kept running for the whole bench.
    std::mem::forget(fleet);
    layer.layer(Bare)
}

/// Open with a cool-off (as after failures) that outlasts the run: every
/// call is refused, and each refusal compares the clock to the deadline.
fn levee_open() -> tower_levee::breaker::Breaker<Bare> {
    let config = levee_core::breaker::BreakerConfig::builder()
        .cooldown(levee_core::breaker::Cooldown::fixed(Duration::from_secs(
            3600,
        )))
        .build()
        .unwrap();
    let layer = BreakerLayer::builder().breaker(config).build().unwrap();
    layer.handle().open("api.openai.com");
    layer.layer(Bare)
}

/// A closed throttle gate on `scope` (as a provider's 429 leaves one) that
/// outlasts the run.
fn levee_gated(scope: &str) -> tower_levee::breaker::Breaker<Bare> {
    let layer = BreakerLayer::new();
    layer
        .handle()
        .adopt(tower_levee::breaker::FleetUpdate::Gated {
            scope,
            wait: Duration::from_secs(3600),
            reason: "status:429",
        });
    layer.layer(Bare)
}

type Resilience = tower_resilience::circuitbreaker::CircuitBreaker<
    Bare,
    tower_resilience::circuitbreaker::DefaultClassifier,
>;

fn resilience() -> Resilience {
    tower_resilience::circuitbreaker::CircuitBreakerLayer::builder()
        .build()
        .unwrap()
        .layer(Bare)
}

fn failsafe_breaker() -> Failsafe<Bare> {
    Failsafe::consecutive5(Bare)
}

fn benches(c: &mut Criterion) {
    single_thread(c, "breaker", "bare", Bare);
    single_thread(c, "breaker", "move-only-same-size", SameSize(Bare));
    single_thread(c, "breaker", "levee-closed", levee_closed());
    single_thread(
        c,
        "breaker",
        "levee-closed-fleet",
        levee_closed_with_fleet(),
    );
    single_thread(c, "breaker", "levee-open-rejecting", levee_open());
    // Another scope gated: this one's calls still go through.
    single_thread(
        c,
        "breaker",
        "levee-closed-other-gated",
        levee_gated("api.anthropic.com"),
    );
    single_thread(
        c,
        "breaker",
        "levee-gated-rejecting",
        levee_gated("api.openai.com"),
    );
    single_thread(c, "breaker", "tower-resilience", resilience());
    single_thread(c, "breaker", "failsafe", failsafe_breaker());
    single_thread(c, "breaker", "scope-floor", ScopeFloor::new(Bare));

    contended(c, "breaker", "bare", Bare);
    contended(c, "breaker", "move-only-same-size", SameSize(Bare));
    contended(c, "breaker", "levee-closed", levee_closed());
    contended(
        c,
        "breaker",
        "levee-closed-fleet",
        levee_closed_with_fleet(),
    );
    contended(c, "breaker", "levee-open-rejecting", levee_open());
    contended(
        c,
        "breaker",
        "levee-closed-other-gated",
        levee_gated("api.anthropic.com"),
    );
    contended(
        c,
        "breaker",
        "levee-gated-rejecting",
        levee_gated("api.openai.com"),
    );
    contended(c, "breaker", "tower-resilience", resilience());
    contended(c, "breaker", "failsafe", failsafe_breaker());
    contended(c, "breaker", "scope-floor", ScopeFloor::new(Bare));
}

criterion_group! {
    name = group;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = benches
}
criterion_main!(group);
