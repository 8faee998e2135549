//! Time as the state machines see it.
//!
//! The state machines never read a clock themselves: every method that needs
//! the time takes a [`Timestamp`], nanoseconds since an origin chosen by the
//! [`Clock`]. That keeps them deterministic under test (a [`ManualClock`]) and
//! lets the tower layers use `tokio::time::Instant`, so `tokio::time::pause()`
//! drives them too.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// A point in time: nanoseconds since the origin of the [`Clock`] that made it.
///
/// Timestamps from different clocks are not comparable.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(u64);

impl Timestamp {
    /// The clock's origin.
    pub const ZERO: Timestamp = Timestamp(0);

    /// A timestamp `nanos` nanoseconds after the origin.
    pub const fn from_nanos(nanos: u64) -> Self {
        Timestamp(nanos)
    }

    /// Nanoseconds since the origin.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    /// The timestamp `d` later, saturating at the end of time.
    pub fn saturating_add(self, d: Duration) -> Self {
        Timestamp(self.0.saturating_add(duration_nanos(d)))
    }

    /// Time from `earlier` to `self`, zero if `earlier` is later.
    pub fn saturating_duration_since(self, earlier: Timestamp) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }
}

#[doc(hidden)]
/// A duration in nanoseconds, saturating at `u64::MAX` (584 years).
pub fn duration_nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

#[doc(hidden)]
/// `d` rounded up to the next whole millisecond (saturating): how a wait
/// is applied everywhere, so that a wait is never cut short by the
/// millisecond resolution of the caller that sleeps on it.
pub fn ceil_millis(d: Duration) -> Duration {
    let sub_ms = d.subsec_nanos() % 1_000_000;
    if sub_ms == 0 {
        d
    } else {
        d.saturating_add(Duration::from_nanos(u64::from(1_000_000 - sub_ms)))
    }
}

/// A source of [`Timestamp`]s.
pub trait Clock: Send + Sync + fmt::Debug {
    /// The current time.
    fn now(&self) -> Timestamp;
}

/// The monotonic system clock (`std::time::Instant`).
#[derive(Clone, Copy, Debug)]
pub struct SystemClock {
    origin: std::time::Instant,
}

impl SystemClock {
    /// A clock whose origin is now.
    pub fn new() -> Self {
        SystemClock {
            origin: std::time::Instant::now(),
        }
    }
}

impl Default for SystemClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        Timestamp(duration_nanos(self.origin.elapsed()))
    }
}

/// A clock that moves only when told to. Clones share the same time.
#[derive(Clone, Debug, Default)]
pub struct ManualClock {
    nanos: Arc<AtomicU64>,
}

impl ManualClock {
    /// A clock at its origin.
    pub fn new() -> Self {
        Self::default()
    }

    /// Moves the clock forward by `d`.
    pub fn advance(&self, d: Duration) {
        self.nanos.fetch_add(duration_nanos(d), Ordering::SeqCst);
    }

    /// Sets the clock to `t`.
    pub fn set(&self, t: Timestamp) {
        self.nanos.store(t.0, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        Timestamp(self.nanos.load(Ordering::SeqCst))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_moves_only_when_advanced() {
        let clock = ManualClock::new();
        assert_eq!(clock.now(), Timestamp::ZERO);
        clock.advance(Duration::from_millis(1500));
        assert_eq!(clock.now().as_nanos(), 1_500_000_000);
        let t = clock.now().saturating_add(Duration::from_secs(1));
        assert_eq!(
            t.saturating_duration_since(clock.now()),
            Duration::from_secs(1)
        );
        assert_eq!(clock.now().saturating_duration_since(t), Duration::ZERO);
    }

    #[test]
    fn waits_round_up_to_the_millisecond_and_saturate() {
        assert_eq!(
            ceil_millis(Duration::from_micros(1_500_001)),
            Duration::from_millis(1501)
        );
        assert_eq!(ceil_millis(Duration::from_secs(2)), Duration::from_secs(2));
        assert_eq!(
            ceil_millis(Duration::from_nanos(1)),
            Duration::from_millis(1)
        );
        assert_eq!(ceil_millis(Duration::ZERO), Duration::ZERO);
        assert_eq!(ceil_millis(Duration::MAX), Duration::MAX);
    }

    #[test]
    fn timestamp_saturates_instead_of_overflowing() {
        let t = Timestamp::from_nanos(u64::MAX - 1).saturating_add(Duration::MAX);
        assert_eq!(t.as_nanos(), u64::MAX);
    }
}
