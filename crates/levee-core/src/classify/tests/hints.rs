//! The wait-hint parsers and the hint order.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::{headers, ms, noon};
use crate::classify::hints::*;

fn secs(s: f64) -> Option<Duration> {
    Some(Duration::from_secs_f64(s))
}

fn at(unix: u64) -> Option<SystemTime> {
    Some(UNIX_EPOCH + Duration::from_secs(unix))
}

#[test]
fn go_durations_as_openai_writes_them() {
    assert_eq!(go_duration("6m0s"), secs(360.0));
    assert_eq!(go_duration("4m12.172s"), ms(252_172));
    assert_eq!(go_duration("20ms"), ms(20));
    assert_eq!(go_duration("1h2m3.5s"), ms(3_723_500));
    assert_eq!(go_duration("1.5h"), secs(5400.0));
    assert_eq!(go_duration("500us"), Some(Duration::from_micros(500)));
    assert_eq!(go_duration("3µs"), Some(Duration::from_micros(3)));
    assert_eq!(go_duration("7ns"), Some(Duration::from_nanos(7)));
    assert_eq!(go_duration(" 0 "), Some(Duration::ZERO));
    assert_eq!(go_duration("+1s"), secs(1.0));
}

#[test]
fn go_durations_refuse_garbage_signs_and_overflow() {
    for bad in [
        "",
        "s",
        "1",
        "-1s",
        "1x",
        "1s2",
        "1 s",
        ".s",
        "1..2s",
        "99999999999999999999h",
        "1e3s",
    ] {
        assert_eq!(go_duration(bad), None, "{bad:?}");
    }
    assert_eq!(go_duration("18446744073709551615h"), None);
}

#[test]
fn proto_durations_as_gemini_retry_info_writes_them() {
    assert_eq!(proto_duration("56s"), secs(56.0));
    assert_eq!(proto_duration("1.5s"), ms(1500));
    assert_eq!(proto_duration("0.000001s"), Some(Duration::from_micros(1)));
    for bad in ["56", "-1s", "1m", "s", ""] {
        assert_eq!(proto_duration(bad), None, "{bad:?}");
    }
}

#[test]
fn delay_seconds_accepts_integers_and_fractions_only() {
    assert_eq!(delay_seconds("7"), secs(7.0));
    assert_eq!(delay_seconds(" 1.5 "), ms(1500));
    assert_eq!(delay_millis("60000"), secs(60.0));
    assert_eq!(delay_millis("0.5"), Some(Duration::from_micros(500)));
    for bad in ["", "-1", "1e3", "inf", "NaN", "7s", "0x10", "1.2.3"] {
        assert_eq!(delay_seconds(bad), None, "{bad:?}");
    }
}

#[test]
fn fractions_beyond_nanoseconds_round_up_not_down() {
    assert_eq!(delay_seconds("0.0000000001"), Some(Duration::from_nanos(1)));
    assert_eq!(delay_seconds("1.0000000000"), secs(1.0));
}

#[test]
fn rfc3339_timestamps_with_fractions_and_offsets() {
    assert_eq!(rfc3339("2026-08-23T12:00:30Z"), at(1_787_486_430));
    assert_eq!(rfc3339("2026-08-23t12:00:30z"), at(1_787_486_430));
    assert_eq!(rfc3339("2026-08-23 14:00:30+02:00"), at(1_787_486_430));
    assert_eq!(rfc3339("2026-08-23T11:00:30-01:00"), at(1_787_486_430));
    let frac = rfc3339("2026-08-23T12:00:30.25Z").unwrap();
    assert_eq!(
        frac.duration_since(UNIX_EPOCH).unwrap(),
        Duration::from_millis(1_787_486_430_250)
    );
    assert_eq!(rfc3339("2024-02-29T00:00:00Z"), at(1_709_164_800));
}

#[test]
fn rfc3339_refuses_impossible_dates_and_the_time_before_1970() {
    for bad in [
        "2026-13-01T00:00:00Z",
        "2026-02-30T00:00:00Z",
        "2025-02-29T00:00:00Z",
        "2026-08-23T24:00:00Z",
        "2026-08-23T12:00Z",
        "2026-08-23T12:00:00",
        "1969-12-31T23:59:59Z",
        "2026-08-23T12:00:00+2",
        "",
    ] {
        assert_eq!(rfc3339(bad), None, "{bad:?}");
    }
}

