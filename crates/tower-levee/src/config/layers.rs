//! The layer configs: breaker layer settings, failover, retry, bulkhead.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use levee_core::budget::BudgetConfig;
use levee_core::config::duration;
use levee_core::config_error::ConfigError;

use super::validated_config;
use crate::breaker::{BreakerLayerBuilder, DEFAULT_MAX_KEYS, DEFAULT_PEEK_LIMIT, StreamHold};
use crate::bulkhead::BulkheadLayer;
use crate::failover::{
    DEFAULT_MAX_RETRY_AFTER, DEFAULT_OVERLOAD_WINDOW, DEFAULT_SHADOW_INTERVAL,
    DEFAULT_SHADOW_SHARE, FailoverBuilder, FieldNames, Hedging, ShadowProbes, cap_output_tokens,
    share_credit,
};
use crate::retry::{Policy, RetryBudget, RetryBudgetLayer, RetryBudgetLayerBuilder};

/// `bulkhead.max_concurrent` when the file names none. An LLM call lasts
/// seconds, so a limit sized for ordinary RPCs refuses real traffic: 64 in
/// flight is 6 requests a second of 10-s calls. 1,024 keeps the bulkhead
/// for what it is for, a dependency that hangs, while what it holds stays
/// a few megabytes of requests.
pub const DEFAULT_MAX_CONCURRENT: usize = 1024;

// === BreakerLayerConfig ===

validated_config! {
    section = "breaker_layer";
    /// The breaker layer's own settings (its breaker, gate and park
    /// configurations are siblings in [`LeveeConfig`](super::LeveeConfig)).
    #[derive(Clone, Debug, PartialEq)]
    pub struct BreakerLayerConfig {
        /// Bytes of a non-2xx body read to classify it (16 KiB).
        pub peek_limit: usize,
        /// Scopes tracked per mechanism before idle ones are evicted (10,000).
        pub max_keys: usize,
        /// A breaker per model within a failure domain (off).
        pub isolate_by_model: bool,
        /// A stream whose total duration exceeds this is a failure (none).
        #[serde(default, with = "duration::option", skip_serializing_if = "Option::is_none")]
        pub slow_stream: Option<Duration>,
        /// Slow-call thresholds per model, overriding `breaker.slow_call`.
        #[serde(with = "duration_map")]
        pub slow_call_by_model: BTreeMap<String, Duration>,
        /// A stream's longest time, from the call's start, to its first
        /// output (none).
        #[serde(default, with = "duration::option", skip_serializing_if = "Option::is_none")]
        pub first_content_timeout: Option<Duration>,
        /// First-content timeouts per model, overriding `first_content_timeout`.
        #[serde(with = "duration_map")]
        pub first_content_timeout_by_model: BTreeMap<String, Duration>,
        /// A stream's longest gap between two frames (none).
        #[serde(default, with = "duration::option", skip_serializing_if = "Option::is_none")]
        pub stall_timeout: Option<Duration>,
        /// Hold streams back until their first output (on).
        pub stream_hold: bool,
        /// The most bytes held before a stream is handed on as it is (65536).
        pub stream_hold_max_bytes: usize,
        /// The most events held before a stream is handed on as it is (64).
        pub stream_hold_max_events: u32,
        /// Estimate each failure domain's time to first byte (off).
        pub latency_estimate: bool,
        /// An empty 2xx answer to a `POST` is an availability failure (on).
        pub empty_body_is_failure: bool,
    }
}

impl Default for BreakerLayerConfig {
    fn default() -> Self {
        BreakerLayerConfig {
            peek_limit: DEFAULT_PEEK_LIMIT,
            max_keys: DEFAULT_MAX_KEYS,
            isolate_by_model: false,
            slow_stream: None,
            slow_call_by_model: BTreeMap::new(),
            first_content_timeout: None,
            first_content_timeout_by_model: BTreeMap::new(),
            stall_timeout: None,
            stream_hold: StreamHold::default().enabled,
            stream_hold_max_bytes: StreamHold::DEFAULT_MAX_BYTES,
            stream_hold_max_events: StreamHold::DEFAULT_MAX_EVENTS,
            latency_estimate: false,
            empty_body_is_failure: true,
        }
    }
}

