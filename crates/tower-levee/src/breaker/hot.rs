//! The words the hot path reads without a lock: a failure domain's
//! published status, and a gate's or park's published deadline.
//!
//! Every write happens on the slow path, under the lock of the one scope
//! that changed, right after its state machine moved: a reader sees either
//! the state before or the state after, never a mix.

use std::sync::OnceLock;
use std::time::Duration;

use levee_core::breaker::{
    BreakerConfig, BreakerState, BreakerStatus, ISOLATED_RETRY_AFTER, Permit,
};
use levee_core::clock::{Clock, Timestamp};
use levee_core::pace::{InFlight, PaceCheck, Spacing};

use super::latency::LatencyHistogram;
use crate::clock::hot_clock;
use crate::registry::Hot;
use crate::striped::Striped;
use crate::sync::{AtomicU32, AtomicU64, Ordering};

const STATUS_MASK: u64 = 0b11;
const OPEN: u64 = 1;
const HALF_OPEN: u64 = 2;
/// Set when recording a success would change something (counts to reset, a
/// rolling window to feed): the success path must then take the lock.
const DIRTY: u64 = 0b100;
/// Held open by `isolate`: refused with no deadline to compare.
const ISOLATED: u64 = 0b1000;
/// Set while a plain success only adds to the rolling window (closed,
/// nothing counted to clear): it may be counted without the lock.
const WINDOW_ONLY: u64 = 0b1_0000;
const GENERATION_SHIFT: u32 = 5;

/// The published summary of a breaker: status and dirty bits, and the end
/// of an open breaker's cool-off so that rejections take no lock either.
#[derive(Debug, Default)]
pub(crate) struct DomainHot {
    word: AtomicU64,
    open_until: UntilHot,
    /// Calls in flight, counted only while pacing one of the domain's
    /// quota scopes needs them (`counting` is set): between two answers,
    /// what the provider has not counted yet.
    in_flight: AtomicU32,
    in_flight_tokens: AtomicU64,
    counting: AtomicU32,
    /// The layer's [`PaceCheck`], packed ([`PaceCheck::to_bits`]); 0 when
    /// the layer does not pace. Set when the domain is made.
    pace_check: AtomicU64,
    /// The provider's rate as a [`Spacing`] interval in nanoseconds, 0
    /// while none is known (or the layer does not spread).
    spacing: AtomicU64,
    /// When the next request is due at that rate (nanoseconds of the
    /// layer's clock): the one word spreading writes per call.
    next_due: AtomicU64,
    /// Which model's limit the rate is ([`model_tag`]): a provider limits
    /// each model on its own, so calls for another model sharing the domain
    /// are not spread at this one's rate.
    spacing_model: AtomicU64,
    /// Time to first byte, when the layer estimates it.
    pub(crate) latency: LatencyHistogram,
    /// Time to a stream's first output, when the layer estimates it.
    pub(crate) first_content: LatencyHistogram,
    /// Under rolling tripping, the plain successes counted without the
    /// lock ([`count_window_success`](Self::count_window_success)): made
    /// on the domain's first, kept with the slot (its total only grows).
    window_successes: OnceLock<Striped>,
    /// When the window's bucket those successes fall in ends
    /// ([`hot_clock`] nanoseconds); 0 while none is open.
    window_until: AtomicU64,
    /// How many of `window_successes` the state has been handed.
    window_handed: AtomicU64,
}

impl Hot for DomainHot {
    fn reset(&self) {
        self.word.store(0, Ordering::Release);
        self.open_until.reset();
        self.latency.reset();
        self.first_content.reset();
        self.in_flight.store(0, Ordering::Relaxed);
        self.in_flight_tokens.store(0, Ordering::Relaxed);
        self.counting.store(0, Ordering::Relaxed);
        self.pace_check.store(0, Ordering::Relaxed);
        self.spacing.store(0, Ordering::Relaxed);
        self.next_due.store(0, Ordering::Relaxed);
        self.spacing_model.store(0, Ordering::Relaxed);
        // The next key counts without the lock once its own first success
        // opens a bucket; until then, whatever its state is handed was
        // counted for the last key, and is dropped (`lock_domain`).
        self.window_until.store(0, Ordering::Relaxed);
    }
}

impl DomainHot {
    /// A permit for a call that may go ahead without taking the lock: the
    /// breaker is closed. `None` sends the call down the slow path.
    #[inline]
    pub(crate) fn admit_closed(&self) -> Option<Permit> {
        let word = self.word.load(Ordering::Acquire);
        (word & STATUS_MASK == 0).then_some(Permit::closed(word >> GENERATION_SHIFT))
    }

