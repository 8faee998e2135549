//! The throttle gates and the parks: two tables of scopes that refuse
//! calls until a deadline, kept by one generic [`DeadlineTable`].
//!
//! A scope's deadline is published for the hot path ([`UntilHot`]), and the
//! table counts the scopes that refuse: while none does, admission skips
//! the lookup entirely. The count follows each entry's state, so it stays
//! right however the entry changes (re-throttled, re-parked after its
//! deadline passed unnoticed, unparked by hand, or evicted).

use std::fmt;

use levee_core::clock::Timestamp;
use levee_core::gate::GateState;
use levee_core::park::ParkState;
use levee_core::transition::Transition;

use super::error::{Refused, RefusedBy};
use super::hot::UntilHot;
use crate::error::BoxError;
use crate::inline_str::ScopeKey;
use crate::registry::{Handle, IDLE_AGE, Pressure, Registry};
use crate::striped::Striped;
use crate::sync::{AtomicU64, AtomicUsize, Ordering};

/// A scope state with a deadline: a quota scope's gate, a billing scope's park.
pub(crate) trait Deadline: Default + Send + 'static {
    /// Until when the scope refuses calls (until a check finds it passed).
    fn until(&self) -> Option<Timestamp>;

    /// Reopens the scope if its deadline has passed by `now`, with the
    /// transition that says so.
    fn reopen(&mut self, now: Timestamp) -> Option<Transition>;

    /// Whether the entry may be evicted at `now`, under `pressure`.
    fn is_idle(&self, now: Timestamp, pressure: Pressure) -> bool;

    /// What a refusal by this table is.
    const REFUSED_BY: RefusedBy;

    /// This table's lookup among a service clone's cached ones.
    fn cached(lookups: &mut Lookups) -> &mut Option<Lookup<Self>>;
}

impl Deadline for GateState {
    fn until(&self) -> Option<Timestamp> {
        GateState::until(self)
    }
    fn reopen(&mut self, now: Timestamp) -> Option<Transition> {
        self.check(now).1
    }
    /// Clear; and below the cap, not gated within [`IDLE_AGE`] either: its
    /// time gated in the last hour is the scope's capacity signal.
    fn is_idle(&self, now: Timestamp, pressure: Pressure) -> bool {
        GateState::is_idle(self, now)
            && (pressure == Pressure::Full
                || self
                    .last_gated()
                    .is_none_or(|t| now.saturating_duration_since(t) >= IDLE_AGE))
    }
    const REFUSED_BY: RefusedBy = RefusedBy::Gate;
    fn cached(lookups: &mut Lookups) -> &mut Option<Lookup<Self>> {
        &mut lookups.gate
    }
}

impl Deadline for ParkState {
    fn until(&self) -> Option<Timestamp> {
        ParkState::until(self)
    }
    fn reopen(&mut self, now: Timestamp) -> Option<Transition> {
        self.check(now).1
    }
    fn is_idle(&self, _now: Timestamp, _pressure: Pressure) -> bool {
        ParkState::is_idle(self)
    }
    const REFUSED_BY: RefusedBy = RefusedBy::Park;
    fn cached(lookups: &mut Lookups) -> &mut Option<Lookup<Self>> {
        &mut lookups.park
    }
}

/// One scope key's entry in a table, as a service clone last looked it up
/// (or that it had none): still the answer while the table has added no
/// entry since. An entry that goes is seen through its handle, which
/// stops resolving, so a lookup only goes stale when one is added.
pub(crate) struct Lookup<S: 'static> {
    added: u64,
    handle: Option<Handle<Entry<S>, UntilHot>>,
}

impl<S> Clone for Lookup<S> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<S> Copy for Lookup<S> {}

impl<S> fmt::Debug for Lookup<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lookup")
            .field("added", &self.added)
            .field("found", &self.handle.is_some())
            .finish()
    }
}

