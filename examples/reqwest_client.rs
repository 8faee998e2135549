//! A reqwest client behind Levee's full stack, against a fake provider on
//! 127.0.0.1 that throttles once, then runs out of quota.
//!
//! `reqwest::Client` is a service of `reqwest::Request`; the layers need
//! `http::Request`s and `http::Response`s to classify. The adapter
//! `tower_levee::reqwest::HttpClient` (feature `reqwest`) bridges the two and
//! keeps the response body streaming, so error bodies are peeked and streams
//! watched as with any other client.
//!
//! Run with `cargo run -p examples --example reqwest_client`.

use std::time::Duration;

use http::Request;
use tower::{Service, ServiceBuilder, ServiceExt};
use tower_levee::reqwest::HttpClient;
use tower_levee::{BoxError, BreakerLayer, BulkheadLayer, RetryBudgetLayer};

#[path = "support.rs"]
mod support;
use support::{check, fake_provider, outcome, print_event};

/// What each request must end in: a throttle waited out, a success, a spend
/// cap answered once (never retried), then a refusal without a call.
const EXPECTED: [&str; 4] = [
    "200 OK",
    "200 OK",
    "429 Too Many Requests (Quota after 1 attempts)",
    "refused: Parked",
];

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let addr = fake_provider().await?;

    let breaker = BreakerLayer::builder().on_event(print_event).build()?;
    let health = breaker.handle();
    // Your reqwest client, with its own pool and TLS settings (this one
    // ignores proxies from the environment: the provider is on loopback).
    let client = reqwest::Client::builder().no_proxy().build()?;
    let mut stack = ServiceBuilder::new()
        .timeout(Duration::from_secs(30)) // the caller's overall deadline
        .layer(RetryBudgetLayer::with_defaults()) // the one place that retries
        .layer(BulkheadLayer::named("llm", 16)) // fail fast past 16 in flight
        .layer(breaker) // breaker + throttle gate + park
        .timeout(Duration::from_secs(10)) // per attempt
        .service(HttpClient::new(client));

    let mut seen = Vec::new();
    for path in ["/throttled-once", "/ok", "/spend-cap", "/spend-cap"] {
        println!("POST {path}");
        let req = Request::post(format!("http://{addr}/v1/chat/completions{path}"))
            .header("authorization", "Bearer sk-example")
            .header("content-type", "application/json")
            .body(r#"{"model":"gpt-4o","messages":[]}"#.to_owned())?;
        // The adapter takes any body reqwest accepts: name the one used here.
        let result = ServiceExt::<Request<String>>::ready(&mut stack)
            .await?
            .call(req)
            .await;
        seen.push(outcome(result).await?);
    }
    println!("health: {:?}", health.states());
    check(&seen, &EXPECTED)
}
