//! What every clone of one failover shares: the targets, their counters,
//! and the order in which a request visits them.

use std::fmt;
use std::num::NonZeroU16;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use levee_core::classify::Verdict;
use levee_core::classify::hints::{self, RateLimits};
use levee_core::clock::duration_nanos;
use tokio::time::Instant;

use super::error::RefusalKind;
use super::shadow::ShadowSend;
use super::speed::{HedgeState, Standing, TargetSpeed};
use super::target::Rewrite;
use crate::breaker::{BreakerHandle, PeekCache};
use crate::bulkhead::BulkheadLayer;
use crate::striped::Striped;

/// How much faster a pool member must be than the one drawn first to be
/// chosen instead.
const SPEED_MARGIN: f64 = 1.25;

/// The user's override of when to go on to the next target.
pub(crate) type FallbackFn = Arc<dyn Fn(&Advance<'_>) -> bool + Send + Sync>;

/// What a [`fallback_on`](super::FailoverBuilder::fallback_on) hook sees:
/// one target's outcome, and whether to try the next target.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct Advance<'a> {
    /// The target's name.
    pub target: &'a str,
    /// Its position in the failover order.
    pub index: usize,
    /// What the outcome says about the target. A refusal reads as the
    /// verdict that causes it: throttled (gate), quota (park), availability
    /// (open breaker, full bulkhead).
    pub verdict: Verdict,
    /// `Some` if the target refused without sending anything.
    pub refusal: Option<RefusalKind>,
}

impl Advance<'_> {
    /// The default policy: go on after a throttled, quota, availability or
    /// credential outcome; return a `request` verdict (another provider
    /// would reject a malformed body too) and a success as they are.
    pub fn default_policy(&self) -> bool {
        matches!(
            self.verdict,
            Verdict::Throttled | Verdict::Quota | Verdict::Availability | Verdict::Credential
        )
    }
}

/// The generic part: each target's stack `T` and rewrite. Each clone of a
/// failover has its own (its requests' futures count references on it, not
/// on one count every thread shares); all share the [`Meta`].
pub(crate) struct Common<B, T> {
    pub(crate) meta: Arc<Meta>,
    pub(crate) entries: Box<[Entry<B, T>]>,
    /// Whether any target rewrites the request.
    pub(crate) rewrites: bool,
    /// Sends shadow probes to targets whose breaker is open, if asked to.
    pub(crate) shadow: Option<ShadowSend<B>>,
    /// This clone's draws for choosing within a pool (a counter, mixed).
    draws: AtomicU64,
}

impl<B, T> Common<B, T> {
    pub(crate) fn new(
        meta: Arc<Meta>,
        entries: Box<[Entry<B, T>]>,
        shadow: Option<ShadowSend<B>>,
    ) -> Self {
        // Each clone draws its own sequence, deterministic in clone order.
        let base = meta.clones.fetch_add(1, Ordering::Relaxed) << 32;
        Common {
            meta,
            rewrites: entries.iter().any(|e| e.rewrite.is_some()),
            entries,
            shadow,
            draws: AtomicU64::new(base),
        }
    }

    /// A pseudo-random number for a choice within a pool.
    pub(crate) fn draw(&self) -> u64 {
        splitmix64(self.draws.fetch_add(1, Ordering::Relaxed))
    }
}

impl<B, T: Clone> Clone for Common<B, T> {
    fn clone(&self) -> Self {
        Common::new(self.meta.clone(), self.entries.clone(), self.shadow.clone())
    }
}

fn splitmix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

pub(crate) struct Entry<B, T> {
    pub(crate) service: T,
    pub(crate) rewrite: Option<Rewrite<B>>,
}

impl<B, T: Clone> Clone for Entry<B, T> {
    fn clone(&self) -> Self {
        Entry {
            service: self.service.clone(),
            rewrite: self.rewrite.clone(),
        }
    }
}

/// The part a health handle reads: names, labels, state handles, counters.
pub(crate) struct Meta {
    pub(crate) targets: Box<[TargetMeta]>,
    pub(crate) groups: Box<[Group]>,
    pub(crate) max_targets: usize,
    pub(crate) max_retry_after: Duration,
    pub(crate) overload_window: Duration,
    pub(crate) fallback_on: Option<FallbackFn>,
    pub(crate) origin: Instant,
    pub(crate) no_target: AtomicU64,
    /// Each pool's members, in failover order.
    pub(crate) pools: Box<[Box<[usize]>]>,
    /// Clones made, for each clone's draws.
    pub(crate) clones: AtomicU64,
    /// Whether responses also carry `ServedBy` as an extension.
    pub(crate) served_by_extension: bool,
    /// Hedging and demotion of slow targets, if asked for.
    pub(crate) hedging: Option<HedgeState>,
    /// Targets demoted now: while none is, a choice reads no target's
    /// demotion.
    pub(crate) demoted_targets: AtomicU32,
}

