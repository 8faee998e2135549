//! What a server in front of a provider reads of a request's body: the
//! model it names, whether it asks for a stream, and where the model's
//! name sits, so that it can be renamed and nothing else touched.
//!
//! A gateway routes an OpenAI- or Anthropic-style request by its `model`,
//! and may send it to a target that calls the same model by another name
//! (an Azure deployment, a dated snapshot). Parsing the body into a JSON
//! tree and writing it back would reorder keys, renumber floats and
//! re-escape strings: the provider would receive a different request than
//! the client sent. [`RequestFields::peek`] instead visits the body once,
//! checks that it is one JSON object, keeps the three members it reads
//! (borrowed from the body) and skips the rest; [`RequestFields::with_model`]
//! splices a new name into the model's place, byte for byte around it.
//!
//! A body that names `model` twice is refused ([`PeekError::DuplicateModel`]):
//! a router that reads the first and a provider that reads the last would
//! disagree about which model is called.
//!
//! ```
//! use levee_core::request::RequestFields;
//!
//! let body = br#"{"model": "gpt-4o", "stream": true, "messages": [{"role": "user", "content": "hi"}]}"#;
//! let fields = RequestFields::peek(body)?;
//! assert_eq!(fields.model(), "gpt-4o");
//! assert!(fields.stream());
//!
//! let renamed = fields.with_model(body, "gpt-4o-2024-08-06");
//! assert_eq!(
//!     renamed,
//!     br#"{"model": "gpt-4o-2024-08-06", "stream": true, "messages": [{"role": "user", "content": "hi"}]}"#
//! );
//! # Ok::<(), levee_core::request::PeekError>(())
//! ```

use std::borrow::Cow;
use std::fmt;
use std::ops::Range;

use serde_core::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;

use crate::json::{Scalar, container, drain_seq, member_names, skip, tolerant};

/// The members of an LLM API request body a gateway reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestFields<'a> {
    model: Cow<'a, str>,
    /// The model's JSON string in the body, quotes included.
    model_at: Range<usize>,
    stream: bool,
    include_usage: bool,
}

impl<'a> RequestFields<'a> {
    /// Reads `body`: it must be one JSON object with a string `model`.
    pub fn peek(body: &'a [u8]) -> Result<Self, PeekError> {
        let mut de = serde_json::Deserializer::from_slice(body);
        let top = Top::deserialize(&mut de).map_err(PeekError::json)?;
        de.end().map_err(PeekError::json)?;
        let Top::Object(members) = top else {
            return Err(PeekError::NotAnObject);
        };
        if members.duplicate_model {
            return Err(PeekError::DuplicateModel);
        }
        let raw = members.model.ok_or(PeekError::NoModel)?.get();
        if !raw.starts_with('"') {
            return Err(PeekError::ModelNotAString);
        }
        // The raw value borrows from `body`: its offset is where it starts.
        let start = (raw.as_ptr() as usize).wrapping_sub(body.as_ptr() as usize);
        let model_at = start..start + raw.len();
        debug_assert_eq!(body.get(model_at.clone()), Some(raw.as_bytes()));
        let model = match serde_json::from_str::<&'a str>(raw) {
            Ok(name) => Cow::Borrowed(name),
            // Escapes (`\u002d`) cannot be borrowed.
            Err(_) => Cow::Owned(serde_json::from_str::<String>(raw).map_err(PeekError::json)?),
        };
        Ok(RequestFields {
            model,
            model_at,
            stream: members.stream,
            include_usage: members.include_usage,
        })
    }

    /// The model the request names.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// Whether it asks for a stream (`"stream": true`).
    pub fn stream(&self) -> bool {
        self.stream
    }

    /// Whether a stream will end with its usage: `"stream_options":
    /// {"include_usage": true}` (OpenAI's streams carry usage only then;
    /// Anthropic's always do).
    pub fn include_usage(&self) -> bool {
        self.include_usage
    }

    /// Where the model's JSON string (quotes included) sits in the body.
    pub fn model_span(&self) -> Range<usize> {
        self.model_at.clone()
    }

    /// `body` (the one peeked) with the model renamed `model`: every other
    /// byte as it was.
    pub fn with_model(&self, body: &[u8], model: &str) -> Vec<u8> {
        rename_model(body, self.model_at.clone(), model).expect("the span was read from this body")
    }
}

