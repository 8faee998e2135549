//! Levee's retry decision for a plain `tower::retry::Retry`:
//! [`BudgetPolicy`].
//!
//! [`RetryBudgetLayer`](super::RetryBudgetLayer) is the retry layer Levee
//! recommends. A stack that already uses `tower::retry::Retry` (or a user's
//! own [`Policy`](tower::retry::Policy)) keeps it and gets the same rules
//! from these two: retry only a retryable verdict, never a Levee rejection,
//! and spend a token from a [`RetryBudget`] for every retry.

use std::any::Any;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use http::{Request, Response};
use levee_core::classify::{Classify, ProviderClassifier};
use levee_core::config_error::ConfigError;
use tokio::time::Sleep;

use super::budget::RetryBudget;
use super::decide::{Next, Rules};
use super::policy::{Deadline, Policy, policy_setters};
use crate::error::BoxError;

/// A `tower::retry::Policy` with Levee's retry rules, drawing every retry
/// from a [`RetryBudget`]: for stacks that keep tower's own `Retry`.
///
/// After each attempt it reads the verdict the way
/// [`RetryBudgetLayer`](super::RetryBudgetLayer) does: the
/// [`Classification`](levee_core::classify::Classification) extension the
/// breaker puts on a response that is not a success (body-aware: a `429`
/// naming a spend cap is quota), else its
/// classifier on the status and headers; an error by its transport failure
/// (a `tower::timeout` `Elapsed` is an availability failure). It retries when
///
/// - the verdict is retryable (availability or throttling, with
///   `x-should-retry` taken into account), and the error is not a Levee
///   rejection ([`is_rejection`](crate::error::is_rejection)): those are returned at once;
/// - attempts remain (3 in all by default);
/// - the wait fits: the provider's hint rounded up to the millisecond, else
///   exponential backoff with full jitter (500 ms base, 8 s cap), no longer
///   than `max_wait` (60 s) and ending before the request's [`Deadline`]
///   extension, if it has one;
/// - the budget grants a token (asked last, only for a retry that will
///   happen).
///
/// It is a policy for services whose error is [`BoxError`], as every Levee
/// layer's and `tower::timeout`'s is: put it above them.
///
/// Each request deposits into the budget once, when tower first asks the
/// policy to copy it. Like `RetryBudgetLayer`, it waits out a
/// `NoTargetAvailable` whose targets are all only throttled, and a
/// `Throttled` for at most a second, when the reopen fits, waits at least until a scope the last answer closed reopens
/// ([`Reopening`](crate::breaker::Reopening)), and when a retry is refused
/// by a Levee layer after all, hands tower the answer before it instead of
/// the refusal (it keeps that answer, boxed, while the retry is on its
/// way). It adds no `RetryOutcome` extension.
///
/// # Cost
///
/// tower's `Retry` clones its policy for every request: here an `Arc`
/// reference count on the budget and a clone of the classifier. Retried
/// requests are copied (`B: Clone`) before each attempt but the last.
/// `RetryBudgetLayer` avoids the per-request reference count.
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use tower::ServiceBuilder;
/// use tower::retry::RetryLayer;
/// use tower_levee::BreakerLayer;
/// use tower_levee::retry::{BudgetPolicy, RetryBudget};
///
/// # let client = tower::service_fn(|_: http::Request<String>| async {
/// #     Ok::<_, tower_levee::BoxError>(http::Response::new(String::new()))
/// # });
/// let budget = Arc::new(RetryBudget::default());
/// let stack = ServiceBuilder::new()
///     .timeout(Duration::from_secs(120)) // overall
///     .layer(RetryLayer::new(BudgetPolicy::new(budget.clone())))
///     .layer(BreakerLayer::new())
///     .timeout(Duration::from_secs(30)) // per attempt: the breaker counts its Elapsed
///     .service(client);
/// # let _ = stack;
/// ```
pub struct BudgetPolicy<C = ProviderClassifier> {
    budget: Arc<RetryBudget>,
    classifier: C,
    /// This request's last real answer while a retry is on its way (a
    /// `Result<Response<RB>, BoxError>`, typed by the `Policy` impl).
    last: Mutex<Option<Box<dyn Any + Send>>>,
    policy: Policy,
    /// Attempts of this request that have completed (0 in the copy the
    /// service keeps; tower clones it for each request).
    attempts: u32,
}

