//! The verdict rules: what a status, a provider code or a message means.
//!
//! The rules are general, taken from what providers document rather than
//! from sample messages: codes are matched by the words they are built
//! from (`*_spend_limit_*`, `*rate_limit*`, `*api_key*`), messages by the
//! phrases providers use for a cap (`usage limit`, `credits are depleted`).

use std::time::Duration;

mod codes;
mod phrases;

use self::codes::is_slow_down_code;
use self::codes::numbered;
pub(crate) use self::codes::{aws_exception, code_kind, status_verdict};
use self::phrases::{
    allowance_text, credential_text, long_window_text, overload_text, quota_text, request_text,
    short_window_text, slow_down_text, throttle_text,
};
use super::body::ErrorFacts;
use super::dialect::Dialect;
use super::text::{Lower, contains_any, needle, needles};
use super::verdict::{Reason, Verdict};

/// Why a verdict was reached; becomes the [`Reason`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Why<'a> {
    /// A provider code decided: `<dialect>:<code>`.
    Code(&'a str),
    /// A provider's number, in a stream or a `200` (an in-band status,
    /// Baidu's `18`, MiniMax's `1008`): `<dialect>:<n>`.
    Number(u64),
    /// A Levee rule over the message or the wait: `<dialect>:<rule>`.
    Rule(&'static str),
    /// Only the status: `status:<n>`.
    Status(u16),
    /// A fixed reason (`stream:error`).
    Fixed(&'static str),
}

impl Why<'_> {
    /// The Levee rule, when one decided.
    fn rule(self) -> Option<&'static str> {
        match self {
            Why::Rule(rule) => Some(rule),
            _ => None,
        }
    }

    pub(crate) fn reason(self, dialect: Dialect) -> Reason {
        // `<dialect>:` in a string with room for the rest.
        let prefixed = |rest: &str| {
            let mut r = String::with_capacity(dialect.as_str().len() + 1 + rest.len());
            r.push_str(dialect.as_str());
            r.push(':');
            r
        };
        match self {
            Why::Code(code) => {
                let code = token(code);
                let mut r = prefixed(code);
                // One short token: anything outside `[A-Za-z0-9_.-]` becomes `_`.
                let plain = |c: u8| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-');
                if code.bytes().all(plain) {
                    r.push_str(code);
                } else {
                    r.extend(
                        code.bytes()
                            .map(|c| if plain(c) { char::from(c) } else { '_' }),
                    );
                }
                Reason::new_owned(r)
            }
            Why::Rule(rule) => {
                let mut r = prefixed(rule);
                r.push_str(rule);
                Reason::new_owned(r)
            }
            Why::Number(n) => Reason::new_owned(format!("{dialect}:{n}")),
            Why::Status(n) => Reason::new_owned(format!("status:{n}")),
            Why::Fixed(s) => Reason::new_static(s),
        }
    }
}

/// A provider code's stable part: the AWS name before `:` and after `#`,
/// at most 64 bytes (cut at a character boundary).
pub(crate) fn token(code: &str) -> &str {
    // Codes are short: a byte scan costs less than a string searcher.
    let b = code.as_bytes();
    let code = b
        .iter()
        .position(|&c| c == b':')
        .map_or(code, |i| &code[..i]);
    let code = code
        .as_bytes()
        .iter()
        .rposition(|&c| c == b'#')
        .map_or(code, |i| &code[i + 1..]);
    let mut end = code.len().min(64);
    while !code.is_char_boundary(end) {
        end -= 1;
    }
    &code[..end]
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

/// The first code, most specific first, that names a verdict.
fn first_known<'a>(facts: &ErrorFacts<'a>) -> Option<(Verdict, &'a str)> {
    facts.codes().find_map(|c| Some((code_kind(c)?, c)))
}

// === decisions ===

