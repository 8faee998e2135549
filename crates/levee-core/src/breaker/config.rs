//! The breaker's configuration and its validating builder.

use std::time::Duration;

use super::cooldown::{Cooldown, Jitter};
use super::tripping::{Tripping, TrippingPolicy};
use crate::config_error::{ConfigError, at_least_one, positive_duration};
use std::sync::Arc;

/// How a breaker trips, cools off and recovers. Shared by every key of a
/// registry; the per-key state is a [`BreakerState`](super::BreakerState).
///
/// Build it with [`BreakerConfig::builder`], which validates every field; the
/// fields are public for reading, and a config assembled by hand can be
/// checked with [`validate`](BreakerConfig::validate). The state machine never
/// panics on an unvalidated config, but may behave oddly (e.g. a threshold of
/// 0 behaves as 1).
///
/// | field | default |
/// |---|---|
/// | `tripping` | 5 consecutive failures |
/// | `credential_threshold` | 2 consecutive credential failures |
/// | `cooldown` | 10 s exactly for the first 6 cool-offs (a minute), then 10 s × 3ⁿ up to 15 min, equal jitter |
/// | `credential_cooldown` | 5 min × 2ⁿ up to 1 h, equal jitter |
/// | `half_open_probes` | 1 |
/// | `half_open_success_ratio` | 1.0 |
/// | `probe_timeout` | 60 s |
/// | `slow_call` | none |
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct BreakerConfig {
    /// When availability (and credential) failures open a closed breaker.
    pub tripping: Tripping,
    /// Credential failures (401/403, invalid key) with no success in between
    /// that open the breaker, whatever `tripping` says. Lower than the
    /// availability threshold: a revoked key will not fix itself.
    pub credential_threshold: u32,
    /// The cool-off after a credential trip: the credential threshold was
    /// reached, the tripping rule tripped on a streak made only of credential
    /// failures, or a half-open probe's key was rejected. Longer, and jittered by
    /// [`Jitter::Equal`] by default so it is always longer than the
    /// availability cool-off: waiting rarely fixes a key, and each probe
    /// with a rejected key is noise in the provider's audit log.
    pub credential_cooldown: Cooldown,
    /// The cool-off after an availability trip.
    pub cooldown: Cooldown,
    /// Trial calls admitted per half-open round; at least 1.
    pub half_open_probes: u32,
    /// Share of `half_open_probes` that must succeed to close, in `(0, 1]`:
    /// the round needs `ceil(ratio × probes)` successes.
    pub half_open_success_ratio: f64,
    /// How long a probe holds its slot. A probe that has not reported by then
    /// (a hung call, a future leaked without being dropped) loses its lease:
    /// its slot goes to the next caller and its late report is ignored.
    pub probe_timeout: Duration,
    /// Latency over which a successful call counts as an availability
    /// failure. Stored here for the layer, which times calls and passes
    /// [`Outcome::slow`](super::Outcome::slow); the state machine never reads it.
    pub slow_call: Option<Duration>,
}

impl Default for BreakerConfig {
    fn default() -> Self {
        BreakerConfig {
            tripping: Tripping::default(),
            credential_threshold: 2,
            credential_cooldown: Cooldown::Exponential {
                base: Duration::from_secs(5 * 60),
                multiplier: 2.0,
                max: Duration::from_secs(60 * 60),
                jitter: Jitter::Equal,
                hold: 0,
            },
            // Recovery within 10 s of an outage of up to a minute, at one
            // probe per 10 s; then doubling, so that a long outage costs few
            // calls (see `Cooldown`). Measured on the drill's outages.
            cooldown: Cooldown::Exponential {
                base: Duration::from_secs(10),
                multiplier: 2.0,
                max: Duration::from_secs(15 * 60),
                jitter: Jitter::Equal,
                hold: 6,
            },
            half_open_probes: 1,
            half_open_success_ratio: 1.0,
            probe_timeout: Duration::from_secs(60),
            slow_call: None,
        }
    }
}

impl BreakerConfig {
    /// A builder starting from the defaults.
    pub fn builder() -> BreakerConfigBuilder {
        BreakerConfigBuilder {
            config: BreakerConfig::default(),
        }
    }

