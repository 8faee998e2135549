//! The fleet: attach breaker layers, spawn the task, read its status.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use levee_core::config_error::ConfigError;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tower_levee::breaker::{BreakerHandle, EventSubscriber};

use crate::keys::Keys;
use crate::policy::BreakerPolicy;
use crate::store::Store;

mod local;
mod status;
mod sync;

pub use self::status::FleetStatus;
use self::status::StatusCell;

/// Decisions queued for the task at most: a transition is a slow-path
/// event, so a full queue means the store has been slow for a long burst.
const QUEUE: usize = 1024;

/// The replicas of one service sharing their decisions: see the
/// [crate docs](crate).
#[derive(Debug)]
pub struct Fleet {
    _private: (),
}

impl Fleet {
    /// A fleet with the defaults: namespace `levee`, a random replica id,
    /// [`BreakerPolicy::Quorum(2)`](BreakerPolicy::Quorum), the store read
    /// back every second, reconnects backing off from 100 ms to 5 s.
    pub fn builder() -> FleetBuilder {
        FleetBuilder {
            namespace: "levee".into(),
            replica: None,
            policy: BreakerPolicy::default(),
            sweep_every: Duration::from_secs(1),
            backoff: (Duration::from_millis(100), Duration::from_secs(5)),
            layers: Vec::new(),
        }
    }
}

/// Builds a fleet: [`Fleet::builder`].
#[derive(Debug)]
#[must_use]
pub struct FleetBuilder {
    namespace: String,
    replica: Option<String>,
    policy: BreakerPolicy,
    sweep_every: Duration,
    backoff: (Duration, Duration),
    layers: Vec<(String, BreakerHandle)>,
}

impl FleetBuilder {
    /// Prefixes every key and the notice channel, so that services (or
    /// environments) sharing one Redis never read each other's decisions.
    /// Letters, digits, `-`, `_` and `.`; at most 64.
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = namespace.into();
        self
    }

    /// This replica's id, unique in the fleet (a pod name is a good one);
    /// random by default. Letters, digits, `-`, `_` and `.`; at most 64.
    pub fn replica(mut self, id: impl Into<String>) -> Self {
        self.replica = Some(id.into());
        self
    }

    /// When another replica's breaker open is adopted here.
    pub fn policy(mut self, policy: BreakerPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// How often the task reads every decision back from the store, for
    /// the notices pub/sub lost (default 1 s; between 10 ms and an hour).
    pub fn sweep_every(mut self, every: Duration) -> Self {
        self.sweep_every = every;
        self
    }

    /// The wait before reconnecting to a lost store: `min`, doubling up to
    /// `max`, each drawn with equal jitter (default 100 ms to 5 s).
    pub fn reconnect_backoff(mut self, min: Duration, max: Duration) -> Self {
        self.backoff = (min, max);
        self
    }

    /// Shares the decisions of one breaker layer (a single-target stack).
    pub fn attach(self, handle: &BreakerHandle) -> Self {
        self.attach_named("", handle)
    }

    /// Shares the decisions of one of several breaker layers (a failover's
    /// targets), under a name every replica gives the same layer.
    pub fn attach_named(mut self, name: impl Into<String>, handle: &BreakerHandle) -> Self {
        self.layers.push((name.into(), handle.clone()));
        self
    }

    /// Checks the settings and starts the fleet's task on the current tokio
    /// runtime. Nothing waits on the store: the task connects, and until it
    /// does, every layer runs on its own state.
    ///
    /// # Errors
    /// A setting out of range, named (`fleet.namespace`, `fleet.replica`,
    /// `fleet.layer`, `fleet.policy`, `fleet.sweep_every`,
    /// `fleet.reconnect_backoff`).
    ///
    /// # Panics
    /// Outside a tokio runtime, as `tokio::spawn` does.
    pub fn spawn<S: Store>(self, store: S) -> Result<FleetHandle, ConfigError> {
        let replica = self.check_settings()?;
        let mut layers = HashMap::new();
        for (layer, handle) in self.layers {
            name("fleet.layer", &layer, true)?;
            if layers.insert(layer.clone(), handle).is_some() {
                return Err(ConfigError::new(
                    "fleet.layer",
                    format!("{layer:?} is attached twice"),
                ));
            }
        }
        if layers.is_empty() {
            return Err(ConfigError::new(
                "fleet.layer",
                "no breaker layer attached: a fleet shares a layer's decisions",
            ));
        }
        let status = Arc::new(StatusCell::new(&replica));
        let (tx, rx) = mpsc::channel(QUEUE);
        for (layer, handle) in &layers {
            let layer: Arc<str> = Arc::from(layer.as_str());
            let tx = tx.clone();
            let status = status.clone();
            // A layer cannot drop a subscriber: once the fleet is gone
            // (its task stopped, the queue closed), this one does nothing.
            handle.subscribe(EventSubscriber::new(move |event| {
                if tx.is_closed() {
                    return;
                }
                if let Some(d) = local::decision(&layer, event)
                    && tx.try_send(d).is_err()
                {
                    status.dropped();
                }
            }));
        }
        let settings = sync::Settings {
            replica: replica.clone(),
            keys: Keys::new(&self.namespace),
            policy: self.policy,
            sweep_every: self.sweep_every,
            backoff: self.backoff,
        };
        let task =
            tokio::spawn(sync::FleetTask::new(store, settings, layers, rx, status.clone()).run());
        Ok(FleetHandle {
            replica,
            status,
            task,
        })
    }
}

