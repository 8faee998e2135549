//! The README's async-openai quick start, compiled in CI (it calls the
//! real OpenAI API, so CI builds it without running it).

use async_openai::types::chat::ChatCompletionRequestUserMessage as User;
use async_openai::{Client, types::chat::CreateChatCompletionRequestArgs};
use tower::ServiceBuilder;
use tower_levee::async_openai::OpenAiService;
use tower_levee::reqwest::HttpClient;
use tower_levee::{BoxError, BreakerLayer, BulkheadLayer, RetryBudgetLayer};

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let llm = ServiceBuilder::new()
        .layer(RetryBudgetLayer::with_defaults()) // replaces async-openai's own retries
        .layer(BulkheadLayer::named("openai", 64))
        .layer(BreakerLayer::new())
        .service(HttpClient::new(reqwest::Client::new()));
    let client = Client::new().with_http_service(OpenAiService::new(llm)); // OPENAI_API_KEY
    let req = CreateChatCompletionRequestArgs::default()
        .model("gpt-4o")
        .messages([User::from("Say hello").into()])
        .build()?;
    println!("{:?}", client.chat().create(req).await?.choices);
    Ok(())
}
