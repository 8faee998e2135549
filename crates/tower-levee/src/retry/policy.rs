//! When to retry, and how long to wait first.

use std::fmt;
use std::time::Duration;

use levee_core::classify::{Classification, Verdict};
use levee_core::clock::ceil_millis;
use levee_core::config_error::ConfigError;
use tokio::time::Instant;

/// A request extension carrying the caller's overall deadline. The retry
/// layer starts no retry whose wait would end after it. When the layer also
/// has a [`timeout`](super::RetryBudgetLayerBuilder::timeout), the earlier of the
/// two applies.
///
/// ```
/// use std::time::Duration;
/// use tokio::time::Instant;
/// use tower_levee::retry::Deadline;
///
/// let mut req = http::Request::new(String::new());
/// req.extensions_mut().insert(Deadline(Instant::now() + Duration::from_secs(30)));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[allow(
    clippy::exhaustive_structs,
    reason = "a newtype a caller builds as `Deadline(at)`: one instant is all it can be"
)]
pub struct Deadline(pub Instant);

/// Why the retry layer returned a response that was not a success. Inserted
/// into the extensions of such responses (never into successful ones).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Stop {
    /// The verdict does not call for a retry (a credential, quota or request
    /// failure, or `x-should-retry: false`).
    NotRetryable,
    /// The attempts were used up.
    MaxAttempts,
    /// The wait before the next attempt would end past the deadline, or is
    /// longer than the layer's `max_wait`.
    Deadline,
    /// The retry budget refused a token.
    BudgetExhausted,
    /// A retry was made but a Levee layer refused it before it was sent (a
    /// scope closed meanwhile): the answer returned is the one before it.
    Refused,
}

impl Stop {
    /// The stable lowercase name (`"budget_exhausted"`).
    pub const fn as_str(self) -> &'static str {
        match self {
            Stop::NotRetryable => "not_retryable",
            Stop::MaxAttempts => "max_attempts",
            Stop::Deadline => "deadline",
            Stop::BudgetExhausted => "budget_exhausted",
            Stop::Refused => "refused",
        }
    }
}

impl fmt::Display for Stop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What the retry layer did with a request whose final response was not a
/// success: a response extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct RetryOutcome {
    /// Attempts made, the first included.
    pub attempts: u32,
    /// Why there was no further attempt.
    pub stop: Stop,
}

/// The knobs of the retry decision, copied into every response future.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Policy {
    pub(crate) max_attempts: u32,
    pub(crate) base: Duration,
    pub(crate) cap: Duration,
    pub(crate) max_wait: Duration,
    pub(crate) timeout: Option<Duration>,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            max_attempts: 3,
            base: Duration::from_millis(500),
            cap: Duration::from_secs(8),
            max_wait: Duration::from_secs(60),
            timeout: None,
        }
    }
}

/// The setters of the knobs both retry builders share, written once; each
/// builder's `build` checks them.
macro_rules! policy_setters {
    ($($policy:ident).+) => {
        /// Attempts per request, the first included (default 3; at least 1).
        pub fn max_attempts(mut self, attempts: u32) -> Self {
            self.$($policy).+.max_attempts = attempts;
            self
        }

        /// The backoff used when the provider gave no wait hint: the wait
        /// before attempt `n + 1` is drawn uniformly from
        /// `0..=min(cap, base × 2ⁿ⁻¹)` (default 500 ms, 8 s; `cap` at least
        /// `base`).
        pub fn backoff(mut self, base: std::time::Duration, cap: std::time::Duration) -> Self {
            self.$($policy).+.base = base;
            self.$($policy).+.cap = cap;
            self
        }

        /// The longest wait slept before a retry (default 60 s, the ceiling
        /// the provider SDKs put on `retry-after`); a longer one returns the
        /// answer instead.
        pub fn max_wait(mut self, max_wait: std::time::Duration) -> Self {
            self.$($policy).+.max_wait = max_wait;
            self
        }
    };
}
pub(crate) use policy_setters;

