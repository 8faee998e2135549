//! The reqwest-middleware front door over a loopback server: 503s open the
//! breaker, a 429 gates, a spend cap parks, the handle shows it, and a
//! refused request never reaches the server.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Full;
use hyper_util::rt::TokioIo;
use reqwest_middleware::{ClientBuilder, ClientWithMiddleware, Error};
use tokio::net::TcpListener;
use tower_levee::breaker::{BreakerHandle, BreakerLayer, CircuitOpen, Parked, Throttled};
use tower_levee::reqwest_middleware::LeveeMiddleware;

/// A provider on 127.0.0.1 answering by path: `/outage` 503, `/busy` 429
/// with a 30 s wait, `/capped` an exhausted quota, else a completion.
/// Returns its address and a count of requests it answered.
async fn provider() -> (SocketAddr, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let answered = Arc::new(AtomicUsize::new(0));
    let count = answered.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let count = count.clone();
            let svc = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                count.fetch_add(1, Ordering::SeqCst);
                let path = req.uri().path().to_owned();
                async move {
                    let (status, body) = match path.as_str() {
                        "/outage" => (503, "upstream unavailable"),
                        "/busy" => (429, r#"{"error":{"code":"rate_limit_exceeded"}}"#),
                        "/capped" => (
                            429,
                            r#"{"error":{"code":"insufficient_quota","message":"You exceeded your current quota"}}"#,
                        ),
                        _ => (200, r#"{"id":"chatcmpl-1","choices":[]}"#),
                    };
                    let mut res = Response::builder().status(status);
                    if status == 429 {
                        res = res.header("retry-after", "30");
                    }
                    Ok::<_, Infallible>(
                        res.body(Full::new(Bytes::from_static(body.as_bytes())))
                            .unwrap(),
                    )
                }
            });
            tokio::spawn(async move {
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    (addr, answered)
}

fn client() -> (ClientWithMiddleware, BreakerHandle) {
    let levee = LeveeMiddleware::new(BreakerLayer::new());
    let handle = levee.handle();
    (
        ClientBuilder::new(reqwest::Client::new())
            .with(levee)
            .build(),
        handle,
    )
}

fn refused_by<T: std::error::Error + Send + Sync + 'static>(err: &Error) -> bool {
    matches!(err, Error::Middleware(e) if e.is::<T>())
}

#[tokio::test]
async fn five_503s_open_the_breaker_and_the_next_call_is_refused_unsent() {
    let (addr, answered) = provider().await;
    let (client, handle) = client();
    for _ in 0..5 {
        let res = client
            .post(format!("http://{addr}/outage"))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 503);
        res.bytes().await.unwrap();
    }
    assert_eq!(
        handle.breaker_status(&addr.to_string()).unwrap().as_str(),
        "open"
    );
    let err = client
        .post(format!("http://{addr}/ok"))
        .send()
        .await
        .unwrap_err();
    assert!(refused_by::<CircuitOpen>(&err), "{err:?}");
    assert_eq!(answered.load(Ordering::SeqCst), 5);
}

#[tokio::test]
async fn a_429_gates_and_a_spend_cap_parks_and_the_handle_shows_both() {
    let (addr, answered) = provider().await;
    let (client, handle) = client();
    let res = client
        .post(format!("http://{addr}/busy"))
        .send()
        .await
        .unwrap();
    assert_eq!(
        res.status(),
        429,
        "the provider's answer reaches the caller"
    );
    let err = client
        .post(format!("http://{addr}/ok"))
        .send()
        .await
        .unwrap_err();
    assert!(refused_by::<Throttled>(&err), "{err:?}");
    let gate = handle
        .states()
        .into_iter()
        .find(|s| s.mechanism == "gate")
        .unwrap();
    assert_eq!(gate.state, "gated");
    assert_eq!(
        handle.breaker_status(&addr.to_string()).unwrap().as_str(),
        "closed"
    );

    let (client, handle) = self::client();
    let res = client
        .post(format!("http://{addr}/capped"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 429);
    let err = client
        .post(format!("http://{addr}/ok"))
        .send()
        .await
        .unwrap_err();
    assert!(refused_by::<Parked>(&err), "{err:?}");
    assert!(
        handle
            .states()
            .iter()
            .any(|s| s.mechanism == "park" && s.state == "parked")
    );
    assert_eq!(answered.load(Ordering::SeqCst), 2, "refusals sent nothing");
}

#[tokio::test]
async fn an_error_of_the_rest_of_the_chain_comes_back_as_it_was() {
    let (client, _) = client();
    // Nothing listens on port 9 of loopback (discard): a connect error.
    let err = client
        .post("http://127.0.0.1:9/ok")
        .send()
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Reqwest(_)), "{err:?}");
}

#[tokio::test]
async fn the_event_of_a_breaker_shared_by_several_models_names_the_model_that_tripped_it() {
    let (addr, _) = provider().await;
    let models = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = models.clone();
    let layer = BreakerLayer::builder()
        .on_event(move |e| {
            if e.to() == "open" {
                seen.lock().unwrap().push(e.model().map(str::to_owned));
            }
        })
        .build()
        .unwrap();
    let client = ClientBuilder::new(reqwest::Client::new())
        .with(LeveeMiddleware::new(layer))
        .build();
    // One account (the host), two models: healthy calls for one, the
    // failures that open the account's breaker for the other.
    let call = |path: &'static str, model: &'static str| {
        let client = client.clone();
        async move {
            client
                .post(format!("http://{addr}{path}"))
                .header("content-type", "application/json")
                .body(format!(r#"{{"model":"{model}","messages":[]}}"#))
                .send()
                .await
        }
    };
    call("/ok", "gpt-4o-mini")
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    for _ in 0..5 {
        call("/outage", "gpt-4o")
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap();
    }
    assert_eq!(*models.lock().unwrap(), [Some("gpt-4o".to_owned())]);
}
