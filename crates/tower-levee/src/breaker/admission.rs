//! Admission: would the layer let this request through, and under which
//! scopes? One routine, in two modes.
//!
//! A call ([`Admit`]) is admitted for real: a refusal is counted, a deadline
//! found passed reopens its scope, a half-open breaker hands out a probe
//! slot, and the request gets the [`Tracker`] that will report its outcome.
//! A peek ([`Peek`]) asks the same questions in the same order and changes
//! nothing: a router in front of several breaker layers (failover across
//! accounts) picks a target with it before sending anything. A peek is
//! advice, not a reservation: the state can change between the peek and the
//! call, and the call decides.
//!
//! The order is the most lasting refusal first: parked, then gated, then
//! open.

use std::sync::OnceLock;
use std::sync::atomic::Ordering;

use levee_core::breaker::{BreakerStatus, HALF_OPEN_RETRY_AFTER, Permit};
use levee_core::clock::Clock;

use super::cost::TokenCost;
use super::deadline::{Deadline, DeadlineTable, Lookups};
use super::error::{Refused, RefusedBy};
use super::hot::{DomainHot, model_tag};
use super::scope::{
    CallScopes, KEY_SEPARATOR, KeyBuf, RequestHead, Scope, ScopeKeys, Scopes, default_scope,
};
use super::settings::Settings;
use super::shadow::ShadowProbe;
use super::shared::{DomainHandle, Shared};
use super::tracker::{NOT_IN_FLIGHT, SlowClock, Tracker};
use crate::error::BoxError;
use crate::inline_str::ScopeKey;

/// What differs between admitting a call and peeking at its admission.
pub(crate) trait Mode<'a> {
    /// What the mode finds with the scopes (a call: its failure domain).
    type Found;
    /// What an admitted request gets.
    type Admitted;
    /// What a refused one gets: a call its boxed rejection, a peek a
    /// [`Refused`] it boxes only for a caller that gets it.
    type Refused;

    /// The request's scopes, and what this mode finds with them.
    fn resolve(&mut self, shared: &Shared, head: &RequestHead<'a>) -> (Scopes<'a>, Self::Found);

    /// A gate's or park's answer for the scope `key` names.
    fn deadline<S: Deadline, K: ScopeKey>(
        &mut self,
        shared: &Shared,
        table: &DeadlineTable<S>,
        key: impl Fn() -> K,
    ) -> Result<(), Self::Refused>;

    /// The breaker's answer, once no gate or park refused.
    fn breaker(
        self,
        shared: &Shared,
        scopes: Scopes<'a>,
        found: Self::Found,
    ) -> Result<Self::Admitted, Self::Refused>;
}

/// Admits `head`'s request in `mode`: its scopes, then park, gate and
/// breaker in turn.
#[inline(always)]
pub(crate) fn admit<'a, M: Mode<'a>>(
    shared: &Shared,
    head: &RequestHead<'a>,
    mut mode: M,
) -> Result<M::Admitted, M::Refused> {
    let (scopes, found) = mode.resolve(shared, head);
    // Looked at only while some scope is parked or gated, and a key is made
    // only to look it up again or to name a refusal. The keys are made from
    // copies of the scopes: a closure over `scopes` itself would keep them
    // in memory on the path that needs no key.
    if shared.parks.is_active() {
        let copy = scopes;
        mode.deadline(shared, &shared.parks, || copy.billing_key())?;
    }
    if shared.gates.is_active() {
        let copy = scopes;
        mode.deadline(shared, &shared.gates, || copy.quota_key())?;
    }
    mode.breaker(shared, scopes, found)
}

/// The authority of `head`'s URI when its scopes are the defaults, a
/// function of the URI's authority and path alone: what a cache of them is
/// keyed by.
#[inline]
fn scoped_by_uri<'a>(shared: &Shared, head: &RequestHead<'a>) -> Option<&'a str> {
    let by_uri = shared.settings.scope_fn.is_none() && head.extensions.get::<Scope>().is_none();
    head.uri.authority().map(|a| a.as_str()).filter(|_| by_uri)
}

/// The scope names of `head` under the layer's naming rule.
#[inline]
fn named<'a>(shared: &Shared, head: &RequestHead<'a>) -> ScopeKeys<'a> {
    match &shared.settings.scope_fn {
        Some(f) => f(head),
        None => default_scope(head),
    }
}

// === Call ===

