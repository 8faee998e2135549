//! [`StreamHold`]: how far a streamed answer is read ahead before it is
//! handed on, so that a stream failing before its first output is a failed
//! answer that a retry or a failover replaces unseen.

use std::num::NonZeroU32;

use levee_core::config_error::ConfigError;

/// How far a stream is read ahead: [`StreamHold`] as the hot path keeps it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct HoldLimits {
    // Non-zero (validated): `Option<HoldLimits>` then costs a call's state
    // no more than the limits.
    pub(crate) max_bytes: NonZeroU32,
    pub(crate) max_events: u32,
}

/// Holding streamed answers back until their first output (on by default).
///
/// A streamed `2xx` (SSE, NDJSON, Gemini's JSON array, Bedrock's event
/// stream) is read ahead by the breaker layer, not handed on, until the
/// model's first output: a token, a tool call, a reasoning delta (see
/// [`StreamScanner::has_content`]). If before that the stream errs in-band,
/// is cut, or goes quiet past the first-content or stall timeout
/// ([`BreakerLayerBuilder::first_content_timeout`],
/// [`stall_timeout`](super::BreakerLayerBuilder::stall_timeout)), the
/// breaker counts it and the answer carries the failure's
/// [`Classification`](levee_core::classify::Classification), as a `503`
/// would: a [`Failover`](crate::failover::Failover) above tries the next
/// target and a [`Retry`](crate::retry::Retry) retries, so the caller only
/// ever sees the stream that served, from its first byte. With neither
/// above, the caller gets the stream as it came (its bytes are kept and
/// replayed). After the first output an error passes through as it is (the
/// caller has the output) and still counts.
///
/// What a hold reads is kept, so it is bounded: past `max_bytes` or
/// `max_events` events of bookkeeping (role chunks, pings) with no output,
/// the stream is handed on as it is. Holding costs the caller nothing it
/// could use: the events held are bookkeeping, and the first output is
/// handed on the moment it arrives.
///
/// [`StreamScanner::has_content`]: levee_core::classify::StreamScanner::has_content
/// [`BreakerLayerBuilder::first_content_timeout`]: super::BreakerLayerBuilder::first_content_timeout
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct StreamHold {
    /// Whether streams are held at all (on).
    pub enabled: bool,
    /// The most bytes held before the stream is released as it is (64 KiB,
    /// at most `u32::MAX`).
    pub max_bytes: usize,
    /// The most events held before the stream is released as it is (64).
    pub max_events: u32,
}

impl StreamHold {
    /// The default `max_bytes`.
    pub const DEFAULT_MAX_BYTES: usize = 64 * 1024;
    /// The default `max_events`.
    pub const DEFAULT_MAX_EVENTS: u32 = 64;

    /// Sets the `max_bytes` field.
    #[must_use]
    pub fn max_bytes(mut self, bytes: usize) -> Self {
        self.max_bytes = bytes;
        self
    }

    /// Sets the `max_events` field.
    #[must_use]
    pub fn max_events(mut self, events: u32) -> Self {
        self.max_events = events;
        self
    }

    /// No hold: a stream is handed on at its head, as a plain response is.
    pub fn off() -> Self {
        StreamHold {
            enabled: false,
            ..StreamHold::default()
        }
    }

    /// Checks the bounds; the error names the field.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.max_bytes == 0 || u32::try_from(self.max_bytes).is_err() {
            return Err(ConfigError::new(
                "breaker_layer.stream_hold_max_bytes",
                format!(
                    "must be between 1 and {} bytes, got {}",
                    u32::MAX,
                    self.max_bytes
                ),
            ));
        }
        if self.max_events == 0 {
            return Err(ConfigError::new(
                "breaker_layer.stream_hold_max_events",
                "must be at least 1, got 0",
            ));
        }
        Ok(())
    }

    /// The limits, if streams are held (`validate` has passed).
    pub(crate) fn limits(&self) -> Option<HoldLimits> {
        self.enabled.then(|| HoldLimits {
            max_bytes: u32::try_from(self.max_bytes)
                .ok()
                .and_then(NonZeroU32::new)
                .unwrap_or(NonZeroU32::MAX),
            max_events: self.max_events,
        })
    }
}

impl Default for StreamHold {
    fn default() -> Self {
        StreamHold {
            enabled: true,
            max_bytes: Self::DEFAULT_MAX_BYTES,
            max_events: Self::DEFAULT_MAX_EVENTS,
        }
    }
}
