//! [`BreakerSpec`]: the breaker's configuration as a file writes it.

use std::fmt;
use std::time::Duration;

use serde::de::{self, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::de_error;
use super::duration::{self, DurationVisitor};
use crate::breaker::{BreakerConfig, Cooldown, Jitter, Tripping};
use crate::config_error::ConfigError;

/// `min_calls` of a rolling window when the file names none.
pub(crate) const DEFAULT_MIN_CALLS: u32 = 10;

/// A [`BreakerConfig`] as written in a file; every field optional.
///
/// Tripping is consecutive (`threshold`) unless any of `window`,
/// `min_calls`, `failure_ratio` is given, which selects a rolling window
/// (`window` and `failure_ratio` then required, `min_calls` defaults to
/// [`DEFAULT_MIN_CALLS`]); giving both kinds is an error.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct BreakerSpec {
    /// Consecutive failures that open the breaker.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) threshold: Option<u32>,
    /// The rolling window's length.
    #[serde(with = "duration::option", skip_serializing_if = "Option::is_none")]
    pub(crate) window: Option<Duration>,
    /// Calls needed in the window before its ratio counts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) min_calls: Option<u32>,
    /// The failure share in `[0, 1]` that opens the breaker.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) failure_ratio: Option<f64>,
    /// Consecutive credential failures that open the breaker.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) credential_threshold: Option<u32>,
    /// The cool-off after an availability trip.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) cooldown: Option<CooldownSpec>,
    /// The cool-off after a credential trip.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) credential_cooldown: Option<CooldownSpec>,
    /// Trial calls per half-open round.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) half_open_probes: Option<u32>,
    /// Share of the probes that must succeed to close, in `(0, 1]`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) half_open_success_ratio: Option<f64>,
    /// How long a probe holds its slot.
    #[serde(with = "duration::option", skip_serializing_if = "Option::is_none")]
    pub(crate) probe_timeout: Option<Duration>,
    /// Latency over which a success counts as an availability failure.
    #[serde(with = "duration::option", skip_serializing_if = "Option::is_none")]
    pub(crate) slow_call: Option<Duration>,
}

/// A cool-off schedule as written in a file: a duration string (a fixed
/// cool-off, no jitter) or a table `{ base, multiplier, max, jitter }` whose
/// missing fields keep the defaults of the schedule it replaces.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum CooldownSpec {
    /// `cooldown = "30s"`: always 30 s, no growth, no jitter.
    Fixed(Duration),
    /// `cooldown = { base = "10s", multiplier = 2.0, max = "5m", jitter = "full", hold = 5 }`.
    Exponential(ExponentialSpec),
}

/// The table form of [`CooldownSpec`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct ExponentialSpec {
    /// The first cool-off.
    #[serde(with = "duration::option", skip_serializing_if = "Option::is_none")]
    pub(crate) base: Option<Duration>,
    /// Growth per failed recovery; at least 1.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) multiplier: Option<f64>,
    /// The cap, before jitter.
    #[serde(with = "duration::option", skip_serializing_if = "Option::is_none")]
    pub(crate) max: Option<Duration>,
    /// `"none"`, `"full"` or `"equal"`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) jitter: Option<Jitter>,
    /// Cool-offs kept exactly at `base` before growth starts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) hold: Option<u32>,
}

// === spec -> config ===

impl CooldownSpec {
    /// The schedule, with missing table fields taken from `default`.
    pub(crate) fn to_cooldown(&self, default: &Cooldown) -> Cooldown {
        match self {
            CooldownSpec::Fixed(d) => Cooldown::fixed(*d),
            CooldownSpec::Exponential(e) => {
                let (base, multiplier, max, jitter, hold) = match default {
                    Cooldown::Exponential {
                        base,
                        multiplier,
                        max,
                        jitter,
                        hold,
                    } => (*base, *multiplier, *max, *jitter, *hold),
                    Cooldown::Custom(_) => {
                        (Duration::from_secs(30), 2.0, Duration::MAX, Jitter::Full, 0)
                    }
                };
                Cooldown::Exponential {
                    base: e.base.unwrap_or(base),
                    multiplier: e.multiplier.unwrap_or(multiplier),
                    max: e.max.unwrap_or(max),
                    jitter: e.jitter.unwrap_or(jitter),
                    // A base of its own starts growth afresh: a hold is
                    // kept only with the base it was chosen for.
                    hold: e.hold.unwrap_or(if e.base.is_some() { 0 } else { hold }),
                }
            }
        }
    }

    fn from_cooldown(c: &Cooldown, field: &'static str) -> Result<Self, ConfigError> {
        match c {
            Cooldown::Exponential {
                base,
                multiplier,
                max,
                jitter,
                hold,
            } => Ok(CooldownSpec::Exponential(ExponentialSpec {
                base: Some(*base),
                multiplier: Some(*multiplier),
                max: Some(*max),
                jitter: Some(*jitter),
                hold: Some(*hold),
            })),
            Cooldown::Custom(_) => Err(ConfigError::new(
                field,
                "a custom cool-off function cannot be serialised; set it in code",
            )),
        }
    }
}

