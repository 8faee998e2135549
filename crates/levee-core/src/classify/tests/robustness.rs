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

#[test]
fn every_header_marker_names_its_dialect_over_a_generic_body() {
    // A body without an envelope names no provider: only the header does.
    let body = r#"{"message":"busy","code":"rate_limit_exceeded"}"#;
    let cases = [
        ("x-amzn-requestid", "bedrock"),
        ("x-ms-region", "azure"),
        ("azureml-model-deployment", "azure"),
        ("apim-request-id", "azure"),
        ("x-groq-region", "groq"),
        ("anthropic-version", "anthropic"),
        ("mistral-correlation-id", "mistral"),
        ("openai-version", "openai"),
        // Near misses name nothing.
        ("x-amz-date", "generic"),
        ("x-msedge-ref", "generic"),
        ("openaiversion", "generic"),
        ("mistralai", "generic"),
        ("azure-region", "generic"),
    ];
    for (header, dialect) in cases {
        assert_eq!(
            classify(429, &[(header, "x")], body).reason.as_str(),
            format!("{dialect}:rate_limit_exceeded"),
            "{header}"
        );
    }
}

#[test]
fn a_truncated_body_yields_its_code_even_with_spaces_around_the_colon() {
    for body in [
        r#"{"error":{"message":"no","type":"x","code":"insufficient_quota","par"#,
        r#"{"error":{"message" : "no", "code" :  "insufficient_quota" , "par"#,
        r#"{"error": {"message":"no","code":"insufficient_quota"#,
    ] {
        assert_is(
            &classify(429, &[JSON], body),
            Verdict::Quota,
            None,
            "openai:insufficient_quota",
        );
    }
}

#[test]
fn an_escaped_key_inside_a_string_is_not_read_as_a_key() {
    let body = r#"{"error":{"message":"upstream said {\"code\": \"weird\"}","code":"rate_limit_exceeded","param":"#;
    let c = classify(429, &[JSON], body);
    assert_eq!(c.verdict, Verdict::Throttled);
    assert_eq!(c.reason.as_str(), "openai:rate_limit_exceeded");
}

#[test]
fn a_truncated_body_reads_the_error_type_not_the_envelope_type() {
    // Anthropic's envelope is `"type":"error"`; the error's own type says
    // what happened. A 429 that sheds load is not a throttle.
    let body = r#"{"type":"error","error":{"type":"overloaded_error","message":"try later"#;
    let c = classify(429, &[JSON], body);
    assert_eq!(c.verdict, Verdict::Availability, "{c:?}");
}

#[test]
fn a_truncated_body_tells_mistral_google_and_openai_shapes_apart() {
    let mistral =
        r#"{"object":"error","message":"slow","type":"rate_limited","param":null,"code":"1300"#;
    assert!(
        classify(429, &[JSON], mistral)
            .reason
            .as_str()
            .starts_with("mistral:"),
        "{:?}",
        classify(429, &[JSON], mistral)
    );
    // A numeric code alone is a gateway's, not Google's (which pairs it
    // with an upper-case status).
    let numeric = r#"{"error":{"message":"Provider returned error","code":402,"metadata":{"#;
    let google = r#"{"error":{"code":429,"message":"slow","status":"RESOURCE_EXHAUSTED","det"#;
    let n = classify(402, &[JSON], numeric);
    let g = classify(429, &[JSON], google);
    assert!(!n.reason.as_str().starts_with("gemini:"), "{n:?}");
    assert!(g.reason.as_str().starts_with("gemini:"), "{g:?}");
}

#[test]
fn a_signed_number_is_not_a_status() {
    // `"+400"` parses as 400 in Rust, but a status is digits only: Bedrock's
    // model error with an unreadable original status is the model failing.
    let h = [("x-amzn-errortype", "ModelErrorException:http://internal")];
    let as_digits = r#"{"message":"x","originalStatusCode":"400"}"#;
    let signed = r#"{"message":"x","originalStatusCode":"+400"}"#;
    assert_eq!(classify(424, &h, as_digits).verdict, Verdict::Request);
    assert_eq!(classify(424, &h, signed).verdict, Verdict::Availability);
}

