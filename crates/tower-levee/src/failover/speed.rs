//! Speed across the failover order: hedging late first calls and
//! demoting slow targets ([`Hedging`] explains both).

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use levee_core::clock::duration_nanos;
use levee_core::config_error::ConfigError;

use crate::breaker::LatencyHistogram;

/// The default share of successes that may be hedged.
pub const DEFAULT_HEDGE_RATIO: f64 = 0.05;

/// The longest hedge delay or demotion a setting may ask for.
const MAX_SETTING: Duration = Duration::from_secs(3600);

/// Responses a target's distribution needs before its calls are hedged.
const MIN_SAMPLES: u64 = 20;

/// The delay is read again from the histogram every this many records.
const REFRESH_EVERY: u32 = 8;

/// Marks a hedge: the copy of a request a failover sends to another target
/// because the first call was late (in the copy's extensions), so that a
/// service below can tell it from a caller's first call.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct HedgeCopy;

/// How a failover hedges late first calls and demotes slow targets.
///
/// A breaker counts failures, and a target in a brownout does not fail: it
/// answers, in ten times its usual time. A slow-call threshold catches it
/// only after calls have waited that long. So the failover watches each
/// first call's time to first byte (to the first output, for a stream the
/// breaker layer holds), against the target's own recent distribution:
///
/// - **Hedge.** A call still waiting past its target's recent 95th
///   percentile is sent once more, to the next target that admits it; the
///   first success wins and the other call is dropped (cancelled). This is
///   the hedged request of Dean and Barroso, [The Tail at
///   Scale](https://research.google/pubs/the-tail-at-scale/) (CACM 2013),
///   bounded by its own budget: at most [`ratio`](Hedging::ratio) of
///   successes (5%), with a small [`burst`](Hedging::burst). A stream is
///   hedged only before its first output reaches the caller: the breaker
///   layer holds it until then, and the race is decided there.
/// - **Demote.** A target whose calls pass that mark
///   [`demote_after`](Hedging::demote_after) times in a row (3) with no call
///   answered in time between them is slow, not failing: it is tried after
///   every other target for [`demotion`](Hedging::demotion) (1 s, doubling
///   while it stays slow, up to [`max_demotion`](Hedging::max_demotion)).
///   Then one request tries it again, the *trial*, only when the hedge
///   budget can cover it, so a still-slow target costs that caller one
///   hedge delay; the trial answered in time puts the target back in its
///   place. With [shadow probes](super::ShadowProbes), copies of the
///   requests that pass it over go to it meanwhile, and one answered in
///   time makes its trial due at once.
/// - **Choose the faster in a pool.** Two members of a
///   [pool](super::Target::pool) are drawn by what each has left, and the
///   one clearly faster (a peak-sensitive moving average of its time to
///   first byte, per share left, 1.25× or more) serves: power of two
///   choices over a peak EWMA, as `tower::balance` with `PeakEwma`.
///   `tower::balance` itself does not fit: it balances ready services by
///   load, while a pool's members are read for admission (gates, parks,
///   breakers) and weighted by what their providers say is left.
///
/// The clock is read only for a call that is not answered at its first
/// poll; such a call, answered, updates its target's latency histogram and
/// moving average. A failover without hedging reads one word per target it
/// considers.
///
/// ```
/// use std::time::Duration;
/// use tower_levee::failover::{Failover, Hedging};
///
/// let builder = Failover::<String, String>::builder()
///     .hedging(Hedging::new().ratio(0.05).floor(Duration::from_millis(200)));
/// # let _ = builder;
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Hedging {
    pub(crate) ratio: f64,
    pub(crate) burst: u32,
    pub(crate) quantile: f64,
    pub(crate) floor: Duration,
    pub(crate) cap: Duration,
    pub(crate) demote_after: u32,
    pub(crate) demotion: Duration,
    pub(crate) max_demotion: Duration,
}

impl Default for Hedging {
    fn default() -> Self {
        Hedging {
            ratio: DEFAULT_HEDGE_RATIO,
            burst: 20,
            quantile: 0.95,
            floor: Duration::from_millis(50),
            cap: Duration::from_secs(30),
            demote_after: 3,
            demotion: Duration::from_secs(1),
            max_demotion: Duration::from_secs(2),
        }
    }
}

