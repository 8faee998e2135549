//! The response body Levee hands back: the inner body, unchanged.
//!
//! A non-2xx body is peeked (up to a bound) so the classifier can read the
//! provider's error code; the peeked bytes are then replayed in front of the
//! rest, so the caller still receives the whole body. A 2xx stream is
//! watched frame by frame as it passes (no buffering) so that an in-band
//! error or a cut stream reaches the breaker when the stream ends, and so
//! that a stream gone quiet past its first-content or stall timeout ends
//! with a [`StreamTimeout`](crate::error::StreamTimeout).
//!
//! The layer holds a watched stream back until its first output
//! (`ResponseBody::poll_hold`): the frames read meanwhile are kept and
//! replayed in front of the rest. Once they are, the hold costs nothing.

use std::collections::VecDeque;
use std::fmt;
use std::num::NonZeroU16;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::{Buf, Bytes, BytesMut};
use http::HeaderMap;
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;

use levee_core::classify::Verdict;

use super::hold::HoldLimits;
use super::tracker::{Outcome, Watch};
use crate::error::BoxError;

pin_project! {
    /// The body of a response that went through a Levee layer.
    pub struct ResponseBody<B: Body> {
        #[pin]
        kind: Kind<B>,
    }
}

/// Which failover target answered a response, as its body carries it for
/// `failover::ServedBy`: the target name's number in the process's table
/// of names, the index and the attempt (both below 256: a failover has at
/// most 64 targets, each called once).
///
/// Four bytes, kept in every variant of the body beside its tag (a body
/// field, not a response extension, costs no allocation): a response over
/// a zero-sized body stays 128 bytes, which moves as a few register copies
/// where a larger one calls `memcpy`, at every layer it passes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ServedTag {
    pub(crate) target: NonZeroU16,
    pub(crate) index: u8,
    pub(crate) attempt: u8,
}

