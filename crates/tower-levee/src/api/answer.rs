//! Errors and refusals in an API's own shape.

use std::time::Duration;

use http::header::{CONTENT_TYPE, HeaderName, HeaderValue, RETRY_AFTER};
use http::{Response, StatusCode};
use serde_json::json;

use crate::error::Rejection;

/// The header naming a Levee refusal: `x-levee-refusal: throttled`.
pub const LEVEE_REFUSAL: HeaderName = HeaderName::from_static("x-levee-refusal");

/// The error `type` of every Levee refusal's body.
pub const REFUSAL_TYPE: &str = "levee_refusal";

const RETRY_AFTER_MS: HeaderName = HeaderName::from_static("retry-after-ms");
const SHOULD_RETRY: HeaderName = HeaderName::from_static("x-should-retry");

/// The API a server speaks to its callers, whose error shape its answers
/// take.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ApiDialect {
    /// OpenAI's API and the many compatible with it:
    /// `{"error":{"message":..,"type":..,"param":null,"code":..}}`.
    OpenAi,
    /// Anthropic's Messages API:
    /// `{"type":"error","error":{"type":..,"message":..}}`.
    Anthropic,
}

impl ApiDialect {
    /// The stable lowercase name (`"openai"`, `"anthropic"`).
    pub const fn as_str(self) -> &'static str {
        match self {
            ApiDialect::OpenAi => "openai",
            ApiDialect::Anthropic => "anthropic",
        }
    }

    /// The error `type` this API gives an answer of `status`, as its own
    /// servers do (OpenAI puts most in `invalid_request_error` and tells
    /// them apart by `code`; Anthropic has a type per status).
    pub fn error_type(self, status: StatusCode) -> &'static str {
        match (self, status.as_u16()) {
            (ApiDialect::OpenAi, 500..) => "server_error",
            (ApiDialect::OpenAi, 429) => "rate_limit_exceeded",
            (ApiDialect::OpenAi, _) => "invalid_request_error",
            (ApiDialect::Anthropic, 401) => "authentication_error",
            (ApiDialect::Anthropic, 403) => "permission_error",
            (ApiDialect::Anthropic, 404) => "not_found_error",
            (ApiDialect::Anthropic, 413) => "request_too_large",
            (ApiDialect::Anthropic, 429) => "rate_limit_error",
            (ApiDialect::Anthropic, 529) => "overloaded_error",
            (ApiDialect::Anthropic, 500..) => "api_error",
            (ApiDialect::Anthropic, _) => "invalid_request_error",
        }
    }

    /// An error body of this API's shape.
    pub fn error_body(self, error_type: &str, code: &str, message: &str) -> Vec<u8> {
        let body = match self {
            ApiDialect::OpenAi => json!({
                "error": { "message": message, "type": error_type, "param": null, "code": code }
            }),
            ApiDialect::Anthropic => json!({
                "type": "error",
                "error": { "type": error_type, "message": message, "code": code }
            }),
        };
        serde_json::to_vec(&body).expect("a JSON value serialises")
    }
}

/// A server's own error (a malformed request, a missing key, an unknown
/// model) in `dialect`'s shape: `status`, the dialect's error type for it,
/// a stable `code` and a `message`.
///
/// ```
/// use http::StatusCode;
/// use tower_levee::api::{ApiDialect, error_response};
///
/// let res: http::Response<Vec<u8>> =
///     error_response(ApiDialect::OpenAi, StatusCode::NOT_FOUND, "model_not_found", "no such model");
/// let body: serde_json::Value = serde_json::from_slice(res.body()).unwrap();
/// assert_eq!(body["error"]["type"], "invalid_request_error");
/// assert_eq!(body["error"]["code"], "model_not_found");
/// ```
pub fn error_response<B: From<Vec<u8>>>(
    dialect: ApiDialect,
    status: StatusCode,
    code: &str,
    message: &str,
) -> Response<B> {
    let body = dialect.error_body(dialect.error_type(status), code, message);
    json_response(status, body)
}

