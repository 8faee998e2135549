//! The state every clone of one breaker layer shares, and the slow path.
//!
//! The hot path (a closed breaker, nothing gated or parked) only reads: the
//! domain's published status word and whether any gate or park refuses.
//! Every write happens here, under the lock of the one scope that changed.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock, Weak};
use std::time::Duration;

use levee_core::breaker::{Admission, BreakerState, BreakerStatus, Outcome, Permit, Tripping};
use levee_core::classify::hints::RateLimits;
use levee_core::classify::{Classification, StatedLimit, Verdict};
use levee_core::clock::{Clock, Timestamp};
use levee_core::gate::{GateDecision, GateState};
use levee_core::pace::{InFlight, PaceCheck, Spacing};
use levee_core::park::ParkState;
use levee_core::transition::Transition;

use super::deadline::DeadlineTable;
use super::error::{Refused, RefusedBy};
use super::event::{EventSubscriber, Origin, ScopeEvent};
use super::hot::{DomainHot, model_tag};
use super::scope::{CallScopes, Scopes};
use super::settings::Settings;
use super::signal::{FLEET_ASK_WAIT, FleetSignal, FleetSignals};
use crate::clock::{TokioClock, hot_clock};
use crate::error::BoxError;
use crate::inline_str::ScopeKey;
use crate::registry::{Handle, Registry, SlotGuard};
use crate::striped::Striped;

/// A failure domain's breaker, with a way back to the layer's shared state
/// for response futures (which hold only a `Copy` handle).
#[derive(Debug)]
pub(crate) struct DomainCell {
    pub(crate) shared: Weak<Shared>,
    pub(crate) state: BreakerState,
    /// Under rolling tripping, the window and the layer's clock: what a
    /// success needs when all it does is count in the window
    /// ([`BreakerState::record_idle_success`]), so that it takes no way
    /// back to the layer, whose reference count every thread would write.
    pub(crate) rolling: Option<(Duration, TokioClock)>,
    /// A time (of the layer's clock) in the window's bucket that successes
    /// counted without the lock fall in: the bucket last opened to them.
    pub(crate) window_bucket: Option<Timestamp>,
}

pub(crate) type DomainHandle = Handle<DomainCell, DomainHot>;

/// Locks a failure domain's state, first handing it the successes its
/// rolling window counted without the lock: whatever the caller then
/// reads or changes (a failure's ratio, a transition that clears the
/// window) sees them.
pub(crate) fn lock_domain(handle: DomainHandle) -> Option<SlotGuard<DomainCell>> {
    let mut cell = handle.lock()?;
    if let Some(hot) = handle.hot() {
        // Taken even if this key opened no bucket yet: then they were
        // counted for the key that held the slot before, and are dropped.
        let successes = hot.take_window_successes();
        if let (Some((window, _)), Some(at)) = (cell.rolling, cell.window_bucket) {
            cell.state.add_window_successes(window, at, successes);
        }
    }
    Some(cell)
}

/// Spreads a domain's calls for `model` at the request limit a 429 states
/// in its body, as at one its headers report (a fleet's replica at its
/// share), when the layer spreads.
fn pace_stated(handle: DomainHandle, limit: StatedLimit, model: Option<&str>) {
    let Some(hot) = handle.hot() else {
        return;
    };
    let Some(check) = hot.pace_check().filter(PaceCheck::spreads) else {
        return;
    };
    if let Some(spacing) = Spacing::per(limit.requests(), limit.window()) {
        hot.set_spacing(spacing.times(check.share()), model_tag(model));
    }
}

impl DomainCell {
    /// After a plain success counted in the window at `now` under the
    /// lock: the rest of its bucket's successes may count without it.
    pub(crate) fn open_window_bucket(&mut self, hot: &DomainHot, window: Duration, now: Timestamp) {
        let Some((_, clock)) = self.rolling else {
            return;
        };
        let end = BreakerState::window_bucket_end(window, now);
        self.window_bucket = Some(now);
        hot.open_window_bucket(hot_clock().timestamp(clock.instant(end)));
    }
}

