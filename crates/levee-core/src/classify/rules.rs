//! The verdict rules: what a status, a provider code or a message means.
//!
//! The rules are general, taken from what providers document rather than
//! from sample messages: codes are matched by the words they are built
//! from (`*_spend_limit_*`, `*rate_limit*`, `*api_key*`), messages by the
//! phrases providers use for a cap (`usage limit`, `credits are depleted`).

use std::time::Duration;

use super::body::ErrorFacts;
use super::{Dialect, Reason, Verdict};

/// Why a verdict was reached; becomes the [`Reason`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Why<'a> {
    /// A provider code decided: `<dialect>:<code>`.
    Code(&'a str),
    /// A numeric code inside a stream: `<dialect>:<n>`.
    InBand(u16),
    /// A Levee rule over the message or the wait: `<dialect>:<rule>`.
    Rule(&'static str),
    /// Only the status: `status:<n>`.
    Status(u16),
    /// A fixed reason (`stream:error`).
    Fixed(&'static str),
}

impl Why<'_> {
    pub(crate) fn reason(self, dialect: Dialect) -> Reason {
        let d = dialect.as_str();
        match self {
            Why::Code(code) => Reason::new_owned(format!("{d}:{}", sanitize(code))),
            Why::InBand(n) => Reason::new_owned(format!("{d}:{n}")),
            Why::Rule(rule) => Reason::new_owned(format!("{d}:{rule}")),
            Why::Status(n) => Reason::new_owned(format!("status:{n}")),
            Why::Fixed(s) => Reason::new_static(s),
        }
    }
}

/// A provider code as one short token: the AWS name before `:`/after `#`,
/// at most 64 characters of `[A-Za-z0-9_.-]` (anything else becomes `_`).
fn sanitize(code: &str) -> String {
    let code = code.split(':').next().unwrap_or(code);
    let code = code.rsplit('#').next().unwrap_or(code);
    code.chars()
        .take(64)
        .map(|c| match c {
            'a'..='z' | 'A'..='Z' | '0'..='9' | '_' | '.' | '-' => c,
            _ => '_',
        })
        .collect()
}

/// A verdict and why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Decision<'a> {
    pub(crate) verdict: Verdict,
    pub(crate) why: Why<'a>,
}

const fn decision(verdict: Verdict, why: Why<'_>) -> Decision<'_> {
    Decision { verdict, why }
}

// === status and codes ===

/// What the status alone says.
pub(crate) fn status_verdict(status: u16) -> Verdict {
    match status {
        0..=399 => Verdict::Success,
        401 | 403 => Verdict::Credential,
        402 => Verdict::Quota,
        408 => Verdict::Availability,
        429 => Verdict::Throttled,
        400..=499 => Verdict::Request,
        // 5xx, Anthropic's 529, and anything non-standard a broken server sends.
        _ => Verdict::Availability,
    }
}

/// Words codes are built from, by the verdict they name. Checked in this
/// order: `insufficient_quota` is a cap before it is anything else, and
/// `unsupported_country_region_territory` an entitlement, not a bad request.
const CODE_WORDS: [(Verdict, &[&str]); 5] = [
    (
        Verdict::Quota,
        &[
            "insufficient_quota",
            "spend_limit",
            "usage_limit",
            "billing",
            "insufficient_balance",
            "insufficient_credit",
            "insufficient_fund",
            "payment_required",
            "credits_exhausted",
        ],
    ),
    (
        Verdict::Credential,
        &[
            "api_key",
            "apikey",
            "auth",
            "permission",
            "access_denied",
            "accessdenied",
            "forbidden",
            "unsupported_country",
            "deactivated",
            "invalid_key",
            "unrecognizedclient",
            "signature",
            "expiredtoken",
        ],
    ),
    (
        Verdict::Throttled,
        &[
            "rate_limit",
            "ratelimit",
            "too_many_requests",
            "toomanyrequests",
            "resource_exhausted",
            "throttl",
            "slow_down",
            "servicequotaexceeded",
        ],
    ),
    (
        Verdict::Availability,
        &[
            "overloaded",
            "server_error",
            "servererror",
            "api_error",
            "internal",
            "unavailable",
            "timeout",
            "timed_out",
            "deadline_exceeded",
            "not_ready",
            "notready",
            "bad_gateway",
        ],
    ),
    (
        Verdict::Request,
        &[
            "invalid_request",
            "invalid_argument",
            "not_found",
            "notfound",
            "too_large",
            "context_length",
            "content_filter",
            "validation",
            "bad_request",
            "moderation",
            "invalid_prompt",
            "unsupported",
            "failed_precondition",
            "out_of_range",
            "policy_violation",
            "policyviolation",
            "content_policy",
        ],
    ),
];

/// The verdict a provider code names, if it names one.
pub(crate) fn code_kind(code: &str) -> Option<Verdict> {
    let mut buf = [0u8; 64];
    let len = code.len().min(buf.len());
    let lower = &mut buf[..len];
    lower.copy_from_slice(&code.as_bytes()[..len]);
    lower.make_ascii_lowercase();
    let lower = &*lower;
    CODE_WORDS
        .iter()
        .find(|(_, words)| {
            words
                .iter()
                .any(|w| lower.windows(w.len()).any(|win| win == w.as_bytes()))
        })
        .map(|&(v, _)| v)
}

/// The first code, most specific first, that names a verdict.
fn first_known<'a>(facts: &ErrorFacts<'a>) -> Option<(Verdict, &'a str)> {
    facts.codes().find_map(|c| Some((code_kind(c)?, c)))
}

