//! Durations in JSON as whole milliseconds (`retry_after_ms`, `p99_ms`):
//! the one format every health and latency field serialises with.

use std::time::Duration;

/// `d` in whole milliseconds, saturating.
fn to_millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// A duration as whole milliseconds.
pub(crate) fn duration<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(to_millis(*d))
}

/// An optional duration as whole milliseconds, or `null`.
pub(crate) fn option<S: serde::Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_some(&to_millis(*d)),
        None => s.serialize_none(),
    }
}
