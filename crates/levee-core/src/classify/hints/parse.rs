//! The value formats providers write wait hints in.
//!
//! Each parser returns the exact value it read (no rounding, no cap) and
//! `None` for anything unparsable, negative or out of range. They work on
//! bytes, never index a `str` at a computed offset and use checked
//! arithmetic, so no input can make them panic.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

const NANOS_PER_SEC: u128 = 1_000_000_000;

// === numbers ===

/// A non-negative decimal read from the front of `b`: integer part, the
/// fraction in nanoseconds of one unit, and the bytes consumed.
struct Decimal {
    int: u64,
    frac_nanos: u64,
    /// A non-zero digit beyond the ninth decimal was dropped: round up.
    frac_rest: bool,
    len: usize,
}

fn decimal(b: &[u8]) -> Option<Decimal> {
    let mut i = 0;
    let mut int: u64 = 0;
    while let Some(&c) = b.get(i).filter(|c| c.is_ascii_digit()) {
        int = int.checked_mul(10)?.checked_add(u64::from(c - b'0'))?;
        i += 1;
    }
    let int_digits = i;
    let (mut frac_nanos, mut frac_rest, mut scale) = (0u64, false, 100_000_000u64);
    if b.get(i) == Some(&b'.') {
        i += 1;
        let start = i;
        while let Some(&c) = b.get(i).filter(|c| c.is_ascii_digit()) {
            if scale > 0 {
                frac_nanos += u64::from(c - b'0') * scale;
                scale /= 10;
            } else if c != b'0' {
                frac_rest = true;
            }
            i += 1;
        }
        // "1." and ".5" are accepted (Go accepts both); "." alone is not.
        if int_digits == 0 && i == start {
            return None;
        }
    } else if int_digits == 0 {
        return None;
    }
    Some(Decimal {
        int,
        frac_nanos,
        frac_rest,
        len: i,
    })
}

/// `d` units of `unit_nanos` nanoseconds each, in nanoseconds.
fn scaled(d: &Decimal, unit_nanos: u64) -> u128 {
    let unit = u128::from(unit_nanos);
    let frac = u128::from(d.frac_nanos) * unit;
    let mut nanos = u128::from(d.int) * unit + frac / NANOS_PER_SEC;
    if frac % NANOS_PER_SEC != 0 || d.frac_rest {
        nanos += 1;
    }
    nanos
}

fn from_nanos(nanos: u128) -> Option<Duration> {
    let secs = u64::try_from(nanos / NANOS_PER_SEC).ok()?;
    // The remainder is < 10^9, so it fits a u32.
    Some(Duration::new(secs, (nanos % NANOS_PER_SEC) as u32))
}

fn trim(s: &str) -> &[u8] {
    s.trim_ascii().as_bytes()
}

/// Delta seconds as in `Retry-After: 7` or the fractional `1.5` some
/// providers send. No sign, no exponent.
pub fn delay_seconds(s: &str) -> Option<Duration> {
    let b = trim(s);
    let d = decimal(b)?;
    (d.len == b.len()).then(|| from_nanos(scaled(&d, 1_000_000_000)))?
}

/// A whole number of milliseconds, fractional allowed (`retry-after-ms: 60000`).
pub fn delay_millis(s: &str) -> Option<Duration> {
    let b = trim(s);
    let d = decimal(b)?;
    (d.len == b.len()).then(|| from_nanos(scaled(&d, 1_000_000)))?
}

// === durations ===

