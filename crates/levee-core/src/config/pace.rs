//! The spec of pacing.

use std::fmt;
use std::time::Duration;

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::de_error;
use super::duration;
use crate::config_error::ConfigError;
use crate::pace::{PaceConfig, Reserve};

/// A [`PaceConfig`] as written in a file; every field optional.
///
/// ```toml
/// enabled = true
/// requests_reserve = "2%"   # or a count: 5
/// tokens_reserve = "2%"
/// max_pause = "60s"
/// spread = true
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct PaceSpec {
    /// Whether to pace at all.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) enabled: Option<bool>,
    /// Requests left unused of each request limit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) requests_reserve: Option<Reserve>,
    /// Tokens left unused of each token limit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) tokens_reserve: Option<Reserve>,
    /// The longest pause pacing imposes.
    #[serde(with = "duration::option", skip_serializing_if = "Option::is_none")]
    pub(crate) max_pause: Option<Duration>,
    /// Whether to spread requests at the provider's rate.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) spread: Option<bool>,
}

impl TryFrom<PaceSpec> for PaceConfig {
    type Error = ConfigError;

    fn try_from(spec: PaceSpec) -> Result<Self, ConfigError> {
        let d = PaceConfig::default();
        let config = PaceConfig {
            enabled: spec.enabled.unwrap_or(d.enabled),
            requests_reserve: spec.requests_reserve.unwrap_or(d.requests_reserve),
            tokens_reserve: spec.tokens_reserve.unwrap_or(d.tokens_reserve),
            max_pause: spec.max_pause.unwrap_or(d.max_pause),
            spread: spec.spread.unwrap_or(d.spread),
        };
        config.validate()?;
        Ok(config)
    }
}

impl From<&PaceConfig> for PaceSpec {
    fn from(c: &PaceConfig) -> Self {
        PaceSpec {
            enabled: Some(c.enabled),
            requests_reserve: Some(c.requests_reserve),
            tokens_reserve: Some(c.tokens_reserve),
            max_pause: Some(c.max_pause),
            spread: Some(c.spread),
        }
    }
}

impl Serialize for PaceConfig {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        PaceSpec::from(self).serialize(s)
    }
}

impl<'de> Deserialize<'de> for PaceConfig {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let spec: PaceSpec = super::deserialize_section("pace", d)?;
        spec.try_into().map_err(de_error)
    }
}

impl Serialize for Reserve {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Reserve::Count(n) => s.serialize_u64(*n),
            Reserve::Share(share) => s.serialize_str(&format!("{}%", share * 100.0)),
        }
    }
}

impl<'de> Deserialize<'de> for Reserve {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct ReserveVisitor;

        impl Visitor<'_> for ReserveVisitor {
            type Value = Reserve;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a count such as 5, or a percentage such as \"2%\"")
            }

            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Reserve, E> {
                Ok(Reserve::Count(v))
            }

            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Reserve, E> {
                u64::try_from(v)
                    .map(Reserve::Count)
                    .map_err(|_| E::invalid_value(de::Unexpected::Signed(v), &self))
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<Reserve, E> {
                let percent = v
                    .trim()
                    .strip_suffix('%')
                    .and_then(|p| p.trim().parse::<f64>().ok())
                    .ok_or_else(|| E::invalid_value(de::Unexpected::Str(v), &self))?;
                Ok(Reserve::Share(percent / 100.0))
            }
        }

        d.deserialize_any(ReserveVisitor)
    }
}
