//! The breaker layer end to end over scripted inner services, in paused time.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::{Request, Response};
use http_body_util::BodyExt;
use levee_core::breaker::{BreakerConfig, BreakerStatus};
use levee_core::classify::{Classification, Verdict};
use tower::{BoxError, Service, ServiceBuilder, ServiceExt};
use tower_levee::breaker::{BreakerLayer, CircuitOpen, Parked, Scope, ScopeEvent, Throttled};

type Reply = Box<dyn Fn(&Request<String>) -> Result<Response<String>, BoxError> + Send + Sync>;

/// An inner service that counts its calls and answers with `reply`.
#[derive(Clone)]
struct Scripted {
    calls: Arc<AtomicUsize>,
    reply: Arc<Reply>,
}

impl Scripted {
    fn new(
        reply: impl Fn(&Request<String>) -> Result<Response<String>, BoxError> + Send + Sync + 'static,
    ) -> Self {
        Scripted {
            calls: Arc::new(AtomicUsize::new(0)),
            reply: Arc::new(Box::new(reply)),
        }
    }

    fn status(
        status: u16,
        headers: &'static [(&'static str, &'static str)],
        body: &'static str,
    ) -> Self {
        Scripted::new(move |_| {
            let mut b = Response::builder().status(status);
            for (k, v) in headers {
                b = b.header(*k, *v);
            }
            Ok(b.body(body.to_owned()).unwrap())
        })
    }

    fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

impl Service<Request<String>> for Scripted {
    type Response = Response<String>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Response<String>, BoxError>> + Send>>;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), BoxError>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<String>) -> Self::Future {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let out = (self.reply)(&req);
        Box::pin(async move { out })
    }
}

