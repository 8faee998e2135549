//! The `failsafe` stack: failsafe 1.3's circuit breaker per account, each
//! call run through `failsafe::futures::CircuitBreaker::call`, with the
//! SDKs' own retries around the failover.
//!
//! Configured as the crate's documentation shows
//! (<https://docs.rs/failsafe/1.3.0/failsafe/>):
//!
//! - **Policy**: `Config::new()`'s default, a success rate under 80% over
//!   30 s (at least 5 calls) *or* 5 consecutive failures; each opening
//!   lasts an equal-jittered 10 s × 2ⁿ up to 300 s. The one difference:
//!   the jitter comes from the scenario's seed instead of `thread_rng`
//!   (failsafe takes any `Iterator<Item = Duration>` as a backoff), so a
//!   seed gives one report. failsafe lets every call through while
//!   half-open; the first answer closes or reopens it.
//! - **What counts**: the future given to `call` fails as a user's would
//!   after `reqwest::Response::error_for_status()`: any 4xx or 5xx (429 and
//!   401 included), a transport error, a stream that failed after its 200.
//! - **Retry**: failsafe has none; a user keeps the SDK's (the
//!   `unprotected` stack's): 3 attempts, 408/409/429/5xx and transport
//!   errors retried after the `retry-after` hint (≤ 60 s) or 0.5 s × 2ⁿ
//!   jittered. Each attempt goes to the first account whose breaker
//!   admits it; only a refusal (`failsafe::Error::Rejected`) moves on, as
//!   in `naive`.

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;
use std::task::{Context, Poll};
use std::time::Duration;

use failsafe::failure_policy::{
    ConsecutiveFailures, OrElse, SuccessRateOverTimeWindow, consecutive_failures,
    success_rate_over_time_window,
};
use failsafe::futures::CircuitBreaker as _;
use failsafe::{Config, FailurePolicy as _, Instrument, StateMachine};
use tokio::time::Instant;

use super::TransitionLog;
use crate::outcome::{Fail, TransitionRecord};
use crate::provider::Provider;
use crate::scenario::Scenario;
use crate::sdk::{ATTEMPTS, Attempt, attempt, backoff};

/// failsafe's default policy, with a seeded jitter.
pub type Policy =
    OrElse<SuccessRateOverTimeWindow<SeededEqualJitter>, ConsecutiveFailures<SeededEqualJitter>>;

/// One account's breaker: failsafe's own state machine.
pub type AccountBreaker = StateMachine<Policy, Transitions>;

/// failsafe's `backoff::equal_jittered(10 s, 300 s)` (half of 10 s × 2ⁿ,
/// plus up to as much again, in whole seconds) with its random draw taken
/// from a seeded generator.
#[derive(Clone, Debug)]
pub struct SeededEqualJitter {
    attempt: u32,
    rng: fastrand::Rng,
}

impl Iterator for SeededEqualJitter {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        let exp = (10u64 << self.attempt.min(30)).min(300);
        self.attempt = self.attempt.saturating_add(1);
        Some(Duration::from_secs(exp / 2 + self.rng.u64(0..=exp / 2)))
    }
}

/// failsafe's default policy (`Config::new()`), its jitter seeded.
fn default_policy(seed: u64) -> Policy {
    let backoff = SeededEqualJitter {
        attempt: 0,
        rng: fastrand::Rng::with_seed(seed),
    };
    success_rate_over_time_window(0.8, 5, Duration::from_secs(30), backoff.clone())
        .or_else(consecutive_failures(5, backoff))
}

/// failsafe's `Instrument`: records each transition of one account's breaker.
#[derive(Debug)]
pub struct Transitions {
    target: String,
    log: TransitionLog,
    state: Mutex<&'static str>,
}

impl Transitions {
    fn to(&self, to: &'static str) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if *state != to {
            self.log
                .breaker(&self.target, state.as_ref(), to, "failsafe");
            *state = to;
        }
    }
}

impl Instrument for Transitions {
    fn on_call_rejected(&self) {}

    fn on_open(&self) {
        self.to("open");
    }

    fn on_half_open(&self) {
        self.to("half_open");
    }

    fn on_closed(&self) {
        self.to("closed");
    }
}

