//! Fuzz targets for every parser of provider bytes and of configuration.
//!
//! Each target is a function here, called by its `fuzz_targets/*.rs` driver
//! under libFuzzer and by this crate's tests, which replay the seed corpus
//! and every input in `regressions/` (crashes and hangs once found). A
//! target panics when an invariant breaks, not only when a parser does:
//!
//! - [`classify`]: a response (status, headers, body) through
//!   `classify_response`, `classify_head` and, for a stream, the scanner:
//!   every wait within the classifier's cap, every reason short and
//!   non-empty.
//! - [`hints`]: every wait-hint parser over the same text, and as the value
//!   of every header that carries one: hints are never zero, a duration
//!   read from text never claims more bytes than it had.
//! - [`stream`]: SSE, NDJSON (Gemini's JSON array) and AWS event-stream
//!   scanners: any split of the bytes gives the same verdict as the whole,
//!   and `feed` reports at most once, agreeing with `finish`.
//! - [`config`]: a TOML or JSON configuration deserialised and built:
//!   a typed error or a layer, never a panic.
//! - [`rules`]: a user's rules file (TOML) read: a typed error naming
//!   what is wrong, or rules that then classify a response; a rule that
//!   decides gives its own verdict and a wait within the cap.
//! - [`rules_match`]: a response (status, headers, body) through a
//!   classifier with a fixed set of user rules of every kind and 2xx
//!   bodies read (`peek_success`): the rule that decided matches what it
//!   says, and the invariants of [`classify`] hold.
//! - [`request`]: the request path of a server in front of a provider (the
//!   gateway's): the caller's key read from its headers, the body peeked
//!   for its model and stream flag, the model routed and renamed in place,
//!   and the answer's usage read from any split of its bytes: a renamed
//!   body peeks back to the new name with every other byte unchanged, and
//!   the usage read in pieces is the usage read whole.
//!
//! Inputs are plain bytes in a readable form, so a regression file can be
//! read and edited (see [`Case`]).

use std::time::{Duration, SystemTime};

use http::header::{HeaderName, HeaderValue};
use http::{HeaderMap, StatusCode};
use levee_core::classify::hints;
use levee_core::classify::{
    Classification, Classify, Dialect, ProviderClassifier, ResponseView, Rules, StreamFormat,
    StreamScanner,
};

/// `Sun, 23 Aug 2026 12:00:00 GMT`: the fixed `now` of every target, so a
/// failure replays the same way.
pub const NOW: &str = "Sun, 23 Aug 2026 12:00:00 GMT";

fn now() -> SystemTime {
    hints::http_date(NOW).expect("a valid date")
}

/// A response as the fuzzer's bytes spell it: `429\n`, then header lines
/// `name: value\n` up to an empty line, then the body. Without a leading
/// three-digit status the first two bytes pick one.
#[derive(Debug)]
pub struct Case<'a> {
    /// The status.
    pub status: StatusCode,
    /// The headers that were valid.
    pub headers: HeaderMap,
    /// Everything after the headers.
    pub body: &'a [u8],
}

