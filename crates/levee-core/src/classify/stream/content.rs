//! Whether an event carries the model's output: the point after which a
//! failed stream can no longer be replaced by another attempt unseen.
//!
//! Before it, a stream holds only bookkeeping: OpenAI's first chunk with
//! the `role` and an empty `content`, Anthropic's `message_start` and
//! `ping`, the Responses API's `response.created`, Cohere's
//! `message-start`, Bedrock's `messageStart`. What counts as content:
//!
//! - an event named (by its SSE `event:`, its JSON `type`, or Bedrock's
//!   `:event-type`) as a delta of the output: `content_block_delta`
//!   (Anthropic: text, tool input, thinking), `response.output_text.delta`
//!   and every other `response.*.delta` (OpenAI Responses),
//!   `content-delta`/`tool-call-delta` (Cohere), `contentBlockDelta`
//!   (Bedrock Converse). The message-level `message_delta` (the stop reason
//!   and usage) is not;
//! - an event with no name whose JSON holds a non-empty output field:
//!   `content`, `text`, `refusal`, `reasoning`, `reasoning_content`,
//!   `thinking` (OpenAI-style chunks from OpenAI, Azure, Mistral, Groq,
//!   OpenRouter, DeepSeek; Gemini's `parts`; Ollama's `message`; Cohere
//!   v1's `text-generation`), `response` (Ollama's generate), `outputText`,
//!   `generation`, `completion` (Bedrock's Titan, Llama and legacy
//!   Anthropic chunks), or a tool call (`tool_calls`, `function_call`,
//!   Gemini's `functionCall`). An empty string, `null`, `[]` or `{}` is not
//!   output.

use super::super::text::Needle;
use super::head::head_type;

/// Whether an event named `name` (empty for none) with JSON `data` carries
/// the model's output.
pub(crate) fn is_content(name: &[u8], data: &[u8]) -> bool {
    if !name.is_empty() {
        return is_delta_name(name);
    }
    match head_type(data) {
        Some(ty) => is_delta_name(ty),
        None => has_output_field(data),
    }
}

/// Whether an event name or type is a delta of the output.
pub(crate) fn is_delta_name(name: &[u8]) -> bool {
    let Some(stem) = name
        .len()
        .checked_sub(5)
        .filter(|&at| name[at..].eq_ignore_ascii_case(b"delta"))
        .map(|at| &name[..at])
    else {
        return false;
    };
    // `message_delta`, `message-delta`, `messageDelta`: the stop reason.
    !stem.is_empty()
        && !stem.eq_ignore_ascii_case(b"message_")
        && !stem.eq_ignore_ascii_case(b"message-")
        && !stem.eq_ignore_ascii_case(b"message")
}

/// Keys whose non-empty value is the model's output: text as a string (or
/// an array of parts), a tool call as an object or array. An object under a
/// text key is structure (Gemini's `content` holds the `role` and `parts`).
static OUTPUT_KEYS: [(Needle, Value); 14] = [
    (Needle::new("\"content\""), Value::Text),
    (Needle::new("\"text\""), Value::Text),
    (Needle::new("\"refusal\""), Value::Text),
    (Needle::new("\"reasoning\""), Value::Text),
    (Needle::new("\"reasoning_content\""), Value::Text),
    (Needle::new("\"thinking\""), Value::Text),
    (Needle::new("\"response\""), Value::Text),
    (Needle::new("\"outputText\""), Value::Text),
    (Needle::new("\"generation\""), Value::Text),
    (Needle::new("\"completion\""), Value::Text),
    (Needle::new("\"tool_calls\""), Value::Call),
    (Needle::new("\"function_call\""), Value::Call),
    (Needle::new("\"functionCall\""), Value::Call),
    (Needle::new("\"toolUse\""), Value::Call),
];

/// What value of an output key is output.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Value {
    /// A non-empty string or array.
    Text,
    /// A non-empty string, array or object.
    Call,
}

/// Whether `data` holds an output key with a non-empty value.
fn has_output_field(data: &[u8]) -> bool {
    OUTPUT_KEYS.iter().any(|(key, kind)| {
        let mut from = 0;
        while let Some(hit) = key.find(&data[from..]) {
            from += hit + key.len();
            if is_output(data, from, *kind) {
                return true;
            }
        }
        false
    })
}

