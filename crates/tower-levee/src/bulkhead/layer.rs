//! [`BulkheadLayer`]: a handle on one compartment.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use tower_layer::Layer;

use super::compartment::{BulkheadSnapshot, Compartment};
use super::service::Bulkhead;

/// Applies [`Bulkhead`]: at most `max_concurrent` calls in flight through
/// one compartment.
///
/// Every service built by a layer (and by its clones) shares the layer's
/// compartment; a separate dependency needs a separate layer, or a named
/// compartment from [`Bulkheads`](super::Bulkheads).
///
/// ```
/// use tower_levee::bulkhead::BulkheadLayer;
///
/// let llm = BulkheadLayer::named("llm", 8);
/// assert_eq!(llm.snapshot().available, 8);
/// ```
#[derive(Clone)]
pub struct BulkheadLayer {
    compartment: Arc<Compartment>,
    max_wait: Option<Duration>,
}

impl BulkheadLayer {
    /// A compartment of `max_concurrent` permits named `"bulkhead"`, which
    /// fails fast when full.
    pub fn new(max_concurrent: usize) -> Self {
        Self::named("bulkhead", max_concurrent)
    }

    /// A compartment of `max_concurrent` permits named after its
    /// dependency (the name appears in [`BulkheadFull`](super::BulkheadFull),
    /// events and snapshots). A limit above `isize::MAX` is taken as
    /// `isize::MAX` (and [`limit`](Self::limit) says so): the permit
    /// count keeps its top bit for itself.
    pub fn named(name: impl Into<Arc<str>>, max_concurrent: usize) -> Self {
        Self::from_compartment(Arc::new(Compartment::new(name.into(), max_concurrent)))
    }

    pub(crate) fn from_compartment(compartment: Arc<Compartment>) -> Self {
        BulkheadLayer {
            compartment,
            max_wait: None,
        }
    }

    /// Queues a caller that finds the compartment full for up to `max_wait`
    /// instead of failing at once; it fails with `BulkheadFull` if no permit
    /// frees in time. A queued caller holds no permit, and a cancelled one
    /// leaves nothing behind. Queued callers are woken in order, but a new
    /// caller may take a freed permit first. Zero means fail fast. The wait
    /// is a `tokio::time` timer: it needs a Tokio runtime with time enabled.
    pub fn max_wait(mut self, max_wait: Duration) -> Self {
        self.max_wait = Some(max_wait).filter(|d| !d.is_zero());
        self
    }

    /// The compartment's name.
    pub fn name(&self) -> &str {
        self.compartment.name()
    }

    /// The compartment's permits in all (at most `isize::MAX`).
    pub fn limit(&self) -> usize {
        self.compartment.limit()
    }

    /// The compartment's gauges now.
    pub fn snapshot(&self) -> BulkheadSnapshot {
        self.compartment.snapshot()
    }
}

impl<S> Layer<S> for BulkheadLayer {
    type Service = Bulkhead<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Bulkhead::from_parts(inner, self.compartment.clone(), self.max_wait)
    }
}

impl fmt::Debug for BulkheadLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BulkheadLayer")
            .field("compartment", &self.compartment)
            .field("max_wait", &self.max_wait)
            .finish()
    }
}
