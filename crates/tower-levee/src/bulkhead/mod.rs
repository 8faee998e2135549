//! A semaphore per dependency that fails fast: [`BulkheadLayer`].
//!
//! # Why
//!
//! A ship's hull is divided so that one breach floods one compartment. A
//! process that calls an LLM provider and a customer's CRM shares one pool of
//! workers, connections and memory between them; when the provider slows to
//! a crawl, its calls pile up (each one held open for the length of a
//! timeout or a backoff) until nothing is left for the CRM, and a failure of
//! one dependency has become an outage of everything (seed 004, 9:05 am).
//!
//! A bulkhead caps the calls in flight per dependency. With 8 permits for
//! `"llm"` and 4 for `"crm"`, a hung LLM holds at most 8 calls; the 9th is
//! refused at once with [`BulkheadFull`] (a typed rejection with a
//! `retry_after`, like every Levee rejection), and the CRM's 4 permits stay
//! free. Failing fast is the point: a caller queued blind behind a hung
//! dependency is a caller not serving anyone else. When a short wait is
//! acceptable, [`BulkheadLayer::max_wait`] queues a full caller for that long
//! instead, then refuses it.
//!
//! # Named compartments
//!
//! [`Bulkheads`] hands out named compartments: two services that call the
//! same dependency ask for the same name and share its permits; separate
//! dependencies get separate names and never share.
//!
//! # Permits
//!
//! The permit is taken in `call` and lives in the response future as a plain
//! field: it is released when the future is dropped, which covers
//! completion, error and cancellation alike. Nothing is acquired in
//! `poll_ready` (which only asks the inner service), so an idle clone that
//! was polled ready never sits on a permit (the permit-hoarding trap of
//! tower#793). The fast path is one lock-free compare-exchange to take the
//! permit and one atomic decrement to give it back, plus the reference count
//! that lets the future reach its compartment: no lock, no allocation. A
//! waiter queue is used only for callers queued under `max_wait`.
//!
//! The inner service must be `Clone`: a caller queued under `max_wait` holds
//! a clone, to call once a permit frees.
//!
//! # Gauges
//!
//! [`BulkheadLayer::snapshot`] and [`Bulkheads::snapshot`] read the calls in
//! flight, free permits, queued callers and rejections of each compartment;
//! every rejection is also a `tracing` event (target `levee::bulkhead`)
//! carrying the same gauges.
//!
//! # Example
//!
//! ```
//! use std::convert::Infallible;
//! use tower::{Service, ServiceBuilder, ServiceExt};
//! use tower_levee::bulkhead::{BulkheadFull, Bulkheads};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let bulkheads = Bulkheads::new();
//! // A dependency that hangs.
//! let hung = tower::service_fn(|_: ()| std::future::pending::<Result<(), Infallible>>());
//! let mut llm = ServiceBuilder::new()
//!     .layer(bulkheads.compartment("llm", 1))
//!     .service(hung);
//!
//! let stuck = llm.ready().await.unwrap().call(()); // holds the only permit
//! let err = llm.ready().await.unwrap().call(()).await.unwrap_err();
//! assert!(err.is::<BulkheadFull>());
//!
//! drop(stuck); // cancelled: the permit is back
//! assert_eq!(bulkheads.snapshot()[0].available, 1);
//! # }
//! ```

mod compartment;
pub mod error;
pub mod future;
mod layer;
mod registry;

use std::fmt;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tower_service::Service;

pub use self::compartment::BulkheadSnapshot;
use self::compartment::{Compartment, Permit};
pub use self::error::BulkheadFull;
pub use self::future::ResponseFuture;
pub use self::layer::BulkheadLayer;
pub use self::registry::Bulkheads;
use crate::error::BoxError;

/// Limits the calls in flight to the inner service to its compartment's
/// permits. Built by [`BulkheadLayer`]; see the [module docs](self).
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

    #[inline]
    fn call(&mut self, request: Req) -> Self::Future {
        if self.compartment.try_acquire() {
            let permit = Permit::taken(self.compartment.clone());
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
