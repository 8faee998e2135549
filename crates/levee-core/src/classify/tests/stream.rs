//! The stream scanner: terminal events, in-band errors, cuts, framing.

use http::StatusCode;

use super::{headers, ms};
use crate::classify::{
    Classification, Classify, ProviderClassifier, StreamFormat, StreamScanner, Verdict,
};

fn scan(format: StreamFormat, body: &str) -> Classification {
    let mut s = StreamScanner::new(format);
    s.feed(body.as_bytes());
    s.finish()
}

fn sse(body: &str) -> Classification {
    scan(StreamFormat::Sse, body)
}

fn assert_is(c: &Classification, verdict: Verdict, reason: &str) {
    assert_eq!((c.verdict, c.reason.as_str()), (verdict, reason), "{c:?}");
}

const CHUNK: &str = "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"},\"finish_reason\":null}]}\n\n";

#[test]
fn openai_done_ends_the_stream_successfully_on_the_chunk_that_carries_it() {
    let mut s = StreamScanner::new(StreamFormat::Sse);
    assert_eq!(s.feed(CHUNK.as_bytes()), None);
    assert_eq!(s.feed(b"data: [DONE]\n\n"), Some(Classification::success()));
    assert_eq!(
        s.feed(b"data: {\"error\":{\"type\":\"server_error\"}}\n\n"),
        None,
        "decided"
    );
    assert_eq!(s.finish(), Classification::success());
    assert_eq!(
        s.finish(),
        Classification::success(),
        "finish is idempotent"
    );
}

#[test]
fn a_stream_cut_before_its_terminal_event_is_availability() {
    assert_is(&sse(CHUNK), Verdict::Availability, "stream:eof_before_done");
    assert_is(&sse(""), Verdict::Availability, "stream:eof_before_done");
}

#[test]
fn a_finish_reason_without_done_still_ends_well() {
    let last = CHUNK.replace("\"finish_reason\":null", "\"finish_reason\":\"stop\"");
    assert_eq!(sse(&format!("{CHUNK}{last}")).verdict, Verdict::Success);
}

#[test]
fn openai_in_band_error_chunk_is_availability() {
    let body = format!(
        "{CHUNK}data: {{\"error\": {{\"message\": \"The server had an error\", \"type\": \"server_error\"}}}}\n\n"
    );
    assert_is(&sse(&body), Verdict::Availability, "openai:server_error");
}

#[test]
fn model_output_that_mentions_error_is_not_an_error() {
    let body = "data: {\"choices\":[{\"delta\":{\"content\":\"the \\\"error\\\": field\"},\"finish_reason\":null}]}\n\ndata: [DONE]\n\n";
    assert_eq!(sse(body).verdict, Verdict::Success);
}

#[test]
fn responses_api_completed_failed_and_error_events() {
    let ok = "event: response.created\ndata: {\"type\":\"response.created\"}\n\nevent: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"status\":\"completed\"}}\n\n";
    assert_eq!(sse(ok).verdict, Verdict::Success);
    let failed = "event: response.failed\ndata: {\"type\":\"response.failed\",\"response\":{\"status\":\"failed\",\"error\":{\"code\":\"server_error\",\"message\":\"x\"}}}\n\n";
    assert_is(&sse(failed), Verdict::Availability, "openai:server_error");
    let limited = "event: error\ndata: {\"type\":\"error\",\"code\":\"rate_limit_exceeded\",\"message\":\"Please try again in 2s.\"}\n\n";
    let c = sse(limited);
    assert_eq!((c.verdict, c.wait), (Verdict::Throttled, ms(2000)));
}

