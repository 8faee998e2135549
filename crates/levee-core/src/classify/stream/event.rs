//! What one stream event says: nothing yet, the end, or an in-band error.
//!
//! Events are cheap to pass over: an event is parsed as JSON only when its
//! bytes contain `error` (or it is an `event: error`), and terminal markers
//! are found by a scan for one field, so a healthy stream costs a few
//! substring searches per event.

use std::time::SystemTime;

use serde_json::Value;

use super::super::body::{self, ErrorFacts, field, value_after};
use super::super::provider::Limits;
use super::super::rules::{self, Why};
use super::super::text::needle;
use super::super::{Classification, Dialect, Verdict};
use super::eventstream::{AwsMessage, base64};

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
    pub(super) limits: Limits,
    pub(super) dialect: Option<Dialect>,
    pub(super) date: Option<SystemTime>,
    /// The model finished (a `finish_reason`/`stop_reason`) though no
    /// terminal event came yet: an end of stream after this is not a cut.
    pub(super) finished: bool,
}

impl Ctx {
    fn in_band(&self, facts: &ErrorFacts<'_>, aws: Option<&str>) -> Classification {
        let dialect = self.dialect.or(aws.map(|_| Dialect::Bedrock));
        let reference = &|| self.date.unwrap_or_else(SystemTime::now);
        let quota_after = self.limits.quota_after;
        self.limits
            .classify_facts(facts, None, None, reference, dialect, |lower, wait| {
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
    let t = text(data);
    let error_event = matches!(name, b"error" | b"response.failed");
    if (error_event || needle!("error").is_in(t))
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
    if needle!("error").is_in(t)
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
        (facts.has_error || forced).then(|| ctx.in_band(facts, facts.aws_type))
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
    // Each event's own type comes first in its JSON: look only near the start.
    let head = t.get(..t.len().min(48)).unwrap_or(t);
    if field(head, needle!("\"type\""), |_| true).is_some_and(|ty| TERMINAL_NAMES.contains(&ty)) {
        return Signal::Terminal;
    }
    // One pass over `eason"` finds every finish reason spelling
    // (`finish_reason`, `finishReason`, `stop_reason`, `stopReason`): this runs
    // on every event of every stream, so no search per spelling.
    let b = t.as_bytes();
    for at in needle!("eason\"").find_all(t) {
        let end = at + "eason\"".len();
        let Some(value) = value_after(t, end).filter(|v| *v != "null") else {
            continue;
        };
        let key = &b[at.saturating_sub(9)..at];
        if key.ends_with(b"\"finishR") {
            // Gemini has no terminal event: its last chunk carries the reason.
            return Signal::Terminal;
        }
        if key.ends_with(b"\"finish_r") {
            if value == "error" {
                // OpenRouter ends a failed stream with `finish_reason: "error"`.
                return Signal::Error(ctx.rule(Verdict::Availability, "finish_reason_error"));
            }
            ctx.finished = true;
        } else if key.ends_with(b"\"stop_r") || key.ends_with(b"\"stopR") {
            ctx.finished = true;
        }
    }
    Signal::Nothing
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
        return Signal::Error(body::read(doc, |facts| ctx.in_band(facts, name)));
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
        return Signal::Error(body::read(m.payload, |facts| ctx.in_band(facts, name)));
    }
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

/// An `InvokeModelWithResponseStream` chunk: `{"bytes":"<base64>"}`.
fn aws_chunk(ctx: &mut Ctx, payload: &[u8]) -> Signal {
    let Some(inner) =
        field(text(payload), needle!("\"bytes\""), |_| true).and_then(|b64| base64(b64.as_bytes()))
    else {
        return Signal::Nothing;
    };
    match json_doc(ctx, &inner) {
        Signal::Nothing if needle!("\"amazon-bedrock-invocationMetrics\"").is_in(text(&inner)) => {
            Signal::Terminal
        }
        s => s,
    }
}
