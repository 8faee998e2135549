//! The park table: take a billing scope out of rotation until its quota resets.
//!
//! A spend cap or an exhausted quota is not a failure the provider recovers
//! from, nor a throttle that refills in seconds: Anthropic's tier spend cap
//! answers 429 with no `retry-after` and keeps refusing until the period
//! resets; OpenAI's `insufficient_quota` lasts until someone pays. Neither a
//! probe nor a cool-off fixes that, so the account (or project) is *parked*:
//! skipped without a request until the reset the provider named (the body's
//! `regain access on <date>`, a reset header), or
//! [`default_park`](ParkConfig::default_park) (1 h) when it named none, then
//! reinstated without a probe. A park is also something to tell a person
//! about — a spend cap is a conversation with finance, not an incident to wait
//! out — so parking returns a transition the layer raises as a warning.
//!
//! Like the gate, a park is extended but never shortened by a later signal,
//! and can be lifted by hand with [`ParkState::unpark`] once the cap is raised.
//!
//! ```
//! use std::time::Duration;
//! use levee_core::classify::Reason;
//! use levee_core::clock::{Clock, ManualClock};
//! use levee_core::park::{ParkConfig, ParkState};
//!
//! let cfg = ParkConfig::default();
//! let clock = ManualClock::new();
//! let mut park = ParkState::new();
//! let cause = Reason::new_static("anthropic:enforced_spend_limit_reached");
//!
//! let parked = park.park(&cfg, clock.now(), None, &cause).unwrap();
//! assert_eq!((parked.from.as_str(), parked.to.as_str()), ("active", "parked"));
//! assert_eq!(park.check(clock.now()).0, Some(Duration::from_secs(3600)));
//!
//! // Finance raised the cap.
//! assert_eq!(park.unpark(clock.now()).unwrap().to, "active");
//! assert!(park.is_idle());
//! ```

use std::time::Duration;

use crate::classify::Reason;
use crate::clock::Timestamp;
use crate::config_error::{ConfigError, positive_duration};
use crate::transition::{State, Transition, human};

// === ParkConfig ===

/// How long to park when the provider names no reset. Shared by every billing scope.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ParkConfig {
    /// The park when the quota signal carried no reset time (1 h).
    pub default_park: Duration,
}

impl Default for ParkConfig {
    fn default() -> Self {
        ParkConfig {
            default_park: Duration::from_secs(60 * 60),
        }
    }
}

impl ParkConfig {
    /// A builder starting from the defaults.
    pub fn builder() -> ParkConfigBuilder {
        ParkConfigBuilder {
            config: ParkConfig::default(),
        }
    }

    /// Checks every field; the error names the first invalid one.
    pub fn validate(&self) -> Result<(), ConfigError> {
        positive_duration("park.default_park", self.default_park)
    }
}

/// Builds a validated [`ParkConfig`].
#[derive(Clone, Debug)]
pub struct ParkConfigBuilder {
    config: ParkConfig,
}

impl ParkConfigBuilder {
    /// The park when no reset time is given.
    pub fn default_park(mut self, d: Duration) -> Self {
        self.config.default_park = d;
        self
    }

    /// Validates and returns the config.
    pub fn build(self) -> Result<ParkConfig, ConfigError> {
        self.config.validate()?;
        Ok(self.config)
    }
}

// === ParkState ===

/// Whether one billing scope is parked, until when, and why.
#[derive(Clone, Debug, Default)]
pub struct ParkState {
    /// The reset; `Some` exactly while parked.
    until: Option<Timestamp>,
    /// The cause of the park, or of its latest extension.
    reason: Option<Reason>,
    /// When the scope was parked.
    since: Option<Timestamp>,
}

impl ParkState {
    /// An active (unparked) scope.
    pub fn new() -> Self {
        Self::default()
    }

    /// Parks the scope for `wait` (the provider's reset), or
    /// [`default_park`](ParkConfig::default_park) when there is none. A zero
    /// wait counts as none: it would unpark at once, which is never what an
    /// exhausted quota means.
    ///
    /// Returns `active` → `parked` when the scope was active; a park that is
    /// already in force is extended to the later reset (never shortened) and
    /// returns nothing.
    pub fn park(
        &mut self,
        cfg: &ParkConfig,
        now: Timestamp,
        wait: Option<Duration>,
        cause: &Reason,
    ) -> Option<Transition> {
        let hinted = wait.filter(|w| !w.is_zero());
        let wait = hinted.unwrap_or(cfg.default_park);
        self.enter(now, now.saturating_add(wait), cause, || match hinted {
            Some(_) => format!("parked until the quota resets in {} ({cause})", human(wait)),
            None => format!(
                "parked for {} with no reset time given ({cause})",
                human(wait)
            ),
        })
    }

    /// Parks the scope until `until` because another replica of the same
    /// service found its quota exhausted (`cause`: its reason). Like
    /// [`park`](ParkState::park): extends a park in force to the later
    /// reset without a transition; `until` not after `now` changes nothing.
    pub fn adopt(
        &mut self,
        now: Timestamp,
        until: Timestamp,
        cause: &Reason,
    ) -> Option<Transition> {
        if until <= now {
            return None;
        }
        let wait = until.saturating_duration_since(now);
        self.enter(now, until, cause, || {
            format!("parked for {} (seen by the fleet: {cause})", human(wait))
        })
    }

    /// Parks until `until`, or extends a park in force to it (never
    /// shortened, no transition); `reason` words a new park's transition.
    fn enter(
        &mut self,
        now: Timestamp,
        until: Timestamp,
        cause: &Reason,
        reason: impl FnOnce() -> String,
    ) -> Option<Transition> {
        if let Some(current) = self.until
            && now < current
        {
            if until > current {
                self.until = Some(until);
                self.reason = Some(cause.clone());
            }
            return None;
        }
        self.until = Some(until);
        self.reason = Some(cause.clone());
        self.since = Some(now);
        Some(
            Transition::new(State::Active, State::Parked, now, reason())
                .with_until(Some(until))
                .with_cause(Some(cause.as_str().to_owned())),
        )
    }

    /// Lifts the park now (the cap was raised). `None` if not parked.
    pub fn unpark(&mut self, now: Timestamp) -> Option<Transition> {
        self.until?;
        self.clear();
        Some(Transition::new(
            State::Parked,
            State::Active,
            now,
            "unparked manually",
        ))
    }

    /// Whether the scope is parked at `now`: the time left if so, and the
    /// `parked` → `active` transition when the reset has just been found passed.
    pub fn check(&mut self, now: Timestamp) -> (Option<Duration>, Option<Transition>) {
        let Some(until) = self.until else {
            return (None, None);
        };
        if now < until {
            return (Some(until.saturating_duration_since(now)), None);
        }
        self.clear();
        let t = Transition::new(State::Parked, State::Active, now, "quota reset time passed");
        (None, Some(t))
    }

    /// The reset while parked (until [`check`](ParkState::check) finds it passed).
    pub fn until(&self) -> Option<Timestamp> {
        self.until
    }

    /// The cause of the park (or of its latest extension) while parked.
    pub fn reason(&self) -> Option<&Reason> {
        self.reason.as_ref()
    }

    /// When the current park began.
    pub fn parked_since(&self) -> Option<Timestamp> {
        self.since
    }

    /// Whether the scope is not parked, so the entry can be evicted.
    pub fn is_idle(&self) -> bool {
        self.until.is_none()
    }

    fn clear(&mut self) {
        *self = ParkState::default();
    }
}
