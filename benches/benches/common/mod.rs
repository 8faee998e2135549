//! The harness the per-call benches share: a bare inner service, the
//! request, and the single-thread and 64-task runs.
#![allow(dead_code, unreachable_pub)]

pub mod failsafe;
pub mod first_target;
pub mod kept_copy;
pub mod rules;
pub mod scope_floor;

use std::convert::Infallible;
use std::future::{Ready, ready};
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::Bytes;
use criterion::Criterion;
use http::{Request, Response, Uri};
use http_body_util::Empty;
use tower::{Service, ServiceExt};

pub const URI: &str = "https://api.openai.com/v1/chat/completions";

/// The bare inner service: answers 200 at once.
#[derive(Clone, Copy, Debug)]
pub struct Bare;

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

pub fn request() -> Request<()> {
    let mut req = Request::new(());
    *req.uri_mut() = PARSED.clone();
    req
}

pub async fn one<S>(svc: &mut S)
where
    S: Service<Request<()>>,
    S::Error: std::fmt::Debug,
{
    let res = svc.ready().await.unwrap().call(request()).await;
    std::hint::black_box(res.is_ok());
}

pub fn single_thread<S>(c: &mut Criterion, group: &str, name: &str, mut svc: S)
where
    S: Service<Request<()>> + 'static,
    S::Error: std::fmt::Debug,
{
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    c.bench_function(&format!("{group}/1-thread/{name}"), |b| {
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
pub fn contended<S>(c: &mut Criterion, group: &str, name: &str, svc: S)
where
    S: Service<Request<()>> + Clone + Send + 'static,
    S::Future: Send,
    S::Error: std::fmt::Debug,
{
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    c.bench_function(&format!("{group}/64-tasks-2-threads/{name}"), |b| {
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
