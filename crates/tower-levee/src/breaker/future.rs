//! The breaker's response future.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::Buf;
use http::Response;
use http_body::Body;
use levee_core::breaker::Permit;
use levee_core::classify::{Classification, Classify, ResponseView, Verdict};
use pin_project_lite::pin_project;
use tokio::time::Instant;

use super::scope::KeyBuf;
use super::shared::{DomainHandle, Report};
use crate::BoxError;
use crate::body::{Peeked, ResponseBody};
use crate::error::{is_rejection, transport_failure};

pin_project! {
    /// Response future of [`Breaker`](super::Breaker).
    pub struct ResponseFuture<F, B: Body, C> {
        #[pin]
        state: State<F, B>,
        // Holds the call's permit; gives a probe slot back if dropped unsettled.
        call: Option<Call<C>>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<F, B: Body> {
        Rejected { error: Option<BoxError> },
        Calling { #[pin] future: F },
        // Boxed: a non-2xx is the slow path, and the response parts would
        // otherwise double the size of every future.
        Peeking { peeking: Option<Box<(http::response::Parts, Box<Peeked<B>>)>> },
        Done,
    }
}

/// What a call needs to report its outcome. No reference counts: the domain
/// is a `Copy` handle and the scope keys are held inline.
pub(crate) struct Call<C> {
    pub(crate) classifier: C,
    pub(crate) domain: DomainHandle,
    pub(crate) permit: Permit,
    pub(crate) scopes: CallScopes,
    /// When the call becomes slow (start + the slow-call threshold), if a
    /// threshold is configured.
    pub(crate) slow_after: Option<Instant>,
    pub(crate) peek_limit: u32,
    pub(crate) settled: bool,
}

/// The quota and billing scopes of a call, for the slow path.
pub(crate) struct CallScopes {
    /// `domain/model`, or the domain alone.
    pub(crate) quota: KeyBuf,
    pub(crate) domain_len: usize,
    /// An explicit billing scope; `None` means the failure domain.
    pub(crate) billing: Option<Box<str>>,
}

impl CallScopes {
    pub(crate) fn quota(&self) -> &str {
        self.quota.as_str()
    }

    pub(crate) fn billing(&self) -> &str {
        match &self.billing {
            Some(b) => b,
            None => self.quota().get(..self.domain_len).unwrap_or_default(),
        }
    }
}

impl<C> Call<C> {
    fn is_slow(&self) -> bool {
        self.slow_after.is_some_and(|at| Instant::now() > at)
    }

    /// Reports the outcome. A plain success on a closed, clean breaker
    /// writes nothing: it only reads the published status word.
    fn settle(&mut self, c: &Classification, slow: bool) {
        self.settled = true;
        if c.verdict == Verdict::Success && !slow && self.permit.probe.is_none() {
            match self.domain.hot() {
                Some(hot) if !hot.success_is_noop() => {}
                // Clean, or evicted (only idle entries are): nothing to tell.
                _ => return,
            }
        }
        let Some(cell) = self.domain.lock() else {
            return;
        };
        let Some(shared) = cell.shared.upgrade() else {
            return;
        };
        shared.record(
            cell,
            Report {
                handle: self.domain,
                permit: self.permit,
                classification: c,
                slow,
                quota_key: self.scopes.quota(),
                billing_key: self.scopes.billing(),
            },
        );
    }

    /// The call ended without an outcome that says anything (a Levee
    /// rejection from below): hand back a probe slot, count nothing.
    fn settle_neutral(&mut self) {
        self.settled = true;
        self.release();
    }

    fn release(&self) {
        if self.permit.probe.is_none() {
            return;
        }
        let Some(cell) = self.domain.lock() else {
            return;
        };
        if let Some(shared) = cell.shared.upgrade() {
            shared.release(cell, self.domain, self.permit);
        }
    }
}

impl<C> Drop for Call<C> {
    fn drop(&mut self) {
        if !self.settled {
            // Cancelled: the caller dropped the future mid-call.
            self.release();
        }
    }
}

impl<F, B: Body, C> ResponseFuture<F, B, C> {
    pub(crate) fn rejected(error: BoxError) -> Self {
        ResponseFuture {
            state: State::Rejected { error: Some(error) },
            call: None,
        }
    }

    pub(crate) fn called(future: F, call: Call<C>) -> Self {
        ResponseFuture {
            state: State::Calling { future },
            call: Some(call),
        }
    }
}

impl<F, B, E, C> Future for ResponseFuture<F, B, C>
where
    F: Future<Output = Result<Response<B>, E>>,
    E: Into<BoxError>,
    B: Body,
    B::Data: Buf,
    C: Classify,
{
    type Output = Result<Response<ResponseBody<B>>, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        loop {
            match this.state.as_mut().project() {
                StateProj::Rejected { error } => {
                    let e = error.take().expect("polled after completion");
                    this.state.set(State::Done);
                    return Poll::Ready(Err(e));
                }
                StateProj::Calling { future } => {
                    let result = ready!(future.poll(cx));
                    let call = this.call.as_mut().expect("a called future has a call");
                    match result {
                        Err(e) => {
                            let e: BoxError = e.into();
                            if is_rejection(&*e) {
                                call.settle_neutral();
                            } else {
                                let c = call.classifier.classify_transport(transport_failure(&*e));
                                call.settle(&c, false);
                            }
                            this.state.set(State::Done);
                            return Poll::Ready(Err(e));
                        }
                        Ok(response) => {
                            let slow = call.is_slow();
                            let (parts, body) = response.into_parts();
                            if call.classifier.wants_body(parts.status, &parts.headers) {
                                let peeked = Peeked::new(body, call.peek_limit as usize);
                                this.state.set(State::Peeking {
                                    peeking: Some(Box::new((parts, peeked))),
                                });
                                continue;
                            }
                            let view = ResponseView::new(parts.status, &parts.headers, &[]);
                            let c = call.classifier.classify_response(&view);
                            call.settle(&c, slow);
                            let mut response =
                                Response::from_parts(parts, ResponseBody::plain(body));
                            if c.verdict != Verdict::Success {
                                response.extensions_mut().insert(c);
                            }
                            this.state.set(State::Done);
                            return Poll::Ready(Ok(response));
                        }
                    }
                }
                StateProj::Peeking { peeking } => {
                    let p = peeking.as_mut().expect("polled after completion");
                    ready!(p.1.poll_peek(cx));
                    let call = this.call.as_mut().expect("a called future has a call");
                    let (parts, peeked) = *peeking.take().expect("checked above");
                    let view = ResponseView::new(parts.status, &parts.headers, peeked.bytes());
                    let c = call.classifier.classify_response(&view);
                    let slow = call.is_slow();
                    call.settle(&c, slow);
                    let mut response = Response::from_parts(parts, ResponseBody::replay(peeked));
                    if c.verdict != Verdict::Success {
                        response.extensions_mut().insert(c);
                    }
                    this.state.set(State::Done);
                    return Poll::Ready(Ok(response));
                }
                StateProj::Done => panic!("ResponseFuture polled after completion"),
            }
        }
    }
}

impl<F, B: Body, C> fmt::Debug for ResponseFuture<F, B, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match &self.state {
            State::Rejected { .. } => "rejected",
            State::Calling { .. } => "calling",
            State::Peeking { .. } => "peeking",
            State::Done => "done",
        };
        f.debug_struct("ResponseFuture")
            .field("state", &state)
            .finish()
    }
}
