//! A rig agent sending through a Levee stack (`tower_levee::rig`), against
//! a fake OpenAI-shaped provider on 127.0.0.1 with two accounts, a primary
//! and a fallback.
//!
//! The stack is the retry budget over a failover of the two accounts, each
//! behind its own breaker, over hyper: every call the agent makes, plain or
//! streamed, goes through all of it. rig retries nothing itself, and the
//! fake counts every call, so the example proves the agent made only the
//! calls Levee decided:
//!
//! 1. A prompt while the primary throttles (`429`, a 100-ms hint): Levee
//!    closes the primary's gate and the fallback serves. Two calls.
//! 2. A streamed prompt whose primary stream fails before its first token
//!    (an in-band error event): Levee holds a stream until its first
//!    output, so it reads the error first and the fallback's stream is the
//!    only one the agent sees. Two calls.
//! 3. A prompt the primary rejects as malformed (`400`): another account
//!    would reject it too, so the agent gets the provider's own error.
//!    One call.
//! 4. A prompt with both accounts taken out of rotation (their breakers
//!    opened by hand): refused unsent, and the agent's error says so; the
//!    model called directly returns Levee's `NoTargetAvailable` inside its
//!    transport error. No call.
//!
//! Run with `cargo run -p examples --example rig_agent`.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use rig_agent::AgentBuilder;
use rig_agent::agent::MultiTurnStreamItem;
use rig_core::completion::CompletionRequest;
use rig_core::error::ProviderError;
use rig_core::providers::openai::OpenAIConfig;
use tower::ServiceBuilder;
use tower_levee::error::Rejection;
use tower_levee::failover::{Failover, Target};
use tower_levee::rig::RigHttpClient;
use tower_levee::{BoxError, BreakerLayer, RetryBudgetLayer};

#[path = "support.rs"]
mod support;
use support::{print_event, serve_local};

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let fake = Fake::default();
    let addr = fake.serve().await?;

    // Each account's breaker, kept to take it out of rotation by hand.
    let primary = BreakerLayer::builder().on_event(print_event).build()?;
    let fallback = BreakerLayer::builder().on_event(print_event).build()?;
    let (primary_health, fallback_health) = (primary.handle(), fallback.handle());
    let hyper = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let failover = Failover::builder()
        .target(Target::new("primary", hyper.clone()).breaker(primary))
        .target(Target::new("fallback", hyper).breaker(fallback).rewrite(
            |req: &mut Request<Full<Bytes>>| {
                // The fallback account: the same fake, its own path.
                let uri = req.uri().to_string().replace("/primary/", "/fallback/");
                *req.uri_mut() = uri.parse().expect("a URI with one segment renamed");
            },
        ))
        .build()?;
    let stack = ServiceBuilder::new()
        .layer(RetryBudgetLayer::with_defaults())
        .service(failover);

    let model = OpenAIConfig::new("sk-example")
        .with_base_url(format!("http://{addr}/primary/v1"))
        .connect(RigHttpClient::new(stack))
        .chat("gpt-4o");
    let agent = AgentBuilder::new(model.clone())
        .preamble("Be brief.")
        .build();

    println!("prompt (the primary throttles)");
    fake.script("primary", Fault::Throttle);
    let answer = agent.prompt("Say hi").await?;
    println!("  {:?}", answer.output());
    assert_eq!(answer.output(), "Hi from fallback");
    assert_eq!(fake.calls(), [1, 1], "one call to each account");

    // The primary's gate reopens after its 100-ms hint.
    tokio::time::sleep(Duration::from_millis(150)).await;
    println!("streamed prompt (the primary's stream fails before its first token)");
    fake.script("primary", Fault::ErrorBeforeContent);
    let mut stream = agent.prompt("Say hi").stream();
    let mut text = String::new();
    while let Some(item) = stream.next().await {
        if let MultiTurnStreamItem::FinalResponse(done) = item? {
            text = done.output().to_owned();
        }
    }
    println!("  {text:?}");
    assert_eq!(
        text, "Hi from fallback",
        "the failed stream was never shown"
    );
    assert_eq!(fake.calls(), [2, 2], "the failed stream and the fallback's");

    println!("prompt (malformed for any account)");
    fake.script("primary", Fault::BadRequest);
    let err = agent
        .prompt("Say hi")
        .await
        .expect_err("a 400 is the caller's");
    println!("  error: {err}");
    assert!(
        err.to_string().contains("400"),
        "the provider's status: {err}"
    );
    assert_eq!(fake.calls(), [3, 2], "no other account tried");

    println!("prompt (both accounts out of rotation)");
    let host = addr.to_string();
    primary_health.open(&host);
    fallback_health.open(&host);
    let err = agent.prompt("Say hi").await.expect_err("refused");
    println!("  error: {err}");
    // An agent reports a provider's failure as text (rig-agent's
    // `ErrorReport`), so its error says what Levee refused, not as a type.
    assert!(err.to_string().contains("no target available"), "{err}");
    // The model itself keeps the transport's error: Levee's refusal is in
    // there, as a type.
    let err = model
        .call(CompletionRequest::new("Say hi"))
        .await
        .expect_err("refused");
    let ProviderError::Http(transport) = &err else {
        panic!("a transport error, got {err:?}");
    };
    let refusal = Rejection::find(&**transport).expect("Levee's refusal is its source");
    assert!(
        matches!(refusal, Rejection::NoTargetAvailable(_)),
        "{refusal:?}"
    );
    assert_eq!(fake.calls(), [3, 2], "refused unsent");

    println!(
        "the provider answered {:?} calls: only those Levee decided",
        fake.calls()
    );
    Ok(())
}

