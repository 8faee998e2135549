//! What other replicas of the same service report, applied here.
//!
//! A fleet sync (the `levee-redis` crate) watches this layer's events, tells
//! the other replicas, and applies what they tell it through
//! [`BreakerHandle::adopt`](super::BreakerHandle::adopt). Decisions travel:
//! a gate, a park, a breaker open or a recovery; and, through
//! [`BreakerHandle::coordinate`](super::BreakerHandle::coordinate), the two
//! things a fleet needs to probe once and count failures together: each
//! failure streak, and each open breaker's ask for a probe.

use std::time::Duration;

use levee_core::breaker::{BreakerConfig, BreakerState, Cooldown};
use levee_core::classify::Reason;
use levee_core::classify::hints::MAX_RESET;
use levee_core::clock::Clock;
use levee_core::transition::Transition;

use super::event::{Origin, ScopeEvent};
use super::shared::{Shared, lock_domain};
use super::signal::FleetSignal;

/// A decision another replica made, to apply here: see
/// [`BreakerHandle::adopt`](super::BreakerHandle::adopt).
///
/// Waits are durations from now, never instants: replicas' clocks differ,
/// and a duration cannot stretch a provider's wait by their skew. Each is
/// bounded as a local one is: a gate by the gate's `max_wait`, a breaker by
/// its longest cool-off (an hour under a custom schedule), a park by a month.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum FleetUpdate<'a> {
    /// A quota scope was throttled: gate it for `wait` (never shortened).
    Gated {
        /// The quota scope's key.
        scope: &'a str,
        /// How long it stays gated from now.
        wait: Duration,
        /// Why, as the other replica's classifier put it (`status:429`).
        reason: &'a str,
    },
    /// A billing scope's quota ran out: park it for `wait` (never shortened).
    Parked {
        /// The billing scope's key.
        scope: &'a str,
        /// How long until its reset, from now.
        wait: Duration,
        /// Why (`quota:insufficient_quota`).
        reason: &'a str,
    },
    /// Replicas found a failure domain failing: open its breaker for `wait`
    /// without counting a failure here or growing the cool-off. A breaker
    /// already open from this replica's own failures keeps its own
    /// cool-off (its probe speaks for it); one open by adoption is extended.
    Opened {
        /// The failure domain's key.
        scope: &'a str,
        /// How long it stays open from now.
        wait: Duration,
        /// Who and why, for the transition's reason ("2 replicas: status:503").
        reason: &'a str,
    },
    /// An operator isolated a failure domain: held open until closed.
    Isolated {
        /// The failure domain's key.
        scope: &'a str,
    },
    /// A probe elsewhere found the domain healthy: an open breaker's
    /// cool-off ends now, so the next call here is this replica's own
    /// probe (its network path may differ); a breaker held isolated stays so.
    Recovered {
        /// The failure domain's key.
        scope: &'a str,
    },
    /// An operator closed a failure domain's breaker: closed here too.
    Closed {
        /// The failure domain's key.
        scope: &'a str,
    },
    /// An operator unparked a billing scope (the cap was raised).
    Unparked {
        /// The billing scope's key.
        scope: &'a str,
    },
    /// Other replicas count `failures` consecutive failures of a failure
    /// domain between them (the current streak of each, summed; zero once
    /// they succeed). Under consecutive tripping they add to this
    /// replica's own streak: see
    /// [`BreakerState::count_fleet_failures`](levee_core::breaker::BreakerState::count_fleet_failures).
    Failing {
        /// The failure domain's key.
        scope: &'a str,
        /// The other replicas' failures in a row, summed.
        failures: u32,
    },
    /// The answer to [`FleetSignal::ProbeWanted`]: this replica sends the
    /// fleet's probe, its cool-off growth at least `reopens`.
    ProbeGranted {
        /// The failure domain's key.
        scope: &'a str,
        /// The fleet's failed probes since the domain last recovered.
        reopens: u32,
    },
    /// The answer to [`FleetSignal::ProbeWanted`] when another replica
    /// probes (or has just found the domain failing): stay open for `wait`,
    /// then ask again. Never shortens a deadline in force.
    ProbeHeld {
        /// The failure domain's key.
        scope: &'a str,
        /// How long the other replica holds the probe, from now.
        wait: Duration,
    },
    /// `replicas` replicas of this service send to the same providers (the
    /// fleet's count of its live members): each paces on its share of
    /// every limit a provider reports, spreading its requests at
    /// `1/replicas` of the rate and counting the fleet's calls in flight as
    /// `replicas` times its own. 1 (the store lost): alone again.
    Replicas {
        /// Live replicas, this one included.
        count: u32,
    },
    /// The fleet takes back this replica's probe (its lease is given back
    /// or lost): held for `wait` unless a probe is in flight, which runs to
    /// its verdict. [`adopt`](super::BreakerHandle::adopt) returns whether
    /// it was taken back: see
    /// [`BreakerState::relinquish_probe`](levee_core::breaker::BreakerState::relinquish_probe).
    ProbeRevoked {
        /// The failure domain's key.
        scope: &'a str,
        /// How long to hold it, from now.
        wait: Duration,
    },
}

