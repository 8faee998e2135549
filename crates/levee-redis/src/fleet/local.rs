//! Which of this replica's own changes the fleet hears about.

use std::sync::Arc;

use levee_core::gate::PACED;
use levee_core::transition::{Mechanism, State};
use tokio::time::Instant;
use tower_levee::breaker::{Origin, ScopeEvent};

use crate::notice::Kind;

/// One of this replica's decisions, as its layer reported it.
#[derive(Debug)]
pub(crate) struct Decision {
    pub(crate) layer: Arc<str>,
    pub(crate) kind: Kind,
    pub(crate) scope: String,
    /// When it ends (`None`: it lasts until undone).
    pub(crate) until: Option<Instant>,
    pub(crate) reason: String,
    pub(crate) manual: bool,
}

/// The decision `event` is for the fleet, if it is one.
///
/// Told: a gate closed on a provider's throttle, a park, a breaker opened
/// (on traffic or by hand) or isolated, a probe that closed a breaker, an
/// operator's close or unpark. Not told: what the fleet itself applied
/// (it came from another replica), paced gates (every replica reads the
/// same rate-limit headers and paces alike), and states ending on their
/// own deadlines (every replica's copy ends then too).
pub(crate) fn decision(layer: &Arc<str>, event: &ScopeEvent) -> Option<Decision> {
    let origin = event.origin();
    if origin == Origin::Fleet {
        return None;
    }
    let manual = origin == Origin::Manual;
    let transition = event.transition();
    let kind = match (transition.mechanism(), event.to()) {
        (Mechanism::Breaker, State::Open) if event.remaining().is_none() => {
            manual.then_some(Kind::Isolated)?
        }
        (Mechanism::Breaker, State::Open) => Kind::Opened,
        (Mechanism::Breaker, State::Closed) if manual => Kind::Closed,
        (Mechanism::Breaker, State::Closed) => Kind::Recovered,
        (Mechanism::Gate, State::Gated) if !manual => {
            if transition.cause.as_deref() == Some(PACED.as_str()) {
                return None;
            }
            Kind::Gated
        }
        (Mechanism::Park, State::Parked) if !manual => Kind::Parked,
        (Mechanism::Park, State::Active) if manual => Kind::Unparked,
        _ => return None,
    };
    let reason = transition
        .cause
        .clone()
        .unwrap_or_else(|| event.reason().to_owned());
    Some(Decision {
        layer: layer.clone(),
        kind,
        scope: event.scope().to_owned(),
        until: event.remaining().map(|r| Instant::now() + r),
        reason,
        manual,
    })
}
