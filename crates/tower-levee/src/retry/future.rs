//! The response future of [`Retry`](super::Retry): every attempt and every
//! wait of one request.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use http::{Request, Response};
use levee_core::classify::Classify;
use pin_project_lite::pin_project;
use tokio::time::{Instant, Sleep};
use tower_service::Service;

use super::decide::{Next, Shared};
use super::policy::{RetryOutcome, Stop};
use crate::error::BoxError;
use crate::failover::ServedBy;

/// What one clone of a [`Retry`](super::Retry) keeps for its requests: the layer's state,
/// and a spare copy of the inner service that a request's future clones
/// only when it retries. A request that does not retry costs one count on
/// this clone's own `Arc`, not a clone of the stack beneath (whose shared
/// counts every clone of the stack would bump).
pub(crate) struct PerClone<S, C> {
    pub(crate) shared: Shared<C>,
    pub(crate) spare: S,
}

pin_project! {
    /// Response future of [`Retry`](super::Retry).
    ///
    /// Holds a copy of the request for the next attempt, and a clone of the
    /// inner service from the first retry on (boxed, as the wait is: only a
    /// retry uses them); the wait between attempts is a boxed
    /// `tokio::time::Sleep` in its state, so it is the only place the layer
    /// sleeps (and `tokio::time::pause()` drives it).
    ///
    /// Each request gets a `levee.retry` span (target `levee::retry`, level
    /// `debug`), entered while the first call is made and while the future
    /// is polled, with the fields `attempt` (the latest), `verdict` (of the
    /// latest attempt's outcome, `rejected` for a Levee refusal) and
    /// `target` (the failover target that answered, when a
    /// [`Failover`](crate::failover::Failover) beneath also puts
    /// [`ServedBy`] in the response's extensions, see
    /// [`served_by_extension`](crate::failover::FailoverBuilder::served_by_extension);
    /// the failover's own `levee.failover` span always names it), and `scope`,
    /// recorded by a [`Breaker`](crate::breaker::Breaker) beneath. With the level
    /// disabled it is never created: the cost is the callsite's level check.
    pub struct ResponseFuture<S, B, C>
    where
        S: Service<Request<B>>,
    {
        #[pin]
        state: State<S::Future>,
        // Cloned from the spare at the first retry: a request that does not
        // retry never clones the stack beneath. Boxed, as the sleep is: a
        // retry is the slow path, and a future that stays small moves
        // cheaply on every call.
        service: Option<Box<S>>,
        request: Option<Request<B>>,
        per_clone: Arc<PerClone<S, C>>,
        attempts: u32,
        deadline: Option<Instant>,
        // The last real answer while a retry is on its way: what the caller
        // gets if a Levee layer refuses the retry. Boxed: only a request
        // that retries pays for it.
        last: Option<Box<Result<S::Response, BoxError>>>,
        span: tracing::Span,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<F> {
        // An attempt is in flight.
        Called { #[pin] future: F },
        // Waiting out the hint or the backoff before the next attempt.
        Sleeping { sleep: Pin<Box<Sleep>> },
        // Waiting for the inner service to be ready for the next attempt.
        Ready,
    }
}

impl<S, B, C> ResponseFuture<S, B, C>
where
    S: Service<Request<B>>,
{
    #[inline]
    pub(crate) fn new(
        future: S::Future,
        request: Option<Request<B>>,
        per_clone: Arc<PerClone<S, C>>,
        deadline: Option<Instant>,
        span: tracing::Span,
    ) -> Self {
        ResponseFuture {
            state: State::Called { future },
            service: None,
            request,
            per_clone,
            attempts: 1,
            deadline,
            last: None,
            span,
        }
    }
}

impl<S, B, C, RB> Future for ResponseFuture<S, B, C>
where
    S: Service<Request<B>, Response = Response<RB>> + Clone,
    S::Error: Into<BoxError>,
    B: Clone,
    C: Classify,
{
    type Output = Result<Response<RB>, BoxError>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        let _entered = this.span.enter();
        loop {
            match this.state.as_mut().project() {
                StateProj::Called { future } => {
                    let mut result = ready!(future.poll(cx)).map_err(Into::into);
                    let shared = &this.per_clone.shared;
                    let span = &*this.span;
                    if !span.is_disabled() {
                        record_attempt(span, &result, *this.attempts);
                    }
                    let (next, refused) = {
                        let attempt = shared.read(&result);
                        span.record("verdict", attempt.verdict());
                        // A success needs no decision: the common case, kept inline.
                        if attempt.is_success() {
                            return Poll::Ready(result);
                        }
                        let next = shared.next(&attempt, *this.attempts, *this.deadline);
                        (next, attempt.is_rejection())
                    };
                    match next {
                        // A retry refused before it was sent: the caller gets
                        // the answer that caused it, not the refusal.
                        Next::Return => {
                            let Some(mut last) = this.last.take().filter(|_| refused) else {
                                return Poll::Ready(result);
                            };
                            if let Ok(response) = &mut *last {
                                response.extensions_mut().insert(RetryOutcome {
                                    attempts: *this.attempts - 1,
                                    stop: Stop::Refused,
                                });
                            }
                            return Poll::Ready(*last);
                        }
                        Next::Stop(stop) => {
                            if let Ok(response) = &mut result {
                                response.extensions_mut().insert(RetryOutcome {
                                    attempts: *this.attempts,
                                    stop,
                                });
                            }
                            return Poll::Ready(result);
                        }
                        Next::RetryAfter(wait) => {
                            // Keep a real answer (a refusal is not one) for
                            // the caller, in case the retry is refused.
                            if !refused {
                                *this.last = Some(Box::new(result));
                            }
                            if wait.is_zero() {
                                this.state.set(State::Ready);
                            } else {
                                this.state.set(State::Sleeping {
                                    sleep: Box::pin(tokio::time::sleep(wait)),
                                });
                            }
                        }
                    }
                }
                StateProj::Sleeping { sleep } => {
                    ready!(sleep.as_mut().poll(cx));
                    this.state.set(State::Ready);
                }
                StateProj::Ready => {
                    let service = this
                        .service
                        .get_or_insert_with(|| Box::new(this.per_clone.spare.clone()));
                    if let Err(e) = ready!(service.poll_ready(cx)) {
                        return Poll::Ready(Err(e.into()));
                    }
                    let request = this
                        .request
                        .take()
                        .expect("a retry is only decided while a request copy is held");
                    *this.attempts += 1;
                    if *this.attempts < this.per_clone.shared.policy.max_attempts {
                        *this.request = Some(request.clone());
                    }
                    let future = service.call(request);
                    this.state.set(State::Called { future });
                }
            }
        }
    }
}

/// Notes an attempt on the request's span: its number, and the failover
/// target that answered, if any.
fn record_attempt<RB>(span: &tracing::Span, result: &Result<Response<RB>, BoxError>, attempt: u32) {
    span.record("attempt", attempt);
    if let Some(served) = result
        .as_ref()
        .ok()
        .and_then(|r| r.extensions().get::<ServedBy>())
    {
        span.record("target", served.target);
    }
}

impl<S, B, C> fmt::Debug for ResponseFuture<S, B, C>
where
    S: Service<Request<B>>,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseFuture")
            .field("attempts", &self.attempts)
            .field("deadline", &self.deadline)
            .finish_non_exhaustive()
    }
}