/// What the fake answers an account's next call with, once.
#[derive(Clone, Copy, Debug)]
enum Fault {
    Throttle,
    ErrorBeforeContent,
    BadRequest,
}

/// An OpenAI-shaped provider with two accounts (`/primary/v1`,
/// `/fallback/v1`): each answers its scripted faults in turn, then
/// succeeds, and counts its calls.
#[derive(Clone, Default)]
struct Fake {
    script: Arc<Mutex<HashMap<String, VecDeque<Fault>>>>,
    calls: Arc<Mutex<HashMap<String, usize>>>,
}

impl Fake {
    fn script(&self, account: &str, fault: Fault) {
        let mut script = self.script.lock().unwrap();
        script
            .entry(account.to_owned())
            .or_default()
            .push_back(fault);
    }

    /// The calls each account answered: `[primary, fallback]`.
    fn calls(&self) -> [usize; 2] {
        let calls = self.calls.lock().unwrap();
        let of = |a: &str| calls.get(a).copied().unwrap_or(0);
        [of("primary"), of("fallback")]
    }

    async fn serve(&self) -> std::io::Result<SocketAddr> {
        let fake = self.clone();
        serve_local(move |req| {
            let fake = fake.clone();
            async move { fake.answer(req).await }
        })
        .await
    }

    async fn answer(&self, req: Request<hyper::body::Incoming>) -> Response<Full<Bytes>> {
        let account = req
            .uri()
            .path()
            .split('/')
            .nth(1)
            .unwrap_or_default()
            .to_owned();
        let body = req.into_body().collect().await.map(|b| b.to_bytes());
        let stream = body.is_ok_and(|b| {
            let text = String::from_utf8_lossy(&b).replace(' ', "");
            text.contains(r#""stream":true"#)
        });
        *self
            .calls
            .lock()
            .unwrap()
            .entry(account.clone())
            .or_default() += 1;
        let fault = self
            .script
            .lock()
            .unwrap()
            .get_mut(&account)
            .and_then(VecDeque::pop_front);
        let response = Response::builder();
        let response = match fault {
            Some(Fault::Throttle) => response
                .status(429)
                .header("retry-after-ms", "100")
                .body(r#"{"error":{"type":"requests","code":"rate_limit_exceeded","message":"Rate limit reached"}}"#.to_owned()),
            Some(Fault::BadRequest) => response.status(400).body(
                r#"{"error":{"type":"invalid_request_error","code":null,"message":"'messages' is malformed"}}"#
                    .to_owned(),
            ),
            Some(Fault::ErrorBeforeContent) => response
                .header("content-type", "text/event-stream")
                .body(
                    "data: {\"error\":{\"type\":\"server_error\",\"message\":\"The server had an error while processing your request\"}}\n\n"
                        .to_owned(),
                ),
            None if stream => response
                .header("content-type", "text/event-stream")
                .body(success_stream(&account)),
            None => response
                .header("content-type", "application/json")
                .body(success(&account)),
        };
        response.unwrap().map(|b| Full::new(Bytes::from(b)))
    }
}

fn success(account: &str) -> String {
    format!(
        r#"{{"id":"chatcmpl-1","object":"chat.completion","created":1700000000,"model":"gpt-4o","choices":[{{"index":0,"message":{{"role":"assistant","content":"Hi from {account}"}},"finish_reason":"stop"}}],"usage":{{"prompt_tokens":9,"completion_tokens":3,"total_tokens":12}}}}"#
    )
}

fn success_stream(account: &str) -> String {
    let chunk = |delta: &str, finish: &str| {
        format!(
            "data: {{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,\"model\":\"gpt-4o\",\"choices\":[{{\"index\":0,\"delta\":{delta},\"finish_reason\":{finish}}}]}}\n\n"
        )
    };
    [
        chunk(r#"{"role":"assistant","content":""}"#, "null"),
        chunk(r#"{"content":"Hi from "}"#, "null"),
        chunk(&format!(r#"{{"content":"{account}"}}"#), "null"),
        chunk("{}", r#""stop""#),
        "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,\"model\":\"gpt-4o\",\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":3,\"total_tokens\":12}}\n\n".to_owned(),
        "data: [DONE]\n\n".to_owned(),
    ]
    .concat()
}
