//! The breaker layer and its builder.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use levee_core::breaker::BreakerConfig;
use levee_core::classify::{Classification, ProviderClassifier};
use levee_core::config_error::ConfigError;
use levee_core::gate::GateConfig;
use levee_core::pace::PaceConfig;
use levee_core::park::ParkConfig;
use tower_layer::Layer;

use super::admission::DomainCache;
use super::event::{EventSubscriber, ScopeEvent};
use super::handle::BreakerHandle;
use super::hold::StreamHold;
use super::scope::{RequestHead, ScopeFn, ScopeKeys};
use super::service::Breaker;
use super::settings::{DEFAULT_MAX_KEYS, DEFAULT_PEEK_LIMIT, Settings, SoftFailureFn};
use super::shared::Shared;

/// Applies [`Breaker`] to a service: breaker, throttle gate and park table,
/// each per its own scope. Clones share state.
#[derive(Clone)]
pub struct BreakerLayer<C = ProviderClassifier> {
    pub(crate) shared: Arc<Shared>,
    classifier: C,
}

impl BreakerLayer {
    /// A layer with the default configuration and the provider classifier.
    pub fn new() -> Self {
        Self::builder()
            .build()
            .expect("the default configuration is valid")
    }

    /// A builder to configure the layer.
    pub fn builder() -> BreakerLayerBuilder {
        BreakerLayerBuilder::default()
    }
}

impl Default for BreakerLayer {
    fn default() -> Self {
        Self::new()
    }
}

impl<C> BreakerLayer<C> {
    /// A handle on the layer's state: health, manual control, counters.
    pub fn handle(&self) -> BreakerHandle {
        BreakerHandle::new(self.shared.clone())
    }
}

impl<S, C: Clone> Layer<S> for BreakerLayer<C> {
    type Service = Breaker<S, C>;

    fn layer(&self, inner: S) -> Self::Service {
        Breaker {
            inner,
            shared: self.shared.clone(),
            classifier: self.classifier.clone(),
            cache: DomainCache::default(),
        }
    }
}

impl<C> fmt::Debug for BreakerLayer<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BreakerLayer")
            .field("settings", &self.shared.settings)
            .finish()
    }
}

// === Builder ===

/// Builds a [`BreakerLayer`]. Every setting has a default; `build` validates.
pub struct BreakerLayerBuilder<C = ProviderClassifier> {
    breaker: BreakerConfig,
    gate: GateConfig,
    park: ParkConfig,
    pace: PaceConfig,
    classifier: C,
    peek_limit: usize,
    max_keys: usize,
    isolate_by_model: bool,
    slow_call_by_model: Vec<(Box<str>, Duration)>,
    slow_stream: Option<Duration>,
    first_content_timeout: Option<Duration>,
    first_content_by_model: Vec<(Box<str>, Duration)>,
    stall_timeout: Option<Duration>,
    stream_hold: StreamHold,
    latency_estimate: bool,
    empty_body_is_failure: bool,
    soft_failure: Option<SoftFailureFn>,
    scope_fn: Option<ScopeFn>,
    subscribers: Vec<EventSubscriber>,
    seed: Option<u64>,
}

impl Default for BreakerLayerBuilder {
    fn default() -> Self {
        BreakerLayerBuilder {
            breaker: BreakerConfig::default(),
            gate: GateConfig::default(),
            park: ParkConfig::default(),
            pace: PaceConfig::default(),
            classifier: ProviderClassifier::default(),
            peek_limit: DEFAULT_PEEK_LIMIT,
            max_keys: DEFAULT_MAX_KEYS,
            isolate_by_model: false,
            slow_call_by_model: Vec::new(),
            slow_stream: None,
            first_content_timeout: None,
            first_content_by_model: Vec::new(),
            stall_timeout: None,
            stream_hold: StreamHold::default(),
            latency_estimate: false,
            empty_body_is_failure: true,
            soft_failure: None,
            scope_fn: None,
            subscribers: Vec::new(),
            seed: None,
        }
    }
}

impl<C> BreakerLayerBuilder<C> {
    /// The breaker's configuration (tripping, cool-off, probes, slow calls).
    pub fn breaker(mut self, config: BreakerConfig) -> Self {
        self.breaker = config;
        self
    }

