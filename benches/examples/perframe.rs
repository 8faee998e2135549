//! Instructions per stream frame, for comparing two trees without the
//! machine's noise: reads one OpenAI chat stream of `N` chunks through one
//! case, so that `cachegrind` over two `N`s gives the per-frame difference
//! (`benches/perframe.sh` does it for every case).
//!
//! Cases: `bare` (the body read as it is), `watched` (through the breaker
//! layer's stream watch), `stall` (watched, with a stall timeout re-armed on
//! every frame), `held` (through a one-target failover that held the stream
//! until its first output; the frames after it are what is measured).
//!
//! `cargo run --release -p benches --example perframe -- CASE N`.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body::{Body, Frame};
use tower::{Layer, Service, ServiceExt};
use tower_levee::breaker::BreakerLayer;
use tower_levee::failover::{Failover, Target};

const ROLE: &str = "data: {\"id\":\"chatcmpl-BwoiPTGRbKkY5rncfaM0s9KtWrq5N\",\"object\":\"chat.completion.chunk\",\"created\":1753357673,\"model\":\"gpt-4.1-2025-04-14\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\",\"refusal\":null},\"logprobs\":null,\"finish_reason\":null}]}\n\n";
const CHUNK: &str = "data: {\"id\":\"chatcmpl-BwoiPTGRbKkY5rncfaM0s9KtWrq5N\",\"object\":\"chat.completion.chunk\",\"created\":1753357673,\"model\":\"gpt-4.1-2025-04-14\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"The\"},\"logprobs\":null,\"finish_reason\":null}]}\n\n";

/// An in-memory SSE body: the role chunk, `n` content chunks, `[DONE]`.
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

#[derive(Clone, Copy)]
struct Provider(u64);

impl Service<Request<()>> for Provider {
    type Response = Response<Sse>;
    type Error = Infallible;
    type Future = std::future::Ready<Result<Response<Sse>, Infallible>>;
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }
    fn call(&mut self, _: Request<()>) -> Self::Future {
        let mut frames = VecDeque::new();
        frames.push_back(Bytes::from_static(ROLE.as_bytes()));
        frames.extend((0..self.0).map(|_| Bytes::from_static(CHUNK.as_bytes())));
        frames.push_back(Bytes::from_static(b"data: [DONE]\n\n"));
        std::future::ready(Ok(Response::builder()
            .header("content-type", "text/event-stream")
            .body(Sse(frames))
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

async fn read<S, B>(mut svc: S)
where
    S: Service<Request<()>, Response = Response<B>>,
    S::Error: std::fmt::Debug,
    B: Body,
{
    let req = Request::post("https://api.openai.com/v1/chat/completions")
        .body(())
        .unwrap();
    let res = svc.ready().await.unwrap().call(req).await.unwrap();
    std::hint::black_box(drain(res.into_body()).await);
}

fn main() {
    let mut args = std::env::args().skip(1);
    let case = args.next().expect("CASE");
    let n: u64 = args.next().expect("N").parse().expect("N");
    let provider = Provider(n);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    rt.block_on(async move {
        match case.as_str() {
            "bare" => read(provider).await,
            "watched" => read(BreakerLayer::new().layer(provider)).await,
            "stall" => {
                let layer = BreakerLayer::builder()
                    .stall_timeout(Duration::from_secs(30))
                    .build()
                    .unwrap();
                read(layer.layer(provider)).await
            }
            "held" => {
                let failover = Failover::builder()
                    .target(Target::new("openai", provider))
                    .build()
                    .unwrap();
                read(failover).await
            }
            other => panic!("unknown case {other}"),
        }
    });
}
