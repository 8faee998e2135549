//! The tokio clock the layers run on.

use std::sync::LazyLock;
use std::time::Duration;

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
        self.origin + Duration::from_nanos(t.as_nanos())
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

/// One clock for every layer, for deadlines published to readers that
/// cannot reach their layer's clock (a response future settling a call):
/// such a deadline is written and read in its timestamps.
pub(crate) fn hot_clock() -> &'static TokioClock {
    static CLOCK: LazyLock<TokioClock> = LazyLock::new(|| {
        // A year back, so that no instant a runtime reads later, paused
        // (whose clock starts at its creation) or not, comes before it.
        let now = Instant::now();
        let origin = [365 * 24 * 3600, 24 * 3600, 3600, 60, 1]
            .into_iter()
            .find_map(|secs| now.checked_sub(Duration::from_secs(secs)))
            .unwrap_or(now);
        TokioClock { origin }
    });
    &CLOCK
}