impl Hedging {
    /// The defaults: hedge past the target's p95 (at least 50 ms, at most
    /// 30 s), 5% of successes with a burst of 20, demote after 3 late
    /// calls in a row for 1 s, doubling up to 2 s.
    pub fn new() -> Self {
        Hedging::default()
    }

    /// The most hedges, as a share of successes (0.05), beyond the
    /// [`burst`](Self::burst). 0 allows the burst only, once; slow targets
    /// are still demoted, and their trials, uncovered, cost their callers
    /// the target's slowness.
    pub fn ratio(mut self, ratio: f64) -> Self {
        self.ratio = ratio;
        self
    }

    /// Hedges allowed at once beyond the ratio's accrual (20; 0 counts
    /// as 1, the least the accrual can reach): the first
    /// calls of a slowdown, before demotion moves traffic: about the
    /// requests a second times the hedge delay, plus the few that demote.
    pub fn burst(mut self, burst: u32) -> Self {
        self.burst = burst;
        self
    }

    /// Which percentile of the target's recent time to first byte a call
    /// must pass to count as late (0.95).
    pub fn quantile(mut self, quantile: f64) -> Self {
        self.quantile = quantile;
        self
    }

    /// The least delay before a hedge (50 ms).
    pub fn floor(mut self, floor: Duration) -> Self {
        self.floor = floor;
        self
    }

    /// The most delay before a hedge (30 s).
    pub fn cap(mut self, cap: Duration) -> Self {
        self.cap = cap;
        self
    }

    /// Late calls in a row that demote a target (3).
    pub fn demote_after(mut self, calls: u32) -> Self {
        self.demote_after = calls;
        self
    }

    /// How long a slow target is tried last before its first trial (1 s).
    pub fn demotion(mut self, demotion: Duration) -> Self {
        self.demotion = demotion;
        self
    }

    /// The longest demotion, after trials that were late (2 s).
    pub fn max_demotion(mut self, demotion: Duration) -> Self {
        self.max_demotion = demotion;
        self
    }

    /// Checks every field; errors name it as `names` does.
    pub(crate) fn validate(&self, names: &FieldNames) -> Result<(), ConfigError> {
        if !(0.0..=1.0).contains(&self.ratio) {
            return Err(ConfigError::new(
                names.ratio,
                format!("must be within 0..=1, got {}", self.ratio),
            ));
        }
        if !(self.quantile > 0.0 && self.quantile < 1.0) {
            return Err(ConfigError::new(
                names.quantile,
                format!("must be within 0..1, got {}", self.quantile),
            ));
        }
        if self.cap.is_zero() || self.cap > MAX_SETTING {
            return Err(ConfigError::new(
                names.cap,
                format!("must be within 0..=1h and not zero, got {:?}", self.cap),
            ));
        }
        if self.floor > self.cap {
            return Err(ConfigError::new(
                names.floor,
                format!(
                    "must not exceed the cap ({:?}), got {:?}",
                    self.cap, self.floor
                ),
            ));
        }
        if self.demote_after == 0 {
            return Err(ConfigError::new(
                names.demote_after,
                "must be at least 1, got 0",
            ));
        }
        if self.demotion.is_zero() {
            return Err(ConfigError::new(
                names.demotion,
                "must be greater than zero, got 0s",
            ));
        }
        if self.max_demotion > MAX_SETTING {
            return Err(ConfigError::new(
                names.max_demotion,
                format!("must be at most 1h, got {:?}", self.max_demotion),
            ));
        }
        if self.max_demotion < self.demotion {
            return Err(ConfigError::new(
                names.max_demotion,
                format!(
                    "must be at least the demotion ({:?}), got {:?}",
                    self.demotion, self.max_demotion
                ),
            ));
        }
        Ok(())
    }
}

/// What a validation error calls each field of [`Hedging`].
pub(crate) struct FieldNames {
    pub(crate) ratio: &'static str,
    pub(crate) quantile: &'static str,
    pub(crate) floor: &'static str,
    pub(crate) cap: &'static str,
    pub(crate) demote_after: &'static str,
    pub(crate) demotion: &'static str,
    pub(crate) max_demotion: &'static str,
}

