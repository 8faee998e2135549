//! A store in this process, with the semantics the fleet relies on from
//! Redis (keys that expire, notices that reach only current listeners) and
//! the faults it must survive: latency, lost notices, outages.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;

use super::{LEASE_COOL_OFF, Lease, Notices, Space, Store, StoreError, Stored};

/// An in-process [`Store`] in tokio time: replicas in one process (tests,
/// the drill) share one by cloning it.
///
/// ```
/// use std::time::Duration;
/// use levee_redis::MemoryStore;
///
/// let store = MemoryStore::new()
///     .with_latency(Duration::from_millis(2))
///     .with_loss(0.1, 7);
/// store.set_available(false); // an outage: every operation fails, listeners end
/// ```
#[derive(Clone)]
pub struct MemoryStore {
    inner: Arc<Mutex<Inner>>,
    latency: Duration,
}

struct Inner {
    values: HashMap<String, (Vec<u8>, Option<Instant>)>,
    listeners: Vec<(String, mpsc::Sender<Vec<u8>>)>,
    available: bool,
    loss: f64,
    rng: fastrand::Rng,
    notices_lost: u64,
    operations: u64,
}

impl MemoryStore {
    /// An empty, available store with no latency and no loss.
    pub fn new() -> Self {
        MemoryStore {
            inner: Arc::new(Mutex::new(Inner {
                values: HashMap::new(),
                listeners: Vec::new(),
                available: true,
                loss: 0.0,
                rng: fastrand::Rng::with_seed(0),
                notices_lost: 0,
                operations: 0,
            })),
            latency: Duration::ZERO,
        }
    }

    /// Each operation takes `latency` (a one-way trip) before it happens.
    pub fn with_latency(mut self, latency: Duration) -> Self {
        self.latency = latency;
        self
    }

    /// Each notice is lost on its way to each listener with probability
    /// `share` (clamped to `[0, 1]`), drawn from `seed`: what the periodic
    /// read of the store must make up for.
    pub fn with_loss(self, share: f64, seed: u64) -> Self {
        {
            let mut inner = self.lock();
            inner.loss = if share.is_nan() {
                0.0
            } else {
                share.clamp(0.0, 1.0)
            };
            inner.rng = fastrand::Rng::with_seed(seed);
        }
        self
    }

    /// Takes the store away (`false`): every operation fails, every
    /// listener's notices end, and what was stored is lost, as when a Redis
    /// without persistence restarts. `true` brings it back, empty.
    pub fn set_available(&self, available: bool) {
        let mut inner = self.lock();
        inner.available = available;
        if !available {
            inner.values.clear();
            inner.listeners.clear();
        }
    }

    /// Notices lost so far (by [`with_loss`](Self::with_loss)).
    pub fn notices_lost(&self) -> u64 {
        self.lock().notices_lost
    }

    /// Operations asked of the store so far, failed ones included: what a
    /// fleet costs its Redis (one command, script or pipeline each).
    pub fn operations(&self) -> u64 {
        self.lock().operations
    }

    /// Live keys now.
    pub fn len(&self) -> usize {
        let now = Instant::now();
        let inner = self.lock();
        inner
            .values
            .values()
            .filter(|(_, at)| live(*at, now))
            .count()
    }

    /// The live keys now, sorted: what a test or a debugging session
    /// looks for.
    pub fn keys(&self) -> Vec<String> {
        let now = Instant::now();
        let inner = self.lock();
        let mut keys: Vec<String> = inner
            .values
            .iter()
            .filter(|(_, (_, at))| live(*at, now))
            .map(|(k, _)| k.clone())
            .collect();
        keys.sort_unstable();
        keys
    }

    /// Whether no key is live.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits the latency, then runs `f` if the store is available.
    async fn op<R>(&self, f: impl FnOnce(&mut Inner, Instant) -> R) -> Result<R, StoreError> {
        if !self.latency.is_zero() {
            tokio::time::sleep(self.latency).await;
        }
        let mut inner = self.lock();
        inner.operations += 1;
        if !inner.available {
            return Err(StoreError::new("unavailable (simulated outage)"));
        }
        Ok(f(&mut inner, Instant::now()))
    }
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self::new()
    }
}

fn live(expires: Option<Instant>, now: Instant) -> bool {
    expires.is_none_or(|at| at > now)
}

