//! The breaker service.

use std::fmt;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Buf;
use http::{Request, Response};
use http_body::Body;
use levee_core::classify::{Classify, ProviderClassifier};
use tower_service::Service;

use super::admission::{DomainCache, admit_call};
use super::body::ResponseBody;
use super::future::{Call, ResponseFuture};
use super::handle::BreakerHandle;
use super::scope::RequestHead;
use super::shared::Shared;
use crate::error::BoxError;

/// Breaker, throttle gate and park table in front of an inner service.
///
/// Rejected requests are answered at once with [`CircuitOpen`](super::CircuitOpen),
/// [`Throttled`](super::Throttled) or [`Parked`](super::Parked), without
/// calling the inner service. Built by [`BreakerLayer`](super::BreakerLayer).
pub struct Breaker<S, C = ProviderClassifier> {
    pub(crate) inner: S,
    pub(crate) shared: Arc<Shared>,
    pub(crate) classifier: C,
    pub(crate) cache: DomainCache,
}

impl<S, C> Breaker<S, C> {
    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The inner service, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// Consumes the breaker, returning the inner service.
    pub fn into_inner(self) -> S {
        self.inner
    }

    /// A handle on the shared state.
    pub fn handle(&self) -> BreakerHandle {
        BreakerHandle::new(self.shared.clone())
    }
}

impl<S: Clone, C: Clone> Clone for Breaker<S, C> {
    fn clone(&self) -> Self {
        Breaker {
            inner: self.inner.clone(),
            shared: self.shared.clone(),
            classifier: self.classifier.clone(),
            cache: self.cache.clone(),
        }
    }
}

impl<S: fmt::Debug, C> fmt::Debug for Breaker<S, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Breaker")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl<S, C, B, RB> Service<Request<B>> for Breaker<S, C>
where
    S: Service<Request<B>, Response = Response<RB>>,
    S::Error: Into<BoxError>,
    RB: Body,
    RB::Data: Buf + 'static,
    RB::Error: Into<BoxError>,
    C: Classify + Clone,
{
    type Response = Response<ResponseBody<RB>>;
    type Error = BoxError;
    type Future = ResponseFuture<S::Future, RB, C>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    // Always inlined (measured: ~10 ns a call): admission is out of line and
    // not generic, so what is inlined only builds the future, where the
    // caller keeps it, and hands the request on without another copy.
    #[inline(always)]
    fn call(&mut self, req: Request<B>) -> Self::Future {
        match admit_call(&self.shared, &mut self.cache, &RequestHead::of(&req)) {
            Ok(tracker) => {
                let settings = &self.shared.settings;
                let expects_content =
                    settings.empty_body_is_failure && req.method() == http::Method::POST;
                let future = self.inner.call(req);
                // Built after the inner call, so that nothing but the
                // tracker is held across it: the compiler then writes the
                // call's state once, into the future, rather than building
                // it aside and copying it in.
                ResponseFuture::called(
                    future,
                    Call {
                        classifier: self.classifier.clone(),
                        soft_failure: settings.soft_failure.clone(),
                        peek_limit: settings.peek_limit,
                        expects_content,
                        pace: settings.pace_check.is_some(),
                        hold: settings.hold,
                        tracker,
                    },
                )
            }
            Err(e) => ResponseFuture::rejected(e),
        }
    }
}