impl FieldNames {
    /// As [`FailoverBuilder::hedging`](super::FailoverBuilder::hedging) names them.
    pub(crate) const BUILDER: FieldNames = FieldNames {
        ratio: "hedging.ratio",
        quantile: "hedging.quantile",
        floor: "hedging.floor",
        cap: "hedging.cap",
        demote_after: "hedging.demote_after",
        demotion: "hedging.demotion",
        max_demotion: "hedging.max_demotion",
    };
}

/// A failover's hedging: its settings, budget and count.
#[derive(Debug)]
pub(crate) struct HedgeState {
    pub(crate) config: Hedging,
    budget: Mutex<Budget>,
    /// Hedges sent.
    pub(crate) sent: AtomicU64,
}

#[derive(Debug)]
struct Budget {
    tokens: f64,
    /// Successes counted when the tokens were last topped up.
    served: u64,
}

impl HedgeState {
    pub(crate) fn new(config: Hedging) -> Self {
        HedgeState {
            budget: Mutex::new(Budget {
                tokens: f64::from(config.burst),
                served: 0,
            }),
            config,
            sent: AtomicU64::new(0),
        }
    }

    /// Takes one hedge from the budget, topped up from `served` (every
    /// success so far); `false` if none is left.
    pub(crate) fn try_take(&self, served: u64) -> bool {
        let mut budget = self.top_up(served);
        if budget.tokens < 1.0 {
            return false;
        }
        budget.tokens -= 1.0;
        self.sent.fetch_add(1, Ordering::Relaxed);
        true
    }

    /// Gives back a hedge taken but not sent.
    pub(crate) fn give_back(&self) {
        let mut budget = self.budget.lock().unwrap_or_else(PoisonError::into_inner);
        budget.tokens = (budget.tokens + 1.0).min(self.cap());
        self.sent.fetch_sub(1, Ordering::Relaxed);
    }

    /// Whether a hedge is left, without taking it.
    pub(crate) fn available(&self, served: u64) -> bool {
        self.top_up(served).tokens >= 1.0
    }

    fn cap(&self) -> f64 {
        f64::from(self.config.burst.max(1))
    }

    fn top_up(&self, served: u64) -> std::sync::MutexGuard<'_, Budget> {
        let mut budget = self.budget.lock().unwrap_or_else(PoisonError::into_inner);
        let new = served.saturating_sub(budget.served);
        budget.served = budget.served.max(served);
        budget.tokens = (budget.tokens + new as f64 * self.config.ratio).min(self.cap());
        budget
    }
}

/// One target's speed: its recent time to first byte, and whether it is
/// demoted.
#[derive(Debug, Default)]
pub(crate) struct TargetSpeed {
    latency: LatencyHistogram,
    /// Records since the delay was last read.
    records: AtomicU32,
    /// The hedge delay in nanoseconds; 0 until enough responses.
    delay: AtomicU64,
    /// Late calls since the last call answered in time.
    late_streak: AtomicU32,
    /// `(deadline + 1) << 1 | trial`, nanoseconds since the failover's
    /// origin: demoted until the deadline, or holding a trial until it; 0
    /// when not demoted.
    demoted: AtomicU64,
    /// Demotions since the target was last fast, for the doubling.
    demotions: AtomicU32,
    /// A peak-sensitive moving average of its time to first byte, in
    /// nanoseconds (0 before any), and when it was last updated.
    ewma: AtomicU64,
    ewma_at: AtomicU64,
}

/// The weight of each new time to first byte in the moving average (a
/// slower one replaces it whole: the average follows peaks at once).
const EWMA_WEIGHT: f64 = 0.125;

/// How fast a target's average fades toward zero while it answers nothing
/// (as `tower::load::PeakEwma`'s decay): a target passed over for being
/// slow is tried again within about this long.
const EWMA_DECAY: Duration = Duration::from_secs(10);

/// What a pick reads of a target's demotion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Standing {
    /// In its place.
    InPlace,
    /// Tried after every other target.
    Demoted,
    /// Demoted, its trial due: in its place for the request that claims it.
    Trial,
}

/// The latest deadline a demotion word holds: far beyond any demotion
/// (they are capped at an hour), so the encoding never overflows.
const MAX_DEADLINE: u64 = u64::MAX >> 3;

/// A demotion word: `(deadline + 1) << 1 | trial`.
fn encode(deadline: u64, trial: bool) -> u64 {
    ((deadline.min(MAX_DEADLINE) + 1) << 1) | u64::from(trial)
}