impl Shared {
    /// Applies `update`; whether anything changed.
    pub(crate) fn adopt(&self, update: FleetUpdate<'_>) -> bool {
        let now = self.clock.now();
        match update {
            FleetUpdate::Gated {
                scope,
                wait,
                reason,
            } => {
                let wait = self
                    .settings
                    .gate
                    .max_wait
                    .map_or(wait, |max| wait.min(max));
                if wait.is_zero() {
                    return false;
                }
                let until = now.saturating_add(wait);
                let adopted = self.gates.update(scope, now, |gate| {
                    let before = gate.until();
                    let (after, transition) = gate.adopt(now, until, reason);
                    (before != Some(after), transition)
                });
                let Some((changed, transition)) = adopted else {
                    return false;
                };
                self.emit_fleet(scope, transition);
                changed
            }
            FleetUpdate::Parked {
                scope,
                wait,
                reason,
            } => {
                let until = now.saturating_add(wait.min(MAX_RESET));
                let cause = Reason::from(reason.to_owned());
                let adopted = self.parks.update(scope, now, |park| {
                    let before = park.until();
                    let transition = park.adopt(now, until, &cause);
                    (before != park.until(), transition)
                });
                let Some((changed, transition)) = adopted else {
                    return false;
                };
                self.emit_fleet(scope, transition);
                changed
            }
            FleetUpdate::Opened {
                scope,
                wait,
                reason,
            } => {
                let wait = wait.min(longest_cooloff(&self.settings.breaker));
                let until = now.saturating_add(wait);
                let mut changed = false;
                self.change_breaker(scope, Origin::Fleet, |state, now, _| {
                    let before = state.open_until();
                    let transition = state.adopt_open(now, until, reason);
                    changed = before != state.open_until();
                    transition
                });
                changed
            }
            FleetUpdate::Isolated { scope } => {
                let mut changed = false;
                self.change_breaker(scope, Origin::Fleet, |state, now, _| {
                    changed = !state.is_isolated();
                    state.isolate(now)
                });
                changed
            }
            FleetUpdate::Recovered { scope } => {
                self.change_tracked(scope, false, |state| (state.end_cooloff(now), None))
            }
            FleetUpdate::Closed { scope } => {
                if self.domains.get(scope).is_none() {
                    return false;
                }
                let mut changed = false;
                self.change_breaker(scope, Origin::Fleet, |state, now, _| {
                    let transition = state.close(now);
                    changed = transition.is_some();
                    transition
                });
                changed
            }
            FleetUpdate::Unparked { scope } => self.unpark(scope, Origin::Fleet),
            FleetUpdate::Failing { scope, failures } => {
                if failures == 0 && self.domains.get(scope).is_none() {
                    return false;
                }
                let mut changed = false;
                // A trip here is this replica's own (its last call failed
                // too): published, and probed, as one.
                self.change_breaker(scope, Origin::Traffic, |state, now, rng| {
                    let transition = state.count_fleet_failures(
                        &self.settings.breaker,
                        scope,
                        failures,
                        now,
                        rng,
                    );
                    changed = transition.is_some();
                    transition
                });
                changed
            }
            FleetUpdate::ProbeGranted { scope, reopens } => {
                self.change_tracked(scope, false, |state| {
                    (state.grant_probe(now, reopens), None)
                })
            }
            FleetUpdate::ProbeHeld { scope, wait } => {
                let until = now.saturating_add(wait.min(MAX_ADOPTED_OPEN));
                self.change_tracked(scope, false, |state| (state.hold_probe(now, until), None))
            }
            FleetUpdate::Replicas { count } => self.share_pacing(count),
            FleetUpdate::ProbeRevoked { scope, wait } => {
                let until = now.saturating_add(wait.min(MAX_ADOPTED_OPEN));
                // Nothing tracked here: no probe to take back.
                self.change_tracked(scope, true, |state| state.relinquish_probe(now, until))
            }
        }
    }

    /// Changes the breaker of a domain tracked here (never creating one):
    /// `op` says whether it did, and the transition to report, if any;
    /// `untracked` is the answer when the domain is not tracked.
    fn change_tracked(
        &self,
        scope: &str,
        untracked: bool,
        op: impl FnOnce(&mut BreakerState) -> (bool, Option<Transition>),
    ) -> bool {
        let Some(handle) = self.domains.get(scope) else {
            return untracked;
        };
        let Some(mut cell) = lock_domain(handle) else {
            return untracked;
        };
        let (changed, transition) = op(&mut cell.state);
        self.publish(handle, &cell.state);
        drop(cell);
        self.emit_fleet(scope, transition);
        changed
    }

    /// Sends `signal` to the layer's fleet sync, if one coordinates it.
    pub(crate) fn signal(&self, signal: FleetSignal<'_>) {
        let coordinator = self
            .coordinator
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        if let Some(c) = coordinator {
            (c.f)(&signal);
        }
    }

    fn emit_fleet(&self, scope: &str, transition: Option<Transition>) {
        self.emit(transition.map(|t| ScopeEvent::new(scope, t).made_by(Origin::Fleet)));
    }
}

/// The bound on an open adopted under a custom cool-off schedule: the
/// schedule is the user's function, and is not called with growth it was
/// never written for.
pub const MAX_ADOPTED_OPEN: Duration = Duration::from_secs(3600);

/// The longest cool-off the breaker itself would choose: a bound on one
/// adopted from another replica.
fn longest_cooloff(cfg: &BreakerConfig) -> Duration {
    let longest = |c: &Cooldown| match c {
        // Saturating arithmetic: the capped maximum.
        Cooldown::Exponential { .. } => c.bounds(u32::MAX).1,
        // A user's schedule, or one a later version adds: the cap.
        _ => MAX_ADOPTED_OPEN,
    };
    longest(&cfg.cooldown).max(longest(&cfg.credential_cooldown))
}