/// failsafe reads `failsafe::clock::now()`, which is `Instant::now()`
/// unless its (doc-hidden, public) test clock is frozen on this thread.
/// Around each of failsafe's calls the drill freezes it at the virtual
/// time: a fixed real instant plus the tokio clock's progress.
#[derive(Clone, Copy, Debug)]
struct VirtualClock {
    /// Far enough ahead of the real clock that the frozen clock is only
    /// ever moved forward.
    anchor: std::time::Instant,
    start: Instant,
}

impl VirtualClock {
    fn new(start: Instant) -> Self {
        VirtualClock {
            anchor: std::time::Instant::now() + Duration::from_secs(86_400),
            start,
        }
    }

    fn run<R>(&self, f: impl FnOnce() -> R) -> R {
        let now = self.anchor + (Instant::now() - self.start);
        failsafe::clock::freeze(|clock| {
            clock.advance(now.saturating_duration_since(clock.now()));
            f()
        })
    }
}

/// A future polled with failsafe's clock at the virtual time.
struct OnVirtualClock<F> {
    inner: Pin<Box<F>>,
    clock: VirtualClock,
}

impl<F: Future> Future for OnVirtualClock<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let clock = self.clock;
        clock.run(|| self.inner.as_mut().poll(cx))
    }
}

/// The `failsafe` stack of one run (of one replica).
pub struct FailsafeStack {
    breakers: Vec<AccountBreaker>,
    clock: VirtualClock,
    log: TransitionLog,
}

impl std::fmt::Debug for FailsafeStack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FailsafeStack").finish_non_exhaustive()
    }
}

impl FailsafeStack {
    /// One breaker per target, seeded from the scenario.
    pub fn new(sc: &Scenario, start: Instant, replica: usize) -> Self {
        let clock = VirtualClock::new(start);
        let log = TransitionLog::new(start);
        let breakers = sc
            .targets
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let seed = sc.seed ^ ((replica as u64) << 32) ^ (i as u64 + 1);
                let instrument = Transitions {
                    target: t.name.clone(),
                    log: log.clone(),
                    state: Mutex::new("closed"),
                };
                // Built on the virtual clock: the policy's window starts now.
                clock.run(|| {
                    Config::new()
                        .failure_policy(default_policy(seed))
                        .instrument(instrument)
                        .build()
                })
            })
            .collect();
        FailsafeStack {
            breakers,
            clock,
            log,
        }
    }

    /// Each account's breaker, in the scenario's order.
    pub fn breakers(&self) -> &[AccountBreaker] {
        &self.breakers
    }

    /// Whether account `idx`'s breaker would let a call through now (as
    /// failsafe decides it, on the virtual clock).
    pub fn is_call_permitted(&self, idx: usize) -> Option<bool> {
        let breaker = self.breakers.get(idx)?;
        Some(self.clock.run(|| breaker.is_call_permitted()))
    }

    /// The breakers' transitions so far.
    pub fn transitions(&self) -> Vec<TransitionRecord> {
        self.log.records()
    }

    /// One request: up to 3 attempts (the SDKs'), each to the first account
    /// whose breaker admits it.
    pub async fn call(
        &self,
        provider: &Provider,
        rng: &RefCell<fastrand::Rng>,
    ) -> Result<usize, Fail> {
        for n in 1..=ATTEMPTS {
            let mut failed = None;
            for (i, breaker) in self.breakers.iter().enumerate() {
                let call = breaker.call(async move {
                    match attempt(provider, i).await {
                        Attempt::Served => Ok(()),
                        failed => Err(failed),
                    }
                });
                let answer = OnVirtualClock {
                    inner: Box::pin(call),
                    clock: self.clock,
                }
                .await;
                match answer {
                    Ok(()) => return Ok(i),
                    Err(failsafe::Error::Rejected) => continue,
                    Err(failsafe::Error::Inner(a)) => {
                        failed = Some(a);
                        break;
                    }
                }
            }
            match failed {
                None => return Err(Fail::CircuitOpen),
                Some(Attempt::Retryable { hint, fail, .. }) => {
                    if n == ATTEMPTS {
                        return Err(fail);
                    }
                    tokio::time::sleep(backoff(n, hint, rng)).await;
                }
                Some(Attempt::Final { fail, .. }) => return Err(fail),
                Some(Attempt::Served) => return Err(Fail::Upstream),
            }
        }
        Err(Fail::Upstream)
    }
}