/// One settled call, as the slow path records it.
pub(crate) struct Report<'a> {
    pub(crate) handle: DomainHandle,
    pub(crate) permit: Permit,
    pub(crate) classification: &'a Classification,
    pub(crate) slow: bool,
    /// The call's scopes, named again from the failure domain's key.
    pub(crate) scopes: &'a CallScopes,
    /// Whether the failure domain's key carries the model.
    pub(crate) isolated: bool,
}

/// Counters of calls the breakers refused and of upstream failures by verdict.
#[derive(Debug, Default)]
pub(crate) struct Stats {
    /// Striped: a refusal is the hot path while a breaker is open.
    pub(crate) rejected_breaker: Striped,
    pub(crate) upstream: [AtomicU64; 6],
}

#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) settings: Settings,
    pub(crate) clock: TokioClock,
    pub(crate) domains: Registry<DomainCell, DomainHot>,
    pub(crate) gates: DeadlineTable<GateState>,
    pub(crate) parks: DeadlineTable<ParkState>,
    pub(crate) stats: Stats,
    /// Failure domains whose breaker is not closed (open, half-open or
    /// isolated), counted as each is published: a peek finding none, and
    /// no scope parked or gated, knows the answer without naming a scope.
    not_closed: AtomicU64,
    /// Of those, the ones refusing with no deadline: half-open or isolated.
    undated: AtomicU64,
    /// The latest cool-off end an open breaker published (nanoseconds).
    /// Once it has passed, and no breaker is half-open or isolated, no
    /// breaker refuses a call (the next call to an open one is its probe),
    /// so a domain that opened and was never called again does not keep
    /// every peek on the slow path.
    latest_open_until: AtomicU64,
    /// Bumped by every publish that leaves a breaker not closed, after the
    /// counts and the deadline: a peek that found every cool-off over
    /// records the epoch it checked (`all_over_at`), and trusts that
    /// answer, with no clock read, while the epoch stays the same.
    epoch: AtomicU64,
    all_over_at: AtomicU64,
    /// Subscribers added through the handle after the layer was built
    /// (a fleet sync): read on transitions only, and copied out before
    /// they are called, so a subscriber may subscribe another.
    watchers: RwLock<Arc<[EventSubscriber]>>,
    /// The fleet sync that counts failures across replicas and decides
    /// who probes: whether it wants streaks (under consecutive tripping
    /// only) and probe asks, read without its lock.
    pub(crate) coordinator: RwLock<Option<FleetSignals>>,
    pub(crate) streaks: AtomicBool,
    /// Whether a failover sends this layer shadow probes: a refusal looks
    /// for the mark only then.
    pub(crate) shadow_probes: AtomicBool,
    pub(crate) leased: AtomicBool,
    /// The replicas sharing the provider's limits, as the fleet counts
    /// them (1: none): every domain's pace check carries it.
    pace_share: AtomicU32,
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
            gates: DeadlineTable::new(max_keys),
            parks: DeadlineTable::new(max_keys),
            stats: Stats::default(),
            not_closed: AtomicU64::new(0),
            undated: AtomicU64::new(0),
            latest_open_until: AtomicU64::new(0),
            epoch: AtomicU64::new(1),
            all_over_at: AtomicU64::new(0),
            watchers: RwLock::new(Arc::from([])),
            coordinator: RwLock::new(None),
            streaks: AtomicBool::new(false),
            shadow_probes: AtomicBool::new(false),
            leased: AtomicBool::new(false),
            pace_share: AtomicU32::new(1),
            rng: Mutex::new(rng),
            weak: weak.clone(),
        })
    }

    pub(crate) fn rng(&self) -> std::sync::MutexGuard<'_, fastrand::Rng> {
        self.rng.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The handle of a failure domain, created on first use (or again after
    /// eviction) with its state already published: a fresh breaker under a
    /// rolling or custom tripping rule must hear its first successes.
    pub(crate) fn domain(&self, key: &str) -> DomainHandle {
        let config = &self.settings.breaker;
        self.domains.get_or_insert_evicting(
            key,
            |hot| {
                let state = BreakerState::new(config);
                hot.publish(&state, config);
                hot.set_pace_check(self.pace_check());
                DomainCell {
                    shared: self.weak.clone(),
                    state,
                    rolling: match config.tripping {
                        Tripping::Rolling { window, .. } => Some((window, self.clock)),
                        _ => None,
                    },
                    window_bucket: None,
                }
            },
            |cell, _| cell.state.is_idle(),
        )
    }

    /// The rejection of a call to a breaker that [`DomainHot::open_for`]
    /// found open: counted, without the lock.
    pub(crate) fn reject_open(&self, domain: impl ScopeKey, retry_after: Duration) -> BoxError {
        self.stats.rejected_breaker.add();
        Refused::new(RefusedBy::Breaker, domain, retry_after).into_error()
    }

    /// Admission through a breaker that is not closed (slow path).
    pub(crate) fn admit_breaker(&self, handle: DomainHandle) -> Result<Permit, BoxError> {
        let Some(mut cell) = lock_domain(handle) else {
            // Evicted between lookup and lock: only idle (closed) entries are,
            // and an outcome for a stale handle is ignored.
            return Ok(Permit::closed(0));
        };
        let now = self.clock.now();
        let config = &self.settings.breaker;
        let (admission, transition, ask) = if self.leased.load(Ordering::Relaxed) {
            cell.state.admit_in_fleet(config, now, FLEET_ASK_WAIT)
        } else {
            let (admission, transition) = cell.state.admit(config, now);
            (admission, transition, false)
        };
        self.publish(handle, &cell.state);
        let asking = ask.then(|| Box::<str>::from(cell.key()));
        let event = transition.map(|t| ScopeEvent::new(cell.key(), t));
        let result = match admission {
            Admission::Allowed(permit) => Ok(permit),
            Admission::Rejected { retry_after } => {
                self.stats.rejected_breaker.add();
                Err(Refused::new(RefusedBy::Breaker, cell.key(), retry_after).into_error())
            }
        };
        drop(cell);
        self.emit(event);
        if let Some(scope) = asking {
            self.signal(FleetSignal::ProbeWanted { scope: &scope });
        }
        result
    }

    /// Feeds one classified outcome to the breaker, gate and park (slow
    /// path). Returns until when the call's scopes now refuse calls, if
    /// the outcome left the breaker open or its gate or park closed.
    pub(crate) fn record(
        &self,
        mut cell: SlotGuard<DomainCell>,
        report: Report<'_>,
    ) -> Option<Timestamp> {
        let Report {
            handle,
            permit,
            classification,
            slow,
            scopes,
            isolated,
        } = report;
        let now = self.clock.now();
        let verdict = classification.verdict;
        if verdict != Verdict::Success {
            self.stats.upstream[verdict as usize].fetch_add(1, Ordering::Relaxed);
        }
        let outcome = Outcome::new(verdict, classification.reason.clone()).with_slow(slow);
        let (domain_key, domain) = cell.split();
        let config = &self.settings.breaker;
        let streak_before = domain.state.consecutive_failures();
        let was_closed = domain.state.status() == BreakerStatus::Closed;
        // Only a failure can open a breaker, so only a failure draws a
        // cool-off: a success takes no lock but its domain's.
        let transition = if outcome.is_failure() {
            let mut rng = self.rng();
            domain
                .state
                .record(config, domain_key, permit, &outcome, now, &mut rng)
        } else {
            let mut unused = fastrand::Rng::with_seed(0);
            domain
                .state
                .record(config, domain_key, permit, &outcome, now, &mut unused)
        };
        self.publish(handle, &domain.state);
        // A closed breaker's streak, for a fleet that counts failures
        // together: changed only on the failure path (or the success after).
        // The failure that opens it is told too: the others' breakers count
        // that streak toward theirs. Told under the lock, so in order.
        let failures = domain.state.consecutive_failures();
        if was_closed && failures != streak_before && self.streaks.load(Ordering::Relaxed) {
            self.signal(FleetSignal::Streak {
                scope: domain_key,
                failures,
            });
        }
        // An isolated breaker has no deadline: it reopens when closed by hand.
        let open_until = domain
            .state
            .open_until()
            .filter(|_| !domain.state.is_isolated());
        let breaker_event = transition.map(|t| {
            let model = scopes.resolve(domain_key, isolated).model();
            ScopeEvent::new(domain_key, t).caused_by(model)
        });
        // The gate and the park need the keys after the domain's lock is
        // given back: copied for those verdicts only.
        let domain_key = matches!(verdict, Verdict::Throttled | Verdict::Quota)
            .then(|| Box::<str>::from(domain_key));
        drop(cell);
        self.emit(breaker_event);

        let closed_until = domain_key.and_then(|domain_key| {
            let scopes = scopes.resolve(&domain_key, isolated);
            let (billing, model) = (scopes.billing_key(), scopes.model());
            match verdict {
                Verdict::Throttled => {
                    if let Some(limit) = classification.stated_limit {
                        pace_stated(handle, limit, model);
                    }
                    self.throttle(&scopes.quota_key(), billing, classification, model, now)
                }
                _ => self.park(billing, classification.wait, classification, model, now),
            }
        });
        // A call is admitted once every one of its scopes admits it.
        open_until.max(closed_until).filter(|at| *at > now)
    }

    /// Records what a response says is left of its quota scope's limits,
    /// and paces the scope if a limit is at its reserve (slow path: a limit
    /// near its reserve or half used).
    pub(crate) fn pace(
        &self,
        cell: SlotGuard<DomainCell>,
        scopes: &CallScopes,
        isolated: bool,
        limits: &RateLimits,
        in_flight: InFlight,
    ) {
        let now = self.clock.now();
        // The keys are named from the domain's, after its lock is given back.
        let domain_key = Box::<str>::from(cell.key());
        drop(cell);
        let scopes = scopes.resolve(&domain_key, isolated);
        let quota_key = scopes.quota_key();
        let cfg = &self.settings.pace;
        let paced = self
            .gates
            .update(&quota_key, now, |gate| {
                gate.pace(cfg, now, limits, in_flight)
            })
            .flatten();
        if let Some((_, transition)) = paced {
            self.emit_transition(&quota_key, transition, scopes.model());
        }
    }

    /// Refuses a call sent faster than its provider refills: gates its
    /// quota scope until a call is admitted again at that rate, with the
    /// reason `paced` (slow path: once per pause, the gate refuses the
    /// rest).
    #[cold]
    pub(crate) fn space(&self, scopes: &Scopes<'_>, until: Timestamp) -> BoxError {
        let now = self.clock.now();
        let quota_key = scopes.quota_key();
        let gated = self
            .gates
            .update(&quota_key, now, |gate| gate.space(now, until));
        let until = match gated {
            Some((until, transition)) => {
                self.emit_transition(&quota_key, transition, scopes.model());
                until
            }
            None => until,
        };
        self.gates.count_refusal();
        let wait = until.saturating_duration_since(now);
        Refused::new(RefusedBy::Gate, quota_key, wait).into_error()
    }

    /// Gives back what an unfinished call held (a dropped future).
    pub(crate) fn release(
        &self,
        mut cell: SlotGuard<DomainCell>,
        handle: DomainHandle,
        permit: Permit,
    ) {
        cell.state.release(permit);
        self.publish(handle, &cell.state);
    }

    /// The pace check of the layer's domains, with the fleet's share.
    fn pace_check(&self) -> Option<PaceCheck> {
        let share = self.pace_share.load(Ordering::Relaxed);
        self.settings.pace_check.map(|c| c.with_share(share))
    }

    /// The replicas the fleet counts sharing the provider's limits (1
    /// alone).
    pub(crate) fn replicas(&self) -> u32 {
        self.pace_share.load(Ordering::Relaxed)
    }

    /// The fleet counts `replicas` sharing the provider's limits: every
    /// domain paces on its share from its next report. Whether it changed.
    pub(crate) fn share_pacing(&self, replicas: u32) -> bool {
        let replicas = replicas.clamp(1, PaceCheck::MAX_SHARE);
        if self.pace_share.swap(replicas, Ordering::Relaxed) == replicas {
            return false;
        }
        let check = self.pace_check();
        for (_, handle) in self.domains.entries() {
            if let Some(hot) = handle.hot() {
                hot.set_pace_check(check);
            }
        }
        true
    }

    /// Publishes a domain's breaker for the hot path (under its lock).
    pub(crate) fn publish(&self, handle: DomainHandle, state: &BreakerState) {
        if let Some(hot) = handle.hot() {
            let before = hot.refusal_deadline();
            hot.publish(state, &self.settings.breaker);
            let after = hot.refusal_deadline();
            count(&self.not_closed, before.is_some(), after.is_some());
            count(&self.undated, before == Some(None), after == Some(None));
            if let Some(Some(until)) = after {
                self.latest_open_until
                    .fetch_max(until.as_nanos(), Ordering::Relaxed);
            }
            if after.is_some() {
                // After the counts and the deadline: a peek that reads this
                // epoch reads them too.
                self.epoch.fetch_add(1, Ordering::Release);
            }
        }
    }

    /// Whether nothing in the layer can refuse a call now: every breaker
    /// closed, or open with its cool-off over (only a closed, idle domain
    /// is ever evicted, so the counts are exact), and no scope parked or
    /// gated. Advice, as a peek is: the call decides.
    #[inline]
    pub(crate) fn refuses_nothing(&self) -> bool {
        (self.not_closed.load(Ordering::Relaxed) == 0 || self.every_cool_off_over())
            && !self.parks.is_active()
            && !self.gates.is_active()
    }

    /// Whether every breaker that is not closed is open with its cool-off
    /// over: none half-open or isolated, and the latest deadline passed.
    /// Time only moves on, so once true it stays true until a publish
    /// changes what is open: checked against the clock once per epoch.
    #[inline]
    fn every_cool_off_over(&self) -> bool {
        let epoch = self.epoch.load(Ordering::Acquire);
        self.all_over_at.load(Ordering::Relaxed) == epoch || self.check_cool_offs(epoch)
    }

    #[inline(never)]
    fn check_cool_offs(&self, epoch: u64) -> bool {
        let over = self.undated.load(Ordering::Relaxed) == 0
            && self.clock.now().as_nanos() >= self.latest_open_until.load(Ordering::Relaxed);
        if over {
            self.all_over_at.store(epoch, Ordering::Relaxed);
        }
        over
    }

    /// Gates the quota scope (or parks the billing scope, for a wait past
    /// the gate's cap); returns the deadline.
    fn throttle(
        &self,
        quota_key: &str,
        billing_key: &str,
        c: &Classification,
        model: Option<&str>,
        now: Timestamp,
    ) -> Option<Timestamp> {
        let decision = self.gates.update(quota_key, now, |gate| {
            let mut rng = self.rng();
            gate.throttle(&self.settings.gate, now, c.wait, &c.reason, &mut rng)
        });
        match decision {
            Some(GateDecision::Gated { until, transition }) => {
                self.emit_transition(quota_key, transition, model);
                Some(until)
            }
            Some(GateDecision::Park { wait }) => self.park(billing_key, Some(wait), c, model, now),
            None => None,
        }
    }

    /// Parks the billing scope; returns its reset.
    fn park(
        &self,
        billing_key: &str,
        wait: Option<Duration>,
        c: &Classification,
        model: Option<&str>,
        now: Timestamp,
    ) -> Option<Timestamp> {
        let parked = self.parks.update(billing_key, now, |park| {
            let transition = park.park(&self.settings.park, now, wait, &c.reason);
            (transition, park.until())
        });
        let (transition, until) = parked.unzip();
        self.emit_transition(billing_key, transition.flatten(), model);
        until.flatten()
    }

    /// Reports `scope`'s transition, if any, to the subscribers, naming
    /// the model of the call that caused it, if one did.
    pub(crate) fn emit_transition(
        &self,
        scope: &str,
        transition: Option<Transition>,
        model: Option<&str>,
    ) {
        self.emit(transition.map(|t| ScopeEvent::new(scope, t).caused_by(model)));
    }

    pub(crate) fn emit(&self, event: Option<ScopeEvent>) {
        if let Some(e) = event {
            let watchers = self
                .watchers
                .read()
                .unwrap_or_else(PoisonError::into_inner)
                .clone();
            e.emit(self.settings.subscribers.iter().chain(watchers.iter()));
        }
    }

    /// Adds a subscriber to every later event.
    pub(crate) fn watch(&self, subscriber: EventSubscriber) {
        let mut watchers = self
            .watchers
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        let mut all = watchers.to_vec();
        all.push(subscriber);
        *watchers = all.into();
    }

    // === Manual control and the fleet's (from the handle) ===

    /// Changes a domain's breaker by hand or for the fleet (`origin`).
    pub(crate) fn change_breaker(
        &self,
        key: &str,
        origin: Origin,
        op: impl FnOnce(&mut BreakerState, Timestamp, &mut fastrand::Rng) -> Option<Transition>,
    ) -> bool {
        let handle = self.domain(key);
        let Some(mut cell) = lock_domain(handle) else {
            return false;
        };
        let now = self.clock.now();
        let transition = op(&mut cell.state, now, &mut self.rng());
        self.publish(handle, &cell.state);
        drop(cell);
        self.emit(transition.map(|t| ScopeEvent::new(key, t).made_by(origin)));
        true
    }

    pub(crate) fn unpark(&self, key: &str, origin: Origin) -> bool {
        let now = self.clock.now();
        let transition = self
            .parks
            .update_existing(key, |park| park.unpark(now))
            .flatten();
        let changed = transition.is_some();
        self.emit(transition.map(|t| ScopeEvent::new(key, t).made_by(origin)));
        changed
    }
}

