//! For a server that speaks an LLM API to its own callers (feature `api`):
//! refusals and errors in the API's own shape, and the request's body read
//! within a cap.
//!
//! A gateway, or a backend that offers an OpenAI- or Anthropic-compatible
//! API, answers its callers' SDKs. Those SDKs act on the answer's status
//! and headers: they retry a `429` or `503` after `retry-after-ms` or
//! `Retry-After` (when at most a minute away), and not at all when
//! `x-should-retry: false` says so; they raise a typed error
//! (`RateLimitError`, `APIStatusError`) whose message comes from the body,
//! shaped as their API shapes it. So a Levee refusal is answered:
//!
//! - with the one mapping of [`RefusalKind`]: `429` when every target is
//!   only throttled (`provider_rate_limited`) or the caller is over its own
//!   limit (`client_rate_limited`), `503` otherwise, with the code of the
//!   refusal (`parked`, `circuit_open`, `bulkhead_full`), never a `502`
//!   that would invite an immediate retry;
//! - with `Retry-After` (whole seconds, rounded up) and `retry-after-ms`,
//!   the earliest reopening, capped;
//! - with `x-should-retry: false` when only a park refused (a spend cap
//!   resets on the provider's schedule; retrying sooner is waste);
//! - with `x-levee-refusal` naming the refusal
//!   ([`RefusalKind::as_str`]) and an error `type` of `levee_refusal`, so
//!   that no caller mistakes Levee's answer for the provider's own;
//! - in the caller's API's shape ([`ApiDialect`]): OpenAI's
//!   `{"error":{"message","type","param","code"}}`, Anthropic's
//!   `{"type":"error","error":{"type","message"}}`.
//!
//! ```
//! use std::time::Duration;
//! use tower_levee::api::{ApiDialect, refusal_response};
//! use tower_levee::error::Rejection;
//! use tower_levee::{BoxError, Parked};
//!
//! let err: BoxError = Box::new(Parked::new("org-a", Duration::from_secs(3 * 3600)));
//! let rejection = Rejection::find(&*err).unwrap();
//! let res: http::Response<Vec<u8>> =
//!     refusal_response(ApiDialect::Anthropic, &rejection, Duration::from_secs(300));
//! assert_eq!(res.status(), 503);
//! assert_eq!(res.headers()["retry-after"], "300");
//! assert_eq!(res.headers()["x-should-retry"], "false");
//! assert_eq!(res.headers()["x-levee-refusal"], "parked");
//! let body: serde_json::Value = serde_json::from_slice(res.body()).unwrap();
//! assert_eq!(body["error"]["type"], "levee_refusal");
//! ```
//!
//! [`RefusalKind`]: crate::error::RefusalKind
//! [`RefusalKind::as_str`]: crate::error::RefusalKind::as_str

mod answer;
mod read;

pub use self::answer::{ApiDialect, LEVEE_REFUSAL, REFUSAL_TYPE, error_response, refusal_response};
pub use self::read::{ReadBodyError, read_body};
