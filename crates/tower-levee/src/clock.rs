//! The tokio clock the layers run on.

use levee_core::clock::{Clock, Timestamp, duration_nanos};
use tokio::time::Instant;

/// A [`Clock`] over `tokio::time::Instant`, so `tokio::time::pause()` and
/// `advance()` drive every Levee state machine in tests.
#[derive(Clone, Copy, Debug)]
pub struct TokioClock {
    origin: Instant,
}

impl TokioClock {
    /// A clock whose origin is now.
    pub fn new() -> Self {
        TokioClock {
            origin: Instant::now(),
        }
    }

    /// The timestamp of a tokio instant.
    pub fn timestamp(&self, at: Instant) -> Timestamp {
        Timestamp::from_nanos(duration_nanos(at.saturating_duration_since(self.origin)))
    }

    /// The tokio instant of a timestamp.
    pub fn instant(&self, t: Timestamp) -> Instant {
        self.origin + std::time::Duration::from_nanos(t.as_nanos())
    }
}

impl Default for TokioClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for TokioClock {
    fn now(&self) -> Timestamp {
        self.timestamp(Instant::now())
    }
}
