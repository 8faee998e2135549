//! Reading the facts that matter out of an error body.
//!
//! Providers nest the same few facts differently: a code (`error.code`,
//! `error.type`, Google's `error.status`, Anthropic's
//! `error.details.error_code`, Google's `ErrorInfo.reason`, AWS's
//! `__type`), a message, sometimes a retry delay or a quota id. The body is
//! parsed with `serde_json` when it looks like JSON and parses; a peek cut
//! at the bound, a second document or non-UTF-8 bytes make the parse fail,
//! and then the same facts are picked out of the readable text by substring
//! scans, so a truncated body still classifies.

use std::time::Duration;

use serde_json::{Map, Value};

use super::hints::proto_duration;

/// The envelope an error body came in: a dialect clue when headers say nothing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Shape {
    /// Not JSON, or nothing recognisable.
    #[default]
    Text,
    /// `{"message": ..}` only: Bedrock, Cohere.
    Message,
    /// `{"error": {"message", "type", "param", "code"}}`.
    OpenAi,
    /// `{"error": {"code": "429", ..}}` (a numeric string) or `innererror`.
    Azure,
    /// `{"error": {"code": 402, "message"}}`: a numeric code and no Google status.
    OpenRouter,
    /// `{"type": "error", "error": {"type", "message"}}`.
    Anthropic,
    /// `{"error": {"code": 429, "status": "RESOURCE_EXHAUSTED", ..}}`.
    Google,
    /// The same wrapped in an array, as Vertex answers.
    GoogleArray,
    /// `{"object": "error", "type", "code"}`.
    Mistral,
}

/// What an error body says, borrowed from the parsed JSON or the raw text.
#[derive(Debug, Default)]
pub(crate) struct ErrorFacts<'a> {
    pub(crate) shape: Shape,
    /// An error object was present (`error`, `"type": "error"`,
    /// `response.failed`): what tells an in-band stream error from data.
    pub(crate) has_error: bool,
    /// Anthropic `error.details.error_code`, Azure `innererror.code`.
    pub(crate) detail: Option<&'a str>,
    /// Google `ErrorInfo.reason` (`API_KEY_INVALID`).
    pub(crate) info_reason: Option<&'a str>,
    /// AWS `__type` (`com.amazon#ThrottlingException`).
    pub(crate) aws_type: Option<&'a str>,
    /// `error.code` when it is a word, not a number.
    pub(crate) code: Option<&'a str>,
    /// `error.type`.
    pub(crate) kind: Option<&'a str>,
    /// Google's canonical status (`RESOURCE_EXHAUSTED`).
    pub(crate) status: Option<&'a str>,
    /// A numeric `error.code` (`429`, `"429"`) or numeric `status`.
    pub(crate) number: Option<u16>,
    /// Bedrock's `originalStatusCode` of a model error.
    pub(crate) original_status: Option<u16>,
    /// The message; for a body that is not JSON, the whole readable text.
    pub(crate) message: &'a str,
    /// A Google `QuotaFailure` violation whose quota id is per day.
    pub(crate) per_day: bool,
    /// Google `RetryInfo.retryDelay`.
    pub(crate) retry_delay: Option<Duration>,
}

impl<'a> ErrorFacts<'a> {
    /// The codes, most specific first.
    pub(crate) fn codes(&self) -> impl Iterator<Item = &'a str> + use<'a> {
        [
            self.detail,
            self.info_reason,
            self.code,
            self.kind,
            self.status,
        ]
        .into_iter()
        .flatten()
    }
}

/// Reads `body` and hands its facts to `f` (they borrow from a parse that
/// lives only for the call).
pub(crate) fn read<R>(body: &[u8], f: impl FnOnce(&ErrorFacts<'_>) -> R) -> R {
    // Cheap byte test first: only something that starts like JSON is parsed.
    if matches!(body.trim_ascii_start().first(), Some(b'{' | b'[')) {
        if let Ok(v) = serde_json::from_slice::<Value>(body) {
            return f(&from_value(&v));
        }
    }
    let text = String::from_utf8_lossy(body);
    f(&scan(&text))
}

// === JSON ===

fn str_of<'a>(m: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    m.get(key)?.as_str()
}

