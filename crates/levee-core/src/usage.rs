//! The tokens an answer used, read from its body as it passes.
//!
//! Providers say what a call cost in a `usage` object: at the end of a
//! plain answer (OpenAI's `prompt_tokens`/`completion_tokens`/`total_tokens`,
//! Anthropic's and the Responses API's `input_tokens`/`output_tokens`), in
//! the last event of an OpenAI stream (only when the request asked for it
//! with `stream_options.include_usage`), and twice in an Anthropic stream
//! (`message_start` with the input, `message_delta` with the output so far).
//! A [`UsageScanner`] is fed the body's bytes as they go by, in chunks of
//! any size, and keeps only what it needs: it finds each `"usage"` member,
//! reads the object after it (up to 4 KiB), and never holds the body.
//!
//! When no usage comes, it still counts what can be counted: the bytes and
//! the stream's events. [`UsageScanner::tokens`] turns those into an
//! estimate (an event of a stream carries about one token; a plain
//! answer's text runs about four bytes a token), so that a per-client
//! token limit still binds on answers that do not say what they cost.
//!
//! ```
//! use levee_core::usage::UsageScanner;
//!
//! let mut scan = UsageScanner::new();
//! // An Anthropic stream, cut anywhere.
//! let body = concat!(
//!     "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":25,\"output_tokens\":1}}}\n\n",
//!     "event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":15}}\n\n",
//! );
//! for chunk in body.as_bytes().chunks(7) {
//!     scan.feed(chunk);
//! }
//! let usage = scan.usage().unwrap();
//! assert_eq!((usage.input, usage.output, usage.total()), (25, 15, 40));
//! ```

use std::fmt;

use serde_core::de::{Deserialize, Deserializer, MapAccess, Visitor};

use crate::classify::text::{Needle, needle};
use crate::json::{Scalar, member_names, skip};

/// What a call used, as its provider reported it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Usage {
    /// Input (prompt) tokens.
    pub input: u64,
    /// Output (completion) tokens.
    pub output: u64,
    /// The total the provider reported, if it did.
    pub reported_total: Option<u64>,
}

impl Usage {
    /// The tokens in all: the provider's total where it gave one (it may
    /// count reasoning or cached tokens apart), else input and output.
    pub fn total(&self) -> u64 {
        self.reported_total
            .unwrap_or(0)
            .max(self.input.saturating_add(self.output))
    }
}

/// The longest `usage` object read; a longer one is skipped.
const MAX_OBJECT: usize = 4096;

/// Bytes of a plain answer counted as one token when no usage is reported.
pub const BYTES_PER_TOKEN: u64 = 4;

/// The key a usage object follows.
fn usage_key() -> &'static Needle {
    needle!("\"usage\"")
}

/// The field a server-sent event's data starts with, at a line's start.
fn event_field() -> &'static Needle {
    needle!("\ndata:")
}

/// Reads the `usage` of an answer from its bytes, chunk by chunk. See the
/// [module docs](self).
#[derive(Clone, Default)]
pub struct UsageScanner {
    state: State,
    usage: Option<Usage>,
    /// The last bytes seen, for an event's `data:` cut in two.
    carry: Carry,
    /// The last bytes searched for a key and not consumed since (by a key
    /// found, or the object after it), for a key cut in two.
    unsearched: Carry,
    bytes: u64,
    events: u64,
}

#[derive(Clone, Default)]
enum State {
    #[default]
    Search,
    /// After `"usage"`: whitespace, then `:`.
    Colon,
    /// After the colon: whitespace, then the value.
    Value,
    /// Inside the object.
    Object(Box<Capture>),
}

#[derive(Clone, Default)]
struct Capture {
    bytes: Vec<u8>,
    depth: u32,
    in_string: bool,
    escaped: bool,
}

/// Up to 7 bytes kept from a chunk's end.
#[derive(Clone, Copy, Default)]
struct Carry {
    bytes: [u8; 7],
    len: u8,
}

impl Carry {
    fn line_start() -> Self {
        let mut carry = Carry::default();
        carry.bytes[0] = b'\n';
        carry.len = 1;
        carry
    }

    fn as_slice(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }

