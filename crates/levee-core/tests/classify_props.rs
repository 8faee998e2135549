//! Properties of classification: nothing panics whatever the input, no
//! wait exceeds `max_wait`, and a stream's verdict does not depend on how
//! its bytes were split into chunks.

mod support;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use levee_core::classify::hints;
use levee_core::classify::{
    Classification, Classify, ProviderClassifier, ResponseView, StreamScanner, Verdict,
};
use proptest::prelude::*;
use proptest::sample::{Index, select};

const HEADER_NAMES: &[&str] = &[
    "retry-after",
    "retry-after-ms",
    "x-ms-retry-after-ms",
    "date",
    "x-should-retry",
    "x-ratelimit-remaining-requests",
    "x-ratelimit-reset-requests",
    "x-ratelimit-remaining-tokens",
    "x-ratelimit-reset-tokens",
    "anthropic-ratelimit-tokens-remaining",
    "anthropic-ratelimit-tokens-reset",
    "anthropic-ratelimit-requests-remaining",
    "anthropic-ratelimit-requests-reset",
    "x-ratelimit-limit-requests",
    "x-ratelimit-limit-tokens",
    "x-ratelimit-remaining-req-minute",
    "x-ratelimit-reset-tokens-day",
    "x-ratelimit-remaining",
    "x-ratelimit-reset",
    "x-tokenlimit-remaining",
    "anthropic-ratelimit-output-tokens-limit",
    "x-amzn-errortype",
    "content-type",
    "openai-organization",
    "x-ms-region",
    "x-groq-region",
];

const HEADER_VALUES: &[&str] = &[
    "0",
    "-1",
    "7",
    "1.5",
    "6m0s",
    "4m12.172s",
    "20ms",
    "99999999999999999999",
    "1e9",
    "inf",
    "Sun, 23 Aug 2026 12:00:00 GMT",
    "Wed, 21 Oct 2015 07:28:00 GMT",
    "2026-08-23T12:00:30Z",
    "9999-12-31T23:59:59Z",
    "true",
    "false",
    "ThrottlingException:x",
    "ModelErrorException",
    "text/event-stream",
    "application/json",
];

/// Pieces of provider error bodies, to build bodies that get deep into the parsers.
const BODY_FRAGMENTS: &[&str] = &[
    "{\"error\":{",
    "{\"type\":\"error\",\"error\":{",
    "[{\"error\":{",
    "\"code\":",
    "429",
    "\"429\"",
    "\"insufficient_quota\"",
    "\"rate_limit_exceeded\"",
    "\"RESOURCE_EXHAUSTED\"",
    "\"type\":",
    "\"status\":",
    "\"message\":\"",
    "Please try again in ",
    "1m26.4s",
    "99999999999h",
    "0.0000000001s",
    "retry after 86400 seconds",
    "regain access on 2026-09-01 at 00:00 UTC",
    "regain access on 9999-12-31",
    "per day",
    "Request too large",
    "usage limit",
    "\"details\":[{\"@type\":\"type.googleapis.com/google.rpc.RetryInfo\",\"retryDelay\":\"",
    "\"@type\":\"x.QuotaFailure\",\"violations\":[{\"quotaId\":\"PerDay\"}]",
    "\"details\":{\"error_code\":\"",
    "\"__type\":\"a#ValidationException\"",
    "\"originalStatusCode\":",
    "-5",
    "null",
    "\"",
    "\\",
    "}",
    "]",
    "{",
    "[",
    ",",
    ":",
    "é",
    "\u{10ffff}",
    " ",
];

fn header_value() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        select(HEADER_VALUES).prop_map(|v| v.as_bytes().to_vec()),
        prop::collection::vec(any::<u8>(), 0..40),
    ]
}

fn body() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..2048),
        prop::collection::vec(select(BODY_FRAGMENTS), 0..40).prop_map(|f| f.concat().into_bytes()),
        (
            prop::collection::vec(select(BODY_FRAGMENTS), 0..40),
            any::<Index>()
        )
            .prop_map(|(f, cut)| {
                // A peek cut anywhere, mid-character included.
                let b = f.concat().into_bytes();
                let n = if b.is_empty() { 0 } else { cut.index(b.len()) };
                b[..n].to_vec()
            }),
    ]
}

fn header_map() -> impl Strategy<Value = HeaderMap> {
    prop::collection::vec((select(HEADER_NAMES), header_value()), 0..8).prop_map(|pairs| {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            if let Ok(v) = HeaderValue::from_bytes(&v) {
                h.append(HeaderName::from_static(k), v);
            }
        }
        h
    })
}

