//! What a response says: the [`Verdict`], its stable [`Reason`], and the
//! [`Classification`] that carries both with the provider's wait hint; and
//! the [`TransportFailure`]s a call can end in instead of a response.

use std::borrow::Cow;
use std::fmt;
use std::num::NonZeroU32;
use std::time::Duration;

// === Verdict ===

/// What a response or transport failure says about the account that served it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
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
#[non_exhaustive]
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
    /// When one of the user's [`Rules`](super::Rules) decided: its position
    /// in the classifier's set ([`ProviderClassifier::rules`](super::ProviderClassifier::rules)).
    /// `None` when the built-in rules did.
    pub rule: Option<u16>,
    /// The request limit a throttled answer states in its body, when it
    /// states one (Gemini's `QuotaFailure` names the per-minute quota it
    /// hit, with its value): the rate to spread requests at, as a rate-limit
    /// header would say it.
    pub stated_limit: Option<StatedLimit>,
}

/// A request limit a provider's answer states: so many requests per
/// window of whole seconds. Eight bytes: every classification carries a
/// place for one.
///
/// ```
/// use std::time::Duration;
/// use levee_core::classify::StatedLimit;
///
/// let limit = StatedLimit::new(600, Duration::from_secs(60)).unwrap();
/// assert_eq!((limit.requests(), limit.window()), (600, Duration::from_secs(60)));
/// assert_eq!(StatedLimit::new(0, Duration::from_secs(60)), None);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StatedLimit {
    requests: NonZeroU32,
    window_secs: u32,
}

impl StatedLimit {
    /// `requests` per `window` (whole seconds, rounded down; both capped
    /// at `u32::MAX`); `None` for no requests.
    pub fn new(requests: u64, window: Duration) -> Option<Self> {
        let requests = NonZeroU32::new(u32::try_from(requests).unwrap_or(u32::MAX))?;
        let window_secs = u32::try_from(window.as_secs()).unwrap_or(u32::MAX);
        Some(StatedLimit {
            requests,
            window_secs,
        })
    }

    /// Requests admitted per window.
    pub fn requests(&self) -> u64 {
        u64::from(self.requests.get())
    }

    /// The window they are counted over.
    pub fn window(&self) -> Duration {
        Duration::from_secs(u64::from(self.window_secs))
    }
}

impl Classification {
    /// A classification with no wait hint and no `x-should-retry`.
    pub fn new(verdict: Verdict, reason: impl Into<Reason>) -> Self {
        Classification {
            verdict,
            wait: None,
            should_retry: None,
            reason: reason.into(),
            rule: None,
            stated_limit: None,
        }
    }

    /// The plain success classification (`reason = "success"`).
    pub const fn success() -> Self {
        Classification {
            verdict: Verdict::Success,
            wait: None,
            should_retry: None,
            reason: Reason::new_static("success"),
            rule: None,
            stated_limit: None,
        }
    }

    /// Sets the wait hint.
    pub fn with_wait(mut self, wait: Option<Duration>) -> Self {
        self.wait = wait;
        self
    }
}

// === TransportFailure ===

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
