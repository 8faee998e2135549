//! Shadow probes: while a target's breaker is open, or while it is
//! demoted for being slow, a copy of a request that another target serves
//! goes to it, so that it is found back within a second or two of
//! recovering and no caller pays for the finding. See [`ShadowProbes`].

use std::fmt;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use bytes::Bytes;
use http::Request;
use http_body::Body;
use http_body_util::BodyExt;
use levee_core::classify::{Classification, Verdict};
use levee_core::clock::duration_nanos;
use levee_core::config_error::ConfigError;
use levee_core::transition::{Mechanism, State};
use tokio::task::AbortHandle;
use tokio::time::Instant;
use tower_service::Service;

use super::target::Rewrite;
use crate::breaker::{BreakerHandle, ResponseBody, ShadowProbe};
use crate::error::BoxError;
use crate::retry::RetryBudget;

/// The default spacing of one target's shadow probes.
pub const DEFAULT_SHADOW_INTERVAL: Duration = Duration::from_secs(1);

/// How long a shadow probe may take by default before it is dropped.
pub const DEFAULT_SHADOW_TIMEOUT: Duration = Duration::from_secs(60);

/// The most copies a target gets by default, as a share of the requests
/// it turns away.
pub const DEFAULT_SHADOW_SHARE: f64 = 0.1;

/// One copy's worth of a target's credit (see [`ShadowTarget::credit`]).
const COPY: u64 = 1 << 20;

/// A request's body rewritten for its copy.
type Prepare<B> = Arc<dyn Fn(&mut Request<B>) + Send + Sync>;

/// Shadow probes for a [`Failover`](super::Failover), given to
/// [`FailoverBuilder::shadow_probes`](super::FailoverBuilder::shadow_probes).
///
/// A breaker's own probe is a caller's request: probing often costs
/// callers failures, so its cool-off grows with each failed probe, and a
/// target is found back late. A copy costs no caller anything: its answer
/// only tells the target's breaker (a success closes it, see
/// [`ShadowProbe`]) and is dropped. So while a target's breaker is open,
/// copies of the requests other targets serve go to it from the first one
/// the breaker turns away, then at most one per
/// [`interval`](Self::interval) per target and no more than a
/// [`share`](Self::share) of the requests it turns away (a tenth), each
/// also drawing a token from a retry budget when one is given. So past
/// the first copy of an open spell, copies stay within a fixed fraction of
/// traffic, however quiet the service: at two requests a second, a copy
/// every five seconds. In a fleet, each replica spaces its copies by the
/// interval times the replicas the fleet counts, so that the fleet sends
/// about one per interval. A target open longer than a minute gets them
/// less often: the spacing doubles, and the share halves, each further
/// minute, up to 32 times, so a target dead for good costs one replica a
/// copy every half minute at most, not every second. A spell ends 30 s
/// after the last request the target turned away.
///
/// **Slow targets.** With [hedging](super::Hedging), a target late for
/// its callers is demoted: tried after the others, until a caller's
/// *trial* finds it in time again. A trial found late costs its caller a
/// hedge delay, so trials are spaced out (by the demotion), and a
/// brownout's end is found late. So a demoted target gets copies too, on
/// the same schedule and share (of the requests that pass it over, never
/// one that called it): a copy answered within the target's hedge delay
/// makes its trial due at once, covered by a hedge if one is left (and
/// sent even if none is: the copy was in time). It is that trial, a
/// caller's request, that puts the target back, not the copy: a copy's
/// output is capped, so it can be fast where callers' calls are not. A
/// copy to a slow target is not replaced while it may yet answer in time.
///
/// A copy is a real request to the provider and is billed as one (one to
/// a slow target, which answers, more surely than one to a failing
/// target): cap its output with [`prepare`](Self::prepare) (for a JSON body,
/// [`cap_output_tokens`] lowers `max_tokens`, `max_completion_tokens`,
/// `max_output_tokens`, `maxOutputTokens` or `maxTokens` to 16 where the
/// request names one). A streamed copy is dropped at its first output,
/// which is all it needs to show. At most one copy per target is in flight:
/// a newer one replaces it (and one with no successor is dropped after
/// [`timeout`](Self::timeout)). A copy
/// draws its budget token before its breaker admits it: one to a target
/// isolated or open on a rejected key spends a token for nothing.
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use bytes::Bytes;
/// use tower_levee::failover::{ShadowProbes, cap_output_tokens};
/// use tower_levee::retry::RetryBudget;
///
/// let budget = Arc::new(RetryBudget::new(Duration::from_secs(10), 10, 0.1));
/// let probes = ShadowProbes::<Bytes>::new()
///     .interval(Duration::from_secs(2))
///     .budget(budget)
///     .prepare(cap_output_tokens);
/// # let _ = probes;
/// ```
pub struct ShadowProbes<B> {
    pub(crate) interval: Duration,
    share: f64,
    timeout: Duration,
    budget: Option<Arc<RetryBudget>>,
    prepare: Option<Prepare<B>>,
    /// Each named target's active probe.
    pub(crate) active: Vec<(Box<str>, MakeProbe<B>)>,
}

