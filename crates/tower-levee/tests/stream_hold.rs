//! The breaker layer holds a stream back until its first output, so that a
//! retry or a failover above replaces one that fails before it; it ends a
//! stream that goes quiet. Paused time, in memory: each test decides when
//! every frame arrives.

use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::BodyExt;
use levee_core::breaker::{BreakerConfig, Cooldown};
use levee_core::classify::{TransportFailure, Verdict};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tower::{Service, ServiceBuilder, ServiceExt};
use tower_levee::breaker::StreamHold;
use tower_levee::breaker::{BreakerHandle, BreakerLayer, Scope};
use tower_levee::error::{StreamTimeout, StreamTimeoutKind, transport_failure};
use tower_levee::failover::{Failover, ServedBy, Target};

const ROLE: &str =
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n";
const HEL: &str = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"}}]}\n\n";
const STOP: &str =
    "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n";
const DONE: &str = "data: [DONE]\n\n";
const PING: &str = "event: ping\ndata: {\"type\": \"ping\"}\n\n";
const OVERLOADED: &str = "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n";

mod channel_body;
use channel_body::{ChannelBody, Feed, send};

/// An SSE provider: each call's body starts with `first` and then stays
/// open, its sender kept for the test (`feeds`), or ends (`close`).
#[derive(Clone)]
struct Provider {
    calls: Arc<AtomicUsize>,
    first: &'static [&'static str],
    close: bool,
    feeds: Arc<Mutex<Vec<Feed>>>,
}

impl Provider {
    fn new(first: &'static [&'static str], close: bool) -> Self {
        Provider {
            calls: Arc::default(),
            first,
            close,
            feeds: Arc::default(),
        }
    }

    fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    /// The sender of the latest call's body.
    fn feed(&self) -> Feed {
        self.feeds.lock().unwrap().last().unwrap().clone()
    }
}

impl Service<Request<()>> for Provider {
    type Response = Response<ChannelBody>;
    type Error = Infallible;
    type Future = std::future::Ready<Result<Response<ChannelBody>, Infallible>>;
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }
    fn call(&mut self, _: Request<()>) -> Self::Future {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let (tx, rx) = mpsc::unbounded_channel();
        for c in self.first {
            tx.send(Ok(Bytes::from_static(c.as_bytes()))).unwrap();
        }
        if !self.close {
            self.feeds.lock().unwrap().push(tx);
        }
        std::future::ready(Ok(Response::builder()
            .header("content-type", "text/event-stream")
            .body(ChannelBody(rx))
            .unwrap()))
    }
}

fn request(model: &'static str) -> Request<()> {
    let mut req = Request::post("https://api.openai.com/v1/chat/completions")
        .body(())
        .unwrap();
    req.extensions_mut().insert(Scope::new().model(model));
    req
}

fn failover(
    primary: (&Provider, BreakerLayer),
    backup: &Provider,
) -> Failover<(), ChannelBody, Provider> {
    Failover::builder()
        .target(Target::new("primary", primary.0.clone()).breaker(primary.1))
        .target(Target::new("backup", backup.clone()))
        .build()
        .unwrap()
}

fn holding(hold: StreamHold) -> BreakerLayer {
    BreakerLayer::builder().stream_hold(hold).build().unwrap()
}

async fn read(res: Response<tower_levee::body::ResponseBody<ChannelBody>>) -> Bytes {
    res.into_body().collect().await.unwrap().to_bytes()
}

fn served(res: &Response<tower_levee::body::ResponseBody<ChannelBody>>) -> &'static str {
    ServedBy::of(res).unwrap().target
}

const OK: &[&str] = &[ROLE, HEL, STOP, DONE];

#[tokio::test(start_paused = true)]
async fn no_output_within_the_first_content_timeout_fails_over_at_the_timeout_per_model() {
    let primary = Provider::new(&[ROLE], false);
    let backup = Provider::new(OK, true);
    let layer = BreakerLayer::builder()
        .first_content_timeout(Duration::from_secs(20))
        .first_content_timeout_for_model("o3", Duration::from_secs(60))
        .build()
        .unwrap();
    let handle = layer.handle();
    let svc = failover((&primary, layer), &backup);

    for (model, timeout) in [("gpt-4o", 20), ("o3", 60)] {
        let started = Instant::now();
        let res = svc.clone().oneshot(request(model)).await.unwrap();
        // Headers came at once; the primary's first output never did.
        assert_eq!(started.elapsed(), Duration::from_secs(timeout));
        assert_eq!(served(&res), "backup");
        assert_eq!(read(res).await, Bytes::from(OK.concat()));
    }
    assert_eq!(handle.upstream_failures(Verdict::Availability), 2);
}

