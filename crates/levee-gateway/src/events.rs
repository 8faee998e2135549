//! What the breaker layers decided: logged as they happen, kept for the
//! admin API, and pushed to the console's event stream.

use tower_levee::axum::{EventLog, EventRecord};
use tower_levee::breaker::ScopeEvent;

/// How many events are kept.
pub(crate) const KEPT: usize = 512;

/// The last [`KEPT`] events, newest last, and the streams following them.
#[derive(Debug)]
pub(crate) struct Events {
    log: EventLog,
}

impl Default for Events {
    fn default() -> Self {
        Events {
            log: EventLog::with_capacity(KEPT),
        }
    }
}

impl Events {
    /// Logs `event` of `target` and keeps it.
    pub(crate) fn record(&self, target: &str, event: &ScopeEvent) {
        tracing::info!(
            target: "levee_gateway::events",
            target_name = %target,
            scope = %event.scope(),
            model = event.model(),
            mechanism = event.mechanism().as_str(),
            from = event.from().as_str(),
            to = event.to().as_str(),
            reason = %event.reason(),
            origin = event.origin().as_str(),
            remaining_ms = event.remaining().map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            "state change"
        );
        self.log.record(target, event);
    }

    /// The last `n` events, oldest first.
    pub(crate) fn last(&self, n: usize) -> Vec<EventRecord> {
        self.log.last(n)
    }

    /// The log itself, for the console's event stream.
    pub(crate) fn log(&self) -> &EventLog {
        &self.log
    }
}
