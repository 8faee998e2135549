//! What an answer says about itself, read from its body as it passes: the
//! response's id, the model that served it, why it stopped, what it used,
//! and, for a stream, its chunks.
//!
//! Observability reads these of every call (OpenTelemetry's GenAI
//! conventions name them `gen_ai.response.id`, `gen_ai.response.model`,
//! `gen_ai.response.finish_reasons`, `gen_ai.usage.*`), and each provider
//! puts them somewhere else:
//!
//! | | id | model | why it stopped | usage |
//! |---|---|---|---|---|
//! | OpenAI chat | `id` | `model` | `choices[].finish_reason` | `usage.prompt_tokens`, `completion_tokens` |
//! | OpenAI Responses | `id` (`response.id` in a stream) | `model` | — | `usage.input_tokens`, `output_tokens` |
//! | Anthropic | `id` (`message.id` in a stream) | `model` | `stop_reason` (`delta.stop_reason`) | `usage.input_tokens` + cache reads and writes, `output_tokens` |
//! | Gemini, Vertex | `responseId` | `modelVersion` | `candidates[].finishReason` | `usageMetadata.promptTokenCount`, `candidatesTokenCount` + `thoughtsTokenCount` |
//! | Bedrock Converse | — | — | `stopReason` | `usage.inputTokens` + cache reads and writes, `outputTokens` |
//!
//! An [`AnswerScanner`] is fed the body's bytes in chunks of any size. A
//! server-sent-event stream is read event by event and never held; its
//! chunks are the events that carry the model's output (a text or tool
//! delta: not Anthropic's `message_start` or `ping`, not the Responses
//! API's `response.created`), as Levee's stream watch counts first content.
//! Bedrock's binary event stream (`application/vnd.amazon.eventstream`) is
//! read frame by frame the same way: `ConverseStream`'s `contentBlockDelta`
//! events are its chunks, `messageStop` says why it stopped and `metadata`
//! what it used; `InvokeModelWithResponseStream`'s `chunk` events hold the
//! model's own events (base64), read as that provider's stream events.
//! A plain JSON answer is kept, up to [`MAX_PLAIN`] bytes, and read once at
//! its end. Anything else (a compressed body, an answer too long, a corrupt
//! frame and what follows it) is passed over: no fact is better than a
//! wrong one.
//!
//! ```
//! use levee_core::answer::AnswerScanner;
//!
//! let mut scan = AnswerScanner::new(Some(b"text/event-stream"));
//! let body = concat!(
//!     "data: {\"id\":\"c-1\",\"model\":\"gpt-4o-2024-08-06\",\"choices\":[{\"delta\":{\"content\":\"Hi\"},\"finish_reason\":null}]}\n\n",
//!     "data: {\"id\":\"c-1\",\"model\":\"gpt-4o-2024-08-06\",\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
//!     "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":2}}\n\n",
//!     "data: [DONE]\n\n",
//! );
//! let mut chunks = 0;
//! for piece in body.as_bytes().chunks(10) {
//!     chunks += scan.feed(piece);
//! }
//! let facts = scan.finish();
//! assert_eq!(chunks, 1, "the one event with output");
//! assert_eq!(facts.id.as_deref(), Some("c-1"));
//! assert_eq!(facts.model.as_deref(), Some("gpt-4o-2024-08-06"));
//! assert_eq!(facts.finish_reasons, ["stop"]);
//! let usage = facts.usage.unwrap();
//! assert_eq!((usage.input, usage.output), (9, 2));
//! ```

use std::borrow::Cow;
use std::fmt;
use std::ops::ControlFlow;

use serde_core::de::{Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use crate::classify::{AwsMessage, Frames, aws_chunk_event, is_content, is_delta_name};
use crate::json::{Scalar, member_names, skip};

/// The longest plain answer read whole; a longer one gives no facts.
pub const MAX_PLAIN: usize = 1 << 20;

/// The longest line of a stream read; a longer `data:` line gives no facts
/// (it still counts as a chunk: only output runs that long).
pub const MAX_LINE: usize = 256 << 10;

/// The most finish reasons kept (one per choice or candidate).
const MAX_REASONS: usize = 16;

/// What an answer said about itself. Every member is `None` (or empty)
/// where the answer did not say.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct AnswerFacts {
    /// The response's id.
    pub id: Option<String>,
    /// The model that answered, as the provider names it (often a dated
    /// snapshot of the one asked for).
    pub model: Option<String>,
    /// Why it stopped, one per choice or candidate, as the provider words it.
    pub finish_reasons: Vec<String>,
    /// What it used.
    pub usage: Option<AnswerUsage>,
}