#[test]
fn anthropic_message_stop_and_error_events() {
    let ok = "event: message_start\ndata: {\"type\":\"message_start\"}\n\nevent: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
    assert_eq!(sse(ok).verdict, Verdict::Success);
    let err = "event: error\ndata: {\"type\": \"error\", \"error\": {\"type\": \"overloaded_error\", \"message\": \"Overloaded\"}}\n\n";
    assert_is(
        &sse(err),
        Verdict::Availability,
        "anthropic:overloaded_error",
    );
    let bare = "event: error\ndata: not json\n\n";
    assert_is(&sse(bare), Verdict::Availability, "stream:error");
}

#[test]
fn openrouter_keepalives_are_ignored_and_finish_reason_error_fails() {
    let body = ": OPENROUTER PROCESSING\n\n: OPENROUTER PROCESSING\n\ndata: {\"choices\":[{\"delta\":{\"content\":\"\"},\"finish_reason\":\"error\"}]}\n\n";
    assert_is(
        &sse(body),
        Verdict::Availability,
        "openrouter:finish_reason_error",
    );
    let with_error = ": OPENROUTER PROCESSING\n\ndata: {\"error\":{\"code\":502,\"message\":\"Provider returned error\"},\"choices\":[]}\n\n";
    assert_is(&sse(with_error), Verdict::Availability, "openrouter:502");
    let quota = "data: {\"error\":{\"message\":\"Insufficient credits\"}}\n\n";
    assert_is(&sse(quota), Verdict::Quota, "openai:credits_exhausted");
}

#[test]
fn gemini_finish_reason_is_terminal_and_a_bare_json_error_fails() {
    let ok = "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"Hi\"}]},\"finishReason\":\"STOP\"}]}\n\n";
    let mut s = StreamScanner::new(StreamFormat::Sse);
    assert_eq!(s.feed(ok.as_bytes()), Some(Classification::success()));
    let err = "data: {\"candidates\":[]}\n\n{\n  \"error\": {\n    \"code\": 429,\n    \"message\": \"Resource exhausted. Please retry in 3s.\",\n    \"status\": \"RESOURCE_EXHAUSTED\"\n  }\n}\n";
    let c = sse(err);
    assert_eq!(
        (c.verdict, c.wait, c.reason.as_str()),
        (Verdict::Throttled, ms(3000), "gemini:RESOURCE_EXHAUSTED")
    );
    let unterminated = "{\"error\": {\"code\": 503, \"status\": \"UNAVAILABLE\"";
    assert_is(
        &sse(unterminated),
        Verdict::Availability,
        "gemini:UNAVAILABLE",
    );
}

#[test]
fn crlf_and_cr_line_endings_are_sse_line_endings() {
    assert_eq!(sse("data: [DONE]\r\n\r\n").verdict, Verdict::Success);
    assert_eq!(sse("data: [DONE]\r\r").verdict, Verdict::Success);
    let split = [
        "data: {\"error\":{\"type\":\"server_error\"}}\r",
        "\n\r",
        "\n",
    ];
    let mut s = StreamScanner::new(StreamFormat::Sse);
    let got: Vec<_> = split
        .iter()
        .map(|c| s.feed(c.as_bytes()).map(|c| c.verdict))
        .collect();
    assert_eq!(got, [None, Some(Verdict::Availability), None]);
}

#[test]
fn a_line_longer_than_the_cap_is_judged_by_its_first_64_kib() {
    let long = "x".repeat(3 * StreamScanner::MAX_PIECE);
    let body = format!(
        "data: {{\"choices\":[{{\"delta\":{{\"content\":\"{long}\"}}}}]}}\n\ndata: [DONE]\n\n"
    );
    let mut s = StreamScanner::new(StreamFormat::Sse);
    for chunk in body.as_bytes().chunks(1000) {
        s.feed(chunk);
    }
    assert_eq!(s.finish().verdict, Verdict::Success);
    let error_first =
        format!("data: {{\"error\":{{\"type\":\"server_error\",\"message\":\"{long}\"}}}}\n\n");
    assert_is(
        &sse(&error_first),
        Verdict::Availability,
        "openai:server_error",
    );
}

