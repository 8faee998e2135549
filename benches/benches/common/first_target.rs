//! The least a failover can do on its primary's success path, as a
//! reference for what `Failover` costs over the breaker it wraps: call the
//! first target, keep a handle on the router's state for the answer (as any
//! router that may move on must), and count the success. No choice, no
//! peek, no tag, no span, no copy of the request: not a failover, a floor.
//! Like `Failover`, each clone counts references on a handle of its own, so
//! clones on different threads share no line that every call writes.
//! Shared by the criterion benches and the instruction counts (`percall`).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll, ready};

use http::Response;
use pin_project_lite::pin_project;
use tower::Service;

/// Calls its one target and counts its successes.
#[derive(Debug)]
pub struct FirstTarget<S> {
    target: S,
    served: Arc<AtomicU64>,
}

impl<S> FirstTarget<S> {
    /// `target` behind the floor.
    pub fn new(target: S) -> Self {
        FirstTarget {
            target,
            served: Arc::new(AtomicU64::new(0)),
        }
    }
}

impl<S: Clone> Clone for FirstTarget<S> {
    /// A handle of the clone's own, as `Failover`'s clones have.
    fn clone(&self) -> Self {
        FirstTarget::new(self.target.clone())
    }
}

pin_project! {
    /// The target's future, and the handle its success is counted on.
    pub struct FirstTargetFuture<F> {
        #[pin]
        future: F,
        served: Arc<AtomicU64>,
    }
}

impl<F, B, E> Future for FirstTargetFuture<F>
where
    F: Future<Output = Result<Response<B>, E>>,
{
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let result = ready!(this.future.poll(cx));
        if result.as_ref().is_ok_and(|r| r.status().is_success()) {
            this.served.fetch_add(1, Ordering::Relaxed);
        }
        Poll::Ready(result)
    }
}

impl<S, R, B> Service<R> for FirstTarget<S>
where
    S: Service<R, Response = Response<B>>,
{
    type Response = Response<B>;
    type Error = S::Error;
    type Future = FirstTargetFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.target.poll_ready(cx)
    }

    fn call(&mut self, request: R) -> Self::Future {
        FirstTargetFuture {
            future: self.target.call(request),
            served: self.served.clone(),
        }
    }
}