/// Admits a call for real, with the clone's [`DomainCache`].
pub(crate) struct Admit<'c, 'a> {
    pub(crate) cache: &'c mut DomainCache,
    entry: usize,
    /// The request's extensions: its [`TokenCost`], read only when its
    /// domain counts calls in flight for pacing.
    extensions: Option<&'a http::Extensions>,
}

impl<'c> Admit<'c, '_> {
    pub(crate) fn new(cache: &'c mut DomainCache) -> Self {
        Admit {
            cache,
            entry: 0,
            extensions: None,
        }
    }

    /// The request's scopes and its failure domain, from the cache when
    /// this clone called them last, else named and looked up (or created).
    #[inline]
    fn find<'a>(&mut self, shared: &Shared, head: &RequestHead<'a>) -> (Scopes<'a>, DomainHandle) {
        let isolate = shared.settings.isolate_by_model;
        // A clone that calls the same URIs again compares two strings
        // instead of parsing them and hashing into the shared map.
        let authority = scoped_by_uri(shared, head);
        let path = head.uri.path();
        if let Some(authority) = authority
            && let Some((keys, domain, entry)) = self.cache.get_by_uri(authority, path)
        {
            self.entry = entry;
            return (Scopes::new(keys, isolate), domain);
        }
        let keys = named(shared, head);
        let scopes = Scopes::new(keys, isolate);
        let uri_key = authority
            .and_then(|authority| UriKey::of(authority, path, &keys))
            .map(CacheKey::Uri);
        if uri_key.is_none()
            && let Some((domain, entry)) = self.cache.get_by_domain(&scopes)
        {
            self.entry = entry;
            return (scopes, domain);
        }
        let key = scopes.domain_key();
        let domain = shared.domain(&key);
        let name = key.clone();
        self.entry = self
            .cache
            .put(uri_key.unwrap_or(CacheKey::Domain(key)), domain, name);
        (scopes, domain)
    }
}

/// Admits a call through `shared`: out of line and not generic, so that
/// what a service inlines only builds the future.
pub(crate) fn admit_call(
    shared: &Shared,
    cache: &mut DomainCache,
    head: &RequestHead<'_>,
) -> Result<Tracker, BoxError> {
    admit(shared, head, Admit::new(cache))
}

impl<'a> Mode<'a> for Admit<'_, 'a> {
    type Found = DomainHandle;
    type Admitted = Tracker;
    type Refused = BoxError;

    #[inline]
    fn resolve(&mut self, shared: &Shared, head: &RequestHead<'a>) -> (Scopes<'a>, DomainHandle) {
        let (scopes, domain) = self.find(shared, head);
        self.extensions = Some(head.extensions);
        if tracing::level_enabled!(tracing::Level::DEBUG)
            && tracing::enabled!(target: "levee::breaker", tracing::Level::DEBUG)
        {
            record_scope(&scopes);
        }
        (scopes, domain)
    }

    #[inline]
    fn deadline<S: Deadline, K: ScopeKey>(
        &mut self,
        shared: &Shared,
        table: &DeadlineTable<S>,
        key: impl Fn() -> K,
    ) -> Result<(), BoxError> {
        let now = || shared.clock.now();
        let cached = self.cache.uri_lookups(self.entry).map(S::cached);
        let reopened = table.admit(cached, &key, now)?;
        if reopened.is_some() {
            shared.emit_transition(key().as_ref(), reopened, None);
        }
        Ok(())
    }