impl Inner {
    fn notify(&mut self, channel: &str, notice: &[u8]) {
        let Inner {
            listeners,
            loss,
            rng,
            notices_lost,
            ..
        } = self;
        listeners.retain(|(ch, tx)| {
            if ch != channel {
                return !tx.is_closed();
            }
            if *loss > 0.0 && rng.f64() < *loss {
                *notices_lost += 1;
                return !tx.is_closed();
            }
            // A full listener loses the notice, as a slow Redis subscriber
            // would be cut off: the periodic read makes up for it.
            !matches!(
                tx.try_send(notice.to_vec()),
                Err(mpsc::error::TrySendError::Closed(_))
            )
        });
    }
}

impl Store for MemoryStore {
    async fn put(
        &self,
        space: &Space,
        key: &str,
        notice: &[u8],
        ttl: Option<Duration>,
    ) -> Result<(), StoreError> {
        self.op(|inner, now| {
            let expires = ttl.map(|t| now + t);
            let longer = match inner.values.get(key) {
                Some((_, held)) if live(*held, now) => match (held, expires) {
                    (None, _) => true,
                    (Some(_), None) => false,
                    (Some(held), Some(new)) => *held >= new,
                },
                _ => false,
            };
            if !longer {
                inner
                    .values
                    .insert(key.to_owned(), (notice.to_vec(), expires));
                inner.notify(&space.channel, notice);
            }
        })
        .await
    }

    async fn remove(
        &self,
        space: &Space,
        keys: &[String],
        notice: &[u8],
    ) -> Result<(), StoreError> {
        self.op(|inner, _| {
            for key in keys {
                inner.values.remove(key);
            }
            inner.notify(&space.channel, notice);
        })
        .await
    }

    async fn replace(
        &self,
        space: &Space,
        key: &str,
        notice: &[u8],
        ttl: Duration,
    ) -> Result<(), StoreError> {
        self.op(|inner, now| {
            inner
                .values
                .insert(key.to_owned(), (notice.to_vec(), Some(now + ttl)));
            inner.notify(&space.channel, notice);
        })
        .await
    }

    async fn lease(&self, key: &str, holder: &str, ttl: Duration) -> Result<Lease, StoreError> {
        self.op(|inner, now| {
            if let Some((value, Some(at))) = inner.values.get(key)
                && *at > now
                && value.as_slice() != holder.as_bytes()
            {
                return Lease::Held {
                    holder: String::from_utf8_lossy(value).into_owned(),
                    ttl: at.saturating_duration_since(now),
                };
            }
            inner.values.insert(
                key.to_owned(),
                (holder.as_bytes().to_vec(), Some(now + ttl)),
            );
            Lease::Taken
        })
        .await
    }

    async fn release(
        &self,
        key: &str,
        holder: &str,
        keep: Option<Duration>,
    ) -> Result<(), StoreError> {
        self.op(|inner, now| {
            let mine = inner
                .values
                .get(key)
                .is_some_and(|(v, at)| v.as_slice() == holder.as_bytes() && live(*at, now));
            if !mine {
                return;
            }
            match keep {
                Some(keep) => {
                    let value = LEASE_COOL_OFF.as_bytes().to_vec();
                    inner
                        .values
                        .insert(key.to_owned(), (value, Some(now + keep)));
                }
                None => {
                    inner.values.remove(key);
                }
            }
        })
        .await
    }

    async fn scan(&self, space: &Space) -> Result<Vec<Stored>, StoreError> {
        let prefix = space.prefix.as_str();
        self.op(|inner, now| {
            inner.values.retain(|_, (_, at)| live(*at, now));
            inner
                .values
                .iter()
                .filter(|(key, _)| key.starts_with(prefix))
                .map(|(_, (value, at))| Stored {
                    value: value.clone(),
                    ttl: at.map(|at| at.saturating_duration_since(now)),
                })
                .collect()
        })
        .await
    }

    async fn listen(&self, space: &Space) -> Result<Notices, StoreError> {
        self.op(|inner, _| {
            let (tx, rx) = mpsc::channel(1024);
            inner.listeners.push((space.channel.clone(), tx));
            rx
        })
        .await
    }
}

impl fmt::Debug for MemoryStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let inner = self.lock();
        f.debug_struct("MemoryStore")
            .field("keys", &inner.values.len())
            .field("listeners", &inner.listeners.len())
            .field("available", &inner.available)
            .field("latency", &self.latency)
            .field("loss", &inner.loss)
            .finish()
    }
}
