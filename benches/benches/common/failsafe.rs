//! failsafe's future-aware breaker as a tower service, configured as Levee's
//! default breaker is (5 consecutive failures; equal-jittered 30 s..900 s
//! cool-offs): the peer a closed Levee breaker is measured against. Shared
//! by the criterion benches and the instruction counts (`percall`).

use std::task::{Context, Poll};
use std::time::Duration;

use tower::Service;

type Policy = failsafe::failure_policy::ConsecutiveFailures<failsafe::backoff::EqualJittered>;

/// Each inner future wrapped with `failsafe::futures::CircuitBreaker::call`.
#[derive(Clone, Debug)]
pub struct Failsafe<S> {
    inner: S,
    breaker: failsafe::StateMachine<Policy, ()>,
}

impl<S> Failsafe<S> {
    /// `inner` behind failsafe with Levee's default policy.
    pub fn consecutive5(inner: S) -> Self {
        let backoff =
            failsafe::backoff::equal_jittered(Duration::from_secs(30), Duration::from_secs(900));
        let policy = failsafe::failure_policy::consecutive_failures(5, backoff);
        Failsafe {
            inner,
            breaker: failsafe::Config::new().failure_policy(policy).build(),
        }
    }
}

impl<S: Service<R>, R> Service<R> for Failsafe<S> {
    type Response = S::Response;
    type Error = failsafe::Error<S::Error>;
    type Future = failsafe::futures::ResponseFuture<S::Future, Policy, (), failsafe::Any>;
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(failsafe::Error::Inner)
    }
    fn call(&mut self, req: R) -> Self::Future {
        use failsafe::futures::CircuitBreaker;
        self.breaker.call(self.inner.call(req))
    }
}
