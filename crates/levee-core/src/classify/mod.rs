//! Turning a provider response into a verdict.
//!
//! (Module docs are completed by the classification work: see issue 2.)

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
}

/// The default classifier: knows the error dialects of the major LLM providers.
#[derive(Clone, Debug, Default)]
pub struct ProviderClassifier {
    _priv: (),
}

impl Classify for ProviderClassifier {
    fn classify_response(&self, response: &ResponseView<'_>) -> Classification {
        // Placeholder until the provider dialects land (issue 2).
        let s = response.status.as_u16();
        let verdict = match s {
            200..=399 => return Classification::success(),
            429 => Verdict::Throttled,
            401 | 403 => Verdict::Credential,
            408 | 500..=599 => Verdict::Availability,
            _ => Verdict::Request,
        };
        Classification::new(verdict, format!("status:{s}"))
    }
}
