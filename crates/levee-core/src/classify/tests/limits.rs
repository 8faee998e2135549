//! Rate-limit headers as providers send them, captured or documented.

use std::time::Duration;

use super::{headers, ms, noon};
use crate::classify::hints::{Dimension, Period, RateLimits, RateWindow};

/// The windows read, without their spans (see the span tests).
fn windows(pairs: &[(&str, &str)]) -> Vec<RateWindow> {
    let mut w: Vec<RateWindow> = RateLimits::read(&headers(pairs), noon())
        .iter()
        .map(|w| RateWindow { span: None, ..*w })
        .collect();
    w.sort_by_key(|w| (w.dimension, w.period));
    w
}

fn window(
    dimension: Dimension,
    period: Period,
    limit: Option<u64>,
    remaining: Option<u64>,
    reset: Option<Duration>,
) -> RateWindow {
    RateWindow {
        dimension,
        period,
        limit,
        remaining,
        reset,
        approximate: false,
        span: None,
    }
}

/// Each window's dimension and span.
fn spans(pairs: &[(&str, &str)]) -> Vec<(Dimension, Option<Duration>)> {
    RateLimits::read(&headers(pairs), noon())
        .iter()
        .map(|w| (w.dimension, w.span))
        .collect()
}

#[test]
fn unnamed_limits_count_a_minute_and_azure_requests_ten_seconds() {
    let minute = Some(Duration::from_secs(60));
    let openai = [
        ("x-ratelimit-limit-requests", "5000"),
        ("x-ratelimit-limit-tokens", "160000"),
    ];
    assert_eq!(
        spans(&openai),
        [(Dimension::Requests, minute), (Dimension::Tokens, minute)]
    );
    // The same names on a response Azure marks: its request limit is a
    // sixth of the RPM, counted over ten seconds; tokens stay per minute.
    for marker in ["apim-request-id", "x-ms-region", "azureml-model-session"] {
        let mut azure = openai.to_vec();
        azure.push((marker, "x"));
        assert_eq!(
            spans(&azure),
            [
                (Dimension::Requests, Some(Duration::from_secs(10))),
                (Dimension::Tokens, minute)
            ],
            "{marker}"
        );
    }
    assert_eq!(
        spans(&[("anthropic-ratelimit-requests-limit", "50")]),
        [(Dimension::Requests, minute)]
    );
    assert_eq!(
        spans(&[("x-ratelimit-limit-requests-day", "14400")]),
        [(Dimension::Requests, Some(Duration::from_secs(86_400)))]
    );
    assert_eq!(
        spans(&[("x-ratelimit-limit-tokens-minute", "60000")]),
        [(Dimension::Tokens, minute)]
    );
    // A bare `x-ratelimit-limit` names no window anyone documents.
    assert_eq!(
        spans(&[("x-ratelimit-limit", "60")]),
        [(Dimension::Requests, None)]
    );
}

#[test]
fn openai_reports_requests_and_tokens_with_go_duration_resets() {
    // A real 200 (community.openai.com/t/…/1268905); the undocumented
    // `_usage_based` copies are not read.
    let w = windows(&[
        ("x-ratelimit-limit-requests", "5000"),
        ("x-ratelimit-limit-tokens", "160000"),
        ("x-ratelimit-limit-tokens_usage_based", "160000"),
        ("x-ratelimit-remaining-requests", "4999"),
        ("x-ratelimit-remaining-tokens", "159976"),
        ("x-ratelimit-remaining-tokens_usage_based", "159976"),
        ("x-ratelimit-reset-requests", "12ms"),
        ("x-ratelimit-reset-tokens", "9ms"),
        ("x-ratelimit-reset-tokens_usage_based", "9ms"),
    ]);
    assert_eq!(
        w,
        [
            window(
                Dimension::Requests,
                Period::Unnamed,
                Some(5000),
                Some(4999),
                ms(12)
            ),
            window(
                Dimension::Tokens,
                Period::Unnamed,
                Some(160_000),
                Some(159_976),
                ms(9)
            ),
        ]
    );
}

#[test]
fn anthropic_resets_are_instants_and_its_token_counts_approximate() {
    // A real 429 (anthropic-sdk-typescript#357), moved to the tests' noon.
    let limits = RateLimits::read(
        &headers(&[
            ("anthropic-ratelimit-requests-limit", "5"),
            ("anthropic-ratelimit-requests-remaining", "0"),
            ("anthropic-ratelimit-requests-reset", "2026-08-23T12:00:01Z"),
            ("anthropic-ratelimit-tokens-limit", "25000"),
            ("anthropic-ratelimit-tokens-remaining", "16000"),
            ("anthropic-ratelimit-tokens-reset", "2026-08-23T12:00:01Z"),
            ("anthropic-ratelimit-output-tokens-remaining", "8000"),
        ]),
        noon(),
    );
    let by = |d| limits.iter().find(|w| w.dimension == d).copied().unwrap();
    let requests = by(Dimension::Requests);
    assert_eq!((requests.remaining, requests.reset), (Some(0), ms(1000)));
    assert!(!requests.approximate);
    assert!(by(Dimension::Tokens).approximate && by(Dimension::OutputTokens).approximate);
    assert_eq!(limits.exhausted_reset(), ms(1000));
}

