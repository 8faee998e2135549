//! The least a failover can do on its primary's success path, as a
//! reference for what `Failover` costs over the breaker it wraps: call the
//! first target, keep a handle on the router's state for the answer (as any
//! router that may move on must), and count the success. No choice, no
//! peek, no tag, no span, no copy of the request: not a failover, a floor.
//! Like `Failover`, each clone counts references on a handle of its own, so
//! clones on different threads share no line that every call writes.
//! Shared by the criterion benches and the instruction counts (`percall`).
//!
//! [`FirstTarget::without_handle`] is the same floor with a `&'static`
//! counter in place of the reference-counted handle, so that one run shows
//! what the handle's clone and drop per call cost (a failover cannot do
//! without it unless its state outlives every request, i.e. is leaked).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll, ready};

use http::Response;
use pin_project_lite::pin_project;
use tower::Service;

/// Where the floor counts successes: a handle each call clones and drops,
/// or a counter no call holds a reference on.
pub trait Served: Sized {
    /// A counter of a clone's own.
    fn fresh() -> Self;
    /// What a call's future holds.
    fn for_call(&self) -> Self;
    /// The counter a success is added to.
    fn counter(&self) -> &AtomicU64;
}

impl Served for Arc<AtomicU64> {
    fn fresh() -> Self {
        Arc::new(AtomicU64::new(0))
    }
    fn for_call(&self) -> Self {
        self.clone()
    }
    fn counter(&self) -> &AtomicU64 {
        self
    }
}

impl Served for &'static AtomicU64 {
    fn fresh() -> Self {
        Box::leak(Box::new(AtomicU64::new(0)))
    }
    fn for_call(&self) -> Self {
        self
    }
    fn counter(&self) -> &AtomicU64 {
        self
    }
}

/// Calls its one target and counts its successes.
#[derive(Debug)]
pub struct FirstTarget<S, H = Arc<AtomicU64>> {
    target: S,
    served: H,
}

impl<S> FirstTarget<S> {
    /// `target` behind the floor, its successes counted on a handle.
    pub fn new(target: S) -> Self {
        FirstTarget {
            target,
            served: Served::fresh(),
        }
    }
}

impl<S> FirstTarget<S, &'static AtomicU64> {
    /// `target` behind the floor, its successes counted on a leaked counter.
    pub fn without_handle(target: S) -> Self {
        FirstTarget {
            target,
            served: Served::fresh(),
        }
    }
}

impl<S: Clone, H: Served> Clone for FirstTarget<S, H> {
    /// A counter of the clone's own, as `Failover`'s clones have.
    fn clone(&self) -> Self {
        FirstTarget {
            target: self.target.clone(),
            served: H::fresh(),
        }
    }
}

pin_project! {
    /// The target's future, and the handle its success is counted on.
    pub struct FirstTargetFuture<F, H> {
        #[pin]
        future: F,
        served: H,
    }
}

impl<F, H, B, E> Future for FirstTargetFuture<F, H>
where
    F: Future<Output = Result<Response<B>, E>>,
    H: Served,
{
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let result = ready!(this.future.poll(cx));
        if result.as_ref().is_ok_and(|r| r.status().is_success()) {
            this.served.counter().fetch_add(1, Ordering::Relaxed);
        }
        Poll::Ready(result)
    }
}

impl<S, H, R, B> Service<R> for FirstTarget<S, H>
where
    S: Service<R, Response = Response<B>>,
    H: Served,
{
    type Response = Response<B>;
    type Error = S::Error;
    type Future = FirstTargetFuture<S::Future, H>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.target.poll_ready(cx)
    }

    fn call(&mut self, request: R) -> Self::Future {
        FirstTargetFuture {
            future: self.target.call(request),
            served: self.served.for_call(),
        }
    }
}
