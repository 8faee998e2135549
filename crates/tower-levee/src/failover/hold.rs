//! [`StreamHold`]: how long a streamed answer is held back before its
//! first output, so that a stream failing before it fails over unseen.

use levee_core::config_error::ConfigError;

use crate::breaker::HoldLimits;

/// Holding streamed answers back until their first output (on by default).
///
/// A streamed `2xx` (SSE, NDJSON, Gemini's JSON array, Bedrock's event
/// stream) is read ahead by the failover, not handed to the caller, until
/// the model's first output: a token, a tool call, a reasoning delta (see
/// [`StreamScanner::has_content`]). If before that the stream errs in-band,
/// is cut, or goes quiet past the target's first-content or stall timeout
/// ([`BreakerLayerBuilder::first_content_timeout`],
/// [`stall_timeout`](crate::breaker::BreakerLayerBuilder::stall_timeout)),
/// the attempt counts against the target and the request goes to the next
/// one as if the provider had answered `503`: the caller only ever sees the
/// stream that served, from its first byte. After the first output an error
/// passes through as it is (the caller has the output) and still counts.
///
/// What a hold reads is kept and replayed, so it is bounded: past
/// `max_bytes` or `max_events` events of bookkeeping (role chunks, pings)
/// with no output, the stream is handed on as it is. Holding costs the
/// caller nothing it could use: the events held are bookkeeping, and the
/// first output is released the moment it arrives.
///
/// [`StreamScanner::has_content`]: levee_core::classify::StreamScanner::has_content
/// [`BreakerLayerBuilder::first_content_timeout`]: crate::breaker::BreakerLayerBuilder::first_content_timeout
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamHold {
    /// Whether streams are held at all (on).
    pub enabled: bool,
    /// The most bytes held before the stream is released as it is (64 KiB).
    pub max_bytes: usize,
    /// The most events held before the stream is released as it is (64).
    pub max_events: u32,
}

impl StreamHold {
    /// The default `max_bytes`.
    pub const DEFAULT_MAX_BYTES: usize = 64 * 1024;
    /// The default `max_events`.
    pub const DEFAULT_MAX_EVENTS: u32 = 64;

    /// No hold: a stream is handed on at its head, as a plain response is.
    pub fn off() -> Self {
        StreamHold {
            enabled: false,
            ..StreamHold::default()
        }
    }

    /// Checks the bounds; the error names the field.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.max_bytes == 0 {
            return Err(ConfigError::new(
                "failover.stream_hold_max_bytes",
                "must be at least 1 byte, got 0",
            ));
        }
        if self.max_events == 0 {
            return Err(ConfigError::new(
                "failover.stream_hold_max_events",
                "must be at least 1, got 0",
            ));
        }
        Ok(())
    }

    pub(crate) fn limits(&self) -> Option<HoldLimits> {
        self.enabled.then_some(HoldLimits {
            max_bytes: self.max_bytes,
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
