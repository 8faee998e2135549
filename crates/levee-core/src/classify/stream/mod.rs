//! [`StreamScanner`]: the verdict of a 2xx streaming response, read as it
//! streams.
//!
//! A stream that starts with `200` can still fail: OpenAI sends `data:
//! {"error": ..}`, the Responses API `response.failed` or `event: error`,
//! Anthropic `event: error`, OpenRouter an error chunk with `finish_reason:
//! "error"`, Gemini appends a bare JSON error with no SSE framing, Bedrock an
//! exception frame. And a stream that ends before the provider's terminal
//! event (`[DONE]`, `message_stop`, `response.completed`, a Gemini
//! `finishReason`) was cut: an availability failure, whatever the status said.
//!
//! The scanner is sans-IO: feed it the body's chunks as they pass, and
//! [`finish`](StreamScanner::finish) it at the end. It keeps at most one
//! line, one event and one JSON document of 64 KiB each (a longer one is
//! judged by its first 64 KiB), so memory stays bounded whatever the stream,
//! and it gives the same answer however the bytes are split.

mod content;
mod event;
mod eventstream;
mod framing;
mod head;

use std::ops::ControlFlow;

use http::{HeaderMap, StatusCode, header};

use self::event::{Ctx, Signal};
#[cfg(test)]
pub(crate) use self::eventstream::tests as eventstream_tests;
// What counts as a stream's output, for the readers of an answer too.
pub(crate) use self::content::{is_content, is_delta_name};
pub(crate) use self::event::aws_chunk_event;
pub(crate) use self::eventstream::{AwsMessage, Frames};
use self::framing::{Depth, Docs, Lines, MAX_PIECE, push_capped};
use super::dialect::Dialect;
use super::headers;
use super::hints;
use super::provider::ProviderClassifier;
use super::verdict::{Classification, Verdict};

/// How a stream is framed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StreamFormat {
    /// Server-sent events (`text/event-stream`): OpenAI, Azure, Anthropic,
    /// Gemini (`alt=sse`), Mistral, Groq, Cohere, OpenRouter.
    Sse,
    /// AWS event stream (`application/vnd.amazon.eventstream`), Bedrock's
    /// `ConverseStream` and `InvokeModelWithResponseStream`: binary frames
    /// (CRC-checked, at most 16 MiB each), or their textual form
    /// `{"eventstream_frame":{"headers":{..},"payload":{..}}}`, told apart
    /// by the first byte.
    AwsEventStream,
    /// Concatenated JSON objects: NDJSON (`application/x-ndjson`), JSON lines,
    /// or a streamed JSON array such as Gemini's `streamGenerateContent`.
    NdJson,
}

impl StreamFormat {
    /// The format a `content-type` names, if it names a stream. Plain
    /// `application/json` does not: most such responses are whole documents,
    /// and a caller that knows better builds the scanner with
    /// [`StreamScanner::new`].
    pub fn from_content_type(content_type: &str) -> Option<StreamFormat> {
        let mime = content_type
            .split(';')
            .next()
            .unwrap_or_default()
            .trim_ascii();
        let is = |m: &str| mime.eq_ignore_ascii_case(m);
        if is("text/event-stream") {
            Some(StreamFormat::Sse)
        } else if is("application/vnd.amazon.eventstream") {
            Some(StreamFormat::AwsEventStream)
        } else if [
            "application/x-ndjson",
            "application/ndjson",
            "application/jsonl",
            "application/x-jsonlines",
            "application/jsonlines",
            "application/stream+json",
        ]
        .into_iter()
        .any(is)
        {
            Some(StreamFormat::NdJson)
        } else {
            None
        }
    }
}