/// The deadline of a non-zero demotion word.
fn deadline(word: u64) -> u64 {
    (word >> 1).saturating_sub(1)
}

impl TargetSpeed {
    /// Whether the target is demoted: tried after the others until a trial
    /// answers in time (the clock says whether its trial is due).
    #[inline(always)]
    pub(crate) fn is_marked(&self) -> bool {
        self.demoted.load(Ordering::Relaxed) != 0
    }

    /// The delay after which a first call is late; `None` until the target
    /// answered enough calls.
    pub(crate) fn delay(&self) -> Option<Duration> {
        match self.delay.load(Ordering::Relaxed) {
            0 => None,
            nanos => Some(Duration::from_nanos(nanos)),
        }
    }

    /// Where a demoted target stands at `now`: still demoted, or due a
    /// trial if `trial_ok` (a hedge can cover it). Read only: the request
    /// that calls it claims the trial ([`claim_trial`](Self::claim_trial)).
    pub(crate) fn standing(&self, now: u64, trial_ok: impl FnOnce() -> bool) -> Standing {
        let word = self.demoted.load(Ordering::Relaxed);
        if word == 0 {
            return Standing::InPlace;
        }
        // A trial a copy made due (its deadline 0) goes even with no hedge
        // to cover it: the copy was in time.
        if now < deadline(word) || (deadline(word) != 0 && !trial_ok()) {
            return Standing::Demoted;
        }
        Standing::Trial
    }

    /// Claims the trial of a target [`standing`](Self::standing) found
    /// due, for the request about to call it; `false` if another request
    /// claimed it first (or the target is demoted again). A trial holds
    /// the target for twice its delay: answered in time, it ends the
    /// demotion before then; late, it demotes it again; never called (its
    /// request refused or dropped), it lapses and the next trial is due.
    pub(crate) fn claim_trial(&self, now: u64) -> bool {
        let word = self.demoted.load(Ordering::Relaxed);
        if word == 0 {
            return true; // back in place meanwhile
        }
        if now < deadline(word) {
            return false;
        }
        let hold = duration_nanos(self.delay().unwrap_or(Duration::from_secs(1)) * 2);
        let claimed = encode(now.saturating_add(hold), true);
        self.demoted
            .compare_exchange(word, claimed, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    }

    /// A first call answered with success after `latency`; `late` if it
    /// passed the delay. A call in time ends a demotion.
    pub(crate) fn answered(
        &self,
        config: &Hedging,
        latency: Duration,
        late: bool,
        now: u64,
    ) -> bool {
        self.latency.record(latency);
        self.note_speed(latency, now);
        if self
            .records
            .fetch_add(1, Ordering::Relaxed)
            .is_multiple_of(REFRESH_EVERY)
        {
            self.refresh_delay(config);
        }
        if late {
            return false;
        }
        if self.late_streak.load(Ordering::Relaxed) != 0 {
            self.late_streak.store(0, Ordering::Relaxed);
        }
        // Read first, so that a target in place costs no write; swapped,
        // so that one of two calls in time restores it.
        if self.demoted.load(Ordering::Relaxed) == 0 || self.demoted.swap(0, Ordering::Relaxed) == 0
        {
            return false;
        }
        self.demotions.store(0, Ordering::Relaxed);
        true
    }

    /// Whether a request at `now` passes the target over: demoted, and not
    /// holding a trial (one claimed and not lapsed).
    pub(crate) fn passed_over(&self, now: u64) -> bool {
        let word = self.demoted.load(Ordering::Relaxed);
        word != 0 && (word & 1 == 0 || now >= deadline(word))
    }

    /// Makes a demoted target's trial due now (a copy found it fast: a
    /// caller's trial, which a hedge covers, confirms it); `false` if it is
    /// in place, or holds a trial already.
    pub(crate) fn trial_due(&self) -> bool {
        self.demoted
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |word| {
                (word != 0 && word & 1 == 0 && deadline(word) != 0).then(|| encode(0, false))
            })
            .is_ok()
    }

    /// Folds a time to first byte into the moving average: a slower one
    /// replaces it, a faster one moves it by [`EWMA_WEIGHT`]. Racing
    /// updates may lose one: an estimate.
    fn note_speed(&self, latency: Duration, now: u64) {
        let sample = duration_nanos(latency).max(1);
        let faded = self.cost(now);
        let next = if faded == 0.0 || sample as f64 >= faded {
            sample
        } else {
            (faded + (sample as f64 - faded) * EWMA_WEIGHT) as u64
        };
        self.ewma.store(next.max(1), Ordering::Relaxed);
        self.ewma_at.store(now, Ordering::Relaxed);
    }

