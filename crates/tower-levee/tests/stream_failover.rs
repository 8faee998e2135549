//! Streams that fail before their first output fail over unseen: a hyper
//! server on 127.0.0.1 plays scripted streams chunk by chunk, the hyper-util
//! client reads them through a failover of two targets, each breaker layer
//! holding its streams until their first output. The caller receives only
//! the stream that served, byte for byte.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, Uri};
use http_body::{Body, Frame};
use http_body_util::{BodyExt, Empty};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use levee_core::breaker::{BreakerConfig, BreakerStatus};
use levee_core::classify::{Classification, Verdict};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tower::{Service, ServiceExt};
use tower_levee::BoxError;
use tower_levee::breaker::{BreakerHandle, BreakerLayer};
use tower_levee::failover::{Failover, ServedBy, Target};

mod eventstream_support;

const ROLE: &str = "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":null}]}\n\n";
const OVERLOADED: &str = "event: error\ndata: {\"error\":{\"message\":\"The engine is currently overloaded, please try again later\",\"type\":\"server_error\",\"code\":\"overloaded\"}}\n\n";
const HEL: &str = "data: {\"id\":\"c2\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"},\"finish_reason\":null}]}\n\n";
const LO: &str = "data: {\"id\":\"c2\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"lo\"},\"finish_reason\":\"stop\"}]}\n\n";
const DONE: &str = "data: [DONE]\n\n";

const SSE: &str = "text/event-stream";
const AWS: &str = "application/vnd.amazon.eventstream";

/// One step of a scripted stream.
#[derive(Clone)]
enum Step {
    /// Send these bytes as one chunk.
    Send(Bytes),
    /// Send these bytes in chunks of this many bytes.
    Split(Bytes, usize),
    /// Break the connection.
    Cut,
    /// Send nothing more, and keep the connection open.
    Hang,
}

fn send(s: &str) -> Step {
    Step::Send(Bytes::copy_from_slice(s.as_bytes()))
}

/// What a path answers: a content type and the steps of its body.
type Scripts = HashMap<&'static str, (&'static str, Vec<Step>)>;

/// A server body fed by a channel.
struct Fed(mpsc::Receiver<Result<Frame<Bytes>, std::io::Error>>);

impl Body for Fed {
    type Data = Bytes;
    type Error = std::io::Error;
    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        self.0.poll_recv(cx)
    }
}

