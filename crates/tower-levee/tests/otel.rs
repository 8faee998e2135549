//! The `otel` feature against OpenTelemetry's GenAI conventions (v1.41):
//! spans exported through `tracing-opentelemetry` and metrics through the
//! SDK, both into its in-memory exporters, every name checked against the
//! conventions' lists.

mod channel_body;
mod eventstream_support;
mod failover_support;

use std::collections::BTreeSet;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::BodyExt;
use opentelemetry::metrics::MeterProvider as _;
use opentelemetry::trace::{SpanKind, Status, TracerProvider as _};
use opentelemetry::{KeyValue, Value};
use opentelemetry_sdk::metrics::data::{AggregatedMetrics, HistogramDataPoint, MetricData};
use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use tokio::sync::mpsc;
use tower::{BoxError, Layer, Service, ServiceBuilder, ServiceExt};
use tower_levee::BreakerLayer;
use tower_levee::breaker::Scope;
use tower_levee::failover::{Failover, Target};
use tower_levee::otel::{Attempt, AttemptLayer, GenAiLayer, names};
use tracing_subscriber::Layer as _;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::SubscriberExt;

use channel_body::ChannelBody;
use failover_support::{Reply1, Scripted, TestClassifier, breaker};

// === The conventions' names ===

/// Every span attribute the conventions (v1.41) define for an inference
/// span, the `http.*` one an attempt carries, and tracing-opentelemetry's
/// own; Levee's are under `levee.`.
const SPAN_ATTRIBUTES: &[&str] = &[
    "gen_ai.operation.name",
    "gen_ai.provider.name",
    "gen_ai.request.model",
    "gen_ai.request.stream",
    "gen_ai.response.model",
    "gen_ai.response.id",
    "gen_ai.response.finish_reasons",
    "gen_ai.response.time_to_first_chunk",
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.output_tokens",
    "gen_ai.usage.cache_read.input_tokens",
    "gen_ai.usage.cache_creation.input_tokens",
    "server.address",
    "server.port",
    "error.type",
    "http.response.status_code",
];

/// Levee's own attributes.
const LEVEE_ATTRIBUTES: &[&str] = &[
    "levee.verdict",
    "levee.reason",
    "levee.refusal",
    "levee.retry_after",
    "levee.served_by",
    "levee.attempts",
    "levee.fallback",
    "levee.target",
    "levee.attempt",
    "levee.shadow_probe",
];

/// The conventions' attributes on the client metrics.
const METRIC_ATTRIBUTES: &[&str] = &[
    "gen_ai.operation.name",
    "gen_ai.provider.name",
    "gen_ai.request.model",
    "gen_ai.response.model",
    "server.address",
    "server.port",
    "error.type",
    "gen_ai.token.type",
];

/// The conventions' client metrics: name, unit, buckets.
const METRICS: &[(&str, &str, &[f64])] = &[
    ("gen_ai.client.operation.duration", "s", &SECONDS),
    ("gen_ai.client.token.usage", "{token}", &TOKENS),
    ("gen_ai.client.operation.time_to_first_chunk", "s", &SECONDS),
    (
        "gen_ai.client.operation.time_per_output_chunk",
        "s",
        &SECONDS,
    ),
];

const SECONDS: [f64; 14] = [
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
];
const TOKENS: [f64; 14] = [
    1.0, 4.0, 16.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0, 65536.0, 262144.0, 1048576.0, 4194304.0,
    16777216.0, 67108864.0,
];

// === The harness ===

/// The SDK's in-memory exporters behind a tracing subscriber.
struct Telemetry {
    spans: InMemorySpanExporter,
    tracer: SdkTracerProvider,
    metrics: InMemoryMetricExporter,
    meters: SdkMeterProvider,
}

impl Telemetry {
    fn new() -> Self {
        let spans = InMemorySpanExporter::default();
        let tracer = SdkTracerProvider::builder()
            .with_simple_exporter(spans.clone())
            .build();
        let metrics = InMemoryMetricExporter::default();
        let meters = SdkMeterProvider::builder()
            .with_reader(PeriodicReader::builder(metrics.clone()).build())
            .build();
        Telemetry {
            spans,
            tracer,
            metrics,
            meters,
        }
    }

