//! The error a watched stream ends with when it goes quiet. A leaf.

use std::fmt;
use std::time::Duration;

/// A streamed response went quiet: no output within the first-content
/// timeout, or no event within the stall timeout. It ends the body the
/// caller reads (after every byte that did arrive), and the breaker counts
/// it as an availability failure. Before the first output, a
/// [`Failover`](crate::failover::Failover) tries the next target instead.
///
/// [`transport_failure`](crate::error::transport_failure) reads it as a
/// timeout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamTimeout {
    kind: StreamTimeoutKind,
    after: Duration,
}

/// Which of a stream's timeouts passed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StreamTimeoutKind {
    /// No output (a token, a tool call) within the first-content timeout,
    /// counted from the call's start.
    FirstContent,
    /// No event within the stall timeout of the last one.
    Stall,
}

impl StreamTimeout {
    /// A timeout of `kind` that passed after `after`.
    pub fn new(kind: StreamTimeoutKind, after: Duration) -> Self {
        StreamTimeout { kind, after }
    }

    /// Which timeout passed.
    pub fn kind(&self) -> StreamTimeoutKind {
        self.kind
    }

    /// The timeout that passed.
    pub fn after(&self) -> Duration {
        self.after
    }

    /// The classification reason: `stream:first_content_timeout` or
    /// `stream:stall_timeout`.
    pub fn reason(&self) -> &'static str {
        match self.kind {
            StreamTimeoutKind::FirstContent => "stream:first_content_timeout",
            StreamTimeoutKind::Stall => "stream:stall_timeout",
        }
    }
}

impl fmt::Display for StreamTimeout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            StreamTimeoutKind::FirstContent => {
                write!(f, "the stream sent no output within {:?}", self.after)
            }
            StreamTimeoutKind::Stall => {
                write!(f, "the stream stalled: no event for {:?}", self.after)
            }
        }
    }
}

impl std::error::Error for StreamTimeout {}