/// Reads the verdict of a 2xx streaming response from its body chunks.
///
/// ```
/// use levee_core::classify::{StreamFormat, StreamScanner, Verdict};
///
/// let mut s = StreamScanner::new(StreamFormat::Sse);
/// assert!(s.feed(b"event: message_start\ndata: {\"type\":\"message_start\"}\n\n").is_none());
/// let c = s.feed(b"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\"}}\n\n");
/// assert_eq!(c.unwrap().verdict, Verdict::Availability);
/// assert_eq!(s.finish().reason.as_str(), "anthropic:overloaded_error");
///
/// let mut cut = StreamScanner::new(StreamFormat::Sse);
/// cut.feed(b"data: {\"choices\":[{\"delta\":{\"content\":\"Hel\"}}]}\n\n");
/// assert_eq!(cut.finish().reason.as_str(), "stream:eof_before_done");
/// ```
#[derive(Clone, Debug)]
pub struct StreamScanner {
    format: StreamFormat,
    ctx: Ctx,
    lines: Lines,
    sse: Sse,
    docs: Docs,
    aws: AwsFraming,
    frames: Frames,
    state: State,
}

#[derive(Clone, Debug)]
enum State {
    Scanning,
    Done(Classification),
}

/// Which framing an AWS event stream turned out to use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum AwsFraming {
    Unknown,
    /// `{"eventstream_frame": ..}` documents.
    Text,
    /// Binary frames: a 4-byte big-endian length first, so a frame of at
    /// most 16 MiB starts with a zero byte, never with `{` or whitespace.
    Binary,
}

impl StreamScanner {
    /// The most bytes kept of one line, event or JSON document.
    pub const MAX_PIECE: usize = MAX_PIECE;

    /// A scanner for a stream of `format`, with the default bounds and no
    /// dialect hint.
    pub fn new(format: StreamFormat) -> Self {
        StreamScanner {
            format,
            ctx: Ctx {
                status: 200,
                ..Ctx::default()
            },
            lines: Lines::default(),
            sse: Sse::default(),
            docs: Docs::default(),
            aws: AwsFraming::Unknown,
            frames: Frames::default(),
            state: State::Scanning,
        }
    }

    /// A scanner for this response if it is a 2xx stream (by its
    /// `content-type`), with the dialect its headers name and its `Date`
    /// for date hints; `None` otherwise.
    ///
    /// Inlined up to the `content-type` lookup: a response that is not a
    /// stream (most are not) returns there, without building a scanner.
    #[inline]
    pub fn for_response(status: StatusCode, headers: &HeaderMap) -> Option<Self> {
        if !status.is_success() {
            return None;
        }
        let content_type = headers.get(header::CONTENT_TYPE)?;
        Self::for_content_type(status, content_type, headers)
    }

    #[inline(never)]
    fn for_content_type(
        status: StatusCode,
        content_type: &http::HeaderValue,
        headers: &HeaderMap,
    ) -> Option<Self> {
        let format = StreamFormat::from_content_type(content_type.to_str().ok()?)?;
        let mut s = StreamScanner::new(format);
        s.ctx.status = status.as_u16();
        s.ctx.dialect = headers::from_headers(headers);
        s.ctx.date = headers
            .get(header::DATE)
            .and_then(|v| hints::http_date(v.to_str().ok()?));
        Some(s)
    }

    /// Sets the dialect used for reasons (detected from the events when `None`).
    pub fn with_dialect(mut self, dialect: Option<Dialect>) -> Self {
        self.ctx.dialect = dialect;
        self
    }

    /// Applies `classifier`'s bounds (`max_wait`, `quota_after`) to in-band errors.
    pub fn with_classifier(mut self, classifier: &ProviderClassifier) -> Self {
        self.ctx.classifier = classifier.clone();
        self
    }

    /// The stream's framing.
    pub fn format(&self) -> StreamFormat {
        self.format
    }