    fn layer(&self) -> GenAiLayer {
        GenAiLayer::new()
            .tracer(self.tracer.tracer("tower-levee"))
            .meter(&self.meters.meter("tower-levee"))
    }

    /// The caller's own tracing spans, bridged to the same SDK as an
    /// application would (tracing-opentelemetry makes each the current
    /// OpenTelemetry context while it is entered).
    fn subscriber(&self) -> tracing::subscriber::DefaultGuard {
        let otel = tracing_opentelemetry::layer()
            .with_tracer(self.tracer.tracer("app"))
            .with_filter(Targets::new().with_target("app", tracing::Level::INFO));
        tracing::subscriber::set_default(tracing_subscriber::registry().with(otel))
    }

    /// Levee's spans (the caller's own left out), each checked.
    fn finished_spans(&self) -> Vec<SpanData> {
        self.tracer.force_flush().unwrap();
        let spans: Vec<SpanData> = self
            .spans
            .get_finished_spans()
            .unwrap()
            .into_iter()
            .filter(|s| s.instrumentation_scope.name() == "tower-levee")
            .collect();
        for span in &spans {
            check_span_names(span);
        }
        spans
    }

    fn app_spans(&self) -> Vec<SpanData> {
        self.tracer.force_flush().unwrap();
        let spans = self.spans.get_finished_spans().unwrap();
        spans
            .into_iter()
            .filter(|s| s.instrumentation_scope.name() == "app")
            .collect()
    }

    /// Every histogram point by metric name, each name and unit checked.
    fn histograms(&self) -> Vec<(String, Vec<HistogramPoint>)> {
        self.meters.force_flush().unwrap();
        let mut out = Vec::new();
        for resource in self.metrics.get_finished_metrics().unwrap() {
            for scope in resource.scope_metrics() {
                assert_eq!(scope.scope().name(), "tower-levee");
                for metric in scope.metrics() {
                    let (_, unit, buckets) = METRICS
                        .iter()
                        .find(|(name, ..)| *name == metric.name())
                        .unwrap_or_else(|| panic!("{} is no GenAI client metric", metric.name()));
                    assert_eq!(metric.unit(), *unit, "{}", metric.name());
                    let points: Vec<HistogramPoint> = match metric.data() {
                        AggregatedMetrics::F64(MetricData::Histogram(h)) => h
                            .data_points()
                            .map(|p| HistogramPoint::of(p, buckets, |v| v))
                            .collect(),
                        AggregatedMetrics::U64(MetricData::Histogram(h)) => h
                            .data_points()
                            .map(|p| HistogramPoint::of(p, buckets, |v| v as f64))
                            .collect(),
                        _ => panic!("{} is not a histogram", metric.name()),
                    };
                    out.push((metric.name().to_owned(), points));
                }
            }
        }
        out
    }

    fn points(&self, name: &str) -> Vec<HistogramPoint> {
        self.histograms()
            .into_iter()
            .filter(|(n, _)| n == name)
            .flat_map(|(_, p)| p)
            .collect()
    }
}

#[derive(Debug)]
struct HistogramPoint {
    count: u64,
    sum: f64,
    attributes: Vec<KeyValue>,
}

impl HistogramPoint {
    fn of<T: Copy>(p: &HistogramDataPoint<T>, buckets: &[f64], sum: fn(T) -> f64) -> Self {
        let bounds: Vec<f64> = p.bounds().collect();
        assert_eq!(bounds, buckets, "the conventions' buckets");
        for kv in p.attributes() {
            assert!(
                METRIC_ATTRIBUTES.contains(&kv.key.as_str()),
                "{} is no GenAI metric attribute",
                kv.key
            );
        }
        HistogramPoint {
            count: p.count(),
            sum: sum(p.sum()),
            attributes: p.attributes().cloned().collect(),
        }
    }

    fn get(&self, key: &str) -> Option<String> {
        self.attributes
            .iter()
            .find(|kv| kv.key.as_str() == key)
            .map(|kv| kv.value.to_string())
    }
}

fn check_span_names(span: &SpanData) {
    let mut seen = BTreeSet::new();
    for kv in &span.attributes {
        let key = kv.key.as_str();
        assert!(seen.insert(key), "span {}: {key} set twice", span.name);
        assert!(
            SPAN_ATTRIBUTES.contains(&key) || LEVEE_ATTRIBUTES.contains(&key),
            "span {}: {key} is neither the conventions' nor Levee's",
            span.name
        );
    }
}