    #[inline]
    fn breaker(
        self,
        shared: &Shared,
        scopes: Scopes<'a>,
        domain: DomainHandle,
    ) -> Result<Tracker, BoxError> {
        let hot = domain.hot();
        // A call the breaker admits takes its place in the provider's rate
        // (spreading) before a probe slot, so a refusal holds nothing.
        let space = || match hot
            .map(|hot| hot.space(|| model_tag(scopes.model()), || shared.clock.now()))
        {
            Some(Err(until)) => Err(shared.space(&scopes, until)),
            _ => Ok(()),
        };
        let permit = match hot.and_then(|hot| hot.admit_closed()) {
            Some(permit) => {
                space()?;
                permit
            }
            None => {
                // Open and cooling off: refused without the lock (a shadow
                // probe is not).
                if let Some(left) = hot.and_then(|hot| hot.open_for(|| shared.clock.now())) {
                    let name = self.cache.name(self.entry);
                    if !shared.shadow_probes.load(Ordering::Relaxed) {
                        return Err(shared.reject_open(name, left));
                    }
                    refuse_open(shared, domain, self.extensions, name, left)?
                } else if shared.shadow_probes.load(Ordering::Relaxed)
                    && let Some(admitted) = shadow_permit(shared, domain, self.extensions)
                {
                    // Half-open, or its cool-off over: a copy never takes
                    // the callers' probe.
                    let name = self.cache.name(self.entry);
                    admitted.ok_or_else(|| shared.reject_open(name, HALF_OPEN_RETRY_AFTER))?
                } else {
                    space()?;
                    shared.admit_breaker(domain)?
                }
            }
        };
        let settings = &shared.settings;
        Ok(Tracker {
            domain,
            permit,
            scopes: CallScopes::new(&scopes),
            isolated: scopes.isolated(),
            slow: match settings.times_calls {
                true => timed(settings, scopes.model()),
                false => SlowClock::default(),
            },
            track_latency: settings.latency_estimate,
            in_flight: match hot {
                Some(hot) if hot.is_counting() => count_in_flight(hot, self.extensions),
                _ => NOT_IN_FLIGHT,
            },
            settled: false,
        })
    }
}

/// An open breaker's refusal of a call, `left` before its cool-off ends;
/// or, for a [`ShadowProbe`] it admits ([`Shared::admits_shadow`]), a
/// shadow probe's permit: a copy asks the breaker nothing, and its answer,
/// told apart when it comes, can only close it.
#[cold]
#[inline(never)]
fn refuse_open(
    shared: &Shared,
    domain: DomainHandle,
    extensions: Option<&http::Extensions>,
    name: &KeyBuf,
    left: std::time::Duration,
) -> Result<Permit, BoxError> {
    match shadow_permit(shared, domain, extensions) {
        Some(Some(permit)) => Ok(permit),
        _ => Err(shared.reject_open(name, left)),
    }
}

/// For a call to a breaker that is not closed: `None` if it is not a
/// [`ShadowProbe`]; else the copy's permit, if the breaker admits one
/// ([`Shared::shadow_spell`]).
#[cold]
#[inline(never)]
fn shadow_permit(
    shared: &Shared,
    domain: DomainHandle,
    extensions: Option<&http::Extensions>,
) -> Option<Option<Permit>> {
    extensions?.get::<ShadowProbe>()?;
    Some(shared.shadow_spell(domain).map(Permit::shadow))
}

/// Counts a call in flight on a domain that paces, with the tokens its
/// request says it costs (below [`NOT_IN_FLIGHT`], whatever the estimate);
/// returns them. Out of line: most domains count nothing.
#[inline(never)]
fn count_in_flight(hot: &DomainHot, extensions: Option<&http::Extensions>) -> u32 {
    let cost = extensions
        .and_then(|e| e.get::<TokenCost>())
        .map_or(0, |c| c.0);
    let tokens = u32::try_from(cost)
        .unwrap_or(u32::MAX)
        .min(NOT_IN_FLIGHT - 1);
    hot.count_in_flight(u64::from(tokens));
    tokens
}

/// A timed call's clock, out of line: most layers time no call.
#[inline(never)]
fn timed(settings: &Settings, model: Option<&str>) -> SlowClock {
    SlowClock::start(settings.limits(model), settings.latency_estimate)
}

/// Names the call's quota scope on the enclosing span (a retry or failover
/// span declares a `scope` field), for whoever reads the traces.
#[cold]
fn record_scope(scopes: &Scopes<'_>) {
    let span = tracing::Span::current();
    if !span.is_disabled() {
        span.record("scope", scopes.quota_key().as_str());
    }
}

// === Peek ===

/// Peeks at `head`'s admission, with a caller's cache of its failure
/// domain and its memo of the last peek. When nothing in the layer can
/// refuse, the answer is known without naming the request's scopes: inline
/// up to that answer (the common case; a router peeks at every call), the
/// rest out of line.
#[inline]
pub(crate) fn peek(
    shared: &Shared,
    head: &RequestHead<'_>,
    cache: Option<&PeekCache>,
    memo: Option<&mut PeekMemo>,
) -> Result<(), Refused> {
    if shared.refuses_nothing() {
        return Ok(());
    }
    peek_scopes(shared, head, cache, memo)
}

#[inline(never)]
fn peek_scopes(
    shared: &Shared,
    head: &RequestHead<'_>,
    cache: Option<&PeekCache>,
    memo: Option<&mut PeekMemo>,
) -> Result<(), Refused> {
    admit(shared, head, Peek { cache, memo })
}

