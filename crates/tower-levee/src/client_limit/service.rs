//! The client-limit service.

use std::fmt;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{Request, Response};
use http_body::Body;
use tower_service::Service;

use super::future::ResponseFuture;
use super::state::{ClientId, Shared};
use crate::error::BoxError;

/// Holds each request's caller (its [`ClientId`]) to its limits, and spends
/// the tokens its answer reports. Built by
/// [`ClientLimitLayer`](super::ClientLimitLayer); see the [module docs](super).
pub struct ClientLimit<S> {
    inner: S,
    shared: Arc<Shared>,
}

impl<S> ClientLimit<S> {
    pub(crate) fn from_parts(inner: S, shared: Arc<Shared>) -> Self {
        ClientLimit { inner, shared }
    }

    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The inner service, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// Consumes `self`, returning the inner service.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S, B, RB> Service<Request<B>> for ClientLimit<S>
where
    S: Service<Request<B>, Response = Response<RB>>,
    S::Error: Into<BoxError>,
    B: Body,
{
    type Response = Response<super::ClientLimitBody<RB>>;
    type Error = BoxError;
    type Future = ResponseFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let client = request
            .extensions()
            .get::<ClientId>()
            .and_then(|id| self.shared.clients.get(id.as_str()));
        let Some(client) = client else {
            return ResponseFuture::uncounted(self.inner.call(request));
        };
        if let Err(refused) = client.admit(&self.shared.clock) {
            return ResponseFuture::refused(refused);
        }
        // The prompt's tokens, should the answer not say: its body's bytes
        // over four.
        let prompt =
            request.body().size_hint().exact().unwrap_or(0) / levee_core::usage::BYTES_PER_TOKEN;
        let counted = super::body::Metering::new(client.clone(), self.shared.clone(), prompt);
        ResponseFuture::counted(self.inner.call(request), counted)
    }
}

impl<S: Clone> Clone for ClientLimit<S> {
    fn clone(&self) -> Self {
        ClientLimit {
            inner: self.inner.clone(),
            shared: self.shared.clone(),
        }
    }
}

impl<S: fmt::Debug> fmt::Debug for ClientLimit<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientLimit")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}
