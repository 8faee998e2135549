//! [`FailoverBuilder`]: the targets, in order, and the policy.

use std::fmt;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU32, AtomicU64};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Buf;
use http::{Request, Response};
use http_body::Body;
use levee_core::classify::{Classify, ProviderClassifier};
use levee_core::config_error::ConfigError;
use tokio::time::Instant;
use tower_layer::Layer;
use tower_service::Service;

use super::service::Failover;
use super::shadow::{CopyAnswered, Shadow, ShadowProbes, ShadowSend};
use super::speed::{FieldNames, HedgeState, Hedging, TargetSpeed};
use super::stack::TargetService;
use super::state::{Advance, Common, Entry, FallbackFn, Group, Meta, TargetMeta};
use super::target::{BoxTargetService, Target, TargetName};
use crate::breaker::PeekCache;
use crate::error::BoxError;
use crate::striped::Striped;

/// The default cap on [`NoTargetAvailable::retry_after`](super::NoTargetAvailable::retry_after).
pub const DEFAULT_MAX_RETRY_AFTER: Duration = Duration::from_secs(300);

/// The default window within which availability failures of two targets
/// of one provider and region count as failing together.
pub const DEFAULT_OVERLOAD_WINDOW: Duration = Duration::from_secs(30);

/// The most targets one failover holds.
pub const MAX_TARGETS: usize = 64;

/// A target's provider and region labels.
type Labels = (Option<Arc<str>>, Option<Arc<str>>);

// The entry point lives beside what it returns, so that the service never
// imports what builds it.
impl<B, RB, S, C> Failover<B, RB, S, C> {
    /// A builder: add targets in failover order, the primary first.
    pub fn builder() -> FailoverBuilder<B, RB, S, C> {
        FailoverBuilder::new()
    }
}

/// A target's entry: its stack and rewrite.
type TargetEntry<B, S, C> = Entry<B, TargetService<S, C>>;

/// Builds a [`Failover`]. Add targets in order, the primary first; every
/// target calls the same service type `S` (see [`Target::boxed`] for
/// targets that do not).
pub struct FailoverBuilder<B, RB, S = BoxTargetService<B, RB>, C = ProviderClassifier> {
    targets: Vec<(TargetMeta, TargetEntry<B, S, C>)>,
    labels: Vec<Labels>,
    /// Each target's pool name.
    pools: Vec<Option<Arc<str>>>,
    max_targets: usize,
    max_retry_after: Duration,
    overload_window: Duration,
    fallback_on: Option<FallbackFn>,
    served_by_extension: bool,
    /// Builds the shadow probes' sender from the targets' stacks.
    shadow: Option<ShadowFactory<B, S, C>>,
    hedging: Option<Hedging>,
    _body: PhantomData<fn() -> RB>,
}

/// Makes a failover's shadow-probe sender from its targets' stacks.
type ShadowFactory<B, S, C> = Box<
    dyn FnOnce(&[TargetEntry<B, S, C>], &Arc<Meta>) -> Result<ShadowSend<B>, ConfigError>
        + Send
        + Sync,
>;

impl<B, RB, S, C> FailoverBuilder<B, RB, S, C> {
    fn new() -> Self {
        FailoverBuilder {
            targets: Vec::new(),
            labels: Vec::new(),
            pools: Vec::new(),
            max_targets: usize::MAX,
            max_retry_after: DEFAULT_MAX_RETRY_AFTER,
            overload_window: DEFAULT_OVERLOAD_WINDOW,
            fallback_on: None,
            served_by_extension: false,
            shadow: None,
            hedging: None,
            _body: PhantomData,
        }
    }

