//! Prometheus: `/metrics` served by axum from `metrics-exporter-prometheus`,
//! fed by Levee's `MetricsReporter`, and the Grafana dashboard in
//! `examples/grafana/levee-dashboard.json` that reads it.
//!
//! ```text
//! requests → RetryBudget → Failover ─┬─ Bulkhead → Breaker → "openai-org-a" (throttles)
//!                                    └─ Bulkhead → Breaker → "anthropic"
//! GET /metrics   reporter.record(), then the exporter's text
//! ```
//!
//! The reporter reads the layers' own counters when `/metrics` is scraped:
//! no request touches a recorder. Import the dashboard into Grafana and
//! point its `datasource` variable at the Prometheus that scrapes this.
//!
//! Run with `cargo run -p examples --example prometheus`: it sends a few
//! requests, scrapes its own `/metrics` over HTTP, checks that every metric
//! the dashboard queries is there, prints the scrape and exits. With
//! `-- --serve` it keeps serving on 127.0.0.1:9898 with a request a second.

use std::collections::BTreeSet;
use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use metrics_exporter_prometheus::PrometheusBuilder;
use metrics_util::MetricKindMask;
use tokio::net::TcpListener;
use tower::{BoxError, Service, ServiceBuilder, ServiceExt};
use tower_levee::failover::{Failover, Target};
use tower_levee::metrics::{MetricsReporter, transition_counter};
use tower_levee::{BreakerLayer, Bulkheads, RetryBudget, RetryBudgetLayer};

const DASHBOARD: &str = include_str!("grafana/levee-dashboard.json");

/// A provider that answers every `every`-th call with a 429 (`retry-after:
/// 2`), the others with a 200 that reports its request allowance.
fn provider(
    every: u64,
) -> impl Service<Request<String>, Response = Response<String>, Error = Infallible, Future: Send>
+ Clone
+ Send
+ Sync
+ 'static {
    let calls = Arc::new(AtomicU64::new(0));
    tower::service_fn(move |_req: Request<String>| {
        let n = calls.fetch_add(1, Ordering::Relaxed) + 1;
        let res = if every > 0 && n.is_multiple_of(every) {
            Response::builder()
                .status(StatusCode::TOO_MANY_REQUESTS)
                .header("retry-after", "2")
                .body(r#"{"error":{"code":"rate_limit_exceeded"}}"#.to_owned())
        } else {
            Response::builder()
                .header("x-ratelimit-limit-requests", "600")
                .header("x-ratelimit-remaining-requests", "200")
                .header("x-ratelimit-reset-requests", "40s")
                .body(r#"{"choices":[]}"#.to_owned())
        };
        std::future::ready(Ok::<_, Infallible>(res.expect("a valid response")))
    })
}

/// Every metric name the dashboard's queries use.
fn dashboard_metrics() -> Result<BTreeSet<String>, BoxError> {
    let dashboard: serde_json::Value = serde_json::from_str(DASHBOARD)?;
    let mut names = BTreeSet::new();
    let panels = dashboard["panels"].as_array().ok_or("no panels")?;
    for target in panels
        .iter()
        .flat_map(|p| p["targets"].as_array())
        .flatten()
    {
        let mut expr = target["expr"].as_str().ok_or("a target without expr")?;
        while let Some(at) = expr.find("levee_") {
            let len = expr[at..]
                .find(|c: char| !(c.is_ascii_lowercase() || c == '_'))
                .unwrap_or(expr.len() - at);
            names.insert(expr[at..at + len].to_owned());
            expr = &expr[at + len..];
        }
    }
    Ok(names)
}

/// The metric names in a Prometheus text scrape.
fn scraped_metrics(scrape: &str) -> BTreeSet<String> {
    scrape
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| l.split(['{', ' ']).next())
        .map(str::to_owned)
        .collect()
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let serve = std::env::args().any(|a| a == "--serve");

    // The exporter: series a reporter stops publishing (evicted scopes)
    // leave the scrape after five minutes.
    let prometheus = PrometheusBuilder::new()
        .idle_timeout(MetricKindMask::ALL, Some(Duration::from_secs(300)))
        .install_recorder()?;

    // The stack, each target with its own breaker (transitions counted as
    // they happen) and a bulkhead from one registry.
    let bulkheads = Bulkheads::new();
    let target = |name: &'static str, every| -> Result<_, BoxError> {
        Ok(Target::new(name, provider(every))
            .breaker(
                BreakerLayer::builder()
                    .on_event(transition_counter(name))
                    .build()?,
            )
            .bulkhead(bulkheads.compartment(name, 32)))
    };
    let failover = Failover::builder()
        .target(target("openai-org-a", 3)?)
        .target(target("anthropic", 0)?)
        .build()?;
    let budget = Arc::new(RetryBudget::default());
    let reporter = MetricsReporter::new()
        .failover("llm", failover.handle())
        .bulkheads(bulkheads.clone())
        .budget("llm", budget.clone());
    let mut llm = ServiceBuilder::new()
        .layer(RetryBudgetLayer::new(budget))
        .service(failover);

    // `/metrics`: publish, then render.
    let app = Router::new().route(
        "/metrics",
        get(move || {
            let (reporter, prometheus) = (reporter.clone(), prometheus.clone());
            async move {
                reporter.record();
                prometheus.render()
            }
        }),
    );
    let addr = if serve {
        "127.0.0.1:9898"
    } else {
        "127.0.0.1:0"
    };
    let listener = TcpListener::bind(addr).await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, app).await });

    let request = || {
        Request::post("https://api.example.com/v1/chat/completions")
            .body(r#"{"model":"gpt-4o","messages":[]}"#.to_owned())
    };
    for _ in 0..12 {
        llm.ready().await?.call(request()?).await?;
    }

    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let res = client
        .get(format!("http://{addr}/metrics").parse()?)
        .await?;
    let scrape = String::from_utf8(res.into_body().collect().await?.to_bytes().to_vec())?;
    println!("{scrape}");
    let missing: Vec<_> = dashboard_metrics()?
        .difference(&scraped_metrics(&scrape))
        .cloned()
        .collect();
    if !missing.is_empty() {
        return Err(format!("the dashboard queries metrics the scrape lacks: {missing:?}").into());
    }
    println!("every metric the dashboard queries is in the scrape");

    if serve {
        println!("serving http://{addr}/metrics, a request a second; Ctrl-C to stop");
        loop {
            tokio::time::sleep(Duration::from_secs(1)).await;
            llm.ready().await?.call(request()?).await?;
        }
    }
    println!("ok");
    Ok(())
}
