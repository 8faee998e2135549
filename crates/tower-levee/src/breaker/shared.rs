//! The state every clone of one breaker layer shares, and the slow path.
//!
//! The hot path (a closed breaker, nothing gated or parked) only reads: the
//! domain's published status word and two "anything active?" counters. Every
//! write happens here, under the lock of the one scope that changed.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use levee_core::breaker::{
    Admission, BreakerState, BreakerStatus, ISOLATED_RETRY_AFTER, Outcome, Permit,
};
use levee_core::classify::{Classification, Verdict};
use levee_core::clock::{Clock, Timestamp};
use levee_core::gate::{GateDecision, GateState};
use levee_core::park::ParkState;
use levee_core::registry::{Handle, Hot, Registry, SlotGuard};
use levee_core::transition::Transition;

use super::error::{CircuitOpen, Parked, Throttled};
use super::event::ScopeEvent;
use super::latency::LatencyHistogram;
use super::layer::Settings;
use crate::BoxError;
use crate::clock::TokioClock;
use crate::striped::Striped;

// === Hot words ===

const STATUS_MASK: u64 = 0b11;
const OPEN: u64 = 1;
const HALF_OPEN: u64 = 2;
/// Set when recording a success would change something (counts to reset, a
/// rolling window to feed): the success path must then take the lock.
const DIRTY: u64 = 0b100;
/// Held open by `isolate`: refused with no deadline to compare.
const ISOLATED: u64 = 0b1000;
const GENERATION_SHIFT: u32 = 4;

/// The published summary of a breaker: status and dirty bits, and the end
/// of an open breaker's cool-off so that rejections take no lock either.
#[derive(Debug, Default)]
pub(crate) struct DomainHot {
    word: AtomicU64,
    open_until: UntilHot,
    /// Time to first byte, when the layer estimates it.
    pub(crate) latency: LatencyHistogram,
}

impl Hot for DomainHot {
    fn reset(&self) {
        self.word.store(0, Ordering::Release);
        self.open_until.reset();
        self.latency.reset();
    }
}

impl DomainHot {
    /// A permit for a call that may go ahead without taking the lock: the
    /// breaker is closed. `None` sends the call down the slow path.
    #[inline]
    pub(crate) fn admit_closed(&self) -> Option<Permit> {
        let word = self.word.load(Ordering::Acquire);
        (word & STATUS_MASK == 0).then_some(Permit {
            generation: word >> GENERATION_SHIFT,
            probe: None,
            // Only probes carry a lease; a closed call needs no timestamp.
            admitted_at: Timestamp::ZERO,
        })
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

    fn publish(&self, state: &BreakerState, settings: &Settings) {
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
        let dirty = if state.quiescent(&settings.breaker) {
            0
        } else {
            DIRTY
        };
        let isolated = if state.is_isolated() { ISOLATED } else { 0 };
        let generation = state.generation() << GENERATION_SHIFT;
        self.word
            .store(status | dirty | isolated | generation, Ordering::Release);
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
    fn publish(&self, until: Option<Timestamp>) {
        let v = until.map_or(0, |t| t.as_nanos().saturating_add(1));
        self.until.store(v, Ordering::Release);
    }

    fn get(&self) -> Option<Timestamp> {
        match self.until.load(Ordering::Acquire) {
            0 => None,
            v => Some(Timestamp::from_nanos(v - 1)),
        }
    }
}

/// A failure domain's breaker, with a way back to the layer's shared state
/// for response futures (which hold only a `Copy` handle).
#[derive(Debug)]
pub(crate) struct DomainCell {
    pub(crate) shared: Weak<Shared>,
    pub(crate) state: BreakerState,
}

pub(crate) type DomainHandle = Handle<DomainCell, DomainHot>;

/// One settled call, as the slow path records it.
pub(crate) struct Report<'a> {
    pub(crate) handle: DomainHandle,
    pub(crate) permit: Permit,
    pub(crate) classification: &'a Classification,
    pub(crate) slow: bool,
    /// The failure domain's key (a copy: the slot is locked while recording).
    pub(crate) domain_key: &'a str,
    pub(crate) quota_key: &'a str,
    pub(crate) billing_key: &'a str,
}

// === Shared ===

/// Counters of calls Levee refused and of upstream failures by verdict.
#[derive(Debug, Default)]
pub(crate) struct Stats {
    /// Striped: a refusal is the hot path while a scope is out, and must
    /// not make every thread write one cache line.
    pub(crate) rejected_breaker: Striped,
    pub(crate) rejected_gate: Striped,
    pub(crate) rejected_park: Striped,
    pub(crate) upstream: [AtomicU64; 6],
}

#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) settings: Settings,
    pub(crate) clock: TokioClock,
    pub(crate) domains: Registry<DomainCell, DomainHot>,
    pub(crate) gates: Registry<GateState, UntilHot>,
    pub(crate) parks: Registry<ParkState, UntilHot>,
    /// Scopes gated / parked right now: zero lets the hot path skip their lookups.
    pub(crate) active_gates: AtomicUsize,
    pub(crate) active_parks: AtomicUsize,
    pub(crate) stats: Stats,
    rng: Mutex<fastrand::Rng>,
    weak: Weak<Shared>,
}