pin_project! {
    #[project = KindProj]
    enum Kind<B: Body> {
        Plain { #[pin] body: B, served_by: Option<ServedTag> },
        Replay { peeked: Box<Peeked<B>>, served_by: Option<ServedTag> },
        // Boxed with its watch in one allocation; the box also lets a held
        // response move (a failover returns it) whatever the body type.
        Watched { stream: Pin<Box<Watched<B>>>, served_by: Option<ServedTag> },
    }
}

pin_project! {
    /// A 2xx stream under watch.
    pub(crate) struct Watched<B> {
        #[pin]
        body: B,
        // Reports the outcome when the stream decides, ends or times out;
        // `None` after.
        watch: Option<Watch>,
        // What a hold read ahead, or how a timed-out stream ends; `None`
        // once replayed.
        held: Option<Box<Held>>,
    }
}

/// Frames read ahead of the caller, and what follows them if the stream
/// ended meanwhile.
#[derive(Default)]
struct Held {
    frames: VecDeque<Frame<Bytes>>,
    bytes: usize,
    error: Option<BoxError>,
    eof: bool,
}

/// How a hold ended.
#[derive(Debug)]
pub(crate) enum Hold {
    /// Output came, the stream ended well, the bounds were reached, or the
    /// body is not a watched stream: hand the response on.
    Release,
    /// The stream failed before any output: this attempt failed as if the
    /// provider had answered with an error (the breaker has counted it;
    /// the outcome says when its scopes reopen if it closed them).
    Failed(Outcome),
}

/// A body whose first bytes were read ahead (boxed: error path only).
pub(crate) struct Peeked<B: Body> {
    body: Pin<Box<B>>,
    buf: BytesMut,
    trailers: Option<HeaderMap>,
    error: Option<B::Error>,
    eof: bool,
    limit: usize,
}

impl<B: Body> ResponseBody<B> {
    pub(crate) fn plain(body: B) -> Self {
        ResponseBody {
            kind: Kind::Plain {
                body,
                served_by: None,
            },
        }
    }

    pub(crate) fn replay(peeked: Box<Peeked<B>>) -> Self {
        ResponseBody {
            kind: Kind::Replay {
                peeked,
                served_by: None,
            },
        }
    }

    pub(crate) fn watched(body: B, watch: Watch) -> Self {
        ResponseBody {
            kind: Kind::Watched {
                stream: Box::pin(Watched {
                    body,
                    watch: Some(watch),
                    held: None,
                }),
                served_by: None,
            },
        }
    }

    /// Which failover target answered, if a failover returned it.
    pub(crate) fn served_by(&self) -> Option<ServedTag> {
        match &self.kind {
            Kind::Plain { served_by, .. }
            | Kind::Replay { served_by, .. }
            | Kind::Watched { served_by, .. } => *served_by,
        }
    }

    /// Whether its outcome is reported before the body ends: a watched
    /// stream whose watch decided (a shadow probe's, at its first output).
    pub(crate) fn stream_decided(&self) -> bool {
        matches!(&self.kind, Kind::Watched { stream, .. } if stream.watch.is_none())
    }

    pub(crate) fn set_served_by(&mut self, tag: ServedTag) {
        match &mut self.kind {
            Kind::Plain { served_by, .. }
            | Kind::Replay { served_by, .. }
            | Kind::Watched { served_by, .. } => *served_by = Some(tag),
        }
    }
}

impl<B> ResponseBody<B>
where
    B: Body,
    B::Data: Buf + 'static,
    B::Error: Into<BoxError>,
{
    /// Reads a watched stream ahead until its first output, keeping what it
    /// reads for the caller. It fails when the stream errs, is cut or goes
    /// quiet past a timeout before that; it releases at the first output,
    /// at a successful end, past `limits`, and at once for a body that is
    /// not a watched stream. Takes `&mut self`: a watched stream is boxed,
    /// so the response can still move.
    pub(crate) fn poll_hold(&mut self, cx: &mut Context<'_>, limits: HoldLimits) -> Poll<Hold> {
        let Kind::Watched { stream, .. } = &mut self.kind else {
            return Poll::Ready(Hold::Release);
        };
        let mut s = stream.as_mut().project();
        let held = s.held.get_or_insert_with(Default::default);
        loop {
            let Some(watch) = s.watch.as_mut() else {
                return Poll::Ready(Hold::Release);
            };
            if watch.has_content()
                || held.bytes >= limits.max_bytes.get() as usize
                || watch.events() >= limits.max_events
            {
                return Poll::Ready(Hold::Release);
            }
            let ended = match s.body.as_mut().poll_frame(cx) {
                Poll::Pending => {
                    let timeout = ready!(watch.poll_timeout(cx));
                    let c = s.watch.take().map(|w| w.time_out(&timeout));
                    held.error = Some(Box::new(timeout));
                    held.eof = true;
                    c
                }
                Poll::Ready(Some(Ok(frame))) => {
                    let frame = frame.map_data(into_bytes);
                    let decided = match frame.data_ref() {
                        Some(data) => {
                            held.bytes += data.len();
                            watch.feed(data)
                        }
                        None => None,
                    };
                    held.frames.push_back(frame);
                    if decided.is_some() {
                        *s.watch = None;
                    }
                    decided
                }
                Poll::Ready(Some(Err(e))) => {
                    held.error = Some(e.into());
                    held.eof = true;
                    s.watch.take().map(Watch::fail)
                }
                Poll::Ready(None) => {
                    held.eof = true;
                    s.watch.take().map(Watch::finish)
                }
            };
            match ended {
                None => continue,
                Some((c, _)) if c.verdict == Verdict::Success => {
                    return Poll::Ready(Hold::Release);
                }
                Some(outcome) => return Poll::Ready(Hold::Failed(outcome)),
            }
        }
    }
}

/// A frame's data as `Bytes`: itself when it is one (hyper's and reqwest's
/// bodies), at no cost; any other `Buf` is copied out.
#[inline]
fn into_bytes<D: Buf + 'static>(data: D) -> Bytes {
    let mut data = Some(data);
    // Resolved at compile time: the type ids are constants.
    if let Some(bytes) = (&mut data as &mut dyn std::any::Any).downcast_mut::<Option<Bytes>>() {
        return bytes.take().unwrap_or_default();
    }
    match data {
        Some(mut d) => d.copy_to_bytes(d.remaining()),
        None => Bytes::new(),
    }
}

