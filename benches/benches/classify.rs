//! What classification costs: an OpenAI 429 with a ~1 KiB JSON error body,
//! an Anthropic 429 decided by its headers, a 2xx (no body peek), and one
//! SSE event through the stream scanner; the same 1 KiB body past 50 user
//! rules (none matching, so every one is checked, or the last one), and a
//! 1 KiB 2xx completion read for an error object (`peek_success`).
//!
//! Targets: < 2 µs for the 1 KiB error body, < 100 ns for the 2xx; 50 user
//! rules add at most 2 µs to the 1 KiB error body.
//! Run: `cargo bench -p benches --bench classify -- --warm-up-time 1 --measurement-time 3`
#![allow(missing_docs)]

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};

#[path = "common/rules.rs"]
#[allow(unreachable_pub)]
mod rules;
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use levee_core::classify::{
    Classify, ProviderClassifier, ResponseView, StreamFormat, StreamScanner, Verdict,
};

fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
    pairs
        .iter()
        .map(|&(k, v)| (HeaderName::from_static(k), HeaderValue::from_static(v)))
        .collect()
}

/// A 429 as OpenAI sends it: the usual headers and a rate-limit message.
fn openai_429() -> (HeaderMap, Vec<u8>) {
    let h = headers(&[
        ("date", "Sun, 23 Aug 2026 12:00:00 GMT"),
        ("content-type", "application/json; charset=utf-8"),
        ("openai-organization", "org-uvqpjtjikqvvjmvfvpaounih"),
        ("openai-processing-ms", "12"),
        ("openai-version", "2020-10-01"),
        ("x-request-id", "req_0f3a5c2b9d8e4f1a"),
        ("x-ratelimit-limit-requests", "10000"),
        ("x-ratelimit-limit-tokens", "10000"),
        ("x-ratelimit-remaining-requests", "9999"),
        ("x-ratelimit-remaining-tokens", "0"),
        ("x-ratelimit-reset-requests", "6ms"),
        ("x-ratelimit-reset-tokens", "9.816s"),
        ("server", "cloudflare"),
        ("cf-ray", "8f1e2d3c4b5a6978-AMS"),
    ]);
    let message = "Rate limit reached for gpt-4o in organization org-uVqpjtJiKqvVJMVfvpaounIh \
        on tokens per min (TPM): Limit 10000, Used 8554, Requested 3082. Please try again in \
        9.816s. Visit https://platform.openai.com/account/rate-limits to learn more. You can \
        increase your rate limit by adding a payment method to your account at \
        https://platform.openai.com/account/billing. Requests are limited per organization, \
        per project and per model; unsuccessful requests count toward your per-minute limit, \
        so continuously resending a request will not help. Consider spreading your requests \
        over time, batching prompts, lowering max_tokens to match the expected completion, or \
        using a model with a higher limit. See https://platform.openai.com/docs/guides/rate-limits \
        for the headers that report your remaining requests and tokens and when they reset, and \
        https://platform.openai.com/docs/guides/error-codes for every error this API returns.";
    let body = format!(
        r#"{{"error":{{"message":"{message}","type":"tokens","param":null,"code":"rate_limit_exceeded"}}}}"#
    );
    (h, body.into_bytes())
}

/// A 429 as Anthropic sends it: `retry-after` and the rate-limit headers.
fn anthropic_429() -> (HeaderMap, Vec<u8>) {
    let h = headers(&[
        ("date", "Sun, 23 Aug 2026 12:00:00 GMT"),
        ("content-type", "application/json"),
        ("retry-after", "12"),
        ("x-should-retry", "true"),
        ("request-id", "req_011CYK5mje9HkutJtmfPzzNC"),
        (
            "anthropic-organization-id",
            "5576611f-a1ee-427c-9800-298d9579899c",
        ),
        ("anthropic-ratelimit-requests-limit", "4000"),
        ("anthropic-ratelimit-requests-remaining", "3999"),
        ("anthropic-ratelimit-requests-reset", "2026-08-23T12:00:01Z"),
        ("anthropic-ratelimit-input-tokens-limit", "400000"),
        ("anthropic-ratelimit-input-tokens-remaining", "0"),
        (
            "anthropic-ratelimit-input-tokens-reset",
            "2026-08-23T12:00:12Z",
        ),
        ("anthropic-ratelimit-output-tokens-limit", "80000"),
        ("anthropic-ratelimit-output-tokens-remaining", "80000"),
        (
            "anthropic-ratelimit-output-tokens-reset",
            "2026-08-23T12:00:00Z",
        ),
    ]);
    let body = br#"{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"},"request_id":"req_011CYK5mje9HkutJtmfPzzNC"}"#;
    (h, body.to_vec())
}

