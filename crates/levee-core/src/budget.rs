//! The retry budget: a token bucket that caps retries at a share of traffic.
//!
//! # Why a budget and not just a maximum number of attempts
//!
//! "Retry up to 3 times" is safe for one request and dangerous for a fleet.
//! When a dependency fails outright, every request retries, and the
//! dependency sees three or four times the load at the moment it can least
//! take it. Stack three layers that each retry three times and one user
//! request becomes 27 calls: in one published drill, 50 requests to a failing
//! API became 1,350 calls ([fdetimes.net], "How to use circuit breakers,
//! bulkheads and retry budgets when an LLM API goes down").
//!
//! [fdetimes.net]: https://fdetimes.net/en/guides/circuit-breaker-bulkhead-retry-budget-llm-apis/
//!
//! A budget bounds retries by *traffic*, not by request: each request deposits
//! a fraction of a token (`retry_ratio`, 0.1 by default: the Google SRE book's
//! 10%), each retry withdraws a whole one, and a small reserve
//! (`min_per_sec × ttl`, 100 tokens by default) lets a quiet client retry at
//! all. When the dependency is healthy, the budget is never the limit; when it
//! is down, retries fall to about 10% of requests plus `min_per_sec`, so the
//! retries add at most ~10% of load instead of 200%.
//!
//! # The shape (Finagle's)
//!
//! Deposits and withdrawals are recorded in [`SLOTS`] time slots of
//! `ttl / SLOTS` each; a slot older than the window (the current slot and the
//! `SLOTS - 1` before it) is forgotten, deposits and withdrawals alike. A
//! withdrawal succeeds when
//!
//! ```text
//! reserve + Σ deposits(window) × retry_ratio − Σ withdrawals(window) ≥ 1
//! ```
//!
//! Amounts are fixed-point millionths of a token, rounded down, so the ratio
//! and the reserve the bucket applies never exceed the configured ones.
//!
//! # The bound it guarantees
//!
//! Slots are aligned to the bucket's creation time. At every granted
//! withdrawal at time `t`, with `W` the withdrawals and `D` the deposited
//! requests in the window ending at `t` (this withdrawal included):
//!
//! ```text
//! W ≤ min_per_sec × ttl + retry_ratio × D
//! ```
//!
//! Two consequences:
//! - for a run that ends within `ttl` of the bucket's creation, retries granted
//!   never exceed `min_per_sec × ttl + retry_ratio × requests`;
//! - in any `SLOTS` consecutive slots (a span of `ttl`), retries granted never
//!   exceed `min_per_sec × ttl + retry_ratio × D'`, where `D'` counts the
//!   requests deposited in those slots and in the `SLOTS - 1` slots before
//!   them (a deposit stays spendable for one window after it is made).
//!
//! Over a long outage this is `min_per_sec` retries per second plus
//! `retry_ratio` of the requests. The property tests in
//! `levee-core/tests/budget_props.rs` check the bound, and that the bucket
//! grants exactly what a reference model grants, over random schedules.
//!
//! The bucket is sans-IO: time comes in as a [`Timestamp`]. `tower-levee`'s
//! `RetryBudget` wraps it for concurrent use.
//!
//! ```
//! use std::time::Duration;
//! use levee_core::budget::{BudgetConfig, TokenBucket};
//! use levee_core::clock::Timestamp;
//!
//! // No reserve: only deposits pay for retries.
//! let config = BudgetConfig::new(Duration::from_secs(10), 0, 0.1);
//! let mut bucket = TokenBucket::new(config, Timestamp::ZERO);
//! let t = Timestamp::from_nanos(1_000_000);
//! bucket.deposit(t, 19); // 19 requests × 0.1 = 1.9 tokens
//! assert!(bucket.withdraw(t)); // one retry
//! assert!(!bucket.withdraw(t)); // not two
//! assert_eq!(bucket.stats().refused, 1);
//! ```

use std::fmt;
use std::time::Duration;

use crate::clock::{Timestamp, duration_nanos};
use crate::config_error::ConfigError;

/// Number of time slots the window is divided into.
pub const SLOTS: usize = 10;

/// Fixed-point scale: amounts are millionths of a token.
const SCALE: i64 = 1_000_000;

// === BudgetConfig ===

/// The three knobs of a retry budget, in Finagle's terms.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BudgetConfig {
    ttl: Duration,
    min_per_sec: u32,
    retry_ratio: f64,
}

