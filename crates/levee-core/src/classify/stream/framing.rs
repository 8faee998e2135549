//! Cutting a byte stream into lines and JSON documents, incrementally and
//! with bounded memory, so that any split of the bytes gives the same pieces.

use std::ops::ControlFlow;

/// The most bytes kept of one line, event or JSON document. Past it the
/// rest is skipped (still scanned for its end), and the piece is classified
/// from its first `MAX_PIECE` bytes: an error object comes first in every
/// provider's events, and a data chunk that long is model output.
pub(crate) const MAX_PIECE: usize = 64 * 1024;

/// Appends up to the cap.
pub(super) fn push_capped(buf: &mut Vec<u8>, bytes: &[u8]) {
    let room = MAX_PIECE.saturating_sub(buf.len());
    buf.extend_from_slice(&bytes[..bytes.len().min(room)]);
}

// === lines ===

/// Splits on `\n`, `\r\n` or `\r` (all three end an SSE line).
#[derive(Clone, Debug, Default)]
pub(super) struct Lines {
    buf: Vec<u8>,
    /// The last chunk ended in `\r`: a `\n` opening the next one ends nothing.
    after_cr: bool,
}

impl Lines {
    /// Calls `f` with the first line `rest` completes, if it completes one,
    /// and returns how many bytes of `rest` that took: all of them when no
    /// line ends in `rest` (they are kept for the next chunk).
    pub(super) fn step<B>(
        &mut self,
        rest: &[u8],
        f: impl FnOnce(&[u8]) -> ControlFlow<B>,
    ) -> (usize, ControlFlow<B>) {
        let mut start = 0;
        if self.after_cr && !rest.is_empty() {
            self.after_cr = false;
            if rest[0] == b'\n' {
                start = 1;
            }
        }
        let body = &rest[start..];
        let Some(i) = memchr::memchr2(b'\n', b'\r', body) else {
            push_capped(&mut self.buf, body);
            return (rest.len(), ControlFlow::Continue(()));
        };
        let flow = if self.buf.is_empty() {
            // The common case: the whole line is in this chunk, no copy.
            f(&body[..i.min(MAX_PIECE)])
        } else {
            push_capped(&mut self.buf, &body[..i]);
            let flow = f(&self.buf);
            self.buf.clear();
            flow
        };
        let mut end = i + 1;
        if body[i] == b'\r' {
            match body.get(end) {
                Some(b'\n') => end += 1,
                Some(_) => {}
                None => self.after_cr = true,
            }
        }
        (start + end, flow)
    }

    /// Whether the next byte starts a line: nothing of one is kept.
    pub(super) fn at_line_start(&self) -> bool {
        self.buf.is_empty() && !self.after_cr
    }

    /// The unterminated last line, at end of stream.
    pub(super) fn take_rest(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.buf)
    }
}

// === JSON documents ===

/// Tracks object/array nesting outside strings.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Depth {
    depth: u32,
    in_str: bool,
    escaped: bool,
}

impl Depth {
    /// Scans `b`; returns the index just past the byte that closes the
    /// outermost `{`/`[`, if `b` holds it.
    pub(super) fn scan(&mut self, b: &[u8]) -> Option<usize> {
        for (i, &c) in b.iter().enumerate() {
            if self.in_str {
                if self.escaped {
                    self.escaped = false;
                } else if c == b'\\' {
                    self.escaped = true;
                } else if c == b'"' {
                    self.in_str = false;
                }
                continue;
            }
            match c {
                b'"' => self.in_str = true,
                b'{' | b'[' => self.depth = self.depth.saturating_add(1),
                b'}' | b']' if self.depth > 0 => {
                    self.depth -= 1;
                    if self.depth == 0 {
                        return Some(i + 1);
                    }
                }
                _ => {}
            }
        }
        None
    }
}

