//! The throttle gate: hold a quota scope back until the provider's wait hint.
//!
//! A `429` means the account is healthy and out of allowance *for now*; the
//! provider usually says for how long (`retry-after`, `retry-after-ms`, a
//! reset header, a hint in the body). Sending before that instant only burns
//! allowance — OpenAI and Azure count rejected requests against the limit —
//! so the gate closes the scope (account × model, or an Azure deployment)
//! until the hinted instant and routes traffic elsewhere meanwhile. When the
//! instant passes, traffic simply resumes: no probe, no cool-off, because
//! nothing was broken. It never touches the breaker.
//!
//! Three rules keep it honest:
//!
//! - **A re-throttle never shortens the wait.** The deadline is
//!   `max(current, now + wait)`; a burst of responses with stale, shorter
//!   hints cannot reopen the scope early.
//! - **No hint means a short default, jittered.** A 429 without a usable hint
//!   gates for [`default_wait`](GateConfig::default_wait) (5 s), varied by
//!   ±[`jitter`](GateConfig::jitter) (20%) so the clients of many scopes do
//!   not come back in lockstep. A provider's own hint is used exactly: it
//!   knows when the allowance refills.
//! - **A very long wait is not a throttle.** A hint beyond
//!   [`max_wait`](GateConfig::max_wait) (10 min) — "retry after 86400" — means
//!   a quota ran out; [`GateState::throttle`] answers [`GateDecision::Park`]
//!   and the caller parks the billing scope instead (see [`park`](crate::park)).
//!
//! The gate also keeps how long the scope spent gated, in total and over a
//! trailing window: an account gated for a growing share of each hour is
//! telling you its quota no longer fits its traffic — a capacity request to
//! file, and a signal the breaker by design never raises.
//!
//! ```
//! use std::time::Duration;
//! use levee_core::classify::Reason;
//! use levee_core::clock::{Clock, ManualClock};
//! use levee_core::gate::{GateConfig, GateDecision, GateState};
//!
//! let cfg = GateConfig::default();
//! let clock = ManualClock::new();
//! let mut rng = fastrand::Rng::with_seed(1);
//! let mut gate = GateState::new();
//! let cause = Reason::new_static("openai:rate_limit_exceeded");
//!
//! let d = gate.throttle(&cfg, clock.now(), Some(Duration::from_secs(7)), &cause, &mut rng);
//! let GateDecision::Gated { transition, .. } = d else { unreachable!() };
//! assert_eq!(transition.unwrap().to, "gated");
//!
//! // A stale 2 s hint does not shorten the 7 s wait.
//! clock.advance(Duration::from_secs(1));
//! gate.throttle(&cfg, clock.now(), Some(Duration::from_secs(2)), &cause, &mut rng);
//! assert_eq!(gate.check(clock.now()).0, Some(Duration::from_secs(6)));
//!
//! // When the deadline passes, the gate clears with no probe.
//! clock.advance(Duration::from_secs(6));
//! assert_eq!(gate.check(clock.now()).1.unwrap().to, "clear");
//! assert_eq!(gate.gated_time(clock.now()), Duration::from_secs(7));
//!
//! // A day-long "retry after" is a quota, not a throttle.
//! let day = Some(Duration::from_secs(86_400));
//! assert!(matches!(gate.throttle(&cfg, clock.now(), day, &cause, &mut rng), GateDecision::Park { .. }));
//! ```

use std::collections::VecDeque;
use std::time::Duration;

use crate::classify::Reason;
use crate::classify::hints::RateLimits;
use crate::clock::{Timestamp, duration_nanos};
use crate::config_error::{ConfigError, positive_duration};
use crate::pace::{Allowance, InFlight, PaceConfig};
use crate::transition::{State, Transition, human};

/// Gated spans kept exactly for [`GateState::gated_in_last`]; older ones are
/// merged pairwise, so memory stays bounded and only old spans lose precision.
pub const GATE_HISTORY_SPANS: usize = 32;

// === GateConfig ===

/// How the throttle gate treats a 429. Shared by every quota scope.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct GateConfig {
    /// How long to gate when the throttle carried no wait hint (5 s).
    pub default_wait: Duration,
    /// Relative spread of `default_wait`: it is drawn uniformly from
    /// `[d × (1 − jitter), d × (1 + jitter)]`. In `[0, 1)`, default 0.2.
    pub jitter: f64,
    /// A hinted wait longer than this parks the scope instead of gating it
    /// (10 min). `None`: always gate.
    pub max_wait: Option<Duration>,
}

