//! `[otel]`: the gateway exports OpenTelemetry's GenAI spans and metrics
//! of every request over OTLP/HTTP, here to a stand-in collector on
//! loopback that keeps what it receives.

mod support;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use serde_json::Value;
use support::{Gateway, Provider, Reply, check_config, post};

const KEY: &str = "sk-client-otel";
const COLLECTOR_KEY: &str = "collector-canary-7f3a";
const CHAT: &str = r#"{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}"#;
const STREAM: &str =
    r#"{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"hi"}]}"#;
const STREAM_FIRST: &str = "data: {\"id\":\"c-s\",\"model\":\"gpt-4o-2024-08-06\",\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\n";
const STREAM_LAST: &str = "data: {\"id\":\"c-s\",\"choices\":[{\"delta\":{\"content\":\" there\"},\"finish_reason\":\"stop\"}]}\n\n";
const ANSWER: &str = r#"{"id":"chatcmpl-9","model":"gpt-4o-2024-08-06","choices":[{"message":{"content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":7,"completion_tokens":3}}"#;

/// One POST the collector received: its path, its `x-collector-key`, its body.
type Received = Arc<Mutex<Vec<(String, Option<String>, Value)>>>;

async fn collector() -> (SocketAddr, Received) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let received: Received = Arc::default();
    let kept = received.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let kept = kept.clone();
            let svc = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                let kept = kept.clone();
                async move {
                    let path = req.uri().path().to_owned();
                    let key = req
                        .headers()
                        .get("x-collector-key")
                        .and_then(|v| v.to_str().ok())
                        .map(str::to_owned);
                    let body = req.into_body().collect().await.unwrap().to_bytes();
                    let json = serde_json::from_slice(&body).unwrap_or(Value::Null);
                    kept.lock().unwrap().push((path, key, json));
                    Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"{}"))))
                }
            });
            tokio::spawn(async move {
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    (addr, received)
}

fn config(a: &str, b: &str, collector: SocketAddr) -> String {
    format!(
        "[[target]]\nname = \"a\"\nbase_url = \"{a}\"\napi_key_env = \"P_KEY\"\n\n\
         [[target]]\nname = \"b\"\nbase_url = \"{b}\"\napi_key_env = \"P_KEY\"\n\n\
         [[route]]\nmodel = \"gpt-4o\"\ntargets = [\"a\", \"b\"]\n\n\
         [[client]]\nname = \"app\"\nkey_env = \"CLIENT_KEY\"\n\n\
         [otel]\nendpoint = \"http://{collector}\"\nprotocol = \"http/json\"\n\
         service_name = \"gw-under-test\"\n\
         [otel.headers_env]\nx-collector-key = \"OTEL_KEY\"\n"
    )
}

fn all<'a>(value: &'a Value, path: &[&str]) -> Vec<&'a Value> {
    let Some((first, rest)) = path.split_first() else {
        return vec![value];
    };
    value[*first]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|v| all(v, rest))
        .collect()
}