/// The tokens an answer used, as the provider counted them for billing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct AnswerUsage {
    /// Input tokens, cached ones included (Anthropic counts its cache reads
    /// and writes apart: they are added here).
    pub input: u64,
    /// Output tokens, reasoning included.
    pub output: u64,
    /// Input tokens read from the provider's prompt cache, if it said.
    pub cache_read: Option<u64>,
    /// Input tokens written to the provider's prompt cache, if it said.
    pub cache_creation: Option<u64>,
}

/// How the body is framed, from its `content-type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Framing {
    /// One JSON document.
    Json,
    /// Server-sent events.
    Events,
    /// AWS event-stream frames (Bedrock's streams).
    AwsEvents,
    /// Anything else: counted, not read.
    Opaque,
}

/// Reads an answer's [`AnswerFacts`] from its body. See the
/// [module docs](self).
#[derive(Clone)]
pub struct AnswerScanner {
    framing: Framing,
    /// A plain answer so far, or a stream's unfinished line.
    pending: Vec<u8>,
    /// A plain answer outgrew [`MAX_PLAIN`]: it is not read.
    overflowed: bool,
    /// A stream's line outgrew [`MAX_LINE`]: skipped to its end, and
    /// whether it is a `data:` line (a chunk).
    skipping: Option<bool>,
    /// The current event's name (its `event:` line), up to 64 bytes.
    event: Vec<u8>,
    /// An AWS event stream's frames, between chunks.
    frames: Frames,
    facts: AnswerFacts,
    chunks: u64,
}

impl AnswerScanner {
    /// A scanner for a body of `content_type` (the response header's value).
    pub fn new(content_type: Option<&[u8]>) -> Self {
        let framing = match content_type {
            Some(t) if starts_with_ignore_case(t, b"text/event-stream") => Framing::Events,
            Some(t) if starts_with_ignore_case(t, b"application/vnd.amazon.eventstream") => {
                Framing::AwsEvents
            }
            Some(t)
                if starts_with_ignore_case(t, b"application/json")
                    || t.windows(5).any(|w| w.eq_ignore_ascii_case(b"+json")) =>
            {
                Framing::Json
            }
            _ => Framing::Opaque,
        };
        AnswerScanner {
            framing,
            pending: Vec::new(),
            overflowed: false,
            skipping: None,
            event: Vec::new(),
            frames: Frames::default(),
            facts: AnswerFacts::default(),
            chunks: 0,
        }
    }

    /// Whether the body is a stream: of server-sent events, or of AWS
    /// event-stream frames.
    pub fn is_stream(&self) -> bool {
        matches!(self.framing, Framing::Events | Framing::AwsEvents)
    }

    /// Reads the next bytes of the body; returns how many chunks of a
    /// stream they completed.
    pub fn feed(&mut self, bytes: &[u8]) -> u64 {
        match self.framing {
            Framing::Opaque => 0,
            Framing::Json => {
                if !self.overflowed {
                    if self.pending.len() + bytes.len() > MAX_PLAIN {
                        self.overflowed = true;
                        self.pending = Vec::new();
                    } else {
                        self.pending.extend_from_slice(bytes);
                    }
                }
                0
            }
            Framing::Events => {
                let before = self.chunks;
                let mut rest = bytes;
                while let Some(end) = memchr::memchr(b'\n', rest) {
                    let (line, after) = rest.split_at(end);
                    rest = &after[1..];
                    if let Some(data) = self.skipping.take() {
                        // The end of a line too long to read: a chunk if
                        // it was a `data:` line.
                        self.chunks += u64::from(data);
                        self.pending.clear();
                    } else if self.pending.is_empty() {
                        self.line(line);
                    } else if self.pending.len() + line.len() <= MAX_LINE {
                        let mut whole = std::mem::take(&mut self.pending);
                        whole.extend_from_slice(line);
                        self.line(&whole);
                        whole.clear();
                        self.pending = whole;
                    } else {
                        self.chunks += u64::from(starts_data(&self.pending, line));
                        self.pending.clear();
                    }
                }
                if !rest.is_empty() && self.skipping.is_none() {
                    if self.pending.len() + rest.len() > MAX_LINE {
                        self.skipping = Some(starts_data(&self.pending, rest));
                        self.pending.clear();
                    } else {
                        self.pending.extend_from_slice(rest);
                    }
                }
                self.chunks - before
            }
            Framing::AwsEvents => {
                let before = self.chunks;
                let (facts, chunks) = (&mut self.facts, &mut self.chunks);
                let _ = self.frames.feed(bytes, |message| match message {
                    Ok(message) => {
                        *chunks += aws_message(facts, &message);
                        ControlFlow::Continue(())
                    }
                    // Nothing after a corrupt frame is read: the stream
                    // watch says why the stream failed.
                    Err(_) => ControlFlow::Break(()),
                });
                self.chunks - before
            }
        }
    }

    /// The stream's chunks so far: its events that carry output.
    pub fn chunks(&self) -> u64 {
        self.chunks
    }

