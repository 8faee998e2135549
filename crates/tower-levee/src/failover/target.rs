//! A failover target (an account, deployment, region or provider) and the
//! [`ServedBy`] record of which target answered.

use std::collections::HashMap;
use std::fmt;
use std::num::NonZeroU16;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use http::{Request, Response};
use http_body::Body;
use levee_core::classify::ProviderClassifier;
use tower::ServiceExt;
use tower::util::BoxCloneSyncService;
use tower_service::Service;

use crate::breaker::{BreakerLayer, ResponseBody, ServedTag};
use crate::bulkhead::BulkheadLayer;
use crate::error::BoxError;

/// A target's service boxed ([`Target::boxed`]): what targets over different
/// service types have in common.
pub type BoxTargetService<B, RB> = BoxCloneSyncService<Request<B>, Response<RB>, BoxError>;

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

    /// The target with its service boxed, so that it can join targets over
    /// other service types: every target of a [`Failover`](super::Failover)
    /// calls one service type. Costs one allocation per call (the boxed
    /// future); targets of one type need no boxing.
    ///
    /// The targets' breakers classify with one classifier type too: to mix
    /// classifiers, give each target a breaker layer over an
    /// `Arc<dyn Classify>` (an `Arc` of a classifier is one):
    ///
    /// ```
    /// use std::sync::Arc;
    /// use levee_core::classify::{Classify, ProviderClassifier};
    /// use tower_levee::breaker::BreakerLayer;
    ///
    /// let classifier: Arc<dyn Classify> = Arc::new(ProviderClassifier::default());
    /// let layer = BreakerLayer::builder().classifier(classifier).build().unwrap();
    /// # let _ = layer;
    /// ```
    ///
    /// ```
    /// use std::convert::Infallible;
    /// use http::{Request, Response};
    /// use tower_levee::failover::{Failover, Target};
    ///
    /// let openai = tower::service_fn(|_req: Request<String>| async {
    ///     Ok::<_, Infallible>(Response::new(String::from("openai")))
    /// });
    /// let anthropic = tower::service_fn(|_req: Request<String>| async {
    ///     Ok::<_, std::io::Error>(Response::new(String::from("anthropic")))
    /// });
    /// let failover = Failover::builder()
    ///     .target(Target::new("openai", openai).boxed())
    ///     .target(Target::new("anthropic", anthropic).boxed())
    ///     .build()
    ///     .unwrap();
    /// # let _: Failover<String, String> = failover;
    /// ```
    pub fn boxed<RB>(self) -> Target<BoxTargetService<B, RB>, B, C>
    where
        S: Service<Request<B>, Response = Response<RB>> + Clone + Send + Sync + 'static,
        S::Future: Send + 'static,
        S::Error: Into<BoxError>,
        B: 'static,
    {
        Target {
            name: self.name,
            service: BoxCloneSyncService::new(self.service.map_err(Into::into)),
            breaker: self.breaker,
            bulkhead: self.bulkhead,
            rewrite: self.rewrite,
            provider: self.provider,
            region: self.region,
            pool: self.pool,
        }
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
/// body ([`ResponseBody`]), in 4 bytes, because a response
/// extension would cost three allocations per call (the extensions map, its
/// table, the boxed value). A caller that maps the body first can have it
/// inserted as an extension too:
/// [`served_by_extension`](super::FailoverBuilder::served_by_extension).
///
/// `Copy`, and free of reference counts: the name is interned once when the
/// failover is built. A process that names more than 65,534 distinct
/// targets reads the names of the later ones as `"(unnamed)"` (their
/// `index` is still right).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
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
        ServedBy::of_body(response.body())
            .or_else(|| response.extensions().get::<ServedBy>().copied())
    }

    /// Which target answered, from the response's body alone: for a body a
    /// layer above has wrapped, reached through its `get_ref` (as
    /// [`ClientLimitBody::get_ref`](crate::client_limit::ClientLimitBody::get_ref)).
    pub fn of_body<RB: Body>(body: &ResponseBody<RB>) -> Option<ServedBy> {
        body.served_by().map(ServedBy::from)
    }

    /// The body's record of target `index`, whose name is numbered
    /// `target` ([`TargetName`]), answering at `attempt`.
    pub(crate) fn tag(target: NonZeroU16, index: usize, attempt: u32) -> ServedTag {
        ServedTag {
            target,
            index: u8::try_from(index).unwrap_or(u8::MAX),
            attempt: u8::try_from(attempt).unwrap_or(u8::MAX),
        }
    }
}

