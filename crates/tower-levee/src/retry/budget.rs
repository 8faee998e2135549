//! [`RetryBudget`]: the shared, concurrent retry budget.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use levee_core::budget::{BudgetConfig, TokenBucket};
use levee_core::clock::{Timestamp, duration_nanos};
use tokio::time::Instant;

use crate::striped::{Stripe, per_stripe, stripe_index};

/// A stripe moves its pending deposits into the bucket once it holds this many.
const FLUSH_EVERY: u64 = 64;

/// A retry budget shared by every clone of the services that use it: a token
/// bucket in which each request deposits `retry_ratio` of a token and each
/// retry withdraws one, over a window of `ttl`, with a reserve of
/// `min_per_sec × ttl` tokens. Defaults: `ttl` 10 s, `min_per_sec` 10,
/// `retry_ratio` 0.1.
///
/// See [`levee_core::budget`] for the reasoning and the exact bound it
/// guarantees. It drives [`RetryBudgetLayer`](super::RetryBudgetLayer) and,
/// through [`tower::retry::budget::Budget`], a plain `tower::retry::Retry`.
///
/// # Cost
///
/// [`deposit`](Self::deposit) runs once per request, so it never takes a lock
/// and never touches a counter shared with another thread: it adds to a
/// per-thread stripe, and every 64th deposit on a stripe moves the batch into
/// the bucket (reading the clock and taking a short lock). A
/// [`withdraw`](Self::withdraw) (one per retry considered) and a
/// [`snapshot`](Self::snapshot) collect every stripe first, so no deposit is
/// ever lost, but one is counted in the window from when it is collected,
/// not from when it was made: about 63 deposits per stripe (a stripe per
/// thread up to 16 threads, then 16 shared; a few more while threads that
/// share a stripe race) can be counted late,
/// and stay spendable that much longer. The bound of
/// [`levee_core::budget`] holds for deposits as the bucket counts them.
///
/// ```
/// use std::sync::Arc;
/// use tower_levee::retry::RetryBudget;
///
/// let budget = Arc::new(RetryBudget::default());
/// budget.deposit();
/// assert!(budget.withdraw()); // the reserve pays
/// assert_eq!(budget.snapshot().retries, 1);
/// ```
pub struct RetryBudget {
    stripes: Box<[Stripe]>,
    bucket: Mutex<TokenBucket>,
    origin: Instant,
}

/// A point-in-time reading of a [`RetryBudget`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct BudgetSnapshot {
    /// Whole retries the budget would grant now.
    pub available: u64,
    /// Requests deposited since creation.
    pub requests: u64,
    /// Retries granted since creation.
    pub retries: u64,
    /// Retries refused because the budget was empty (`budget_exhausted`).
    pub budget_exhausted: u64,
}

impl RetryBudget {
    /// A budget whose deposits count for `ttl`, allowing `min_per_sec`
    /// retries per second regardless of traffic plus `retry_ratio` retries
    /// per request.
    ///
    /// # Panics
    ///
    /// As [`BudgetConfig::new`]: `ttl` outside 1 ms..=1 h, or `retry_ratio`
    /// outside `0.0..=1000.0`.
    pub fn new(ttl: Duration, min_per_sec: u32, retry_ratio: f64) -> Self {
        Self::from_config(BudgetConfig::new(ttl, min_per_sec, retry_ratio))
    }

    /// A budget from a [`BudgetConfig`].
    pub fn from_config(config: BudgetConfig) -> Self {
        RetryBudget {
            stripes: per_stripe(AtomicU64::default),
            bucket: Mutex::new(TokenBucket::new(config, Timestamp::ZERO)),
            origin: Instant::now(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> BudgetConfig {
        self.lock().config()
    }

    /// Records one request. Call it once per request, not per attempt.
    #[inline]
    pub fn deposit(&self) {
        let stripe = &self.stripes[stripe_index()].0;
        if stripe.fetch_add(1, Ordering::Relaxed) + 1 >= FLUSH_EVERY {
            self.flush(stripe);
        }
    }

    /// Moves a stripe's batch of deposits into the bucket.
    #[cold]
    fn flush(&self, stripe: &AtomicU64) {
        let batch = stripe.swap(0, Ordering::Relaxed);
        if batch > 0 {
            let mut bucket = self.lock();
            let now = self.now();
            bucket.deposit(now, batch);
        }
    }

    /// Takes one retry token; `false` if the budget is exhausted (counted as
    /// `budget_exhausted` and reported as a `tracing` event).
    pub fn withdraw(&self) -> bool {
        let (granted, exhausted) = {
            let mut bucket = self.lock();
            let now = self.now();
            self.collect(&mut bucket, now);
            (bucket.withdraw(now), bucket.stats().refused)
        };
        if !granted {
            tracing::debug!(
                target: "levee::retry",
                budget_exhausted = exhausted,
                "retry budget exhausted: returning the last outcome"
            );
        }
        granted
    }

    /// The current balance and totals.
    pub fn snapshot(&self) -> BudgetSnapshot {
        let mut bucket = self.lock();
        let now = self.now();
        self.collect(&mut bucket, now);
        let stats = bucket.stats();
        BudgetSnapshot {
            available: bucket.available(now),
            requests: stats.deposited,
            retries: stats.granted,
            budget_exhausted: stats.refused,
        }
    }

    /// Moves every stripe's pending deposits into the bucket.
    fn collect(&self, bucket: &mut TokenBucket, now: Timestamp) {
        let pending: u64 = self
            .stripes
            .iter()
            .map(|s| s.0.swap(0, Ordering::Relaxed))
            .sum();
        bucket.deposit(now, pending);
    }

    fn now(&self) -> Timestamp {
        Timestamp::from_nanos(duration_nanos(
            Instant::now().saturating_duration_since(self.origin),
        ))
    }

    fn lock(&self) -> MutexGuard<'_, TokenBucket> {
        // The bucket holds plain counters: a panic elsewhere cannot leave it
        // in a state worse than stale, so poisoning is ignored.
        self.bucket.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Default for RetryBudget {
    /// `ttl` 10 s, `min_per_sec` 10, `retry_ratio` 0.1.
    fn default() -> Self {
        Self::from_config(BudgetConfig::default())
    }
}

impl fmt::Debug for RetryBudget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryBudget")
            .field("config", &self.config())
            .finish_non_exhaustive()
    }
}

impl tower::retry::budget::Budget for RetryBudget {
    fn deposit(&self) {
        RetryBudget::deposit(self)
    }

    fn withdraw(&self) -> bool {
        RetryBudget::withdraw(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deposits_pending_in_stripes_are_collected_before_a_withdrawal() {
        let budget = RetryBudget::new(Duration::from_secs(10), 0, 0.1);
        for _ in 0..10 {
            budget.deposit(); // fewer than FLUSH_EVERY: all pending
        }
        assert!(budget.withdraw());
        assert!(!budget.withdraw());
        let s = budget.snapshot();
        assert_eq!((s.requests, s.retries, s.budget_exhausted), (10, 1, 1));
    }

    #[test]
    fn deposits_from_many_threads_are_all_counted() {
        let budget = std::sync::Arc::new(RetryBudget::new(Duration::from_secs(10), 0, 0.5));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let b = budget.clone();
                std::thread::spawn(move || (0..1000).for_each(|_| b.deposit()))
            })
            .collect();
        threads.into_iter().for_each(|t| t.join().unwrap());
        let s = budget.snapshot();
        assert_eq!(s.requests, 4000);
        assert_eq!(s.available, 2000);
    }
}