#[doc(hidden)]
/// `body` with the JSON string at `span` (a [`RequestFields::model_span`]
/// of it) replaced by `model`, quoted and escaped: every other byte as it
/// was. `None` if `span` is not a JSON string of `body`.
pub fn rename_model(body: &[u8], span: Range<usize>, model: &str) -> Option<Vec<u8>> {
    let Range { start, end } = span;
    let old = body.get(start..end)?;
    if old.len() < 2 || old[0] != b'"' || old[old.len() - 1] != b'"' {
        return None;
    }
    let mut out = Vec::with_capacity(body.len() + model.len() + 2);
    out.extend_from_slice(&body[..start]);
    // A `&str` always serialises; the result is quoted and escaped.
    serde_json::to_writer(&mut out, model).expect("a string serialises");
    out.extend_from_slice(&body[end..]);
    Some(out)
}

/// The members that cap a request's output, by dialect: OpenAI's
/// `max_tokens` and `max_completion_tokens`, the Responses API's
/// `max_output_tokens`, Anthropic's `max_tokens`, Gemini's
/// `maxOutputTokens` (in `generationConfig`) and Bedrock Converse's
/// `maxTokens` (in `inferenceConfig`).
pub const OUTPUT_CAPS: [&str; 5] = [
    "max_tokens",
    "max_completion_tokens",
    "max_output_tokens",
    "maxOutputTokens",
    "maxTokens",
];

/// The output a capped request asks for: the least the Responses API
/// accepts (`max_output_tokens` of 16), and a few tokens elsewhere.
pub const OUTPUT_CAP: u64 = 16;

/// `body` (a JSON request) with every output cap it names ([`OUTPUT_CAPS`],
/// at the top level or in `generationConfig` or `inferenceConfig`) lowered
/// to [`OUTPUT_CAP`]: a copy that asks for little. A request with
/// Anthropic's extended `thinking` keeps its `max_tokens` (it must exceed
/// the thinking budget). `None` if the body is not a JSON object or
/// lowers no cap (a cap is not added: a dialect that does not know a member
/// may reject it).
///
/// ```
/// use levee_core::request::cap_output;
///
/// let body = br#"{"model":"gpt-4o","max_tokens":4096,"messages":[]}"#;
/// let capped = cap_output(body).unwrap();
/// let v: serde_json::Value = serde_json::from_slice(&capped).unwrap();
/// assert_eq!(v["max_tokens"], 16);
/// assert_eq!(cap_output(br#"{"model":"gpt-4o"}"#), None);
/// ```
pub fn cap_output(body: &[u8]) -> Option<Vec<u8>> {
    let mut value: serde_json::Value = serde_json::from_slice(body).ok()?;
    let top = value.as_object_mut()?;
    let thinking = top.contains_key("thinking");
    let mut capped = cap_members(top, thinking);
    for nested in ["generationConfig", "inferenceConfig"] {
        if let Some(config) = top
            .get_mut(nested)
            .and_then(serde_json::Value::as_object_mut)
        {
            capped |= cap_members(config, false);
        }
    }
    capped.then(|| serde_json::to_vec(&value).expect("a value serialises"))
}

fn cap_members(object: &mut serde_json::Map<String, serde_json::Value>, thinking: bool) -> bool {
    let mut capped = false;
    for name in OUTPUT_CAPS {
        if thinking && name == "max_tokens" {
            continue;
        }
        if let Some(v) = object.get_mut(name)
            && v.as_u64().is_some_and(|n| n > OUTPUT_CAP)
        {
            *v = serde_json::Value::from(OUTPUT_CAP);
            capped = true;
        }
    }
    capped
}

/// Why a body could not be read as an LLM API request.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum PeekError {
    /// Not JSON, or not only JSON: where it stops being so.
    NotJson {
        /// 1-based line of the error.
        line: usize,
        /// 1-based column of the error.
        column: usize,
    },
    /// JSON, but not an object.
    NotAnObject,
    /// An object without `model`.
    NoModel,
    /// `model` is not a string.
    ModelNotAString,
    /// `model` named twice.
    DuplicateModel,
}