fn status_number(v: &Value) -> Option<u16> {
    let n = match v {
        Value::Number(n) => n.as_u64()?,
        Value::String(s) if !s.is_empty() && s.bytes().all(|c| c.is_ascii_digit()) => {
            s.parse().ok()?
        }
        _ => return None,
    };
    u16::try_from(n).ok().filter(|n| (100..=999).contains(n))
}

/// The facts of a parsed error body (also used for stream events).
pub(crate) fn from_value(v: &Value) -> ErrorFacts<'_> {
    let mut f = ErrorFacts::default();
    let (v, in_array) = match v {
        Value::Array(items) => (items.first().unwrap_or(&Value::Null), true),
        v => (v, false),
    };
    let Some(top) = v.as_object() else {
        return f;
    };
    let top_type = str_of(top, "type");
    let err = match top.get("error") {
        Some(Value::Object(e)) => {
            f.has_error = true;
            e
        }
        Some(Value::String(s)) => {
            // `{"error": "…"}`: a gateway's plain form.
            f.has_error = true;
            f.message = s;
            top
        }
        _ => match top_type {
            Some("response.failed") => {
                f.has_error = true;
                top.get("response")
                    .and_then(|r| r.get("error"))
                    .and_then(Value::as_object)
                    .unwrap_or(top)
            }
            Some("error") => {
                f.has_error = true;
                top
            }
            // Mistral: `{"object": "error", "type", "code", "message"}`.
            _ if str_of(top, "object") == Some("error") => {
                f.has_error = true;
                top
            }
            _ => top,
        },
    };

    match err.get("code") {
        Some(Value::String(s)) if !s.bytes().all(|c| c.is_ascii_digit()) => f.code = Some(s),
        Some(c) => f.number = status_number(c),
        None => {}
    }
    // `"type": "error"` is the envelope's (Anthropic, Responses events), not a code.
    f.kind = str_of(err, "type").filter(|&t| t != "error");
    match err.get("status") {
        Some(Value::String(s)) => f.status = Some(s),
        Some(n) => f.number = f.number.or_else(|| status_number(n)),
        None => {}
    }
    if f.message.is_empty() {
        f.message = str_of(err, "message").unwrap_or_default();
    }
    read_details(err, &mut f);
    f.aws_type = str_of(top, "__type");
    f.original_status = [top, err]
        .iter()
        .find_map(|m| status_number(m.get("originalStatusCode")?));

    let string_code = matches!(err.get("code"), Some(Value::String(_)));
    f.shape = if !f.has_error {
        if f.message.is_empty() {
            Shape::Text
        } else {
            Shape::Message
        }
    } else if str_of(top, "object") == Some("error") {
        Shape::Mistral
    } else if top_type == Some("error") && top.contains_key("error") {
        Shape::Anthropic
    } else if f
        .status
        .is_some_and(|s| s.bytes().all(|c| c.is_ascii_uppercase() || c == b'_'))
    {
        if in_array {
            Shape::GoogleArray
        } else {
            Shape::Google
        }
    } else if (string_code && f.number.is_some()) || err.contains_key("innererror") {
        Shape::Azure
    } else if f.number.is_some() {
        Shape::OpenRouter
    } else {
        Shape::OpenAi
    };
    f
}