    /// Checks every field; the error names the first invalid one.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.tripping.validate()?;
        at_least_one("breaker.credential_threshold", self.credential_threshold)?;
        self.cooldown.validate([
            "breaker.cooldown.base",
            "breaker.cooldown.multiplier",
            "breaker.cooldown.max",
        ])?;
        self.credential_cooldown.validate([
            "breaker.credential_cooldown.base",
            "breaker.credential_cooldown.multiplier",
            "breaker.credential_cooldown.max",
        ])?;
        at_least_one("breaker.half_open_probes", self.half_open_probes)?;
        let ratio = self.half_open_success_ratio;
        if !(ratio.is_finite() && ratio > 0.0 && ratio <= 1.0) {
            return Err(ConfigError::new(
                "breaker.half_open_success_ratio",
                format!("must be a finite number in (0, 1], got {ratio}"),
            ));
        }
        positive_duration("breaker.probe_timeout", self.probe_timeout)?;
        if let Some(slow) = self.slow_call {
            positive_duration("breaker.slow_call", slow)?;
        }
        Ok(())
    }

    /// Probes per half-open round (`half_open_probes`, at least 1).
    pub fn probes(&self) -> u32 {
        self.half_open_probes.max(1)
    }

    /// Successful probes a round needs to close: `ceil(ratio × probes)`,
    /// between 1 and [`probes`](BreakerConfig::probes).
    ///
    /// A hair of tolerance absorbs float error, so `2.0 / 3.0` of 3 probes
    /// needs 2, not 3.
    pub fn required_successes(&self) -> u32 {
        let probes = self.probes();
        let exact = self.half_open_success_ratio * f64::from(probes);
        let needed = if exact.is_finite() {
            (exact - 1e-9).ceil()
        } else {
            f64::from(probes)
        };
        // The cast saturates; the clamp covers ratios outside (0, 1].
        (needed as u32).clamp(1, probes)
    }
}

/// Builds a validated [`BreakerConfig`].
///
/// ```
/// use std::time::Duration;
/// use levee_core::breaker::{BreakerConfig, Cooldown};
///
/// let config = BreakerConfig::builder()
///     .rolling(Duration::from_secs(60), 20, 0.5)
///     .cooldown(Cooldown::exponential(Duration::from_secs(10), 2.0, Duration::from_secs(300)))
///     .half_open_probes(3)
///     .half_open_success_ratio(2.0 / 3.0)
///     .slow_call(Duration::from_secs(20))
///     .build()?;
/// assert_eq!(config.required_successes(), 2);
/// # Ok::<(), levee_core::config_error::ConfigError>(())
/// ```
#[derive(Clone, Debug)]
pub struct BreakerConfigBuilder {
    config: BreakerConfig,
}

impl BreakerConfigBuilder {
    /// Sets the tripping rule.
    pub fn tripping(mut self, tripping: Tripping) -> Self {
        self.config.tripping = tripping;
        self
    }

    /// Consecutive tripping at `threshold` failures.
    pub fn threshold(self, threshold: u32) -> Self {
        self.tripping(Tripping::Consecutive { threshold })
    }

    /// Rolling-window tripping.
    pub fn rolling(self, window: Duration, min_calls: u32, failure_ratio: f64) -> Self {
        self.tripping(Tripping::Rolling {
            window,
            min_calls,
            failure_ratio,
        })
    }

    /// A user tripping policy.
    pub fn policy(self, policy: Arc<dyn TrippingPolicy>) -> Self {
        self.tripping(Tripping::Custom(policy))
    }

    /// Consecutive credential failures that open the breaker.
    pub fn credential_threshold(mut self, n: u32) -> Self {
        self.config.credential_threshold = n;
        self
    }

    /// The cool-off after a credential trip.
    pub fn credential_cooldown(mut self, cooldown: Cooldown) -> Self {
        self.config.credential_cooldown = cooldown;
        self
    }

    /// The cool-off after an availability trip.
    pub fn cooldown(mut self, cooldown: Cooldown) -> Self {
        self.config.cooldown = cooldown;
        self
    }

    /// Trial calls per half-open round.
    pub fn half_open_probes(mut self, n: u32) -> Self {
        self.config.half_open_probes = n;
        self
    }

    /// Share of the probes that must succeed to close.
    pub fn half_open_success_ratio(mut self, ratio: f64) -> Self {
        self.config.half_open_success_ratio = ratio;
        self
    }

    /// How long a probe holds its slot.
    pub fn probe_timeout(mut self, timeout: Duration) -> Self {
        self.config.probe_timeout = timeout;
        self
    }

    /// Latency over which a success counts as an availability failure.
    pub fn slow_call(mut self, threshold: impl Into<Option<Duration>>) -> Self {
        self.config.slow_call = threshold.into();
        self
    }

    /// Validates and returns the config.
    pub fn build(self) -> Result<BreakerConfig, ConfigError> {
        self.config.validate()?;
        Ok(self.config)
    }
}
