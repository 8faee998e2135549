//! The AWS SDK for Bedrock (`aws-sdk-bedrockruntime`) sending through a
//! Levee stack, against a fake Bedrock on 127.0.0.1 that throttles, then
//! fails a stream in the middle with an event-stream exception.
//!
//! The SDK's own retries are off (`RetryConfig::disabled()`): Levee's retry
//! budget is the one loop. The fake counts every call, so the example
//! proves the SDK made only the calls Levee decided:
//!
//! 1. `Converse`: a `429 ThrottlingException`, then the account's cap, a
//!    `400 ServiceQuotaExceededException` (Bedrock's own throttle for a
//!    quota); each closes Levee's gate for the model's scope, and Levee's
//!    retry waits it out and calls again: served, after 6.5 s (past the
//!    SDK's 5-s stall grace, which watches the request's upload: Levee's
//!    client reads it whole). Three calls.
//! 2. `ConverseStream` whose `throttlingException` frame comes before the
//!    caller has seen any output: Levee holds a stream until its first
//!    output, so it reads the exception first, gates the scope and sends
//!    the request again once the gate reopens; the caller sees only the
//!    second, whole stream. Two calls.
//! 3. `ConverseStream` whose output reaches the caller, then the
//!    exception: no one may send it again unseen, so the caller gets the
//!    SDK's error, and Levee's stream watch gates the scope. One call.
//! 4. `ConverseStream` again: sent once the gate reopens (Levee's retry
//!    waits it out while it is closed), served whole. One call.
//!
//! Run with `cargo run -p examples --example aws_bedrock`.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use aws_sdk_bedrockruntime::Client as Bedrock;
use aws_sdk_bedrockruntime::config::retry::RetryConfig;
use aws_sdk_bedrockruntime::config::{BehaviorVersion, Credentials, Region};
use aws_sdk_bedrockruntime::types::{
    ContentBlock, ConversationRole, ConverseStreamOutput, Message,
};
use aws_smithy_eventstream::frame::write_message_to;
use aws_smithy_types::event_stream::{Header, HeaderValue, Message as Frame};
use bytes::Bytes;
use futures_util::StreamExt;
use http::{Request, Response};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Frame as BodyFrame;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use levee_core::gate::GateConfig;
use tokio::net::TcpListener;
use tower::ServiceBuilder;
use tower_levee::aws::AwsHttpClient;
use tower_levee::error::{RefusalKind, Rejection};
use tower_levee::{BoxError, BreakerLayer, RetryBudgetLayer};

#[path = "support.rs"]
mod support;
use support::print_event;

