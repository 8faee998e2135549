//! The response future of [`Failover`](super::Failover): the failover loop.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll, ready};

use http::{Request, Response};
use http_body::Body;
use levee_core::classify::{Classification, Verdict};
use pin_project_lite::pin_project;
use tokio::time::{Instant, Sleep};
use tower_service::Service;

use super::error::{NoTargetAvailable, Refusal, RefusalKind};
use super::shadow::{Found, ShadowSend};
use super::speed::HedgeCopy;
use super::state::{Common, Meta};
use super::target::ServedBy;
use crate::breaker::error::Refused;
use crate::breaker::{PeekMemo, Reopening, RequestHead, ResponseBody};
use crate::error::{BoxError, Rejection, is_rejection, transport_failure};
use crate::inline_str::ScopeName;

pub use super::stack::TargetFuture;

type Output<RB> = Result<Response<ResponseBody<RB>>, BoxError>;

pin_project! {
    /// Response future of [`Failover`](super::Failover).
    ///
    /// Visits the targets in order: skips those whose state refuses the
    /// request (read, not called), calls the first that admits it, and goes
    /// on to the next after a throttled, quota, availability or credential
    /// outcome. It holds an untouched copy of the request only while another
    /// target may follow. Dropping it drops the target call in flight, which
    /// gives back that call's bulkhead permit and probe slot.
    ///
    /// Each request gets a `levee.failover` span (target `levee::failover`,
    /// level `debug`), entered while the future is polled, with the fields
    /// `target` and `attempt` of the latest target called and the `verdict`
    /// of the outcome returned (`success`, a failure's verdict, or
    /// `rejected` for a refusal sent nowhere), and the `scope` the target's
    /// breaker admitted the call under. With the level disabled it is
    /// never created: the cost is the callsite's level check.
    pub struct ResponseFuture<B, RB: Body, T: Service<Request<B>>> {
        #[pin]
        lane: Lane<B, RB, T, T::Future>,
        span: tracing::Span,
        common: Arc<Common<B, T>>,
        // The request as the caller sent it, kept for the next target.
        request: Option<Request<B>>,
    }
}

