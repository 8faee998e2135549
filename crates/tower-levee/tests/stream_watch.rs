//! Verdicts after the status line: a 2xx stream is watched as it passes and
//! its outcome reaches the breaker when it ends. Paused time, in memory.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body::Body;
use http_body_util::BodyExt;
use levee_core::breaker::{BreakerConfig, BreakerStatus, Cooldown};
use levee_core::classify::{Classification, Verdict};
use proptest::prelude::*;
use tokio::sync::mpsc;
use tower::{Service, ServiceBuilder, ServiceExt};
use tower_levee::breaker::{BreakerHandle, BreakerLayer, CircuitOpen};

mod channel_body;
use channel_body::{ChannelBody, Feed, send};

/// An SSE provider whose every call hands the test a sender for its body.
#[derive(Clone)]
struct Streaming {
    calls: Arc<AtomicUsize>,
    feeds: mpsc::UnboundedSender<Feed>,
}

impl Service<Request<()>> for Streaming {
    type Response = Response<ChannelBody>;
    type Error = Infallible;
    type Future = std::future::Ready<Result<Response<ChannelBody>, Infallible>>;
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }
    fn call(&mut self, _: Request<()>) -> Self::Future {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let (tx, rx) = mpsc::unbounded_channel();
        let _ = self.feeds.send(tx);
        std::future::ready(Ok(Response::builder()
            .header("content-type", "text/event-stream")
            .body(ChannelBody(rx))
            .unwrap()))
    }
}

fn provider() -> (Streaming, mpsc::UnboundedReceiver<Feed>) {
    let (feeds, rx) = mpsc::unbounded_channel();
    (
        Streaming {
            calls: Arc::new(AtomicUsize::new(0)),
            feeds,
        },
        rx,
    )
}

fn req() -> Request<()> {
    Request::post("https://api.anthropic.com/v1/messages")
        .body(())
        .unwrap()
}

const START: &str = "event: message_start\ndata: {\"type\":\"message_start\"}\n\n";
const DELTA: &str = "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"text\":\"Hi\"}}\n\n";
const OVERLOADED: &str = "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n";
const STOP: &str = "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";

async fn read_all<B: Body<Data = Bytes>>(body: B) -> Result<Vec<u8>, B::Error> {
    Ok(body.collect().await?.to_bytes().to_vec())
}

fn one_probe_after_10s() -> BreakerConfig {
    BreakerConfig::builder()
        .cooldown(Cooldown::Custom(Arc::new(|_| Duration::from_secs(10))))
        .build()
        .unwrap()
}

