//! Where a status-first rule goes wrong: load shedding under statuses that
//! do not say so, and allowances exhausted under 401/403/400. The rules
//! follow the providers' documentation: shedding load is throttling or
//! availability, never the request's fault, and a body that names an
//! exhausted allowance wins over the status.

use super::{JSON, assert_is, classify, ms};
use crate::classify::Verdict;

// === load shedding ===

#[test]
fn a_provider_specific_4xx_that_sheds_load_is_availability() {
    // Groq's 498: "flex tier capacity exceeded" (console.groq.com/docs/flex-processing).
    let body =
        r#"{"error":{"message":"`flex` tier capacity exceeded","code":"capacity_exceeded"}}"#;
    assert_is(
        &classify(498, &[JSON], body),
        Verdict::Availability,
        None,
        "openai:capacity_exceeded",
    );
}

#[test]
fn a_nonstandard_4xx_that_names_no_load_stays_the_requests_fault() {
    // Cohere's 498 is blocked content (docs.cohere.com/reference/errors).
    let body = r#"{"message":"blocked output: please adjust your prompt and try again"}"#;
    assert_eq!(classify(498, &[JSON], body).verdict, Verdict::Request);
}

#[test]
fn a_429_that_names_overload_is_availability_not_a_throttle() {
    let mistral = r#"{"object":"error","message":"Service tier capacity exceeded for this model.","type":"invalid_request_error","param":null,"code":null}"#;
    assert_is(
        &classify(429, &[JSON], mistral),
        Verdict::Availability,
        None,
        "mistral:overloaded",
    );
    // Google says RESOURCE_EXHAUSTED of quotas and of capacity: the reason decides.
    let google = r#"{"error":{"code":429,"message":"No capacity available for model on the server","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"MODEL_CAPACITY_EXHAUSTED"}]}}"#;
    assert_eq!(
        classify(429, &[JSON], google).verdict,
        Verdict::Availability
    );
}

#[test]
fn the_callers_own_exhausted_capacity_is_an_allowance_not_overload() {
    let body = |wait: &str| {
        format!(
            r#"[{{"error":{{"code":429,"message":"You have exhausted your capacity on this model. Your quota will reset after {wait}.","status":"RESOURCE_EXHAUSTED"}}}}]"#
        )
    };
    let short = classify(429, &[JSON], &body("5s"));
    assert_eq!((short.verdict, short.wait), (Verdict::Throttled, ms(5000)));
    let long = classify(429, &[JSON], &body("8h44m7s"));
    assert_eq!((long.verdict, long.wait), (Verdict::Quota, ms(31_447_000)));
}

#[test]
fn a_503_asking_the_caller_to_slow_down_is_throttled() {
    // OpenAI's "503 - Slow Down" (developers.openai.com/api/docs/guides/error-codes).
    let body = r#"{"error":{"message":"Slow Down: a sudden increase in your request rate is impacting service reliability. Please reduce your request rate to its original level.","type":"server_error","param":null,"code":"slow_down"}}"#;
    assert_is(
        &classify(503, &[JSON], body),
        Verdict::Throttled,
        None,
        "openai:slow_down",
    );
    let words = "Please reduce your request rate.";
    assert_eq!(classify(503, &[], words).verdict, Verdict::Throttled);
    // Any other 503 stays availability whatever its body calls it.
    let overloaded = r#"{"error":{"type":"service_unavailable_error","code":"rate_limit_exceeded","message":"busy"}}"#;
    assert_eq!(
        classify(503, &[JSON], overloaded).verdict,
        Verdict::Availability
    );
}

#[test]
fn cloudflare_pages_in_front_of_a_provider_are_availability_or_its_rate_limit() {
    let html = "<!DOCTYPE html><html><head><title>api.openai.com | 520: Web server is returning an unknown error</title></head></html>";
    for status in [520, 521, 522, 523, 524, 525, 526, 527, 530] {
        let c = classify(status, &[("content-type", "text/html")], html);
        assert_eq!(c.verdict, Verdict::Availability, "{status}");
    }
    let c = classify(
        429,
        &[("content-type", "text/plain"), ("retry-after", "30")],
        "error code: 1015",
    );
    assert_eq!((c.verdict, c.wait), (Verdict::Throttled, ms(30_000)));
}