impl Default for GateConfig {
    fn default() -> Self {
        GateConfig {
            default_wait: Duration::from_secs(5),
            jitter: 0.2,
            max_wait: Some(Duration::from_secs(10 * 60)),
        }
    }
}

impl GateConfig {
    /// A builder starting from the defaults.
    pub fn builder() -> GateConfigBuilder {
        GateConfigBuilder {
            config: GateConfig::default(),
        }
    }

    /// Checks every field; the error names the first invalid one.
    pub fn validate(&self) -> Result<(), ConfigError> {
        positive_duration("gate.default_wait", self.default_wait)?;
        let j = self.jitter;
        if !(j.is_finite() && (0.0..1.0).contains(&j)) {
            return Err(ConfigError::new(
                "gate.jitter",
                format!("must be a finite number in [0, 1), got {j}"),
            ));
        }
        if let Some(max) = self.max_wait
            && max < self.default_wait
        {
            return Err(ConfigError::new(
                "gate.max_wait",
                format!(
                    "must be at least default_wait ({:?}), got {max:?}",
                    self.default_wait
                ),
            ));
        }
        Ok(())
    }

    /// Draws the wait for a throttle without a hint.
    fn draw_default(&self, rng: &mut fastrand::Rng) -> Duration {
        let j = if self.jitter.is_finite() {
            self.jitter.clamp(0.0, 1.0)
        } else {
            0.0
        };
        let lo = duration_nanos(self.default_wait.mul_f64(1.0 - j));
        let hi = duration_nanos(self.default_wait.mul_f64(1.0 + j));
        Duration::from_nanos(if lo < hi { rng.u64(lo..=hi) } else { hi })
    }
}

/// Builds a validated [`GateConfig`].
#[derive(Clone, Debug)]
pub struct GateConfigBuilder {
    config: GateConfig,
}

impl GateConfigBuilder {
    /// The wait when a throttle carries no hint.
    pub fn default_wait(mut self, wait: Duration) -> Self {
        self.config.default_wait = wait;
        self
    }

    /// The relative jitter of the default wait, in `[0, 1)`.
    pub fn jitter(mut self, jitter: f64) -> Self {
        self.config.jitter = jitter;
        self
    }

    /// The longest hinted wait that still gates; `None` never parks.
    pub fn max_wait(mut self, max: impl Into<Option<Duration>>) -> Self {
        self.config.max_wait = max.into();
        self
    }

    /// Validates and returns the config.
    pub fn build(self) -> Result<GateConfig, ConfigError> {
        self.config.validate()?;
        Ok(self.config)
    }
}

// === GateDecision ===

#[allow(
    clippy::exhaustive_enums,
    reason = "a throttle closes the gate or parks the account; a third outcome would need every caller to act on it"
)]
/// What [`GateState::throttle`] decided.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GateDecision {
    /// The scope is gated until `until` (which equals `now` for a zero hint:
    /// the provider asked for no wait, so the gate stays clear).
    Gated {
        /// The deadline, never earlier than before.
        until: Timestamp,
        /// `clear` → `gated`, if the scope was clear.
        transition: Option<Transition>,
    },
    /// The hinted wait exceeds [`GateConfig::max_wait`]: park the billing
    /// scope for `wait` instead. The gate is unchanged.
    Park {
        /// The provider's hint.
        wait: Duration,
    },
}

/// The cause a paced closing names.
pub const PACED: Reason = Reason::new_static("paced");

/// The cause a closing adopted from another replica names.
pub const FLEET: Reason = Reason::new_static("fleet");

// === GateState ===

/// The throttle gate of one quota scope.
#[derive(Clone, Debug, Default)]
pub struct GateState {
    /// The latest deadline ever set; never decreases.
    deadline: Option<Timestamp>,
    /// Start of the current gated span; `Some` exactly while gated.
    gated_since: Option<Timestamp>,
    /// Total length of closed spans.
    closed_total: Duration,
    /// Recent closed spans, oldest first.
    spans: VecDeque<Span>,
    /// What the provider last said is left of each limit (boxed: only
    /// scopes whose provider sends rate-limit headers have one).
    allowance: Option<Box<Allowance>>,
    /// Times the gate closed on a provider's throttle, and paced.
    closings: Closings,
}

/// How often a gate closed, by why.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct Closings {
    /// On a provider's throttle (a `429`).
    pub throttled: u64,
    /// Paced before one ([`GateState::pace`]).
    pub paced: u64,
}

/// A closed stretch of gated time. `gated == end - start` unless merged.
#[derive(Clone, Copy, Debug)]
struct Span {
    start: Timestamp,
    end: Timestamp,
    gated: Duration,
}

