//! Transitions of every mechanism, as events a subscriber can receive.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use levee_core::transition::{Mechanism, State, Transition};

/// One state change of a breaker, throttle gate or park, for one scope.
///
/// Every event is also emitted as a `tracing` event (target `levee`): at
/// `warn` when a breaker opens or a scope is parked, at `info` otherwise.
#[derive(Clone, Debug)]
pub struct ScopeEvent {
    scope: Box<str>,
    transition: Transition,
    remaining: Option<Duration>,
    model: Option<Box<str>>,
    origin: Origin,
}

/// What made a scope change state: [`ScopeEvent::origin`].
///
/// A fleet sync (such as the `levee-redis` crate) publishes what traffic
/// and operators did here, and must not publish again what it applied from
/// another replica.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Origin {
    /// This process's calls: an outcome, or an admission that found a
    /// deadline passed.
    Traffic,
    /// An operator, through [`BreakerHandle`](super::BreakerHandle)'s
    /// `open`, `close`, `isolate` or `unpark`.
    Manual,
    /// Another replica, through [`BreakerHandle::adopt`](super::BreakerHandle::adopt).
    Fleet,
    /// A shadow probe: a copy of a request another target served, whose
    /// success closed the breaker (see [`ShadowProbe`](super::ShadowProbe)).
    Probe,
}

impl Origin {
    /// `traffic`, `manual`, `fleet` or `probe`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Origin::Traffic => "traffic",
            Origin::Manual => "manual",
            Origin::Fleet => "fleet",
            Origin::Probe => "probe",
        }
    }
}

levee_core::named!(Origin);

impl ScopeEvent {
    pub(crate) fn new(scope: &str, transition: Transition) -> Self {
        let remaining = transition
            .until
            .map(|u| u.saturating_duration_since(transition.at));
        ScopeEvent {
            scope: scope.into(),
            transition,
            remaining,
            model: None,
            origin: Origin::Traffic,
        }
    }

    /// The event, made by `origin` rather than by traffic.
    pub(crate) fn made_by(mut self, origin: Origin) -> Self {
        self.origin = origin;
        self
    }

    /// What made the change: this process's traffic, an operator, or
    /// another replica.
    pub fn origin(&self) -> Origin {
        self.origin
    }

    /// The event, naming the model of the call whose outcome caused it.
    pub(crate) fn caused_by(mut self, model: Option<&str>) -> Self {
        self.model = model.map(Box::from);
        self
    }

    /// The scope's key (failure domain, quota scope or billing scope).
    pub fn scope(&self) -> &str {
        &self.scope
    }

    /// The model of the call whose outcome caused the change, when the call
    /// named one: on a failure domain shared by several models, which one
    /// opened it. `None` for manual and timed changes.
    pub fn model(&self) -> Option<&str> {
        self.model.as_deref()
    }

    /// Which mechanism changed state.
    pub fn mechanism(&self) -> Mechanism {
        self.transition.mechanism()
    }

    /// The state before; its name ([`State::as_str`]) is one of `closed`,
    /// `open`, `half_open`, `clear`, `gated`, `active`, `parked`.
    pub fn from(&self) -> State {
        self.transition.from
    }

    /// The state after.
    pub fn to(&self) -> State {
        self.transition.to
    }

    /// Why, for a person: "opened after 5 consecutive availability failures (status:503)".
    pub fn reason(&self) -> &str {
        &self.transition.reason
    }

    /// How long the new state lasts, if it has a deadline.
    pub fn remaining(&self) -> Option<Duration> {
        self.remaining
    }

    /// The full transition record.
    pub fn transition(&self) -> &Transition {
        &self.transition
    }

    pub(crate) fn emit<'a>(&self, subscribers: impl IntoIterator<Item = &'a EventSubscriber>) {
        // An account out of rotation, or a spend cap reached: someone should look.
        let alarming = matches!(self.to(), State::Open | State::Parked);
        let mechanism = self.transition.mechanism().as_str();
        let origin = self.origin.as_str();
        if alarming {
            tracing::warn!(target: "levee", scope = %self.scope, model = self.model(), mechanism, origin, from = self.from().as_str(), to = self.to().as_str(), remaining = ?self.remaining, "{}", self.reason());
        } else {
            tracing::info!(target: "levee", scope = %self.scope, model = self.model(), mechanism, origin, from = self.from().as_str(), to = self.to().as_str(), remaining = ?self.remaining, "{}", self.reason());
        }
        for s in subscribers {
            (s.0)(self);
        }
    }
}

/// A callback that receives every [`ScopeEvent`].
#[derive(Clone)]
pub struct EventSubscriber(pub(crate) Arc<dyn Fn(&ScopeEvent) + Send + Sync>);

impl EventSubscriber {
    /// Wraps a callback.
    pub fn new(f: impl Fn(&ScopeEvent) + Send + Sync + 'static) -> Self {
        EventSubscriber(Arc::new(f))
    }
}

impl fmt::Debug for EventSubscriber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("EventSubscriber(..)")
    }
}
