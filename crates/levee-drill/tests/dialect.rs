//! The simulated provider speaks each dialect the way Levee's classifier
//! expects of the real one.

use std::time::Duration;

use http_body_util::BodyExt;
use levee_core::classify::{Classify, ProviderClassifier, ResponseView, StreamScanner, Verdict};
use levee_drill::dialect;
use levee_drill::scenario::DIALECTS;

fn verdict(res: http::Response<dialect::SimBody>) -> (Verdict, Option<Duration>, String) {
    let (parts, body) = res.into_parts();
    let bytes = futures_bytes(body);
    let c = ProviderClassifier::default().classify_response(&ResponseView::new(
        parts.status,
        &parts.headers,
        &bytes,
    ));
    (c.verdict, c.wait, c.reason.as_str().to_owned())
}

fn futures_bytes(body: dialect::SimBody) -> bytes::Bytes {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(body.collect())
        .unwrap()
        .to_bytes()
}

fn stream_verdict(res: http::Response<dialect::SimBody>) -> Verdict {
    let mut scanner = StreamScanner::for_response(res.status(), res.headers()).expect("a stream");
    scanner.feed(&futures_bytes(res.into_body()));
    scanner.finish().verdict
}

#[test]
fn every_dialect_answers_as_the_classifier_expects() {
    for d in DIALECTS {
        let (v, wait, reason) =
            verdict(dialect::throttle(d, "m", Duration::from_millis(1500), 600));
        println!("{d}: throttle -> {v:?} {wait:?} {reason}");
        assert_eq!(v, Verdict::Throttled, "{d} throttle");
        if d != "bedrock" {
            assert!(
                wait.is_some_and(
                    |w| w >= Duration::from_millis(1500) && w <= Duration::from_secs(2)
                ),
                "{d}: {wait:?}"
            );
        }
        for overload in [false, true] {
            let (v, _, reason) = verdict(dialect::server_error(d, overload, None));
            assert_eq!(v, Verdict::Availability, "{d} server error ({reason})");
        }
        let (v, _, reason) = verdict(dialect::revoked(d));
        assert_eq!(v, Verdict::Credential, "{d} revoked ({reason})");
        let (v, _, reason) = verdict(dialect::spend_cap(d));
        assert_eq!(v, Verdict::Quota, "{d} spend cap ({reason})");
        for stream in [false, true] {
            let (v, _, _) = verdict(dialect::success(d, "m", stream));
            assert_eq!(v, Verdict::Success);
        }
        assert_eq!(
            stream_verdict(dialect::success(d, "m", true)),
            Verdict::Success,
            "{d} stream"
        );
        assert_eq!(
            stream_verdict(dialect::midstream_error(d, "m")),
            Verdict::Availability,
            "{d} midstream"
        );
    }
}

#[test]
fn behind_a_gateway_a_target_answers_in_openais_api_and_refuses_in_its_own_dialect() {
    use std::sync::Arc;
    use tower::ServiceExt;

    let text = "name = \"shape\"\nduration = \"60s\"\nseed = 3\n[load]\nrate = 1\nmodel = \"m\"\n\
                [[target]]\nname = \"b\"\ndialect = \"bedrock\"\nlatency = \"10ms\"\n\
                [[fault]]\ntarget = \"b\"\nkind = \"overload\"\nfrom = \"10s\"\nto = \"20s\"\n";
    let sc = Arc::new(levee_drill::scenario::Scenario::from_toml(text).expect("scenario"));
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap()
        .block_on(async {
            let provider = levee_drill::provider::Provider::new(sc).openai_api();
            let call = || {
                let request = http::Request::post("/v1/chat/completions")
                    .body(bytes::Bytes::new())
                    .unwrap();
                provider.target(0).oneshot(request)
            };
            let ok = call().await.expect("an answer");
            assert_eq!(ok.status(), 200);
            let body = ok.into_body().collect().await.unwrap().to_bytes();
            let json: serde_json::Value = serde_json::from_slice(&body).unwrap();
            assert_eq!(json["object"], "chat.completion", "{json}");
            tokio::time::sleep(Duration::from_secs(11)).await;
            let refused = call().await.expect("an answer");
            assert_eq!(refused.status(), 503);
            assert!(
                refused.headers().contains_key("x-amzn-errortype"),
                "Bedrock's own refusal"
            );
        });
}
