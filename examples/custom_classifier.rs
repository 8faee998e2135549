//! Wrap Levee's default classifier to teach it a private gateway's error code.
//!
//! Run with `cargo run -p examples --example custom_classifier`.

use http::{HeaderMap, StatusCode};
use levee_core::classify::{
    Classification, Classify, ProviderClassifier, ResponseView, TransportFailure, Verdict,
};

/// Our gateway answers `503` with `x-gateway-reason: tenant-paused` when a
/// tenant's budget is paused by finance: that is a quota, not an outage.
#[derive(Debug, Default)]
struct GatewayClassifier {
    inner: ProviderClassifier,
}

impl Classify for GatewayClassifier {
    fn classify_response(&self, response: &ResponseView<'_>) -> Classification {
        if response
            .headers
            .get("x-gateway-reason")
            .is_some_and(|v| v == "tenant-paused")
        {
            return Classification::new(Verdict::Quota, "gateway:tenant_paused");
        }
        self.inner.classify_response(response)
    }

    fn classify_transport(&self, failure: TransportFailure) -> Classification {
        self.inner.classify_transport(failure)
    }
}

fn main() {
    let classifier = GatewayClassifier::default();
    let mut headers = HeaderMap::new();
    headers.insert("x-gateway-reason", "tenant-paused".parse().unwrap());
    let paused = classifier.classify_response(&ResponseView::new(
        StatusCode::SERVICE_UNAVAILABLE,
        &headers,
        b"",
    ));
    let outage = classifier.classify_response(&ResponseView::new(
        StatusCode::SERVICE_UNAVAILABLE,
        &HeaderMap::new(),
        b"",
    ));
    println!("tenant paused -> {} ({})", paused.verdict, paused.reason);
    println!("plain 503     -> {} ({})", outage.verdict, outage.reason);
    assert_eq!(paused.verdict, Verdict::Quota);
    assert_eq!(outage.verdict, Verdict::Availability);
}
