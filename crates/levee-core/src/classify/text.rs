//! Substring search over messages and events.
//!
//! Message rules look for a few anchor words with `memchr`'s SIMD search and
//! read only the neighbourhood of each hit, instead of searching a 16 KiB
//! peek once per phrase. A searcher is built once per needle (the
//! [`needle!`]/[`needles!`] statics): building one costs more than
//! searching a kilobyte with it.

use std::sync::OnceLock;

use memchr::memmem::Finder;

/// An error's words lowercased for matching (the message, and an upstream
/// copy of one), and whether they are all ASCII: most are, and then the
/// phrases in other scripts are skipped without a scan each.
#[derive(Debug)]
pub(crate) struct Lower {
    text: String,
    ascii: bool,
}

impl Lower {
    /// `message`, then `upstream` on a line of its own: ASCII letters the
    /// cheap way, any other script by Unicode's rules (`СЛИШКОМ` →
    /// `слишком`, `ÜBERSCHRITTEN` → `überschritten`).
    pub(crate) fn new(message: &str, upstream: Option<&str>) -> Lower {
        // A message sent percent-encoded (xAI's `Incorrect%20API%20key%20provided`)
        // is read decoded. Such a message has no space; most messages have
        // one within their first words, which ends the check there.
        if !spaced_early(message.as_bytes()) && message.contains("%20") {
            return Lower::new(&percent_decoded(message), upstream);
        }
        let ascii = message.is_ascii() && upstream.is_none_or(str::is_ascii);
        let lower = |s: &str| {
            if ascii {
                s.to_ascii_lowercase()
            } else {
                s.to_lowercase()
            }
        };
        let mut text = lower(message);
        if let Some(upstream) = upstream {
            text.push('\n');
            text.push_str(&lower(upstream));
        }
        Lower { text, ascii }
    }

    /// Whether every character is ASCII.
    pub(crate) fn ascii(&self) -> bool {
        self.ascii
    }
}

/// Whether `b` has a space in its first 24 bytes, read as three 8-byte
/// words: the test for a zero byte in a word, on the word XOR spaces.
fn spaced_early(b: &[u8]) -> bool {
    const ONES: u64 = u64::from_le_bytes([0x01; 8]);
    const HIGHS: u64 = u64::from_le_bytes([0x80; 8]);
    const SPACES: u64 = u64::from_le_bytes([b' '; 8]);
    let Some(head) = b.get(..24) else {
        return b.contains(&b' ');
    };
    head.chunks_exact(8).any(|w| {
        let v = u64::from_le_bytes(w.try_into().unwrap_or_default()) ^ SPACES;
        v.wrapping_sub(ONES) & !v & HIGHS != 0
    })
}

/// `text` with each `%XX` escape replaced by its byte (a sequence that is
/// not UTF-8 is replaced by U+FFFD, and a `%` not followed by two hex
/// digits kept as it is).
#[cold]
#[inline(never)]
fn percent_decoded(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| char::from(c).to_digit(16);
        if b[i] == b'%'
            && let (Some(hi), Some(lo)) = (
                b.get(i + 1).copied().and_then(hex),
                b.get(i + 2).copied().and_then(hex),
            )
        {
            out.push(u8::try_from(hi * 16 + lo).unwrap_or(b'?'));
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Text lowercased for matching: ASCII the cheap way, any other script by
/// Unicode's rules.
pub(crate) fn lowercase(text: &str) -> String {
    if text.is_ascii() {
        text.to_ascii_lowercase()
    } else {
        text.to_lowercase()
    }
}

impl std::ops::Deref for Lower {
    type Target = str;

    fn deref(&self) -> &str {
        &self.text
    }
}

/// A needle whose searcher is built on first use and kept.
#[derive(Debug)]
pub(crate) struct Needle {
    text: &'static str,
    finder: OnceLock<Finder<'static>>,
}

impl Needle {
    pub(crate) const fn new(text: &'static str) -> Needle {
        Needle {
            text,
            finder: OnceLock::new(),
        }
    }

    fn finder(&self) -> &Finder<'static> {
        self.finder.get_or_init(|| Finder::new(self.text))
    }

    pub(crate) fn len(&self) -> usize {
        self.text.len()
    }

    /// What it searches for.
    pub(crate) fn text(&self) -> &'static str {
        self.text
    }

    /// The first offset of the needle in `hay`.
    pub(crate) fn find(&self, hay: &[u8]) -> Option<usize> {
        // A few bytes (the tail of an event past its last hit) cost less
        // to compare in place than to hand to the searcher.
        if let [first, ..] = self.text.as_bytes()
            && hay.len() < 16
        {
            let needle = self.text.as_bytes();
            return hay
                .windows(needle.len())
                .position(|w| w[0] == *first && w == needle);
        }
        self.finder().find(hay)
    }

    /// Whether the needle occurs in `hay`.
    pub(crate) fn is_in(&self, hay: &str) -> bool {
        self.find(hay.as_bytes()).is_some()
    }

    /// How many times the needle occurs in `hay` (not overlapping).
    pub(crate) fn count(&self, hay: &[u8]) -> usize {
        self.finder().find_iter(hay).count()
    }

    /// Byte offsets of every occurrence in `hay`.
    pub(crate) fn find_all<'h>(&'static self, hay: &'h str) -> impl Iterator<Item = usize> + 'h {
        self.finder().find_iter(hay.as_bytes())
    }
}

/// A `&'static Needle` for a literal, its searcher cached at the call site.
macro_rules! needle {
    ($s:literal) => {{
        static NEEDLE: $crate::classify::text::Needle = $crate::classify::text::Needle::new($s);
        &NEEDLE
    }};
}

