//! `[otel]`: the SDK's tracer and meter providers, exporting over
//! OTLP/HTTP from their own threads, and the GenAI layer over them.

use std::collections::HashMap;

use opentelemetry::metrics::MeterProvider as _;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{
    MetricExporter, Protocol, SpanExporter, WithExportConfig, WithHttpConfig,
};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::metrics::{PeriodicReader, SdkMeterProvider};
use opentelemetry_sdk::trace::SdkTracerProvider;
use tower_levee::BoxError;
use tower_levee::otel::{GenAiLayer, SCOPE_NAME};

use crate::config::{OtelConfig, OtelProtocol};

/// The providers `[otel]` configured.
pub(crate) struct Telemetry {
    tracer: SdkTracerProvider,
    meters: SdkMeterProvider,
    /// What they were built from: a reload that changes it needs a restart.
    pub(crate) config: OtelConfig,
}

impl Telemetry {
    pub(crate) fn new(config: &OtelConfig) -> Result<Self, BoxError> {
        let base = config.endpoint.to_string();
        let base = base.trim_end_matches('/');
        let protocol = match config.protocol {
            OtelProtocol::HttpProtobuf => Protocol::HttpBinary,
            OtelProtocol::HttpJson => Protocol::HttpJson,
        };
        let headers: HashMap<String, String> = config
            .headers
            .iter()
            .map(|(name, secret)| (name.as_str().to_owned(), secret.expose().to_owned()))
            .collect();
        let resource = Resource::builder()
            .with_service_name(config.service_name.clone())
            .build();
        let spans = SpanExporter::builder()
            .with_http()
            .with_protocol(protocol)
            .with_endpoint(format!("{base}/v1/traces"))
            .with_headers(headers.clone())
            .build()?;
        let tracer = SdkTracerProvider::builder()
            .with_resource(resource.clone())
            .with_batch_exporter(spans)
            .build();
        let metrics = MetricExporter::builder()
            .with_http()
            .with_protocol(protocol)
            .with_endpoint(format!("{base}/v1/metrics"))
            .with_headers(headers)
            .build()?;
        let meters = SdkMeterProvider::builder()
            .with_resource(resource)
            .with_reader(
                PeriodicReader::builder(metrics)
                    .with_interval(config.metric_interval)
                    .build(),
            )
            .build();
        Ok(Telemetry {
            tracer,
            meters,
            config: config.clone(),
        })
    }

    /// The layer recording every request through these providers.
    pub(crate) fn layer(&self) -> GenAiLayer {
        GenAiLayer::new()
            .tracer(self.tracer.tracer(SCOPE_NAME))
            .meter(&self.meters.meter(SCOPE_NAME))
    }

    /// Exports what is left and stops the exporters' threads. Blocks: call
    /// it off the runtime's threads.
    pub(crate) fn shutdown(&self) {
        if let Err(e) = self.tracer.shutdown() {
            tracing::warn!(target: "levee_gateway", error = %e, "otel: spans not all exported");
        }
        if let Err(e) = self.meters.shutdown() {
            tracing::warn!(target: "levee_gateway", error = %e, "otel: metrics not all exported");
        }
    }
}

impl std::fmt::Debug for Telemetry {
    // The exporters hold the headers' keys: only the endpoint is shown.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Telemetry")
            .field("endpoint", &self.config.endpoint)
            .field("protocol", &self.config.protocol)
            .finish_non_exhaustive()
    }
}
