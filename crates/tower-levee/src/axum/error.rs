//! Levee's errors as axum responses.

use std::error::Error;
use std::fmt;

use ::axum::body::Body;
use ::axum::response::{IntoResponse, Response};
use http::StatusCode;
use http::header::{CONTENT_TYPE, HeaderValue};
use levee_core::classify::TransportFailure;

use crate::breaker::{CircuitOpen, Parked, Throttled};
use crate::bulkhead::BulkheadFull;
use crate::client_limit::ClientLimited;
use crate::error::{BoxError, Rejection, transport_failure};
use crate::failover::NoTargetAvailable;

macro_rules! into_response {
    ($($ty:ty),* $(,)?) => {$(
        /// A `429` or `503` with `Retry-After` and a JSON body with a stable
        /// `code` (see the [module docs](crate::axum)).
        impl IntoResponse for $ty {
            fn into_response(self) -> Response {
                rejection_response(Rejection::from(&self))
            }
        }
    )*};
}

into_response!(
    CircuitOpen,
    Throttled,
    Parked,
    BulkheadFull,
    NoTargetAvailable,
    ClientLimited
);

/// `{"error":{"code":..,"message":..}}` as an `application/json` body.
fn json_body(code: &str, message: &str) -> Body {
    let body = serde_json::json!({ "error": { "code": code, "message": message } });
    Body::from(body.to_string())
}

fn with_json_type(mut res: http::Response<Body>) -> Response {
    res.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    res
}

fn rejection_response(e: Rejection<'_>) -> Response {
    with_json_type(e.to_response(json_body(e.code(), &e.to_string())))
}

// === LeveeError ===

/// Any error a Levee stack returns, as an axum response.
///
/// It finds the Levee rejection in the error or its source chain and
/// answers as the rejection does; a timeout (`tower::timeout::error::Elapsed`,
/// `tokio::time::error::Elapsed`, an I/O `TimedOut`) becomes a
/// `504 upstream_timeout`, and anything else a `502 upstream_error`. Those
/// two carry a generic message: an upstream error's own text may hold a URL
/// with a key in its query, so it never reaches the body.
///
/// It converts from any error with `?`, so a handler can return
/// `Result<_, LeveeError>`:
///
/// ```
/// use axum::response::{IntoResponse, Response};
/// use tower_levee::axum::LeveeError;
/// use tower_levee::{BoxError, Throttled};
///
/// let err: BoxError = Box::new(Throttled::new("org-a/gpt-4o", std::time::Duration::from_millis(1200)));
/// let res: Response = LeveeError::from(err).into_response();
/// assert_eq!(res.status(), 429);
/// assert_eq!(res.headers()["retry-after"], "2");
/// ```
pub struct LeveeError {
    inner: BoxError,
}

/// What a [`LeveeError`] answers with.
enum Answer<'a> {
    Rejection(Rejection<'a>),
    Timeout,
    Upstream,
}

impl LeveeError {
    /// The code of a timeout's body.
    pub const UPSTREAM_TIMEOUT: &'static str = "upstream_timeout";
    /// The code of the body of any error that is neither a Levee rejection
    /// nor a timeout.
    pub const UPSTREAM_ERROR: &'static str = "upstream_error";

    /// Wraps `err`.
    pub fn new(err: impl Into<BoxError>) -> Self {
        LeveeError { inner: err.into() }
    }

    /// The error wrapped.
    pub fn get_ref(&self) -> &(dyn Error + Send + Sync + 'static) {
        &*self.inner
    }

    /// The error wrapped, back.
    pub fn into_inner(self) -> BoxError {
        self.inner
    }

    /// Whether the error is (or wraps) a Levee rejection: the request was
    /// never sent.
    pub fn is_rejection(&self) -> bool {
        matches!(self.answer(), Answer::Rejection(_))
    }

    /// The status of the response: `429`, `503`, `504` or `502`.
    pub fn status_code(&self) -> StatusCode {
        match self.answer() {
            Answer::Rejection(r) => r.status_code(),
            Answer::Timeout => StatusCode::GATEWAY_TIMEOUT,
            Answer::Upstream => StatusCode::BAD_GATEWAY,
        }
    }

    /// The stable `code` of the response's body.
    pub fn code(&self) -> &'static str {
        match self.answer() {
            Answer::Rejection(r) => r.code(),
            Answer::Timeout => Self::UPSTREAM_TIMEOUT,
            Answer::Upstream => Self::UPSTREAM_ERROR,
        }
    }

    fn answer(&self) -> Answer<'_> {
        let err: &(dyn Error + 'static) = &*self.inner;
        match Rejection::find(err) {
            Some(r) => Answer::Rejection(r),
            None if transport_failure(err) == TransportFailure::Timeout => Answer::Timeout,
            None => Answer::Upstream,
        }
    }
}

impl<E: Into<BoxError>> From<E> for LeveeError {
    fn from(err: E) -> Self {
        LeveeError::new(err)
    }
}

impl IntoResponse for LeveeError {
    fn into_response(self) -> Response {
        let (status, code, message) = match self.answer() {
            Answer::Rejection(r) => return rejection_response(r),
            Answer::Timeout => (
                StatusCode::GATEWAY_TIMEOUT,
                Self::UPSTREAM_TIMEOUT,
                "the upstream service did not answer in time",
            ),
            Answer::Upstream => (
                StatusCode::BAD_GATEWAY,
                Self::UPSTREAM_ERROR,
                "the upstream service failed",
            ),
        };
        let mut res = http::Response::new(json_body(code, message));
        *res.status_mut() = status;
        with_json_type(res)
    }
}

impl fmt::Debug for LeveeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("LeveeError").field(&self.inner).finish()
    }
}

impl fmt::Display for LeveeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.inner, f)
    }
}
