//! Counters that many threads increment without sharing a cache line: the
//! failover's successes, the breaker's refusals, the retry budget's pending
//! deposits.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Counters are striped over this many cache lines, one per thread (modulo).
pub(crate) const STRIPES: usize = 16;

/// A counter alone on its cache line (128 bytes: adjacent-line prefetch).
#[repr(align(128))]
#[derive(Default)]
pub(crate) struct Stripe(pub(crate) AtomicU64);

/// A counter that threads increment without sharing a cache line: the
/// hot path's only write (a success served, a call refused) lands on the
/// calling thread's own stripe.
pub(crate) struct Striped(Box<[Stripe]>);

impl Default for Striped {
    fn default() -> Self {
        Striped((0..STRIPES).map(|_| Stripe::default()).collect())
    }
}

impl std::fmt::Debug for Striped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Striped").field(&self.sum()).finish()
    }
}

impl Striped {
    #[inline]
    pub(crate) fn add(&self) {
        self.0[stripe_index()].0.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn sum(&self) -> u64 {
        self.0.iter().map(|s| s.0.load(Ordering::Relaxed)).sum()
    }
}

/// This thread's stripe, assigned round-robin on first use.
#[inline]
pub(crate) fn stripe_index() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static INDEX: Cell<usize> = const { Cell::new(usize::MAX) };
    }
    INDEX.with(|index| {
        let mut i = index.get();
        if i == usize::MAX {
            i = NEXT.fetch_add(1, Ordering::Relaxed) % STRIPES;
            index.set(i);
        }
        i
    })
}