#[test]
fn bedrock_textual_exception_frames() {
    let frame = |ty: &str, extra: &str| {
        format!(
            "{{\"eventstream_frame\":{{\"headers\":{{\":message-type\":\"exception\",\":exception-type\":\"{ty}\"}},\"payload\":{{\"message\":\"x\"{extra}}}}}}}"
        )
    };
    let throttled = scan(
        StreamFormat::AwsEventStream,
        &frame("throttlingException", ""),
    );
    assert_is(
        &throttled,
        Verdict::Throttled,
        "bedrock:throttlingException",
    );
    let invalid = scan(
        StreamFormat::AwsEventStream,
        &frame("validationException", ""),
    );
    assert_eq!(invalid.verdict, Verdict::Request);
    let model = scan(
        StreamFormat::AwsEventStream,
        &frame("modelStreamErrorException", ",\"originalStatusCode\":500"),
    );
    assert_is(
        &model,
        Verdict::Availability,
        "bedrock:modelStreamErrorException",
    );
}

#[test]
fn aws_streams_end_well_unless_a_frame_is_cut() {
    let event = "{\"eventstream_frame\":{\"headers\":{\":message-type\":\"event\",\":event-type\":\"chunk\"},\"payload\":{\"bytes\":\"e30=\"}}}";
    assert_eq!(
        scan(StreamFormat::AwsEventStream, event).verdict,
        Verdict::Success
    );
    assert_is(
        &scan(StreamFormat::AwsEventStream, &event[..40]),
        Verdict::Availability,
        "stream:eof_before_done",
    );
    // Binary frames are decoded (see `stream_aws`): a prelude whose CRC
    // does not match is a corrupt stream.
    let binary = "\u{0}\u{0}\u{0}\u{7f}\u{0}\u{0}\u{0}\u{1f}binary";
    assert_is(
        &scan(StreamFormat::AwsEventStream, binary),
        Verdict::Availability,
        "stream:frame_crc",
    );
}

#[test]
fn ndjson_and_json_array_streams() {
    let ollama = "{\"message\":{\"content\":\"Hi\"},\"done\":false}\n{\"message\":{\"content\":\"\"},\"done\":true}\n";
    assert_eq!(scan(StreamFormat::NdJson, ollama).verdict, Verdict::Success);
    assert_is(
        &scan(StreamFormat::NdJson, "{\"done\":false}\n"),
        Verdict::Availability,
        "stream:eof_before_done",
    );
    let gemini = "[{\"candidates\":[{\"content\":{}}]}\n,\r\n{\"candidates\":[{\"finishReason\": \"STOP\"}]}\n]";
    assert_eq!(scan(StreamFormat::NdJson, gemini).verdict, Verdict::Success);
    let err = "{\"error\":\"model 'x' not found\"}\n";
    assert_is(
        &scan(StreamFormat::NdJson, err),
        Verdict::Availability,
        "stream:error",
    );
}

#[test]
fn scanners_are_offered_for_2xx_streams_only() {
    let c = ProviderClassifier::default();
    let sse = headers(&[
        ("content-type", "text/event-stream; charset=utf-8"),
        ("anthropic-organization-id", "o"),
    ]);
    let s = c
        .stream_scanner(StatusCode::OK, &sse)
        .expect("an SSE scanner");
    assert_eq!(s.format(), StreamFormat::Sse);
    assert!(
        c.stream_scanner(StatusCode::TOO_MANY_REQUESTS, &sse)
            .is_none()
    );
    let json = headers(&[("content-type", "application/json")]);
    assert!(c.stream_scanner(StatusCode::OK, &json).is_none());
    let aws = headers(&[("content-type", "application/vnd.amazon.eventstream")]);
    assert_eq!(
        c.stream_scanner(StatusCode::OK, &aws).map(|s| s.format()),
        Some(StreamFormat::AwsEventStream)
    );
    let nd = headers(&[("content-type", "application/x-ndjson")]);
    assert_eq!(
        c.stream_scanner(StatusCode::OK, &nd).map(|s| s.format()),
        Some(StreamFormat::NdJson)
    );
}

