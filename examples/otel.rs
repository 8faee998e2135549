//! OpenTelemetry's GenAI spans and metrics from a Levee failover, exported
//! over OTLP/HTTP (JSON) to a stand-in collector on 127.0.0.1, which the
//! example then reads back and checks: the names and values an
//! observability stack will see.
//!
//! The stack: `GenAiLayer` (one `CLIENT` span per request, the client
//! metrics) over a failover of two targets, each with an `AttemptLayer`
//! (one child span per call) over a hyper client. The primary is in an
//! outage (`503`); the fallback answers. So the request makes exactly two
//! calls: the fake provider counts them, and the trace shows both.
//!
//! Run with `cargo run -p examples --example otel`.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use opentelemetry::metrics::MeterProvider as _;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{MetricExporter, Protocol, SpanExporter, WithExportConfig};
use opentelemetry_sdk::metrics::{PeriodicReader, SdkMeterProvider};
use opentelemetry_sdk::trace::SdkTracerProvider;
use serde_json::Value;
use tokio::net::TcpListener;
use tower::{Layer, Service, ServiceExt};
use tower_levee::BoxError;
use tower_levee::failover::{Failover, Target};
use tower_levee::otel::{AttemptLayer, GenAiLayer};

#[path = "support.rs"]
mod support;
use support::counted_fake_provider;

/// What the stand-in collector received: each POST's path and JSON body.
type Received = Arc<Mutex<Vec<(String, Value)>>>;

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let (provider, calls) = counted_fake_provider().await?;
    let (collector, received) = collector().await?;

    // The SDK, exporting OTLP/JSON from its own threads.
    let spans = SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpJson)
        .with_endpoint(format!("http://{collector}/v1/traces"))
        .build()?;
    let tracer = SdkTracerProvider::builder()
        .with_batch_exporter(spans)
        .build();
    let metrics = MetricExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpJson)
        .with_endpoint(format!("http://{collector}/v1/metrics"))
        .build()?;
    let meters = SdkMeterProvider::builder()
        .with_reader(PeriodicReader::builder(metrics).build())
        .build();

    // The stack. The fake provider is on 127.0.0.1, whose host names no
    // provider: the attempts name it.
    let client = Client::builder(TokioExecutor::new()).build_http::<String>();
    let attempt = |name: &'static str| {
        AttemptLayer::new()
            .target(name)
            .provider("openai")
            .layer(client.clone())
    };
    let failover = Failover::builder()
        .target(
            Target::new("primary", attempt("primary")).rewrite(|req: &mut Request<String>| {
                // The primary is in an outage: the fake answers this path 503.
                let uri = format!("{}/outage", req.uri());
                *req.uri_mut() = uri.parse().expect("a URI with a path appended");
            }),
        )
        .target(Target::new("fallback", attempt("fallback")))
        .build()?;
    let mut stack = GenAiLayer::new()
        .tracer(tracer.tracer("tower-levee"))
        .meter(&meters.meter("tower-levee"))
        .layer(failover);

    let req = Request::post(format!("http://{provider}/v1/chat/completions"))
        .header("content-type", "application/json")
        .extension(tower_levee::breaker::Scope::new().model("gpt-4o"))
        .body(r#"{"model":"gpt-4o","messages":[]}"#.to_owned())?;
    let res = stack.ready().await?.call(req).await?;
    println!("POST /v1/chat/completions: {}", res.status());
    assert_eq!(res.status(), 200, "the fallback answered");
    // The operation ends with its body.
    res.into_body().collect().await?;
    // One call to each target, no other: no retry loop hides below.
    let calls = calls.load(std::sync::atomic::Ordering::SeqCst);
    println!("  the fake provider answered {calls} calls");
    assert_eq!(calls, 2, "the primary's 503 and the fallback's 200");

    // Export now, from blocking threads (the SDK's exporters block).
    let (tracer, meters) = tokio::task::spawn_blocking(move || {
        tracer.force_flush().expect("spans exported");
        meters.force_flush().expect("metrics exported");
        (tracer, meters)
    })
    .await?;

    let received = received.lock().unwrap().clone();
    check_spans(&received);
    check_metrics(&received);
    tokio::task::spawn_blocking(move || {
        let _ = tracer.shutdown();
        let _ = meters.shutdown();
    })
    .await?;
    println!("the collector saw the conventions' names and values");
    Ok(())
}

