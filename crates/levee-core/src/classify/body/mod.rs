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

mod details;
mod dialect;
mod json;
mod object;

use std::time::Duration;

use serde_core::Deserialize;

pub(crate) use self::dialect::from_body as dialect_of;
use self::json::Leaf;
use self::object::{Body, Envelope, ErrorField, Obj};
use super::hints::proto_duration;
use super::text::{Needle, needle};

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
    /// Baidu Qianfan's `{"error_code": 18, "error_msg"}`, under a `200`.
    Baidu,
    /// MiniMax's `{"base_resp": {"status_code": 1002, "status_msg"}}`.
    MiniMax,
    /// iFlytek Spark's `{"header": {"code": 11202, "message"}}`.
    Spark,
}

/// What an error body says, borrowed from the parsed JSON or the raw text.
#[derive(Debug, Default)]
pub(crate) struct ErrorFacts<'a> {
    pub(crate) shape: Shape,
    /// The body parsed as one JSON document (not read as text).
    pub(crate) parsed: bool,
    /// An error object was present (`error`, `"type": "error"`,
    /// `response.failed`): what tells an in-band stream error from data.
    pub(crate) has_error: bool,
    /// The error came in an envelope of a provider that answers `200` with
    /// its errors (Baidu's `error_code`, MiniMax's `base_resp`, Tencent
    /// Cloud's `Response.Error`, iFlytek's `header`, a bare `{"status":
    /// 429, "message"}`), not in an `error` member.
    pub(crate) beside_payload: bool,
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
    /// A numeric `error.code` of any size: a provider's own code (Z.AI's
    /// `1113`), which the rules name but `number` (a status) does not take.
    pub(crate) code_number: Option<u64>,
    /// Bedrock's `originalStatusCode` of a model error.
    pub(crate) original_status: Option<u16>,
    /// The message; for a body that is not JSON, the whole readable text.
    pub(crate) message: &'a str,
    /// The upstream provider's own error that a gateway passed on as text
    /// (OpenRouter's `error.metadata.raw`): its words count like the message's.
    pub(crate) upstream: Option<&'a str>,
    /// A Google `QuotaFailure` violation whose quota id is per day.
    pub(crate) per_day: bool,
    /// The value of a Google `QuotaFailure` violation of a per-minute
    /// request quota (the lowest, if several).
    pub(crate) requests_per_minute: Option<u64>,
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
    let body = sse_data(body).unwrap_or(body);
    // Cheap byte test first: only something that starts like JSON is parsed.
    if matches!(body.trim_ascii_start().first(), Some(b'{' | b'[')) {
        let mut de = serde_json::Deserializer::from_slice(body);
        if let Ok(parsed) = Body::deserialize(&mut de).and_then(|b| de.end().map(|()| b)) {
            return f(&from_json(&parsed));
        }
    }
    let text = String::from_utf8_lossy(body);
    f(&scan(&text))
}

/// An error body framed as a server-sent event (Alibaba Model Studio's
/// native API answers `id:1\nevent:error\n:HTTP_STATUS/400\ndata:{..}`
/// under an error status): the first `data:` line's value.
pub(crate) fn sse_data(body: &[u8]) -> Option<&[u8]> {
    let start = body.trim_ascii_start();
    let framed = [&b"data:"[..], b"event:", b"id:", b":"]
        .iter()
        .any(|p| start.starts_with(p));
    if !framed {
        return None;
    }
    start
        .split(|&c| c == b'\n')
        .find_map(|line| line.strip_prefix(b"data:"))
        .map(|data| data.trim_ascii())
}

// === JSON ===

fn nonempty(s: Option<&str>) -> Option<&str> {
    s.filter(|s| !s.is_empty())
}

/// A status-like number: `429` or `"429"`, within 100..=999.
fn number(leaf: &Leaf<'_>) -> Option<u16> {
    let n = match leaf {
        Leaf::Num(n) => *n,
        Leaf::Str(s) if is_number(s) => s.parse().ok()?,
        _ => return None,
    };
    u16::try_from(n).ok().filter(|n| (100..=999).contains(n))
}

