//! What one stream event says: nothing yet, the end, or an in-band error.
//!
//! Events are cheap to pass over: an event is parsed as JSON only when its
//! bytes contain `error` (or it is an `event: error`), and terminal markers
//! are found by a scan for one field, so a healthy stream costs a few
//! substring searches per event.

use std::time::SystemTime;

use serde_json::Value;

use super::super::body::{self, ErrorFacts, field, value_after_bytes};
use super::super::custom::Seen;
use super::super::dialect::Dialect;
use super::super::provider::ProviderClassifier;
use super::super::rules::{self, Why};
use super::super::text::needle;
use super::super::verdict::{Classification, Verdict};
use super::content;
use super::eventstream::{AwsMessage, base64};
use super::head::head_type;

/// What an event means for the stream's verdict.
#[derive(Debug)]
pub(super) enum Signal {
    /// Keep reading.
    Nothing,
    /// The provider's end-of-stream marker.
    Terminal,
    /// An error inside the stream.
    Error(Classification),
}

/// What the scanner knows beyond the bytes: the dialect, the bounds, the
/// response's `Date`, and whether a non-error finish reason was seen.
#[derive(Clone, Debug, Default)]
pub(super) struct Ctx {
    /// Its bounds and the user's rules.
    pub(super) classifier: ProviderClassifier,
    pub(super) dialect: Option<Dialect>,
    pub(super) date: Option<SystemTime>,
    /// The response's status (a 2xx): what a user's rule matches an
    /// in-band error's status against.
    pub(super) status: u16,
    /// The model finished (a `finish_reason`/`stop_reason`) though no
    /// terminal event came yet: an end of stream after this is not a cut.
    pub(super) finished: bool,
    /// An event carried the model's output (see [`content`](super::content)).
    pub(super) content: bool,
    /// Events read so far (saturating).
    pub(super) events: u32,
}

impl Ctx {
    /// Counts one event.
    #[inline]
    pub(super) fn count_event(&mut self) {
        self.events = self.events.saturating_add(1);
    }

    /// Notes whether an event carries output, until one did: from then on
    /// the test is skipped.
    #[inline]
    fn note_content(&mut self, is_content: impl FnOnce() -> bool) {
        if !self.content {
            self.content = is_content();
        }
    }

    /// An error event's classification; `event` is the bytes it was read from.
    fn in_band(&self, facts: &ErrorFacts<'_>, aws: Option<&str>, event: &[u8]) -> Classification {
        let dialect = self.dialect.or(aws.map(|_| Dialect::Bedrock));
        let reference = &|| self.date.unwrap_or_else(SystemTime::now);
        let quota_after = self.classifier.quota_after();
        let seen = Seen {
            status: self.status,
            error: true,
            headers: None,
            body: event,
            aws,
        };
        self.classifier
            .classify_facts(facts, seen, None, reference, dialect, |lower, wait| {
                rules::decide_in_band(facts, aws, lower, wait, quota_after)
            })
    }

    /// A verdict a Levee rule reached: `<dialect>:<rule>`.
    fn rule(&self, verdict: Verdict, rule: &'static str) -> Classification {
        let dialect = self.dialect.unwrap_or(Dialect::Generic);
        Classification::new(verdict, Why::Rule(rule).reason(dialect))
    }
}

/// Event names that end a stream: Anthropic, OpenAI Responses, Cohere.
const TERMINAL_NAMES: [&str; 5] = [
    "message_stop",
    "response.completed",
    "response.incomplete",
    "message-end",
    "stream-end",
];

/// One SSE event: its `event:` name and its joined `data:` lines.
pub(super) fn sse_event(ctx: &mut Ctx, name: &[u8], data: &[u8]) -> Signal {
    let data = data.trim_ascii();
    if data == b"[DONE]" {
        return Signal::Terminal;
    }
    ctx.count_event();
    ctx.note_content(|| content::is_content(name, data));
    // The common event says nothing: tell so from the raw bytes, without
    // validating them as UTF-8 first (see `Payload::is_quiet`). What is
    // not plainly quiet is read again, from its valid UTF-8 only.
    if quiet(name, data) && !first_event_error(ctx, data) {
        return Signal::Nothing;
    }
    read_sse_event(ctx, name, data)
}