impl<B> Body for ResponseBody<B>
where
    B: Body,
    B::Data: Buf + 'static,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        match self.project().kind.project() {
            KindProj::Plain { body, .. } => Poll::Ready(match ready!(body.poll_frame(cx)) {
                Some(Ok(frame)) => Some(Ok(frame.map_data(into_bytes))),
                Some(Err(e)) => Some(Err(e.into())),
                None => None,
            }),
            KindProj::Replay { peeked, .. } => peeked.poll_replay(cx),
            KindProj::Watched { stream, .. } => stream.as_mut().poll_watched(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.kind {
            Kind::Plain { body, .. } => body.is_end_stream(),
            // Until the watch has reported, ask for the final `None` so the
            // end of the stream is seen.
            Kind::Watched { stream, .. } => match &stream.held {
                Some(held) => held.frames.is_empty() && held.error.is_none() && held.eof,
                None => stream.watch.is_none() && stream.body.is_end_stream(),
            },
            Kind::Replay { peeked, .. } => {
                peeked.buf.is_empty()
                    && peeked.trailers.is_none()
                    && peeked.error.is_none()
                    && (peeked.eof || peeked.body.is_end_stream())
            }
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            Kind::Plain { body, .. } => body.size_hint(),
            Kind::Watched { stream, .. } => match &stream.held {
                Some(held) if held.eof => SizeHint::with_exact(held.bytes_left()),
                Some(held) => {
                    let mut hint = SizeHint::new();
                    let rest = stream.body.size_hint();
                    hint.set_lower(rest.lower() + held.bytes_left());
                    if let Some(upper) = rest.upper() {
                        hint.set_upper(upper + held.bytes_left());
                    }
                    hint
                }
                None => stream.body.size_hint(),
            },
            Kind::Replay { peeked, .. } if peeked.eof => {
                SizeHint::with_exact(peeked.buf.len() as u64)
            }
            Kind::Replay { peeked, .. } => {
                let rest = peeked.body.size_hint();
                let mut hint = SizeHint::new();
                hint.set_lower(rest.lower() + peeked.buf.len() as u64);
                if let Some(upper) = rest.upper() {
                    hint.set_upper(upper + peeked.buf.len() as u64);
                }
                hint
            }
        }
    }
}

// === Watched ===

impl<B> Watched<B>
where
    B: Body,
    B::Data: Buf + 'static,
    B::Error: Into<BoxError>,
{
    fn poll_watched(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let s = self.project();
        if let Some(held) = s.held {
            if let Some(frame) = held.frames.pop_front() {
                return Poll::Ready(Some(Ok(frame)));
            }
            if let Some(e) = held.error.take() {
                return Poll::Ready(Some(Err(e)));
            }
            if held.eof {
                return Poll::Ready(None);
            }
            // Replayed: from here on the stream costs what it did unheld.
            *s.held = None;
        }
        Poll::Ready(match s.body.poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                let frame = frame.map_data(into_bytes);
                // Watched as it passes: no copy, no buffering.
                if let (Some(w), Some(data)) = (s.watch.as_mut(), frame.data_ref())
                    && w.feed(data).is_some()
                {
                    *s.watch = None;
                }
                Some(Ok(frame))
            }
            Poll::Ready(Some(Err(e))) => {
                if let Some(w) = s.watch.take() {
                    w.fail();
                }
                Some(Err(e.into()))
            }
            Poll::Ready(None) => {
                if let Some(w) = s.watch.take() {
                    w.finish();
                }
                None
            }
            Poll::Pending => {
                let Some(w) = s.watch.as_mut() else {
                    return Poll::Pending;
                };
                let timeout = ready!(w.poll_timeout(cx));
                if let Some(w) = s.watch.take() {
                    w.time_out(&timeout);
                }
                // The stream ends here for the caller.
                *s.held = Some(Box::new(Held {
                    eof: true,
                    ..Held::default()
                }));
                Some(Err(Box::new(timeout)))
            }
        })
    }
}