    /// Sends [shadow probes](ShadowProbes) to targets whose breaker is
    /// open (and, with [`hedging`](Self::hedging), to those demoted for
    /// being slow): copies of requests that other targets serve, whose
    /// answers only close a breaker or make a slow target's trial due, so
    /// that a target is found back within a probe interval or two of
    /// recovering at no caller's cost. Copies are sent from the tokio
    /// runtime the request is handled on (none outside one), so the
    /// targets' stacks must be `Send + 'static`.
    pub fn shadow_probes(mut self, probes: ShadowProbes<B>) -> Self
    where
        B: Clone + Send + 'static,
        S: Service<Request<B>, Response = Response<RB>> + Clone + Send + 'static,
        S::Future: Send,
        S::Error: Into<BoxError>,
        RB: Body + Send + 'static,
        RB::Data: Buf + Send + 'static,
        RB::Error: Into<BoxError> + Send,
        C: Classify + Clone + Send + Sync + 'static,
    {
        self.shadow = Some(Box::new(move |entries, meta: &Arc<Meta>| {
            let targets = entries.iter().zip(&meta.targets).map(|(entry, target)| {
                let (service, rewrite) = (entry.service.clone(), entry.rewrite.clone());
                (service, target.breaker.clone(), rewrite, target.name)
            });
            // Copies to slow targets go only where targets are timed.
            let answered = meta.hedging.is_some().then(|| {
                let meta = Arc::downgrade(meta);
                Arc::new(move |index, latency| {
                    if let Some(meta) = meta.upgrade() {
                        meta.copy_answered(index, latency);
                    }
                }) as CopyAnswered
            });
            Shadow::sender(probes, targets, answered)
        }));
        self
    }

    /// Hedges first calls that are late for their target and tries slow
    /// targets after the others ([`Hedging`]; default: neither). Costs a
    /// clock read and a timer for each call not answered at its first
    /// poll, and one histogram record per success.
    pub fn hedging(mut self, hedging: Hedging) -> Self {
        self.hedging = Some(hedging);
        self
    }

    /// Adds a target after those already added. Its stack is built here:
    /// bulkhead (if any) → its breaker layer → its service.
    pub fn target(mut self, target: Target<S, B, C>) -> Self
    where
        S: Service<Request<B>, Response = Response<RB>> + Clone,
        S::Error: Into<BoxError>,
        C: Classify + Clone,
        RB: Body,
        RB::Data: Buf + 'static,
        RB::Error: Into<BoxError>,
    {
        let Target {
            name,
            service,
            breaker,
            bulkhead,
            rewrite,
            provider,
            region,
            pool,
        } = target;
        let handle = breaker.handle();
        let service = TargetService::new(breaker.layer(service), bulkhead.as_ref());
        self.labels.push((provider.clone(), region.clone()));
        self.pools.push(pool);
        let interned = TargetName::intern(&name);
        let meta = TargetMeta {
            name: interned.name,
            name_id: interned.id,
            provider,
            region,
            group: None,
            pool: None,
            left_permille: AtomicU32::new(1000),
            breaker: handle,
            peek: PeekCache::default(),
            bulkhead,
            served: Striped::default(),
            failed_over: AtomicU64::new(0),
            last_availability: AtomicU64::new(0),
            last_failure: Mutex::new(None),
            speed: TargetSpeed::default(),
        };
        self.targets.push((meta, Entry { service, rewrite }));
        self
    }

    /// The most targets one request is sent to (default: all of them).
    /// Targets skipped because their state refuses the request cost
    /// nothing and do not count.
    pub fn max_targets_per_request(mut self, max: usize) -> Self {
        self.max_targets = max;
        self
    }

    /// The cap on [`NoTargetAvailable::retry_after`](super::NoTargetAvailable::retry_after)
    /// (default 300 s): a caller is never told to come back later than this.
    pub fn max_retry_after(mut self, cap: Duration) -> Self {
        self.max_retry_after = cap;
        self
    }

    /// How close together availability failures of two targets with the same
    /// provider and region must be for the group to count as overloaded
    /// (default 30 s). An overloaded group's targets are tried after every
    /// other target until the window passes or one of them serves.
    pub fn overload_window(mut self, window: Duration) -> Self {
        self.overload_window = window;
        self
    }

