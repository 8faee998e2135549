//! The README's hyper quick start, compiled in CI (it calls a provider on
//! localhost:8080, so CI builds it without running it).

use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use std::time::Duration;
use tower::{ServiceBuilder, ServiceExt};
use tower_levee::{BoxError, BreakerLayer, BulkheadLayer, RetryBudgetLayer};

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let client = Client::builder(TokioExecutor::new()).build_http::<String>();
    let llm = ServiceBuilder::new()
        .timeout(Duration::from_secs(120)) // the caller's overall deadline
        .layer(RetryBudgetLayer::with_defaults()) // the one place that retries
        .layer(BulkheadLayer::named("llm", 64)) // fail fast past 64 in flight
        .layer(BreakerLayer::new()) // breaker + throttle gate + park
        .timeout(Duration::from_secs(60)) // per attempt
        .service(client);
    let req = http::Request::post("http://localhost:8080/v1/chat/completions")
        .header("authorization", "Bearer sk-...")
        .body(r#"{"model":"gpt-4o","messages":[]}"#.to_owned())?;
    println!("{}", llm.oneshot(req).await?.status()); // clone `llm` per call to reuse it
    Ok(())
}
