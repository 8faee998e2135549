//! A failover target (an account, deployment, region or provider) and the
//! [`ServedBy`] record of which target answered.

use std::collections::HashMap;
use std::fmt;
use std::num::NonZeroU32;
use std::sync::{Arc, PoisonError, RwLock};

use http::{Request, Response};
use http_body::Body;
use levee_core::classify::ProviderClassifier;

use crate::breaker::{BreakerLayer, ResponseBody};
use crate::bulkhead::BulkheadLayer;

/// A request rewrite for one target: point the URI at its endpoint, set its
/// key, name its model or deployment.
pub type Rewrite<B> = Arc<dyn Fn(&mut Request<B>) + Send + Sync>;

/// One place a request can go: a name, a service, its own breaker, throttle
/// gate and park table (a [`BreakerLayer`]), an optional bulkhead, an
/// optional request rewrite, and optional provider/region labels.
///
/// Give each target its own `BreakerLayer` (the default: [`Target::new`]
/// makes one with the default configuration) so an account's breaker, gates
/// and parks are its own. One layer may also be shared by several targets
/// when their rewrites give them different scopes (a [`Scope`] extension
/// naming the account, or different URIs): state is keyed by scope either way.
///
/// ```
/// use std::convert::Infallible;
/// use http::{Request, Response};
/// use tower_levee::breaker::Scope;
/// use tower_levee::failover::Target;
///
/// let client = tower::service_fn(|_req: Request<String>| async {
///     Ok::<_, Infallible>(Response::new(String::new()))
/// });
/// let backup = Target::new("openai-org-b", client)
///     .provider("openai")
///     .region("us")
///     .max_concurrent(32)
///     .rewrite(|req: &mut Request<String>| {
///         req.headers_mut().insert("authorization", "Bearer sk-org-b".parse().unwrap());
///         req.extensions_mut().insert(Scope::new().domain("openai-org-b"));
///     });
/// # let _ = backup;
/// ```
///
/// [`Scope`]: crate::breaker::Scope
pub struct Target<S, B, C = ProviderClassifier> {
    pub(crate) name: String,
    pub(crate) service: S,
    pub(crate) breaker: BreakerLayer<C>,
    pub(crate) bulkhead: Option<BulkheadLayer>,
    pub(crate) rewrite: Option<Rewrite<B>>,
    pub(crate) provider: Option<Arc<str>>,
    pub(crate) region: Option<Arc<str>>,
    pub(crate) pool: Option<Arc<str>>,
}

impl<S, B> Target<S, B> {
    /// A target named `name` (unique within a failover) calling `service`,
    /// with its own default [`BreakerLayer`] and no bulkhead.
    pub fn new(name: impl Into<String>, service: S) -> Self {
        Target {
            name: name.into(),
            service,
            breaker: BreakerLayer::new(),
            bulkhead: None,
            rewrite: None,
            provider: None,
            region: None,
            pool: None,
        }
    }
}

impl<S, B, C> Target<S, B, C> {
    /// The target's breaker, throttle gate and park table: a configured
    /// layer, or a clone of one shared with other targets.
    pub fn breaker<C2>(self, layer: BreakerLayer<C2>) -> Target<S, B, C2> {
        Target {
            name: self.name,
            service: self.service,
            breaker: layer,
            bulkhead: self.bulkhead,
            rewrite: self.rewrite,
            provider: self.provider,
            region: self.region,
            pool: self.pool,
        }
    }

    /// The target's bulkhead (a compartment of its own, or one shared with
    /// the targets that use the same dependency).
    pub fn bulkhead(mut self, layer: BulkheadLayer) -> Self {
        self.bulkhead = Some(layer);
        self
    }

    /// A bulkhead of its own, named after the target, admitting `max`
    /// calls in flight.
    pub fn max_concurrent(self, max: usize) -> Self {
        let layer = BulkheadLayer::named(self.name.as_str(), max);
        self.bulkhead(layer)
    }

    /// Rewrites each request before this target sees it (and before its
    /// admission is checked, so the scopes are those the target will use).
    /// Cross-provider body translation plugs in here too.
    pub fn rewrite(mut self, f: impl Fn(&mut Request<B>) + Send + Sync + 'static) -> Self {
        self.rewrite = Some(Arc::new(f));
        self
    }

    /// The provider label (`"openai"`, `"anthropic"`): targets sharing a
    /// provider and region are expected to fail together on overload.
    pub fn provider(mut self, provider: impl Into<Arc<str>>) -> Self {
        self.provider = Some(provider.into());
        self
    }

    /// The region label (`"us-east-1"`).
    pub fn region(mut self, region: impl Into<Arc<str>>) -> Self {
        self.region = Some(region.into());
        self
    }

