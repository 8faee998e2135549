//! The services of [`GenAiLayer`](super::GenAiLayer) and
//! [`AttemptLayer`](super::AttemptLayer).

use std::borrow::Cow;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{Request, Response};
use opentelemetry::KeyValue;
use opentelemetry::trace::{Span as _, SpanKind, Tracer as _};
use tower_service::Service;

use super::body::GenAiBody;
use super::future::{AttemptFuture, ResponseFuture};
use super::names::{self, ATTEMPT_SPAN, attr};
use super::record::{Endpoint, Operation, Shared, Trail};
use crate::breaker::{RequestHead, ShadowProbe, default_scope};
use crate::error::BoxError;

/// Records each request as a GenAI operation. Built by
/// [`GenAiLayer`](super::GenAiLayer).
#[derive(Clone, Debug)]
pub struct GenAi<S> {
    inner: S,
    /// `None` when the layer is off.
    shared: Option<Arc<Shared>>,
}

impl<S> GenAi<S> {
    pub(crate) fn new(inner: S, shared: Option<Arc<Shared>>) -> Self {
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
        let Some(shared) = &self.shared else {
            return ResponseFuture::passing(self.inner.call(req));
        };
        let operation = Operation::start(shared, &mut req);
        ResponseFuture::new(self.inner.call(req), operation)
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
        // An attempt is recorded under an operation only, through its tracer.
        let Some(trail) = req.extensions().get::<Trail>().cloned() else {
            return AttemptFuture::passing(self.inner.call(req));
        };
        // A shadow probe is no caller's attempt: it is not counted.
        let shadow = req.extensions().get::<ShadowProbe>().is_some();
        let attempt = (!shadow).then(|| trail.next_attempt());
        let endpoint = Endpoint::of(&req, self.provider.as_ref());
        let tracer = trail.tracer();
        // The operation's child, wherever the call runs (a shadow probe's
        // copy runs in a task of its own).
        let mut span = tracer
            .span_builder(ATTEMPT_SPAN)
            .with_kind(SpanKind::Client)
            .start_with_context(tracer, trail.parent());
        if span.is_recording() {
            let mut attributes = Vec::with_capacity(10);
            attributes.push(KeyValue::new(
                attr::OPERATION_NAME,
                names::operation_of(req.uri().path()),
            ));
            endpoint.push_attributes(&mut attributes);
            if let Some(model) = default_scope(&RequestHead::of(&req)).model {
                attributes.push(KeyValue::new(attr::REQUEST_MODEL, model.to_owned()));
            }
            if let Some(target) = &self.target {
                attributes.push(KeyValue::new(attr::LEVEE_TARGET, target.clone()));
            }
            if let Some(n) = attempt {
                attributes.push(KeyValue::new(attr::LEVEE_ATTEMPT, i64::from(n)));
            }
            if shadow {
                attributes.push(KeyValue::new(attr::LEVEE_SHADOW_PROBE, true));
            }
            span.set_attributes(attributes);
        }
        let served =
            (!shadow).then(|| (trail, attempt.unwrap_or(1), self.target.clone(), endpoint));
        AttemptFuture::new(self.inner.call(req), span, served)
    }
}
