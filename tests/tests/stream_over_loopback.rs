//! Streams over real HTTP: a hyper server on 127.0.0.1 sends SSE chunk by
//! chunk, the hyper-util client reads them through the breaker layer.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Empty, StreamBody};
use hyper::body::Frame;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use integration_tests::{Chunk, ReceiverStream};
use levee_core::breaker::BreakerStatus;
use levee_core::classify::Verdict;
use tokio::net::TcpListener;
use tower::{Service, ServiceBuilder, ServiceExt};
use tower_levee::breaker::{BreakerLayer, CircuitOpen};

const CHUNKS: [&str; 3] = [
    "event: message_start\ndata: {\"type\":\"message_start\"}\n\n",
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"text\":\"Hel\"}}\n\n",
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"text\":\"lo\"}}\n\n",
];
const OVERLOADED: &str = "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n";
const STOP: &str = "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";

/// The bytes each path sends, and whether it then breaks the connection.
fn script(path: &str) -> (Vec<&'static str>, bool) {
    let mut chunks = CHUNKS.to_vec();
    match path {
        "/overloaded" => {
            chunks.push(OVERLOADED);
            (chunks, false)
        }
        "/cut" => (chunks, true),
        _ => {
            chunks.push(STOP);
            (chunks, false)
        }
    }
}

async fn serve() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let svc =
                    hyper::service::service_fn(|req: Request<hyper::body::Incoming>| async move {
                        let (chunks, cut) = script(req.uri().path());
                        let (tx, rx) = tokio::sync::mpsc::channel::<Chunk>(8);
                        tokio::spawn(async move {
                            for c in chunks {
                                tokio::time::sleep(Duration::from_millis(5)).await;
                                if tx
                                    .send(Ok(Frame::data(Bytes::from_static(c.as_bytes()))))
                                    .await
                                    .is_err()
                                {
                                    return;
                                }
                            }
                            if cut {
                                // Let the last chunk reach the wire before the cut.
                                tokio::time::sleep(Duration::from_millis(50)).await;
                                let _ = tx
                                    .send(Err(std::io::Error::other("upstream went away")))
                                    .await;
                            }
                        });
                        let body = StreamBody::new(ReceiverStream(rx));
                        Ok::<_, Infallible>(
                            Response::builder()
                                .header("content-type", "text/event-stream")
                                .body(body)
                                .unwrap(),
                        )
                    });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    addr
}

fn client() -> Client<HttpConnector, Empty<Bytes>> {
    Client::builder(TokioExecutor::new()).build_http()
}

fn get(addr: SocketAddr, path: &str) -> Request<Empty<Bytes>> {
    Request::get(format!("http://{addr}{path}"))
        .body(Empty::new())
        .unwrap()
}

#[tokio::test]
async fn streams_over_loopback_are_judged_at_their_end_and_arrive_byte_for_byte() {
    let addr = serve().await;
    let domain = addr.to_string();
    let layer = BreakerLayer::new();
    let handle = layer.handle();
    let mut svc = ServiceBuilder::new().layer(layer).service(client());

    // A complete stream: success, every byte delivered.
    let res = svc
        .ready()
        .await
        .unwrap()
        .call(get(addr, "/complete"))
        .await
        .unwrap();
    let bytes = res.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(bytes, [&CHUNKS[..], &[STOP]].concat().concat().as_bytes());
    assert_eq!(handle.upstream_failures(Verdict::Availability), 0);

    // A stream cut midway: availability, the bytes before the cut delivered.
    let res = svc
        .ready()
        .await
        .unwrap()
        .call(get(addr, "/cut"))
        .await
        .unwrap();
    let mut body = res.into_body();
    let mut got = Vec::new();
    while let Some(frame) = body.frame().await {
        match frame {
            Ok(f) => got.extend_from_slice(&f.into_data().unwrap_or_default()),
            Err(_) => break,
        }
    }
    // What arrived is what was sent, up to the cut (the server's last chunk
    // may die with the connection).
    assert!(CHUNKS.concat().as_bytes().starts_with(&got) && !got.is_empty());
    assert_eq!(handle.upstream_failures(Verdict::Availability), 1);

    // Three chunks then `event: error` overloaded, five times: the breaker opens.
    for _ in 0..4 {
        let res = svc
            .ready()
            .await
            .unwrap()
            .call(get(addr, "/overloaded"))
            .await
            .unwrap();
        let bytes = res.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(
            bytes,
            [&CHUNKS[..], &[OVERLOADED]].concat().concat().as_bytes()
        );
    }
    assert_eq!(handle.breaker_status(&domain), Some(BreakerStatus::Open));
    let err = svc
        .ready()
        .await
        .unwrap()
        .call(get(addr, "/complete"))
        .await
        .unwrap_err();
    assert!(err.is::<CircuitOpen>());
}
