//! The per-key breaker state machine: fields, admission, accessors, and the
//! transitions shared by recording and manual control.

use std::collections::BTreeMap;
use std::time::Duration;

use super::config::BreakerConfig;
use super::outcome::{Admission, BreakerStatus, Permit};
use super::probes::Round;
use super::tripping::{RollingWindow, Tripping};
use crate::clock::Timestamp;
use crate::transition::Transition;

/// The `retry_after` of a call rejected by an isolated breaker. Isolation has
/// no deadline (it lasts until [`BreakerState::close`]), so callers are told
/// to ask again in a minute rather than given a made-up reopen time.
pub const ISOLATED_RETRY_AFTER: Duration = Duration::from_secs(60);

/// The breaker state of one key (one failure domain).
///
/// Sans-IO: every method takes the time as a [`Timestamp`] and randomness as
/// a [`fastrand::Rng`], does no IO and never blocks; a method that changes the
/// state's name returns the [`Transition`] for the caller to publish. The
/// registry keeps one of these per key behind a short mutex.
///
/// Life of a call: [`admit`](BreakerState::admit) → send if allowed →
/// [`record`](BreakerState::record) the outcome with the permit, or
/// [`release`](BreakerState::release) it if the call was cancelled.
#[derive(Clone, Debug)]
pub struct BreakerState {
    pub(super) status: BreakerStatus,
    /// Bumped on every change of status; permits of older generations are ignored.
    pub(super) generation: u64,
    /// End of the cool-off; `Some` while open and not isolated.
    pub(super) open_until: Option<Timestamp>,
    /// Held open until [`close`](BreakerState::close).
    pub(super) isolated: bool,
    /// Open on rejected credentials (its own or a failed probe's), not on
    /// availability: a key rarely comes back by itself.
    pub(super) credential_open: bool,
    /// Open because other replicas reported it ([`adopt_open`](BreakerState::adopt_open)),
    /// not from this one's own failures; cleared by any change of status.
    pub(super) adopted: bool,
    /// Failed recoveries since the breaker last recovered: the cool-off exponent.
    pub(super) reopens: u32,
    /// Failures (availability or credential) since the last success.
    pub(super) consecutive_failures: u32,
    /// Credential failures since the last success.
    pub(super) credential_failures: u32,
    /// Failures since the bucket last cleared, by cause. Attribution only.
    pub(super) breakdown: BTreeMap<String, u32>,
    /// Rolling-window counts, allocated only under [`Tripping::Rolling`].
    pub(super) window: Option<Box<RollingWindow>>,
    /// The half-open round.
    pub(super) round: Round,
    /// A manual open/close/isolate happened (no key at hand): reset a custom
    /// tripping policy for this key on its next recorded outcome.
    pub(super) policy_reset_pending: bool,
    /// Whether the config this state was made for uses a custom policy.
    pub(super) custom_policy: bool,
    /// When the breaker last left `closed`; `None` while closed.
    pub(super) open_since: Option<Timestamp>,
    /// Time spent away from `closed` in finished spells (open, half-open,
    /// isolated). Updated on transitions only, never on the success path.
    pub(super) open_total: Duration,
    /// Other replicas' consecutive failures of this domain, as their fleet
    /// last reported them: added to this replica's own streak under
    /// consecutive tripping. Cleared by any change of status.
    pub(super) fleet_failures: u32,
    /// Whether this open breaker's next probe has the fleet's leave:
    /// see [`admit_in_fleet`](BreakerState::admit_in_fleet).
    pub(super) fleet_probe: FleetProbe,
}

/// Where an open breaker stands with the fleet's one probe per cool-off.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum FleetProbe {
    /// Not asked since the breaker last changed status or was held.
    Unasked,
    /// Asked when the cool-off ended; refusing until the answer or the
    /// ask's wait runs out (then it probes alone).
    Asked,
    /// Held open while another replica holds the probe: asks again when
    /// the hold ends, and a grant ends the hold at once.
    Held,
    /// This replica probes: the fleet granted it, or a probe elsewhere
    /// found the domain healthy.
    Granted,
}

/// Why a breaker opens, which picks the cool-off schedule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum OpenKind {
    Availability,
    Credential,
}

impl BreakerState {
    /// A closed breaker with nothing counted.
    pub fn new(config: &BreakerConfig) -> Self {
        BreakerState {
            status: BreakerStatus::Closed,
            generation: 0,
            open_until: None,
            isolated: false,
            credential_open: false,
            adopted: false,
            reopens: 0,
            consecutive_failures: 0,
            credential_failures: 0,
            breakdown: BTreeMap::new(),
            window: matches!(config.tripping, Tripping::Rolling { .. }).then(Box::default),
            round: Round::default(),
            policy_reset_pending: false,
            custom_policy: matches!(config.tripping, Tripping::Custom(_)),
            open_since: None,
            open_total: Duration::ZERO,
            fleet_failures: 0,
            fleet_probe: FleetProbe::Unasked,
        }
    }