#[test]
fn the_dialect_of_the_response_headers_names_in_band_errors() {
    let h = headers(&[
        ("content-type", "text/event-stream"),
        ("x-ms-region", "eastus"),
    ]);
    let mut s = ProviderClassifier::default()
        .stream_scanner(StatusCode::OK, &h)
        .unwrap();
    s.feed(b"data: {\"error\":{\"code\":\"server_error\",\"message\":\"x\"}}\n\n");
    assert_eq!(s.finish().reason.as_str(), "azure:server_error");
}

/// The provider classifier's own head decision agrees with the default one
/// (peek a non-2xx, watch a stream, classify the rest) for every status and
/// the content types that matter.
#[test]
fn the_provider_classifiers_head_decision_is_the_defaults() {
    use crate::classify::{Classify, HeadDecision, ResponseView};

    /// The provider classifier without its own `classify_head`.
    struct ByDefault(ProviderClassifier);
    impl Classify for ByDefault {
        fn classify_response(
            &self,
            response: &ResponseView<'_>,
        ) -> crate::classify::Classification {
            self.0.classify_response(response)
        }
        fn stream_scanner(
            &self,
            status: StatusCode,
            headers: &http::HeaderMap,
        ) -> Option<crate::classify::StreamScanner> {
            self.0.stream_scanner(status, headers)
        }
    }
    let shape = |d: HeadDecision| match d {
        HeadDecision::Ready(c) => format!("ready {c:?}"),
        HeadDecision::PeekBody => "peek".to_owned(),
        HeadDecision::WatchStream(s) => format!("watch {:?}", s.format()),
    };
    let provider = ProviderClassifier::default();
    let by_default = ByDefault(provider.clone());
    for content_type in [
        "application/json",
        "text/event-stream",
        "application/x-ndjson",
        "application/vnd.amazon.eventstream",
        "",
    ] {
        let h = headers(&[("content-type", content_type)]);
        for status in 100..600 {
            let status = StatusCode::from_u16(status).unwrap();
            assert_eq!(
                shape(provider.classify_head(status, &h)),
                shape(by_default.classify_head(status, &h)),
                "{status} {content_type}"
            );
        }
    }
}

// === first content ===

/// Whether output came after each event of `events`, fed one at a time.
fn content_after_each(format: StreamFormat, events: &[&str]) -> Vec<bool> {
    let mut s = StreamScanner::new(format);
    events
        .iter()
        .map(|e| {
            s.feed(e.as_bytes());
            s.has_content()
        })
        .collect()
}

#[test]
fn openai_content_starts_at_the_first_non_empty_delta_not_the_role_chunk() {
    let role = "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\",\"refusal\":null},\"finish_reason\":null}]}\n\n";
    let azure_filter = "data: {\"choices\":[],\"created\":0,\"id\":\"\",\"model\":\"\",\"object\":\"\",\"prompt_filter_results\":[{\"prompt_index\":0,\"content_filter_results\":{\"hate\":{\"filtered\":false,\"severity\":\"safe\"}}}]}\n\n";
    let keepalive = ": OPENROUTER PROCESSING\n\n";
    assert_eq!(
        content_after_each(StreamFormat::Sse, &[keepalive, azure_filter, role, CHUNK]),
        [false, false, false, true]
    );
    let tool = "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"arguments\":\"\"}}]},\"finish_reason\":null}]}\n\n";
    assert_eq!(
        content_after_each(StreamFormat::Sse, &[role, tool]),
        [false, true]
    );
}

#[test]
fn anthropic_content_starts_at_the_first_content_block_delta() {
    let events = [
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"claude-sonnet-4-5\"}}\n\n",
        "event: ping\ndata: {\"type\": \"ping\"}\n\n",
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"Let me\"}}\n\n",
    ];
    assert_eq!(
        content_after_each(StreamFormat::Sse, &events),
        [false, false, false, true]
    );
}

