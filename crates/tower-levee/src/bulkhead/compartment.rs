//! A compartment: the permits of one dependency.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::task::{Context, Poll};

use tokio::sync::Notify;
use tokio::sync::futures::Notified;

use super::error::BulkheadFull;
use crate::striped::{Padded, STRIPES, per_stripe, stripe_index};
use crate::sync::{AtomicUsize, Ordering, fence};

/// The permits of one dependency, shared by every service using it.
///
/// The fast path is one compare-exchange on the calling thread's stripe of
/// the gauge, to take a permit it cached, and one increment there to give
/// it back; the waiter queue (`notify`) is touched only when some caller is
/// queued under a `max_wait`.
pub(crate) struct Compartment {
    gauge: &'static Gauge,
    rejected: AtomicU64,
    limit: usize,
    name: Arc<str>,
}

impl Compartment {
    pub(crate) fn new(name: Arc<str>, limit: usize) -> Self {
        // The gauge's top bit is its `RETIRED` mark (documented on
        // `BulkheadLayer::named`); no compartment can have that many calls
        // in flight anyway.
        let limit = limit.min(RETIRED - 1);
        Compartment {
            gauge: Gauge::take(limit),
            rejected: AtomicU64::new(0),
            limit,
            name,
        }
    }

    pub(crate) fn name(&self) -> &Arc<str> {
        &self.name
    }

    pub(crate) fn limit(&self) -> usize {
        self.limit
    }

    /// Takes a permit for a queued caller (counted by [`enqueue`]), or
    /// arms `notified` (from this compartment's [`notify`](Self::notify))
    /// to wake it when a permit is given back.
    ///
    /// The caller registers before it looks, and its registration
    /// (`waiting`, then `notified`) is ordered before its reads of the
    /// count and the stripes: either it sees a release's permit, or the
    /// release sees it waiting and wakes it (a mutex inside `Notify` would
    /// order them too, but that is its business).
    ///
    /// [`enqueue`]: Self::enqueue
    pub(crate) fn poll_acquire_queued(
        &self,
        mut notified: Pin<&mut Notified<'static>>,
        cx: &mut Context<'_>,
    ) -> Poll<Permit> {
        loop {
            notified.as_mut().enable();
            fence(Ordering::SeqCst);
            if let Some(permit) = self.try_acquire() {
                return Poll::Ready(permit);
            }
            if notified.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            // Woken by a release: try again with a fresh registration.
            notified.set(self.notify().notified());
        }
    }

    /// Takes a permit if one is free. Lock-free; never waits.
    ///
    /// First from the calling thread's stripe (where its calls gave their
    /// permits back), then from the shared count, then from any other
    /// thread's stripe: a caller is turned away only when it found no
    /// permit free in any of them. A permit given back, while it looked, to
    /// a stripe it had already looked at is missed, as if it had come back
    /// an instant later.
    #[inline]
    pub(crate) fn try_acquire(&self) -> Option<Permit> {
        let gauge = self.gauge;
        let own = stripe_index();
        if take_cached(&gauge.stripes[own]) {
            return Some(Permit(gauge));
        }
        self.try_acquire_shared(own)
    }

    /// The shared count, then the other stripes: out of line, off the
    /// fast path of a thread that has a permit cached.
    #[inline(never)]
    fn try_acquire_shared(&self, own: usize) -> Option<Permit> {
        let gauge = self.gauge;
        let count = &gauge.count;
        let mut current = count.load(Ordering::Relaxed);
        // The compartment is alive, so `RETIRED` is not set.
        while current < self.limit {
            // SeqCst, as every access that a queued caller's handshake
            // with `release` relies on: a queued caller that found no
            // permit is seen by the next release through its fence in
            // `poll_acquire_queued`, not through this (a failed search
            // writes nothing).
            match count.compare_exchange_weak(
                current,
                current + 1,
                Ordering::SeqCst,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Some(Permit(gauge)),
                Err(actual) => current = actual,
            }
        }
        let others = gauge.stripes.iter().enumerate().filter(|(i, _)| *i != own);
        for (_, stripe) in others {
            if take_cached(stripe) {
                return Some(Permit(gauge));
            }
        }
        None
    }

    /// Counts a rejection, reports it, and returns the error.
    #[cold]
    pub(crate) fn reject(&self) -> BulkheadFull {
        let rejected = self.rejected.fetch_add(1, Ordering::Relaxed) + 1;
        tracing::debug!(
            target: "levee::bulkhead",
            compartment = %self.name,
            in_flight = self.gauge.in_flight(),
            limit = self.limit,
            rejected,
            "bulkhead full"
        );
        BulkheadFull::new(self.name.clone(), self.limit)
    }