impl<'a> Case<'a> {
    /// Reads a case; every input is one.
    pub fn decode(data: &'a [u8]) -> Case<'a> {
        let (status, mut rest) = match data {
            [a, b, c, b'\n', rest @ ..] if [a, b, c].iter().all(|d| d.is_ascii_digit()) => {
                let n = [a, b, c]
                    .iter()
                    .fold(0u16, |n, &&d| n * 10 + u16::from(d - b'0'));
                (n, rest)
            }
            [a, b, rest @ ..] => (100 + u16::from_le_bytes([*a, *b]) % 900, rest),
            _ => (500, &[][..]),
        };
        let status = StatusCode::from_u16(status.max(100)).unwrap_or(StatusCode::BAD_GATEWAY);
        let mut headers = HeaderMap::new();
        while let Some(end) = rest.iter().position(|&c| c == b'\n') {
            let line = &rest[..end];
            rest = &rest[end + 1..];
            if line.is_empty() || headers.len() >= 64 {
                break;
            }
            let Some(colon) = line.iter().position(|&c| c == b':') else {
                continue;
            };
            let (Ok(name), Ok(value)) = (
                HeaderName::from_bytes(line[..colon].trim_ascii()),
                HeaderValue::from_bytes(line[colon + 1..].trim_ascii()),
            ) else {
                continue;
            };
            headers.append(name, value);
        }
        Case {
            status,
            headers,
            body: rest,
        }
    }

    /// The case in the form [`decode`](Self::decode) reads.
    pub fn encode(status: u16, headers: &[(&str, &str)], body: &[u8]) -> Vec<u8> {
        let mut out = format!("{status:03}\n").into_bytes();
        for (name, value) in headers {
            out.extend_from_slice(format!("{name}: {value}\n").as_bytes());
        }
        out.push(b'\n');
        out.extend_from_slice(body);
        out
    }
}

fn check(c: &Classification, classifier: &ProviderClassifier, what: &str) {
    if let Some(wait) = c.wait {
        assert!(
            wait <= classifier.max_wait(),
            "{what}: wait {wait:?} over the cap"
        );
    }
    let reason = c.reason.as_str();
    assert!(
        !reason.is_empty() && reason.len() <= 96,
        "{what}: reason {reason:?}"
    );
}

/// A response through the classifier, as the breaker layer sees one.
pub fn classify(data: &[u8]) {
    let case = Case::decode(data);
    let classifier = ProviderClassifier::default();
    let view = ResponseView::new(case.status, &case.headers, case.body).with_now(now());
    check(
        &classifier.classify_response(&view),
        &classifier,
        "response",
    );
    // The head decision is made without the body; it must not panic either.
    let _ = classifier.classify_head(case.status, &case.headers);
    if let Some(mut scanner) = classifier.stream_scanner(case.status, &case.headers) {
        scanner.feed(case.body);
        check(&scanner.finish(), &classifier, "stream");
    }
}

/// A response through `classifier`: the response, the head decision, and
/// a 2xx stream through the scanner, each within the invariants; a rule
/// that decided is one of the classifier's and gave its own verdict.
fn classify_with(classifier: &ProviderClassifier, case: &Case<'_>) {
    let view = ResponseView::new(case.status, &case.headers, case.body).with_now(now());
    let decided = |c: &Classification, what: &str| {
        check(c, classifier, what);
        if let Some(i) = c.rule {
            let rule = classifier
                .rules()
                .and_then(|r| r.get(i))
                .unwrap_or_else(|| panic!("{what}: rule {i} is not one of the set"));
            assert_eq!(c.verdict, rule.verdict(), "{what}: the rule's own verdict");
            assert_eq!(&c.reason, rule.reason(), "{what}: the rule's own reason");
        }
    };
    decided(&classifier.classify_response(&view), "response");
    let _ = classifier.classify_head(case.status, &case.headers);
    if let Some(mut scanner) = classifier.stream_scanner(case.status, &case.headers) {
        scanner.feed(case.body);
        decided(&scanner.finish(), "stream");
    }
}

/// A rules file, then a line `---`, then a response: the file read (a
/// typed error, never a panic), and if it reads, the response classified
/// with its rules.
pub fn rules(data: &[u8]) {
    let (file, rest) = match data.windows(5).position(|w| w == b"\n---\n") {
        Some(at) => (&data[..at + 1], &data[at + 5..]),
        None => (data, &[][..]),
    };
    let Ok(text) = std::str::from_utf8(file) else {
        return;
    };
    let Ok(rules) = toml::from_str::<Rules>(text) else {
        return;
    };
    for rule in rules.iter() {
        let name = rule.name();
        assert!(
            !name.is_empty() && name.len() <= 64,
            "a checked name: {name:?}"
        );
    }
    let classifier = ProviderClassifier::builder()
        .peek_success(true)
        .rules(rules)
        .build();
    classify_with(&classifier, &Case::decode(rest));
}

/// A fixed set of user rules of every kind: statuses, codes, phrases in
/// several scripts, fields (present, equal, containing), headers, fixed
/// waits and waits read from fields; one for a `200`.
pub const MATCH_RULES: &str = r#"
[[rule]]
name = "balance"
status = ["4xx", 200]
phrase = ["余额不足", "insufficient balance", "СРЕДСТВ"]
verdict = "quota"

[[rule]]
name = "minimax"
status = 200
field = { pointer = "/base_resp/status_code", equals = [1002, "1039"] }
verdict = "throttled"
wait = { pointer = "/base_resp/retry_after" }

[[rule]]
name = "loading"
status = "500-599"
field = [{ pointer = "/estimated_time" }, { pointer = "/error/code", present = false }]
verdict = "throttled"
wait = { pointer = "/estimated_time" }

[[rule]]
name = "header"
header = [{ name = "x-acme-error", contains = "quota" }, "x-acme-account"]
verdict = "quota"
wait = "1h"

[[rule]]
name = "code"
code = ["acct_frozen", "1113", "AccessDeniedException"]
field = { pointer = "/error/message", contains = "frozen" }
verdict = "credential"
reason = "acme:frozen"

[[rule]]
name = "ms"
field = { pointer = "/retry_ms", equals = [true, 1.5, "x"] }
verdict = "throttled"
wait = { pointer = "/retry_ms", unit = "ms" }
"#;

/// A response through a classifier with [`MATCH_RULES`] and 2xx bodies read.
pub fn rules_match(data: &[u8]) {
    use std::sync::OnceLock;
    static CLASSIFIER: OnceLock<ProviderClassifier> = OnceLock::new();
    let classifier = CLASSIFIER.get_or_init(|| {
        let rules: Rules = toml::from_str(MATCH_RULES).expect("the fixed rules read");
        ProviderClassifier::builder()
            .peek_success(true)
            .rules(rules)
            .build()
    });
    classify_with(classifier, &Case::decode(data));
}

/// Every wait-hint parser over the text, and the text as the value of
/// every header that carries a hint.
pub fn hints(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let s = text.as_ref();
    let reference = now();
    let _ = hints::go_duration(s);
    let _ = hints::delay_seconds(s);
    let _ = hints::delay_millis(s);
    let _ = hints::proto_duration(s);
    let _ = hints::rfc3339(s);
    let _ = hints::text_date(s);
    let _ = hints::http_date(s);
    if let Some((_, len)) = hints::text_duration(s) {
        assert!(
            len <= s.len() && s.is_char_boundary(len),
            "took {len} of {s:?}"
        );
    }
    let positive = |d: Option<Duration>, what: &str| {
        assert!(
            d.is_none_or(|d| !d.is_zero()),
            "{what}: a zero wait for {s:?}"
        );
    };
    positive(hints::text_wait(s, reference), "text_wait");
    let Ok(value) = HeaderValue::from_str(s.trim_ascii()) else {
        return;
    };
    let mut headers = HeaderMap::new();
    for name in [
        "retry-after",
        "retry-after-ms",
        "x-ms-retry-after-ms",
        "x-ratelimit-reset-requests",
        "x-ratelimit-reset-tokens",
        "anthropic-ratelimit-requests-reset",
        "anthropic-ratelimit-tokens-reset",
        "x-should-retry",
    ] {
        headers.insert(HeaderName::from_static(name), value.clone());
    }
    for name in [
        "x-ratelimit-remaining-requests",
        "x-ratelimit-remaining-tokens",
        "anthropic-ratelimit-requests-remaining",
        "anthropic-ratelimit-tokens-remaining",
    ] {
        headers.insert(HeaderName::from_static(name), HeaderValue::from_static("0"));
    }
    headers.insert(http::header::DATE, HeaderValue::from_static(NOW));
    for name in [
        "x-ratelimit-limit-requests",
        "x-ratelimit-limit-tokens-minute",
        "x-ratelimit-reset-requests-day",
        "x-ratelimit-reset",
        "x-tokenlimit-limit",
        "anthropic-ratelimit-output-tokens-reset",
    ] {
        headers.insert(HeaderName::from_static(name), value.clone());
    }
    positive(hints::retry_after(&headers, reference), "retry_after");
    positive(hints::reset_wait(&headers, reference), "reset_wait");
    for w in hints::RateLimits::read(&headers, reference).iter() {
        assert!(
            w.remaining.zip(w.limit).is_none_or(|(r, l)| r <= l),
            "{w:?} from {s:?}"
        );
        assert!(
            w.reset
                .is_none_or(|r| !r.is_zero() && r <= hints::MAX_RESET),
            "{w:?} from {s:?}"
        );
    }
    let _ = hints::should_retry(&headers);
}

/// How the first byte of a [`stream`] input picks the scanner.
pub const STREAM_FORMATS: [StreamFormat; 3] = [
    StreamFormat::Sse,
    StreamFormat::NdJson,
    StreamFormat::AwsEventStream,
];

/// The scanner a [`stream`] input's first byte picks: a format, and a
/// dialect hint or none.
pub fn stream_scanner(selector: u8) -> StreamScanner {
    let format = STREAM_FORMATS[usize::from(selector) % STREAM_FORMATS.len()];
    let dialect = match usize::from(selector) / STREAM_FORMATS.len() % (Dialect::ALL.len() + 1) {
        0 => None,
        i => Some(Dialect::ALL[i - 1]),
    };
    StreamScanner::new(format)
        .with_classifier(&ProviderClassifier::default())
        .with_dialect(dialect)
}

/// Feeds `body` cut at `cuts`: what `feed` reported, and what `finish` said.
fn feed_split(
    mut scanner: StreamScanner,
    body: &[u8],
    cuts: impl Iterator<Item = usize>,
) -> (Option<Classification>, Classification) {
    let mut reported = None;
    let mut from = 0;
    for to in cuts.chain([body.len()]) {
        let to = to.clamp(from, body.len());
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

/// A stream: byte 0 picks the scanner ([`stream_scanner`]), byte 1 the
/// chunk sizes, the rest is the body. Whole, in chunks, and byte by byte,
/// the verdict must be the same.
pub fn stream(data: &[u8]) {
    let [selector, seed, body @ ..] = data else {
        return;
    };
    let whole = feed_split(stream_scanner(*selector), body, std::iter::empty());
    check(&whole.1, &ProviderClassifier::default(), "stream");
    // Chunk sizes from 1 to 64 drawn from the seed (a small LCG).
    let mut x = u32::from(*seed) | 1;
    let mut at = 0;
    let cuts = std::iter::from_fn(|| {
        x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
        at += 1 + (x >> 16) as usize % 64;
        (at < body.len()).then_some(at)
    });
    let chunked = feed_split(stream_scanner(*selector), body, cuts);
    assert_eq!(chunked, whole, "chunked differs from whole");
    if body.len() <= 4096 {
        let bytewise = feed_split(stream_scanner(*selector), body, 1..body.len());
        assert_eq!(bytewise, whole, "byte by byte differs from whole");
    }
}

/// A configuration file: TOML, or JSON when it starts with `{`; on
/// success, every layer it describes is built.
pub fn config(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let parsed: Option<tower_levee::config::LeveeConfig> = if text.trim_start().starts_with('{') {
        serde_json::from_str(text).ok()
    } else {
        toml::from_str(text).ok()
    };
    let Some(config) = parsed else {
        return;
    };
    // Deserialised means validated: building must not fail, let alone panic.
    config
        .validate()
        .expect("a deserialised configuration is valid");
    let _ = config
        .breaker_layer()
        .expect("valid")
        .build()
        .expect("valid");
    let _ = config.retry.layer().expect("valid");
    let _ = config.bulkhead.layer().expect("valid");
}

/// The seed corpus of each target, built from the repository's own
/// samples: every provider signal as a response (and its body as hint
/// text), every stream fixture, every example configuration.
pub mod seeds;

/// See the [crate docs](crate): the first byte picks a split point for the
/// usage scanner, the rest is the request's head (up to an empty line) and
/// body, also read as an answer's body.
pub fn request(data: &[u8]) {
    use levee_core::request::{RequestFields, rename_model};
    use levee_core::usage::UsageScanner;

    let Some((&split, rest)) = data.split_first() else {
        return;
    };
    let case = Case::decode(rest);
    // The caller's key, as the gateway reads it: never a panic, and a
    // key read is a part of a header's value.
    if let Some(auth) = case.headers.get(http::header::AUTHORIZATION) {
        let value = auth.as_bytes();
        if value.len() > 7 && value[..7].eq_ignore_ascii_case(b"bearer ") {
            assert!(value[7..].trim_ascii().len() <= value.len());
        }
    }
    let body = case.body;
    if let Ok(fields) = RequestFields::peek(body) {
        let span = fields.model_span();
        let raw = &body[span.clone()];
        assert_eq!(raw.first(), Some(&b'"'));
        assert_eq!(raw.last(), Some(&b'"'));
        let again: String = serde_json::from_slice(raw).expect("the span is the model's string");
        assert_eq!(again, fields.model());
        // Routed to a target that names the model otherwise.
        for name in ["gpt-4o-2024-08-06", "a \"quoted\" \\ name ✓", ""] {
            let renamed = rename_model(body, span.clone(), name).expect("a string span");
            let back = RequestFields::peek(&renamed).expect("a renamed body still peeks");
            assert_eq!(back.model(), name);
            assert_eq!(back.stream(), fields.stream());
            assert_eq!(back.include_usage(), fields.include_usage());
            let tail = &body[span.end..];
            assert_eq!(&renamed[..span.start], &body[..span.start]);
            assert_eq!(&renamed[renamed.len() - tail.len()..], tail);
        }
    }
    // The same bytes as an answer: its usage whole and in two pieces.
    let mut whole = UsageScanner::new();
    whole.feed(body);
    let at = usize::from(split).min(body.len());
    let mut pieces = UsageScanner::new();
    pieces.feed(&body[..at]);
    pieces.feed(&body[at..]);
    assert_eq!(whole.usage(), pieces.usage(), "split at {at}");
    assert_eq!(whole.events(), pieces.events(), "split at {at}");
    assert_eq!(whole.tokens(0), pieces.tokens(0));
}