impl GateState {
    /// A clear gate with no history.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records a throttle at `now` with the provider's `wait` hint (or none).
    ///
    /// Gates until `max(current deadline, now + wait)`, where a missing hint
    /// is [`GateConfig::default_wait`] jittered; or, if the hint exceeds
    /// [`GateConfig::max_wait`], answers [`GateDecision::Park`] and changes
    /// nothing. `cause` is the classifier's reason, for the transition.
    pub fn throttle(
        &mut self,
        cfg: &GateConfig,
        now: Timestamp,
        wait: Option<Duration>,
        cause: &Reason,
        rng: &mut fastrand::Rng,
    ) -> GateDecision {
        let (wait, reason) = match wait {
            Some(w) if cfg.max_wait.is_some_and(|max| w > max) => {
                return GateDecision::Park { wait: w };
            }
            Some(w) => (w, format!("throttled for {} ({cause})", human(w))),
            None => {
                let w = cfg.draw_default(rng);
                let reason = format!(
                    "throttled with no wait hint, gated for {} ({cause})",
                    human(w)
                );
                (w, reason)
            }
        };
        let (until, transition) = self.close(now, now.saturating_add(wait), reason, cause);
        if transition.is_some() {
            self.closings.throttled += 1;
        }
        GateDecision::Gated { until, transition }
    }

    /// Takes in what a response received at `now` says is left of each
    /// limit, less what was sent since (`in_flight`) that the provider had
    /// not counted yet, and when a limit is at its reserve, closes the gate
    /// until enough of it has refilled (see [`pace`](crate::pace)): the
    /// reason says `paced`, the deadline never shortens. Returns the
    /// deadline and the `clear` → `gated` transition, if it paced.
    pub fn pace(
        &mut self,
        cfg: &PaceConfig,
        now: Timestamp,
        limits: &RateLimits,
        in_flight: InFlight,
    ) -> Option<(Timestamp, Option<Transition>)> {
        if limits.is_empty() {
            return None;
        }
        let allowance = self.allowance.get_or_insert_default();
        allowance.observe(now, limits);
        allowance.debit(now, in_flight.requests, in_flight.tokens);
        // The provider's next report comes a latency later, and until then
        // the scope takes whatever is sent: keep room for twice the calls
        // now in flight (the rate they were sent at, doubled for the burst
        // a reopened first-choice target draws). Measured on the built-in
        // throttle storm: 429s at 2.19% of requests with once, 1.59% twice.
        let headroom = in_flight.times(2);
        let (until, dimension) = allowance.paced_until_with(cfg, now, headroom)?;
        let wait = until.saturating_duration_since(now);
        let reason = format!(
            "paced for {} ({} at the reserve)",
            human(wait),
            dimension.as_str()
        );
        let (until, transition) = self.close(now, until, reason, &PACED);
        if transition.is_some() {
            self.closings.paced += 1;
        }
        Some((until, transition))
    }

    /// Gates until `until` because requests are sent faster than the
    /// provider refills ([`Spacing`](crate::pace::Spacing)), with the reason
    /// `paced`; the deadline and the `clear` → `gated` transition if it was
    /// clear.
    pub fn space(&mut self, now: Timestamp, until: Timestamp) -> (Timestamp, Option<Transition>) {
        let wait = until.saturating_duration_since(now);
        let reason = format!(
            "paced for {} (requests spread at the provider's rate)",
            human(wait)
        );
        let (until, transition) = self.close(now, until, reason, &PACED);
        if transition.is_some() {
            self.closings.paced += 1;
        }
        (until, transition)
    }

    /// Gates until `until` because another replica of the same service was
    /// throttled on this quota scope (`why`: the provider's words as it saw
    /// them): the deadline and the `clear` → `gated` transition if it was
    /// clear. Counted as a closing on a throttle; never shortens the gate.
    pub fn adopt(
        &mut self,
        now: Timestamp,
        until: Timestamp,
        why: &str,
    ) -> (Timestamp, Option<Transition>) {
        let wait = until.saturating_duration_since(now);
        let reason = format!("throttled for {} (seen by the fleet: {why})", human(wait));
        let (until, transition) = self.close(now, until, reason, &FLEET);
        if transition.is_some() {
            self.closings.throttled += 1;
        }
        (until, transition)
    }

