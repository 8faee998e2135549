//! A per-minute limit that refills continuously: the rule a server holds
//! its own callers to (requests or tokens per minute, per client).
//!
//! A fixed window lets a caller spend two minutes' worth across a window's
//! edge; a sliding log keeps every request. A bucket that holds a minute's
//! worth and refills at a sixtieth of it each second does neither, and is
//! how Anthropic describes its own rate limits ("continuously replenished
//! up to your maximum limit", <https://docs.anthropic.com/en/api/rate-limits>).
//! So a caller that paused gets a minute's burst, and one that keeps going
//! gets the per-minute rate, never more.
//!
//! Requests are known before they are sent ([`MinuteLimit::try_take`]);
//! tokens only once the answer says what it used. So tokens are spent
//! after the fact ([`MinuteLimit::spend`], which may take the bucket below
//! empty, by at most a minute's worth), and a caller is admitted while
//! anything is left ([`MinuteLimit::admits`]): one large answer may
//! overshoot, and the caller then waits until the debt is repaid.
//!
//! ```
//! use std::num::NonZeroU64;
//! use std::time::Duration;
//! use levee_core::clock::Timestamp;
//! use levee_core::limit::MinuteLimit;
//!
//! let t0 = Timestamp::ZERO;
//! let mut rpm = MinuteLimit::new(NonZeroU64::new(60).unwrap(), t0);
//! for _ in 0..60 {
//!     assert!(rpm.try_take(t0, 1).is_ok());
//! }
//! // Empty: the next request is a second's refill away.
//! assert_eq!(rpm.try_take(t0, 1), Err(Duration::from_secs(1)));
//! assert!(rpm.try_take(t0.saturating_add(Duration::from_secs(1)), 1).is_ok());
//! ```

use std::num::NonZeroU64;
use std::time::Duration;

use crate::clock::{Timestamp, ceil_millis};

/// A per-minute limit refilled continuously. See the [module docs](self).
#[derive(Clone, Debug, PartialEq)]
pub struct MinuteLimit {
    per_minute: u64,
    /// What is left: at most `per_minute`, at least `-per_minute`.
    level: f64,
    updated: Timestamp,
}

impl MinuteLimit {
    /// A limit of `per_minute`, full at `now`.
    pub fn new(per_minute: NonZeroU64, now: Timestamp) -> Self {
        MinuteLimit {
            per_minute: per_minute.get(),
            level: per_minute.get() as f64,
            updated: now,
        }
    }

    /// The limit per minute.
    pub fn per_minute(&self) -> u64 {
        self.per_minute
    }

    /// Takes `n` now, or says how long until `n` are left (never: a wait
    /// longer than a minute, for `n` over the limit).
    pub fn try_take(&mut self, now: Timestamp, n: u64) -> Result<(), Duration> {
        self.refill(now);
        let n = n as f64;
        if self.level >= n {
            self.level -= n;
            Ok(())
        } else {
            Err(self.until(n))
        }
    }

    /// Whether anything is left now (at least one); if not, how long until
    /// there is.
    pub fn admits(&mut self, now: Timestamp) -> Result<(), Duration> {
        self.refill(now);
        if self.level >= 1.0 {
            Ok(())
        } else {
            Err(self.until(1.0))
        }
    }

    /// Spends `n` that were already used: the bucket may go below empty,
    /// by at most a minute's worth.
    pub fn spend(&mut self, now: Timestamp, n: u64) {
        self.refill(now);
        let floor = -(self.per_minute as f64);
        self.level = (self.level - n as f64).max(floor);
    }

    /// Gives back `n` taken for a request that was never made.
    pub fn give_back(&mut self, now: Timestamp, n: u64) {
        self.refill(now);
        self.level = (self.level + n as f64).min(self.per_minute as f64);
    }

    /// What is left now, in whole units (0 when in debt).
    pub fn left(&mut self, now: Timestamp) -> u64 {
        self.refill(now);
        self.level.max(0.0) as u64
    }

    fn refill(&mut self, now: Timestamp) {
        let elapsed = now.saturating_duration_since(self.updated);
        if elapsed.is_zero() {
            return;
        }
        let per_sec = self.per_minute as f64 / 60.0;
        self.level = (self.level + elapsed.as_secs_f64() * per_sec).min(self.per_minute as f64);
        self.updated = now;
    }

    /// The wait until `need` are left, rounded up to the millisecond.
    fn until(&self, need: f64) -> Duration {
        let per_sec = self.per_minute as f64 / 60.0;
        let secs = ((need - self.level) / per_sec).max(0.0);
        ceil_millis(Duration::try_from_secs_f64(secs).unwrap_or(Duration::MAX))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: f64) -> Timestamp {
        Timestamp::ZERO.saturating_add(Duration::from_secs_f64(secs))
    }

    fn limit(n: u64) -> MinuteLimit {
        MinuteLimit::new(NonZeroU64::new(n).unwrap(), Timestamp::ZERO)
    }

    #[test]
    fn a_full_bucket_gives_a_minutes_worth_then_the_rate() {
        let mut l = limit(120);
        for _ in 0..120 {
            l.try_take(at(0.0), 1).unwrap();
        }
        assert_eq!(l.try_take(at(0.0), 1), Err(Duration::from_millis(500)));
        l.try_take(at(0.5), 1).unwrap();
        assert!(l.try_take(at(0.5), 1).is_err());
    }

    #[test]
    fn spent_tokens_go_into_debt_and_refuse_until_repaid() {
        let mut l = limit(600);
        l.admits(at(0.0)).unwrap();
        l.spend(at(0.0), 900);
        // 300 in debt, refilled at 10 a second: 30 s, and one more token.
        assert_eq!(l.admits(at(0.0)), Err(Duration::from_millis(30_100)));
        assert!(l.admits(at(30.0)).is_err());
        l.admits(at(30.1)).unwrap();
    }

    #[test]
    fn debt_is_bounded_by_a_minutes_worth() {
        let mut l = limit(60);
        l.spend(at(0.0), 1_000_000);
        assert_eq!(l.admits(at(0.0)), Err(Duration::from_secs(61)));
    }

    #[test]
    fn refill_never_passes_the_limit_and_a_give_back_restores() {
        let mut l = limit(10);
        l.try_take(at(0.0), 4).unwrap();
        l.give_back(at(0.0), 4);
        assert_eq!(l.left(at(3600.0)), 10);
        assert_eq!(l.try_take(at(3600.0), 11), Err(Duration::from_secs(6)));
    }
}