impl BreakerLayerConfig {
    /// Checks every field.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.apply(crate::BreakerLayer::builder()).map(drop)
    }

    /// Applies these settings to `builder`, then checks them as
    /// [`BreakerLayerBuilder::build`] will.
    pub fn apply<C>(
        &self,
        mut builder: BreakerLayerBuilder<C>,
    ) -> Result<BreakerLayerBuilder<C>, ConfigError> {
        if self.peek_limit == 0 || u32::try_from(self.peek_limit).is_err() {
            return Err(ConfigError::new(
                "breaker_layer.peek_limit",
                format!(
                    "must be between 1 and {} bytes, got {}",
                    u32::MAX,
                    self.peek_limit
                ),
            ));
        }
        if self.max_keys == 0 {
            return Err(ConfigError::new(
                "breaker_layer.max_keys",
                "must be at least 1, got 0",
            ));
        }
        builder = builder
            .peek_limit(self.peek_limit)
            .max_keys(self.max_keys)
            .isolate_by_model(self.isolate_by_model)
            .latency_estimate(self.latency_estimate)
            .empty_body_is_failure(self.empty_body_is_failure);
        if let Some(d) = self.slow_stream {
            if d.is_zero() {
                return Err(ConfigError::new(
                    "breaker_layer.slow_stream",
                    "must be greater than zero, got 0s",
                ));
            }
            builder = builder.slow_stream(d);
        }
        for (model, d) in &self.slow_call_by_model {
            if d.is_zero() {
                return Err(ConfigError::new(
                    "breaker_layer.slow_call_by_model",
                    format!("threshold for `{model}` must be greater than zero, got 0s"),
                ));
            }
            builder = builder.slow_call_for_model(model.as_str(), *d);
        }
        let positive = |field: &'static str, d: Duration| {
            if d.is_zero() {
                Err(ConfigError::new(field, "must be greater than zero, got 0s"))
            } else {
                Ok(d)
            }
        };
        if let Some(d) = self.first_content_timeout {
            builder =
                builder.first_content_timeout(positive("breaker_layer.first_content_timeout", d)?);
        }
        for (model, d) in &self.first_content_timeout_by_model {
            if d.is_zero() {
                return Err(ConfigError::new(
                    "breaker_layer.first_content_timeout_by_model",
                    format!("timeout for `{model}` must be greater than zero, got 0s"),
                ));
            }
            builder = builder.first_content_timeout_for_model(model.as_str(), *d);
        }
        if let Some(d) = self.stall_timeout {
            builder = builder.stall_timeout(positive("breaker_layer.stall_timeout", d)?);
        }
        let hold = self.hold();
        hold.validate()?;
        Ok(builder.stream_hold(hold))
    }

    /// The stream hold these fields describe.
    pub fn hold(&self) -> StreamHold {
        StreamHold {
            enabled: self.stream_hold,
            max_bytes: self.stream_hold_max_bytes,
            max_events: self.stream_hold_max_events,
        }
    }
}

// === FailoverConfig ===

validated_config! {
    section = "failover";
    /// The failover's settings (its targets are built in code).
    #[derive(Clone, Debug, PartialEq)]
    pub struct FailoverConfig {
        /// The most targets one request is sent to (all).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub max_targets_per_request: Option<usize>,
        /// The cap on `NoTargetAvailable::retry_after` (300 s).
        #[serde(with = "duration")]
        pub max_retry_after: Duration,
        /// How close two availability failures of one provider and region
        /// must be for the group to count as overloaded (30 s).
        #[serde(with = "duration")]
        pub overload_window: Duration,
        /// Whether copies of requests served elsewhere probe targets whose
        /// breaker is open, or that are demoted for being slow (on): see
        /// [`FailoverBuilder::shadow_probes`](crate::failover::FailoverBuilder::shadow_probes),
        /// which a stack built from this config calls ([`Self::shadow_probes_for`]).
        pub shadow_probes: bool,
        /// The least time between two shadow probes of one target (1 s).
        #[serde(with = "duration")]
        pub shadow_probe_interval: Duration,
        /// The most shadow probes of one target, as a share of the
        /// requests it turns away (0.1).
        pub shadow_probe_share: f64,
        /// Whether first calls late for their target are hedged and slow
        /// targets tried after the others (on): see
        /// [`FailoverBuilder::hedging`](crate::failover::FailoverBuilder::hedging).
        pub hedging: bool,
        /// The most hedges, as a share of successes (0.05).
        pub hedge_ratio: f64,
        /// Hedges allowed at once beyond the ratio (20).
        pub hedge_burst: u32,
        /// The least delay before a hedge (50 ms).
        #[serde(with = "duration")]
        pub hedge_floor: Duration,
        /// The most delay before a hedge (30 s).
        #[serde(with = "duration")]
        pub hedge_cap: Duration,
        /// Late first calls in a row that demote a target (3).
        pub demote_after: u32,
        /// How long a slow target is tried last before a trial (1 s).
        #[serde(with = "duration")]
        pub demotion: Duration,
        /// The longest demotion, after late trials (2 s).
        #[serde(with = "duration")]
        pub max_demotion: Duration,
    }
}

