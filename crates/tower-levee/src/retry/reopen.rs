//! The one rejection the retry layer waits out: a failover whose every
//! target is only throttled.
//!
//! Levee's rejections are answers, returned at once (DESIGN, "Who waits").
//! A [`NoTargetAvailable`] whose targets are all only throttled is different
//! in kind: the capacity exists, and the instant it returns is known (the
//! earliest gate deadline), so waiting for it is not blind. When that instant
//! fits the caller's deadline (and the layer's `max_wait`), an attempt is
//! left and the budget grants a token, the request is retried then (spread
//! a little after it, so that the callers waiting on one reopen do not all
//! arrive at once). This is
//! what keeps a pool of accounts whose sum exceeds the load at ≥ 99% success
//! through bursts that gate every account at once.

use std::error::Error;
use std::time::Duration;

use tokio::time::Instant;

use super::Shared;
use super::future::Next;
use crate::failover::NoTargetAvailable;

/// The wait before retrying `err`, if it is a failover refusal of targets
/// that are all only throttled.
pub(super) fn throttled_failover(err: &(dyn Error + 'static)) -> Option<Duration> {
    let refused = err.downcast_ref::<NoTargetAvailable>()?;
    refused.all_throttled().then(|| refused.retry_after())
}

/// Retries at the reopen if it fits; otherwise returns the rejection as is.
///
/// Every caller refused in the same throttled moment learns the same reopen
/// instant: woken together, they would land on the first target to reopen
/// as one burst, more than its refilled allowance, and throttle it again.
/// So each waits a random extra of up to a quarter of its wait (never less
/// than the reopen: a caller never arrives early).
pub(super) fn retry_at_reopen<C>(
    shared: &Shared<C>,
    wait: Duration,
    attempts: u32,
    deadline: Option<Instant>,
) -> Next {
    let policy = &shared.policy;
    let spread = u64::try_from((wait / 4).as_nanos()).unwrap_or(u64::MAX);
    let wait = ceil_millis(wait + Duration::from_nanos(shared.random(spread)));
    if attempts < policy.max_attempts && policy.fits(wait, deadline) && shared.budget.withdraw() {
        tracing::debug!(
            target: "levee::retry",
            attempt = attempts,
            wait_ms = wait.as_millis() as u64,
            "every failover target throttled: retrying at the earliest reopen"
        );
        Next::RetryAfter(wait)
    } else {
        Next::Return
    }
}

fn ceil_millis(d: Duration) -> Duration {
    let sub_ms = d.subsec_nanos() % 1_000_000;
    if sub_ms == 0 {
        d
    } else {
        d.saturating_add(Duration::from_nanos(u64::from(1_000_000 - sub_ms)))
    }
}
