//! What the client examples share: a fake provider on 127.0.0.1, reading an
//! outcome, and checking the outcomes against the ones an example promises.

// Each example uses its part.
#![allow(dead_code)]

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use hyper::body::Body;
use hyper_util::rt::TokioIo;
use levee_core::classify::Classification;
use tokio::net::TcpListener;
use tower_levee::BoxError;
use tower_levee::breaker::{CircuitOpen, Parked, ScopeEvent, Throttled};
use tower_levee::bulkhead::BulkheadFull;
use tower_levee::retry::RetryOutcome;

/// A provider on 127.0.0.1. By the end of the path: `/throttled-once`
/// answers 429 with a 200 ms hint the first time, `/stream` streams SSE,
/// `/outage` answers 503, `/spend-cap` says the quota is exhausted, others
/// succeed.
pub(crate) async fn fake_provider() -> std::io::Result<SocketAddr> {
    Ok(counted_fake_provider().await?.0)
}

/// [`fake_provider`], and the count of the calls it answers: what an
/// example checks to prove it made only the calls Levee decides.
pub(crate) async fn counted_fake_provider() -> std::io::Result<(SocketAddr, Arc<AtomicUsize>)> {
    let throttled = Arc::new(AtomicUsize::new(0));
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = calls.clone();
    let addr = serve_local(move |req| {
        calls.fetch_add(1, Ordering::SeqCst);
        let path = req.uri().path().to_owned();
        let first =
            path.ends_with("/throttled-once") && throttled.fetch_add(1, Ordering::SeqCst) == 0;
        async move {
            let res = if first {
                Response::builder()
                    .status(429)
                    .header("retry-after-ms", "200")
                    .body(r#"{"error":{"code":"rate_limit_exceeded"}}"#)
            } else if path.ends_with("/outage") {
                Response::builder().status(503).body("upstream unavailable")
            } else if path.ends_with("/spend-cap") {
                Response::builder().status(429).body(
                    r#"{"error":{"code":"insufficient_quota","message":"You exceeded your current quota"}}"#,
                )
            } else if path.ends_with("/stream") {
                Response::builder()
                    .header("content-type", "text/event-stream")
                    .body("data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\ndata: [DONE]\n\n")
            } else {
                Response::builder().body(r#"{"choices":[{"message":{"content":"hi"}}]}"#)
            };
            res.unwrap()
                .map(|b| Full::new(Bytes::from_static(b.as_bytes())))
        }
    })
    .await?;
    Ok((addr, counted))
}

/// Serves `answer` over HTTP/1 on a port of its own on 127.0.0.1, each
/// connection on a task of its own; returns the address.
pub(crate) async fn serve_local<F, Fut>(answer: F) -> std::io::Result<SocketAddr>
where
    F: Fn(Request<hyper::body::Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: std::future::Future<Output = Response<Full<Bytes>>> + Send + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let answer = answer.clone();
            let svc = hyper::service::service_fn(move |req| {
                let answer = answer(req);
                async move { Ok::<_, Infallible>(answer.await) }
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

/// Prints a breaker, gate or park transition as it happens.
pub(crate) fn print_event(e: &ScopeEvent) {
    println!(
        "  event: {} {} -> {}: {}",
        e.scope(),
        e.from(),
        e.to(),
        e.reason()
    );
}

/// Prints what a call ended in and returns it as a short line: the status
/// and, on a final non-success, what the layers saw and did; or the type of
/// a Levee refusal.
pub(crate) async fn outcome<B>(result: Result<Response<B>, BoxError>) -> Result<String, BoxError>
where
    B: Body,
    B::Error: Into<BoxError>,
{
    match result {
        Ok(res) => {
            let verdict = res.extensions().get::<Classification>().map(|c| c.verdict);
            let attempts = res.extensions().get::<RetryOutcome>().map(|o| o.attempts);
            let mut line = res.status().to_string();
            let body = res
                .into_body()
                .collect()
                .await
                .map_err(Into::into)?
                .to_bytes();
            if let (Some(verdict), Some(attempts)) = (verdict, attempts) {
                line += &format!(" ({verdict:?} after {attempts} attempts)");
            }
            println!("  -> {line}, {} bytes", body.len());
            Ok(line)
        }
        Err(err) => {
            println!("  -> refused: {err}");
            Ok(format!("refused: {}", rejection_name(&err)))
        }
    }
}

/// The type of a Levee refusal, or `other`.
fn rejection_name(err: &BoxError) -> &'static str {
    if err.is::<CircuitOpen>() {
        "CircuitOpen"
    } else if err.is::<Throttled>() {
        "Throttled"
    } else if err.is::<Parked>() {
        "Parked"
    } else if err.is::<BulkheadFull>() {
        "BulkheadFull"
    } else {
        "other"
    }
}

/// `Ok` if the outcomes are the expected ones (printing `ok`), else an error
/// that names the first difference.
pub(crate) fn check(seen: &[String], expected: &[&str]) -> Result<(), BoxError> {
    if seen.iter().map(String::as_str).eq(expected.iter().copied()) {
        println!("ok");
        Ok(())
    } else {
        Err(format!("expected {expected:?}, got {seen:?}").into())
    }
}

/// An OpenAI-compatible provider on 127.0.0.1 for async-openai, answering
/// by the model a request names: `gpt-4o` completes (a stream when asked),
/// `gpt-4o-busy` answers 429 with a 20 s wait, `gpt-4o-broken` streams an
/// in-band error before any content, `gpt-4o-capped` says the quota is
/// exhausted. Returns its address and a count of the requests it answered.
pub(crate) async fn fake_openai() -> std::io::Result<(SocketAddr, Arc<AtomicUsize>)> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let answered = Arc::new(AtomicUsize::new(0));
    let count = answered.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let count = count.clone();
            let svc = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                count.fetch_add(1, Ordering::SeqCst);
                async move {
                    let body = req.into_body().collect().await?.to_bytes();
                    let text = String::from_utf8_lossy(&body);
                    let streamed = text.contains(r#""stream":true"#);
                    let (status, content_type, answer): (u16, &str, &'static str) = if text
                        .contains("gpt-4o-busy")
                    {
                        (
                            429,
                            "application/json",
                            r#"{"error":{"message":"Rate limit reached for gpt-4o","type":"requests","code":"rate_limit_exceeded"}}"#,
                        )
                    } else if text.contains("gpt-4o-capped") {
                        (
                            429,
                            "application/json",
                            r#"{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}}"#,
                        )
                    } else if text.contains("gpt-4o-broken") {
                        (
                            200,
                            "text/event-stream",
                            "data: {\"error\":{\"message\":\"The server had an error while processing your request.\",\"type\":\"server_error\"}}\n\n",
                        )
                    } else if streamed {
                        (200, "text/event-stream", OPENAI_CHUNKS)
                    } else {
                        (
                            200,
                            "application/json",
                            r#"{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"Hello there"},"finish_reason":"stop"}]}"#,
                        )
                    };
                    let mut res = Response::builder()
                        .status(status)
                        .header("content-type", content_type);
                    if status == 429 {
                        res = res.header("retry-after", "20");
                    }
                    Ok::<_, hyper::Error>(
                        res.body(Full::new(Bytes::from_static(answer.as_bytes())))
                            .unwrap(),
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
    Ok((addr, answered))
}

/// The stream `fake_openai` sends for `gpt-4o`: "Hello there" in two pieces.
pub(crate) const OPENAI_CHUNKS: &str = "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"gpt-4o\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Hello\"},\"finish_reason\":null}]}\n\ndata: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"gpt-4o\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\" there\"},\"finish_reason\":null}]}\n\ndata: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"gpt-4o\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n";