impl BudgetConfig {
    /// The default window: 10 s.
    pub const DEFAULT_TTL: Duration = Duration::from_secs(10);
    /// The default reserve rate: 10 retries per second.
    pub const DEFAULT_MIN_PER_SEC: u32 = 10;
    /// The default share of requests that may be retried: 10%.
    pub const DEFAULT_RETRY_RATIO: f64 = 0.1;

    /// A budget whose deposits count for `ttl`, that allows `min_per_sec`
    /// retries per second regardless of traffic, plus `retry_ratio` retries
    /// per request (0.1 = one retry per ten requests).
    ///
    /// # Panics
    ///
    /// If `ttl` is under 1 ms or over one hour, or `retry_ratio` is not a
    /// finite number in `0.0..=1000.0`.
    pub fn new(ttl: Duration, min_per_sec: u32, retry_ratio: f64) -> Self {
        match Self::try_new(ttl, min_per_sec, retry_ratio) {
            Ok(config) => config,
            Err(err) => panic!("retry budget: {err}"),
        }
    }

    /// As [`new`](BudgetConfig::new), with an error naming the field
    /// (`budget.ttl`, `budget.retry_ratio`) instead of a panic.
    ///
    /// ```
    /// use std::time::Duration;
    /// use levee_core::budget::BudgetConfig;
    ///
    /// let err = BudgetConfig::try_new(Duration::from_secs(10), 10, -1.0).unwrap_err();
    /// assert_eq!(err.to_string(), "invalid budget.retry_ratio: must be a finite number in 0.0..=1000.0, got -1");
    /// ```
    pub fn try_new(ttl: Duration, min_per_sec: u32, retry_ratio: f64) -> Result<Self, ConfigError> {
        if !(ttl >= Duration::from_millis(1) && ttl <= Duration::from_secs(3600)) {
            return Err(ConfigError::new(
                "budget.ttl",
                format!("must be between 1ms and 1h, got {ttl:?}"),
            ));
        }
        if !(retry_ratio.is_finite() && (0.0..=1000.0).contains(&retry_ratio)) {
            return Err(ConfigError::new(
                "budget.retry_ratio",
                format!("must be a finite number in 0.0..=1000.0, got {retry_ratio}"),
            ));
        }
        Ok(BudgetConfig {
            ttl,
            min_per_sec,
            retry_ratio,
        })
    }

    /// How long a deposit counts.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// Retries per second allowed regardless of traffic.
    pub fn min_per_sec(&self) -> u32 {
        self.min_per_sec
    }

    /// Retries allowed per request deposited.
    pub fn retry_ratio(&self) -> f64 {
        self.retry_ratio
    }

    /// The reserve, `min_per_sec × ttl`, in tokens.
    pub fn reserve(&self) -> f64 {
        f64::from(self.min_per_sec) * self.ttl.as_secs_f64()
    }

    /// The most retries one window can grant when `requests` were deposited
    /// in it: `floor(min_per_sec × ttl + retry_ratio × requests)`.
    pub fn max_retries(&self, requests: u64) -> u64 {
        let reserve = self.reserve_micros();
        let deposits = self.deposit_micros().saturating_mul(requests as i64);
        (reserve.saturating_add(deposits) / SCALE) as u64
    }

    fn reserve_micros(&self) -> i64 {
        let micros = u128::from(self.min_per_sec) * (duration_nanos(self.ttl) as u128) / 1_000;
        i64::try_from(micros).unwrap_or(i64::MAX)
    }

    fn deposit_micros(&self) -> i64 {
        (self.retry_ratio * SCALE as f64).floor() as i64
    }
}

impl Default for BudgetConfig {
    fn default() -> Self {
        BudgetConfig::new(
            Self::DEFAULT_TTL,
            Self::DEFAULT_MIN_PER_SEC,
            Self::DEFAULT_RETRY_RATIO,
        )
    }
}

// === TokenBucket ===

/// Totals since the bucket was created.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct BucketStats {
    /// Requests deposited.
    pub deposited: u64,
    /// Withdrawals granted (retries allowed).
    pub granted: u64,
    /// Withdrawals refused (the budget was exhausted).
    pub refused: u64,
}

/// A windowed token bucket of retries. See the [module docs](self) for the
/// bound it guarantees.
#[derive(Clone)]
pub struct TokenBucket {
    config: BudgetConfig,
    origin: Timestamp,
    slot_nanos: u64,
    reserve: i64,
    deposit_amount: i64,
    /// Net amount (deposits − withdrawals) per slot, in millionths of a token.
    slots: [i64; SLOTS],
    /// Absolute number of the slot stored at `slots[current % SLOTS]`.
    current: u64,
    stats: BucketStats,
}

