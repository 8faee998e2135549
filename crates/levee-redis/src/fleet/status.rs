//! What the fleet's task reports about itself.

use std::sync::{Mutex, PoisonError};

use serde::Serialize;

use crate::notice::DecodeError;
use crate::store::StoreError;

/// The fleet's state, for a health route: whether the store is reachable,
/// and what was sent, adopted and refused.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct FleetStatus {
    /// This replica's id.
    pub replica: String,
    /// Whether the store is reachable now. While it is not, every layer
    /// runs on its own state: no request waits on it or fails for it.
    pub connected: bool,
    /// Whether the fleet's task runs (it stops only with its handle, or
    /// if it panicked).
    pub running: bool,
    /// Times the store was lost.
    pub disconnects: u64,
    /// Decisions of this replica told to the store (again after an outage).
    pub published: u64,
    /// Other replicas' decisions that changed a layer here.
    pub adopted: u64,
    /// Values in the store that were not notices this version reads.
    pub decode_errors: u64,
    /// Decisions not told because the fleet's queue was full (a burst of
    /// over a thousand transitions while the store was slow).
    pub dropped: u64,
    /// The last store error or refused value, as logged (never a secret).
    pub last_error: Option<String>,
    /// Live replicas counted at the last read of the store, this one
    /// included (1 while the store is away, or with pacing not shared):
    /// the share of each provider's limits this replica paces on.
    pub members: u32,
}

/// The status, shared by the task, the subscribers and the handle.
#[derive(Debug, Default)]
pub(crate) struct StatusCell(Mutex<FleetStatus>);

impl StatusCell {
    pub(crate) fn new(replica: &str) -> Self {
        StatusCell(Mutex::new(FleetStatus {
            replica: replica.to_owned(),
            running: true,
            members: 1,
            ..FleetStatus::default()
        }))
    }

    pub(crate) fn get(&self) -> FleetStatus {
        self.lock().clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, FleetStatus> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn members(&self, count: u32) {
        self.lock().members = count;
    }

    pub(crate) fn connected(&self) {
        let mut s = self.lock();
        if !s.connected {
            s.connected = true;
            tracing::info!(target: "levee::fleet", replica = %s.replica, "fleet store connected: sharing decisions");
        }
        #[cfg(feature = "metrics")]
        metrics::gauge!("levee_fleet_connected").set(1.0);
    }

    /// Records a lost store; whether it had been connected (a new outage).
    pub(crate) fn disconnected(&self, e: &StoreError) -> bool {
        let mut s = self.lock();
        let was = s.connected;
        if was {
            s.disconnects += 1;
            tracing::warn!(target: "levee::fleet", replica = %s.replica, error = %e, "fleet store lost: running on local state, reconnecting");
        } else {
            tracing::debug!(target: "levee::fleet", replica = %s.replica, error = %e, "fleet store still unreachable");
        }
        s.connected = false;
        s.last_error = Some(e.to_string());
        #[cfg(feature = "metrics")]
        metrics::gauge!("levee_fleet_connected").set(0.0);
        was
    }

    pub(crate) fn published(&self) {
        self.lock().published += 1;
        #[cfg(feature = "metrics")]
        metrics::counter!("levee_fleet_published_total").increment(1);
    }

    pub(crate) fn adopted(&self) {
        self.lock().adopted += 1;
        #[cfg(feature = "metrics")]
        metrics::counter!("levee_fleet_adopted_total").increment(1);
    }

    pub(crate) fn decode_error(&self, e: &DecodeError) {
        let mut s = self.lock();
        s.decode_errors += 1;
        let message = e.to_string();
        // A bad key is read again on every sweep: said once, then counted.
        if s.last_error.as_deref() == Some(message.as_str()) {
            tracing::debug!(target: "levee::fleet", replica = %s.replica, error = %e, "ignored a value in the fleet store");
        } else {
            tracing::warn!(target: "levee::fleet", replica = %s.replica, error = %e, "ignored a value in the fleet store");
        }
        s.last_error = Some(message);
        #[cfg(feature = "metrics")]
        metrics::counter!("levee_fleet_decode_errors_total").increment(1);
    }

    pub(crate) fn dropped(&self) {
        let mut s = self.lock();
        s.dropped += 1;
        if s.dropped == 1 {
            tracing::warn!(target: "levee::fleet", replica = %s.replica, "the fleet's queue is full: decisions are not being shared (counted in `dropped`)");
        }
    }
}