/// Counts a member in or out of a set as it enters or leaves it.
fn count(members: &AtomicU64, was: bool, is: bool) {
    match (was, is) {
        (false, true) => members.fetch_add(1, Ordering::Relaxed),
        (true, false) => members.fetch_sub(1, Ordering::Relaxed),
        _ => 0,
    };
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::breaker::{BreakerLayer, RequestHead};

    #[tokio::test(start_paused = true)]
    async fn refuses_nothing_follows_every_breaker_back_to_closed() {
        let handle = BreakerLayer::new().handle();
        let shared = &handle.shared;
        assert!(shared.refuses_nothing(), "a fresh layer");
        handle.open("api.openai.com");
        handle.isolate("api.anthropic.com");
        assert!(!shared.refuses_nothing(), "two domains not closed");
        handle.close("api.openai.com");
        assert!(!shared.refuses_nothing(), "one still isolated");
        // Opening an open domain again counts it once.
        handle.open("api.anthropic.com");
        handle.close("api.anthropic.com");
        assert!(shared.refuses_nothing(), "every breaker closed again");
    }

    #[tokio::test(start_paused = true)]
    async fn a_breaker_whose_cool_off_passed_uncalled_refuses_nothing_but_an_isolated_one_does() {
        let handle = BreakerLayer::new().handle();
        let shared = &handle.shared;
        let request = http::Request::get("https://api.openai.com/v1/chat/completions")
            .body(())
            .unwrap();
        let head = RequestHead::of(&request);
        handle.open("api.openai.com");
        assert!(!shared.refuses_nothing(), "cooling off");
        assert!(handle.admits(&head).is_err(), "the peek agrees");
        // Never called again: once its cool-off is over, the next call to
        // it would be its probe, so nothing refuses.
        tokio::time::advance(Duration::from_secs(3600)).await;
        assert!(shared.refuses_nothing(), "every cool-off over");
        assert!(handle.admits(&head).is_ok(), "the full peek agrees");
        // An isolated breaker has no deadline: it refuses until closed.
        handle.isolate("api.anthropic.com");
        tokio::time::advance(Duration::from_secs(3600)).await;
        assert!(!shared.refuses_nothing(), "one isolated");
        handle.close("api.anthropic.com");
        assert!(
            shared.refuses_nothing(),
            "the open one still over, the isolated one closed"
        );
        // A new open with a later deadline refuses again.
        handle.open("api.openai.com");
        assert!(!shared.refuses_nothing(), "opened again");
    }
}
