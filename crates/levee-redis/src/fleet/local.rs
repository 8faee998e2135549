//! What the fleet hears of this replica's own layers: their decisions,
//! their probes, and (when coordinated) their failure streaks and asks.

use std::sync::Arc;

use levee_core::gate::PACED;
use levee_core::transition::{Mechanism, State};
use tokio::time::Instant;
use tower_levee::breaker::{FleetSignal, Origin, ScopeEvent};

use crate::notice::Kind;

/// What a layer tells the fleet's task.
#[derive(Debug)]
pub(crate) enum Message {
    /// A decision to share.
    Decision(Decision),
    /// A breaker here went half-open: its probe is under way.
    Probing { layer: Arc<str>, scope: String },
    /// A closed breaker's failures in a row.
    Streak {
        layer: Arc<str>,
        scope: String,
        failures: u32,
    },
    /// An open breaker's cool-off ended: who probes?
    ProbeWanted { layer: Arc<str>, scope: String },
}

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
    /// A failed probe reopened the breaker.
    pub(crate) reopen: bool,
    /// The fleet's failed probes, on a reopen (the task counts them).
    pub(crate) count: u32,
}

/// What `event` tells the fleet's task, if anything.
///
/// Told: a gate closed on a provider's throttle, a park, a breaker opened
/// (on traffic or by hand) or isolated, a probe that closed a breaker, an
/// operator's close or unpark; and a breaker going half-open (a probe
/// starts). Not told: what the fleet itself applied (it came from another
/// replica), paced gates (every replica reads the same rate-limit headers
/// and paces alike), and states ending on their own deadlines (every
/// replica's copy ends then too).
pub(crate) fn message(layer: &Arc<str>, event: &ScopeEvent) -> Option<Message> {
    let origin = event.origin();
    if origin == Origin::Fleet {
        return None;
    }
    let manual = origin == Origin::Manual;
    let transition = event.transition();
    let kind = match (transition.mechanism(), event.to()) {
        (Mechanism::Breaker, State::HalfOpen) => {
            return Some(Message::Probing {
                layer: layer.clone(),
                scope: event.scope().to_owned(),
            });
        }
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
    Some(Message::Decision(Decision {
        layer: layer.clone(),
        kind,
        scope: event.scope().to_owned(),
        until: event.remaining().map(|r| Instant::now() + r),
        reason,
        manual,
        reopen: kind == Kind::Opened && event.from() == State::HalfOpen,
        count: 0,
    }))
}

/// What a coordinated layer's `signal` tells the fleet's task.
pub(crate) fn signal(layer: &Arc<str>, signal: &FleetSignal<'_>) -> Option<Message> {
    match *signal {
        FleetSignal::Streak { scope, failures } => Some(Message::Streak {
            layer: layer.clone(),
            scope: scope.to_owned(),
            failures,
        }),
        FleetSignal::ProbeWanted { scope } => Some(Message::ProbeWanted {
            layer: layer.clone(),
            scope: scope.to_owned(),
        }),
        _ => None,
    }
}