/// Peeks at admission: takes no probe slot, counts no refusal, makes no
/// transition, creates no scope and calls nothing.
struct Peek<'c> {
    cache: Option<&'c PeekCache>,
    /// Kept only while it holds the request's URI.
    memo: Option<&'c mut PeekMemo>,
}

/// A router's memo of its last peek at one target, kept per router clone:
/// the URI's default scopes and their gate's and park's lookups. While the
/// target's scope is gated or parked, passing it over again compares two
/// strings instead of parsing the URI for its scopes and looking their keys
/// up in the shared tables (the refusal's name is still joined).
#[derive(Clone, Debug, Default)]
pub(crate) struct PeekMemo {
    uri: Option<UriKey>,
    lookups: Lookups,
}

impl<'a> Mode<'a> for Peek<'_> {
    type Found = ();
    type Admitted = ();
    type Refused = Refused;

    #[inline]
    fn resolve(&mut self, shared: &Shared, head: &RequestHead<'a>) -> (Scopes<'a>, ()) {
        // The domain is looked up after the gate and park: a request to a
        // domain never called may still be parked or gated.
        let isolate = shared.settings.isolate_by_model;
        // Only a memo is keyed by the URI.
        let authority = self.memo.as_ref().and_then(|_| scoped_by_uri(shared, head));
        let path = head.uri.path();
        if let Some(authority) = authority
            && let Some(uri) = self.memo.as_ref().and_then(|memo| memo.uri.as_ref())
            && let Some(keys) = uri.keys(authority, path)
        {
            return (Scopes::new(keys, isolate), ());
        }
        let keys = named(shared, head);
        match authority.and_then(|authority| UriKey::of(authority, path, &keys)) {
            Some(uri) => {
                if let Some(memo) = self.memo.as_deref_mut() {
                    *memo = PeekMemo {
                        uri: Some(uri),
                        lookups: Lookups::default(),
                    };
                }
            }
            // Scopes a memo can't hold: its lookups are of other keys.
            None => self.memo = None,
        }
        (Scopes::new(keys, isolate), ())
    }

    #[inline]
    fn deadline<S: Deadline, K: ScopeKey>(
        &mut self,
        shared: &Shared,
        table: &DeadlineTable<S>,
        key: impl Fn() -> K,
    ) -> Result<(), Refused> {
        let cached = self
            .memo
            .as_deref_mut()
            .map(|memo| S::cached(&mut memo.lookups));
        table.peek(cached, key, || shared.clock.now())
    }

    fn breaker(self, shared: &Shared, scopes: Scopes<'a>, (): ()) -> Result<(), Refused> {
        let cached = self
            .cache
            .and_then(|c| c.domain.get())
            .filter(|(key, h)| scopes.is_domain_key(key) && h.is_current())
            .map(|(_, h)| *h);
        let domain = match cached {
            Some(h) => h,
            None => {
                let key = scopes.domain_key();
                // Never called yet: nothing to refuse.
                let Some(h) = shared.domains.get(key.as_str()) else {
                    return Ok(());
                };
                if let Some(c) = self.cache {
                    let _ = c.domain.set((key, h));
                }
                h
            }
        };
        let Some(hot) = domain.hot() else {
            return Ok(());
        };
        if hot.admit_closed().is_some() {
            return Ok(());
        }
        if let Some(left) = hot.open_for(|| shared.clock.now()) {
            return Err(Refused::new(RefusedBy::Breaker, scopes.domain_key(), left));
        }
        let Some(cell) = domain.lock() else {
            return Ok(());
        };
        // Approximate: slots of probes that already reported are not
        // counted, so a peek may admit what the call then refuses.
        let state = &cell.state;
        if state.status() == BreakerStatus::HalfOpen
            && state.probes_in_flight() >= shared.settings.breaker.probes()
        {
            let retry_after = HALF_OPEN_RETRY_AFTER;
            return Err(Refused::new(RefusedBy::Breaker, cell.key(), retry_after));
        }
        Ok(())
    }
}

/// The last failure domain a peek found, remembered so that later peeks at
/// the same domain skip the registry's lock. Written once, then only read:
/// a peek writes no shared memory. A router keeps one per target.
#[derive(Debug, Default)]
pub(crate) struct PeekCache {
    domain: OnceLock<(KeyBuf, DomainHandle)>,
}

