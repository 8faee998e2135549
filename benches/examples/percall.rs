//! Instructions per call, for comparing two trees without the machine's
//! noise: runs `N` calls of one case, so that `cachegrind` over two `N`s
//! gives the per-call difference (`benches/percall.sh` does it for every
//! case). Cases: the peer harness's inner service and URI.
//!
//! `cargo run --release -p benches --example percall -- CASE N` (`N` = 0
//! prints the size of the case's response future).

use std::convert::Infallible;

use bytes::Bytes;
use http::{Request, Response, Uri};
use http_body_util::Empty;
use tower::{Service, ServiceBuilder, ServiceExt};
use tower_levee::breaker::BreakerLayer;
use tower_levee::bulkhead::BulkheadLayer;
use tower_levee::failover::{Failover, Target};
use tower_levee::otel::GenAiLayer;
use tower_levee::retry::RetryBudgetLayer;

#[path = "../benches/common/failsafe.rs"]
#[allow(unreachable_pub)]
mod failsafe_svc;
use failsafe_svc::Failsafe;

#[path = "../benches/common/first_target.rs"]
#[allow(unreachable_pub)]
mod first_target;
use first_target::FirstTarget;

#[path = "../benches/common/kept_copy.rs"]
#[allow(unreachable_pub)]
mod kept_copy;
use kept_copy::KeptCopy;

#[path = "../benches/common/scope_floor.rs"]
#[allow(unreachable_pub)]
mod scope_floor;
use scope_floor::ScopeFloor;

type Req = Request<Empty<Bytes>>;

fn inner() -> impl Service<Req, Response = Response<Empty<Bytes>>, Error = Infallible, Future: Send>
+ Clone
+ Send
+ Sync
+ 'static {
    tower::service_fn(|_req: Req| async { Ok::<_, Infallible>(Response::new(Empty::new())) })
}

static URI: std::sync::LazyLock<Uri> =
    std::sync::LazyLock::new(|| Uri::from_static("https://api.openai.com/v1/chat/completions"));

fn request() -> Req {
    let mut req = Request::new(Empty::new());
    *req.uri_mut() = URI.clone();
    req
}

