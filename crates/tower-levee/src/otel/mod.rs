//! OpenTelemetry's GenAI conventions for every request: spans and metrics
//! as observability stacks read LLM calls, with what only Levee knows
//! (which verdict, which mechanism refused, which target served after how
//! many attempts) beside them under `levee.*`.
//!
//! OpenTelemetry's [GenAI semantic conventions] (v1.41, status
//! Development) name an LLM call a `CLIENT` span `{gen_ai.operation.name}
//! {gen_ai.request.model}` with the provider, the models asked for and
//! answered with, why it stopped, the tokens it used and its error, and
//! four histograms. Levee already reads each of these: the model from the
//! request's path or its [`Scope`](crate::breaker::Scope), the rest from
//! the answer as it passes ([`AnswerScanner`](levee_core::answer::AnswerScanner)).
//!
//! - [`GenAiLayer`], outermost, records each request as one operation: a
//!   span that lasts until the answer's body ends (a stream's last event),
//!   and the metrics `gen_ai.client.operation.duration`,
//!   `gen_ai.client.token.usage`, and for streams
//!   `gen_ai.client.operation.time_to_first_chunk` and
//!   `gen_ai.client.operation.time_per_output_chunk`, with the
//!   conventions' buckets.
//! - [`AttemptLayer`], at the bottom of each failover target's stack,
//!   records each call to a target as a child span `levee.attempt`: the
//!   target, the attempt's number, the server, the status and verdict. A
//!   shadow probe's call is marked `levee.shadow_probe` and not counted.
//!
//! Both go through the OpenTelemetry API to the tracer and meter the
//! application gives the layer (or the global providers). A span's parent
//! is the current OpenTelemetry context, so an application on `tracing`
//! with [`tracing-opentelemetry`](https://docs.rs/tracing-opentelemetry)'s
//! layer (which makes an entered span the current context) sees Levee's
//! spans under its own. With no tracer provider installed a span records
//! nothing and no attribute is built.
//!
//! Per call (cachegrind, over a breaker at about 1,100 instructions): the
//! layer with no SDK installed adds about 5,700 instructions (reading the
//! request, a no-op span, the trail its attempts write to); the SDK's
//! meter about 2,000 more, its tracer about 2,700 more (11,500 in all);
//! [`GenAiLayer::disabled`] about 200. A span of the same attributes
//! through `tracing` and `tracing-opentelemetry` costs about 10,500 on its
//! own against 3,400 through the API, so Levee does not take that road.
//!
//! | attribute | on | from |
//! |---|---|---|
//! | `gen_ai.operation.name` | both | the path: `chat`, `text_completion`, `embeddings`, `generate_content` |
//! | `gen_ai.provider.name` | both | the host (`openai`, `anthropic`, `aws.bedrock`, …), else the layer's [`provider`](GenAiLayer::provider), else `_OTHER` |
//! | `gen_ai.request.model` | both | a [`Scope`](crate::breaker::Scope)'s model, else the path's (Azure, Bedrock, Gemini, Vertex) |
//! | `gen_ai.response.model`, `.id`, `.finish_reasons`, `gen_ai.usage.*` | operation | the answer |
//! | `gen_ai.request.stream`, `gen_ai.response.time_to_first_chunk` | operation | the answer's framing (server-sent events, or Bedrock's binary event stream) and first event with output |
//! | `server.address`, `server.port` | both | the URI the request was served from |
//! | `error.type` | both | the HTTP status of an error answer (`"429"`), a refusal's kind (`throttled`, `parked`, `circuit_open`, `bulkhead_full`, `client_limit`), `no_target_available`, `timeout`, `connect`, `reset`, `cancelled` (the caller dropped the answer), else `_OTHER` |
//! | `levee.verdict`, `levee.reason` | operation (an attempt where its layer sits above a breaker) | the classifier: `success`, `throttled`, `quota`, `availability`, …, and its reason (`openai:insufficient_quota`) |
//! | `levee.refusal`, `levee.retry_after` | operation (refusal only on attempts) | the refusal that ended it and its wait in seconds |
//! | `levee.served_by`, `levee.attempts` | operation | the target that answered and as which attempt (from the [`AttemptLayer`]s below), else how many attempts were made |
//! | `levee.fallback` | operation | whether a fallback answered, where the answer carries a [`ServedBy`](crate::failover::ServedBy) extension |
//! | `levee.target`, `levee.attempt`, `levee.shadow_probe`, `http.response.status_code` | attempt | the call |
//!
//! ```
//! use http::{Request, Response};
//! use opentelemetry::metrics::MeterProvider as _;
//! use opentelemetry::trace::TracerProvider as _;
//! use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};
//! use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};
//! use tower::{Service, ServiceBuilder, ServiceExt};
//! use tower_levee::BreakerLayer;
//! use tower_levee::otel::GenAiLayer;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), tower_levee::BoxError> {
//! let spans = InMemorySpanExporter::default();
//! let tracer = SdkTracerProvider::builder().with_simple_exporter(spans.clone()).build();
//! let exporter = InMemoryMetricExporter::default();
//! let meters = SdkMeterProvider::builder()
//!     .with_reader(PeriodicReader::builder(exporter.clone()).build())
//!     .build();
//!
//! // Stands in for a hyper or reqwest client.
//! let provider = tower::service_fn(|_req: Request<String>| async {
//!     let body = r#"{"id":"c1","model":"gpt-4o-2024-08-06","choices":[{"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":2}}"#;
//!     Ok::<_, tower_levee::BoxError>(
//!         Response::builder()
//!             .header("content-type", "application/json")
//!             .body(http_body_util::Full::new(bytes::Bytes::from(body)))?,
//!     )
//! });
//! let mut client = ServiceBuilder::new()
//!     .layer(
//!         GenAiLayer::new()
//!             .tracer(tracer.tracer("tower-levee"))
//!             .meter(&meters.meter("tower-levee")),
//!     )
//!     .layer(BreakerLayer::new())
//!     .service(provider);
//!
//! let req = Request::post("https://api.openai.com/v1/chat/completions")
//!     .extension(tower_levee::breaker::Scope::new().model("gpt-4o"))
//!     .body(String::new())?;
//! let res = client.ready().await?.call(req).await?;
//! // The operation ends with the body: read it (here, whole).
//! let _ = http_body_util::BodyExt::collect(res.into_body()).await?;
//!
//! let span = &spans.get_finished_spans()?[0];
//! assert_eq!(span.name, "chat gpt-4o");
//! meters.force_flush()?;
//! let metrics = exporter.get_finished_metrics()?;
//! let names: Vec<_> = metrics[0].scope_metrics().flat_map(|s| s.metrics()).map(|m| m.name().to_owned()).collect();
//! assert!(names.contains(&"gen_ai.client.operation.duration".to_owned()));
//! assert!(names.contains(&"gen_ai.client.token.usage".to_owned()));
//! # Ok(())
//! # }
//! ```
//!
//! [GenAI semantic conventions]: https://opentelemetry.io/docs/specs/semconv/gen-ai/gen-ai-spans/

mod body;
mod future;
mod layer;
pub mod names;
mod record;
mod service;

pub use self::body::GenAiBody;
pub use self::future::{AttemptFuture, ResponseFuture};
pub use self::layer::{AttemptLayer, GenAiLayer, SCOPE_NAME};
pub use self::service::{Attempt, GenAi};