    /// Whether the breaker is closed.
    #[inline]
    pub(crate) fn is_closed(&self) -> bool {
        self.word.load(Ordering::Acquire) & STATUS_MASK == 0
    }

    /// What the published breaker refuses: `None` when closed; else until
    /// its cool-off ends (`Some(Some(until))`, open), or with no deadline
    /// (`Some(None)`: half-open, admitting probes only, or isolated).
    pub(crate) fn refusal_deadline(&self) -> Option<Option<Timestamp>> {
        (!self.is_closed()).then(|| self.open_until.get())
    }

    /// Whether a plain success needs no recording (closed and clean).
    #[inline]
    pub(crate) fn success_is_noop(&self) -> bool {
        self.word.load(Ordering::Acquire) & (STATUS_MASK | DIRTY) == 0
    }

    /// How long an open breaker still refuses calls, read without the lock;
    /// `None` sends the call down the slow path (closed, half-open, isolated,
    /// or the cool-off is over and a probe may go).
    #[inline]
    pub(crate) fn open_for(&self, now: impl FnOnce() -> Timestamp) -> Option<Duration> {
        let word = self.word.load(Ordering::Acquire);
        if word & STATUS_MASK != OPEN {
            return None;
        }
        if word & ISOLATED != 0 {
            return Some(ISOLATED_RETRY_AFTER);
        }
        let until = self.open_until.get()?;
        let now = now();
        (now < until).then(|| until.saturating_duration_since(now))
    }

    /// Counts a plain success of a call admitted at `generation` without
    /// the lock, if all it does is add to the rolling window's bucket that
    /// is open now. `false` sends it down the locked path: no bucket is
    /// open or it has ended, the breaker is not closed, a failure is
    /// counted, or the call was admitted before the breaker last moved.
    #[inline]
    pub(crate) fn count_window_success(&self, generation: u64) -> bool {
        let word = self.word.load(Ordering::Acquire);
        if word & (STATUS_MASK | WINDOW_ONLY) != WINDOW_ONLY
            || word >> GENERATION_SHIFT != generation
        {
            return false;
        }
        let until = self.window_until.load(Ordering::Acquire);
        let Some(successes) = self.window_successes.get() else {
            return false;
        };
        if until == 0 || hot_clock().now().as_nanos() >= until {
            return false;
        }
        successes.add();
        true
    }

    /// Lets successes count without the lock until `until` (a
    /// [`hot_clock`] timestamp), when the window's current bucket ends.
    /// Under the domain's lock, right after a success counted there.
    pub(crate) fn open_window_bucket(&self, until: Timestamp) {
        self.window_successes.get_or_init(Striped::default);
        self.window_until.store(until.as_nanos(), Ordering::Release);
    }

    /// The successes counted without the lock since the last time the
    /// state was handed them (under the lock).
    pub(crate) fn take_window_successes(&self) -> u64 {
        let total = self.window_successes.get().map_or(0, Striped::sum);
        let handed = self.window_handed.swap(total, Ordering::Relaxed);
        total.saturating_sub(handed)
    }

    /// Sets the layer's pacing check (when the domain is made).
    pub(crate) fn set_pace_check(&self, check: Option<PaceCheck>) {
        self.pace_check
            .store(check.map_or(0, PaceCheck::to_bits), Ordering::Relaxed);
    }

    /// The layer's pacing check, if it paces.
    pub(crate) fn pace_check(&self) -> Option<PaceCheck> {
        PaceCheck::from_bits(self.pace_check.load(Ordering::Relaxed))
    }

    /// Learns the provider's rate for `model` (its [`model_tag`]) from a
    /// report. The rate of a model other than the one spread so far takes
    /// over, its count afresh; the same model's is written only when it
    /// moves by more than an eighth (reports of one rate differ by rounding).
    pub(crate) fn set_spacing(&self, spacing: Spacing, model: u64) {
        let new = spacing.interval().as_nanos() as u64;
        if self.spacing_model.load(Ordering::Relaxed) != model {
            self.spacing_model.store(model, Ordering::Relaxed);
            self.next_due.store(0, Ordering::Relaxed);
            self.spacing.store(new, Ordering::Relaxed);
            return;
        }
        let old = self.spacing.load(Ordering::Relaxed);
        if new.abs_diff(old) > old / 8 {
            self.spacing.store(new, Ordering::Relaxed);
        }
    }

