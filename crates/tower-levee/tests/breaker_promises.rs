//! What the breaker promises about counting, kept from a scope's very
//! first call: every outcome of a counted call reaches the tripping rule.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::{Request, Response};
use levee_core::breaker::{BreakerConfig, BreakerStatus, TrippingPolicy};
use tower::{Service, ServiceExt};
use tower_layer::Layer;
use tower_levee::BreakerLayer;

/// Waits for `svc` to be ready and sends it `req`.
async fn send<S: Service<R>, R>(svc: &mut S, req: R) -> Result<S::Response, S::Error> {
    svc.ready().await?.call(req).await
}

/// A provider that answers every call with the status it is set to (and a
/// body: an empty 2xx is a failure of its own).
fn provider(
    status: Arc<AtomicU16>,
) -> impl Service<Request<String>, Response = Response<String>, Error = Infallible, Future: Send> + Clone
{
    tower::service_fn(move |_req: Request<String>| {
        let status = status.load(Ordering::SeqCst);
        async move {
            Ok::<_, Infallible>(
                Response::builder()
                    .status(status)
                    .body("{}".to_owned())
                    .unwrap(),
            )
        }
    })
}

fn call_to(host: &str) -> Request<String> {
    Request::post(format!("https://{host}/v1/chat/completions"))
        .body(String::new())
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn the_first_successes_of_a_new_domain_count_toward_its_rolling_window() {
    let status = Arc::new(AtomicU16::new(200));
    let config = BreakerConfig::builder()
        .rolling(Duration::from_secs(30), 10, 0.5)
        .build()
        .unwrap();
    let layer = BreakerLayer::builder().breaker(config).build().unwrap();
    let handle = layer.handle();
    let mut svc = layer.layer(provider(status.clone()));
    for _ in 0..6 {
        send(&mut svc, call_to("api.openai.com")).await.unwrap();
    }
    status.store(503, Ordering::SeqCst);
    for _ in 0..4 {
        send(&mut svc, call_to("api.openai.com")).await.unwrap();
    }
    // 4 failures in 10 calls: under the 50% ratio.
    assert_eq!(
        handle.breaker_status("api.openai.com"),
        Some(BreakerStatus::Closed)
    );
    // Two more make 6 of 12: the ratio is met.
    for _ in 0..2 {
        send(&mut svc, call_to("api.openai.com")).await.unwrap();
    }
    assert_eq!(
        handle.breaker_status("api.openai.com"),
        Some(BreakerStatus::Open)
    );
}

/// The failure domain the rolling-window tests call.
const OPENAI: &str = "api.openai.com";

/// A layer whose breakers trip on `ratio` of at least `min_calls` calls
/// within `window`.
fn rolling_layer(window: Duration, min_calls: u32, ratio: f64) -> BreakerLayer {
    let config = BreakerConfig::builder()
        .rolling(window, min_calls, ratio)
        .build()
        .unwrap();
    BreakerLayer::builder().breaker(config).build().unwrap()
}

/// Sends `n` calls to [`OPENAI`], each answered.
async fn send_times<S>(svc: &mut S, n: usize)
where
    S: Service<Request<String>>,
    S::Error: std::fmt::Debug,
{
    for _ in 0..n {
        send(svc, call_to(OPENAI)).await.unwrap();
    }
}

#[tokio::test(start_paused = true)]
async fn successes_in_a_rolling_window_leave_it_with_the_bucket_they_fell_in() {
    let status = Arc::new(AtomicU16::new(200));
    let layer = rolling_layer(Duration::from_secs(10), 4, 0.5);
    let (handle, mut svc) = (layer.handle(), layer.layer(provider(status.clone())));
    send_times(&mut svc, 8).await;
    tokio::time::advance(Duration::from_secs(5)).await;
    send_times(&mut svc, 2).await;
    // The first 8 leave the 10 s window; the 2 of t = 5 s stay.
    tokio::time::advance(Duration::from_millis(5_200)).await;
    status.store(503, Ordering::SeqCst);
    send_times(&mut svc, 1).await;
    assert_eq!(
        handle.breaker_status(OPENAI),
        Some(BreakerStatus::Closed),
        "1 failure in 3 calls"
    );
    send_times(&mut svc, 1).await;
    assert_eq!(
        handle.breaker_status(OPENAI),
        Some(BreakerStatus::Open),
        "2 failures in 4 calls"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn successes_counted_on_many_threads_at_once_all_reach_the_window() {
    let status = Arc::new(AtomicU16::new(200));
    // Far longer than the test: every call stays in the window.
    let layer = rolling_layer(Duration::from_secs(3600), 1, 0.5);
    let handle = layer.handle();
    // A service per task, as a server has, on both workers at once.
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let mut svc = layer.layer(provider(status.clone()));
            tokio::spawn(async move { send_times(&mut svc, 250).await })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    status.store(503, Ordering::SeqCst);
    let mut svc = layer.layer(provider(status.clone()));
    send_times(&mut svc, 1999).await;
    assert_eq!(
        handle.breaker_status(OPENAI),
        Some(BreakerStatus::Closed),
        "1999 failures in 3999 calls"
    );
    send_times(&mut svc, 1).await;
    assert_eq!(
        handle.breaker_status(OPENAI),
        Some(BreakerStatus::Open),
        "2000 failures in 4000 calls"
    );
}

#[tokio::test(start_paused = true)]
async fn a_breaker_opened_and_closed_by_hand_forgets_the_successes_of_its_window() {
    let status = Arc::new(AtomicU16::new(200));
    let layer = rolling_layer(Duration::from_secs(30), 2, 0.5);
    let (handle, mut svc) = (layer.handle(), layer.layer(provider(status.clone())));
    send_times(&mut svc, 10).await;
    handle.open(OPENAI);
    handle.close(OPENAI);
    status.store(503, Ordering::SeqCst);
    send_times(&mut svc, 1).await;
    assert_eq!(
        handle.breaker_status(OPENAI),
        Some(BreakerStatus::Closed),
        "1 call is under the minimum"
    );
    send_times(&mut svc, 1).await;
    assert_eq!(
        handle.breaker_status(OPENAI),
        Some(BreakerStatus::Open),
        "2 failures in 2 calls: the 10 successes went with the window"
    );
}

/// Counts the successes it hears per key.
#[derive(Debug, Default)]
struct Successes(Mutex<HashMap<String, u32>>);

impl Successes {
    fn of(&self, key: &str) -> u32 {
        self.0.lock().unwrap().get(key).copied().unwrap_or(0)
    }
}

impl TrippingPolicy for Successes {
    fn on_success(&self, key: &str) {
        *self.0.lock().unwrap().entry(key.to_owned()).or_default() += 1;
    }
    fn on_failure(&self, _key: &str) -> bool {
        false
    }
    fn reset(&self, _key: &str) {}
}

#[tokio::test(start_paused = true)]
async fn a_custom_policy_hears_every_success_of_a_new_domain_and_of_one_recreated_after_eviction() {
    let policy = Arc::new(Successes::default());
    let config = BreakerConfig::builder()
        .policy(policy.clone())
        .build()
        .unwrap();
    // One key at most: calling a second domain evicts the first (idle).
    let layer = BreakerLayer::builder()
        .breaker(config)
        .max_keys(1)
        .build()
        .unwrap();
    let mut svc = layer.layer(provider(Arc::new(AtomicU16::new(200))));
    for _ in 0..3 {
        send(&mut svc, call_to("a.example")).await.unwrap();
    }
    assert_eq!(policy.of("a.example"), 3);
    send(&mut svc, call_to("b.example")).await.unwrap();
    assert_eq!(policy.of("b.example"), 1);
    for _ in 0..2 {
        send(&mut svc, call_to("a.example")).await.unwrap();
    }
    assert_eq!(
        policy.of("a.example"),
        5,
        "a recreated domain's successes are heard too"
    );
}

#[tokio::test(start_paused = true)]
async fn an_event_on_a_domain_shared_by_models_names_the_model_whose_call_caused_it() {
    use tower_levee::breaker::{Scope, ScopeEvent};
    /// An event's scope, new state and model.
    type Seen = (String, String, Option<String>);
    let events: Arc<Mutex<Vec<Seen>>> = Arc::default();
    let seen = events.clone();
    let layer = BreakerLayer::builder()
        .on_event(move |e: &ScopeEvent| {
            seen.lock().unwrap().push((
                e.scope().to_owned(),
                e.to().as_str().to_owned(),
                e.model().map(str::to_owned),
            ));
        })
        .build()
        .unwrap();
    let handle = layer.handle();
    let status = Arc::new(AtomicU16::new(503));
    let mut svc = layer.layer(provider(status.clone()));
    let for_model = |model: &'static str| {
        let mut req = call_to("api.openai.com");
        req.extensions_mut().insert(Scope::new().model(model));
        req
    };
    // gpt-4o fails four times, o3 the fifth: o3's call opened the breaker.
    for _ in 0..4 {
        send(&mut svc, for_model("gpt-4o")).await.unwrap();
    }
    send(&mut svc, for_model("o3")).await.unwrap();
    assert_eq!(
        handle.breaker_status("api.openai.com"),
        Some(BreakerStatus::Open)
    );
    handle.close("api.openai.com");
    status.store(429, Ordering::SeqCst);
    send(&mut svc, for_model("gpt-4o")).await.unwrap();
    let events = events.lock().unwrap().clone();
    assert_eq!(
        events,
        [
            ("api.openai.com".into(), "open".into(), Some("o3".into())),
            ("api.openai.com".into(), "closed".into(), None),
            (
                "api.openai.com/gpt-4o".into(),
                "gated".into(),
                Some("gpt-4o".into())
            ),
        ]
    );
}

#[test]
fn a_hand_built_configuration_is_validated_when_the_layer_is_built() {
    use levee_core::breaker::Tripping;
    use levee_core::gate::GateConfig;
    use levee_core::park::ParkConfig;
    // A configuration changed field by field skips the builder's check.
    let mut breaker = BreakerConfig::default();
    breaker.tripping = Tripping::Rolling {
        window: Duration::from_secs(30),
        min_calls: 10,
        failure_ratio: 1.5,
    };
    let err = BreakerLayer::builder()
        .breaker(breaker)
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("breaker.failure_ratio"), "{err}");
    let mut gate = GateConfig::default();
    gate.jitter = 2.0;
    let err = BreakerLayer::builder().gate(gate).build().unwrap_err();
    assert!(err.to_string().contains("gate.jitter"), "{err}");
    let mut park = ParkConfig::default();
    park.default_park = Duration::ZERO;
    let err = BreakerLayer::builder().park(park).build().unwrap_err();
    assert!(err.to_string().contains("park.default_park"), "{err}");
}

/// A provider answering 200 with `body`.
fn answering(
    body: &'static str,
) -> impl Service<Request<String>, Response = Response<String>, Error = Infallible, Future: Send> + Clone
{
    tower::service_fn(move |_req: Request<String>| async move {
        Ok::<_, Infallible>(Response::new(body.to_owned()))
    })
}

#[tokio::test(start_paused = true)]
async fn an_empty_2xx_answer_to_a_post_counts_as_an_availability_failure_when_asked() {
    use levee_core::classify::{Classification, Verdict};
    let layer = BreakerLayer::builder()
        .empty_body_is_failure(true)
        .build()
        .unwrap();
    let handle = layer.handle();
    let mut svc = layer.layer(answering(""));
    let res = send(&mut svc, call_to("api.openai.com")).await.unwrap();
    assert_eq!(res.status(), 200, "the caller still gets the answer");
    let c = res
        .extensions()
        .get::<Classification>()
        .expect("marked as a failure");
    assert_eq!(
        (c.verdict, c.reason.as_str()),
        (Verdict::Availability, "response:empty_body")
    );
    for _ in 0..4 {
        send(&mut svc, call_to("api.openai.com")).await.unwrap();
    }
    assert_eq!(
        handle.breaker_status("api.openai.com"),
        Some(BreakerStatus::Open)
    );
}

#[tokio::test(start_paused = true)]
async fn an_empty_body_is_no_failure_for_a_get_a_204_or_with_the_switch_off() {
    use levee_core::classify::Classification;
    let on = || {
        BreakerLayer::builder()
            .empty_body_is_failure(true)
            .build()
            .unwrap()
    };
    let get = || {
        Request::get("https://api.openai.com/v1/models")
            .body(String::new())
            .unwrap()
    };
    let mut svc = on().layer(answering(""));
    let res = send(&mut svc, get()).await.unwrap();
    assert!(
        res.extensions().get::<Classification>().is_none(),
        "a GET may be empty"
    );

    let no_content = tower::service_fn(|_req: Request<String>| async {
        Ok::<_, Infallible>(Response::builder().status(204).body(String::new()).unwrap())
    });
    let mut svc = on().layer(no_content);
    let res = send(&mut svc, call_to("api.openai.com")).await.unwrap();
    assert!(
        res.extensions().get::<Classification>().is_none(),
        "204 is empty by definition"
    );

    let off = BreakerLayer::builder()
        .empty_body_is_failure(false)
        .build()
        .unwrap();
    let mut svc = off.layer(answering(""));
    let res = send(&mut svc, call_to("api.openai.com")).await.unwrap();
    assert!(
        res.extensions().get::<Classification>().is_none(),
        "off by default"
    );

    let mut svc = on().layer(answering("{\"choices\":[]}"));
    let res = send(&mut svc, call_to("api.openai.com")).await.unwrap();
    assert!(
        res.extensions().get::<Classification>().is_none(),
        "a body is a body"
    );
}

#[tokio::test(start_paused = true)]
async fn a_peeked_2xx_body_that_ends_empty_is_a_failure_unless_the_hook_says_otherwise() {
    use levee_core::classify::{Classification, Verdict};
    // A body of unknown size that ends with no byte, read because a
    // soft-failure hook wants the 2xx body.
    let unknown_size = tower::service_fn(|_req: Request<String>| async {
        Ok::<_, Infallible>(Response::new(EndsAtOnce))
    });
    let layer = BreakerLayer::builder()
        .empty_body_is_failure(true)
        .detect_soft_failure(|_, _| None)
        .build()
        .unwrap();
    let mut svc = layer.layer(unknown_size);
    let res = send(&mut svc, call_to("api.openai.com")).await.unwrap();
    let c = res.extensions().get::<Classification>().expect("a failure");
    assert_eq!(c.verdict, Verdict::Availability);
}

/// A body with no frame at all, whose size is not known ahead.
struct EndsAtOnce;

impl http_body::Body for EndsAtOnce {
    type Data = bytes::Bytes;
    type Error = Infallible;
    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<bytes::Bytes>, Infallible>>> {
        std::task::Poll::Ready(None)
    }
}
