//! Shadow probes: a copy of a request that another target serves, sent to
//! a failure domain whose breaker is open, to learn whether it is back
//! with no caller paying for the answer.

use levee_core::breaker::Outcome;
use levee_core::classify::Classification;
use levee_core::clock::{Clock, Timestamp};

use super::event::{Origin, ScopeEvent};
use super::shared::{DomainCell, DomainHandle, Shared, lock_domain};
use crate::registry::SlotGuard;

/// Marks a shadow probe (an extension on each copy a
/// [`Failover`](crate::failover::Failover) sends with
/// [`ShadowProbes`](crate::failover::ShadowProbes)): a copy of a request
/// served elsewhere, sent to a target whose breaker is open (or, with
/// hedging, that is demoted for being slow). A service
/// beneath the breaker can read it to tell a copy from a caller's request
/// (to log it, or bill it apart); only the failover makes one.
///
/// A breaker that the failover told to expect copies admits one while it
/// is open or half-open (not when isolated or open on a rejected key, nor
/// into the callers' probe slot), and its answer only tells the breaker: a
/// success closes it, and anything else changes nothing (no cool-off grows
/// for a copy). A stream's first output is a success: the copy is dropped
/// there. A copy that finds the breaker closed (it closed meanwhile, or
/// the target is slow, not failing) is a call like any other, whose
/// success in time also tells the failover that the target's trial is
/// due. A copy still passes the gate and the park: a throttled or capped
/// scope is not failing, and a copy would only spend its quota.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ShadowProbe;

impl Shared {
    /// The open spell a shadow probe to `handle`'s domain is admitted in
    /// ([`BreakerState::open_since`](levee_core::breaker::BreakerState::open_since)),
    /// if one is: not closed, not isolated by an operator, and not open on
    /// rejected credentials (a copy would only be rejected too).
    pub(crate) fn shadow_spell(&self, handle: DomainHandle) -> Option<Timestamp> {
        let cell = lock_domain(handle)?;
        let state = &cell.state;
        if state.is_isolated() || state.is_open_on_credentials() {
            return None;
        }
        state.open_since()
    }

    /// Records a shadow probe's answer (see [`ShadowProbe`]).
    pub(crate) fn record_shadow(
        &self,
        mut cell: SlotGuard<DomainCell>,
        handle: DomainHandle,
        c: &Classification,
        slow: bool,
        spell: Timestamp,
    ) {
        let now = self.clock.now();
        let outcome = Outcome::new(c.verdict, c.reason.clone()).with_slow(slow);
        let (key, domain) = cell.split();
        let transition =
            domain
                .state
                .record_shadow(&self.settings.breaker, key, &outcome, spell, now);
        let Some(transition) = transition else {
            return;
        };
        self.publish(handle, &domain.state);
        let event = ScopeEvent::new(key, transition).made_by(Origin::Probe);
        drop(cell);
        self.emit(Some(event));
    }
}