async fn play(steps: Vec<Step>, tx: mpsc::Sender<Result<Frame<Bytes>, std::io::Error>>) {
    for step in steps {
        // A little apart, so that each chunk is its own read.
        tokio::time::sleep(Duration::from_millis(2)).await;
        match step {
            Step::Send(b) => {
                if tx.send(Ok(Frame::data(b))).await.is_err() {
                    return;
                }
            }
            Step::Split(b, n) => {
                for piece in b.chunks(n) {
                    let piece = Bytes::copy_from_slice(piece);
                    if tx.send(Ok(Frame::data(piece))).await.is_err() {
                        return;
                    }
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
            }
            Step::Cut => {
                // Let the last chunk reach the wire before the cut.
                tokio::time::sleep(Duration::from_millis(20)).await;
                let _ = tx
                    .send(Err(std::io::Error::other("upstream went away")))
                    .await;
                return;
            }
            Step::Hang => {
                tx.closed().await;
                return;
            }
        }
    }
}

async fn serve(scripts: Scripts) -> SocketAddr {
    let scripts = Arc::new(scripts);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let scripts = scripts.clone();
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
                    let (content_type, steps) = scripts[req.uri().path()].clone();
                    async move {
                        let (tx, rx) = mpsc::channel(4);
                        tokio::spawn(play(steps, tx));
                        Ok::<_, Infallible>(
                            Response::builder()
                                .header("content-type", content_type)
                                .body(Fed(rx))
                                .unwrap(),
                        )
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    addr
}

type Client1 = Client<HttpConnector, Empty<Bytes>>;

/// A target that sends every request to `path` on the server.
fn target(
    name: &'static str,
    addr: SocketAddr,
    path: &'static str,
    breaker: BreakerLayer,
) -> Target<Client1, Empty<Bytes>> {
    let client: Client1 = Client::builder(TokioExecutor::new()).build_http();
    let uri: Uri = format!("http://{addr}{path}").parse().unwrap();
    Target::new(name, client)
        .breaker(breaker)
        .rewrite(move |req: &mut Request<Empty<Bytes>>| *req.uri_mut() = uri.clone())
}

struct Stack {
    svc: Failover<Empty<Bytes>, Incoming, Client1>,
    primary: BreakerHandle,
    backup: BreakerHandle,
}

fn threshold(n: u32) -> BreakerLayer {
    BreakerLayer::builder()
        .breaker(BreakerConfig::builder().threshold(n).build().unwrap())
        .build()
        .unwrap()
}

fn stack(addr: SocketAddr, primary: (&'static str, BreakerLayer), backup: &'static str) -> Stack {
    let (primary_handle, backup_layer) = (primary.1.handle(), BreakerLayer::new());
    let backup_handle = backup_layer.handle();
    let svc = Failover::builder()
        .target(target("primary", addr, primary.0, primary.1))
        .target(target("backup", addr, backup, backup_layer))
        .build()
        .unwrap();
    Stack {
        svc,
        primary: primary_handle,
        backup: backup_handle,
    }
}

fn request() -> Request<Empty<Bytes>> {
    Request::post("http://placeholder.invalid/v1/chat/completions")
        .body(Empty::new())
        .unwrap()
}

/// One request: who served it, and every byte the caller read (or the
/// error that ended the body).
async fn call(
    svc: &mut Failover<Empty<Bytes>, Incoming, Client1>,
) -> (&'static str, Result<Bytes, BoxError>) {
    let res = svc.ready().await.unwrap().call(request()).await.unwrap();
    let served = ServedBy::of(&res).unwrap().target;
    let body = res.into_body().collect().await.map(|c| c.to_bytes());
    (served, body)
}

fn openai_ok() -> Vec<Step> {
    vec![send(ROLE), send(HEL), send(LO), send(DONE)]
}

fn openai_ok_bytes() -> Bytes {
    Bytes::from([ROLE, HEL, LO, DONE].concat())
}

fn failures(handle: &BreakerHandle) -> u64 {
    handle.upstream_failures(Verdict::Availability)
}

#[tokio::test]
async fn a_stream_that_errs_in_band_before_output_fails_over_and_the_caller_reads_only_the_backup()
{
    let addr = serve(Scripts::from([
        ("/primary", (SSE, vec![send(ROLE), send(OVERLOADED)])),
        ("/backup", (SSE, openai_ok())),
    ]))
    .await;
    let mut s = stack(addr, ("/primary", BreakerLayer::new()), "/backup");
    let (served, body) = call(&mut s.svc).await;
    assert_eq!(served, "backup");
    assert_eq!(body.unwrap(), openai_ok_bytes());
    assert_eq!(failures(&s.primary), 1);
    assert_eq!(failures(&s.backup), 0);
}

#[tokio::test]
async fn a_stream_cut_before_output_fails_over_unseen() {
    let addr = serve(Scripts::from([
        ("/primary", (SSE, vec![send(ROLE), Step::Cut])),
        ("/backup", (SSE, openai_ok())),
    ]))
    .await;
    let mut s = stack(addr, ("/primary", BreakerLayer::new()), "/backup");
    let (served, body) = call(&mut s.svc).await;
    assert_eq!(served, "backup");
    assert_eq!(body.unwrap(), openai_ok_bytes());
    assert_eq!(failures(&s.primary), 1);
}

#[tokio::test]
async fn a_stream_that_stalls_before_output_fails_over_unseen() {
    let addr = serve(Scripts::from([
        ("/primary", (SSE, vec![send(ROLE), Step::Hang])),
        ("/backup", (SSE, openai_ok())),
    ]))
    .await;
    let stalls = BreakerLayer::builder()
        .stall_timeout(Duration::from_millis(200))
        .build()
        .unwrap();
    let mut s = stack(addr, ("/primary", stalls), "/backup");
    let (served, body) = call(&mut s.svc).await;
    assert_eq!(served, "backup");
    assert_eq!(body.unwrap(), openai_ok_bytes());
    assert_eq!(failures(&s.primary), 1);
}

#[tokio::test]
async fn an_error_after_the_first_output_passes_through_and_opens_the_breaker_at_its_threshold() {
    let addr = serve(Scripts::from([
        (
            "/primary",
            (SSE, vec![send(ROLE), send(HEL), send(OVERLOADED)]),
        ),
        ("/backup", (SSE, openai_ok())),
    ]))
    .await;
    let mut s = stack(addr, ("/primary", threshold(3)), "/backup");
    for n in 1..=3 {
        let (served, body) = call(&mut s.svc).await;
        // The caller had output: the stream is theirs, error and all.
        assert_eq!(served, "primary");
        assert_eq!(body.unwrap(), Bytes::from([ROLE, HEL, OVERLOADED].concat()));
        assert_eq!(failures(&s.primary), n);
    }
    assert_eq!(
        s.primary.breaker_status(&addr.to_string()),
        Some(BreakerStatus::Open)
    );
    // Open: the next request goes to the backup without calling the primary.
    let (served, body) = call(&mut s.svc).await;
    assert_eq!(served, "backup");
    assert_eq!(body.unwrap(), openai_ok_bytes());
}

#[tokio::test]
async fn bedrock_frames_split_seven_bytes_at_a_time_fail_over_before_output_and_pass_after() {
    use eventstream_support::{output_and_end, start, stream_error};
    let failing = [start(), stream_error()].concat();
    let complete = [start(), output_and_end()].concat();
    let addr = serve(Scripts::from([
        ("/failing", (AWS, vec![Step::Split(failing.into(), 7)])),
        (
            "/complete",
            (AWS, vec![Step::Split(complete.clone().into(), 7)]),
        ),
    ]))
    .await;
    let mut s = stack(addr, ("/failing", BreakerLayer::new()), "/complete");
    let (served, body) = call(&mut s.svc).await;
    assert_eq!(served, "backup");
    assert_eq!(body.unwrap(), complete);
    assert_eq!(failures(&s.primary), 1);

    // A complete stream from the primary passes byte for byte.
    let mut s = stack(addr, ("/complete", BreakerLayer::new()), "/failing");
    let (served, body) = call(&mut s.svc).await;
    assert_eq!(served, "primary");
    assert_eq!(body.unwrap(), complete);
    assert_eq!(failures(&s.primary), 0);
}

#[tokio::test]
async fn when_every_target_fails_before_output_the_caller_gets_the_last_real_stream() {
    let addr = serve(Scripts::from([
        ("/a", (SSE, vec![send(ROLE), send(OVERLOADED)])),
        ("/b", (SSE, vec![send(ROLE), send(OVERLOADED)])),
    ]))
    .await;
    let mut s = stack(addr, ("/a", BreakerLayer::new()), "/b");
    let res = s.svc.ready().await.unwrap().call(request()).await.unwrap();
    assert_eq!(ServedBy::of(&res).unwrap().target, "backup");
    // Marked as the failure it is, for a retry layer above.
    let c = res.extensions().get::<Classification>().unwrap();
    assert_eq!(c.verdict, Verdict::Availability);
    let body = res.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(body, Bytes::from([ROLE, OVERLOADED].concat()));
    assert_eq!((failures(&s.primary), failures(&s.backup)), (1, 1));
}