/// Nanoseconds per unit for the unit spellings of Go (`ns us µs ms s m h`) and,
/// when `words` is set, the English words messages use (`seconds`, `min`, `day`).
fn unit_nanos(unit: &[u8], words: bool) -> Option<u64> {
    const S: u64 = 1_000_000_000;
    let n = match unit {
        b"ns" => 1,
        b"us" | b"\xc2\xb5s" | b"\xce\xbcs" => 1_000, // us, µs (micro sign), μs (mu)
        b"ms" => 1_000_000,
        b"s" => S,
        b"m" => 60 * S,
        b"h" => 3_600 * S,
        _ if !words => return None,
        _ => {
            let mut buf = [0u8; 16];
            let lower = buf.get_mut(..unit.len())?;
            lower.copy_from_slice(unit);
            lower.make_ascii_lowercase();
            match &*lower {
                b"ns" | b"nanosecond" | b"nanoseconds" => 1,
                b"microsecond" | b"microseconds" => 1_000,
                b"ms" | b"msec" | b"msecs" | b"millisecond" | b"milliseconds" => 1_000_000,
                b"s" | b"sec" | b"secs" | b"second" | b"seconds" => S,
                b"m" | b"min" | b"mins" | b"minute" | b"minutes" => 60 * S,
                b"h" | b"hr" | b"hrs" | b"hour" | b"hours" => 3_600 * S,
                b"d" | b"day" | b"days" => 86_400 * S,
                _ => return None,
            }
        }
    };
    Some(n)
}

/// The unit right after a number: a run of ASCII letters, or `µs`/`μs`.
fn unit_len(b: &[u8]) -> usize {
    for micro in ["µs", "μs"] {
        if b.starts_with(micro.as_bytes()) {
            return micro.len();
        }
    }
    b.iter().take_while(|c| c.is_ascii_alphabetic()).count()
}

/// Reads `<number><unit>` terms from the front of `b`, Go style
/// (`1m26.4s`), or with `words` also `60 seconds` and `1.5 hours`.
/// Returns the total and the bytes consumed; at least one term is required.
fn terms(b: &[u8], words: bool) -> Option<(u128, usize)> {
    let (mut total, mut i) = (0u128, 0usize);
    loop {
        let rest = b.get(i..)?;
        let Some(d) = decimal(rest) else { break };
        let mut j = d.len;
        if words {
            j += rest[j..].iter().take_while(|&&c| c == b' ').count();
        }
        let ulen = unit_len(&rest[j..]);
        let Some(unit) = unit_nanos(&rest[j..j + ulen], words) else {
            break;
        };
        total = total.checked_add(scaled(&d, unit))?;
        i += j + ulen;
        // Only glued terms continue ("1m26s"); "1 minute 30 seconds" stops at the first.
        if !b.get(i).is_some_and(u8::is_ascii_digit) {
            break;
        }
    }
    (i > 0).then_some((total, i))
}

/// A Go `time.Duration` string, as in OpenAI's `x-ratelimit-reset-requests:
/// 6m0s` and messages like `try again in 1m26.4s`: one or more
/// `<decimal><unit>` terms with units `ns us µs ms s m h`, or a bare `0`.
pub fn go_duration(s: &str) -> Option<Duration> {
    let mut b = trim(s);
    if let [b'+', rest @ ..] = b {
        b = rest;
    }
    if b == b"0" {
        return Some(Duration::ZERO);
    }
    let (nanos, len) = terms(b, false)?;
    (len == b.len()).then(|| from_nanos(nanos))?
}

/// A protobuf `Duration` in its JSON form, as in Gemini's
/// `RetryInfo.retryDelay`: `"56s"`, `"1.5s"`, `"0.000001s"`.
pub fn proto_duration(s: &str) -> Option<Duration> {
    let b = trim(s).strip_suffix(b"s")?;
    let d = decimal(b)?;
    (d.len == b.len()).then(|| from_nanos(scaled(&d, 1_000_000_000)))?
}

/// A duration at the start of free text, as messages write them: Go style
/// (`9.816s.`, `1m26.4s`, `20ms`), in words (`60 seconds`, `1 seconds`,
/// `2 minutes`), or as a .NET `TimeSpan` (`5.03:23:11`, `00:00:30`: Azure's
/// "Quota will be replenished in 5.03:23:11"). Returns the duration and the
/// bytes it took.
pub fn text_duration(s: &str) -> Option<(Duration, usize)> {
    let (nanos, len) = terms(s.as_bytes(), true).or_else(|| time_span(s.as_bytes()))?;
    Some((from_nanos(nanos)?, len))
}

