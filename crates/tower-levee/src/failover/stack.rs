//! One target's service: its breaker, behind its bulkhead if it has one.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use http::Request;
use pin_project_lite::pin_project;
use tower_layer::Layer;
use tower_service::Service;

use crate::breaker::Breaker;
use crate::bulkhead::{Bulkhead, BulkheadLayer};
use crate::error::BoxError;

/// A failover target's whole stack: its [`Breaker`] over the user's service,
/// behind its [`Bulkhead`] when it has one. Typed, not boxed: a call
/// allocates nothing and its future sits inside the failover's. Dispatched
/// inline (tower's generic `Either` measured 50 to 65 instructions a call
/// more), so that a target without a bulkhead costs little over its
/// breaker.
#[derive(Clone)]
pub struct TargetService<S, C>(Stack<S, C>);

#[derive(Clone)]
enum Stack<S, C> {
    Plain(Breaker<S, C>),
    Limited(Bulkhead<Breaker<S, C>>),
}

impl<S, C> TargetService<S, C> {
    /// `breaker`, behind `bulkhead` if there is one.
    pub(crate) fn new(breaker: Breaker<S, C>, bulkhead: Option<&BulkheadLayer>) -> Self {
        TargetService(match bulkhead {
            Some(layer) => Stack::Limited(layer.layer(breaker)),
            None => Stack::Plain(breaker),
        })
    }

    /// The target's own service, beneath its breaker (and bulkhead).
    pub fn get_ref(&self) -> &S {
        match &self.0 {
            Stack::Plain(breaker) => breaker.get_ref(),
            Stack::Limited(bulkhead) => bulkhead.get_ref().get_ref(),
        }
    }

    /// The target's own service, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        match &mut self.0 {
            Stack::Plain(breaker) => breaker.get_mut(),
            Stack::Limited(bulkhead) => bulkhead.get_mut().get_mut(),
        }
    }

    /// The target's own service, its breaker (and bulkhead) dropped.
    pub fn into_inner(self) -> S {
        match self.0 {
            Stack::Plain(breaker) => breaker.into_inner(),
            Stack::Limited(bulkhead) => bulkhead.into_inner().into_inner(),
        }
    }
}

impl<S: fmt::Debug, C> fmt::Debug for TargetService<S, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (through, breaker) = match &self.0 {
            Stack::Plain(breaker) => ("breaker", breaker),
            Stack::Limited(bulkhead) => ("bulkhead", bulkhead.get_ref()),
        };
        f.debug_struct("TargetService")
            .field("through", &through)
            .field("breaker", breaker)
            .finish()
    }
}

impl<S, C, B> Service<Request<B>> for TargetService<S, C>
where
    Breaker<S, C>: Service<Request<B>, Error = BoxError>,
    Bulkhead<Breaker<S, C>>: Service<
            Request<B>,
            Response = <Breaker<S, C> as Service<Request<B>>>::Response,
            Error = BoxError,
        >,
{
    type Response = <Breaker<S, C> as Service<Request<B>>>::Response;
    type Error = BoxError;
    type Future = TargetFuture<
        <Breaker<S, C> as Service<Request<B>>>::Future,
        <Bulkhead<Breaker<S, C>> as Service<Request<B>>>::Future,
    >;

    #[inline(always)]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        match &mut self.0 {
            Stack::Plain(s) => s.poll_ready(cx),
            Stack::Limited(s) => s.poll_ready(cx),
        }
    }

    #[inline(always)]
    fn call(&mut self, request: Request<B>) -> Self::Future {
        // Each arm builds the whole future, so that it is written where the
        // caller keeps it (a variant chosen first would be copied there).
        match &mut self.0 {
            Stack::Plain(s) => TargetFuture {
                call: Call::Plain {
                    future: s.call(request),
                },
            },
            Stack::Limited(s) => TargetFuture {
                call: Call::Limited {
                    future: s.call(request),
                },
            },
        }
    }
}

pin_project! {
    /// The response future of a [`TargetService`].
    pub struct TargetFuture<P, L> {
        #[pin]
        call: Call<P, L>,
    }
}

pin_project! {
    #[project = CallProj]
    enum Call<P, L> {
        Plain { #[pin] future: P },
        Limited { #[pin] future: L },
    }
}

impl<P, L, T> Future for TargetFuture<P, L>
where
    P: Future<Output = Result<T, BoxError>>,
    L: Future<Output = Result<T, BoxError>>,
{
    type Output = Result<T, BoxError>;

    #[inline(always)]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().call.project() {
            CallProj::Plain { future } => future.poll(cx),
            CallProj::Limited { future } => future.poll(cx),
        }
    }
}

impl<P, L> fmt::Debug for TargetFuture<P, L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let through = match self.call {
            Call::Plain { .. } => "breaker",
            Call::Limited { .. } => "bulkhead",
        };
        f.debug_struct("TargetFuture")
            .field("through", &through)
            .finish()
    }
}