impl PeekError {
    fn json(e: serde_json::Error) -> Self {
        PeekError::NotJson {
            line: e.line(),
            column: e.column(),
        }
    }
}

impl fmt::Display for PeekError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PeekError::NotJson { line, column } => write!(
                f,
                "the request body is not valid JSON (at line {line}, column {column})"
            ),
            PeekError::NotAnObject => f.write_str("the request body is not a JSON object"),
            PeekError::NoModel => f.write_str("the request body names no `model`"),
            PeekError::ModelNotAString => f.write_str("`model` must be a string"),
            PeekError::DuplicateModel => f.write_str("`model` is named more than once"),
        }
    }
}

impl std::error::Error for PeekError {}

// === the visit ===

/// The top-level value: an object's members, or anything else.
#[derive(Default)]
enum Top<'de> {
    Object(Members<'de>),
    #[default]
    Other,
}

#[derive(Default)]
struct Members<'de> {
    model: Option<&'de RawValue>,
    duplicate_model: bool,
    stream: bool,
    include_usage: bool,
}

enum Key {
    Model,
    Stream,
    StreamOptions,
    IncludeUsage,
    Other,
}

member_names!(Key {
    "model" => Key::Model,
    "stream" => Key::Stream,
    "stream_options" => Key::StreamOptions,
    "include_usage" => Key::IncludeUsage,
    _ => Key::Other,
});

/// `stream_options`: whether it holds `"include_usage": true`.
#[derive(Default)]
struct StreamOptions(bool);

fn stream_options_map<'de, A: MapAccess<'de>>(mut m: A) -> Result<StreamOptions, A::Error> {
    let mut include_usage = false;
    while let Some(key) = m.next_key::<Key>()? {
        match key {
            Key::IncludeUsage => include_usage = m.next_value::<Scalar>()? == Scalar::Bool(true),
            _ => skip(&mut m)?,
        }
    }
    Ok(StreamOptions(include_usage))
}

container!(StreamOptions, map: stream_options_map, seq: drain_seq);

fn top_map<'de, A: MapAccess<'de>>(mut m: A) -> Result<Top<'de>, A::Error> {
    let mut members = Members::default();
    while let Some(key) = m.next_key::<Key>()? {
        match key {
            Key::Model => {
                let raw = m.next_value::<&'de RawValue>()?;
                if members.model.replace(raw).is_some() {
                    members.duplicate_model = true;
                }
            }
            Key::Stream => members.stream = m.next_value::<Scalar>()? == Scalar::Bool(true),
            Key::StreamOptions => members.include_usage = m.next_value::<StreamOptions>()?.0,
            Key::IncludeUsage | Key::Other => skip(&mut m)?,
        }
    }
    Ok(Top::Object(members))
}

