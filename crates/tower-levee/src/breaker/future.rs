//! The breaker's response future.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use bytes::Buf;
use http::Response;
use http::{HeaderMap, StatusCode};
use http_body::Body;
use levee_core::classify::{
    Classification, Classify, HeadDecision, ResponseView, StreamScanner, Verdict,
};
use pin_project_lite::pin_project;
use tokio::time::Instant;

use super::body::{Hold, Peeked, ResponseBody};
use super::hold::HoldLimits;
use super::reopening::Reopening;
use super::settings::SoftFailureFn;
use super::tracker::{Tracker, Watch};
use crate::error::{BoxError, is_rejection, transport_failure};

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
        // A stream read ahead to its first output (boxed: streams only).
        Holding { held: Option<Box<Response<ResponseBody<B>>>>, limits: HoldLimits },
        Done,
    }
}

/// What a call needs between admission and its response: the classifier
/// and the tracker that reports the outcome.
pub(crate) struct Call<C> {
    pub(crate) classifier: C,
    pub(crate) soft_failure: Option<Arc<SoftFailureFn>>,
    pub(crate) peek_limit: u32,
    /// Whether an empty 2xx body is a failure (a `POST` to a layer that
    /// says so).
    pub(crate) expects_content: bool,
    /// Whether the layer paces (its first look at each response is the
    /// failure domain's, see `DomainHot::pace_check`).
    pub(crate) pace: bool,
    /// How far a stream is read ahead before it is handed on.
    pub(crate) hold: Option<HoldLimits>,
    pub(crate) tracker: Tracker,
}

/// What becomes of a call's result.
// A stack value for one poll: boxing the scanner would cost a stream a second
// allocation (its `Watch` is boxed already).
#[allow(clippy::large_enum_variant)]
enum Route {
    /// Settled: the response goes on as it is, with its classification
    /// attached unless it is a success (and when its scopes reopen, if it
    /// closed them).
    Plain(Option<(Classification, Option<Instant>)>),
    /// A transport error, settled.
    Failed,
    /// A stream, settled when it ends (and whether its first byte was slow).
    Watch(StreamScanner, bool),
    /// The body is read ahead before classifying.
    Peek,
}

impl<C: Classify> Call<C> {
    /// Classifies a response head; settles the call unless its body must be
    /// read first.
    fn route(&mut self, status: StatusCode, headers: &HeaderMap, empty_body: bool) -> Route {
        self.tracker.first_byte();
        self.tracker.landed();
        // A 429 gates on its own wait (and counts as a throttle, not a pace).
        if self.pace && status != StatusCode::TOO_MANY_REQUESTS {
            self.tracker.pace(headers);
        }
        let slow = self.tracker.is_slow();
        match self.classifier.classify_head(status, headers) {
            HeadDecision::WatchStream(scanner) => Route::Watch(scanner, slow),
            HeadDecision::PeekBody => Route::Peek,
            // A soft-failure hook reads a 2xx body that is not a stream.
            HeadDecision::Ready(_) if self.soft_failure.is_some() && status.is_success() => {
                Route::Peek
            }
            HeadDecision::Ready(mut c) => {
                self.fail_if_empty(&mut c, status, empty_body);
                let reopens = self.tracker.settle(&c, slow);
                if c.verdict == Verdict::Success {
                    // The common case: nothing to attach, nothing to carry.
                    return Route::Plain(None);
                }
                Route::Plain(Some((c, reopens)))
            }
            // A decision a later version adds: the body, read, decides.
            _ => Route::Peek,
        }
    }

    /// Makes `c` an availability failure when it is a success whose body is
    /// empty and should not be (in place: a classification is moved on
    /// every call otherwise).
    fn fail_if_empty(&self, c: &mut Classification, status: StatusCode, empty_body: bool) {
        let may_be_empty = matches!(status, StatusCode::NO_CONTENT | StatusCode::RESET_CONTENT);
        if empty_body && self.expects_content && c.verdict == Verdict::Success && !may_be_empty {
            *c = Classification::new(Verdict::Availability, "response:empty_body");
        }
    }

