//! What another replica of the same service learned: a breaker it opened,
//! a recovery it saw, the failures it counted; and the fleet's one probe
//! per cool-off.

use std::time::Duration;

use super::config::BreakerConfig;
use super::outcome::{Admission, BreakerStatus};
use super::state::{BreakerState, FleetProbe};
use super::tripping::Tripping;
use crate::clock::Timestamp;
use crate::transition::Transition;

impl BreakerState {
    /// Opens the breaker until `until` because other replicas of the same
    /// service found the domain failing (`why` says who, for the
    /// transition's reason). Nothing is counted and the cool-off growth is
    /// unchanged: this replica saw no failure of its own.
    ///
    /// Already open by adoption: the cool-off is extended to `until` if
    /// that is later, with no transition. Open from this replica's own
    /// failures, or isolated, or `until` not after `now`: nothing changes
    /// (its own cool-off ends when it would, and its probe speaks for it).
    pub fn adopt_open(
        &mut self,
        now: Timestamp,
        until: Timestamp,
        why: &str,
    ) -> Option<Transition> {
        if until <= now || self.isolated {
            return None;
        }
        let from = self.status;
        if from == BreakerStatus::Open {
            if self.adopted {
                self.open_until = self.open_until.max(Some(until));
            }
            return None;
        }
        self.set_status(BreakerStatus::Open, now);
        self.adopted = true;
        self.open_until = Some(until);
        self.round.clear();
        self.reset_policy_later();
        Some(
            self.transition(from, now, format!("opened by the fleet: {why}"))
                .with_until(Some(until)),
        )
    }

    /// Ends the cool-off now because another replica's probe found the
    /// domain healthy: the next call here is this replica's own probe,
    /// rather than a blind close (its network path may differ). Returns
    /// whether the breaker was cooling off; an isolated breaker stays so.
    pub fn end_cooloff(&mut self, now: Timestamp) -> bool {
        match self.open_until {
            Some(until) if self.status == BreakerStatus::Open && until > now => {
                self.open_until = Some(now);
                // The domain answered: no need to ask who probes it.
                self.fleet_probe = FleetProbe::Granted;
                true
            }
            _ => false,
        }
    }

    /// Other replicas of the same service count `failures` consecutive
    /// failures of this domain between them (the latest streak of each,
    /// summed). Under [`Tripping::Consecutive`] they add to this replica's
    /// own streak: the breaker opens now if its own last call failed too
    /// and the two together reach the threshold, and otherwise on the
    /// failure that makes them reach it. A quiet replica of a large fleet
    /// sees a dead domain seldom, and would pay the whole threshold alone.
    ///
    /// Rolling and custom rules count this replica's calls only. Ignored
    /// unless closed; cleared by any change of status.
    pub fn count_fleet_failures(
        &mut self,
        cfg: &BreakerConfig,
        key: &str,
        failures: u32,
        now: Timestamp,
        rng: &mut fastrand::Rng,
    ) -> Option<Transition> {
        if self.status != BreakerStatus::Closed {
            return None;
        }
        self.fleet_failures = failures;
        let Tripping::Consecutive { threshold } = cfg.tripping else {
            return None;
        };
        // A replica whose last call succeeded has a path that works.
        if self.consecutive_failures == 0 {
            return None;
        }
        let cause = self
            .breakdown
            .iter()
            .max_by_key(|(_, n)| **n)
            .map_or_else(|| "fleet".to_owned(), |(cause, _)| cause.clone());
        let reason = self.streak_trips(threshold, &cause)?;
        let kind = self.streak_open_kind();
        let t = self.trip(cfg, Some(key), kind, now, now, rng, reason);
        Some(t.with_cause(Some(cause)))
    }

    /// [`admit`](Self::admit) for a breaker whose fleet sends one probe
    /// per cool-off for every replica.
    ///
    /// When an open breaker's cool-off ends, this call is refused for
    /// `ask_wait` and the third value is `true`: the caller asks the fleet
    /// who probes. The answer comes back as [`grant_probe`](Self::grant_probe)
    /// (the next call here is the probe) or [`hold_probe`](Self::hold_probe)
    /// (another replica probes; refuse until its verdict). With no answer
    /// within `ask_wait` (the fleet's store is down, its task is slow), the
    /// next call probes alone, as a breaker without a fleet does.
    pub fn admit_in_fleet(
        &mut self,
        cfg: &BreakerConfig,
        now: Timestamp,
        ask_wait: Duration,
    ) -> (Admission, Option<Transition>, bool) {
        let cooled_off = self.status == BreakerStatus::Open
            && !self.isolated
            && self.open_until.is_none_or(|until| until <= now);
        if cooled_off && matches!(self.fleet_probe, FleetProbe::Unasked | FleetProbe::Held) {
            self.fleet_probe = FleetProbe::Asked;
            self.open_until = Some(now.saturating_add(ask_wait));
            return (
                Admission::Rejected {
                    retry_after: ask_wait,
                },
                None,
                true,
            );
        }
        let (admission, transition) = self.admit(cfg, now);
        (admission, transition, false)
    }

