//! Reporting one call's outcome, from its future or from its response body.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use http::HeaderMap;
use levee_core::breaker::Permit;
use levee_core::classify::hints::{self, RateLimits};
use levee_core::classify::{Classification, StreamScanner, Verdict};
use levee_core::clock::{Clock, ceil_millis};
use levee_core::pace::Spacing;
use tokio::time::{Instant, Sleep};

use super::hot::model_tag;
use super::scope::CallScopes;
use super::settings::Limits;
use super::shared::{DomainHandle, Report, lock_domain};
use crate::error::{StreamTimeout, StreamTimeoutKind};

/// [`Tracker::in_flight`] of a call not counted in flight.
pub(crate) const NOT_IN_FLIGHT: u32 = u32::MAX;

/// What a call needs to report its outcome. No reference counts: the domain
/// is a `Copy` handle and the scope keys are held inline. Every response
/// future carries one, so it is kept small: a future over 256 bytes costs
/// more to move than the breaker's whole decision.
pub(crate) struct Tracker {
    pub(crate) domain: DomainHandle,
    pub(crate) permit: Permit,
    pub(crate) scopes: CallScopes,
    /// Whether the failure domain's key already ends with `/model`
    /// (`isolate_by_model`).
    pub(crate) isolated: bool,
    pub(crate) slow: SlowClock,
    /// Whether the time to first byte feeds the domain's latency estimate.
    pub(crate) track_latency: bool,
    /// Counted in flight (for pacing) until it lands, with its estimated
    /// tokens; [`NOT_IN_FLIGHT`] when not counted.
    pub(crate) in_flight: u32,
    pub(crate) settled: bool,
}

/// When a call started, its slow thresholds and its stream timeouts, in
/// whole milliseconds (rounded up; 0 = none). The clock is read only when
/// one is set or the layer keeps a latency estimate.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct SlowClock {
    started: Option<Instant>,
    first_byte_ms: u32,
    total_ms: u32,
    first_content_ms: u32,
    stall_ms: u32,
}

impl SlowClock {
    /// A clock for a call with these limits: started now if any is set, or
    /// if the call's latency is measured anyway (`measured`).
    #[inline]
    pub(crate) fn start(limits: Limits, measured: bool) -> Self {
        if !limits.any() && !measured {
            return SlowClock::default();
        }
        let Limits {
            first_byte,
            total,
            first_content,
            stall,
        } = limits;
        let ms = |d: Option<Duration>| d.map_or(0, threshold_ms);
        SlowClock {
            started: Some(Instant::now()),
            first_byte_ms: ms(first_byte),
            total_ms: ms(total),
            first_content_ms: ms(first_content),
            stall_ms: ms(stall),
        }
    }

    /// Whether more than `ms` passed since the start (0: no limit). Inline
    /// up to the limit's check: an untimed call reads no clock.
    #[inline]
    fn over(&self, ms: u32) -> bool {
        ms != 0 && self.elapsed_over(ms)
    }

    #[inline(never)]
    fn elapsed_over(&self, ms: u32) -> bool {
        self.started
            .is_some_and(|at| at.elapsed() > Duration::from_millis(u64::from(ms)))
    }
}

/// A threshold in whole milliseconds, rounded up, at least 1.
fn threshold_ms(d: Duration) -> u32 {
    u32::try_from(ceil_millis(d).as_millis())
        .unwrap_or(u32::MAX)
        .max(1)
}

impl Tracker {
    /// Feeds the time to first byte to the domain's latency estimate, when
    /// the layer keeps one.
    #[inline]
    pub(crate) fn first_byte(&self) {
        if self.track_latency
            && let Some(started) = self.slow.started
            && let Some(hot) = self.domain.hot()
        {
            hot.latency.record(started.elapsed());
        }
    }