/// AWS exception names (`x-amzn-ErrorType`, `__type`, `:exception-type`),
/// the protocol's own dispatch key: Bedrock's 429 `ModelNotReadyException`
/// is a model still loading, its 400 `ServiceQuotaExceededException` a
/// throttle, its 424 `ModelErrorException` whatever the model's own status was.
pub(crate) fn aws_exception(name: &str, original_status: Option<u16>) -> Option<Verdict> {
    let name = name.split(':').next().unwrap_or(name);
    let name = name.rsplit('#').next().unwrap_or(name).trim_ascii();
    let is = |n: &str| name.eq_ignore_ascii_case(n);
    let v = if [
        "ThrottlingException",
        "ServiceQuotaExceededException",
        "TooManyRequestsException",
    ]
    .into_iter()
    .any(is)
    {
        Verdict::Throttled
    } else if ["ModelErrorException", "ModelStreamErrorException"]
        .into_iter()
        .any(is)
    {
        original_status
            .map(status_verdict)
            .filter(|&v| v != Verdict::Success)
            .unwrap_or(Verdict::Availability)
    } else if [
        "ModelNotReadyException",
        "ServiceUnavailableException",
        "InternalServerException",
        "ModelTimeoutException",
        "InternalFailure",
    ]
    .into_iter()
    .any(is)
    {
        Verdict::Availability
    } else if [
        "AccessDeniedException",
        "UnrecognizedClientException",
        "InvalidSignatureException",
        "ExpiredTokenException",
        "IncompleteSignature",
        "MissingAuthenticationTokenException",
    ]
    .into_iter()
    .any(is)
    {
        Verdict::Credential
    } else if [
        "ValidationException",
        "ResourceNotFoundException",
        "ConflictException",
    ]
    .into_iter()
    .any(is)
    {
        Verdict::Request
    } else {
        return code_kind(name);
    };
    Some(v)
}

// === message text ===

fn any_of(lower: &str, phrases: &[&str]) -> bool {
    phrases.iter().any(|p| lower.contains(p))
}

/// A cap named in words, behind a generic code (Anthropic's 400
/// `invalid_request_error` "You have reached your specified API usage
/// limits", OpenRouter's "Insufficient credits", Gemini's 402 "prepayment
/// credits are depleted"). "Quota exceeded" alone is not one: Google says it
/// of per-minute limits.
fn quota_text(lower: &str) -> Option<&'static str> {
    if any_of(
        lower,
        &[
            "spend limit",
            "spending limit",
            "spend cap",
            "spending cap",
            "budget has been exceeded",
        ],
    ) {
        Some("spend_limit")
    } else if any_of(lower, &["usage limit", "billing hard limit"]) {
        Some("usage_limit")
    } else if any_of(
        lower,
        &[
            "credit balance is too low",
            "insufficient credit",
            "insufficient balance",
            "insufficient fund",
            "credits are depleted",
            "credits have been exhausted",
            "out of credits",
            "balance is too low",
        ],
    ) {
        Some("credits_exhausted")
    } else {
        None
    }
}

/// An account that may not use this endpoint or model from here.
fn credential_text(lower: &str) -> Option<&'static str> {
    if any_of(
        lower,
        &[
            "location is not supported",
            "region, or territory not supported",
        ],
    ) {
        Some("location_unsupported")
    } else if any_of(
        lower,
        &[
            "api key not valid",
            "invalid api key",
            "incorrect api key",
            "api key expired",
        ],
    ) {
        Some("invalid_api_key")
    } else {
        None
    }
}

/// A limit counted over a day or a month: no short wait will lift it.
fn long_window_text(lower: &str) -> Option<&'static str> {
    if any_of(lower, &["per day", "per-day", "daily", "(rpd)", "(tpd)"]) {
        Some("per_day")
    } else if any_of(lower, &["per month", "monthly", "/ month", "/month"]) {
        Some("per_month")
    } else {
        None
    }
}

// === decisions ===

