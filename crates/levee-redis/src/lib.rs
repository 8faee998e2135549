//! Levee's fleet: the replicas of a service share what their breaker
//! layers decide, through Redis.
//!
//! # Why
//!
//! Levee protects one process. Run twenty replicas behind a load balancer
//! and each learns every throttle, spend cap and outage on its own: a
//! `retry-after: 30` costs twenty throttled calls per window instead of
//! one, and since providers count refused requests against the per-minute
//! limit (OpenAI's rate-limit guide says so), the fleet keeps its own
//! account throttled. A quiet replica sending a few requests a minute pays
//! its own five failures before it stops calling a dead account.
//!
//! # What is shared
//!
//! **Decisions, not counts.** A gate closing (quota scope, wait, cause), a
//! park (billing scope, reset), a breaker opening or recovering, and an
//! operator's `open`, `close`, `isolate` or `unpark` (finance raised the
//! cap: one unpark unparks the fleet). Failure counting stays local:
//! sharing every outcome would put a network write on every request, the
//! cost resilience4j rightly refuses.
//!
//! - Gates and parks are the provider's own words: adopted at once, never
//!   shortening a wait already in force.
//! - A breaker open is one replica's experience, and one replica with a
//!   broken network path must not eject a healthy account fleet-wide: it
//!   is adopted by [`BreakerPolicy`], by default once two replicas report
//!   it within its cool-off. A recovery seen elsewhere ends the cool-off
//!   here, so this replica's next call is its own probe.
//! - Waits travel as durations, never as instants: the store counts them
//!   down itself (a Redis key's time to live), so clock skew between
//!   replicas cannot stretch a provider's wait, and the last round trip is
//!   taken off every wait sent.
//!
//! # Never on the request's path
//!
//! Layers tell the fleet's task through a queue from their transition
//! events (the slow path; a closed breaker's call never touches it). The
//! task stores each decision under a key that expires with it and sends a
//! pub/sub notice; it applies other replicas' notices through
//! [`BreakerHandle::adopt`](tower_levee::breaker::BreakerHandle::adopt),
//! and reads every key back each second, since pub/sub loses what is sent
//! while a subscriber reconnects. **Redis down is not an outage:** requests
//! never wait on it, the layers run on local state, the task reconnects
//! with backoff and publishes its decisions again, and
//! [`FleetHandle::status`] (and the `levee_fleet_connected` gauge with the
//! `metrics` feature) says so. A value in Redis this version did not write
//! is logged, counted and ignored.
//!
//! # Example
//!
//! ```
//! use std::time::Duration;
//! use levee_redis::{BreakerPolicy, Fleet, MemoryStore};
//! use tower_levee::breaker::BreakerLayer;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! // In production: `RedisStore::open("redis://cache.internal:6379")?`.
//! let store = MemoryStore::new();
//! let layer = BreakerLayer::new();
//! let fleet = Fleet::builder()
//!     .namespace("chat-backend")
//!     .replica("web-7f9c")
//!     .policy(BreakerPolicy::Quorum(2))
//!     .attach(&layer.handle())
//!     .spawn(store)
//!     .unwrap();
//! // ... build the service with `layer` as usual; keep `fleet` alive.
//! assert_eq!(fleet.replica(), "web-7f9c");
//! # }
//! ```
//!
//! # Stability
//!
//! Types that may grow are `#[non_exhaustive]`: match them with a wildcard
//! arm, and build configurations through their builders, setters or
//! `Default`. Items hidden from these docs (`#[doc(hidden)]`) are shared
//! with Levee's own crates and carry no semver promise.
//!
//! # Features
//!
//! | feature | what it adds |
//! |---|---|
//! | `metrics` | `levee_fleet_connected` and the fleet's counters through the `metrics` facade |
//! | `local-server` | `LocalRedis`: a `redis-server` of the process's own on a free loopback port (the drill's `--live` fleets, examples, tests) |
#![cfg_attr(docsrs, feature(doc_cfg))]
// A type users can build or match in full cannot grow without a breaking
// release: each public one is `#[non_exhaustive]`, or exhaustive on purpose
// with an `#[allow]` that says why.
#![deny(clippy::exhaustive_enums, clippy::exhaustive_structs)]
#![forbid(unsafe_code)]

/// The crates whose types or traits appear in this crate's API, at the
/// versions it was built with. Name them through here and a second,
/// mismatched version of one cannot creep into a build. `api/levee-redis.txt`
/// lists them (`public dependency …`), and the snapshot check fails when
/// one is added or dropped.
pub mod deps {
    pub use levee_core;
    pub use serde;
    pub use tokio;
    pub use tower_levee;
}

mod config;
mod fleet;
mod keys;
#[cfg(feature = "local-server")]
mod local;
mod notice;
mod policy;
mod store;

pub use config::{FleetConfig, duration_or_off};
pub use fleet::{
    DEFAULT_FAILURE_MEMORY, DEFAULT_PROBE_LEASE, Fleet, FleetBuilder, FleetHandle, FleetStatus,
};
#[cfg(feature = "local-server")]
pub use local::LocalRedis;
pub use notice::{DecodeError, Kind, MAX_NOTICE_BYTES, MAX_WAIT, Notice};
pub use policy::BreakerPolicy;
pub use store::{
    LEASE_COOL_OFF, Lease, MemoryStore, Notices, RedisStore, Space, Store, StoreError, Stored,
};
