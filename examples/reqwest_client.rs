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

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use levee_core::classify::Classification;
use tokio::net::TcpListener;
use tower::{Service, ServiceBuilder, ServiceExt};
use tower_levee::reqwest::HttpClient;
use tower_levee::retry::RetryOutcome;
use tower_levee::{BoxError, BreakerLayer, BulkheadLayer, RetryBudgetLayer};

#[path = "support.rs"]
mod support;
use support::{check, rejection_name};

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

    let breaker = BreakerLayer::builder()
        .on_event(|e| {
            println!(
                "  event: {} {} -> {}: {}",
                e.scope(),
                e.from(),
                e.to(),
                e.reason()
            )
        })
        .build()?;
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
        match ServiceExt::<Request<String>>::ready(&mut stack)
            .await?
            .call(req)
            .await
        {
            Ok(res) => {
                let status = res.status();
                // On a final non-success: what the layers saw and did.
                let verdict = res.extensions().get::<Classification>().map(|c| c.verdict);
                let attempts = res.extensions().get::<RetryOutcome>().map(|o| o.attempts);
                let body = res.into_body().collect().await?.to_bytes();
                let mut outcome = status.to_string();
                if let (Some(verdict), Some(attempts)) = (verdict, attempts) {
                    outcome += &format!(" ({verdict:?} after {attempts} attempts)");
                }
                println!("  -> {outcome}, {} bytes", body.len());
                seen.push(outcome);
            }
            Err(err) => {
                println!("  -> refused: {err}");
                seen.push(format!("refused: {}", rejection_name(&err)));
            }
        }
    }
    println!("health: {:?}", health.states());
    check(&seen, &EXPECTED)
}

/// A provider on 127.0.0.1: `/throttled-once` answers 429 with a 200 ms hint
/// the first time, `/spend-cap` says the quota is exhausted, others succeed.
async fn fake_provider() -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let throttled = Arc::new(AtomicUsize::new(0));
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let throttled = throttled.clone();
            let svc = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                let path = req.uri().path().to_owned();
                let first = path.ends_with("/throttled-once")
                    && throttled.fetch_add(1, Ordering::SeqCst) == 0;
                async move {
                    let res = if first {
                        Response::builder()
                            .status(429)
                            .header("retry-after-ms", "200")
                            .body(r#"{"error":{"code":"rate_limit_exceeded"}}"#)
                    } else if path.ends_with("/spend-cap") {
                        Response::builder().status(429).body(
                            r#"{"error":{"code":"insufficient_quota","message":"You exceeded your current quota"}}"#,
                        )
                    } else {
                        Response::builder().body(r#"{"choices":[{"message":{"content":"hi"}}]}"#)
                    };
                    Ok::<_, Infallible>(
                        res.unwrap()
                            .map(|b| Full::new(Bytes::from_static(b.as_bytes()))),
                    )
                }
            });
            tokio::spawn(async move {
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    Ok(addr)
}
