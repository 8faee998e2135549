//! Specs of the gate, the park table and the retry budget.

use std::fmt;
use std::time::Duration;

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::de_error;
use super::duration::{self, DurationVisitor};
use crate::budget::BudgetConfig;
use crate::config_error::ConfigError;
use crate::gate::GateConfig;
use crate::park::ParkConfig;

// === GateSpec ===

/// A [`GateConfig`] as written in a file; every field optional.
///
/// ```toml
/// default_wait = "5s"
/// jitter = 0.2
/// max_wait = "10m"     # or "never": always gate, never park
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct GateSpec {
    /// The gate's length when a throttle carries no wait hint.
    #[serde(with = "duration::option", skip_serializing_if = "Option::is_none")]
    pub(crate) default_wait: Option<Duration>,
    /// Relative spread of `default_wait`, in `[0, 1)`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) jitter: Option<f64>,
    /// The longest hinted wait that still gates (longer parks).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) max_wait: Option<MaxWait>,
}

/// [`GateSpec::max_wait`]: a duration string, or `"never"` to always gate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MaxWait {
    /// `"never"`: a throttle never parks the scope, however long its hint.
    Never,
    /// A hint longer than this parks the scope.
    After(Duration),
}

impl TryFrom<GateSpec> for GateConfig {
    type Error = ConfigError;

    fn try_from(spec: GateSpec) -> Result<Self, ConfigError> {
        let d = GateConfig::default();
        let config = GateConfig {
            default_wait: spec.default_wait.unwrap_or(d.default_wait),
            jitter: spec.jitter.unwrap_or(d.jitter),
            max_wait: match spec.max_wait {
                None => d.max_wait,
                Some(MaxWait::Never) => None,
                Some(MaxWait::After(max)) => Some(max),
            },
        };
        config.validate()?;
        Ok(config)
    }
}

impl From<&GateConfig> for GateSpec {
    fn from(c: &GateConfig) -> Self {
        GateSpec {
            default_wait: Some(c.default_wait),
            jitter: Some(c.jitter),
            max_wait: Some(c.max_wait.map_or(MaxWait::Never, MaxWait::After)),
        }
    }
}

impl Serialize for GateConfig {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        GateSpec::from(self).serialize(s)
    }
}

impl<'de> Deserialize<'de> for GateConfig {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let spec: GateSpec = super::deserialize_section("gate", d)?;
        spec.try_into().map_err(de_error)
    }
}

impl Serialize for MaxWait {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            MaxWait::Never => s.serialize_str("never"),
            MaxWait::After(d) => duration::serialize(d, s),
        }
    }
}

impl<'de> Deserialize<'de> for MaxWait {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct MaxWaitVisitor;

        impl Visitor<'_> for MaxWaitVisitor {
            type Value = MaxWait;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a duration such as \"10m\", or \"never\"")
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<MaxWait, E> {
                if v.trim().eq_ignore_ascii_case("never") {
                    Ok(MaxWait::Never)
                } else {
                    DurationVisitor.visit_str(v).map(MaxWait::After)
                }
            }
        }

        d.deserialize_str(MaxWaitVisitor)
    }
}

// === ParkSpec ===

/// A [`ParkConfig`] as written in a file: `default_park = "1h"`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct ParkSpec {
    /// The park when the provider names no reset time.
    #[serde(with = "duration::option", skip_serializing_if = "Option::is_none")]
    pub(crate) default_park: Option<Duration>,
}

impl TryFrom<ParkSpec> for ParkConfig {
    type Error = ConfigError;

    fn try_from(spec: ParkSpec) -> Result<Self, ConfigError> {
        let config = ParkConfig {
            default_park: spec
                .default_park
                .unwrap_or(ParkConfig::default().default_park),
        };
        config.validate()?;
        Ok(config)
    }
}

impl From<&ParkConfig> for ParkSpec {
    fn from(c: &ParkConfig) -> Self {
        ParkSpec {
            default_park: Some(c.default_park),
        }
    }
}

impl Serialize for ParkConfig {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        ParkSpec::from(self).serialize(s)
    }
}

impl<'de> Deserialize<'de> for ParkConfig {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let spec: ParkSpec = super::deserialize_section("park", d)?;
        spec.try_into().map_err(de_error)
    }
}

// === BudgetSpec ===

/// A [`BudgetConfig`] as written in a file; every field optional.
///
/// ```toml
/// ttl = "10s"
/// min_per_sec = 10
/// retry_ratio = 0.1
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct BudgetSpec {
    /// How long a deposit counts, 1 ms to 1 h.
    #[serde(with = "duration::option", skip_serializing_if = "Option::is_none")]
    pub(crate) ttl: Option<Duration>,
    /// Retries per second allowed regardless of traffic.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) min_per_sec: Option<u32>,
    /// Retries allowed per request, in `0.0..=1000.0`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) retry_ratio: Option<f64>,
}

impl TryFrom<BudgetSpec> for BudgetConfig {
    type Error = ConfigError;

    fn try_from(spec: BudgetSpec) -> Result<Self, ConfigError> {
        BudgetConfig::try_new(
            spec.ttl.unwrap_or(BudgetConfig::DEFAULT_TTL),
            spec.min_per_sec
                .unwrap_or(BudgetConfig::DEFAULT_MIN_PER_SEC),
            spec.retry_ratio
                .unwrap_or(BudgetConfig::DEFAULT_RETRY_RATIO),
        )
    }
}

impl From<&BudgetConfig> for BudgetSpec {
    fn from(c: &BudgetConfig) -> Self {
        BudgetSpec {
            ttl: Some(c.ttl()),
            min_per_sec: Some(c.min_per_sec()),
            retry_ratio: Some(c.retry_ratio()),
        }
    }
}

impl Serialize for BudgetConfig {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        BudgetSpec::from(self).serialize(s)
    }
}

impl<'de> Deserialize<'de> for BudgetConfig {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let spec: BudgetSpec = super::deserialize_section("budget", d)?;
        spec.try_into().map_err(de_error)
    }
}