/// A `&'static [Needle]` for literals, their searchers cached at the call site.
macro_rules! needles {
    ($($s:literal),+ $(,)?) => {{
        const LEN: usize = [$($s),+].len();
        static NEEDLES: [$crate::classify::text::Needle; LEN] =
            [$($crate::classify::text::Needle::new($s)),+];
        &NEEDLES
    }};
}

pub(crate) use {needle, needles};

/// Whether any of `needles` occurs in `hay`.
pub(crate) fn contains_any(hay: &str, needles: &[Needle]) -> bool {
    needles.iter().any(|n| n.is_in(hay))
}

/// A short search for short haystacks (a code, a window around an anchor),
/// where building a searcher would cost more than the search.
pub(crate) fn small_find(hay: &[u8], needle: &[u8]) -> bool {
    let Some(&first) = needle.first() else {
        return true;
    };
    hay.windows(needle.len())
        .any(|w| w[0] == first && w == needle)
}

/// Whether some `anchor` in `hay` has one of `words` within `reach` bytes
/// before or after it.
pub(crate) fn near(hay: &str, anchor: &'static Needle, words: &[&str], reach: usize) -> bool {
    let b = hay.as_bytes();
    anchor.find_all(hay).any(|at| {
        let window = &b[at.saturating_sub(reach)..(at + anchor.len() + reach).min(b.len())];
        words.iter().any(|w| small_find(window, w.as_bytes()))
    })
}

/// Whether some `anchor` in `hay` is directly preceded by one of `words`.
pub(crate) fn preceded_by(hay: &str, anchor: &'static Needle, words: &[&str]) -> bool {
    let b = hay.as_bytes();
    anchor
        .find_all(hay)
        .any(|at| words.iter().any(|w| b[..at].ends_with(w.as_bytes())))
}

/// A 64-bit set of the byte pairs in `s` (hashed). A word can occur in a
/// code only if all its pairs are in the code's set, which rules out almost
/// every word of the code tables with one AND.
pub(crate) const fn pairs(s: &[u8]) -> u64 {
    let mut mask = 0u64;
    let mut i = 0;
    while i + 1 < s.len() {
        let h = (s[i] as u32).wrapping_mul(31).wrapping_add(s[i + 1] as u32);
        mask |= 1 << (h % 64);
        i += 1;
    }
    mask
}

/// A word of a code table, with its pair set.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Word {
    text: &'static str,
    pairs: u64,
}

impl Word {
    pub(crate) const fn new(text: &'static str) -> Word {
        Word {
            text,
            pairs: pairs(text.as_bytes()),
        }
    }

    /// Whether the word occurs in `code` (lowercase), whose pair set is `code_pairs`.
    #[inline]
    pub(crate) fn in_code(&self, code: &[u8], code_pairs: u64) -> bool {
        self.pairs & code_pairs == self.pairs && small_find(code, self.text.as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_space_is_found_in_any_of_the_first_24_bytes_and_no_further() {
        let at = |i: usize| {
            let mut s = vec![b'x'; 40];
            s[i] = b' ';
            spaced_early(&s)
        };
        assert!((0..24).all(at));
        assert!(!(24..40).any(at));
        assert!(spaced_early(b"a b") && !spaced_early(b"a%20b") && !spaced_early(b""));
    }

    #[test]
    fn a_percent_encoded_message_is_read_decoded() {
        let lower = Lower::new("Incorrect%20API%20key%20provided:%20ba***na.", None);
        assert_eq!(&*lower, "incorrect api key provided: ba***na.");
        assert_eq!(
            percent_decoded("100%25 of %E4%BD%99%E9%A2%9D"),
            "100% of 余额"
        );
        assert_eq!(percent_decoded("50% off %2"), "50% off %2");
        assert_eq!(percent_decoded("%FF%20x"), "\u{FFFD} x");
        // Without `%20` a message is not decoded: `100%25` may be the words.
        assert_eq!(&*Lower::new("Usage at 100%25", None), "usage at 100%25");
    }

    #[test]
    fn a_needle_is_found_in_short_and_long_haystacks() {
        let n = needle!("quota");
        // Under 16 bytes the search is done in place.
        assert_eq!(n.find(b"over quota"), Some(5));
        assert_eq!(n.find(b"quot"), None);
        assert_eq!(n.find(b"qqqquota"), Some(3));
        let long = format!("{}quota", "x".repeat(40));
        assert_eq!(n.find(long.as_bytes()), Some(40));
        assert_eq!(n.find(&long.as_bytes()[..44]), None);
    }

    #[test]
    fn a_word_counts_only_within_reach_of_its_anchor() {
        let anchor = needle!("limit");
        // "limit" at 3, its end at 8: reach 4 covers bytes 0..12.
        assert!(near("aa limit exceeded", anchor, &["exc"], 4));
        assert!(!near("aa limit bbbbbbb ex", anchor, &["ex"], 4));
        assert!(near("ex limit", anchor, &["ex"], 4));
        assert!(!near("ex bbbb limit", anchor, &["ex"], 4));
    }

    #[test]
    fn preceded_by_reads_the_bytes_right_before_the_anchor() {
        let anchor = needle!("found");
        assert!(preceded_by("model not found", anchor, &["not "]));
        assert!(!preceded_by("not the model found", anchor, &["not "]));
    }

    #[test]
    fn a_pair_set_rules_out_words_with_a_pair_the_code_lacks() {
        let word = Word::new("quota");
        let code = b"insufficient_quota";
        assert!(word.in_code(code, pairs(code)));
        assert_ne!(pairs(b"qu"), 0);
        assert_ne!(pairs(b"qu"), pairs(b"ot"));
        // The pair filter alone rejects a code with none of the pairs.
        assert_ne!(word.pairs & pairs(b"zzzz"), word.pairs);
    }
}