/// The verdict for a non-2xx response. `aws` is the `x-amzn-ErrorType`
/// header or the body's `__type`; `lower` the message in ASCII lowercase;
/// `wait` the hint already found.
///
/// The status decides last. Before it, in order: a cap named by code or in
/// words (the account's allowance ran out, whatever the status: a `401`
/// "Insufficient balance", a `403` "Key limit exceeded (monthly limit)"),
/// a rejected credential, then load shedding named by code or in words
/// (Groq's `498 capacity_exceeded`, a `429` "model is overloaded"): a
/// provider that sheds load is failing, never the request.
pub(crate) fn decide<'a>(
    status: u16,
    facts: &ErrorFacts<'a>,
    aws: Option<&'a str>,
    lower: &Lower,
    wait: Option<Duration>,
    quota_after: Duration,
) -> Decision<'a> {
    // A throttle, refined: one that will not lift soon is a quota.
    let refined = |d: Decision<'a>| refine_throttle(d, facts, lower, wait, quota_after);
    if let Some(name) = aws
        && let Some(v) = aws_exception(name, facts.original_status)
    {
        return refined(decision(v, Why::Code(name)));
    }
    let known = first_known(facts);
    if status >= 500 || status == 408 {
        // A provider asking its caller to slow down (OpenAI's `503 Slow
        // Down`, S3-style `SlowDown`) is throttling under a 5xx: the
        // account is healthy, its rate is the problem.
        if let Some(why) = slow_down(facts, lower) {
            return refined(decision(Verdict::Throttled, why));
        }
        // A reseller's rate limit under a plain `500` (`"code":
        // "rate_limit"`): resellers answer everything they do not map with
        // `500`, so the code names what happened. A `502`/`503`/`504` says
        // itself that the service failed.
        if status == 500
            && let Some((Verdict::Throttled, code)) = known
            && codes::names_rate_limit(code)
        {
            return refined(decision(Verdict::Throttled, Why::Code(code)));
        }
        // Otherwise the body names the reason of a 5xx but never turns it
        // into something else.
        return decision(
            Verdict::Availability,
            agreeing(known, facts, Verdict::Availability, status),
        );
    }
    if let Some((Verdict::Quota, code)) = known {
        // The period the message names beats the code: a cap's code on a
        // per-minute limit ("Your rate limit is 60 queries per minute" under
        // `credit_limit`) is a throttle.
        if per_minute(lower, wait, quota_after) {
            return refined(decision(Verdict::Throttled, Why::Code(code)));
        }
        return decision(Verdict::Quota, Why::Code(code));
    }
    let throttle = status == 429 || matches!(known, Some((Verdict::Throttled, _)));
    // A cap does not lift in seconds: a throttle the provider says will lift
    // within `quota_after` is not searched for one.
    let lifts_soon = throttle && wait.is_some_and(|w| w <= quota_after);
    if !lifts_soon && let Some(rule) = quota_text(lower) {
        return decision(Verdict::Quota, Why::Rule(rule));
    }
    // "Quota exceeded" is a per-minute limit under a 429 (Google says it
    // of those), but an exhausted allowance under any other status.
    // ("Quota exceeded … per minute" under a 400 or 403 is still a throttle.)
    if !throttle && let Some(rule) = allowance_text(lower) {
        if per_minute(lower, wait, quota_after) {
            return refined(decision(Verdict::Throttled, Why::Rule("per_minute")));
        }
        return decision(Verdict::Quota, Why::Rule(rule));
    }
    if let Some((Verdict::Credential, code)) = known {
        return decision(Verdict::Credential, Why::Code(code));
    }
    if !throttle && let Some(rule) = credential_text(lower) {
        return decision(Verdict::Credential, Why::Rule(rule));
    }
    // Load shedding in words, behind a code that says less (Mistral's 429
    // "Service tier capacity exceeded" typed `invalid_request_error`,
    // Google's `RESOURCE_EXHAUSTED` "No capacity available for model on the
    // server", which Google also says of quotas).
    if !matches!(known, Some((Verdict::Availability, _))) && overload_text(lower) {
        return decision(Verdict::Availability, Why::Rule("overloaded"));
    }
    // A 429 for a request bigger than the whole window: waiting cannot help
    // ("Request too large", or "Limit 7000, Used 0, Requested ~12903").
    if throttle && too_large(lower) {
        return decision(Verdict::Request, Why::Rule("request_too_large"));
    }
    // A moderation refusal says nothing about the key.
    if status == 403 && contains_any(lower, needles!["moderation", "flagged"]) {
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
    refined(d)
}

/// Whether a throttle's message says the request is larger than the
/// window's whole limit: "Request too large … must be reduced" (OpenAI), or
/// `Limit 7000, Used 0, Requested ~12903` (OpenAI's and Groq's rate-limit
/// messages), where the request alone asks for more than the limit. A
/// request that fits (`Limit 10000, Used 8554, Requested 3082`) is a
/// throttle; a zero limit is an account with no allowance for the model.
fn too_large(lower: &str) -> bool {
    // One search for "request" serves both forms; the first hit that is
    // one of them ends it (the rest of the message is not searched).
    let b = lower.as_bytes();
    let mut requested = None;
    let mut from = 0;
    while let Some(i) = needle!("request").find(&b[from..]) {
        let at = from + i;
        let rest = &b[at + "request".len()..];
        if rest.starts_with(b" too large") {
            return true;
        }
        if rest.starts_with(b"ed ") {
            requested = number_at(&b[at + "requested ".len()..]).map(|n| (at, n));
            break;
        }
        from = at + "request".len();
    }
    let Some((at, requested)) = requested else {
        return needle!("must be reduced").is_in(lower);
    };
    // The limit is named just before: "Limit 7000, Used 0, Requested ~12903".
    let mut start = at.saturating_sub(64);
    while !lower.is_char_boundary(start) {
        start += 1;
    }
    let before = &lower[start..at];
    let before = before.as_bytes();
    let limit = memchr::memrchr_iter(b'l', before)
        .find(|&i| before[i..].starts_with(b"limit "))
        .and_then(|i| number_at(&before[i + "limit ".len()..]));
    limit.is_some_and(|limit| limit > 0 && requested > limit)
}

