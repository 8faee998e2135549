//! A hyper client behind Levee's full stack, against a fake provider on
//! 127.0.0.1 that throttles once, streams, then has an outage.
//!
//! `hyper_util::client::legacy::Client` is already a
//! `Service<http::Request<B>>`: the layers go straight on it.
//!
//! Run with `cargo run -p examples --example hyper_client`.

use std::time::Duration;

use http::Request;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use levee_core::breaker::BreakerConfig;
use tower::{Service, ServiceBuilder, ServiceExt};
use tower_levee::{BoxError, BreakerLayer, BulkheadLayer, RetryBudgetLayer};

#[path = "support.rs"]
mod support;
use support::{check, fake_provider, outcome, print_event};

/// What each request must end in: a throttle waited out, a stream read
/// whole, an outage retried within budget until the breaker opens, then a
/// refusal without a call.
const EXPECTED: [&str; 4] = [
    "200 OK",
    "200 OK",
    "503 Service Unavailable (Availability after 3 attempts)",
    "refused: CircuitOpen",
];

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let addr = fake_provider().await?;

    let breaker = BreakerLayer::builder()
        .breaker(BreakerConfig::builder().threshold(3).build()?)
        .on_event(print_event)
        .build()?;
    let health = breaker.handle();
    let client = Client::builder(TokioExecutor::new()).build_http::<String>();
    let mut stack = ServiceBuilder::new()
        .timeout(Duration::from_secs(30)) // the caller's overall deadline
        .layer(RetryBudgetLayer::with_defaults()) // the one place that retries
        .layer(BulkheadLayer::named("llm", 16)) // fail fast past 16 in flight
        .layer(breaker) // breaker + throttle gate + park
        .timeout(Duration::from_secs(10)) // per attempt
        .service(client);

    let mut seen = Vec::new();
    for path in ["/throttled-once", "/stream", "/outage", "/outage"] {
        println!("POST {path}");
        let req = Request::post(format!("http://{addr}/v1/chat/completions{path}"))
            .header("authorization", "Bearer sk-example")
            .header("content-type", "application/json")
            .body(r#"{"model":"gpt-4o","messages":[]}"#.to_owned())?;
        let result = stack.ready().await?.call(req).await;
        seen.push(outcome(result).await?);
    }
    println!("health: {:?}", health.states());
    check(&seen, &EXPECTED)
}
