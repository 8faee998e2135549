//! Overhead per call of the retry and bulkhead layers on the success path,
//! side by side with the bare service and their peers, in one run:
//!
//! - `bare`: a `service_fn` answering at once;
//! - `bare_with_request_copy`: the same, plus one clone of the request made
//!   and dropped: the floor under any layer that can replay a request;
//! - `levee_retry`: `RetryBudgetLayer` (default budget, 3 attempts);
//! - `levee_bulkhead`: `BulkheadLayer::new(1024)`;
//! - `tower_load_shed_concurrency_limit`: `load_shed().concurrency_limit(1024)`;
//! - `tower_retry_tps_budget`: `tower::retry::Retry` with a `TpsBudget` policy;
//! - `resilience_bulkhead`: tower-resilience's bulkhead (1024).
//!
//! Two groups: `single` (one task, time per call) and `contended` (64 tasks
//! on a 2-thread runtime, wall time per call).
//!
//! `cargo bench -p benches --bench retry_bulkhead -- --warm-up-time 1 --measurement-time 3`
#![allow(missing_docs)]

use std::convert::Infallible;
use std::future::{Ready, ready};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use criterion::{Criterion, criterion_group, criterion_main};
use http::{Request, Response};
use http_body_util::Full;
use tower::retry::budget::{Budget, TpsBudget};
use tower::{Layer, Service, ServiceBuilder, ServiceExt};
use tower_levee::bulkhead::BulkheadLayer;
use tower_levee::retry::RetryBudgetLayer;

// === the services ===

type Req = Request<Full<Bytes>>;
type Res = Response<Full<Bytes>>;

fn request() -> Req {
    Request::new(Full::new(Bytes::from_static(b"{}")))
}

fn bare(_: Req) -> Ready<Result<Res, Infallible>> {
    ready(Ok(Response::new(Full::new(Bytes::new()))))
}

/// The bare service plus one copy of the request, made and dropped: the
/// floor under any layer that can replay a request.
fn bare_with_request_copy(req: Req) -> Ready<Result<Res, Infallible>> {
    std::hint::black_box(req.clone());
    bare(req)
}

#[derive(Clone)]
struct TpsPolicy(Arc<TpsBudget>);

impl<E> tower::retry::Policy<Req, Res, E> for TpsPolicy {
    type Future = Ready<()>;

    fn retry(&mut self, _: &mut Req, result: &mut Result<Res, E>) -> Option<Self::Future> {
        match result {
            Ok(_) => {
                self.0.deposit();
                None
            }
            Err(_) => self.0.withdraw().then(|| ready(())),
        }
    }

    fn clone_request(&mut self, req: &Req) -> Option<Req> {
        Some(req.clone())
    }
}

/// Runs `calls` calls one after the other on `svc`.
async fn run<S>(mut svc: S, calls: u64)
where
    S: Service<Req, Response = Res>,
    S::Error: std::fmt::Debug,
{
    for _ in 0..calls {
        let response = svc.ready().await.unwrap().call(request()).await.unwrap();
        std::hint::black_box(response);
    }
}

const TASKS: u64 = 64;

macro_rules! stacks {
    ($m:ident) => {{
        $m!("bare", tower::service_fn(bare));
        $m!(
            "bare_with_request_copy",
            tower::service_fn(bare_with_request_copy)
        );
        $m!(
            "levee_retry",
            RetryBudgetLayer::with_defaults().layer(tower::service_fn(bare))
        );
        $m!(
            "levee_bulkhead",
            BulkheadLayer::new(1024).layer(tower::service_fn(bare))
        );
        $m!(
            "tower_load_shed_concurrency_limit",
            ServiceBuilder::new()
                .load_shed()
                .concurrency_limit(1024)
                .service(tower::service_fn(bare))
        );
        $m!(
            "tower_retry_tps_budget",
            tower::retry::Retry::new(
                TpsPolicy(Arc::new(TpsBudget::default())),
                tower::service_fn(bare)
            )
        );
        $m!(
            "resilience_bulkhead",
            tower_resilience::bulkhead::BulkheadLayer::builder()
                .max_concurrent_calls(1024)
                .name("bench")
                .build()
                .unwrap()
                .layer(tower::service_fn(bare))
        );
    }};
}

fn single(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut group = c.benchmark_group("retry_bulkhead/single");
    macro_rules! bench {
        ($name:expr, $svc:expr) => {{
            let svc = $svc;
            group.bench_function($name, |b| {
                b.iter_custom(|iters| {
                    let svc = svc.clone();
                    let start = Instant::now();
                    rt.block_on(run(svc, iters));
                    start.elapsed()
                })
            });
        }};
    }
    stacks!(bench);
    group.finish();
}

fn contended(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut group = c.benchmark_group("retry_bulkhead/contended_64_tasks_2_threads");
    macro_rules! bench {
        ($name:expr, $svc:expr) => {{
            let svc = $svc;
            group.bench_function($name, |b| {
                b.iter_custom(|iters| {
                    let per_task = iters.div_ceil(TASKS).max(1);
                    let elapsed = rt.block_on(async {
                        let tasks: Vec<_> = (0..TASKS).map(|_| svc.clone()).collect();
                        let start = Instant::now();
                        let handles: Vec<_> = tasks
                            .into_iter()
                            .map(|svc| tokio::spawn(run(svc, per_task)))
                            .collect();
                        for h in handles {
                            h.await.unwrap();
                        }
                        start.elapsed()
                    });
                    // Time per call, scaled back to the `iters` criterion asked for.
                    elapsed.mul_f64(iters as f64 / (per_task * TASKS) as f64)
                })
            });
        }};
    }
    stacks!(bench);
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    targets = single, contended
}
criterion_main!(benches);
