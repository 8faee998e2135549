//! Turning a provider response into a verdict.
//!
//! Everything Levee does starts here. A breaker that counts every error
//! ejects a busy account at its peak, because the most common error an LLM
//! provider returns, `429`, means the account answered promptly and is
//! healthy: **throttling is not failure**. So a response is not "ok or
//! error" but one of six [`Verdict`]s, each driving its own mechanism:
//!
//! | verdict | typical signal | mechanism |
//! |---|---|---|
//! | `Success` | 2xx, a stream that reached its terminal event | — |
//! | `Availability` | timeout, connect error, 5xx, 529, 408, a stream cut or failing mid-way | breaker |
//! | `Credential` | 401/403, invalid key, region not served | breaker, lower threshold |
//! | `Throttled` | 429 with or without a wait | throttle gate, never the breaker |
//! | `Quota` | a spend cap, credits, a daily allowance: 429/400/402 naming a cap | park until the reset |
//! | `Request` | 400/404/413/422, a request too large for any window | nothing |
//!
//! # The body decides before the status
//!
//! Providers reuse statuses: a `429` is a spend cap when its code is
//! `insufficient_quota` or `*_spend_limit_exceeded`, and a bad request when
//! it says "Request too large … must be reduced"; Anthropic's spend limit is
//! a `400`, Gemini's rejected key a `400 INVALID_ARGUMENT` with `ErrorInfo`
//! `API_KEY_INVALID`, Bedrock's `429 ModelNotReadyException` a model still
//! loading. So the classifier reads the AWS exception name
//! (`x-amzn-ErrorType`), then the body's codes (most specific first), then
//! the phrases providers put behind generic codes ("usage limit", "credits
//! are depleted"), and only then the status. A 5xx stays availability
//! whatever its body. The body is a bounded peek (16 KiB by default) of
//! non-2xx responses only: a 2xx is classified without reading anything,
//! and a cut or non-UTF-8 body still classifies from what is readable.
//!
//! # Wait hints, first usable match wins
//!
//! 1. `retry-after-ms`, `x-ms-retry-after-ms`, `retry-after` (seconds,
//!    fractional seconds, or an HTTP-date measured from the `Date` header);
//! 2. the body: Gemini's `RetryInfo.retryDelay`, then the message ("try again
//!    in 1m26.4s", "retry after 60 seconds", "regain access on 2026-09-01 at
//!    00:00 UTC");
//! 3. the reset header of the exhausted dimension only
//!    (`x-ratelimit-reset-tokens` when `x-ratelimit-remaining-tokens: 0`,
//!    `anthropic-ratelimit-*-reset`).
//!
//! Zero, negative, past and garbage values are skipped; waits are rounded up
//! to the millisecond and reported as the provider meant them, under a
//! sanity cap ([`ProviderClassifier::DEFAULT_MAX_WAIT`], 366 days). The gate
//! and retry layers apply their own caps. See [`hints`].
//!
//! # A throttle that will not lift is a quota
//!
//! A throttle whose wait exceeds [`quota_after`](ProviderClassifierBuilder::quota_after)
//! (one hour by default, the longest window providers rate-limit over), or
//! that names a per-day or per-month limit with no short wait, is a
//! [`Verdict::Quota`] with its wait kept: Azure's "retry after 86400
//! seconds" is a deployment with no quota left, a Gemini `PerDay` violation
//! an allowance gone until tomorrow. This is a fact about the response
//! (which kind of limit was hit), so it lives here; how long the gate holds
//! traffic before parking is the gate's own policy. Conversely a throttle
//! that lifts within `quota_after` is never a cap: its message is not
//! searched for one.
//!
//! # Reasons
//!
//! Short and stable: `<dialect>:<code>` with the provider's code when one
//! decided (`openai:insufficient_quota`, `anthropic:overloaded_error`,
//! `gemini:RESOURCE_EXHAUSTED`, `bedrock:ThrottlingException`);
//! `<dialect>:<rule>` when a Levee rule did (`spend_limit`, `usage_limit`,
//! `credits_exhausted`, `per_day`, `per_month`, `long_wait`,
//! `request_too_large`, `moderation`, `location_unsupported`,
//! `invalid_api_key`, `finish_reason_error`); `status:<n>` when only the
//! status spoke; `transport:<kind>`, `stream:eof_before_done`,
//! `stream:error`; `success` (no allocation). The dialect is the caller's
//! hint, else read from headers and the body ([`Dialect::as_str`]).
//!
//! # Streams
//!
//! A `200` stream can still fail: [`Classify::stream_scanner`] returns a
//! [`StreamScanner`] that reads a 2xx stream's chunks as they pass and
//! reports in-band errors and cut streams.
//!
//! ```
//! use http::{HeaderMap, StatusCode};
//! use levee_core::classify::{Classify, ProviderClassifier, ResponseView, Verdict};
//! use std::time::Duration;
//!
//! let classifier = ProviderClassifier::default();
//! let headers = HeaderMap::new();
//!
//! // Same status, three verdicts: the body decides.
//! let throttled = br#"{"error":{"code":"rate_limit_exceeded","message":"Please try again in 1m26.4s."}}"#;
//! let capped = br#"{"error":{"code":"insufficient_quota","message":"You exceeded your current quota"}}"#;
//! let too_big = br#"{"error":{"code":"rate_limit_exceeded","message":"Request too large for gpt-4o. The input or output tokens must be reduced."}}"#;
//! let classify = |body: &[u8]| {
//!     classifier.classify_response(&ResponseView::new(StatusCode::TOO_MANY_REQUESTS, &headers, body))
//! };
//!
//! let c = classify(throttled);
//! assert_eq!((c.verdict, c.wait), (Verdict::Throttled, Some(Duration::from_millis(86_400))));
//! assert_eq!(c.reason.as_str(), "openai:rate_limit_exceeded");
//! assert!(!c.verdict.is_breaker_failure());
//! assert_eq!(classify(capped).verdict, Verdict::Quota);
//! assert_eq!(classify(too_big).reason.as_str(), "openai:request_too_large");
//! ```