/// Whether an event plainly says nothing, by its raw bytes.
fn quiet(name: &[u8], data: &[u8]) -> bool {
    !matches!(name, b"error" | b"response.failed")
        && !TERMINAL_NAMES.iter().any(|t| t.as_bytes() == name)
        && needle!("error").find(data).is_none()
        && Payload::read(data).is_quiet()
}

/// Whether the first event may be an error written without the word
/// `error`: a provider that answers `200` with its error in place of the
/// completion (Tencent Cloud's `"Error"`, MiniMax's non-zero
/// `base_resp.status_code`, Baidu's `error_code`, whose `error` the
/// plain test finds). Only the first event is tested, so a healthy
/// stream's cost per event is unchanged.
fn first_event_error(ctx: &Ctx, data: &[u8]) -> bool {
    ctx.events <= 1
        && (needle!("\"Error\"").find(data).is_some()
            || needle!("\"base_resp\"").find(data).is_some()
            || needle!("\"status\":4").find(data).is_some()
            || needle!("\"status\":5").find(data).is_some())
}

/// [`sse_event`] from the event's valid UTF-8.
fn read_sse_event(ctx: &mut Ctx, name: &[u8], data: &[u8]) -> Signal {
    let error_event = matches!(name, b"error" | b"response.failed");
    let t = text(data);
    if (error_event || needle!("error").is_in(t) || first_event_error(ctx, data))
        && let Some(c) = error_in(ctx, data, error_event)
    {
        return Signal::Error(c);
    }
    if TERMINAL_NAMES.iter().any(|t| t.as_bytes() == name) {
        return Signal::Terminal;
    }
    payload(ctx, t)
}

/// One JSON document outside SSE framing: Gemini's error appended to an SSE
/// stream, an NDJSON line, a textual event-stream frame.
pub(super) fn json_doc(ctx: &mut Ctx, doc: &[u8]) -> Signal {
    let t = text(doc);
    if needle!("\"eventstream_frame\"").is_in(t) {
        return aws_frame(ctx, doc, t);
    }
    ctx.note_content(|| content::is_content(b"", doc));
    if (needle!("error").is_in(t) || first_event_error(ctx, doc))
        && let Some(c) = error_in(ctx, doc, false)
    {
        return Signal::Error(c);
    }
    // NDJSON ends: Ollama's `done`, Cohere v1's `is_finished` / `stream-end`.
    let done = |key| field(t, key, |v| v == "true").is_some();
    if done(needle!("\"done\""))
        || done(needle!("\"is_finished\""))
        || field(t, needle!("\"event_type\""), |v| v == "stream-end").is_some()
    {
        return Signal::Terminal;
    }
    payload(ctx, t)
}

/// The in-band error `data` carries, if it carries one (`forced` for an
/// event that is an error by name).
fn error_in(ctx: &Ctx, data: &[u8], forced: bool) -> Option<Classification> {
    body::read(data, |facts| {
        (facts.has_error || forced).then(|| ctx.in_band(facts, facts.aws_type, data))
    })
}

fn text(data: &[u8]) -> &str {
    match std::str::from_utf8(data) {
        Ok(s) => s,
        // A cut multi-byte character or stray bytes: read what is valid.
        Err(e) => std::str::from_utf8(&data[..e.valid_up_to()]).unwrap_or_default(),
    }
}

/// Terminal markers and finish reasons in an event that is not an error.
fn payload(ctx: &mut Ctx, t: &str) -> Signal {
    let p = Payload::read(t.as_bytes());
    ctx.finished |= p.finished;
    match p.end {
        None => Signal::Nothing,
        Some(End::Terminal) => Signal::Terminal,
        // OpenRouter ends a failed stream with `finish_reason: "error"`.
        Some(End::FinishError) => {
            Signal::Error(ctx.rule(Verdict::Availability, "finish_reason_error"))
        }
    }
}

/// How a [`Payload`] ends the stream.
enum End {
    Terminal,
    FinishError,
}

/// What an event that is not an error says, read without side effects.
#[derive(Default)]
struct Payload {
    /// The terminal event, or OpenRouter's error finish.
    end: Option<End>,
    /// A finish reason was seen.
    finished: bool,
    /// The event's `type` has bytes beyond ASCII.
    odd_type: bool,
}