    /// The throttle gate's configuration.
    pub fn gate(mut self, config: GateConfig) -> Self {
        self.gate = config;
        self
    }

    /// The park table's configuration.
    pub fn park(mut self, config: ParkConfig) -> Self {
        self.park = config;
        self
    }

    /// Replaces the classifier (e.g. a wrapper that knows a private gateway).
    /// It is cloned into every response future: keep it cheap to clone.
    pub fn classifier<C2>(self, classifier: C2) -> BreakerLayerBuilder<C2> {
        BreakerLayerBuilder {
            breaker: self.breaker,
            gate: self.gate,
            park: self.park,
            pace: self.pace,
            classifier,
            peek_limit: self.peek_limit,
            max_keys: self.max_keys,
            isolate_by_model: self.isolate_by_model,
            slow_call_by_model: self.slow_call_by_model,
            slow_stream: self.slow_stream,
            first_content_timeout: self.first_content_timeout,
            first_content_by_model: self.first_content_by_model,
            stall_timeout: self.stall_timeout,
            stream_hold: self.stream_hold,
            latency_estimate: self.latency_estimate,
            empty_body_is_failure: self.empty_body_is_failure,
            soft_failure: self.soft_failure,
            scope_fn: self.scope_fn,
            subscribers: self.subscribers,
            seed: self.seed,
        }
    }

    /// How many bytes of a non-2xx body to read before classifying (default 16 KiB).
    pub fn peek_limit(mut self, bytes: usize) -> Self {
        self.peek_limit = bytes;
        self
    }

    /// How many scopes per mechanism to track before evicting idle ones
    /// (default 10,000). Open, half-open, gated and parked scopes are never evicted.
    pub fn max_keys(mut self, keys: usize) -> Self {
        self.max_keys = keys;
        self
    }

    /// Gives each model its own breaker within a failure domain. Off by
    /// default: a provider-wide outage is then detected once, not once per
    /// model.
    pub fn isolate_by_model(mut self, isolate: bool) -> Self {
        self.isolate_by_model = isolate;
        self
    }

    /// A slow-call threshold for one model, overriding the breaker's
    /// `slow_call`. Pick about 3× the model's normal high-percentile latency:
    /// a reasoning model and a small fast model have different baselines.
    /// The layer applies slow-call thresholds to the millisecond (rounded up).
    pub fn slow_call_for_model(mut self, model: impl Into<Box<str>>, threshold: Duration) -> Self {
        let model = model.into();
        self.slow_call_by_model.retain(|(m, _)| *m != model);
        self.slow_call_by_model.push((model, threshold));
        self
    }

    /// A threshold on a streamed response's total duration: a stream that
    /// completes later than this counts as an availability failure. The
    /// breaker's `slow_call` applies to the time to first byte.
    pub fn slow_stream(mut self, threshold: Duration) -> Self {
        self.slow_stream = Some(threshold);
        self
    }

    /// The longest a streamed response may take, from the call's start, to
    /// its first output (a token, a tool call, a reasoning delta; see
    /// [`StreamScanner::has_content`]): the time to first token. Past it the
    /// held stream (see [`stream_hold`](Self::stream_hold)) is a failed
    /// answer that a retry or a failover above replaces unseen; with the
    /// hold off, the stream ends with a [`StreamTimeout`]. Either way the
    /// breaker counts an availability failure (`stream:first_content_timeout`).
    /// Off by default. Pick it above the model's normal p99 time to first
    /// token (the [`latency_estimate`](Self::latency_estimate) shows it): a
    /// reasoning model needs far more than a small fast one, see
    /// [`first_content_timeout_for_model`](Self::first_content_timeout_for_model).
    ///
    /// [`StreamScanner::has_content`]: levee_core::classify::StreamScanner::has_content
    /// [`StreamTimeout`]: crate::error::StreamTimeout
    pub fn first_content_timeout(mut self, timeout: Duration) -> Self {
        self.first_content_timeout = Some(timeout);
        self
    }