#[test]
fn responses_api_content_starts_at_the_first_output_delta() {
    let events = [
        "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"resp_1\",\"status\":\"in_progress\",\"instructions\":\"Be brief\",\"output\":[],\"text\":{\"format\":{\"type\":\"text\"}}}}\n\n",
        "event: response.in_progress\ndata: {\"type\":\"response.in_progress\",\"response\":{\"id\":\"resp_1\",\"output\":[]}}\n\n",
        "event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"output_index\":0,\"item\":{\"type\":\"message\",\"content\":[]}}\n\n",
        "event: response.content_part.added\ndata: {\"type\":\"response.content_part.added\",\"part\":{\"type\":\"output_text\",\"text\":\"\"}}\n\n",
        "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"Hi\"}\n\n",
    ];
    assert_eq!(
        content_after_each(StreamFormat::Sse, &events),
        [false, false, false, false, true]
    );
}

#[test]
fn gemini_cohere_and_ollama_content_is_read_from_their_chunks() {
    let gemini = "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"Okay\"}],\"role\": \"model\"}}],\"modelVersion\": \"gemini-2.5-pro\"}\n\n";
    assert_eq!(content_after_each(StreamFormat::Sse, &[gemini]), [true]);
    // Gemini's streamGenerateContent without `alt=sse`: a JSON array.
    let array = [
        "[{\"candidates\": [{\"content\": {\"role\": \"model\"}}]}\n",
        ",{\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"Hi\"}]}}]}",
    ];
    assert_eq!(
        content_after_each(StreamFormat::NdJson, &array),
        [false, true]
    );
    let cohere = [
        "event: message-start\ndata: {\"type\":\"message-start\",\"id\":\"x\",\"delta\":{\"message\":{\"role\":\"assistant\",\"content\":[]}}}\n\n",
        "event: content-start\ndata: {\"type\":\"content-start\",\"index\":0,\"delta\":{\"message\":{\"content\":{\"type\":\"text\",\"text\":\"\"}}}}\n\n",
        "event: content-delta\ndata: {\"type\":\"content-delta\",\"index\":0,\"delta\":{\"message\":{\"content\":{\"text\":\"Hi\"}}}}\n\n",
    ];
    assert_eq!(
        content_after_each(StreamFormat::Sse, &cohere),
        [false, false, true]
    );
    let ollama = [
        "{\"model\":\"llama3\",\"created_at\":\"2026-01-01T00:00:00Z\",\"message\":{\"role\":\"assistant\",\"content\":\"\"},\"done\":false}\n",
        "{\"model\":\"llama3\",\"created_at\":\"2026-01-01T00:00:00Z\",\"message\":{\"role\":\"assistant\",\"content\":\"The\"},\"done\":false}\n",
    ];
    assert_eq!(
        content_after_each(StreamFormat::NdJson, &ollama),
        [false, true]
    );
}

#[test]
fn an_error_before_any_content_is_told_apart_from_one_after() {
    let role = "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n";
    let error = "data: {\"error\": {\"message\": \"The server had an error\", \"type\": \"server_error\"}}\n\n";
    let mut before = StreamScanner::new(StreamFormat::Sse);
    before.feed(role.as_bytes());
    assert!(before.feed(error.as_bytes()).is_some());
    assert!(!before.has_content());
    assert_eq!(before.events(), 2);
    let mut after = StreamScanner::new(StreamFormat::Sse);
    after.feed(format!("{role}{CHUNK}{error}").as_bytes());
    assert!(after.has_content());
    assert_eq!(after.finish().verdict, Verdict::Availability);
}

// === what mutation testing found unguarded ===