/// Makes a target's active probe.
pub(crate) type MakeProbe<B> = Arc<dyn Fn() -> Request<B> + Send + Sync>;

impl<B> Default for ShadowProbes<B> {
    fn default() -> Self {
        Self::new()
    }
}

impl<B> ShadowProbes<B> {
    /// One copy per target per [`DEFAULT_SHADOW_INTERVAL`], at most
    /// [`DEFAULT_SHADOW_SHARE`] of the requests it turns away, no budget,
    /// the body copied as it is.
    pub fn new() -> Self {
        ShadowProbes {
            interval: DEFAULT_SHADOW_INTERVAL,
            share: DEFAULT_SHADOW_SHARE,
            timeout: DEFAULT_SHADOW_TIMEOUT,
            budget: None,
            prepare: None,
            active: Vec::new(),
        }
    }

    /// The least time between two copies to one target (more than zero:
    /// the build fails naming `shadow_probes.interval` otherwise).
    pub fn interval(mut self, interval: Duration) -> Self {
        self.interval = interval;
        self
    }

    /// The most copies a target gets, as a share of the requests it turns
    /// away ([`DEFAULT_SHADOW_SHARE`]); the first of an open spell always
    /// goes. More than zero and at most 1: the build fails naming
    /// `shadow_probes.share` otherwise.
    pub fn share(mut self, share: f64) -> Self {
        self.share = share;
        self
    }

    /// How long a copy may take before it is dropped (default
    /// [`DEFAULT_SHADOW_TIMEOUT`]): as long as a first token may take.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Each copy draws a token from `budget` (counted among its
    /// `retries`), and none goes when it is empty.
    pub fn budget(mut self, budget: Arc<RetryBudget>) -> Self {
        self.budget = Some(budget);
        self
    }

    /// Rewrites each copy before it is sent: cap its output, drop what a
    /// probe needs not ask for.
    pub fn prepare(mut self, f: impl Fn(&mut Request<B>) + Send + Sync + 'static) -> Self {
        self.prepare = Some(Arc::new(f));
        self
    }

    /// An active probe for the target named `target`: a request `make`
    /// builds (a one-token completion, or `GET /v1/models` where that
    /// shows the target serving), sent through the target's rewrite on the
    /// copies' schedule while its breaker is open and no request was
    /// turned away in the spacing (where requests come, their copies and
    /// their share govern), so that the target is found back when no
    /// traffic comes. It stops once
    /// the breaker admits a call. The build fails if no target has that
    /// name, or if another active probe named it first.
    pub fn active(
        mut self,
        target: impl Into<Box<str>>,
        make: impl Fn() -> Request<B> + Send + Sync + 'static,
    ) -> Self {
        self.active.push((target.into(), Arc::new(make)));
        self
    }
}

