//! The fleet: attach breaker layers, spawn the task, read its status.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use levee_core::config_error::ConfigError;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tower_levee::breaker::{BreakerHandle, EventSubscriber, FleetSignals};

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
    /// back every second, reconnects backing off from 100 ms to 5 s, one
    /// probe per failure domain for the fleet (a lease of 2 s, renewed
    /// while the probe runs), failure streaks shared for 30 s.
    pub fn builder() -> FleetBuilder {
        FleetBuilder {
            namespace: "levee".into(),
            replica: None,
            policy: BreakerPolicy::default(),
            sweep_every: Duration::from_secs(1),
            backoff: (Duration::from_millis(100), Duration::from_secs(5)),
            probe_lease: Some(DEFAULT_PROBE_LEASE),
            failure_memory: Some(DEFAULT_FAILURE_MEMORY),
            share_pacing: true,
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
    probe_lease: Option<Duration>,
    failure_memory: Option<Duration>,
    share_pacing: bool,
    layers: Vec<(String, BreakerHandle)>,
}

/// The probe lease's time to live by default: [`FleetBuilder::probe_lease`].
pub const DEFAULT_PROBE_LEASE: Duration = Duration::from_secs(2);

/// How long a replica's failure streak counts by default:
/// [`FleetBuilder::share_failures`].
pub const DEFAULT_FAILURE_MEMORY: Duration = Duration::from_secs(30);

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

    /// One probe per failure domain for the whole fleet (default on, with
    /// a lease of 2 s): just before an open breaker's cool-off ends, its
    /// replica asks for a lease in the store (taken by one replica only);
    /// the others hold their breakers open until the prober's verdict (a
    /// recovery ends their cool-offs, a failure holds them through its
    /// cool-off, after which every replica asks again on an equal
    /// footing), and take the lease over if it lapses. The holder renews it
    /// every third of `ttl` while a probe of its is in flight, however long
    /// that takes; with none in flight for 10 s (no call came), it gives
    /// the probe back and says so, and a waiting replica takes it at once.
    /// Cool-offs grow with the fleet's failed probes, as one breaker's
    /// would. `None`: each replica probes on its own.
    ///
    /// The cost: a call that finds the cool-off over before the answer is
    /// in is refused while the replica asks (a store round trip; with no
    /// answer, for [`FLEET_ASK_WAIT`](tower_levee::breaker::FLEET_ASK_WAIT)
    /// at most, after which the replica probes alone). Keep `ttl` above
    /// the store's operation timeout, or a slow store loses renewals.
    pub fn probe_lease(mut self, ttl: Option<Duration>) -> Self {
        self.probe_lease = ttl;
        self
    }

    /// Counts failures in a row across the fleet (default on, each
    /// replica's streak remembered 30 s, or until its breaker recovers):
    /// under consecutive tripping, a replica whose own last call failed
    /// opens once its streak and the other replicas' together reach the
    /// threshold, with the breaker policy's quorum of replicas failing,
    /// this one included (never under [`BreakerPolicy::Local`]). A quiet
    /// replica of a large fleet otherwise pays the whole threshold alone.
    /// Only the failure path writes (a failure, and the success that ends
    /// a streak: two writes for an isolated failure); a success after a
    /// success writes nothing. Rolling and custom tripping rules count
    /// each replica's calls alone. `None`: every replica counts alone, and
    /// only decisions travel.
    pub fn share_failures(mut self, memory: Option<Duration>) -> Self {
        self.failure_memory = memory;
        self
    }

    /// Shares the providers' rate limits among the live replicas (default
    /// on): each replica writes a heartbeat on every read of the store
    /// (one write a second by default), counts the live ones, and paces on
    /// its share of every limit a provider reports in its headers: its
    /// requests spread at `1/n` of the provider's rate, and room kept
    /// before each report for the fleet's calls in flight (`n` times its
    /// own). Every replica is assumed to call the same accounts, as
    /// replicas of one service do. A replica that loses the store paces
    /// alone again. `false`: each replica paces as if alone.
    pub fn share_pacing(mut self, on: bool) -> Self {
        self.share_pacing = on;
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
    /// `fleet.reconnect_backoff`, `fleet.probe_lease`, `fleet.share_failures`).
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
            let (events, events_status) = (tx.clone(), status.clone());
            let events_layer = layer.clone();
            handle.subscribe(EventSubscriber::new(move |event| {
                if let Some(m) = local::message(&events_layer, event) {
                    queue(&events, &events_status, m);
                }
            }));
            if self.probe_lease.is_some() || self.failure_memory.is_some() {
                let signals = FleetSignals::new(move |signal| {
                    if let Some(m) = local::signal(&layer, signal) {
                        queue(&tx, &status, m);
                    }
                });
                let signals = signals
                    .probes(self.probe_lease.is_some())
                    .streaks(self.failure_memory.is_some() && self.policy != BreakerPolicy::Local);
                handle.coordinate(signals);
            }
        }
        let settings = sync::Settings {
            replica: replica.clone(),
            keys: Keys::new(&self.namespace),
            policy: self.policy,
            sweep_every: self.sweep_every,
            backoff: self.backoff,
            probe_lease: self.probe_lease,
            failure_memory: self.failure_memory,
            share_pacing: self.share_pacing,
        };
        let coordinated = layers.values().cloned().collect();
        let task =
            tokio::spawn(sync::FleetTask::new(store, settings, layers, rx, status.clone()).run());
        Ok(FleetHandle {
            replica,
            status,
            task,
            coordinated,
        })
    }
}

impl FleetBuilder {
    /// Checks every setting but the layers, as [`spawn`](Self::spawn)
    /// does: a configuration can be refused at load, before any runtime.
    ///
    /// # Errors
    /// The first setting out of range, named as `spawn` names it.
    pub fn check(&self) -> Result<(), ConfigError> {
        self.check_settings().map(drop)
    }

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
        if let Some(ttl) = self.probe_lease
            && !(Duration::from_millis(100)..=Duration::from_secs(60)).contains(&ttl)
        {
            return Err(ConfigError::new(
                "fleet.probe_lease",
                format!("must be between 100ms and 60s, got {ttl:?}"),
            ));
        }
        if let Some(memory) = self.failure_memory
            && !(Duration::from_secs(1)..=Duration::from_secs(3600)).contains(&memory)
        {
            return Err(ConfigError::new(
                "fleet.share_failures",
                format!("must be between 1s and 1h, got {memory:?}"),
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

/// Hands a message to the fleet's task; one that finds the queue full is
/// counted as dropped (a slow path event: the store has been slow long).
fn queue(tx: &mpsc::Sender<local::Message>, status: &StatusCell, m: local::Message) {
    if tx.is_closed() {
        return;
    }
    if tx.try_send(m).is_err() {
        status.dropped();
    }
}

/// A running fleet: its status, and its task, stopped when this is dropped.
#[must_use = "dropping the handle stops the fleet's task"]
pub struct FleetHandle {
    replica: String,
    status: Arc<StatusCell>,
    task: JoinHandle<()>,
    /// The layers it coordinates: on their own again once it is dropped.
    coordinated: Vec<BreakerHandle>,
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
        // No task answers their asks any more: they probe on their own.
        for handle in &self.coordinated {
            handle.uncoordinate();
        }
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