pub(crate) struct TargetMeta {
    pub(crate) name: &'static str,
    /// The name's number, which a response's body carries (`ServedBy`).
    pub(crate) name_id: NonZeroU16,
    pub(crate) provider: Option<Arc<str>>,
    pub(crate) region: Option<Arc<str>>,
    /// The provider × region group, for targets with a provider label.
    pub(crate) group: Option<usize>,
    /// The pool the target shares traffic in, if any.
    pub(crate) pool: Option<usize>,
    /// What its provider last said is left of its tightest limit, in
    /// thousandths (1000 until it says): its weight in its pool.
    pub(crate) left_permille: AtomicU32,
    pub(crate) breaker: BreakerHandle,
    pub(crate) peek: PeekCache,
    pub(crate) bulkhead: Option<BulkheadLayer>,
    /// Successes served, striped per thread.
    pub(crate) served: Striped,
    /// Outcomes after which the request went on to another target.
    pub(crate) failed_over: AtomicU64,
    /// Nanoseconds since `origin` + 1 of the last availability failure; 0 if none.
    pub(crate) last_availability: AtomicU64,
    pub(crate) last_failure: Mutex<Option<LastFailure>>,
    /// Its recent time to first byte and demotion (with hedging).
    pub(crate) speed: TargetSpeed,
}

/// The last outcome that sent a request on from a target.
#[derive(Clone, Debug)]
pub(crate) struct LastFailure {
    pub(crate) verdict: Verdict,
    pub(crate) reason: String,
}

/// Targets that share a provider and region.
#[derive(Debug, Default)]
pub(crate) struct Group {
    /// Nanoseconds since `origin` + 1 until which the group counts as
    /// overloaded (several of its targets failed together); 0 if not.
    pub(crate) overloaded_until: AtomicU64,
}

impl Meta {
    pub(crate) fn now_nanos(&self) -> u64 {
        self.nanos_at(Instant::now())
    }

    /// `at` in nanoseconds since the failover's origin.
    fn nanos_at(&self, at: Instant) -> u64 {
        duration_nanos(at.saturating_duration_since(self.origin))
    }

    /// Whether a group's targets are being passed over for overload.
    pub(crate) fn overloaded(&self, group: usize) -> bool {
        let until = self.groups[group].overloaded_until.load(Ordering::Relaxed);
        // The clock is read only while some group is marked.
        until != 0 && self.now_nanos() < until
    }

    /// The next target to consider: the first untried one in order whose
    /// provider/region is neither marked overloaded nor in `avoid` (groups
    /// that already failed for availability in this request), nor demoted
    /// for being slow; failing that, the first untried one.
    #[inline]
    pub(crate) fn next_candidate(
        &self,
        tried: u64,
        avoid: u64,
        draw: impl FnMut() -> u64,
    ) -> Option<usize> {
        if self.demoted_targets.load(Ordering::Relaxed) != 0 {
            return self.next_candidate_demoted(tried, avoid, draw);
        }
        self.choose::<false>(tried, avoid, draw)
    }

    /// [`next_candidate`](Self::next_candidate) while some target is
    /// demoted, out of line.
    #[cold]
    #[inline(never)]
    fn next_candidate_demoted(
        &self,
        tried: u64,
        avoid: u64,
        draw: impl FnMut() -> u64,
    ) -> Option<usize> {
        self.choose::<true>(tried, avoid, draw)
    }

    /// The choice of [`next_candidate`](Self::next_candidate); with
    /// `DEMOTED`, a demoted target is passed over like an overloaded
    /// group's, unless its trial is due and this request claims it.
    #[inline(always)]
    fn choose<const DEMOTED: bool>(
        &self,
        tried: u64,
        avoid: u64,
        mut draw: impl FnMut() -> u64,
    ) -> Option<usize> {
        // A demoted target's standing is read once per choice, so that a
        // pool's draws see one answer; which were read says which are
        // marked, without reading them again.
        let demoted = std::cell::Cell::new((0u64, 0u64));
        let eligible = |i: usize| {
            let t = &self.targets[i];
            tried & (1 << i) == 0
                && !t
                    .group
                    .is_some_and(|g| avoid & (1 << g) != 0 || self.overloaded(g))
                && !(DEMOTED && t.speed.is_marked() && self.demoted(i, &demoted))
        };
        let mut deferred = None;
        for i in 0..self.targets.len() {
            if tried & (1 << i) != 0 {
                continue;
            }
            if eligible(i) {
                let pick = match self.targets[i].pool {
                    Some(p) => self.pick_in_pool(&self.pools[p], eligible, &mut draw),
                    None => i,
                };
                // A demoted target chosen for its trial: claimed here, for
                // this request (another request's, if it claimed first).
                if !DEMOTED || demoted.get().0 & (1 << pick) == 0 || self.take_place(pick) {
                    return Some(pick);
                }
                continue;
            }
            deferred.get_or_insert(i);
        }
        deferred
    }