    /// Feeds the time to a stream's first output to the domain's estimate,
    /// when the layer keeps one.
    fn first_content(&self) {
        if self.track_latency
            && let Some(started) = self.slow.started
            && let Some(hot) = self.domain.hot()
        {
            hot.first_content.record(started.elapsed());
        }
    }

    /// Whether the first byte came later than the slow-call threshold.
    #[inline]
    pub(crate) fn is_slow(&self) -> bool {
        self.slow.over(self.slow.first_byte_ms)
    }

    fn is_slow_in_total(&self) -> bool {
        self.slow.over(self.slow.total_ms)
    }

    /// Reports the outcome. A plain success on a closed, clean breaker
    /// writes nothing: it only reads the published status word.
    ///
    /// Returns when the call's scopes admit a call again, if the outcome
    /// left one of them refusing (gated, parked or open).
    #[inline]
    pub(crate) fn settle(&mut self, c: &Classification, slow: bool) -> Option<Instant> {
        self.settled = true;
        if c.verdict == Verdict::Success && !slow && self.permit.probe.is_none() {
            match self.domain.hot() {
                Some(hot) if !hot.success_is_noop() => {}
                // Clean, or evicted (only idle entries are): nothing to tell.
                _ => return None,
            }
        }
        self.record(c, slow)
    }

    /// Whether the call is a shadow probe ([`ShadowProbe`](super::ShadowProbe)):
    /// its outcome can only close the breaker, and a stream's first output
    /// is enough. Told by its permit, so a tracker carries nothing more.
    pub(crate) fn is_shadow(&self) -> bool {
        self.permit.is_shadow()
    }

    /// [`settle`](Self::settle) for an outcome the domain must hear of:
    /// out of line, so that a plain success inlines to two reads. Under
    /// rolling tripping, a plain success adds one on the thread's own
    /// stripe of the window's open bucket, with no lock.
    #[inline(never)]
    fn record(&self, c: &Classification, slow: bool) -> Option<Instant> {
        if self.is_shadow() {
            let cell = lock_domain(self.domain)?;
            let shared = cell.shared.upgrade()?;
            // A shadow permit carries the open spell it was admitted in.
            let spell = self.permit.admitted_at;
            shared.record_shadow(cell, self.domain, c, slow, spell);
            return None;
        }
        let plain_success = c.verdict == Verdict::Success && !slow && self.permit.probe.is_none();
        if plain_success
            && let Some(hot) = self.domain.hot()
            && hot.count_window_success(self.permit.generation)
        {
            return None;
        }
        let mut cell = lock_domain(self.domain)?;
        // A success that only counts in a rolling window is recorded under
        // the domain's lock alone: the layer's reference count, which the
        // full path bumps, is a cache line every thread's success would
        // write. It opens its bucket to the successes after it, which then
        // take no lock at all until the bucket ends or a failure counts.
        if plain_success && let Some((window, clock)) = cell.rolling {
            let now = clock.now();
            if cell.state.record_idle_success(window, self.permit, now) {
                if let Some(hot) = self.domain.hot() {
                    cell.open_window_bucket(hot, window, now);
                }
                return None;
            }
        }
        let shared = cell.shared.upgrade()?;
        let reopens = shared.record(
            cell,
            Report {
                handle: self.domain,
                permit: self.permit,
                classification: c,
                slow,
                scopes: &self.scopes,
                isolated: self.isolated,
            },
        );
        reopens.map(|at| shared.clock.instant(at))
    }

    /// Reads a response's rate-limit headers and, when a limit is near its
    /// reserve (or half used), hands them to the call's quota scope, which
    /// records them and paces if it must. A healthy scope takes no lock.
    #[inline]
    pub(crate) fn pace(&self, headers: &HeaderMap) {
        if RateLimits::present(headers) {
            self.pace_on(headers);
        }
    }