#[test]
fn an_in_band_error_code_decides_as_its_status_would() {
    let event = |code: &str, message: &str| {
        sse(&format!(
            "{CHUNK}data: {{\"error\":{{\"code\":\"{code}\",\"message\":\"{message}\"}}}}\n\n"
        ))
    };
    assert_eq!(
        event("insufficient_quota", "You exceeded your current quota").verdict,
        Verdict::Quota
    );
    assert_eq!(
        event("invalid_api_key", "Incorrect API key provided").verdict,
        Verdict::Credential
    );
    assert_eq!(
        event(
            "context_length_exceeded",
            "This model's maximum context length is 128000 tokens"
        )
        .verdict,
        Verdict::Request
    );
}

#[test]
fn an_in_band_error_number_below_400_is_no_status() {
    // An error object inside a 200 stream, numbered like a success or a
    // redirect: still the provider failing mid-response.
    for code in ["7", "200", "302"] {
        let c = sse(&format!(
            "{CHUNK}data: {{\"error\":{{\"code\":{code},\"message\":\"something broke\"}}}}\n\n"
        ));
        assert_eq!(c.verdict, Verdict::Availability, "{code}: {c:?}");
    }
}

#[test]
fn a_classifier_of_its_own_watches_streams_by_default_and_arc_forwards_it_all() {
    struct Mine;
    impl Classify for Mine {
        fn classify_response(&self, _: &crate::classify::ResponseView<'_>) -> Classification {
            Classification::success()
        }
    }
    let sse_head = headers(&[("content-type", "text/event-stream")]);
    let json_head = headers(&[("content-type", "application/json")]);
    assert!(Mine.stream_scanner(StatusCode::OK, &sse_head).is_some());
    assert!(Mine.stream_scanner(StatusCode::OK, &json_head).is_none());

    let shared = std::sync::Arc::new(ProviderClassifier::default());
    assert!(shared.stream_scanner(StatusCode::OK, &sse_head).is_some());
    assert!(shared.wants_body(StatusCode::TOO_MANY_REQUESTS, &json_head));
    assert!(!shared.wants_body(StatusCode::OK, &json_head));
}

#[test]
fn the_verdict_is_known_once_decided_and_not_before() {
    let mut s = StreamScanner::new(StreamFormat::Sse);
    s.feed(CHUNK.as_bytes());
    assert_eq!(s.verdict(), None);
    s.feed(b"data: [DONE]\n\n");
    assert_eq!(s.verdict(), Some(&Classification::success()));
}

#[test]
fn an_ndjson_stream_cut_inside_an_error_document_is_that_error() {
    let cut = "{\"done\":false}\n{\"error\": {\"code\": 503, \"status\": \"UNAVAILABLE\"";
    assert_is(
        &scan(StreamFormat::NdJson, cut),
        Verdict::Availability,
        "gemini:UNAVAILABLE",
    );
}

/// SSE framing that resumes after an unfinished bare JSON document: the
/// document is judged as it stands, then the line is read as SSE.
#[test]
fn sse_framing_resumes_after_an_unfinished_bare_json_document() {
    let error = "{\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}";
    for resume in [
        format!("data: {error}\n\n"),
        format!("event: error\ndata: {error}\n\n"),
        format!(": keep-alive\ndata: {error}\n\n"),
    ] {
        let body = format!("{{\"partial\": 1\n{resume}");
        assert_eq!(sse(&body).verdict, Verdict::Availability, "{body:?}");
        assert_eq!(sse(&body).reason.as_str(), "openai:overloaded_error");
    }
    // What resumes is read as SSE, not swallowed into the document: a
    // `[DONE]` ends the stream well, an `error` event names it.
    assert_eq!(
        sse("{\"partial\": 1\ndata: [DONE]\n\n").verdict,
        Verdict::Success
    );
    let named = sse("{\"partial\": 1\nevent: error\ndata: {\"message\":\"boom\"}\n\n");
    assert_eq!(named.verdict, Verdict::Availability);
    assert_ne!(named.reason.as_str(), "stream:eof_before_done");
    // An unfinished error document ended by a blank line is that error.
    let body = "{\"error\": {\"code\": 503, \"status\": \"UNAVAILABLE\"\n\ndata: [DONE]\n\n";
    assert_is(&sse(body), Verdict::Availability, "gemini:UNAVAILABLE");
}