/// A .NET `TimeSpan` at the front of `b`: `[d.]hh:mm:ss[.fffffff]`, hours
/// below 24 when days are given, minutes and seconds below 60.
fn time_span(b: &[u8]) -> Option<(u128, usize)> {
    const S: u128 = 1_000_000_000;
    let lead = b.iter().take_while(|c| c.is_ascii_digit()).count();
    if lead == 0 || lead > 9 {
        return None;
    }
    let first = u128::from(digits(b, 0, lead)?);
    let (days, hours, mut i) = if b.get(lead) == Some(&b'.') {
        let h = b[lead + 1..]
            .iter()
            .take_while(|c| c.is_ascii_digit())
            .count();
        if !(1..=2).contains(&h) {
            return None;
        }
        let hours = u128::from(digits(b, lead + 1, h)?);
        (first, hours, lead + 1 + h)
    } else {
        (0, first, lead)
    };
    if days > 0 && hours >= 24 {
        return None;
    }
    // `:mm` or `:ss` at `i`, below 60.
    let sixty = |i: usize| {
        let v = digits(b, i + 1, 2).filter(|&v| b[i] == b':' && v < 60)?;
        Some(u128::from(v))
    };
    let minutes = sixty(i)?;
    let seconds = sixty(i + 3)?;
    i += 6;
    let mut nanos = ((days * 24 + hours) * 60 + minutes) * 60 * S + seconds * S;
    if b.get(i) == Some(&b'.')
        && let Some(frac) = decimal(&b[i..]).filter(|d| d.len > 1)
    {
        nanos += scaled(&frac, 1_000_000_000);
        i += frac.len;
    }
    Some((nanos, i))
}

// === dates ===

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's
/// `days_from_civil`), after checking the date exists.
fn days_from_civil(y: i64, m: u32, d: u32) -> Option<i64> {
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let month_days = match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return None,
    };
    if d == 0 || d > month_days {
        return None;
    }
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (i64::from(m) + 9) % 12;
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    Some(era * 146_097 + doe - 719_468)
}

fn digits(b: &[u8], at: usize, n: usize) -> Option<u32> {
    let s = b.get(at..at + n)?;
    s.iter().try_fold(0u32, |acc, &c| {
        c.is_ascii_digit().then(|| acc * 10 + u32::from(c - b'0'))
    })
}

fn at_unix(secs: i64, nanos: u32) -> Option<SystemTime> {
    let secs = u64::try_from(secs).ok()?;
    UNIX_EPOCH.checked_add(Duration::new(secs, nanos))
}

/// `YYYY-MM-DD` at the front of `b`, as days since the epoch.
fn date(b: &[u8]) -> Option<i64> {
    let (y, m, d) = (digits(b, 0, 4)?, digits(b, 5, 2)?, digits(b, 8, 2)?);
    (b.get(4) == Some(&b'-') && b.get(7) == Some(&b'-')).then_some(())?;
    days_from_civil(i64::from(y), m, d)
}

/// `HH:MM` then optionally `:SS`: seconds into the day and bytes consumed.
fn clock(b: &[u8]) -> Option<(i64, usize)> {
    let (h, m) = (digits(b, 0, 2)?, digits(b, 3, 2)?);
    (b.get(2) == Some(&b':') && h < 24 && m < 60).then_some(())?;
    let mut secs = i64::from(h * 3600 + m * 60);
    let mut len = 5;
    if b.get(5) == Some(&b':') {
        let s = digits(b, 6, 2).filter(|&s| s <= 60)?;
        secs += i64::from(s);
        len = 8;
    }
    Some((secs, len))
}

