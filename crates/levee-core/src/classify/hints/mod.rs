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

mod limits;
mod parse;

pub(crate) use limits::MAX_WINDOWS;
pub use limits::{Dimension, Period, RateLimits, RateWindow};
// Internal: shared with Levee's own crates, no semver promise (see the crate docs).
#[doc(hidden)]
pub use limits::MAX_RESET;
#[doc(hidden)]
pub use parse::{
    delay_millis, delay_seconds, go_duration, http_date, proto_duration, rfc3339, text_date,
    text_duration,
};

use std::borrow::Cow;
use std::time::{Duration, SystemTime};

use http::header::{DATE, RETRY_AFTER};
use http::{HeaderMap, HeaderName};

use super::text::Needle;

/// The instant date hints are measured from: the response's `Date` header,
/// else `now`, else the system clock. Measuring from `Date` keeps a
/// provider's "regain access on …" exact even when our clock is off.
pub fn reference_time(headers: &HeaderMap, now: Option<SystemTime>) -> SystemTime {
    header_str(headers, &DATE)
        .and_then(http_date)
        .or(now)
        .unwrap_or_else(SystemTime::now)
}

// Names built once: a lookup by `&str` parses and validates the name each time.
const RETRY_AFTER_MS: HeaderName = HeaderName::from_static("retry-after-ms");
const X_MS_RETRY_AFTER_MS: HeaderName = HeaderName::from_static("x-ms-retry-after-ms");
const X_SHOULD_RETRY: HeaderName = HeaderName::from_static("x-should-retry");

fn header_str<'h>(headers: &'h HeaderMap, name: &HeaderName) -> Option<&'h str> {
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
    retry_after_lazy(headers, &|| reference)
}

/// The reference instant, computed only if a date-form hint needs it.
pub(crate) type LazyTime<'a> = &'a dyn Fn() -> SystemTime;

/// [`retry_after`] with a lazily computed reference.
pub(crate) fn retry_after_lazy(headers: &HeaderMap, reference: LazyTime<'_>) -> Option<Duration> {
    explicit_wait(
        [&RETRY_AFTER_MS, &X_MS_RETRY_AFTER_MS, &RETRY_AFTER].map(|n| header_str(headers, n)),
        reference,
    )
}

/// The explicit hint from the values of `retry-after-ms`,
/// `x-ms-retry-after-ms` and `retry-after`, in that order.
pub(crate) fn explicit_wait(
    values: [Option<&str>; 3],
    reference: LazyTime<'_>,
) -> Option<Duration> {
    let [ms, x_ms, value] = values;
    for v in [ms, x_ms] {
        if let Some(d) = positive(v.and_then(delay_millis)) {
            return Some(d);
        }
    }
    let value = value?;
    positive(delay_seconds(value)).or_else(|| until(http_date(value)?, reference()))
}

/// Phrases that introduce a duration in provider messages.
static DURATION_LEADS: [Needle; 8] = [
    Needle::new("try again in "),
    Needle::new("retry in "),
    Needle::new("retry after "),
    Needle::new("try again after "),
    // "Your quota will reset after 8h44m7s" (Gemini Code Assist).
    Needle::new("reset after "),
    Needle::new("resets after "),
    Needle::new("resets in "),
    // "Quota will be replenished in 5.03:23:11" (Azure).
    Needle::new("replenished in "),
];
/// Phrases that introduce the date access resumes.
static DATE_LEADS: [Needle; 5] = [
    Needle::new("regain access on "),
    Needle::new("resets on "),
    Needle::new("reset on "),
    // "5-hour usage limit reached …, resets at 2026-05-15T15:00:00Z"
    // (MiniMax), "It will reset at 2026-08-29 23:59:59 +0800 CST" (Volcengine Ark).
    Needle::new("resets at "),
    Needle::new("reset at "),
];

/// A duration with its hedge dropped: "resets in ~5s", "in about 30
/// seconds", "in approximately 2 minutes".
fn hedged(rest: &str) -> &str {
    let mut rest = rest;
    for hedge in [
        "~",
        "about ",
        "approximately ",
        "approx. ",
        "around ",
        "roughly ",
        "≈",
    ] {
        rest = rest.strip_prefix(hedge).unwrap_or(rest).trim_start();
    }
    rest
}

/// A wait named in free text, matched ASCII case-insensitively: `Please try
/// again in 9.816s`, `Try again in 1 seconds`, `Please retry after 60
/// seconds`, `Please retry in 56.18s`, `Your quota will reset after 5s`,
/// `Quota will be replenished in 5.03:23:11`, or a date as in `You will regain
/// access on 2026-09-01 at 00:00 UTC` (measured from `reference`).
pub fn text_wait(text: &str, reference: SystemTime) -> Option<Duration> {
    let lower = if text.bytes().any(|c| c.is_ascii_uppercase()) {
        Cow::Owned(text.to_ascii_lowercase())
    } else {
        Cow::Borrowed(text)
    };
    text_wait_lower(&lower, &|| reference)
}

/// [`text_wait`] over text already in ASCII lowercase.
pub(crate) fn text_wait_lower(lower: &str, reference: LazyTime<'_>) -> Option<Duration> {
    for lead in &DURATION_LEADS {
        for at in lead.find_all(lower) {
            let rest = hedged(&lower[at + lead.len()..]);
            if let Some(d) = positive(text_duration(rest).map(|(d, _)| d)) {
                return Some(d);
            }
        }
    }
    for lead in &DATE_LEADS {
        for at in lead.find_all(lower) {
            if let Some(d) =
                text_date(&lower[at + lead.len()..]).and_then(|t| until(t, reference()))
            {
                return Some(d);
            }
        }
    }
    None
}

/// The reset of the exhausted limit(s): a reset counts only when its
/// limit's remaining is exactly `0`; when several are exhausted the latest
/// reset wins, since all must refill. OpenAI-style resets are Go durations
/// (`6m0s`) or seconds; Anthropic's are RFC 3339 instants measured from
/// `reference`. See [`RateLimits`].
pub fn reset_wait(headers: &HeaderMap, reference: SystemTime) -> Option<Duration> {
    reset_wait_lazy(headers, &|| reference)
}

/// [`reset_wait`] with a lazily computed reference.
pub(crate) fn reset_wait_lazy(headers: &HeaderMap, reference: LazyTime<'_>) -> Option<Duration> {
    RateLimits::read_lazy(headers, reference).exhausted_reset()
}

/// The provider's `x-should-retry: true|false` (Anthropic and the other
/// Stainless-generated SDKs honour it). It changes retryability, never the
/// verdict.
pub fn should_retry(headers: &HeaderMap) -> Option<bool> {
    should_retry_value(header_str(headers, &X_SHOULD_RETRY)?)
}

/// [`should_retry`] from the header's value.
pub(crate) fn should_retry_value(v: &str) -> Option<bool> {
    let v = v.trim_ascii();
    if v.eq_ignore_ascii_case("true") {
        Some(true)
    } else if v.eq_ignore_ascii_case("false") {
        Some(false)
    } else {
        None
    }
}
