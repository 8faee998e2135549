//! What a coordinated layer tells its fleet sync besides its transitions:
//! each closed breaker's failure streak, and each open breaker's ask for a
//! probe (see [`BreakerHandle::coordinate`](super::BreakerHandle::coordinate)).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// What a coordinated layer tells its fleet sync besides its transitions:
/// see [`BreakerHandle::coordinate`](super::BreakerHandle::coordinate).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum FleetSignal<'a> {
    /// A closed breaker's failures in a row changed: counted one more
    /// (the one that opens it included: the fleet may count that streak
    /// until the breaker closes again, a transition the sync sees), or
    /// ended by a success (`failures` zero). Sent on the failure path
    /// only (a success that follows no failure sends nothing), under
    /// consecutive tripping only, and in the order the counts changed:
    /// under the scope's lock.
    Streak {
        /// The failure domain's key.
        scope: &'a str,
        /// Failures in a row now.
        failures: u32,
    },
    /// An open breaker's cool-off ended: who probes? Answer with
    /// [`FleetUpdate::ProbeGranted`](super::FleetUpdate::ProbeGranted) or [`FleetUpdate::ProbeHeld`](super::FleetUpdate::ProbeHeld); with no
    /// answer within [`FLEET_ASK_WAIT`], the next call probes alone.
    ProbeWanted {
        /// The failure domain's key.
        scope: &'a str,
    },
}

/// How long a coordinated breaker whose cool-off ended refuses calls while
/// it asks its fleet who probes: a store round trip takes a millisecond,
/// so this is reached only when the fleet cannot answer. Then the breaker
/// probes alone, as one without a fleet does.
pub const FLEET_ASK_WAIT: Duration = Duration::from_secs(1);

/// A callback that receives a coordinated layer's [`FleetSignal`]s.
#[derive(Clone)]
pub struct FleetSignals {
    pub(crate) f: Arc<dyn Fn(&FleetSignal<'_>) + Send + Sync>,
    pub(crate) probes: bool,
    pub(crate) streaks: bool,
}

impl FleetSignals {
    /// Wraps a callback that receives both signals. It runs on the
    /// request's task, after the scope's lock is given back: hand the
    /// signal to a queue, never block.
    pub fn new(f: impl Fn(&FleetSignal<'_>) + Send + Sync + 'static) -> Self {
        FleetSignals {
            f: Arc::new(f),
            probes: true,
            streaks: true,
        }
    }

    /// Whether closed breakers signal their failure streaks
    /// ([`FleetSignal::Streak`]; default `true`). Only under consecutive
    /// tripping, the one rule a fleet's streaks add up for.
    pub fn streaks(mut self, signal: bool) -> Self {
        self.streaks = signal;
        self
    }

    /// Whether open breakers ask who probes ([`FleetSignal::ProbeWanted`];
    /// default `true`). Without, each replica probes on its own cool-off,
    /// and only streaks are signalled.
    pub fn probes(mut self, ask: bool) -> Self {
        self.probes = ask;
        self
    }
}

impl fmt::Debug for FleetSignals {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("FleetSignals(..)")
    }
}