/// The verdict for a non-2xx response. `aws` is the `x-amzn-ErrorType`
/// header or the body's `__type`; `lower` the message in ASCII lowercase;
/// `wait` the hint already found.
pub(crate) fn decide<'a>(
    status: u16,
    facts: &ErrorFacts<'a>,
    aws: Option<&'a str>,
    lower: &str,
    wait: Option<Duration>,
    quota_after: Duration,
) -> Decision<'a> {
    if let Some(name) = aws {
        if let Some(v) = aws_exception(name, facts.original_status) {
            return refine_throttle(
                decision(v, Why::Code(name)),
                facts,
                lower,
                wait,
                quota_after,
            );
        }
    }
    let known = first_known(facts);
    // The body names the reason of a 5xx but never turns it into something else.
    if status >= 500 || status == 408 {
        return decision(
            Verdict::Availability,
            agreeing(known, facts, Verdict::Availability, status),
        );
    }
    if let Some((v @ (Verdict::Quota | Verdict::Credential), code)) = known {
        return decision(v, Why::Code(code));
    }
    if status != 401 {
        if let Some(rule) = quota_text(lower) {
            return decision(Verdict::Quota, Why::Rule(rule));
        }
    }
    if status != 429 {
        if let Some(rule) = credential_text(lower) {
            return decision(Verdict::Credential, Why::Rule(rule));
        }
    }
    let throttle_code = matches!(known, Some((Verdict::Throttled, _)));
    // A 429 for a request bigger than the whole window: waiting cannot help.
    if (status == 429 || throttle_code) && any_of(lower, &["request too large", "must be reduced"])
    {
        return decision(Verdict::Request, Why::Rule("request_too_large"));
    }
    // A moderation refusal says nothing about the key.
    if status == 403 && any_of(lower, &["moderation", "flagged"]) {
        return decision(Verdict::Request, Why::Rule("moderation"));
    }
    let d = match known {
        Some((v @ (Verdict::Throttled | Verdict::Availability), code)) => {
            decision(v, Why::Code(code))
        }
        _ => {
            let v = status_verdict(status);
            decision(v, agreeing(known, facts, v, status))
        }
    };
    refine_throttle(d, facts, lower, wait, quota_after)
}

/// The reason for a verdict the status decided: the provider's code when it
/// agrees (or names nothing), else the bare status.
fn agreeing<'a>(
    known: Option<(Verdict, &'a str)>,
    facts: &ErrorFacts<'a>,
    v: Verdict,
    status: u16,
) -> Why<'a> {
    match known {
        Some((k, code)) if k == v => Why::Code(code),
        Some(_) => Why::Status(status),
        None => facts.codes().next().map_or(Why::Status(status), Why::Code),
    }
}

/// A throttle that will not lift soon is an exhausted allowance: a per-day
/// or per-month limit with no short wait, or any wait beyond `quota_after`
/// (Azure's "retry after 86400 seconds" for a deployment with no quota left).
fn refine_throttle<'a>(
    d: Decision<'a>,
    facts: &ErrorFacts<'a>,
    lower: &str,
    wait: Option<Duration>,
    quota_after: Duration,
) -> Decision<'a> {
    if d.verdict != Verdict::Throttled {
        return d;
    }
    let long = wait.is_some_and(|w| w > quota_after);
    if facts.per_day {
        return decision(Verdict::Quota, Why::Rule("per_day"));
    }
    if long || wait.is_none() {
        if let Some(rule) = long_window_text(lower) {
            return decision(Verdict::Quota, Why::Rule(rule));
        }
    }
    if long {
        return decision(Verdict::Quota, Why::Rule("long_wait"));
    }
    d
}

/// The verdict for an error that arrived inside a 2xx stream: the rules of
/// [`decide`] under the status the error's code or number implies. With
/// neither, an error after a 200 is the provider failing mid-response
/// (availability) unless its message names a cap.
pub(crate) fn decide_in_band<'a>(
    facts: &ErrorFacts<'a>,
    aws: Option<&'a str>,
    lower: &str,
    wait: Option<Duration>,
    quota_after: Duration,
) -> Decision<'a> {
    let status = match (aws, first_known(facts), facts.number) {
        (Some(_), _, _) => 500,
        (None, Some((v, _)), _) => match v {
            Verdict::Quota => 402,
            Verdict::Credential => 401,
            Verdict::Throttled => 429,
            Verdict::Request => 400,
            _ => 500,
        },
        (None, None, Some(n)) if n >= 400 => n,
        (None, None, _) => {
            if let Some(rule) = quota_text(lower) {
                return decision(Verdict::Quota, Why::Rule(rule));
            }
            let why = facts
                .codes()
                .next()
                .map_or(Why::Fixed("stream:error"), Why::Code);
            return decision(Verdict::Availability, why);
        }
    };
    let mut d = decide(status, facts, aws, lower, wait, quota_after);
    if let Why::Status(n) = d.why {
        // No HTTP status is involved: name the provider's number, if it sent one.
        d.why = if facts.number == Some(n) {
            Why::InBand(n)
        } else {
            Why::Fixed("stream:error")
        };
    }
    d
}