/// A service clone's lookups of the gate and the park of one set of
/// scopes, so that while some scope is gated or parked, a call to one that
/// is not skips the key's join, its hash and the table's shared lock.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Lookups {
    gate: Option<Lookup<GateState>>,
    park: Option<Lookup<ParkState>>,
}

/// An entry's handle with its published deadline, if it is still the
/// key's and has one.
#[inline]
fn published<S>(
    handle: Option<Handle<Entry<S>, UntilHot>>,
) -> Option<(Handle<Entry<S>, UntilHot>, Timestamp)> {
    let handle = handle?;
    let until = handle.hot()?.get()?;
    Some((handle, until))
}

/// One scope's state, and whether the table counts it as refusing.
#[derive(Debug, Default)]
pub(crate) struct Entry<S> {
    pub(crate) state: S,
    counted: bool,
}

/// The scopes of one mechanism, their published deadlines, how many refuse
/// now, and how many calls they refused.
#[derive(Debug)]
pub(crate) struct DeadlineTable<S: Deadline> {
    registry: Registry<Entry<S>, UntilHot>,
    /// Entries whose state has a deadline: zero lets admission skip the lookup.
    active: AtomicUsize,
    /// Entries added, ever: a cached [`Lookup`] holds while it is unchanged.
    added: AtomicU64,
    /// Striped: a refusal is the hot path while a scope refuses, and must
    /// not make every thread write one cache line.
    rejected: Striped,
}

impl<S: Deadline> DeadlineTable<S> {
    pub(crate) fn new(max_keys: usize) -> Self {
        DeadlineTable {
            registry: Registry::new(max_keys),
            active: AtomicUsize::new(0),
            added: AtomicU64::new(0),
            rejected: Striped::default(),
        }
    }

    /// Whether any scope may refuse now (a deadline passed but not yet
    /// noticed counts until a call notices it).
    #[inline]
    pub(crate) fn is_active(&self) -> bool {
        self.active.load(Ordering::Relaxed) > 0
    }

    /// Refuses a call to the scope `key` names while its deadline lasts,
    /// counting the refusal; once the deadline has passed, the first call
    /// reopens the scope (no probe) and gets the transition to report.
    /// `cached` is a service clone's last lookup of the same key, if it
    /// keeps one: see [`lookup`](Self::lookup).
    #[inline]
    pub(crate) fn admit<K: ScopeKey>(
        &self,
        cached: Option<&mut Option<Lookup<S>>>,
        key: impl Fn() -> K,
        now: impl FnOnce() -> Timestamp,
    ) -> Result<Option<Transition>, BoxError> {
        let Some((handle, until)) = published(self.lookup(cached, &key)) else {
            return Ok(None);
        };
        let now = now();
        if now < until {
            self.rejected.add();
            let retry_after = until.saturating_duration_since(now);
            return Err(Refused::new(S::REFUSED_BY, key(), retry_after).into_error());
        }
        let Some(mut entry) = handle.lock() else {
            return Ok(None);
        };
        let transition = entry.state.reopen(now);
        self.settle(&handle, &mut entry);
        Ok(transition)
    }

    /// The refusal a call to the scope `key` names would get now, changing
    /// nothing; `cached` as for [`admit`](Self::admit).
    #[inline]
    pub(crate) fn peek<K: ScopeKey>(
        &self,
        cached: Option<&mut Option<Lookup<S>>>,
        key: impl Fn() -> K,
        now: impl FnOnce() -> Timestamp,
    ) -> Result<(), Refused> {
        let Some((_, until)) = published(self.lookup(cached, &key)) else {
            return Ok(());
        };
        let now = now();
        if now < until {
            return Err(Refused::new(
                S::REFUSED_BY,
                key(),
                until.saturating_duration_since(now),
            ));
        }
        Ok(())
    }