    /// Whether target `index`, marked, is demoted for this choice;
    /// `memo` holds the targets read (and which were demoted) so far.
    #[cold]
    fn demoted(&self, index: usize, memo: &std::cell::Cell<(u64, u64)>) -> bool {
        let (read, demoted) = memo.get();
        let bit = 1 << index;
        if read & bit != 0 {
            return demoted & bit != 0;
        }
        // A trial goes when a hedge can cover it (or, with no hedges to
        // spend, uncovered).
        let trial_ok = || {
            self.hedging
                .as_ref()
                .is_some_and(|h| h.config.ratio == 0.0 || h.available(self.served_total()))
        };
        let standing = self.targets[index]
            .speed
            .standing(self.now_nanos(), trial_ok);
        let is = standing == Standing::Demoted;
        memo.set((read | bit, if is { demoted | bit } else { demoted }));
        is
    }

    /// Whether the request about to call target `index`, marked demoted,
    /// may: its trial, if due, is claimed for it (`false` if another
    /// request claimed it first); a target still demoted, chosen because
    /// no other was left, is called as it is.
    #[cold]
    fn take_place(&self, index: usize) -> bool {
        let speed = &self.targets[index].speed;
        let now = self.now_nanos();
        match speed.standing(now, || true) {
            Standing::Trial => speed.claim_trial(now),
            Standing::InPlace | Standing::Demoted => true,
        }
    }

    /// Every success served so far.
    pub(crate) fn served_total(&self) -> u64 {
        self.targets.iter().map(|t| t.served.sum()).sum()
    }

    /// Target `index`'s first call passed its hedge delay.
    #[cold]
    pub(crate) fn late(&self, index: usize) {
        let Some(hedging) = &self.hedging else {
            return;
        };
        let t = &self.targets[index];
        if let Some((period, starts)) = t.speed.late(&hedging.config, self.now_nanos()) {
            if starts {
                self.demoted_targets.fetch_add(1, Ordering::Relaxed);
            }
            tracing::warn!(
                target: "levee::failover",
                target_name = t.name,
                delay = ?t.speed.delay(),
                demotion = ?period,
                "target slow to answer: tried after the others"
            );
        }
    }

    /// Target `index`'s first call, sent at `sent`, answered with success
    /// now (one clock read for both its latency and the moving average).
    pub(crate) fn answered(&self, index: usize, sent: Instant, late: bool) {
        let Some(hedging) = &self.hedging else {
            return;
        };
        let now = Instant::now();
        let latency = now - sent;
        let at = self.nanos_at(now);
        let t = &self.targets[index];
        if t.speed.answered(&hedging.config, latency, late, at) {
            self.demoted_targets.fetch_sub(1, Ordering::Relaxed);
            tracing::info!(
                target: "levee::failover",
                target_name = t.name,
                ?latency,
                "target answered in time again: back in its place"
            );
        }
    }

    /// A copy of a request sent to target `index` while it was demoted (a
    /// shadow probe) answered with success after `latency`: in time, its
    /// trial is due at once. The copy does not restore it itself: its
    /// output is capped, so it can be fast where callers' calls are not; a
    /// caller's trial, covered by a hedge, says so.
    pub(crate) fn copy_answered(&self, index: usize, latency: Duration) {
        let t = &self.targets[index];
        let in_time = t.speed.delay().is_some_and(|delay| latency <= delay);
        if in_time && t.speed.trial_due() {
            tracing::debug!(
                target: "levee::failover",
                target_name = t.name,
                ?latency,
                "slow target's shadow probe answered in time: its trial is due"
            );
        }
    }

    /// A member of a pool, among those `eligible`, drawn with weights by
    /// what each has left (the first eligible one wins a pool of one).
    /// With hedging, which times each target, a second member is drawn
    /// the same way and the two compared on speed: power of two choices.
    fn pick_in_pool(
        &self,
        members: &[usize],
        eligible: impl Fn(usize) -> bool,
        mut draw: impl FnMut() -> u64,
    ) -> usize {
        let weight =
            |i: usize| u64::from(self.targets[i].left_permille.load(Ordering::Relaxed)) + 1;
        let pick = |skip: Option<usize>, at: u64| {
            let chosen = |i: &usize| eligible(*i) && Some(*i) != skip;
            let total: u64 = members
                .iter()
                .filter(|i| chosen(i))
                .map(|&i| weight(i))
                .sum();
            if total == 0 {
                return None;
            }
            let mut at = at % total;
            for &i in members.iter().filter(|i| chosen(i)) {
                let w = weight(i);
                if at < w {
                    return Some(i);
                }
                at -= w;
            }
            None
        };
        let Some(first) = pick(None, draw()) else {
            return members
                .iter()
                .copied()
                .find(|&i| eligible(i))
                .unwrap_or(members[0]);
        };
        if self.hedging.is_none() {
            return first;
        }
        match pick(Some(first), draw()) {
            Some(second) => self.faster(first, second, weight),
            None => first,
        }
    }