impl Shared {
    pub(crate) fn new(settings: Settings) -> Arc<Shared> {
        let max_keys = settings.max_keys;
        let rng = match settings.seed {
            Some(seed) => fastrand::Rng::with_seed(seed),
            None => fastrand::Rng::new(),
        };
        Arc::new_cyclic(|weak| Shared {
            settings,
            clock: TokioClock::new(),
            domains: Registry::new(max_keys),
            gates: Registry::new(max_keys),
            parks: Registry::new(max_keys),
            active_gates: AtomicUsize::new(0),
            active_parks: AtomicUsize::new(0),
            stats: Stats::default(),
            rng: Mutex::new(rng),
            weak: weak.clone(),
        })
    }

    fn rng(&self) -> std::sync::MutexGuard<'_, fastrand::Rng> {
        self.rng.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The handle of a failure domain, created on first use.
    pub(crate) fn domain(&self, key: &str) -> DomainHandle {
        self.domains.get_or_insert_evicting(
            key,
            || DomainCell {
                shared: self.weak.clone(),
                state: BreakerState::new(&self.settings.breaker),
            },
            |cell| cell.state.is_idle(),
        )
    }

    /// The rejection of a call to a breaker that [`DomainHot::open_for`]
    /// found open: counted, without the lock.
    pub(crate) fn reject_open(&self, scope: Arc<str>, retry_after: Duration) -> BoxError {
        self.stats.rejected_breaker.add();
        CircuitOpen::new(scope, retry_after).into()
    }

    /// Admission through a breaker that is not closed (slow path).
    pub(crate) fn admit_breaker(&self, handle: DomainHandle) -> Result<Permit, BoxError> {
        let Some(mut cell) = handle.lock() else {
            // Evicted between lookup and lock: only idle (closed) entries are,
            // and an outcome for a stale handle is ignored.
            return Ok(Permit {
                generation: 0,
                probe: None,
                admitted_at: Timestamp::ZERO,
            });
        };
        let now = self.clock.now();
        let (admission, transition) = cell.state.admit(&self.settings.breaker, now);
        if let Some(hot) = handle.hot() {
            hot.publish(&cell.state, &self.settings);
        }
        let event = transition.map(|t| ScopeEvent::new(cell.key(), t));
        let result = match admission {
            Admission::Allowed(permit) => Ok(permit),
            Admission::Rejected { retry_after } => {
                self.stats.rejected_breaker.add();
                Err(CircuitOpen::new(cell.key(), retry_after).into())
            }
        };
        drop(cell);
        self.emit(event);
        result
    }

    /// Refuses the call if `key`'s billing scope is parked.
    pub(crate) fn check_park(&self, key: &str) -> Result<(), BoxError> {
        let Some(h) = self.parks.get(key) else {
            return Ok(());
        };
        let Some(until) = h.hot().and_then(UntilHot::get) else {
            return Ok(());
        };
        let now = self.clock.now();
        if now < until {
            self.stats.rejected_park.add();
            return Err(Parked::new(key, until.saturating_duration_since(now)).into());
        }
        // The reset has passed: reopen (no probe), once.
        let Some(mut park) = h.lock() else {
            return Ok(());
        };
        let (_, transition) = park.check(now);
        if let Some(hot) = h.hot() {
            hot.publish(park.until());
        }
        let event = transition.map(|t| {
            self.active_parks.fetch_sub(1, Ordering::Relaxed);
            ScopeEvent::new(key, t)
        });
        drop(park);
        self.emit(event);
        Ok(())
    }

    /// Refuses the call if `key`'s quota scope is gated.
    pub(crate) fn check_gate(&self, key: &str) -> Result<(), BoxError> {
        let Some(h) = self.gates.get(key) else {
            return Ok(());
        };
        let Some(until) = h.hot().and_then(UntilHot::get) else {
            return Ok(());
        };
        let now = self.clock.now();
        if now < until {
            self.stats.rejected_gate.add();
            return Err(Throttled::new(key, until.saturating_duration_since(now)).into());
        }
        let Some(mut gate) = h.lock() else {
            return Ok(());
        };
        let (_, transition) = gate.check(now);
        if let Some(hot) = h.hot() {
            hot.publish(gate.until());
        }
        let event = transition.map(|t| {
            self.active_gates.fetch_sub(1, Ordering::Relaxed);
            ScopeEvent::new(key, t)
        });
        drop(gate);
        self.emit(event);
        Ok(())
    }