    /// May a call go through now?
    ///
    /// Closed: always, with a plain permit. Open: rejected with the time left
    /// in the cool-off; once it has elapsed, the breaker turns half-open (the
    /// returned transition) and this call becomes a probe. Half-open: up to
    /// [`half_open_probes`](BreakerConfig::half_open_probes) probes at a time,
    /// reclaiming slots whose lease outlived
    /// [`probe_timeout`](BreakerConfig::probe_timeout); beyond that, rejected
    /// with the time until the earliest lease expires, at most
    /// [`HALF_OPEN_RETRY_AFTER`](super::HALF_OPEN_RETRY_AFTER).
    pub fn admit(
        &mut self,
        cfg: &BreakerConfig,
        now: Timestamp,
    ) -> (Admission, Option<Transition>) {
        match self.status {
            BreakerStatus::Closed => (Admission::Allowed(self.permit(None, now)), None),
            BreakerStatus::HalfOpen => (self.admit_probe(cfg, now), None),
            BreakerStatus::Open => {
                if self.isolated {
                    let retry_after = ISOLATED_RETRY_AFTER;
                    return (Admission::Rejected { retry_after }, None);
                }
                let until = self.open_until.unwrap_or(now);
                if now < until {
                    let retry_after = until.saturating_duration_since(now);
                    return (Admission::Rejected { retry_after }, None);
                }
                let transition = self.enter_half_open(cfg, now);
                (self.admit_probe(cfg, now), Some(transition))
            }
        }
    }

    fn admit_probe(&mut self, cfg: &BreakerConfig, now: Timestamp) -> Admission {
        match self.round.lease(cfg.probes(), now, cfg.probe_timeout) {
            Ok(ticket) => Admission::Allowed(self.permit(Some(ticket), now)),
            Err(retry_after) => Admission::Rejected { retry_after },
        }
    }

    fn permit(&self, probe: Option<u32>, now: Timestamp) -> Permit {
        Permit {
            generation: self.generation,
            probe,
            admitted_at: now,
        }
    }

    // === accessors ===

    /// The current status. An open breaker whose cool-off has elapsed stays
    /// `Open` until the next [`admit`](BreakerState::admit) turns it half-open.
    pub fn status(&self) -> BreakerStatus {
        self.status
    }

    /// The end of the cool-off while open; `None` when closed, half-open or isolated.
    pub fn open_until(&self) -> Option<Timestamp> {
        self.open_until
    }

    /// Whether the breaker is held open by [`isolate`](BreakerState::isolate).
    pub fn is_isolated(&self) -> bool {
        self.isolated
    }

    /// Whether it was last opened on rejected credentials (a revoked key),
    /// which only a new key or an operator mends: a probe on its own
    /// schedule (or a shadow probe) would learn nothing new.
    pub fn is_open_on_credentials(&self) -> bool {
        self.status != BreakerStatus::Closed && self.credential_open
    }

    /// Bumped on every change of status. Permits carry it; outcomes reported
    /// with an older one are ignored.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Failures (availability or credential) since the last success, or since
    /// the breaker last recovered or was closed.
    pub fn consecutive_failures(&self) -> u32 {
        self.consecutive_failures
    }

    /// Failed recoveries since the breaker last recovered: the exponent of the
    /// cool-off growth.
    pub fn reopens(&self) -> u32 {
        self.reopens
    }

    /// Probes in flight in the current half-open round (0 otherwise).
    pub fn probes_in_flight(&self) -> u32 {
        if self.status == BreakerStatus::HalfOpen {
            self.round.in_flight()
        } else {
            0
        }
    }

    /// When the breaker last left `closed` (tripped, or was opened or
    /// isolated by hand); `None` while closed. A spell lasts through
    /// half-open until the breaker closes again.
    pub fn open_since(&self) -> Option<Timestamp> {
        self.open_since
    }

    /// Total time the breaker has spent away from `closed` (open, half-open
    /// or isolated), up to `now`: a target that spends a growing share of each
    /// hour out of rotation is worth an alert. It is kept across recoveries and manual closes; it is kept
    /// only as long as the state is (a registry may evict an idle key).
    pub fn time_open(&self, now: Timestamp) -> Duration {
        let current = self
            .open_since
            .map_or(Duration::ZERO, |since| now.saturating_duration_since(since));
        self.open_total.saturating_add(current)
    }

    /// Failures by cause (`status:503: 3`, `transport:timeout: 1`) since the
    /// bucket last cleared: on a success while closed, on recovery, on a
    /// manual close. It is kept while open, so it explains the trip.
    /// Attribution only: it never decides anything.
    pub fn failure_breakdown(&self) -> &BTreeMap<String, u32> {
        &self.breakdown
    }

