//! Read-only admission checks: would the breaker layer admit this request now?
//!
//! A router in front of several breaker layers (failover across accounts)
//! must pick a target *before* sending anything, without disturbing the
//! state it reads: a peek takes no probe slot, counts no rejection, makes no
//! transition and calls no service. It checks what [`Breaker`](super::Breaker)
//! checks, in the same order (park → gate → breaker), for the scopes the
//! layer would give the request.
//!
//! A peek is advice, not a reservation: the state can change between the
//! peek and the call, and the call decides (a request the breaker then
//! refuses comes back as a typed rejection, never sent).

use std::sync::OnceLock;
use std::sync::atomic::Ordering;
use std::time::Duration;

use levee_core::breaker::{BreakerStatus, HALF_OPEN_RETRY_AFTER, ISOLATED_RETRY_AFTER};
use levee_core::clock::Clock;

use super::error::{CircuitOpen, Parked, Throttled};
use super::handle::BreakerHandle;
use super::scope::{KeyBuf, RequestHead, default_scope};
use super::shared::{DomainHandle, Shared};
use crate::BoxError;

/// Separates the parts of a composite scope key, as the service does.
const KEY_SEPARATOR: char = '/';

/// Which mechanism would refuse a request, for which scope, for how long.
#[derive(Debug)]
pub(crate) struct Refused {
    kind: RefusedBy,
    scope: Box<str>,
    retry_after: Duration,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RefusedBy {
    Park,
    Gate,
    Breaker,
}

impl Refused {
    fn into_error(self) -> BoxError {
        let Refused {
            kind,
            scope,
            retry_after,
        } = self;
        let scope: &str = &scope;
        match kind {
            RefusedBy::Park => Parked::new(scope, retry_after).into(),
            RefusedBy::Gate => Throttled::new(scope, retry_after).into(),
            RefusedBy::Breaker => CircuitOpen::new(scope, retry_after).into(),
        }
    }
}

/// The last failure domain a peek found, remembered so that later peeks at
/// the same domain skip the registry's lock. Written once, then only read:
/// a peek writes no shared memory. A router keeps one per target.
#[derive(Debug, Default)]
pub(crate) struct PeekCache {
    domain: OnceLock<(KeyBuf, DomainHandle)>,
}

impl BreakerHandle {
    /// Whether the layer would admit `head`'s request now, checked without
    /// sending anything, taking a probe slot, counting a rejection or
    /// changing any state.
    ///
    /// `Err` is the rejection the layer would return: [`Parked`],
    /// [`Throttled`] or [`CircuitOpen`], with its `retry_after`. A breaker
    /// whose cool-off has ended, or that is half-open with a probe slot
    /// free, admits (the call itself becomes the probe). The answer is
    /// advice: the call decides.
    ///
    /// ```
    /// use tower_levee::breaker::{BreakerLayer, CircuitOpen, RequestHead};
    ///
    /// let layer = BreakerLayer::new();
    /// let handle = layer.handle();
    /// let req = http::Request::get("https://api.openai.com/v1/models").body(()).unwrap();
    /// assert!(handle.admits(&RequestHead::of(&req)).is_ok());
    ///
    /// handle.open("api.openai.com");
    /// let err = handle.admits(&RequestHead::of(&req)).unwrap_err();
    /// assert!(err.is::<CircuitOpen>());
    /// ```
    pub fn admits(&self, head: &RequestHead<'_>) -> Result<(), BoxError> {
        self.shared
            .peek(head, None)
            .map_err(|refused| refused.into_error())
    }

    /// How long until the layer would admit `head`'s request, or `None` if
    /// it would now. Read-only, like [`admits`](Self::admits).
    pub fn retry_after(&self, head: &RequestHead<'_>) -> Option<Duration> {
        self.shared.peek(head, None).err().map(|r| r.retry_after)
    }

    /// [`admits`](Self::admits) with a per-caller cache of the failure
    /// domain's handle.
    pub(crate) fn admits_cached(
        &self,
        head: &RequestHead<'_>,
        cache: &PeekCache,
    ) -> Result<(), BoxError> {
        self.shared
            .peek(head, Some(cache))
            .map_err(|refused| refused.into_error())
    }
}

impl Shared {
    /// Park, then gate, then breaker, as `Breaker::call` checks them; reads only.
    fn peek(&self, head: &RequestHead<'_>, cache: Option<&PeekCache>) -> Result<(), Refused> {
        let settings = &self.settings;
        let keys = match &settings.scope_fn {
            Some(f) => f(head),
            None => default_scope(head),
        };
        let model = keys.model.unwrap_or("");

        if self.active_parks.load(Ordering::Relaxed) > 0 {
            let billing = keys.billing.unwrap_or(keys.domain);
            if let Some(left) = self.parks.get(billing).and_then(|h| {
                let until = h.lock()?.until()?;
                let now = self.clock.now();
                (now < until).then(|| until.saturating_duration_since(now))
            }) {
                return Err(Refused {
                    kind: RefusedBy::Park,
                    scope: billing.into(),
                    retry_after: left,
                });
            }
        }
        if self.active_gates.load(Ordering::Relaxed) > 0 {
            let quota = if model.is_empty() {
                KeyBuf::join(&[keys.domain], KEY_SEPARATOR)
            } else {
                KeyBuf::join(&[keys.domain, model], KEY_SEPARATOR)
            };
            if let Some(left) = self.gates.get(quota.as_str()).and_then(|h| {
                let until = h.lock()?.until()?;
                let now = self.clock.now();
                (now < until).then(|| until.saturating_duration_since(now))
            }) {
                return Err(Refused {
                    kind: RefusedBy::Gate,
                    scope: quota.as_str().into(),
                    retry_after: left,
                });
            }
        }

        let parts: &[&str] = if settings.isolate_by_model && !model.is_empty() {
            &[keys.domain, model]
        } else {
            &[keys.domain]
        };
        let cached = cache
            .and_then(|c| c.domain.get())
            .filter(|(key, h)| key.eq_join(parts, KEY_SEPARATOR) && h.is_current())
            .map(|(_, h)| *h);
        let domain = match cached {
            Some(h) => h,
            None => {
                let key = KeyBuf::join(parts, KEY_SEPARATOR);
                // Never called yet: nothing to refuse.
                let Some(h) = self.domains.get(key.as_str()) else {
                    return Ok(());
                };
                if let Some(c) = cache {
                    let _ = c.domain.set((key, h));
                }
                h
            }
        };
        if domain.hot().is_none_or(|hot| hot.admit_closed().is_some()) {
            return Ok(());
        }
        let Some(cell) = domain.lock() else {
            return Ok(());
        };
        let state = &cell.state;
        let retry_after = match state.status() {
            BreakerStatus::Closed => None,
            BreakerStatus::Open if state.is_isolated() => Some(ISOLATED_RETRY_AFTER),
            BreakerStatus::Open => {
                let now = self.clock.now();
                state
                    .open_until()
                    .filter(|until| now < *until)
                    .map(|until| until.saturating_duration_since(now))
            }
            // Approximate: slots of probes that already reported are not
            // counted, so a peek may admit what the call then refuses.
            BreakerStatus::HalfOpen => (state.probes_in_flight() >= settings.breaker.probes())
                .then_some(HALF_OPEN_RETRY_AFTER),
        };
        match retry_after {
            None => Ok(()),
            Some(retry_after) => Err(Refused {
                kind: RefusedBy::Breaker,
                scope: cell.key().into(),
                retry_after,
            }),
        }
    }
}