#[tokio::test(start_paused = true)]
async fn output_before_the_timeout_is_released_at_once_and_streams_on() {
    let primary = Provider::new(&[ROLE], false);
    let backup = Provider::new(OK, true);
    let layer = BreakerLayer::builder()
        .first_content_timeout(Duration::from_secs(20))
        .build()
        .unwrap();
    let handle = layer.handle();
    let svc = failover((&primary, layer), &backup);
    let call = tokio::spawn(svc.oneshot(request("gpt-4o")));
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(!call.is_finished(), "held until the first output");
    primary
        .feed()
        .send(Ok(Bytes::from_static(HEL.as_bytes())))
        .unwrap();
    let res = call.await.unwrap().unwrap();
    assert_eq!(served(&res), "primary");
    let feed = primary.feed();
    feed.send(Ok(Bytes::from_static(STOP.as_bytes()))).unwrap();
    feed.send(Ok(Bytes::from_static(DONE.as_bytes()))).unwrap();
    drop(feed);
    primary.feeds.lock().unwrap().clear();
    // Past the first-content timeout: output came, it no longer applies.
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert_eq!(read(res).await, Bytes::from(OK.concat()));
    assert_eq!(handle.upstream_failures(Verdict::Availability), 0);
    assert_eq!(backup.calls(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_caller_dropping_a_held_stream_gives_its_probe_slot_back() {
    let primary = Provider::new(&[ROLE], false);
    let backup = Provider::new(OK, true);
    let layer = BreakerLayer::builder()
        .breaker(
            BreakerConfig::builder()
                .threshold(1)
                .half_open_probes(1)
                .cooldown(Cooldown::Custom(Arc::new(|_| Duration::from_secs(10))))
                .build()
                .unwrap(),
        )
        .build()
        .unwrap();
    let handle: BreakerHandle = layer.handle();
    let svc = failover((&primary, layer), &backup);

    // One failure before output opens the primary's breaker.
    let call = tokio::spawn(svc.clone().oneshot(request("gpt-4o")));
    tokio::task::yield_now().await;
    primary
        .feed()
        .send(Ok(Bytes::from_static(OVERLOADED.as_bytes())))
        .unwrap();
    assert_eq!(served(&call.await.unwrap().unwrap()), "backup");
    assert_eq!(handle.upstream_failures(Verdict::Availability), 1);

    // Cooled off: the next call is the one probe. Its stream is held (no
    // output yet) when the caller gives up.
    tokio::time::sleep(Duration::from_secs(11)).await;
    let held = tokio::spawn(svc.clone().oneshot(request("gpt-4o")));
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(primary.calls(), 2);
    held.abort();
    assert!(held.await.unwrap_err().is_cancelled());

    // The slot came back: the primary is probed again, not skipped.
    let call = tokio::spawn(svc.clone().oneshot(request("gpt-4o")));
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(primary.calls(), 3, "the probe slot was given back");
    primary
        .feed()
        .send(Ok(Bytes::from_static(HEL.as_bytes())))
        .unwrap();
    assert_eq!(served(&call.await.unwrap().unwrap()), "primary");
}

/// A call through a breaker with a 5 s stall timeout to a provider that has
/// sent its role chunk and first output and stays open.
async fn streaming_with_a_5s_stall_timeout() -> (
    Provider,
    BreakerHandle,
    Response<tower_levee::body::ResponseBody<ChannelBody>>,
) {
    let provider = Provider::new(&[ROLE, HEL], false);
    let layer = BreakerLayer::builder()
        .stall_timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let handle = layer.handle();
    let svc = ServiceBuilder::new().layer(layer).service(provider.clone());
    let res = svc.oneshot(request("gpt-4o")).await.unwrap();
    (provider, handle, res)
}

#[tokio::test(start_paused = true)]
async fn a_stream_that_stalls_after_output_ends_with_a_stream_timeout_and_counts() {
    let (_open_feed, handle, res) = streaming_with_a_5s_stall_timeout().await;
    let started = Instant::now();
    let mut body = res.into_body();
    let mut got = Vec::new();
    let err = loop {
        match body.frame().await {
            Some(Ok(f)) => got.extend_from_slice(&f.into_data().unwrap()),
            Some(Err(e)) => break e,
            None => panic!("a stalled stream ends with an error"),
        }
    };
    assert_eq!(got, [ROLE, HEL].concat().as_bytes());
    assert_eq!(started.elapsed(), Duration::from_secs(5));
    let timeout = err.downcast_ref::<StreamTimeout>().unwrap();
    assert_eq!(timeout.kind(), StreamTimeoutKind::Stall);
    assert_eq!(transport_failure(&*err), TransportFailure::Timeout);
    // The body has ended for the caller.
    assert!(body.frame().await.is_none());
    assert_eq!(handle.upstream_failures(Verdict::Availability), 1);
}

#[tokio::test(start_paused = true)]
async fn a_stream_that_keeps_sending_is_never_stalled() {
    let (provider, handle, res) = streaming_with_a_5s_stall_timeout().await;
    let feed = provider.feed();
    provider.feeds.lock().unwrap().clear();
    tokio::spawn(async move {
        // Twenty events 4 s apart: 80 s in all, no gap of 5 s.
        for _ in 0..20 {
            tokio::time::sleep(Duration::from_secs(4)).await;
            feed.send(Ok(Bytes::from_static(HEL.as_bytes()))).unwrap();
        }
        feed.send(Ok(Bytes::from_static(DONE.as_bytes()))).unwrap();
    });
    let bytes = read(res).await;
    assert!(bytes.ends_with(DONE.as_bytes()));
    assert_eq!(handle.upstream_failures(Verdict::Availability), 0);
}

#[tokio::test(start_paused = true)]
async fn a_stream_past_the_hold_bound_is_released_as_it_is() {
    let primary = Provider::new(&[PING, PING, PING, PING], false);
    let backup = Provider::new(OK, true);
    let hold = StreamHold::default().max_events(3);
    let svc = failover((&primary, holding(hold)), &backup);
    let res = svc.oneshot(request("gpt-4o")).await.unwrap();
    // Released after three events without output: what follows is the
    // caller's, an error included.
    assert_eq!(served(&res), "primary");
    let feed = primary.feed();
    primary.feeds.lock().unwrap().clear();
    feed.send(Ok(Bytes::from_static(OVERLOADED.as_bytes())))
        .unwrap();
    drop(feed);
    assert_eq!(
        read(res).await,
        Bytes::from([PING, PING, PING, PING, OVERLOADED].concat())
    );
    assert_eq!(backup.calls(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_stream_that_ends_well_without_output_is_served() {
    let primary = Provider::new(&[ROLE, STOP, DONE], true);
    let backup = Provider::new(OK, true);
    let svc = failover((&primary, BreakerLayer::new()), &backup);
    let res = svc.oneshot(request("gpt-4o")).await.unwrap();
    assert_eq!(served(&res), "primary");
    assert_eq!(read(res).await, Bytes::from([ROLE, STOP, DONE].concat()));
    assert_eq!(backup.calls(), 0);
}

#[tokio::test(start_paused = true)]
async fn with_the_hold_off_a_stream_is_handed_on_at_its_head() {
    let primary = Provider::new(&[ROLE], false);
    let backup = Provider::new(OK, true);
    let svc = failover((&primary, holding(StreamHold::off())), &backup);
    let res = svc.oneshot(request("gpt-4o")).await.unwrap();
    assert_eq!(served(&res), "primary");
    primary
        .feed()
        .send(Ok(Bytes::from_static(OVERLOADED.as_bytes())))
        .unwrap();
    primary.feeds.lock().unwrap().clear();
    assert_eq!(read(res).await, Bytes::from([ROLE, OVERLOADED].concat()));
}

#[cfg(feature = "serde")]
#[tokio::test(start_paused = true)]
async fn a_config_file_turns_the_hold_off() {
    let config: tower_levee::config::BreakerLayerConfig =
        toml::from_str("stream_hold = false").unwrap();
    let layer = config
        .apply(BreakerLayer::builder())
        .unwrap()
        .build()
        .unwrap();
    let primary = Provider::new(&[ROLE], false);
    let backup = Provider::new(OK, true);
    let svc = failover((&primary, layer), &backup);
    let res = svc.oneshot(request("gpt-4o")).await.unwrap();
    assert_eq!(served(&res), "primary");
    primary
        .feed()
        .send(Ok(Bytes::from_static(OVERLOADED.as_bytes())))
        .unwrap();
    primary.feeds.lock().unwrap().clear();
    assert_eq!(read(res).await, Bytes::from([ROLE, OVERLOADED].concat()));
}

#[tokio::test(start_paused = true)]
async fn the_quick_start_stack_retries_a_stream_that_failed_before_its_output() {
    // Retry → breaker, no failover: the first stream errs after its role
    // chunk, the retry's stream serves; the caller reads only the second.
    let attempts = Arc::new(AtomicUsize::new(0));
    let counted = attempts.clone();
    let provider = tower::service_fn(move |_: Request<()>| {
        let first = counted.fetch_add(1, Ordering::SeqCst) == 0;
        let (tx, rx) = mpsc::unbounded_channel();
        let chunks: &[&str] = if first { &[ROLE, OVERLOADED] } else { OK };
        for c in chunks {
            tx.send(Ok(Bytes::from_static(c.as_bytes()))).unwrap();
        }
        async move {
            Ok::<_, Infallible>(
                Response::builder()
                    .header("content-type", "text/event-stream")
                    .body(ChannelBody(rx))
                    .unwrap(),
            )
        }
    });
    let budget = Arc::new(tower_levee::RetryBudget::default());
    let svc = ServiceBuilder::new()
        .layer(
            tower_levee::RetryBudgetLayer::builder(budget)
                .seed(3)
                .build()
                .unwrap(),
        )
        .layer(BreakerLayer::new())
        .service(provider);
    let res = svc.oneshot(request("gpt-4o")).await.unwrap();
    assert_eq!(attempts.load(Ordering::SeqCst), 2);
    assert_eq!(read(res).await, Bytes::from(OK.concat()));
}

#[tokio::test(start_paused = true)]
async fn dropping_the_quick_start_stack_while_its_stream_is_held_frees_the_permit_and_probe_slot() {
    // Retry → bulkhead (1) → breaker, the breaker half-open with one probe:
    // the probe's stream sends no output and the caller gives up while it
    // is held.
    let provider = Provider::new(&[ROLE], false);
    let bulkhead = tower_levee::BulkheadLayer::named("openai", 1);
    let breaker = BreakerLayer::builder()
        .breaker(
            BreakerConfig::builder()
                .half_open_probes(1)
                .cooldown(Cooldown::Custom(Arc::new(|_| Duration::from_secs(10))))
                .build()
                .unwrap(),
        )
        .build()
        .unwrap();
    let handle = breaker.handle();
    let svc = ServiceBuilder::new()
        .layer(
            tower_levee::RetryBudgetLayer::builder(Arc::new(tower_levee::RetryBudget::default()))
                .seed(3)
                .build()
                .unwrap(),
        )
        .layer(bulkhead.clone())
        .layer(breaker)
        .service(provider.clone());
    handle.open("api.openai.com");
    tokio::time::sleep(Duration::from_secs(11)).await;

    let held = tokio::spawn(svc.clone().oneshot(request("gpt-4o")));
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(provider.calls(), 1);
    assert_eq!(
        bulkhead.snapshot().in_flight,
        1,
        "held: the permit is taken"
    );
    held.abort();
    assert!(held.await.unwrap_err().is_cancelled());
    assert_eq!(bulkhead.snapshot().in_flight, 0, "the permit came back");

    // The probe slot came back too: the next call is the probe, and its
    // output closes the breaker.
    let call = tokio::spawn(svc.clone().oneshot(request("gpt-4o")));
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(provider.calls(), 2, "probed again, not refused");
    let feed = provider.feed();
    send(&feed, &[HEL, STOP, DONE]);
    drop(feed);
    provider.feeds.lock().unwrap().clear();
    let res = call.await.unwrap().unwrap();
    assert_eq!(
        read(res).await,
        Bytes::from([ROLE, HEL, STOP, DONE].concat())
    );
    assert_eq!(
        handle.breaker_status("api.openai.com"),
        Some(levee_core::breaker::BreakerStatus::Closed)
    );
    assert_eq!(bulkhead.snapshot().in_flight, 0);
}

#[tokio::test(start_paused = true)]
async fn the_time_to_first_output_joins_the_latency_estimate() {
    let provider = Provider::new(&[ROLE], false);
    let layer = BreakerLayer::builder()
        .latency_estimate(true)
        .build()
        .unwrap();
    let handle = layer.handle();
    let svc = ServiceBuilder::new().layer(layer).service(provider.clone());
    for _ in 0..10 {
        // Held until its first output: the call returns once it comes.
        let call = tokio::spawn(svc.clone().oneshot(request("gpt-4o")));
        tokio::task::yield_now().await;
        let feed = provider.feed();
        provider.feeds.lock().unwrap().clear();
        tokio::time::sleep(Duration::from_secs(3)).await;
        for chunk in [HEL, STOP, DONE] {
            feed.send(Ok(Bytes::from_static(chunk.as_bytes()))).unwrap();
        }
        drop(feed);
        read(call.await.unwrap().unwrap()).await;
    }
    let domain = handle
        .states()
        .into_iter()
        .find(|s| s.mechanism == "breaker")
        .unwrap();
    // The head came at once; the first output 3 s later.
    let (ttfb, ttfc) = (domain.latency.unwrap(), domain.first_content.unwrap());
    assert!(ttfb.p99 < Duration::from_millis(2), "{ttfb:?}");
    assert!(
        ttfc.p50 >= Duration::from_secs(2) && ttfc.p50 <= Duration::from_secs(5),
        "{ttfc:?}"
    );
    assert_eq!(ttfc.samples, 10);
}
