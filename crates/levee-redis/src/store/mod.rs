//! Where replicas meet: a store of decisions that expire, and a channel
//! of notices.
//!
//! The fleet's logic is written once, against [`Store`]: [`RedisStore`] for
//! production, [`MemoryStore`] (simulated latency, loss and outages, in
//! tokio time) for tests and the drill.

use std::fmt;
use std::future::Future;
use std::time::Duration;

use tokio::sync::mpsc;

mod memory;
mod redis;

pub use self::memory::MemoryStore;
pub use self::redis::RedisStore;
pub(crate) use self::redis::redact;

/// Where one fleet's decisions live in a store: the prefix of their keys,
/// the channel of their notices, and the index of their keys (so that a
/// read of the fleet's decisions never walks the rest of a shared Redis).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Space {
    /// Every decision's key starts with it.
    pub prefix: String,
    /// Notices are sent on it.
    pub channel: String,
    /// The index of the keys stored (a Redis sorted set by expiry).
    pub index: String,
}

/// One stored decision: its encoded notice and how long it still lives.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stored {
    /// The encoded notice, as [`Store::put`] was given it.
    pub value: Vec<u8>,
    /// Time left before the store forgets it, as the store counts it (so a
    /// replica's clock never enters it); `None` for a decision that lasts
    /// until removed.
    pub ttl: Option<Duration>,
}

impl Space {
    /// A space of keys under `prefix`, notices on `channel`, its index at `index`.
    pub fn new(
        prefix: impl Into<String>,
        channel: impl Into<String>,
        index: impl Into<String>,
    ) -> Self {
        Space {
            prefix: prefix.into(),
            channel: channel.into(),
            index: index.into(),
        }
    }
}

impl Stored {
    /// A stored decision: for a [`Store`] of another kind than the two here.
    pub fn new(value: Vec<u8>, ttl: Option<Duration>) -> Self {
        Stored { value, ttl }
    }
}

/// The value of a lease given back through a failed probe's cool-off:
/// no replica's id, so every replica finds it held until it lapses.
pub const LEASE_COOL_OFF: &str = "~cool-off";

/// The answer to [`Store::lease`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Lease {
    /// The asking replica holds the lease now.
    Taken,
    /// Another replica holds it, for `ttl` more unless renewed or released.
    Held {
        /// The replica holding it.
        holder: String,
        /// Its time left, as the store counts it.
        ttl: Duration,
    },
}

/// Notices as they arrive, until the store is lost: then the receiver
/// ends, and the fleet reconnects.
pub type Notices = mpsc::Receiver<Vec<u8>>;

/// A shared store of decisions, with a channel for notices of them.
///
/// Every operation may fail or be slow: the fleet calls them from its own
/// task, never from a request, and bounds each by a timeout.
pub trait Store: Send + Sync + 'static {
    /// Stores `notice` under `key` (in `space`) for `ttl` (`None`: until
    /// removed), unless the key already holds a value that lives longer (a
    /// gate's deadline never shortens); then sends `notice` on the space's
    /// channel if it was stored.
    fn put(
        &self,
        space: &Space,
        key: &str,
        notice: &[u8],
        ttl: Option<Duration>,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Removes `keys`, then sends `notice` on the space's channel.
    fn remove(
        &self,
        space: &Space,
        keys: &[String],
        notice: &[u8],
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Stores `notice` under `key` for `ttl` whatever the key held (a
    /// replica's own failure streak, which moves both ways), then sends it
    /// on the space's channel.
    fn replace(
        &self,
        space: &Space,
        key: &str,
        notice: &[u8],
        ttl: Duration,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Takes the lease `key` for `holder` for `ttl` if no one else holds it
    /// (renewing it if `holder` does): who sends a failure domain's next
    /// probe. Atomic: of replicas racing for a free lease, one takes it.
    fn lease(
        &self,
        key: &str,
        holder: &str,
        ttl: Duration,
    ) -> impl Future<Output = Result<Lease, StoreError>> + Send;

    /// Gives back the lease `key` if `holder` holds it: freed at once
    /// (`keep` is `None`), or held by no replica ([`LEASE_COOL_OFF`]) for
    /// `keep` and then freed: a failed probe's cool-off, in which no
    /// replica probes again, and after which every replica, the last
    /// prober included, asks on an equal footing (one whose network path
    /// is broken does not keep the probe, and the fleet open, to itself).
    fn release(
        &self,
        key: &str,
        holder: &str,
        keep: Option<Duration>,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Every live value stored in `space`.
    fn scan(&self, space: &Space) -> impl Future<Output = Result<Vec<Stored>, StoreError>> + Send;

    /// Notices sent on the space's channel from now on.
    fn listen(&self, space: &Space) -> impl Future<Output = Result<Notices, StoreError>> + Send;
}

/// A store operation that failed: the store is down, slow or refused it.
/// Its message never carries a credential.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoreError {
    message: String,
}

impl StoreError {
    /// An error saying `message` (which must hold no secret).
    pub fn new(message: impl Into<String>) -> Self {
        StoreError {
            message: message.into(),
        }
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "fleet store: {}", self.message)
    }
}

impl std::error::Error for StoreError {}