impl Held {
    fn bytes_left(&self) -> u64 {
        self.frames
            .iter()
            .filter_map(|f| f.data_ref().map(|d| d.len() as u64))
            .sum()
    }
}

impl<B: Body> fmt::Debug for ResponseBody<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match &self.kind {
            Kind::Plain { .. } => "plain",
            Kind::Replay { .. } => "replay",
            Kind::Watched { .. } => "watched",
        };
        f.debug_struct("ResponseBody").field("kind", &kind).finish()
    }
}

// === Peeked ===

impl<B> Peeked<B>
where
    B: Body,
    B::Data: Buf + 'static,
{
    pub(crate) fn new(body: B, limit: usize) -> Box<Self> {
        Box::new(Peeked {
            body: Box::pin(body),
            buf: BytesMut::new(),
            trailers: None,
            error: None,
            eof: false,
            limit,
        })
    }

    /// Reads until `limit` bytes, the end, trailers or an error.
    pub(crate) fn poll_peek(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        while self.buf.len() < self.limit
            && !self.eof
            && self.trailers.is_none()
            && self.error.is_none()
        {
            match ready!(self.body.as_mut().poll_frame(cx)) {
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(mut data) => {
                        while data.has_remaining() {
                            let chunk = data.chunk();
                            self.buf.extend_from_slice(chunk);
                            let n = chunk.len();
                            data.advance(n);
                        }
                    }
                    Err(frame) => self.trailers = frame.into_trailers().ok(),
                },
                Some(Err(e)) => self.error = Some(e),
                None => self.eof = true,
            }
        }
        Poll::Ready(())
    }

    /// Whether the whole body was read and held no byte.
    pub(crate) fn is_empty_whole(&self) -> bool {
        self.eof && self.buf.is_empty() && self.error.is_none()
    }

    /// The peeked bytes, at most `limit` of them.
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.buf[..self.buf.len().min(self.limit)]
    }
}

