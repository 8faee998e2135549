//! Each caller's limits, buckets and counters.

use std::collections::HashMap;
use std::fmt;
use std::num::NonZeroU64;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use levee_core::limit::MinuteLimit;

use super::error::{ClientLimited, LimitKind};
use crate::clock::TokioClock;

/// Names the caller of a request: a request extension the server sets once
/// it has authenticated the caller. Cheap to clone.
///
/// ```
/// use tower_levee::client_limit::ClientId;
///
/// let mut req = http::Request::new(());
/// req.extensions_mut().insert(ClientId::new("mobile-app"));
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct ClientId(Arc<str>);

impl ClientId {
    /// The caller named `name`.
    pub fn new(name: impl Into<Arc<str>>) -> Self {
        ClientId(name.into())
    }

    /// The caller's name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ClientId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("ClientId").field(&&*self.0).finish()
    }
}

/// One caller's limits; none by default (the caller is only counted).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClientLimits {
    requests_per_minute: Option<NonZeroU64>,
    tokens_per_minute: Option<NonZeroU64>,
}

impl ClientLimits {
    /// No limits.
    pub fn new() -> Self {
        ClientLimits::default()
    }

    /// At most `n` requests a minute (a minute's worth at once, then a
    /// sixtieth of it each second).
    pub fn requests_per_minute(mut self, n: NonZeroU64) -> Self {
        self.requests_per_minute = Some(n);
        self
    }

    /// At most `n` tokens a minute, as the answers report them.
    pub fn tokens_per_minute(mut self, n: NonZeroU64) -> Self {
        self.tokens_per_minute = Some(n);
        self
    }

    /// The requests-per-minute limit, if set.
    pub fn get_requests_per_minute(&self) -> Option<NonZeroU64> {
        self.requests_per_minute
    }

    /// The tokens-per-minute limit, if set.
    pub fn get_tokens_per_minute(&self) -> Option<NonZeroU64> {
        self.tokens_per_minute
    }
}

/// One caller's counters and what its limits leave now.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct ClientSnapshot {
    /// The caller's name.
    pub name: String,
    /// Requests admitted.
    pub requests: u64,
    /// Tokens spent (reported, or estimated where an answer said nothing).
    pub tokens: u64,
    /// Requests refused by its limits.
    pub refused: u64,
    /// Requests its requests-per-minute limit admits now.
    pub requests_left: Option<u64>,
    /// Tokens its tokens-per-minute limit has left now.
    pub tokens_left: Option<u64>,
}

/// Every caller a layer knows, and the clock their buckets run on.
#[derive(Clone, Default)]
pub(crate) struct Shared {
    pub(crate) clients: HashMap<Arc<str>, Arc<ClientState>>,
    pub(crate) clock: TokioClock,
}

/// One caller: its limits' buckets and its counters.
pub(crate) struct ClientState {
    pub(crate) name: Arc<str>,
    buckets: Mutex<Buckets>,
    requests: AtomicU64,
    tokens: AtomicU64,
    refused: AtomicU64,
}

struct Buckets {
    requests: Option<MinuteLimit>,
    tokens: Option<MinuteLimit>,
}

impl ClientState {
    pub(crate) fn new(name: Arc<str>, limits: ClientLimits, clock: &TokioClock) -> Self {
        let now = levee_core::clock::Clock::now(clock);
        ClientState {
            name,
            buckets: Mutex::new(Buckets {
                requests: limits.requests_per_minute.map(|n| MinuteLimit::new(n, now)),
                tokens: limits.tokens_per_minute.map(|n| MinuteLimit::new(n, now)),
            }),
            requests: AtomicU64::new(0),
            tokens: AtomicU64::new(0),
            refused: AtomicU64::new(0),
        }
    }

    /// Admits one request now, or refuses it with the limit that binds.
    pub(crate) fn admit(&self, clock: &TokioClock) -> Result<(), ClientLimited> {
        let now = levee_core::clock::Clock::now(clock);
        let refusal = {
            let mut buckets = self.buckets.lock().unwrap_or_else(PoisonError::into_inner);
            let tokens = buckets
                .tokens
                .as_mut()
                .map_or(Ok(()), |t| t.admits(now))
                .map_err(|wait| (LimitKind::Tokens, wait));
            tokens.and_then(|()| {
                buckets
                    .requests
                    .as_mut()
                    .map_or(Ok(()), |r| r.try_take(now, 1))
                    .map_err(|wait| (LimitKind::Requests, wait))
            })
        };
        match refusal {
            Ok(()) => {
                self.requests.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            Err((limit, wait)) => {
                self.refused.fetch_add(1, Ordering::Relaxed);
                Err(ClientLimited::new(self.name.clone(), limit, wait))
            }
        }
    }

    /// Spends the `tokens` an answer used.
    pub(crate) fn spend(&self, clock: &TokioClock, tokens: u64) {
        self.tokens.fetch_add(tokens, Ordering::Relaxed);
        let now = levee_core::clock::Clock::now(clock);
        let mut buckets = self.buckets.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(bucket) = buckets.tokens.as_mut() {
            bucket.spend(now, tokens);
        }
    }

    pub(crate) fn snapshot(&self, clock: &TokioClock) -> ClientSnapshot {
        let now = levee_core::clock::Clock::now(clock);
        let mut buckets = self.buckets.lock().unwrap_or_else(PoisonError::into_inner);
        ClientSnapshot {
            name: self.name.to_string(),
            requests: self.requests.load(Ordering::Relaxed),
            tokens: self.tokens.load(Ordering::Relaxed),
            refused: self.refused.load(Ordering::Relaxed),
            requests_left: buckets.requests.as_mut().map(|b| b.left(now)),
            tokens_left: buckets.tokens.as_mut().map(|b| b.left(now)),
        }
    }
}

impl fmt::Debug for ClientState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientState")
            .field("name", &&*self.name)
            .finish_non_exhaustive()
    }
}