    /// Keeps the last bytes of `prev ++ chunk`.
    fn keep(&mut self, chunk: &[u8]) {
        let want = self.bytes.len();
        if chunk.len() >= want {
            self.bytes.copy_from_slice(&chunk[chunk.len() - want..]);
            self.len = want as u8;
        } else {
            let mut joined = [0u8; 14];
            let prev = self.as_slice();
            joined[..prev.len()].copy_from_slice(prev);
            joined[prev.len()..prev.len() + chunk.len()].copy_from_slice(chunk);
            let all = &joined[..prev.len() + chunk.len()];
            let keep = all.len().min(want);
            self.bytes[..keep].copy_from_slice(&all[all.len() - keep..]);
            self.len = keep as u8;
        }
    }
}

impl UsageScanner {
    /// A scanner that has seen nothing.
    pub fn new() -> Self {
        UsageScanner::default()
    }

    /// Reads the next bytes of the body.
    pub fn feed(&mut self, chunk: &[u8]) {
        if chunk.is_empty() {
            return;
        }
        // The body begins as if after a line break, so that a first line
        // `data:` counts as an event.
        let carry = if self.bytes == 0 {
            Carry::line_start()
        } else {
            self.carry
        };
        self.bytes = self.bytes.saturating_add(chunk.len() as u64);
        self.events += count_across(carry.as_slice(), chunk, event_field());
        self.carry = carry;
        self.carry.keep(chunk);

        let mut at = 0;
        // Bytes before this were consumed in this chunk: a key found, or
        // what follows one; none of them may start another key.
        let mut consumed = 0;
        while at < chunk.len() {
            let state_before = std::mem::discriminant(&self.state);
            at = match &mut self.state {
                State::Search => {
                    // The unsearched bytes precede the chunk's first byte only.
                    let before = if at == 0 {
                        self.unsearched.as_slice()
                    } else {
                        &[]
                    };
                    match find_across(before, &chunk[at..], usage_key()) {
                        Some(end) => {
                            self.state = State::Colon;
                            at + end
                        }
                        None => chunk.len(),
                    }
                }
                State::Colon => {
                    let (next, b) = skip_space(chunk, at);
                    match b {
                        Some(b':') => {
                            self.state = State::Value;
                            next + 1
                        }
                        Some(_) => {
                            self.state = State::Search;
                            next
                        }
                        None => next,
                    }
                }
                State::Value => {
                    let (next, b) = skip_space(chunk, at);
                    match b {
                        Some(b'{') => {
                            // Most objects end in the chunk they start in:
                            // read them there, copying nothing.
                            let mut capture = Capture {
                                depth: 1,
                                ..Capture::default()
                            };
                            let limit = chunk.len().min(next + MAX_OBJECT);
                            match capture.scan(&chunk[next + 1..limit]).0 {
                                Taken::Done(n) => {
                                    self.state = State::Search;
                                    self.record(&chunk[next..next + 1 + n]);
                                    next + 1 + n
                                }
                                _ if limit < chunk.len() => {
                                    self.state = State::Search;
                                    limit
                                }
                                _ => {
                                    capture.bytes = chunk[next..].to_vec();
                                    self.state = State::Object(Box::new(capture));
                                    chunk.len()
                                }
                            }
                        }
                        // `null`, or not an object: not a usage.
                        Some(_) => {
                            self.state = State::Search;
                            next
                        }
                        None => next,
                    }
                }
                State::Object(capture) => match capture.take(&chunk[at..]) {
                    Taken::More => chunk.len(),
                    Taken::Done(used) => {
                        let object = std::mem::take(&mut capture.bytes);
                        self.state = State::Search;
                        self.record(&object);
                        at + used
                    }
                    Taken::TooLong(used) => {
                        self.state = State::Search;
                        at + used
                    }
                },
            };
            if !matches!(self.state, State::Search)
                || std::mem::discriminant(&self.state) != state_before
            {
                consumed = at;
            }
        }
        if !matches!(self.state, State::Search) {
            self.unsearched = Carry::default();
        } else if consumed > 0 {
            self.unsearched = Carry::default();
            self.unsearched.keep(&chunk[consumed..]);
        } else {
            self.unsearched.keep(chunk);
        }
    }

    /// What the answer reported, merged over every `usage` seen: the
    /// largest input, the last output, the last total.
    pub fn usage(&self) -> Option<Usage> {
        self.usage
    }

    /// Bytes seen.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Server-sent events seen (`data:` lines).
    pub fn events(&self) -> u64 {
        self.events
    }