impl<B> fmt::Debug for ShadowProbes<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShadowProbes")
            .field("interval", &self.interval)
            .field("share", &self.share)
            .field("timeout", &self.timeout)
            .field("budget", &self.budget.is_some())
            .field("prepare", &self.prepare.is_some())
            .field(
                "active",
                &self.active.iter().map(|(t, _)| &**t).collect::<Vec<_>>(),
            )
            .finish()
    }
}

/// Lowers a JSON request body's output cap, where it names one, to a few
/// tokens (see [`levee_core::request::cap_output`]). A body naming none is
/// sent as it is: the provider's default length is the price of that copy.
pub fn cap_output_tokens<B>(request: &mut Request<B>)
where
    B: AsRef<[u8]> + From<Bytes>,
{
    if let Some(capped) = levee_core::request::cap_output(request.body().as_ref()) {
        *request.body_mut() = B::from(Bytes::from(capped));
    }
}

/// Tells the shadow probes what a request found at target `index`: a copy
/// goes to it, if its turn has come.
pub(crate) type ShadowSend<B> = Arc<dyn Fn(usize, Found<'_, B>) + Send + Sync>;

/// What a request found at a target, for [`ShadowSend`].
pub(crate) enum Found<'a, B> {
    /// Its breaker open: the request, as written for the target, is
    /// turned away.
    Open(&'a Request<B>),
    /// It failed the request (its breaker may have opened: its active
    /// probes start).
    Failed,
    /// It is demoted for being slow, and the request, as the caller sent
    /// it, passes it over; a copy answered within `delay` is in time.
    Slow {
        request: &'a Request<B>,
        delay: Duration,
    },
}

/// Tells a failover that a copy to target `index`, slow, answered with
/// success after the given time.
pub(crate) type CopyAnswered = Arc<dyn Fn(usize, Duration) + Send + Sync>;

/// How long a target is open before its copies are spaced further apart,
/// and the step by which they are (each further such time doubles it).
const FULL_RATE_SPELL: Duration = Duration::from_secs(60);

/// The most the spacing grows for a long spell: 2⁵, 32 times.
const MAX_DOUBLINGS: u64 = 5;

/// A refusal this long after the last one starts a new open spell.
const NEW_SPELL_GAP: Duration = Duration::from_secs(30);

/// The spacing of one target's copies `open_for` into its open spell,
/// with `replicas` sending: `interval × replicas × 2ⁿ`, n one per minute
/// past the first, at most [`MAX_DOUBLINGS`].
fn spacing(interval: u64, replicas: u32, open_for: u64) -> u64 {
    interval
        .saturating_mul(u64::from(replicas.max(1)))
        .saturating_mul(1 << doublings(open_for))
}

/// How many times a spell `open_for` long has halved its copies' rate: one
/// per minute past the first, at most [`MAX_DOUBLINGS`].
fn doublings(open_for: u64) -> u64 {
    (open_for / duration_nanos(FULL_RATE_SPELL)).min(MAX_DOUBLINGS)
}

/// How long `target`'s open spell has lasted at `now`.
fn open_for<T, B>(target: &ShadowTarget<T, B>, now: u64) -> u64 {
    now.saturating_sub(target.spell.load(Ordering::Relaxed))
}

/// The credit, in [`COPY`]s, a request turned away earns at `share`; an
/// error naming `field` unless the share is more than 0 and at most 1.
pub(crate) fn share_credit(share: f64, field: &'static str) -> Result<u64, ConfigError> {
    if share > 0.0 && share <= 1.0 {
        Ok(((share * COPY as f64).round() as u64).max(1))
    } else {
        Err(ConfigError::new(
            field,
            format!("must be more than 0 and at most 1, got {share}"),
        ))
    }
}

/// One target as the sender sees it.
struct ShadowTarget<T, B> {
    // Cloned from under a lock (at most once per interval): a service need
    // not be `Sync`.
    service: Mutex<T>,
    breaker: BreakerHandle,
    /// Its rewrite, for its active probe.
    rewrite: Option<Rewrite<B>>,
    /// Its active probe, if the user gave one.
    active: Option<MakeProbe<B>>,
    /// Nanoseconds since `origin` + 1 of its last copy; 0: none.
    last: AtomicU64,
    /// Copies it has earned, in [`COPY`]s: a full one at the start of an
    /// open spell, then the share of each request it turns away, at most
    /// one held.
    credit: AtomicU64,
    /// Of its last refusal or failure seen here, and of the start of its
    /// open spell.
    seen: AtomicU64,
    spell: AtomicU64,
    /// Its copy in flight, if any: a newer one replaces it, so that copies
    /// to a target that hangs do not pile up, and the one that finds it
    /// back is the latest (a slow target's, once it can no longer be in
    /// time).
    in_flight: Mutex<Option<InFlight>>,
    /// Whether its active probes are being sent.
    ticking: AtomicBool,
}

/// What every copy of one failover shares: targets of stack `T`, whose
/// answers have bodies `ResponseBody<RB>`.
pub(crate) struct Shadow<T, B, RB> {
    probes: ShadowProbes<B>,
    /// The credit each request turned away earns, in [`COPY`]s.
    earned: u64,
    targets: Box<[ShadowTarget<T, B>]>,
    /// Told of a copy to a slow target answered with success (where the
    /// failover times its targets, and so demotes them).
    answered: Option<CopyAnswered>,
    origin: Instant,
    _body: PhantomData<fn() -> RB>,
}

impl<T, B, RB> Shadow<T, B, RB> {
    /// Nanoseconds since the origin + 1.
    fn now(&self) -> u64 {
        duration_nanos(self.origin.elapsed()).saturating_add(1)
    }

    /// The spacing of `target`'s copies at `now` (see [`spacing`]).
    fn spacing(&self, target: &ShadowTarget<T, B>, now: u64) -> u64 {
        let interval = duration_nanos(self.probes.interval).max(1);
        spacing(interval, target.breaker.replicas(), open_for(target, now))
    }

    /// Whether `target`'s turn for a copy has come at `now` (its credit
    /// earned, if `earned`): the time of its last copy if so. Read only.
    fn turn_due(&self, target: &ShadowTarget<T, B>, now: u64, earned: bool) -> Option<u64> {
        if earned && target.credit.load(Ordering::Relaxed) < COPY {
            return None;
        }
        let before = target.last.load(Ordering::Relaxed);
        (before == 0 || now >= before.saturating_add(self.spacing(target, now))).then_some(before)
    }

    /// Whether `target`'s turn for a copy has come at `now`, taken if so
    /// (its credit spent, if `earned`, and its budget token drawn).
    fn take_turn(&self, target: &ShadowTarget<T, B>, now: u64, earned: bool) -> bool {
        let Some(before) = self.turn_due(target, now, earned) else {
            return false;
        };
        if target
            .last
            .compare_exchange(before, now, Ordering::Relaxed, Ordering::Relaxed)
            .is_err()
        {
            return false;
        }
        if earned {
            let _ = target
                .credit
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |credit| {
                    Some(credit.saturating_sub(COPY))
                });
        }
        self.probes.budget.as_ref().is_none_or(|b| b.withdraw())
    }
}

