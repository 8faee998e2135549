//! Pacing: an allowance paces a scope at its reserve, for as long as one
//! unit above it takes to refill, and reads out-of-order reports right.

use std::time::{Duration, UNIX_EPOCH};

use http::{HeaderMap, HeaderName, HeaderValue};
use levee_core::classify::hints::{Dimension, RateLimits};
use levee_core::clock::Timestamp;
use levee_core::pace::{Allowance, PaceConfig, Reserve, SPREAD_BURST, Spacing};
use proptest::prelude::*;

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}

fn at(s: f64) -> Timestamp {
    Timestamp::ZERO.saturating_add(secs(s))
}

fn limits(pairs: &[(&str, &str)]) -> RateLimits {
    let mut h = HeaderMap::new();
    for (k, v) in pairs {
        h.insert(
            HeaderName::from_bytes(k.as_bytes()).unwrap(),
            HeaderValue::from_str(v).unwrap(),
        );
    }
    RateLimits::read(&h, UNIX_EPOCH)
}

fn requests(limit: u64, remaining: u64, reset: &str) -> RateLimits {
    let (limit, remaining) = (limit.to_string(), remaining.to_string());
    limits(&[
        ("x-ratelimit-limit-requests", &limit),
        ("x-ratelimit-remaining-requests", &remaining),
        ("x-ratelimit-reset-requests", reset),
    ])
}

fn count(reserve: u64) -> PaceConfig {
    PaceConfig::builder()
        .requests_reserve(Reserve::Count(reserve))
        .tokens_reserve(Reserve::Count(reserve))
        .build()
        .unwrap()
}

#[test]
fn a_scope_at_its_reserve_pauses_until_one_more_request_has_refilled() {
    let cfg = count(1);
    let mut a = Allowance::default();
    a.observe(at(0.0), &requests(100, 3, "97s"));
    assert_eq!(a.paced_until(&cfg, at(0.0)), None, "3 left, reserve 1");
    a.debit(at(0.0), 1, 0);
    assert_eq!(a.paced_until(&cfg, at(0.0)), None, "2 left");
    a.debit(at(0.0), 1, 0);
    // 99 missing over 97 s: one comes back after 97/99 s, to 2 > 1.
    let (until, dim) = a.paced_until(&cfg, at(0.0)).expect("at the reserve");
    assert_eq!(dim, Dimension::Requests);
    assert_eq!(
        until,
        at(0.0).saturating_add(Duration::from_nanos(979_797_980))
    );
    assert!(a.paced_until(&cfg, until).is_none(), "refilled by then");
}

#[test]
fn a_limit_of_unknown_size_pauses_until_its_reset_and_one_without_a_reset_never() {
    let cfg = count(1);
    let mut a = Allowance::default();
    a.observe(
        at(0.0),
        &limits(&[
            ("x-ratelimit-remaining-requests", "1"),
            ("x-ratelimit-reset-requests", "4s"),
        ]),
    );
    assert_eq!(
        a.paced_until(&cfg, at(1.0)),
        Some((at(4.0), Dimension::Requests))
    );
    let mut mistral = Allowance::default();
    mistral.observe(
        at(0.0),
        &limits(&[
            ("x-ratelimit-limit-req-minute", "60"),
            ("x-ratelimit-remaining-req-minute", "0"),
        ]),
    );
    assert_eq!(
        mistral.paced_until(&cfg, at(0.0)),
        None,
        "no reset: its 429 will say"
    );
}

#[test]
fn a_pause_longer_than_the_bound_is_left_to_the_providers_429() {
    // A per-day limit exhausted for ten hours: a quota, not a pace.
    let mut a = Allowance::default();
    a.observe(at(0.0), &requests(14_400, 0, "10h"));
    let cfg = PaceConfig::default();
    assert_eq!(a.paced_until(&cfg, at(0.0)), None);
}

#[test]
fn token_limits_are_debited_by_the_estimate() {
    let cfg = count(100);
    let mut a = Allowance::default();
    a.observe(
        at(0.0),
        &limits(&[
            ("x-ratelimit-limit-tokens", "10000"),
            ("x-ratelimit-remaining-tokens", "2100"),
            ("x-ratelimit-reset-tokens", "6m0s"),
        ]),
    );
    a.debit(at(0.0), 1, 1000);
    assert_eq!(a.paced_until(&cfg, at(0.0)), None, "1100 left");
    a.debit(at(0.0), 1, 1000);
    let (_, dim) = a.paced_until(&cfg, at(0.0)).expect("100 left: the reserve");
    assert_eq!(dim, Dimension::Tokens);
}

