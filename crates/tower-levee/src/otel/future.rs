//! The response futures of [`GenAi`](super::GenAi) and
//! [`Attempt`](super::Attempt).

use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use http::Response;
use levee_core::classify::Classification;
use opentelemetry::KeyValue;
use opentelemetry::global::BoxedSpan;
use opentelemetry::trace::{Span as _, Status};
use pin_project_lite::pin_project;

use super::body::GenAiBody;
use super::names::{self, attr};
use super::record::{AnswerOf, End, Endpoint, Operation, Served, Trail};
use crate::error::{BoxError, Rejection};

pin_project! {
    /// The future of a [`GenAi`](super::GenAi) call: the answer, its body
    /// read as it passes.
    pub struct ResponseFuture<F> {
        #[pin]
        inner: F,
        operation: Option<Box<Operation>>,
    }
}

impl<F> ResponseFuture<F> {
    pub(crate) fn new(inner: F, operation: Box<Operation>) -> Self {
        ResponseFuture {
            inner,
            operation: Some(operation),
        }
    }

    /// A call the layer does not record (it is off).
    pub(crate) fn passing(inner: F) -> Self {
        ResponseFuture {
            inner,
            operation: None,
        }
    }
}

impl<F, RB, E> Future for ResponseFuture<F>
where
    F: Future<Output = Result<Response<RB>, E>>,
    E: Into<BoxError>,
    RB: http_body::Body,
{
    type Output = Result<Response<GenAiBody<RB>>, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let result = ready!(this.inner.poll(cx));
        let Some(mut operation) = this.operation.take() else {
            return Poll::Ready(
                result
                    .map(|response| response.map(|body| GenAiBody::new(body, None)))
                    .map_err(Into::into),
            );
        };
        Poll::Ready(match result {
            Ok(response) => {
                let read = operation.answered(&response);
                if !read || response.body().is_end_stream() {
                    // Nothing to read: the operation ends with its head.
                    operation.end(End::Answered);
                    Ok(response.map(|body| GenAiBody::new(body, None)))
                } else {
                    Ok(response.map(|body| GenAiBody::new(body, Some(operation))))
                }
            }
            Err(err) => {
                let err = err.into();
                operation.end(End::Failed(&err));
                Err(err)
            }
        })
    }
}

pin_project! {
    /// The future of an [`Attempt`](super::Attempt) call.
    pub struct AttemptFuture<F> {
        #[pin]
        inner: F,
        span: Option<BoxedSpan>,
        served: Option<(Trail, u32, Option<Cow<'static, str>>, Endpoint)>,
    }

    impl<F> PinnedDrop for AttemptFuture<F> {
        fn drop(this: Pin<&mut Self>) {
            // Dropped unanswered: cancelled (a hedge's loser, a caller gone).
            if let Some(mut span) = this.project().span.take() {
                if span.is_recording() {
                    span.set_attribute(KeyValue::new(attr::ERROR_TYPE, "cancelled"));
                    span.set_status(Status::error(""));
                }
                span.end();
            }
        }
    }
}

impl<F> AttemptFuture<F> {
    pub(crate) fn new(
        inner: F,
        span: BoxedSpan,
        served: Option<(Trail, u32, Option<Cow<'static, str>>, Endpoint)>,
    ) -> Self {
        AttemptFuture {
            inner,
            span: Some(span),
            served,
        }
    }

    /// A call not recorded: no operation above it.
    pub(crate) fn passing(inner: F) -> Self {
        AttemptFuture {
            inner,
            span: None,
            served: None,
        }
    }
}

impl<F, RB, E> Future for AttemptFuture<F>
where
    F: Future<Output = Result<Response<RB>, E>>,
    E: Into<BoxError>,
{
    type Output = Result<Response<RB>, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let mut result = ready!(this.inner.poll(cx)).map_err(Into::into);
        let Some(mut span) = this.span.take() else {
            // Not recorded (or polled again after its answer, as the inner
            // future was).
            return Poll::Ready(result);
        };
        let recording = span.is_recording();
        match &mut result {
            Ok(response) => {
                let status = response.status();
                if let Some((trail, attempt, target, endpoint)) = this.served.take() {
                    // The operation finds where its answer came from by
                    // the attempt's number.
                    response.extensions_mut().insert(AnswerOf(attempt));
                    trail.answered(Served {
                        attempt,
                        target,
                        endpoint,
                    });
                }
                if recording {
                    let mut attributes = Vec::with_capacity(4);
                    attributes.push(KeyValue::new(attr::HTTP_STATUS, i64::from(status.as_u16())));
                    if let Some(c) = response.extensions().get::<Classification>() {
                        attributes.push(KeyValue::new(attr::LEVEE_VERDICT, c.verdict.as_str()));
                        attributes.push(KeyValue::new(
                            attr::LEVEE_REASON,
                            c.reason.as_str().to_owned(),
                        ));
                    }
                    if !status.is_success() {
                        attributes
                            .push(KeyValue::new(attr::ERROR_TYPE, status.as_str().to_owned()));
                        span.set_status(Status::error(status.as_str().to_owned()));
                    }
                    span.set_attributes(attributes);
                }
            }
            Err(err) if recording => {
                let error_type = names::error_type(&**err);
                span.set_attribute(KeyValue::new(attr::ERROR_TYPE, error_type));
                if let Some(rejection) = Rejection::find(&**err) {
                    span.set_attribute(KeyValue::new(
                        attr::LEVEE_REFUSAL,
                        rejection.kind().as_str(),
                    ));
                }
                // A description only where Levee wrote the message.
                let description = Rejection::find(&**err).map(|r| r.error().to_string());
                span.set_status(Status::error(description.unwrap_or_default()));
            }
            Err(_) => {}
        }
        span.end();
        Poll::Ready(result)
    }
}