    /// Of two pool members, `first` unless `second` is clearly faster: its
    /// recent time to first byte, per share of its limits left, under
    /// `1 / SPEED_MARGIN` of `first`'s. Members of like speed keep the
    /// weighted draw's share; a slower one loses its traffic to the other.
    #[cold]
    fn faster(&self, first: usize, second: usize, weight: impl Fn(usize) -> u64) -> usize {
        let now = self.now_nanos();
        let cost = |i: usize| self.targets[i].speed.cost(now) / weight(i) as f64;
        if cost(second) * SPEED_MARGIN < cost(first) {
            second
        } else {
            first
        }
    }

    /// Notes what a pooled target's answer says is left of its limits.
    #[inline]
    pub(crate) fn note_limits(&self, index: usize, headers: &http::HeaderMap) {
        // Only a pool's members weigh what is left: inline up to here.
        if self.targets[index].pool.is_some() {
            self.note_pool_limits(index, headers);
        }
    }

    #[inline(never)]
    fn note_pool_limits(&self, index: usize, headers: &http::HeaderMap) {
        let t = &self.targets[index];
        let limits = RateLimits::read_lazy(headers, &|| hints::reference_time(headers, None));
        let tightest = limits
            .iter()
            .filter_map(|w| {
                let (remaining, limit) = (w.remaining?, w.limit.filter(|&l| l > 0)?);
                Some(remaining.saturating_mul(1000) / limit)
            })
            .min();
        if let Some(share) = tightest {
            t.left_permille.store(
                u32::try_from(share.min(1000)).unwrap_or(1000),
                Ordering::Relaxed,
            );
        }
    }

    /// Whether any target other than those in `tried` is left.
    pub(crate) fn untried_left(&self, tried: u64) -> bool {
        let all = if self.targets.len() == 64 {
            u64::MAX
        } else {
            (1u64 << self.targets.len()) - 1
        };
        tried & all != all
    }

    /// Whether to go on to another target after `index`'s outcome.
    pub(crate) fn advances(
        &self,
        index: usize,
        verdict: Verdict,
        refusal: Option<RefusalKind>,
    ) -> bool {
        let advance = Advance {
            target: self.targets[index].name,
            index,
            verdict,
            refusal,
        };
        match &self.fallback_on {
            Some(f) => verdict != Verdict::Success && f(&advance),
            None => advance.default_policy(),
        }
    }

    /// A success from `index`: one striped increment, and clearing the
    /// group's overload mark if set (read first, so no write otherwise).
    #[inline]
    pub(crate) fn served(&self, index: usize) {
        let t = &self.targets[index];
        t.served.add();
        if let Some(g) = t.group {
            let group = &self.groups[g];
            if group.overloaded_until.load(Ordering::Relaxed) != 0 {
                group.overloaded_until.store(0, Ordering::Relaxed);
            }
        }
    }

    /// An answer from `index` that sends the request on (slow path).
    pub(crate) fn failed(&self, index: usize, verdict: Verdict, reason: String) {
        let t = &self.targets[index];
        t.failed_over.fetch_add(1, Ordering::Relaxed);
        *t.last_failure
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(LastFailure { verdict, reason });
        if verdict != Verdict::Availability {
            return;
        }
        let now = self.now_nanos();
        t.last_availability.store(now + 1, Ordering::Relaxed);
        let Some(g) = t.group else {
            return;
        };
        let window = duration_nanos(self.overload_window);
        let together = self.targets.iter().enumerate().any(|(j, o)| {
            let at = o.last_availability.load(Ordering::Relaxed);
            j != index && o.group == Some(g) && at != 0 && now.saturating_sub(at - 1) <= window
        });
        if together {
            let until = now.saturating_add(window) + 1;
            let prev = self.groups[g]
                .overloaded_until
                .swap(until, Ordering::Relaxed);
            if prev == 0 || prev <= now {
                tracing::warn!(
                    target: "levee::failover",
                    provider = t.provider.as_deref().unwrap_or(""),
                    region = t.region.as_deref().unwrap_or(""),
                    window = ?self.overload_window,
                    "several targets of one provider failed together: preferring other providers"
                );
            }
        }
    }
}

impl fmt::Debug for Meta {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<_> = self.targets.iter().map(|t| t.name).collect();
        f.debug_struct("Failover")
            .field("targets", &names)
            .field("max_targets", &self.max_targets)
            .field("max_retry_after", &self.max_retry_after)
            .finish_non_exhaustive()
    }
}
