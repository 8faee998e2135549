//! The breaker layer's cost per call, next to the bare service and peers.
//!
//! Run: `cargo bench -p benches --bench breaker`. Figures are ns per call;
//! compare within one run (the machine is shared and noisy). The request is
//! built inside every iteration, for every variant alike.
#![allow(missing_docs)]

use std::convert::Infallible;
use std::future::{Ready, ready};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use criterion::{Criterion, criterion_group, criterion_main};
use http::{Request, Response, Uri};
use http_body_util::Empty;
use tower::{Layer, Service, ServiceExt};
use tower_levee::breaker::BreakerLayer;

const URI: &str = "https://api.openai.com/v1/chat/completions";

/// The bare inner service: answers 200 at once.
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

/// failsafe's future-aware breaker as a tower service.
#[derive(Clone, Debug)]
struct Failsafe<S> {
    inner: S,
    breaker: failsafe::StateMachine<
        failsafe::failure_policy::ConsecutiveFailures<failsafe::backoff::EqualJittered>,
        (),
    >,
}

impl<S> Service<Request<()>> for Failsafe<S>
where
    S: Service<Request<()>>,
{
    type Response = S::Response;
    type Error = failsafe::Error<S::Error>;
    type Future = failsafe::futures::ResponseFuture<
        S::Future,
        failsafe::failure_policy::ConsecutiveFailures<failsafe::backoff::EqualJittered>,
        (),
        failsafe::Any,
    >;
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(failsafe::Error::Inner)
    }
    fn call(&mut self, req: Request<()>) -> Self::Future {
        use failsafe::futures::CircuitBreaker;
        self.breaker.call(self.inner.call(req))
    }
}

static PARSED: std::sync::LazyLock<Uri> = std::sync::LazyLock::new(|| Uri::from_static(URI));

/// A request to a pre-parsed URI (cloning a static `Uri` copies no bytes).
fn request() -> Request<()> {
    let mut req = Request::new(());
    *req.uri_mut() = PARSED.clone();
    req
}

async fn one<S>(svc: &mut S)
where
    S: Service<Request<()>>,
    S::Error: std::fmt::Debug,
{
    let res = svc.ready().await.unwrap().call(request()).await;
    std::hint::black_box(res.is_ok());
}

fn single_thread<S>(c: &mut Criterion, name: &str, mut svc: S)
where
    S: Service<Request<()>> + 'static,
    S::Error: std::fmt::Debug,
{
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    c.bench_function(&format!("breaker/1-thread/{name}"), |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let start = Instant::now();
                for _ in 0..iters {
                    one(&mut svc).await;
                }
                start.elapsed()
            })
        })
    });
}

/// 64 tasks on a 2-thread runtime, each with its own clone, `calls` each:
/// reports the wall time per call.
fn contended<S>(c: &mut Criterion, name: &str, svc: S)
where
    S: Service<Request<()>> + Clone + Send + 'static,
    S::Future: Send,
    S::Error: std::fmt::Debug,
{
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    c.bench_function(&format!("breaker/64-tasks-2-threads/{name}"), |b| {
        b.iter_custom(|iters| {
            let per_task = (iters / 64).max(1);
            let start = Instant::now();
            rt.block_on(async {
                let tasks: Vec<_> = (0..64)
                    .map(|_| {
                        let mut svc = svc.clone();
                        tokio::spawn(async move {
                            for _ in 0..per_task {
                                one(&mut svc).await;
                            }
                        })
                    })
                    .collect();
                for t in tasks {
                    t.await.unwrap();
                }
            });
            // Scale to `iters` calls so criterion's per-iteration figure is per call.
            start
                .elapsed()
                .mul_f64(iters as f64 / (per_task * 64) as f64)
        })
    });
}

fn levee_closed() -> tower_levee::breaker::Breaker<Bare> {
    BreakerLayer::new().layer(Bare)
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
    let backoff =
        failsafe::backoff::equal_jittered(Duration::from_secs(30), Duration::from_secs(900));
    let policy = failsafe::failure_policy::consecutive_failures(5, backoff);
    Failsafe {
        inner: Bare,
        breaker: failsafe::Config::new().failure_policy(policy).build(),
    }
}

fn benches(c: &mut Criterion) {
    single_thread(c, "bare", Bare);
    single_thread(c, "levee-closed", levee_closed());
    single_thread(c, "levee-open-rejecting", levee_open());
    single_thread(c, "tower-resilience", resilience());
    single_thread(c, "failsafe", failsafe_breaker());

    contended(c, "bare", Bare);
    contended(c, "levee-closed", levee_closed());
    contended(c, "levee-open-rejecting", levee_open());
    contended(c, "tower-resilience", resilience());
    contended(c, "failsafe", failsafe_breaker());
}

criterion_group! {
    name = group;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = benches
}
criterion_main!(group);
