//! The retry decision, written once: what follows an attempt — return it,
//! stop (and why), or retry after a wait — for [`Retry`](super::Retry) and
//! [`BudgetPolicy`](super::BudgetPolicy) alike.
//!
//! Levee's rejections are answers, returned at once: the request was never
//! sent, so retrying hits the same closed door and sleeping on it is blind.
//! Two are different in kind: a [`NoTargetAvailable`] whose targets are all
//! only throttled, and a `Throttled` refusal for at most a second (a scope
//! whose requests are spread at its provider's rate,
//! [`Spacing`](levee_core::pace::Spacing)). The capacity exists and the
//! instant it returns is known (the earliest gate deadline), so waiting for
//! it is not blind. When that
//! instant fits the caller's deadline (and `max_wait`), an attempt is left
//! and the budget grants a token, the request is retried then, spread a
//! little after it so that the callers waiting on one reopen do not all
//! arrive at once. This is what keeps a pool of accounts whose sum exceeds
//! the load serving through bursts that gate every account at once.
//!
//! [`NoTargetAvailable`]: crate::failover::NoTargetAvailable

use std::borrow::Cow;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::Response;
use levee_core::classify::{Classification, Classify, ResponseView, Verdict};
use levee_core::clock::ceil_millis;
use levee_core::pace::SPREAD_BURST;
use tokio::time::Instant;

use super::budget::RetryBudget;
use super::policy::{Policy, Stop, is_retryable};
use crate::breaker::Reopening;
use crate::error::{BoxError, Rejection, transport_failure};

/// What follows one attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Next {
    /// Return the attempt's result as it is (a success, or a rejection).
    Return,
    /// Return the attempt's result, which was not a success, because of this.
    Stop(Stop),
    /// Retry after this wait (a budget token is already taken).
    RetryAfter(Duration),
}

/// What one decision reads: the knobs, the classifier and the budget.
pub(crate) struct Rules<'a, C> {
    pub(crate) policy: &'a Policy,
    pub(crate) classifier: &'a C,
    pub(crate) budget: &'a RetryBudget,
}

/// One attempt's outcome, as the decision reads it.
pub(crate) enum Attempt<'r> {
    /// A Levee rejection: the request was never sent.
    Rejected(Rejection<'r>),
    /// The provider's answer (with its extensions, where a [`Reopening`]
    /// says when the breaker beneath admits a retry again), or the
    /// transport's failure, classified.
    Classified(Cow<'r, Classification>, Option<&'r http::Extensions>),
}

impl Attempt<'_> {
    /// Whether a Levee layer refused the attempt (it was never sent).
    #[inline]
    pub(crate) fn is_rejection(&self) -> bool {
        matches!(self, Attempt::Rejected(_))
    }

    /// Whether the attempt succeeded: nothing to decide.
    #[inline]
    pub(crate) fn is_success(&self) -> bool {
        matches!(self, Attempt::Classified(c, _) if c.verdict == Verdict::Success)
    }

    /// The verdict's name, as a span records it (`rejected` for a Levee
    /// refusal).
    pub(crate) fn verdict(&self) -> &'static str {
        match self {
            Attempt::Rejected(_) => "rejected",
            Attempt::Classified(c, _) => c.verdict.as_str(),
        }
    }
}