/// Whether the value of the `: <value>` at byte `i` (just past a quoted key)
/// is output of `kind`.
fn is_output(b: &[u8], i: usize, kind: Value) -> bool {
    let skip = |i: usize| {
        i + b.get(i..).map_or(0, |r| {
            r.iter().take_while(|c| c.is_ascii_whitespace()).count()
        })
    };
    let i = skip(i);
    if b.get(i) != Some(&b':') {
        return false;
    }
    let i = skip(i + 1);
    let close = match b.get(i) {
        Some(b'"') => b'"',
        Some(b'[') => b']',
        Some(b'{') if kind == Value::Call => b'}',
        // `null`, a number, a boolean, structure: no output.
        _ => return false,
    };
    let next = if close == b'"' { i + 1 } else { skip(i + 1) };
    // A value cut at the end of the data is no output yet.
    b.get(next).is_some_and(|&c| c != close)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_output_field_is_passed_over_for_a_later_one() {
        assert!(has_output_field(
            br#"{"role":"assistant","content":"","delta":{"content":"hi"}}"#
        ));
        assert!(!has_output_field(
            br#"{"role":"assistant","content":"","n":1}"#
        ));
    }

    #[test]
    fn delta_names_are_content_but_the_message_delta_is_not() {
        for name in [
            "content_block_delta",
            "response.output_text.delta",
            "response.function_call_arguments.delta",
            "response.reasoning_summary_text.delta",
            "content-delta",
            "tool-call-delta",
            "contentBlockDelta",
        ] {
            assert!(is_delta_name(name.as_bytes()), "{name}");
        }
        for name in [
            "message_delta",
            "message-delta",
            "messageDelta",
            "message_start",
            "ping",
            "response.created",
            "response.output_item.added",
            "messageStart",
            "delta",
            "",
        ] {
            assert!(!is_delta_name(name.as_bytes()), "{name}");
        }
    }

    #[test]
    fn an_empty_or_null_output_field_is_not_content() {
        for data in [
            r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}"#,
            r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":null,"refusal":null}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[]}}]}"#,
            r#"{"choices":[],"prompt_filter_results":[{"prompt_index":0,"content_filter_results":{}}]}"#,
            r#"{"model":"llama3","message":{"role":"assistant","content":""},"done":false}"#,
            r#"{"is_finished":false,"event_type":"stream-start","generation_id":"g"}"#,
            r#"{"choices":[{"delta":{"content":"#,
            "{}",
        ] {
            assert!(!is_content(b"", data.as_bytes()), "{data}");
        }
    }

    #[test]
    fn a_non_empty_output_field_is_content() {
        for data in [
            r#"{"choices":[{"index":0,"delta":{"content":"Hel"},"finish_reason":null}]}"#,
            r#"{"choices":[{"delta":{"content" : " "}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":""}}]}}]}"#,
            r#"{"choices":[{"delta":{"reasoning_content":"Let me"}}]}"#,
            r#"{"choices":[{"delta":{"refusal":"I can't"}}]}"#,
            r#"{"candidates": [{"content": {"parts": [{"text": "Okay"}],"role": "model"}}]}"#,
            r#"{"candidates":[{"content":{"parts":[{"functionCall":{"name":"f","args":{}}}]}}]}"#,
            r#"{"model":"llama3","message":{"role":"assistant","content":"The"},"done":false}"#,
            r#"{"model":"llama3","response":"The","done":false}"#,
            r#"{"is_finished":false,"event_type":"text-generation","text":"Hi"}"#,
            r#"{"outputText":"Hi","index":0}"#,
            r#"{"generation":"Hi","stop_reason":null}"#,
            r#"{"choices":[{"text":"Hi","index":0}]}"#,
        ] {
            assert!(is_content(b"", data.as_bytes()), "{data}");
        }
    }

    #[test]
    fn a_typed_event_is_judged_by_its_type_not_its_fields() {
        // `response.created` repeats the request: its `instructions` and
        // metadata are not output.
        let created = r#"{"type":"response.created","response":{"instructions":"Be brief","text":{"format":{"type":"text"}},"metadata":{"text":"x"}}}"#;
        assert!(!is_content(b"", created.as_bytes()));
        assert!(!is_content(b"response.created", created.as_bytes()));
        let start = r#"{"type":"message_start","message":{"role":"assistant","content":[{"type":"text","text":"pre"}]}}"#;
        assert!(!is_content(b"message_start", start.as_bytes()));
        let delta =
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}"#;
        assert!(is_content(b"", delta.as_bytes()));
        assert!(is_content(b"content_block_delta", delta.as_bytes()));
    }
}
