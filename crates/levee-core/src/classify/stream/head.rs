//! An event's own `type`, read from its first bytes: each event's JSON
//! names its type first, and a stream's every event is asked for it.

use super::super::body::value_after_bytes;

/// The value of the first `"type"` key in the first 48 bytes: each event's
/// own type comes first in its JSON. Found by its `y`, rare in JSON heads.
pub(super) fn head_type(t: &[u8]) -> Option<&[u8]> {
    // Cut at 48 where that is a character boundary, else read it all.
    let head = match t.get(48) {
        Some(&c) if (c as i8) >= -0x40 => &t[..48],
        Some(_) => t,
        None => t,
    };
    if !has_y(head) {
        return None;
    }
    let mut next = 0;
    for y in memchr::memchr_iter(b'y', head) {
        let Some(at) = y.checked_sub(2).filter(|&at| at >= next) else {
            continue;
        };
        if !head[at..].starts_with(b"\"type\"") {
            continue;
        }
        // Occurrences are taken as a substring search would, not overlapping.
        next = at + 6;
        // `\"type\"` is text inside a string, not a key.
        if at > 0 && head[at - 1] == b'\\' {
            continue;
        }
        if let Some(v) = value_after_bytes(head, at + 6) {
            return Some(v);
        }
    }
    None
}

/// Whether `head` holds a `y`, eight bytes at a time: most event heads hold
/// none, and 48 bytes take less to test in place than a SIMD search takes
/// to start.
fn has_y(head: &[u8]) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    // The classic zero-byte test on each word xor `yyyyyyyy`, folded without
    // a branch per word; a high bit survives where some word held a `y`.
    let step = |acc: u64, w: &[u8; 8]| {
        let x = u64::from_le_bytes(*w) ^ (ONES * u64::from(b'y'));
        acc | (x.wrapping_sub(ONES) & !x)
    };
    let (words, tail) = head.as_chunks::<8>();
    let folded = match <&[[u8; 8]; 6]>::try_from(words) {
        // The usual 48-byte head, at a length the compiler unrolls.
        Ok(six) => six.iter().fold(0, step),
        Err(_) => words.iter().fold(0, step),
    };
    folded & HIGHS != 0 || tail.contains(&b'y')
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn a_type_past_the_first_48_bytes_is_not_read() {
        // Byte 48 is a digit of the id: the head ends there.
        let event = format!(r#"{{"id":"{}","type":"ping"}}"#, "7".repeat(50));
        assert_eq!(head_type(event.as_bytes()), None);
        assert_eq!(
            head_type(br#"{"id":"7","type":"ping"}"#),
            Some(&b"ping"[..])
        );
    }

    #[test]
    fn a_head_may_start_with_the_type_key() {
        assert_eq!(head_type(br#""type":"ping"}"#), Some(&b"ping"[..]));
    }

    #[test]
    fn a_y_in_the_same_place_of_two_words_is_found() {
        assert!(has_y(b"yxxxxxxxyxxxxxxx"));
        assert!(has_y(b"xxxxxxxyxxxxxxxy"));
        assert!(!has_y(b"xxxxxxxxxxxxxxxx"));
    }

    #[test]
    fn an_escaped_quote_before_type_is_not_the_type_key() {
        // The first key is `"type` (a quote and four letters), not `type`.
        let event = br#"{"\"type":"fake","type":"real"}"#;
        assert_eq!(head_type(event), Some(&b"real"[..]));
    }

    #[test]
    fn a_head_is_not_cut_inside_a_character() {
        // `{"type":"` is 9 bytes; the é of the value spans bytes 47 and 48.
        let value = format!("{}é", "a".repeat(38));
        let event = format!(r#"{{"type":"{value}"}}"#);
        assert_eq!(event.as_bytes()[47], 0xc3);
        assert_eq!(head_type(event.as_bytes()), Some(value.as_bytes()));
    }

    proptest! {
        /// The word-at-a-time test for a `y` agrees with a byte search.
        #[test]
        fn the_word_test_for_y_agrees_with_a_search(
            head in prop::collection::vec(prop_oneof![Just(b'y'), Just(b'x'), Just(0xf9u8), any::<u8>()], 0..64),
        ) {
            prop_assert_eq!(has_y(&head), head.contains(&b'y'));
        }
    }
}