container!(Top<'de>, map: top_map, seq: drain_seq);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_gives_its_model_stream_and_usage_option() {
        let body = br#"{"model":"gpt-4o","stream":true,"stream_options":{"include_usage":true},"messages":[]}"#;
        let f = RequestFields::peek(body).unwrap();
        assert_eq!(f.model(), "gpt-4o");
        assert!(f.stream());
        assert!(f.include_usage());
        assert_eq!(&body[f.model_span()], br#""gpt-4o""#);
    }

    #[test]
    fn a_plain_request_is_not_a_stream() {
        let f =
            RequestFields::peek(br#"{"messages":[],"model":"claude-sonnet-4-5","stream":false}"#)
                .unwrap();
        assert_eq!(f.model(), "claude-sonnet-4-5");
        assert!(!f.stream());
        assert!(!f.include_usage());
    }

    #[test]
    fn an_escaped_model_name_is_read_and_renamed_in_place() {
        let body = br#"{ "model" : "gpt\u002d4o" , "n": 1.50 }"#;
        let f = RequestFields::peek(body).unwrap();
        assert_eq!(f.model(), "gpt-4o");
        let renamed = f.with_model(body, "my \"deployment\"");
        assert_eq!(
            renamed,
            br#"{ "model" : "my \"deployment\"" , "n": 1.50 }"#.to_vec()
        );
        assert_eq!(
            RequestFields::peek(&renamed).unwrap().model(),
            "my \"deployment\""
        );
    }

    #[test]
    fn bodies_that_are_not_requests_say_why() {
        let cases: [(&[u8], PeekError); 7] = [
            (b"", PeekError::NotJson { line: 1, column: 0 }),
            (b"{\"model\":", PeekError::NotJson { line: 1, column: 9 }),
            (
                b"{\"model\":\"a\"} x",
                PeekError::NotJson {
                    line: 1,
                    column: 15,
                },
            ),
            (b"[1,2]", PeekError::NotAnObject),
            (b"{\"messages\":[]}", PeekError::NoModel),
            (b"{\"model\":42}", PeekError::ModelNotAString),
            (
                b"{\"model\":\"a\",\"model\":\"b\"}",
                PeekError::DuplicateModel,
            ),
        ];
        for (body, want) in cases {
            assert_eq!(
                RequestFields::peek(body),
                Err(want),
                "{}",
                String::from_utf8_lossy(body)
            );
        }
    }

    #[test]
    fn stream_of_another_type_is_not_a_stream() {
        for body in [
            br#"{"model":"m","stream":"true"}"#.as_slice(),
            br#"{"model":"m","stream":1}"#,
            br#"{"model":"m","stream":null,"stream_options":[true]}"#,
        ] {
            let f = RequestFields::peek(body).unwrap();
            assert!(!f.stream() && !f.include_usage());
        }
    }
}

#[cfg(test)]
mod cap_tests {
    use super::cap_output;

    fn capped(body: &str) -> Option<serde_json::Value> {
        cap_output(body.as_bytes()).map(|b| serde_json::from_slice(&b).unwrap())
    }

    #[test]
    fn every_cap_a_dialect_names_is_lowered_and_the_rest_is_kept() {
        let v = capped(
            r#"{"model":"o3","max_completion_tokens":9000,"max_tokens":100,"messages":[{"role":"user","content":"hi"}],"stream":true}"#,
        )
        .unwrap();
        assert_eq!(
            (
                v["max_completion_tokens"].as_u64(),
                v["max_tokens"].as_u64()
            ),
            (Some(16), Some(16))
        );
        assert_eq!(v["model"], "o3");
        assert_eq!(v["messages"][0]["content"], "hi");
        assert_eq!(v["stream"], true);
        let v = capped(r#"{"input":"hi","max_output_tokens":512}"#).unwrap();
        assert_eq!(v["max_output_tokens"], 16);
        // Below the cap already: nothing to lower.
        assert_eq!(capped(r#"{"max_tokens":8}"#), None);
    }

    #[test]
    fn geminis_and_bedrocks_caps_are_lowered_inside_their_configs() {
        let v = capped(
            r#"{"contents":[],"generationConfig":{"temperature":0.2,"maxOutputTokens":2048}}"#,
        )
        .unwrap();
        assert_eq!(v["generationConfig"]["maxOutputTokens"], 16);
        assert_eq!(v["generationConfig"]["temperature"], 0.2);
        let v = capped(r#"{"messages":[],"inferenceConfig":{"maxTokens":1000}}"#).unwrap();
        assert_eq!(v["inferenceConfig"]["maxTokens"], 16);
    }

    #[test]
    fn anthropics_thinking_keeps_its_max_tokens() {
        let body = r#"{"max_tokens":20000,"thinking":{"type":"enabled","budget_tokens":16000}}"#;
        assert_eq!(capped(body), None);
    }

    #[test]
    fn a_body_with_no_cap_or_not_json_is_left_alone() {
        assert_eq!(capped(r#"{"model":"gpt-4o","messages":[]}"#), None);
        assert_eq!(capped(r#"{"max_tokens":"many"}"#), None);
        assert_eq!(capped("[1,2]"), None);
        assert_eq!(cap_output(b"not json"), None);
        assert_eq!(cap_output(b""), None);
    }
}
