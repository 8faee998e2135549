//! What the tests share: the stream property tests' split feeder, and the
//! breaker state-machine tests' harness.

// Each test crate uses only some of it.
#![allow(dead_code)]

pub(crate) mod breaker;

use levee_core::classify::{Classification, StreamScanner};

/// Feeds `body` to `scanner` cut at `cuts` (sorted offsets); returns the
/// classification `feed` reported (if any) and the one `finish` returned,
/// asserting `feed` reports at most once and `finish` agrees with it.
pub(crate) fn feed_split(
    mut scanner: StreamScanner,
    body: &[u8],
    cuts: &[usize],
) -> (Option<Classification>, Classification) {
    let mut reported = None;
    let mut from = 0;
    for &to in cuts.iter().chain([&body.len()]) {
        if let Some(c) = scanner.feed(&body[from..to]) {
            assert!(reported.is_none(), "feed reported twice");
            reported = Some(c);
        }
        from = to;
    }
    let end = scanner.finish();
    if let Some(r) = &reported {
        assert_eq!(r, &end, "finish disagrees with what feed reported");
    }
    (reported, end)
}
