//! What the breaker layers decided: logged as they happen, and the last
//! few kept for the admin API.

use std::collections::VecDeque;
use std::sync::{Mutex, PoisonError};
use std::time::SystemTime;

use serde::Serialize;
use tower_levee::breaker::ScopeEvent;

/// How many events are kept.
pub(crate) const KEPT: usize = 512;

/// One state change, as the admin API lists it.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct EventRecord {
    /// Milliseconds since the Unix epoch.
    pub(crate) at_ms: u64,
    pub(crate) target: String,
    pub(crate) scope: String,
    /// The model of the call that caused the change (on a breaker shared
    /// by several models, which one tripped it); none for timed and manual
    /// changes.
    pub(crate) model: Option<String>,
    pub(crate) mechanism: &'static str,
    pub(crate) from: &'static str,
    pub(crate) to: &'static str,
    pub(crate) reason: String,
    pub(crate) origin: &'static str,
    /// Until the state ends, when it is a refusal with an end.
    pub(crate) remaining_ms: Option<u64>,
}

/// The last [`KEPT`] events, newest last.
#[derive(Debug, Default)]
pub(crate) struct Events {
    kept: Mutex<VecDeque<EventRecord>>,
}

impl Events {
    /// Logs `event` of `target` and keeps it.
    pub(crate) fn record(&self, target: &str, event: &ScopeEvent) {
        let record = EventRecord {
            at_ms: SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            target: target.to_owned(),
            scope: event.scope().to_owned(),
            model: event.model().map(str::to_owned),
            mechanism: event.mechanism().as_str(),
            from: event.from(),
            to: event.to(),
            reason: event.reason().to_owned(),
            origin: event.origin().as_str(),
            remaining_ms: event
                .remaining()
                .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
        };
        tracing::info!(
            target: "levee_gateway::events",
            target_name = %record.target,
            scope = %record.scope,
            model = record.model.as_deref(),
            mechanism = record.mechanism,
            from = record.from,
            to = record.to,
            reason = %record.reason,
            origin = record.origin,
            remaining_ms = record.remaining_ms,
            "state change"
        );
        let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        if kept.len() == KEPT {
            kept.pop_front();
        }
        kept.push_back(record);
    }

    /// The last `n` events, oldest first.
    pub(crate) fn last(&self, n: usize) -> Vec<EventRecord> {
        let kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        kept.iter()
            .skip(kept.len().saturating_sub(n))
            .cloned()
            .collect()
    }
}