fn openai() -> Request<String> {
    Request::post("https://api.openai.com/v1/chat/completions")
        .body(r#"{"model":"gpt-4o"}"#.to_owned())
        .unwrap()
}

fn for_model(model: &'static str) -> Request<String> {
    let mut req = openai();
    req.extensions_mut().insert(Scope::new().model(model));
    req
}

fn recorder() -> (
    Arc<Mutex<Vec<String>>>,
    impl Fn(&ScopeEvent) + Send + Sync + 'static,
) {
    let log = Arc::new(Mutex::new(Vec::new()));
    let sink = log.clone();
    (log, move |e: &ScopeEvent| {
        sink.lock().unwrap().push(format!(
            "{} {} {}->{}: {}",
            e.scope(),
            e.mechanism().as_str(),
            e.from(),
            e.to(),
            e.reason()
        ));
    })
}

#[tokio::test(start_paused = true)]
async fn fifty_calls_to_a_dead_provider_reach_it_threshold_times_then_fail_fast() {
    let inner = Scripted::status(503, &[], r#"{"error":{"type":"server_error"}}"#);
    let layer = BreakerLayer::builder().seed(7).build().unwrap();
    let handle = layer.handle();
    let mut svc = ServiceBuilder::new().layer(layer).service(inner.clone());
    let mut open = 0;
    for _ in 0..50 {
        match svc.ready().await.unwrap().call(openai()).await {
            Ok(res) => assert_eq!(res.status(), 503),
            Err(e) => {
                let open_err = e.downcast_ref::<CircuitOpen>().expect("only CircuitOpen");
                assert_eq!(open_err.scope(), "api.openai.com");
                assert!(open_err.retry_after() > Duration::ZERO);
                open += 1;
            }
        }
    }
    println!("upstream calls: {} of 50, {} refused", inner.calls(), open);
    assert_eq!(inner.calls(), 5, "the default consecutive threshold");
    assert_eq!(open, 45);
    assert_eq!(
        handle.breaker_status("api.openai.com"),
        Some(BreakerStatus::Open)
    );
    assert_eq!(handle.rejections().breaker, 45);
    assert_eq!(handle.upstream_failures(Verdict::Availability), 5);
}

#[tokio::test(start_paused = true)]
async fn a_dead_provider_gets_one_probe_per_half_open_window() {
    let inner = Scripted::status(503, &[], "");
    let (log, on_event) = recorder();
    let layer = BreakerLayer::builder()
        .seed(1)
        .on_event(on_event)
        .build()
        .unwrap();
    let mut svc = ServiceBuilder::new().layer(layer).service(inner.clone());
    // One call a second for ten minutes.
    for _ in 0..600 {
        let _ = svc.ready().await.unwrap().call(openai()).await;
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let half_opens = log
        .lock()
        .unwrap()
        .iter()
        .filter(|l| l.contains("->half_open"))
        .count();
    println!(
        "upstream calls: {}, half-open windows: {}",
        inner.calls(),
        half_opens
    );
    assert!(half_opens >= 1);
    assert_eq!(
        inner.calls(),
        5 + half_opens,
        "threshold + one probe per half-open window"
    );
}

#[tokio::test(start_paused = true)]
async fn throttling_never_opens_the_breaker() {
    let inner = Scripted::status(
        429,
        &[("retry-after", "1")],
        r#"{"error":{"code":"rate_limit_exceeded"}}"#,
    );
    let layer = BreakerLayer::new();
    let handle = layer.handle();
    let mut svc = ServiceBuilder::new().layer(layer).service(inner.clone());
    for _ in 0..200 {
        match svc.ready().await.unwrap().call(openai()).await {
            Ok(res) => {
                assert_eq!(res.status(), 429);
                let c = res
                    .extensions()
                    .get::<Classification>()
                    .expect("classified");
                assert_eq!(c.verdict, Verdict::Throttled);
            }
            Err(e) => assert!(e.is::<Throttled>(), "{e}"),
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    assert!(inner.calls() > 20);
    assert_eq!(
        handle.breaker_status("api.openai.com"),
        Some(BreakerStatus::Closed)
    );
    assert!(handle.rejections().gate > 0);
    assert_eq!(handle.rejections().breaker, 0);
}

#[tokio::test(start_paused = true)]
async fn a_retry_after_gates_only_that_model_for_that_long() {
    let inner = Scripted::new(|req| {
        let model = req.extensions().get::<Scope>().cloned();
        let throttled = model == Some(Scope::new().model("gpt-4o"));
        let mut b = Response::builder();
        if throttled {
            b = b.status(429).header("retry-after", "7");
        }
        Ok(b.body(String::new()).unwrap())
    });
    let mut svc = ServiceBuilder::new()
        .layer(BreakerLayer::new())
        .service(inner.clone());
    let res = svc
        .ready()
        .await
        .unwrap()
        .call(for_model("gpt-4o"))
        .await
        .unwrap();
    assert_eq!(res.status(), 429);
    let err = svc
        .ready()
        .await
        .unwrap()
        .call(for_model("gpt-4o"))
        .await
        .unwrap_err();
    let throttled = err.downcast_ref::<Throttled>().unwrap();
    assert_eq!(throttled.scope(), "api.openai.com/gpt-4o");
    assert!(throttled.retry_after() <= Duration::from_secs(7));
    assert!(throttled.retry_after() > Duration::from_millis(6900));
    // Another model on the same account still passes.
    let res = svc
        .ready()
        .await
        .unwrap()
        .call(for_model("gpt-4o-mini"))
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(inner.calls(), 2);
    tokio::time::advance(Duration::from_millis(6900)).await;
    assert!(
        svc.ready()
            .await
            .unwrap()
            .call(for_model("gpt-4o"))
            .await
            .is_err()
    );
    tokio::time::advance(Duration::from_millis(101)).await;
    // Reopens with no probe: the call goes through.
    let res = svc
        .ready()
        .await
        .unwrap()
        .call(for_model("gpt-4o"))
        .await
        .unwrap();
    assert_eq!(res.status(), 429);
    assert_eq!(inner.calls(), 3);
}

#[tokio::test(start_paused = true)]
async fn a_spend_cap_parks_on_the_first_call_and_nothing_more_is_sent() {
    let inner = Scripted::status(
        429,
        &[("content-type", "application/json")],
        r#"{"type":"error","error":{"type":"rate_limit_error","message":"You have reached your API usage limits.","details":{"error_code":"enforced_spend_limit_reached"}}}"#,
    );
    let (log, on_event) = recorder();
    let layer = BreakerLayer::builder().on_event(on_event).build().unwrap();
    let handle = layer.handle();
    let mut svc = ServiceBuilder::new().layer(layer).service(inner.clone());
    let res = svc.ready().await.unwrap().call(openai()).await.unwrap();
    assert_eq!(res.status(), 429);
    for minute in 0..10 {
        let err = svc.ready().await.unwrap().call(openai()).await.unwrap_err();
        let parked = err.downcast_ref::<Parked>().expect("parked");
        assert_eq!(parked.scope(), "api.openai.com");
        // No reset named: the default park of one hour, counting down.
        assert_eq!(
            parked.retry_after(),
            Duration::from_secs(3600 - 60 * minute)
        );
        tokio::time::advance(Duration::from_secs(60)).await;
    }
    assert_eq!(inner.calls(), 1);
    assert_eq!(handle.rejections().park, 10);
    assert_eq!(
        handle.breaker_status("api.openai.com"),
        Some(BreakerStatus::Closed)
    );
    assert!(
        log.lock()
            .unwrap()
            .iter()
            .any(|l| l.contains("park active->parked")),
        "{:?}",
        log.lock().unwrap()
    );
    assert!(handle.unpark("api.openai.com"));
    let _ = svc.ready().await.unwrap().call(openai()).await.unwrap();
    assert_eq!(inner.calls(), 2);
}

#[tokio::test(start_paused = true)]
async fn the_caller_receives_the_error_body_whole() {
    let body = format!(r#"{{"error":{{"message":"{}"}}}}"#, "x".repeat(40_000));
    let leaked: &'static str = Box::leak(body.clone().into_boxed_str());
    let inner = Scripted::status(500, &[], leaked);
    let mut svc = ServiceBuilder::new()
        .layer(BreakerLayer::new())
        .service(inner);
    let res = svc.ready().await.unwrap().call(openai()).await.unwrap();
    assert_eq!(
        res.extensions().get::<Classification>().unwrap().verdict,
        Verdict::Availability
    );
    let bytes = res.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(bytes, body.as_bytes());
}

#[tokio::test(start_paused = true)]
async fn transport_errors_count_and_levee_rejections_from_below_do_not() {
    let timeouts =
        Scripted::new(|_| Err(Box::new(tower::timeout::error::Elapsed::new()) as BoxError));
    let layer = BreakerLayer::new();
    let handle = layer.handle();
    let mut svc = ServiceBuilder::new().layer(layer).service(timeouts.clone());
    for _ in 0..5 {
        let err = svc.ready().await.unwrap().call(openai()).await.unwrap_err();
        assert!(err.is::<tower::timeout::error::Elapsed>());
    }
    assert_eq!(
        handle.breaker_status("api.openai.com"),
        Some(BreakerStatus::Open)
    );

    let below = Scripted::new(|_| {
        Err(Box::new(CircuitOpen::new("inner", Duration::from_secs(1))) as BoxError)
    });
    let layer = BreakerLayer::new();
    let handle = layer.handle();
    let mut svc = ServiceBuilder::new().layer(layer).service(below.clone());
    for _ in 0..20 {
        let _ = svc.ready().await.unwrap().call(openai()).await.unwrap_err();
    }
    assert_eq!(below.calls(), 20);
    assert_eq!(
        handle.breaker_status("api.openai.com"),
        Some(BreakerStatus::Closed)
    );
}

/// A service whose calls never complete until released.
#[derive(Clone)]
struct Hanging {
    calls: Arc<AtomicUsize>,
}

impl Service<Request<String>> for Hanging {
    type Response = Response<String>;
    type Error = Infallible;
    type Future = std::future::Pending<Result<Response<String>, Infallible>>;
    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Infallible>> {
        std::task::Poll::Ready(Ok(()))
    }
    fn call(&mut self, _: Request<String>) -> Self::Future {
        self.calls.fetch_add(1, Ordering::SeqCst);
        std::future::pending()
    }
}

fn fast_cooldown() -> BreakerConfig {
    BreakerConfig::builder()
        .cooldown(levee_core::breaker::Cooldown::Custom(Arc::new(|_| {
            Duration::from_secs(10)
        })))
        .probe_timeout(Duration::from_secs(30))
        .build()
        .unwrap()
}

/// A breaker over a provider that never answers, opened and past its
/// 10 s cool-off: the next call is the probe.
async fn cooled_off_over_a_hanging_provider() -> (tower_levee::breaker::Breaker<Hanging>, Hanging) {
    let hanging = Hanging {
        calls: Arc::new(AtomicUsize::new(0)),
    };
    let layer = BreakerLayer::builder()
        .breaker(fast_cooldown())
        .build()
        .unwrap();
    layer.handle().open("api.openai.com");
    let svc = ServiceBuilder::new().layer(layer).service(hanging.clone());
    tokio::time::advance(Duration::from_secs(11)).await;
    (svc, hanging)
}

#[tokio::test(start_paused = true)]
async fn a_dropped_probe_gives_its_slot_back() {
    let (mut svc, hanging) = cooled_off_over_a_hanging_provider().await;
    let probe = svc.ready().await.unwrap().call(openai());
    let mut probe = tokio_test::task::spawn(probe);
    assert!(probe.poll().is_pending());
    assert_eq!(hanging.calls.load(Ordering::SeqCst), 1);
    // While the probe is out, every other call is refused.
    let err = svc.ready().await.unwrap().call(openai()).await.unwrap_err();
    assert!(err.is::<CircuitOpen>());
    drop(probe);
    // The caller cancelled: the slot is free again.
    let mut next = tokio_test::task::spawn(svc.ready().await.unwrap().call(openai()));
    assert!(next.poll().is_pending(), "admitted as the next probe");
    assert_eq!(hanging.calls.load(Ordering::SeqCst), 2);
}

#[tokio::test(start_paused = true)]
async fn a_hung_probe_loses_its_lease() {
    let (mut svc, hanging) = cooled_off_over_a_hanging_provider().await;
    let mut hung = tokio_test::task::spawn(svc.ready().await.unwrap().call(openai()));
    assert!(hung.poll().is_pending());
    tokio::time::advance(Duration::from_secs(29)).await;
    assert!(
        svc.ready()
            .await
            .unwrap()
            .call(openai())
            .await
            .unwrap_err()
            .is::<CircuitOpen>()
    );
    tokio::time::advance(Duration::from_secs(2)).await;
    let mut next = tokio_test::task::spawn(svc.ready().await.unwrap().call(openai()));
    assert!(
        next.poll().is_pending(),
        "the lease expired: a new probe goes out"
    );
    assert_eq!(hanging.calls.load(Ordering::SeqCst), 2);
}

#[tokio::test(start_paused = true)]
async fn every_transition_is_an_event_with_its_reason() {
    let inner = Scripted::status(503, &[], "");
    let (log, on_event) = recorder();
    let layer = BreakerLayer::builder().on_event(on_event).build().unwrap();
    let handle = layer.handle();
    let mut svc = ServiceBuilder::new().layer(layer).service(inner);
    for _ in 0..5 {
        let _ = svc.ready().await.unwrap().call(openai()).await;
    }
    let log = log.lock().unwrap().clone();
    assert_eq!(log.len(), 1, "{log:?}");
    assert!(
        log[0].starts_with("api.openai.com breaker closed->open: opened after 5 consecutive"),
        "{log:?}"
    );
    assert!(
        log[0].contains("status:503") || log[0].contains(":503"),
        "{log:?}"
    );
    let breakdown = handle.failure_breakdown("api.openai.com").unwrap();
    assert_eq!(breakdown.values().sum::<u32>(), 5, "{breakdown:?}");
    handle.close("api.openai.com");
    assert_eq!(
        handle.breaker_status("api.openai.com"),
        Some(BreakerStatus::Closed)
    );
}

#[tokio::test(start_paused = true)]
async fn the_health_listing_shows_each_mechanism_and_scope() {
    let inner = Scripted::new(|req| {
        let gpt4o = req.extensions().get::<Scope>() == Some(&Scope::new().model("gpt-4o"));
        Ok(Response::builder()
            .status(if gpt4o { 429 } else { 200 })
            .header("retry-after", "30")
            .body(String::new())
            .unwrap())
    });
    let layer = BreakerLayer::new();
    let handle = layer.handle();
    let mut svc = ServiceBuilder::new().layer(layer).service(inner);
    let _ = svc.ready().await.unwrap().call(for_model("gpt-4o")).await;
    let _ = svc.ready().await.unwrap().call(for_model("o3")).await;
    tokio::time::advance(Duration::from_secs(10)).await;
    let states = handle.states();
    let gate = states
        .iter()
        .find(|s| s.scope == "api.openai.com/gpt-4o")
        .expect("gate listed");
    assert_eq!(gate.state, "gated");
    assert_eq!(gate.retry_after, Some(Duration::from_secs(20)));
    assert_eq!(gate.gated_last_hour, Some(Duration::from_secs(10)));
    let breaker = states.iter().find(|s| s.scope == "api.openai.com").unwrap();
    assert_eq!(breaker.state, "closed");
}

fn azure(deployment: &str) -> Request<String> {
    Request::post(format!(
        "https://res.openai.azure.com/openai/deployments/{deployment}/chat/completions?api-version=2024-10-21"
    ))
    .body(String::new())
    .unwrap()
}

/// Scopes named from the URI alone (the default), with more deployments than
/// a clone remembers: each deployment keeps its own gate and, isolated by
/// model, its own breaker, and the scope names come from the path.
#[tokio::test(start_paused = true)]
async fn deployments_in_the_path_get_their_own_scopes_on_one_clone() {
    let inner = Scripted::new(|req| {
        let path = req.uri().path();
        let mut b = Response::builder();
        if path.contains("/deployments/slow/") {
            b = b.status(429).header("retry-after", "7");
        } else if path.contains("/deployments/dead/") {
            b = b.status(503);
        }
        // A success carries a body: an empty one is a failure of its own.
        Ok(b.body("{}".to_owned()).unwrap())
    });
    let layer = BreakerLayer::builder()
        .isolate_by_model(true)
        .build()
        .unwrap();
    let handle = layer.handle();
    let mut svc = ServiceBuilder::new().layer(layer).service(inner.clone());
    let mut call =
        async |deployment: &str| svc.ready().await.unwrap().call(azure(deployment)).await;

    for _ in 0..6 {
        for deployment in ["ok", "slow", "dead"] {
            let _ = call(deployment).await;
        }
    }
    let err = call("slow").await.unwrap_err();
    let throttled = err.downcast_ref::<Throttled>().expect("gated");
    assert_eq!(throttled.scope(), "res.openai.azure.com/slow");
    let err = call("dead").await.unwrap_err();
    let open = err.downcast_ref::<CircuitOpen>().expect("open");
    assert_eq!(open.scope(), "res.openai.azure.com/dead");
    assert_eq!(call("ok").await.unwrap().status(), 200);
    // 6 to `ok`, 1 to `slow` (then gated), 5 to `dead` (then open), 1 more `ok`.
    assert_eq!(inner.calls(), 6 + 1 + 5 + 1);
    assert_eq!(
        handle.breaker_status("res.openai.azure.com/dead"),
        Some(BreakerStatus::Open)
    );
    assert_eq!(
        handle.breaker_status("res.openai.azure.com/ok"),
        Some(BreakerStatus::Closed)
    );
}
