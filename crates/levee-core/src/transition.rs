//! State transitions, as every mechanism reports them.
//!
//! The state machines do no IO, so they cannot log or call a subscriber
//! themselves. Instead every method that changes a state returns the change as
//! a [`Transition`]: the tower layer turns it into a `tracing` event and a
//! subscriber callback, adding the key it was operating on. A method returns
//! `Some` exactly when the state *name* changed (`closed` → `open`, `clear` →
//! `gated`, ...); extending a deadline or re-counting inside the same state is
//! not a transition, which keeps the event stream free of noise during a storm
//! of 429s.
//!
//! State names are stable strings, shared with the drill's reports:
//!
//! | mechanism | states |
//! |---|---|
//! | [`Mechanism::Breaker`] | `closed`, `open`, `half_open` |
//! | [`Mechanism::Gate`] | `clear`, `gated` |
//! | [`Mechanism::Park`] | `active`, `parked` |

use std::fmt;
use std::time::Duration;

use crate::clock::Timestamp;

/// Which mechanism changed state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mechanism {
    /// The availability/credential breaker.
    Breaker,
    /// The throttle gate of a quota scope.
    Gate,
    /// The park table of a billing scope.
    Park,
}

impl Mechanism {
    /// `"breaker"`, `"gate"` or `"park"`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Mechanism::Breaker => "breaker",
            Mechanism::Gate => "gate",
            Mechanism::Park => "park",
        }
    }
}

impl fmt::Display for Mechanism {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One change of state of one mechanism for one key.
///
/// The key itself is not part of the transition: the state machines hold the
/// state of a single key and do not know its name; the registry adds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transition {
    /// The mechanism that changed state.
    pub mechanism: Mechanism,
    /// The state before, e.g. `"closed"`.
    pub from: &'static str,
    /// The state after, e.g. `"open"`.
    pub to: &'static str,
    /// When the change happened (the `now` passed to the method).
    pub at: Timestamp,
    /// Until when the new state holds, when it has a deadline: the end of a
    /// breaker's cool-off, a gate's deadline, a park's reset. `None` for
    /// states without one (closed, half-open, clear, active, isolated).
    pub until: Option<Timestamp>,
    /// A sentence for humans, e.g.
    /// `"opened after 5 consecutive availability failures (status:503)"`.
    pub reason: String,
    /// The machine-readable reason of the outcome that caused the change
    /// (e.g. `"status:503"`), `None` for manual and timed changes.
    pub cause: Option<String>,
    /// The breaker's count of consecutive failures when it changed state;
    /// 0 for the gate and the park table (throttles and quotas are not failures).
    pub consecutive_failures: u32,
}

impl Transition {
    /// A transition with no deadline, no cause and no failure count.
    pub fn new(
        mechanism: Mechanism,
        from: &'static str,
        to: &'static str,
        at: Timestamp,
        reason: impl Into<String>,
    ) -> Self {
        Transition {
            mechanism,
            from,
            to,
            at,
            until: None,
            reason: reason.into(),
            cause: None,
            consecutive_failures: 0,
        }
    }

    /// Sets [`until`](Transition::until).
    pub fn with_until(mut self, until: Option<Timestamp>) -> Self {
        self.until = until;
        self
    }

    /// Sets [`cause`](Transition::cause).
    pub fn with_cause(mut self, cause: Option<String>) -> Self {
        self.cause = cause;
        self
    }

    /// Sets [`consecutive_failures`](Transition::consecutive_failures).
    pub fn with_consecutive_failures(mut self, n: u32) -> Self {
        self.consecutive_failures = n;
        self
    }
}

impl fmt::Display for Transition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} -> {}: {}",
            self.mechanism, self.from, self.to, self.reason
        )
    }
}

/// A short human duration for reasons: `250ms`, `5.2s`, `1m26s`, `2h5m`, `1d3h`.
pub(crate) fn human(d: Duration) -> String {
    let secs = d.as_secs();
    if secs == 0 {
        return format!("{}ms", d.as_millis());
    }
    if secs < 60 {
        let tenths = d.subsec_millis() / 100;
        return if tenths == 0 {
            format!("{secs}s")
        } else {
            format!("{secs}.{tenths}s")
        };
    }
    let (value, unit, rest, rest_unit) = if secs < 3600 {
        (secs / 60, "m", secs % 60, "s")
    } else if secs < 86_400 {
        (secs / 3600, "h", secs % 3600 / 60, "m")
    } else {
        (secs / 86_400, "d", secs % 86_400 / 3600, "h")
    };
    if rest == 0 {
        format!("{value}{unit}")
    } else {
        format!("{value}{unit}{rest}{rest_unit}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_durations_are_short_and_readable() {
        assert_eq!(human(Duration::from_millis(250)), "250ms");
        assert_eq!(human(Duration::from_millis(5_250)), "5.2s");
        assert_eq!(human(Duration::from_secs(30)), "30s");
        assert_eq!(human(Duration::from_millis(86_400)), "1m26s");
        assert_eq!(human(Duration::from_secs(900)), "15m");
        assert_eq!(human(Duration::from_secs(7_500)), "2h5m");
        assert_eq!(human(Duration::from_secs(97_200)), "1d3h");
    }

    #[test]
    fn transition_displays_mechanism_states_and_reason() {
        let t = Transition::new(
            Mechanism::Breaker,
            "closed",
            "open",
            Timestamp::ZERO,
            "opened manually: maintenance",
        );
        assert_eq!(
            t.to_string(),
            "breaker closed -> open: opened manually: maintenance"
        );
        assert_eq!(Mechanism::Gate.as_str(), "gate");
        assert_eq!(Mechanism::Park.to_string(), "park");
    }
}