const MODEL: &str = "anthropic.claude-3-5-haiku-20241022-v1:0";

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let (addr, calls) = fake_bedrock().await?;

    // Levee's stack over hyper. A throttle with no hint gates its scope for
    // `default_wait` (5 s by default; 300 ms here, for a short run).
    let breaker = BreakerLayer::builder()
        .gate(
            GateConfig::builder()
                .default_wait(Duration::from_millis(300))
                .build()?,
        )
        // A stream silent for 3 s fails, and tells the breaker.
        .stall_timeout(Duration::from_secs(3))
        .on_event(print_event)
        .build()?;
    let health = breaker.handle();
    let hyper = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let stack = ServiceBuilder::new()
        .layer(RetryBudgetLayer::with_defaults())
        .layer(breaker)
        .timeout(Duration::from_secs(30))
        .service(hyper);

    let config = aws_sdk_bedrockruntime::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new(
            "AKIDEXAMPLE",
            "example-secret",
            None,
            None,
            "example",
        ))
        .endpoint_url(format!("http://{addr}"))
        .http_client(AwsHttpClient::new(stack))
        // One retry loop: Levee's. (The SDK's stalled-stream protection
        // stays on, with its 5-s grace; Levee's stall timeout is shorter.)
        .retry_config(RetryConfig::disabled())
        .build();
    let bedrock = Bedrock::from_conf(config);
    let message = Message::builder()
        .role(ConversationRole::User)
        .content(ContentBlock::Text("hi".into()))
        .build()?;

    println!("Converse (throttled, then over the account's quota)");
    let out = bedrock
        .converse()
        .model_id(MODEL)
        .messages(message.clone())
        .send()
        .await?;
    println!("  stop reason: {:?}", out.stop_reason());
    let seen = || calls.load(Ordering::SeqCst);
    assert_eq!(seen(), 3, "two refused calls and Levee's two retries");

    println!("ConverseStream (throttled before the caller saw output)");
    let text = read_stream(&bedrock, &message).await?;
    println!("  {text:?}");
    assert_eq!(text, "Hi there", "the failed stream was never shown");
    assert_eq!(seen(), 5, "the failed stream and Levee's one retry");

    println!("ConverseStream (throttled after the caller saw output)");
    let text = read_stream(&bedrock, &message).await;
    match &text {
        Ok(t) => println!("  {t:?}"),
        Err(e) => println!("  error: {}", chain(&**e)),
    }
    assert!(
        text.is_err(),
        "a stream failed after its output is the caller's"
    );
    assert_eq!(seen(), 6, "no hidden retry of a stream shown");

    println!("ConverseStream (after the gate reopens)");
    let text = read_stream(&bedrock, &message).await?;
    println!("  {text:?}");
    assert_eq!(text, "Hi there");
    assert_eq!(seen(), 7, "only the calls Levee decided");

    println!("Converse (the account taken out of rotation: breaker open)");
    health.open(&addr.to_string());
    let err = bedrock
        .converse()
        .model_id(MODEL)
        .messages(message.clone())
        .send()
        .await
        .expect_err("refused");
    println!("  error: {}", chain(&err));
    // The SDK's dispatch failure holds Levee's refusal as its source.
    let rejection = Rejection::find(&err).expect("Levee's refusal in the chain");
    assert_eq!(rejection.kind(), RefusalKind::CircuitOpen);
    assert_eq!(seen(), 7, "refused unsent");
    println!("the fake Bedrock saw 7 calls, each one Levee's");
    Ok(())
}

/// The text of one `ConverseStream`, or the error it ended with.
async fn read_stream(bedrock: &Bedrock, message: &Message) -> Result<String, BoxError> {
    let mut out = bedrock
        .converse_stream()
        .model_id(MODEL)
        .messages(message.clone())
        .send()
        .await?;
    let mut text = String::new();
    while let Some(event) = out.stream.recv().await? {
        if let ConverseStreamOutput::ContentBlockDelta(delta) = event
            && let Some(aws_sdk_bedrockruntime::types::ContentBlockDelta::Text(t)) = delta.delta()
        {
            text.push_str(t);
        }
    }
    Ok(text)
}