/// What a validation error calls each hedging key of [`FailoverConfig`].
const HEDGING_FIELDS: FieldNames = FieldNames {
    ratio: "failover.hedge_ratio",
    quantile: "failover.hedging",
    floor: "failover.hedge_floor",
    cap: "failover.hedge_cap",
    demote_after: "failover.demote_after",
    demotion: "failover.demotion",
    max_demotion: "failover.max_demotion",
};

impl Default for FailoverConfig {
    fn default() -> Self {
        let hedging = Hedging::new();
        FailoverConfig {
            max_targets_per_request: None,
            max_retry_after: DEFAULT_MAX_RETRY_AFTER,
            overload_window: DEFAULT_OVERLOAD_WINDOW,
            shadow_probes: true,
            shadow_probe_interval: DEFAULT_SHADOW_INTERVAL,
            shadow_probe_share: DEFAULT_SHADOW_SHARE,
            hedging: true,
            hedge_ratio: hedging.ratio,
            hedge_burst: hedging.burst,
            hedge_floor: hedging.floor,
            hedge_cap: hedging.cap,
            demote_after: hedging.demote_after,
            demotion: hedging.demotion,
            max_demotion: hedging.max_demotion,
        }
    }
}

impl FailoverConfig {
    /// Checks every field.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.max_targets_per_request == Some(0) {
            return Err(ConfigError::new(
                "failover.max_targets_per_request",
                "must be at least 1, got 0",
            ));
        }
        if self.shadow_probe_interval.is_zero() {
            return Err(ConfigError::new(
                "failover.shadow_probe_interval",
                "must be greater than zero, got 0s",
            ));
        }
        share_credit(self.shadow_probe_share, "failover.shadow_probe_share")?;
        self.hedging_settings().validate(&HEDGING_FIELDS)
    }

    /// The hedging these settings describe (on or off).
    fn hedging_settings(&self) -> Hedging {
        Hedging::new()
            .ratio(self.hedge_ratio)
            .burst(self.hedge_burst)
            .floor(self.hedge_floor)
            .cap(self.hedge_cap)
            .demote_after(self.demote_after)
            .demotion(self.demotion)
            .max_demotion(self.max_demotion)
    }

    /// The shadow probes these settings ask for, if any: one copy per
    /// target per `shadow_probe_interval`, at most `shadow_probe_share` of
    /// the requests it turns away, each drawing on `budget` (the
    /// stack's retry budget), with its output capped at a few tokens
    /// ([`cap_output_tokens`](crate::failover::cap_output_tokens)). Pass
    /// them to [`FailoverBuilder::shadow_probes`](crate::failover::FailoverBuilder::shadow_probes);
    /// [`apply`](Self::apply) cannot, as they need the targets' stacks to
    /// be `Send`.
    pub fn shadow_probes_for<B>(&self, budget: Option<Arc<RetryBudget>>) -> Option<ShadowProbes<B>>
    where
        B: AsRef<[u8]> + From<Bytes> + 'static,
    {
        if !self.shadow_probes {
            return None;
        }
        let probes = ShadowProbes::new()
            .interval(self.shadow_probe_interval)
            .share(self.shadow_probe_share)
            .prepare(cap_output_tokens::<B>);
        Some(match budget {
            Some(budget) => probes.budget(budget),
            None => probes,
        })
    }

    /// Applies these settings to `builder` (its `build` checks them again).
    pub fn apply<B, RB, S, C>(
        &self,
        builder: FailoverBuilder<B, RB, S, C>,
    ) -> Result<FailoverBuilder<B, RB, S, C>, ConfigError> {
        self.validate()?;
        let mut builder = builder
            .max_retry_after(self.max_retry_after)
            .overload_window(self.overload_window);
        if self.hedging {
            builder = builder.hedging(self.hedging_settings());
        }
        Ok(match self.max_targets_per_request {
            Some(n) => builder.max_targets_per_request(n),
            None => builder,
        })
    }
}

// === RetryConfig ===

validated_config! {
    section = "retry";
    /// The retry layer: attempts, backoff, waits, deadline, budget.
    #[derive(Clone, Debug, PartialEq)]
    pub struct RetryConfig {
        /// Attempts per request, the first included (3).
        pub max_attempts: u32,
        /// The first backoff step when the provider gave no hint (500 ms).
        #[serde(with = "duration")]
        pub backoff_base: Duration,
        /// The backoff's cap (8 s).
        #[serde(with = "duration")]
        pub backoff_cap: Duration,
        /// The longest wait slept before a retry (60 s).
        #[serde(with = "duration")]
        pub max_wait: Duration,
        /// The caller's overall deadline, from `call` (none).
        #[serde(default, with = "duration::option", skip_serializing_if = "Option::is_none")]
        pub timeout: Option<Duration>,
        /// Each attempt's own deadline, for the timeout a stack puts
        /// beneath the breaker (none; the layer itself does not read it).
        #[serde(default, with = "duration::option", skip_serializing_if = "Option::is_none")]
        pub attempt_timeout: Option<Duration>,
        /// The retry budget (10 s, 10 per second, 10%).
        pub budget: BudgetConfig,
    }
}