    /// The facts, once the body has ended: a plain answer is read here, a
    /// stream's last line (without its line break) too.
    pub fn finish(&mut self) -> &AnswerFacts {
        let pending = std::mem::take(&mut self.pending);
        match self.framing {
            Framing::Json if !self.overflowed => self.read(&pending),
            Framing::Events => match self.skipping.take() {
                Some(data) => self.chunks += u64::from(data),
                None if !pending.is_empty() => self.line(&pending),
                None => {}
            },
            _ => {}
        }
        self.overflowed = false;
        &self.facts
    }

    /// The facts read so far (a plain answer's only after [`finish`](Self::finish)).
    pub fn facts(&self) -> &AnswerFacts {
        &self.facts
    }

    /// One line of a stream.
    fn line(&mut self, line: &[u8]) {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            // An event ends: the next names itself anew.
            self.event.clear();
            return;
        }
        if let Some(name) = line.strip_prefix(b"event:") {
            let name = name.strip_prefix(b" ").unwrap_or(name);
            self.event.clear();
            self.event.extend_from_slice(&name[..name.len().min(64)]);
            return;
        }
        let Some(data) = line.strip_prefix(b"data:") else {
            return;
        };
        let data = data.strip_prefix(b" ").unwrap_or(data);
        if data == b"[DONE]" {
            return;
        }
        if line.len() > MAX_LINE {
            // As when it came in pieces: a chunk, unread.
            self.chunks += 1;
            return;
        }
        self.chunks += u64::from(is_content(&self.event, data));
        self.read(data);
    }

    /// One JSON document: merged into the facts.
    fn read(&mut self, document: &[u8]) {
        read(&mut self.facts, document);
    }
}

/// One JSON document: merged into `facts`; anything else ignored.
fn read(facts: &mut AnswerFacts, document: &[u8]) {
    if let Ok(seen) = serde_json::from_slice::<Seen<'_>>(document) {
        seen.merge_into(facts);
    }
}

/// One message of a Bedrock event stream, read into `facts`: the chunks it
/// is (0 or 1). An exception is the stream watch's business.
fn aws_message(facts: &mut AnswerFacts, message: &AwsMessage<'_>) -> u64 {
    if message.message_type.is_some_and(|t| t != "event") {
        return 0;
    }
    match message.event_type {
        // InvokeModel: the model's own event, as a stream's data line.
        Some("chunk") => aws_chunk_event(message.payload).map_or(0, |event| {
            read(facts, &event);
            u64::from(is_content(b"", &event))
        }),
        // Converse: a delta is output; the others say why it stopped
        // (`messageStop`) and what it used (`metadata`).
        Some(name) if is_delta_name(name.as_bytes()) => 1,
        Some(_) => {
            read(facts, message.payload);
            0
        }
        None => 0,
    }
}

impl fmt::Debug for AnswerScanner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AnswerScanner")
            .field("framing", &self.framing)
            .field("chunks", &self.chunks)
            .field("facts", &self.facts)
            .finish_non_exhaustive()
    }
}

fn starts_with_ignore_case(value: &[u8], prefix: &[u8]) -> bool {
    value.len() >= prefix.len() && value[..prefix.len()].eq_ignore_ascii_case(prefix)
}

/// Whether the line that `start` and `more` begin is a `data:` line.
fn starts_data(start: &[u8], more: &[u8]) -> bool {
    const DATA: &[u8] = b"data:";
    let head = start.len().min(DATA.len());
    start[..head] == DATA[..head] && (head == DATA.len() || more.starts_with(&DATA[head..]))
}

// === The reader of one document ===

/// What one JSON document (a plain answer, or one event) said.
#[derive(Default)]
struct Seen<'de> {
    id: Option<Cow<'de, str>>,
    model: Option<Cow<'de, str>>,
    reasons: Vec<Cow<'de, str>>,
    usage: Counts,
    /// `message` (Anthropic's `message_start`) or `response` (OpenAI
    /// Responses' stream events): the same members one level down.
    inner: Option<Box<Seen<'de>>>,
}

/// The token counts one document gave.
#[derive(Default, Clone, Copy)]
struct Counts {
    input: Option<u64>,
    output: Option<u64>,
    /// Added to the input: Anthropic's cache reads and writes, not in its
    /// `input_tokens`.
    cache_read: Option<u64>,
    cache_creation: Option<u64>,
    /// Gemini's thinking tokens, billed as output but not in its
    /// `candidatesTokenCount`.
    thoughts: Option<u64>,
    /// Gemini's cached prompt tokens, already in its `promptTokenCount`.
    cached_within: Option<u64>,
}

impl Counts {
    fn any(&self) -> bool {
        self.input.is_some() || self.output.is_some()
    }
}