fn noon() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_787_486_400)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn classifier_never_panics_and_caps_every_wait(
        status in 100u16..1000,
        headers in header_map(),
        body in body(),
        max_wait_ms in 1u64..10_000_000_000,
    ) {
        let status = StatusCode::from_u16(status).unwrap();
        for c in [
            ProviderClassifier::default(),
            ProviderClassifier::builder().max_wait(Duration::from_millis(max_wait_ms)).build(),
        ] {
            let got = c.classify_response(&ResponseView::new(status, &headers, &body).with_now(noon()));
            prop_assert!(got.wait.is_none_or(|w| w <= c.max_wait()), "{got:?}");
            prop_assert!(got.wait.is_none_or(|w| w.subsec_nanos() % 1_000_000 == 0 || w == c.max_wait()));
            prop_assert!(!got.reason.as_str().is_empty());
            if status.as_u16() < 400 {
                prop_assert_eq!(got, Classification::success());
            }
        }
    }

    #[test]
    fn hint_parsers_never_panic(s in "\\PC*", bytes in prop::collection::vec(any::<u8>(), 0..64)) {
        let lossy = String::from_utf8_lossy(&bytes);
        for s in [s.as_str(), &*lossy] {
            let _ = hints::go_duration(s);
            let _ = hints::proto_duration(s);
            let _ = hints::delay_seconds(s);
            let _ = hints::delay_millis(s);
            let _ = hints::rfc3339(s);
            let _ = hints::text_date(s);
            let _ = hints::text_duration(s);
            let _ = hints::http_date(s);
            let _ = hints::text_wait(s, noon());
        }
    }

    #[test]
    fn header_hints_never_panic_nor_go_negative(headers in header_map()) {
        let reference = hints::reference_time(&headers, Some(noon()));
        for w in [hints::retry_after(&headers, reference), hints::reset_wait(&headers, reference)] {
            prop_assert!(w.is_none_or(|w| !w.is_zero()));
        }
        let _ = hints::should_retry(&headers);
    }

    #[test]
    fn rate_limits_keep_remaining_within_the_limit_and_ignore_header_order(
        headers in header_map(),
    ) {
        let limits = hints::RateLimits::read(&headers, noon());
        for w in limits.iter() {
            prop_assert!(w.remaining.zip(w.limit).is_none_or(|(r, l)| r <= l), "{w:?}");
            prop_assert!(w.reset.is_none_or(|r| !r.is_zero() && r <= hints::MAX_RESET));
        }
        // The same headers in the reverse order: the same windows.
        let mut reversed = HeaderMap::new();
        let pairs: Vec<_> = headers.iter().collect();
        for (k, v) in pairs.into_iter().rev() {
            reversed.append(k.clone(), v.clone());
        }
        let sorted = |l: &hints::RateLimits| {
            let mut w: Vec<_> = l.iter().map(|w| format!("{w:?}")).collect();
            w.sort();
            w
        };
        // A name repeated with two values keeps the later one: compare only
        // when each name appears once.
        if headers.keys_len() == headers.len() {
            prop_assert_eq!(sorted(&limits), sorted(&hints::RateLimits::read(&reversed, noon())));
        }
    }

    #[test]
    fn hint_parsers_read_what_they_write(secs in 0u64..10_000_000, millis in 0u32..1000) {
        let d = Duration::from_secs(secs) + Duration::from_millis(u64::from(millis));
        let text = format!("{}.{:03}", secs, millis);
        prop_assert_eq!(hints::delay_seconds(&text), Some(d));
        prop_assert_eq!(hints::proto_duration(&format!("{text}s")), Some(d));
        prop_assert_eq!(hints::go_duration(&format!("{}h{}m{}.{:03}s", secs / 3600, secs / 60 % 60, secs % 60, millis)), Some(d));
    }
}

// === streams ===

