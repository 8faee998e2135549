//! async-openai's real client over a Levee stack (paused time, a scripted
//! upstream): a completion and a stream pass through unchanged, a 429
//! gates its model and the next call is refused unsent, `insufficient_quota`
//! parks, in-band stream errors count for the breaker, and no second retry
//! loop hides behind the client.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use async_openai::Client;
use async_openai::config::OpenAIConfig;
use async_openai::error::OpenAIError;
use async_openai::types::chat::{
    ChatCompletionRequestUserMessageArgs, CreateChatCompletionRequest,
    CreateChatCompletionRequestArgs,
};
use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Full;
use tower::ServiceBuilder;
use tower_levee::async_openai::OpenAiService;
use tower_levee::breaker::{BreakerHandle, BreakerLayer, CircuitOpen, Parked, Throttled};

const COMPLETION: &str = r#"{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}"#;
const CHUNKS: &str = "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"gpt-4o\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},\"finish_reason\":null}]}\n\ndata: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"gpt-4o\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n";
const IN_BAND_ERROR: &str = "data: {\"error\":{\"message\":\"The server had an error while processing your request.\",\"type\":\"server_error\"}}\n\n";

/// Status, content type and body of one scripted answer.
type Answer = (u16, &'static str, &'static str);

/// An upstream answering from a script (the last answer repeats), counting
/// and recording what reaches it.
#[derive(Clone, Default)]
struct Upstream {
    script: Arc<Mutex<VecDeque<Answer>>>,
    calls: Arc<AtomicUsize>,
    bodies: Arc<Mutex<Vec<Bytes>>>,
}

impl Upstream {
    fn answer(&self, answers: &[Answer]) {
        *self.script.lock().unwrap() = answers.iter().copied().collect();
    }
    fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

impl tower::Service<Request<Bytes>> for Upstream {
    type Response = Response<Full<Bytes>>;
    type Error = Infallible;
    type Future = std::future::Ready<Result<Self::Response, Infallible>>;
    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Infallible>> {
        std::task::Poll::Ready(Ok(()))
    }
    fn call(&mut self, req: Request<Bytes>) -> Self::Future {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.bodies.lock().unwrap().push(req.into_body());
        let mut script = self.script.lock().unwrap();
        let (status, content_type, body) = if script.len() > 1 {
            script.pop_front().unwrap()
        } else {
            script
                .front()
                .copied()
                .unwrap_or((200, "application/json", COMPLETION))
        };
        let mut res = Response::builder()
            .status(status)
            .header("content-type", content_type);
        if status == 429 {
            res = res.header("retry-after", "20");
        }
        std::future::ready(Ok(res
            .body(Full::new(Bytes::from_static(body.as_bytes())))
            .unwrap()))
    }
}

fn client(upstream: &Upstream) -> (Client<OpenAIConfig>, BreakerHandle) {
    let breaker = BreakerLayer::new();
    let handle = breaker.handle();
    let stack = ServiceBuilder::new()
        .layer(breaker)
        .service(upstream.clone());
    let config = OpenAIConfig::new()
        .with_api_base("https://api.openai.com/v1")
        .with_api_key("sk-test");
    let client = Client::with_config(config).with_http_service(OpenAiService::new(stack));
    (client, handle)
}

fn chat(stream: bool) -> CreateChatCompletionRequest {
    CreateChatCompletionRequestArgs::default()
        .model("gpt-4o")
        .stream(stream)
        .messages([ChatCompletionRequestUserMessageArgs::default()
            .content("hello")
            .build()
            .unwrap()
            .into()])
        .build()
        .unwrap()
}

fn levee_error<T: std::error::Error + 'static>(err: &OpenAIError) -> bool {
    matches!(err, OpenAIError::Boxed(e) if e.is::<T>())
}

#[tokio::test(start_paused = true)]
async fn a_completion_passes_through_and_the_model_is_read_from_the_body() {
    let upstream = Upstream::default();
    let (client, _) = client(&upstream);
    let res = client.chat().create(chat(false)).await.unwrap();
    assert_eq!(res.choices[0].message.content.as_deref(), Some("hi"));
    assert_eq!(upstream.calls(), 1);
    let sent = upstream.bodies.lock().unwrap()[0].clone();
    assert!(
        std::str::from_utf8(&sent)
            .unwrap()
            .contains(r#""model":"gpt-4o""#)
    );
}

#[tokio::test(start_paused = true)]
async fn a_429_gates_the_model_and_the_next_call_is_refused_unsent_with_no_hidden_retry() {
    let upstream = Upstream::default();
    upstream.answer(&[(429, "application/json", r#"{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}"#)]);
    let (client, handle) = client(&upstream);
    let err = client.chat().create(chat(false)).await.unwrap_err();
    assert!(
        matches!(err, OpenAIError::ApiError(_)),
        "the provider's answer: {err}"
    );
    assert_eq!(upstream.calls(), 1, "async-openai's own retry loop is gone");
    let err = client.chat().create(chat(false)).await.unwrap_err();
    assert!(levee_error::<Throttled>(&err), "{err}");
    assert_eq!(upstream.calls(), 1, "refused unsent");
    let gated = handle
        .states()
        .into_iter()
        .find(|s| s.mechanism == "gate")
        .unwrap();
    assert_eq!(gated.scope, "api.openai.com/gpt-4o");
    tokio::time::advance(std::time::Duration::from_secs(20)).await;
    upstream.answer(&[(200, "application/json", COMPLETION)]);
    client.chat().create(chat(false)).await.unwrap();
    assert_eq!(upstream.calls(), 2);
}

#[tokio::test(start_paused = true)]
async fn insufficient_quota_parks_the_account() {
    let upstream = Upstream::default();
    upstream.answer(&[(429, "application/json", r#"{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}}"#)]);
    let (client, _) = client(&upstream);
    client.chat().create(chat(false)).await.unwrap_err();
    let err = client.chat().create(chat(false)).await.unwrap_err();
    assert!(levee_error::<Parked>(&err), "{err}");
    assert_eq!(upstream.calls(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_stream_reaches_the_caller_whole_and_in_band_errors_count_for_the_breaker() {
    use futures_util::StreamExt;
    let upstream = Upstream::default();
    upstream.answer(&[(200, "text/event-stream", CHUNKS)]);
    let (client, handle) = client(&upstream);
    let mut stream = client.chat().create_stream(chat(true)).await.unwrap();
    let mut text = String::new();
    while let Some(chunk) = stream.next().await {
        for choice in chunk.unwrap().choices {
            text += choice.delta.content.as_deref().unwrap_or("");
        }
    }
    assert_eq!(text, "hi");

    // Streams that fail in-band before any content: five open the breaker.
    upstream.answer(&[(200, "text/event-stream", IN_BAND_ERROR)]);
    for _ in 0..5 {
        if let Ok(mut s) = client.chat().create_stream(chat(true)).await {
            while s.next().await.is_some() {}
        }
    }
    assert_eq!(
        handle.breaker_status("api.openai.com").unwrap().as_str(),
        "open"
    );
    let calls = upstream.calls();
    // Refused at once, or as the stream's first item.
    let refused = match client.chat().create_stream(chat(true)).await {
        Err(e) => levee_error::<CircuitOpen>(&e),
        Ok(mut s) => matches!(s.next().await, Some(Err(e)) if levee_error::<CircuitOpen>(&e)),
    };
    assert!(refused, "refused by the open breaker");
    assert_eq!(upstream.calls(), calls);
}