impl<'de> Seen<'de> {
    fn merge_into(self, facts: &mut AnswerFacts) {
        if let Some(inner) = self.inner {
            inner.merge_into(facts);
        }
        if facts.id.is_none()
            && let Some(id) = self.id.filter(|s| !s.is_empty())
        {
            facts.id = Some(id.into_owned());
        }
        if facts.model.is_none()
            && let Some(model) = self.model.filter(|s| !s.is_empty())
        {
            facts.model = Some(model.into_owned());
        }
        for reason in self.reasons {
            if facts.finish_reasons.len() < MAX_REASONS {
                facts.finish_reasons.push(reason.into_owned());
            }
        }
        let c = self.usage;
        if c.any() {
            let usage = facts.usage.get_or_insert_with(AnswerUsage::default);
            let cache = c.cache_read.unwrap_or(0) + c.cache_creation.unwrap_or(0);
            if let Some(input) = c.input {
                // Anthropic repeats its input in a stream: the largest is it.
                usage.input = usage.input.max(input.saturating_add(cache));
            }
            if let Some(output) = c.output {
                // Output counts are cumulative where a stream repeats them.
                usage.output = output.saturating_add(c.thoughts.unwrap_or(0));
            }
            if c.cache_read.is_some() || c.cached_within.is_some() {
                usage.cache_read = c.cache_read.or(c.cached_within);
            }
            if c.cache_creation.is_some() {
                usage.cache_creation = c.cache_creation;
            }
        }
    }
}

/// The members of an answer read, matched without allocating.
enum Member {
    Id,
    Model,
    Choices,
    Candidates,
    StopReason,
    Delta,
    Usage,
    UsageMetadata,
    Inner,
    Other,
}

member_names!(Member {
    "id" | "responseId" => Member::Id,
    "model" | "modelVersion" => Member::Model,
    "choices" => Member::Choices,
    "candidates" => Member::Candidates,
    "stop_reason" | "stopReason" => Member::StopReason,
    "delta" => Member::Delta,
    "usage" => Member::Usage,
    "usageMetadata" => Member::UsageMetadata,
    "message" | "response" => Member::Inner,
    _ => Member::Other,
});

/// A string, borrowed from the document where it holds no escapes; any
/// other value is `None`.
struct Text<'de>(Option<Cow<'de, str>>);

impl<'de> Deserialize<'de> for Text<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Text<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any value")
            }
            fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Self::Value, E> {
                Ok(Text(Some(Cow::Borrowed(s))))
            }
            fn visit_str<E>(self, s: &str) -> Result<Self::Value, E> {
                Ok(Text(Some(Cow::Owned(s.to_owned()))))
            }
            fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
                Ok(Text(None))
            }
            fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
                Ok(Text(None))
            }
            fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
                Ok(Text(None))
            }
            fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
                Ok(Text(None))
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(Text(None))
            }
            fn visit_none<E>(self) -> Result<Self::Value, E> {
                Ok(Text(None))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Self::Value, A::Error> {
                while m.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Text(None))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<Self::Value, A::Error> {
                while s.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Text(None))
            }
        }
        d.deserialize_any(V)
    }
}

/// An object read for one member (`finish_reason` of a choice,
/// `finishReason` of a candidate, `stop_reason` of a delta); any other
/// value gives `None`.
struct Reason<'de>(Option<Cow<'de, str>>);

enum ReasonMember {
    Reason,
    Other,
}

member_names!(ReasonMember {
    "finish_reason" | "finishReason" | "stop_reason" => ReasonMember::Reason,
    _ => ReasonMember::Other,
});

impl<'de> Deserialize<'de> for Reason<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Reason<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object")
            }
            crate::json::tolerant!(Reason(None));
            fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
                Ok(Reason(None))
            }
            fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
                Ok(Reason(None))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<Self::Value, A::Error> {
                while s.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Reason(None))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Self::Value, A::Error> {
                let mut reason = None;
                while let Some(key) = m.next_key::<ReasonMember>()? {
                    match key {
                        ReasonMember::Reason => reason = m.next_value::<Text<'de>>()?.0,
                        ReasonMember::Other => skip(&mut m)?,
                    }
                }
                Ok(Reason(reason))
            }
        }
        d.deserialize_any(V)
    }
}

/// The reasons of an array of choices or candidates.
struct Reasons<'de>(Vec<Cow<'de, str>>);

impl<'de> Deserialize<'de> for Reasons<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Reasons<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an array")
            }
            crate::json::tolerant!(Reasons(Vec::new()));
            fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
                Ok(Reasons(Vec::new()))
            }
            fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
                Ok(Reasons(Vec::new()))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Self::Value, A::Error> {
                while m.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Reasons(Vec::new()))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<Self::Value, A::Error> {
                let mut reasons = Vec::new();
                while let Some(Reason(reason)) = s.next_element::<Reason<'de>>()? {
                    reasons.extend(reason);
                }
                Ok(Reasons(reasons))
            }
        }
        d.deserialize_any(V)
    }
}