    /// Whether an event carried the model's output yet: a token, a tool
    /// call, a reasoning delta; not the bookkeeping that opens a stream
    /// (OpenAI's role-only first chunk, Anthropic's `message_start` and
    /// `ping`, the Responses API's `response.created`, Bedrock's
    /// `messageStart`). Until then a failed stream showed its caller
    /// nothing worth keeping, and another attempt can replace it unseen.
    ///
    /// Per dialect: an event named (SSE `event:`, JSON `type`, Bedrock's
    /// `:event-type`) as a delta of the output (`content_block_delta`,
    /// `response.output_text.delta` and every `response.*.delta`,
    /// `content-delta`, `tool-call-delta`, `contentBlockDelta`; not
    /// `message_delta`); or an unnamed event with a non-empty output field
    /// (`content`, `text`, `refusal`, `reasoning`, `reasoning_content`,
    /// `thinking`, Ollama's `response`, Bedrock models' `outputText`,
    /// `generation`, `completion`) or a tool call (`tool_calls`,
    /// `function_call`, Gemini's `functionCall`).
    ///
    /// ```
    /// use levee_core::classify::{StreamFormat, StreamScanner};
    ///
    /// let mut s = StreamScanner::new(StreamFormat::Sse);
    /// s.feed(b"data: {\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n");
    /// assert!(!s.has_content());
    /// s.feed(b"data: {\"choices\":[{\"delta\":{\"content\":\"Hel\"}}]}\n\n");
    /// assert!(s.has_content());
    /// ```
    pub fn has_content(&self) -> bool {
        self.ctx.content
    }

    /// How many events were read so far (SSE events, JSON documents, AWS
    /// frames), saturating at `u32::MAX`.
    pub fn events(&self) -> u32 {
        self.ctx.events
    }

    /// The verdict, once known.
    pub fn verdict(&self) -> Option<&Classification> {
        match &self.state {
            State::Scanning => None,
            State::Done(c) => Some(c),
        }
    }

    /// Reads the next chunk. Returns the classification on the chunk that
    /// decides it (an in-band error, or the terminal event: success), and
    /// `None` before and after; once decided, further chunks are ignored.
    pub fn feed(&mut self, chunk: &[u8]) -> Option<Classification> {
        if !matches!(self.state, State::Scanning) {
            return None;
        }
        let Self {
            ctx,
            lines,
            sse,
            docs,
            aws,
            frames,
            ..
        } = self;
        let flow = match self.format {
            StreamFormat::Sse => sse.feed(ctx, lines, chunk),
            StreamFormat::NdJson => docs.feed(chunk, |doc| {
                ctx.count_event();
                event::json_doc(ctx, doc).into_flow()
            }),
            StreamFormat::AwsEventStream => {
                if *aws == AwsFraming::Unknown {
                    // By the stream's first byte alone, so that any split
                    // of the bytes decides alike.
                    *aws = match chunk.first() {
                        None => AwsFraming::Unknown,
                        Some(b) if *b == b'{' || b.is_ascii_whitespace() => AwsFraming::Text,
                        Some(_) => AwsFraming::Binary,
                    };
                }
                match aws {
                    AwsFraming::Text => docs.feed(chunk, |doc| {
                        ctx.count_event();
                        event::json_doc(ctx, doc).into_flow()
                    }),
                    AwsFraming::Binary => frames.feed(chunk, |message| match message {
                        Ok(m) => {
                            ctx.count_event();
                            event::aws_message(ctx, &m).into_flow()
                        }
                        Err(corrupt) => ControlFlow::Break(Signal::Error(Classification::new(
                            Verdict::Availability,
                            corrupt,
                        ))),
                    }),
                    AwsFraming::Unknown => ControlFlow::Continue(()),
                }
            }
        };
        let ControlFlow::Break(signal) = flow else {
            return None;
        };
        let c = match signal {
            Signal::Error(c) => c,
            _ => Classification::success(),
        };
        self.state = State::Done(c.clone());
        Some(c)
    }