fn attribute(item: &Value, key: &str) -> Option<String> {
    let kv = item["attributes"]
        .as_array()?
        .iter()
        .find(|kv| kv["key"] == key)?;
    let value = kv["value"].as_object()?.values().next()?;
    Some(match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn a_request_through_the_gateway_is_exported_as_a_genai_span_with_its_attempts_and_metrics() {
    let (collector, received) = collector().await;
    let down = Provider::always(Reply::json(503, r#"{"error":{"message":"down"}}"#)).await;
    // A stream when asked for one.
    let up = Provider::start(|seen, _| {
        if String::from_utf8_lossy(&seen.body).contains(r#""stream":true"#) {
            Reply::sse(
                &[STREAM_FIRST, STREAM_LAST, "data: [DONE]\n\n"],
                Duration::from_millis(20),
            )
        } else {
            Reply::json(200, ANSWER)
        }
    })
    .await;
    let mut gw = Gateway::start(
        &config(&down.url(), &up.url(), collector),
        &[
            ("CLIENT_KEY", KEY),
            ("P_KEY", "sk-provider"),
            ("OTEL_KEY", COLLECTOR_KEY),
        ],
    );
    let answer = post(&gw.url("/v1/chat/completions"), KEY, CHAT).await;
    assert_eq!(answer.status, 200);
    assert_eq!(answer.header("x-levee-served-by"), Some("b"));
    let streamed = post(&gw.url("/v1/chat/completions"), KEY, STREAM).await;
    assert_eq!(streamed.status, 200);
    assert!(streamed.text().contains("[DONE]"));
    // A stop exports what is left before the process ends.
    gw.signal("TERM");
    assert!(
        gw.wait(Duration::from_secs(20)).is_some(),
        "the gateway stops"
    );

    let received = received.lock().unwrap().clone();
    assert!(!received.is_empty(), "the collector received exports");
    for (path, key, _) in &received {
        assert_eq!(
            key.as_deref(),
            Some(COLLECTOR_KEY),
            "{path}: the configured header"
        );
    }
    let resources: Vec<&Value> = received
        .iter()
        .filter(|(p, ..)| p == "/v1/traces")
        .flat_map(|(_, _, body)| all(body, &["resourceSpans", "resource"]))
        .collect();
    assert!(
        resources
            .iter()
            .all(|r| attribute(r, "service.name").as_deref() == Some("gw-under-test"))
    );
    let spans: Vec<&Value> = received
        .iter()
        .filter(|(p, ..)| p == "/v1/traces")
        .flat_map(|(_, _, body)| all(body, &["resourceSpans", "scopeSpans", "spans"]))
        .collect();
    let operation = spans
        .iter()
        .find(|s| {
            s["name"] == "chat gpt-4o"
                && attribute(s, "gen_ai.response.id").as_deref() == Some("chatcmpl-9")
        })
        .unwrap_or_else(|| panic!("the operation's span: {spans:#?}"));
    assert_eq!(operation["kind"], 3, "CLIENT");
    for (key, value) in [
        ("gen_ai.operation.name", "chat"),
        ("gen_ai.provider.name", "openai"),
        ("gen_ai.request.model", "gpt-4o"),
        ("gen_ai.response.model", "gpt-4o-2024-08-06"),
        ("gen_ai.response.id", "chatcmpl-9"),
        ("gen_ai.usage.input_tokens", "7"),
        ("gen_ai.usage.output_tokens", "3"),
        ("server.address", "127.0.0.1"),
        ("levee.served_by", "b"),
        ("levee.attempts", "2"),
    ] {
        assert_eq!(attribute(operation, key).as_deref(), Some(value), "{key}");
    }
    let attempts = spans.iter().filter(|s| s["name"] == "levee.attempt");
    assert_eq!(
        attempts.clone().count(),
        4,
        "one span per call, two requests"
    );
    let children = attempts.filter(|a| a["parentSpanId"] == operation["spanId"]);
    assert_eq!(
        children.count(),
        2,
        "the request's two calls are its children"
    );
    let metrics: Vec<String> = received
        .iter()
        .filter(|(p, ..)| p == "/v1/metrics")
        .flat_map(|(_, _, body)| all(body, &["resourceMetrics", "scopeMetrics", "metrics"]))
        .filter_map(|m| m["name"].as_str().map(str::to_owned))
        .collect();
    for name in [
        "gen_ai.client.operation.duration",
        "gen_ai.client.token.usage",
    ] {
        assert!(metrics.iter().any(|m| m == name), "{name} in {metrics:?}");
    }
    assert!(
        !gw.log().contains(COLLECTOR_KEY),
        "the collector's key is never logged"
    );
    // One failure does not open a breaker: each request called the failing
    // target first, then the one that served it.
    assert_eq!((down.calls(), up.calls()), (2, 2));
}

#[test]
fn a_bad_otel_section_fails_naming_its_key() {
    let base = "listen = \"127.0.0.1:0\"\n[[target]]\nname = \"a\"\nbase_url = \"http://127.0.0.1:9\"\napi_key_env = \"P_KEY\"\n\
                [[route]]\nmodel = \"m\"\ntargets = [\"a\"]\n";
    for (otel, key) in [
        ("[otel]\nendpoint = \"127.0.0.1:4318\"\n", "otel.endpoint"),
        (
            "[otel]\nendpoint = \"http://user:pw@c:4318\"\n",
            "otel.endpoint",
        ),
        (
            "[otel]\nendpoint = \"http://c:4318\"\nmetric_interval = \"0s\"\n",
            "otel.metric_interval",
        ),
        (
            "[otel]\nendpoint = \"http://c:4318\"\n[otel.headers_env]\nx-key = \"UNSET_VAR\"\n",
            "otel.headers_env.x-key",
        ),
        (
            "[otel]\nendpoint = \"http://c:4318\"\nprotocol = \"grpc\"\n",
            "otel.protocol",
        ),
    ] {
        let (code, stderr) = check_config(&format!("{base}{otel}"), &[("P_KEY", "k")]);
        assert_eq!(code, Some(2), "{otel}");
        assert!(stderr.contains(key), "{otel}: {stderr}");
        assert!(!stderr.contains("canary"), "no credential quoted: {stderr}");
    }
}
