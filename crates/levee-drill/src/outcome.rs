//! What happened to one request, and to the mechanisms along the way.

use std::error::Error;
use std::time::Duration;

use http::Response;
use http_body_util::BodyExt;
use levee_core::classify::{Classification, Classify, ProviderClassifier, ResponseView, Verdict};
use serde::Serialize;
use tower_levee::{BulkheadFull, CircuitOpen, Parked, Throttled};

/// Why a request failed: the keys of the report's `failed` object.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Fail {
    /// Refused by an open breaker.
    CircuitOpen,
    /// Refused by a throttle gate, or answered with a throttling 429.
    Throttled,
    /// Refused by a parked billing scope.
    Parked,
    /// Refused by a full bulkhead.
    BulkheadFull,
    /// The retry budget refused the retry that might have saved it.
    BudgetExhausted,
    /// Every target refused it, for different reasons.
    NoTarget,
    /// The provider's last answer was an error (5xx, 401, spend cap, a
    /// mid-stream error, a refused connection ...).
    Upstream,
    /// The caller's deadline passed (or the last attempt timed out).
    Timeout,
}

impl Fail {
    /// Every kind, in report order.
    pub const ALL: [Fail; 8] = [
        Fail::CircuitOpen,
        Fail::Throttled,
        Fail::Parked,
        Fail::BulkheadFull,
        Fail::BudgetExhausted,
        Fail::NoTarget,
        Fail::Upstream,
        Fail::Timeout,
    ];

    /// The report key.
    pub const fn as_str(self) -> &'static str {
        match self {
            Fail::CircuitOpen => "circuit_open",
            Fail::Throttled => "throttled",
            Fail::Parked => "parked",
            Fail::BulkheadFull => "bulkhead_full",
            Fail::BudgetExhausted => "budget_exhausted",
            Fail::NoTarget => "no_target",
            Fail::Upstream => "upstream",
            Fail::Timeout => "timeout",
        }
    }
}

/// One request's fate.
#[derive(Clone, Debug)]
pub struct Record {
    /// When it arrived, from the scenario's start.
    pub at: Duration,
    /// How long the caller waited for the answer.
    pub latency: Duration,
    /// The target that served it, or why it failed.
    pub result: Result<usize, Fail>,
    /// The replica of the service that took it (0 without a fleet).
    pub replica: usize,
}

/// One transition of a breaker, gate or park, as the report lists it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TransitionRecord {
    /// Milliseconds from the scenario's start.
    pub t_ms: u64,
    /// The target the scope belongs to.
    pub target: String,
    /// The scope's key.
    pub scope: String,
    /// `breaker`, `gate` or `park`.
    pub mechanism: String,
    /// The state before.
    pub from: String,
    /// The state after.
    pub to: String,
    /// Why.
    pub reason: String,
}

/// The failure kind of a Levee rejection, if `err` is one.
pub fn rejection_kind(err: &(dyn Error + 'static)) -> Option<Fail> {
    if err.is::<CircuitOpen>() {
        Some(Fail::CircuitOpen)
    } else if err.is::<Throttled>() {
        Some(Fail::Throttled)
    } else if err.is::<Parked>() {
        Some(Fail::Parked)
    } else if err.is::<BulkheadFull>() {
        Some(Fail::BulkheadFull)
    } else {
        None
    }
}

/// How long a Levee rejection says to wait.
pub fn rejection_retry_after(err: &(dyn Error + 'static)) -> Option<Duration> {
    if let Some(e) = err.downcast_ref::<CircuitOpen>() {
        Some(e.retry_after())
    } else if let Some(e) = err.downcast_ref::<Throttled>() {
        Some(e.retry_after())
    } else if let Some(e) = err.downcast_ref::<Parked>() {
        Some(e.retry_after())
    } else {
        err.downcast_ref::<BulkheadFull>()
            .map(BulkheadFull::retry_after)
    }
}

/// The failure kind of a final non-2xx response: a throttling 429 is
/// `throttled`, anything else `upstream`. Uses the breaker's classification
/// when the response carries one, else classifies `body`.
pub fn response_failure<B>(res: &Response<B>, body: &[u8]) -> Fail {
    let verdict = match res.extensions().get::<Classification>() {
        Some(c) => c.verdict,
        None => {
            ProviderClassifier::default()
                .classify_response(&ResponseView::new(res.status(), res.headers(), body))
                .verdict
        }
    };
    if verdict == Verdict::Throttled {
        Fail::Throttled
    } else {
        Fail::Upstream
    }
}

/// [`response_failure`] of a final non-2xx response read whole (a body that
/// fails to read counts as empty).
pub async fn read_failure<B: http_body::Body>(res: Response<B>) -> Fail {
    let (parts, body) = res.into_parts();
    let bytes = body
        .collect()
        .await
        .map(|c| c.to_bytes())
        .unwrap_or_default();
    response_failure(&Response::from_parts(parts, ()), &bytes)
}

/// Whether a transport error is a timeout.
pub fn is_timeout(err: &(dyn Error + 'static)) -> bool {
    tower_levee::error::transport_failure(err) == levee_core::classify::TransportFailure::Timeout
}
