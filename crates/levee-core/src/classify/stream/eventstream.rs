//! The binary AWS event-stream framing (`application/vnd.amazon.eventstream`),
//! decoded incrementally with bounded memory.
//!
//! A message is
//!
//! ```text
//! total length u32 BE │ headers length u32 BE │ prelude CRC32 (of the 8 bytes before)
//! headers: (name length u8, name, value type u8, value)*
//! payload
//! message CRC32 (of every byte before it, prelude included)
//! ```
//!
//! Bytes are consumed as they come, whatever the chunk boundaries: the CRC
//! runs over them as they pass, the headers are kept (at most
//! [`MAX_HEADERS`]), and of the payload only its first [`MAX_PIECE`](super::framing::MAX_PIECE) bytes
//! (an exception's JSON is short; a longer payload is model output). A frame
//! whose prelude or message CRC does not match, whose lengths are absurd
//! (over [`MAX_FRAME`]), or whose headers do not parse, ends the decoding
//! with the reason; nothing panics on any input.

use std::ops::ControlFlow;

use super::framing::push_capped;

/// The longest frame accepted: 16 MiB (the protocol's payload limit, with
/// room for headers). A longer declared length is corruption, not data.
pub(super) const MAX_FRAME: usize = 16 * 1024 * 1024;

/// The most header bytes one frame may carry (the protocol's limit).
pub(super) const MAX_HEADERS: usize = 128 * 1024;

/// Total length, headers length, prelude CRC.
const PRELUDE: usize = 12;

/// A frame with no headers and no payload: the prelude and the message CRC.
const MIN_FRAME: usize = PRELUDE + 4;

/// The headers of one message that decide a verdict (string-valued only),
/// and the start of its payload.
#[derive(Debug, Default)]
pub(crate) struct AwsMessage<'a> {
    /// `:message-type`: `event`, `exception` or `error`.
    pub(crate) message_type: Option<&'a str>,
    /// `:event-type`: `chunk`, `messageStop`, `metadata`, …
    pub(crate) event_type: Option<&'a str>,
    /// `:exception-type`: `throttlingException`, …
    pub(crate) exception_type: Option<&'a str>,
    /// `:error-code` of an `error` message.
    pub(crate) error_code: Option<&'a str>,
    /// The payload, up to [`MAX_PIECE`](super::framing::MAX_PIECE) bytes.
    pub(crate) payload: &'a [u8],
}

/// Why a frame could not be read: the reason of the stream's verdict.
pub(crate) type Corrupt = &'static str;

/// The frame decoder's state between chunks.
#[derive(Clone, Debug, Default)]
pub(crate) struct Frames {
    prelude: [u8; PRELUDE],
    /// Bytes of the current frame consumed so far.
    pos: usize,
    total: usize,
    headers_len: usize,
    headers: Vec<u8>,
    payload: Vec<u8>,
    crc: [u8; 4],
    hasher: crc32fast::Hasher,
    /// A corrupt frame was met: the rest of the stream is not read.
    broken: bool,
}