impl BudgetPolicy {
    /// A policy drawing retries from `budget`, classifying responses that
    /// carry no `Classification` extension with the [`ProviderClassifier`].
    pub fn new(budget: Arc<RetryBudget>) -> Self {
        BudgetPolicy {
            budget,
            classifier: ProviderClassifier::default(),
            policy: Policy::default(),
            attempts: 0,
            last: Mutex::new(None),
        }
    }
}

impl BudgetPolicy {
    /// A builder drawing retries from `budget`, whose
    /// [`build`](BudgetPolicyBuilder::build) checks every setting and names
    /// the first invalid one.
    pub fn builder(budget: Arc<RetryBudget>) -> BudgetPolicyBuilder {
        BudgetPolicyBuilder {
            policy: BudgetPolicy::new(budget),
        }
    }
}

/// Builds a [`BudgetPolicy`], checking every setting at
/// [`build`](Self::build).
pub struct BudgetPolicyBuilder<C = ProviderClassifier> {
    policy: BudgetPolicy<C>,
}

impl<C> BudgetPolicyBuilder<C> {
    policy_setters!(policy.policy);

    /// Classifies responses that carry no `Classification` extension (and
    /// transport errors) with `classifier`.
    pub fn classifier<C2>(self, classifier: C2) -> BudgetPolicyBuilder<C2> {
        BudgetPolicyBuilder {
            policy: self.policy.with_classifier(classifier),
        }
    }

    /// Checks every setting and builds the policy.
    pub fn build(self) -> Result<BudgetPolicy<C>, ConfigError> {
        self.policy.policy.validate()?;
        Ok(self.policy)
    }
}

impl<C> fmt::Debug for BudgetPolicyBuilder<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("BudgetPolicyBuilder")
            .field(&self.policy)
            .finish()
    }
}

impl<C> BudgetPolicy<C> {
    fn with_classifier<C2>(self, classifier: C2) -> BudgetPolicy<C2> {
        BudgetPolicy {
            budget: self.budget,
            classifier,
            policy: self.policy,
            attempts: self.attempts,
            last: Mutex::new(None),
        }
    }

    /// The budget retries are drawn from.
    pub fn budget(&self) -> &Arc<RetryBudget> {
        &self.budget
    }
}

impl<B, RB, C> tower::retry::Policy<Request<B>, Response<RB>, BoxError> for BudgetPolicy<C>
where
    B: Clone,
    RB: Send + 'static,
    C: Classify + Clone,
{
    type Future = Sleep;

    fn retry(
        &mut self,
        req: &mut Request<B>,
        result: &mut Result<Response<RB>, BoxError>,
    ) -> Option<Self::Future> {
        self.attempts += 1;
        let rules = Rules {
            policy: &self.policy,
            classifier: &self.classifier,
            budget: &self.budget,
        };
        let deadline = req.extensions().get::<Deadline>().map(|d| d.0);
        let attempt = rules.read(result);
        let refused = attempt.is_rejection();
        let next = rules.next(&attempt, self.attempts, deadline, |max| {
            fastrand::u64(0..=max)
        });
        drop(attempt);
        let last = self.last.get_mut().unwrap_or_else(PoisonError::into_inner);
        match next {
            Next::RetryAfter(wait) => {
                // Keep a real answer (a refusal is not one) for the caller,
                // in case the retry is refused.
                if !refused {
                    let answer = std::mem::replace(result, Err(Box::new(Kept)));
                    *last = Some(Box::new(answer));
                }
                Some(tokio::time::sleep(wait))
            }
            Next::Return if refused => {
                if let Some(answer) = last.take().and_then(|a| a.downcast().ok()) {
                    *result = *answer;
                }
                None
            }
            Next::Return | Next::Stop(_) => None,
        }
    }

    fn clone_request(&mut self, req: &Request<B>) -> Option<Request<B>> {
        if self.attempts == 0 {
            // tower asks once per request before the first attempt, on the
            // service's own copy of the policy: the request's deposit.
            self.budget.deposit();
        }
        // A copy is needed only if an attempt may follow the one starting.
        (self.attempts + 1 < self.policy.max_attempts).then(|| req.clone())
    }
}