    /// The fleet says this replica sends the next probe, with the cool-off
    /// growth at least `reopens` (the fleet's failed probes since the
    /// domain last recovered), so the cool-offs grow as one breaker's
    /// would, whichever replica probes. The answer to an ask, or to a
    /// hold, ends the wait now; one given before this breaker's own
    /// cool-off ends (the fleet asks ahead, so no call waits for the
    /// answer) leaves the cool-off to end when it would.
    /// Returns whether the breaker is open and now holds the grant.
    pub fn grant_probe(&mut self, now: Timestamp, reopens: u32) -> bool {
        if self.status != BreakerStatus::Open || self.isolated {
            return false;
        }
        if matches!(self.fleet_probe, FleetProbe::Asked | FleetProbe::Held) {
            self.open_until = Some(self.open_until.map_or(now, |until| until.min(now)));
        }
        self.fleet_probe = FleetProbe::Granted;
        self.reopens = self.reopens.max(reopens);
        true
    }

    /// Another replica probes this domain, or has just found it failing:
    /// stay open until `until` (never shortened), then ask again. Applies
    /// to an open of this replica's own as to an adopted one; an isolated
    /// or closed breaker, and one granted the probe, are left alone (see
    /// [`relinquish_probe`](Self::relinquish_probe)). Returns whether the
    /// deadline moved.
    pub fn hold_probe(&mut self, now: Timestamp, until: Timestamp) -> bool {
        if self.status != BreakerStatus::Open
            || self.isolated
            || until <= now
            || self.open_until.is_some_and(|at| at >= until)
            || self.fleet_probe == FleetProbe::Granted
        {
            // A hold no longer than what is in force changes nothing (a
            // read of the store repeats old holds), and a grant stands
            // until used or taken back: the fleet gave it (a lease, or a
            // recovery seen elsewhere), and one replica's failed probe on
            // its own path does not undo it.
            return false;
        }
        self.fleet_probe = FleetProbe::Held;
        self.open_until = Some(until);
        true
    }

