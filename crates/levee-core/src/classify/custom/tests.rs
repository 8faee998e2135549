use std::time::Duration;

use http::{HeaderMap, HeaderValue, StatusCode};

use super::*;
use crate::classify::{
    Classification, Classify, ProviderClassifier, ResponseView, StreamFormat, StreamScanner,
};

fn with(rules: impl IntoIterator<Item = Rule>) -> ProviderClassifier {
    ProviderClassifier::builder()
        .rules(Rules::new(rules).unwrap())
        .build()
}

fn classify(
    c: &ProviderClassifier,
    status: u16,
    headers: &HeaderMap,
    body: &str,
) -> Classification {
    c.classify_response(&ResponseView::new(
        StatusCode::from_u16(status).unwrap(),
        headers,
        body.as_bytes(),
    ))
}

fn rule(name: &str, verdict: Verdict) -> RuleBuilder {
    Rule::builder(name, verdict)
}

const UNKNOWN_503: &str = r#"{"error":{"message":"upstream says: account frozen, settle invoice","type":"server_error"}}"#;

#[test]
fn a_rule_turns_an_unknown_providers_answer_from_availability_into_quota() {
    let headers = HeaderMap::new();
    let plain = ProviderClassifier::default();
    assert_eq!(
        classify(&plain, 503, &headers, UNKNOWN_503).verdict,
        Verdict::Availability
    );

    let c = with([rule("acme-frozen", Verdict::Quota)
        .status(503)
        .phrase("settle invoice")
        .build()
        .unwrap()]);
    let got = classify(&c, 503, &headers, UNKNOWN_503);
    assert_eq!(got.verdict, Verdict::Quota);
    assert_eq!(got.reason.as_str(), "acme-frozen");
    assert_eq!(got.wait, None);
}

#[test]
fn an_answer_no_rule_matches_is_classified_as_without_rules() {
    let headers = HeaderMap::new();
    let c = with([rule("never", Verdict::Quota)
        .phrase("no such words")
        .build()
        .unwrap()]);
    let body = r#"{"error":{"code":"rate_limit_exceeded","message":"Please try again in 2s."}}"#;
    let plain = ProviderClassifier::default();
    assert_eq!(
        classify(&c, 429, &headers, body),
        classify(&plain, 429, &headers, body)
    );
}

#[test]
fn the_first_matching_rule_decides() {
    let headers = HeaderMap::new();
    let c = with([
        rule("first", Verdict::Credential)
            .status(403)
            .build()
            .unwrap(),
        rule("second", Verdict::Quota).status(403).build().unwrap(),
    ]);
    assert_eq!(classify(&c, 403, &headers, "").reason.as_str(), "first");
    assert_eq!(classify(&c, 401, &headers, "").verdict, Verdict::Credential);
    assert_eq!(
        classify(&c, 401, &headers, "").reason.as_str(),
        "status:401"
    );
}

#[test]
fn statuses_match_one_a_class_or_a_range() {
    let headers = HeaderMap::new();
    let c = with([
        rule("one", Verdict::Quota).status(418).build().unwrap(),
        rule("range", Verdict::Request)
            .statuses(520, 527)
            .build()
            .unwrap(),
    ]);
    assert_eq!(classify(&c, 418, &headers, "").reason.as_str(), "one");
    assert_eq!(classify(&c, 523, &headers, "").verdict, Verdict::Request);
    assert_eq!(
        classify(&c, 528, &headers, "").verdict,
        Verdict::Availability
    );
    for (text, want) in [
        ("4xx", (400, 499)),
        ("400-403", (400, 403)),
        (" 429 ", (429, 429)),
    ] {
        assert_eq!(Statuses::parse_one(text), Ok(want), "{text}");
    }
    for bad in ["4x", "99", "403-400", "abc", "1000", "4xxx"] {
        assert!(Statuses::parse_one(bad).is_err(), "{bad}");
    }
}

#[test]
fn codes_match_any_of_the_answers_codes_ignoring_case() {
    let headers = HeaderMap::new();
    let c = with([rule("credits", Verdict::Quota)
        .code("CREDITS_GONE")
        .code("1113")
        .build()
        .unwrap()]);
    let by_type = r#"{"error":{"message":"x","type":"credits_gone"}}"#;
    let by_number = r#"{"error":{"code":"1113","message":"余额不足或无可用资源包,请充值。"}}"#;
    let by_aws = r#"{"__type":"com.acme#Credits_Gone","message":"x"}"#;
    for body in [by_type, by_number, by_aws] {
        assert_eq!(
            classify(&c, 400, &headers, body).reason.as_str(),
            "credits",
            "{body}"
        );
    }
    let other = r#"{"error":{"message":"x","type":"widget_gone"}}"#;
    assert_eq!(classify(&c, 400, &headers, other).verdict, Verdict::Request);
}

