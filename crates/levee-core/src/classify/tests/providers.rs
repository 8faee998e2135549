//! Provider rules (statuses, OpenAI and compatibles, Azure, Anthropic),
//! mostly on responses that are not in the shared sample.

use std::time::Duration;

use super::{DATE, JSON, OPENAI_RPM, assert_is, classify, classify_with, ms};
use crate::classify::{Classification, Classify, ProviderClassifier, TransportFailure, Verdict};

// === success, transport, status fallbacks ===

#[test]
fn success_reads_nothing_not_even_a_garbage_body() {
    let c = classify(
        200,
        &[("retry-after", "5")],
        "{\"error\":{\"code\":\"insufficient_quota\"}}",
    );
    assert_eq!(c, Classification::success());
    assert_eq!(classify(304, &[], "").verdict, Verdict::Success);
}

#[test]
fn transport_failures_are_availability_with_a_transport_reason() {
    let c = ProviderClassifier::default().classify_transport(TransportFailure::Timeout);
    assert_is(&c, Verdict::Availability, None, "transport:timeout");
}

#[test]
fn bare_statuses_follow_the_seed_table() {
    for (status, verdict) in [
        (400, Verdict::Request),
        (401, Verdict::Credential),
        (402, Verdict::Quota),
        (403, Verdict::Credential),
        (404, Verdict::Request),
        (408, Verdict::Availability),
        (409, Verdict::Request),
        (413, Verdict::Request),
        (422, Verdict::Request),
        (429, Verdict::Throttled),
        (500, Verdict::Availability),
        (502, Verdict::Availability),
        (529, Verdict::Availability),
        (599, Verdict::Availability),
    ] {
        let c = classify(status, &[], "");
        assert_eq!(
            (c.verdict, c.reason.as_str()),
            (verdict, format!("status:{status}").as_str())
        );
    }
}

// === OpenAI and compatible ===

#[test]
fn openai_429_waits_for_the_exhausted_requests_window() {
    let h = [
        JSON,
        ("openai-organization", "org-x"),
        ("x-ratelimit-remaining-requests", "0"),
        ("x-ratelimit-reset-requests", "6m0s"),
        ("x-ratelimit-remaining-tokens", "29000"),
        ("x-ratelimit-reset-tokens", "20ms"),
    ];
    assert_is(
        &classify(429, &h, OPENAI_RPM),
        Verdict::Throttled,
        ms(360_000),
        "openai:rate_limit_exceeded",
    );
}

#[test]
fn openai_500_server_error_is_availability() {
    let body = r#"{"error":{"message":"The server had an error while processing your request.","type":"server_error","param":null,"code":null}}"#;
    assert_is(
        &classify(500, &[JSON], body),
        Verdict::Availability,
        None,
        "openai:server_error",
    );
}

#[test]
fn openai_401_without_a_code_is_credential_by_status() {
    let body = r#"{"error":{"message":"You didn't provide an API key.","type":"invalid_request_error","param":null,"code":null}}"#;
    assert_is(
        &classify(401, &[JSON], body),
        Verdict::Credential,
        None,
        "status:401",
    );
}

#[test]
fn openai_400_context_length_is_request() {
    let body = r#"{"error":{"message":"This model's maximum context length is 128000 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#;
    assert_is(
        &classify(400, &[JSON], body),
        Verdict::Request,
        None,
        "openai:context_length_exceeded",
    );
}

#[test]
fn deepseek_402_insufficient_balance_is_quota() {
    let body = r#"{"error":{"message":"Insufficient Balance","type":"unknown_error","param":null,"code":"invalid_request_error"}}"#;
    assert_is(
        &classify(402, &[JSON], body),
        Verdict::Quota,
        None,
        "openai:credits_exhausted",
    );
}

#[test]
fn together_style_402_with_a_billing_code_is_quota() {
    let body = r#"{"error":{"message":"Credit limit exceeded. Please add a payment method.","type":"invalid_request_error","code":"billing_limit_reached"}}"#;
    assert_is(
        &classify(402, &[JSON], body),
        Verdict::Quota,
        None,
        "openai:billing_limit_reached",
    );
}

#[test]
fn quota_text_behind_a_rate_limit_code_is_quota() {
    let body = r#"{"error":{"message":"You have hit your monthly spend limit for this key.","type":"requests","code":"rate_limit_exceeded"}}"#;
    assert_is(
        &classify(429, &[JSON], body),
        Verdict::Quota,
        None,
        "openai:spend_limit",
    );
}

#[test]
fn groq_429_prefers_retry_after_to_the_message() {
    let body = r#"{"error":{"message":"Rate limit reached for model llama-3.3-70b-versatile on tokens per minute (TPM). Please try again in 5.289s. Visit https://console.groq.com/docs/rate-limits","type":"tokens","code":"rate_limit_exceeded"}}"#;
    let c = classify(429, &[JSON, ("retry-after", "7")], body);
    assert_is(&c, Verdict::Throttled, ms(7000), "groq:rate_limit_exceeded");
}

#[test]
fn daily_limit_without_a_short_wait_is_quota_with_one_is_throttled() {
    let body = |tail: &str| {
        format!(
            r#"{{"error":{{"message":"Rate limit reached for model x on tokens per day (TPD): Limit 500000, Used 499000, Requested 2000.{tail}","type":"tokens","code":"rate_limit_exceeded"}}}}"#
        )
    };
    let short = classify(429, &[JSON], &body(" Please try again in 4m48s."));
    assert_is(
        &short,
        Verdict::Throttled,
        ms(288_000),
        "openai:rate_limit_exceeded",
    );
    let none = classify(429, &[JSON], &body(""));
    assert_is(&none, Verdict::Quota, None, "openai:per_day");
    let long = classify(429, &[JSON], &body(" Please try again in 2h13m."));
    assert_is(&long, Verdict::Quota, ms(7_980_000), "openai:per_day");
}