    /// `key`'s entry. Through `cached`, the last lookup of the same key,
    /// it is looked up again only if an entry was added since: the key is
    /// then made only to look it up again, or for a refusal.
    #[inline]
    fn lookup<K: ScopeKey>(
        &self,
        cached: Option<&mut Option<Lookup<S>>>,
        key: impl Fn() -> K,
    ) -> Option<Handle<Entry<S>, UntilHot>> {
        let Some(cached) = cached else {
            return self.registry.get(key().as_ref());
        };
        // Read before the lookup it validates: an entry added after the
        // lookup missed it is counted after this read.
        let added = self.added.load(Ordering::Acquire);
        match *cached {
            Some(lookup) if lookup.added == added => lookup.handle,
            _ => {
                let handle = self.registry.get(key().as_ref());
                *cached = Some(Lookup { added, handle });
                handle
            }
        }
    }

    /// Counts a refusal made on the table's behalf (a call spread out).
    pub(crate) fn count_refusal(&self) {
        self.rejected.add();
    }

    /// Changes `key`'s state with `f`, creating the entry first (idle
    /// entries may be evicted to make room), then publishes its deadline.
    /// `None` if the entry was evicted between lookup and lock.
    pub(crate) fn update<R>(
        &self,
        key: &str,
        now: Timestamp,
        f: impl FnOnce(&mut S) -> R,
    ) -> Option<R> {
        let handle = self.registry.get_or_insert_evicting(
            key,
            |_| {
                // Under the map's write lock, before the entry can be found:
                // a lookup that missed the entry read the count before this
                // (a lookup is taken under the read lock), and one that reads
                // this count finds the entry. Counted any later, another
                // caller could find the entry and publish a deadline that
                // clones still holding the miss would not see.
                self.added.fetch_add(1, Ordering::Release);
                Entry::default()
            },
            |entry, pressure| {
                let idle = entry.state.is_idle(now, pressure);
                if idle && entry.counted {
                    // Evicted with a deadline that passed unnoticed.
                    self.active.fetch_sub(1, Ordering::Relaxed);
                }
                idle
            },
        );
        self.change(handle, f)
    }

    /// Changes `key`'s state with `f` if the entry exists.
    pub(crate) fn update_existing<R>(&self, key: &str, f: impl FnOnce(&mut S) -> R) -> Option<R> {
        self.change(self.registry.get(key)?, f)
    }

    fn change<R>(
        &self,
        handle: Handle<Entry<S>, UntilHot>,
        f: impl FnOnce(&mut S) -> R,
    ) -> Option<R> {
        let mut entry = handle.lock()?;
        let r = f(&mut entry.state);
        self.settle(&handle, &mut entry);
        Some(r)
    }

    /// Publishes the entry's deadline and keeps the count of refusing
    /// entries in step with it (under the entry's lock).
    fn settle(&self, handle: &Handle<Entry<S>, UntilHot>, entry: &mut Entry<S>) {
        let until = entry.state.until();
        if let Some(hot) = handle.hot() {
            hot.publish(until);
        }
        let active = until.is_some();
        if active != entry.counted {
            entry.counted = active;
            if active {
                self.active.fetch_add(1, Ordering::Relaxed);
            } else {
                self.active.fetch_sub(1, Ordering::Relaxed);
            }
        }
    }

    /// Every tracked scope with its state, in no particular order.
    pub(crate) fn for_each(&self, mut f: impl FnMut(&str, &S)) {
        for (key, handle) in self.registry.entries() {
            if let Some(entry) = handle.lock() {
                f(&key, &entry.state);
            }
        }
    }

    /// Calls refused so far.
    pub(crate) fn rejected(&self) -> u64 {
        self.rejected.sum()
    }

    /// Scopes tracked.
    pub(crate) fn len(&self) -> usize {
        self.registry.len()
    }

