//! The bulkhead service.

use std::fmt;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tower_service::Service;

use super::compartment::{BulkheadSnapshot, Compartment};
use super::future::ResponseFuture;
use crate::error::BoxError;

/// Limits the calls in flight to the inner service to its compartment's
/// permits. Built by [`BulkheadLayer`](super::BulkheadLayer); see the
/// [module docs](super).
pub struct Bulkhead<S> {
    inner: S,
    compartment: Arc<Compartment>,
    max_wait: Option<Duration>,
}

impl<S> Bulkhead<S> {
    pub(crate) fn from_parts(
        inner: S,
        compartment: Arc<Compartment>,
        max_wait: Option<Duration>,
    ) -> Self {
        Bulkhead {
            inner,
            compartment,
            max_wait,
        }
    }

    /// The compartment's gauges now.
    pub fn snapshot(&self) -> BulkheadSnapshot {
        self.compartment.snapshot()
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

impl<S, Req> Service<Req> for Bulkhead<S>
where
    S: Service<Req> + Clone,
    S::Error: Into<BoxError>,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = ResponseFuture<S, Req>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        // Readiness of the dependency only: the permit is taken in `call`.
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    #[inline(always)]
    fn call(&mut self, request: Req) -> Self::Future {
        if let Some(permit) = self.compartment.try_acquire() {
            return ResponseFuture::called(self.inner.call(request), permit);
        }
        match self.max_wait {
            Some(max_wait) => ResponseFuture::queued(
                self.inner.clone(),
                request,
                self.compartment.enqueue(),
                max_wait,
            ),
            None => ResponseFuture::rejected(self.compartment.reject()),
        }
    }
}

impl<S: Clone> Clone for Bulkhead<S> {
    fn clone(&self) -> Self {
        Bulkhead {
            inner: self.inner.clone(),
            compartment: self.compartment.clone(),
            max_wait: self.max_wait,
        }
    }
}

impl<S: fmt::Debug> fmt::Debug for Bulkhead<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Bulkhead")
            .field("inner", &self.inner)
            .field("compartment", &self.compartment)
            .field("max_wait", &self.max_wait)
            .finish()
    }
}