impl Payload {
    fn read(t: &[u8]) -> Payload {
        let mut p = Payload::default();
        if let Some(ty) = head_type(t) {
            if TERMINAL_NAMES.iter().any(|n| n.as_bytes() == ty) {
                p.end = Some(End::Terminal);
                return p;
            }
            p.odd_type = !ty.is_ascii();
        }
        // One pass over `eason"` finds every finish reason spelling
        // (`finish_reason`, `finishReason`, `stop_reason`, `stopReason`): this
        // runs on every event of every stream, so no search per spelling.
        let mut from = 0;
        while let Some(hit) = needle!("eason\"").find(&t[from..]) {
            let at = from + hit;
            from = at + "eason\"".len();
            // Most reasons are a plain `:null` (every chunk but the last).
            if t[from..].starts_with(b":null")
                && t.get(from + 5)
                    .is_none_or(|c| matches!(c, b',' | b'}' | b']') || c.is_ascii_whitespace())
            {
                continue;
            }
            let Some(value) = value_after_bytes(t, from).filter(|v| *v != b"null") else {
                continue;
            };
            let key = &t[at.saturating_sub(9)..at];
            if key.ends_with(b"\"finishR") {
                // Gemini has no terminal event: its last chunk carries the reason.
                p.end = Some(End::Terminal);
                return p;
            }
            if key.ends_with(b"\"finish_r") {
                if value == b"error" {
                    p.end = Some(End::FinishError);
                    return p;
                }
                p.finished = true;
            } else if key.ends_with(b"\"stop_r") || key.ends_with(b"\"stopR") {
                p.finished = true;
            }
        }
        p
    }

    /// Whether the event says nothing, read from its raw bytes, so that it
    /// says nothing read from its valid UTF-8 prefix either (what the
    /// scanner reads). The markers and the values that decide are ASCII
    /// and a UTF-8 error starts at a byte past ASCII, so the prefix holds
    /// a subset of the raw bytes' findings, unchanged, unless a value runs
    /// past ASCII: only a `type` can (the finish reasons said `null`).
    fn is_quiet(&self) -> bool {
        self.end.is_none() && !self.finished && !self.odd_type
    }
}

/// What an exception frame with no name is taken for.
const MODEL_STREAM_ERROR: &str = "ModelStreamErrorException";

/// A Bedrock event-stream frame in its textual form
/// `{"eventstream_frame":{"headers":{..},"payload":{..}}}`: read as its
/// binary twin is, by [`aws_message`].
fn aws_frame(ctx: &mut Ctx, doc: &[u8], t: &str) -> Signal {
    let Ok(v) = serde_json::from_slice::<Value>(doc) else {
        // A frame cut at the bound: its headers come first, read them as text.
        if field(t, needle!("\":message-type\""), |v| v == "exception").is_none() {
            return Signal::Nothing;
        }
        let name = field(t, needle!("\":exception-type\""), |_| true).or(Some(MODEL_STREAM_ERROR));
        return Signal::Error(body::read(doc, |facts| ctx.in_band(facts, name, doc)));
    };
    let frame = &v["eventstream_frame"];
    let header = |n: &str| frame["headers"][n].as_str();
    // The payload is JSON, possibly still as a string.
    let payload = match &frame["payload"] {
        Value::String(s) => s.clone().into_bytes(),
        Value::Null => Vec::new(),
        p => serde_json::to_vec(p).unwrap_or_default(),
    };
    aws_message(
        ctx,
        &AwsMessage {
            message_type: header(":message-type"),
            event_type: header(":event-type"),
            exception_type: header(":exception-type"),
            error_code: header(":error-code"),
            payload: &payload,
        },
    )
}