fn classify(c: &mut Criterion) {
    let classifier = ProviderClassifier::default();

    let (h, body) = openai_429();
    assert!(
        (900..=1300).contains(&body.len()),
        "body is {} bytes",
        body.len()
    );
    let view = ResponseView::new(StatusCode::TOO_MANY_REQUESTS, &h, &body);
    assert_eq!(
        classifier.classify_response(&view).verdict,
        Verdict::Throttled
    );
    c.bench_function("classify/openai_429_1kib_body", |b| {
        b.iter(|| classifier.classify_response(black_box(&view)))
    });

    let (h, body) = anthropic_429();
    let view = ResponseView::new(StatusCode::TOO_MANY_REQUESTS, &h, &body);
    assert_eq!(
        classifier
            .classify_response(&view)
            .wait
            .map(|w| w.as_secs()),
        Some(12)
    );
    c.bench_function("classify/anthropic_429_headers", |b| {
        b.iter(|| classifier.classify_response(black_box(&view)))
    });

    let h = headers(&[
        ("content-type", "application/json"),
        ("openai-processing-ms", "412"),
    ]);
    let view = ResponseView::new(StatusCode::OK, &h, b"");
    c.bench_function("classify/200_no_peek", |b| {
        b.iter(|| classifier.classify_response(black_box(&view)))
    });

    let event = b"data: {\"id\":\"chatcmpl-BwoiPTGRbKkY5rncfaM0s9KtWrq5N\",\"object\":\"chat.completion.chunk\",\"created\":1753357673,\"model\":\"gpt-4.1-2025-04-14\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\" the\"},\"logprobs\":null,\"finish_reason\":null}]}\n\n";
    let mut scanner = StreamScanner::new(StreamFormat::Sse);
    c.bench_function("classify/stream_sse_event", |b| {
        b.iter(|| scanner.feed(black_box(event)))
    });
}

fn user_rules(c: &mut Criterion) {
    let (h, body) = openai_429();
    let view = ResponseView::new(StatusCode::TOO_MANY_REQUESTS, &h, &body);
    for (name, last) in [("none_match", false), ("last_matches", true)] {
        let classifier = ProviderClassifier::builder()
            .rules(rules::fifty_rules(last))
            .build();
        let c429 = classifier.classify_response(&view);
        assert_eq!(c429.rule.is_some(), last, "{c429:?}");
        c.bench_function(
            &format!("classify/openai_429_1kib_body_50_rules_{name}"),
            |b| b.iter(|| classifier.classify_response(black_box(&view))),
        );
    }

    // A 2xx completion read for an error in its place (the providers that
    // answer 200 with one): the cost `peek_success` adds to each success.
    let classifier = ProviderClassifier::builder().peek_success(true).build();
    let h = headers(&[("content-type", "application/json")]);
    let content = "The quick brown fox jumps over the lazy dog. ".repeat(18);
    let completion = format!(
        r#"{{"id":"chatcmpl-1","object":"chat.completion","created":1753357673,"model":"gpt-4.1","choices":[{{"index":0,"message":{{"role":"assistant","content":"{content}"}},"finish_reason":"stop"}}],"usage":{{"prompt_tokens":12,"completion_tokens":180,"total_tokens":192}}}}"#
    );
    assert!(
        (900..=1300).contains(&completion.len()),
        "{}",
        completion.len()
    );
    let view = ResponseView::new(StatusCode::OK, &h, completion.as_bytes());
    assert_eq!(
        classifier.classify_response(&view).verdict,
        Verdict::Success
    );
    c.bench_function("classify/200_1kib_body_peek_success", |b| {
        b.iter(|| classifier.classify_response(black_box(&view)))
    });
}

criterion_group!(benches, classify, user_rules);
criterion_main!(benches);
