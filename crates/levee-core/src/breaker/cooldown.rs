//! How long an open breaker stays open.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::clock::duration_nanos;
use crate::config_error::{ConfigError, positive_duration};

/// The smallest share of the nominal cool-off that [`Jitter::Full`] can draw.
///
/// AWS's full jitter draws uniformly from `[0, d]`. A draw near zero would
/// half-open the breaker the instant it opened, which defeats the point of a
/// cool-off (giving the failing provider room), so Levee draws from
/// `[d / 10, d]`: the mean is still 55% of `d`, and instances still spread out.
pub const FULL_JITTER_FLOOR: f64 = 0.1;

/// How a nominal cool-off is randomized, so that many clients that saw the
/// same outage do not all probe the provider at the same instant.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize, serde::Deserialize),
    serde(rename_all = "lowercase")
)]
#[non_exhaustive]
pub enum Jitter {
    /// Exactly the nominal duration.
    None,
    /// Uniform in `[d × FULL_JITTER_FLOOR, d]` (see [`FULL_JITTER_FLOOR`]).
    #[default]
    Full,
    /// Uniform in `[d / 2, d]`: spreads less, but never shorter than half.
    Equal,
}

impl Jitter {
    /// The range a nominal duration `d` is drawn from.
    pub fn bounds(self, d: Duration) -> (Duration, Duration) {
        let lo = match self {
            Jitter::None => d,
            Jitter::Full => d.mul_f64(FULL_JITTER_FLOOR),
            Jitter::Equal => d / 2,
        };
        (lo, d)
    }

    /// Draws a duration for the nominal `d`.
    pub fn apply(self, d: Duration, rng: &mut fastrand::Rng) -> Duration {
        let (lo, hi) = self.bounds(d);
        if lo >= hi {
            return hi;
        }
        Duration::from_nanos(rng.u64(duration_nanos(lo)..=duration_nanos(hi)))
    }
}

/// The cool-off schedule of a breaker: how long it stays open after its
/// `reopens`-th consecutive failed recovery (0 for the first open from
/// closed). Growth resets when the breaker recovers or is closed manually.
///
/// After a failed probe the cool-off counts from when that probe was sent,
/// not from when it failed: probes are spaced by the cool-off, and a slow
/// probe (sent just before a brownout ends, say) does not hold the next one
/// off by its own latency on top. A probe slower than the whole cool-off
/// lets the next round go as soon as it fails: still one round of probes
/// at a time.
///
/// The default keeps the first six cool-offs at exactly 10 s (a probe every
/// 10 s for the first minute of an outage, so a target that recovers within
/// it is back within 10 s), then doubles them, with equal jitter, up to 15
/// minutes: a target dead for three minutes costs about nine probes, not
/// eighteen, and one back after two minutes is back within about 20 s
/// (tripling would cost one probe fewer and wait about 50 s).
#[derive(Clone)]
#[non_exhaustive]
pub enum Cooldown {
    /// Exactly `base` for the first `hold` cool-offs, then
    /// `base × multiplier^(reopens − hold + 1)` (`reopens` with no hold),
    /// capped at `max` and jittered.
    Exponential {
        /// The first cool-off.
        base: Duration,
        /// Growth per failed recovery; at least 1.
        multiplier: f64,
        /// The cap, applied before jitter.
        max: Duration,
        /// How the capped value is randomized; the held cool-offs are
        /// exact (they bound recovery and the probe rate).
        jitter: Jitter,
        /// Cool-offs kept exactly at `base` before growth starts (0: none).
        hold: u32,
    },
    /// A user function of `reopens`; its value is used as is, never jittered
    /// (so a deterministic schedule stays deterministic).
    Custom(Arc<dyn Fn(u32) -> Duration + Send + Sync>),
}

impl Cooldown {
    /// Exponential growth from the first reopening, with [`Jitter::Full`].
    pub fn exponential(base: Duration, multiplier: f64, max: Duration) -> Self {
        Cooldown::Exponential {
            base,
            multiplier,
            max,
            jitter: Jitter::Full,
            hold: 0,
        }
    }

    /// The same duration every time, without jitter.
    pub fn fixed(d: Duration) -> Self {
        Cooldown::Exponential {
            base: d,
            multiplier: 1.0,
            max: d,
            jitter: Jitter::None,
            hold: 0,
        }
    }

    /// A user schedule, never jittered.
    pub fn custom(f: impl Fn(u32) -> Duration + Send + Sync + 'static) -> Self {
        Cooldown::Custom(Arc::new(f))
    }

