//! A compartment: the permits of one dependency.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use tokio::sync::Notify;

use super::error::BulkheadFull;

/// The permits of one dependency, shared by every service using it.
///
/// The fast path is one compare-exchange on `in_flight`; the waiter queue
/// (`notify`) is touched only when some caller is queued under a
/// `max_wait`.
pub(crate) struct Compartment {
    // The three counters share a cache line: a release that reads `waiting`
    // finds it in the line it just wrote.
    in_flight: AtomicUsize,
    waiting: AtomicUsize,
    rejected: AtomicU64,
    limit: usize,
    name: Arc<str>,
    notify: Arc<Notify>,
}

impl Compartment {
    pub(crate) fn new(name: Arc<str>, limit: usize) -> Self {
        Compartment {
            in_flight: AtomicUsize::new(0),
            waiting: AtomicUsize::new(0),
            rejected: AtomicU64::new(0),
            limit,
            name,
            notify: Arc::new(Notify::new()),
        }
    }

    pub(crate) fn name(&self) -> &Arc<str> {
        &self.name
    }

    pub(crate) fn limit(&self) -> usize {
        self.limit
    }

    /// Takes a permit if one is free. Lock-free; never waits.
    #[inline]
    pub(crate) fn try_acquire(&self) -> bool {
        let mut current = self.in_flight.load(Ordering::Relaxed);
        loop {
            if current >= self.limit {
                return false;
            }
            // SeqCst pairs with `release`'s read of `waiting`: a waiter that
            // registered and then failed here is seen by the next release.
            match self.in_flight.compare_exchange_weak(
                current,
                current + 1,
                Ordering::SeqCst,
                Ordering::Relaxed,
            ) {
                Ok(_) => return true,
                Err(actual) => current = actual,
            }
        }
    }

    /// Gives a permit back and wakes one queued waiter, if any.
    #[inline]
    pub(crate) fn release(&self) {
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        if self.waiting.load(Ordering::SeqCst) > 0 {
            self.notify.notify_one();
        }
    }

    /// Counts a rejection, reports it, and returns the error.
    #[cold]
    pub(crate) fn reject(&self) -> BulkheadFull {
        let rejected = self.rejected.fetch_add(1, Ordering::Relaxed) + 1;
        tracing::debug!(
            target: "levee::bulkhead",
            compartment = %self.name,
            in_flight = self.in_flight.load(Ordering::Relaxed),
            limit = self.limit,
            rejected,
            "bulkhead full"
        );
        BulkheadFull::new(self.name.clone(), self.limit)
    }

    pub(crate) fn notify(&self) -> &Arc<Notify> {
        &self.notify
    }

    /// Marks one more caller queued; undone when the guard drops.
    pub(crate) fn enqueue(self: &Arc<Self>) -> Queued {
        self.waiting.fetch_add(1, Ordering::SeqCst);
        Queued(self.clone())
    }

    pub(crate) fn snapshot(&self) -> BulkheadSnapshot {
        let in_flight = self.in_flight.load(Ordering::Relaxed);
        BulkheadSnapshot {
            name: self.name.clone(),
            limit: self.limit,
            in_flight,
            available: self.limit.saturating_sub(in_flight),
            waiting: self.waiting.load(Ordering::Relaxed),
            rejected: self.rejected.load(Ordering::Relaxed),
        }
    }
}

impl fmt::Debug for Compartment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.snapshot(), f)
    }
}

/// A permit of a compartment, given back when dropped.
pub(crate) struct Permit(Arc<Compartment>);

impl Permit {
    /// Wraps a permit already taken with [`Compartment::try_acquire`].
    #[inline]
    pub(crate) fn taken(compartment: Arc<Compartment>) -> Self {
        Permit(compartment)
    }
}

impl Drop for Permit {
    #[inline]
    fn drop(&mut self) {
        self.0.release();
    }
}

/// A caller counted as queued in a compartment.
pub(crate) struct Queued(Arc<Compartment>);

impl Queued {
    pub(crate) fn compartment(&self) -> &Arc<Compartment> {
        &self.0
    }
}

impl Drop for Queued {
    fn drop(&mut self) {
        self.0.waiting.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A point-in-time reading of one compartment's gauges.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct BulkheadSnapshot {
    /// The compartment's name (its dependency).
    pub name: Arc<str>,
    /// Permits in all.
    pub limit: usize,
    /// Calls holding a permit now.
    pub in_flight: usize,
    /// Permits free now.
    pub available: usize,
    /// Callers queued under a `max_wait` now.
    pub waiting: usize,
    /// Requests refused since creation.
    pub rejected: u64,
}