    /// The tokens the answer used: its reported usage, else an estimate of
    /// its output (a stream's events, or a plain body's bytes over
    /// [`BYTES_PER_TOKEN`]) plus `prompt_estimate`.
    pub fn tokens(&self, prompt_estimate: u64) -> u64 {
        match self.usage {
            Some(usage) => usage.total(),
            None if self.events > 0 => self.events.saturating_add(prompt_estimate),
            None => (self.bytes / BYTES_PER_TOKEN).saturating_add(prompt_estimate),
        }
    }

    fn record(&mut self, object: &[u8]) {
        let Ok(seen) = serde_json::from_slice::<Seen>(object) else {
            return;
        };
        if seen.input.is_none() && seen.output.is_none() && seen.total.is_none() {
            return;
        }
        let usage = self.usage.get_or_insert_with(Usage::default);
        if let Some(input) = seen.input {
            usage.input = usage.input.max(input);
        }
        if let Some(output) = seen.output {
            usage.output = output;
        }
        if seen.total.is_some() {
            usage.reported_total = seen.total;
        }
    }
}

impl fmt::Debug for UsageScanner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UsageScanner")
            .field("usage", &self.usage)
            .field("bytes", &self.bytes)
            .field("events", &self.events)
            .finish_non_exhaustive()
    }
}

enum Taken {
    /// The object goes on past this chunk.
    More,
    /// The object ended after this many bytes of the chunk.
    Done(usize),
    /// Too long to be a usage: skipped after this many bytes.
    TooLong(usize),
}

impl Capture {
    /// Reads on from `chunk`: the object's end, if it is in it, and keeps
    /// what was read (one copy, however many bytes).
    fn take(&mut self, chunk: &[u8]) -> Taken {
        let room = MAX_OBJECT.saturating_sub(self.bytes.len());
        let (taken, used) = self.scan(&chunk[..chunk.len().min(room)]);
        self.bytes.extend_from_slice(&chunk[..used]);
        match taken {
            Taken::More if chunk.len() > room => Taken::TooLong(room),
            taken => taken,
        }
    }

    /// The bytes of `chunk` that belong to the object, and whether it ends there.
    fn scan(&mut self, chunk: &[u8]) -> (Taken, usize) {
        for (i, &b) in chunk.iter().enumerate() {
            if self.in_string {
                match b {
                    _ if self.escaped => self.escaped = false,
                    b'\\' => self.escaped = true,
                    b'"' => self.in_string = false,
                    _ => {}
                }
                continue;
            }
            match b {
                b'"' => self.in_string = true,
                b'{' => self.depth += 1,
                b'}' => {
                    self.depth -= 1;
                    if self.depth == 0 {
                        return (Taken::Done(i + 1), i + 1);
                    }
                }
                _ => {}
            }
        }
        (Taken::More, chunk.len())
    }
}

/// The position of the first byte at or after `at` that is not JSON
/// whitespace, and that byte.
fn skip_space(chunk: &[u8], at: usize) -> (usize, Option<u8>) {
    match chunk[at..]
        .iter()
        .position(|b| !matches!(b, b' ' | b'\t' | b'\r' | b'\n'))
    {
        Some(i) => (at + i, Some(chunk[at + i])),
        None => (chunk.len(), None),
    }
}

/// Where in `chunk` the first `needle` that starts in `carry ++ chunk`
/// ends (an index into `chunk`), if one does.
fn find_across(carry: &[u8], chunk: &[u8], needle: &Needle) -> Option<usize> {
    if let Some(end) = straddling(carry, chunk, needle.text().as_bytes()) {
        return Some(end);
    }
    needle.find(chunk).map(|at| at + needle.len())
}

/// How many `needle`s end in `chunk`, counting one cut by the boundary.
fn count_across(carry: &[u8], chunk: &[u8], needle: &Needle) -> u64 {
    let straddle = u64::from(straddling(carry, chunk, needle.text().as_bytes()).is_some());
    straddle + needle.count(chunk) as u64
}

/// The end (in `chunk`) of a `needle` that starts in `carry` and ends in
/// `chunk`.
fn straddling(carry: &[u8], chunk: &[u8], needle: &[u8]) -> Option<usize> {
    (1..needle.len()).rev().find_map(|in_carry| {
        let in_chunk = needle.len() - in_carry;
        (carry.ends_with(&needle[..in_carry]) && chunk.starts_with(&needle[in_carry..]))
            .then_some(in_chunk)
    })
}

