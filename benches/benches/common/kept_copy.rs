//! The least a layer that may send a request again does on a call that
//! needs no second send: send a copy, and keep the request until the answer
//! comes. Tower's `Retry` does it (`Policy::clone_request`), and so does a
//! failover while a target is left after the one called. Under
//! `first_target`, the floor of a failover over two targets: not a layer,
//! a floor. Shared by the criterion benches and the instruction counts
//! (`percall`).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use http::Request;
use pin_project_lite::pin_project;
use tower::Service;

/// Sends a copy of each request to `inner`, keeping the request until the
/// answer.
#[derive(Clone, Debug)]
pub struct KeptCopy<S> {
    inner: S,
}

impl<S> KeptCopy<S> {
    /// `inner` behind the floor.
    pub fn new(inner: S) -> Self {
        KeptCopy { inner }
    }
}

pin_project! {
    /// The copy's future, and the request kept beside it.
    pub struct KeptCopyFuture<F, R> {
        #[pin]
        future: F,
        kept: Option<R>,
    }
}

impl<F: Future, R> Future for KeptCopyFuture<F, R> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.project().future.poll(cx)
    }
}

impl<S, B> Service<Request<B>> for KeptCopy<S>
where
    S: Service<Request<B>>,
    B: Clone,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = KeptCopyFuture<S::Future, Request<B>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        KeptCopyFuture {
            future: self.inner.call(request.clone()),
            kept: Some(request),
        }
    }
}
