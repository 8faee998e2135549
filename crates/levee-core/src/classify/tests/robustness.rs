//! Truncated and garbled bodies, dialect detection, the reason format.

use super::{JSON, OPENAI_RPM, assert_is, classify, classify_with, ms};
use crate::classify::{Classify, Dialect, ProviderClassifier, ResponseView, Verdict};
use http::{HeaderMap, StatusCode};

// === robustness and dialect ===

#[test]
fn a_truncated_body_still_classifies_from_its_readable_part() {
    let full = r#"{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}"#;
    let cut = &full[..full.find("\"param\"").unwrap() + 3];
    assert_is(
        &classify(429, &[JSON], cut),
        Verdict::Quota,
        None,
        "openai:insufficient_quota",
    );
    let throttle = r#"{"error":{"message":"Rate limit reached. Please try again in 1m26.4s. Visit https://platform.openai.com/acc"#;
    assert_is(
        &classify(429, &[JSON], throttle),
        Verdict::Throttled,
        ms(86_400),
        "status:429",
    );
}

#[test]
fn non_utf8_and_html_bodies_fall_back_to_the_status() {
    let c = classify_with(
        &ProviderClassifier::default(),
        429,
        &[],
        b"\xff\xfe{\"error\":\xc3",
    );
    assert_eq!(c.verdict, Verdict::Throttled);
    let html = "<html><body><h1>502 Bad Gateway</h1></body></html>";
    assert_is(
        &classify(502, &[("content-type", "text/html")], html),
        Verdict::Availability,
        None,
        "status:502",
    );
}

#[test]
fn the_dialect_hint_wins_over_detection() {
    let h = HeaderMap::new();
    let view = ResponseView::new(StatusCode::TOO_MANY_REQUESTS, &h, OPENAI_RPM.as_bytes())
        .with_dialect(Some(Dialect::Groq));
    let c = ProviderClassifier::default().classify_response(&view);
    assert_eq!(c.reason.as_str(), "groq:rate_limit_exceeded");
}

#[test]
fn headers_name_the_dialect() {
    let reason = |h: &[(&str, &str)]| classify(429, h, OPENAI_RPM).reason;
    assert_eq!(
        reason(&[("openai-processing-ms", "12")]).as_str(),
        "openai:rate_limit_exceeded"
    );
    assert_eq!(
        reason(&[("apim-request-id", "x"), ("openai-version", "1")]).as_str(),
        "azure:rate_limit_exceeded"
    );
    assert_eq!(
        reason(&[("x-groq-region", "us"), ("openai-version", "1")]).as_str(),
        "groq:rate_limit_exceeded"
    );
    assert_eq!(
        reason(&[("anthropic-ratelimit-requests-limit", "50")]).as_str(),
        "anthropic:rate_limit_exceeded"
    );
}

#[test]
fn reasons_are_one_short_token() {
    let body = r#"{"error":{"code":"weird code/with spaces and a very long tail that keeps going and going on","message":"x"}}"#;
    let c = classify(418, &[], body);
    assert_eq!(
        c.reason.as_str(),
        "openai:weird_code_with_spaces_and_a_very_long_tail_that_keeps_going_and"
    );
}

#[test]
fn dialect_names_round_trip_and_accept_aliases() {
    for d in Dialect::ALL {
        assert_eq!(Dialect::from_name(d.as_str()), Some(d));
    }
    assert_eq!(Dialect::from_name("Azure-OpenAI"), Some(Dialect::Azure));
    assert_eq!(Dialect::from_name("vertex-ai"), Some(Dialect::Vertex));
    assert_eq!(Dialect::from_name("nope"), None);
}
