//! One breaker, a clock that moves when told, and a seeded RNG: what the
//! breaker state-machine tests drive.

use std::time::Duration;

use levee_core::breaker::{Admission, BreakerConfig, BreakerState, Outcome, Permit};
use levee_core::classify::Verdict;
use levee_core::clock::Timestamp;
use levee_core::transition::Transition;

pub(crate) struct Harness {
    pub(crate) cfg: BreakerConfig,
    pub(crate) state: BreakerState,
    pub(crate) rng: fastrand::Rng,
    pub(crate) now: Timestamp,
    key: &'static str,
}

impl Harness {
    /// A closed breaker for `key` at `now`, its jitter drawn from `seed`.
    pub(crate) fn start(cfg: BreakerConfig, key: &'static str, seed: u64, now: Timestamp) -> Self {
        Harness {
            state: BreakerState::new(&cfg),
            cfg,
            rng: fastrand::Rng::with_seed(seed),
            now,
            key,
        }
    }

    pub(crate) fn admit(&mut self) -> Admission {
        self.state.admit(&self.cfg, self.now).0
    }

    /// Admits a call; panics if rejected.
    pub(crate) fn permit(&mut self) -> Permit {
        match self.admit() {
            Admission::Allowed(p) => p,
            rejected => panic!("call rejected: {rejected:?}"),
        }
    }

    pub(crate) fn record(&mut self, permit: Permit, outcome: Outcome) -> Option<Transition> {
        self.state.record(
            &self.cfg,
            self.key,
            permit,
            &outcome,
            self.now,
            &mut self.rng,
        )
    }

    /// Admits a call and records `outcome` for it; panics if rejected.
    pub(crate) fn call(&mut self, outcome: Outcome) -> Option<Transition> {
        let permit = self.permit();
        self.record(permit, outcome)
    }

    pub(crate) fn advance(&mut self, d: Duration) {
        self.now = self.now.saturating_add(d);
    }
}

pub(crate) fn unavailable() -> Outcome {
    Outcome::new(Verdict::Availability, "status:503")
}
