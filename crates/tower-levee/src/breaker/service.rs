//! The breaker service.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};

use bytes::Buf;
use http::{Request, Response};
use http_body::Body;
use levee_core::classify::{Classify, ProviderClassifier};
use tokio::time::Instant;
use tower_service::Service;

use super::future::{Call, ResponseFuture};
use super::scope::{KeyBuf, RequestHead, default_scope};
use super::shared::{DomainHandle, Shared};
use super::tracker::{CallScopes, Tracker};
use crate::BoxError;
use crate::body::ResponseBody;

/// Separates the parts of a composite scope key (`domain/model`).
const KEY_SEPARATOR: char = '/';

/// Breaker, throttle gate and park table in front of an inner service.
///
/// Rejected requests are answered at once with [`CircuitOpen`](super::CircuitOpen),
/// [`Throttled`](super::Throttled) or [`Parked`](super::Parked), without
/// calling the inner service. Built by [`BreakerLayer`](super::BreakerLayer).
pub struct Breaker<S, C = ProviderClassifier> {
    pub(crate) inner: S,
    pub(crate) shared: Arc<Shared>,
    pub(crate) classifier: C,
    pub(crate) cache: DomainCache,
}

impl<S, C> Breaker<S, C> {
    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The inner service, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// Consumes the breaker, returning the inner service.
    pub fn into_inner(self) -> S {
        self.inner
    }

    /// A handle on the shared state.
    pub fn handle(&self) -> super::BreakerHandle {
        super::BreakerHandle {
            shared: self.shared.clone(),
        }
    }
}

impl<S: Clone, C: Clone> Clone for Breaker<S, C> {
    fn clone(&self) -> Self {
        Breaker {
            inner: self.inner.clone(),
            shared: self.shared.clone(),
            classifier: self.classifier.clone(),
            cache: self.cache.clone(),
        }
    }
}

impl<S: fmt::Debug, C> fmt::Debug for Breaker<S, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Breaker")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl<S, C, B, RB> Service<Request<B>> for Breaker<S, C>
where
    S: Service<Request<B>, Response = Response<RB>>,
    S::Error: Into<BoxError>,
    RB: Body,
    RB::Data: Buf,
    C: Classify + Clone,
{
    type Response = Response<ResponseBody<RB>>;
    type Error = BoxError;
    type Future = ResponseFuture<S::Future, RB, C>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let shared = &*self.shared;
        let settings = &shared.settings;
        let head = RequestHead::of(&req);
        let keys = match &settings.scope_fn {
            Some(f) => f(&head),
            None => default_scope(&head),
        };
        let model = keys.model.unwrap_or("");
        let domain_parts: &[&str] = if settings.isolate_by_model && !model.is_empty() {
            &[keys.domain, model]
        } else {
            &[keys.domain]
        };
        let domain = self.cache.get(domain_parts).unwrap_or_else(|| {
            let key = KeyBuf::join(domain_parts, KEY_SEPARATOR);
            let handle = shared.domain(key.as_str());
            self.cache.put(key, handle);
            handle
        });
        let quota = if model.is_empty() {
            KeyBuf::join(&[keys.domain], KEY_SEPARATOR)
        } else {
            KeyBuf::join(&[keys.domain, model], KEY_SEPARATOR)
        };
        // The billing scope defaults to the failure domain, a prefix of the
        // quota key: only an explicit one is stored (and allocated).
        let billing = keys
            .billing
            .filter(|b| *b != keys.domain)
            .map(Box::<str>::from);
        let scopes = CallScopes {
            quota,
            domain_len: keys.domain.len(),
            billing,
        };
        let slow_call = settings.slow_call(keys.model);

        // Parked, then gated, then open: the most lasting refusal first.
        if shared.active_parks.load(Ordering::Relaxed) > 0
            && let Err(e) = shared.check_park(scopes.billing())
        {
            return ResponseFuture::rejected(e);
        }
        if shared.active_gates.load(Ordering::Relaxed) > 0
            && let Err(e) = shared.check_gate(scopes.quota())
        {
            return ResponseFuture::rejected(e);
        }
        let fast = domain.hot().and_then(|hot| hot.admit_closed());
        let permit = match fast {
            Some(permit) => permit,
            None => match shared.admit_breaker(domain) {
                Ok(permit) => permit,
                Err(e) => return ResponseFuture::rejected(e),
            },
        };

        // `Instant::now()` only where a slow-call threshold needs it.
        let now = (slow_call.is_some() || settings.slow_stream.is_some()).then(Instant::now);
        let call = Call {
            classifier: self.classifier.clone(),
            soft_failure: settings.soft_failure.clone(),
            peek_limit: settings.peek_limit,
            tracker: Tracker {
                domain,
                permit,
                scopes,
                slow_after: now.zip(slow_call).map(|(t, d)| t + d),
                slow_total_after: now.zip(settings.slow_stream).map(|(t, d)| t + d),
                settled: false,
            },
        };
        ResponseFuture::called(self.inner.call(req), call)
    }
}

// === DomainCache ===

/// The last failure domains this clone called, so the hot path compares a
/// key inline instead of hashing into the shared map. Copied on clone.
#[derive(Clone, Debug, Default)]
pub(crate) struct DomainCache {
    entries: [Option<(KeyBuf, DomainHandle)>; 2],
    next: u8,
}

impl DomainCache {
    #[inline]
    fn get(&self, parts: &[&str]) -> Option<DomainHandle> {
        self.entries.iter().flatten().find_map(|(key, handle)| {
            (key.eq_join(parts, KEY_SEPARATOR) && handle.is_current()).then_some(*handle)
        })
    }

    fn put(&mut self, key: KeyBuf, handle: DomainHandle) {
        let at = usize::from(self.next) % self.entries.len();
        self.entries[at] = Some((key, handle));
        self.next = self.next.wrapping_add(1);
    }
}