async fn stream_once<S>(
    svc: &mut S,
    feeds: &mut mpsc::UnboundedReceiver<Feed>,
    chunks: &[&'static str],
    end: Option<&'static str>,
) -> Vec<u8>
where
    S: Service<
            Request<()>,
            Response = Response<tower_levee::body::ResponseBody<ChannelBody>>,
            Error = tower::BoxError,
        >,
{
    // The breaker holds a stream until its first content, so the provider's
    // frames are sent before the response is awaited, as they would arrive.
    let call = svc.ready().await.unwrap().call(req());
    let feed = feeds.recv().await.unwrap();
    send(&feed, chunks);
    if let Some(e) = end {
        feed.send(Err(e)).unwrap();
    }
    drop(feed);
    let res = call.await.unwrap();
    // A cut stream ends in an error: the bytes are checked by the other tests.
    read_all(res.into_body()).await.unwrap_or_default()
}

#[tokio::test(start_paused = true)]
async fn an_in_band_overloaded_error_after_three_chunks_counts_and_opens_the_breaker() {
    let (inner, mut feeds) = provider();
    let layer = BreakerLayer::new();
    let handle = layer.handle();
    let mut svc = ServiceBuilder::new().layer(layer).service(inner.clone());
    for _ in 0..5 {
        let bytes = stream_once(
            &mut svc,
            &mut feeds,
            &[START, DELTA, DELTA, OVERLOADED],
            None,
        )
        .await;
        assert_eq!(
            bytes,
            [START, DELTA, DELTA, OVERLOADED].concat().as_bytes(),
            "every byte reaches the caller"
        );
    }
    assert_eq!(
        handle.breaker_status("api.anthropic.com"),
        Some(BreakerStatus::Open)
    );
    assert_eq!(handle.upstream_failures(Verdict::Availability), 5);
    assert!(
        svc.ready()
            .await
            .unwrap()
            .call(req())
            .await
            .unwrap_err()
            .is::<CircuitOpen>()
    );
    assert_eq!(inner.calls.load(Ordering::SeqCst), 5);
}

#[tokio::test(start_paused = true)]
async fn a_stream_cut_before_its_end_is_an_availability_failure() {
    let (inner, mut feeds) = provider();
    let layer = BreakerLayer::new();
    let handle = layer.handle();
    let mut svc = ServiceBuilder::new().layer(layer).service(inner);
    // Ended without message_stop, and once with a body error.
    stream_once(&mut svc, &mut feeds, &[START, DELTA], None).await;
    stream_once(&mut svc, &mut feeds, &[START], Some("connection reset")).await;
    assert_eq!(handle.upstream_failures(Verdict::Availability), 2);
    let breakdown = handle.failure_breakdown("api.anthropic.com").unwrap();
    assert!(
        breakdown.contains_key("stream:eof_before_done"),
        "{breakdown:?}"
    );
    assert!(breakdown.contains_key("stream:body_error"), "{breakdown:?}");
}

#[tokio::test(start_paused = true)]
async fn a_complete_stream_is_a_success_that_resets_the_count() {
    let (inner, mut feeds) = provider();
    let layer = BreakerLayer::new();
    let handle = layer.handle();
    let mut svc = ServiceBuilder::new().layer(layer).service(inner);
    for _ in 0..4 {
        stream_once(&mut svc, &mut feeds, &[START, DELTA], None).await;
    }
    let bytes = stream_once(&mut svc, &mut feeds, &[START, DELTA, STOP], None).await;
    assert_eq!(bytes, [START, DELTA, STOP].concat().as_bytes());
    assert!(
        handle
            .failure_breakdown("api.anthropic.com")
            .unwrap()
            .is_empty(),
        "a success clears the bucket"
    );
    // Four more cuts do not open it: the streak restarted.
    for _ in 0..4 {
        stream_once(&mut svc, &mut feeds, &[START], None).await;
    }
    assert_eq!(
        handle.breaker_status("api.anthropic.com"),
        Some(BreakerStatus::Closed)
    );
}

#[tokio::test(start_paused = true)]
async fn a_long_stream_holds_its_probe_slot_until_it_ends() {
    let (inner, mut feeds) = provider();
    let layer = BreakerLayer::builder()
        .breaker(one_probe_after_10s())
        .build()
        .unwrap();
    let handle: BreakerHandle = layer.handle();
    let mut svc = ServiceBuilder::new().layer(layer).service(inner.clone());
    handle.open("api.anthropic.com");
    tokio::time::advance(Duration::from_secs(11)).await;
    let probe = svc.ready().await.unwrap().call(req());
    let feed = feeds.recv().await.unwrap();
    send(&feed, &[START, DELTA]);
    let mut body = probe.await.unwrap().into_body();
    for _ in 0..30 {
        // Half a minute of streaming: the slot stays taken.
        tokio::time::advance(Duration::from_secs(1)).await;
        send(&feed, &[DELTA]);
        assert!(
            svc.ready()
                .await
                .unwrap()
                .call(req())
                .await
                .unwrap_err()
                .is::<CircuitOpen>()
        );
    }
    assert_eq!(
        handle.breaker_status("api.anthropic.com"),
        Some(BreakerStatus::HalfOpen)
    );
    send(&feed, &[STOP]);
    drop(feed);
    while body.frame().await.is_some() {}
    // The probe's verdict is the stream's: closed.
    assert_eq!(
        handle.breaker_status("api.anthropic.com"),
        Some(BreakerStatus::Closed)
    );
    assert_eq!(inner.calls.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn dropping_a_streamed_body_early_is_neutral_and_frees_the_probe() {
    let (inner, mut feeds) = provider();
    let layer = BreakerLayer::builder()
        .breaker(one_probe_after_10s())
        .build()
        .unwrap();
    let handle = layer.handle();
    let mut svc = ServiceBuilder::new().layer(layer).service(inner);
    handle.open("api.anthropic.com");
    tokio::time::advance(Duration::from_secs(11)).await;
    let probe = svc.ready().await.unwrap().call(req());
    let feed = feeds.recv().await.unwrap();
    send(&feed, &[START, DELTA]);
    drop(probe.await.unwrap());
    assert_eq!(
        handle.breaker_status("api.anthropic.com"),
        Some(BreakerStatus::HalfOpen)
    );
    assert_eq!(
        handle.upstream_failures(Verdict::Availability),
        0,
        "not a failure"
    );
    let next = svc.ready().await.unwrap().call(req());
    let feed = feeds.try_recv().expect("the slot was handed back");
    send(&feed, &[START, DELTA]);
    next.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_slow_first_byte_counts_as_a_failure_even_when_the_call_succeeds() {
    let slow = tower::service_fn(|_req: Request<()>| async {
        tokio::time::sleep(Duration::from_secs(8)).await;
        Ok::<_, Infallible>(Response::new(String::from("{}")))
    });
    let config = BreakerConfig::builder()
        .threshold(2)
        .slow_call(Duration::from_secs(5))
        .build()
        .unwrap();
    let layer = BreakerLayer::builder().breaker(config).build().unwrap();
    let handle = layer.handle();
    let mut svc = ServiceBuilder::new().layer(layer).service(slow);
    for _ in 0..2 {
        let res = svc.ready().await.unwrap().call(req()).await.unwrap();
        assert_eq!(res.status(), 200, "the caller still gets the answer");
    }
    assert_eq!(
        handle.breaker_status("api.anthropic.com"),
        Some(BreakerStatus::Open)
    );
    let breakdown = handle.failure_breakdown("api.anthropic.com").unwrap();
    assert_eq!(breakdown.values().sum::<u32>(), 2, "{breakdown:?}");
    assert!(
        breakdown.keys().all(|k| k.contains("slow")),
        "{breakdown:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_models_own_slow_threshold_alone_times_that_models_calls_and_no_others() {
    let slow = tower::service_fn(|_req: Request<()>| async {
        tokio::time::sleep(Duration::from_secs(8)).await;
        Ok::<_, Infallible>(Response::new(String::from("{}")))
    });
    let config = BreakerConfig::builder().threshold(2).build().unwrap();
    let layer = BreakerLayer::builder()
        .breaker(config)
        .slow_call_for_model("gpt4o-prod", Duration::from_secs(5))
        .build()
        .unwrap();
    let handle = layer.handle();
    let mut svc = ServiceBuilder::new().layer(layer).service(slow);
    let to = |deployment: &str| {
        Request::get(format!(
            "https://res.openai.azure.com/openai/deployments/{deployment}/chat/completions"
        ))
        .body(())
        .unwrap()
    };
    for _ in 0..3 {
        let res = svc.ready().await.unwrap().call(to("gpt4o-mini")).await;
        assert_eq!(res.unwrap().status(), 200);
    }
    assert_eq!(
        handle.breaker_status("res.openai.azure.com"),
        Some(BreakerStatus::Closed),
        "no threshold for gpt4o-mini: not slow"
    );
    for _ in 0..2 {
        let res = svc.ready().await.unwrap().call(to("gpt4o-prod")).await;
        assert_eq!(
            res.unwrap().status(),
            200,
            "the caller still gets the answer"
        );
    }
    assert_eq!(
        handle.breaker_status("res.openai.azure.com"),
        Some(BreakerStatus::Open),
        "gpt4o-prod's own threshold: slow twice"
    );
}

#[tokio::test(start_paused = true)]
async fn the_latency_estimate_reads_back_each_domains_time_to_first_byte() {
    // Calls alternate between two accounts: one answers in 200 ms, the other
    // in 3 s (and every tenth call of the first takes 2 s).
    let calls = Arc::new(AtomicUsize::new(0));
    let inner = tower::service_fn(move |req: Request<()>| {
        let n = calls.fetch_add(1, Ordering::Relaxed);
        async move {
            let wait = match (req.uri().host(), n % 20) {
                (Some("slow.example"), _) => Duration::from_secs(3),
                (_, 0) => Duration::from_secs(2),
                _ => Duration::from_millis(200),
            };
            tokio::time::sleep(wait).await;
            Ok::<_, Infallible>(Response::new(String::from("{}")))
        }
    });
    let layer = BreakerLayer::builder()
        .latency_estimate(true)
        .build()
        .unwrap();
    let handle = layer.handle();
    let mut svc = ServiceBuilder::new().layer(layer).service(inner);
    for i in 0..200 {
        let host = if i % 2 == 0 {
            "fast.example"
        } else {
            "slow.example"
        };
        let req = Request::get(format!("https://{host}/v1/chat/completions"))
            .body(())
            .unwrap();
        svc.ready().await.unwrap().call(req).await.unwrap();
    }
    let latency = |scope: &str| {
        handle
            .states()
            .into_iter()
            .find(|s| s.scope == scope)
            .and_then(|s| s.latency)
            .expect("an estimate")
    };
    let within_half_octave = |got: Duration, want: Duration| {
        let r = got.as_secs_f64() / want.as_secs_f64();
        (0.7..1.42).contains(&r)
    };
    let fast = latency("fast.example");
    assert_eq!(fast.samples, 100);
    assert!(
        within_half_octave(fast.p50, Duration::from_millis(200)),
        "{fast:?}"
    );
    assert!(
        within_half_octave(fast.p99, Duration::from_secs(2)),
        "{fast:?}"
    );
    let slow = latency("slow.example");
    assert!(
        within_half_octave(slow.p50, Duration::from_secs(3)),
        "{slow:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn no_latency_is_estimated_unless_asked_for() {
    let inner = tower::service_fn(|_req: Request<()>| async {
        tokio::time::sleep(Duration::from_millis(200)).await;
        Ok::<_, Infallible>(Response::new(String::from("{}")))
    });
    let layer = BreakerLayer::new();
    let handle = layer.handle();
    let mut svc = ServiceBuilder::new().layer(layer).service(inner);
    svc.ready().await.unwrap().call(req()).await.unwrap();
    let states = handle.states();
    assert!(!states.is_empty());
    assert!(states.iter().all(|s| s.latency.is_none()), "{states:?}");
}

#[tokio::test(start_paused = true)]
async fn a_stream_slower_in_total_than_the_threshold_counts_as_a_failure() {
    let (inner, mut feeds) = provider();
    let config = BreakerConfig::builder().threshold(1).build().unwrap();
    let layer = BreakerLayer::builder()
        .breaker(config)
        .slow_stream(Duration::from_secs(60))
        .build()
        .unwrap();
    let handle = layer.handle();
    let mut svc = ServiceBuilder::new().layer(layer).service(inner);
    let call = svc.ready().await.unwrap().call(req());
    let feed = feeds.recv().await.unwrap();
    send(&feed, &[START, DELTA]);
    let res = call.await.unwrap();
    tokio::time::advance(Duration::from_secs(61)).await;
    send(&feed, &[STOP]);
    drop(feed);
    read_all(res.into_body()).await.unwrap();
    assert_eq!(
        handle.breaker_status("api.anthropic.com"),
        Some(BreakerStatus::Open)
    );
}

#[tokio::test(start_paused = true)]
async fn a_soft_failure_hook_turns_an_empty_2xx_into_a_failure() {
    let empty = tower::service_fn(|_req: Request<()>| async {
        Ok::<_, Infallible>(Response::new(String::new()))
    });
    let config = BreakerConfig::builder().threshold(3).build().unwrap();
    let layer = BreakerLayer::builder()
        .breaker(config)
        .detect_soft_failure(|_parts, body| {
            body.is_empty()
                .then(|| Classification::new(Verdict::Availability, "soft:empty_body"))
        })
        .build()
        .unwrap();
    let handle = layer.handle();
    let mut svc = ServiceBuilder::new().layer(layer).service(empty);
    for _ in 0..3 {
        let res = svc.ready().await.unwrap().call(req()).await.unwrap();
        assert_eq!(
            res.extensions()
                .get::<Classification>()
                .unwrap()
                .reason
                .as_str(),
            "soft:empty_body"
        );
    }
    assert_eq!(
        handle.breaker_status("api.anthropic.com"),
        Some(BreakerStatus::Open)
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// However the provider's bytes are framed, the breaker hears the same verdict.
    #[test]
    fn any_framing_of_a_stream_gives_the_breaker_the_same_verdict(
        events in proptest::collection::vec(prop_oneof![Just(DELTA), Just(OVERLOADED), Just(STOP)], 0..6),
        cuts in proptest::collection::vec(any::<proptest::sample::Index>(), 0..12),
    ) {
        let whole: String = std::iter::once(START).chain(events.iter().copied()).collect();
        let mut points: Vec<usize> = cuts.iter().map(|i| i.index(whole.len() + 1)).collect();
        points.sort_unstable();
        points.dedup();
        let verdict = |frames: Vec<Bytes>| {
            let rt = tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build().unwrap();
            rt.block_on(async move {
                let (inner, mut feeds) = provider();
                let layer = BreakerLayer::builder().breaker(BreakerConfig::builder().threshold(1).build().unwrap()).build().unwrap();
                let handle = layer.handle();
                let mut svc = ServiceBuilder::new().layer(layer).service(inner);
                let call = svc.ready().await.unwrap().call(req());
                let feed = feeds.recv().await.unwrap();
                for f in frames { feed.send(Ok(f)).unwrap(); }
                drop(feed);
                let res = call.await.unwrap();
                let bytes = read_all(res.into_body()).await.unwrap();
                (handle.breaker_status("api.anthropic.com"), bytes)
            })
        };
        let (as_one, one_bytes) = verdict(vec![Bytes::from(whole.clone())]);
        let mut frames = Vec::new();
        let mut at = 0;
        for p in points.into_iter().chain(std::iter::once(whole.len())) {
            if p > at { frames.push(Bytes::copy_from_slice(&whole.as_bytes()[at..p])); at = p; }
        }
        let (split, split_bytes) = verdict(frames);
        prop_assert_eq!(as_one, split);
        prop_assert_eq!(&one_bytes, whole.as_bytes());
        prop_assert_eq!(&split_bytes, whole.as_bytes());
    }
}
