//! When a closed breaker's failures should open it.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::clock::{Timestamp, duration_nanos};
use crate::config_error::{ConfigError, at_least_one, positive_duration, unit_interval};

/// A user-supplied tripping rule, consulted for every call a closed breaker
/// records that says something about health.
///
/// One policy instance is shared by every key of a registry; `key` says which
/// failure domain the outcome belongs to. A policy that keeps its state per
/// key isolates keys from each other; one that keeps a single counter is
/// deliberately shared — that is the policy's choice.
///
/// The breaker calls [`reset`](TrippingPolicy::reset) when it opens and when
/// it recovers, so a policy never has to notice transitions itself. Manual
/// [`close`](super::BreakerState::close)/[`open`](super::BreakerState::open)
/// carry no key, so their reset is delivered on the key's next recorded outcome.
///
/// ```
/// use std::collections::HashMap;
/// use std::sync::{Arc, Mutex};
/// use levee_core::breaker::{BreakerConfig, Tripping, TrippingPolicy};
///
/// /// Opens after `n` failures, successes or not in between.
/// #[derive(Debug, Default)]
/// struct TotalFailures {
///     n: u32,
///     seen: Mutex<HashMap<String, u32>>,
/// }
///
/// impl TrippingPolicy for TotalFailures {
///     fn on_success(&self, _key: &str) {}
///     fn on_failure(&self, key: &str) -> bool {
///         let mut seen = self.seen.lock().unwrap();
///         let count = seen.entry(key.to_owned()).or_default();
///         *count += 1;
///         *count >= self.n
///     }
///     fn reset(&self, key: &str) {
///         self.seen.lock().unwrap().remove(key);
///     }
/// }
///
/// let policy = Arc::new(TotalFailures { n: 10, ..Default::default() });
/// let config = BreakerConfig::builder().tripping(Tripping::Custom(policy)).build().unwrap();
/// # let _ = config;
/// ```
pub trait TrippingPolicy: Send + Sync + fmt::Debug {
    /// A call for `key` succeeded.
    fn on_success(&self, key: &str);
    /// A call for `key` failed (availability or credential); returns whether
    /// the breaker should open now.
    fn on_failure(&self, key: &str) -> bool;
    /// Forget everything about `key`: the breaker opened or recovered.
    fn reset(&self, key: &str);
}

/// The tripping rule of a closed breaker.
///
/// Credential failures have their own consecutive threshold
/// ([`credential_threshold`](super::BreakerConfig::credential_threshold)) on
/// top of whichever rule is chosen here; they also count as failures for it.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum Tripping {
    /// Opens after `threshold` failures with no success in between (default 5).
    Consecutive {
        /// Failures in a row that open the breaker; at least 1.
        threshold: u32,
    },
    /// Opens when, among the calls of the trailing `window`, there are at
    /// least `min_calls` and the failure ratio reaches `failure_ratio`.
    ///
    /// The window is kept in [`ROLLING_BUCKETS`] time buckets (O(1) memory per
    /// key), so it trails by whole buckets: it covers the current bucket and
    /// the nine before it, between 90% and 100% of `window`.
    Rolling {
        /// The trailing window.
        window: Duration,
        /// Calls needed in the window before the ratio is considered
        /// (0 behaves as 1: the failing call itself).
        min_calls: u32,
        /// The failure share in `[0, 1]` that opens the breaker.
        failure_ratio: f64,
    },
    /// A user policy.
    Custom(Arc<dyn TrippingPolicy>),
}

impl Default for Tripping {
    fn default() -> Self {
        Tripping::Consecutive { threshold: 5 }
    }
}

impl Tripping {
    /// Checks the parameters of the built-in rules.
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        match self {
            Tripping::Consecutive { threshold } => at_least_one("breaker.threshold", *threshold),
            Tripping::Rolling {
                window,
                failure_ratio,
                ..
            } => {
                positive_duration("breaker.window", *window)?;
                unit_interval("breaker.failure_ratio", *failure_ratio)
            }
            Tripping::Custom(_) => Ok(()),
        }
    }
}

// === RollingWindow ===

/// How many time buckets a rolling window is kept in.
pub const ROLLING_BUCKETS: usize = 10;

/// Call and failure counts of the trailing window, in [`ROLLING_BUCKETS`]
/// buckets of `window / ROLLING_BUCKETS` each.
#[derive(Clone, Debug, Default)]
pub(crate) struct RollingWindow {
    buckets: [Bucket; ROLLING_BUCKETS],
}

#[derive(Clone, Copy, Debug, Default)]
struct Bucket {
    /// Which bucket-width interval since the clock's origin this bucket holds.
    epoch: u64,
    calls: u32,
    failures: u32,
}

impl RollingWindow {
    /// Records one call at `now` and returns `(calls, failures)` of the window.
    pub(crate) fn record(&mut self, window: Duration, now: Timestamp, failed: bool) -> (u32, u32) {
        let epoch = self.add(window, now, failed);
        self.totals(epoch)
    }

    /// Counts one call in its bucket, without summing the window (a
    /// success cannot trip it); returns the bucket's epoch.
    pub(crate) fn add(&mut self, window: Duration, now: Timestamp, failed: bool) -> u64 {
        let epoch = Self::epoch(window, now);
        let bucket = &mut self.buckets[(epoch % ROLLING_BUCKETS as u64) as usize];
        if bucket.epoch != epoch {
            *bucket = Bucket {
                epoch,
                ..Bucket::default()
            };
        }
        bucket.calls = bucket.calls.saturating_add(1);
        bucket.failures = bucket.failures.saturating_add(u32::from(failed));
        epoch
    }