#[test]
fn text_dates_as_anthropic_writes_them() {
    let sept = at(1_788_220_800);
    assert_eq!(text_date("2026-09-01 at 00:00 UTC."), sept);
    assert_eq!(text_date("2026-09-01."), sept);
    assert_eq!(text_date("2026-09-01T00:00:00Z."), sept);
    assert_eq!(
        text_date("2026-09-01 at 06:30:15 GMT"),
        at(1_788_220_800 + 23_415)
    );
    assert_eq!(
        text_date("2026-09-01 at 00:00 PST"),
        None,
        "a zone we cannot place is refused"
    );
    assert_eq!(text_date("soon"), None);
}

#[test]
fn text_durations_in_go_form_and_in_words() {
    assert_eq!(
        text_duration("1m26.4s. Visit"),
        Some((Duration::from_millis(86_400), 7))
    );
    assert_eq!(
        text_duration("9.816s."),
        Some((Duration::from_millis(9816), 6))
    );
    assert_eq!(
        text_duration("60 seconds."),
        Some((Duration::from_secs(60), 10))
    );
    assert_eq!(
        text_duration("1 seconds"),
        Some((Duration::from_secs(1), 9))
    );
    assert_eq!(
        text_duration("2 Minutes"),
        Some((Duration::from_secs(120), 9))
    );
    assert_eq!(text_duration("later"), None);
    assert_eq!(text_duration("5 apples"), None);
}

#[test]
fn text_durations_as_dotnet_time_spans() {
    let day = 86_400;
    assert_eq!(
        text_duration("5.03:23:11."),
        Some((Duration::from_secs(5 * day + 3 * 3600 + 23 * 60 + 11), 10))
    );
    assert_eq!(
        text_duration("00:00:30"),
        Some((Duration::from_secs(30), 8))
    );
    assert_eq!(
        text_duration("1:02:03.25 left"),
        Some((Duration::from_millis(3_723_250), 10))
    );
    // Minutes and seconds below 60, hours below 24 when days are given.
    assert_eq!(text_duration("00:60:00"), None);
    assert_eq!(text_duration("00:00:61"), None);
    assert_eq!(text_duration("1.24:00:00"), None);
    // Without days, hours run past a day; at most nine digits lead.
    assert_eq!(
        text_duration("25:00:00"),
        Some((Duration::from_secs(25 * 3600), 8))
    );
    assert_eq!(
        text_duration("100000000:00:00").map(|(d, _)| d),
        Some(Duration::from_secs(100_000_000 * 3600))
    );
    assert_eq!(text_duration("1000000000:00:00"), None);
    // A sentence's full stop is not a fraction.
    assert_eq!(
        text_duration("00:00:30."),
        Some((Duration::from_secs(30), 8))
    );
    assert_eq!(text_duration("12:30"), None, "a time of day, not a span");
    assert_eq!(text_duration("1234567890:00:00"), None);
    // Found by fuzzing: a long run of digits after the days' dot overflowed.
    assert_eq!(text_duration("5.11111111111111111111111:00:00"), None);
}

#[test]
fn text_wait_finds_the_phrases_providers_use() {
    let r = noon();
    assert_eq!(text_wait("Please try again in 9.816s. Visit", r), ms(9816));
    assert_eq!(
        text_wait("Rate limit is exceeded. Try again in 1 seconds.", r),
        ms(1000)
    );
    assert_eq!(text_wait("Please retry after 60 seconds.", r), ms(60_000));
    assert_eq!(
        text_wait("Please retry in 56.185908122s.", r),
        Some(Duration::new(56, 185_908_122))
    );
    assert_eq!(
        text_wait("try again later, or try again in 20ms", r),
        ms(20)
    );
    assert_eq!(
        text_wait("You will regain access on 2026-09-01 at 00:00 UTC.", r),
        secs(734_400.0)
    );
    assert_eq!(
        text_wait("Your quota will reset after 8h44m7s.", r),
        ms(31_447_000)
    );
    assert_eq!(
        text_wait(
            "Out of call volume quota. Quota will be replenished in 5.03:23:11.",
            r
        ),
        ms(444_191_000)
    );
    assert_eq!(text_wait("please wait before trying again", r), None);
    assert_eq!(
        text_wait("try again in 0s", r),
        None,
        "a zero wait is no hint"
    );
    assert_eq!(
        text_wait("You will regain access on 2026-01-01 at 00:00 UTC.", r),
        None,
        "past"
    );
}