    /// Ends the stream and returns its verdict: the one already decided;
    /// else success if the terminal event came or the model reported a
    /// finish reason; else an availability failure
    /// (`stream:eof_before_done`): the stream was cut.
    ///
    /// A binary AWS event stream ends well after Bedrock's terminal event
    /// (Converse `metadata`, or the `chunk` carrying
    /// `amazon-bedrock-invocationMetrics`) or a `messageStop`; a frame
    /// that fails its CRC or declares an absurd length is an availability
    /// failure (`stream:frame_crc`, `stream:frame_length`,
    /// `stream:frame_headers`). Its textual form is a success at its end
    /// unless a frame was left unfinished.
    pub fn finish(&mut self) -> Classification {
        if let State::Done(c) = &self.state {
            return c.clone();
        }
        let signal = match self.format {
            StreamFormat::Sse => {
                let rest = self.lines.take_rest();
                match self.sse.line(&mut self.ctx, &rest) {
                    Signal::Nothing => self.sse.finish(&mut self.ctx),
                    s => s,
                }
            }
            StreamFormat::AwsEventStream if self.aws != AwsFraming::Text => {
                // Binary, or nothing at all: it ends well only after the
                // terminal event (or a messageStop), never inside a frame.
                Signal::Nothing
            }
            StreamFormat::NdJson | StreamFormat::AwsEventStream => match self.docs.take_partial() {
                Some(partial) => match event::json_doc(&mut self.ctx, &partial) {
                    Signal::Error(c) => Signal::Error(c),
                    _ => Signal::Nothing,
                },
                None if self.format == StreamFormat::AwsEventStream => Signal::Terminal,
                None => Signal::Nothing,
            },
        };
        let c = match signal {
            Signal::Error(c) => c,
            Signal::Terminal => Classification::success(),
            Signal::Nothing if self.ctx.finished && !self.frames.mid_frame() => {
                Classification::success()
            }
            Signal::Nothing => Classification::new(Verdict::Availability, "stream:eof_before_done"),
        };
        self.state = State::Done(c.clone());
        c
    }
}

impl Signal {
    fn into_flow(self) -> ControlFlow<Signal> {
        match self {
            Signal::Nothing => ControlFlow::Continue(()),
            s => ControlFlow::Break(s),
        }
    }
}

// === SSE ===

/// The event being assembled, and a bare JSON document (Gemini's appended
/// error) being collected across lines.
#[derive(Clone, Debug, Default)]
struct Sse {
    event: Vec<u8>,
    data: Vec<u8>,
    has_data: bool,
    raw: Option<(Vec<u8>, Depth)>,
    /// Tests: read every event line by line (see [`Sse::feed`]).
    #[cfg(test)]
    copy_events: bool,
}

/// Event names are short; a longer one is no name we know.
const MAX_EVENT_NAME: usize = 64;

/// An SSE event in its common form, whole at the start of a chunk: an
/// optional `event:` line, one `data:` line and the blank line, each ended
/// by `\n`, none longer than [`MAX_PIECE`].
struct WholeEvent<'a> {
    name: &'a [u8],
    data: &'a [u8],
    len: usize,
}

impl<'a> WholeEvent<'a> {
    /// The event `b` starts with, if it has that form; what [`Sse::line`]
    /// would have assembled from its lines.
    fn parse(b: &'a [u8]) -> Option<Self> {
        let mut at = 0;
        let mut name = &b""[..];
        if let Some(rest) = b.strip_prefix(b"event:") {
            let line = line_at(rest)?;
            let value = line.strip_prefix(b" ").unwrap_or(line);
            name = &value[..value.len().min(MAX_EVENT_NAME)];
            at = "event:".len() + line.len() + 1;
        }
        let line = line_at(b[at..].strip_prefix(b"data:")?)?;
        at += "data:".len() + line.len() + 1;
        (b.get(at) == Some(&b'\n')).then(|| WholeEvent {
            name,
            data: line.strip_prefix(b" ").unwrap_or(line),
            len: at + 1,
        })
    }
}

/// The rest of the line `b` starts inside, if it ends in `b` with `\n`
/// (not `\r`) and, with its field name, is not cut at [`MAX_PIECE`].
fn line_at(b: &[u8]) -> Option<&[u8]> {
    let i = memchr::memchr2(b'\n', b'\r', b)?;
    (b[i] == b'\n' && i + "event:".len() <= MAX_PIECE).then(|| &b[..i])
}

