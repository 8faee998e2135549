//! The README's reqwest quick start, compiled in CI (it calls the real
//! OpenAI API, so CI builds it without running it).

use std::time::Duration;
use tower::{ServiceBuilder, ServiceExt};
use tower_levee::reqwest::HttpClient;
use tower_levee::{BoxError, BreakerLayer, BulkheadLayer, RetryBudgetLayer};

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let llm = ServiceBuilder::new()
        .timeout(Duration::from_secs(120))
        .layer(RetryBudgetLayer::with_defaults())
        .layer(BulkheadLayer::named("llm", 64))
        .layer(BreakerLayer::new())
        .timeout(Duration::from_secs(60))
        .service(HttpClient::new(reqwest::Client::new()));
    let req = http::Request::post("https://api.openai.com/v1/chat/completions")
        .header("authorization", "Bearer sk-...")
        .body(r#"{"model":"gpt-4o","messages":[]}"#.to_owned())?;
    println!("{}", llm.oneshot(req).await?.status()); // clone `llm` per call to reuse it
    Ok(())
}