#[test]
fn reference_time_prefers_the_date_header_then_now() {
    let h = headers(&[("date", "Sun, 23 Aug 2026 12:00:00 GMT")]);
    assert_eq!(reference_time(&h, Some(UNIX_EPOCH)), noon());
    assert_eq!(reference_time(&headers(&[]), Some(UNIX_EPOCH)), UNIX_EPOCH);
    let h = headers(&[("date", "yesterday")]);
    assert_eq!(reference_time(&h, Some(UNIX_EPOCH)), UNIX_EPOCH);
}

#[test]
fn retry_after_order_ms_headers_first() {
    let h = headers(&[
        ("retry-after", "60"),
        ("retry-after-ms", "59500"),
        ("x-ms-retry-after-ms", "1"),
    ]);
    assert_eq!(retry_after(&h, noon()), ms(59_500));
    let h = headers(&[("retry-after", "60"), ("x-ms-retry-after-ms", "1500")]);
    assert_eq!(retry_after(&h, noon()), ms(1500));
    let h = headers(&[("retry-after", "60"), ("retry-after-ms", "-1")]);
    assert_eq!(
        retry_after(&h, noon()),
        secs(60.0),
        "a placeholder falls through"
    );
}

#[test]
fn retry_after_http_date_is_measured_from_the_reference() {
    let h = headers(&[("retry-after", "Sun, 23 Aug 2026 12:01:30 GMT")]);
    assert_eq!(retry_after(&h, noon()), secs(90.0));
    let h = headers(&[("retry-after", "Sun, 23 Aug 2026 11:00:00 GMT")]);
    assert_eq!(
        retry_after(&h, noon()),
        None,
        "a date in the past is no hint"
    );
    let h = headers(&[("retry-after", "0")]);
    assert_eq!(retry_after(&h, noon()), None);
}

#[test]
fn reset_wait_reads_only_the_exhausted_dimension() {
    let h = headers(&[
        ("x-ratelimit-remaining-requests", "0"),
        ("x-ratelimit-reset-requests", "6m0s"),
        ("x-ratelimit-remaining-tokens", "9000"),
        ("x-ratelimit-reset-tokens", "20ms"),
    ]);
    assert_eq!(reset_wait(&h, noon()), secs(360.0));
    let h = headers(&[
        ("x-ratelimit-remaining-tokens", "12"),
        ("x-ratelimit-reset-tokens", "1s"),
    ]);
    assert_eq!(reset_wait(&h, noon()), None);
    let both = headers(&[
        ("x-ratelimit-remaining-requests", "0"),
        ("x-ratelimit-reset-requests", "2s"),
        ("x-ratelimit-remaining-tokens", "0"),
        ("x-ratelimit-reset-tokens", "7"),
    ]);
    assert_eq!(
        reset_wait(&both, noon()),
        secs(7.0),
        "every exhausted dimension must refill"
    );
}

#[test]
fn reset_wait_ignores_azure_sentinels() {
    let h = headers(&[
        ("x-ratelimit-limit-tokens", "-1"),
        ("x-ratelimit-remaining-tokens", "-1"),
        ("x-ratelimit-reset-tokens", "0"),
    ]);
    assert_eq!(reset_wait(&h, noon()), None);
    let h = headers(&[
        ("x-ratelimit-remaining-tokens", "0"),
        ("x-ratelimit-reset-tokens", "0"),
    ]);
    assert_eq!(reset_wait(&h, noon()), None);
}