#[test]
fn openrouter_403_moderation_is_request_not_credential() {
    let body = r#"{"error":{"code":403,"message":"Input was flagged for moderation: violence","metadata":{"reasons":["violence"]}}}"#;
    assert_is(
        &classify(403, &[JSON], body),
        Verdict::Request,
        None,
        "openrouter:moderation",
    );
}

// === Azure ===

#[test]
fn azure_x_ms_retry_after_ms_is_read_exactly() {
    let body = r#"{"error":{"code":"429","message":"Rate limit is exceeded."}}"#;
    let c = classify(
        429,
        &[
            JSON,
            ("x-ms-retry-after-ms", "1500"),
            ("x-ms-region", "East US"),
        ],
        body,
    );
    assert_is(&c, Verdict::Throttled, ms(1500), "status:429");
}

#[test]
fn a_throttle_beyond_quota_after_is_quota_and_keeps_its_wait() {
    let c = classify(
        429,
        &[JSON, ("retry-after", "7200")],
        r#"{"error":{"code":"429","message":"Rate limit is exceeded."}}"#,
    );
    assert_is(&c, Verdict::Quota, ms(7_200_000), "azure:long_wait");
    let lenient = ProviderClassifier::builder()
        .quota_after(Duration::MAX)
        .build();
    let c = classify_with(&lenient, 429, &[JSON, ("retry-after", "7200")], b"");
    assert_is(&c, Verdict::Throttled, ms(7_200_000), "status:429");
}

#[test]
fn waits_are_capped_by_max_wait_and_rounded_up() {
    let capped = ProviderClassifier::builder()
        .max_wait(Duration::from_secs(10))
        .build();
    let c = classify_with(&capped, 503, &[("retry-after", "60")], b"");
    assert_eq!(c.wait, ms(10_000));
    assert_eq!(classify(503, &[("retry-after", "0.0001")], "").wait, ms(1));
    assert_eq!(
        classify(503, &[("retry-after", "99999999999999999")], "").wait,
        Some(ProviderClassifier::DEFAULT_MAX_WAIT)
    );
}

// === Anthropic ===

#[test]
fn anthropic_429_retry_after_beats_the_ratelimit_reset_headers() {
    let h = [
        JSON,
        DATE,
        ("retry-after", "12"),
        ("anthropic-ratelimit-tokens-remaining", "0"),
        ("anthropic-ratelimit-tokens-reset", "2026-08-23T12:00:30Z"),
    ];
    let body = r#"{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}"#;
    assert_is(
        &classify(429, &h, body),
        Verdict::Throttled,
        ms(12_000),
        "anthropic:rate_limit_error",
    );
    let without: Vec<_> = h
        .iter()
        .copied()
        .filter(|(k, _)| *k != "retry-after")
        .collect();
    assert_is(
        &classify(429, &without, body),
        Verdict::Throttled,
        ms(30_000),
        "anthropic:rate_limit_error",
    );
}

#[test]
fn anthropic_529_overloaded_is_availability_even_with_should_retry() {
    let body = r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
    let c = classify(529, &[JSON, ("x-should-retry", "true")], body);
    assert_is(
        &c,
        Verdict::Availability,
        None,
        "anthropic:overloaded_error",
    );
    assert_eq!(c.should_retry, Some(true));
}

#[test]
fn x_should_retry_false_changes_retryability_not_the_verdict() {
    let c = classify(429, &[("x-should-retry", "false")], "");
    assert_eq!(
        (c.verdict, c.should_retry),
        (Verdict::Throttled, Some(false))
    );
}

#[test]
fn anthropic_413_and_404_are_request() {
    let big = r#"{"type":"error","error":{"type":"request_too_large","message":"Request exceeds the maximum allowed number of bytes."}}"#;
    assert_is(
        &classify(413, &[JSON], big),
        Verdict::Request,
        None,
        "anthropic:request_too_large",
    );
    let missing =
        r#"{"type":"error","error":{"type":"not_found_error","message":"model: claude-9"}}"#;
    assert_is(
        &classify(404, &[JSON], missing),
        Verdict::Request,
        None,
        "anthropic:not_found_error",
    );
}

#[test]
fn anthropic_credit_balance_too_low_400_is_quota() {
    let body = r#"{"type":"error","error":{"type":"invalid_request_error","message":"Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits."}}"#;
    assert_is(
        &classify(400, &[JSON], body),
        Verdict::Quota,
        None,
        "anthropic:credits_exhausted",
    );
}

#[test]
fn a_throttle_that_lifts_soon_is_not_searched_for_a_cap() {
    let body = r#"{"error":{"message":"You have hit your monthly spend limit for this key.","type":"requests","code":"rate_limit_exceeded"}}"#;
    let c = classify(429, &[JSON, ("retry-after", "5")], body);
    assert_is(
        &c,
        Verdict::Throttled,
        ms(5000),
        "openai:rate_limit_exceeded",
    );
    // A cap named by a code still wins over any wait.
    let coded = r#"{"error":{"message":"x","code":"insufficient_quota"}}"#;
    assert_eq!(
        classify(429, &[JSON, ("retry-after", "5")], coded).verdict,
        Verdict::Quota
    );
}
