//! The stream watch's cost per frame: a 1,000-frame SSE response read
//! through the breaker layer next to the same body read bare, in one run,
//! twice: from memory (the wrapper's whole cost, nothing to hide it) and
//! over HTTP/1.1 on 127.0.0.1 with hyper (the cheapest real network body).
//!
//! Run: `cargo bench -p benches --bench stream_watch`.
#![allow(missing_docs)]

use std::collections::VecDeque;
use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use criterion::{Criterion, criterion_group, criterion_main};
use http::{Request, Response};
use http_body::{Body, Frame};
use tower::{Layer, Service, ServiceExt};
use tower_levee::breaker::BreakerLayer;

const FRAMES: usize = 1_000;
const CHUNK: &str = "data: {\"id\":\"chatcmpl-BwoiPTGRbKkY5rncfaM0s9KtWrq5N\",\"object\":\"chat.completion.chunk\",\"created\":1753357673,\"model\":\"gpt-4.1-2025-04-14\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"The\"},\"logprobs\":null,\"finish_reason\":null}]}\n\n";

/// An in-memory SSE body of `FRAMES` chunks and `[DONE]`.
struct Sse(VecDeque<Bytes>);

impl Body for Sse {
    type Data = Bytes;
    type Error = Infallible;
    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Poll::Ready(self.0.pop_front().map(|b| Ok(Frame::data(b))))
    }
}

fn sse() -> Sse {
    let mut frames: VecDeque<Bytes> = (0..FRAMES)
        .map(|_| Bytes::from_static(CHUNK.as_bytes()))
        .collect();
    frames.push_back(Bytes::from_static(b"data: [DONE]\n\n"));
    Sse(frames)
}

#[derive(Clone, Copy)]
struct Provider;

impl Service<Request<()>> for Provider {
    type Response = Response<Sse>;
    type Error = Infallible;
    type Future = std::future::Ready<Result<Response<Sse>, Infallible>>;
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }
    fn call(&mut self, _: Request<()>) -> Self::Future {
        std::future::ready(Ok(Response::builder()
            .header("content-type", "text/event-stream")
            .body(sse())
            .unwrap()))
    }
}

async fn drain<B: Body>(body: B) -> usize {
    let mut body = std::pin::pin!(body);
    let mut frames = 0;
    while let Some(f) = std::future::poll_fn(|cx| body.as_mut().poll_frame(cx)).await {
        std::hint::black_box(f.is_ok());
        frames += 1;
    }
    frames
}

fn request() -> Request<()> {
    Request::post("https://api.openai.com/v1/chat/completions")
        .body(())
        .unwrap()
}

fn benches(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let mut group = c.benchmark_group("stream_watch/1000-frames");
    group.bench_function("bare", |b| {
        let mut svc = Provider;
        b.iter(|| {
            rt.block_on(async {
                let res = svc.ready().await.unwrap().call(request()).await.unwrap();
                drain(res.into_body()).await
            })
        })
    });
    group.bench_function("levee-watched", |b| {
        let mut svc = BreakerLayer::new().layer(Provider);
        b.iter(|| {
            rt.block_on(async {
                let res = svc.ready().await.unwrap().call(request()).await.unwrap();
                drain(res.into_body()).await
            })
        })
    });
    group.finish();

    // The same stream from a hyper server on 127.0.0.1, read by hyper-util's
    // client: bare, then through the breaker layer.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let addr = rt.block_on(loopback_provider());
    let uri: http::Uri = format!("http://{addr}/v1/chat/completions")
        .parse()
        .unwrap();
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<http_body_util::Empty<Bytes>>();
    let get = |uri: &http::Uri| {
        Request::post(uri.clone())
            .body(http_body_util::Empty::<Bytes>::new())
            .unwrap()
    };
    let mut group = c.benchmark_group("stream_watch/1000-frames-loopback");
    group.bench_function("bare", |b| {
        let mut svc = client.clone();
        b.iter(|| {
            rt.block_on(async {
                let res = svc.ready().await.unwrap().call(get(&uri)).await.unwrap();
                drain(res.into_body()).await
            })
        })
    });
    group.bench_function("levee-watched", |b| {
        let mut svc = BreakerLayer::new().layer(client.clone());
        b.iter(|| {
            rt.block_on(async {
                let res = svc.ready().await.unwrap().call(get(&uri)).await.unwrap();
                drain(res.into_body()).await
            })
        })
    });
    // Paired: each iteration reads the stream bare, then watched, back to
    // back, and counts only the difference, so that the machine's drift
    // between the two benches above does not read as the watch's cost.
    group.bench_function("added-by-watch-paired", |b| {
        let mut bare = client.clone();
        let mut watched = BreakerLayer::new().layer(client.clone());
        b.iter_custom(|iters| {
            rt.block_on(async {
                let (mut bare_time, mut watched_time) = (Duration::ZERO, Duration::ZERO);
                for _ in 0..iters {
                    let start = std::time::Instant::now();
                    let res = bare.ready().await.unwrap().call(get(&uri)).await.unwrap();
                    drain(res.into_body()).await;
                    bare_time += start.elapsed();
                    let start = std::time::Instant::now();
                    let res = watched
                        .ready()
                        .await
                        .unwrap()
                        .call(get(&uri))
                        .await
                        .unwrap();
                    drain(res.into_body()).await;
                    watched_time += start.elapsed();
                }
                watched_time.saturating_sub(bare_time)
            })
        })
    });
    group.finish();
}

/// A hyper server on 127.0.0.1 that answers every request with the stream.
async fn loopback_provider() -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            // Frames go out as written, as a provider's stream does.
            let _ = stream.set_nodelay(true);
            let svc = hyper::service::service_fn(|_req| async {
                Ok::<_, Infallible>(
                    Response::builder()
                        .header("content-type", "text/event-stream")
                        .body(sse())
                        .unwrap(),
                )
            });
            tokio::spawn(async move {
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    addr
}

criterion_group! {
    name = group;
    config = Criterion::default().warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(3));
    targets = benches
}
criterion_main!(group);