#[test]
fn the_line_that_closes_a_bare_json_document_is_not_read_again_on_its_own() {
    // The second line closes the outer document; on its own it would be an
    // error object.
    let body = "{\"wrapper\":\n{\"error\":{\"type\":\"overloaded_error\"}}}\ndata: [DONE]\n\n";
    assert_eq!(sse(body).verdict, Verdict::Success);
}

#[test]
fn an_event_name_is_read_without_its_leading_space() {
    // The name alone says output came: an empty `data` carries none.
    let mut s = StreamScanner::new(StreamFormat::Sse);
    s.feed(b"event: content_block_delta\ndata: {}\n\n");
    assert!(s.has_content());
    // Also line by line, split inside the event, and with no space at all.
    for name in [
        &b"event: content_block_delta\n"[..],
        b"event:content_block_delta\n",
    ] {
        let mut s = StreamScanner::new(StreamFormat::Sse);
        s.feed(name);
        s.feed(b"da");
        s.feed(b"ta: {}\n\n");
        assert!(s.has_content());
    }
}

#[test]
fn only_a_comment_that_names_openrouter_marks_the_stream_as_openrouters() {
    let fail =
        "data: {\"choices\":[{\"delta\":{\"content\":\"\"},\"finish_reason\":\"error\"}]}\n\n";
    let plain = format!(": keep-alive\n\n{fail}");
    assert_ne!(
        sse(&plain).reason.as_str(),
        "openrouter:finish_reason_error"
    );
    let named = format!(": OPENROUTER PROCESSING\n\n{fail}");
    assert_eq!(
        sse(&named).reason.as_str(),
        "openrouter:finish_reason_error"
    );
}

#[test]
fn a_stop_reason_in_either_spelling_ends_a_stream_well() {
    // No terminal event: the stop reason said the output was complete.
    for reason in [
        "\"stop_reason\":\"end_turn\"",
        "\"stopReason\":\"end_turn\"",
    ] {
        let body = format!("data: {{\"type\":\"message_delta\",\"delta\":{{{reason}}}}}\n\n");
        assert_eq!(sse(&body).verdict, Verdict::Success, "{reason}");
    }
}

#[test]
fn each_ndjson_end_marker_ends_a_stream_alone() {
    for end in [
        "{\"done\":true}\n",
        "{\"is_finished\":true}\n",
        "{\"event_type\":\"stream-end\"}\n",
    ] {
        assert_eq!(
            scan(StreamFormat::NdJson, end).verdict,
            Verdict::Success,
            "{end}"
        );
    }
    assert_is(
        &scan(
            StreamFormat::NdJson,
            "{\"event_type\":\"text-generation\"}\n",
        ),
        Verdict::Availability,
        "stream:eof_before_done",
    );
}

#[test]
fn a_textual_exception_frame_cut_at_the_bound_is_read_from_its_headers() {
    let cut = "{\"eventstream_frame\":{\"headers\":{\":message-type\":\"exception\",\":exception-type\":\"throttlingException\"},\"payload\":{\"message\":\"Too many";
    let c = scan(StreamFormat::AwsEventStream, cut);
    assert_eq!(c.verdict, Verdict::Throttled, "{c:?}");
    let event = "{\"eventstream_frame\":{\"headers\":{\":message-type\":\"event\",\":event-type\":\"chunk\"},\"payload\":{\"bytes\":\"e30";
    assert_ne!(
        scan(StreamFormat::AwsEventStream, event).verdict,
        Verdict::Throttled
    );
}