    /// Feeds one classified outcome to the breaker, gate and park (slow path).
    pub(crate) fn record(&self, mut cell: SlotGuard<DomainCell>, report: Report<'_>) {
        let Report {
            handle,
            permit,
            classification,
            slow,
            domain_key,
            quota_key,
            billing_key,
        } = report;
        let now = self.clock.now();
        let verdict = classification.verdict;
        if verdict != Verdict::Success {
            self.stats.upstream[verdict as usize].fetch_add(1, Ordering::Relaxed);
        }
        let outcome = Outcome {
            verdict,
            cause: classification.reason.clone(),
            slow,
        };
        let transition = {
            let mut rng = self.rng();
            cell.state.record(
                &self.settings.breaker,
                domain_key,
                permit,
                &outcome,
                now,
                &mut rng,
            )
        };
        if let Some(hot) = handle.hot() {
            hot.publish(&cell.state, &self.settings);
        }
        let breaker_event = transition.map(|t| ScopeEvent::new(cell.key(), t));
        drop(cell);
        self.emit(breaker_event);

        match verdict {
            Verdict::Throttled => self.throttle(quota_key, billing_key, classification, now),
            Verdict::Quota => self.park(billing_key, classification.wait, classification, now),
            _ => {}
        }
    }

    /// Gives back what an unfinished call held (a dropped future).
    pub(crate) fn release(
        &self,
        mut cell: SlotGuard<DomainCell>,
        handle: DomainHandle,
        permit: Permit,
    ) {
        cell.state.release(permit);
        if let Some(hot) = handle.hot() {
            hot.publish(&cell.state, &self.settings);
        }
    }

    fn throttle(&self, quota_key: &str, billing_key: &str, c: &Classification, now: Timestamp) {
        let h = self
            .gates
            .get_or_insert_evicting(quota_key, GateState::default, |g| g.is_idle(now));
        let Some(mut gate) = h.lock() else {
            return;
        };
        let decision = {
            let mut rng = self.rng();
            gate.throttle(&self.settings.gate, now, c.wait, &c.reason, &mut rng)
        };
        match decision {
            GateDecision::Gated { until, transition } => {
                if let Some(hot) = h.hot() {
                    hot.publish(Some(until));
                }
                drop(gate);
                if let Some(t) = transition {
                    self.active_gates.fetch_add(1, Ordering::Relaxed);
                    self.emit(Some(ScopeEvent::new(quota_key, t)));
                }
            }
            GateDecision::Park { wait } => {
                drop(gate);
                self.park(billing_key, Some(wait), c, now);
            }
        }
    }

    fn park(&self, billing_key: &str, wait: Option<Duration>, c: &Classification, now: Timestamp) {
        let h = self
            .parks
            .get_or_insert_evicting(billing_key, ParkState::default, |p| p.is_idle());
        let Some(mut park) = h.lock() else {
            return;
        };
        let transition = park.park(&self.settings.park, now, wait, &c.reason);
        if let Some(hot) = h.hot() {
            hot.publish(park.until());
        }
        drop(park);
        if let Some(t) = transition {
            if t.from != t.to {
                self.active_parks.fetch_add(1, Ordering::Relaxed);
            }
            self.emit(Some(ScopeEvent::new(billing_key, t)));
        }
    }

    pub(crate) fn emit(&self, event: Option<ScopeEvent>) {
        if let Some(e) = event {
            e.emit(&self.settings.subscribers);
        }
    }

    // === Manual control (from the handle) ===

    pub(crate) fn manual_breaker(
        &self,
        key: &str,
        op: impl FnOnce(&mut BreakerState, Timestamp, &mut fastrand::Rng) -> Option<Transition>,
    ) -> bool {
        let handle = self.domain(key);
        let Some(mut cell) = handle.lock() else {
            return false;
        };
        let now = self.clock.now();
        let transition = op(&mut cell.state, now, &mut self.rng());
        if let Some(hot) = handle.hot() {
            hot.publish(&cell.state, &self.settings);
        }
        let event = transition.map(|t| ScopeEvent::new(key, t));
        drop(cell);
        self.emit(event);
        true
    }

    pub(crate) fn unpark(&self, key: &str) -> bool {
        let Some(h) = self.parks.get(key) else {
            return false;
        };
        let Some(mut park) = h.lock() else {
            return false;
        };
        let transition = park.unpark(self.clock.now());
        if let Some(hot) = h.hot() {
            hot.publish(park.until());
        }
        drop(park);
        let changed = transition.is_some();
        if changed {
            self.active_parks.fetch_sub(1, Ordering::Relaxed);
        }
        self.emit(transition.map(|t| ScopeEvent::new(key, t)));
        changed
    }
}