impl Sse {
    /// Reads a chunk. A whole event at a line start is read where it lies
    /// in the chunk: most chunks of a healthy stream are one or a few such
    /// events, and copying each into `data` cost as much as reading it.
    /// Anything else goes line by line.
    fn feed(&mut self, ctx: &mut Ctx, lines: &mut Lines, chunk: &[u8]) -> ControlFlow<Signal> {
        let mut rest = chunk;
        while !rest.is_empty() {
            if self.in_place()
                && self.is_idle()
                && lines.at_line_start()
                && let Some(e) = WholeEvent::parse(rest)
            {
                rest = &rest[e.len..];
                event::sse_event(ctx, e.name, e.data).into_flow()?;
                continue;
            }
            let (used, flow) = lines.step(rest, |line| self.line(ctx, line).into_flow());
            rest = &rest[used..];
            flow?;
        }
        ControlFlow::Continue(())
    }

    #[cfg(not(test))]
    fn in_place(&self) -> bool {
        true
    }

    /// Tests compare events read in place with the same events copied.
    #[cfg(test)]
    fn in_place(&self) -> bool {
        !self.copy_events
    }

    /// Whether no event is being assembled.
    fn is_idle(&self) -> bool {
        !self.has_data && self.event.is_empty() && self.raw.is_none()
    }

    fn line(&mut self, ctx: &mut Ctx, line: &[u8]) -> Signal {
        if let Some((buf, depth)) = &mut self.raw {
            let sse_field = line.is_empty()
                || line.starts_with(b"data:")
                || line.starts_with(b"event:")
                || line.starts_with(b":");
            if !sse_field {
                push_capped(buf, line);
                push_capped(buf, b"\n");
                if depth.scan(line).is_none() {
                    return Signal::Nothing;
                }
            }
            // The document closed, or SSE framing resumed before it did.
            let (doc, _) = self.raw.take().unwrap_or_default();
            let s = event::json_doc(ctx, &doc);
            if !matches!(s, Signal::Nothing) || !sse_field {
                return s;
            }
        }
        match line.first() {
            None => return self.dispatch(ctx),
            // A comment: a keep-alive. OpenRouter's names itself.
            Some(b':') => {
                if ctx.dialect.is_none()
                    && line
                        .windows(10)
                        .any(|w| w.eq_ignore_ascii_case(b"openrouter"))
                {
                    ctx.dialect = Some(Dialect::OpenRouter);
                }
                return Signal::Nothing;
            }
            _ => {}
        }
        if line.trim_ascii_start().first() == Some(&b'{') {
            // Not SSE: a bare JSON document, possibly over several lines.
            let mut depth = Depth::default();
            if depth.scan(line).is_some() {
                return event::json_doc(ctx, line);
            }
            let mut buf = line.to_vec();
            buf.push(b'\n');
            self.raw = Some((buf, depth));
            return Signal::Nothing;
        }
        let (name, value) = match line.iter().position(|&c| c == b':') {
            Some(i) => (
                &line[..i],
                line[i + 1..].strip_prefix(b" ").unwrap_or(&line[i + 1..]),
            ),
            None => (line, &b""[..]),
        };
        match name {
            b"data" => {
                if self.has_data {
                    push_capped(&mut self.data, b"\n");
                }
                push_capped(&mut self.data, value);
                self.has_data = true;
            }
            b"event" => {
                self.event.clear();
                self.event
                    .extend_from_slice(&value[..value.len().min(MAX_EVENT_NAME)]);
            }
            _ => {}
        }
        Signal::Nothing
    }

    fn dispatch(&mut self, ctx: &mut Ctx) -> Signal {
        if !self.has_data && self.event.is_empty() {
            return Signal::Nothing;
        }
        let s = event::sse_event(ctx, &self.event, &self.data);
        self.event.clear();
        self.data.clear();
        self.has_data = false;
        s
    }