/// An RFC 3339 timestamp, as in `anthropic-ratelimit-tokens-reset:
/// 2026-08-23T12:00:30Z`: `YYYY-MM-DD(T|t| )HH:MM:SS[.frac](Z|±HH:MM)`.
pub fn rfc3339(s: &str) -> Option<SystemTime> {
    let b = trim(s);
    let days = date(b)?;
    matches!(b.get(10), Some(b'T' | b't' | b' ')).then_some(())?;
    let rest = b.get(11..)?;
    let (secs, mut i) = clock(rest).filter(|&(_, len)| len == 8)?;
    let mut nanos = 0;
    if rest.get(i) == Some(&b'.') {
        let d = decimal(&rest[i..])?;
        nanos = u32::try_from(d.frac_nanos).ok()?;
        i += d.len;
    }
    let offset = match rest.get(i..)? {
        b"Z" | b"z" => 0,
        [sign @ (b'+' | b'-'), tz @ ..] if tz.len() == 5 => {
            let (h, m) = clock(tz).map(|(s, _)| (s / 3600, s / 60 % 60))?;
            let off = h * 3600 + m * 60;
            if *sign == b'+' { off } else { -off }
        }
        _ => return None,
    };
    at_unix(days * 86_400 + secs - offset, nanos)
}

/// A date in free text, as in Anthropic's `You will regain access on
/// 2026-09-01 at 00:00 UTC`: `YYYY-MM-DD`, then optionally ` at HH:MM[:SS]`
/// and ` UTC`/` GMT`/`Z` or a numeric offset (`+0800`, `-05:00`; Volcengine
/// Ark's "reset at 2026-08-29 23:59:59 +0800 CST"), or an RFC 3339
/// timestamp. A bare date means midnight UTC; a time with no zone, or any
/// other zone name, is refused rather than guessed.
pub fn text_date(s: &str) -> Option<SystemTime> {
    let token = s.split_ascii_whitespace().next()?;
    let token = token.trim_end_matches(['.', ',', ';', ')']);
    if token.len() > 10 {
        return rfc3339(token);
    }
    let b = s.as_bytes();
    let days = date(b)?;
    let mut rest = &b[10..];
    let mut secs = 0;
    let at = rest.strip_prefix(b" at ").or_else(|| {
        rest.strip_prefix(b" ")
            .filter(|r| r.first().is_some_and(u8::is_ascii_digit))
    });
    let timed = at.is_some();
    if let Some(r) = at {
        let (s, len) = clock(r)?;
        secs = s;
        rest = &r[len..];
    }
    let tz = rest.trim_ascii_start();
    if let Some(offset) = numeric_offset(tz) {
        return at_unix(days * 86_400 + secs - offset, 0);
    }
    let tz = &tz[..tz.iter().take_while(|c| c.is_ascii_alphabetic()).count()];
    let utc = [&b"utc"[..], b"gmt", b"z"];
    if !(utc.iter().any(|name| tz.eq_ignore_ascii_case(name)) || (tz.is_empty() && !timed)) {
        return None;
    }
    at_unix(days * 86_400 + secs, 0)
}

/// A numeric UTC offset at the front of `b` (`+0800`, `-05:00`), in seconds.
fn numeric_offset(b: &[u8]) -> Option<i64> {
    let (sign, rest) = match b.first()? {
        b'+' => (1, &b[1..]),
        b'-' => (-1, &b[1..]),
        _ => return None,
    };
    let h = i64::from(digits(rest, 0, 2)?);
    let m_at = if rest.get(2) == Some(&b':') { 3 } else { 2 };
    let m = i64::from(digits(rest, m_at, 2)?);
    (h < 24 && m < 60).then_some(sign * (h * 3600 + m * 60))
}

/// An HTTP-date (`Sun, 23 Aug 2026 12:00:00 GMT`, and the obsolete forms).
pub fn http_date(s: &str) -> Option<SystemTime> {
    httpdate::parse_http_date(s.trim_ascii()).ok()
}
