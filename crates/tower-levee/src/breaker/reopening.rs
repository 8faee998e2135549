//! When a scope that just refused admits calls again, told to whoever
//! retries.

use tokio::time::Instant;

/// A response extension: the breaker layer refuses calls to this
/// response's scopes until `at`, because of this very answer (it closed the
/// quota scope's gate, parked the billing scope, or opened the failure
/// domain's breaker).
///
/// A retry layer above reads it so that it never retries sooner than the
/// breaker would admit the retry: [`RetryBudgetLayer`](crate::RetryBudgetLayer)
/// waits at least until `at`, and returns this answer at once when `at` is
/// past the caller's deadline. A [`Failover`](crate::Failover) keeps it on
/// the answer it returns only when no other target would admit the request
/// sooner.
///
/// It is on failures only, and only when the layer knows the deadline (an
/// isolated breaker has none).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub struct Reopening {
    /// When the scopes admit a call again.
    pub at: Instant,
}
