//! What goes into a breaker (outcomes) and what comes out (admissions).

use std::fmt;
use std::time::Duration;

use crate::classify::{Classification, Reason, Verdict};
use crate::clock::Timestamp;
use crate::transition::State;

// === BreakerStatus ===

#[allow(
    clippy::exhaustive_enums,
    reason = "a circuit breaker's three states (closed, open, half-open) are the pattern itself; a fourth would change every caller"
)]
/// The three states of a breaker.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum BreakerStatus {
    /// Calls pass; failures are counted.
    #[default]
    Closed,
    /// Calls are rejected until the cool-off ends (or forever, if isolated).
    Open,
    /// A few trial calls (probes) decide whether to close or reopen.
    HalfOpen,
}

impl BreakerStatus {
    /// The breaker's [`State`].
    pub const fn state(self) -> State {
        match self {
            BreakerStatus::Closed => State::Closed,
            BreakerStatus::Open => State::Open,
            BreakerStatus::HalfOpen => State::HalfOpen,
        }
    }

    /// `"closed"`, `"open"` or `"half_open"`: the [`State`]'s name.
    pub const fn as_str(self) -> &'static str {
        self.state().as_str()
    }
}

impl fmt::Display for BreakerStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

// === Outcome ===

/// The result of one admitted call, as the breaker needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Outcome {
    /// What the response (or transport failure) says about the account.
    pub verdict: Verdict,
    /// The classifier's machine-readable reason, e.g. `status:503`; failures
    /// are attributed to it in [`failure_breakdown`](super::BreakerState::failure_breakdown).
    pub cause: Reason,
    /// The call took longer than the configured
    /// [`slow_call`](super::BreakerConfig::slow_call) threshold. A slow
    /// *success* counts as an availability failure (attributed to
    /// `slow_call`); the flag changes nothing for other verdicts.
    pub slow: bool,
}

impl Outcome {
    /// The cause a slow success is attributed to.
    pub const SLOW_CALL: &'static str = "slow_call";

    /// An outcome that was not slow.
    pub fn new(verdict: Verdict, cause: impl Into<Reason>) -> Self {
        Outcome {
            verdict,
            cause: cause.into(),
            slow: false,
        }
    }

    /// A plain, fast success.
    pub const fn success() -> Self {
        Outcome {
            verdict: Verdict::Success,
            cause: Reason::new_static("success"),
            slow: false,
        }
    }

    /// A success that took longer than the slow-call threshold.
    pub const fn slow_success() -> Self {
        Outcome {
            verdict: Verdict::Success,
            cause: Reason::new_static(Self::SLOW_CALL),
            slow: true,
        }
    }

    /// The verdict and reason of a classification.
    pub fn from_classification(c: &Classification) -> Self {
        Outcome::new(c.verdict, c.reason.clone())
    }

    /// Sets [`slow`](Outcome::slow).
    pub fn with_slow(mut self, slow: bool) -> Self {
        self.slow = slow;
        self
    }

    /// The verdict the breaker acts on: a slow success is an availability failure.
    pub fn effective_verdict(&self) -> Verdict {
        if self.slow && self.verdict == Verdict::Success {
            Verdict::Availability
        } else {
            self.verdict
        }
    }

    /// Whether the breaker counts this outcome as a failure.
    pub fn is_failure(&self) -> bool {
        self.effective_verdict().is_breaker_failure()
    }

    /// Whether the outcome says nothing about health (throttled, quota,
    /// request): the breaker neither counts it nor resets anything for it.
    pub fn is_neutral(&self) -> bool {
        matches!(
            self.verdict,
            Verdict::Throttled | Verdict::Quota | Verdict::Request
        )
    }

    /// The key a failure is counted under in the breakdown.
    pub fn attribution(&self) -> &str {
        if self.slow && self.verdict == Verdict::Success {
            Self::SLOW_CALL
        } else {
            self.cause.as_str()
        }
    }
}

// === Permit / Admission ===

/// Proof that a call was admitted, handed back with its outcome.
///
/// The generation ties the outcome to the breaker state it was admitted in:
/// an outcome from before the last transition is ignored, so a slow call
/// admitted while closed cannot reopen a breaker that has since recovered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Permit {
    /// [`BreakerState::generation`](super::BreakerState::generation) at admission.
    pub generation: u64,
    /// The probe lease, for a trial call admitted while half-open.
    pub probe: Option<u32>,
    /// When the call was admitted.
    pub admitted_at: Timestamp,
}

impl Permit {
    /// A shadow probe's permit, admitted during the open spell that began
    /// at `spell` ([`BreakerState::open_since`](super::BreakerState::open_since)):
    /// it is no caller's, and its answer can only close that spell
    /// ([`BreakerState::record_shadow`](super::BreakerState::record_shadow)).
    /// Internal: no semver promise.
    #[doc(hidden)]
    pub const fn shadow(spell: Timestamp) -> Self {
        Permit {
            generation: u64::MAX,
            probe: None,
            admitted_at: spell,
        }
    }

    /// Whether it is a [shadow probe's](Self::shadow).
    #[doc(hidden)]
    pub const fn is_shadow(&self) -> bool {
        self.generation == u64::MAX
    }

    /// A permit of a call admitted closed in `generation`, for a caller that
    /// admits closed calls itself (tower-levee's lock-free path). Internal:
    /// no semver promise.
    #[doc(hidden)]
    pub const fn closed(generation: u64) -> Self {
        Permit {
            generation,
            probe: None,
            // Only probes carry a lease; a closed call needs no timestamp.
            admitted_at: Timestamp::ZERO,
        }
    }

    /// Whether this permit is a half-open probe.
    pub fn is_probe(&self) -> bool {
        self.probe.is_some()
    }
}

#[allow(
    clippy::exhaustive_enums,
    reason = "a call is let through or refused; a third answer would change every caller"
)]
/// The answer of [`BreakerState::admit`](super::BreakerState::admit).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admission {
    /// Send the call; report its outcome with this permit.
    Allowed(Permit),
    /// Fail fast: the breaker is open, or every probe slot is taken.
    Rejected {
        /// When it is worth asking again.
        retry_after: Duration,
    },
}

impl Admission {
    /// The permit, if the call was allowed.
    pub fn permit(self) -> Option<Permit> {
        match self {
            Admission::Allowed(p) => Some(p),
            Admission::Rejected { .. } => None,
        }
    }

    /// Whether the call was allowed.
    pub fn is_allowed(&self) -> bool {
        matches!(self, Admission::Allowed(_))
    }
}