pin_project! {
    /// Where a request is. Most end with the target chosen in `call`,
    /// called there and kept inline with what a next target would need, so
    /// that the common case is written straight; any other course runs the
    /// failover loop, boxed.
    #[project = LaneProj]
    enum Lane<B, RB: Body, T, F> {
        // The target chosen in `call`, called there: the first call; with
        // hedging, its clock and hedge once it waits (boxed, so that a
        // call answered at once carries one word for it).
        First { #[pin] future: F, index: usize, passed: Passed, watch: WatchSlot<F> },
        // Any later step: a target not ready at once, or a next target
        // (boxed: each goes with a failure, a refusal or a wait already,
        // and the common case's future stays small, so it moves cheaply).
        Loop { looping: Pin<Box<Looping<B, RB, T, F>>> },
        // Decided in `call`: nothing to send.
        Finished { error: Option<BoxError> },
        Done,
    }
}

pin_project! {
    /// The failover loop: choose a target, ready it, call it, settle its
    /// outcome, and on to the next until one answers for the request.
    #[project = LoopingProj]
    struct Looping<B, RB: Body, T, F> {
        #[pin]
        state: State<B, T, F>,
        progress: Progress,
        // The last answer that sent the request on, returned if no other
        // target takes it.
        last: Option<Output<RB>>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<B, T, F> {
        // Choosing the next target.
        Select,
        // Waiting for the chosen target's service to be ready, with the
        // request for it.
        Ready { pending: Option<(T, Request<B>)>, index: usize },
        // A target call in flight (it holds the permit and probe slot).
        Calling { #[pin] future: F, index: usize },
        // A hedge in flight after the first call failed (boxed when sent).
        Hedge { future: Pin<Box<F>>, index: usize },
        Done,
    }
}

/// Where a first call's [`Watch`] is kept: dropped out of line, so that
/// a call never watched pays a test for it, not a call.
struct WatchSlot<F>(Option<Box<Watch<F>>>);

impl<F> Drop for WatchSlot<F> {
    #[inline(always)]
    fn drop(&mut self) {
        if let Some(watch) = self.0.take() {
            drop_watch(watch);
        }
    }
}

#[cold]
#[inline(never)]
fn drop_watch<F>(watch: Box<Watch<F>>) {
    drop(watch);
}

/// A first call's clock, kept when the failover hedges: when it was sent,
/// the timer for its target's hedge delay, and the hedge sent when that
/// fired.
struct Watch<F> {
    started: Instant,
    timer: Option<Pin<Box<Sleep>>>,
    /// Whether the call passed its delay.
    late: bool,
    /// The hedge in flight, and its target.
    hedge: Option<(Pin<Box<F>>, usize)>,
    /// Targets a hedge was sent to and failed at.
    hedge_tried: u64,
}

impl<F> Watch<F> {
    /// The first call answered with success: its time, for its target.
    fn answered(&self, meta: &Meta, index: usize) {
        meta.answered(index, self.started, self.late);
    }

    /// The first call failed: the hedge in flight, if any, goes on as the
    /// request's next call, and targets hedges failed at are tried.
    fn into_hedge(self, progress: &mut Progress) -> Option<(Pin<Box<F>>, usize)> {
        progress.tried |= self.hedge_tried;
        let (future, index) = self.hedge?;
        progress.tried |= 1 << index;
        progress.attempts += 1;
        Some((future, index))
    }
}

/// What choosing in `call` passed over on its way to the first call: the
/// targets tried (the one called included), and the refusals of those that
/// refused. Allocates nothing unless a target refuses.
#[derive(Debug, Default)]
struct Passed {
    tried: u64,
    refusals: Vec<Refusal>,
}

impl Passed {
    /// Where the request stands after its first call.
    fn after_first_call(self) -> Progress {
        Progress {
            tried: self.tried,
            attempts: 1,
            refusals: self.refusals,
            ..Progress::default()
        }
    }
}

/// Where one request stands: targets tried, groups to pass over, calls made,
/// refusals seen, and when the targets that failed admit a call again.
/// Allocates nothing unless a target refuses.
#[derive(Debug, Default)]
struct Progress {
    tried: u64,
    avoid: u64,
    attempts: u32,
    refusals: Vec<Refusal>,
    /// The earliest [`Reopening`] of the targets that answered and failed.
    reopens: Option<Instant>,
    /// Whether a target that failed left its scopes admitting calls.
    admits_now: bool,
}

impl Progress {
    /// Whether the request is kept aside for another target when the one
    /// just chosen is called: some target is left untried (`others`) and
    /// the request may make another call.
    fn keeps(&self, meta: &Meta, others: bool) -> bool {
        others && (self.attempts as usize) + 1 < meta.max_targets
    }

    /// Notes when a target that answered and failed admits a call again.
    fn failed(&mut self, reopening: Option<&Reopening>) {
        match reopening {
            Some(r) => self.reopens = Some(self.reopens.map_or(r.at, |at| at.min(r.at))),
            None => self.admits_now = true,
        }
    }

    /// The real answer the request ends with after every target failed or
    /// refused, marked with when the failover would admit it again: the
    /// earliest reopening of any target, or none if some target admits now.
    fn last_answer<RB: Body>(&self, mut last: Output<RB>) -> Output<RB> {
        if let Ok(response) = &mut last {
            let extensions = response.extensions_mut();
            extensions.remove::<Reopening>();
            if !self.admits_now {
                let now = Instant::now();
                let refused = self.refusals.iter().map(|r| now + r.retry_after());
                if let Some(at) = refused.chain(self.reopens).min() {
                    extensions.insert(Reopening { at });
                }
            }
        }
        last
    }
}

/// A caller's clone's own copy of one target: its service, polled ready
/// before a call, and its memo of its last peek at the target.
pub(crate) struct TargetCopy<T> {
    pub(crate) service: T,
    pub(crate) memo: PeekMemo,
}

/// The outcome of choosing: small, so that returning it copies nothing
/// (a rewritten request is left in an out-slot instead).
enum Pick {
    /// Call target `index` with its rewritten copy of the request, if
    /// `select` left one, else with the request itself; `keep` says
    /// whether another target may follow, so the request must be kept
    /// aside.
    Call { index: usize, keep: bool },
    /// The `fallback_on` hook kept the request at a target that refused.
    Stop(BoxError),
    /// No target left to try.
    Exhausted,
}

impl<B, RB, T> ResponseFuture<B, RB, T>
where
    B: Clone,
    RB: Body,
    T: Service<Request<B>, Response = Response<ResponseBody<RB>>, Error = BoxError> + Clone,
{
    /// Chooses the first target in `call` and, if the caller's copy of its
    /// service was polled ready, calls it at once; otherwise a clone of the
    /// target's service is readied in the future.
    pub(crate) fn start(
        common: Arc<Common<B, T>>,
        request: Request<B>,
        copies: &mut [TargetCopy<T>],
        ready: &mut u64,
    ) -> Self {
        let span = tracing::debug_span!(
            target: "levee::failover",
            "levee.failover",
            target = tracing::field::Empty,
            scope = tracing::field::Empty,
            attempt = tracing::field::Empty,
            verdict = tracing::field::Empty,
        );
        // Entered for what the target's layers record on it (the scope).
        let entered = (!span.is_disabled()).then(|| span.enter());
        let mut progress = Progress::default();
        // A ready target is called at once, its future built in one
        // expression: not its state aside first, then copied in.
        macro_rules! call_ready {
            ($pick:expr, $send:expr, $kept:expr) => {
                if let Pick::Call { index, keep } = $pick
                    && *ready & (1 << index) != 0
                    && index < copies.len()
                {
                    // It must be polled ready again before its next call.
                    *ready &= !(1 << index);
                    macro_rules! first {
                        ($future:expr) => {
                            ResponseFuture {
                                lane: Lane::First {
                                    future: $future,
                                    index,
                                    passed: Passed {
                                        tried: progress.tried,
                                        refusals: progress.refusals,
                                    },
                                    watch: WatchSlot(None),
                                },
                                span,
                                common,
                                request: $kept(keep),
                            }
                        };
                    }
                    // Nothing between the call and the future it is written
                    // into (an exit from the span there would copy it).
                    if entered.is_none() {
                        drop(entered); // no span: nothing to record or exit
                        let future = copies[index].service.call($send(keep));
                        return first!(future);
                    }
                    record_call(&span, &common, index, 1);
                    let future = copies[index].service.call($send(keep));
                    drop(entered);
                    return first!(future);
                }
            };
        }
        let mut rewritten = None;
        let (pick, mut request) = if common.rewrites {
            // A rewrite for the last target takes the request itself: it
            // waits in a slot, where `select` can take it.
            let mut request = Some(request);
            let pick = select(&common, &mut request, &mut rewritten, &mut progress, copies);
            call_ready!(
                pick,
                |keep| to_send(&mut request, &mut rewritten, keep),
                // What `to_send` left: the request while another target may follow.
                |_| request
            );
            (pick, request)
        } else {
            // Read where the caller put it, and moved once: into the call,
            // or into the future while another target may follow.
            let pick = select_first(&common, &request, &mut progress, copies);
            if let Pick::Call { keep: true, .. } = pick {
                call_ready!(pick, |_| request.clone(), |_| Some(request));
            } else {
                call_ready!(pick, |_| request, |_| None);
            }
            (pick, Some(request))
        };
        let lane = match pick {
            Pick::Call { index, keep } => {
                let pending = (
                    common.entries[index].service.clone(),
                    to_send(&mut request, &mut rewritten, keep),
                );
                Lane::looping(
                    State::Ready {
                        pending: Some(pending),
                        index,
                    },
                    progress,
                    None,
                )
            }
            Pick::Stop(e) => Lane::Finished { error: Some(e) },
            Pick::Exhausted => Lane::Finished {
                error: Some(no_target(&common, &mut progress)),
            },
        };
        drop(entered);
        ResponseFuture {
            lane,
            span,
            common,
            request,
        }
    }
}

impl<B, RB: Body, T, F> Lane<B, RB, T, F> {
    /// The failover loop from `state` on (boxed: see [`Lane::Loop`]).
    fn looping(state: State<B, T, F>, progress: Progress, last: Option<Output<RB>>) -> Self {
        Lane::Loop {
            looping: Box::pin(Looping {
                state,
                progress,
                last,
            }),
        }
    }
}

impl<B, RB, T> Future for ResponseFuture<B, RB, T>
where
    B: Clone,
    RB: Body,
    T: Service<Request<B>, Response = Response<ResponseBody<RB>>, Error = BoxError> + Clone,
{
    type Output = Output<RB>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        // Without a span to enter and record on, the answer is written where
        // it is returned: held aside to be read, it would be copied there.
        if this.span.is_disabled() {
            return poll_lane(this.lane, this.span, this.common, this.request, cx);
        }
        let _entered = this.span.enter();
        let output = ready!(poll_lane(
            this.lane,
            this.span,
            this.common,
            this.request,
            cx
        ));
        this.span.record("verdict", outcome_verdict(&output));
        Poll::Ready(output)
    }
}

/// One poll of a request's lane.
#[inline(always)]
fn poll_lane<B, RB, T>(
    mut lane: Pin<&mut Lane<B, RB, T, T::Future>>,
    span: &tracing::Span,
    common: &Arc<Common<B, T>>,
    request: &mut Option<Request<B>>,
    cx: &mut Context<'_>,
) -> Poll<Output<RB>>
where
    B: Clone,
    RB: Body,
    T: Service<Request<B>, Response = Response<ResponseBody<RB>>, Error = BoxError> + Clone,
{
    match lane.as_mut().project() {
        LaneProj::First {
            future,
            index,
            passed,
            watch,
        } => {
            let index = *index;
            // A success ends the request here, tagged where it lies and
            // returned as polled, written where the caller reads it: the
            // response is the largest thing a lane hands on.
            let mut polled = future.poll(cx);
            let Poll::Ready(answer) = &mut polled else {
                if common.meta.hedging.is_some()
                    && let Some(won) =
                        watch_first(common, index, passed.tried, &mut watch.0, request, cx)
                {
                    lane.set(Lane::Done); // cancels the first call
                    return Poll::Ready(won);
                }
                return Poll::Pending;
            };
            // The lane stays as it is: the target's future goes with this
            // one, and a poll after completion reaches it, and panics.
            if let Ok(response) = answer
                && tag_answer(common, 1, index, response)
            {
                if watch.0.is_some() {
                    // The hedge, if any, is dropped (cancelled) with it.
                    answered_first(&common.meta, index, &mut watch.0);
                }
                return polled;
            }
            let mut progress = std::mem::take(passed).after_first_call();
            let hedge = watch.0.take().and_then(|w| w.into_hedge(&mut progress));
            match settle(common, &mut progress, index, polled) {
                // No earlier target answered: the outcome is the request's.
                Settled::Return(output) => {
                    lane.set(Lane::Done);
                    return Poll::Ready(output);
                }
                Settled::Advance(last) => {
                    let next = match hedge {
                        Some((future, index)) => State::Hedge { future, index },
                        None => State::Select,
                    };
                    lane.set(Lane::looping(next, progress, last));
                }
            }
        }
        LaneProj::Loop { .. } => {}
        LaneProj::Finished { error } => {
            let error = error.take().expect("polled after completion");
            lane.set(Lane::Done);
            return Poll::Ready(Err(error));
        }
        LaneProj::Done => panic!("failover ResponseFuture polled after completion"),
    }
    // The loop, from the first call that went on to it, or from `call`.
    let LaneProj::Loop { looping } = lane.as_mut().project() else {
        unreachable!("every other lane returned above");
    };
    let output = ready!(looping.as_mut().project().poll(cx, span, common, request));
    lane.set(Lane::Done);
    Poll::Ready(output)
}

impl<B, RB, T> LoopingProj<'_, B, RB, T, T::Future>
where
    B: Clone,
    RB: Body,
    T: Service<Request<B>, Response = Response<ResponseBody<RB>>, Error = BoxError> + Clone,
{
    /// The failover loop, one poll.
    fn poll(
        &mut self,
        cx: &mut Context<'_>,
        span: &tracing::Span,
        common: &Arc<Common<B, T>>,
        request: &mut Option<Request<B>>,
    ) -> Poll<Output<RB>> {
        let this = self;
        loop {
            // Every arm either moves to another state, ends the request, or
            // settles a target's outcome, which decides below.
            let settled = match this.state.as_mut().project() {
                StateProj::Select => {
                    let mut rewritten = None;
                    // Later choices read no memo: the caller's clone is not at hand.
                    let copies = &mut [];
                    match select(common, request, &mut rewritten, this.progress, copies) {
                        Pick::Call { index, keep } => {
                            // The previous answer is kept until this target
                            // answers: its bulkhead may still refuse.
                            let service = common.entries[index].service.clone();
                            let request = to_send(request, &mut rewritten, keep);
                            this.state.set(State::Ready {
                                pending: Some((service, request)),
                                index,
                            });
                            continue;
                        }
                        Pick::Stop(e) => {
                            this.state.set(State::Done);
                            return Poll::Ready(last_or(this.last, this.progress, |_| e));
                        }
                        Pick::Exhausted => {
                            // With no real answer, every target refused and
                            // nothing was sent.
                            this.state.set(State::Done);
                            let output = last_or(this.last, this.progress, |progress| {
                                no_target(common, progress)
                            });
                            return Poll::Ready(output);
                        }
                    }
                }
                StateProj::Ready { pending, index } => {
                    let index = *index;
                    let (service, _) = pending.as_mut().expect("polled after completion");
                    let ready = ready!(service.poll_ready(cx));
                    this.progress.attempts += 1;
                    match ready {
                        Ok(()) => {
                            record_call(span, common, index, this.progress.attempts);
                            let (mut service, request) =
                                pending.take().expect("polled after completion");
                            let future = service.call(request);
                            this.state.set(State::Calling { future, index });
                            continue;
                        }
                        Err(e) => settle_error(common, this.progress, index, e),
                    }
                }
                StateProj::Calling { future, index } => {
                    let index = *index;
                    match called(common, this.progress, index, future.poll(cx)) {
                        Ok(settled) => settled,
                        Err(polled) => return end_call(this.state.as_mut(), polled),
                    }
                }
                StateProj::Hedge { future, index } => {
                    let index = *index;
                    match called(common, this.progress, index, future.as_mut().poll(cx)) {
                        Ok(settled) => settled,
                        Err(polled) => return end_call(this.state.as_mut(), polled),
                    }
                }
                StateProj::Done => panic!("failover ResponseFuture polled after completion"),
            };
            if let Some(output) =
                end_or_advance(this.state.as_mut(), this.last, this.progress, settled)
            {
                return Poll::Ready(output);
            }
        }
    }
}

/// A watched first call answered with success: notes its time for its
/// target and drops its watch (and the hedge in flight, if any).
#[cold]
#[inline(never)]
fn answered_first<F>(meta: &Meta, index: usize, watch: &mut Option<Box<Watch<F>>>) {
    if let Some(watch) = watch.take() {
        watch.answered(meta, index);
    }
}

/// Watches a first call that is waiting, with hedging on: starts its clock
/// at its first wait, notes it late and sends a hedge when its target's
/// delay passes, and polls the hedge. The hedge's success, if it won.
#[cold]
#[inline(never)]
fn watch_first<B, RB, T>(
    common: &Arc<Common<B, T>>,
    index: usize,
    tried: u64,
    watch: &mut Option<Box<Watch<T::Future>>>,
    request: &mut Option<Request<B>>,
    cx: &mut Context<'_>,
) -> Option<Output<RB>>
where
    B: Clone,
    RB: Body,
    T: Service<Request<B>, Response = Response<ResponseBody<RB>>, Error = BoxError> + Clone,
{
    let meta = &*common.meta;
    let w = match watch {
        Some(w) => w,
        // Only a call another target may follow is watched: with none
        // left, neither a hedge nor a demotion changes where it goes.
        None if request.is_none() => return None,
        None => {
            let started = Instant::now();
            let timer = meta.targets[index]
                .speed
                .delay()
                .map(|delay| Box::pin(tokio::time::sleep_until(started + delay)));
            watch.insert(Box::new(Watch {
                started,
                timer,
                late: false,
                hedge: None,
                hedge_tried: 0,
            }))
        }
    };
    if let Some(timer) = &mut w.timer
        && timer.as_mut().poll(cx).is_ready()
    {
        w.timer = None;
        w.late = true;
        meta.late(index);
        w.hedge = send_hedge(common, tried | w.hedge_tried, request, cx);
    }
    let (future, hedge_index) = w.hedge.as_mut()?;
    let hedge_index = *hedge_index;
    let mut polled = future.as_mut().poll(cx);
    let Poll::Ready(answer) = &mut polled else {
        return None;
    };
    if let Ok(response) = answer
        && tag_answer(common, 2, hedge_index, response)
    {
        tracing::debug!(
            target: "levee::failover",
            target_name = meta.targets[hedge_index].name,
            late = meta.targets[index].name,
            "a hedge answered first"
        );
        let Poll::Ready(output) = polled else {
            unreachable!("matched ready")
        };
        return Some(output);
    }
    // The hedge failed: its target is noted as after any failure, and the
    // request waits on its first call.
    w.hedge = None;
    w.hedge_tried |= 1 << hedge_index;
    let mut scratch = Progress {
        tried: tried | w.hedge_tried,
        attempts: 2,
        ..Progress::default()
    };
    drop(settle(common, &mut scratch, hedge_index, polled));
    None
}

/// Sends a copy of the request to the next target that admits it, if the
/// hedge budget allows: its call, boxed, and the target.
fn send_hedge<B, RB, T>(
    common: &Arc<Common<B, T>>,
    tried: u64,
    request: &mut Option<Request<B>>,
    cx: &mut Context<'_>,
) -> Option<(Pin<Box<T::Future>>, usize)>
where
    B: Clone,
    RB: Body,
    T: Service<Request<B>, Response = Response<ResponseBody<RB>>, Error = BoxError> + Clone,
{
    let meta = &*common.meta;
    let hedging = meta.hedging.as_ref()?;
    if request.is_none() || !hedging.try_take(meta.served_total()) {
        return None;
    }
    let mut progress = Progress {
        tried,
        attempts: 1,
        ..Progress::default()
    };
    let mut rewritten = None;
    // Read through a reference: a rewrite copies it, never takes the
    // request the first call may still need.
    let original = request.as_ref().expect("checked above");
    let sent = match select(
        common,
        &mut &*original,
        &mut rewritten,
        &mut progress,
        &mut [],
    ) {
        Pick::Call { index, .. } => {
            let mut service = common.entries[index].service.clone();
            match service.poll_ready(cx) {
                Poll::Ready(Ok(())) => {
                    let mut copy = to_send(request, &mut rewritten, true);
                    copy.extensions_mut().insert(HedgeCopy);
                    Some((Box::pin(service.call(copy)), index))
                }
                _ => None,
            }
        }
        Pick::Stop(_) | Pick::Exhausted => None,
    };
    if sent.is_none() {
        hedging.give_back();
    }
    sent
}

/// The request's answer when it ends without a target's success: the last
/// real answer a target gave, marked with when the failover admits the
/// request again, else `error`. A real answer beats a synthetic one.
fn last_or<RB: Body>(
    last: &mut Option<Output<RB>>,
    progress: &mut Progress,
    error: impl FnOnce(&mut Progress) -> BoxError,
) -> Output<RB> {
    match last.take() {
        Some(last) => progress.last_answer(last),
        None => Err(error(progress)),
    }
}

/// What target `index`'s answer, polled ready and not a success, means for
/// the request.
fn settle<B, RB: Body, T>(
    common: &Common<B, T>,
    progress: &mut Progress,
    index: usize,
    polled: Poll<Output<RB>>,
) -> Settled<RB> {
    match polled {
        Poll::Ready(Ok(response)) => failed_answer(common, progress, index, response),
        Poll::Ready(Err(e)) => settle_error(common, progress, index, e),
        Poll::Pending => unreachable!("settled once answered"),
    }
}

/// A call's answer, polled: what it means for the request if it failed,
/// else the poll to return (pending, or the success, tagged).
fn called<B, RB: Body, T>(
    common: &Common<B, T>,
    progress: &mut Progress,
    index: usize,
    mut polled: Poll<Output<RB>>,
) -> Result<Settled<RB>, Poll<Output<RB>>> {
    let Poll::Ready(answer) = &mut polled else {
        return Err(Poll::Pending);
    };
    if let Ok(response) = answer
        && tag_answer(common, progress.attempts, index, response)
    {
        return Err(polled);
    }
    Ok(settle(common, progress, index, polled))
}

/// Returns a call's poll: the loop is done once it is ready.
fn end_call<B, T, F, RB: Body>(
    mut state: Pin<&mut State<B, T, F>>,
    polled: Poll<Output<RB>>,
) -> Poll<Output<RB>> {
    if polled.is_ready() {
        state.set(State::Done);
    }
    polled
}

/// Ends the request with a settled answer, or moves on to the next target.
fn end_or_advance<B, RB: Body, T, F>(
    mut state: Pin<&mut State<B, T, F>>,
    last: &mut Option<Output<RB>>,
    progress: &mut Progress,
    settled: Settled<RB>,
) -> Option<Output<RB>> {
    match settled {
        Settled::Return(output) => {
            // A refusal that ends the request still loses to a real
            // answer an earlier target gave.
            let output = match output {
                Err(e) if is_rejection(&*e) => last_or(last, progress, |_| e),
                output => output,
            };
            state.set(State::Done);
            Some(output)
        }
        Settled::Advance(answer) => {
            if answer.is_some() {
                *last = answer;
            }
            state.set(State::Select);
            None
        }
    }
}

/// Chooses the next target to call, skipping (and recording) those that
/// refuse. The request is read where it lies: only a target's rewrite
/// copies it (or takes it, when no other target is left untried), into
/// `rewritten`. `copies` are the caller's clone's copies of the targets,
/// with its memos of its last peek at each (none once the request has left
/// the caller).
fn select<B: Clone, T>(
    common: &Common<B, T>,
    request: &mut impl Original<B>,
    rewritten: &mut Option<Request<B>>,
    progress: &mut Progress,
    copies: &mut [TargetCopy<T>],
) -> Pick {
    let meta = &*common.meta;
    while (progress.attempts as usize) < meta.max_targets {
        let Some(index) = meta.next_candidate(progress.tried, progress.avoid, || common.draw())
        else {
            break;
        };
        progress.tried |= 1 << index;
        let others = meta.untried_left(progress.tried);
        // A rewritten request can't be unwritten: the original stays aside
        // while another target may need it.
        // Written in place: a `None` built aside would be copied in whole.
        if let Some(f) = &common.entries[index].rewrite {
            *rewritten = request.to_rewrite(others);
            let Some(copy) = rewritten else {
                break;
            };
            f(copy);
        } else if rewritten.is_some() {
            *rewritten = None; // an earlier target's, which refused
        }
        let Some(to_peek) = rewritten.as_ref().or(request.get()) else {
            break;
        };
        let memo = copies.get_mut(index).map(|copy| &mut copy.memo);
        match peek(meta, index, to_peek, memo) {
            Ok(()) => {
                if let Some(original) = request.get() {
                    shadow_slow(common, index, progress.tried, original);
                }
                return Pick::Call {
                    index,
                    keep: progress.keeps(meta, others),
                };
            }
            Err(refused) => {
                shadow(common, index, &refused, to_peek, || others);
                if let Err(stop) = pass_refused(meta, index, refused, progress) {
                    return Pick::Stop(stop);
                }
            }
        }
    }
    Pick::Exhausted
}

/// [`select`] in `call`, for a failover without rewrites: its first choice
/// read straight (no rewrite to make, nothing tried yet), the rest of its
/// course by `select` should that choice refuse. The common case.
#[inline(always)]
fn select_first<B: Clone, T>(
    common: &Common<B, T>,
    request: &Request<B>,
    progress: &mut Progress,
    copies: &mut [TargetCopy<T>],
) -> Pick {
    let meta = &*common.meta;
    let Some(index) = meta.next_candidate(0, 0, || common.draw()) else {
        return Pick::Exhausted;
    };
    progress.tried = 1 << index;
    let memo = copies.get_mut(index).map(|copy| &mut copy.memo);
    match peek(meta, index, request, memo) {
        Ok(()) => {
            shadow_slow(common, index, progress.tried, request);
            Pick::Call {
                index,
                keep: progress.keeps(meta, meta.untried_left(progress.tried)),
            }
        }
        Err(refused) => {
            let others = || meta.untried_left(progress.tried);
            shadow(common, index, &refused, request, others);
            match pass_refused(meta, index, refused, progress) {
                Err(stop) => Pick::Stop(stop),
                Ok(()) => select(common, &mut &*request, &mut None, progress, copies),
            }
        }
    }
}

/// Sends a shadow probe to target `index` if its breaker refused `request`
/// and another target may serve it (when the failover sends them).
#[inline]
fn shadow<B, T>(
    common: &Common<B, T>,
    index: usize,
    refused: &Refused,
    request: &Request<B>,
    others: impl FnOnce() -> bool,
) {
    if let Some(send) = &common.shadow
        && refused.kind() == RefusalKind::CircuitOpen
        && others()
    {
        send(index, Found::Open(request));
    }
}

/// Sends shadow probes to the demoted targets the request, about to call
/// target `index`, passes over (when the failover sends them), none it
/// has `tried`: a copy finds a slow target fast again before a caller's
/// trial would. Read only while some target is demoted.
#[inline]
fn shadow_slow<B, T>(common: &Common<B, T>, index: usize, tried: u64, request: &Request<B>) {
    if let Some(send) = &common.shadow
        && common.meta.demoted_targets.load(Ordering::Relaxed) != 0
    {
        shadow_slow_cold(common.meta.as_ref(), send, index, tried, request);
    }
}

#[cold]
#[inline(never)]
fn shadow_slow_cold<B>(
    meta: &Meta,
    send: &ShadowSend<B>,
    index: usize,
    tried: u64,
    request: &Request<B>,
) {
    let now = meta.now_nanos();
    // Those before it in order, and those of its pool: any other it would
    // pass over anyway. One this request called (late, it is being
    // hedged) has its call in flight already.
    let pool = meta.targets[index].pool;
    for (passed, target) in meta.targets.iter().enumerate() {
        if tried & (1 << passed) == 0
            && (passed < index || (pool.is_some() && target.pool == pool))
            && target.speed.passed_over(now)
            && let Some(delay) = target.speed.delay()
        {
            send(passed, Found::Slow { request, delay });
        }
    }
}

/// Whether target `index`'s state admits `request` (read, not called),
/// with the caller's clone's memo of its last peek at it, if at hand.
#[inline(always)]
fn peek<B>(
    meta: &Meta,
    index: usize,
    request: &Request<B>,
    memo: Option<&mut PeekMemo>,
) -> Result<(), Refused> {
    let target = &meta.targets[index];
    target
        .breaker
        .admits_cached(&RequestHead::of(request), &target.peek, memo)
}

/// Notes target `index`'s refusal found by a peek; the refusal, boxed, if
/// the request stops there (the `fallback_on` hook keeps it).
fn pass_refused(
    meta: &Meta,
    index: usize,
    refused: Refused,
    progress: &mut Progress,
) -> Result<(), BoxError> {
    if !advances_past_refusal(meta, index, refused.kind()) {
        return Err(refused.into_error());
    }
    progress
        .refusals
        .push(peeked_refusal(meta.targets[index].name, refused));
    Ok(())
}

/// Where [`select`] reads the request as the caller sent it.
trait Original<B> {
    fn get(&self) -> Option<&Request<B>>;
    /// A copy for a target's rewrite: the original itself when no other
    /// target may need it and it can be taken.
    fn to_rewrite(&mut self, others: bool) -> Option<Request<B>>;
}

/// The future's copy, kept while another target may follow.
impl<B: Clone> Original<B> for Option<Request<B>> {
    fn get(&self) -> Option<&Request<B>> {
        self.as_ref()
    }

    fn to_rewrite(&mut self, others: bool) -> Option<Request<B>> {
        if others { self.clone() } else { self.take() }
    }
}

/// The caller's request, read before the first call by a failover without
/// rewrites (one with any keeps the request in a slot a last target's
/// rewrite can take it from), so a rewrite's copy is never asked for.
impl<B: Clone> Original<B> for &Request<B> {
    fn get(&self) -> Option<&Request<B>> {
        Some(self)
    }

    fn to_rewrite(&mut self, _others: bool) -> Option<Request<B>> {
        Some((*self).clone())
    }
}

/// The request to send to a chosen target: its rewritten copy, else the
/// request itself (a copy of it while another target may follow). The
/// request is kept aside only while another target may follow.
#[inline]
fn to_send<B: Clone>(
    request: &mut Option<Request<B>>,
    rewritten: &mut Option<Request<B>>,
    keep: bool,
) -> Request<B> {
    match rewritten.take() {
        Some(rewritten) => {
            if !keep {
                *request = None;
            }
            rewritten
        }
        None if keep => request.clone().expect("select read the request"),
        None => request.take().expect("select read the request"),
    }
}

/// `target`'s refusal, read from the rejection in `err`; `None` unless
/// one target's layer refused (a `NoTargetAvailable` from a nested failover
/// is not one target's refusal).
pub(crate) fn refusal(
    target: &'static str,
    err: &(dyn std::error::Error + 'static),
) -> Option<Refusal> {
    let rejection = Rejection::find(err)?;
    if let Rejection::NoTargetAvailable(_) = rejection {
        return None;
    }
    Some(Refusal::new(
        target,
        rejection.kind(),
        ScopeName::copied(rejection.scope()?),
        rejection.retry_after(),
    ))
}

/// `target`'s refusal, as a peek found it: its scope's name moved, not
/// copied or checked again.
fn peeked_refusal(target: &'static str, refused: Refused) -> Refusal {
    let (kind, retry_after) = (refused.kind(), refused.retry_after());
    Refusal::new(target, kind, refused.into_scope(), retry_after)
}

/// The error for a request no target took, from every target's refusal.
fn no_target<B, T>(common: &Common<B, T>, progress: &mut Progress) -> BoxError {
    let meta = &*common.meta;
    meta.no_target
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let refusals = std::mem::take(&mut progress.refusals);
    NoTargetAvailable::new(refusals, meta.max_retry_after).into()
}

/// What a target's outcome means for the request.
enum Settled<RB: Body> {
    Return(Output<RB>),
    /// Try the next target, keeping this answer (if any) in case none takes it.
    Advance(Option<Output<RB>>),
}

/// What an error from target `index` (its readiness or its call) means for
/// the request.
fn settle_error<B, RB: Body, T>(
    common: &Common<B, T>,
    progress: &mut Progress,
    index: usize,
    e: BoxError,
) -> Settled<RB> {
    let meta = &*common.meta;
    if is_rejection(&*e) {
        // Refused below (a full bulkhead, or state that changed since the
        // peek): nothing was sent, so it is not a call.
        progress.attempts -= 1;
        // `None` from a nested failover's rejection: no one target's refusal.
        if let Some(refusal) = refusal(meta.targets[index].name, &*e)
            && advances_past_refusal(meta, index, refusal.kind())
        {
            progress.refusals.push(refusal);
            return Settled::Advance(None);
        }
        return Settled::Return(Err(e));
    }
    if !meta.advances(index, Verdict::Availability, None) {
        return Settled::Return(Err(e));
    }
    let reason = format!("availability: {}", transport_failure(&*e).reason());
    progress.failed(None);
    note_failure(common, progress, index, Verdict::Availability, reason);
    Settled::Advance(Some(Err(e)))
}

/// Whether the request goes on after target `index` refused it (found by
/// a peek or by its call) for `kind`.
fn advances_past_refusal(meta: &Meta, index: usize, kind: RefusalKind) -> bool {
    meta.advances(index, refused_verdict(kind), Some(kind))
}

/// Tags a target's answer with who served it (and notes what it says is
/// left of the target's limits); `true` if it is a success, counted as
/// served, which the request ends with.
#[inline(always)]
fn tag_answer<B, T, RB: Body>(
    common: &Common<B, T>,
    attempt: u32,
    index: usize,
    response: &mut Response<ResponseBody<RB>>,
) -> bool {
    let meta = &*common.meta;
    meta.note_limits(index, response.headers());
    let tag = ServedBy::tag(meta.targets[index].name_id, index, attempt);
    response.body_mut().set_served_by(tag);
    if meta.served_by_extension {
        response.extensions_mut().insert(ServedBy::from(tag));
    }
    let success = response
        .extensions()
        .get::<Classification>()
        .is_none_or(|c| c.verdict == Verdict::Success);
    if success {
        meta.served(index);
    }
    success
}

/// A target's answer that failed: the request moves on (keeping the
/// answer in case no other target takes it) unless the policy keeps it here.
fn failed_answer<B, RB: Body, T>(
    common: &Common<B, T>,
    progress: &mut Progress,
    index: usize,
    response: Response<ResponseBody<RB>>,
) -> Settled<RB> {
    // A failed answer carries its classification (`tag_answer`).
    let classification = response.extensions().get::<Classification>();
    let verdict = classification.map_or(Verdict::Availability, |c| c.verdict);
    if !common.meta.advances(index, verdict, None) {
        return Settled::Return(Ok(response));
    }
    let reason = match classification {
        Some(c) => format!("{verdict}: {}", c.reason.as_str()),
        None => format!("{verdict}: "),
    };
    progress.failed(response.extensions().get::<Reopening>());
    note_failure(common, progress, index, verdict, reason);
    Settled::Advance(Some(Ok(response)))
}

fn note_failure<B, T>(
    common: &Common<B, T>,
    progress: &mut Progress,
    index: usize,
    verdict: Verdict,
    reason: String,
) {
    let meta = &*common.meta;
    if verdict == Verdict::Availability
        && let Some(g) = meta.targets[index].group
    {
        // Overload is provider-wide (Anthropic's 529 is API-wide): try
        // another provider or region next.
        progress.avoid |= 1 << g;
    }
    tracing::debug!(
        target: "levee::failover",
        target_name = meta.targets[index].name,
        %reason,
        "trying the next target"
    );
    meta.failed(index, verdict, reason);
    if let Some(send) = &common.shadow
        && matches!(verdict, Verdict::Availability | Verdict::Credential)
    {
        // Its breaker may have opened: its active probe, if any, starts.
        send(index, Found::Failed);
    }
}

/// Notes on the request's span which target is called, as which attempt.
fn record_call<B, T>(span: &tracing::Span, common: &Common<B, T>, index: usize, attempt: u32) {
    if !span.is_disabled() {
        span.record("target", common.meta.targets[index].name);
        span.record("attempt", attempt);
    }
}

/// The verdict of the outcome a request ends with, for its span.
pub(crate) fn outcome_verdict<RB>(output: &Result<Response<RB>, BoxError>) -> &'static str {
    match output {
        Ok(response) => response
            .extensions()
            .get::<Classification>()
            .map_or("success", |c| c.verdict.as_str()),
        Err(e) => error_verdict(&**e),
    }
}

/// The verdict of a request that ended in `err`: `rejected` for a Levee
/// refusal, else an availability failure.
pub(crate) fn error_verdict(err: &(dyn std::error::Error + 'static)) -> &'static str {
    if is_rejection(err) {
        "rejected"
    } else {
        Verdict::Availability.as_str()
    }
}

/// The verdict a refusal stands for, as the `fallback_on` hook sees it.
fn refused_verdict(kind: RefusalKind) -> Verdict {
    match kind {
        // A caller's own limit, like a provider's, returns at a known time.
        RefusalKind::Throttled | RefusalKind::ClientLimit => Verdict::Throttled,
        RefusalKind::Parked => Verdict::Quota,
        RefusalKind::CircuitOpen | RefusalKind::BulkheadFull => Verdict::Availability,
    }
}

impl<B, RB: Body, T: Service<Request<B>>> fmt::Debug for ResponseFuture<B, RB, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut f = f.debug_struct("ResponseFuture");
        match &self.lane {
            Lane::First { index, passed, .. } => f
                .field("state", &"calling")
                .field("target", index)
                .field("passed", passed),
            Lane::Loop { looping } => {
                let state = match looping.state {
                    State::Select => "select",
                    State::Ready { .. } => "ready",
                    State::Calling { .. } | State::Hedge { .. } => "calling",
                    State::Done => "done",
                };
                f.field("state", &state)
                    .field("progress", &looping.progress)
            }
            Lane::Finished { .. } => f.field("state", &"finished"),
            Lane::Done => f.field("state", &"done"),
        }
        .finish_non_exhaustive()
    }
}