/// One AWS event-stream message (binary or textual), as Bedrock's
/// `ConverseStream` and `InvokeModelWithResponseStream` send them:
///
/// - `:message-type: exception`, named by `:exception-type`
///   (`throttlingException` throttled; `serviceUnavailableException`,
///   `internalServerException`, `modelStreamErrorException`,
///   `modelTimeoutException` availability; `validationException` request;
///   `accessDeniedException` credential), or `:message-type: error` named
///   by `:error-code`: the in-band error, its payload read for details;
/// - `messageStop` (Converse): the model finished; `metadata`, sent last:
///   the terminal event;
/// - `chunk` (InvokeModel): its base64 `bytes` hold the model's own event,
///   read as that dialect's stream event; the last one carries
///   `amazon-bedrock-invocationMetrics`: the terminal event.
pub(super) fn aws_message(ctx: &mut Ctx, m: &AwsMessage<'_>) -> Signal {
    if matches!(m.message_type, Some("exception" | "error")) {
        let name = m
            .exception_type
            .or(m.error_code)
            .or(Some(MODEL_STREAM_ERROR));
        return Signal::Error(body::read(m.payload, |facts| {
            ctx.in_band(facts, name, m.payload)
        }));
    }
    ctx.note_content(|| {
        m.event_type
            .is_some_and(|t| content::is_delta_name(t.as_bytes()))
    });
    match m.event_type {
        Some("metadata") => Signal::Terminal,
        Some("messageStop") => {
            ctx.finished = true;
            Signal::Nothing
        }
        Some("chunk") => aws_chunk(ctx, m.payload),
        _ => Signal::Nothing,
    }
}

/// The model's own event an `InvokeModelWithResponseStream` chunk's
/// payload (`{"bytes":"<base64>"}`) holds.
pub(crate) fn aws_chunk_event(payload: &[u8]) -> Option<Vec<u8>> {
    field(text(payload), needle!("\"bytes\""), |_| true).and_then(|b64| base64(b64.as_bytes()))
}

/// An `InvokeModelWithResponseStream` chunk, read as its model's event.
fn aws_chunk(ctx: &mut Ctx, payload: &[u8]) -> Signal {
    let Some(inner) = aws_chunk_event(payload) else {
        return Signal::Nothing;
    };
    match json_doc(ctx, &inner) {
        Signal::Nothing if needle!("\"amazon-bedrock-invocationMetrics\"").is_in(text(&inner)) => {
            Signal::Terminal
        }
        s => s,
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// Event bytes built from pieces that decide (markers, finish reasons,
    /// `type`s) and bytes past ASCII, some not UTF-8 at all.
    fn piece() -> impl Strategy<Value = Vec<u8>> {
        let s = |b: &[u8]| Just(b.to_vec());
        prop_oneof![
            s(b"{\"type\":"),
            s(b"\"message_stop"),
            s(b"\""),
            prop_oneof![
                s(b"\"finish_reason\":"),
                s(b"\"finishReason\": "),
                s(b"\"stop_reason\":"),
                s(b"\"stopReason\":"),
            ],
            prop_oneof![s(b"null"), s(b"stop"), s(b"error"), s(b"_R,}\\ :")],
            prop_oneof![s("é".as_bytes()), s(&[0xff]), s(&[0xe2, 0x82])],
            "[a-z_\"]{0,4}".prop_map(String::into_bytes),
        ]
    }

    fn says_nothing(name: &[u8], data: &[u8]) -> bool {
        let mut ctx = Ctx::default();
        matches!(read_sse_event(&mut ctx, name, data), Signal::Nothing) && !ctx.finished
    }

    #[test]
    fn a_marker_cut_by_a_bad_byte_is_not_quiet() {
        for data in [
            &b"{\"type\":\"message_stop\xff\"}"[..],
            b"{\"type\":\"message_stop\xe2\x82",
            b"{\"a\":\"\xff\",\"finish_reason\":\"stop\"}",
            b"{\"finish_reason\":null\xff}",
        ] {
            assert!(!quiet(b"", data) || says_nothing(b"", data), "{data:?}");
        }
        assert!(!says_nothing(b"", b"{\"type\":\"message_stop\xff\"}"));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4096))]

        /// What the raw-byte check calls quiet says nothing read from its
        /// valid UTF-8 either: the shortcut never changes a verdict.
        #[test]
        fn a_quiet_event_says_nothing(
            pieces in prop::collection::vec(piece(), 0..12),
            name in prop_oneof![Just(&b""[..]), Just(&b"message"[..])],
        ) {
            let data = pieces.concat();
            prop_assert!(!quiet(name, &data) || says_nothing(name, &data));
        }

    }
}