#[test]
fn a_report_counted_before_the_known_one_is_dropped_and_a_newer_window_replaces_it() {
    let cfg = count(0);
    let mut a = Allowance::default();
    // Counted later (more used, so a later full-refill instant) arrives first.
    a.observe(at(0.0), &requests(60, 10, "50s"));
    // An older report (fewer used, earlier refill) overtaken on the way.
    a.observe(at(0.1), &requests(60, 40, "20s"));
    let left = |a: &Allowance, t| a.remaining(t).next().map(|(_, _, n, _, _)| n);
    assert_eq!(
        left(&a, at(0.1)),
        Some(10),
        "the overtaken report is dropped"
    );
    // The same window (same refill instant), counted with less left: wins.
    a.debit(at(1.0), 0, 0);
    a.observe(at(1.0), &requests(60, 5, "49s"));
    assert_eq!(left(&a, at(1.0)), Some(5));
    // A later refill instant: newer, replaces.
    a.observe(at(2.0), &requests(60, 30, "60s"));
    assert_eq!(left(&a, at(2.0)), Some(30));
    assert_eq!(a.paced_until(&cfg, at(2.0)), None);
}

#[test]
fn a_report_without_counts_changes_nothing() {
    let mut a = Allowance::default();
    a.observe(
        at(0.0),
        &limits(&[("x-ratelimit-remaining-requests", "-1")]),
    );
    assert!(a.is_empty());
}

#[test]
fn a_share_reserve_is_validated_and_never_below_one_unit() {
    assert_eq!(Reserve::Share(0.02).of(Some(60)), 1);
    assert_eq!(Reserve::Share(0.02).of(Some(10_000)), 200);
    assert_eq!(Reserve::Share(0.02).of(None), 0);
    let err = PaceConfig::builder()
        .tokens_reserve(Reserve::Share(1.5))
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("pace.tokens_reserve"), "{err}");
    assert!(PaceConfig::default().validate().is_ok());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Spread calls never exceed a second's worth plus the rate in any
    /// span, a call refused is admitted at the instant it was told, and
    /// calls that keep the rate are never refused.
    #[test]
    fn spread_calls_keep_the_rate_within_a_second_of_burst(
        interval_ms in 1u64..3_000,
        gaps in prop::collection::vec(0u64..400, 1..200),
    ) {
        let spacing = Spacing::from_interval(Duration::from_millis(interval_ms)).unwrap();
        let interval = spacing.interval();
        // What a second refills, less the one a burst starts with.
        let tolerance = SPREAD_BURST.saturating_sub(interval).as_nanos();
        let (mut next, mut now) = (Timestamp::ZERO, Timestamp::ZERO);
        let mut admitted: Vec<Timestamp> = Vec::new();
        for gap in gaps {
            now = now.saturating_add(Duration::from_millis(gap));
            match spacing.admit(next, now) {
                Ok(n) => {
                    prop_assert!(n > now);
                    next = n;
                    admitted.push(now);
                }
                Err(again) => {
                    prop_assert!(again > now);
                    prop_assert!(spacing.admit(next, again).is_ok(), "admitted when told");
                }
            }
        }
        // In any span from an admitted call: one, plus one per interval
        // of the span and of a second's tolerance.
        for (i, &from) in admitted.iter().enumerate() {
            for (j, &to) in admitted.iter().enumerate().skip(i) {
                let span = to.saturating_duration_since(from);
                let allowed = 1 + ((tolerance + span.as_nanos()) / interval.as_nanos()) as usize;
                prop_assert!(j - i < allowed, "{} calls in {span:?}", j - i + 1);
            }
        }
        // At the rate, never refused.
        let mut next = Timestamp::ZERO;
        for k in 0..50u32 {
            next = spacing
                .admit(next, Timestamp::ZERO.saturating_add(interval * k))
                .map_err(|_| TestCaseError::fail("refused at the rate"))?;
        }
    }

    /// Whatever reports and sends come in, what is left never exceeds the
    /// limit, and a pause ends when the scope is above its reserve again.
    #[test]
    fn a_pause_ends_when_the_scope_is_above_its_reserve(
        ops in prop::collection::vec(
            (0u64..5_000, prop_oneof![
                (0u64..=100, 1u64..120_000).prop_map(|(r, ms)| Some((r, ms))),
                Just(None),
            ]),
            1..40,
        ),
        reserve in 0u64..10,
    ) {
        let cfg = count(reserve);
        let mut a = Allowance::default();
        let mut now = at(0.0);
        for (advance_ms, op) in ops {
            now = now.saturating_add(Duration::from_millis(advance_ms));
            match op {
                Some((remaining, reset_ms)) => {
                    a.observe(now, &requests(100, remaining, &format!("{reset_ms}ms")));
                }
                None => a.debit(now, 1, 0),
            }
            for (_, _, left, limit, _) in a.remaining(now) {
                prop_assert!(limit.is_none_or(|l| left <= l));
            }
            if let Some((until, _)) = a.paced_until(&cfg, now) {
                prop_assert!(until > now);
                let left = a.remaining(until).map(|(_, _, n, _, _)| n).min().unwrap();
                prop_assert!(left > reserve, "paused until {until:?}, {left} left");
            }
        }
    }
}

