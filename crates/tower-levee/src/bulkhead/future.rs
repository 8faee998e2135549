//! The response future of [`Bulkhead`](super::Bulkhead).

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use pin_project_lite::pin_project;
use tokio::sync::futures::Notified;
use tokio::time::Sleep;
use tower_service::Service;

use super::compartment::{Permit, Queued};
use super::error::BulkheadFull;
use crate::error::BoxError;

pin_project! {
    /// Response future of [`Bulkhead`](super::Bulkhead).
    pub struct ResponseFuture<S, Req>
    where
        S: Service<Req>,
    {
        #[pin]
        state: State<S, Req, S::Future>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<S, Req, F> {
        Called {
            #[pin]
            future: F,
            // Released by drop: when the call completes (the state moves to
            // `Done`), errors, or is cancelled (the future is dropped).
            permit: Permit,
        },
        // Queued under a `max_wait`; boxed so the common path stays small.
        Queued { waiter: Pin<Box<Waiter<S, Req>>> },
        Rejected { error: Option<BulkheadFull> },
        Done,
    }
}

pin_project! {
    /// A caller queued for a permit. It holds no permit while it waits; it
    /// takes one as the fast path does when a release wakes it.
    struct Waiter<S, Req> {
        // Declared before `queued`, so dropped first: the compartment that
        // `queued` holds keeps the gauge this borrows from going back to
        // the pool while it is registered.
        #[pin]
        notified: Notified<'static>,
        #[pin]
        sleep: Sleep,
        service: S,
        request: Option<Req>,
        permit: Option<Permit>,
        queued: Queued,
    }
}

impl<S, Req> ResponseFuture<S, Req>
where
    S: Service<Req>,
{
    #[inline(always)]
    pub(crate) fn called(future: S::Future, permit: Permit) -> Self {
        ResponseFuture {
            state: State::Called { future, permit },
        }
    }

    pub(crate) fn queued(service: S, request: Req, queued: Queued, max_wait: Duration) -> Self {
        let notified = queued.compartment().notify().notified();
        let waiter = Waiter {
            notified,
            sleep: tokio::time::sleep(max_wait),
            service,
            request: Some(request),
            permit: None,
            queued,
        };
        ResponseFuture {
            state: State::Queued {
                waiter: Box::pin(waiter),
            },
        }
    }

    pub(crate) fn rejected(error: BulkheadFull) -> Self {
        ResponseFuture {
            state: State::Rejected { error: Some(error) },
        }
    }
}

impl<S, Req> Future for ResponseFuture<S, Req>
where
    S: Service<Req>,
    S::Error: Into<BoxError>,
{
    type Output = Result<S::Response, BoxError>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        loop {
            let (future, permit) = match this.state.as_mut().project() {
                StateProj::Called { future, .. } => {
                    let output = ready!(future.poll(cx)).map_err(Into::into);
                    this.state.set(State::Done); // gives the permit back now
                    return Poll::Ready(output);
                }
                StateProj::Rejected { error } => {
                    let error = error.take().expect("polled after completion");
                    return Poll::Ready(Err(error.into()));
                }
                StateProj::Done => panic!("bulkhead ResponseFuture polled after completion"),
                StateProj::Queued { waiter } => ready!(waiter.as_mut().poll_call(cx))?,
            };
            this.state.set(State::Called { future, permit });
        }
    }
}

impl<S, Req> Waiter<S, Req>
where
    S: Service<Req>,
    S::Error: Into<BoxError>,
{
    /// Waits for a permit (up to `max_wait`), then for the service, then
    /// calls it.
    #[allow(clippy::type_complexity)]
    fn poll_call(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Result<(S::Future, Permit), BoxError>> {
        let mut this = self.project();
        if this.permit.is_none() {
            let compartment = this.queued.compartment();
            match compartment.poll_acquire_queued(this.notified.as_mut(), cx) {
                Poll::Ready(permit) => *this.permit = Some(permit),
                Poll::Pending if this.sleep.as_mut().poll(cx).is_ready() => {
                    return Poll::Ready(Err(compartment.reject().into()));
                }
                Poll::Pending => return Poll::Pending,
            }
        }
        ready!(this.service.poll_ready(cx)).map_err(Into::into)?;
        let request = this.request.take().expect("polled after completion");
        let future = this.service.call(request);
        let permit = this.permit.take().expect("a permit was taken above");
        Poll::Ready(Ok((future, permit)))
    }
}

impl<S, Req> fmt::Debug for ResponseFuture<S, Req>
where
    S: Service<Req>,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match &self.state {
            State::Called { .. } => "called",
            State::Queued { .. } => "queued",
            State::Rejected { .. } => "rejected",
            State::Done => "done",
        };
        f.debug_struct("ResponseFuture")
            .field("state", &state)
            .finish()
    }
}