impl TokenBucket {
    /// A full bucket (holding just its reserve) whose slots start at `now`.
    pub fn new(config: BudgetConfig, now: Timestamp) -> Self {
        TokenBucket {
            config,
            origin: now,
            slot_nanos: (duration_nanos(config.ttl) / SLOTS as u64).max(1),
            reserve: config.reserve_micros(),
            deposit_amount: config.deposit_micros(),
            slots: [0; SLOTS],
            current: 0,
            stats: BucketStats::default(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> BudgetConfig {
        self.config
    }

    /// Records `requests` requests made at `now`.
    pub fn deposit(&mut self, now: Timestamp, requests: u64) {
        if requests == 0 {
            return;
        }
        let slot = self.advance(now);
        let amount = self.deposit_amount.saturating_mul(requests as i64);
        self.slots[slot] = self.slots[slot].saturating_add(amount);
        self.stats.deposited = self.stats.deposited.saturating_add(requests);
    }

    /// Takes one retry token at `now`; `false` (and nothing taken) if the
    /// budget is exhausted.
    pub fn withdraw(&mut self, now: Timestamp) -> bool {
        let slot = self.advance(now);
        if self.balance() >= SCALE {
            self.slots[slot] -= SCALE;
            self.stats.granted += 1;
            true
        } else {
            self.stats.refused += 1;
            false
        }
    }

    /// Whole retries available at `now`.
    pub fn available(&mut self, now: Timestamp) -> u64 {
        self.advance(now);
        (self.balance().max(0) / SCALE) as u64
    }

    /// Totals since creation.
    pub fn stats(&self) -> BucketStats {
        self.stats
    }

    fn balance(&self) -> i64 {
        self.slots
            .iter()
            .fold(self.reserve, |sum, slot| sum.saturating_add(*slot))
    }

    /// Moves the window to `now` (a `now` earlier than the last one counts as
    /// the current slot) and returns the index of the current slot.
    fn advance(&mut self, now: Timestamp) -> usize {
        let slot = now.as_nanos().saturating_sub(self.origin.as_nanos()) / self.slot_nanos;
        if slot > self.current {
            let expired = (slot - self.current).min(SLOTS as u64);
            for i in 1..=expired {
                self.slots[((self.current + i) % SLOTS as u64) as usize] = 0;
            }
            self.current = slot;
        }
        (self.current % SLOTS as u64) as usize
    }
}

impl fmt::Debug for TokenBucket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenBucket")
            .field("config", &self.config)
            .field("balance", &(self.balance() as f64 / SCALE as f64))
            .field("stats", &self.stats)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: u64) -> Timestamp {
        Timestamp::from_nanos(ms * 1_000_000)
    }

    #[test]
    fn reserve_allows_min_per_sec_times_ttl_retries_with_no_traffic() {
        let mut b = TokenBucket::new(BudgetConfig::new(Duration::from_secs(1), 5, 0.1), at(0));
        for _ in 0..5 {
            assert!(b.withdraw(at(10)));
        }
        assert!(!b.withdraw(at(10)));
        assert_eq!(b.stats().refused, 1);
    }

    #[test]
    fn ten_requests_pay_for_one_retry_at_the_default_ratio() {
        let mut b = TokenBucket::new(BudgetConfig::new(Duration::from_secs(10), 0, 0.1), at(0));
        b.deposit(at(1), 9);
        assert!(!b.withdraw(at(1)));
        b.deposit(at(2), 1);
        assert!(b.withdraw(at(2)));
        assert!(!b.withdraw(at(2)));
    }

    #[test]
    fn deposits_and_withdrawals_expire_after_the_window() {
        let mut b = TokenBucket::new(BudgetConfig::new(Duration::from_secs(1), 0, 1.0), at(0));
        b.deposit(at(0), 2);
        assert!(b.withdraw(at(950)));
        assert_eq!(b.available(at(950)), 1);
        assert_eq!(b.available(at(1000)), 0, "the deposit's slot expired");
        b.deposit(at(5_000), 1);
        assert_eq!(b.available(at(5_000)), 1, "old withdrawals expired too");
    }

    #[test]
    fn the_config_bound_matches_the_defaults() {
        let c = BudgetConfig::default();
        assert_eq!(c.reserve(), 100.0);
        assert_eq!(c.max_retries(0), 100);
        assert_eq!(c.max_retries(50), 105);
        assert_eq!(c.max_retries(55), 105);
    }
}