impl BreakerSpec {
    fn tripping(&self) -> Result<Tripping, ConfigError> {
        let rolling =
            self.window.is_some() || self.min_calls.is_some() || self.failure_ratio.is_some();
        if !rolling {
            return Ok(self.threshold.map_or_else(Tripping::default, |threshold| {
                Tripping::Consecutive { threshold }
            }));
        }
        if let Some(t) = self.threshold {
            return Err(ConfigError::new(
                "breaker.threshold",
                format!(
                    "cannot be combined with a rolling window (window, min_calls, failure_ratio), got {t}"
                ),
            ));
        }
        let window = self.window.ok_or_else(|| {
            ConfigError::new(
                "breaker.window",
                "is required for a rolling window, got none",
            )
        })?;
        let failure_ratio = self.failure_ratio.ok_or_else(|| {
            ConfigError::new(
                "breaker.failure_ratio",
                "is required for a rolling window, got none",
            )
        })?;
        Ok(Tripping::Rolling {
            window,
            min_calls: self.min_calls.unwrap_or(DEFAULT_MIN_CALLS),
            failure_ratio,
        })
    }
}

impl TryFrom<BreakerSpec> for BreakerConfig {
    type Error = ConfigError;

    /// Fills the missing fields with the defaults and validates.
    fn try_from(spec: BreakerSpec) -> Result<Self, ConfigError> {
        let d = BreakerConfig::default();
        let config = BreakerConfig {
            tripping: spec.tripping()?,
            credential_threshold: spec.credential_threshold.unwrap_or(d.credential_threshold),
            cooldown: spec
                .cooldown
                .as_ref()
                .map_or(d.cooldown.clone(), |c| c.to_cooldown(&d.cooldown)),
            credential_cooldown: spec
                .credential_cooldown
                .as_ref()
                .map_or(d.credential_cooldown.clone(), |c| {
                    c.to_cooldown(&d.credential_cooldown)
                }),
            half_open_probes: spec.half_open_probes.unwrap_or(d.half_open_probes),
            half_open_success_ratio: spec
                .half_open_success_ratio
                .unwrap_or(d.half_open_success_ratio),
            probe_timeout: spec.probe_timeout.unwrap_or(d.probe_timeout),
            slow_call: spec.slow_call.or(d.slow_call),
        };
        config.validate()?;
        Ok(config)
    }
}

// === config -> spec ===

impl TryFrom<&BreakerConfig> for BreakerSpec {
    type Error = ConfigError;

    /// Every field written out; fails on a custom policy or cool-off function.
    fn try_from(c: &BreakerConfig) -> Result<Self, ConfigError> {
        let mut spec = BreakerSpec::default();
        match &c.tripping {
            Tripping::Consecutive { threshold } => spec.threshold = Some(*threshold),
            Tripping::Rolling {
                window,
                min_calls,
                failure_ratio,
            } => {
                spec.window = Some(*window);
                spec.min_calls = Some(*min_calls);
                spec.failure_ratio = Some(*failure_ratio);
            }
            Tripping::Custom(_) => {
                return Err(ConfigError::new(
                    "breaker.tripping",
                    "a custom tripping policy cannot be serialised; set it in code",
                ));
            }
        }
        spec.credential_threshold = Some(c.credential_threshold);
        spec.cooldown = Some(CooldownSpec::from_cooldown(
            &c.cooldown,
            "breaker.cooldown",
        )?);
        spec.credential_cooldown = Some(CooldownSpec::from_cooldown(
            &c.credential_cooldown,
            "breaker.credential_cooldown",
        )?);
        spec.half_open_probes = Some(c.half_open_probes);
        spec.half_open_success_ratio = Some(c.half_open_success_ratio);
        spec.probe_timeout = Some(c.probe_timeout);
        spec.slow_call = c.slow_call;
        Ok(spec)
    }
}

// === serde for the config and the cool-off ===

impl Serialize for BreakerConfig {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        BreakerSpec::try_from(self)
            .map_err(serde::ser::Error::custom)?
            .serialize(s)
    }
}

impl<'de> Deserialize<'de> for BreakerConfig {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let spec: BreakerSpec = super::deserialize_section("breaker", d)?;
        spec.try_into().map_err(de_error)
    }
}

impl Serialize for CooldownSpec {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            CooldownSpec::Fixed(d) => duration::serialize(d, s),
            CooldownSpec::Exponential(e) => e.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for CooldownSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct CooldownVisitor;

        impl<'de> Visitor<'de> for CooldownVisitor {
            type Value = CooldownSpec;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(
                    "a duration such as \"30s\" or a table { base, multiplier, max, jitter, hold }",
                )
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<CooldownSpec, E> {
                DurationVisitor.visit_str(v).map(CooldownSpec::Fixed)
            }

            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<CooldownSpec, A::Error> {
                ExponentialSpec::deserialize(de::value::MapAccessDeserializer::new(map))
                    .map(CooldownSpec::Exponential)
            }
        }

        d.deserialize_any(CooldownVisitor)
    }
}
