//! The `[levee]` table of a scenario: overrides of the Levee stack's
//! defaults, with the same keys and value forms as the library's settings.
//!
//! It also serialises, to the same keys, leaving out what is unset, so that
//! `levee-drill tune` can print a table the scenario reads back unchanged.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Unset tables are left out of a serialised `[levee]`.
fn is_default<T: Default + PartialEq>(value: &T) -> bool {
    *value == T::default()
}

/// The `[levee]` table: overrides of the Levee stack's defaults.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct LeveeConfig {
    /// `[levee.breaker]`.
    #[serde(default, skip_serializing_if = "is_default")]
    pub breaker: BreakerOverrides,
    /// `[levee.gate]`.
    #[serde(default, skip_serializing_if = "is_default")]
    pub gate: GateOverrides,
    /// `[levee.park]`.
    #[serde(default, skip_serializing_if = "is_default")]
    pub park: ParkOverrides,
    /// `[levee.retry]`.
    #[serde(default, skip_serializing_if = "is_default")]
    pub retry: RetryOverrides,
    /// `[levee.bulkhead]`.
    #[serde(default, skip_serializing_if = "is_default")]
    pub bulkhead: BulkheadOverrides,
    /// `[levee.pace]`: the library's own keys (`enabled`,
    /// `requests_reserve`, `tokens_reserve`, `max_pause`).
    #[serde(default, skip_serializing_if = "is_default")]
    pub pace: levee_core::config::PaceSpec,
    /// Gives each model its own breaker within a failure domain.
    #[serde(default, skip_serializing_if = "is_default")]
    pub isolate_by_model: bool,
    /// The per-attempt timeout (default: a third of the caller's timeout).
    #[serde(default, with = "opt_dur", skip_serializing_if = "Option::is_none")]
    pub attempt_timeout: Option<Duration>,
    /// A stream's longest time to its first output, from the call's start
    /// (default: none). Before it, a stream is held; past it, the request
    /// goes to the next target.
    #[serde(default, with = "opt_dur", skip_serializing_if = "Option::is_none")]
    pub first_content_timeout: Option<Duration>,
    /// A stream's longest gap between frames (default: none).
    #[serde(default, with = "opt_dur", skip_serializing_if = "Option::is_none")]
    pub stall_timeout: Option<Duration>,
    /// Whether each breaker holds a stream until its first output (default on).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stream_hold: Option<bool>,
}

/// `[levee.breaker]` keys.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct BreakerOverrides {
    /// Consecutive availability failures that open the breaker.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub threshold: Option<u32>,
    /// Rolling window instead of consecutive failures (with `min_calls`
    /// and `failure_ratio`).
    #[serde(default, with = "opt_dur", skip_serializing_if = "Option::is_none")]
    pub window: Option<Duration>,
    /// Calls in the window before the ratio is judged (default 10).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_calls: Option<u32>,
    /// Share of failures in the window that opens (default 0.5).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure_ratio: Option<f64>,
    /// Growth of the cool-off per failed recovery (default 2).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub multiplier: Option<f64>,
    /// `full`, `equal` (default) or `none`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jitter: Option<String>,
    /// Cool-offs kept exactly at the base before growth (default 6).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cooldown_hold: Option<u32>,
    /// Share of half-open probes that must succeed to close.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub half_open_success_ratio: Option<f64>,
    /// How long a probe holds its slot.
    #[serde(default, with = "opt_dur", skip_serializing_if = "Option::is_none")]
    pub probe_timeout: Option<Duration>,
    /// Base cool-off (held, then growing by `multiplier` on each reopen up
    /// to `max_cooldown`; default 10 s).
    #[serde(default, with = "opt_dur", skip_serializing_if = "Option::is_none")]
    pub cooldown: Option<Duration>,
    /// Cap of the growing cool-off.
    #[serde(default, with = "opt_dur", skip_serializing_if = "Option::is_none")]
    pub max_cooldown: Option<Duration>,
    /// Latency over which a success counts as a failure.
    #[serde(default, with = "opt_dur", skip_serializing_if = "Option::is_none")]
    pub slow_call: Option<Duration>,
    /// Trial calls per half-open round.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub half_open_probes: Option<u32>,
    /// Credential failures that open the breaker.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub credential_threshold: Option<u32>,
    /// Base cool-off after a credential trip.
    #[serde(default, with = "opt_dur", skip_serializing_if = "Option::is_none")]
    pub credential_cooldown: Option<Duration>,
}

/// `[levee.gate]` keys.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct GateOverrides {
    /// The wait when a 429 carries no hint.
    #[serde(default, with = "opt_dur", skip_serializing_if = "Option::is_none")]
    pub default_wait: Option<Duration>,
    /// Relative spread of `default_wait`, in `[0, 1)`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jitter: Option<f64>,
    /// A throttle wait beyond this parks the scope instead.
    #[serde(default, with = "opt_dur", skip_serializing_if = "Option::is_none")]
    pub max_wait: Option<Duration>,
}

/// `[levee.park]` keys.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ParkOverrides {
    /// How long to park when the provider names no reset.
    #[serde(default, with = "opt_dur", skip_serializing_if = "Option::is_none")]
    pub default_park: Option<Duration>,
}

/// `[levee.retry]` keys.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RetryOverrides {
    /// Attempts per request, the first included.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_attempts: Option<u32>,
    /// Share of traffic that may be retries.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_ratio: Option<f64>,
    /// Retries per second always allowed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_per_sec: Option<u32>,
    /// The longest wait slept before a retry.
    #[serde(default, with = "opt_dur", skip_serializing_if = "Option::is_none")]
    pub max_wait: Option<Duration>,
    /// Backoff base when the provider gave no hint (default 500 ms).
    #[serde(default, with = "opt_dur", skip_serializing_if = "Option::is_none")]
    pub backoff_base: Option<Duration>,
    /// Backoff cap (default 8 s).
    #[serde(default, with = "opt_dur", skip_serializing_if = "Option::is_none")]
    pub backoff_cap: Option<Duration>,
    /// How long a request's deposit counts toward the budget (default 10 s).
    #[serde(default, with = "opt_dur", skip_serializing_if = "Option::is_none")]
    pub ttl: Option<Duration>,
}

/// `[levee.bulkhead]` keys.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct BulkheadOverrides {
    /// Calls in flight per target before failing fast.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_concurrent: Option<usize>,
    /// How long a call may wait for a slot before failing (default: none).
    #[serde(default, with = "opt_dur", skip_serializing_if = "Option::is_none")]
    pub max_wait: Option<Duration>,
}

mod opt_dur {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    /// As the library writes it: `"1m 30s"`, which reads back exactly.
    pub(crate) fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        levee_core::config::duration::option::serialize(d, s)
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Duration>, D::Error> {
        let s = Option::<String>::deserialize(d)?;
        s.map(|s| {
            humantime::parse_duration(&s)
                .map_err(|e| serde::de::Error::custom(format!("{s:?}: {e}")))
        })
        .transpose()
    }
}