/// Cuts concatenated JSON objects out of a byte stream: NDJSON, a streamed
/// JSON array (`[{..},\n{..}]`, the separators are skipped) or the textual
/// event-stream frames. Bytes outside an object are ignored.
#[derive(Clone, Debug, Default)]
pub(super) struct Docs {
    buf: Vec<u8>,
    depth: Depth,
    active: bool,
}

impl Docs {
    /// Calls `f` with each object completed by `chunk`, until it breaks.
    pub(super) fn feed<B>(
        &mut self,
        chunk: &[u8],
        mut f: impl FnMut(&[u8]) -> ControlFlow<B>,
    ) -> ControlFlow<B> {
        let mut rest = chunk;
        while !rest.is_empty() {
            if !self.active {
                let Some(start) = memchr::memchr(b'{', rest) else {
                    break;
                };
                rest = &rest[start..];
                self.active = true;
                self.depth = Depth::default();
            }
            let Some(end) = self.depth.scan(rest) else {
                push_capped(&mut self.buf, rest);
                break;
            };
            self.active = false;
            let flow = if self.buf.is_empty() {
                f(&rest[..end.min(MAX_PIECE)])
            } else {
                push_capped(&mut self.buf, &rest[..end]);
                let flow = f(&self.buf);
                self.buf.clear();
                flow
            };
            rest = &rest[end..];
            flow?;
        }
        ControlFlow::Continue(())
    }

    /// The unfinished object at end of stream, if one was open.
    pub(super) fn take_partial(&mut self) -> Option<Vec<u8>> {
        std::mem::take(&mut self.active).then(|| std::mem::take(&mut self.buf))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every line `chunks` complete, fed through `Lines::step`.
    fn lines(lines: &mut Lines, chunks: &[&[u8]]) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        for chunk in chunks {
            let mut rest = *chunk;
            while !rest.is_empty() {
                let (used, _) = lines.step(rest, |l| {
                    out.push(l.to_vec());
                    ControlFlow::<()>::Continue(())
                });
                assert!(used > 0, "a step takes at least one byte");
                rest = &rest[used..];
            }
        }
        out
    }

    #[test]
    fn a_crlf_split_across_chunks_ends_one_line() {
        let mut l = Lines::default();
        assert_eq!(lines(&mut l, &[b"a\r"]), [b"a".to_vec()]);
        assert!(!l.at_line_start(), "a \\n may still follow the \\r");
        // An empty chunk between changes nothing.
        assert_eq!(lines(&mut l, &[b"", b"\nb\n"]), [b"b".to_vec()]);
        assert!(l.at_line_start());
        assert_eq!(lines(&mut l, &[b"c"]), Vec::<Vec<u8>>::new());
        assert!(!l.at_line_start(), "part of a line is kept");
        assert_eq!(l.take_rest(), b"c");
    }

    #[test]
    fn lf_crlf_and_cr_each_end_one_line() {
        let mut l = Lines::default();
        let got = lines(&mut l, &[b"a\nb\r\nc\rd\n"]);
        assert_eq!(got, [&b"a"[..], b"b", b"c", b"d"]);
        assert!(l.at_line_start());
    }

    #[test]
    fn a_long_line_is_kept_up_to_the_cap() {
        let long = vec![b'x'; 10_000];
        let mut l = Lines::default();
        let got = lines(&mut l, &[&long[..4_000], &long[4_000..], b"\n"]);
        assert_eq!(got, [long]);
        let huge = vec![b'x'; MAX_PIECE + 10];
        let got = lines(&mut l, &[&huge[..], b"\n"]);
        assert_eq!(got[0].len(), MAX_PIECE);
    }

    #[test]
    fn braces_inside_strings_and_stray_closers_do_not_end_a_document() {
        let mut d = Depth::default();
        // A stray closer before the document is skipped, not counted.
        assert_eq!(d.scan(br#"}{"a":"}"}"#), Some(10));
        let mut d = Depth::default();
        assert_eq!(d.scan(br#"{"a":"\"}"}"#), Some(11));
    }
}
