//! `tower_levee::reqwest::HttpClient` over loopback: a hyper server on
//! 127.0.0.1, a `reqwest::Client` under the breaker. Classification stays
//! complete: status, headers, a peek of error bodies (which still arrive
//! whole), and a watch on streamed successes; timeouts count as timeouts.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use levee_core::breaker::{BreakerConfig, BreakerStatus};
use levee_core::classify::{Classification, TransportFailure, Verdict};
use tokio::net::TcpListener;
use tower::{BoxError, Service, ServiceBuilder, ServiceExt};
use tower_levee::breaker::{BreakerLayer, CircuitOpen, Parked, Scope, Throttled};
use tower_levee::error::transport_failure;
use tower_levee::reqwest::HttpClient;

const THROTTLED: &str =
    r#"{"error":{"code":"rate_limit_exceeded","message":"Rate limit reached for gpt-4o"}}"#;
const QUOTA: &str =
    r#"{"error":{"code":"insufficient_quota","message":"You exceeded your current quota"}}"#;
const STREAM: &str = "event: message_start\ndata: {\"type\":\"message_start\"}\n\n\
    event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n";

async fn answer(req: Request<hyper::body::Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let (status, headers, body): (u16, &[(&str, &str)], &str) = match req.uri().path() {
        "/throttle" => (429, &[("retry-after", "7")], THROTTLED),
        "/quota" => (429, &[], QUOTA),
        "/down" => (503, &[], "upstream connect error"),
        "/stream" => (200, &[("content-type", "text/event-stream")], STREAM),
        "/hang" => {
            tokio::time::sleep(Duration::from_secs(5)).await;
            (200, &[], "{}")
        }
        _ => (
            200,
            &[("content-type", "application/json")],
            r#"{"choices":[]}"#,
        ),
    };
    let mut res = Response::builder().status(status);
    for (k, v) in headers {
        res = res.header(*k, *v);
    }
    Ok(res
        .body(Full::new(Bytes::from_static(body.as_bytes())))
        .unwrap())
}

async fn serve() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), hyper::service::service_fn(answer))
                    .await;
            });
        }
    });
    addr
}

fn post(addr: SocketAddr, path: &str, domain: &'static str) -> Request<String> {
    let mut req = Request::post(format!("http://{addr}{path}"))
        .header("content-type", "application/json")
        .body(r#"{"model":"gpt-4o"}"#.to_owned())
        .unwrap();
    req.extensions_mut().insert(Scope::new().domain(domain));
    req
}

async fn send<S>(svc: &mut S, req: Request<String>) -> Result<S::Response, S::Error>
where
    S: Service<Request<String>>,
{
    svc.ready().await?.call(req).await
}

#[tokio::test]
async fn reqwest_client_under_the_breaker_is_classified_completely() {
    let addr = serve().await;
    let layer = BreakerLayer::builder()
        .breaker(BreakerConfig::builder().threshold(2).build().unwrap())
        .build()
        .unwrap();
    let handle = layer.handle();
    let reqwest = reqwest::Client::builder()
        .no_proxy() // loopback: ignore any proxy set in the environment
        .timeout(Duration::from_millis(200))
        .build()
        .unwrap();
    let mut svc = ServiceBuilder::new()
        .layer(layer)
        .service(HttpClient::new(reqwest));

    macro_rules! call {
        ($path:expr, $domain:expr) => {
            send(&mut svc, post(addr, $path, $domain)).await
        };
    }

    // A success: the body arrives as sent.
    let res = call!("/ok", "ok").unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["content-type"], "application/json");
    let bytes = res.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(bytes, r#"{"choices":[]}"#);

    // A 429: the peeked body decides (throttled, 7 s from `retry-after`), the
    // caller still gets the whole body; the gate then refuses at once.
    let res = call!("/throttle", "throttle").unwrap();
    assert_eq!(res.status(), 429);
    let c = res.extensions().get::<Classification>().cloned().unwrap();
    assert_eq!(c.verdict, Verdict::Throttled);
    assert_eq!(c.wait, Some(Duration::from_secs(7)));
    assert_eq!(
        res.into_body().collect().await.unwrap().to_bytes(),
        THROTTLED
    );
    let err = call!("/throttle", "throttle").unwrap_err();
    assert!(err.is::<Throttled>(), "{err}");
    assert_eq!(
        handle.breaker_status("throttle"),
        Some(BreakerStatus::Closed)
    );

    // The same status with a quota code in the body parks the account.
    let res = call!("/quota", "quota").unwrap();
    assert_eq!(
        res.extensions().get::<Classification>().unwrap().verdict,
        Verdict::Quota
    );
    let err = call!("/quota", "quota").unwrap_err();
    assert!(err.is::<Parked>(), "{err}");

    // 503 twice: the breaker opens.
    for _ in 0..2 {
        assert_eq!(call!("/down", "down").unwrap().status(), 503);
    }
    assert_eq!(handle.breaker_status("down"), Some(BreakerStatus::Open));
    assert!(call!("/down", "down").unwrap_err().is::<CircuitOpen>());

    // A 200 stream with an in-band overload: judged at its end, by the watch.
    let before = handle.upstream_failures(Verdict::Availability);
    let res = call!("/stream", "stream").unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(res.into_body().collect().await.unwrap().to_bytes(), STREAM);
    assert_eq!(handle.upstream_failures(Verdict::Availability), before + 1);

    // reqwest's own timeout: an error the breaker reads as a timeout.
    let err: BoxError = call!("/hang", "hang").unwrap_err();
    assert_eq!(
        transport_failure(&*err),
        TransportFailure::Timeout,
        "{err:?}"
    );
    assert_eq!(handle.upstream_failures(Verdict::Availability), before + 2);
}

#[tokio::test]
async fn a_request_reqwest_cannot_send_fails_in_the_future() {
    let mut svc = HttpClient::default();
    let req = Request::get("/relative/only").body(String::new()).unwrap();
    let err = send(&mut svc, req).await.unwrap_err();
    assert!(!err.to_string().is_empty());
}

#[tokio::test]
async fn error_urls_lose_their_query_and_userinfo() {
    // Nothing listens on port 9 of loopback: a connect error naming the URL.
    let mut svc = HttpClient::new(reqwest::Client::builder().no_proxy().build().unwrap());
    let req = Request::get("http://user:sk-SECRET@127.0.0.1:9/v1beta/models?key=AIza-SECRET")
        .body(String::new())
        .unwrap();
    let err = send(&mut svc, req).await.unwrap_err();
    let text = format!("{err} {err:?}");
    assert!(!text.contains("SECRET"), "{text}");
    assert_eq!(
        transport_failure(&*err),
        TransportFailure::Connect,
        "{text}"
    );
}