// === allowances under other statuses ===

#[test]
fn an_exhausted_balance_under_a_401_is_quota_not_a_bad_key() {
    let body = r#"{"type":"CreditsError","message":"Insufficient balance"}"#;
    assert_eq!(classify(401, &[JSON], body).verdict, Verdict::Quota);
    // A 401 with no such words stays a credential failure.
    let key = r#"{"error":{"message":"Incorrect API key provided: sk-...","type":"invalid_request_error","code":"invalid_api_key"}}"#;
    assert_eq!(classify(401, &[JSON], key).verdict, Verdict::Credential);
}

#[test]
fn money_words_win_over_a_permission_code_under_a_403() {
    // xAI: the gRPC permission text as its code, credits in the error.
    let body = r#"{"code":"The caller does not have permission to execute the specified operation","error":"Your newly created team doesn't have any credits yet. You can purchase credits on https://console.x.ai."}"#;
    assert_eq!(classify(403, &[JSON], body).verdict, Verdict::Quota);
}

#[test]
fn a_quota_or_monthly_limit_named_under_a_403_is_quota_with_its_reset() {
    let apim = r#"{"statusCode":403,"message":"Out of call volume quota. Quota will be replenished in 5.03:23:11."}"#;
    assert_is(
        &classify(403, &[JSON], apim),
        Verdict::Quota,
        ms(444_191_000),
        "generic:quota_exceeded",
    );
    let key_limit = r#"{"error":{"message":"Key limit exceeded (monthly limit). Manage it using https://openrouter.ai/settings/keys","code":403}}"#;
    assert_is(
        &classify(403, &[JSON], key_limit),
        Verdict::Quota,
        None,
        "openrouter:per_month",
    );
    let moonshot = r#"{"error":{"message":"Your account is not active, organization exceeded current quota, please check your plan and billing details","type":"exceeded_current_quota_error"}}"#;
    assert_eq!(classify(403, &[JSON], moonshot).verdict, Verdict::Quota);
}

#[test]
fn quota_exceeded_under_a_429_with_a_short_wait_stays_a_throttle() {
    // Google says "Quota exceeded" of per-minute limits.
    let body = r#"{"error":{"code":429,"message":"Quota exceeded for aiplatform.googleapis.com/online_prediction_requests_per_base_model.","status":"RESOURCE_EXHAUSTED"}}"#;
    let c = classify(429, &[JSON, ("retry-after", "20")], body);
    assert_eq!((c.verdict, c.wait), (Verdict::Throttled, ms(20_000)));
}

#[test]
fn billing_disabled_is_quota_and_a_disabled_organization_a_credential() {
    let billing = r#"{"error":{"code":403,"message":"This API method requires billing to be enabled. Please enable billing on project #1 by visiting the console.","status":"PERMISSION_DENIED"}}"#;
    assert_eq!(classify(403, &[JSON], billing).verdict, Verdict::Quota);
    // Anthropic answers both under a 400 invalid_request_error: the words decide.
    let disabled = r#"{"type":"error","error":{"type":"invalid_request_error","message":"This organization has been disabled."}}"#;
    assert_is(
        &classify(400, &[JSON], disabled),
        Verdict::Credential,
        None,
        "anthropic:account_disabled",
    );
    let credit = r#"{"type":"error","error":{"type":"invalid_request_error","message":"Your credit balance is too low to access the Anthropic API."}}"#;
    assert_eq!(classify(400, &[JSON], credit).verdict, Verdict::Quota);
}

#[test]
fn a_gateways_upstream_error_text_counts_like_its_message() {
    let inner = r#"{\"error\":{\"message\":\"Your account is suspended due to insufficient balance, please recharge\",\"type\":\"exceeded_current_quota_error\"}}"#;
    let body = format!(
        r#"{{"error":{{"message":"Provider returned error","code":429,"metadata":{{"raw":"{inner}","provider_name":"Moonshot AI"}}}}}}"#
    );
    assert_eq!(classify(429, &[JSON], &body).verdict, Verdict::Quota);
    // The same cut short (no longer JSON) is read by the text scan.
    let cut = &body[..body.len() - 40];
    assert_eq!(classify(429, &[JSON], cut).verdict, Verdict::Quota);
}
