//! The failover's cost per call on the primary's success path, next to the
//! breaker alone.
//!
//! Run: `cargo bench -p benches --bench failover`. Figures are ns per call;
//! compare within one run (the machine is shared and noisy).
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
use tower_levee::failover::{Failover, Target};

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

static PARSED: std::sync::LazyLock<Uri> = std::sync::LazyLock::new(|| Uri::from_static(URI));

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
    c.bench_function(&format!("failover/1-thread/{name}"), |b| {
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

/// 64 tasks on a 2-thread runtime, each with its own clone.
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
    c.bench_function(&format!("failover/64-tasks-2-threads/{name}"), |b| {
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
            start
                .elapsed()
                .mul_f64(iters as f64 / (per_task * 64) as f64)
        })
    });
}

fn breaker() -> tower_levee::breaker::Breaker<Bare> {
    BreakerLayer::new().layer(Bare)
}

/// `n` targets, the primary healthy (and warmed so its domain is tracked).
fn failover(n: usize) -> Failover<(), Empty<Bytes>> {
    let mut b = Failover::builder();
    for i in 0..n {
        b = b.target(Target::new(format!("t{i}"), Bare));
    }
    b.build().unwrap()
}

/// Two targets, the primary's breaker open: every call skips it.
fn failover_primary_open() -> Failover<(), Empty<Bytes>> {
    let f = failover(2);
    f.handle().breaker("t0").unwrap().isolate("api.openai.com");
    f
}

fn benches(c: &mut Criterion) {
    single_thread(c, "breaker", breaker());
    single_thread(c, "failover-1-target", failover(1));
    single_thread(c, "failover-2-targets", failover(2));
    single_thread(c, "failover-primary-open", failover_primary_open());

    contended(c, "breaker", breaker());
    contended(c, "failover-1-target", failover(1));
    contended(c, "failover-2-targets", failover(2));
    contended(c, "failover-primary-open", failover_primary_open());
}

criterion_group! {
    name = group;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1));
    targets = benches
}
criterion_main!(group);