impl<T, B, RB> Shadow<T, B, RB>
where
    B: Clone + Send + 'static,
    T: Service<Request<B>, Response = http::Response<ResponseBody<RB>>, Error = BoxError>
        + Clone
        + Send
        + 'static,
    T::Future: Send,
    RB: Body + Send + 'static,
    ResponseBody<RB>: Body + Send,
{
    /// The sender for `targets` (each its stack, breaker, rewrite and
    /// name, in failover order), each active probe given to the target it
    /// names, telling `answered` of copies to slow targets answered with
    /// success; an error names what of `probes` does not fit them.
    pub(crate) fn sender(
        probes: ShadowProbes<B>,
        targets: impl IntoIterator<Item = (T, BreakerHandle, Option<Rewrite<B>>, &'static str)>,
        answered: Option<CopyAnswered>,
    ) -> Result<ShadowSend<B>, ConfigError> {
        let shadow = Arc::new(Self::new(probes, targets, answered)?);
        Ok(Arc::new(move |index: usize, found: Found<'_, B>| {
            shadow.found(index, found);
        }))
    }

    fn new(
        mut probes: ShadowProbes<B>,
        targets: impl IntoIterator<Item = (T, BreakerHandle, Option<Rewrite<B>>, &'static str)>,
        answered: Option<CopyAnswered>,
    ) -> Result<Self, ConfigError> {
        if probes.interval.is_zero() {
            return Err(ConfigError::new(
                "shadow_probes.interval",
                "must be greater than zero, got 0s",
            ));
        }
        let earned = share_credit(probes.share, "shadow_probes.share")?;
        let mut active = std::mem::take(&mut probes.active);
        let targets: Box<[_]> = targets
            .into_iter()
            .map(|(service, breaker, rewrite, name)| {
                let probe = active.iter().position(|(t, _)| &**t == name);
                ShadowTarget {
                    service: Mutex::new(service),
                    breaker,
                    rewrite,
                    active: probe.map(|i| active.swap_remove(i).1),
                    last: AtomicU64::new(0),
                    credit: AtomicU64::new(0),
                    seen: AtomicU64::new(0),
                    spell: AtomicU64::new(0),
                    in_flight: Mutex::new(None),
                    ticking: AtomicBool::new(false),
                }
            })
            .collect();
        if let Some((name, _)) = active.first() {
            return Err(ConfigError::new(
                "shadow_probes.active",
                format!("`{name}` names no target, or a target named before"),
            ));
        }
        Ok(Shadow {
            probes,
            earned,
            targets,
            answered,
            origin: Instant::now(),
            _body: PhantomData,
        })
    }

    /// A request found target `index` open or slow (a copy goes, if its
    /// turn has come), or failed there (its breaker may have opened).
    /// Unless it is slow, its active probes start.
    fn found(self: &Arc<Self>, index: usize, found: Found<'_, B>) {
        // Outside a runtime there is nowhere to send a copy from.
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let Some(target) = self.targets.get(index) else {
            return;
        };
        let now = self.now();
        let (request, slow_delay) = match found {
            Found::Open(request) => (Some(request), None),
            Found::Slow { request, delay } => (Some(request), Some(delay)),
            Found::Failed => (None, None),
        };
        // The open (or slow) spell: from the first failure or refusal after a quiet
        // gap, kept alive by refusals only, so that a target failing now
        // and then while closed starts afresh each time.
        let seen_before = target.seen.load(Ordering::Relaxed);
        if seen_before == 0 || now.saturating_sub(seen_before) > duration_nanos(NEW_SPELL_GAP) {
            target.seen.store(now, Ordering::Relaxed);
            target.spell.store(now, Ordering::Relaxed);
            target.credit.store(COPY, Ordering::Relaxed);
        } else if request.is_some() {
            target.seen.store(now, Ordering::Relaxed);
            // Halved as the spacing doubles, so that a long spell costs
            // less at any traffic. At most one copy held (and what is
            // left of the last refusal's share): a quiet spell does not
            // save up a burst.
            let earned = (self.earned >> doublings(open_for(target, now))).max(1);
            let _ = target
                .credit
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |credit| {
                    (credit < COPY).then(|| (credit + earned).min(COPY + earned - 1))
                });
        }
        // A slow target's breaker is closed: its active probes wait for it
        // to open.
        if slow_delay.is_none()
            && target.active.is_some()
            && !target.ticking.swap(true, Ordering::Relaxed)
        {
            runtime.spawn(Self::tick(Arc::downgrade(self), index));
        }
        let Some(request) = request else {
            return;
        };
        let answered = match slow_delay {
            None => None,
            Some(delay) => {
                // Only a failover that times its targets demotes them.
                let Some(answered) = &self.answered else {
                    return;
                };
                // Read before the copy in flight, for the many requests
                // that pass a slow target over between its copies; and a
                // copy is not replaced while it may yet answer in time:
                // the one that finds the target fast is the first sent
                // after it is.
                if self.turn_due(target, now, true).is_none()
                    || target
                        .in_flight
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .as_ref()
                        .is_some_and(|copy| copy.may_answer_within(delay))
                {
                    return;
                }
                Some(answered.clone())
            }
        };
        if self.take_turn(target, now, true) {
            let mut copy = request.clone();
            // Passed over, the request was not written for this target.
            if answered.is_some()
                && let Some(rewrite) = &target.rewrite
            {
                rewrite(&mut copy);
            }
            self.send(&runtime, index, copy, ProbeOf::Caller(answered));
        }
    }

    /// Sends `probe` to target `index` as a shadow probe, replacing the
    /// one in flight.
    fn send(
        &self,
        runtime: &tokio::runtime::Handle,
        index: usize,
        mut probe: Request<B>,
        of: ProbeOf,
    ) {
        let target = &self.targets[index];
        probe.extensions_mut().insert(ShadowProbe);
        let answered = match of {
            ProbeOf::Caller(answered) => {
                if let Some(prepare) = &self.probes.prepare {
                    prepare(&mut probe);
                }
                answered
            }
            ProbeOf::Active => None,
        };
        let mut service = target
            .service
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let timeout = self.probes.timeout;
        let task = runtime.spawn(async move {
            let probe = async move {
                std::future::poll_fn(|cx| service.poll_ready(cx))
                    .await
                    .ok()?;
                let sent = Instant::now();
                // The probe's error, if any, is its breaker's business only.
                let response = service.call(probe).await.ok()?;
                if let Some(answered) = answered
                    && response.status().is_success()
                    && response
                        .extensions()
                        .get::<Classification>()
                        .is_none_or(|c| c.verdict == Verdict::Success)
                {
                    answered(index, sent.elapsed());
                }
                read(response).await;
                Some(())
            };
            // A probe that hangs is dropped (its probe slot, if it took
            // one, is handed back as for any cancelled call).
            let _ = tokio::time::timeout(timeout, probe).await;
        });
        // The probe before, if still in flight, is dropped (which hands
        // back all it held, as for any cancelled call).
        let before = target
            .in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .replace(InFlight {
                task: task.abort_handle(),
                sent: Instant::now(),
            });
        if let Some(before) = before {
            before.task.abort();
        }
    }

    /// Sends target `index`'s active probe on the copies' schedule while
    /// its breaker is open (or half-open) and no copy went in the spacing,
    /// so that a target is found back when no traffic comes. A probe the
    /// breaker turns away is a shadow probe (its success closes the
    /// breaker); one it admits, its cool-off over, is the breaker's own
    /// probe, which no caller waits on. Ends once no breaker of the target
    /// is open, or with the failover (it holds the sender weakly).
    async fn tick(weak: Weak<Self>, index: usize) {
        // However the task ends (the failover dropped, the runtime shut
        // down, the user's probe panicked), the next failure may start
        // another.
        let mut ticking = Ticking {
            shadow: weak.clone(),
            index,
            armed: true,
        };
        loop {
            // Held only between sleeps.
            let Some(wait) = weak
                .upgrade()
                .map(|shadow| shadow.spacing(&shadow.targets[index], shadow.now()))
            else {
                return;
            };
            tokio::time::sleep(Duration::from_nanos(wait)).await;
            let Some(shadow) = weak.upgrade() else {
                return;
            };
            let target = &shadow.targets[index];
            if !breaker_open(&target.breaker) {
                // Released before a last look, so that a failure in
                // between either finds it free or is seen here.
                target.ticking.store(false, Ordering::Relaxed);
                ticking.armed = false;
                if breaker_open(&target.breaker) && !target.ticking.swap(true, Ordering::Relaxed) {
                    ticking.armed = true;
                    continue;
                }
                return;
            }
            let (Some(make), Ok(runtime)) = (&target.active, tokio::runtime::Handle::try_current())
            else {
                return;
            };
            // Where requests are turned away, their copies and their share
            // govern: an active probe is for a target no traffic reaches.
            let now = shadow.now();
            let quiet = now.saturating_sub(target.seen.load(Ordering::Relaxed))
                >= shadow.spacing(target, now);
            if quiet && shadow.take_turn(target, now, false) {
                let mut probe = make();
                if let Some(rewrite) = &target.rewrite {
                    rewrite(&mut probe);
                }
                shadow.send(&runtime, index, probe, ProbeOf::Active);
            }
        }
    }
}

