//! The response futures of [`GenAi`](super::GenAi) and
//! [`Attempt`](super::Attempt).

use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use http::Response;
use levee_core::classify::Classification;
use pin_project_lite::pin_project;

use super::body::GenAiBody;
use super::names;
use super::record::{End, Endpoint, Operation, Served, Trail};
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
        let result = {
            let _entered = this.operation.as_ref().map(|op| op.span.enter());
            ready!(this.inner.poll(cx))
        };
        let mut operation = this
            .operation
            .take()
            .expect("GenAi ResponseFuture polled after completion");
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
        span: tracing::Span,
        served: Option<(Trail, u32, Option<Cow<'static, str>>, Endpoint)>,
    }
}

impl<F> AttemptFuture<F> {
    pub(crate) fn new(
        inner: F,
        span: tracing::Span,
        served: Option<(Trail, u32, Option<Cow<'static, str>>, Endpoint)>,
    ) -> Self {
        AttemptFuture {
            inner,
            span,
            served,
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
        let result = {
            let _entered = this.span.enter();
            ready!(this.inner.poll(cx)).map_err(Into::into)
        };
        let span = &*this.span;
        match &result {
            Ok(response) => {
                let status = response.status();
                if let Some((trail, attempt, target, endpoint)) =
                    this.served.take().filter(|_| status.is_success())
                {
                    trail.served(Served {
                        attempt,
                        target,
                        endpoint,
                    });
                }
                if !span.is_disabled() {
                    span.record("http.response.status_code", i64::from(status.as_u16()));
                    if let Some(c) = response.extensions().get::<Classification>() {
                        span.record("levee.verdict", c.verdict.as_str());
                        span.record("levee.reason", c.reason.as_str());
                    }
                    if !status.is_success() {
                        span.record("error.type", status.as_str());
                        span.record("otel.status_code", "error");
                    }
                }
            }
            Err(err) if !span.is_disabled() => {
                span.record("error.type", names::error_type(&**err));
                span.record("otel.status_code", "error");
                if let Some(rejection) = Rejection::find(&**err) {
                    span.record("levee.refusal", rejection.kind().as_str());
                }
            }
            Err(_) => {}
        }
        Poll::Ready(result)
    }
}