#[test]
fn phrases_match_the_message_ignoring_case_in_any_script() {
    let headers = HeaderMap::new();
    let c = with([
        rule("ru", Verdict::Throttled)
            .phrase("Слишком много запросов")
            .build()
            .unwrap(),
        rule("de", Verdict::Quota)
            .phrase("guthaben aufgebraucht")
            .build()
            .unwrap(),
        rule("zh", Verdict::Quota)
            .phrase("余额不足")
            .build()
            .unwrap(),
    ]);
    let ru = r#"{"message":"СЛИШКОМ МНОГО ЗАПРОСОВ, попробуйте позже"}"#;
    let de = r#"{"error":{"message":"Ihr GUTHABEN AUFGEBRAUCHT"}}"#;
    let zh = r#"{"error":{"message":"\u4f59\u989d\u4e0d\u8db3"}}"#;
    assert_eq!(classify(&c, 500, &headers, ru).reason.as_str(), "ru");
    assert_eq!(classify(&c, 400, &headers, de).reason.as_str(), "de");
    assert_eq!(
        classify(&c, 400, &headers, zh).reason.as_str(),
        "zh",
        "escaped JSON is read decoded"
    );
    // A gateway's copy of the upstream error counts as the message.
    let upstream = r#"{"error":{"code":429,"message":"Provider returned error","metadata":{"raw":"余额不足"}}}"#;
    assert_eq!(classify(&c, 429, &headers, upstream).reason.as_str(), "zh");
}

#[test]
fn fields_match_presence_absence_values_and_phrases_at_json_pointers() {
    let headers = HeaderMap::new();
    let c = with([
        rule("balance", Verdict::Quota)
            .field_equals("/base_resp/status_code", ["1008", "2056"])
            .build()
            .unwrap(),
        rule("loading", Verdict::Throttled)
            .field_present("/estimated_time")
            .field_absent("/error/code")
            .build()
            .unwrap(),
        rule("kind", Verdict::Credential)
            .field_contains("/error/detail/kind", "token revoked")
            .build()
            .unwrap(),
    ]);
    let minimax = r#"{"base_resp":{"status_code":1008,"status_msg":"insufficient balance"}}"#;
    let as_text = r#"{"base_resp":{"status_code":"2056"}}"#;
    let loading = r#"{"error":"Model x is currently loading","estimated_time":20.5}"#;
    let revoked = r#"{"error":{"detail":{"kind":"Token REVOKED by admin"}}}"#;
    assert_eq!(
        classify(&c, 400, &headers, minimax).reason.as_str(),
        "balance"
    );
    assert_eq!(
        classify(&c, 400, &headers, as_text).reason.as_str(),
        "balance"
    );
    assert_eq!(
        classify(&c, 503, &headers, loading).reason.as_str(),
        "loading"
    );
    assert_eq!(classify(&c, 400, &headers, revoked).reason.as_str(), "kind");
    let coded = r#"{"error":{"code":"x"},"estimated_time":1}"#;
    assert_ne!(
        classify(&c, 503, &headers, coded).reason.as_str(),
        "loading"
    );
}

#[test]
fn headers_match_presence_equality_and_containment() {
    let mut headers = HeaderMap::new();
    headers.insert("x-acme-error", HeaderValue::from_static("Quota; monthly"));
    let c = with([
        rule("eq", Verdict::Quota)
            .header_equals("x-acme-error", "quota; MONTHLY")
            .status(400)
            .build()
            .unwrap(),
        rule("contains", Verdict::Throttled)
            .header_contains("x-acme-error", "quota")
            .build()
            .unwrap(),
        rule("present", Verdict::Credential)
            .header_present("x-acme-denied")
            .build()
            .unwrap(),
    ]);
    assert_eq!(classify(&c, 400, &headers, "").reason.as_str(), "eq");
    assert_eq!(classify(&c, 500, &headers, "").reason.as_str(), "contains");
    assert_eq!(
        classify(&c, 500, &HeaderMap::new(), "").verdict,
        Verdict::Availability
    );
}