    /// Takes the call's place in the provider's rate, when one is known for
    /// its model (`model`, computed only then): `Err` with the instant a
    /// call is admitted again if it came too soon (nothing is taken then).
    /// One load when no rate is known.
    #[inline]
    pub(crate) fn space(
        &self,
        model: impl FnOnce() -> u64,
        now: impl FnOnce() -> Timestamp,
    ) -> Result<(), Timestamp> {
        let interval = self.spacing.load(Ordering::Relaxed);
        if interval == 0 || self.spacing_model.load(Ordering::Relaxed) != model() {
            return Ok(());
        }
        self.space_at(interval, now())
    }

    #[inline(never)]
    fn space_at(&self, interval: u64, now: Timestamp) -> Result<(), Timestamp> {
        let Some(spacing) = Spacing::from_interval(Duration::from_nanos(interval)) else {
            return Ok(());
        };
        let mut due = self.next_due.load(Ordering::Relaxed);
        loop {
            let next = spacing.admit(Timestamp::from_nanos(due), now)?;
            match self.next_due.compare_exchange_weak(
                due,
                next.as_nanos(),
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Ok(()),
                Err(seen) => due = seen,
            }
        }
    }

    /// Whether calls are counted in flight (pacing needs it).
    #[inline]
    pub(crate) fn is_counting(&self) -> bool {
        self.counting.load(Ordering::Relaxed) != 0
    }

    /// Counts a call admitted in flight, with its estimated tokens.
    pub(crate) fn count_in_flight(&self, tokens: u64) {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        if tokens > 0 {
            self.in_flight_tokens.fetch_add(tokens, Ordering::Relaxed);
        }
    }

    /// A counted call's answer arrived (or it ended without one).
    pub(crate) fn landed(&self, tokens: u64) {
        self.in_flight.fetch_sub(1, Ordering::Relaxed);
        if tokens > 0 {
            self.in_flight_tokens.fetch_sub(tokens, Ordering::Relaxed);
        }
    }

    /// What is counted in flight now.
    pub(crate) fn in_flight(&self) -> InFlight {
        InFlight::new(
            u64::from(self.in_flight.load(Ordering::Relaxed)),
            self.in_flight_tokens.load(Ordering::Relaxed),
        )
    }

    /// Starts or stops counting calls in flight (pacing a scope near its
    /// limit needs the count; one far from it does not). A write only when
    /// it changes.
    pub(crate) fn set_counting(&self, on: bool) {
        if (self.counting.load(Ordering::Relaxed) != 0) != on {
            self.counting.store(u32::from(on), Ordering::Relaxed);
        }
    }

    /// Publishes `state` (under its slot's lock).
    pub(crate) fn publish(&self, state: &BreakerState, config: &BreakerConfig) {
        // The deadline first: a reader that sees OPEN sees its deadline.
        self.open_until.publish(match state.status() {
            BreakerStatus::Open if !state.is_isolated() => state.open_until(),
            _ => None,
        });
        let status = match state.status() {
            BreakerStatus::Closed => 0,
            BreakerStatus::Open => OPEN,
            BreakerStatus::HalfOpen => HALF_OPEN,
        };
        let dirty = if state.quiescent(config) { 0 } else { DIRTY };
        let isolated = if state.is_isolated() { ISOLATED } else { 0 };
        let window_only = if state.success_only_counts() {
            WINDOW_ONLY
        } else {
            0
        };
        let generation = state.generation() << GENERATION_SHIFT;
        self.word.store(
            status | dirty | isolated | window_only | generation,
            Ordering::Release,
        );
    }
}

/// A deadline published for the hot path: nanoseconds + 1, 0 when clear.
#[derive(Debug, Default)]
pub(crate) struct UntilHot {
    until: AtomicU64,
}

impl Hot for UntilHot {
    fn reset(&self) {
        self.until.store(0, Ordering::Release);
    }
}

impl UntilHot {
    pub(crate) fn publish(&self, until: Option<Timestamp>) {
        let v = until.map_or(0, |t| t.as_nanos().saturating_add(1));
        self.until.store(v, Ordering::Release);
    }

    pub(crate) fn get(&self) -> Option<Timestamp> {
        match self.until.load(Ordering::Acquire) {
            0 => None,
            v => Some(Timestamp::from_nanos(v - 1)),
        }
    }
}

/// A model name as a word for [`DomainHot::space`] (FNV-1a; 1 for none):
/// a collision only spreads two models at one's rate.
pub(crate) fn model_tag(model: Option<&str>) -> u64 {
    model.map_or(1, |m| {
        m.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        })
    })
}