    /// Counts `successes` calls in the bucket of `at`, unless that bucket
    /// has already made way for a later one (they are out of the window).
    pub(crate) fn add_successes(&mut self, window: Duration, at: Timestamp, successes: u32) {
        let epoch = Self::epoch(window, at);
        let bucket = &mut self.buckets[(epoch % ROLLING_BUCKETS as u64) as usize];
        if bucket.epoch > epoch {
            return;
        }
        if bucket.epoch != epoch {
            *bucket = Bucket {
                epoch,
                ..Bucket::default()
            };
        }
        bucket.calls = bucket.calls.saturating_add(successes);
    }

    /// When the bucket holding `now` ends.
    pub(crate) fn bucket_end(window: Duration, now: Timestamp) -> Timestamp {
        let width = Self::width(window);
        Timestamp::from_nanos(
            (now.as_nanos() / width)
                .saturating_add(1)
                .saturating_mul(width),
        )
    }

    /// Forgets every call.
    pub(crate) fn clear(&mut self) {
        self.buckets = Default::default();
    }

    /// Whether `failures` among `calls` opens the breaker.
    pub(crate) fn trips(calls: u32, failures: u32, min_calls: u32, failure_ratio: f64) -> bool {
        calls > 0 && calls >= min_calls && f64::from(failures) / f64::from(calls) >= failure_ratio
    }

    fn epoch(window: Duration, now: Timestamp) -> u64 {
        now.as_nanos() / Self::width(window)
    }

    /// A bucket's width in nanoseconds.
    fn width(window: Duration) -> u64 {
        (duration_nanos(window) / ROLLING_BUCKETS as u64).max(1)
    }

    fn totals(&self, epoch: u64) -> (u32, u32) {
        self.buckets
            .iter()
            .filter(|b| b.epoch <= epoch && epoch - b.epoch < ROLLING_BUCKETS as u64)
            .fold((0u32, 0u32), |(c, f), b| {
                (c.saturating_add(b.calls), f.saturating_add(b.failures))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: u64) -> Timestamp {
        Timestamp::from_nanos(secs * 1_000_000_000)
    }

    #[test]
    fn successes_handed_in_later_count_in_their_own_bucket_unless_it_made_way() {
        let window = Duration::from_secs(10);
        let mut w = RollingWindow::default();
        w.add_successes(window, at(1), 5);
        assert_eq!(w.record(window, at(2), true), (6, 1));
        // Bucket 3 holds t = 13 s now: successes of t = 3 s are out of the
        // window, and do not wipe it.
        assert_eq!(w.record(window, at(13), true), (1, 1));
        w.add_successes(window, at(3), 7);
        assert_eq!(w.totals(RollingWindow::epoch(window, at(13))), (1, 1));
        // Those of t = 12 s take over bucket 2's old calls (of t = 2 s).
        w.add_successes(window, at(12), 4);
        assert_eq!(w.totals(RollingWindow::epoch(window, at(13))), (5, 1));
    }

    #[test]
    fn a_bucket_ends_where_the_next_begins() {
        let window = Duration::from_secs(10);
        assert_eq!(RollingWindow::bucket_end(window, at(0)), at(1));
        let inside = Timestamp::from_nanos(3_999_999_999);
        assert_eq!(RollingWindow::bucket_end(window, inside), at(4));
        assert_eq!(RollingWindow::bucket_end(window, at(4)), at(5));
    }

    #[test]
    fn old_buckets_fall_out_of_the_window() {
        let window = Duration::from_secs(10);
        let mut w = RollingWindow::default();
        assert_eq!(w.record(window, at(0), true), (1, 1));
        assert_eq!(w.record(window, at(9), false), (2, 1));
        // Bucket 0 is ten buckets old at t = 10 s: gone.
        assert_eq!(w.record(window, at(10), false), (2, 0));
        w.clear();
        assert_eq!(w.record(window, at(11), false), (1, 0));
    }

    #[test]
    fn ratio_needs_min_calls() {
        assert!(!RollingWindow::trips(3, 3, 4, 0.5));
        assert!(RollingWindow::trips(4, 2, 4, 0.5));
        assert!(!RollingWindow::trips(4, 1, 4, 0.5));
        assert!(RollingWindow::trips(1, 1, 0, 1.0));
    }

    proptest::proptest! {
        /// Successes counted elsewhere and handed in per bucket, before the
        /// next failure, leave the window as recording each one would.
        #[test]
        fn successes_handed_in_per_bucket_count_as_if_recorded_one_by_one(
            events in proptest::collection::vec((0u64..3_000, proptest::bool::weighted(0.2)), 1..200),
        ) {
            let window = Duration::from_secs(10);
            let (mut each, mut handed) = (RollingWindow::default(), RollingWindow::default());
            // Successes not handed in yet: (a time in their bucket, how many).
            let mut pending: Vec<(Timestamp, u32)> = Vec::new();
            let mut now = 0;
            for (step_ms, failed) in events {
                now += step_ms * 1_000_000;
                let t = Timestamp::from_nanos(now);
                if failed {
                    for (at, n) in pending.drain(..) {
                        handed.add_successes(window, at, n);
                    }
                    proptest::prop_assert_eq!(
                        each.record(window, t, true),
                        handed.record(window, t, true)
                    );
                } else {
                    each.add(window, t, false);
                    match pending.last_mut() {
                        Some((at, n)) if RollingWindow::epoch(window, *at) == RollingWindow::epoch(window, t) => *n += 1,
                        _ => pending.push((t, 1)),
                    }
                }
            }
        }
    }
}
