//! The breaker service.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};

use bytes::Buf;
use http::{Request, Response};
use http_body::Body;
use levee_core::classify::{Classify, ProviderClassifier};
use levee_core::clock::Clock;
use tower_service::Service;

use super::future::{Call, ResponseFuture};
use super::scope::{KEY_SEPARATOR, KeyBuf, RequestHead, Scope, ScopeKeys, default_scope};
use super::shared::{DomainHandle, Shared};
use super::tracker::{CallScopes, SlowClock, Tracker};
use crate::BoxError;
use crate::body::ResponseBody;

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
    RB::Data: Buf + 'static,
    C: Classify + Clone,
{
    type Response = Response<ResponseBody<RB>>;
    type Error = BoxError;
    type Future = ResponseFuture<S::Future, RB, C>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    // Always inlined (measured: ~10 ns a call): admission is out of line and
    // not generic, so what is inlined only builds the future, where the
    // caller keeps it, and hands the request on without another copy.
    #[inline(always)]
    fn call(&mut self, req: Request<B>) -> Self::Future {
        match admit(&self.shared, &mut self.cache, &RequestHead::of(&req)) {
            Ok(tracker) => {
                let settings = &self.shared.settings;
                let call = Call {
                    classifier: self.classifier.clone(),
                    soft_failure: settings.soft_failure.clone(),
                    peek_limit: settings.peek_limit,
                    tracker,
                };
                ResponseFuture::called(self.inner.call(req), call)
            }
            Err(e) => ResponseFuture::rejected(e),
        }
    }
}

/// Admits a request: its scopes, then park, gate and breaker in turn. The
/// tracker holds what its outcome will be reported with.
fn admit(
    shared: &Shared,
    cache: &mut DomainCache,
    head: &RequestHead<'_>,
) -> Result<Tracker, BoxError> {
    let (keys, domain, entry) = resolve(shared, cache, head);
    let settings = &shared.settings;
    let model = keys.model.filter(|m| !m.is_empty());
    let isolated = settings.isolate_by_model && model.is_some();
    if tracing::level_enabled!(tracing::Level::DEBUG)
        && tracing::enabled!(target: "levee::breaker", tracing::Level::DEBUG)
    {
        record_scope(keys.domain, model);
    }
    // Parked, then gated, then open: the most lasting refusal first.
    // Keys are joined only while some scope is parked or gated.
    if shared.active_parks.load(Ordering::Relaxed) > 0 {
        shared.check_park(keys.billing.unwrap_or(keys.domain))?;
    }
    if shared.active_gates.load(Ordering::Relaxed) > 0 {
        let quota = match model {
            Some(model) => KeyBuf::join(&[keys.domain, model], KEY_SEPARATOR),
            None => KeyBuf::join(&[keys.domain], KEY_SEPARATOR),
        };
        shared.check_gate(&quota)?;
    }
    let hot = domain.hot();
    let permit = match hot.and_then(|hot| hot.admit_closed()) {
        Some(permit) => permit,
        None => {
            // Open and cooling off: refused without the lock.
            if let Some(left) = hot.and_then(|hot| hot.open_for(|| shared.clock.now())) {
                let scope = cache.name(entry);
                return Err(shared.reject_open(scope, left));
            }
            shared.admit_breaker(domain)?
        }
    };

    // The billing scope defaults to the failure domain: only an explicit
    // one is stored (and allocated).
    let billing = keys.billing.filter(|b| *b != keys.domain);
    Ok(Tracker {
        domain,
        permit,
        scopes: CallScopes::new(model, billing),
        isolated,
        slow: SlowClock::start(
            settings.slow_call(keys.model),
            settings.slow_stream,
            settings.latency_estimate,
        ),
        track_latency: settings.latency_estimate,
        settled: false,
    })
}

/// The request's scopes, its failure domain's handle, and the cache
/// entry that holds the domain's name.
fn resolve<'a>(
    shared: &Shared,
    cache: &mut DomainCache,
    head: &RequestHead<'a>,
) -> (ScopeKeys<'a>, DomainHandle, usize) {
    let settings = &shared.settings;
    // The default scopes are a function of the URI's authority and path:
    // a clone that calls the same URIs again compares two strings
    // instead of parsing them and hashing into the shared map.
    let by_uri = settings.scope_fn.is_none() && head.extensions.get::<Scope>().is_none();
    let authority = head.uri.authority().map(|a| a.as_str());
    let path = head.uri.path();
    if let Some(authority) = authority.filter(|_| by_uri)
        && let Some(hit) = cache.get_by_uri(authority, path)
    {
        return hit;
    }
    let keys = match &settings.scope_fn {
        Some(f) => f(head),
        None => default_scope(head),
    };
    let model = keys.model.unwrap_or("");
    let domain_parts: &[&str] = if settings.isolate_by_model && !model.is_empty() {
        &[keys.domain, model]
    } else {
        &[keys.domain]
    };
    let uri_key = authority
        .filter(|_| by_uri)
        .and_then(|authority| CacheKey::uri(authority, path, &keys));
    if uri_key.is_none()
        && let Some((domain, entry)) = cache.get_by_parts(domain_parts)
    {
        return (keys, domain, entry);
    }
    let key = KeyBuf::join(domain_parts, KEY_SEPARATOR);
    let domain = shared.domain(&key);
    let name = Arc::from(&*key);
    let entry = cache.put(uri_key.unwrap_or(CacheKey::Parts(key)), domain, name);
    (keys, domain, entry)
}

