//! Durations as human-readable strings: `"30s"`, `"250ms"`, `"2m"`, `"1h 30m"`.
//!
//! A serde `with` module (parsing and formatting by `humantime`), usable on
//! your own configuration structs too:
//!
//! ```
//! use std::time::Duration;
//!
//! #[derive(Debug, serde::Serialize, serde::Deserialize)]
//! struct Upstream {
//!     #[serde(with = "levee_core::config::duration")]
//!     timeout: Duration,
//!     #[serde(default, with = "levee_core::config::duration::option")]
//!     slow_call: Option<Duration>,
//! }
//!
//! let u: Upstream = serde_json::from_str(r#"{ "timeout": "1m 30s" }"#).unwrap();
//! assert_eq!(u.timeout, Duration::from_secs(90));
//! assert_eq!(serde_json::to_string(&u).unwrap(), r#"{"timeout":"1m 30s","slow_call":null}"#);
//!
//! let err = serde_json::from_str::<Upstream>(r#"{ "timeout": "30 parsecs" }"#).unwrap_err();
//! assert!(err.to_string().starts_with(r#"invalid duration "30 parsecs": unknown time unit "parsecs""#));
//! ```
//!
//! Formatting is exact to the nanosecond, so a duration survives a round trip.

use std::fmt;
use std::time::Duration;

use serde::de::{self, Visitor};
use serde::{Deserializer, Serializer};

/// Parses a human duration, with an error naming the value.
pub fn parse(text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text.trim()).map_err(|e| format!("invalid duration {text:?}: {e}"))
}

/// Formats a duration the way [`parse`] reads it (`"1m 30s"`, `"0s"`).
pub fn format(d: Duration) -> String {
    humantime::format_duration(d).to_string()
}

/// Serialises a duration as a human string.
pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&format(*d))
}

/// Deserialises a duration from a human string.
pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    d.deserialize_str(DurationVisitor)
}

pub(crate) struct DurationVisitor;

impl Visitor<'_> for DurationVisitor {
    type Value = Duration;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a duration such as \"30s\", \"250ms\" or \"2m\"")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Duration, E> {
        parse(v).map_err(E::custom)
    }
}

/// The same for `Option<Duration>` (`None` serialises as nothing or null;
/// pair it with `#[serde(default)]`).
pub mod option {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    /// Serialises `Some` as a human string, `None` as none.
    pub fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.serialize_some(&super::format(*d)),
            None => s.serialize_none(),
        }
    }

    /// Deserialises an optional human string.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        #[derive(Deserialize)]
        struct Wrap(#[serde(with = "super")] Duration);
        Ok(Option::<Wrap>::deserialize(d)?.map(|Wrap(d)| d))
    }
}
