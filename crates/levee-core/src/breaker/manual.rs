//! Manual control: open, close, isolate.

use super::config::BreakerConfig;
use super::outcome::BreakerStatus;
use super::state::{BreakerState, OpenKind};
use crate::clock::Timestamp;
use crate::transition::Transition;

impl BreakerState {
    /// Opens the breaker as if its tripping rule had just tripped: the
    /// cool-off starts now, at the current growth (a half-open breaker counts
    /// it as a failed recovery). Use it to take a key out of rotation ahead of
    /// known maintenance. `why` goes into the transition's reason.
    ///
    /// Already open: the cool-off is extended to at least a fresh one, and
    /// no transition is returned. Isolated: nothing changes.
    pub fn open(
        &mut self,
        cfg: &BreakerConfig,
        now: Timestamp,
        rng: &mut fastrand::Rng,
        why: &str,
    ) -> Option<Transition> {
        let reason = if why.is_empty() {
            "opened manually".to_owned()
        } else {
            format!("opened manually: {why}")
        };
        match self.status {
            BreakerStatus::Open if self.isolated => None,
            BreakerStatus::Open => {
                let fresh = now.saturating_add(cfg.cooldown.sample(self.reopens, rng));
                self.open_until = self.open_until.max(Some(fresh));
                None
            }
            BreakerStatus::Closed => {
                Some(self.trip(cfg, None, OpenKind::Availability, now, now, rng, reason))
            }
            BreakerStatus::HalfOpen => {
                self.reopens = self.reopens.saturating_add(1);
                Some(self.trip(cfg, None, OpenKind::Availability, now, now, rng, reason))
            }
        }
    }

    /// Closes the breaker without waiting for a successful probe, and forgets
    /// every count, the failure breakdown and the cool-off growth. Also
    /// clears the counts of an already closed breaker (returning no transition).
    pub fn close(&mut self, now: Timestamp) -> Option<Transition> {
        let from = self.status;
        self.reset_closed(None, None, now);
        (from != BreakerStatus::Closed)
            .then(|| self.transition(from, now, "closed manually".to_owned()))
    }

    /// Holds the breaker open, with no cool-off, until [`close`](BreakerState::close):
    /// for a key known to be broken (a revoked credential, a decommissioned
    /// deployment). Rejections carry
    /// [`ISOLATED_RETRY_AFTER`](super::ISOLATED_RETRY_AFTER).
    ///
    /// Returns a transition unless the breaker was already open; an open
    /// breaker becomes isolated without one.
    pub fn isolate(&mut self, now: Timestamp) -> Option<Transition> {
        let from = self.status;
        if from == BreakerStatus::Open && self.isolated {
            return None;
        }
        self.set_status(BreakerStatus::Open, now);
        self.isolated = true;
        self.open_until = None;
        self.round.clear();
        self.reset_policy_later();
        (from != BreakerStatus::Open)
            .then(|| self.transition(from, now, "isolated manually".to_owned()))
    }
}
