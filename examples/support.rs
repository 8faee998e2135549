//! What the client examples share: a fake provider on 127.0.0.1, reading an
//! outcome, and checking the outcomes against the ones an example promises.

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