/// The counts of one `usage` object.
#[derive(Default)]
struct Seen {
    input: Option<u64>,
    output: Option<u64>,
    total: Option<u64>,
}

/// The members of a `usage` object that are counted, matched without
/// allocating.
enum Count {
    Input,
    Output,
    Total,
    Other,
}

member_names!(Count {
    "prompt_tokens" | "input_tokens" => Count::Input,
    "completion_tokens" | "output_tokens" => Count::Output,
    "total_tokens" => Count::Total,
    _ => Count::Other,
});

impl<'de> Deserialize<'de> for Seen {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Seen;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a usage object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Seen, A::Error> {
                let mut seen = Seen::default();
                while let Some(key) = m.next_key::<Count>()? {
                    let slot = match key {
                        Count::Input => &mut seen.input,
                        Count::Output => &mut seen.output,
                        Count::Total => &mut seen.total,
                        Count::Other => {
                            skip(&mut m)?;
                            continue;
                        }
                    };
                    if let Scalar::Count(n) = m.next_value::<Scalar>()? {
                        *slot = Some(n);
                    }
                }
                Ok(seen)
            }
        }
        d.deserialize_map(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan(body: &str, chunk: usize) -> UsageScanner {
        let mut s = UsageScanner::new();
        for c in body.as_bytes().chunks(chunk) {
            s.feed(c);
        }
        s
    }

    #[test]
    fn a_plain_openai_answer_gives_its_usage_at_every_chunk_size() {
        let body = r#"{"id":"c","choices":[{"message":{"content":"hi"}}],"usage":{"prompt_tokens":9,"completion_tokens":12,"total_tokens":21,"prompt_tokens_details":{"cached_tokens":0}}}"#;
        for chunk in 1..body.len() {
            let u = scan(body, chunk).usage().unwrap();
            assert_eq!((u.input, u.output, u.total()), (9, 12, 21), "chunk {chunk}");
        }
    }

    #[test]
    fn an_openai_stream_reads_the_last_events_usage_and_skips_nulls() {
        let body = "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}],\"usage\":null}\n\n\
                    data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2,\"total_tokens\":5}}\n\n\
                    data: [DONE]\n\n";
        for chunk in [1, 5, 64, body.len()] {
            let s = scan(body, chunk);
            assert_eq!(s.usage().map(|u| u.total()), Some(5));
            assert_eq!(s.events(), 3, "chunk {chunk}");
        }
    }

    #[test]
    fn without_usage_a_stream_counts_its_events_and_a_plain_body_its_bytes() {
        let stream = "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: {\"choices\":[{\"delta\":{\"content\":\"b\"}}]}\n\ndata: [DONE]\n\n";
        let s = scan(stream, 3);
        assert_eq!(s.usage(), None);
        assert_eq!(s.tokens(10), 13);
        let plain = scan(r#"{"text":"abcdefghijklmnop"}"#, 4);
        assert_eq!(plain.tokens(0), 27 / BYTES_PER_TOKEN);
    }

    #[test]
    fn a_usage_key_inside_a_string_is_not_read_as_usage() {
        let body = r#"{"content":"the \"usage\": {\"prompt_tokens\": 999} field","usage":{"input_tokens":1,"output_tokens":2}}"#;
        let u = scan(body, 3).usage().unwrap();
        // The escaped key inside the string is followed by `\"`, not `:`.
        assert_eq!((u.input, u.output), (1, 2));
    }

    #[test]
    fn a_key_is_not_found_again_in_bytes_a_key_already_used_at_any_split() {
        // `"usage"usage":{..}`: the quote ending the first key cannot start
        // a second one, whether or not the body is cut right after it.
        let body = r#"{"usage"usage":{"prompt_tokens":5},"x":1}"#;
        let whole = scan(body, body.len()).usage();
        for chunk in 1..body.len() {
            assert_eq!(scan(body, chunk).usage(), whole, "chunk {chunk}");
        }
        assert_eq!(whole, None);
    }

    #[test]
    fn an_oversized_usage_object_is_skipped() {
        let big = format!(
            r#"{{"usage":{{"pad":"{}","prompt_tokens":1}},"usage":{{"prompt_tokens":4}}}}"#,
            "x".repeat(MAX_OBJECT)
        );
        assert_eq!(scan(&big, 100).usage().map(|u| u.input), Some(4));
    }
}