impl<C: Clone> Clone for BudgetPolicy<C> {
    /// A copy for another request: same budget, rules and attempts, none of
    /// this request's kept answer.
    fn clone(&self) -> Self {
        BudgetPolicy {
            budget: self.budget.clone(),
            classifier: self.classifier.clone(),
            policy: self.policy,
            attempts: self.attempts,
            last: Mutex::new(None),
        }
    }
}

/// What stands in the result tower drops when a retry starts: the real
/// answer is kept by the policy.
#[derive(Debug)]
struct Kept;

impl fmt::Display for Kept {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("answer kept by the retry policy")
    }
}

impl std::error::Error for Kept {}

impl<C> fmt::Debug for BudgetPolicy<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BudgetPolicy")
            .field("budget", &self.budget)
            .field("policy", &self.policy)
            .field("attempts", &self.attempts)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::is_rejection;
    use crate::test_util::Wrapped;
    use std::time::Duration;
    use tower::retry::Policy as _;

    type Result1 = Result<Response<()>, BoxError>;

    fn copy(p: &mut BudgetPolicy, req: &Request<String>) -> Option<Request<String>> {
        tower::retry::Policy::<_, Response<()>, BoxError>::clone_request(p, req)
    }

    use crate::breaker::CircuitOpen;

    #[test]
    fn a_rejection_deep_in_the_source_chain_is_a_rejection() {
        let open: BoxError = Box::new(CircuitOpen::new("a", Duration::from_secs(1)));
        let wrapped: BoxError = Box::new(Wrapped(open));
        assert!(is_rejection(&*wrapped));
        let other: BoxError = Box::new(Wrapped("boom".into()));
        assert!(!is_rejection(&*other));
    }

    #[tokio::test(start_paused = true)]
    async fn only_retryable_verdicts_within_attempts_are_retried() {
        let budget = Arc::new(RetryBudget::default());
        let mut service_copy = BudgetPolicy::new(budget.clone());
        let mut req = Request::new(String::new());
        assert!(copy(&mut service_copy, &req).is_some());
        assert_eq!(budget.snapshot().requests, 1);

        let mut p = service_copy.clone();
        let mut unavailable: Result1 = Ok(Response::builder().status(503).body(()).unwrap());
        assert!(p.retry(&mut req, &mut unavailable).is_some());
        assert!(
            copy(&mut p, &req).is_some(),
            "attempt 2 may be followed by 3"
        );
        assert!(p.retry(&mut req, &mut unavailable).is_some());
        assert!(copy(&mut p, &req).is_none(), "attempt 3 is the last");
        assert_eq!(budget.snapshot().retries, 2);

        let mut p = service_copy.clone();
        let mut bad: Result1 = Ok(Response::builder().status(400).body(()).unwrap());
        assert!(p.retry(&mut req, &mut bad).is_none());
        let mut ok: Result1 = Ok(Response::new(()));
        assert!(p.retry(&mut req, &mut ok).is_none());
        let mut p = service_copy.clone();
        let mut elapsed: Result1 = Err(Box::new(tower::timeout::error::Elapsed::new()));
        assert!(p.retry(&mut req, &mut elapsed).is_some());
        let mut p = service_copy.clone();
        let mut open: Result1 = Err(Box::new(CircuitOpen::new("a", Duration::from_secs(1))));
        assert!(p.retry(&mut req, &mut open).is_none());
        assert_eq!(budget.snapshot().retries, 3);
    }
}