fn read_details<'a>(err: &'a Map<String, Value>, f: &mut ErrorFacts<'a>) {
    match err.get("details") {
        // Anthropic: `details.error_code`.
        Some(Value::Object(d)) => f.detail = str_of(d, "error_code"),
        // Google: typed details.
        Some(Value::Array(items)) => {
            for d in items.iter().filter_map(Value::as_object) {
                let ty = str_of(d, "@type").unwrap_or_default();
                if ty.ends_with("ErrorInfo") {
                    f.info_reason = f.info_reason.or(str_of(d, "reason"));
                } else if ty.ends_with("QuotaFailure") {
                    let violations = d.get("violations").and_then(Value::as_array);
                    f.per_day |= violations.into_iter().flatten().any(|v| {
                        v.get("quotaId")
                            .and_then(Value::as_str)
                            .is_some_and(|id| id.contains("PerDay"))
                    });
                } else if ty.ends_with("RetryInfo") {
                    f.retry_delay = str_of(d, "retryDelay").and_then(proto_duration);
                }
            }
        }
        _ => {}
    }
    if f.detail.is_none() {
        // Azure: `innererror.code` (`ResponsibleAIPolicyViolation`).
        f.detail = err
            .get("innererror")
            .and_then(|i| i.get("code"))
            .and_then(Value::as_str);
    }
}

// === text fallback ===

/// The raw value of the first `"key": <value>` in `text` that `accept`s it:
/// a string's contents up to its closing quote (or the end of a truncated
/// text), or a bare literal up to the next delimiter.
pub(crate) fn field<'a>(
    text: &'a str,
    key: &str,
    accept: impl Fn(&str) -> bool,
) -> Option<&'a str> {
    let b = text.as_bytes();
    for (at, _) in text.match_indices(key) {
        let end = at + key.len();
        if at == 0 || b[at - 1] != b'"' || b.get(end) != Some(&b'"') {
            continue;
        }
        let mut i = end + 1;
        i += b[i..]
            .iter()
            .take_while(|c| c.is_ascii_whitespace())
            .count();
        if b.get(i) != Some(&b':') {
            continue;
        }
        i += 1;
        i += b[i..]
            .iter()
            .take_while(|c| c.is_ascii_whitespace())
            .count();
        let value = if b.get(i) == Some(&b'"') {
            let start = i + 1;
            let mut j = start;
            while j < b.len() && b[j] != b'"' {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            &text[start..j.min(b.len())]
        } else {
            let len = b[i..]
                .iter()
                .take_while(|c| !matches!(c, b',' | b'}' | b']') && !c.is_ascii_whitespace())
                .count();
            &text[i..i + len]
        };
        if accept(value) {
            return Some(value);
        }
    }
    None
}

fn any(_: &str) -> bool {
    true
}

fn is_number(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|c| c.is_ascii_digit())
}

/// The same facts picked out of text that did not parse as JSON.
fn scan(text: &str) -> ErrorFacts<'_> {
    let looks_json = matches!(
        text.trim_ascii_start().as_bytes().first(),
        Some(b'{' | b'[')
    );
    if !looks_json {
        return ErrorFacts {
            message: text,
            ..ErrorFacts::default()
        };
    }
    let code = field(text, "code", any);
    let to_u16 = |s: &str| s.parse::<u16>().ok().filter(|n| (100..=999).contains(n));
    let mut f = ErrorFacts {
        has_error: text.contains("\"error\"") || text.contains("\"type\":\"error\""),
        detail: field(text, "error_code", any),
        info_reason: field(text, "reason", any),
        aws_type: field(text, "__type", any),
        code: code.filter(|c| !is_number(c)),
        kind: field(text, "type", |t| t != "error" && !t.is_empty()),
        status: field(text, "status", |s| !is_number(s)),
        number: code.filter(|c| is_number(c)).and_then(to_u16),
        original_status: field(text, "originalStatusCode", is_number).and_then(to_u16),
        message: field(text, "message", any).unwrap_or(text),
        per_day: text.contains("PerDay"),
        retry_delay: field(text, "retryDelay", any).and_then(proto_duration),
        shape: Shape::Text,
    };
    f.shape = if text.contains("\"object\":\"error\"") {
        Shape::Mistral
    } else if f.status.is_some() && f.number.is_some() {
        Shape::Google
    } else if f.has_error {
        Shape::OpenAi
    } else {
        Shape::Message
    };
    f
}