impl<C: Classify> Rules<'_, C> {
    /// Reads an attempt's result: the [`Classification`] extension the
    /// breaker puts on a response that is not a success, else the
    /// classifier's verdict on its status and headers; an error as a Levee
    /// rejection, else by its transport failure.
    #[inline]
    pub(crate) fn read<'r, RB>(&self, result: &'r Result<Response<RB>, BoxError>) -> Attempt<'r> {
        match result {
            Ok(response) => {
                let extensions = response.extensions();
                let classification = match extensions.get::<Classification>() {
                    Some(c) => Cow::Borrowed(c),
                    None => Cow::Owned(self.classifier.classify_response(&ResponseView::new(
                        response.status(),
                        response.headers(),
                        &[],
                    ))),
                };
                Attempt::Classified(classification, Some(extensions))
            }
            Err(e) => match Rejection::find(&**e) {
                Some(rejection) => Attempt::Rejected(rejection),
                None => Attempt::Classified(
                    Cow::Owned(self.classifier.classify_transport(transport_failure(&**e))),
                    None,
                ),
            },
        }
    }

    /// Decides what follows the `attempts`-th attempt, given the caller's
    /// `deadline`, drawing jitter from `random` (a uniform draw from
    /// `0..=max`, called at most once). The wait is the provider's hint or
    /// the backoff, and never less than the time until the breaker beneath
    /// admits the retry: a retry it would refuse is not worth a token.
    pub(crate) fn next(
        &self,
        attempt: &Attempt<'_>,
        attempts: u32,
        deadline: Option<Instant>,
        random: impl FnOnce(u64) -> u64,
    ) -> Next {
        let (classification, reopens) = match attempt {
            Attempt::Rejected(rejection) => {
                return self.after_rejection(*rejection, attempts, deadline, random);
            }
            Attempt::Classified(c, extensions) => (
                c,
                extensions.and_then(|e| e.get::<Reopening>()).map(|r| r.at),
            ),
        };
        if classification.verdict == Verdict::Success {
            return Next::Return;
        }
        let policy = self.policy;
        let stop = if !is_retryable(classification) {
            Stop::NotRetryable
        } else if attempts >= policy.max_attempts {
            Stop::MaxAttempts
        } else {
            // Never sooner than the breaker beneath would admit the retry.
            let wait = policy.wait(classification, attempts, random);
            let wait = match reopens {
                Some(at) => wait.max(ceil_millis(at.saturating_duration_since(Instant::now()))),
                None => wait,
            };
            if !policy.fits(wait, deadline) {
                Stop::Deadline
            } else if !self.budget.withdraw() {
                Stop::BudgetExhausted
            } else {
                tracing::debug!(
                    target: "levee::retry",
                    attempt = attempts,
                    reason = %classification.reason,
                    wait_ms = wait.as_millis() as u64,
                    "retrying"
                );
                return Next::RetryAfter(wait);
            }
        };
        if stop != Stop::NotRetryable {
            tracing::debug!(
                target: "levee::retry",
                attempts,
                reason = %classification.reason,
                stop = stop.as_str(),
                "not retrying"
            );
        }
        Next::Stop(stop)
    }

    /// A Levee rejection is returned at once, but for a failover whose
    /// targets are all only throttled, retried at the earliest reopen if it
    /// fits.
    ///
    /// Every caller refused in the same throttled moment learns the same
    /// reopen instant: woken together, they would land on the first target
    /// to reopen as one burst, more than its refilled allowance, and
    /// throttle it again. So each waits a random extra of up to a quarter of
    /// its wait (never less than the reopen: a caller never arrives early).
    fn after_rejection(
        &self,
        rejection: Rejection<'_>,
        attempts: u32,
        deadline: Option<Instant>,
        random: impl FnOnce(u64) -> u64,
    ) -> Next {
        let wait = match rejection {
            Rejection::NoTargetAvailable(refused) if refused.all_throttled() => {
                refused.retry_after()
            }
            // A scope spread at its provider's rate (or reopening within the
            // second) admits again in at most a second: waited out too.
            Rejection::Throttled(gated) if gated.retry_after() <= SPREAD_BURST => {
                gated.retry_after()
            }
            _ => return Next::Return,
        };
        let policy = self.policy;
        let spread = u64::try_from((wait / 4).as_nanos()).unwrap_or(u64::MAX);
        let wait = ceil_millis(wait + Duration::from_nanos(random(spread)));
        if attempts < policy.max_attempts && policy.fits(wait, deadline) && self.budget.withdraw() {
            tracing::debug!(
                target: "levee::retry",
                attempt = attempts,
                wait_ms = wait.as_millis() as u64,
                "throttled for a known while: retrying at the reopen"
            );
            Next::RetryAfter(wait)
        } else {
            Next::Return
        }
    }
}

/// The state of one [`Retry`](super::Retry) service, reached by its response
/// futures when an attempt did not succeed. Each clone of the service gets
/// its own copy (sharing the budget), so the reference count every call
/// takes on it stays with the thread running that clone instead of bouncing
/// between threads.
pub(crate) struct Shared<C> {
    pub(crate) budget: Arc<RetryBudget>,
    pub(crate) classifier: C,
    pub(crate) policy: Policy,
    rng: Mutex<fastrand::Rng>,
}

impl<C> Shared<C> {
    pub(crate) fn new(
        budget: Arc<RetryBudget>,
        classifier: C,
        policy: Policy,
        rng: fastrand::Rng,
    ) -> Self {
        Shared {
            budget,
            classifier,
            policy,
            rng: Mutex::new(rng),
        }
    }

    /// A uniform draw from `0..=max` (the backoff jitter).
    fn random(&self, max: u64) -> u64 {
        let mut rng = self.rng.lock().unwrap_or_else(|e| e.into_inner());
        rng.u64(0..=max)
    }

    /// A copy for a new clone of the service: same budget, classifier and
    /// policy; a jitter source forked from this one (so a seeded layer stays
    /// reproducible).
    pub(crate) fn fork(&self) -> Self
    where
        C: Clone,
    {
        let rng = self.rng.lock().unwrap_or_else(|e| e.into_inner()).fork();
        Shared::new(
            self.budget.clone(),
            self.classifier.clone(),
            self.policy,
            rng,
        )
    }

    /// This service's rules.
    #[inline]
    fn rules(&self) -> Rules<'_, C> {
        Rules {
            policy: &self.policy,
            classifier: &self.classifier,
            budget: &self.budget,
        }
    }

    /// [`Rules::read`] with this service's classifier.
    #[inline]
    pub(crate) fn read<'r, RB>(&self, result: &'r Result<Response<RB>, BoxError>) -> Attempt<'r>
    where
        C: Classify,
    {
        self.rules().read(result)
    }

    /// [`Rules::next`] with this service's rules and jitter.
    pub(crate) fn next(
        &self,
        attempt: &Attempt<'_>,
        attempts: u32,
        deadline: Option<Instant>,
    ) -> Next
    where
        C: Classify,
    {
        self.rules()
            .next(attempt, attempts, deadline, |max| self.random(max))
    }
}