impl FleetBuilder {
    /// Checks every setting but the layers; the replica id to use.
    pub(crate) fn check_settings(&self) -> Result<String, ConfigError> {
        name("fleet.namespace", &self.namespace, false)?;
        let replica = match &self.replica {
            Some(id) => {
                name("fleet.replica", id, false)?;
                id.clone()
            }
            None => format!("r-{:016x}", fastrand::u64(..)),
        };
        if self.policy == BreakerPolicy::Quorum(0) {
            return Err(ConfigError::new(
                "fleet.policy",
                "quorum(0): a quorum needs at least 1 replica",
            ));
        }
        if !(Duration::from_millis(10)..=Duration::from_secs(3600)).contains(&self.sweep_every) {
            return Err(ConfigError::new(
                "fleet.sweep_every",
                format!("must be between 10ms and 1h, got {:?}", self.sweep_every),
            ));
        }
        let (min, max) = self.backoff;
        if min.is_zero() || min > max {
            return Err(ConfigError::new(
                "fleet.reconnect_backoff",
                format!("needs 0 < min <= max, got {min:?} to {max:?}"),
            ));
        }
        Ok(replica)
    }
}

/// A running fleet: its status, and its task, stopped when this is dropped.
#[must_use = "dropping the handle stops the fleet's task"]
pub struct FleetHandle {
    replica: String,
    status: Arc<StatusCell>,
    task: JoinHandle<()>,
}

impl FleetHandle {
    /// This replica's id.
    pub fn replica(&self) -> &str {
        &self.replica
    }

    /// Whether the store is reachable, and what was shared.
    pub fn status(&self) -> FleetStatus {
        let mut status = self.status.get();
        if self.task.is_finished() {
            // Stopped (a panic in a callback it ran): nothing is shared.
            status.connected = false;
            status.running = false;
        }
        status
    }
}

impl Drop for FleetHandle {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl fmt::Debug for FleetHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FleetHandle")
            .field("replica", &self.replica)
            .field("connected", &self.status.get().connected)
            .finish()
    }
}

/// A namespace, replica id or layer name: what keys are made of.
fn name(field: &'static str, value: &str, may_be_empty: bool) -> Result<(), ConfigError> {
    if value.is_empty() && !may_be_empty {
        return Err(ConfigError::new(field, "must not be empty"));
    }
    if value.len() > 64 {
        return Err(ConfigError::new(
            field,
            format!("at most 64 characters, got {}", value.len()),
        ));
    }
    if let Some(c) = value
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
    {
        return Err(ConfigError::new(
            field,
            format!("{value:?} has {c:?}: use letters, digits, '-', '_' and '.'"),
        ));
    }
    Ok(())
}