impl<B> Peeked<B>
where
    B: Body,
    B::Data: Buf + 'static,
    B::Error: Into<BoxError>,
{
    fn poll_replay(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        if !self.buf.is_empty() {
            return Poll::Ready(Some(Ok(Frame::data(self.buf.split().freeze()))));
        }
        if let Some(e) = self.error.take() {
            return Poll::Ready(Some(Err(e.into())));
        }
        if let Some(t) = self.trailers.take() {
            self.eof = true;
            return Poll::Ready(Some(Ok(Frame::trailers(t))));
        }
        if self.eof {
            return Poll::Ready(None);
        }
        match ready!(self.body.as_mut().poll_frame(cx)) {
            Some(Ok(frame)) => Poll::Ready(Some(Ok(frame.map_data(into_bytes)))),
            Some(Err(e)) => Poll::Ready(Some(Err(e.into()))),
            None => {
                self.eof = true;
                Poll::Ready(None)
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use http_body_util::BodyExt;
    use std::collections::VecDeque;

    /// Over a zero-sized body, the body is its variant tag and a
    /// `ServedTag` beside it, and the response stays within 128 bytes:
    /// x86-64 copies up to 128 bytes with a few register moves and calls
    /// `memcpy` past that, on every move at every layer.
    #[test]
    fn a_response_over_a_zero_sized_body_stays_within_128_bytes() {
        type Empty = http_body_util::Empty<Bytes>;
        assert_eq!(std::mem::size_of::<ResponseBody<Empty>>(), 16);
        assert!(std::mem::size_of::<http::Response<ResponseBody<Empty>>>() <= 128);
    }

    #[test]
    fn every_kind_of_body_carries_who_served_it() {
        let tag = ServedTag {
            target: NonZeroU16::new(3).unwrap(),
            index: 1,
            attempt: 2,
        };
        let peeked = Peeked::new(Frames::data(&["x"]), 16);
        let mut bodies = [
            ResponseBody::plain(Frames::data(&["x"])),
            ResponseBody::replay(peeked),
        ];
        for body in &mut bodies {
            assert_eq!(body.served_by(), None);
            body.set_served_by(tag);
            assert_eq!(body.served_by(), Some(tag));
        }
    }

    /// A body that yields the given frames, one per poll.
    #[derive(Debug)]
    pub(crate) struct Frames(pub(crate) VecDeque<Result<Frame<Bytes>, &'static str>>);

    impl Frames {
        pub(crate) fn data(parts: &[&'static str]) -> Self {
            Frames(
                parts
                    .iter()
                    .map(|p| Ok(Frame::data(Bytes::from_static(p.as_bytes()))))
                    .collect(),
            )
        }
    }

    impl Body for Frames {
        type Data = Bytes;
        type Error = &'static str;
        fn poll_frame(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, &'static str>>> {
            Poll::Ready(self.get_mut().0.pop_front())
        }
    }

    fn peek(body: Frames, limit: usize) -> Box<Peeked<Frames>> {
        let mut p = Peeked::new(body, limit);
        let waker = std::task::Waker::noop();
        assert!(p.poll_peek(&mut Context::from_waker(waker)).is_ready());
        p
    }

    #[tokio::test]
    async fn data_that_is_not_bytes_is_copied_out_whole() {
        // `Full<&[u8]>` yields `&[u8]` frames: the copying path of `into_bytes`.
        let body = http_body_util::Full::new(&b"data: {\"x\":1}\n\n"[..]);
        let bytes = ResponseBody::plain(body)
            .collect()
            .await
            .unwrap()
            .to_bytes();
        assert_eq!(&bytes[..], b"data: {\"x\":1}\n\n");
        assert_eq!(into_bytes(Bytes::from_static(b"kept")), "kept");
    }

    async fn collect(body: ResponseBody<Frames>) -> (Vec<u8>, Option<String>) {
        let mut out = Vec::new();
        let mut body = std::pin::pin!(body);
        while let Some(frame) = body.frame().await {
            match frame {
                Ok(f) => {
                    if let Ok(d) = f.into_data() {
                        out.extend_from_slice(&d)
                    }
                }
                Err(e) => return (out, Some(e.to_string())),
            }
        }
        (out, None)
    }

    #[tokio::test]
    async fn a_peeked_body_is_replayed_whole() {
        let p = peek(
            Frames::data(&["{\"error\":", "{\"code\":1}", "} and more", " tail"]),
            12,
        );
        assert_eq!(p.bytes(), b"{\"error\":{\"c");
        let (bytes, err) = collect(ResponseBody::replay(p)).await;
        assert_eq!(bytes, b"{\"error\":{\"code\":1}} and more tail");
        assert_eq!(err, None);
    }

    #[tokio::test]
    async fn a_body_error_during_the_peek_reaches_the_caller_after_the_prefix() {
        let mut frames = Frames::data(&["partial"]);
        frames.0.push_back(Err("connection reset"));
        let p = peek(frames, 1024);
        assert_eq!(p.bytes(), b"partial");
        let (bytes, err) = collect(ResponseBody::replay(p)).await;
        assert_eq!(bytes, b"partial");
        assert_eq!(err.as_deref(), Some("connection reset"));
    }

    #[tokio::test]
    async fn a_plain_body_passes_through() {
        let (bytes, _) = collect(ResponseBody::plain(Frames::data(&["a", "b"]))).await;
        assert_eq!(bytes, b"ab");
    }
}