/// A Levee rejection as the answer to a caller of `dialect`'s API: its
/// status and code ([`Rejection::status_code`], [`Rejection::code`]), a
/// `Retry-After` and `retry-after-ms` of its wait capped at
/// `max_retry_after`, `x-should-retry: false` when coming back will not
/// help ([`Rejection::worth_retrying`]), `x-levee-refusal`, and a body of
/// type [`REFUSAL_TYPE`] whose message is the rejection's own text (it
/// names scopes and targets, never a credential). See the
/// [module docs](super).
pub fn refusal_response<B: From<Vec<u8>>>(
    dialect: ApiDialect,
    rejection: &Rejection<'_>,
    max_retry_after: Duration,
) -> Response<B> {
    let kind = rejection.kind();
    let message = format!("Levee refused the request: {rejection}");
    let body = dialect.error_body(REFUSAL_TYPE, kind.code(), &message);
    let mut res = json_response(kind.status_code(), body);
    let wait = levee_core::clock::ceil_millis(rejection.retry_after().min(max_retry_after));
    let headers = res.headers_mut();
    headers.insert(
        RETRY_AFTER,
        HeaderValue::from(crate::error::retry_after_secs(wait)),
    );
    headers.insert(
        RETRY_AFTER_MS,
        HeaderValue::from(u64::try_from(wait.as_millis()).unwrap_or(u64::MAX)),
    );
    headers.insert(LEVEE_REFUSAL, HeaderValue::from_static(kind.as_str()));
    if !rejection.worth_retrying() {
        headers.insert(SHOULD_RETRY, HeaderValue::from_static("false"));
    }
    res
}

fn json_response<B: From<Vec<u8>>>(status: StatusCode, body: Vec<u8>) -> Response<B> {
    let mut res = Response::new(B::from(body));
    *res.status_mut() = status;
    res.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    res
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::BoxError;
    use crate::{BulkheadFull, CircuitOpen, Throttled};

    fn body(res: &Response<Vec<u8>>) -> serde_json::Value {
        serde_json::from_slice(res.body()).unwrap()
    }

    #[test]
    fn a_throttle_is_a_429_in_either_shape_with_both_waits() {
        let err: BoxError = Box::new(Throttled::new("org-a/gpt-4o", Duration::from_millis(1_250)));
        let rejection = Rejection::find(&*err).unwrap();
        let cap = Duration::from_secs(300);
        let openai: Response<Vec<u8>> = refusal_response(ApiDialect::OpenAi, &rejection, cap);
        assert_eq!(openai.status(), 429);
        assert_eq!(openai.headers()["retry-after"], "2");
        assert_eq!(openai.headers()["retry-after-ms"], "1250");
        assert_eq!(openai.headers()["x-levee-refusal"], "throttled");
        assert!(openai.headers().get("x-should-retry").is_none());
        let b = body(&openai);
        assert_eq!(b["error"]["type"], REFUSAL_TYPE);
        assert_eq!(b["error"]["code"], "provider_rate_limited");
        assert!(b["error"]["param"].is_null());
        assert!(
            b["error"]["message"]
                .as_str()
                .unwrap()
                .contains("org-a/gpt-4o")
        );

        let anthropic: Response<Vec<u8>> = refusal_response(ApiDialect::Anthropic, &rejection, cap);
        let b = body(&anthropic);
        assert_eq!(b["type"], "error");
        assert_eq!(b["error"]["type"], REFUSAL_TYPE);
    }

    #[test]
    fn the_wait_is_capped_and_a_bulkhead_or_breaker_is_a_503() {
        let cap = Duration::from_secs(300);
        let err: BoxError = Box::new(CircuitOpen::new("a", Duration::from_secs(900)));
        let res: Response<Vec<u8>> =
            refusal_response(ApiDialect::OpenAi, &Rejection::find(&*err).unwrap(), cap);
        assert_eq!(res.status(), 503);
        assert_eq!(res.headers()["retry-after"], "300");
        assert_eq!(res.headers()["x-levee-refusal"], "circuit_open");
        let err: BoxError = Box::new(BulkheadFull::new("llm", 4));
        let res: Response<Vec<u8>> =
            refusal_response(ApiDialect::OpenAi, &Rejection::find(&*err).unwrap(), cap);
        assert_eq!(body(&res)["error"]["code"], "bulkhead_full");
        assert_eq!(res.headers()["retry-after-ms"], "100");
    }

    #[test]
    fn each_dialect_names_its_own_types() {
        assert_eq!(
            ApiDialect::Anthropic.error_type(StatusCode::UNAUTHORIZED),
            "authentication_error"
        );
        assert_eq!(
            ApiDialect::Anthropic.error_type(StatusCode::PAYLOAD_TOO_LARGE),
            "request_too_large"
        );
        assert_eq!(
            ApiDialect::OpenAi.error_type(StatusCode::BAD_GATEWAY),
            "server_error"
        );
        let res: Response<Vec<u8>> = error_response(
            ApiDialect::Anthropic,
            StatusCode::BAD_REQUEST,
            "invalid_json",
            "a \"quoted\" message",
        );
        let b = body(&res);
        assert_eq!(b["error"]["type"], "invalid_request_error");
        assert_eq!(b["error"]["message"], "a \"quoted\" message");
    }
}