    /// The fleet takes back this replica's probe (its lease is given back,
    /// or lost): an open breaker granted the probe is held until `until`,
    /// and a half-open one with no probe in flight opens again until then
    /// (the returned transition), with no growth; later outcomes of its
    /// earlier probes are ignored. A probe in flight is not taken back
    /// (`false`): it runs to its verdict. Returns whether it was taken.
    pub fn relinquish_probe(
        &mut self,
        now: Timestamp,
        until: Timestamp,
    ) -> (bool, Option<Transition>) {
        if self.isolated {
            return (false, None);
        }
        match self.status {
            BreakerStatus::Open => {
                self.fleet_probe = FleetProbe::Held;
                self.open_until = self.open_until.max(Some(until));
                (true, None)
            }
            BreakerStatus::HalfOpen if self.round.in_flight() == 0 => {
                let from = self.status;
                self.set_status(BreakerStatus::Open, now);
                self.fleet_probe = FleetProbe::Held;
                self.open_until = Some(until.max(now));
                self.round.clear();
                let reason = "the fleet's probe passed to another replica".to_owned();
                let t = self
                    .transition(from, now, reason)
                    .with_until(self.open_until);
                (true, Some(t))
            }
            _ => (false, None),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::breaker::{Admission, BreakerConfig};

    fn at(secs: u64) -> Timestamp {
        Timestamp::ZERO.saturating_add(Duration::from_secs(secs))
    }

    #[test]
    fn adopted_open_refuses_until_its_deadline_then_probes() {
        let cfg = BreakerConfig::default();
        let mut b = BreakerState::new(&cfg);
        let t = b.adopt_open(at(1), at(21), "2 replicas").unwrap();
        assert_eq!(
            (t.from, t.to, t.until),
            (
                crate::transition::State::Closed,
                crate::transition::State::Open,
                Some(at(21))
            )
        );
        assert!(t.reason.contains("opened by the fleet: 2 replicas"));
        assert_eq!(b.reopens(), 0, "no growth from another replica's trip");
        match b.admit(&cfg, at(20)).0 {
            Admission::Rejected { retry_after } => assert_eq!(retry_after, Duration::from_secs(1)),
            other => panic!("{other:?}"),
        }
        let (admission, transition) = b.admit(&cfg, at(21));
        assert!(admission.permit().unwrap().is_probe());
        assert_eq!(transition.unwrap().to, "half_open");
    }

    #[test]
    fn adopted_open_only_extends_an_open_breaker_and_never_touches_an_isolated_one() {
        let cfg = BreakerConfig::default();
        let mut b = BreakerState::new(&cfg);
        b.adopt_open(at(0), at(30), "x");
        assert!(b.adopt_open(at(1), at(10), "x").is_none());
        assert_eq!(b.open_until(), Some(at(30)), "never shortened");
        assert!(b.adopt_open(at(1), at(40), "x").is_none());
        assert_eq!(b.open_until(), Some(at(40)));

        let mut isolated = BreakerState::new(&cfg);
        isolated.isolate(at(0));
        assert!(isolated.adopt_open(at(1), at(40), "x").is_none());
        assert_eq!(isolated.open_until(), None);
        assert!(!isolated.end_cooloff(at(2)));
        assert!(isolated.is_isolated());
    }

    #[test]
    fn a_breaker_open_from_its_own_failures_keeps_its_own_cooloff() {
        use crate::breaker::{Cooldown, Outcome};
        use crate::classify::Verdict;
        let cfg = BreakerConfig::builder()
            .threshold(1)
            .cooldown(Cooldown::fixed(Duration::from_secs(10)))
            .build()
            .unwrap();
        let mut b = BreakerState::new(&cfg);
        let mut rng = fastrand::Rng::with_seed(1);
        let permit = b.admit(&cfg, at(0)).0.permit().unwrap();
        b.record(
            &cfg,
            "d",
            permit,
            &Outcome::new(Verdict::Availability, "status:503"),
            at(0),
            &mut rng,
        );
        assert_eq!(b.open_until(), Some(at(10)));
        assert!(b.adopt_open(at(1), at(60), "x").is_none());
        assert_eq!(b.open_until(), Some(at(10)), "its own probe at 10 s");
    }

    #[test]
    fn an_expired_deadline_is_not_adopted() {
        let cfg = BreakerConfig::default();
        let mut b = BreakerState::new(&cfg);
        assert!(b.adopt_open(at(5), at(5), "x").is_none());
        assert_eq!(b.status(), BreakerStatus::Closed);
    }

    #[test]
    fn a_recovery_elsewhere_ends_the_cooloff_so_the_next_call_probes() {
        let cfg = BreakerConfig::default();
        let mut b = BreakerState::new(&cfg);
        b.adopt_open(at(0), at(60), "x");
        assert!(b.end_cooloff(at(3)));
        assert!(!b.end_cooloff(at(3)), "already over");
        let (admission, _) = b.admit(&cfg, at(3));
        assert!(admission.permit().unwrap().is_probe());
        let mut closed = BreakerState::new(&cfg);
        assert!(!closed.end_cooloff(at(3)));
    }

    fn fail(b: &mut BreakerState, cfg: &BreakerConfig, now: Timestamp) -> Option<Transition> {
        use crate::breaker::Outcome;
        use crate::classify::Verdict;
        let permit = b.admit(cfg, now).0.permit()?;
        let mut rng = fastrand::Rng::with_seed(1);
        let outcome = Outcome::new(Verdict::Availability, "status:503");
        b.record(cfg, "d", permit, &outcome, now, &mut rng)
    }

    #[test]
    fn fleet_failures_add_to_a_failing_streak_but_never_open_a_replica_whose_last_call_succeeded() {
        let cfg = BreakerConfig::builder().threshold(5).build().unwrap();
        let mut rng = fastrand::Rng::with_seed(1);
        let mut b = BreakerState::new(&cfg);
        assert!(
            b.count_fleet_failures(&cfg, "d", 9, at(0), &mut rng)
                .is_none()
        );
        assert_eq!(b.status(), BreakerStatus::Closed, "its own path works");
        let t = fail(&mut b, &cfg, at(1)).expect("1 here + 9 elsewhere");
        assert!(
            t.reason.contains("here and 9 on other replicas"),
            "{}",
            t.reason
        );

        let mut b = BreakerState::new(&cfg);
        assert!(fail(&mut b, &cfg, at(0)).is_none());
        assert!(
            b.count_fleet_failures(&cfg, "d", 3, at(1), &mut rng)
                .is_none()
        );
        let t = b
            .count_fleet_failures(&cfg, "d", 4, at(2), &mut rng)
            .unwrap();
        assert_eq!(t.to, crate::transition::State::Open);
        assert!(
            t.reason
                .contains("1 consecutive availability failures here and 4 on other replicas"),
            "{}",
            t.reason
        );
        assert_eq!(t.cause.as_deref(), Some("status:503"));
    }

    #[test]
    fn fleet_failures_are_forgotten_on_a_change_of_status_and_ignored_by_rolling_rules() {
        let cfg = BreakerConfig::builder().threshold(3).build().unwrap();
        let mut rng = fastrand::Rng::with_seed(1);
        let mut b = BreakerState::new(&cfg);
        b.count_fleet_failures(&cfg, "d", 1, at(0), &mut rng);
        b.close(at(1));
        assert!(fail(&mut b, &cfg, at(2)).is_none(), "1 alone is short of 3");

        let rolling = BreakerConfig::builder()
            .tripping(crate::breaker::Tripping::Rolling {
                window: Duration::from_secs(10),
                min_calls: 1,
                failure_ratio: 1.0,
            })
            .build()
            .unwrap();
        let mut r = BreakerState::new(&rolling);
        r.consecutive_failures = 1;
        assert!(
            r.count_fleet_failures(&rolling, "d", 50, at(0), &mut rng)
                .is_none()
        );
    }

    #[test]
    fn a_fleet_breaker_asks_once_when_its_cooloff_ends_and_probes_when_granted() {
        let cfg = BreakerConfig::default();
        let ask = Duration::from_secs(1);
        let mut b = BreakerState::new(&cfg);
        b.adopt_open(at(0), at(10), "x");
        let (a, _, asked) = b.admit_in_fleet(&cfg, at(5), ask);
        assert!(
            !asked && matches!(a, Admission::Rejected { .. }),
            "cooling off"
        );
        let (a, t, asked) = b.admit_in_fleet(&cfg, at(10), ask);
        assert!(asked && t.is_none());
        assert_eq!(a, Admission::Rejected { retry_after: ask });
        let (_, _, asked) = b.admit_in_fleet(&cfg, at(10), ask);
        assert!(!asked, "asked once per cool-off");
        assert!(b.grant_probe(at(10), 3));
        assert_eq!(b.reopens(), 3, "the fleet's growth");
        let (a, t, _) = b.admit_in_fleet(&cfg, at(10), ask);
        assert!(a.permit().unwrap().is_probe());
        assert_eq!(t.unwrap().to, "half_open");
    }

    #[test]
    fn a_held_probe_refuses_until_the_holders_verdict_then_asks_again() {
        let cfg = BreakerConfig::default();
        let ask = Duration::from_secs(1);
        let mut b = BreakerState::new(&cfg);
        b.adopt_open(at(0), at(10), "x");
        assert!(b.admit_in_fleet(&cfg, at(10), ask).2);
        assert!(b.hold_probe(at(10), at(40)));
        let (a, _, asked) = b.admit_in_fleet(&cfg, at(39), ask);
        assert!(!asked && matches!(a, Admission::Rejected { .. }));
        assert!(b.admit_in_fleet(&cfg, at(40), ask).2, "asks again");
        let mut closed = BreakerState::new(&cfg);
        assert!(!closed.hold_probe(at(0), at(10)));
        let mut isolated = BreakerState::new(&cfg);
        isolated.isolate(at(0));
        assert!(!isolated.hold_probe(at(0), at(10)));
    }

    #[test]
    fn a_grant_given_ahead_of_the_cooloffs_end_lets_the_first_call_after_it_probe() {
        let cfg = BreakerConfig::default();
        let ask = Duration::from_secs(1);
        let mut b = BreakerState::new(&cfg);
        assert!(
            !b.grant_probe(at(0), 0),
            "a closed breaker has nothing to grant"
        );
        b.adopt_open(at(0), at(10), "x");
        assert!(b.grant_probe(at(9), 2));
        let (a, _, asked) = b.admit_in_fleet(&cfg, at(9), ask);
        assert!(
            !asked && matches!(a, Admission::Rejected { .. }),
            "still cooling off"
        );
        let (a, _, asked) = b.admit_in_fleet(&cfg, at(10), ask);
        assert!(!asked, "no call waits for the answer");
        assert!(a.permit().unwrap().is_probe());
        // A grant while held ends the hold at once.
        let mut b = BreakerState::new(&cfg);
        b.adopt_open(at(0), at(10), "x");
        b.hold_probe(at(10), at(30));
        assert!(b.grant_probe(at(12), 0));
        assert!(
            b.admit_in_fleet(&cfg, at(12), ask)
                .0
                .permit()
                .unwrap()
                .is_probe()
        );
        // A hold does not undo a grant; taking it back does, and the next
        // call after that asks again.
        let mut b = BreakerState::new(&cfg);
        b.adopt_open(at(0), at(10), "x");
        b.grant_probe(at(9), 0);
        assert!(!b.hold_probe(at(9), at(12)));
        assert_eq!(b.relinquish_probe(at(9), at(12)), (true, None));
        assert!(b.admit_in_fleet(&cfg, at(12), ask).2);
    }

    #[test]
    fn a_hold_no_longer_than_the_deadline_keeps_a_grant() {
        let cfg = BreakerConfig::default();
        let mut b = BreakerState::new(&cfg);
        b.adopt_open(at(0), at(10), "x");
        assert!(b.grant_probe(at(9), 0));
        assert!(!b.hold_probe(at(9), at(10)), "the same deadline again");
        let (a, _, asked) = b.admit_in_fleet(&cfg, at(10), Duration::from_secs(1));
        assert!(!asked && a.permit().unwrap().is_probe());
    }

    #[test]
    fn a_probe_is_taken_back_unless_it_is_in_flight() {
        let cfg = BreakerConfig::default();
        let ask = Duration::from_secs(1);
        // Granted, not sent: held.
        let mut b = BreakerState::new(&cfg);
        b.adopt_open(at(0), at(10), "x");
        b.grant_probe(at(9), 0);
        assert_eq!(b.relinquish_probe(at(9), at(12)), (true, None));
        assert!(
            b.admit_in_fleet(&cfg, at(12), ask).2,
            "asks again when the hold ends"
        );
        // In flight: it runs to its verdict.
        let mut b = BreakerState::new(&cfg);
        b.adopt_open(at(0), at(10), "x");
        b.grant_probe(at(10), 0);
        let permit = b.admit_in_fleet(&cfg, at(10), ask).0.permit().unwrap();
        assert!(permit.is_probe());
        assert_eq!(b.relinquish_probe(at(11), at(13)), (false, None));
        // Its slot given back (the call was dropped): taken, back to open,
        // and a late report of it is ignored.
        b.release(permit);
        let (taken, t) = b.relinquish_probe(at(11), at(13));
        assert!(taken);
        assert_eq!(t.unwrap().to, crate::transition::State::Open);
        assert_eq!(b.open_until(), Some(at(13)));
        let mut rng = fastrand::Rng::with_seed(1);
        let ok = crate::breaker::Outcome::new(crate::classify::Verdict::Success, "ok");
        assert!(b.record(&cfg, "d", permit, &ok, at(12), &mut rng).is_none());
        assert_eq!(b.status(), BreakerStatus::Open);
    }

    #[test]
    fn a_fleet_breaker_with_no_answer_probes_alone_after_the_asks_wait() {
        let cfg = BreakerConfig::default();
        let ask = Duration::from_secs(1);
        let mut b = BreakerState::new(&cfg);
        b.adopt_open(at(0), at(10), "x");
        assert!(b.admit_in_fleet(&cfg, at(10), ask).2);
        assert!(matches!(
            b.admit_in_fleet(&cfg, at(10), ask).0,
            Admission::Rejected { .. }
        ));
        let (a, _, asked) = b.admit_in_fleet(&cfg, at(11), ask);
        assert!(!asked);
        assert!(a.permit().unwrap().is_probe());
    }

    #[test]
    fn a_recovery_elsewhere_lets_a_fleet_breaker_probe_without_asking() {
        let cfg = BreakerConfig::default();
        let mut b = BreakerState::new(&cfg);
        b.adopt_open(at(0), at(60), "x");
        assert!(b.end_cooloff(at(3)));
        let (a, _, asked) = b.admit_in_fleet(&cfg, at(3), Duration::from_secs(1));
        assert!(!asked);
        assert!(a.permit().unwrap().is_probe());
    }
}