impl From<ServedTag> for ServedBy {
    fn from(tag: ServedTag) -> Self {
        ServedBy {
            target: TargetName::of(tag.target),
            index: usize::from(tag.index),
            attempt: u32::from(tag.attempt),
            fallback: tag.index != 0,
        }
    }
}

/// A target's name, interned: leaked once per process, and numbered, so
/// that a response's body can say which target answered in two bytes.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TargetName {
    pub(crate) name: &'static str,
    pub(crate) id: NonZeroU16,
}

/// Target names, numbered from 1; the last number is shared by every name
/// past the table's capacity. Numbering takes a lock (once per target, when
/// a failover is built); reading a name by its number takes none, so a
/// caller that reads `ServedBy` on every response shares no write with
/// other threads.
struct Names {
    ids: Mutex<HashMap<&'static str, NonZeroU16>>,
    /// Names by number, in chunks of [`CHUNK`] made when first needed.
    by_id: Box<[OnceLock<Chunk>]>,
}

/// [`CHUNK`] names, each set once.
type Chunk = Box<[OnceLock<&'static str>]>;

/// Names per chunk of [`Names::by_id`] (and chunks: 256 × 256 numbers).
const CHUNK: usize = 256;

/// What every target interned after the table is full is called.
const UNNAMED: &str = "(unnamed)";

/// [`CHUNK`] slots, each set once.
fn slots<T>() -> Box<[OnceLock<T>]> {
    (0..CHUNK).map(|_| OnceLock::new()).collect()
}

impl Default for Names {
    fn default() -> Self {
        Names {
            ids: Mutex::default(),
            by_id: slots(),
        }
    }
}

impl Names {
    fn intern(&self, name: &str) -> TargetName {
        let mut ids = self.ids.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((&name, &id)) = ids.get_key_value(name) {
            return TargetName { name, id };
        }
        let name: &'static str = Box::leak(name.into());
        // Numbers 1..=65,534 name one target each; 65,535 every later one.
        let id = u16::try_from(ids.len() + 1)
            .ok()
            .and_then(NonZeroU16::new)
            .filter(|id| *id < NonZeroU16::MAX)
            .unwrap_or(NonZeroU16::MAX);
        if id < NonZeroU16::MAX {
            let at = usize::from(id.get()) - 1;
            let chunk = self.by_id[at / CHUNK].get_or_init(slots);
            let _ = chunk[at % CHUNK].set(name);
        }
        ids.insert(name, id);
        TargetName { name, id }
    }

    fn name(&self, id: NonZeroU16) -> &'static str {
        let at = usize::from(id.get()) - 1;
        self.by_id[at / CHUNK]
            .get()
            .and_then(|chunk| chunk[at % CHUNK].get())
            .copied()
            .unwrap_or(UNNAMED)
    }
}

/// This process's target names.
fn names() -> &'static Names {
    static NAMES: OnceLock<Names> = OnceLock::new();
    NAMES.get_or_init(Names::default)
}

impl TargetName {
    /// Interns `name` (once per process).
    pub(crate) fn intern(name: &str) -> TargetName {
        names().intern(name)
    }

    /// The name numbered `id`.
    pub(crate) fn of(id: NonZeroU16) -> &'static str {
        names().name(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_interned_name_keeps_its_number_and_reads_back_by_it() {
        let a = TargetName::intern("served-by-test-a");
        let b = TargetName::intern("served-by-test-b");
        assert_ne!(a.id, b.id);
        assert_eq!(TargetName::intern("served-by-test-a").id, a.id);
        assert_eq!(TargetName::of(a.id), "served-by-test-a");
        assert_eq!(TargetName::of(b.id), "served-by-test-b");
    }

    #[test]
    fn names_past_the_tables_capacity_share_the_last_number_and_read_as_unnamed() {
        let names = Names::default();
        let ids: Vec<_> = (0..65_536).map(|i| names.intern(&i.to_string())).collect();
        assert_eq!(ids[0].id.get(), 1);
        assert_eq!(ids[65_533].id.get(), 65_534);
        assert_eq!(names.name(ids[65_533].id), "65533");
        for late in &ids[65_534..] {
            assert_eq!(late.id, NonZeroU16::MAX);
            assert_eq!(names.name(late.id), UNNAMED);
        }
        // The name itself is still kept, for what reads it directly.
        assert_eq!(ids[65_535].name, "65535");
        assert_eq!(names.intern("65535").id, NonZeroU16::MAX);
    }
}
