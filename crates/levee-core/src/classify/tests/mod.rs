//! Unit tests: one per parser and per provider rule, including responses
//! that are not in the shared sample.

mod classes;
mod hints;
mod limits;
mod providers;
mod providers_cloud;
mod robustness;
mod shedding;
mod stream;
mod stream_aws;

use std::time::{Duration, SystemTime};

use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};

use super::{Classification, Classify, ProviderClassifier, ResponseView, Verdict};

/// `Sun, 23 Aug 2026 12:00:00 GMT`, the `Date` the tests' responses carry.
pub(super) fn noon() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_787_486_400)
}

pub(super) fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for &(k, v) in pairs {
        h.append(
            HeaderName::from_bytes(k.as_bytes()).unwrap(),
            HeaderValue::from_str(v).unwrap(),
        );
    }
    h
}

/// Classifies with the default classifier, `now` fixed at [`noon`].
pub(super) fn classify(status: u16, pairs: &[(&str, &str)], body: &str) -> Classification {
    classify_with(
        &ProviderClassifier::default(),
        status,
        pairs,
        body.as_bytes(),
    )
}

pub(super) fn classify_with(
    c: &ProviderClassifier,
    status: u16,
    pairs: &[(&str, &str)],
    body: &[u8],
) -> Classification {
    let h = headers(pairs);
    let view = ResponseView::new(StatusCode::from_u16(status).unwrap(), &h, body).with_now(noon());
    c.classify_response(&view)
}

pub(super) fn ms(n: u64) -> Option<Duration> {
    Some(Duration::from_millis(n))
}

pub(super) const JSON: (&str, &str) = ("content-type", "application/json");
pub(super) const DATE: (&str, &str) = ("date", "Sun, 23 Aug 2026 12:00:00 GMT");

pub(super) const OPENAI_RPM: &str = r#"{"error":{"message":"Rate limit reached for gpt-4o in organization org-x on requests per min (RPM): Limit 500, Used 500, Requested 1.","type":"requests","param":null,"code":"rate_limit_exceeded"}}"#;

pub(super) fn assert_is(
    c: &Classification,
    verdict: Verdict,
    wait: Option<Duration>,
    reason: &str,
) {
    assert_eq!(
        (c.verdict, c.wait, c.reason.as_str()),
        (verdict, wait, reason),
        "{c:?}"
    );
}