    /// The cool-off before jitter.
    pub fn nominal(&self, reopens: u32) -> Duration {
        match self {
            Cooldown::Exponential {
                base,
                multiplier,
                max,
                hold,
                ..
            } => {
                // Past the hold it grows at once: the held ones were `base`.
                let grown = if reopens < *hold {
                    0
                } else {
                    reopens - hold.saturating_sub(1)
                };
                if grown == 0 || *multiplier <= 1.0 {
                    return (*base).min(*max);
                }
                // f64 keeps 2^40 × 30 s exact enough and lets us detect
                // overflow (inf) instead of panicking in `Duration::mul_f64`.
                let exp = i32::try_from(grown).unwrap_or(i32::MAX);
                let secs = base.as_secs_f64() * multiplier.powi(exp);
                if !secs.is_finite() || secs >= max.as_secs_f64() {
                    *max
                } else {
                    Duration::from_secs_f64(secs).min(*max)
                }
            }
            Cooldown::Custom(f) => f(reopens),
        }
    }

    /// The range [`sample`](Cooldown::sample) draws from for `reopens`.
    pub fn bounds(&self, reopens: u32) -> (Duration, Duration) {
        let d = self.nominal(reopens);
        self.jitter(reopens).bounds(d)
    }

    /// The cool-off to use after `reopens` failed recoveries.
    pub fn sample(&self, reopens: u32, rng: &mut fastrand::Rng) -> Duration {
        let d = self.nominal(reopens);
        self.jitter(reopens).apply(d, rng)
    }

    /// The jitter of the `reopens`-th cool-off: none while held, nor for a
    /// custom schedule.
    fn jitter(&self, reopens: u32) -> Jitter {
        match self {
            Cooldown::Exponential { jitter, hold, .. } if reopens >= *hold => *jitter,
            _ => Jitter::None,
        }
    }

    /// Checks `base > 0`, `multiplier` finite and `>= 1`, `base <= max`.
    /// `fields` names base, multiplier and max in errors.
    pub(crate) fn validate(&self, fields: [&'static str; 3]) -> Result<(), ConfigError> {
        let Cooldown::Exponential {
            base,
            multiplier,
            max,
            ..
        } = self
        else {
            return Ok(());
        };
        let [f_base, f_multiplier, f_max] = fields;
        positive_duration(f_base, *base)?;
        if !multiplier.is_finite() || *multiplier < 1.0 {
            return Err(ConfigError::new(
                f_multiplier,
                format!("must be a finite number >= 1, got {multiplier}"),
            ));
        }
        if base > max {
            return Err(ConfigError::new(
                f_max,
                format!("must be at least the base ({base:?}), got {max:?}"),
            ));
        }
        Ok(())
    }
}

impl fmt::Debug for Cooldown {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cooldown::Exponential {
                base,
                multiplier,
                max,
                jitter,
                hold,
            } => f
                .debug_struct("Exponential")
                .field("base", base)
                .field("multiplier", multiplier)
                .field("max", max)
                .field("jitter", jitter)
                .field("hold", hold)
                .finish(),
            Cooldown::Custom(_) => f.write_str("Custom(..)"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: fn(u64) -> Duration = Duration::from_secs;

    #[test]
    fn exponential_grows_per_reopen_and_caps_at_max() {
        let c = Cooldown::exponential(S(30), 2.0, S(900));
        let nominal: Vec<_> = (0..7).map(|n| c.nominal(n).as_secs()).collect();
        assert_eq!(nominal, [30, 60, 120, 240, 480, 900, 900]);
        assert_eq!(c.nominal(u32::MAX), S(900));
    }

    #[test]
    fn full_jitter_never_goes_below_its_floor() {
        let c = Cooldown::exponential(S(30), 2.0, S(900));
        let mut rng = fastrand::Rng::with_seed(7);
        for _ in 0..1000 {
            let d = c.sample(0, &mut rng);
            assert!((S(3)..=S(30)).contains(&d), "{d:?}");
        }
    }

    #[test]
    fn custom_schedules_are_never_jittered() {
        let c = Cooldown::custom(|n| Duration::from_secs(10 + u64::from(n)));
        let mut rng = fastrand::Rng::with_seed(1);
        assert_eq!(c.sample(3, &mut rng), S(13));
        assert_eq!(c.bounds(3), (S(13), S(13)));
    }

    #[test]
    fn a_held_cooldown_stays_exact_at_its_base_then_grows_jittered() {
        let c = Cooldown::Exponential {
            base: S(10),
            multiplier: 2.0,
            max: S(900),
            jitter: Jitter::Equal,
            hold: 5,
        };
        let nominal: Vec<_> = (0..9).map(|n| c.nominal(n).as_secs()).collect();
        assert_eq!(nominal, [10, 10, 10, 10, 10, 20, 40, 80, 160]);
        let mut rng = fastrand::Rng::with_seed(3);
        for n in 0..5 {
            assert_eq!(c.bounds(n), (S(10), S(10)), "held {n}");
            assert_eq!(c.sample(n, &mut rng), S(10));
        }
        // Past the hold it doubles at once, jittered.
        assert_eq!(c.bounds(5), (S(10), S(20)));
        assert_eq!(c.bounds(6), (S(20), S(40)));
    }

    #[test]
    fn fixed_is_constant() {
        let c = Cooldown::fixed(S(30));
        let mut rng = fastrand::Rng::with_seed(1);
        assert_eq!(c.sample(5, &mut rng), S(30));
    }
}