/// The spans: one operation and two attempts, its children.
fn check_spans(received: &[(String, Value)]) {
    let spans: Vec<&Value> = received
        .iter()
        .filter(|(path, _)| path == "/v1/traces")
        .flat_map(|(_, body)| all(body, &["resourceSpans", "scopeSpans", "spans"]))
        .collect();
    let operation = spans
        .iter()
        .find(|s| s["name"] == "chat gpt-4o")
        .expect("the operation's span, named for its operation and model");
    // OTLP's SpanKind: 3 is CLIENT.
    assert_eq!(operation["kind"], 3, "a CLIENT span");
    for (key, value) in [
        ("gen_ai.operation.name", "chat"),
        ("gen_ai.provider.name", "openai"),
        ("gen_ai.request.model", "gpt-4o"),
        ("server.address", "127.0.0.1"),
        ("levee.served_by", "fallback"),
        ("levee.verdict", "success"),
    ] {
        assert_eq!(attribute(operation, key).as_deref(), Some(value), "{key}");
    }
    assert_eq!(attribute(operation, "levee.attempts").as_deref(), Some("2"));
    println!(
        "  span {}: {} attributes",
        operation["name"],
        operation["attributes"].as_array().map_or(0, Vec::len)
    );

    let attempts: Vec<&&Value> = spans
        .iter()
        .filter(|s| s["name"] == "levee.attempt")
        .collect();
    assert_eq!(attempts.len(), 2, "one span per call");
    for a in &attempts {
        assert_eq!(
            a["parentSpanId"], operation["spanId"],
            "an attempt is the operation's child"
        );
        assert_eq!(a["kind"], 3);
        let target = attribute(a, "levee.target").expect("each attempt names its target");
        let status = attribute(a, "http.response.status_code");
        println!(
            "  span levee.attempt {target}: status {}",
            status.as_deref().unwrap_or("-")
        );
        match target.as_str() {
            "primary" => assert_eq!(attribute(a, "error.type").as_deref(), Some("503")),
            "fallback" => assert_eq!(attribute(a, "error.type"), None),
            other => panic!("no target {other}"),
        }
    }
}

/// The metrics: the conventions' names, units and buckets.
fn check_metrics(received: &[(String, Value)]) {
    let metrics: Vec<&Value> = received
        .iter()
        .filter(|(path, _)| path == "/v1/metrics")
        .flat_map(|(_, body)| all(body, &["resourceMetrics", "scopeMetrics", "metrics"]))
        .collect();
    let duration = metrics
        .iter()
        .find(|m| m["name"] == "gen_ai.client.operation.duration")
        .expect("the duration histogram");
    assert_eq!(duration["unit"], "s");
    let point = &duration["histogram"]["dataPoints"][0];
    assert_eq!(point["explicitBounds"].as_array().map(Vec::len), Some(14));
    assert_eq!(
        attribute(point, "gen_ai.provider.name").as_deref(),
        Some("openai")
    );
    assert_eq!(
        attribute(point, "server.address").as_deref(),
        Some("127.0.0.1")
    );
    println!(
        "  metric gen_ai.client.operation.duration: count {}",
        point["count"]
    );
    // The fake's answer reports no usage, so no token counts: the
    // conventions say not to make them up.
    assert!(
        !metrics
            .iter()
            .any(|m| m["name"] == "gen_ai.client.token.usage")
    );
}

/// Every object at the end of `path`, through arrays.
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

/// An attribute's value as text (OTLP/JSON writes an int as a string).
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

/// An OTLP/HTTP collector stand-in: keeps every JSON body POSTed to it.
async fn collector() -> std::io::Result<(SocketAddr, Received)> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let received: Received = Arc::default();
    let kept = received.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let kept = kept.clone();
            let svc = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                let kept = kept.clone();
                async move {
                    let path = req.uri().path().to_owned();
                    let body = req.into_body().collect().await.map(|b| b.to_bytes());
                    if let Ok(json) = body.as_ref().map(|b| serde_json::from_slice::<Value>(b)) {
                        kept.lock()
                            .unwrap()
                            .push((path, json.unwrap_or(Value::Null)));
                    }
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
    Ok((addr, received))
}