/// The counted members of a `usage` or `usageMetadata` object.
enum CountMember {
    Input,
    Output,
    CacheRead,
    CacheCreation,
    Thoughts,
    CachedWithin,
    Other,
}

member_names!(CountMember {
    "prompt_tokens" | "input_tokens" | "inputTokens" | "promptTokenCount" => CountMember::Input,
    "completion_tokens" | "output_tokens" | "outputTokens" | "candidatesTokenCount" => CountMember::Output,
    "cache_read_input_tokens" | "cacheReadInputTokens" => CountMember::CacheRead,
    "cache_creation_input_tokens" | "cacheWriteInputTokens" => CountMember::CacheCreation,
    "thoughtsTokenCount" => CountMember::Thoughts,
    "cachedContentTokenCount" => CountMember::CachedWithin,
    _ => CountMember::Other,
});

impl<'de> Deserialize<'de> for Counts {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Counts;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a usage object")
            }
            crate::json::tolerant!(Counts::default());
            fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
                Ok(Counts::default())
            }
            fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
                Ok(Counts::default())
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<Self::Value, A::Error> {
                while s.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Counts::default())
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Self::Value, A::Error> {
                let mut c = Counts::default();
                while let Some(key) = m.next_key::<CountMember>()? {
                    let slot = match key {
                        CountMember::Input => &mut c.input,
                        CountMember::Output => &mut c.output,
                        CountMember::CacheRead => &mut c.cache_read,
                        CountMember::CacheCreation => &mut c.cache_creation,
                        CountMember::Thoughts => &mut c.thoughts,
                        CountMember::CachedWithin => &mut c.cached_within,
                        CountMember::Other => {
                            skip(&mut m)?;
                            continue;
                        }
                    };
                    if let Scalar::Count(n) = m.next_value::<Scalar>()? {
                        *slot = Some(n);
                    }
                }
                Ok(c)
            }
        }
        d.deserialize_any(V)
    }
}