/// The number at the front of `b` after spaces, `~` or `:` (`~12,903`
/// reads as 12903), if one is there.
fn number_at(b: &[u8]) -> Option<u64> {
    let start = b.iter().position(|c| !matches!(c, b' ' | b'~' | b':'))?;
    let mut n: Option<u64> = None;
    for &c in &b[start..] {
        match c {
            b'0'..=b'9' => {
                n = Some(
                    n.unwrap_or(0)
                        .saturating_mul(10)
                        .saturating_add(u64::from(c - b'0')),
                );
            }
            b',' => {}
            _ => break,
        }
    }
    n
}

/// Whether the message names a limit over a second or a minute (or on
/// concurrency) and no longer window, and no wait beyond `quota_after`.
fn per_minute(lower: &Lower, wait: Option<Duration>, quota_after: Duration) -> bool {
    wait.is_none_or(|w| w <= quota_after)
        && short_window_text(lower)
        && long_window_text(lower).is_none()
}

/// Why a response asks its caller to slow down, if it does: a code built
/// from `slow_down`, or the words.
fn slow_down<'a>(facts: &ErrorFacts<'a>, lower: &Lower) -> Option<Why<'a>> {
    if let Some(code) = facts.codes().find(|c| is_slow_down_code(c)) {
        return Some(Why::Code(code));
    }
    slow_down_text(lower).then_some(Why::Rule("slow_down"))
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
    lower: &Lower,
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
    if (long || wait.is_none())
        && let Some(rule) = long_window_text(lower)
    {
        return decision(Verdict::Quota, Why::Rule(rule));
    }
    if long {
        return decision(Verdict::Quota, Why::Rule("long_wait"));
    }
    d
}

/// The verdict of an error that names no status and no code Levee knows
/// (one inside a `200`: Baidu's `error_code`, MiniMax's `base_resp`): a
/// number its provider documents, else its words: load shedding, a cap, a
/// rate limit (a daily one is a cap), "quota exceeded", a rejected
/// credential, a request the provider refuses; otherwise the provider
/// failed mid-response.
fn decide_by_words<'a>(
    facts: &ErrorFacts<'a>,
    lower: &Lower,
    wait: Option<Duration>,
    quota_after: Duration,
) -> Decision<'a> {
    // The provider's code or number when it sent one, else Levee's rule.
    let named = |otherwise: Why<'a>| match (facts.codes().next(), facts.code_number) {
        (Some(code), _) => Why::Code(code),
        (None, Some(n)) => Why::Number(n),
        (None, None) => otherwise,
    };
    let why = |rule| named(Why::Rule(rule));
    if let Some(n) = facts.code_number
        && let Some(v) = numbered(facts.shape, n)
    {
        return refine_throttle(decision(v, Why::Number(n)), facts, lower, wait, quota_after);
    }
    if overload_text(lower) {
        return decision(Verdict::Availability, why("overloaded"));
    }
    if let Some(rule) = quota_text(lower) {
        return decision(Verdict::Quota, why(rule));
    }
    if throttle_text(lower) {
        let d = refine_throttle(
            decision(Verdict::Throttled, why("rate_limit")),
            facts,
            lower,
            wait,
            quota_after,
        );
        return decision(d.verdict, why(d.why.rule().unwrap_or("rate_limit")));
    }
    if let Some(rule) = allowance_text(lower) {
        return decision(Verdict::Quota, why(rule));
    }
    if let Some(rule) = credential_text(lower) {
        return decision(Verdict::Credential, why(rule));
    }
    if request_text(lower) {
        return decision(Verdict::Request, why("request"));
    }
    decision(Verdict::Availability, named(Why::Fixed("stream:error")))
}

/// The verdict for an error that arrived inside a 2xx stream: the rules of
/// [`decide`] under the status the error's code or number implies. With
/// neither, an error after a 200 is the provider failing mid-response
/// (availability) unless its message names a cap.
pub(crate) fn decide_in_band<'a>(
    facts: &ErrorFacts<'a>,
    aws: Option<&'a str>,
    lower: &Lower,
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
        (None, None, _) => return decide_by_words(facts, lower, wait, quota_after),
    };
    let mut d = decide(status, facts, aws, lower, wait, quota_after);
    if let Why::Status(n) = d.why {
        // No HTTP status is involved: name the provider's number, if it sent one.
        d.why = if facts.number == Some(n) {
            Why::Number(u64::from(n))
        } else {
            Why::Fixed("stream:error")
        };
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_too_large_is_named_in_words_or_by_its_numbers() {
        assert!(too_large("request too large for gpt-4o"));
        assert!(too_large("the input or output tokens must be reduced"));
        assert!(too_large("limit 7000, used 0, requested ~12,903"));
        assert!(!too_large("limit 10000, used 8554, requested 3082"));
        assert!(!too_large("limit 0, used 0, requested 12"));
        assert!(!too_large(
            "number of request tokens has exceeded your per-minute rate limit"
        ));
    }
}
