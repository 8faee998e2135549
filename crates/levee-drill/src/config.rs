//! The `[levee]` table of a scenario: overrides of the Levee stack's
//! defaults, with the same keys and value forms as the library's settings.

use std::time::Duration;

use serde::Deserialize;

/// The `[levee]` table: overrides of the Levee stack's defaults.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LeveeConfig {
    /// `[levee.breaker]`.
    #[serde(default)]
    pub breaker: BreakerOverrides,
    /// `[levee.gate]`.
    #[serde(default)]
    pub gate: GateOverrides,
    /// `[levee.park]`.
    #[serde(default)]
    pub park: ParkOverrides,
    /// `[levee.retry]`.
    #[serde(default)]
    pub retry: RetryOverrides,
    /// `[levee.bulkhead]`.
    #[serde(default)]
    pub bulkhead: BulkheadOverrides,
    /// The per-attempt timeout (default: a third of the caller's timeout).
    #[serde(default, with = "opt_dur")]
    pub attempt_timeout: Option<Duration>,
}

/// `[levee.breaker]` keys.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BreakerOverrides {
    /// Consecutive availability failures that open the breaker.
    pub threshold: Option<u32>,
    /// Base cool-off (doubles on each reopen, up to `max_cooldown`).
    #[serde(default, with = "opt_dur")]
    pub cooldown: Option<Duration>,
    /// Cap of the growing cool-off.
    #[serde(default, with = "opt_dur")]
    pub max_cooldown: Option<Duration>,
    /// Latency over which a success counts as a failure.
    #[serde(default, with = "opt_dur")]
    pub slow_call: Option<Duration>,
    /// Trial calls per half-open round.
    pub half_open_probes: Option<u32>,
    /// Credential failures that open the breaker.
    pub credential_threshold: Option<u32>,
    /// Base cool-off after a credential trip.
    #[serde(default, with = "opt_dur")]
    pub credential_cooldown: Option<Duration>,
}

/// `[levee.gate]` keys.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GateOverrides {
    /// The wait when a 429 carries no hint.
    #[serde(default, with = "opt_dur")]
    pub default_wait: Option<Duration>,
    /// A throttle wait beyond this parks the scope instead.
    #[serde(default, with = "opt_dur")]
    pub max_wait: Option<Duration>,
}

/// `[levee.park]` keys.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ParkOverrides {
    /// How long to park when the provider names no reset.
    #[serde(default, with = "opt_dur")]
    pub default_park: Option<Duration>,
}

/// `[levee.retry]` keys.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetryOverrides {
    /// Attempts per request, the first included.
    pub max_attempts: Option<u32>,
    /// Share of traffic that may be retries.
    pub retry_ratio: Option<f64>,
    /// Retries per second always allowed.
    pub min_per_sec: Option<u32>,
    /// The longest wait slept before a retry.
    #[serde(default, with = "opt_dur")]
    pub max_wait: Option<Duration>,
}

/// `[levee.bulkhead]` keys.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BulkheadOverrides {
    /// Calls in flight per target before failing fast.
    pub max_concurrent: Option<usize>,
}

mod opt_dur {
    use serde::{Deserialize, Deserializer};
    use std::time::Duration;

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