impl Frames {
    /// Calls `f` with each message completed by `chunk` (or with the reason
    /// the stream is corrupt, after which nothing more is read), until it
    /// breaks.
    pub(crate) fn feed<B>(
        &mut self,
        chunk: &[u8],
        mut f: impl FnMut(Result<AwsMessage<'_>, Corrupt>) -> ControlFlow<B>,
    ) -> ControlFlow<B> {
        let mut rest = chunk;
        while !rest.is_empty() && !self.broken {
            if self.pos < PRELUDE {
                let n = (PRELUDE - self.pos).min(rest.len());
                self.prelude[self.pos..self.pos + n].copy_from_slice(&rest[..n]);
                self.pos += n;
                rest = &rest[n..];
                if self.pos == PRELUDE
                    && let Err(why) = self.start()
                {
                    self.broken = true;
                    return f(Err(why));
                }
                continue;
            }
            let end_headers = PRELUDE + self.headers_len;
            let end_payload = self.total - 4;
            let n = if self.pos < end_headers {
                let n = (end_headers - self.pos).min(rest.len());
                self.headers.extend_from_slice(&rest[..n]);
                self.hasher.update(&rest[..n]);
                n
            } else if self.pos < end_payload {
                let n = (end_payload - self.pos).min(rest.len());
                push_capped(&mut self.payload, &rest[..n]);
                self.hasher.update(&rest[..n]);
                n
            } else {
                let n = (self.total - self.pos).min(rest.len());
                let at = self.pos - end_payload;
                self.crc[at..at + n].copy_from_slice(&rest[..n]);
                n
            };
            self.pos += n;
            rest = &rest[n..];
            if self.pos == self.total {
                let flow = self.complete(&mut f);
                self.pos = 0;
                self.headers.clear();
                self.payload.clear();
                flow?;
            }
        }
        ControlFlow::Continue(())
    }

    /// Whether the stream stopped inside a frame.
    pub(super) fn mid_frame(&self) -> bool {
        self.pos > 0 && !self.broken
    }

    /// Checks a complete prelude and starts the frame's CRC.
    fn start(&mut self) -> Result<(), Corrupt> {
        let word = |i: usize| {
            u32::from_be_bytes([
                self.prelude[i],
                self.prelude[i + 1],
                self.prelude[i + 2],
                self.prelude[i + 3],
            ])
        };
        if crc32fast::hash(&self.prelude[..8]) != word(8) {
            return Err("stream:frame_crc");
        }
        let (total, headers_len) = (word(0) as usize, word(4) as usize);
        if !(MIN_FRAME..=MAX_FRAME).contains(&total)
            || headers_len > MAX_HEADERS
            || headers_len > total - MIN_FRAME
        {
            return Err("stream:frame_length");
        }
        self.total = total;
        self.headers_len = headers_len;
        self.hasher = crc32fast::Hasher::new();
        self.hasher.update(&self.prelude);
        Ok(())
    }

    /// A frame's last byte arrived: check its CRC, read its headers, hand it on.
    fn complete<B>(
        &mut self,
        f: &mut impl FnMut(Result<AwsMessage<'_>, Corrupt>) -> ControlFlow<B>,
    ) -> ControlFlow<B> {
        let crc = std::mem::take(&mut self.hasher).finalize();
        let message = if crc != u32::from_be_bytes(self.crc) {
            Err("stream:frame_crc")
        } else {
            read_headers(&self.headers, &self.payload).ok_or("stream:frame_headers")
        };
        if message.is_err() {
            self.broken = true;
        }
        f(message)
    }
}

/// Reads the headers the verdict needs, skipping the others by their type's
/// length; `None` if they do not parse.
fn read_headers<'a>(mut b: &'a [u8], payload: &'a [u8]) -> Option<AwsMessage<'a>> {
    let mut m = AwsMessage {
        payload,
        ..AwsMessage::default()
    };
    while let Some((&name_len, rest)) = b.split_first() {
        let (name, rest) = rest.split_at_checked(usize::from(name_len))?;
        let (&kind, rest) = rest.split_first()?;
        let (len, rest) = match kind {
            0 | 1 => (0, rest), // bool true / false: no value bytes
            2 => (1, rest),     // byte
            3 => (2, rest),     // i16
            4 => (4, rest),     // i32
            5 | 8 => (8, rest), // i64, timestamp (ms)
            9 => (16, rest),    // uuid
            6 | 7 => {
                // bytes, string: u16 BE length, then the value
                let (len, rest) = rest.split_at_checked(2)?;
                (usize::from(u16::from_be_bytes([len[0], len[1]])), rest)
            }
            _ => return None,
        };
        let (value, rest) = rest.split_at_checked(len)?;
        b = rest;
        if kind != 7 {
            continue;
        }
        let Ok(value) = std::str::from_utf8(value) else {
            continue;
        };
        match name {
            b":message-type" => m.message_type = Some(value),
            b":event-type" => m.event_type = Some(value),
            b":exception-type" => m.exception_type = Some(value),
            b":error-code" => m.error_code = Some(value),
            _ => {}
        }
    }
    Some(m)
}

/// Standard (or URL-safe) base64, padded or not, as a JSON string holds it
/// (a `\/` escape reads as `/`); `None` on any other byte. Decodes the
/// `bytes` of an `InvokeModelWithResponseStream` chunk.
pub(super) fn base64(s: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(s.len() / 4 * 3 + 2);
    let (mut acc, mut bits) = (0u32, 0u32);
    for &c in s {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' | b'-' => 62,
            b'/' | b'_' => 63,
            b'=' => break,
            b'\\' | b'\n' | b'\r' => continue,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::framing::MAX_PIECE;
    use super::*;

    /// A header value for [`frame`]: a string (type 7) or any other type
    /// with its raw value bytes.
    pub(crate) enum Value<'a> {
        Str(&'a str),
        Raw(u8, &'a [u8]),
    }

    /// Encodes one binary event-stream message, with real CRCs.
    pub(crate) fn frame(headers: &[(&str, Value<'_>)], payload: &[u8]) -> Vec<u8> {
        let mut h = Vec::new();
        for (name, value) in headers {
            h.push(name.len() as u8);
            h.extend_from_slice(name.as_bytes());
            match value {
                Value::Str(s) => {
                    h.push(7);
                    h.extend_from_slice(&(s.len() as u16).to_be_bytes());
                    h.extend_from_slice(s.as_bytes());
                }
                Value::Raw(kind, bytes) => {
                    h.push(*kind);
                    h.extend_from_slice(bytes);
                }
            }
        }
        let total = (PRELUDE + h.len() + payload.len() + 4) as u32;
        let mut f = Vec::with_capacity(total as usize);
        f.extend_from_slice(&total.to_be_bytes());
        f.extend_from_slice(&(h.len() as u32).to_be_bytes());
        let prelude_crc = crc32fast::hash(&f);
        f.extend_from_slice(&prelude_crc.to_be_bytes());
        f.extend_from_slice(&h);
        f.extend_from_slice(payload);
        let crc = crc32fast::hash(&f);
        f.extend_from_slice(&crc.to_be_bytes());
        f
    }

    /// A decoded message: message type, event type, payload.
    type Decoded = (String, String, Vec<u8>);

    /// Every message `bytes` decodes to, or the corruption that stopped it.
    fn decode(bytes: &[u8], split: usize) -> Vec<Result<Decoded, Corrupt>> {
        let mut frames = Frames::default();
        let mut out = Vec::new();
        for chunk in bytes.chunks(split.max(1)) {
            let _ = frames.feed::<()>(chunk, |m| {
                out.push(m.map(|m| {
                    (
                        m.message_type.unwrap_or_default().to_owned(),
                        m.event_type.unwrap_or_default().to_owned(),
                        m.payload.to_vec(),
                    )
                }));
                ControlFlow::Continue(())
            });
        }
        out
    }

    #[test]
    fn messages_decode_whatever_the_chunk_size_and_skip_every_header_type() {
        let uuid = [7u8; 16];
        let one = frame(
            &[
                (":message-type", Value::Str("event")),
                ("t", Value::Raw(0, &[])),
                ("f", Value::Raw(1, &[])),
                ("b", Value::Raw(2, &[9])),
                ("s", Value::Raw(3, &[0, 1])),
                ("i", Value::Raw(4, &[0, 0, 0, 1])),
                ("l", Value::Raw(5, &[0; 8])),
                ("bytes", Value::Raw(6, &[0, 2, 0xff, 0xfe])),
                ("ts", Value::Raw(8, &[0; 8])),
                ("id", Value::Raw(9, &uuid)),
                (":event-type", Value::Str("chunk")),
            ],
            b"{\"bytes\":\"e30=\"}",
        );
        let two = frame(&[(":message-type", Value::Str("event"))], b"");
        let stream = [one, two].concat();
        for split in [1, 2, 3, 7, 12, 13, 64, stream.len()] {
            let got = decode(&stream, split);
            assert_eq!(got.len(), 2, "split {split}");
            let first = got[0].as_ref().unwrap();
            assert_eq!((first.0.as_str(), first.1.as_str()), ("event", "chunk"));
            assert_eq!(first.2, b"{\"bytes\":\"e30=\"}");
            assert_eq!(got[1].as_ref().unwrap().2, b"");
        }
    }

    #[test]
    fn corrupt_frames_stop_the_decoding_with_a_reason() {
        let good = frame(&[(":message-type", Value::Str("event"))], b"{}");
        let mut bad_crc = good.clone();
        *bad_crc.last_mut().unwrap() ^= 1;
        assert_eq!(decode(&bad_crc, 5), [Err("stream:frame_crc")]);

        let mut bad_prelude = good.clone();
        bad_prelude[3] ^= 1;
        assert_eq!(decode(&bad_prelude, 5), [Err("stream:frame_crc")]);

        // An absurd length with a valid prelude CRC: refused before any
        // byte of it is buffered.
        let mut huge = ((MAX_FRAME + 1) as u32).to_be_bytes().to_vec();
        huge.extend_from_slice(&0u32.to_be_bytes());
        huge.extend_from_slice(&crc32fast::hash(&huge).to_be_bytes());
        assert_eq!(decode(&huge, 100), [Err("stream:frame_length")]);

        let bad_type = frame(&[("x", Value::Raw(10, &[]))], b"");
        assert_eq!(decode(&bad_type, 100), [Err("stream:frame_headers")]);
        // Nothing after a corrupt frame is read.
        let after = [bad_crc, good].concat();
        assert_eq!(decode(&after, 4).len(), 1);
    }

    #[test]
    fn a_payload_longer_than_the_bound_is_kept_by_its_start() {
        let payload = vec![b'x'; MAX_PIECE + 10];
        let f = frame(&[], &payload);
        let got = decode(&f, 4096);
        assert_eq!(got[0].as_ref().unwrap().2.len(), MAX_PIECE);
    }

    /// The verdict on a prelude declaring `total` bytes and `headers`
    /// header bytes: `Some` corruption, or `None` (a frame under way).
    fn prelude(total: u32, headers: u32) -> Option<Corrupt> {
        let mut p = Vec::new();
        p.extend_from_slice(&total.to_be_bytes());
        p.extend_from_slice(&headers.to_be_bytes());
        let crc = crc32fast::hash(&p);
        p.extend_from_slice(&crc.to_be_bytes());
        decode(&p, p.len()).into_iter().find_map(Result::err)
    }

    #[test]
    fn a_prelude_is_held_to_the_protocols_limits() {
        const KIB: u32 = 1024;
        // Within them: a 2 MiB frame with 128 KiB of headers.
        assert_eq!(prelude(2 * 1024 * KIB, 128 * KIB), None);
        assert_eq!(prelude(16 * 1024 * KIB, 0), None);
        assert_eq!(prelude(16, 0), None);
        // Past them.
        assert_eq!(prelude(16 * 1024 * KIB + 1, 0), Some("stream:frame_length"));
        assert_eq!(
            prelude(2 * 1024 * KIB, 128 * KIB + 1),
            Some("stream:frame_length")
        );
        assert_eq!(prelude(15, 0), Some("stream:frame_length"));
        // Headers that leave no room for the prelude and the message CRC.
        assert_eq!(prelude(100, 85), Some("stream:frame_length"));
        assert_eq!(prelude(100, 84), None);
    }

    #[test]
    fn base64_as_bedrock_and_json_spell_it() {
        // The two alphabets' last two digits.
        assert_eq!(base64(b"+/8=").unwrap(), [0xfb, 0xff]);
        assert_eq!(base64(b"-_8=").unwrap(), [0xfb, 0xff]);
        assert_eq!(base64(b"e30=").unwrap(), b"{}");
        assert_eq!(base64(b"eyJhIjoxfQ==").unwrap(), b"{\"a\":1}");
        assert_eq!(base64(b"eyJhIjoxfQ").unwrap(), b"{\"a\":1}");
        assert_eq!(base64(b"P\\/8=").unwrap(), [0x3f, 0xff]);
        assert!(base64(b"not base64!").is_none());
    }
}