    /// [`pace`](Self::pace) for a response that reports limits: out of
    /// line, so a call to a provider that sends none inlines a name scan.
    #[inline(never)]
    fn pace_on(&self, headers: &HeaderMap) {
        let Some(hot) = self.domain.hot() else {
            return;
        };
        let Some(check) = hot.pace_check() else {
            return;
        };
        let limits = RateLimits::read_lazy(headers, &|| hints::reference_time(headers, None));
        // One of a fleet's replicas spends its share of the limits.
        let share = check.share();
        if check.spreads()
            && let Some(spacing) = Spacing::of(&limits)
        {
            hot.set_spacing(spacing.times(share), model_tag(self.scopes.model()));
        }
        // A provider that reports its limits is paced on them: calls to it
        // are counted in flight from now on, since the count of an answer
        // misses every call sent after it (about rate × latency of them),
        // the other replicas' calls too (as many as this one's, each).
        hot.set_counting(true);
        let in_flight = hot.in_flight().times(share);
        if !check.near(&limits, in_flight) {
            return;
        }
        let Some(cell) = self.domain.lock() else {
            return;
        };
        if let Some(shared) = cell.shared.upgrade() {
            shared.pace(cell, &self.scopes, self.isolated, &limits, in_flight);
        }
    }

    /// The call's answer arrived (or it ended without one): no longer in
    /// flight.
    #[inline]
    pub(crate) fn landed(&mut self) {
        let tokens = std::mem::replace(&mut self.in_flight, NOT_IN_FLIGHT);
        if tokens != NOT_IN_FLIGHT
            && let Some(hot) = self.domain.hot()
        {
            hot.landed(u64::from(tokens));
        }
    }

    /// The call ended without an outcome that says anything (a Levee
    /// rejection from below): hand back a probe slot, count nothing.
    pub(crate) fn settle_neutral(&mut self) {
        self.settled = true;
        self.release();
    }

    fn release(&self) {
        if self.permit.probe.is_none() {
            return;
        }
        let Some(cell) = self.domain.lock() else {
            return;
        };
        if let Some(shared) = cell.shared.upgrade() {
            shared.release(cell, self.domain, self.permit);
        }
    }
}

impl Drop for Tracker {
    fn drop(&mut self) {
        self.landed();
        if !self.settled {
            // Cancelled (the caller dropped the future, or a streamed body
            // before its end): neutral, but a probe slot goes back.
            self.release();
        }
    }
}

// === Watch ===

/// A stream's reported outcome, and when its scopes admit a call again if
/// it left one refusing.
pub(crate) type Outcome = (Classification, Option<Instant>);

/// A streamed 2xx response under watch: the scanner reads every frame as it
/// passes, and the outcome is reported when the stream decides, ends, or
/// goes quiet past a timeout.
pub(crate) struct Watch {
    scanner: StreamScanner,
    tracker: Tracker,
    slow_first_byte: bool,
    /// Whether output came (and its time was recorded).
    content: bool,
    /// The stream's timeouts, when the call has any.
    timer: Option<StreamTimer>,
}

/// A stream's first-content and stall timeouts, on one sleep.
struct StreamTimer {
    sleep: Pin<Box<Sleep>>,
    started: Instant,
    first_content: Option<Duration>,
    stall: Option<Duration>,
    /// Which timeout the sleep is set for; `None` when neither applies
    /// any more (output came, and there is no stall timeout).
    armed: Option<StreamTimeoutKind>,
}

impl StreamTimer {
    fn new(clock: &SlowClock) -> Option<Self> {
        let started = clock.started?;
        let ms = |ms: u32| (ms != 0).then(|| Duration::from_millis(u64::from(ms)));
        let (first_content, stall) = (ms(clock.first_content_ms), ms(clock.stall_ms));
        if first_content.is_none() && stall.is_none() {
            return None;
        }
        let mut timer = StreamTimer {
            sleep: Box::pin(tokio::time::sleep_until(started)),
            started,
            first_content,
            stall,
            armed: None,
        };
        timer.rearm(false);
        Some(timer)
    }