impl<'de> Deserialize<'de> for Seen<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Seen<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an answer")
            }
            crate::json::tolerant!(Seen::default());
            fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
                Ok(Seen::default())
            }
            fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
                Ok(Seen::default())
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<Self::Value, A::Error> {
                while s.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Seen::default())
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Self::Value, A::Error> {
                let mut seen = Seen::default();
                while let Some(key) = m.next_key::<Member>()? {
                    match key {
                        Member::Id => seen.id = m.next_value::<Text<'de>>()?.0,
                        Member::Model => seen.model = m.next_value::<Text<'de>>()?.0,
                        Member::Choices | Member::Candidates => {
                            seen.reasons.extend(m.next_value::<Reasons<'de>>()?.0);
                        }
                        Member::StopReason => seen.reasons.extend(m.next_value::<Text<'de>>()?.0),
                        Member::Delta => seen.reasons.extend(m.next_value::<Reason<'de>>()?.0),
                        Member::Usage | Member::UsageMetadata => {
                            let counts = m.next_value::<Counts>()?;
                            if counts.any() {
                                seen.usage = counts;
                            }
                        }
                        Member::Inner => {
                            seen.inner = Some(Box::new(m.next_value::<Seen<'de>>()?));
                        }
                        Member::Other => skip(&mut m)?,
                    }
                }
                Ok(seen)
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan(content_type: &str, body: &str, piece: usize) -> (AnswerFacts, u64) {
        let mut s = AnswerScanner::new(Some(content_type.as_bytes()));
        let mut fed = 0;
        for p in body.as_bytes().chunks(piece.max(1)) {
            fed += s.feed(p);
        }
        assert_eq!(fed, s.chunks(), "feed returns the chunks it completed");
        let facts = s.finish().clone();
        (facts, s.chunks())
    }

    #[test]
    fn a_plain_openai_answer_gives_its_id_model_reasons_and_usage() {
        let body = r#"{"id":"chatcmpl-1","object":"chat.completion","model":"gpt-4o-2024-08-06","choices":[{"index":0,"message":{"role":"assistant","content":"Hi","refusal":null},"finish_reason":"stop"},{"index":1,"message":{"content":"Yo"},"finish_reason":"length"}],"usage":{"prompt_tokens":9,"completion_tokens":12,"total_tokens":21,"prompt_tokens_details":{"cached_tokens":4}}}"#;
        for piece in [1, 7, body.len()] {
            let (facts, chunks) = scan("application/json; charset=utf-8", body, piece);
            assert_eq!(facts.id.as_deref(), Some("chatcmpl-1"));
            assert_eq!(facts.model.as_deref(), Some("gpt-4o-2024-08-06"));
            assert_eq!(facts.finish_reasons, ["stop", "length"]);
            let u = facts.usage.unwrap();
            assert_eq!((u.input, u.output), (9, 12));
            assert_eq!(chunks, 0, "a plain answer has no chunks");
        }
    }

    #[test]
    fn an_anthropic_stream_adds_cache_tokens_to_its_input_and_reads_its_stop_reason() {
        let body = concat!(
            "event: message_start\n",
            "data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"model\":\"claude-sonnet-4-5-20250929\",\"usage\":{\"input_tokens\":25,\"cache_read_input_tokens\":100,\"cache_creation_input_tokens\":5,\"output_tokens\":1}}}\n\n",
            "event: content_block_delta\n",
            "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n",
            "event: message_delta\n",
            "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":15}}\n\n",
            "event: message_stop\n",
            "data: {\"type\":\"message_stop\"}\n\n",
        );
        for piece in [1, 3, 64, body.len()] {
            let (facts, chunks) = scan("text/event-stream", body, piece);
            assert_eq!(chunks, 1, "piece {piece}: the one delta of output");
            assert_eq!(facts.id.as_deref(), Some("msg_1"));
            assert_eq!(facts.model.as_deref(), Some("claude-sonnet-4-5-20250929"));
            assert_eq!(facts.finish_reasons, ["end_turn"]);
            let u = facts.usage.unwrap();
            assert_eq!((u.input, u.output), (130, 15));
            assert_eq!((u.cache_read, u.cache_creation), (Some(100), Some(5)));
        }
    }

    #[test]
    fn a_plain_anthropic_answer_reads_its_top_level_stop_reason() {
        let body = r#"{"id":"msg_2","type":"message","model":"claude-haiku-4-5","content":[{"type":"text","text":"ok"}],"stop_reason":"max_tokens","usage":{"input_tokens":3,"output_tokens":1}}"#;
        let (facts, _) = scan("application/json", body, 5);
        assert_eq!(facts.finish_reasons, ["max_tokens"]);
        assert_eq!(facts.usage.map(|u| (u.input, u.output)), Some((3, 1)));
    }

    #[test]
    fn a_gemini_stream_reads_model_version_response_id_and_thoughts_as_output() {
        let body = concat!(
            "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"a\"}]}}],\"modelVersion\":\"gemini-2.5-pro\",\"responseId\":\"r-9\"}\r\n\r\n",
            "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"b\"}]},\"finishReason\":\"STOP\"}],\"usageMetadata\":{\"promptTokenCount\":8,\"candidatesTokenCount\":2,\"thoughtsTokenCount\":30,\"cachedContentTokenCount\":4},\"modelVersion\":\"gemini-2.5-pro\",\"responseId\":\"r-9\"}\r\n\r\n",
        );
        let (facts, chunks) = scan("text/event-stream", body, 11);
        assert_eq!(chunks, 2);
        assert_eq!(facts.id.as_deref(), Some("r-9"));
        assert_eq!(facts.model.as_deref(), Some("gemini-2.5-pro"));
        assert_eq!(facts.finish_reasons, ["STOP"]);
        let u = facts.usage.unwrap();
        assert_eq!((u.input, u.output, u.cache_read), (8, 32, Some(4)));
    }

    #[test]
    fn an_openai_responses_stream_reads_the_completed_response() {
        let body = concat!(
            "event: response.output_text.delta\n",
            "data: {\"type\":\"response.output_text.delta\",\"item_id\":\"m\",\"delta\":\"Hi\"}\n\n",
            "event: response.completed\n",
            "data: {\"type\":\"response.completed\",\"response\":{\"id\":\"resp_1\",\"model\":\"gpt-5\",\"status\":\"completed\",\"usage\":{\"input_tokens\":11,\"output_tokens\":7}}}\n\n",
        );
        let (facts, chunks) = scan("text/event-stream; charset=utf-8", body, 9);
        assert_eq!(chunks, 1, "the text delta; not the completed response");
        assert_eq!(facts.id.as_deref(), Some("resp_1"));
        assert_eq!(facts.model.as_deref(), Some("gpt-5"));
        assert_eq!(facts.usage.map(|u| (u.input, u.output)), Some((11, 7)));
    }

    #[test]
    fn a_bedrock_converse_answer_reads_its_stop_reason_and_camel_case_usage() {
        let body = r#"{"output":{"message":{"role":"assistant","content":[{"text":"ok"}]}},"stopReason":"end_turn","usage":{"inputTokens":30,"outputTokens":4,"totalTokens":34},"metrics":{"latencyMs":120}}"#;
        let (facts, _) = scan("application/json", body, 13);
        assert_eq!(facts.finish_reasons, ["end_turn"]);
        assert_eq!(facts.usage.map(|u| (u.input, u.output)), Some((30, 4)));
        assert_eq!(facts.id, None);
    }

    #[test]
    fn escaped_strings_are_read_and_odd_values_are_passed_over() {
        let body = r#"{"id":"a\u002db","model":7,"choices":[null,{"finish_reason":null},{"finish_reason":"stop"},3],"usage":"none"}"#;
        let (facts, _) = scan("application/json", body, 4);
        assert_eq!(facts.id.as_deref(), Some("a-b"));
        assert_eq!(facts.model, None);
        assert_eq!(facts.finish_reasons, ["stop"]);
        assert_eq!(facts.usage, None);
    }

    #[test]
    fn malformed_or_unframed_bodies_give_no_facts_and_no_panic() {
        for (ct, body) in [
            ("application/json", "{\"id\":\"x\",\"model\":"),
            ("application/json", "not json"),
            ("application/vnd.amazon.eventstream", "\0\0\0\x10binary"),
            ("text/plain", "{\"id\":\"x\"}"),
        ] {
            let (facts, chunks) = scan(ct, body, 3);
            assert_eq!(facts, AnswerFacts::default(), "{ct}: {body}");
            assert_eq!(chunks, 0);
        }
        // A broken event among good ones loses only itself.
        let (facts, chunks) = scan(
            "text/event-stream",
            "data: {oops\n\ndata: {\"model\":\"m\",\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\ndata: [DONE]\n",
            2,
        );
        assert_eq!((facts.model.as_deref(), chunks), (Some("m"), 1));
    }

    /// A Bedrock event-stream message of `event_type` carrying `payload`.
    fn aws_event(event_type: &str, payload: &str) -> Vec<u8> {
        use crate::classify::eventstream_tests::{Value, frame};
        frame(
            &[
                (":message-type", Value::Str("event")),
                (":event-type", Value::Str(event_type)),
                (":content-type", Value::Str("application/json")),
            ],
            payload.as_bytes(),
        )
    }

    fn scan_bytes(content_type: &str, body: &[u8], piece: usize) -> (AnswerFacts, u64) {
        let mut s = AnswerScanner::new(Some(content_type.as_bytes()));
        assert!(s.is_stream());
        let fed: u64 = body.chunks(piece.max(1)).map(|p| s.feed(p)).sum();
        assert_eq!(fed, s.chunks());
        (s.finish().clone(), s.chunks())
    }

    #[test]
    fn a_converse_stream_gives_its_chunks_stop_reason_and_usage_with_cache() {
        let body = [
            aws_event("messageStart", r#"{"role":"assistant"}"#),
            aws_event("contentBlockDelta", r#"{"contentBlockIndex":0,"delta":{"text":"Hi"}}"#),
            aws_event("contentBlockDelta", r#"{"contentBlockIndex":0,"delta":{"text":" there"}}"#),
            aws_event("contentBlockStop", r#"{"contentBlockIndex":0}"#),
            aws_event("messageStop", r#"{"stopReason":"end_turn"}"#),
            aws_event(
                "metadata",
                r#"{"usage":{"inputTokens":12,"outputTokens":3,"totalTokens":115,"cacheReadInputTokens":100,"cacheWriteInputTokens":0},"metrics":{"latencyMs":210}}"#,
            ),
        ]
        .concat();
        for piece in [1, 5, 64, body.len()] {
            let (facts, chunks) = scan_bytes("application/vnd.amazon.eventstream", &body, piece);
            assert_eq!(chunks, 2, "the two deltas");
            assert_eq!(facts.finish_reasons, ["end_turn"]);
            let u = facts.usage.unwrap();
            assert_eq!((u.input, u.output), (112, 3), "input with its cache reads");
            assert_eq!((u.cache_read, u.cache_creation), (Some(100), Some(0)));
            assert_eq!(
                (facts.id, facts.model),
                (None, None),
                "Bedrock names neither"
            );
        }
    }

    #[test]
    fn an_invoke_model_stream_reads_the_models_own_events_inside_its_chunks() {
        let b64 = |event: &str| {
            // Standard base64, as Bedrock sends `bytes`.
            const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
            let mut out = String::new();
            for c in event.as_bytes().chunks(3) {
                let n = c.iter().fold(0u32, |n, &b| n << 8 | u32::from(b)) << (8 * (3 - c.len()));
                for i in 0..4 {
                    out.push(if i <= c.len() {
                        A[(n >> (18 - 6 * i)) as usize & 63] as char
                    } else {
                        '='
                    });
                }
            }
            format!(r#"{{"bytes":"{out}"}}"#)
        };
        let body = [
            aws_event("chunk", &b64(r#"{"type":"message_start","message":{"id":"msg_bdrk_1","model":"claude-3-5-haiku-20241022","usage":{"input_tokens":21,"output_tokens":1}}}"#)),
            aws_event("chunk", &b64(r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}"#)),
            aws_event("chunk", &b64(r#"{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":4}}"#)),
            aws_event("chunk", &b64(r#"{"type":"message_stop","amazon-bedrock-invocationMetrics":{"inputTokenCount":21,"outputTokenCount":4}}"#)),
        ]
        .concat();
        for piece in [3, body.len()] {
            let (facts, chunks) = scan_bytes("application/vnd.amazon.eventstream", &body, piece);
            assert_eq!(chunks, 1);
            assert_eq!(facts.id.as_deref(), Some("msg_bdrk_1"));
            assert_eq!(facts.model.as_deref(), Some("claude-3-5-haiku-20241022"));
            assert_eq!(facts.finish_reasons, ["end_turn"]);
            assert_eq!(facts.usage.map(|u| (u.input, u.output)), Some((21, 4)));
        }
    }

    #[test]
    fn an_event_stream_exception_or_a_corrupt_frame_ends_what_is_read() {
        use crate::classify::eventstream_tests::{Value, frame};
        let exception = frame(
            &[
                (":message-type", Value::Str("exception")),
                (":exception-type", Value::Str("throttlingException")),
            ],
            br#"{"message":"Too many requests","usage":{"inputTokens":99}}"#,
        );
        let mut corrupt = aws_event("contentBlockDelta", r#"{"delta":{"text":"x"}}"#);
        let last = corrupt.len() - 1;
        corrupt[last] ^= 0xff;
        let body = [
            aws_event("contentBlockDelta", r#"{"delta":{"text":"a"}}"#),
            exception,
            corrupt,
            aws_event(
                "metadata",
                r#"{"usage":{"inputTokens":1,"outputTokens":1}}"#,
            ),
        ]
        .concat();
        let (facts, chunks) = scan_bytes("application/vnd.amazon.eventstream", &body, 7);
        assert_eq!(
            chunks, 1,
            "the delta before the exception; none after the corrupt frame"
        );
        assert_eq!(
            facts.usage, None,
            "an exception's payload is not the answer's usage"
        );
    }

    #[test]
    fn a_plain_answer_past_the_bound_gives_no_facts() {
        let mut s = AnswerScanner::new(Some(b"application/json"));
        s.feed(b"{\"id\":\"x\",\"pad\":\"");
        s.feed(&vec![b'a'; MAX_PLAIN]);
        s.feed(b"\"}");
        assert_eq!(s.finish(), &AnswerFacts::default());
    }

    #[test]
    fn a_stream_line_past_the_bound_still_counts_as_a_chunk_and_the_next_is_read() {
        let mut s = AnswerScanner::new(Some(b"text/event-stream"));
        let mut chunks = s.feed(b"data: {\"pad\":\"");
        chunks += s.feed(&vec![b'a'; MAX_LINE]);
        chunks += s.feed(b"\"}\n\ndata: {\"model\":\"m\"}\n\n");
        assert_eq!(chunks, 1, "the long line; the short one has no output");
        assert_eq!(s.finish().model.as_deref(), Some("m"));
    }

    proptest::proptest! {
        /// However a body is cut, it gives the facts and chunks it gives whole.
        #[test]
        fn any_cut_of_a_stream_gives_the_facts_of_the_whole(cuts in proptest::collection::vec(0usize..400, 0..12)) {
            let body = concat!(
                "event: message_start\r\n",
                "data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"model\":\"c\\u002d4\",\"usage\":{\"input_tokens\":25}}}\r\n\r\n",
                ": ping\n\n",
                "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"},\"finish_reason\":\"stop\"}],\"usage\":{\"output_tokens\":15}}\n\n",
                "data: [DONE]\n\n",
            ).as_bytes();
            let mut whole = AnswerScanner::new(Some(b"text/event-stream"));
            whole.feed(body);
            let mut cut = AnswerScanner::new(Some(b"text/event-stream"));
            let mut points: Vec<usize> = cuts.into_iter().map(|c| c.min(body.len())).collect();
            points.sort_unstable();
            let mut at = 0;
            for p in points.into_iter().chain([body.len()]) {
                cut.feed(&body[at..p]);
                at = p;
            }
            proptest::prop_assert_eq!(cut.chunks(), 1);
            proptest::prop_assert_eq!(cut.finish(), whole.finish());
            proptest::prop_assert_eq!(whole.facts().model.as_deref(), Some("c-4"));
        }
    }

    #[test]
    fn a_last_line_without_its_break_is_read_at_the_end() {
        let mut s = AnswerScanner::new(Some(b"text/event-stream"));
        assert_eq!(
            s.feed(b"data: {\"model\":\"m\",\"choices\":[{\"delta\":{\"content\":\"x\"}}]}"),
            0
        );
        assert_eq!(s.finish().model.as_deref(), Some("m"));
        assert_eq!(s.chunks(), 1);
    }
}