#[test]
fn reset_wait_reads_anthropic_rfc3339_resets() {
    let h = headers(&[
        ("anthropic-ratelimit-output-tokens-remaining", "0"),
        (
            "anthropic-ratelimit-output-tokens-reset",
            "2026-08-23T12:00:30Z",
        ),
        ("anthropic-ratelimit-requests-remaining", "40"),
        ("anthropic-ratelimit-requests-reset", "2026-08-23T12:05:00Z"),
    ]);
    assert_eq!(reset_wait(&h, noon()), secs(30.0));
}

#[test]
fn should_retry_reads_true_false_and_nothing_else() {
    assert_eq!(
        should_retry(&headers(&[("x-should-retry", "true")])),
        Some(true)
    );
    assert_eq!(
        should_retry(&headers(&[("x-should-retry", "FALSE")])),
        Some(false)
    );
    assert_eq!(should_retry(&headers(&[("x-should-retry", "maybe")])), None);
    assert_eq!(should_retry(&headers(&[])), None);
}

#[test]
fn every_unit_word_of_a_message_scales_as_it_says() {
    let d = |s: &str| text_duration(s).map(|(d, _)| d);
    let cases: &[(&str, Duration)] = &[
        ("10 nanoseconds", Duration::from_nanos(10)),
        ("10 NS", Duration::from_nanos(10)),
        ("5 microseconds", Duration::from_micros(5)),
        ("250 msec", Duration::from_millis(250)),
        ("250 Milliseconds", Duration::from_millis(250)),
        ("2 secs", Duration::from_secs(2)),
        ("3 mins", Duration::from_secs(180)),
        ("2 hrs", Duration::from_secs(7_200)),
        ("1.5 hours", Duration::from_secs(5_400)),
        ("3 days", Duration::from_secs(259_200)),
        ("1 d", Duration::from_secs(86_400)),
    ];
    for &(text, want) in cases {
        assert_eq!(d(text), Some(want), "{text}");
    }
    // Words are for messages: a Go duration takes its own units only.
    for go in ["5sec", "2hours", "1d", "10NS", "3mins"] {
        assert_eq!(go_duration(go), None, "{go}");
    }
}

#[test]
fn february_29th_exists_in_leap_years_only() {
    // 2024 and 2000 are leap years; 2023 is not, nor 2100 (a century not
    // divisible by 400).
    assert_eq!(rfc3339("2024-02-29T00:00:00Z"), at(1_709_164_800));
    assert_eq!(rfc3339("2000-02-29T00:00:00Z"), at(951_782_400));
    assert_eq!(rfc3339("2023-02-29T00:00:00Z"), None);
    assert_eq!(rfc3339("2100-02-29T00:00:00Z"), None);
    assert_eq!(rfc3339("2023-02-28T00:00:00Z"), at(1_677_542_400));
    assert_eq!(rfc3339("2100-03-01T00:00:00Z"), at(4_107_542_400));
}

#[test]
fn rfc3339_offsets_are_exactly_hh_mm_and_fields_stay_in_range() {
    // Half-hour and odd-minute offsets: minutes count.
    assert_eq!(rfc3339("2026-08-23T17:30:30+05:30"), at(1_787_486_430));
    assert_eq!(rfc3339("2026-08-23T12:45:30+00:45"), at(1_787_486_430));
    assert_eq!(rfc3339("2026-08-23T01:00:30-11:00"), at(1_787_486_430));
    // An offset that is not `HH:MM`.
    assert_eq!(rfc3339("2026-08-23T12:00:30+05:300"), None);
    assert_eq!(rfc3339("2026-08-23T12:00:30+0530"), None);
    // Dashes where they belong; hours below 24, minutes below 60.
    assert_eq!(rfc3339("2026-08x23T12:00:30Z"), None);
    assert_eq!(rfc3339("2026x08-23T12:00:30Z"), None);
    assert_eq!(rfc3339("2026-08-23T24:00:30Z"), None);
    assert_eq!(rfc3339("2026-08-23T23:60:30Z"), None);
    assert_eq!(rfc3339("2026-08-23T23:59:30Z"), at(1_787_529_570));
}