/// Names the call's quota scope on the enclosing span (a retry or failover
/// span declares a `scope` field), for whoever reads the traces.
#[cold]
fn record_scope(domain: &str, model: Option<&str>) {
    let span = tracing::Span::current();
    if span.is_disabled() {
        return;
    }
    match model {
        Some(model) => span.record("scope", format_args!("{domain}{KEY_SEPARATOR}{model}")),
        None => span.record("scope", domain),
    };
}

// === DomainCache ===

/// The last failure domains this clone called, so the hot path compares a
/// key inline instead of parsing the URI and hashing into the shared map.
/// Copied on clone.
#[derive(Clone, Debug, Default)]
pub(crate) struct DomainCache {
    /// The key looked up by, the domain, and its name (for rejections).
    entries: [Option<(CacheKey, DomainHandle, Arc<str>)>; 2],
    next: u8,
}

/// What a cached failure domain was found by.
#[derive(Clone, Debug)]
pub(crate) enum CacheKey {
    /// The default scopes of a URI: its raw authority and path, where in
    /// them the domain and the model are.
    Uri {
        authority: KeyBuf,
        path: KeyBuf,
        /// The model is `path[start..end]`, if the path names one.
        model: Option<(u16, u16)>,
    },
    /// The joined failure-domain key (a [`Scope`] extension or a scope fn).
    Parts(KeyBuf),
}

impl CacheKey {
    /// The key of `keys`, the default scopes of `authority` and `path`:
    /// `None` if they do not point into them, or if the authority carries a
    /// userinfo (a credential is never kept, not even in a cache).
    fn uri(authority: &str, path: &str, keys: &ScopeKeys<'_>) -> Option<Self> {
        let offset = |outer: &str, inner: &str| {
            let start = (inner.as_ptr() as usize).checked_sub(outer.as_ptr() as usize)?;
            let end = start.checked_add(inner.len())?;
            (end <= outer.len()).then_some((u16::try_from(start).ok()?, u16::try_from(end).ok()?))
        };
        let (domain_from, domain_end) = offset(authority, keys.domain)?;
        let model = match keys.model {
            Some(model) => Some(offset(path, model)?),
            None => None,
        };
        let plain = domain_from == 0 && usize::from(domain_end) == authority.len();
        (plain && keys.billing.is_none()).then(|| CacheKey::Uri {
            authority: KeyBuf::join(&[authority], KEY_SEPARATOR),
            path: KeyBuf::join(&[path], KEY_SEPARATOR),
            model,
        })
    }
}

impl DomainCache {
    /// The default scopes of `authority` and `path`, with their domain and
    /// the entry's index.
    #[inline]
    fn get_by_uri<'a>(
        &self,
        authority: &'a str,
        path: &'a str,
    ) -> Option<(ScopeKeys<'a>, DomainHandle, usize)> {
        self.entries.iter().enumerate().find_map(|(at, entry)| {
            let (
                CacheKey::Uri {
                    authority: a,
                    path: p,
                    model,
                },
                handle,
                _,
            ) = entry.as_ref()?
            else {
                return None;
            };
            if a.as_bytes() != authority.as_bytes()
                || p.as_bytes() != path.as_bytes()
                || !handle.is_current()
            {
                return None;
            }
            let keys = ScopeKeys {
                domain: authority,
                model: match model {
                    Some((start, end)) => Some(path.get(usize::from(*start)..usize::from(*end))?),
                    None => None,
                },
                billing: None,
            };
            Some((keys, *handle, at))
        })
    }

    #[inline]
    fn get_by_parts(&self, parts: &[&str]) -> Option<(DomainHandle, usize)> {
        self.entries
            .iter()
            .enumerate()
            .find_map(|(at, entry)| match entry {
                Some((CacheKey::Parts(k), handle, _))
                    if k.eq_join(parts, KEY_SEPARATOR) && handle.is_current() =>
                {
                    Some((*handle, at))
                }
                _ => None,
            })
    }

    /// Caches `handle` under `key`; returns the entry's index.
    fn put(&mut self, key: CacheKey, handle: DomainHandle, name: Arc<str>) -> usize {
        let at = usize::from(self.next) % self.entries.len();
        self.entries[at] = Some((key, handle, name));
        self.next = self.next.wrapping_add(1);
        at
    }

    /// The failure domain's name at entry `at`, for a rejection.
    fn name(&self, at: usize) -> Arc<str> {
        self.entries
            .get(at)
            .and_then(|e| e.as_ref())
            .map_or_else(|| Arc::from(""), |(_, _, name)| name.clone())
    }
}