fn attr(span: &SpanData, key: &str) -> Option<Value> {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| kv.value.clone())
}

fn attr_str(span: &SpanData, key: &str) -> Option<String> {
    attr(span, key).map(|v| v.to_string())
}

fn json(status: u16, body: &str) -> Response<String> {
    Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(body.to_owned())
        .unwrap()
}

const ANSWER: &str = r#"{"id":"chatcmpl-7","model":"gpt-4o-2024-08-06","choices":[{"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":12}}"#;

fn chat(uri: &str, model: &str) -> Request<String> {
    Request::post(uri)
        .extension(Scope::new().model(model.to_owned()))
        .body(String::new())
        .unwrap()
}

async fn read<B>(res: Response<B>) -> Bytes
where
    B: http_body::Body,
    B::Error: std::fmt::Debug,
{
    res.into_body().collect().await.unwrap().to_bytes()
}

/// A failover of `primary` and a fallback that answers `ANSWER`, named
/// `anthropic` (its host names no provider), each under an attempt layer.
fn primary_then_fallback(
    primary: Scripted,
) -> Failover<String, String, Attempt<Scripted>, TestClassifier> {
    let gate = Duration::from_secs(1);
    let primary = AttemptLayer::new().target("primary").layer(primary);
    let fallback = AttemptLayer::new()
        .target("fallback")
        .provider("anthropic")
        .layer(Scripted::new(|_| Reply1::Now(json(200, ANSWER))));
    Failover::builder()
        .target(Target::new("primary", primary).breaker(breaker(gate, gate)))
        .target(Target::new("fallback", fallback).breaker(breaker(gate, gate)))
        .build()
        .unwrap()
}

/// A chat request for `model` to `uri` through `svc`.
async fn call<S>(svc: &mut S, uri: &str, model: &str) -> Result<S::Response, S::Error>
where
    S: Service<Request<String>>,
{
    svc.ready().await?.call(chat(uri, model)).await
}

/// A provider that answers its one call, after `delay`, with an SSE
/// stream whose events the test sends through the returned feed.
fn sse_provider(
    delay: Duration,
) -> (
    channel_body::Feed,
    impl Service<Request<String>, Response = Response<ChannelBody>, Error = BoxError>,
) {
    let (feed, rx) = mpsc::unbounded_channel();
    let mut rx = Some(rx);
    let provider = tower::service_fn(move |_req: Request<String>| {
        let body = ChannelBody(rx.take().expect("one call"));
        async move {
            tokio::time::sleep(delay).await;
            Ok::<_, BoxError>(
                Response::builder()
                    .header("content-type", "text/event-stream")
                    .body(body)
                    .unwrap(),
            )
        }
    });
    (feed, provider)
}

// === Tests ===

