//! async-openai's real client over Levee's stack, against an
//! OpenAI-compatible fake on 127.0.0.1: a completion, a stream read whole,
//! a 429 that gates its model (the next call is refused unsent), streams
//! that fail in-band counted by the breaker, and a spend cap that parks the
//! account. Checks every outcome and exits non-zero if one differs.
//!
//! Run: `cargo run -p examples --example async_openai`.

mod support;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use async_openai::Client;
use async_openai::config::OpenAIConfig;
use async_openai::error::OpenAIError;
use async_openai::types::chat::{
    ChatCompletionRequestUserMessage, CreateChatCompletionRequest, CreateChatCompletionRequestArgs,
};
use futures_util::StreamExt;
use support::fake_openai;
use tower::ServiceBuilder;
use tower_levee::async_openai::OpenAiService;
use tower_levee::reqwest::HttpClient;
use tower_levee::{
    BoxError, BreakerLayer, BulkheadLayer, CircuitOpen, Parked, RetryBudget, RetryBudgetLayer,
    Throttled,
};

fn chat(model: &str, stream: bool) -> Result<CreateChatCompletionRequest, OpenAIError> {
    CreateChatCompletionRequestArgs::default()
        .model(model)
        .stream(stream)
        .messages([ChatCompletionRequestUserMessage::from("Say hello").into()])
        .build()
}

/// What a Levee refusal inside an `OpenAIError` is, if it is one.
fn refusal(err: &OpenAIError) -> Option<&'static str> {
    match err {
        OpenAIError::Boxed(e) if e.is::<Throttled>() => Some("Throttled"),
        OpenAIError::Boxed(e) if e.is::<Parked>() => Some("Parked"),
        OpenAIError::Boxed(e) if e.is::<CircuitOpen>() => Some("CircuitOpen"),
        _ => None,
    }
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let (addr, answered) = fake_openai().await?;
    let breaker = BreakerLayer::builder()
        .on_event(support::print_event)
        .build()?;
    let handle = breaker.handle();
    let llm = ServiceBuilder::new()
        .timeout(Duration::from_secs(30))
        // Waits out a throttle of up to 5 s; a longer one goes back to the
        // caller at once, and the gate refuses what follows.
        .layer(
            RetryBudgetLayer::builder(Arc::new(RetryBudget::default()))
                .max_wait(Duration::from_secs(5))
                .build()?,
        )
        .layer(BulkheadLayer::named("openai", 16))
        .layer(breaker)
        .timeout(Duration::from_secs(10))
        .service(HttpClient::new(reqwest::Client::new()));
    let config = OpenAIConfig::new()
        .with_api_base(format!("http://{addr}/v1"))
        .with_api_key("sk-example");
    let client = Client::with_config(config).with_http_service(OpenAiService::new(llm));

    println!("a completion:");
    let res = client.chat().create(chat("gpt-4o", false)?).await?;
    let text = res.choices[0].message.content.clone().unwrap_or_default();
    println!("  -> {text:?}");
    if text != "Hello there" {
        return Err(format!("unexpected completion {text:?}").into());
    }

    println!("a stream, read whole:");
    let mut stream = client.chat().create_stream(chat("gpt-4o", true)?).await?;
    let mut streamed = String::new();
    while let Some(chunk) = stream.next().await {
        for choice in chunk?.choices {
            streamed += choice.delta.content.as_deref().unwrap_or("");
        }
    }
    println!("  -> {streamed:?}");
    if streamed != text {
        return Err(format!("the stream said {streamed:?}").into());
    }

    println!("a 429 with a 20 s wait gates gpt-4o-busy:");
    let before = answered.load(Ordering::SeqCst);
    let first = client
        .chat()
        .create(chat("gpt-4o-busy", false)?)
        .await
        .unwrap_err();
    println!("  -> {first}");
    let second = client
        .chat()
        .create(chat("gpt-4o-busy", false)?)
        .await
        .unwrap_err();
    println!("  -> {second}");
    let sent = answered.load(Ordering::SeqCst) - before;
    if !matches!(first, OpenAIError::ApiError(_))
        || refusal(&second) != Some("Throttled")
        || sent != 1
    {
        return Err(format!("expected the 429 then a refusal unsent, {sent} sent").into());
    }
    // Other models of the account are not gated.
    client.chat().create(chat("gpt-4o", false)?).await?;

    println!("streams failing in-band before any content open the breaker:");
    for _ in 0..5 {
        if let Ok(mut s) = client
            .chat()
            .create_stream(chat("gpt-4o-broken", true)?)
            .await
        {
            while s.next().await.is_some() {}
        }
    }
    // The account is the URL's authority here (a `Scope` extension names it otherwise).
    let account = addr.to_string();
    let status = handle.breaker_status(&account).map(|s| s.as_str());
    println!("  -> breaker {status:?}");
    if status != Some("open") {
        return Err("the breaker did not open".into());
    }
    handle.close(&account);

    println!("an exhausted quota parks the account:");
    let _ = client.chat().create(chat("gpt-4o-capped", false)?).await;
    let parked = client
        .chat()
        .create(chat("gpt-4o", false)?)
        .await
        .unwrap_err();
    println!("  -> {parked}");
    if refusal(&parked) != Some("Parked") {
        return Err("not parked".into());
    }
    println!("ok");
    Ok(())
}