/// A Bedrock stand-in, by its count of calls: a `429 ThrottlingException`,
/// a `400 ServiceQuotaExceededException`, a served `Converse`; a stream
/// that fails before its output is read, a whole one, one that fails after,
/// a whole one.
async fn fake_bedrock() -> std::io::Result<(SocketAddr, Arc<AtomicUsize>)> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = calls.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let counted = counted.clone();
            let svc = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                let n = counted.fetch_add(1, Ordering::SeqCst);
                let streaming = req.uri().path().ends_with("/converse-stream");
                let signed = req.headers().contains_key("authorization");
                async move {
                    if !signed {
                        return Ok(Response::builder()
                            .status(403)
                            .body(Full::new(Bytes::from_static(b"unsigned")).boxed_unsync())
                            .unwrap());
                    }
                    if n == 2 {
                        // Longer than the SDK's 5-s stall grace: its upload
                        // check must have seen the request body read.
                        tokio::time::sleep(Duration::from_millis(6_500)).await;
                    }
                    Ok::<_, Infallible>(answer(n, streaming))
                }
            });
            tokio::spawn(async move {
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    Ok((addr, calls))
}

type Body = UnsyncBoxBody<Bytes, Infallible>;

fn answer(n: usize, streaming: bool) -> Response<Body> {
    let json = |status: u16, error: Option<&str>, body: &str| {
        let mut b = Response::builder()
            .status(status)
            .header("content-type", "application/json");
        if let Some(e) = error {
            b = b.header(
                "x-amzn-ErrorType",
                format!("{e}:http://internal.amazon.com/coral/com.amazon.bedrock/"),
            );
        }
        b.body(Full::new(Bytes::from(body.to_owned())).boxed_unsync())
            .unwrap()
    };
    let whole = || {
        event_stream(
            &[
                event("messageStart", r#"{"role":"assistant"}"#),
                event(
                    "contentBlockDelta",
                    r#"{"contentBlockIndex":0,"delta":{"text":"Hi"}}"#,
                ),
                event(
                    "contentBlockDelta",
                    r#"{"contentBlockIndex":0,"delta":{"text":" there"}}"#,
                ),
                event("contentBlockStop", r#"{"contentBlockIndex":0}"#),
                event("messageStop", r#"{"stopReason":"end_turn"}"#),
                event(
                    "metadata",
                    r#"{"usage":{"inputTokens":5,"outputTokens":2,"totalTokens":7},"metrics":{"latencyMs":12}}"#,
                ),
            ],
            &[],
        )
    };
    let throttled = || {
        exception(
            "throttlingException",
            r#"{"message":"Too many tokens, please wait before trying again."}"#,
        )
    };
    let started = || {
        vec![
            event("messageStart", r#"{"role":"assistant"}"#),
            event(
                "contentBlockDelta",
                r#"{"contentBlockIndex":0,"delta":{"text":"Hi"}}"#,
            ),
        ]
    };
    match (n, streaming) {
        (0, false) => json(
            429,
            Some("ThrottlingException"),
            r#"{"message":"Too many requests, please wait before trying again."}"#,
        ),
        (1, false) => json(
            400,
            Some("ServiceQuotaExceededException"),
            r#"{"message":"Your request exceeds the service quota for your account."}"#,
        ),
        (_, false) => json(
            200,
            None,
            r#"{"output":{"message":{"role":"assistant","content":[{"text":"Hi there"}]}},"stopReason":"end_turn","usage":{"inputTokens":5,"outputTokens":2,"totalTokens":7},"metrics":{"latencyMs":12}}"#,
        ),
        // The exception before any output.
        (3, true) => event_stream(
            &[
                event("messageStart", r#"{"role":"assistant"}"#),
                throttled(),
            ],
            &[],
        ),
        // The output first; the exception 200 ms later, after the caller
        // has read it.
        (5, true) => event_stream(&started(), &[throttled()]),
        (_, true) => whole(),
    }
}

fn event(kind: &'static str, payload: &str) -> Frame {
    Frame::new(Bytes::from(payload.to_owned()))
        .add_header(Header::new(
            ":message-type",
            HeaderValue::String("event".into()),
        ))
        .add_header(Header::new(":event-type", HeaderValue::String(kind.into())))
        .add_header(Header::new(
            ":content-type",
            HeaderValue::String("application/json".into()),
        ))
}

fn exception(kind: &'static str, payload: &str) -> Frame {
    Frame::new(Bytes::from(payload.to_owned()))
        .add_header(Header::new(
            ":message-type",
            HeaderValue::String("exception".into()),
        ))
        .add_header(Header::new(
            ":exception-type",
            HeaderValue::String(kind.into()),
        ))
        .add_header(Header::new(
            ":content-type",
            HeaderValue::String("application/json".into()),
        ))
}

/// A `200` whose body is `first` in AWS's binary event-stream encoding,
/// then, 200 ms later, `later`.
fn event_stream(first: &[Frame], later: &[Frame]) -> Response<Body> {
    let encode = |frames: &[Frame]| {
        let mut bytes = Vec::new();
        for frame in frames {
            write_message_to(frame, &mut bytes).expect("a frame encodes");
        }
        Bytes::from(bytes)
    };
    let parts = [encode(first), encode(later)];
    let frames =
        futures_util::stream::iter(parts.into_iter().enumerate()).then(|(i, bytes)| async move {
            if i > 0 {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Ok::<_, Infallible>(BodyFrame::data(bytes))
        });
    Response::builder()
        .header("content-type", "application/vnd.amazon.eventstream")
        .body(
            StreamBody::new(frames.filter(|f| {
                let keep = f
                    .as_ref()
                    .map_or(true, |f| f.data_ref().is_some_and(|d| !d.is_empty()));
                async move { keep }
            }))
            .boxed_unsync(),
        )
        .unwrap()
}

/// An error and its sources, one line.
fn chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut line = err.to_string();
    let mut source = err.source();
    while let Some(e) = source {
        line += ": ";
        line += &e.to_string();
        source = e.source();
    }
    line
}