#[test]
fn the_spacing_is_the_tightest_short_request_limit_over_its_window() {
    // 600 a minute: 100 ms apart.
    let minute = Spacing::of(&requests(600, 590, "1s")).unwrap();
    assert_eq!(minute.interval(), Duration::from_millis(100));
    // Whatever is left: the rate is the limit's, not the report's.
    assert_eq!(Spacing::of(&requests(600, 600, "1s")), Some(minute));
    // A reset beyond the window: the header counts a longer one (Groq's
    // unnamed request limit is per day).
    assert_eq!(Spacing::of(&requests(14_400, 14_000, "2h")), None);
    // A limit of zero says no rate; no limit, no spacing.
    assert_eq!(Spacing::of(&requests(0, 0, "1s")), None);
    assert_eq!(Spacing::of(&RateLimits::default()), None);
    // A daily limit is not spread; tokens are not spread.
    let mut h = HeaderMap::new();
    h.insert(
        "x-ratelimit-limit-requests-day",
        HeaderValue::from_static("14400"),
    );
    h.insert(
        "x-ratelimit-limit-tokens-minute",
        HeaderValue::from_static("60000"),
    );
    assert_eq!(Spacing::of(&RateLimits::read(&h, UNIX_EPOCH)), None);
    // Two short request limits: the tighter (further apart) wins.
    h.insert(
        "x-ratelimit-limit-requests",
        HeaderValue::from_static("600"),
    );
    h.insert(
        "x-ratelimit-limit-requests-minute",
        HeaderValue::from_static("30"),
    );
    assert_eq!(
        Spacing::of(&RateLimits::read(&h, UNIX_EPOCH)).map(Spacing::interval),
        Some(Duration::from_secs(2))
    );
}

#[test]
fn a_rate_slower_than_one_a_second_admits_one_call_then_waits_an_interval() {
    let spacing = Spacing::from_interval(Duration::from_secs(2)).unwrap();
    let next = spacing.admit(at(0.0), at(0.0)).unwrap();
    assert_eq!(spacing.admit(next, at(1.0)), Err(at(2.0)));
    assert!(spacing.admit(next, at(2.0)).is_ok());
    assert_eq!(Spacing::from_interval(Duration::ZERO), None);
}

#[test]
fn reports_are_read_at_the_reference_time() {
    // Anthropic's resets are instants: measured from the response's Date.
    let reference = UNIX_EPOCH + Duration::from_secs(1_787_486_400);
    let mut h = HeaderMap::new();
    h.insert(
        "anthropic-ratelimit-requests-limit",
        HeaderValue::from_static("50"),
    );
    h.insert(
        "anthropic-ratelimit-requests-remaining",
        HeaderValue::from_static("0"),
    );
    h.insert(
        "anthropic-ratelimit-requests-reset",
        HeaderValue::from_static("2026-08-23T12:00:10Z"),
    );
    let mut a = Allowance::default();
    a.observe(at(0.0), &RateLimits::read(&h, reference));
    let (until, _) = a.paced_until(&count(0), at(0.0)).unwrap();
    // 50 missing over 10 s: one back after 0.2 s.
    assert_eq!(until, at(0.2));
}

#[test]
fn a_requests_token_cost_is_its_prompt_and_its_largest_output_cap() {
    use levee_core::pace::estimate_tokens;
    let body = br#"{"model":"gpt-4o","max_tokens": 500,"messages":[{"role":"user","content":"Hello there"}]}"#;
    assert_eq!(estimate_tokens(body), (body.len() as u64).div_ceil(4) + 500);
    let newer = br#"{"max_completion_tokens":2000,"max_tokens":10}"#;
    assert_eq!(
        estimate_tokens(newer),
        (newer.len() as u64).div_ceil(4) + 2000
    );
    assert_eq!(estimate_tokens(b"{}"), 1, "the prompt only");
    assert_eq!(
        estimate_tokens(br#"{"max_tokens":"lots"}"#),
        6,
        "not a number: ignored"
    );
    // Nineteen digits at most are read: no overflow.
    let huge = br#"{"max_tokens":99999999999999999999999}"#;
    assert_eq!(
        estimate_tokens(huge),
        (huge.len() as u64).div_ceil(4) + 9_999_999_999_999_999_999
    );
}
