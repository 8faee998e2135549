//! The vocabulary every layer's errors share: [`BoxError`], [`RefusalKind`]
//! and the one way a refusal becomes an HTTP answer. A leaf: it imports no
//! layer, so every layer's `error.rs` can build on it.

use std::error::Error;
use std::fmt;
use std::time::Duration;

use http::header::{HeaderValue, RETRY_AFTER};
use http::{Response, StatusCode};

/// The boxed error type every Levee layer returns.
pub type BoxError = Box<dyn Error + Send + Sync>;

/// Why a Levee layer refused a request without sending it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RefusalKind {
    /// The quota scope's throttle gate is closed (the provider said wait).
    Throttled,
    /// The billing scope is parked: a quota or spend cap is exhausted.
    Parked,
    /// The failure domain's breaker is open, or half-open with every probe
    /// slot taken.
    CircuitOpen,
    /// The target's bulkhead had no free permit.
    BulkheadFull,
    /// The caller is over its own limit (requests or tokens per minute),
    /// set by the server it called, not by the provider.
    ClientLimit,
}

impl RefusalKind {
    /// The stable lowercase name (`"circuit_open"`).
    pub const fn as_str(self) -> &'static str {
        match self {
            RefusalKind::Throttled => "throttled",
            RefusalKind::Parked => "parked",
            RefusalKind::CircuitOpen => "circuit_open",
            RefusalKind::BulkheadFull => "bulkhead_full",
            RefusalKind::ClientLimit => "client_limit",
        }
    }

    /// The HTTP status a server answers this refusal with: `429 Too Many
    /// Requests` for a throttle (the provider is busy, not broken, and
    /// says when to come back) and for a caller over its own limit,
    /// `503 Service Unavailable` for the rest.
    ///
    /// With [`code`](Self::code), the one mapping every rejection's
    /// `status_code`/`code`/`to_response` (and the `axum` feature) reads.
    pub const fn status_code(self) -> StatusCode {
        match self {
            RefusalKind::Throttled | RefusalKind::ClientLimit => StatusCode::TOO_MANY_REQUESTS,
            RefusalKind::Parked | RefusalKind::CircuitOpen | RefusalKind::BulkheadFull => {
                StatusCode::SERVICE_UNAVAILABLE
            }
        }
    }

    /// The stable code of an HTTP error body: `provider_rate_limited`,
    /// `parked`, `circuit_open`, `bulkhead_full` or `client_rate_limited`.
    pub const fn code(self) -> &'static str {
        match self {
            RefusalKind::Throttled => "provider_rate_limited",
            RefusalKind::Parked => "parked",
            RefusalKind::CircuitOpen => "circuit_open",
            RefusalKind::BulkheadFull => "bulkhead_full",
            RefusalKind::ClientLimit => "client_rate_limited",
        }
    }

    /// Whether a caller gains anything by coming back after the wait:
    /// not for a park (a spend cap or quota resets on the provider's
    /// schedule, hours or days away, and only a person raising it helps).
    /// A server says so with `x-should-retry: false`, which the official
    /// OpenAI and Anthropic SDKs honour.
    pub const fn worth_retrying(self) -> bool {
        !matches!(self, RefusalKind::Parked)
    }
}

impl fmt::Display for RefusalKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `wait` as a `Retry-After` value: whole seconds, rounded up.
pub(crate) fn retry_after_secs(wait: Duration) -> u64 {
    wait.as_secs() + u64::from(wait.subsec_nanos() > 0)
}

/// The one place a Levee rejection becomes an HTTP answer: `status` and a
/// `Retry-After` of `wait` in whole seconds, rounded up, around `body`.
pub(crate) fn rejection_response<B>(status: StatusCode, wait: Duration, body: B) -> Response<B> {
    let mut response = Response::new(body);
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(RETRY_AFTER, HeaderValue::from(retry_after_secs(wait)));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_is_whole_seconds_rounded_up() {
        assert_eq!(retry_after_secs(Duration::ZERO), 0);
        assert_eq!(retry_after_secs(Duration::from_millis(100)), 1);
        assert_eq!(retry_after_secs(Duration::from_secs(2)), 2);
        assert_eq!(retry_after_secs(Duration::from_millis(2001)), 3);
        let res = rejection_response(
            StatusCode::SERVICE_UNAVAILABLE,
            Duration::from_millis(1500),
            (),
        );
        assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(res.headers()[RETRY_AFTER], "2");
    }
}
