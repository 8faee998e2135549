//! Caps, entitlements and windows named in words.
//!
//! Each rule looks for an anchor word and reads only its neighbourhood (see
//! `text`), so a 16 KiB message costs a handful of SIMD scans.

use super::super::text::{contains_any, near, needle, needles, preceded_by};

/// A cap named in words, behind a generic code (Anthropic's 400
/// `invalid_request_error` "You have reached your specified API usage
/// limits", OpenRouter's "Insufficient credits", Gemini's 402 "prepayment
/// credits are depleted", DeepSeek's "Insufficient Balance"). "Quota
/// exceeded" alone is not one: Google says it of per-minute limits.
pub(super) fn quota_text(lower: &str) -> Option<&'static str> {
    let b = lower.as_bytes();
    // "spend limit", "spending limit", "spend cap", "spending cap".
    let spend_cap = needle!("spend").find_all(lower).any(|at| {
        let rest = &b[at + "spend".len()..];
        let rest = rest.strip_prefix(b"ing").unwrap_or(rest);
        let rest = rest.strip_prefix(b" ").unwrap_or(rest);
        rest.starts_with(b"limit") || rest.starts_with(b"cap")
    });
    if spend_cap || near(lower, needle!("budget"), &["exceeded"], 24) {
        Some("spend_limit")
    } else if contains_any(lower, needles!["usage limit", "hard limit"]) {
        Some("usage_limit")
    } else if contains_any(lower, needles!["billing to be enabled", "enable billing"]) {
        Some("billing_disabled")
    } else if near(lower, needle!("limit"), &["exceeded", "reached"], 16)
        && let Some(window) = long_window_text(lower)
    {
        // "Key limit exceeded (monthly limit)": a limit over a day or a month.
        Some(window)
    } else if near(
        lower,
        needle!("credit"),
        &[
            "insufficient",
            "depleted",
            "exhausted",
            "too low",
            "out of",
            "ran out",
            "run out",
            "any credits",
            "purchase",
        ],
        24,
    ) || near(lower, needle!("balance"), &["insufficient", "too low"], 16)
        || needle!("insufficient fund").is_in(lower)
    {
        Some("credits_exhausted")
    } else {
        None
    }
}

/// An allowance exhausted in words ("Out of call volume quota", "exceeded
/// current quota"). Read only under a status that is not a throttle:
/// Google says "Quota exceeded" of its per-minute limits under a `429`.
pub(super) fn allowance_text(lower: &str) -> Option<&'static str> {
    near(
        lower,
        needle!("quota"),
        &[
            "exceeded",
            "exhausted",
            "out of",
            "insufficient",
            "reached",
            "used up",
        ],
        24,
    )
    .then_some("quota_exceeded")
}

/// Load shedding in words: the provider (or the model's pool) has no room,
/// whoever asks. "Exhausted your capacity" is the caller's allowance and
/// does not match.
pub(super) fn overload_text(lower: &str) -> bool {
    contains_any(
        lower,
        needles![
            "overloaded",
            "no capacity",
            "capacity exceeded",
            "over capacity",
            "at capacity",
            "out of capacity",
            "high demand",
        ],
    )
}

/// A provider asking its caller to lower its request rate (OpenAI's `503
/// Slow Down`: "a sudden increase in your request rate").
pub(super) fn slow_down_text(lower: &str) -> bool {
    near(lower, needle!("slow down"), &["rate"], 96)
        || needle!("reduce your request rate").is_in(lower)
}

/// An account that may not use this endpoint or model from here.
pub(super) fn credential_text(lower: &str) -> Option<&'static str> {
    if near(
        lower,
        needle!("has been"),
        &[
            "disabled",
            "deactivated",
            "suspended",
            "revoked",
            "terminated",
        ],
        16,
    ) && contains_any(lower, needles!["organization", "account", "key", "project"])
    {
        // "This organization has been disabled." (Anthropic, under a 400).
        Some("account_disabled")
    } else if near(
        lower,
        needle!("not supported"),
        &["location", "territory", "country"],
        24,
    ) {
        Some("location_unsupported")
    } else if near(
        lower,
        needle!("api key"),
        &["not valid", "invalid", "incorrect", "expired"],
        12,
    ) {
        Some("invalid_api_key")
    } else {
        None
    }
}

/// A limit counted over a day or a month: no short wait will lift it.
pub(super) fn long_window_text(lower: &str) -> Option<&'static str> {
    if contains_any(
        lower,
        needles!["per day", "per-day", "daily", "(rpd)", "(tpd)"],
    ) {
        Some("per_day")
    } else if preceded_by(lower, needle!("month"), &["per ", "/ ", "/"])
        || needle!("monthly").is_in(lower)
    {
        Some("per_month")
    } else {
        None
    }
}
