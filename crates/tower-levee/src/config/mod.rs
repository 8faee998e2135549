//! Per-service configuration from files (feature `serde`).
//!
//! A [`LeveeConfig`] holds everything one dependency's stack needs — the
//! breaker, throttle gate and park table, the breaker layer's own settings,
//! the retry layer with its budget, the bulkhead, the failover's settings —
//! and deserialises from
//! TOML, JSON or YAML through serde. Durations are written the human way
//! (`"30s"`, `"250ms"`, `"2m"`); every field is optional (a missing one
//! takes the default below); an unknown field is an error; and every value
//! is validated **at load**, with an error that names the field and the bad
//! value (`invalid breaker.half_open_probes: must be at least 1, got 0`).
//! Serialising writes every field, and a config read back is the same.
//!
//! ```
//! use tower_levee::config::LeveeConfig;
//!
//! let config: LeveeConfig = serde_json::from_str(r#"{
//!     "breaker": { "threshold": 3, "cooldown": "10s", "slow_call": "20s" },
//!     "gate": { "max_wait": "5m" },
//!     "retry": { "max_attempts": 2, "timeout": "45s", "budget": { "retry_ratio": 0.2 } },
//!     "bulkhead": { "name": "openai", "max_concurrent": 32 }
//! }"#)?;
//! let breaker = config.breaker_layer()?.on_event(|e| println!("{e:?}")).build()?;
//! let retry = config.retry.layer()?;
//! let bulkhead = config.bulkhead.layer()?;
//! # let _ = (breaker, retry, bulkhead);
//!
//! let err = serde_json::from_str::<LeveeConfig>(r#"{ "bulkhead": { "max_concurrent": 0 } }"#)
//!     .unwrap_err();
//! assert!(err.to_string().contains("invalid bulkhead.max_concurrent: must be at least 1, got 0"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Fields and defaults
//!
//! | table.field | default | meaning |
//! |---|---|---|
//! | `breaker.threshold` | 5 | consecutive failures that open (or a rolling window: ↓) |
//! | `breaker.window`, `min_calls`, `failure_ratio` | none, 10, none | rolling-window tripping |
//! | `breaker.credential_threshold` | 2 | consecutive rejected keys that open |
//! | `breaker.cooldown` | `{ base = "10s", hold = 6, multiplier = 2.0, max = "15m", jitter = "equal" }` | `hold`: cool-offs kept exactly at `base` before growth (a table with its own `base` and no `hold` holds none); or `"30s"`: fixed |
//! | `breaker.credential_cooldown` | `{ base = "5m", multiplier = 2.0, max = "1h", jitter = "equal" }` | |
//! | `breaker.half_open_probes` | 1 | trial calls per half-open round |
//! | `breaker.half_open_success_ratio` | 1.0 | share of probes that must succeed |
//! | `breaker.probe_timeout` | `"60s"` | a hung probe's lease |
//! | `breaker.slow_call` | none | a success slower than this is a failure |
//! | `gate.default_wait` | `"5s"` | gate length for a 429 without a hint |
//! | `gate.jitter` | 0.2 | spread of `default_wait` |
//! | `gate.max_wait` | `"10m"` | a longer hint parks; `"never"` always gates |
//! | `park.default_park` | `"1h"` | park length when no reset is named |
//! | `pace.enabled` | true | pace from the rate-limit headers |
//! | `pace.requests_reserve`, `tokens_reserve` | `"2%"`, `"2%"` | left unused of each limit: a share (`"2%"`) or a count (`5`) |
//! | `pace.max_pause` | `"60s"` | a longer refill is left to the provider's 429 |
//! | `pace.spread` | true | send no faster than the provider's rate, a second of it at once |
//! | `breaker_layer.peek_limit` | 16384 | bytes of a body read to classify (a non-2xx, or a 2xx the classifier asks for) |
//! | `breaker_layer.max_keys` | 10000 | scopes tracked per mechanism |
//! | `breaker_layer.isolate_by_model` | false | a breaker per model |
//! | `breaker_layer.slow_stream` | none | a stream slower than this in all is a failure |
//! | `breaker_layer.slow_call_by_model` | `{}` | `{ "gpt-4o" = "30s" }` |
//! | `breaker_layer.first_content_timeout` | none | a stream with no output (a token, a tool call) this long after the call started is a failed answer; a retry or failover replaces it |
//! | `breaker_layer.first_content_timeout_by_model` | `{}` | `{ "o3" = "120s" }` |
//! | `breaker_layer.stall_timeout` | none | a stream with no frame for this long ends; before its first output it is a failed answer a retry or failover replaces |
//! | `breaker_layer.stream_hold` | true | hold a stream back until its first output, so that one failing before it is a failed answer a retry or failover replaces unseen |
//! | `breaker_layer.stream_hold_max_bytes`, `stream_hold_max_events` | 65536, 64 | past these with no output, a stream is handed on as it is |
//! | `breaker_layer.latency_estimate` | false | p50/p90/p99 time to first byte per failure domain in the health snapshot |
//! | `breaker_layer.empty_body_is_failure` | true | an empty 2xx answer to a `POST` is an availability failure |
//! | `retry.max_attempts` | 3 | attempts in all, the first included |
//! | `retry.backoff_base`, `backoff_cap` | `"500ms"`, `"8s"` | backoff without a hint |
//! | `retry.max_wait` | `"60s"` | a longer hint is not waited out |
//! | `retry.timeout` | none | the caller's overall deadline |
//! | `retry.attempt_timeout` | none | each attempt's deadline, for the timeout a stack puts beneath the breaker |
//! | `retry.budget.ttl`, `min_per_sec`, `retry_ratio` | `"10s"`, 10, 0.1 | the retry budget |
//! | `bulkhead.name` | `"bulkhead"` | the compartment's name |
//! | `bulkhead.max_concurrent` | 1024 | calls in flight |
//! | `bulkhead.max_wait` | none | queue this long when full (none: fail fast) |
//! | `failover.max_targets_per_request` | all | targets one request is sent to |
//! | `failover.max_retry_after` | `"300s"` | the cap on `NoTargetAvailable`'s `retry_after` |
//! | `failover.overload_window` | `"30s"` | two availability failures of one provider and region this close: the group is tried last |
//! | `failover.shadow_probes` | true | copies of requests served elsewhere probe a target whose breaker is open ([`FailoverConfig::shadow_probes_for`]) |
//! | `failover.shadow_probe_interval` | `"1s"` | the least time between two copies to one target |
//! | `failover.shadow_probe_share` | 0.1 | the most copies to one target, as a share of the requests it turns away |
//!
//! # What is not in a file
//!
//! Functions and trait objects are not data: a custom tripping policy or
//! cool-off function, a classifier, a scope function, a soft-failure hook,
//! event subscribers. Load the file, then add them on the builder that
//! [`LeveeConfig::breaker_layer`] returns. Serialising a config that holds a
//! custom policy fails with an error saying so.