pub mod hints;

mod body;
mod dialect;
mod headers;
mod provider;
mod rules;
mod stream;
#[cfg(test)]
mod tests;
mod text;

pub use self::provider::{ProviderClassifier, ProviderClassifierBuilder};
pub use self::stream::{StreamFormat, StreamScanner};

use std::borrow::Cow;
use std::fmt;
use std::time::{Duration, SystemTime};

use http::{HeaderMap, StatusCode};

// === Verdict ===

/// What a response or transport failure says about the account that served it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum Verdict {
    /// The call served its purpose.
    Success,
    /// The provider is failing: timeout, connect error, 5xx, 529, a stream cut short.
    /// Counts toward opening the breaker.
    Availability,
    /// The key or account was rejected (401/403, invalid key). Counts toward the
    /// breaker at a lower threshold.
    Credential,
    /// The account is healthy and busy (429 with or without a wait hint).
    /// Closes the throttle gate; never counts toward the breaker.
    Throttled,
    /// A spend cap or quota is exhausted: the account is parked until it resets.
    Quota,
    /// The request itself was bad (400/404/413/422): says nothing about the account.
    Request,
}

impl Verdict {
    /// Every verdict, in declaration order.
    pub const ALL: [Verdict; 6] = [
        Verdict::Success,
        Verdict::Availability,
        Verdict::Credential,
        Verdict::Throttled,
        Verdict::Quota,
        Verdict::Request,
    ];

    /// The stable lowercase name (`"throttled"`), as used in reports and the drill.
    pub const fn as_str(self) -> &'static str {
        match self {
            Verdict::Success => "success",
            Verdict::Availability => "availability",
            Verdict::Credential => "credential",
            Verdict::Throttled => "throttled",
            Verdict::Quota => "quota",
            Verdict::Request => "request",
        }
    }

    /// Parses [`Verdict::as_str`]'s names.
    pub fn from_name(name: &str) -> Option<Verdict> {
        Verdict::ALL.into_iter().find(|v| v.as_str() == name)
    }

    /// Whether this verdict counts toward opening a breaker
    /// (availability and credential failures only).
    pub const fn is_breaker_failure(self) -> bool {
        matches!(self, Verdict::Availability | Verdict::Credential)
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

// === Classification ===

/// A short, stable, machine-readable reason such as `openai:insufficient_quota`,
/// `anthropic:overloaded_error` or `status:503`.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Reason(Cow<'static, str>);

impl Reason {
    /// A reason from a static string (no allocation).
    pub const fn new_static(s: &'static str) -> Self {
        Reason(Cow::Borrowed(s))
    }

    /// A reason from an owned string.
    pub fn new_owned(s: String) -> Self {
        Reason(Cow::Owned(s))
    }

    /// The reason text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&'static str> for Reason {
    fn from(s: &'static str) -> Self {
        Reason::new_static(s)
    }
}

impl From<String> for Reason {
    fn from(s: String) -> Self {
        Reason::new_owned(s)
    }
}

/// The result of classifying one response or transport failure.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Classification {
    /// What the outcome says about the account.
    pub verdict: Verdict,
    /// How long the provider asked us to wait, as it meant it (a quota reset
    /// may be days away). `None` when the provider gave no usable hint.
    pub wait: Option<Duration>,
    /// The provider's `x-should-retry` header, if it sent one. It changes
    /// retryability, never the verdict.
    pub should_retry: Option<bool>,
    /// A short stable reason, e.g. `openai:insufficient_quota`.
    pub reason: Reason,
}

impl Classification {
    /// A classification with no wait hint and no `x-should-retry`.
    pub fn new(verdict: Verdict, reason: impl Into<Reason>) -> Self {
        Classification {
            verdict,
            wait: None,
            should_retry: None,
            reason: reason.into(),
        }
    }

    /// The plain success classification (`reason = "success"`).
    pub const fn success() -> Self {
        Classification {
            verdict: Verdict::Success,
            wait: None,
            should_retry: None,
            reason: Reason::new_static("success"),
        }
    }

