//! Binary AWS event-stream frames (Bedrock `ConverseStream` and
//! `InvokeModelWithResponseStream`), hand-built with real CRCs.

use crate::classify::stream::eventstream_tests::{Value, frame};
use crate::classify::{Classification, StreamFormat, StreamScanner, Verdict};

fn event(kind: &str, payload: &str) -> Vec<u8> {
    frame(
        &[
            (":message-type", Value::Str("event")),
            (":event-type", Value::Str(kind)),
            (":content-type", Value::Str("application/json")),
        ],
        payload.as_bytes(),
    )
}

fn exception(name: &str, payload: &str) -> Vec<u8> {
    frame(
        &[
            (":message-type", Value::Str("exception")),
            (":exception-type", Value::Str(name)),
            (":content-type", Value::Str("application/json")),
        ],
        payload.as_bytes(),
    )
}

/// An `InvokeModelWithResponseStream` chunk carrying the model's own event.
fn chunk(inner: &str) -> Vec<u8> {
    event(
        "chunk",
        &format!("{{\"bytes\":\"{}\"}}", base64(inner.as_bytes())),
    )
}

fn base64(b: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for group in b.chunks(3) {
        let n = group
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &c)| n | u32::from(c) << (16 - 8 * i));
        for i in 0..4 {
            if i <= group.len() {
                out.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Feeds `frames` joined, in chunks of `split` bytes, and finishes.
fn scan(frames: &[Vec<u8>], split: usize) -> Classification {
    let bytes = frames.concat();
    let mut s = StreamScanner::new(StreamFormat::AwsEventStream);
    for c in bytes.chunks(split.max(1)) {
        s.feed(c);
    }
    s.finish()
}

fn assert_is(c: &Classification, verdict: Verdict, reason: &str) {
    assert_eq!((c.verdict, c.reason.as_str()), (verdict, reason), "{c:?}");
}

fn converse() -> Vec<Vec<u8>> {
    vec![
        event("messageStart", r#"{"role":"assistant"}"#),
        event(
            "contentBlockDelta",
            r#"{"contentBlockIndex":0,"delta":{"text":"Hello"}}"#,
        ),
        event("contentBlockStop", r#"{"contentBlockIndex":0}"#),
        event("messageStop", r#"{"stopReason":"end_turn"}"#),
        event(
            "metadata",
            r#"{"usage":{"inputTokens":5,"outputTokens":1,"totalTokens":6},"metrics":{"latencyMs":120}}"#,
        ),
    ]
}

#[test]
fn a_converse_stream_ends_well_at_its_metadata_event_whatever_the_split() {
    let frames = converse();
    for split in [1, 5, 12, 13, 100, 10_000] {
        assert_eq!(scan(&frames, split), Classification::success(), "{split}");
    }
    // Decided on the chunk that completes `metadata`.
    let mut s = StreamScanner::new(StreamFormat::AwsEventStream);
    for f in &frames[..4] {
        assert_eq!(s.feed(f), None);
    }
    assert_eq!(s.feed(&frames[4]), Some(Classification::success()));
}

#[test]
fn a_converse_stream_cut_before_message_stop_or_inside_a_frame_is_availability() {
    let frames = converse();
    assert_is(
        &scan(&frames[..3], 7),
        Verdict::Availability,
        "stream:eof_before_done",
    );
    // After messageStop the answer is whole: the metadata alone is missing.
    assert_eq!(scan(&frames[..4], 7), Classification::success());
    // But not when the stream stops inside the next frame.
    let mut cut = frames[..4].concat();
    cut.extend_from_slice(&frames[4][..20]);
    assert_is(
        &scan(&[cut], 7),
        Verdict::Availability,
        "stream:eof_before_done",
    );
    assert_is(
        &scan(&[], 1),
        Verdict::Availability,
        "stream:eof_before_done",
    );
}

#[test]
fn exception_frames_are_read_by_their_exception_type() {
    let cases = [
        ("throttlingException", Verdict::Throttled),
        ("serviceUnavailableException", Verdict::Availability),
        ("internalServerException", Verdict::Availability),
        ("modelStreamErrorException", Verdict::Availability),
        ("modelTimeoutException", Verdict::Availability),
        ("validationException", Verdict::Request),
        ("accessDeniedException", Verdict::Credential),
    ];
    for (name, verdict) in cases {
        let mut frames = converse()[..2].to_vec();
        frames.push(exception(name, r#"{"message":"x"}"#));
        frames.push(event("contentBlockDelta", r#"{"delta":{"text":"late"}}"#));
        let c = scan(&frames, 9);
        assert_is(&c, verdict, &format!("bedrock:{name}"));
    }
    let model = exception(
        "modelStreamErrorException",
        r#"{"message":"An error occurred while streaming the response. Retry your request.","originalStatusCode":500,"originalMessage":"upstream error"}"#,
    );
    assert_is(
        &scan(&[model], 3),
        Verdict::Availability,
        "bedrock:modelStreamErrorException",
    );
}

#[test]
fn error_frames_are_read_by_their_error_code() {
    let error = |code: &str| {
        frame(
            &[
                (":message-type", Value::Str("error")),
                (":error-code", Value::Str(code)),
                (":error-message", Value::Str("Rate exceeded")),
            ],
            b"",
        )
    };
    assert_eq!(
        scan(&[error("ThrottlingException")], 4).verdict,
        Verdict::Throttled
    );
    assert_eq!(
        scan(&[error("InternalFailure")], 4).verdict,
        Verdict::Availability
    );
}

#[test]
fn invoke_model_chunks_end_at_the_invocation_metrics_or_the_dialects_terminal() {
    let anthropic = [
        chunk(r#"{"type":"message_start","message":{"role":"assistant"}}"#),
        chunk(
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}"#,
        ),
        chunk(r#"{"type":"message_delta","delta":{"stop_reason":"end_turn"}}"#),
        chunk(
            r#"{"type":"message_stop","amazon-bedrock-invocationMetrics":{"inputTokenCount":5,"outputTokenCount":1,"invocationLatency":300,"firstByteLatency":100}}"#,
        ),
    ];
    for split in [1, 11, 4096] {
        assert_eq!(scan(&anthropic, split), Classification::success());
    }
    assert_is(
        &scan(&anthropic[..2], 11),
        Verdict::Availability,
        "stream:eof_before_done",
    );
    // A model whose last chunk has no terminal type: the metrics end it.
    let llama = [
        chunk(r#"{"generation":"Hi","stop_reason":null}"#),
        chunk(
            r#"{"generation":"","stop_reason":"stop","amazon-bedrock-invocationMetrics":{"inputTokenCount":5}}"#,
        ),
    ];
    let mut s = StreamScanner::new(StreamFormat::AwsEventStream);
    assert_eq!(s.feed(&llama[0]), None);
    assert_eq!(s.feed(&llama[1]), Some(Classification::success()));
    // The model's own in-band error, inside a chunk.
    let overloaded = [
        anthropic[0].clone(),
        chunk(r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#),
    ];
    assert_eq!(scan(&overloaded, 6).verdict, Verdict::Availability);
}

#[test]
fn a_corrupt_frame_is_an_availability_failure_and_nothing_after_it_counts() {
    let frames = converse();
    let mut corrupt = frames[1].clone();
    let at = corrupt.len() - 10;
    corrupt[at] ^= 0x20;
    let c = scan(&[frames[0].clone(), corrupt, frames[4].clone()], 5);
    assert_is(&c, Verdict::Availability, "stream:frame_crc");

    // A declared length of 1 GiB with a valid prelude CRC: refused at once.
    let mut huge = (1u32 << 30).to_be_bytes().to_vec();
    huge.extend_from_slice(&0u32.to_be_bytes());
    huge.extend_from_slice(&crc32fast::hash(&huge).to_be_bytes());
    let mut s = StreamScanner::new(StreamFormat::AwsEventStream);
    let c = s.feed(&huge).expect("decided by the prelude");
    assert_is(&c, Verdict::Availability, "stream:frame_length");
}

#[test]
fn the_textual_form_reads_terminal_events_too() {
    let text = "{\"eventstream_frame\":{\"headers\":{\":message-type\":\"event\",\":event-type\":\"metadata\"},\"payload\":{\"usage\":{}}}}";
    let mut s = StreamScanner::new(StreamFormat::AwsEventStream);
    assert_eq!(s.feed(text.as_bytes()), Some(Classification::success()));
}

#[test]
fn converse_content_starts_at_the_first_content_block_delta_however_split() {
    let mut body = event("messageStart", r#"{"role":"assistant"}"#);
    let before = body.len();
    body.extend(event(
        "contentBlockDelta",
        r#"{"contentBlockIndex":0,"delta":{"text":"Okay"}}"#,
    ));
    for step in [1, 7, 64, body.len()] {
        let mut s = StreamScanner::new(StreamFormat::AwsEventStream);
        let mut fed = 0;
        for piece in body.chunks(step) {
            s.feed(piece);
            fed += piece.len();
            // Output comes only once the delta's frame is whole.
            let whole_delta = fed == body.len();
            assert_eq!(s.has_content(), whole_delta, "step {step}, fed {fed}");
            if fed <= before {
                assert!(!s.has_content());
            }
        }
        assert_eq!(s.events(), 2);
    }
}

#[test]
fn invoke_model_content_is_read_from_the_models_own_event() {
    let mut s = StreamScanner::new(StreamFormat::AwsEventStream);
    s.feed(&chunk(
        r#"{"type":"message_start","message":{"role":"assistant","content":[]}}"#,
    ));
    assert!(!s.has_content());
    s.feed(&chunk(
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}"#,
    ));
    assert!(s.has_content());
}