    /// A first-content timeout for one model, overriding
    /// [`first_content_timeout`](Self::first_content_timeout).
    pub fn first_content_timeout_for_model(
        mut self,
        model: impl Into<Box<str>>,
        timeout: Duration,
    ) -> Self {
        let model = model.into();
        self.first_content_by_model.retain(|(m, _)| *m != model);
        self.first_content_by_model.push((model, timeout));
        self
    }

    /// The longest gap between two frames of a streamed response, from its
    /// head on. Past it, before the first output, the held stream is a
    /// failed answer; after, the stream ends with a
    /// [`StreamTimeout`](crate::error::StreamTimeout). Either way the
    /// breaker counts an availability failure (`stream:stall_timeout`). Off by default. Providers send keep-alives while a
    /// model thinks (Anthropic's `ping` events), so a stall is a dead
    /// connection, not a slow model: tens of seconds is generous.
    pub fn stall_timeout(mut self, timeout: Duration) -> Self {
        self.stall_timeout = Some(timeout);
        self
    }

    /// How a streamed answer is held back until its first output, so that
    /// a stream failing before it is a failed answer that a retry or a
    /// failover above replaces unseen (on by default, up to 64 KiB and 64
    /// events; see [`StreamHold`]).
    pub fn stream_hold(mut self, hold: StreamHold) -> Self {
        self.stream_hold = hold;
        self
    }

    /// Pacing from the providers' rate-limit headers (on by default, a
    /// reserve of 2% of each limit): a quota scope whose limit is at its
    /// reserve is gated until enough of it has refilled, before the provider
    /// would answer `429` (reason `paced`; see [`levee_core::pace`]); and
    /// its requests are spread at the rate its provider reports, a second
    /// of it at once ([`Spacing`](levee_core::pace::Spacing)), since
    /// providers may count a minute's limit per second. Set
    /// `enabled: false` to react to 429s only, `spread: false` to send
    /// bursts as far as the reported count allows.
    ///
    /// Cost: every response's headers are scanned for the rate-limit
    /// families (no allocation); a scope takes its lock only when a limit
    /// has used half of itself (its allowance is then recorded for
    /// [`BreakerHandle::states`](super::BreakerHandle::states)); a call to
    /// a provider that reports limits takes its place in the rate with one
    /// compare-and-swap.
    pub fn pace(mut self, config: PaceConfig) -> Self {
        self.pace = config;
        self
    }

    /// Estimates each failure domain's time to first byte (p50, p90, p99 of
    /// the last few thousand responses), and its streams' time to first
    /// output (the time to first token), shown by
    /// [`BreakerHandle::states`](super::BreakerHandle::states) and the
    /// failover's health snapshot, so that `slow_call` and
    /// [`first_content_timeout`](Self::first_content_timeout) can be set
    /// from data: about 3× the p99. Off by default: it reads the clock when
    /// a call is admitted and makes one shared atomic increment per
    /// response (two for a stream).
    pub fn latency_estimate(mut self, on: bool) -> Self {
        self.latency_estimate = on;
        self
    }

    /// Whether a `2xx` answer to a `POST` (a generation request) whose body
    /// is empty counts as an availability failure, `response:empty_body`
    /// (default on): a model that answers nothing did not serve the call.
    /// The layer knows a body is empty without reading it when its exact
    /// size is 0 (`content-length: 0`, an empty body type), and when a
    /// peeked body ends with no byte; other bodies are not read for it.
    /// `204 No Content`, `205 Reset Content` and answers to any other
    /// method (a `GET`, a `HEAD`) may be empty and are never failures.
    pub fn empty_body_is_failure(mut self, on: bool) -> Self {
        self.empty_body_is_failure = on;
        self
    }

    /// A hook that can turn a 2xx response into a failure (a body with no
    /// usable content, say): it sees the head and up to `peek_limit` bytes of
    /// the body (which the caller still receives whole). With a hook set,
    /// every non-streamed 2xx body is peeked: a cost on the success path.
    pub fn detect_soft_failure(
        mut self,
        f: impl Fn(&http::response::Parts, &[u8]) -> Option<Classification> + Send + Sync + 'static,
    ) -> Self {
        self.soft_failure = Some(Arc::new(f));
        self
    }