    /// Settles a call that failed below: a Levee rejection says nothing.
    fn settle_error(&mut self, e: &(dyn std::error::Error + Send + Sync + 'static)) {
        if is_rejection(e) {
            self.tracker.settle_neutral();
        } else {
            let c = self.classifier.classify_transport(transport_failure(e));
            self.tracker.settle(&c, false);
        }
    }
}

/// A response whose body is not watched or peeked.
fn plain<B: Body>(
    response: Response<B>,
    failure: Option<(Classification, Option<Instant>)>,
) -> Response<ResponseBody<B>> {
    let mut response = response.map(ResponseBody::plain);
    if let Some((c, reopens)) = failure {
        mark_failure(response.extensions_mut(), c, reopens);
    }
    response
}

/// Attaches a failure's classification, and when its scopes reopen if it
/// closed them, to the response the caller receives.
pub(crate) fn mark_failure(
    extensions: &mut http::Extensions,
    c: Classification,
    reopens: Option<Instant>,
) {
    extensions.insert(c);
    if let Some(at) = reopens {
        extensions.insert(Reopening { at });
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
    B::Data: Buf + 'static,
    B::Error: Into<BoxError>,
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
                    // Routed by reference, so that the response moves once,
                    // into the output: it is the largest thing we hand on.
                    let route = match &result {
                        Ok(response) => {
                            // Asked only where it matters: off by default.
                            let empty = call.expects_content
                                && response.body().size_hint().exact() == Some(0);
                            call.route(response.status(), response.headers(), empty)
                        }
                        Err(_) => Route::Failed,
                    };
                    match route {
                        Route::Plain(failure) => {
                            this.state.set(State::Done);
                            return Poll::Ready(match result {
                                Ok(response) => Ok(plain(response, failure)),
                                Err(e) => Err(e.into()),
                            });
                        }
                        Route::Failed => {
                            this.state.set(State::Done);
                            return Poll::Ready(match result {
                                Ok(response) => Ok(response.map(ResponseBody::plain)),
                                Err(e) => {
                                    let e: BoxError = e.into();
                                    call.settle_error(&*e);
                                    Err(e)
                                }
                            });
                        }
                        Route::Watch(scanner, slow) => {
                            // The stream's verdict is known at its end: the
                            // body carries the tracker (and any probe slot).
                            let call = this.call.take().expect("checked above");
                            let watch = Watch::new(scanner, call.tracker, slow);
                            let response = match result {
                                Ok(response) => {
                                    response.map(|body| ResponseBody::watched(body, watch))
                                }
                                Err(e) => {
                                    this.state.set(State::Done);
                                    return Poll::Ready(Err(e.into()));
                                }
                            };
                            match call.hold {
                                // Read ahead to its first output before it
                                // is handed on.
                                Some(limits) => this.state.set(State::Holding {
                                    held: Some(Box::new(response)),
                                    limits,
                                }),
                                None => {
                                    this.state.set(State::Done);
                                    return Poll::Ready(Ok(response));
                                }
                            }
                        }
                        // Only a response is routed to a peek; an error
                        // would go on as it is.
                        Route::Peek => match result {
                            Ok(response) => {
                                let (parts, body) = response.into_parts();
                                let peeked = Peeked::new(body, call.peek_limit as usize);
                                this.state.set(State::Peeking {
                                    peeking: Some(Box::new((parts, peeked))),
                                });
                            }
                            Err(e) => {
                                this.state.set(State::Done);
                                return Poll::Ready(Err(e.into()));
                            }
                        },
                    }
                }
                StateProj::Peeking { peeking } => {
                    let p = peeking.as_mut().expect("polled after completion");
                    ready!(p.1.poll_peek(cx));
                    let call = this.call.as_mut().expect("a called future has a call");
                    let (parts, peeked) = *peeking.take().expect("checked above");
                    // A soft-failure hook decides a 2xx it recognises; one it
                    // does not goes to the classifier if that asked for the
                    // body (`peek_success`, a rule for a success), else is a
                    // success.
                    let soft = match &call.soft_failure {
                        Some(detect) if parts.status.is_success() => detect(&parts, peeked.bytes())
                            .or_else(|| {
                                (!call.classifier.wants_body(parts.status, &parts.headers))
                                    .then(Classification::success)
                            }),
                        _ => None,
                    };
                    let mut c = soft.unwrap_or_else(|| {
                        let view = ResponseView::new(parts.status, &parts.headers, peeked.bytes());
                        call.classifier.classify_response(&view)
                    });
                    call.fail_if_empty(&mut c, parts.status, peeked.is_empty_whole());
                    let slow = call.tracker.is_slow();
                    let reopens = call.tracker.settle(&c, slow);
                    let mut response = Response::from_parts(parts, ResponseBody::replay(peeked));
                    if c.verdict != Verdict::Success {
                        mark_failure(response.extensions_mut(), c, reopens);
                    }
                    this.state.set(State::Done);
                    return Poll::Ready(Ok(response));
                }
                StateProj::Holding { held, limits } => {
                    let response = held.as_mut().expect("polled after completion");
                    let hold = ready!(response.body_mut().poll_hold(cx, *limits));
                    let mut response = *held.take().expect("checked above");
                    // Failed before any output: an answer that failed, as a
                    // 503 is, for a retry or a failover above to replace.
                    if let Hold::Failed((c, reopens)) = hold {
                        mark_failure(response.extensions_mut(), c, reopens);
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
            State::Holding { .. } => "holding",
            State::Done => "done",
        };
        f.debug_struct("ResponseFuture")
            .field("state", &state)
            .finish()
    }
}