    /// Decides, per outcome, whether to try the next target, replacing [`Advance::default_policy`]. A success is
    /// always returned. When the hook says no, the target's answer (or
    /// refusal) is returned as it is.
    ///
    /// ```
    /// # use tower_levee::failover::{Advance, Failover};
    /// # use levee_core::classify::Verdict;
    /// // Never spill throttled traffic onto the (pricier) fallback provider.
    /// let builder = Failover::<String, String>::builder()
    ///     .fallback_on(|a: &Advance<'_>| a.verdict != Verdict::Throttled && a.default_policy());
    /// # let _ = builder;
    /// ```
    pub fn fallback_on(mut self, f: impl Fn(&Advance<'_>) -> bool + Send + Sync + 'static) -> Self {
        self.fallback_on = Some(Arc::new(f));
        self
    }

    /// Also inserts [`ServedBy`](super::ServedBy) into each response's
    /// extensions (default: no), for a caller that maps the response's body
    /// before reading it (into axum's `Body`, say), where the body's copy
    /// is gone. Costs three allocations per response: the extensions map,
    /// its table and the boxed value.
    pub fn served_by_extension(mut self, on: bool) -> Self {
        self.served_by_extension = on;
        self
    }

    /// Validates and builds the failover.
    pub fn build(mut self) -> Result<Failover<B, RB, S, C>, ConfigError> {
        let n = self.targets.len();
        if n == 0 {
            return Err(ConfigError::new(
                "failover.targets",
                "needs at least one target",
            ));
        }
        if n > MAX_TARGETS {
            return Err(ConfigError::new(
                "failover.targets",
                format!("at most {MAX_TARGETS} targets, got {n}"),
            ));
        }
        if let Some((i, (t, _))) = self
            .targets
            .iter()
            .enumerate()
            .find(|(i, (t, _))| self.targets[..*i].iter().any(|(o, _)| o.name == t.name))
        {
            return Err(ConfigError::new(
                "failover.targets",
                format!("target {i} repeats the name `{}`", t.name),
            ));
        }
        if self.max_targets == 0 {
            return Err(ConfigError::new(
                "failover.max_targets_per_request",
                "must be at least 1, got 0",
            ));
        }
        // Targets with a provider label form provider × region groups.
        let mut group_keys: Vec<&Labels> = Vec::new();
        let mut groups_of = Vec::with_capacity(n);
        for label in &self.labels {
            let group = label.0.as_ref().map(|_| {
                group_keys
                    .iter()
                    .position(|k| *k == label)
                    .unwrap_or_else(|| {
                        group_keys.push(label);
                        group_keys.len() - 1
                    })
            });
            groups_of.push(group);
        }
        let groups = (0..group_keys.len()).map(|_| Group::default()).collect();
        // Targets naming one pool share it, wherever they were added.
        let mut pool_names: Vec<&Arc<str>> = Vec::new();
        let mut pools: Vec<Vec<usize>> = Vec::new();
        let mut pool_of = Vec::with_capacity(n);
        for (i, name) in self.pools.iter().enumerate() {
            let pool = name.as_ref().map(|name| {
                let p = pool_names
                    .iter()
                    .position(|k| *k == name)
                    .unwrap_or_else(|| {
                        pool_names.push(name);
                        pools.push(Vec::new());
                        pools.len() - 1
                    });
                pools[p].push(i);
                p
            });
            pool_of.push(pool);
        }
        if let Some(hedging) = &self.hedging {
            hedging.validate(&FieldNames::BUILDER)?;
        }
        let shadow = self.shadow.take();
        let (metas, entries): (Vec<_>, Vec<_>) = self
            .targets
            .into_iter()
            .zip(groups_of)
            .zip(pool_of)
            .map(|(((mut meta, entry), group), pool)| {
                meta.group = group;
                meta.pool = pool;
                (meta, entry)
            })
            .unzip();
        let meta = Meta {
            targets: metas.into(),
            groups,
            max_targets: self.max_targets,
            max_retry_after: self.max_retry_after,
            overload_window: self.overload_window,
            fallback_on: self.fallback_on,
            origin: Instant::now(),
            no_target: AtomicU64::new(0),
            pools: pools.into_iter().map(Vec::into_boxed_slice).collect(),
            clones: AtomicU64::new(0),
            served_by_extension: self.served_by_extension,
            hedging: self.hedging.map(HedgeState::new),
            demoted_targets: AtomicU32::new(0),
        };
        let meta = Arc::new(meta);
        // Checked before any breaker is told to admit copies.
        let shadow = shadow.map(|make| make(&entries, &meta)).transpose()?;
        if shadow.is_some() {
            for target in &meta.targets {
                target.breaker.accept_shadow_probes();
            }
        }
        Ok(Failover::from_common(Arc::new(Common::new(
            meta,
            entries.into(),
            shadow,
        ))))
    }
}

impl<B, RB, S, C> fmt::Debug for FailoverBuilder<B, RB, S, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<_> = self.targets.iter().map(|(t, _)| t.name).collect();
        f.debug_struct("FailoverBuilder")
            .field("targets", &names)
            .field("max_targets", &self.max_targets)
            .field("max_retry_after", &self.max_retry_after)
            .field("overload_window", &self.overload_window)
            .finish_non_exhaustive()
    }
}