/// Pieces of real streams: events of every dialect, keep-alives, errors,
/// terminal markers, odd line endings and noise.
const STREAM_FRAGMENTS: &[&str] = &[
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"},\"finish_reason\":null}]}\n\n",
    "data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
    "data: [DONE]\n\n",
    "data: {\"error\": {\"message\": \"boom\", \"type\": \"server_error\"}}\n\n",
    "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\"}}\n\n",
    "event: error\ndata: {\"type\":\"error\",\"code\":\"rate_limit_exceeded\",\"message\":\"try again in 2s\"}\n\n",
    "event: message_start\ndata: {\"type\":\"message_start\"}\n\n",
    "event: message_stop\ndata: {\"type\":\"message_stop\"}\r\n\r\n",
    "event: response.completed\ndata: {\"type\":\"response.completed\"}\n\n",
    "event: response.failed\ndata: {\"type\":\"response.failed\",\"response\":{\"error\":{\"code\":\"server_error\"}}}\n\n",
    ": OPENROUTER PROCESSING\n\n",
    "data: {\"choices\":[{\"finish_reason\":\"error\"}]}\n\n",
    "data: {\"candidates\":[{\"finishReason\":\"STOP\"}]}\n\n",
    "{\n  \"error\": {\n    \"code\": 503,\n    \"status\": \"UNAVAILABLE\"\n  }\n}\n",
    "{\"error\":{\"message\":\"regain access on 2026-09-01 at 00:00 UTC\",\"type\":\"insufficient_quota\"}}\n",
    "{\"eventstream_frame\":{\"headers\":{\":message-type\":\"exception\",\":exception-type\":\"throttlingException\"},\"payload\":{\"message\":\"x\"}}}",
    "{\"eventstream_frame\":{\"headers\":{\":message-type\":\"event\"},\"payload\":{\"bytes\":\"e30=\"}}}",
    "{\"done\":false}\n",
    "{\"done\":true}\n",
    "data: multi\ndata: line\n\n",
    "\r",
    "\n",
    "\r\n",
    ",",
    "[",
    "]",
    "{",
    "}",
    "\"",
    "\\",
    "data:",
    "é",
];

fn stream_body() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(select(STREAM_FRAGMENTS), 0..16).prop_map(|f| f.concat().into_bytes())
}

fn scanner(content_type: &'static str) -> StreamScanner {
    let mut h = HeaderMap::new();
    h.insert("content-type", HeaderValue::from_static(content_type));
    h.insert(
        "date",
        HeaderValue::from_static("Sun, 23 Aug 2026 12:00:00 GMT"),
    );
    ProviderClassifier::default()
        .stream_scanner(StatusCode::OK, &h)
        .unwrap()
}

/// Feeds `body` cut at `cuts`; returns the classification `feed` reported
/// (if any) and the one `finish` returned.
fn run(
    content_type: &'static str,
    body: &[u8],
    cuts: &[usize],
) -> (Option<Classification>, Classification) {
    support::feed_split(scanner(content_type), body, cuts)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn any_split_of_a_stream_gives_the_same_verdict(
        body in stream_body(),
        cuts in prop::collection::vec(any::<Index>(), 0..12),
        format in select(&["text/event-stream", "application/x-ndjson", "application/vnd.amazon.eventstream"][..]),
    ) {
        let mut cuts: Vec<usize> = cuts.iter().map(|i| i.index(body.len() + 1)).collect();
        cuts.sort_unstable();
        let whole = run(format, &body, &[]);
        prop_assert_eq!(&run(format, &body, &cuts), &whole);
        let bytewise: Vec<usize> = (0..body.len()).collect();
        prop_assert_eq!(&run(format, &body, &bytewise), &whole);
        prop_assert!(whole.1.wait.is_none_or(|w| w <= ProviderClassifier::DEFAULT_MAX_WAIT));
    }

    #[test]
    fn the_scanner_never_panics_on_arbitrary_bytes(
        body in prop::collection::vec(any::<u8>(), 0..4096),
        format in select(&["text/event-stream", "application/x-ndjson", "application/vnd.amazon.eventstream"][..]),
    ) {
        let c = run(format, &body, &[body.len() / 2]).1;
        prop_assert!(Verdict::ALL.contains(&c.verdict));
    }
}

/// A deterministic mebibyte of noise (xorshift), and one of JSON-ish noise.
fn mebibytes() -> [Vec<u8>; 2] {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let noise = (0..1 << 20)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    let jsonish = BODY_FRAGMENTS
        .iter()
        .cycle()
        .take(1 << 17)
        .copied()
        .collect::<String>();
    [noise, jsonish.into_bytes()[..1 << 20].to_vec()]
}

#[test]
fn a_mebibyte_of_garbage_classifies_without_panic() {
    let c = ProviderClassifier::default();
    let h = HeaderMap::new();
    for body in mebibytes() {
        for status in [400, 429, 503] {
            let got = c.classify_response(&ResponseView::new(
                StatusCode::from_u16(status).unwrap(),
                &h,
                &body,
            ));
            assert!(got.wait.is_none_or(|w| w <= c.max_wait()));
        }
        for format in [
            "text/event-stream",
            "application/x-ndjson",
            "application/vnd.amazon.eventstream",
        ] {
            let mut s = scanner(format);
            for chunk in body.chunks(8192) {
                s.feed(chunk);
            }
            s.finish();
        }
    }
}