impl Default for RetryConfig {
    fn default() -> Self {
        RetryConfig {
            max_attempts: 3,
            backoff_base: Duration::from_millis(500),
            backoff_cap: Duration::from_secs(8),
            max_wait: Duration::from_secs(60),
            timeout: None,
            attempt_timeout: None,
            budget: BudgetConfig::default(),
        }
    }
}

impl RetryConfig {
    /// The knobs of the retry decision these settings give.
    fn policy(&self) -> Policy {
        Policy {
            max_attempts: self.max_attempts,
            base: self.backoff_base,
            cap: self.backoff_cap,
            max_wait: self.max_wait,
            timeout: self.timeout,
        }
    }

    /// Checks every field, with the same rules as
    /// [`RetryBudgetLayer::builder`].
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.policy().validate()?;
        if self.attempt_timeout.is_some_and(|d| d.is_zero()) {
            return Err(ConfigError::new(
                "retry.attempt_timeout",
                "must be greater than zero, got 0s",
            ));
        }
        BudgetConfig::try_new(
            self.budget.ttl(),
            self.budget.min_per_sec(),
            self.budget.retry_ratio(),
        )
        .map(drop)
    }

    /// A [`RetryBudgetLayer`] with its own budget. To share one budget
    /// between dependencies, start from [`RetryBudgetLayer::builder`] and
    /// [`apply`](RetryConfig::apply) these settings to it.
    pub fn layer(&self) -> Result<RetryBudgetLayer, ConfigError> {
        self.validate()?;
        let budget = Arc::new(RetryBudget::from_config(self.budget));
        self.apply(RetryBudgetLayer::builder(budget))?.build()
    }

    /// Applies everything but the budget to `builder` (its `build` checks
    /// them again).
    pub fn apply<C>(
        &self,
        builder: RetryBudgetLayerBuilder<C>,
    ) -> Result<RetryBudgetLayerBuilder<C>, ConfigError> {
        self.validate()?;
        Ok(builder.with_policy(self.policy()))
    }
}

// === BulkheadConfig ===

validated_config! {
    section = "bulkhead";
    /// A bulkhead compartment.
    #[derive(Clone, Debug, PartialEq)]
    pub struct BulkheadConfig {
        /// The compartment's name, in errors, events and snapshots ("bulkhead").
        pub name: String,
        /// Calls in flight at most (64).
        pub max_concurrent: usize,
        /// How long a caller may queue when full (none: fail fast).
        #[serde(default, with = "duration::option", skip_serializing_if = "Option::is_none")]
        pub max_wait: Option<Duration>,
    }
}

impl Default for BulkheadConfig {
    fn default() -> Self {
        BulkheadConfig {
            name: "bulkhead".into(),
            max_concurrent: DEFAULT_MAX_CONCURRENT,
            max_wait: None,
        }
    }
}

impl BulkheadConfig {
    /// Checks every field.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.max_concurrent == 0 {
            return Err(ConfigError::new(
                "bulkhead.max_concurrent",
                "must be at least 1, got 0",
            ));
        }
        if self.name.is_empty() {
            return Err(ConfigError::new(
                "bulkhead.name",
                "must not be empty, got \"\"",
            ));
        }
        Ok(())
    }

    /// A [`BulkheadLayer`] with its own compartment.
    pub fn layer(&self) -> Result<BulkheadLayer, ConfigError> {
        self.validate()?;
        let layer = BulkheadLayer::named(self.name.as_str(), self.max_concurrent);
        Ok(match self.max_wait {
            Some(d) => layer.max_wait(d),
            None => layer,
        })
    }
}

/// `BTreeMap<String, Duration>` with human durations.
mod duration_map {
    use std::collections::BTreeMap;
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Serialize, Deserialize)]
    struct Human(#[serde(with = "levee_core::config::duration")] Duration);

    pub(super) fn serialize<S: Serializer>(
        map: &BTreeMap<String, Duration>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        s.collect_map(map.iter().map(|(k, v)| (k, Human(*v))))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<BTreeMap<String, Duration>, D::Error> {
        let map = BTreeMap::<String, Human>::deserialize(d)?;
        Ok(map.into_iter().map(|(k, Human(v))| (k, v)).collect())
    }
}