/// The facts of a parsed body.
fn from_json<'a>(body: &'a Body<'_>) -> ErrorFacts<'a> {
    let mut f = ErrorFacts {
        parsed: true,
        ..ErrorFacts::default()
    };
    let Some(top) = &body.obj else {
        return f;
    };
    let top_type = top.ty.as_str();
    let mistral = top.object.as_str() == Some("error");
    // Envelopes whose error is a non-zero code beside the payload: MiniMax's
    // `base_resp.status_code`, iFlytek Spark's `header.code`, Baidu's
    // top-level `error_code` (each answers `200` with them).
    let coded = |o: &Obj<'_>| code_of(o).is_some_and(|c| !says_ok(c));
    let envelope = top.envelope.as_ref().and_then(|(kind, o)| {
        let error = match kind {
            Envelope::BaseResp | Envelope::Header => coded(o),
            // CLOVA's codes are the HTTP status and two digits: `20000` is OK.
            Envelope::Status => o.code.as_str().is_some_and(|c| !c.starts_with('2')),
        };
        error.then_some((*kind, &**o))
    });
    let err: &Obj<'_> = match &top.error {
        Some(ErrorField::Obj(e)) => e,
        // `{"error": "…"}`: a gateway's plain form.
        Some(ErrorField::Str(s)) => {
            f.message = s;
            top
        }
        _ => match (top_type, &top.response) {
            (Some("response.failed"), Some(r)) => match &r.error {
                Some(ErrorField::Obj(e)) => e,
                _ => top,
            },
            // Tencent Cloud API 3.0: `{"Response": {"Error": {..}}}`.
            (None, Some(r)) if matches!(r.error, Some(ErrorField::Obj(_))) => match &r.error {
                Some(ErrorField::Obj(e)) => e,
                _ => top,
            },
            _ => envelope.map_or(top, |(_, o)| o),
        },
    };
    let tencent = top_type.is_none()
        && top
            .response
            .as_ref()
            .is_some_and(|r| matches!(r.error, Some(ErrorField::Obj(_))));
    // `"type": "error"` is the envelope's (Anthropic, Responses events);
    // Mistral's envelope is `"object": "error"`.
    f.beside_payload = tencent || envelope.is_some() || coded(top);
    f.has_error = matches!(top.error, Some(ErrorField::Obj(_) | ErrorField::Str(_)))
        || matches!(top_type, Some("error" | "response.failed"))
        || mistral
        || f.beside_payload;

    let code = code_of(err).unwrap_or(&Leaf::Other);
    match code {
        Leaf::Str(s) if !is_number(s) => f.code = nonempty(Some(s)),
        c => {
            f.number = number(c);
            f.code_number = match c {
                Leaf::Num(n) => Some(*n),
                Leaf::Str(s) => s.parse().ok(),
                Leaf::Other => None,
            };
        }
    }
    f.kind = nonempty(err.ty.as_str()).filter(|&t| t != "error");
    match &err.status {
        Leaf::Str(s) => f.status = nonempty(Some(s)),
        n => f.number = f.number.or(number(n)),
    }
    // A bare `{"status": 429, "message": ..}` (GigaChat answers it under a
    // `200`) names its status.
    let bare_status = f.number.is_some_and(|n| n >= 400) && err.message.as_str().is_some();
    f.has_error |= bare_status;
    f.beside_payload |= bare_status && top.error.is_none() && top_type.is_none();
    if f.message.is_empty() {
        f.message = [&err.message, &err.alt_message, &top.alt_message]
            .into_iter()
            .find_map(|m| nonempty(m.as_str()))
            .unwrap_or_default();
    }
    let d = &err.details;
    f.detail = nonempty(d.error_code.as_str())
        .or(nonempty(err.inner_code.as_ref().and_then(Leaf::as_str)));
    f.info_reason = nonempty(d.info_reason.as_str());
    f.upstream = nonempty(err.upstream.as_deref().and_then(Leaf::as_str));
    f.per_day = d.per_day;
    f.requests_per_minute = d.requests_per_minute;
    f.retry_delay = d
        .retry_delay
        .as_str()
        .and_then(proto_duration)
        .or_else(|| own_wait(err))
        .or_else(|| own_wait(top));
    f.aws_type = nonempty(top.aws_type.as_str());
    f.original_status = number(&top.original_status).or(number(&err.original_status));

    let google_status = f
        .status
        .is_some_and(|s| s.bytes().all(|c| c.is_ascii_uppercase() || c == b'_'));
    f.shape = if mistral {
        Shape::Mistral
    } else if let Some((Envelope::BaseResp, _)) = envelope {
        Shape::MiniMax
    } else if let Some((Envelope::Header, _)) = envelope {
        Shape::Spark
    } else if top.error.is_none() && coded(top) && matches!(top.error_code, Leaf::Num(_)) {
        Shape::Baidu
    } else if tencent
        || envelope.is_some()
        || (top.error.is_none() && top_type.is_none() && f.has_error)
    {
        Shape::Message
    } else if !f.has_error {
        if f.message.is_empty() {
            Shape::Text
        } else {
            Shape::Message
        }
    } else if top_type == Some("error") && top.error.is_some() {
        Shape::Anthropic
    } else if google_status {
        if body.in_array {
            Shape::GoogleArray
        } else {
            Shape::Google
        }
    } else if (matches!(err.code, Leaf::Str(_)) && f.number.is_some()) || err.inner_code.is_some() {
        Shape::Azure
    } else if f.number.is_some() {
        Shape::OpenRouter
    } else {
        Shape::OpenAi
    };
    f
}

