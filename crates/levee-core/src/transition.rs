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
//! Every state is a [`State`]; its name ([`State::as_str`]) is a stable
//! string, shared with the drill's reports and carried by a transition:
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
#[non_exhaustive]
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

crate::named!(Mechanism);

/// The state of one scope of one mechanism: the one list of state names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum State {
    /// A breaker that admits calls and counts their failures.
    Closed,
    /// A breaker that refuses calls until its cool-off ends (or, isolated,
    /// until it is closed by hand).
    Open,
    /// A breaker admitting its probes.
    HalfOpen,
    /// A throttle gate that admits calls.
    Clear,
    /// A throttle gate closed until the provider's wait has passed.
    Gated,
    /// A billing scope that admits calls.
    Active,
    /// A billing scope refusing calls until its quota resets.
    Parked,
}

impl State {
    /// Every state, breaker first, then gate, then park.
    pub const ALL: [State; 7] = [
        State::Closed,
        State::Open,
        State::HalfOpen,
        State::Clear,
        State::Gated,
        State::Active,
        State::Parked,
    ];

    /// The stable name: `closed`, `open`, `half_open`, `clear`, `gated`,
    /// `active` or `parked`.
    pub const fn as_str(self) -> &'static str {
        match self {
            State::Closed => "closed",
            State::Open => "open",
            State::HalfOpen => "half_open",
            State::Clear => "clear",
            State::Gated => "gated",
            State::Active => "active",
            State::Parked => "parked",
        }
    }

    /// Parses [`State::as_str`]'s names.
    pub fn from_name(name: &str) -> Option<State> {
        State::ALL.into_iter().find(|s| s.as_str() == name)
    }

    /// The mechanism the state belongs to.
    pub const fn mechanism(self) -> Mechanism {
        match self {
            State::Closed | State::Open | State::HalfOpen => Mechanism::Breaker,
            State::Clear | State::Gated => Mechanism::Gate,
            State::Active | State::Parked => Mechanism::Park,
        }
    }

    /// Whether the scope refuses calls outright in this state: an open
    /// breaker, a closed gate, a parked billing scope. (A half-open
    /// breaker admits its probes.)
    pub const fn refuses(self) -> bool {
        matches!(self, State::Open | State::Gated | State::Parked)
    }
}

crate::named!(State);

/// One change of state of one mechanism for one key.
///
/// The key itself is not part of the transition: the state machines hold the
/// state of a single key and do not know its name; the registry adds it.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Transition {
    /// The state before.
    pub from: State,
    /// The state after, of the same mechanism ([`Transition::mechanism`]).
    pub to: State,
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
    /// A transition of `to`'s mechanism from `from` to `to`, with no
    /// deadline, no cause and no failure count.
    pub fn new(from: State, to: State, at: Timestamp, reason: impl Into<String>) -> Self {
        debug_assert_eq!(from.mechanism(), to.mechanism(), "one mechanism");
        Transition {
            from,
            to,
            at,
            until: None,
            reason: reason.into(),
            cause: None,
            consecutive_failures: 0,
        }
    }

    /// The mechanism that changed state: its states' own.
    pub const fn mechanism(&self) -> Mechanism {
        self.to.mechanism()
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

// By hand, to show the mechanism beside the states as when it was a field.
impl fmt::Debug for Transition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Transition")
            .field("mechanism", &self.mechanism())
            .field("from", &self.from)
            .field("to", &self.to)
            .field("at", &self.at)
            .field("until", &self.until)
            .field("reason", &self.reason)
            .field("cause", &self.cause)
            .field("consecutive_failures", &self.consecutive_failures)
            .finish()
    }
}

impl fmt::Display for Transition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} -> {}: {}",
            self.mechanism(),
            self.from,
            self.to,
            self.reason
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
            State::Closed,
            State::Open,
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

    #[test]
    fn every_state_name_reads_back_and_belongs_to_one_mechanism() {
        for state in State::ALL {
            assert_eq!(State::from_name(state.as_str()), Some(state));
            let t = Transition::new(state, state, Timestamp::ZERO, "");
            assert_eq!(
                (t.mechanism(), t.from, t.to),
                (state.mechanism(), state, state)
            );
        }
        assert_eq!(State::from_name("half-open"), None);
        assert_eq!(State::Open, "open");
        assert_eq!("open", State::Open);
        assert_eq!(Mechanism::Gate, "gate");
        assert_eq!("gate", Mechanism::Gate);
        assert!(State::Parked.refuses() && !State::HalfOpen.refuses());
    }
}