    /// End of stream: what is still open is judged as if it had ended.
    fn finish(&mut self, ctx: &mut Ctx) -> Signal {
        if let Some((doc, _)) = self.raw.take()
            && let s @ (Signal::Error(_) | Signal::Terminal) = event::json_doc(ctx, &doc)
        {
            return s;
        }
        self.dispatch(ctx)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use proptest::sample::{Index, select};

    use super::*;

    /// SSE pieces that reach every branch of the framing and of the events.
    const PIECES: &[&str] = &[
        "data: ",
        "data:",
        "event: ",
        "event:",
        ": OPENROUTER PROCESSING",
        "\n",
        "\n\n",
        "\r",
        "\r\n",
        "message_stop",
        "error",
        "[DONE]",
        "{\"choices\":[{\"delta\":{\"content\":\"Hi\"},\"finish_reason\":null}]}",
        "{\"type\":\"message_stop\"}",
        "\"finish_reason\":\"stop\"",
        "\"finish_reason\":\"error\"",
        "{\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}",
        "event: content_block_delta",
        "{\"type\":\"message_delta\",\"delta\":{\"text\":\"x\"}}",
        "\"content\":",
        "{\"error\":{\"type\":\"overloaded_error\"}}",
        "{\"type\":\"error\",\"error\":{\"code\":429",
        "{",
        "}",
        "\"",
        " ",
        "é",
    ];

    /// Every classification `feed` reports, then `finish`'s, and whether
    /// output came and how many events (after the last chunk, before
    /// `finish`).
    fn run(
        body: &[u8],
        cuts: &[usize],
        copy_events: bool,
    ) -> (Vec<Option<Classification>>, bool, u32) {
        let mut s = StreamScanner::new(StreamFormat::Sse);
        s.sse.copy_events = copy_events;
        let mut from = 0;
        let mut seen: Vec<_> = cuts
            .iter()
            .chain([&body.len()])
            .map(|&to| {
                let c = s.feed(&body[from..to]);
                from = to;
                c
            })
            .collect();
        let (content, events) = (s.has_content(), s.events());
        seen.push(Some(s.finish()));
        (seen, content, events)
    }

    #[test]
    fn common_events_are_read_in_place() {
        let e = WholeEvent::parse(b"event: ping\ndata: {}\n\ndata: x").unwrap();
        assert_eq!((e.name, e.data, e.len), (&b"ping"[..], &b"{}"[..], 22));
        let e = WholeEvent::parse(b"data:[DONE]\n\n").unwrap();
        assert_eq!((e.name, e.data), (&b""[..], &b"[DONE]"[..]));
        for other in [
            &b"data: {}\n"[..],
            b"data: {}\r\n\r\n",
            b"data: a\ndata: b\n\n",
            b"event: ping\n\n",
            b": keep-alive\n\n",
            b"{\"error\":{}}\n\n",
        ] {
            assert!(WholeEvent::parse(other).is_none(), "{other:?}");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2048))]

        /// Events read in place from a chunk give what the same events
        /// copied line by line give, however the stream is split.
        #[test]
        fn events_read_in_place_agree_with_events_copied(
            pieces in prop::collection::vec(select(PIECES), 0..24),
            cuts in prop::collection::vec(any::<Index>(), 0..6),
        ) {
            let body = pieces.concat().into_bytes();
            let mut cuts: Vec<usize> = cuts.iter().map(|i| i.index(body.len() + 1)).collect();
            cuts.sort_unstable();
            prop_assert_eq!(run(&body, &cuts, false), run(&body, &cuts, true));
        }

        /// Whether output came does not depend on how the stream is split
        /// (up to the chunk that decides the verdict: later ones are not read).
        #[test]
        fn content_is_seen_however_the_stream_is_split(
            pieces in prop::collection::vec(select(PIECES), 0..24),
            cuts in prop::collection::vec(any::<Index>(), 0..6),
        ) {
            let body = pieces.concat().into_bytes();
            let mut cuts: Vec<usize> = cuts.iter().map(|i| i.index(body.len() + 1)).collect();
            cuts.sort_unstable();
            let (whole, content, _) = run(&body, &[], false);
            let (split, split_content, _) = run(&body, &cuts, false);
            prop_assert_eq!(whole.last(), split.last());
            prop_assert_eq!(content, split_content);
        }
    }
}