#[test]
fn a_rule_reads_its_wait_from_a_field_or_fixes_it_else_keeps_the_hint() {
    let mut headers = HeaderMap::new();
    headers.insert("retry-after", HeaderValue::from_static("7"));
    let c = with([
        rule("loading", Verdict::Throttled)
            .field_present("/estimated_time")
            .wait_field("/estimated_time")
            .build()
            .unwrap(),
        rule("ms", Verdict::Throttled)
            .field_present("/retry_ms")
            .wait_field_millis("/retry_ms")
            .build()
            .unwrap(),
        rule("fixed", Verdict::Quota)
            .status(402)
            .wait(Duration::from_secs(3600))
            .build()
            .unwrap(),
        rule("hint", Verdict::Throttled)
            .status(503)
            .build()
            .unwrap(),
    ]);
    let loading = r#"{"error":"loading","estimated_time":20.5}"#;
    assert_eq!(
        classify(&c, 500, &headers, loading).wait,
        Some(Duration::from_millis(20_500))
    );
    let text = r#"{"error":"loading","estimated_time":"1m20s"}"#;
    assert_eq!(
        classify(&c, 500, &headers, text).wait,
        Some(Duration::from_secs(80))
    );
    let ms = r#"{"retry_ms":"1500.2"}"#;
    assert_eq!(
        classify(&c, 500, &headers, ms).wait,
        Some(Duration::from_millis(1501))
    );
    assert_eq!(
        classify(&c, 402, &headers, "").wait,
        Some(Duration::from_secs(3600))
    );
    assert_eq!(
        classify(&c, 503, &headers, "").wait,
        Some(Duration::from_secs(7))
    );
    // A field with no usable value keeps the hint.
    let zero = r#"{"error":"loading","estimated_time":0}"#;
    assert_eq!(
        classify(&c, 500, &headers, zero).wait,
        Some(Duration::from_secs(7))
    );
}

#[test]
fn a_rule_naming_a_success_status_reads_2xx_bodies_and_only_then() {
    let headers = HeaderMap::new();
    let plain = ProviderClassifier::default();
    let baidu = r#"{"error_code":18,"error_msg":"Open api qps request limit reached"}"#;
    let bare = r#"{"error":{"message":"x","code":"widget_gone"}}"#;
    // The default never asks for a 2xx body; handed one, it reads only the
    // envelopes of the providers known to answer 200 with an error.
    assert!(!plain.wants_body(StatusCode::OK, &headers));
    assert_eq!(
        classify(&plain, 200, &headers, baidu).verdict,
        Verdict::Throttled
    );
    assert_eq!(
        classify(&plain, 200, &headers, bare).verdict,
        Verdict::Success
    );

    let c = with([rule("qps", Verdict::Throttled)
        .status(200)
        .field_equals("/error_code", ["18"])
        .build()
        .unwrap()]);
    assert!(c.wants_body(StatusCode::OK, &headers));
    assert!(!c.wants_body(StatusCode::CREATED, &headers));
    assert!(matches!(
        c.classify_head(StatusCode::OK, &headers),
        crate::classify::HeadDecision::PeekBody
    ));
    assert_eq!(
        classify(&c, 200, &headers, baidu).verdict,
        Verdict::Throttled
    );
    let ok = r#"{"id":"as-1","result":"你好"}"#;
    assert_eq!(classify(&c, 200, &headers, ok).verdict, Verdict::Success);
    // Without a status, a rule never asks for a success body, and never
    // matches one that is a success.
    let c = with([rule("any", Verdict::Quota)
        .field_present("/result")
        .build()
        .unwrap()]);
    assert!(!c.wants_body(StatusCode::OK, &headers));
    assert_eq!(classify(&c, 200, &headers, ok).verdict, Verdict::Success);
}

#[test]
fn rules_decide_errors_inside_a_stream() {
    let c = with([rule("acme-busy", Verdict::Throttled)
        .code("engine_busy")
        .wait(Duration::from_secs(3))
        .build()
        .unwrap()]);
    let mut headers = HeaderMap::new();
    headers.insert(
        "content-type",
        HeaderValue::from_static("text/event-stream"),
    );
    let mut s = c.stream_scanner(StatusCode::OK, &headers).unwrap();
    s.feed(b"data: {\"error\":{\"code\":\"engine_busy\",\"message\":\"busy\"}}\n\n");
    let got = s.finish();
    assert_eq!(
        (got.verdict, got.reason.as_str()),
        (Verdict::Throttled, "acme-busy")
    );
    assert_eq!(got.wait, Some(Duration::from_secs(3)));
    // A stream scanner built alone knows no rules.
    let mut s = StreamScanner::new(StreamFormat::Sse);
    s.feed(b"data: {\"error\":{\"code\":\"engine_busy\",\"message\":\"busy\"}}\n\n");
    assert_ne!(s.finish().reason.as_str(), "acme-busy");
}