    /// Sets the sleep for the next deadline: the first-content one until
    /// output comes, or the stall one from now, whichever is first.
    fn rearm(&mut self, content: bool) {
        let first_content = self
            .first_content
            .filter(|_| !content)
            .map(|d| (self.started + d, StreamTimeoutKind::FirstContent));
        let stall = self
            .stall
            .map(|d| (Instant::now() + d, StreamTimeoutKind::Stall));
        let next = match (first_content, stall) {
            (Some(f), Some(s)) => Some(if s.0 < f.0 { s } else { f }),
            (f, s) => f.or(s),
        };
        self.armed = next.map(|(deadline, kind)| {
            self.sleep.as_mut().reset(deadline);
            kind
        });
    }

    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<StreamTimeout> {
        let Some(kind) = self.armed else {
            return Poll::Pending;
        };
        ready!(self.sleep.as_mut().poll(cx));
        let after = match kind {
            StreamTimeoutKind::FirstContent => self.first_content,
            _ => self.stall,
        };
        Poll::Ready(StreamTimeout::new(kind, after.unwrap_or_default()))
    }
}

impl Watch {
    pub(crate) fn new(scanner: StreamScanner, tracker: Tracker, slow_first_byte: bool) -> Self {
        let timer = StreamTimer::new(&tracker.slow);
        Watch {
            scanner,
            tracker,
            slow_first_byte,
            content: false,
            timer,
        }
    }

    fn slow(&self) -> bool {
        self.slow_first_byte || self.tracker.is_slow_in_total()
    }

    /// Whether the model's output has started.
    pub(crate) fn has_content(&self) -> bool {
        self.content
    }

    /// Events read so far.
    pub(crate) fn events(&self) -> u32 {
        self.scanner.events()
    }

    /// Feeds one data frame; the outcome once it is reported (the watch
    /// has done its work then).
    #[inline]
    pub(crate) fn feed(&mut self, data: &[u8]) -> Option<Outcome> {
        let decided = self.scanner.feed(data);
        // Both are skipped once output came and when no timeout is set.
        if !self.content && self.scanner.has_content() {
            self.content = true;
            self.tracker.first_content();
            if self.tracker.is_shadow() {
                // A shadow probe asked only whether the domain answers.
                let c = Classification::new(Verdict::Success, "shadow:first_content");
                self.tracker.settle(&c, self.slow());
                return Some((c, None));
            }
        }
        if let Some(timer) = &mut self.timer
            && (timer.stall.is_some() || timer.armed.is_some() && self.content)
        {
            timer.rearm(self.content);
        }
        let c = decided?;
        let slow = self.slow();
        let reopens = self.tracker.settle(&c, slow);
        Some((c, reopens))
    }

    /// A timeout that passed while the stream was quiet, if one did.
    pub(crate) fn poll_timeout(&mut self, cx: &mut Context<'_>) -> Poll<StreamTimeout> {
        match &mut self.timer {
            Some(timer) => timer.poll(cx),
            None => Poll::Pending,
        }
    }

    /// The stream went quiet past `timeout`: an availability failure.
    pub(crate) fn time_out(mut self, timeout: &StreamTimeout) -> Outcome {
        let c = Classification::new(Verdict::Availability, timeout.reason());
        let reopens = self.tracker.settle(&c, true);
        (c, reopens)
    }

    /// The stream ended (`None` from the body).
    pub(crate) fn finish(mut self) -> Outcome {
        let c = self.scanner.finish();
        let slow = self.slow();
        let reopens = self.tracker.settle(&c, slow);
        (c, reopens)
    }

    /// The body failed mid-stream: the stream was cut.
    pub(crate) fn fail(mut self) -> Outcome {
        let c = Classification::new(Verdict::Availability, "stream:body_error");
        let reopens = self.tracker.settle(&c, false);
        (c, reopens)
    }
}