    /// The queue a waiter registers with before it tries again.
    pub(crate) fn notify(&self) -> &'static Notify {
        &self.gauge.notify
    }

    /// Marks one more caller queued; undone when the guard drops.
    pub(crate) fn enqueue(self: &Arc<Self>) -> Queued {
        self.gauge.waiting.fetch_add(1, Ordering::SeqCst);
        Queued(self.clone())
    }

    pub(crate) fn snapshot(&self) -> BulkheadSnapshot {
        let in_flight = self.gauge.in_flight();
        BulkheadSnapshot {
            name: self.name.clone(),
            limit: self.limit,
            in_flight,
            available: self.limit.saturating_sub(in_flight),
            waiting: self.gauge.waiting.load(Ordering::Relaxed),
            rejected: self.rejected.load(Ordering::Relaxed),
        }
    }
}

impl Drop for Compartment {
    fn drop(&mut self) {
        self.gauge.retire();
    }
}

impl fmt::Debug for Compartment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.snapshot(), f)
    }
}

// === Gauge ===

/// Set in a gauge's count once its compartment is dropped.
const RETIRED: usize = 1 << (usize::BITS - 1);

/// Takes one of the permits cached in `stripe`, if it holds any.
#[inline]
fn take_cached(stripe: &Stripe) -> bool {
    let mut cached = stripe.0.load(Ordering::Relaxed);
    while cached > 0 {
        // SeqCst, as the shared count's compare-exchange: see `try_acquire_shared`.
        match stripe.0.compare_exchange_weak(
            cached,
            cached - 1,
            Ordering::SeqCst,
            Ordering::Relaxed,
        ) {
            Ok(_) => return true,
            Err(actual) => cached = actual,
        }
    }
    false
}

/// The free permits one thread (by [`stripe_index`]) caches.
type Stripe = Padded<AtomicUsize>;

/// What a permit touches: the count of permits out, the stripes that cache
/// free ones, and the waiter queue.
///
/// A permit outlives the service that took it (it is held by a response
/// future), so it must reach its count without borrowing from the
/// compartment. A reference count would cost every call two more atomic
/// writes on the line the count is on. Gauges are leaked instead, and
/// pooled: the last of a dropped compartment's permits (or the compartment,
/// if none is out) gives its gauge back for the next compartment, so the
/// memory held is bounded by the most gauges ever in use at once: the
/// compartments alive, and the dropped ones whose calls are still in
/// flight.
///
/// One count that every call took from and gave back to would be written
/// twice per call by every thread, and its cache line would travel between
/// them on each write. So a call gives its permit back to its thread's
/// stripe (up to `cap` there), and the next call on that thread takes it
/// from there: the shared count moves only when a thread has no permit
/// cached or too many, and stays on its line, read.
// The count's line pair is written only when a thread runs out of cached
// permits or caches too many.
#[repr(align(128))]
pub(crate) struct Gauge {
    /// Permits out of the shared pool, held by calls or cached in
    /// `stripes`, plus [`RETIRED`] once the compartment is dropped.
    count: AtomicUsize,
    waiting: AtomicUsize,
    /// The most permits a stripe caches: a 32nd of the limit, at least 1.
    cap: AtomicUsize,
    notify: Notify,
    /// Free permits each thread gave back.
    stripes: Box<[Stripe]>,
}

impl Gauge {
    /// A gauge from the pool, or a new one, for `limit` permits.
    fn take(limit: usize) -> &'static Gauge {
        let gauge = match pool::take() {
            // Its last user released it with the count at zero, nothing
            // cached and no waiter (a waiter holds the compartment); the
            // pool's lock orders those writes before this reuse.
            Some(gauge) => {
                debug_assert_eq!(gauge.waiting.load(Ordering::Relaxed), 0);
                debug_assert_eq!(gauge.cached(), 0);
                gauge.count.store(0, Ordering::Relaxed);
                gauge
            }
            None => Box::leak(Box::new(Gauge {
                count: AtomicUsize::new(0),
                waiting: AtomicUsize::new(0),
                cap: AtomicUsize::new(0),
                notify: Notify::new(),
                stripes: per_stripe(|| AtomicUsize::new(0)),
            })),
        };
        gauge.cap.store((limit / STRIPES).max(1), Ordering::Relaxed);
        gauge
    }

    /// Permits cached in the stripes.
    fn cached(&self) -> usize {
        self.stripes
            .iter()
            .map(|s| s.0.load(Ordering::Relaxed))
            .sum()
    }

    fn in_flight(&self) -> usize {
        let out = self.count.load(Ordering::Relaxed) & !RETIRED;
        out.saturating_sub(self.cached())
    }

    /// Gives a permit back, to the calling thread's stripe unless it holds
    /// enough, and wakes one queued waiter, if any; the last permit of a
    /// dropped compartment gives the gauge back.
    #[inline]
    fn release(&'static self) {
        let stripe = &self.stripes[stripe_index()];
        if stripe.0.load(Ordering::Relaxed) < self.cap.load(Ordering::Relaxed) {
            // SeqCst pairs with the read of `RETIRED` after it, as `retire`'s
            // mark with its collection of the stripes: either this release
            // sees the mark or `retire` sees this permit.
            stripe.0.fetch_add(1, Ordering::SeqCst);
            if self.count.load(Ordering::SeqCst) & RETIRED != 0 {
                self.collect(stripe);
                return;
            }
        } else if self.count.fetch_sub(1, Ordering::SeqCst) == RETIRED | 1 {
            // No waiter is left: each holds the compartment.
            pool::give_back(self);
            return;
        }
        // Loom treats SeqCst accesses as AcqRel (tokio-rs/loom#180), which
        // would let this read miss a waiter whose fenced search missed the
        // permit. In the C++20 model the SeqCst read-modify-write above and
        // this SeqCst read already order them against the waiter's fence
        // (all in one total order); under loom, a SeqCst fence, which it
        // does model, stands in for them, at no cost outside loom. So the
        // models cannot check these three orderings: they must stay SeqCst.
        #[cfg(levee_loom)]
        fence(Ordering::SeqCst);
        if self.waiting.load(Ordering::SeqCst) > 0 {
            // A spurious wake-up at worst, should the compartment be dropped
            // and the gauge reused in between: a woken waiter tries again.
            self.notify.notify_one();
        }
    }

    /// Marks the compartment dropped, and collects the permits cached; the
    /// gauge goes back to the pool when every permit is in, with the last.
    fn retire(&'static self) {
        if self.count.fetch_or(RETIRED, Ordering::SeqCst) == 0 {
            pool::give_back(self);
            return;
        }
        for stripe in self.stripes.iter() {
            self.collect(stripe);
        }
    }

    /// Takes a dropped compartment's permits cached in `stripe` off its
    /// count; whoever takes the last gives the gauge back.
    #[cold]
    fn collect(&'static self, stripe: &Stripe) {
        let cached = stripe.0.swap(0, Ordering::SeqCst);
        if cached > 0 && self.count.fetch_sub(cached, Ordering::SeqCst) == RETIRED | cached {
            pool::give_back(self);
        }
    }
}