#[test]
fn a_rule_without_conditions_or_with_bad_values_is_refused_naming_the_field() {
    let err = |b: RuleBuilder| b.build().unwrap_err();
    let e = err(rule("x", Verdict::Quota));
    assert_eq!(e.field, "rule");
    assert!(e.message.contains("at least one condition"), "{e}");
    assert_eq!(
        err(rule("x", Verdict::Quota).statuses(500, 400)).field,
        "rule.status"
    );
    assert_eq!(
        err(rule("x", Verdict::Quota).status(42)).field,
        "rule.status"
    );
    assert_eq!(
        err(rule("x", Verdict::Quota).phrase("  ")).field,
        "rule.phrase"
    );
    assert_eq!(
        err(rule("x", Verdict::Quota).field_present("error")).field,
        "rule.field.pointer"
    );
    assert_eq!(
        err(rule("x", Verdict::Quota).header_present("bad name")).field,
        "rule.header"
    );
    assert_eq!(
        err(rule("bad name", Verdict::Quota).status(400)).field,
        "rule.name"
    );
    let long = "r".repeat(Rule::MAX_LABEL + 1);
    assert_eq!(
        err(rule("x", Verdict::Quota).status(400).reason(&long)).field,
        "rule.reason"
    );
    let e = err(rule("x", Verdict::Request)
        .status(400)
        .wait(Duration::from_secs(1)));
    assert_eq!(e.field, "rule.wait");
    assert!(e.message.contains("throttled or quota"), "{e}");
    assert_eq!(
        err(rule("x", Verdict::Quota).status(400).wait(Duration::ZERO)).field,
        "rule.wait"
    );
    let twice = Rules::new([
        rule("x", Verdict::Quota).status(400).build().unwrap(),
        rule("x", Verdict::Quota).status(401).build().unwrap(),
    ]);
    assert_eq!(twice.unwrap_err().field, "rule.name");
}

#[cfg(feature = "serde")]
mod file {
    use super::*;

    const FILE: &str = r#"
[[rule]]
name = "acme-balance"
status = [402, "403"]
phrase = ["余额不足", "insufficient balance"]
verdict = "quota"

[[rule]]
name = "acme-loading"
status = "5xx"
field = { pointer = "/estimated_time" }
verdict = "throttled"
wait = { pointer = "/estimated_time" }
reason = "acme:model_loading"

[[rule]]
name = "acme-minimax"
status = 200
field = [{ pointer = "/base_resp/status_code", equals = [1002, 1039] }, { pointer = "/base_resp/status_msg", contains = "limit" }]
header = { name = "content-type", contains = "json" }
code = "x"
verdict = "throttled"
wait = "2s"
"#;

