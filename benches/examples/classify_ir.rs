//! Instructions per classification, for cachegrind (deterministic, so two
//! checkouts compare without the machine's noise): `classify_ir CASE N
//! [rules]`, CASE `openai` or `anthropic`; count 20,000 calls minus 10,000.
#![allow(missing_docs)]
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use levee_core::classify::{Classify, ProviderClassifier, ResponseView};

#[path = "../benches/common/rules.rs"]
#[allow(unreachable_pub)]
mod rules;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: usize = args[2].parse().unwrap();
    let mut h = HeaderMap::new();
    for (k, v) in [
        ("date", "Sun, 23 Aug 2026 12:00:00 GMT"),
        ("content-type", "application/json"),
        ("retry-after", "12"),
        ("x-should-retry", "true"),
        ("request-id", "req_011CYK5mje9HkutJtmfPzzNC"),
        ("anthropic-ratelimit-requests-limit", "4000"),
        ("anthropic-ratelimit-requests-remaining", "3999"),
    ] {
        h.insert(HeaderName::from_static(k), HeaderValue::from_static(v));
    }
    let body: &[u8] = match args[1].as_str() {
        "anthropic" => br#"{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"},"request_id":"req_011CYK5mje9HkutJtmfPzzNC"}"#,
        _ => br#"{"error":{"message":"Rate limit reached for gpt-4o in organization org-uVqpjtJiKqvVJMVfvpaounIh on tokens per min (TPM): Limit 10000, Used 8554, Requested 3082. Please try again in 9.816s. Visit https://platform.openai.com/account/rate-limits to learn more.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}"#,
    };
    let c = if args.get(3).is_some_and(|a| a == "rules") {
        ProviderClassifier::builder()
            .rules(rules::fifty_rules(false))
            .build()
    } else {
        ProviderClassifier::default()
    };
    let view = ResponseView::new(StatusCode::TOO_MANY_REQUESTS, &h, body);
    for _ in 0..n {
        std::hint::black_box(c.classify_response(std::hint::black_box(&view)));
    }
}