/// How many compartments' counters are free for reuse: what the loom model
/// checks a dropped bulkhead hands on exactly once. Only in a loom build.
#[cfg(levee_loom)]
#[doc(hidden)]
pub fn free_gauges() -> usize {
    pool::len()
}

/// A compartment driven directly, for the loom models of the queued path
/// (a queued call waits with a tokio timer, which loom cannot run). Only
/// in a loom build.
#[cfg(levee_loom)]
#[doc(hidden)]
pub mod model {
    use std::sync::Arc;

    /// A compartment of `limit` permits.
    #[derive(Debug)]
    pub struct Compartment(Arc<super::Compartment>);

    /// A permit, given back when dropped.
    pub struct Permit(#[allow(dead_code, reason = "held for its drop")] super::Permit);

    impl std::fmt::Debug for Permit {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("Permit")
        }
    }

    impl Compartment {
        /// A compartment of `limit` permits, as `BulkheadLayer::named` makes.
        pub fn new(limit: usize) -> Self {
            Compartment(Arc::new(super::Compartment::new("model".into(), limit)))
        }

        /// A permit if one is free now, as a call without `max_wait` takes it.
        pub fn try_acquire(&self) -> Option<Permit> {
            self.0.try_acquire().map(Permit)
        }

        /// Waits in the queue for a permit, as a call under `max_wait` does
        /// (without its deadline).
        pub async fn acquire_queued(&self) -> Permit {
            let _queued = self.0.enqueue();
            let mut notified = std::pin::pin!(self.0.notify().notified());
            Permit(
                std::future::poll_fn(|cx| self.0.poll_acquire_queued(notified.as_mut(), cx)).await,
            )
        }

        /// Calls holding a permit now.
        pub fn in_flight(&self) -> usize {
            self.0.snapshot().in_flight
        }
    }
}

/// The free gauges, process-wide. Under loom a fresh pool per model run,
/// since loom's atomics live for one run.
mod pool {
    use super::Gauge;

    #[cfg(not(levee_loom))]
    static FREE: std::sync::Mutex<Vec<&'static Gauge>> = std::sync::Mutex::new(Vec::new());

    #[cfg(levee_loom)]
    loom::lazy_static! {
        static ref FREE: loom::sync::Mutex<Vec<&'static Gauge>> = loom::sync::Mutex::new(Vec::new());
    }

    fn free() -> impl std::ops::DerefMut<Target = Vec<&'static Gauge>> {
        // The list is only pushed to and popped from: a panic cannot leave
        // it inconsistent, so poisoning is ignored.
        FREE.lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(super) fn take() -> Option<&'static Gauge> {
        free().pop()
    }

    #[cfg(levee_loom)]
    pub(super) fn len() -> usize {
        free().len()
    }

    // Off the permit's inlined release: only a dropped compartment's last
    // permit takes this path.
    #[cold]
    #[inline(never)]
    pub(super) fn give_back(gauge: &'static Gauge) {
        debug_assert_eq!(gauge.count.load(super::Ordering::Relaxed), super::RETIRED);
        free().push(gauge);
    }
}

/// A permit of a compartment, given back when dropped.
pub(crate) struct Permit(&'static Gauge);

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
        self.0.gauge.waiting.fetch_sub(1, Ordering::SeqCst);
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