#[cfg(feature = "toml")]
mod file;
mod layers;

#[cfg(feature = "toml")]
pub use file::{FileError, from_toml};
pub use layers::{
    BreakerLayerConfig, BulkheadConfig, DEFAULT_MAX_CONCURRENT, FailoverConfig, RetryConfig,
};
pub use levee_core::config::duration;

use levee_core::breaker::BreakerConfig;
use levee_core::config_error::ConfigError;
use levee_core::gate::GateConfig;
use levee_core::pace::PaceConfig;
use levee_core::park::ParkConfig;
use serde::{Deserialize, Serialize};

use crate::breaker::BreakerLayerBuilder;

/// Everything one dependency's Levee stack is configured with. See the
/// [module docs](self) for the fields and their defaults.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct LeveeConfig {
    /// The breaker: tripping, cool-offs, probes, slow calls.
    pub breaker: BreakerConfig,
    /// The throttle gate.
    pub gate: GateConfig,
    /// The park table.
    pub park: ParkConfig,
    /// Pacing from the providers' rate-limit headers.
    pub pace: PaceConfig,
    /// The breaker layer's own settings.
    pub breaker_layer: BreakerLayerConfig,
    /// The retry layer and its budget.
    pub retry: RetryConfig,
    /// The bulkhead.
    pub bulkhead: BulkheadConfig,
    /// The failover's settings.
    pub failover: FailoverConfig,
}

impl LeveeConfig {
    /// Checks every field (a deserialised config is already checked).
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.breaker.validate()?;
        self.gate.validate()?;
        self.park.validate()?;
        self.pace.validate()?;
        self.breaker_layer.validate()?;
        self.retry.validate()?;
        self.bulkhead.validate()?;
        self.failover.validate()
    }

    /// A [`BreakerLayerBuilder`] with the breaker, gate, park and
    /// breaker-layer settings applied; add a classifier, hooks or
    /// subscribers, then `build()`.
    pub fn breaker_layer(&self) -> Result<BreakerLayerBuilder, ConfigError> {
        self.breaker.validate()?;
        self.gate.validate()?;
        self.park.validate()?;
        self.pace.validate()?;
        let builder = crate::BreakerLayer::builder()
            .breaker(self.breaker.clone())
            .gate(self.gate.clone())
            .park(self.park.clone())
            .pace(self.pace);
        self.breaker_layer.apply(builder)
    }
}

/// Generates a config struct whose `Deserialize` fills missing fields from
/// `Default`, refuses unknown ones, names the field of a malformed value
/// (within `$section`) and validates, with a private mirror.
macro_rules! validated_config {
    (
        section = $section:literal;
        $(#[$meta:meta])*
        pub struct $name:ident {
            $( $(#[$fmeta:meta])* pub $field:ident : $ty:ty, )*
        }
    ) => {
        $(#[$meta])*
        #[derive(serde::Serialize)]
        #[non_exhaustive]
        pub struct $name {
            $( $(#[$fmeta])* pub $field: $ty, )*
        }

        impl $name {
            $(
                #[doc = concat!("Sets `", stringify!($field), "` (the field of that name), for a configuration built in code.")]
                #[must_use]
                pub fn $field(mut self, value: $ty) -> Self {
                    self.$field = value;
                    self
                }
            )*
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                #[derive(serde::Deserialize)]
                #[serde(default, deny_unknown_fields)]
                struct Raw {
                    $( $(#[$fmeta])* $field: $ty, )*
                }
                impl Default for Raw {
                    fn default() -> Self {
                        let d = $name::default();
                        Raw { $( $field: d.$field, )* }
                    }
                }
                let raw: Raw = levee_core::config::deserialize_section($section, d)?;
                let config = $name { $( $field: raw.$field, )* };
                config.validate().map_err(serde::de::Error::custom)?;
                Ok(config)
            }
        }
    };
}
pub(crate) use validated_config;