/// A target's shadow probe in flight.
struct InFlight {
    task: AbortHandle,
    sent: Instant,
}

impl InFlight {
    /// Whether it may yet answer within `delay` of being sent.
    fn may_answer_within(&self, delay: Duration) -> bool {
        !self.task.is_finished() && self.sent.elapsed() < delay
    }
}

/// What a shadow probe is.
enum ProbeOf {
    /// A copy of a caller's request (its output capped by `prepare`), to
    /// a target open or, with a hook to tell of its answer, slow.
    Caller(Option<CopyAnswered>),
    /// A target's active probe, sent as the user made it.
    Active,
}

/// Whether any breaker of a target is open or half-open.
fn breaker_open(breaker: &BreakerHandle) -> bool {
    breaker.states().iter().any(|scope| {
        scope.mechanism == Mechanism::Breaker
            && matches!(scope.state, State::Open | State::HalfOpen)
    })
}

/// Frees a target's active probes to start again when their task ends.
struct Ticking<T, B, RB> {
    shadow: Weak<Shadow<T, B, RB>>,
    index: usize,
    armed: bool,
}

impl<T, B, RB> Drop for Ticking<T, B, RB> {
    fn drop(&mut self) {
        if self.armed
            && let Some(shadow) = self.shadow.upgrade()
        {
            shadow.targets[self.index]
                .ticking
                .store(false, Ordering::Relaxed);
        }
    }
}