/// The verdict's part of the decision: whether this outcome may be retried
/// at all. `x-should-retry` overrides the verdict both ways, except that a
/// success is never retried.
pub(crate) fn is_retryable(c: &Classification) -> bool {
    match (c.verdict, c.should_retry) {
        (Verdict::Success, _) => false,
        (_, Some(should)) => should,
        (verdict, None) => matches!(verdict, Verdict::Availability | Verdict::Throttled),
    }
}

impl Policy {
    /// Checks every knob; the error names the first invalid one, as the
    /// serde configuration's does (`retry.max_attempts`).
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        if self.max_attempts == 0 {
            return Err(ConfigError::new(
                "retry.max_attempts",
                "must be at least 1 (it counts the first attempt), got 0",
            ));
        }
        if self.cap < self.base {
            return Err(ConfigError::new(
                "retry.backoff_cap",
                format!(
                    "must be at least backoff_base ({:?}), got {:?}",
                    self.base, self.cap
                ),
            ));
        }
        if self.timeout.is_some_and(|t| t.is_zero()) {
            return Err(ConfigError::new(
                "retry.timeout",
                "must be greater than zero, got 0s",
            ));
        }
        Ok(())
    }

    /// How long to wait before the next attempt after `attempt` attempts
    /// failed: the provider's hint rounded up to the millisecond, else capped
    /// exponential backoff with full jitter (`rand` draws from `0..=1`).
    pub(crate) fn wait(
        &self,
        c: &Classification,
        attempt: u32,
        rand: impl FnOnce(u64) -> u64,
    ) -> Duration {
        if let Some(hint) = c.wait {
            return ceil_millis(hint);
        }
        let exp = self.base.saturating_mul(
            1u32.checked_shl(attempt.saturating_sub(1))
                .unwrap_or(u32::MAX),
        );
        let ceiling = exp.min(self.cap);
        let nanos = u64::try_from(ceiling.as_nanos()).unwrap_or(u64::MAX);
        Duration::from_nanos(rand(nanos))
    }

    /// Whether a wait fits: no longer than `max_wait`, and ending by the
    /// deadline if there is one.
    pub(crate) fn fits(&self, wait: Duration, deadline: Option<Instant>) -> bool {
        wait <= self.max_wait && deadline.is_none_or(|d| Instant::now() + wait <= d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(verdict: Verdict, should: Option<bool>) -> Classification {
        let mut c = Classification::new(verdict, "test");
        c.should_retry = should;
        c
    }

    #[test]
    fn only_availability_and_throttling_are_retryable_by_default() {
        let retryable: Vec<_> = Verdict::ALL
            .into_iter()
            .filter(|v| is_retryable(&c(*v, None)))
            .collect();
        assert_eq!(retryable, [Verdict::Availability, Verdict::Throttled]);
    }

    #[test]
    fn should_retry_overrides_the_verdict_but_never_retries_a_success() {
        assert!(!is_retryable(&c(Verdict::Availability, Some(false))));
        assert!(is_retryable(&c(Verdict::Request, Some(true))));
        assert!(!is_retryable(&c(Verdict::Success, Some(true))));
    }

    #[test]
    fn a_hint_is_rounded_up_to_the_millisecond_and_never_early() {
        let p = Policy::default();
        let hinted = Classification::new(Verdict::Throttled, "t")
            .with_wait(Some(Duration::from_micros(1_500_001)));
        assert_eq!(p.wait(&hinted, 1, |_| 0), Duration::from_millis(1501));
        let exact = hinted.with_wait(Some(Duration::from_secs(2)));
        assert_eq!(p.wait(&exact, 1, |_| 0), Duration::from_secs(2));
    }

    #[test]
    fn backoff_doubles_from_base_up_to_the_cap_with_full_jitter() {
        let p = Policy::default();
        let none = Classification::new(Verdict::Availability, "a");
        let top = |attempt| p.wait(&none, attempt, |max| max);
        assert_eq!(top(1), Duration::from_millis(500));
        assert_eq!(top(2), Duration::from_secs(1));
        assert_eq!(top(5), Duration::from_secs(8));
        assert_eq!(top(40), Duration::from_secs(8));
        assert_eq!(p.wait(&none, 3, |_| 0), Duration::ZERO);
    }
}