#[test]
fn azure_sentinels_and_garbage_leave_a_field_unknown_not_exhausted() {
    let w = windows(&[
        ("x-ratelimit-limit-tokens", "-1"),
        ("x-ratelimit-remaining-tokens", "-1"),
        ("x-ratelimit-reset-tokens", "0"),
        ("x-ratelimit-remaining-requests", "100, 100;window=60"),
        ("x-ratelimit-reset-requests", "soon"),
    ]);
    assert!(
        w.iter()
            .all(|w| w.limit.is_none() && w.remaining.is_none() && w.reset.is_none()),
        "{w:?}"
    );
    assert!(w.iter().all(|w| !w.is_exhausted()));
}

#[test]
fn azure_second_resets_and_cerebras_named_periods() {
    let w = windows(&[
        ("x-ratelimit-remaining-requests-day", "14399"),
        ("x-ratelimit-limit-requests-day", "14400"),
        ("x-ratelimit-reset-requests-day", "33011.382867097855"),
        ("x-ratelimit-remaining-tokens-minute", "59000"),
        ("x-ratelimit-reset-tokens-minute", "11.382867"),
        ("x-ratelimit-reset-requests", "10"),
    ]);
    assert_eq!(w.len(), 3, "{w:?}");
    let day = w.iter().find(|w| w.period == Period::Day).unwrap();
    assert_eq!((day.limit, day.remaining), (Some(14_400), Some(14_399)));
    assert_eq!(day.reset.unwrap().as_secs(), 33_011);
    let unnamed = w.iter().find(|w| w.period == Period::Unnamed).unwrap();
    assert_eq!(unnamed.reset, ms(10_000));
}

#[test]
fn mistral_names_its_periods_and_sends_no_reset() {
    let w = windows(&[
        ("x-ratelimit-limit-req-minute", "60"),
        ("x-ratelimit-remaining-req-minute", "59"),
        ("x-ratelimit-limit-tokens-month", "1000000000"),
        ("x-ratelimit-remaining-tokens-month", "999990000"),
    ]);
    assert_eq!(
        w,
        [
            window(
                Dimension::Requests,
                Period::Minute,
                Some(60),
                Some(59),
                None
            ),
            window(
                Dimension::Tokens,
                Period::Month,
                Some(1_000_000_000),
                Some(999_990_000),
                None
            ),
        ]
    );
}

#[test]
fn epoch_resets_are_measured_from_the_reference_and_bare_names_count_requests() {
    // OpenRouter: epoch milliseconds; Together: `x-tokenlimit-*` for tokens.
    let noon_ms = noon()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis();
    let reset = (noon_ms + 30_000).to_string();
    let w = windows(&[
        ("x-ratelimit-limit", "20"),
        ("x-ratelimit-remaining", "0"),
        ("x-ratelimit-reset", &reset),
        ("x-tokenlimit-remaining", "5000"),
    ]);
    assert_eq!(w[0].dimension, Dimension::Requests);
    assert_eq!((w[0].remaining, w[0].reset), (Some(0), ms(30_000)));
    assert_eq!(
        (w[1].dimension, w[1].remaining),
        (Dimension::Tokens, Some(5000))
    );
    let noon_secs = (noon_ms / 1000 + 60).to_string();
    let w = windows(&[("x-ratelimit-reset", &noon_secs)]);
    assert_eq!(w[0].reset, ms(60_000), "epoch seconds");
}

#[test]
fn a_remaining_above_its_limit_is_cut_and_far_or_past_resets_are_unknown() {
    let w = windows(&[
        ("x-ratelimit-limit-requests", "10"),
        ("x-ratelimit-remaining-requests", "15"),
        ("x-ratelimit-reset-requests", "900h"),
        ("anthropic-ratelimit-tokens-reset", "2026-08-23T11:00:00Z"),
    ]);
    assert_eq!((w[0].remaining, w[0].reset), (Some(10), None));
    assert_eq!(w[1].reset, None, "in the past");
}

#[test]
fn more_limits_than_windows_are_read_up_to_the_bound() {
    let names: Vec<String> = ["minute", "hour", "day", "month"]
        .iter()
        .flat_map(|p| {
            ["requests", "tokens", "req"].map(|d| format!("x-ratelimit-remaining-{d}-{p}"))
        })
        .collect();
    let pairs: Vec<(&str, &str)> = names.iter().map(|n| (n.as_str(), "5")).collect();
    let limits = RateLimits::read(&headers(&pairs), noon());
    assert_eq!(limits.iter().count(), 8);
}