/// Reads a copy's answer as far as its breaker needs: a body to its end
/// (a short one: its output is capped), a stream to its first output (the
/// breaker decides there for a shadow probe); then drops it.
async fn read<RB: Body>(response: http::Response<ResponseBody<RB>>)
where
    ResponseBody<RB>: Body,
{
    let mut body = std::pin::pin!(response.into_body());
    while !body.stream_decided() {
        match body.frame().await {
            Some(Ok(_)) => {}
            _ => break,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_are_spaced_by_the_fleet_and_further_apart_as_a_spell_lasts() {
        let second = duration_nanos(Duration::from_secs(1));
        let minute = duration_nanos(FULL_RATE_SPELL);
        assert_eq!(spacing(second, 1, 0), second);
        assert_eq!(spacing(second, 1, minute - 1), second);
        assert_eq!(spacing(second, 8, 0), 8 * second);
        assert_eq!(spacing(second, 1, minute), 2 * second);
        assert_eq!(spacing(second, 1, 3 * minute), 8 * second);
        assert_eq!(spacing(second, 1, 100 * minute), 32 * second);
        assert_eq!(spacing(second, 0, 0), second, "no replica counted: alone");
        assert_eq!(spacing(u64::MAX, 8, 100 * minute), u64::MAX);
    }

    #[test]
    fn a_share_is_more_than_zero_and_at_most_one() {
        let credit = |share| share_credit(share, "share").ok();
        assert_eq!(credit(1.0), Some(COPY));
        assert_eq!(credit(0.1), Some(COPY / 10 + 1));
        assert_eq!(credit(1e-12), Some(1), "tiny, not nothing");
        for share in [0.0, -0.1, 1.01, f64::NAN, f64::INFINITY] {
            assert_eq!(credit(share), None, "{share}");
        }
    }
}
