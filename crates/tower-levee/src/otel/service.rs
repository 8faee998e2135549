//! The services of [`GenAiLayer`](super::GenAiLayer) and
//! [`AttemptLayer`](super::AttemptLayer).

use std::borrow::Cow;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{Request, Response};
use opentelemetry::StringValue;
use tower_service::Service;
use tracing::field::Empty;

use super::body::GenAiBody;
use super::future::{AttemptFuture, ResponseFuture};
use super::names;
use super::record::{Endpoint, Operation, Shared, Trail, UNKNOWN_PROVIDER};
use crate::breaker::{RequestHead, ShadowProbe, default_scope};
use crate::error::BoxError;

/// Records each request as a GenAI operation. Built by
/// [`GenAiLayer`](super::GenAiLayer).
#[derive(Clone, Debug)]
pub struct GenAi<S> {
    inner: S,
    shared: Arc<Shared>,
}

impl<S> GenAi<S> {
    pub(crate) fn new(inner: S, shared: Arc<Shared>) -> Self {
        GenAi { inner, shared }
    }

    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The inner service, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// The inner service, unwrapped.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S, B, RB> Service<Request<B>> for GenAi<S>
where
    S: Service<Request<B>, Response = Response<RB>>,
    S::Error: Into<BoxError>,
    RB: http_body::Body,
{
    type Response = Response<GenAiBody<RB>>;
    type Error = BoxError;
    type Future = ResponseFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, mut req: Request<B>) -> Self::Future {
        let operation = Operation::start(&self.shared, &mut req);
        // Entered for the call: the attempts below become its children.
        let future = {
            let _entered = operation.span.enter();
            self.inner.call(req)
        };
        ResponseFuture::new(future, operation)
    }
}

/// Records each call to a target as an attempt. Built by
/// [`AttemptLayer`](super::AttemptLayer).
#[derive(Clone, Debug)]
pub struct Attempt<S> {
    inner: S,
    target: Option<Cow<'static, str>>,
    provider: Option<Cow<'static, str>>,
}

impl<S> Attempt<S> {
    pub(crate) fn new(
        inner: S,
        target: Option<Cow<'static, str>>,
        provider: Option<Cow<'static, str>>,
    ) -> Self {
        Attempt {
            inner,
            target,
            provider,
        }
    }

    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The inner service, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// The inner service, unwrapped.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S, B, RB> Service<Request<B>> for Attempt<S>
where
    S: Service<Request<B>, Response = Response<RB>>,
    S::Error: Into<BoxError>,
{
    type Response = Response<RB>;
    type Error = BoxError;
    type Future = AttemptFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        // A shadow probe is no caller's attempt: it is not counted.
        let shadow = req.extensions().get::<ShadowProbe>().is_some();
        let trail = req.extensions().get::<Trail>().cloned().filter(|_| !shadow);
        let attempt = trail.as_ref().map(Trail::next_attempt);
        let endpoint = Endpoint::of(&req, self.provider.as_ref());
        let span = tracing::info_span!(
            target: "levee::otel",
            "levee.attempt",
            otel.kind = "client",
            otel.status_code = Empty,
            gen_ai.operation.name = names::operation_of(req.uri().path()),
            gen_ai.provider.name = endpoint.provider.as_deref().unwrap_or(UNKNOWN_PROVIDER),
            gen_ai.request.model = Empty,
            server.address = endpoint.address.as_ref().map(StringValue::as_str),
            server.port = endpoint.port.map(i64::from),
            http.response.status_code = Empty,
            error.type = Empty,
            levee.target = self.target.as_deref(),
            levee.attempt = attempt.map(i64::from),
            levee.shadow_probe = shadow,
            levee.verdict = Empty,
            levee.reason = Empty,
            levee.refusal = Empty,
        );
        if !span.is_disabled()
            && let Some(model) = default_scope(&RequestHead::of(&req)).model
        {
            span.record("gen_ai.request.model", model);
        }
        let served =
            trail.map(|trail| (trail, attempt.unwrap_or(1), self.target.clone(), endpoint));
        let future = {
            let _entered = span.enter();
            self.inner.call(req)
        };
        AttemptFuture::new(future, span, served)
    }
}