    /// Whether recording a plain, fast success with a current permit right now
    /// would change nothing: closed, nothing counted, and a tripping rule
    /// (consecutive) that keeps no per-call state. A caller may skip taking
    /// the lock on the success path when this holds.
    pub fn quiescent(&self, cfg: &BreakerConfig) -> bool {
        self.is_idle() && matches!(cfg.tripping, Tripping::Consecutive { .. })
    }

    /// Whether the state holds nothing worth keeping: closed, not isolated,
    /// no failure counted since the last success. Such a key can be evicted
    /// and recreated with [`new`](BreakerState::new) without changing any
    /// decision, except that under rolling tripping the calls in its window
    /// that preceded its last success are forgotten.
    pub fn is_idle(&self) -> bool {
        self.status == BreakerStatus::Closed
            && self.consecutive_failures == 0
            && self.credential_failures == 0
            && self.breakdown.is_empty()
            && !self.policy_reset_pending
    }

    // === transitions shared by record and manual control ===

    /// Opens the breaker for the cool-off of `kind` at the current growth,
    /// counted from `since` (now, or when the failed probe was sent) and
    /// never ending before now. The caller adds the cause to the returned
    /// transition.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn trip(
        &mut self,
        cfg: &BreakerConfig,
        key: Option<&str>,
        kind: OpenKind,
        since: Timestamp,
        now: Timestamp,
        rng: &mut fastrand::Rng,
        reason: String,
    ) -> Transition {
        let from = self.status;
        let cooldown = match kind {
            OpenKind::Availability => &cfg.cooldown,
            OpenKind::Credential => &cfg.credential_cooldown,
        };
        let until = since
            .min(now)
            .saturating_add(cooldown.sample(self.reopens, rng))
            .max(now);
        self.set_status(BreakerStatus::Open, now);
        self.open_until = Some(until);
        self.isolated = false;
        self.credential_open = kind == OpenKind::Credential;
        self.round.clear();
        self.reset_policy(cfg, key);
        self.transition(from, now, reason).with_until(Some(until))
    }

    /// Closes the breaker and forgets everything counted, growth included.
    pub(super) fn reset_closed(
        &mut self,
        cfg: Option<&BreakerConfig>,
        key: Option<&str>,
        now: Timestamp,
    ) {
        self.set_status(BreakerStatus::Closed, now);
        self.open_until = None;
        self.isolated = false;
        self.credential_open = false;
        self.reopens = 0;
        self.consecutive_failures = 0;
        self.credential_failures = 0;
        self.fleet_failures = 0;
        self.breakdown.clear();
        self.round.clear();
        match cfg {
            Some(cfg) => self.reset_policy(cfg, key),
            None => self.reset_policy_later(),
        }
    }

    fn enter_half_open(&mut self, cfg: &BreakerConfig, now: Timestamp) -> Transition {
        let from = self.status;
        self.set_status(BreakerStatus::HalfOpen, now);
        self.open_until = None;
        self.round.clear();
        let probes = cfg.probes();
        let plural = if probes == 1 { "" } else { "s" };
        let reason = format!("cool-off over, admitting {probes} probe{plural}");
        self.transition(from, now, reason)
    }

    /// Sets the status, starting a new generation if it changed, and keeps
    /// the time spent away from `closed`.
    pub(super) fn set_status(&mut self, status: BreakerStatus, now: Timestamp) {
        if self.status != status {
            match (self.status, status) {
                (BreakerStatus::Closed, _) => self.open_since = Some(now),
                (_, BreakerStatus::Closed) => {
                    if let Some(since) = self.open_since.take() {
                        let spell = now.saturating_duration_since(since);
                        self.open_total = self.open_total.saturating_add(spell);
                    }
                }
                _ => {}
            }
            self.status = status;
            self.adopted = false;
            self.fleet_failures = 0;
            self.fleet_probe = FleetProbe::Unasked;
            self.generation = self.generation.wrapping_add(1);
        }
    }

    /// A transition from `from` to the current status.
    pub(super) fn transition(
        &self,
        from: BreakerStatus,
        now: Timestamp,
        reason: String,
    ) -> Transition {
        Transition::new(from.state(), self.status.state(), now, reason)
            .with_consecutive_failures(self.consecutive_failures)
    }

    /// Forgets the tripping rule's per-key state, now if the key is known.
    pub(super) fn reset_policy(&mut self, cfg: &BreakerConfig, key: Option<&str>) {
        if let Some(window) = &mut self.window {
            window.clear();
        }
        match (&cfg.tripping, key) {
            (Tripping::Custom(policy), Some(key)) => {
                policy.reset(key);
                self.policy_reset_pending = false;
            }
            (Tripping::Custom(_), None) => self.policy_reset_pending = true,
            _ => self.policy_reset_pending = false,
        }
    }

    /// Forgets the tripping state; a custom policy hears of it on the next
    /// recorded outcome, which carries the key.
    pub(super) fn reset_policy_later(&mut self) {
        if let Some(window) = &mut self.window {
            window.clear();
        }
        self.policy_reset_pending = self.custom_policy;
    }
}
