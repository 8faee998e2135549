//! Seed 004's drill through the whole stack: RetryBudget → Breaker →
//! Bulkhead over a dependency that always answers 503, 50 sequential
//! requests, default settings, paused time. The article's baseline is
//! 50 × 27 = 1,350 calls with three nested retry layers of 3 attempts
//! (proved in `retry_seed004.rs`); here the breaker stops it at its threshold.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::{Request, Response, StatusCode};
use tower::{BoxError, Service, ServiceBuilder, ServiceExt};
use tower_levee::breaker::{BreakerLayer, CircuitOpen};
use tower_levee::bulkhead::BulkheadLayer;
use tower_levee::retry::RetryBudgetLayer;

const REQUESTS: usize = 50;

fn always_503(
    calls: Arc<AtomicUsize>,
) -> impl Service<
    Request<String>,
    Response = Response<String>,
    Error = BoxError,
    Future = std::future::Ready<Result<Response<String>, BoxError>>,
> + Clone {
    tower::service_fn(move |_req: Request<String>| {
        calls.fetch_add(1, Ordering::SeqCst);
        std::future::ready(Ok(Response::builder()
            .status(StatusCode::SERVICE_UNAVAILABLE)
            .body(String::new())
            .unwrap()))
    })
}

/// Runs the drill with `gap` between requests; returns (upstream calls,
/// half-open windows, requests answered with CircuitOpen).
async fn drill(gap: Duration) -> (usize, usize, usize) {
    let calls = Arc::new(AtomicUsize::new(0));
    let half_opens = Arc::new(Mutex::new(0));
    let seen = half_opens.clone();
    let breaker = BreakerLayer::builder()
        .seed(4)
        .on_event(move |e| {
            if e.to() == "half_open" {
                *seen.lock().unwrap() += 1;
            }
        })
        .build()
        .unwrap();
    let mut svc = ServiceBuilder::new()
        .layer(
            RetryBudgetLayer::builder(Default::default())
                .seed(4)
                .build()
                .unwrap(),
        )
        .layer(breaker)
        .layer(BulkheadLayer::named("llm", 8))
        .service(always_503(calls.clone()));
    let mut open = 0;
    for _ in 0..REQUESTS {
        let req = Request::post("https://api.anthropic.com/v1/messages")
            .body(String::new())
            .unwrap();
        match svc.ready().await.unwrap().call(req).await {
            Ok(res) => assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE),
            Err(e) => {
                assert!(e.is::<CircuitOpen>(), "only the breaker refuses: {e}");
                open += 1;
            }
        }
        tokio::time::sleep(gap).await;
    }
    let half_opens = *half_opens.lock().unwrap();
    (calls.load(Ordering::SeqCst), half_opens, open)
}

#[tokio::test(start_paused = true)]
async fn fifty_back_to_back_requests_reach_a_dead_dependency_threshold_times_and_one_probe() {
    let (calls, half_opens, open) = drill(Duration::ZERO).await;
    // Request 1: 3 attempts (3 failures). Request 2: failures 4 and 5 open the
    // breaker; its third attempt waits out the cool-off the breaker named
    // (never sooner: it would be refused) and is the half-open probe, which
    // fails. Every later request is refused at once, unsent.
    println!(
        "seed 004, back to back: {calls} upstream calls for {REQUESTS} requests (unprotected with 3 nested retry layers: 1,350)"
    );
    assert_eq!(half_opens, 1);
    assert_eq!(calls, 5 + half_opens);
    assert_eq!(open, REQUESTS - 2);
}

#[tokio::test(start_paused = true)]
async fn fifty_requests_a_second_apart_add_one_call_per_half_open_window() {
    let (calls, half_opens, open) = drill(Duration::from_secs(1)).await;
    // Threshold + one probe per half-open window: a failed probe reopens the
    // breaker, so the retry of it is refused, not sent. The cool-off is at
    // least 3 s (10% floor of 30 s), so at most 50 s / 3 s windows fit.
    println!(
        "seed 004, 1 s apart: {calls} upstream calls, {half_opens} half-open windows, {open} refused"
    );
    assert_eq!(calls, 5 + half_opens);
    assert!(half_opens <= 50 / 3);
    assert!(open >= REQUESTS - 2 - half_opens);
}
