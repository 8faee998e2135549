//! The one error a configuration builder returns.
//!
//! Every mechanism validates its configuration once, when it is built, so a
//! mistake such as `failure_ratio = 1.5` fails at startup with a message that
//! names the field, instead of producing a breaker that can never trip.

use std::error::Error;
use std::fmt;

/// An invalid configuration value, naming the offending field.
///
/// ```
/// use levee_core::breaker::BreakerConfig;
/// use std::time::Duration;
///
/// let err = BreakerConfig::builder()
///     .rolling(Duration::from_secs(60), 20, 1.5)
///     .build()
///     .unwrap_err();
/// assert_eq!(err.field, "breaker.failure_ratio");
/// assert_eq!(
///     err.to_string(),
///     "invalid breaker.failure_ratio: must be a finite number in [0, 1], got 1.5"
/// );
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConfigError {
    /// The dotted path of the field, e.g. `"breaker.failure_ratio"`.
    pub field: &'static str,
    /// What is wrong with it, including the value that was given.
    pub message: String,
}

impl ConfigError {
    /// An error for `field`.
    pub fn new(field: &'static str, message: impl Into<String>) -> Self {
        ConfigError {
            field,
            message: message.into(),
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid {}: {}", self.field, self.message)
    }
}

impl Error for ConfigError {}

// === validation helpers shared by the config builders ===

/// `value` must be a finite number in `[0, 1]`.
pub(crate) fn unit_interval(field: &'static str, value: f64) -> Result<(), ConfigError> {
    if value.is_finite() && (0.0..=1.0).contains(&value) {
        Ok(())
    } else {
        Err(ConfigError::new(
            field,
            format!("must be a finite number in [0, 1], got {value}"),
        ))
    }
}

/// `value` must be strictly positive.
pub(crate) fn positive_duration(
    field: &'static str,
    value: std::time::Duration,
) -> Result<(), ConfigError> {
    if value.is_zero() {
        Err(ConfigError::new(field, "must be greater than zero, got 0s"))
    } else {
        Ok(())
    }
}

/// `value` must be at least 1.
pub(crate) fn at_least_one(field: &'static str, value: u32) -> Result<(), ConfigError> {
    if value == 0 {
        Err(ConfigError::new(field, "must be at least 1, got 0"))
    } else {
        Ok(())
    }
}
