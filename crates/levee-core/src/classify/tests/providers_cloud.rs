//! Provider rules for Google, AWS, Mistral and Cohere, mostly on responses
//! that are not in the shared sample.

use std::time::Duration;

use super::{JSON, assert_is, classify, ms};
use crate::classify::{StatedLimit, Verdict};

// === Google ===

#[test]
fn gemini_per_day_violation_is_quota_even_with_a_retry_delay() {
    let body = r#"{"error":{"code":429,"message":"Quota exceeded.","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaId":"GenerateRequestsPerDayPerProjectPerModel-FreeTier"}]},{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"30s"}]}}"#;
    assert_is(
        &classify(429, &[JSON], body),
        Verdict::Quota,
        ms(30_000),
        "gemini:per_day",
    );
}

/// A Gemini 429 over a per-minute request quota, naming it with `value`.
fn gemini_per_minute(quota_id: &str, metric: &str, value: &str) -> String {
    format!(
        r#"{{"error":{{"code":429,"message":"You exceeded your current quota.","status":"RESOURCE_EXHAUSTED","details":[{{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{{"quotaMetric":"{metric}","quotaId":"{quota_id}","quotaDimensions":{{"location":"global","model":"gemini-2.5-pro"}}{value}}}]}},{{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"56s"}}]}}}}"#
    )
}

#[test]
fn a_gemini_429_states_its_per_minute_request_quota() {
    let requests = "generativelanguage.googleapis.com/generate_content_free_tier_requests";
    let c = classify(
        429,
        &[JSON],
        &gemini_per_minute(
            "GenerateRequestsPerMinutePerProjectPerModel-FreeTier",
            requests,
            r#","quotaValue":"2""#,
        ),
    );
    assert_eq!(c.verdict, Verdict::Throttled);
    assert_eq!(c.stated_limit, StatedLimit::new(2, Duration::from_secs(60)));
    // A number as well as a string; a metric of requests names the kind.
    let c = classify(
        429,
        &[JSON],
        &gemini_per_minute("PerMinutePerProject", requests, r#","quotaValue":600"#),
    );
    assert_eq!(
        c.stated_limit,
        StatedLimit::new(600, Duration::from_secs(60))
    );
}

#[test]
fn a_gemini_429_states_no_limit_for_tokens_a_day_or_no_value() {
    let tokens = "generativelanguage.googleapis.com/generate_content_free_tier_input_token_count";
    let requests = "generativelanguage.googleapis.com/generate_content_free_tier_requests";
    for (id, metric, value) in [
        (
            "GenerateContentInputTokensPerModelPerMinute-FreeTier",
            tokens,
            r#","quotaValue":"250000""#,
        ),
        (
            "GenerateRequestsPerMinutePerProjectPerModel-FreeTier",
            requests,
            "",
        ),
        (
            "GenerateRequestsPerMinutePerProjectPerModel-FreeTier",
            requests,
            r#","quotaValue":"0""#,
        ),
        (
            "GenerateRequestsPerMinutePerProjectPerModel-FreeTier",
            requests,
            r#","quotaValue":"many""#,
        ),
    ] {
        let c = classify(429, &[JSON], &gemini_per_minute(id, metric, value));
        assert_eq!(c.verdict, Verdict::Throttled, "{id} {value}");
        assert_eq!(c.stated_limit, None, "{id} {value}");
    }
    // Over a daily quota the account is out until tomorrow: parked, no rate.
    let c = classify(
        429,
        &[JSON],
        &gemini_per_minute(
            "GenerateRequestsPerDayPerProjectPerModel-FreeTier",
            requests,
            r#","quotaValue":"50""#,
        ),
    );
    assert_eq!((c.verdict, c.stated_limit), (Verdict::Quota, None));
}

#[test]
fn gemini_unsupported_location_is_credential() {
    let body = r#"{"error":{"code":400,"message":"User location is not supported for the API use.","status":"FAILED_PRECONDITION"}}"#;
    assert_is(
        &classify(400, &[JSON], body),
        Verdict::Credential,
        None,
        "gemini:location_unsupported",
    );
}

#[test]
fn gemini_permission_denied_is_credential() {
    let body = r#"{"error":{"code":403,"message":"Permission denied on resource project x.","status":"PERMISSION_DENIED"}}"#;
    assert_is(
        &classify(403, &[JSON], body),
        Verdict::Credential,
        None,
        "gemini:PERMISSION_DENIED",
    );
}

// === Bedrock and other AWS JSON ===

#[test]
fn bedrock_model_error_takes_the_model_status() {
    let h = [
        JSON,
        (
            "x-amzn-errortype",
            "ModelErrorException:http://internal.amazon.com/coral/com.amazon.bedrock/",
        ),
    ];
    let c = classify(
        424,
        &h,
        r#"{"message":"bad input","originalStatusCode":400}"#,
    );
    assert_is(&c, Verdict::Request, None, "bedrock:ModelErrorException");
    let c = classify(424, &h, r#"{"message":"The request failed."}"#);
    assert_eq!(c.verdict, Verdict::Availability);
}

#[test]
fn aws_type_in_the_body_dispatches_without_the_header() {
    let body =
        r#"{"__type":"com.amazon.coral.service#ThrottlingException","message":"Rate exceeded"}"#;
    assert_is(
        &classify(400, &[JSON], body),
        Verdict::Throttled,
        None,
        "generic:ThrottlingException",
    );
}

// === Mistral, Cohere ===

#[test]
fn mistral_503_is_availability() {
    let body = r#"{"object":"error","message":"Service unavailable.","type":"service_unavailable","param":null,"code":"1000"}"#;
    assert_is(
        &classify(503, &[JSON], body),
        Verdict::Availability,
        None,
        "mistral:service_unavailable",
    );
}

#[test]
fn cohere_500_is_availability() {
    let c = classify(
        500,
        &[JSON],
        r#"{"id":"f1c2","message":"internal server error, this has been reported to our developers"}"#,
    );
    assert_is(&c, Verdict::Availability, None, "status:500");
}
