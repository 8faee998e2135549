//! Levee composed with tower's own timeout and retry layers, in the order of
//! the design: overall `TimeoutLayer` → `tower::retry::Retry` driven by
//! Levee's budget ([`BudgetPolicy`]) → bulkhead → breaker → per-attempt
//! `TimeoutLayer` → a hyper client, against a fake provider on 127.0.0.1.
//!
//! It checks what it shows and prints `ok` (exit code 1 otherwise):
//!
//! - a `503` is retried by tower's `Retry` (one budget token);
//! - per-attempt timeouts are availability failures: three in a row open
//!   the breaker of that account;
//! - the breaker's `CircuitOpen` is not retried: the provider sees nothing;
//! - the overall timeout cuts retries that would run past it.
//!
//! Run with `cargo run -p examples --example tower_composition`.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use levee_core::breaker::{BreakerConfig, BreakerStatus};
use tokio::net::TcpListener;
use tower::retry::RetryLayer;
use tower::timeout::TimeoutLayer;
use tower::timeout::error::Elapsed;
use tower::{ServiceBuilder, ServiceExt};
use tower_levee::breaker::Scope;
use tower_levee::error::is_rejection;
use tower_levee::retry::{BudgetPolicy, RetryBudget};
use tower_levee::{BoxError, BreakerLayer, BulkheadLayer, CircuitOpen};

/// How many requests the fake provider received, per path.
type Hits = Arc<Mutex<HashMap<String, usize>>>;

#[tokio::main]
async fn main() {
    match run().await {
        Ok(()) => println!("ok"),
        Err(e) => {
            eprintln!("tower_composition: FAILED: {e}");
            std::process::exit(1);
        }
    }
}

async fn run() -> Result<(), BoxError> {
    let hits = Hits::default();
    let addr = fake_provider(hits.clone()).await?;
    let hit = |path: &str| hits.lock().unwrap().get(path).copied().unwrap_or(0);

    let budget = Arc::new(RetryBudget::default());
    let breaker = BreakerLayer::builder()
        .breaker(BreakerConfig::builder().threshold(3).build()?)
        .build()?;
    let health = breaker.handle();
    let client = Client::builder(TokioExecutor::new()).build_http::<String>();
    let stack = ServiceBuilder::new()
        // The caller's overall deadline, outermost: it cuts retries too.
        .layer(TimeoutLayer::new(Duration::from_millis(1500)))
        // tower's own Retry, with Levee's rules and budget. Short backoff
        // for the example; the default is 500 ms × 2ⁿ up to 8 s.
        .layer(RetryLayer::new(
            BudgetPolicy::builder(budget.clone())
                .backoff(Duration::from_millis(10), Duration::from_millis(50))
                .build()?,
        ))
        .layer(BulkheadLayer::named("llm", 16))
        .layer(breaker)
        // Per attempt, beneath the breaker: its Elapsed is counted.
        .layer(TimeoutLayer::new(Duration::from_millis(200)))
        .service(client);
    let call = |path: &'static str, account: &'static str| {
        let mut req = Request::post(format!("http://{addr}{path}"))
            .header("content-type", "application/json")
            .body(r#"{"model":"gpt-4o","messages":[]}"#.to_owned())
            .expect("a valid request");
        // One breaker per account (the default would be the authority).
        req.extensions_mut().insert(Scope::new().domain(account));
        stack.clone().oneshot(req)
    };

    // 1. A 503, then a 200: retried once by tower's Retry.
    let res = call("/flaky", "account-a").await?;
    check(res.status() == StatusCode::OK, "/flaky ends in 200")?;
    check(hit("/flaky") == 2, "/flaky reached the provider twice")?;
    check(budget.snapshot().retries == 1, "one retry token spent")?;
    println!("503 then 200: retried once, 200");

    // 2. A provider that hangs: each attempt times out after 200 ms, the
    // breaker counts it, and the third opens the breaker.
    let err = call("/hang", "account-b").await.unwrap_err();
    check(err.is::<Elapsed>(), "/hang ends in a timeout")?;
    check(hit("/hang") == 3, "/hang was attempted 3 times")?;
    check(
        health.breaker_status("account-b") == Some(BreakerStatus::Open),
        "3 per-attempt timeouts open the breaker of account-b",
    )?;
    println!("3 per-attempt timeouts: breaker of account-b open");

    // 3. The breaker refuses at once; tower's Retry does not retry it.
    let retries = budget.snapshot().retries;
    let err = call("/ok", "account-b").await.unwrap_err();
    check(
        err.is::<CircuitOpen>(),
        "account-b refused with CircuitOpen",
    )?;
    check(is_rejection(&*err), "CircuitOpen is a Levee rejection")?;
    check(
        hit("/ok") == 0,
        "the refused request never reached the provider",
    )?;
    check(
        budget.snapshot().retries == retries,
        "no token spent on a rejection",
    )?;
    println!("refused: {err}");

    // 4. A 503 asking for 1 s each time: the second wait runs past the
    // overall 1.5 s deadline, which ends the request.
    let err = call("/unavailable", "account-c").await.unwrap_err();
    check(
        err.is::<Elapsed>(),
        "/unavailable ends in the overall timeout",
    )?;
    check(hit("/unavailable") == 2, "/unavailable was attempted twice")?;
    println!("overall timeout: 2 attempts, then cut");
    Ok(())
}

fn check(ok: bool, what: &str) -> Result<(), BoxError> {
    if ok {
        Ok(())
    } else {
        Err(format!("expected: {what}").into())
    }
}

/// A provider on 127.0.0.1: `/flaky` answers 503 the first time and 200
/// after, `/hang` never answers, `/unavailable` answers 503 with
/// `retry-after: 1`, anything else 200.
async fn fake_provider(hits: Hits) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let hits = hits.clone();
            let svc = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                let path = req.uri().path().to_owned();
                let n = {
                    let mut hits = hits.lock().unwrap();
                    let n = hits.entry(path.clone()).or_default();
                    *n += 1;
                    *n
                };
                async move {
                    let res = match path.as_str() {
                        "/flaky" if n == 1 => Response::builder().status(503).body(""),
                        "/hang" => std::future::pending().await,
                        "/unavailable" => Response::builder()
                            .status(503)
                            .header("retry-after", "1")
                            .body(""),
                        _ => Response::builder().body(r#"{"choices":[]}"#),
                    };
                    Ok::<_, Infallible>(
                        res.expect("a valid response")
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