#[tokio::test(flavor = "current_thread")]
async fn a_served_request_is_one_client_span_named_for_its_operation_and_model() {
    let t = Telemetry::new();
    let provider = Scripted::new(|_| Reply1::Now(json(200, ANSWER)));
    let mut svc = ServiceBuilder::new()
        .layer(t.layer())
        .layer(breaker(Duration::from_secs(1), Duration::from_secs(60)))
        .service(provider);

    let res = call(
        &mut svc,
        "https://api.openai.com/v1/chat/completions",
        "gpt-4o",
    )
    .await
    .unwrap();
    assert_eq!(
        read(res).await,
        ANSWER.as_bytes(),
        "the body passes unchanged"
    );

    let spans = t.finished_spans();
    assert_eq!(spans.len(), 1);
    let span = &spans[0];
    assert_eq!(span.name, "chat gpt-4o");
    assert_eq!(span.span_kind, SpanKind::Client);
    assert_eq!(
        span.status,
        Status::Unset,
        "success leaves the status unset"
    );
    for (key, value) in [
        ("gen_ai.operation.name", "chat"),
        ("gen_ai.provider.name", "openai"),
        ("gen_ai.request.model", "gpt-4o"),
        ("gen_ai.response.model", "gpt-4o-2024-08-06"),
        ("gen_ai.response.id", "chatcmpl-7"),
        ("server.address", "api.openai.com"),
        ("levee.verdict", "success"),
    ] {
        assert_eq!(attr_str(span, key).as_deref(), Some(value), "{key}");
    }
    assert_eq!(attr(span, "server.port"), Some(Value::I64(443)));
    assert_eq!(attr(span, "gen_ai.usage.input_tokens"), Some(Value::I64(9)));
    assert_eq!(
        attr(span, "gen_ai.usage.output_tokens"),
        Some(Value::I64(12))
    );
    assert_eq!(
        attr(span, "gen_ai.request.stream"),
        None,
        "set only for a stream"
    );
    assert_eq!(
        attr(span, "gen_ai.response.finish_reasons"),
        Some(Value::Array(
            vec![opentelemetry::StringValue::from("stop")].into()
        )),
        "finish reasons are a string array"
    );
    assert_eq!(attr(span, "error.type"), None);

    let duration = t.points("gen_ai.client.operation.duration");
    assert_eq!(duration.len(), 1);
    assert_eq!(duration[0].count, 1);
    assert_eq!(
        duration[0].get("gen_ai.provider.name").as_deref(),
        Some("openai")
    );
    assert_eq!(
        duration[0].get("gen_ai.response.model").as_deref(),
        Some("gpt-4o-2024-08-06")
    );
    assert_eq!(duration[0].get("error.type"), None);
    let tokens = t.points("gen_ai.client.token.usage");
    let by_type = |ty: &str| {
        tokens
            .iter()
            .find(|p| p.get("gen_ai.token.type").as_deref() == Some(ty))
            .map(|p| (p.count, p.sum))
    };
    assert_eq!(by_type("input"), Some((1, 9.0)));
    assert_eq!(by_type("output"), Some((1, 12.0)));
    assert!(
        t.points("gen_ai.client.operation.time_to_first_chunk")
            .is_empty(),
        "chunk metrics are for streams only"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn a_failover_records_one_attempt_per_call_and_the_operation_names_who_served() {
    let t = Telemetry::new();
    let primary = Scripted::new(|_| Reply1::Now(json(503, "{}")));
    let mut svc = t.layer().layer(primary_then_fallback(primary));

    let res = call(
        &mut svc,
        "http://127.0.0.1:8080/v1/chat/completions",
        "gpt-4o",
    )
    .await
    .unwrap();
    read(res).await;

    let spans = t.finished_spans();
    let operation = spans
        .iter()
        .find(|s| s.name == "chat gpt-4o")
        .expect("the operation");
    let attempts: Vec<&SpanData> = spans.iter().filter(|s| s.name == "levee.attempt").collect();
    assert_eq!(attempts.len(), 2, "one span per call: {spans:#?}");
    for a in &attempts {
        assert_eq!(a.span_kind, SpanKind::Client);
        assert_eq!(
            a.parent_span_id,
            operation.span_context.span_id(),
            "an attempt is the operation's child"
        );
    }
    let by_target = |name: &str| {
        *attempts
            .iter()
            .find(|a| attr_str(a, "levee.target").as_deref() == Some(name))
            .unwrap()
    };
    let first = by_target("primary");
    assert_eq!(attr(first, "levee.attempt"), Some(Value::I64(1)));
    assert_eq!(
        attr(first, "http.response.status_code"),
        Some(Value::I64(503))
    );
    assert_eq!(attr_str(first, "error.type").as_deref(), Some("503"));
    assert!(matches!(first.status, Status::Error { .. }));
    let second = by_target("fallback");
    assert_eq!(attr(second, "levee.attempt"), Some(Value::I64(2)));
    assert_eq!(
        attr_str(second, "gen_ai.provider.name").as_deref(),
        Some("anthropic")
    );
    assert_eq!(second.status, Status::Unset);

    assert_eq!(
        attr_str(operation, "levee.served_by").as_deref(),
        Some("fallback")
    );
    assert_eq!(
        attr_str(operation, "levee.verdict").as_deref(),
        Some("success")
    );
    assert_eq!(attr(operation, "levee.attempts"), Some(Value::I64(2)));
    assert_eq!(
        attr_str(operation, "gen_ai.provider.name").as_deref(),
        Some("anthropic"),
        "the provider is the one that served"
    );
    assert_eq!(
        operation.status,
        Status::Unset,
        "a failed attempt the failover handled is no error"
    );
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_stream_records_its_first_chunk_and_the_time_between_chunks() {
    let t = Telemetry::new();
    let (feed, provider) = sse_provider(Duration::from_millis(300));
    let mut svc = t.layer().layer(provider);
    let res = call(
        &mut svc,
        "https://api.anthropic.com/v1/messages",
        "claude-sonnet-4-5",
    )
    .await
    .unwrap();
    let mut body = res.into_body();
    let events = [
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"model\":\"claude-sonnet-4-5-20250929\",\"usage\":{\"input_tokens\":25}}}\n\n",
        "data: {\"type\":\"content_block_delta\",\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n",
        "data: {\"type\":\"content_block_delta\",\"delta\":{\"type\":\"text_delta\",\"text\":\" there\"}}\n\n",
        "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":15}}\n\n",
    ];
    for (i, event) in events.iter().enumerate() {
        tokio::time::sleep(Duration::from_millis(if i == 0 { 200 } else { 50 })).await;
        feed.send(Ok(Bytes::from_static(event.as_bytes()))).unwrap();
        body.frame().await.unwrap().unwrap();
    }
    drop(feed);
    assert!(body.frame().await.is_none());

    let spans = t.finished_spans();
    let span = &spans[0];
    assert_eq!(span.name, "chat claude-sonnet-4-5");
    assert_eq!(attr(span, "gen_ai.request.stream"), Some(Value::Bool(true)));
    assert_eq!(
        attr(span, "gen_ai.response.time_to_first_chunk"),
        Some(Value::F64(0.55)),
        "the first output, not message_start"
    );
    assert_eq!(
        attr_str(span, "gen_ai.provider.name").as_deref(),
        Some("anthropic")
    );
    assert_eq!(
        attr(span, "gen_ai.usage.output_tokens"),
        Some(Value::I64(15))
    );
    assert_eq!(
        attr(span, "gen_ai.response.finish_reasons"),
        Some(Value::Array(
            vec![opentelemetry::StringValue::from("end_turn")].into()
        ))
    );

    let first = t.points("gen_ai.client.operation.time_to_first_chunk");
    assert_eq!(first[0].count, 1);
    assert!((first[0].sum - 0.55).abs() < 1e-9, "{}", first[0].sum);
    let per = t.points("gen_ai.client.operation.time_per_output_chunk");
    assert_eq!(per[0].count, 1, "every chunk of output after the first");
    assert!((per[0].sum - 0.05).abs() < 1e-9, "{}", per[0].sum);
    let duration = t.points("gen_ai.client.operation.duration");
    assert!(
        (duration[0].sum - 0.65).abs() < 1e-9,
        "to the stream's end: {}",
        duration[0].sum
    );
}

#[tokio::test(flavor = "current_thread")]
async fn a_bedrock_event_stream_records_its_chunks_reason_and_usage() {
    use eventstream_support::event;
    let t = Telemetry::new();
    let body: Vec<u8> = [
        event("messageStart", r#"{"role":"assistant"}"#),
        event("contentBlockDelta", r#"{"contentBlockIndex":0,"delta":{"text":"Hi"}}"#),
        event("contentBlockDelta", r#"{"contentBlockIndex":0,"delta":{"text":"!"}}"#),
        event("messageStop", r#"{"stopReason":"end_turn"}"#),
        event(
            "metadata",
            r#"{"usage":{"inputTokens":12,"outputTokens":3,"totalTokens":15},"metrics":{"latencyMs":90}}"#,
        ),
    ]
    .concat();
    let provider = tower::service_fn(move |_req: Request<String>| {
        let body = http_body_util::Full::new(Bytes::from(body.clone()));
        async move {
            Ok::<_, BoxError>(
                Response::builder()
                    .header("content-type", "application/vnd.amazon.eventstream")
                    .body(body)
                    .unwrap(),
            )
        }
    });
    let mut svc = t.layer().layer(provider);
    // The AWS SDK sends the model id percent-encoded, as it names it.
    let uri = "https://bedrock-runtime.us-east-1.amazonaws.com/model/amazon.nova-lite-v1%3A0/converse-stream";
    let res = svc
        .ready()
        .await
        .unwrap()
        .call(Request::post(uri).body(String::new()).unwrap())
        .await
        .unwrap();
    read(res).await;

    let spans = t.finished_spans();
    let span = &spans[0];
    assert_eq!(span.name, "chat amazon.nova-lite-v1%3A0");
    assert_eq!(
        attr_str(span, "gen_ai.provider.name").as_deref(),
        Some("aws.bedrock")
    );
    assert_eq!(attr(span, "gen_ai.request.stream"), Some(Value::Bool(true)));
    assert_eq!(
        attr(span, "gen_ai.usage.input_tokens"),
        Some(Value::I64(12))
    );
    assert_eq!(
        attr(span, "gen_ai.usage.output_tokens"),
        Some(Value::I64(3))
    );
    assert_eq!(
        attr(span, "gen_ai.response.finish_reasons"),
        Some(Value::Array(
            vec![opentelemetry::StringValue::from("end_turn")].into()
        ))
    );
    assert!(attr(span, "gen_ai.response.time_to_first_chunk").is_some());
    assert_eq!(
        t.points("gen_ai.client.operation.time_to_first_chunk")[0].count,
        1
    );
    assert_eq!(
        t.points("gen_ai.client.operation.time_per_output_chunk")[0].count,
        1,
        "the second delta"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn a_refusal_is_an_error_of_its_kind_with_its_wait() {
    let t = Telemetry::new();
    let layer = BreakerLayer::new();
    layer.handle().open("api.openai.com");
    let mut svc = ServiceBuilder::new()
        .layer(t.layer())
        .layer(layer)
        .service(Scripted::ok());

    let err = call(
        &mut svc,
        "https://api.openai.com/v1/chat/completions",
        "gpt-4o",
    )
    .await
    .unwrap_err();
    assert!(
        err.is::<tower_levee::CircuitOpen>(),
        "the real error comes back: {err}"
    );

    let spans = t.finished_spans();
    let span = &spans[0];
    assert_eq!(
        attr_str(span, "error.type").as_deref(),
        Some("circuit_open")
    );
    assert_eq!(
        attr_str(span, "levee.refusal").as_deref(),
        Some("circuit_open")
    );
    assert_eq!(attr_str(span, "levee.verdict").as_deref(), Some("rejected"));
    assert!(matches!(attr(span, "levee.retry_after"), Some(Value::F64(w)) if w > 0.0));
    assert!(matches!(span.status, Status::Error { .. }));
    let duration = t.points("gen_ai.client.operation.duration");
    assert_eq!(
        duration[0].get("error.type").as_deref(),
        Some("circuit_open")
    );
    assert!(
        t.points("gen_ai.client.token.usage").is_empty(),
        "no usage was reported"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn an_error_answer_is_an_error_of_its_status() {
    let t = Telemetry::new();
    let provider =
        Scripted::new(|_| Reply1::Now(json(429, r#"{"error":{"type":"rate_limit_error"}}"#)));
    let mut svc = t.layer().layer(provider);
    let res = call(
        &mut svc,
        "https://api.anthropic.com/v1/messages",
        "claude-haiku-4-5",
    )
    .await
    .unwrap();
    assert_eq!(res.status(), 429, "the real answer comes back");
    read(res).await;
    let spans = t.finished_spans();
    assert_eq!(attr_str(&spans[0], "error.type").as_deref(), Some("429"));
    assert!(matches!(spans[0].status, Status::Error { .. }));
}

#[tokio::test(flavor = "current_thread")]
async fn an_answer_dropped_before_its_end_ends_the_operation_as_cancelled() {
    let t = Telemetry::new();
    let (feed, provider) = sse_provider(Duration::ZERO);
    let mut svc = t.layer().layer(provider);
    let res = call(
        &mut svc,
        "https://api.openai.com/v1/chat/completions",
        "gpt-4o",
    )
    .await
    .unwrap();
    feed.send(Ok(Bytes::from_static(b"data: {\"choices\":[]}\n\n")))
        .unwrap();
    let mut body = res.into_body();
    body.frame().await.unwrap().unwrap();
    assert!(
        t.finished_spans().is_empty(),
        "the span lasts while the stream does"
    );
    drop(body);

    let spans = t.finished_spans();
    assert_eq!(spans.len(), 1);
    assert_eq!(
        attr_str(&spans[0], "error.type").as_deref(),
        Some("cancelled")
    );
    let duration = t.points("gen_ai.client.operation.duration");
    assert_eq!(duration[0].get("error.type").as_deref(), Some("cancelled"));
}

#[tokio::test(flavor = "current_thread")]
async fn an_operation_is_the_child_of_the_callers_tracing_span() {
    let t = Telemetry::new();
    let _guard = t.subscriber();
    let mut svc = t
        .layer()
        .layer(Scripted::new(|_| Reply1::Now(json(200, ANSWER))));
    let span = tracing::info_span!(target: "app", "handle_request");
    let res = tracing::Instrument::instrument(
        async {
            call(
                &mut svc,
                "https://api.openai.com/v1/chat/completions",
                "gpt-4o",
            )
            .await
        },
        span,
    )
    .await
    .unwrap();
    read(res).await;
    let ours = t.finished_spans();
    let app = t.app_spans();
    assert_eq!(app.len(), 1, "the caller's span");
    assert_eq!(ours[0].parent_span_id, app[0].span_context.span_id());
    assert_eq!(
        ours[0].span_context.trace_id(),
        app[0].span_context.trace_id()
    );
}

#[tokio::test(flavor = "current_thread")]
async fn without_a_tracer_provider_the_metrics_are_still_recorded() {
    let t = Telemetry::new();
    // The global tracer provider is the no-op one: no span records.
    let mut svc = GenAiLayer::new()
        .meter(&t.meters.meter("tower-levee"))
        .layer(Scripted::new(|_| Reply1::Now(json(200, ANSWER))));
    let res = call(
        &mut svc,
        "https://api.openai.com/v1/chat/completions",
        "gpt-4o",
    )
    .await
    .unwrap();
    read(res).await;
    assert_eq!(t.points("gen_ai.client.operation.duration")[0].count, 1);
    assert!(t.finished_spans().is_empty());
}

#[test]
fn the_names_module_spells_every_name_as_the_conventions_do() {
    let metrics: BTreeSet<&str> = METRICS.iter().map(|(n, ..)| *n).collect();
    for name in [
        names::metric::OPERATION_DURATION,
        names::metric::TOKEN_USAGE,
        names::metric::TIME_TO_FIRST_CHUNK,
        names::metric::TIME_PER_OUTPUT_CHUNK,
    ] {
        assert!(metrics.contains(name), "{name}");
    }
    for name in [
        names::attr::OPERATION_NAME,
        names::attr::PROVIDER_NAME,
        names::attr::REQUEST_MODEL,
        names::attr::REQUEST_STREAM,
        names::attr::RESPONSE_MODEL,
        names::attr::RESPONSE_ID,
        names::attr::RESPONSE_FINISH_REASONS,
        names::attr::RESPONSE_TIME_TO_FIRST_CHUNK,
        names::attr::USAGE_INPUT_TOKENS,
        names::attr::USAGE_OUTPUT_TOKENS,
        names::attr::USAGE_CACHE_READ_INPUT_TOKENS,
        names::attr::USAGE_CACHE_CREATION_INPUT_TOKENS,
        names::attr::SERVER_ADDRESS,
        names::attr::SERVER_PORT,
        names::attr::ERROR_TYPE,
        names::attr::HTTP_STATUS,
    ] {
        assert!(SPAN_ATTRIBUTES.contains(&name), "{name}");
    }
    assert!(METRIC_ATTRIBUTES.contains(&names::attr::TOKEN_TYPE));
    assert_eq!(names::SECONDS_BUCKETS, SECONDS);
    assert_eq!(names::TOKEN_BUCKETS, TOKENS);
}

/// A conventions' name as Prometheus stores it with its default OTLP
/// translation: dots to underscores, then the unit's suffix (`s` is
/// `_seconds`; an annotation such as `{token}` adds none).
fn prometheus_name(name: &str, unit: &str) -> String {
    let base = name.replace('.', "_");
    match unit {
        "s" => format!("{base}_seconds"),
        _ => base,
    }
}

#[test]
fn the_genai_dashboard_queries_only_the_conventions_metrics_and_attributes() {
    let dashboard: serde_json::Value = serde_json::from_str(include_str!(
        "../../../examples/grafana/levee-genai-dashboard.json"
    ))
    .unwrap();
    let series: Vec<String> = METRICS
        .iter()
        .flat_map(|(name, unit, _)| {
            let base = prometheus_name(name, unit);
            ["_bucket", "_sum", "_count"].map(|suffix| format!("{base}{suffix}"))
        })
        .collect();
    let labels: Vec<String> = METRIC_ATTRIBUTES
        .iter()
        .map(|a| a.replace('.', "_"))
        .chain(["le".to_owned()])
        .collect();
    let mut queried = BTreeSet::new();
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().unwrap() {
            let expr = target["expr"].as_str().unwrap();
            let words = expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'));
            for word in words.filter(|w| w.starts_with("gen_ai_")) {
                if word.starts_with("gen_ai_client_") {
                    assert!(
                        series.iter().any(|s| s == word),
                        "{word}: no series of the conventions' metrics"
                    );
                    queried.insert(word.to_owned());
                } else {
                    assert!(
                        labels.iter().any(|l| l == word),
                        "{word}: no attribute of the conventions' metrics"
                    );
                }
            }
            // Every `by (...)` groups by the metrics' attributes.
            for group in expr.split("by (").skip(1) {
                let names = group.split(')').next().unwrap();
                for label in names.split(',').map(str::trim) {
                    assert!(labels.iter().any(|l| l == label), "group by {label}");
                }
            }
        }
    }
    for (name, unit, _) in METRICS {
        let base = prometheus_name(name, unit);
        assert!(
            queried.iter().any(|q| q.starts_with(&base)),
            "a panel for {name}"
        );
    }
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn an_attempt_dropped_before_its_answer_is_cancelled() {
    let t = Telemetry::new();
    let mut svc = t
        .layer()
        .layer(AttemptLayer::new().target("slow").layer(Scripted::hang()));
    let call = svc
        .ready()
        .await
        .unwrap()
        .call(chat("https://api.openai.com/v1/chat/completions", "gpt-4o"));
    assert!(
        tokio::time::timeout(Duration::from_secs(1), call)
            .await
            .is_err(),
        "no answer"
    );
    let spans = t.finished_spans();
    assert_eq!(spans.len(), 2, "the attempt and its operation: {spans:#?}");
    for span in &spans {
        assert_eq!(
            attr_str(span, "error.type").as_deref(),
            Some("cancelled"),
            "{}",
            span.name
        );
        assert!(matches!(span.status, Status::Error { .. }));
    }
}

#[tokio::test(flavor = "current_thread")]
async fn a_disabled_layer_and_an_attempt_with_no_operation_record_nothing() {
    let t = Telemetry::new();
    let attempt = AttemptLayer::new()
        .target("only")
        .layer(Scripted::new(|_| Reply1::Now(json(200, ANSWER))));
    let mut svc = GenAiLayer::disabled().layer(attempt);
    let res = call(
        &mut svc,
        "https://api.openai.com/v1/chat/completions",
        "gpt-4o",
    )
    .await
    .unwrap();
    assert_eq!(read(res).await, ANSWER.as_bytes());
    assert!(t.finished_spans().is_empty());
    assert!(t.histograms().is_empty());
}

#[tokio::test(flavor = "current_thread")]
async fn a_2xx_the_failover_rejects_does_not_name_the_target_that_served() {
    let t = Telemetry::new();
    // An empty 200 is a failure of its own: the failover goes on.
    let primary = Scripted::new(|_| Reply1::Now(json(200, "")));
    let mut svc = t.layer().layer(primary_then_fallback(primary));
    let res = call(
        &mut svc,
        "http://127.0.0.1:8080/v1/chat/completions",
        "gpt-4o",
    )
    .await
    .unwrap();
    assert_eq!(read(res).await, ANSWER.as_bytes());
    let spans = t.finished_spans();
    let operation = spans.iter().find(|s| s.name == "chat gpt-4o").unwrap();
    assert_eq!(
        attr_str(operation, "levee.served_by").as_deref(),
        Some("fallback")
    );
    assert_eq!(attr(operation, "levee.attempts"), Some(Value::I64(2)));
    assert_eq!(
        attr_str(operation, "gen_ai.provider.name").as_deref(),
        Some("anthropic"),
        "the provider of the attempt whose answer came back"
    );
}
