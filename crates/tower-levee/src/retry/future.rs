//! The response future of [`Retry`](super::Retry): every attempt and every
//! wait of one request.

use std::borrow::Cow;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use http::{Request, Response};
use levee_core::classify::{Classification, Classify, ResponseView, Verdict};
use pin_project_lite::pin_project;
use tokio::time::{Instant, Sleep};
use tower_service::Service;

use super::Shared;
use super::policy::{RetryOutcome, Stop, is_retryable};
use super::reopen::{retry_at_reopen, throttled_failover};
use crate::error::{BoxError, is_rejection, transport_failure};
use crate::failover::ServedBy;

pin_project! {
    /// Response future of [`Retry`](super::Retry).
    ///
    /// Holds a clone of the inner service and of the request for the next
    /// attempt; the wait between attempts is a `tokio::time::Sleep` in its
    /// state, so it is the only place the layer sleeps (and
    /// `tokio::time::pause()` drives it).
    ///
    /// Each request gets a `levee.retry` span (target `levee::retry`, level
    /// `debug`), entered while the first call is made and while the future
    /// is polled, with the fields `attempt` (the latest), `verdict` (of the
    /// latest attempt's outcome, `rejected` for a Levee refusal) and
    /// `target` (the failover target that answered, when a
    /// [`Failover`](crate::failover::Failover) is beneath), and `scope`,
    /// recorded by a [`Breaker`](crate::breaker::Breaker) beneath. With the level
    /// disabled it is never created: the cost is the callsite's level check.
    pub struct ResponseFuture<S, B, C>
    where
        S: Service<Request<B>>,
    {
        #[pin]
        state: State<S::Future>,
        service: S,
        request: Option<Request<B>>,
        shared: Arc<Shared<C>>,
        attempts: u32,
        deadline: Option<Instant>,
        span: tracing::Span,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<F> {
        // An attempt is in flight.
        Called { #[pin] future: F },
        // Waiting out the hint or the backoff before the next attempt.
        Sleeping { #[pin] sleep: Sleep },
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
        service: S,
        request: Option<Request<B>>,
        shared: Arc<Shared<C>>,
        deadline: Option<Instant>,
        span: tracing::Span,
    ) -> Self {
        ResponseFuture {
            state: State::Called { future },
            service,
            request,
            shared,
            attempts: 1,
            deadline,
            span,
        }
    }
}

/// What to do with one attempt's outcome.
pub(super) enum Next {
    Return,
    Stop(Stop),
    RetryAfter(Duration),
}

impl<S, B, C, RB> Future for ResponseFuture<S, B, C>
where
    S: Service<Request<B>, Response = Response<RB>>,
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
                    let shared = &**this.shared;
                    let span = &*this.span;
                    if !span.is_disabled() {
                        record_attempt(span, &result, *this.attempts);
                    }
                    match next(shared, &result, *this.attempts, *this.deadline, span) {
                        Next::Return => return Poll::Ready(result),
                        Next::Stop(stop) => {
                            if let Ok(response) = &mut result {
                                response.extensions_mut().insert(RetryOutcome {
                                    attempts: *this.attempts,
                                    stop,
                                });
                            }
                            return Poll::Ready(result);
                        }
                        Next::RetryAfter(wait) if wait.is_zero() => this.state.set(State::Ready),
                        Next::RetryAfter(wait) => this.state.set(State::Sleeping {
                            sleep: tokio::time::sleep(wait),
                        }),
                    }
                }
                StateProj::Sleeping { sleep } => {
                    ready!(sleep.poll(cx));
                    this.state.set(State::Ready);
                }
                StateProj::Ready => {
                    if let Err(e) = ready!(this.service.poll_ready(cx)) {
                        return Poll::Ready(Err(e.into()));
                    }
                    let request = this
                        .request
                        .take()
                        .expect("a retry is only decided while a request copy is held");
                    *this.attempts += 1;
                    if *this.attempts < this.shared.policy.max_attempts {
                        *this.request = Some(request.clone());
                    }
                    let future = this.service.call(request);
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

/// Decides what follows an attempt: return it, stop (with the reason), or
/// retry after a wait (a budget token is taken only for a retry that will
/// happen). Records the attempt's verdict on `span`.
fn next<C: Classify, RB>(
    shared: &Shared<C>,
    result: &Result<Response<RB>, BoxError>,
    attempts: u32,
    deadline: Option<Instant>,
    span: &tracing::Span,
) -> Next {
    let classification = match result {
        Ok(response) => match response.extensions().get::<Classification>() {
            Some(c) => Cow::Borrowed(c),
            None => Cow::Owned(shared.classifier.classify_response(&ResponseView::new(
                response.status(),
                response.headers(),
                &[],
            ))),
        },
        // Levee's own rejections are answers: returned at once, never slept
        // on — except a failover whose targets are all only throttled.
        Err(e) if is_rejection(&**e) => {
            span.record("verdict", "rejected");
            return match throttled_failover(&**e) {
                Some(wait) => retry_at_reopen(shared, wait, attempts, deadline),
                None => Next::Return,
            };
        }
        Err(e) => Cow::Owned(
            shared
                .classifier
                .classify_transport(transport_failure(&**e)),
        ),
    };
    span.record("verdict", classification.verdict.as_str());
    if classification.verdict == Verdict::Success {
        return Next::Return;
    }
    let policy = &shared.policy;
    let stop = if !is_retryable(&classification) {
        Stop::NotRetryable
    } else if attempts >= policy.max_attempts {
        Stop::MaxAttempts
    } else {
        let wait = policy.wait(&classification, attempts, |max| shared.random(max));
        if !policy.fits(wait, deadline) {
            Stop::Deadline
        } else if !shared.budget.withdraw() {
            Stop::BudgetExhausted
        } else {
            tracing::debug!(
                target: "levee::retry",
                attempt = attempts,
                reason = %classification.reason,
                wait_ms = wait.as_millis() as u64,
                "retrying"
            );
            return Next::RetryAfter(wait);
        }
    };
    if stop != Stop::NotRetryable {
        tracing::debug!(
            target: "levee::retry",
            attempts,
            reason = %classification.reason,
            stop = stop.as_str(),
            "not retrying"
        );
    }
    Next::Stop(stop)
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