    #[test]
    fn a_rules_file_reads_every_kind_of_condition_in_order() {
        let rules: Rules = toml::from_str(FILE).unwrap();
        let names: Vec<_> = rules.iter().map(Rule::name).collect();
        assert_eq!(names, ["acme-balance", "acme-loading", "acme-minimax"]);
        let c = ProviderClassifier::builder().rules(rules).build();
        let headers = HeaderMap::new();
        let got = classify(&c, 403, &headers, r#"{"message":"Insufficient Balance"}"#);
        assert_eq!(
            (got.verdict, got.reason.as_str()),
            (Verdict::Quota, "acme-balance")
        );
        let got = classify(&c, 503, &headers, r#"{"estimated_time":1.5}"#);
        assert_eq!(got.reason.as_str(), "acme:model_loading");
        assert_eq!(got.wait, Some(Duration::from_millis(1500)));
        assert!(c.wants_body(StatusCode::OK, &headers));
    }

    #[test]
    fn a_mistake_in_a_rules_file_names_what_is_wrong() {
        let cases = [
            (
                "[[rule]]\nname = \"x\"\nverdict = \"quota\"\nstatus = \"4x\"\n",
                "expected a status",
            ),
            (
                "[[rule]]\nname = \"x\"\nverdict = \"quota\"\nstatus = []\n",
                "empty list",
            ),
            (
                "[[rule]]\nname = \"x\"\nverdict = \"quota\"\nphrase = \"\"\n",
                "must not be empty",
            ),
            (
                "[[rule]]\nname = \"x\"\nverdict = \"quota\"\nfield = { pointer = \"a\" }\n",
                "starts with `/`",
            ),
            (
                "[[rule]]\nname = \"x\"\nverdict = \"quota\"\nfield = { pointer = \"/a\", equals = 1, contains = \"b\" }\n",
                "one of present, equals or contains",
            ),
            (
                "[[rule]]\nname = \"x\"\nverdict = \"qouta\"\nstatus = 400\n",
                "unknown variant",
            ),
            (
                "[[rule]]\nname = \"x\"\nverdict = \"quota\"\nstatus = 400\nwait = \"5 parsecs\"\n",
                "invalid duration",
            ),
            (
                "[[rule]]\nname = \"x\"\nverdict = \"quota\"\nstatsu = 400\n",
                "unknown field `statsu`",
            ),
            (
                "[[rule]]\nname = \"x\"\nverdict = \"quota\"\n",
                "at least one condition",
            ),
            ("[[rules]]\nname = \"x\"\n", "unknown field `rules`"),
        ];
        for (text, want) in cases {
            let err = toml::from_str::<Rules>(text).unwrap_err().to_string();
            assert!(err.contains(want), "{text:?}: {err}");
        }
    }
}

#[test]
fn a_success_body_whose_envelope_says_all_is_well_is_a_success() {
    let headers = HeaderMap::new();
    let c = ProviderClassifier::builder().peek_success(true).build();
    for body in [
        r#"{"base_resp":{"status_code":0,"status_msg":""},"choices":[{"message":{"content":"hi"}}]}"#,
        r#"{"header":{"code":0,"message":"Success","sid":"cht0"},"payload":{}}"#,
        r#"{"code":200,"msg":"ok","data":{"text":"hi"}}"#,
        r#"{"code":"success","data":{}}"#,
        r#"{"status":{"code":"20000","message":"OK"},"result":{"message":{"content":"hi"}}}"#,
        r#"{"Response":{"Choices":[{"Message":{"Content":"hi"}}],"RequestId":"r"}}"#,
        r#"{"id":"chatcmpl-1","choices":[{"message":{"content":"error: none"}}],"error":null}"#,
    ] {
        assert_eq!(
            classify(&c, 200, &headers, body),
            Classification::success(),
            "{body}"
        );
    }
    let minimax = r#"{"base_resp":{"status_code":1008,"status_msg":"insufficient balance"}}"#;
    let got = classify(&c, 200, &headers, minimax);
    assert_eq!(
        (got.verdict, got.reason.as_str()),
        (Verdict::Quota, "generic:1008")
    );
    let tencent = r#"{"Response":{"Error":{"Code":"AuthFailure.SecretIdNotFound","Message":"密钥不存在"},"RequestId":"r"}}"#;
    assert_eq!(
        classify(&c, 200, &headers, tencent).verdict,
        Verdict::Credential
    );
}

#[test]
fn a_rule_for_a_success_must_say_what_tells_the_error_apart() {
    let e = rule("all-ok", Verdict::Quota)
        .status(200)
        .build()
        .unwrap_err();
    assert_eq!(e.field, "rule");
    assert!(e.message.contains("success status"), "{e}");
    let e = rule("absent", Verdict::Quota)
        .statuses(200, 299)
        .field_absent("/choices")
        .build()
        .unwrap_err();
    assert!(e.message.contains("success status"), "{e}");
    assert!(
        rule("ok", Verdict::Quota)
            .status(200)
            .code("1008")
            .build()
            .is_ok()
    );
}

#[test]
fn a_rule_deciding_request_keeps_no_wait_and_reads_the_aws_header() {
    let mut headers = HeaderMap::new();
    headers.insert("retry-after", HeaderValue::from_static("7"));
    headers.insert(
        "x-amzn-errortype",
        HeaderValue::from_static("AcmeRefusal:http://internal"),
    );
    let c = with([rule("refusal", Verdict::Request)
        .code("AcmeRefusal")
        .build()
        .unwrap()]);
    let got = classify(&c, 400, &headers, r#"{"message":"no"}"#);
    assert_eq!(
        (got.verdict, got.wait, got.reason.as_str()),
        (Verdict::Request, None, "refusal")
    );
}

#[cfg(feature = "serde")]
#[test]
fn a_rules_file_takes_numeric_codes_and_names_a_mistake_inside_a_header_table() {
    let rules: Rules =
        toml::from_str("[[rule]]\nname = \"z\"\ncode = [1113, \"1302\"]\nverdict = \"quota\"\n")
            .unwrap();
    let c = ProviderClassifier::builder().rules(rules).build();
    let body = r#"{"error":{"code":"1113","message":"x"}}"#;
    assert_eq!(
        classify(&c, 429, &HeaderMap::new(), body).reason.as_str(),
        "z"
    );
    let err = toml::from_str::<Rules>(
        "[[rule]]\nname = \"h\"\nheader = { name = \"x-a\", equal = \"b\" }\nverdict = \"quota\"\n",
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("unknown field `equal`"), "{err}");
}
