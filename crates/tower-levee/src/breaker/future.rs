//! The breaker's response future.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::Buf;
use http::Response;
use http_body::Body;
use levee_core::classify::{Classification, Classify, ResponseView, Verdict};
use pin_project_lite::pin_project;

use super::layer::SoftFailureFn;
use super::tracker::{Tracker, Watch};
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

/// What a call needs between admission and its response: the classifier
/// and the tracker that reports the outcome.
pub(crate) struct Call<C> {
    pub(crate) classifier: C,
    pub(crate) soft_failure: Option<SoftFailureFn>,
    pub(crate) peek_limit: u32,
    pub(crate) tracker: Tracker,
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
                    let tracker = &mut call.tracker;
                    match result {
                        Err(e) => {
                            let e: BoxError = e.into();
                            if is_rejection(&*e) {
                                tracker.settle_neutral();
                            } else {
                                let c = call.classifier.classify_transport(transport_failure(&*e));
                                tracker.settle(&c, false);
                            }
                            this.state.set(State::Done);
                            return Poll::Ready(Err(e));
                        }
                        Ok(response) => {
                            let slow = tracker.is_slow();
                            let (status, headers) = (response.status(), response.headers());
                            let mut peek = call.classifier.wants_body(status, headers);
                            if !peek
                                && let Some(scanner) =
                                    call.classifier.stream_scanner(status, headers)
                            {
                                // The stream's verdict is known at its end: the
                                // body carries the tracker (and any probe slot).
                                let call = this.call.take().expect("checked above");
                                let watch = Watch::new(scanner, call.tracker, slow);
                                this.state.set(State::Done);
                                return Poll::Ready(Ok(
                                    response.map(|body| ResponseBody::watched(body, watch))
                                ));
                            }
                            // A soft-failure hook reads a 2xx body that is not a stream.
                            peek |= call.soft_failure.is_some() && status.is_success();
                            if peek {
                                let (parts, body) = response.into_parts();
                                let peeked = Peeked::new(body, call.peek_limit as usize);
                                this.state.set(State::Peeking {
                                    peeking: Some(Box::new((parts, peeked))),
                                });
                                continue;
                            }
                            let view = ResponseView::new(status, headers, &[]);
                            let c = call.classifier.classify_response(&view);
                            tracker.settle(&c, slow);
                            let mut response = response.map(ResponseBody::plain);
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
                    let soft = match &call.soft_failure {
                        Some(detect) if parts.status.is_success() => Some(
                            detect(&parts, peeked.bytes()).unwrap_or_else(Classification::success),
                        ),
                        _ => None,
                    };
                    let c = soft.unwrap_or_else(|| {
                        let view = ResponseView::new(parts.status, &parts.headers, peeked.bytes());
                        call.classifier.classify_response(&view)
                    });
                    let slow = call.tracker.is_slow();
                    call.tracker.settle(&c, slow);
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
