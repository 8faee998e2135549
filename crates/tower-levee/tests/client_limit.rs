//! Per-client limits: each caller held to its requests and tokens per
//! minute, tokens read from the answers as they pass, refusals never sent.

use std::num::NonZeroU64;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, StreamBody};
use tower::{Service, ServiceExt};
use tower_layer::Layer;
use tower_levee::BoxError;
use tower_levee::client_limit::{
    ClientId, ClientLimitLayer, ClientLimited, ClientLimits, LimitKind,
};
use tower_levee::error::{RefusalKind, Rejection};

fn nz(n: u64) -> NonZeroU64 {
    NonZeroU64::new(n).unwrap()
}

/// A provider answering every request with `status` and `body`, counting calls.
fn provider(
    status: StatusCode,
    body: &'static str,
    calls: Arc<AtomicUsize>,
) -> impl Service<
    Request<Full<Bytes>>,
    Response = Response<Full<Bytes>>,
    Error = BoxError,
    Future = impl Future<Output = Result<Response<Full<Bytes>>, BoxError>>,
> + Clone {
    tower::service_fn(move |_req: Request<Full<Bytes>>| {
        calls.fetch_add(1, Ordering::SeqCst);
        async move {
            let mut res = Response::new(Full::new(Bytes::from_static(body.as_bytes())));
            *res.status_mut() = status;
            Ok::<_, BoxError>(res)
        }
    })
}

/// Readies `svc` and calls it with `req`.
async fn send<S, B>(svc: &mut S, req: Request<B>) -> Result<S::Response, BoxError>
where
    S: Service<Request<B>, Error = BoxError>,
{
    svc.ready().await?.call(req).await
}

fn request(client: &str, body: &'static str) -> Request<Full<Bytes>> {
    let mut req = Request::new(Full::new(Bytes::from_static(body.as_bytes())));
    req.extensions_mut().insert(ClientId::new(client));
    req
}