    /// Scopes counted as refusing (a deadline not yet found passed).
    #[cfg(test)]
    pub(crate) fn active(&self) -> usize {
        self.active.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::error::{Parked, Throttled};
    use super::*;
    use levee_core::classify::Reason;
    use levee_core::gate::GateConfig;
    use levee_core::park::ParkConfig;

    const SEC: u64 = 1_000_000_000;

    fn at(secs: u64) -> Timestamp {
        Timestamp::from_nanos(secs * SEC)
    }

    fn park(table: &DeadlineTable<ParkState>, key: &str, now: Timestamp, wait: u64) {
        let cause = Reason::new_static("openai:insufficient_quota");
        table.update(key, now, |p| {
            p.park(
                &ParkConfig::default(),
                now,
                Some(Duration::from_secs(wait)),
                &cause,
            )
        });
    }

    #[test]
    fn a_late_quota_answer_reparking_an_expired_unchecked_park_keeps_the_count_right() {
        let table = DeadlineTable::<ParkState>::new(16);
        park(&table, "org-a", at(0), 10);
        assert_eq!(table.active(), 1);
        // The park expires at 10 s; no call checks it. A quota answer to a
        // call admitted before the park lands at 20 s and parks it again.
        park(&table, "org-a", at(20), 10);
        assert_eq!(table.active(), 1, "one scope parked, counted once");
        // The new park refuses until 30 s, then the first call reopens it.
        assert!(table.admit(None, || "org-a", || at(25)).is_err());
        let reopened = table.admit(None, || "org-a", || at(31)).expect("admitted");
        assert_eq!(
            reopened.map(|t| t.to),
            Some(levee_core::transition::State::Active)
        );
        assert_eq!(
            table.active(),
            0,
            "nothing refuses: lookups are skipped again"
        );
        assert!(!table.is_active());
    }

    #[test]
    fn a_counted_gate_evicted_after_its_deadline_leaves_the_count() {
        let table = DeadlineTable::<GateState>::new(1);
        let cause = Reason::new_static("openai:rate_limit_exceeded");
        let mut rng = fastrand::Rng::with_seed(1);
        table.update("org-a/gpt-4o", at(0), |g| {
            let wait = Some(Duration::from_secs(10));
            g.throttle(&GateConfig::default(), at(0), wait, &cause, &mut rng)
        });
        assert_eq!(table.active(), 1);
        // Full; org-a's gate passed unnoticed, so it is idle and evicted.
        table.update("org-b/gpt-4o", at(20), |_| ());
        assert_eq!(table.len(), 1);
        assert_eq!(table.active(), 0);
        assert!(
            table
                .admit(None, || "org-a/gpt-4o", || at(21))
                .unwrap()
                .is_none()
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_gate_gated_within_the_hour_keeps_its_history_below_the_cap() {
        let table = DeadlineTable::<GateState>::new(16);
        let cause = Reason::new_static("openai:rate_limit_exceeded");
        let mut rng = fastrand::Rng::with_seed(1);
        let throttle = |key: &str, now: Timestamp, rng: &mut fastrand::Rng| {
            table.update(key, now, |g| {
                let wait = Some(Duration::from_secs(10));
                g.throttle(&GateConfig::default(), now, wait, &cause, rng)
            });
        };
        // Created at 0, gated again at 3000 s: old by creation, gated minutes ago.
        throttle("org-a/gpt-4o", at(0), &mut rng);
        throttle("org-a/gpt-4o", at(3000), &mut rng);
        tokio::time::advance(IDLE_AGE + Duration::from_secs(1)).await;
        table.update("org-b/gpt-4o", at(3601), |_| ());
        assert_eq!(table.len(), 2, "gated 10 minutes ago: kept below the cap");
        // An hour after its last gating it goes, with its history.
        table.update("org-c/gpt-4o", at(3000 + 10 + 3600), |_| ());
        let mut keys = Vec::new();
        table.for_each(|k, _| keys.push(k.to_owned()));
        assert!(!keys.contains(&"org-a/gpt-4o".to_owned()), "{keys:?}");
    }

    fn gate(table: &DeadlineTable<GateState>, key: &str, now: Timestamp, wait: u64) {
        let cause = Reason::new_static("openai:rate_limit_exceeded");
        let mut rng = fastrand::Rng::with_seed(1);
        table.update(key, now, |g| {
            let wait = Some(Duration::from_secs(wait));
            g.throttle(&GateConfig::default(), now, wait, &cause, &mut rng)
        });
    }

    #[test]
    fn a_cached_lookup_that_found_no_entry_sees_one_added_later() {
        let table = DeadlineTable::<GateState>::new(16);
        gate(&table, "org-b/gpt-4o", at(0), 60);
        let mut cached = None;
        let key = || "org-a/gpt-4o";
        assert!(table.admit(Some(&mut cached), key, || at(1)).is_ok());
        gate(&table, "org-a/gpt-4o", at(2), 60);
        let err = table.admit(Some(&mut cached), key, || at(3)).unwrap_err();
        assert_eq!(
            err.downcast_ref::<Throttled>().unwrap().scope(),
            "org-a/gpt-4o"
        );
    }

    #[test]
    fn a_cached_lookup_after_its_entry_was_evicted_admits_and_finds_it_added_again() {
        let table = DeadlineTable::<GateState>::new(1);
        gate(&table, "org-a/gpt-4o", at(0), 10);
        let mut cached = None;
        let key = || "org-a/gpt-4o";
        assert!(table.admit(Some(&mut cached), key, || at(1)).is_err());
        // Its gate passed unnoticed; full, so org-b's evicts it (an eviction
        // comes with an insertion, which the lookup sees counted).
        gate(&table, "org-b/gpt-4o", at(20), 10);
        assert!(table.admit(Some(&mut cached), key, || at(21)).is_ok());
        gate(&table, "org-a/gpt-4o", at(40), 10);
        assert!(table.admit(Some(&mut cached), key, || at(41)).is_err());
    }

    proptest::proptest! {
        /// Whatever happens to the table between two calls (gates closed,
        /// time passing, entries evicted and added again at the cap), a
        /// clone's cached lookup answers as a fresh one would, to a peek and
        /// to a call alike.
        #[test]
        fn a_cached_lookup_answers_as_a_fresh_one(
            ops in proptest::collection::vec((0u8..3, 0usize..3, 1u64..30), 1..80),
        ) {
            let keys = ["org-a/m", "org-b/m", "org-c/m"];
            let table = DeadlineTable::<GateState>::new(2);
            let mut cached: [Option<Lookup<GateState>>; 3] = [None; 3];
            let mut peeks: [Option<Lookup<GateState>>; 3] = [None; 3];
            let mut now = 0;
            let answer = |r: Result<(), BoxError>| {
                r.map_err(|e| e.downcast_ref::<Throttled>().map(|t| (t.scope().to_owned(), t.retry_after())))
            };
            for (op, k, n) in ops {
                match op {
                    0 => gate(&table, keys[k], at(now), n),
                    1 => now += n,
                    _ => {
                        let fresh = answer(table.peek(None, || keys[k], || at(now)).map_err(Refused::into_error));
                        let peeked = table.peek(Some(&mut peeks[k]), || keys[k], || at(now));
                        proptest::prop_assert_eq!(answer(peeked.map_err(Refused::into_error)), fresh.clone());
                        let got = table.admit(Some(&mut cached[k]), || keys[k], || at(now));
                        proptest::prop_assert_eq!(answer(got.map(|_| ())), fresh);
                    }
                }
            }
        }
    }

    #[test]
    fn unparking_by_hand_and_peeking_keep_the_count_and_count_no_refusal() {
        let table = DeadlineTable::<ParkState>::new(16);
        park(&table, "org-a", at(0), 60);
        let err = table
            .peek(None, || "org-a", || at(1))
            .unwrap_err()
            .into_error();
        assert!(err.is::<Parked>());
        assert_eq!(table.rejected(), 0, "a peek counts nothing");
        assert!(table.admit(None, || "org-a", || at(1)).is_err());
        assert_eq!(table.rejected(), 1);
        let unparked = table.update_existing("org-a", |p| p.unpark(at(2)));
        assert!(matches!(unparked, Some(Some(_))));
        assert_eq!(table.active(), 0);
        assert!(table.admit(None, || "org-a", || at(3)).unwrap().is_none());
    }
}
