//! The stream watch's cost per frame: a 1,000-frame SSE response read
//! through the breaker layer next to the same body read bare, in one run.
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
}

criterion_group! {
    name = group;
    config = Criterion::default().warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(3));
    targets = benches
}
criterion_main!(group);