    /// Puts the target in a pool: targets naming the same pool share its
    /// traffic by what each one's provider last said is left of its rate
    /// limits (the lowest share of any limit, read from the response
    /// headers, without a lock), instead of the first taking it all. The
    /// pool takes its place in the failover order where its first member
    /// was added; a pool of one is an ordinary target.
    ///
    /// Use it for accounts of one provider with separate limits: spread by
    /// what is left, none is driven to its limit while another idles.
    pub fn pool(mut self, name: impl Into<Arc<str>>) -> Self {
        self.pool = Some(name.into());
        self
    }

    /// The target's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl<S, B, C> fmt::Debug for Target<S, B, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Target")
            .field("name", &self.name)
            .field("provider", &self.provider)
            .field("region", &self.region)
            .field("bulkhead", &self.bulkhead)
            .field("rewrite", &self.rewrite.is_some())
            .finish_non_exhaustive()
    }
}

/// Which target answered a request, carried by every response a
/// [`Failover`](super::Failover) returns from a target (successful or not),
/// so a caller can log which account or model served it. Read it with
/// [`ServedBy::of`] before mapping the response's body: it travels in the
/// body ([`ResponseBody`]), packed in four bytes, because a response
/// extension would cost three allocations per call (the extensions map, its
/// table, the boxed value). A caller that maps the body first can have it
/// inserted as an extension too:
/// [`served_by_extension`](super::FailoverBuilder::served_by_extension).
///
/// `Copy`, and free of reference counts: the name is interned once when the
/// failover is built.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ServedBy {
    /// The target's name.
    pub target: &'static str,
    /// The target's position in the failover order (0 is the primary).
    pub index: usize,
    /// Which call of this request it was: 1 for the first target called.
    pub attempt: u32,
    /// Whether a target other than the first in order answered.
    pub fallback: bool,
}

impl ServedBy {
    /// Which target answered `response`: from its body, else from its
    /// extensions (`None` if it did not come from a failover's target).
    pub fn of<RB: Body>(response: &Response<ResponseBody<RB>>) -> Option<ServedBy> {
        match response.body().served_by() {
            Some(packed) => Some(ServedBy::unpack(packed)),
            None => response.extensions().get::<ServedBy>().copied(),
        }
    }

    /// The answer of target `index` (named `name`, an interned id) at
    /// `attempt`, in four bytes: the name's id, the index, the attempt.
    pub(crate) fn pack(name: NameId, index: usize, attempt: u32) -> NonZeroU32 {
        // Both under 256: at most MAX_TARGETS targets, one call each.
        let index = index.min(255) as u32;
        let attempt = attempt.clamp(1, 255);
        NonZeroU32::new(u32::from(name.0) << 16 | index << 8 | attempt).unwrap_or(NonZeroU32::MIN)
    }

    fn unpack(packed: NonZeroU32) -> ServedBy {
        let packed = packed.get();
        let index = (packed >> 8 & 0xff) as usize;
        ServedBy {
            target: name_of(NameId((packed >> 16) as u16)),
            index,
            attempt: packed & 0xff,
            fallback: index != 0,
        }
    }
}

/// An interned target name's number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct NameId(u16);

impl NameId {
    /// No name: interning refused it (too many names).
    pub(crate) const NONE: NameId = NameId(u16::MAX);
}

/// Every target name interned in this process, by number.
#[derive(Default)]
struct Names {
    ids: HashMap<&'static str, NameId>,
    names: Vec<&'static str>,
}

static NAMES: RwLock<Option<Names>> = RwLock::new(None);

/// Interns a target name: each distinct name is leaked once per process and
/// numbered, so a [`ServedBy`] carries it in two bytes and hands it out
/// without a reference count. `None` past 65,535 distinct names.
pub(crate) fn intern(name: &str) -> Option<(NameId, &'static str)> {
    let mut names = NAMES.write().unwrap_or_else(PoisonError::into_inner);
    let names = names.get_or_insert_default();
    if let Some((&n, &id)) = names.ids.get_key_value(name) {
        return Some((id, n));
    }
    let id = NameId(
        u16::try_from(names.names.len())
            .ok()
            .filter(|&n| n < u16::MAX)?,
    );
    let leaked: &'static str = Box::leak(name.into());
    names.ids.insert(leaked, id);
    names.names.push(leaked);
    Some((id, leaked))
}

/// The name numbered `id` (`""` for a number never handed out).
fn name_of(id: NameId) -> &'static str {
    let names = NAMES.read().unwrap_or_else(PoisonError::into_inner);
    names
        .as_ref()
        .and_then(|n| n.names.get(usize::from(id.0)).copied())
        .unwrap_or("")
}