    /// Sets the wait hint.
    pub fn with_wait(mut self, wait: Option<Duration>) -> Self {
        self.wait = wait;
        self
    }
}

// === Inputs ===

/// A transport-level failure: no response (or no complete response) arrived.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TransportFailure {
    /// Connection refused, DNS or TLS failure before any response.
    Connect,
    /// The call (or its first byte) timed out.
    Timeout,
    /// The connection was reset or closed before a complete response.
    Reset,
    /// Any other transport error.
    Other,
}

impl TransportFailure {
    /// The stable reason string, e.g. `transport:timeout`.
    pub const fn reason(self) -> &'static str {
        match self {
            TransportFailure::Connect => "transport:connect",
            TransportFailure::Timeout => "transport:timeout",
            TransportFailure::Reset => "transport:reset",
            TransportFailure::Other => "transport:error",
        }
    }
}

/// The provider family whose error dialect a response speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "kebab-case"))]
#[non_exhaustive]
pub enum Dialect {
    /// OpenAI.
    #[cfg_attr(feature = "serde", serde(rename = "openai"))]
    OpenAi,
    /// Azure OpenAI.
    Azure,
    /// Anthropic.
    Anthropic,
    /// Google Gemini API.
    Gemini,
    /// Google Vertex AI.
    Vertex,
    /// AWS Bedrock.
    Bedrock,
    /// Mistral.
    Mistral,
    /// Groq.
    Groq,
    /// Cohere.
    Cohere,
    /// OpenRouter.
    #[cfg_attr(feature = "serde", serde(rename = "openrouter"))]
    OpenRouter,
    /// Any other OpenAI-compatible endpoint.
    Generic,
}

/// A response as the classifier sees it: status, headers and a bounded peek of
/// the body (empty for a 2xx that was not peeked).
#[derive(Clone, Copy, Debug)]
pub struct ResponseView<'a> {
    /// The HTTP status.
    pub status: StatusCode,
    /// The response headers.
    pub headers: &'a HeaderMap,
    /// The first bytes of the body (up to the peek bound); may be truncated,
    /// non-UTF-8 or empty.
    pub body: &'a [u8],
    /// The provider dialect, if the caller knows it. Detected from the
    /// response when `None`.
    pub dialect: Option<Dialect>,
    /// Wall-clock now, for hints given as dates when the response carries no
    /// `Date` header. `None` means `SystemTime::now()`.
    pub now: Option<SystemTime>,
}

impl<'a> ResponseView<'a> {
    /// A view with no dialect hint, using the system's wall clock.
    pub fn new(status: StatusCode, headers: &'a HeaderMap, body: &'a [u8]) -> Self {
        ResponseView {
            status,
            headers,
            body,
            dialect: None,
            now: None,
        }
    }

    /// Sets the dialect hint.
    pub fn with_dialect(mut self, dialect: Option<Dialect>) -> Self {
        self.dialect = dialect;
        self
    }

    /// Sets the wall-clock time used for date hints when there is no `Date` header.
    pub fn with_now(mut self, now: SystemTime) -> Self {
        self.now = Some(now);
        self
    }
}

// === Classify ===

/// Turns provider responses and transport failures into [`Classification`]s.
///
/// [`ProviderClassifier`] is the default. Implement this trait to replace or
/// wrap it, e.g. for a private gateway's error codes.
pub trait Classify: Send + Sync {
    /// Whether the layer should peek at this response's body before
    /// classifying it. The default peeks every non-2xx response.
    fn wants_body(&self, status: StatusCode, headers: &HeaderMap) -> bool {
        let _ = headers;
        !status.is_success()
    }

    /// Classifies a response.
    fn classify_response(&self, response: &ResponseView<'_>) -> Classification;

    /// Classifies a transport failure.
    fn classify_transport(&self, failure: TransportFailure) -> Classification {
        Classification::new(Verdict::Availability, failure.reason())
    }

    /// A scanner for the body of a 2xx streaming response (`text/event-stream`,
    /// `application/vnd.amazon.eventstream`, NDJSON), `None` for any other
    /// response. The default is [`StreamScanner::for_response`].
    fn stream_scanner(&self, status: StatusCode, headers: &HeaderMap) -> Option<StreamScanner> {
        StreamScanner::for_response(status, headers)
    }
}

impl<C: Classify + ?Sized> Classify for std::sync::Arc<C> {
    fn wants_body(&self, status: StatusCode, headers: &HeaderMap) -> bool {
        (**self).wants_body(status, headers)
    }
    fn classify_response(&self, response: &ResponseView<'_>) -> Classification {
        (**self).classify_response(response)
    }
    fn classify_transport(&self, failure: TransportFailure) -> Classification {
        (**self).classify_transport(failure)
    }
    fn stream_scanner(&self, status: StatusCode, headers: &HeaderMap) -> Option<StreamScanner> {
        (**self).stream_scanner(status, headers)
    }
}