/// The code of an error object: `code`, else Baidu's `error_code` or
/// MiniMax's `status_code`.
fn code_of<'o, 'de>(o: &'o Obj<'de>) -> Option<&'o Leaf<'de>> {
    [&o.code, &o.error_code]
        .into_iter()
        .find(|c| !matches!(c, Leaf::Other))
}

/// Whether a code beside the payload says all is well: `0` (MiniMax,
/// iFlytek), `200`, `"success"`, `"ok"`.
fn says_ok(code: &Leaf<'_>) -> bool {
    match code {
        Leaf::Num(n) => matches!(n, 0 | 200),
        Leaf::Str(s) => {
            let s = s.trim();
            ["0", "200", "success", "ok"]
                .iter()
                .any(|ok| s.eq_ignore_ascii_case(ok))
        }
        Leaf::Other => true,
    }
}

/// A wait an object gives in a field of its own (`retry_after`,
/// `estimated_time`, `retry_after_ms`); zero, negative and absurd values
/// are none.
fn own_wait(o: &Obj<'_>) -> Option<Duration> {
    Duration::try_from_secs_f64(o.own_wait?)
        .ok()
        .filter(|d| !d.is_zero())
}

// === text fallback ===

/// The raw value of the first `"key": <value>` in `text` that `accept`s it
/// (`key` is the quoted key, e.g. `needle!("\"type\"")`): a string's
/// contents up to its closing quote (or the end of a truncated text), or a
/// bare literal up to the next delimiter.
pub(crate) fn field<'a>(
    text: &'a str,
    key: &'static Needle,
    accept: impl Fn(&str) -> bool,
) -> Option<&'a str> {
    // Inside a string a key's quotes are escaped (`\"key\"`), and the
    // needle's closing quote never matches an escaped one: only real keys
    // are found.
    key.find_all(text)
        .find_map(|at| value_after(text, at + key.len()).filter(|v| accept(v)))
}

/// The raw value of a `: <value>` that starts at byte `i` of `text` (just
/// past a quoted key), if one does.
pub(crate) fn value_after(text: &str, i: usize) -> Option<&str> {
    text.get(value_span(text.as_bytes(), i)?)
}

/// [`value_after`] on bytes, for scans that skip UTF-8 validation.
pub(crate) fn value_after_bytes(b: &[u8], i: usize) -> Option<&[u8]> {
    b.get(value_span(b, i)?)
}

/// Where the value of a `: <value>` that starts at byte `i` of `b` lies: a
/// string's contents up to its closing quote (or the end), or a bare
/// literal up to the next delimiter.
fn value_span(b: &[u8], mut i: usize) -> Option<std::ops::Range<usize>> {
    i += b
        .get(i..)?
        .iter()
        .take_while(|c| c.is_ascii_whitespace())
        .count();
    if b.get(i) != Some(&b':') {
        return None;
    }
    i += 1;
    i += b[i..]
        .iter()
        .take_while(|c| c.is_ascii_whitespace())
        .count();
    if b.get(i) == Some(&b'"') {
        let start = i + 1;
        let mut j = start;
        while j < b.len() && b[j] != b'"' {
            j += if b[j] == b'\\' { 2 } else { 1 };
        }
        Some(start..j.min(b.len()))
    } else {
        let len = b[i..]
            .iter()
            .take_while(|c| !matches!(c, b',' | b'}' | b']') && !c.is_ascii_whitespace())
            .count();
        Some(i..i + len)
    }
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
    let code = field(text, needle!("\"code\""), any);
    let to_u16 = |s: &str| s.parse::<u16>().ok().filter(|n| (100..=999).contains(n));
    let mut f = ErrorFacts {
        parsed: false,
        has_error: needle!("\"error\"").is_in(text),
        beside_payload: false,
        detail: field(text, needle!("\"error_code\""), any),
        info_reason: field(text, needle!("\"reason\""), any),
        aws_type: field(text, needle!("\"__type\""), any),
        code: code.filter(|c| !is_number(c)),
        kind: field(text, needle!("\"type\""), |t| t != "error" && !t.is_empty()),
        status: field(text, needle!("\"status\""), |s| !is_number(s)),
        number: code.filter(|c| is_number(c)).and_then(to_u16),
        code_number: code.filter(|c| is_number(c)).and_then(|c| c.parse().ok()),
        original_status: field(text, needle!("\"originalStatusCode\""), is_number).and_then(to_u16),
        message: field(text, needle!("\"message\""), any).unwrap_or(text),
        upstream: field(text, needle!("\"raw\""), |r| !r.is_empty()),
        per_day: needle!("PerDay").is_in(text),
        // A limit is read from a body that parses only: text may be cut.
        requests_per_minute: None,
        retry_delay: field(text, needle!("\"retryDelay\""), any).and_then(proto_duration),
        shape: Shape::Text,
    };
    f.shape = if field(text, needle!("\"object\""), |o| o == "error").is_some() {
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
