//! Configuration from files: serde for every mechanism's configuration
//! (feature `serde`).
//!
//! Each configuration type — [`BreakerConfig`](crate::breaker::BreakerConfig),
//! [`GateConfig`](crate::gate::GateConfig), [`ParkConfig`](crate::park::ParkConfig),
//! [`BudgetConfig`](crate::budget::BudgetConfig) — implements `Serialize` and
//! `Deserialize` as what a file says: every field optional (a missing one
//! takes the default), unknown fields refused, durations written the human
//! way (`"30s"`, `"250ms"`, `"2m"`, `"1h 30m"`, see [`duration`]). Loading
//! runs the same validation as the builders,
//! so a bad value fails **at load**, with an error that names the field and
//! the value:
//!
//! ```
//! use levee_core::breaker::BreakerConfig;
//!
//! let config: BreakerConfig = serde_json::from_str(
//!     r#"{ "window": "60s", "failure_ratio": 0.5, "cooldown": "10s", "slow_call": "20s" }"#,
//! ).unwrap();
//! assert_eq!(config.slow_call, Some(std::time::Duration::from_secs(20)));
//!
//! let err = serde_json::from_str::<BreakerConfig>(r#"{ "half_open_probes": 0 }"#).unwrap_err();
//! assert!(err.to_string().contains("invalid breaker.half_open_probes: must be at least 1, got 0"));
//! ```
//!
//! The breaker table, field by field (TOML):
//!
//! ```toml
//! threshold = 5                  # consecutive tripping (the default rule) …
//! # window = "60s"               # … or a rolling window: window and failure_ratio
//! # min_calls = 10               #     required, min_calls defaults to 10
//! # failure_ratio = 0.5
//! credential_threshold = 2
//! cooldown = "30s"               # a fixed cool-off, or a table:
//! credential_cooldown = { base = "5m", multiplier = 2.0, max = "1h", jitter = "equal" }
//! half_open_probes = 1
//! half_open_success_ratio = 1.0
//! probe_timeout = "60s"
//! slow_call = "20s"
//! ```
//!
//! Serialising writes every field, so a config survives a round trip
//! (serialise, then deserialise) unchanged. What cannot be written to a file
//! cannot be serialised: a custom tripping policy
//! ([`Tripping::Custom`](crate::breaker::Tripping::Custom)) or a custom
//! cool-off function ([`Cooldown::Custom`](crate::breaker::Cooldown::Custom))
//! makes `serialize` fail with an error saying so. Set those in code, on the
//! builder, after loading the rest from the file.
//!
//! Serde errors for malformed input (a duration such as `"30 parsecs"`, a
//! number where a string belongs) come from the format: TOML quotes the
//! offending line, so the field and the value are both in the message; with
//! JSON, wrap the deserializer in `serde_path_to_error` to get the path.

mod breaker;
pub mod duration;
mod pace;
mod specs;

#[doc(hidden)]
/// Deserialises `T`, the configuration of `section` (`"breaker"`), so that
/// a malformed value's error names its field the way a validation error
/// does: `invalid breaker.min_calls: invalid value: integer `-1`, expected
/// u32`. Errors that name their field already (a nested configuration's)
/// and errors about the table itself (an unknown field) pass unchanged.
pub fn deserialize_section<'de, D, T>(section: &str, d: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::Deserialize<'de>,
{
    serde_path_to_error::deserialize(d).map_err(|err| {
        let path = err.path().to_string();
        let inner = err.into_inner();
        let message = inner.to_string();
        // `invalid breaker.cooldown.max: …`: a nested configuration named it.
        let named = message
            .strip_prefix("invalid ")
            .and_then(|m| m.split_once(": "))
            .is_some_and(|(field, _)| field.contains('.') && !field.contains(' '));
        if path.is_empty() || path == "." || named {
            inner
        } else {
            serde::de::Error::custom(format_args!("invalid {section}.{path}: {message}"))
        }
    })
}

/// Turns a validation error into the format's error, keeping its text.
pub(crate) fn de_error<E: serde::de::Error>(err: crate::config_error::ConfigError) -> E {
    E::custom(err)
}
