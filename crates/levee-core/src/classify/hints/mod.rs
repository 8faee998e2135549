//! Wait hints: how long a provider asked us to stay away.
//!
//! [`ProviderClassifier`](super::ProviderClassifier) takes the first usable
//! hint in this order, because the earlier sources are the more deliberate:
//!
//! 1. [`retry_after`]: `retry-after-ms`, `x-ms-retry-after-ms`, then
//!    `retry-after` (delta seconds, fractional seconds or an HTTP-date
//!    measured from the response's `Date`).
//! 2. Body hints: Gemini's `RetryInfo.retryDelay` (read with the body), then
//!    [`text_wait`] over the error message (`try again in 1m26.4s`, `retry
//!    after 60 seconds`, `regain access on 2026-09-01 at 00:00 UTC`).
//! 3. [`reset_wait`]: the reset header of the dimension that is exhausted
//!    (`x-ratelimit-reset-tokens` only when `x-ratelimit-remaining-tokens`
//!    is `0`, and Anthropic's `anthropic-ratelimit-*-reset`). A counter that
//!    still has room says nothing about this 429: OpenAI's per-minute request
//!    reset is no answer to a per-day limit.
//!
//! Every function here returns the exact value; the classifier rounds up to
//! the millisecond and applies its sanity cap. A zero, negative, past or
//! unparsable value is treated as absent, so the next source is tried: Azure
//! sends `x-ratelimit-reset-tokens: 0` and `-1` as "unknown", never as
//! "retry now".

mod parse;

pub use parse::{
    delay_millis, delay_seconds, go_duration, http_date, proto_duration, rfc3339, text_date,
    text_duration,
};

use std::borrow::Cow;
use std::time::{Duration, SystemTime};

use http::HeaderMap;

/// The instant date hints are measured from: the response's `Date` header,
/// else `now`, else the system clock. Measuring from `Date` keeps a
/// provider's "regain access on …" exact even when our clock is off.
pub fn reference_time(headers: &HeaderMap, now: Option<SystemTime>) -> SystemTime {
    header_str(headers, "date")
        .and_then(http_date)
        .or(now)
        .unwrap_or_else(SystemTime::now)
}

fn header_str<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers.get(name)?.to_str().ok()
}

fn positive(d: Option<Duration>) -> Option<Duration> {
    d.filter(|d| !d.is_zero())
}

fn until(at: SystemTime, reference: SystemTime) -> Option<Duration> {
    positive(at.duration_since(reference).ok())
}

/// The explicit header hint: `retry-after-ms`, `x-ms-retry-after-ms`, then
/// `retry-after` (seconds, fractional seconds, or an HTTP-date measured from
/// `reference`).
pub fn retry_after(headers: &HeaderMap, reference: SystemTime) -> Option<Duration> {
    for name in ["retry-after-ms", "x-ms-retry-after-ms"] {
        if let Some(d) = positive(header_str(headers, name).and_then(delay_millis)) {
            return Some(d);
        }
    }
    let value = header_str(headers, "retry-after")?;
    positive(delay_seconds(value)).or_else(|| until(http_date(value)?, reference))
}

/// Phrases that introduce a duration in provider messages.
const DURATION_LEADS: [&str; 4] = [
    "try again in ",
    "retry in ",
    "retry after ",
    "try again after ",
];
/// Phrases that introduce the date access resumes.
const DATE_LEADS: [&str; 3] = ["regain access on ", "resets on ", "reset on "];

/// A wait named in free text, matched ASCII case-insensitively: `Please try
/// again in 9.816s`, `Try again in 1 seconds`, `Please retry after 60
/// seconds`, `Please retry in 56.18s`, or a date as in `You will regain
/// access on 2026-09-01 at 00:00 UTC` (measured from `reference`).
pub fn text_wait(text: &str, reference: SystemTime) -> Option<Duration> {
    let lower = if text.bytes().any(|c| c.is_ascii_uppercase()) {
        Cow::Owned(text.to_ascii_lowercase())
    } else {
        Cow::Borrowed(text)
    };
    text_wait_lower(&lower, reference)
}

/// [`text_wait`] over text already in ASCII lowercase.
pub(crate) fn text_wait_lower(lower: &str, reference: SystemTime) -> Option<Duration> {
    for lead in DURATION_LEADS {
        for (at, _) in lower.match_indices(lead) {
            let rest = &lower[at + lead.len()..];
            if let Some(d) = positive(text_duration(rest).map(|(d, _)| d)) {
                return Some(d);
            }
        }
    }
    for lead in DATE_LEADS {
        for (at, _) in lower.match_indices(lead) {
            if let Some(d) = text_date(&lower[at + lead.len()..]).and_then(|t| until(t, reference))
            {
                return Some(d);
            }
        }
    }
    None
}

/// The OpenAI-style dimensions (`x-ratelimit-{remaining,reset}-<dim>`, Go
/// durations) and Anthropic's (`anthropic-ratelimit-<dim>-{remaining,reset}`,
/// RFC 3339 instants).
const OPENAI_DIMS: [(&str, &str); 2] = [
    (
        "x-ratelimit-remaining-requests",
        "x-ratelimit-reset-requests",
    ),
    ("x-ratelimit-remaining-tokens", "x-ratelimit-reset-tokens"),
];
const ANTHROPIC_DIMS: [(&str, &str); 4] = [
    (
        "anthropic-ratelimit-requests-remaining",
        "anthropic-ratelimit-requests-reset",
    ),
    (
        "anthropic-ratelimit-tokens-remaining",
        "anthropic-ratelimit-tokens-reset",
    ),
    (
        "anthropic-ratelimit-input-tokens-remaining",
        "anthropic-ratelimit-input-tokens-reset",
    ),
    (
        "anthropic-ratelimit-output-tokens-remaining",
        "anthropic-ratelimit-output-tokens-reset",
    ),
];

fn exhausted(headers: &HeaderMap, remaining: &str) -> bool {
    header_str(headers, remaining).is_some_and(|v| v.trim_ascii() == "0")
}

/// The reset of the exhausted dimension(s): a reset header counts only when
/// its matching `remaining` header is exactly `0`; when several dimensions
/// are exhausted the latest reset wins, since all must refill. OpenAI-style
/// resets are Go durations (`6m0s`) or plain seconds; Anthropic's are RFC
/// 3339 instants measured from `reference`.
pub fn reset_wait(headers: &HeaderMap, reference: SystemTime) -> Option<Duration> {
    let openai = OPENAI_DIMS
        .iter()
        .filter(|(remaining, _)| exhausted(headers, remaining))
        .filter_map(|(_, reset)| {
            let v = header_str(headers, reset)?;
            positive(go_duration(v).or_else(|| delay_seconds(v)))
        });
    let anthropic = ANTHROPIC_DIMS
        .iter()
        .filter(|(remaining, _)| exhausted(headers, remaining))
        .filter_map(|(_, reset)| until(rfc3339(header_str(headers, reset)?)?, reference));
    openai.chain(anthropic).max()
}

/// The provider's `x-should-retry: true|false` (Anthropic and the other
/// Stainless-generated SDKs honour it). It changes retryability, never the
/// verdict.
pub fn should_retry(headers: &HeaderMap) -> Option<bool> {
    let v = header_str(headers, "x-should-retry")?.trim_ascii();
    if v.eq_ignore_ascii_case("true") {
        Some(true)
    } else if v.eq_ignore_ascii_case("false") {
        Some(false)
    } else {
        None
    }
}
