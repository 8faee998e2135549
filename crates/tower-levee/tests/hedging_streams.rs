//! Hedging streams: the breaker layer holds a stream until its first
//! output, so the failover's race ends there. A stream whose first output
//! came in time is the caller's and is never hedged, however slowly the
//! rest of it comes; one whose first output is late is hedged before the
//! caller reads a byte, and the caller reads only the stream that won.

mod channel_body;
mod failover_support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::BodyExt;
use tower::{BoxError, Service, ServiceExt};
use tower_levee::failover::{Failover, Hedging, ServedBy, Target};

use channel_body::ChannelBody;
use failover_support::{TestClassifier, breaker, req};

const ROLE: &str =
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n";
const DONE: &str = "data: [DONE]\n\n";

fn word(w: &str) -> String {
    format!("data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{w}\"}}}}]}}\n\n")
}

/// A target whose streams open at once and send their words after the
/// given delays; counts its calls and those dropped before their end.
#[derive(Clone)]
struct Streams {
    name: &'static str,
    first_word_after: Arc<std::sync::Mutex<Duration>>,
    rest_after: Duration,
    started: Arc<AtomicUsize>,
    /// Streams whose reader went away before their end.
    dropped: Arc<AtomicUsize>,
}

impl Streams {
    fn new(name: &'static str, first_word_ms: u64, rest_ms: u64) -> Self {
        Streams {
            name,
            first_word_after: Arc::new(std::sync::Mutex::new(Duration::from_millis(first_word_ms))),
            rest_after: Duration::from_millis(rest_ms),
            started: Arc::default(),
            dropped: Arc::default(),
        }
    }

    fn first_word_after(&self, ms: u64) {
        *self.first_word_after.lock().unwrap() = Duration::from_millis(ms);
    }

    fn started(&self) -> usize {
        self.started.load(Ordering::SeqCst)
    }
}

impl Service<Request<String>> for Streams {
    type Response = Response<ChannelBody>;
    type Error = BoxError;
    type Future = std::future::Ready<Result<Response<ChannelBody>, BoxError>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _req: Request<String>) -> Self::Future {
        self.started.fetch_add(1, Ordering::SeqCst);
        let first = *self.first_word_after.lock().unwrap();
        let chunks = [
            (Duration::ZERO, ROLE.to_owned()),
            (first, word(self.name)),
            (self.rest_after, word("!")),
            (Duration::ZERO, DONE.to_owned()),
        ];
        // Each chunk after its delay from the one before; a stream dropped
        // (cancelled) stops its feed.
        let (feed, body) = tokio::sync::mpsc::unbounded_channel();
        let dropped = self.dropped.clone();
        tokio::spawn(async move {
            for (delay, chunk) in chunks {
                tokio::time::sleep(delay).await;
                if feed.send(Ok(Bytes::from(chunk))).is_err() {
                    dropped.fetch_add(1, Ordering::SeqCst);
                    return;
                }
            }
        });
        let body = ChannelBody(body);
        let response = Response::builder()
            .header("content-type", "text/event-stream")
            .body(body)
            .unwrap();
        std::future::ready(Ok(response))
    }
}

type Svc = Failover<String, ChannelBody, Streams, TestClassifier>;

fn failover(primary: &Streams, fallback: &Streams) -> Svc {
    let gate = Duration::from_secs(1);
    Failover::builder()
        .target(Target::new("primary", primary.clone()).breaker(breaker(gate, gate)))
        .target(Target::new("fallback", fallback.clone()).breaker(breaker(gate, gate)))
        .hedging(Hedging::new())
        .build()
        .unwrap()
}

/// One streamed request read to its end: who served it, and its text.
async fn one(svc: &Svc) -> (usize, String) {
    let res = svc.clone().oneshot(req()).await.unwrap();
    let by = ServedBy::of(&res).expect("served").index;
    let bytes = res.into_body().collect().await.unwrap().to_bytes();
    (by, String::from_utf8(bytes.to_vec()).unwrap())
}

async fn train(svc: &Svc) {
    for _ in 0..30 {
        assert_eq!(one(svc).await.0, 0);
    }
}

#[tokio::test(start_paused = true)]
async fn a_stream_whose_first_output_came_in_time_is_never_hedged_however_slow_the_rest() {
    // First output in time, the rest 20 s later.
    let (primary, fallback) = (
        Streams::new("primary", 300, 20_000),
        Streams::new("fallback", 100, 0),
    );
    let svc = failover(&primary, &fallback);
    train(&svc).await;
    let delay = svc.handle().snapshot().targets[0]
        .hedge_delay
        .expect("learned");
    assert!(
        delay >= Duration::from_millis(300) && delay < Duration::from_secs(1),
        "{delay:?}"
    );
    // The caller's answer waited for the first output (the race spans it),
    // and no hedge went in that time.
    let started = tokio::time::Instant::now();
    let res = svc.clone().oneshot(req()).await.unwrap();
    assert!(
        started.elapsed() >= Duration::from_millis(300),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(fallback.started(), 0);
    let by = ServedBy::of(&res).expect("served").index;
    let text = res.into_body().collect().await.unwrap().to_bytes();
    let text = String::from_utf8(text.to_vec()).unwrap();
    assert_eq!(by, 0);
    assert!(text.contains("primary") && text.contains('!'), "{text}");
    assert_eq!(fallback.started(), 0, "nothing was hedged");
    assert_eq!(svc.handle().snapshot().hedges, Some(0));
}

#[tokio::test(start_paused = true)]
async fn a_stream_whose_first_output_is_late_is_hedged_and_the_caller_reads_only_the_winner() {
    let (primary, fallback) = (
        Streams::new("primary", 300, 0),
        Streams::new("fallback", 100, 0),
    );
    let svc = failover(&primary, &fallback);
    train(&svc).await;
    // The head and the role chunk come at once; the first word after 20 s.
    primary.first_word_after(20_000);
    let started = tokio::time::Instant::now();
    let (by, text) = one(&svc).await;
    assert_eq!(by, 1, "the hedge served");
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    assert!(
        text.contains("fallback") && !text.contains("primary"),
        "{text}"
    );
    assert_eq!(
        text.matches("role").count(),
        1,
        "one stream's bytes only: {text}"
    );
    assert_eq!(fallback.started(), 1);
    assert_eq!(svc.handle().snapshot().hedges, Some(1));
    // The loser's stream, held for its first output, was dropped.
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert_eq!(
        primary.dropped.load(Ordering::SeqCst),
        1,
        "the losing stream is dropped"
    );
}