    /// Gates until `max(current deadline, until)`; the `clear` → `gated`
    /// transition if it was clear.
    fn close(
        &mut self,
        now: Timestamp,
        until: Timestamp,
        reason: String,
        cause: &Reason,
    ) -> (Timestamp, Option<Transition>) {
        self.settle(now);
        let until = self.deadline.max(Some(until)).unwrap_or(now);
        self.deadline = Some(until);
        let transition = (self.gated_since.is_none() && now < until).then(|| {
            self.gated_since = Some(now);
            Transition::new(State::Clear, State::Gated, now, reason)
                .with_until(Some(until))
                .with_cause(Some(cause.as_str().to_owned()))
        });
        (until, transition)
    }

    /// What the scope's provider last said is left, if it says.
    pub fn allowance(&self) -> Option<&Allowance> {
        self.allowance.as_deref()
    }

    /// How often the gate closed, on a throttle and paced.
    pub fn closings(&self) -> Closings {
        self.closings
    }

    /// Whether the scope is gated at `now`: the time left if so, and the
    /// `gated` → `clear` transition when the deadline has just been found passed.
    pub fn check(&mut self, now: Timestamp) -> (Option<Duration>, Option<Transition>) {
        let (Some(_), Some(deadline)) = (self.gated_since, self.deadline) else {
            return (None, None);
        };
        if now < deadline {
            return (Some(deadline.saturating_duration_since(now)), None);
        }
        self.settle(now);
        let t = Transition::new(State::Gated, State::Clear, now, "throttle deadline passed");
        (None, Some(t))
    }

    /// The deadline while gated (until [`check`](GateState::check) finds it passed).
    pub fn until(&self) -> Option<Timestamp> {
        self.gated_since.and(self.deadline)
    }

    /// When the scope was last gated until: the end of its latest gated span
    /// (or the current deadline). `None` if never gated.
    pub fn last_gated(&self) -> Option<Timestamp> {
        self.until().or(self.spans.back().map(|s| s.end))
    }

    /// Total time the scope has spent gated, up to `now`.
    pub fn gated_time(&self, now: Timestamp) -> Duration {
        let current = self.current_span(now).map_or(Duration::ZERO, |s| s.gated);
        self.closed_total.saturating_add(current)
    }

    /// Time spent gated within `[now − window, now]`: divide by `window` for
    /// the share of, say, the last hour. Exact for the latest
    /// [`GATE_HISTORY_SPANS`] gated spans; older spans are merged and
    /// prorated, so memory stays bounded.
    pub fn gated_in_last(&self, now: Timestamp, window: Duration) -> Duration {
        let from = Timestamp::from_nanos(now.as_nanos().saturating_sub(duration_nanos(window)));
        self.spans
            .iter()
            .chain(self.current_span(now).as_ref())
            .map(|s| s.overlap(from, now))
            .fold(Duration::ZERO, Duration::saturating_add)
    }

    /// Whether the scope is clear at `now`, so the entry can be evicted
    /// (losing its gated-time history; see [`last_gated`](GateState::last_gated)
    /// to keep recently gated scopes for their capacity signal).
    pub fn is_idle(&self, now: Timestamp) -> bool {
        self.until().is_none_or(|deadline| deadline <= now)
    }

    /// The current gated span, cut at `now`.
    fn current_span(&self, now: Timestamp) -> Option<Span> {
        let (start, deadline) = (self.gated_since?, self.deadline?);
        let end = deadline.min(now).max(start);
        let gated = end.saturating_duration_since(start);
        Some(Span { start, end, gated })
    }

    /// Closes the gated span if its deadline has passed by `now`.
    fn settle(&mut self, now: Timestamp) {
        let (Some(start), Some(deadline)) = (self.gated_since, self.deadline) else {
            return;
        };
        if now < deadline {
            return;
        }
        self.gated_since = None;
        let span = Span {
            start,
            end: deadline,
            gated: deadline.saturating_duration_since(start),
        };
        self.closed_total = self.closed_total.saturating_add(span.gated);
        if self.spans.len() >= GATE_HISTORY_SPANS
            && let Some(oldest) = self.spans.pop_front()
            && let Some(next) = self.spans.front_mut()
        {
            next.start = oldest.start;
            next.gated = next.gated.saturating_add(oldest.gated);
        }
        self.spans.push_back(span);
    }
}

impl Span {
    /// Gated time of this span within `[from, to]`, prorated for merged spans.
    fn overlap(&self, from: Timestamp, to: Timestamp) -> Duration {
        let start = self.start.max(from);
        let end = self.end.min(to);
        if end <= start {
            return Duration::ZERO;
        }
        let overlap = end.saturating_duration_since(start);
        let length = self.end.saturating_duration_since(self.start);
        if overlap >= length {
            return self.gated;
        }
        let nanos = duration_nanos(self.gated) as u128 * duration_nanos(overlap) as u128
            / duration_nanos(length).max(1) as u128;
        Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
    }
}