// === DomainCache ===

/// The last failure domains a service clone called, so the hot path
/// compares a key inline instead of parsing the URI and hashing into the
/// shared map. Copied on clone.
#[derive(Clone, Debug, Default)]
pub(crate) struct DomainCache {
    entries: [Option<CacheEntry>; 2],
    /// The lookups of each entry's gate and park (kept for a URI's entry
    /// only), aside: the hot path walks the entries.
    lookups: [Lookups; 2],
    next: u8,
}

/// One failure domain a service clone called.
#[derive(Clone, Debug)]
struct CacheEntry {
    /// What it was looked up by.
    key: CacheKey,
    domain: DomainHandle,
    /// Its name, for rejections (copied into one: sharing it would cost a
    /// refusal two atomic writes).
    name: KeyBuf,
}

/// What a cached failure domain was found by.
#[derive(Clone, Debug)]
enum CacheKey {
    /// The default scopes of a URI.
    Uri(UriKey),
    /// The failure domain's key (a [`Scope`](super::Scope) extension or a scope fn).
    Domain(KeyBuf),
}

/// A URI's default scopes, kept to be found again: its raw authority and
/// path, and where in them the domain and the model are. A request to the
/// same URI then compares two strings instead of parsing them.
#[derive(Clone, Debug)]
struct UriKey {
    authority: KeyBuf,
    path: KeyBuf,
    /// The model is `path[start..end]`, if the path names one.
    model: Option<(u16, u16)>,
}

impl UriKey {
    /// The key of `keys`, the default scopes of `authority` and `path`:
    /// `None` if they do not point into them, or if the authority carries a
    /// userinfo (a credential is never kept, not even in a cache).
    fn of(authority: &str, path: &str, keys: &ScopeKeys<'_>) -> Option<Self> {
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
        (plain && keys.billing.is_none()).then(|| UriKey {
            authority: KeyBuf::join(&[authority], KEY_SEPARATOR),
            path: KeyBuf::join(&[path], KEY_SEPARATOR),
            model,
        })
    }

    /// The default scopes of `authority` and `path`, if they are this key's.
    /// Always inlined: it is most of a cached call's admission.
    #[inline(always)]
    fn keys<'a>(&self, authority: &'a str, path: &'a str) -> Option<ScopeKeys<'a>> {
        if !same_bytes(self.authority.as_bytes(), authority.as_bytes())
            || !same_bytes(self.path.as_bytes(), path.as_bytes())
        {
            return None;
        }
        Some(ScopeKeys {
            domain: authority,
            model: match self.model {
                Some((start, end)) => Some(path.get(usize::from(start)..usize::from(end))?),
                None => None,
            },
            billing: None,
        })
    }
}