#[tokio::test(start_paused = true)]
async fn a_caller_over_its_requests_per_minute_is_refused_unsent_until_its_bucket_refills() {
    let calls = Arc::new(AtomicUsize::new(0));
    let layer = ClientLimitLayer::new()
        .client("a", ClientLimits::new().requests_per_minute(nz(2)))
        .client("b", ClientLimits::new().requests_per_minute(nz(2)));
    let handle = layer.handle();
    let mut svc = layer.layer(provider(StatusCode::OK, "{}", calls.clone()));

    for _ in 0..2 {
        send(&mut svc, request("a", "")).await.unwrap();
    }
    let err = send(&mut svc, request("a", "")).await.unwrap_err();
    let limited = err
        .downcast_ref::<ClientLimited>()
        .expect("a ClientLimited");
    assert_eq!(limited.limit(), LimitKind::Requests);
    assert_eq!(limited.client(), "a");
    // Two a minute: one back every 30 s.
    assert_eq!(limited.retry_after(), Duration::from_secs(30));
    let rejection = Rejection::find(&*err).unwrap();
    assert_eq!(rejection.kind(), RefusalKind::ClientLimit);
    assert_eq!(rejection.status_code(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(rejection.code(), "client_rate_limited");
    assert_eq!(calls.load(Ordering::SeqCst), 2, "the refusal was not sent");

    // Another caller has its own bucket.
    send(&mut svc, request("b", "")).await.unwrap();
    tokio::time::advance(Duration::from_secs(30)).await;
    send(&mut svc, request("a", "")).await.unwrap();

    let seen = handle.snapshot();
    assert_eq!(
        (seen[0].name.as_str(), seen[0].requests, seen[0].refused),
        ("a", 3, 1)
    );
    assert_eq!(
        (seen[1].name.as_str(), seen[1].requests, seen[1].refused),
        ("b", 1, 0)
    );
}

#[tokio::test(start_paused = true)]
async fn the_tokens_an_answer_reports_are_spent_and_refuse_the_next_request_until_repaid() {
    let calls = Arc::new(AtomicUsize::new(0));
    let body =
        r#"{"choices":[],"usage":{"prompt_tokens":40,"completion_tokens":80,"total_tokens":120}}"#;
    let layer = ClientLimitLayer::new().client("a", ClientLimits::new().tokens_per_minute(nz(60)));
    let handle = layer.handle();
    let mut svc = layer.layer(provider(StatusCode::OK, body, calls.clone()));

    let res = send(&mut svc, request("a", "")).await.unwrap();
    // Admitted: nothing is spent until the answer says what it used.
    assert_eq!(handle.snapshot()[0].tokens, 0);
    let read = res.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(read, body, "the body passes unchanged");
    assert_eq!(handle.snapshot()[0].tokens, 120);

    let err = send(&mut svc, request("a", "")).await.unwrap_err();
    let limited = err.downcast_ref::<ClientLimited>().unwrap();
    assert_eq!(limited.limit(), LimitKind::Tokens);
    // 60 in debt (the floor), at one a second, and one more to admit.
    assert_eq!(limited.retry_after(), Duration::from_secs(61));
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn a_stream_without_usage_is_counted_by_its_events_and_prompt() {
    let layer = ClientLimitLayer::new().client("a", ClientLimits::new());
    let handle = layer.handle();
    let stream = tower::service_fn(|_req: Request<Full<Bytes>>| async {
        let events = [
            "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n",
            "data: [DONE]\n\n",
        ]
        .map(|e| Ok::<_, BoxError>(http_body::Frame::data(Bytes::from_static(e.as_bytes()))));
        let body = StreamBody::new(futures_util::stream::iter(events));
        Ok::<_, BoxError>(Response::new(body))
    });
    let mut svc = layer.layer(stream);
    // A 40-byte request: about 10 tokens of prompt.
    let res = send(
        &mut svc,
        request("a", "0123456789012345678901234567890123456789"),
    )
    .await
    .unwrap();
    res.into_body().collect().await.unwrap();
    assert_eq!(handle.snapshot()[0].tokens, 12);
}

#[tokio::test(start_paused = true)]
async fn failed_answers_spend_no_tokens_and_unknown_callers_pass_uncounted() {
    let calls = Arc::new(AtomicUsize::new(0));
    let layer = ClientLimitLayer::new().client("a", ClientLimits::new().tokens_per_minute(nz(1)));
    let handle = layer.handle();
    let mut svc = layer.layer(provider(
        StatusCode::SERVICE_UNAVAILABLE,
        r#"{"error":{"message":"overloaded","usage":{"total_tokens":500}}}"#,
        calls.clone(),
    ));
    for _ in 0..3 {
        let res = send(&mut svc, request("a", "")).await.unwrap();
        assert_eq!(res.status(), 503);
        res.into_body().collect().await.unwrap();
    }
    assert_eq!(handle.snapshot()[0].tokens, 0);
    assert_eq!(handle.snapshot()[0].requests, 3);
    // No ClientId, or a caller not named: unlimited, uncounted.
    svc.ready()
        .await
        .unwrap()
        .call(Request::new(Full::new(Bytes::new())))
        .await
        .unwrap();
    send(&mut svc, request("z", "")).await.unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 5);
    assert_eq!(handle.snapshot().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_body_dropped_before_its_end_spends_what_was_read() {
    let layer = ClientLimitLayer::new().client("a", ClientLimits::new());
    let handle = layer.handle();
    let events = tower::service_fn(|_req: Request<Full<Bytes>>| async {
        let (tx, rx) = tokio::sync::mpsc::channel::<Result<http_body::Frame<Bytes>, BoxError>>(4);
        tx.send(Ok(http_body::Frame::data(Bytes::from_static(
            b"event: message_start\ndata: {\"message\":{\"usage\":{\"input_tokens\":30,\"output_tokens\":1}}}\n\n",
        ))))
        .await
        .unwrap();
        // The stream goes on; the sender is kept alive by the task.
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            drop(tx);
        });
        let body = StreamBody::new(tokio_stream_from(rx));
        Ok::<_, BoxError>(Response::new(body))
    });
    let mut svc = layer.layer(events);
    let res = send(&mut svc, request("a", "")).await.unwrap();
    let mut body = res.into_body();
    body.frame().await.unwrap().unwrap();
    assert_eq!(
        handle.snapshot()[0].tokens,
        0,
        "spent at the end, or at drop"
    );
    drop(body);
    assert_eq!(handle.snapshot()[0].tokens, 31);
}

/// A channel's receiver as a stream of frames.
fn tokio_stream_from<T>(
    mut rx: tokio::sync::mpsc::Receiver<T>,
) -> impl futures_util::Stream<Item = T> {
    futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx))
}