    /// Names each request's scopes with a function instead of the default
    /// ([`default_scope`](super::default_scope)).
    pub fn scope_fn(
        mut self,
        f: impl for<'a> Fn(&RequestHead<'a>) -> ScopeKeys<'a> + Send + Sync + 'static,
    ) -> Self {
        self.scope_fn = Some(Arc::new(f));
        self
    }

    /// Calls `f` on every transition of every mechanism.
    pub fn on_event(mut self, f: impl Fn(&ScopeEvent) + Send + Sync + 'static) -> Self {
        self.subscribers.push(EventSubscriber::new(f));
        self
    }

    /// Seeds the jitter of cool-offs and default gate waits (for tests and drills).
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Validates the settings and builds the layer. A configuration built
    /// by hand (its fields are public) is checked here as its own builder
    /// and the serde path check it: the error names the field.
    pub fn build(self) -> Result<BreakerLayer<C>, ConfigError> {
        self.breaker.validate()?;
        self.gate.validate()?;
        self.park.validate()?;
        self.pace.validate()?;
        if self.peek_limit == 0 {
            return Err(ConfigError::new(
                "breaker_layer.peek_limit",
                "must be at least 1 byte, got 0",
            ));
        }
        if self.max_keys == 0 {
            return Err(ConfigError::new(
                "breaker_layer.max_keys",
                "must be at least 1, got 0",
            ));
        }
        if self.slow_stream.is_some_and(|d| d.is_zero()) {
            return Err(ConfigError::new(
                "breaker_layer.slow_stream",
                "must be above zero",
            ));
        }
        if let Some((m, _)) = self.slow_call_by_model.iter().find(|(_, d)| d.is_zero()) {
            return Err(ConfigError::new(
                "breaker_layer.slow_call_for_model",
                format!("threshold for `{m}` must be above zero"),
            ));
        }
        if self.first_content_timeout.is_some_and(|d| d.is_zero()) {
            return Err(ConfigError::new(
                "breaker_layer.first_content_timeout",
                "must be above zero",
            ));
        }
        if let Some((m, _)) = self
            .first_content_by_model
            .iter()
            .find(|(_, d)| d.is_zero())
        {
            return Err(ConfigError::new(
                "breaker_layer.first_content_timeout_for_model",
                format!("timeout for `{m}` must be above zero"),
            ));
        }
        self.stream_hold.validate()?;
        if self.stall_timeout.is_some_and(|d| d.is_zero()) {
            return Err(ConfigError::new(
                "breaker_layer.stall_timeout",
                "must be above zero",
            ));
        }
        let mut settings = Settings {
            breaker: self.breaker,
            gate: self.gate,
            park: self.park,
            pace: self.pace,
            pace_check: self.pace.check(),
            peek_limit: u32::try_from(self.peek_limit).map_err(|_| {
                ConfigError::new(
                    "breaker_layer.peek_limit",
                    format!(
                        "must be at most {} bytes, got {}",
                        u32::MAX,
                        self.peek_limit
                    ),
                )
            })?,
            max_keys: self.max_keys,
            isolate_by_model: self.isolate_by_model,
            times_calls: false, // derived below
            slow_call_by_model: self.slow_call_by_model,
            slow_stream: self.slow_stream,
            first_content_timeout: self.first_content_timeout,
            first_content_by_model: self.first_content_by_model,
            stall_timeout: self.stall_timeout,
            hold: self.stream_hold.limits(),
            latency_estimate: self.latency_estimate,
            empty_body_is_failure: self.empty_body_is_failure,
            soft_failure: self.soft_failure.map(Arc::new),
            scope_fn: self.scope_fn,
            subscribers: self.subscribers,
            seed: self.seed,
        };
        settings.times_calls = settings.times_any_call();
        Ok(BreakerLayer {
            shared: Shared::new(settings),
            classifier: self.classifier,
        })
    }
}

impl<C> fmt::Debug for BreakerLayerBuilder<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BreakerLayerBuilder")
            .field("breaker", &self.breaker)
            .field("peek_limit", &self.peek_limit)
            .field("max_keys", &self.max_keys)
            .finish_non_exhaustive()
    }
}