/// `a == b`, compared a word at a time inline: an authority and a path are
/// a few words long, and the two calls to `memcmp` a cached call made cost
/// more than the comparison (measured: 12 instructions a call fewer).
#[inline]
fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    if n < 8 {
        return a == b;
    }
    let word = |s: &[u8], at: usize| {
        s.get(at..at + 8)
            .and_then(|w| w.try_into().ok())
            .map(u64::from_ne_bytes)
    };
    let mut at = 0;
    while at + 8 < n {
        if word(a, at) != word(b, at) {
            return false;
        }
        at += 8;
    }
    // The last word, overlapping the one before: no byte-wise tail.
    word(a, n - 8) == word(b, n - 8)
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
            let CacheEntry {
                key: CacheKey::Uri(uri),
                domain: handle,
                ..
            } = entry.as_ref()?
            else {
                return None;
            };
            let keys = uri.keys(authority, path)?;
            handle.is_current().then_some((keys, *handle, at))
        })
    }

    #[inline]
    fn get_by_domain(&self, scopes: &Scopes<'_>) -> Option<(DomainHandle, usize)> {
        self.entries
            .iter()
            .enumerate()
            .find_map(|(at, entry)| match entry {
                Some(CacheEntry {
                    key: CacheKey::Domain(k),
                    domain: handle,
                    ..
                }) if scopes.is_domain_key(k) && handle.is_current() => Some((*handle, at)),
                _ => None,
            })
    }

    /// Caches `handle` under `key`; returns the entry's index.
    fn put(&mut self, key: CacheKey, domain: DomainHandle, name: KeyBuf) -> usize {
        let at = usize::from(self.next) % self.entries.len();
        self.entries[at] = Some(CacheEntry { key, domain, name });
        self.lookups[at] = Lookups::default();
        self.next = self.next.wrapping_add(1);
        at
    }

    /// The failure domain's name at entry `at`, for a rejection (an entry
    /// the call just found or made).
    fn name(&self, at: usize) -> &KeyBuf {
        static UNNAMED: KeyBuf = KeyBuf::EMPTY;
        self.entries
            .get(at)
            .and_then(|e| e.as_ref())
            .map_or(&UNNAMED, |e| &e.name)
    }

    /// The gate and park lookups kept at entry `at`, if it is a URI's: its
    /// scopes are the URI's, so the lookups are of the same keys every time.
    /// A domain's entry is shared by requests to other models and billing
    /// scopes.
    fn uri_lookups(&mut self, at: usize) -> Option<&mut Lookups> {
        match self.entries.get(at)? {
            Some(CacheEntry {
                key: CacheKey::Uri(_),
                ..
            }) => self.lookups.get_mut(at),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use proptest::prelude::*;

    use super::{PeekCache, PeekMemo, same_bytes};
    use crate::breaker::{BreakerLayer, FleetUpdate, RequestHead};
    use crate::error::{RefusalKind, Rejection};

    /// A peek's answer, compared by what a caller reads of it.
    type Answer = Result<(), (RefusalKind, String, Duration)>;

    fn answer(refused: Result<(), crate::error::BoxError>) -> Answer {
        refused.map_err(|e| {
            let r = Rejection::find(&*e).expect("a rejection");
            (
                r.kind(),
                r.scope().unwrap_or_default().to_owned(),
                r.retry_after(),
            )
        })
    }

    const URIS: [&str; 4] = [
        "https://api.openai.com/v1/chat/completions",
        "https://x.openai.azure.com/openai/deployments/gpt-4o/chat/completions",
        "https://x.openai.azure.com/openai/deployments/gpt-4o-mini/chat/completions",
        "https://api.openai.com/v1/chat/completions?stream=true",
    ];
    const SCOPES: [&str; 4] = [
        "api.openai.com",
        "x.openai.azure.com/gpt-4o",
        "x.openai.azure.com/gpt-4o-mini",
        "x.openai.azure.com",
    ];

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Whatever is gated, parked or opened between two peeks, and
        /// whatever URI the memo last held, a router's memoized peek answers
        /// as a fresh peek would.
        #[test]
        fn a_memoized_peek_answers_as_a_fresh_one(
            ops in proptest::collection::vec((0u8..5, 0usize..4, 1u64..30), 1..60),
        ) {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_time()
                .start_paused(true)
                .build()
                .unwrap();
            rt.block_on(async {
                let handle = BreakerLayer::new().handle();
                let cache = PeekCache::default();
                let mut memo = PeekMemo::default();
                for (op, k, n) in ops {
                    let wait = Duration::from_secs(n);
                    let (scope, reason) = (SCOPES[k], "test");
                    match op {
                        0 => { handle.adopt(FleetUpdate::Gated { scope, wait, reason }); }
                        1 => { handle.adopt(FleetUpdate::Parked { scope, wait, reason }); }
                        2 => { handle.adopt(FleetUpdate::Opened { scope, wait, reason }); }
                        3 => tokio::time::advance(wait).await,
                        _ => {
                            let uri: http::Uri = URIS[k].parse().unwrap();
                            let mut req = http::Request::new(());
                            *req.uri_mut() = uri;
                            let head = RequestHead::of(&req);
                            let fresh = answer(handle.admits(&head));
                            let memoized = handle
                                .admits_cached(&head, &cache, Some(&mut memo))
                                .map_err(|r| r.into_error());
                            prop_assert_eq!(answer(memoized), fresh);
                        }
                    }
                }
                Ok(())
            })?;
        }
    }

    proptest! {
        #[test]
        fn same_bytes_is_slice_equality(
            a in proptest::collection::vec(any::<u8>(), 0..40),
            flip in any::<prop::sample::Index>(),
            equal in any::<bool>(),
        ) {
            let mut b = a.clone();
            if !equal && !b.is_empty() {
                let at = flip.index(b.len());
                b[at] ^= 1;
            }
            prop_assert_eq!(same_bytes(&a, &b), a == b);
            prop_assert_eq!(same_bytes(&a, &b[..b.len().saturating_sub(1)]), a[..] == b[..b.len().saturating_sub(1)]);
        }
    }
}