    /// The moving average as of `now`, faded by the time since it was
    /// last updated; 0 before any answer (so an unknown target is tried).
    pub(crate) fn cost(&self, now: u64) -> f64 {
        let ewma = self.ewma.load(Ordering::Relaxed);
        if ewma == 0 {
            return 0.0;
        }
        let idle = now.saturating_sub(self.ewma_at.load(Ordering::Relaxed)) as f64;
        ewma as f64 * (-idle / duration_nanos(EWMA_DECAY) as f64).exp()
    }

    fn refresh_delay(&self, config: &Hedging) {
        if let Some((samples, bound)) = self.latency.upper_quantile(config.quantile)
            && samples >= MIN_SAMPLES
        {
            let delay = bound.clamp(config.floor, config.cap);
            self.delay
                .store(duration_nanos(delay).max(1), Ordering::Relaxed);
        }
    }

    /// A first call passed the delay at `now`: the demotion it starts or
    /// renews, if any, and whether it starts one (the target was in place).
    pub(crate) fn late(&self, config: &Hedging, now: u64) -> Option<(Duration, bool)> {
        let streak = self.late_streak.fetch_add(1, Ordering::Relaxed) + 1;
        let word = self.demoted.load(Ordering::Relaxed);
        let trial = word & 1 == 1;
        if word != 0 && !trial {
            return None; // demoted already: a call sent before it
        }
        if word == 0 && streak < config.demote_after {
            return None;
        }
        let doublings = self.demotions.load(Ordering::Relaxed).min(16);
        let period = config
            .demotion
            .saturating_mul(1 << doublings)
            .min(config.max_demotion);
        let until = now.saturating_add(duration_nanos(period));
        // One late call demotes: of two at once, the other finds it done.
        self.demoted
            .compare_exchange(
                word,
                encode(until, false),
                Ordering::Relaxed,
                Ordering::Relaxed,
            )
            .ok()?;
        self.demotions.fetch_add(1, Ordering::Relaxed);
        Some((period, word == 0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trained(config: &Hedging, ms: u64) -> TargetSpeed {
        let speed = TargetSpeed::default();
        for _ in 0..40 {
            speed.answered(config, Duration::from_millis(ms), false, 0);
        }
        speed
    }

    #[test]
    fn no_delay_before_enough_responses() {
        let config = Hedging::new();
        let speed = TargetSpeed::default();
        for _ in 0..MIN_SAMPLES - 2 {
            speed.answered(&config, Duration::from_millis(500), false, 0);
        }
        assert_eq!(speed.delay(), None);
    }

    #[test]
    fn the_delay_bounds_the_targets_usual_latency() {
        let config = Hedging::new();
        let speed = trained(&config, 800);
        let delay = speed.delay().expect("trained");
        assert!(delay >= Duration::from_millis(800), "{delay:?}");
        assert!(delay <= Duration::from_millis(1200), "{delay:?}");
    }

    #[test]
    fn late_calls_in_a_row_demote_and_a_call_in_time_restores() {
        let config = Hedging::new();
        let speed = trained(&config, 500);
        let s = 1_000_000_000;
        assert_eq!(speed.late(&config, s), None);
        assert_eq!(speed.late(&config, s), None);
        assert_eq!(speed.late(&config, s), Some((Duration::from_secs(1), true)));
        assert_eq!(speed.standing(s, || true), Standing::Demoted);
        assert!(!speed.claim_trial(s));
        // Late calls sent before the demotion do not extend it.
        assert_eq!(speed.late(&config, s), None);
        // After it, a trial is due; one request claims it, the next finds
        // it held.
        assert_eq!(speed.standing(2 * s, || true), Standing::Trial);
        assert!(speed.claim_trial(2 * s));
        assert_eq!(speed.standing(2 * s, || true), Standing::Demoted);
        assert!(!speed.claim_trial(2 * s));
        // A late trial demotes again, for twice as long (capped at 2 s).
        assert_eq!(
            speed.late(&config, 3 * s),
            Some((Duration::from_secs(2), false))
        );
        assert_eq!(speed.standing(4 * s, || true), Standing::Demoted);
        assert_eq!(speed.standing(5 * s, || false), Standing::Demoted);
        assert_eq!(speed.standing(5 * s, || true), Standing::Trial);
        assert!(speed.claim_trial(5 * s));
        // A trial answered in time ends the demotion.
        assert!(speed.answered(&config, Duration::from_millis(500), false, 0));
        assert_eq!(speed.standing(5 * s, || true), Standing::InPlace);
        assert!(!speed.is_marked());
        assert!(!speed.is_marked());
    }

    #[test]
    fn a_copy_in_time_makes_the_trial_due_and_a_lapsed_trial_is_passed_over_again() {
        let config = Hedging::new();
        let speed = trained(&config, 500);
        let s = 1_000_000_000;
        assert!(!speed.trial_due(), "in place: no trial to make due");
        assert!(!speed.passed_over(s));
        for _ in 0..3 {
            speed.late(&config, s);
        }
        assert!(speed.passed_over(s));
        assert_eq!(speed.standing(s, || true), Standing::Demoted);
        // A copy in time: the trial is due at once, demotion or not, and
        // goes even with no hedge left to cover it.
        assert_eq!(speed.standing(s, || false), Standing::Demoted);
        assert!(speed.trial_due());
        assert_eq!(speed.standing(s, || true), Standing::Trial);
        assert_eq!(speed.standing(s, || false), Standing::Trial);
        assert!(speed.claim_trial(s));
        // Held by its trial: no copy beside it, nor another trial due.
        assert!(!speed.passed_over(s));
        assert!(!speed.trial_due());
        // A trial never called lapses after twice the delay: passed over
        // again, and copies go.
        let lapsed = s + duration_nanos(speed.delay().unwrap() * 2);
        assert!(speed.passed_over(lapsed));
        assert!(speed.is_marked(), "still demoted until a call in time");
    }

    #[test]
    fn a_call_in_time_between_late_ones_keeps_the_target_in_place() {
        let config = Hedging::new();
        let speed = trained(&config, 500);
        for _ in 0..10 {
            assert_eq!(speed.late(&config, 0), None);
            assert_eq!(speed.late(&config, 0), None);
            speed.answered(&config, Duration::from_millis(400), false, 0);
        }
        assert!(!speed.is_marked());
    }

    #[test]
    fn the_average_follows_a_slowdown_at_once_and_a_recovery_gradually() {
        let config = Hedging::new();
        let speed = TargetSpeed::default();
        assert_eq!(speed.cost(0), 0.0, "unknown: tried first");
        let ms = |n: u64| Duration::from_millis(n);
        speed.answered(&config, ms(500), false, 0);
        speed.answered(&config, ms(2000), false, 0);
        assert_eq!(speed.cost(0), 2e9, "a peak replaces the average");
        speed.answered(&config, ms(500), false, 0);
        let after_one = speed.cost(0);
        assert!(after_one > 1.7e9 && after_one < 2e9, "{after_one}");
        // Left alone, the average fades: a passed-over target is retried.
        let later = duration_nanos(EWMA_DECAY) * 3;
        assert!(speed.cost(later) < after_one / 10.0);
    }

    #[test]
    fn the_budget_allows_the_burst_then_the_ratio_of_successes() {
        let state = HedgeState::new(Hedging::new().burst(2).ratio(0.1));
        assert!(state.try_take(0));
        assert!(state.try_take(0));
        assert!(!state.try_take(0));
        assert!(!state.try_take(9));
        assert!(state.try_take(10));
        assert!(!state.available(10));
        state.give_back();
        assert!(state.available(10));
        assert_eq!(state.sent.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn invalid_settings_name_their_field() {
        let names = &FieldNames::BUILDER;
        let err = Hedging::new().ratio(1.5).validate(names).unwrap_err();
        assert!(err.to_string().contains("hedging.ratio"), "{err}");
        let err = Hedging::new()
            .floor(Duration::from_secs(2))
            .cap(Duration::from_secs(1))
            .validate(names)
            .unwrap_err();
        assert!(err.to_string().contains("hedging.floor"), "{err}");
        let err = Hedging::new().demote_after(0).validate(names).unwrap_err();
        assert!(err.to_string().contains("hedging.demote_after"), "{err}");
    }
}
