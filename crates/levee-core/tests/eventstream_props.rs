//! Binary AWS event streams (Bedrock): any split of the bytes into chunks
//! gives the same verdict as the whole, corrupt or cut streams included,
//! and nothing panics.

mod support;

use http::{HeaderMap, HeaderValue, StatusCode};
use levee_core::classify::{Classification, Classify, ProviderClassifier, Verdict};
use proptest::prelude::*;
use proptest::sample::{Index, select};

/// Encodes one message with real CRCs: string headers (type 7) plus one
/// header of every other type, which the decoder must skip.
fn frame(headers: &[(&str, &str)], payload: &[u8]) -> Vec<u8> {
    let mut h = Vec::new();
    for (name, value) in headers {
        h.push(name.len() as u8);
        h.extend_from_slice(name.as_bytes());
        h.push(7);
        h.extend_from_slice(&(value.len() as u16).to_be_bytes());
        h.extend_from_slice(value.as_bytes());
    }
    let others: [(u8, &[u8]); 9] = [
        (0, &[]),
        (1, &[]),
        (2, &[1]),
        (3, &[0, 2]),
        (4, &[0, 0, 0, 3]),
        (5, &[0; 8]),
        (6, &[0, 3, 0xc3, 0x28, 0xff]),
        (8, &[0; 8]),
        (9, &[0xab; 16]),
    ];
    for (kind, value) in others {
        h.extend_from_slice(&[1, b'a' + kind, kind]);
        h.extend_from_slice(value);
    }
    let total = (12 + h.len() + payload.len() + 4) as u32;
    let mut f = total.to_be_bytes().to_vec();
    f.extend_from_slice(&(h.len() as u32).to_be_bytes());
    f.extend_from_slice(&crc32fast::hash(&f).to_be_bytes());
    f.extend_from_slice(&h);
    f.extend_from_slice(payload);
    f.extend_from_slice(&crc32fast::hash(&f).to_be_bytes());
    f
}

fn event(kind: &str, payload: &str) -> Vec<u8> {
    frame(
        &[(":message-type", "event"), (":event-type", kind)],
        payload.as_bytes(),
    )
}

fn exception(name: &str) -> Vec<u8> {
    frame(
        &[(":message-type", "exception"), (":exception-type", name)],
        br#"{"message":"x"}"#,
    )
}

/// `{"bytes": base64(inner)}`, precomputed for the chunk fragments.
fn chunk(b64: &str) -> Vec<u8> {
    event("chunk", &format!("{{\"bytes\":\"{b64}\"}}"))
}

/// Frames of Converse and InvokeModel streams: content, terminal events,
/// exceptions of every kind, and damaged frames.
fn fragments() -> Vec<Vec<u8>> {
    let good = event("contentBlockDelta", r#"{"delta":{"text":"Hi"}}"#);
    let mut bad_crc = good.clone();
    *bad_crc.last_mut().unwrap() ^= 1;
    let mut huge = (1u32 << 28).to_be_bytes().to_vec();
    huge.extend_from_slice(&0u32.to_be_bytes());
    huge.extend_from_slice(&crc32fast::hash(&huge).to_be_bytes());
    vec![
        event("messageStart", r#"{"role":"assistant"}"#),
        good.clone(),
        event("messageStop", r#"{"stopReason":"end_turn"}"#),
        event("metadata", r#"{"usage":{"totalTokens":6}}"#),
        exception("throttlingException"),
        exception("modelStreamErrorException"),
        exception("validationException"),
        exception("accessDeniedException"),
        frame(
            &[
                (":message-type", "error"),
                (":error-code", "InternalFailure"),
            ],
            b"",
        ),
        // {"type":"content_block_delta","delta":{"text":"Hi"}}
        chunk("eyJ0eXBlIjoiY29udGVudF9ibG9ja19kZWx0YSIsImRlbHRhIjp7InRleHQiOiJIaSJ9fQ=="),
        // {"type":"message_stop","amazon-bedrock-invocationMetrics":{"inputTokenCount":5}}
        chunk(
            "eyJ0eXBlIjoibWVzc2FnZV9zdG9wIiwiYW1hem9uLWJlZHJvY2staW52b2NhdGlvbk1ldHJpY3MiOnsiaW5wdXRUb2tlbkNvdW50Ijo1fX0=",
        ),
        // {"type":"error","error":{"type":"overloaded_error"}}
        chunk("eyJ0eXBlIjoiZXJyb3IiLCJlcnJvciI6eyJ0eXBlIjoib3ZlcmxvYWRlZF9lcnJvciJ9fQ=="),
        bad_crc,
        huge,
        good[..good.len() / 2].to_vec(),
    ]
}

fn stream_body() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(select(fragments()), 0..10).prop_map(|f| f.concat())
}

/// Feeds `body` cut at `cuts`: what `feed` reported, if anything, and what
/// `finish` returned.
fn run(body: &[u8], cuts: &[usize]) -> (Option<Classification>, Classification) {
    let mut h = HeaderMap::new();
    h.insert(
        "content-type",
        HeaderValue::from_static("application/vnd.amazon.eventstream"),
    );
    let scanner = ProviderClassifier::default()
        .stream_scanner(StatusCode::OK, &h)
        .unwrap();
    support::feed_split(scanner, body, cuts)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn any_split_of_a_binary_event_stream_gives_the_same_verdict(
        body in stream_body(),
        cuts in prop::collection::vec(any::<Index>(), 0..12),
    ) {
        let mut cuts: Vec<usize> = cuts.iter().map(|i| i.index(body.len() + 1)).collect();
        cuts.sort_unstable();
        let whole = run(&body, &[]);
        prop_assert_eq!(&run(&body, &cuts), &whole);
        let bytewise: Vec<usize> = (0..body.len()).collect();
        prop_assert_eq!(&run(&body, &bytewise), &whole);
    }

    #[test]
    fn damaged_binary_streams_never_panic(
        body in stream_body(),
        flips in prop::collection::vec((any::<Index>(), any::<u8>()), 0..4),
        cut in any::<Index>(),
    ) {
        let mut body = body;
        if !body.is_empty() {
            for (at, x) in flips {
                let i = at.index(body.len());
                body[i] ^= x;
            }
        }
        let c = run(&body, &[cut.index(body.len() + 1)]).1;
        prop_assert!(Verdict::ALL.contains(&c.verdict));
    }
}

#[test]
fn a_whole_converse_stream_is_a_success_and_a_cut_one_is_not() {
    let f = fragments();
    let whole = [f[0].clone(), f[1].clone(), f[2].clone(), f[3].clone()].concat();
    assert_eq!(run(&whole, &[]).1, Classification::success());
    let cut = [f[0].clone(), f[1].clone()].concat();
    assert_eq!(run(&cut, &[]).1.verdict, Verdict::Availability);
}