#[test]
fn the_classifier_reports_its_limits() {
    let c = ProviderClassifier::builder()
        .max_wait(std::time::Duration::from_secs(7))
        .quota_after(std::time::Duration::from_secs(90))
        .build();
    assert_eq!(c.max_wait(), std::time::Duration::from_secs(7));
    assert_eq!(c.quota_after(), std::time::Duration::from_secs(90));
}

// === what mutation testing found unguarded ===

#[test]
fn a_long_provider_code_is_cut_to_64_bytes_at_a_character_boundary() {
    // 63 ASCII bytes, then a two-byte character across the 64th.
    let code = format!("{}é{}", "x".repeat(63), "y".repeat(10));
    let body = format!(r#"{{"error":{{"code":"{code}","message":"boom"}}}}"#);
    let c = classify(503, &[JSON], &body);
    let (_, reason) = c.reason.as_str().split_once(':').unwrap();
    assert_eq!(reason, "x".repeat(63), "{c:?}");
}

#[test]
fn a_429_that_lifts_within_the_quota_bound_is_throttled_whatever_its_text() {
    let body = r#"{"error":{"message":"Insufficient credits"}}"#;
    let soon = classify(429, &[JSON, ("retry-after", "2")], body);
    assert_eq!((soon.verdict, soon.wait), (Verdict::Throttled, ms(2_000)));
    // Without a wait, the text names a cap.
    assert_eq!(classify(429, &[JSON], body).verdict, Verdict::Quota);
}

#[test]
fn a_wait_of_exactly_the_quota_bound_is_still_a_throttle() {
    let bound = ProviderClassifier::DEFAULT_QUOTA_AFTER
        .as_secs()
        .to_string();
    let past = (ProviderClassifier::DEFAULT_QUOTA_AFTER.as_secs() + 1).to_string();
    let at = classify(429, &[JSON, ("retry-after", &bound)], OPENAI_RPM);
    assert_eq!(at.verdict, Verdict::Throttled, "{at:?}");
    let beyond = classify(429, &[JSON, ("retry-after", &past)], OPENAI_RPM);
    assert_eq!(beyond.verdict, Verdict::Quota, "{beyond:?}");
}

#[test]
fn a_verdict_displays_and_parses_back_as_its_stable_name() {
    for v in Verdict::ALL {
        assert_eq!(v.to_string(), v.as_str());
        assert_eq!(Verdict::from_name(&v.to_string()), Some(v));
    }
    assert_eq!(Verdict::Throttled.to_string(), "throttled");
}

#[test]
fn googles_typed_details_decide_when_the_message_says_nothing() {
    let info = r#"{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID","domain":"googleapis.com"}"#;
    let google = |details: &str| {
        classify(
            400,
            &[JSON],
            &format!(
                r#"{{"error":{{"code":400,"message":"Request failed.","status":"INVALID_ARGUMENT","details":[{details}]}}}}"#
            ),
        )
    };
    let typed = google(info);
    assert_eq!(typed.verdict, Verdict::Credential, "{typed:?}");
    assert!(
        typed.reason.as_str().ends_with("API_KEY_INVALID"),
        "{typed:?}"
    );
    // A trimmed copy without `@type` is read as the ErrorInfo it is.
    let trimmed = google(r#"{"reason":"API_KEY_INVALID"}"#);
    assert_eq!(trimmed.verdict, Verdict::Credential, "{trimmed:?}");
    // Another typed detail's reason is not the ErrorInfo's.
    let other = r#"{"@type":"type.googleapis.com/google.rpc.BadRequest","reason":"FIELD_INVALID"}"#;
    let both = google(&format!("{other},{info}"));
    assert_eq!(both.verdict, Verdict::Credential, "{both:?}");
    assert_eq!(google(other).verdict, Verdict::Request);
}

#[test]
fn a_per_day_quota_violation_is_a_cap_and_a_per_minute_one_a_throttle() {
    let google = |quota_id: &str| {
        classify(
            429,
            &[JSON],
            &format!(
                r#"{{"error":{{"code":429,"message":"Resource has been exhausted.","status":"RESOURCE_EXHAUSTED","details":[{{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{{"quotaMetric":"m","quotaId":"{quota_id}"}}]}}]}}}}"#
            ),
        )
    };
    let day = google("GenerateRequestsPerDayPerProjectPerModel-FreeTier");
    assert_eq!(day.verdict, Verdict::Quota, "{day:?}");
    let minute = google("GenerateRequestsPerMinutePerProjectPerModel");
    assert_eq!(minute.verdict, Verdict::Throttled, "{minute:?}");
}

#[test]
fn anthropics_detail_error_code_names_the_cap() {
    let body = r#"{"type":"error","error":{"type":"invalid_request_error","message":"Request rejected.","details":{"error_code":"insufficient_balance"}}}"#;
    let c = classify(400, &[JSON], body);
    assert_eq!(c.verdict, Verdict::Quota, "{c:?}");
}

#[test]
fn azures_inner_error_code_is_read() {
    let body = r#"{"error":{"code":"400","message":"Request rejected.","innererror":{"code":"insufficient_quota"}}}"#;
    let c = classify(400, &[JSON], body);
    assert_eq!(c.verdict, Verdict::Quota, "{c:?}");
}

#[test]
fn a_reason_debugs_as_its_quoted_text() {
    let c = classify(429, &[JSON], OPENAI_RPM);
    assert_eq!(
        format!("{:?}", c.reason),
        format!("{:?}", c.reason.as_str())
    );
}

#[test]
fn the_status_alone_decides_a_body_that_says_nothing() {
    let status = |s: u16| classify(s, &[JSON], r#"{"error":{"message":"Try later."}}"#).verdict;
    assert_eq!(status(408), Verdict::Availability, "a request timeout");
    assert_eq!(status(302), Verdict::Success, "not an error status");
    assert_eq!(status(418), Verdict::Request);
}

#[test]
fn a_slow_down_code_is_a_throttle_whatever_its_message() {
    let c = classify(
        503,
        &[JSON],
        r#"{"error":{"code":"SlowDown","message":"Try later."}}"#,
    );
    assert_eq!(c.verdict, Verdict::Throttled, "{c:?}");
    assert!(c.reason.as_str().ends_with("SlowDown"), "{c:?}");
}

#[test]
fn a_bedrock_model_error_takes_the_verdict_of_its_original_status() {
    let model_error = |original: u16| {
        classify(
            424,
            &[JSON, ("x-amzn-errortype", "ModelErrorException")],
            &format!(r#"{{"message":"Model failed.","originalStatusCode":{original}}}"#),
        )
        .verdict
    };
    assert_eq!(
        model_error(408),
        Verdict::Availability,
        "a timeout upstream"
    );
    assert_eq!(model_error(400), Verdict::Request);
    assert_eq!(
        model_error(200),
        Verdict::Availability,
        "no error status: the model failed"
    );
}

#[test]
fn a_truncated_body_is_geminis_only_with_both_a_status_name_and_a_number() {
    let google = r#"{"error":{"code":429,"message":"Resource has been exhausted (e.g. check quota).","status":"RESOURCE_EXHAUSTED","details":[{"#;
    let numbered =
        r#"{"error":{"code":503,"message":"The upstream provider is unavailable, try ag"#;
    let named = r#"{"error":{"status":"UNAVAILABLE","message":"The service is currently unavai"#;
    let dialect = |status: u16, body: &str| {
        let c = classify(status, &[JSON], body);
        c.reason.as_str().split(':').next().unwrap().to_owned()
    };
    assert_eq!(dialect(429, google), "gemini");
    assert_ne!(dialect(503, numbered), "gemini");
    assert_ne!(dialect(503, named), "gemini");
}
