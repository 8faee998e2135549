//! A Bedrock stream in the binary AWS event-stream framing, watched by the
//! breaker layer as it passes in chunks that split its frames: an exception
//! frame after a `200` counts as an availability failure, a complete stream
//! as a success, and the caller reads every byte unchanged.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{Request, Response};
use http_body::{Body, Frame};
use http_body_util::BodyExt;
use levee_core::breaker::{BreakerConfig, BreakerStatus};
use tower::{ServiceBuilder, ServiceExt};
use tower_levee::breaker::BreakerLayer;

mod eventstream_support;
use eventstream_support::{event, output_and_end, start, stream_error};

/// A ConverseStream body: complete, or cut by a `modelStreamErrorException`.
fn converse(fails: bool) -> Vec<u8> {
    let mut b = start();
    if fails {
        b.extend(event("contentBlockDelta", r#"{"delta":{"text":"Hi"}}"#));
        b.extend(stream_error());
    } else {
        b.extend(output_and_end());
    }
    b
}

/// A body that hands out its bytes 7 at a time: every frame is split.
struct Chunked(Vec<u8>, usize);

impl Body for Chunked {
    type Data = Bytes;
    type Error = Infallible;
    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let at = self.1;
        if at >= self.0.len() {
            return Poll::Ready(None);
        }
        let end = (at + 7).min(self.0.len());
        self.1 = end;
        Poll::Ready(Some(Ok(Frame::data(Bytes::copy_from_slice(
            &self.0[at..end],
        )))))
    }
}

#[tokio::test(start_paused = true)]
async fn binary_bedrock_exception_frames_open_the_breaker_and_complete_streams_do_not() {
    let fails = Arc::new(AtomicBool::new(true));
    let f = fails.clone();
    let provider = tower::service_fn(move |_: Request<()>| {
        let body = converse(f.load(Ordering::SeqCst));
        async move {
            Ok::<_, Infallible>(
                Response::builder()
                    .header("content-type", "application/vnd.amazon.eventstream")
                    .body(Chunked(body, 0))
                    .unwrap(),
            )
        }
    });
    let breaker = BreakerLayer::builder()
        .breaker(BreakerConfig::builder().threshold(2).build().unwrap())
        .build()
        .unwrap();
    let health = breaker.handle();
    let svc = ServiceBuilder::new().layer(breaker).service(provider);
    let domain = "bedrock-runtime.us-east-1.amazonaws.com";
    let call = || {
        let req = Request::post(format!(
            "https://{domain}/model/anthropic.claude/converse-stream"
        ))
        .body(())
        .unwrap();
        svc.clone().oneshot(req)
    };

    // A complete stream: a success, the bytes unchanged.
    fails.store(false, Ordering::SeqCst);
    let res = call().await.unwrap();
    let got = res.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(&got[..], &converse(false)[..]);
    assert_eq!(health.breaker_status(domain), Some(BreakerStatus::Closed));

    // Two streams cut by an exception frame: the threshold, open.
    fails.store(true, Ordering::SeqCst);
    for _ in 0..2 {
        let res = call().await.unwrap();
        let got = res.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(&got[..], &converse(true)[..]);
    }
    assert_eq!(health.breaker_status(domain), Some(BreakerStatus::Open));
}
