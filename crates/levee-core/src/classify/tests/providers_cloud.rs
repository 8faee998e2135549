//! Provider rules for Google, AWS, Mistral and Cohere, mostly on responses
//! that are not in the shared sample.

use super::{JSON, assert_is, classify, ms};
use crate::classify::Verdict;

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