async fn run<S>(mut svc: S, n: u64)
where
    S: Service<Req>,
    S::Error: std::fmt::Debug,
{
    if n == 0 {
        let fut = svc.ready().await.unwrap().call(request());
        println!("response future: {} bytes", std::mem::size_of_val(&fut));
        return;
    }
    for _ in 0..n {
        let res = svc.ready().await.unwrap().call(request()).await;
        std::hint::black_box(res.is_ok());
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let case = args.next().expect("CASE");
    let n: u64 = args.next().expect("N").parse().expect("N");
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(async move {
        match case.as_str() {
            "bare" => run(inner(), n).await,
            "breaker" => run(BreakerLayer::new().layer_service(inner()), n).await,
            "failsafe" => run(Failsafe::consecutive5(inner()), n).await,
            // The floor `breaker` is measured against beside failsafe: the
            // least a breaker keyed by the provider's scope does.
            "scope_floor" => run(ScopeFloor::new(inner()), n).await,
            "refusing" => {
                let config = tower_levee::core::breaker::BreakerConfig::builder()
                    .cooldown(tower_levee::core::breaker::Cooldown::fixed(
                        std::time::Duration::from_secs(3600),
                    ))
                    .build()
                    .unwrap();
                let layer = BreakerLayer::builder().breaker(config).build().unwrap();
                layer.handle().open("api.openai.com");
                run(layer.layer_service(inner()), n).await
            }
            "throttled" | "gated_elsewhere" => {
                // A closed throttle gate on the request's quota scope, or
                // on another scope while this one's calls go through.
                let layer = BreakerLayer::new();
                let scope = match case.as_str() {
                    "throttled" => "api.openai.com",
                    _ => "api.anthropic.com",
                };
                layer
                    .handle()
                    .adopt(tower_levee::breaker::FleetUpdate::Gated {
                        scope,
                        wait: std::time::Duration::from_secs(3600),
                        reason: "status:429",
                    });
                run(layer.layer_service(inner()), n).await
            }
            "rolling" => {
                // The peer harness's `levee_breaker_rolling`: failsafe's default window.
                let config = tower_levee::core::breaker::BreakerConfig::builder()
                    .rolling(std::time::Duration::from_secs(30), 5, 0.2)
                    .build()
                    .unwrap();
                let layer = BreakerLayer::builder().breaker(config).build().unwrap();
                run(layer.layer_service(inner()), n).await
            }
            "bulkhead" => run(BulkheadLayer::named("llm", 1024).layer_service(inner()), n).await,
            "retry" => run(RetryBudgetLayer::with_defaults().layer_service(inner()), n).await,
            "stack" => {
                let svc = ServiceBuilder::new()
                    .layer(RetryBudgetLayer::with_defaults())
                    .layer(BulkheadLayer::named("llm", 64))
                    .layer(BreakerLayer::new())
                    .service(inner());
                run(svc, n).await
            }
            // The GenAI layer over the breaker: with nothing installed (no
            // subscriber, the global no-op meter), and with the SDK's
            // tracer (through tracing-opentelemetry) and meter behind it.
            "genai_disabled" => {
                let svc = ServiceBuilder::new()
                    .layer(GenAiLayer::disabled())
                    .layer(BreakerLayer::new())
                    .service(inner());
                run(svc, n).await
            }
            "genai_off" => {
                let svc = ServiceBuilder::new()
                    .layer(GenAiLayer::new())
                    .layer(BreakerLayer::new())
                    .service(inner());
                run(svc, n).await
            }
            "genai_sdk" => {
                use opentelemetry::metrics::MeterProvider as _;
                use opentelemetry::trace::TracerProvider as _;
                let tracer = opentelemetry_sdk::trace::SdkTracerProvider::builder().build();
                let meters = sdk_meters();
                let svc = ServiceBuilder::new()
                    .layer(
                        GenAiLayer::new()
                            .tracer(tracer.tracer("tower-levee"))
                            .meter(&meters.meter("tower-levee")),
                    )
                    .layer(BreakerLayer::new())
                    .service(inner());
                run(svc, n).await
            }
            // The road not taken: the same layer's span through tracing and
            // tracing-opentelemetry, measured when the layer took it (see
            // the otel module's docs); this case keeps the bridge's own
            // cost for a span of the same attributes.
            "tracing_bridge_span" => {
                use opentelemetry::trace::TracerProvider as _;
                use tracing_subscriber::layer::SubscriberExt;
                let tracer = opentelemetry_sdk::trace::SdkTracerProvider::builder().build();
                let subscriber = tracing_subscriber::registry()
                    .with(tracing_opentelemetry::layer().with_tracer(tracer.tracer("percall")));
                let _guard = tracing::subscriber::set_default(subscriber);
                let mut breaker = BreakerLayer::new().layer_service(inner());
                for _ in 0..n {
                    let span = tracing::info_span!(
                        "gen_ai",
                        otel.name = "chat gpt-4o",
                        otel.kind = "client",
                        gen_ai.operation.name = "chat",
                        gen_ai.request.model = "gpt-4o",
                        gen_ai.provider.name = tracing::field::Empty,
                        server.address = tracing::field::Empty,
                        server.port = tracing::field::Empty,
                        levee.verdict = tracing::field::Empty,
                    );
                    let res = breaker.ready().await.unwrap().call(request()).await;
                    std::hint::black_box(res.is_ok());
                    span.record("gen_ai.provider.name", "openai");
                    span.record("server.address", "api.openai.com");
                    span.record("server.port", 443_i64);
                    span.record("levee.verdict", "success");
                    drop(span);
                }
            }
            // The SDK's meter alone, no tracer: `genai_sdk` less this is
            // what the spans cost.
            "genai_meter" => {
                use opentelemetry::metrics::MeterProvider as _;
                let meters = sdk_meters();
                let svc = ServiceBuilder::new()
                    .layer(GenAiLayer::new().meter(&meters.meter("tower-levee")))
                    .layer(BreakerLayer::new())
                    .service(inner());
                run(svc, n).await
            }
            // The same span straight through the OpenTelemetry API (the
            // SDK's tracer, no tracing), over the breaker: what the other
            // road would cost.
            "otel_api_span" => {
                use opentelemetry::trace::{Span as _, SpanKind, Tracer as _, TracerProvider as _};
                use opentelemetry::{KeyValue, StringValue, Value};
                let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder().build();
                let tracer = provider.tracer("percall");
                let mut breaker = BreakerLayer::new().layer_service(inner());
                for _ in 0..n {
                    let mut span = tracer
                        .span_builder("chat gpt-4o")
                        .with_kind(SpanKind::Client)
                        .with_attributes([
                            KeyValue::new("gen_ai.operation.name", "chat"),
                            KeyValue::new("gen_ai.request.model", "gpt-4o"),
                        ])
                        .start(&tracer);
                    let res = breaker.ready().await.unwrap().call(request()).await;
                    std::hint::black_box(res.is_ok());
                    span.set_attributes([
                        KeyValue::new("gen_ai.provider.name", "openai"),
                        KeyValue::new("server.address", "api.openai.com"),
                        KeyValue::new("server.port", 443_i64),
                        KeyValue::new("gen_ai.request.stream", false),
                        KeyValue::new("levee.verdict", "success"),
                        KeyValue::new(
                            "gen_ai.response.finish_reasons",
                            Value::Array(vec![StringValue::from("stop")].into()),
                        ),
                    ]);
                    span.end();
                }
            }
            "failover1" | "failover2" => {
                let mut b = Failover::builder().target(Target::new("openai", inner()));
                if case == "failover2" {
                    b = b.target(Target::new("anthropic", inner()));
                }
                run(b.build().unwrap(), n).await
            }
            // The floor `failover1` is measured against: the breaker behind
            // the least a router that may move on does.
            "first_target" => {
                run(
                    FirstTarget::new(BreakerLayer::new().layer_service(inner())),
                    n,
                )
                .await
            }
            // The same floor without the handle each call clones: what
            // the handle costs.
            "first_target_without_handle" => {
                run(
                    FirstTarget::without_handle(BreakerLayer::new().layer_service(inner())),
                    n,
                )
                .await
            }
            // The floor `failover2` is measured against: the same, with the
            // copy of the request any target left after the first needs.
            "first_target_kept" => {
                run(
                    FirstTarget::new(KeptCopy::new(BreakerLayer::new().layer_service(inner()))),
                    n,
                )
                .await
            }
            "failover_gated" => {
                // Two accounts, the first throttled for the whole run: every
                // request passes over it (a peek) and is served by the second.
                let failover = Failover::builder()
                    .target(Target::new("primary", inner()))
                    .target(Target::new("secondary", inner()))
                    .build()
                    .unwrap();
                let handle = failover.handle();
                let primary = handle.breaker("primary").expect("target");
                primary.adopt(tower_levee::breaker::FleetUpdate::Gated {
                    scope: "api.openai.com",
                    wait: std::time::Duration::from_secs(3600),
                    reason: "status:429",
                });
                run(failover, n).await
            }
            other => panic!("unknown case {other}"),
        }
    });
}

/// The SDK's meter provider, its metrics kept in memory (no export).
fn sdk_meters() -> opentelemetry_sdk::metrics::SdkMeterProvider {
    opentelemetry_sdk::metrics::SdkMeterProvider::builder()
        .with_reader(
            opentelemetry_sdk::metrics::PeriodicReader::builder(
                opentelemetry_sdk::metrics::InMemoryMetricExporter::default(),
            )
            .build(),
        )
        .build()
}

/// `layer.layer(svc)` with the layer first, for one-line cases.
trait LayerService<S>: tower::Layer<S> + Sized {
    fn layer_service(self, svc: S) -> Self::Service {
        self.layer(svc)
    }
}

impl<L: tower::Layer<S>, S> LayerService<S> for L {}
