//! What another replica of the same service learned: a breaker it opened,
//! or a recovery it saw.

use super::outcome::BreakerStatus;
use super::state::BreakerState;
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
                true
            }
            _ => false,
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
}
