//! A Levee stack as rig's HTTP client (feature `rig`): every rig provider,
//! agent and stream sending through the retry budget, bulkhead, failover
//! and breaker.
//!
//! rig's providers send through any `HttpClientExt` (from `rig-http`,
//! re-exported by `rig-core` as `rig_core::http_client`), given to a
//! provider's configuration with `.connect(client)` or to a client with
//! `.with_http(client)`. [`RigHttpClient`] is one over a tower service of
//! `http::Request<Full<Bytes>>`: a Levee stack over hyper, say. Unlike a
//! reqwest middleware, it is the whole transport, so every layer applies,
//! streams included: the breaker layer holds a stream until its first
//! output, so a stream that fails before it is replaced (retried, or sent
//! to the next target) and rig reads only the one that served.
//!
//! The client answers as rig's bundled reqwest transport does:
//! - **a success** comes back with its body read when rig asks for it, or
//!   as a stream of the body's chunks;
//! - **a non-success status** (an error answer no layer replaced: a `400`,
//!   or a `429` once the retry budget has given up) is an
//!   `Error::InvalidStatusCodeWithDetails` with its status, headers and
//!   body, so rig reads the provider's own error;
//! - **a Levee refusal** (an open breaker, a closed gate, a full bulkhead,
//!   no target left) is an `Error::Instance` whose source is the Levee
//!   error: find it with [`Rejection::find`](crate::error::Rejection::find).
//!   A model's call returns it inside `ProviderError::Http(error)` (rig does
//!   not name it as that error's source: call `Rejection::find(&*error)`);
//!   rig-agent reports a model's failure as text, Levee's message in it.
//!
//! rig retries nothing itself, so Levee's retry budget is the one retry
//! loop. A multipart request (a transcription's audio) is encoded in
//! memory, as `MultipartForm::encode` writes it, so a retry can send it
//! again; a part whose name or file name holds a quote or a line break is
//! refused unsent ([`MultipartNameError`]). A redirect is answered as any
//! other non-success status (hyper follows none, where reqwest follows
//! ten): put tower-http's `FollowRedirect` in the stack to follow them.
//!
//! The feature builds against `rig-http` 0.44 (rig-core and rig-agent
//! 0.44), which needs Rust 1.95 (the rest of this crate needs 1.88).
//!
//! ```no_run
//! use std::time::Duration;
//! use bytes::Bytes;
//! use http_body_util::Full;
//! use hyper_util::client::legacy::Client;
//! use hyper_util::rt::TokioExecutor;
//! use tower::ServiceBuilder;
//! use tower_levee::rig::RigHttpClient;
//! use tower_levee::{BreakerLayer, RetryBudgetLayer};
//!
//! # fn build() {
//! // A hyper client with TLS (hyper-rustls) in a real program.
//! let hyper = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
//! let stack = ServiceBuilder::new()
//!     .layer(RetryBudgetLayer::with_defaults())
//!     .layer(BreakerLayer::new())
//!     .timeout(Duration::from_secs(60))
//!     .service(hyper);
//! let http = RigHttpClient::new(stack);
//! // rig_core::providers::openai::OpenAIConfig::from_env()?.connect(http)
//! # let _ = http;
//! # }
//! ```

// The trait's results carry rig's own error, which is rig's to size.
#![allow(clippy::result_large_err)]

use std::fmt;
use std::future::Future;

use bytes::Bytes;
use futures_util::StreamExt;
use http::{HeaderValue, Request, Response};
use http_body::Body;
use http_body_util::{BodyDataStream, BodyExt, Full};
use rig_http::http_client::{
    BoxedStream, Error, HttpClientExt, LazyBody, MultipartForm, Result, StreamingResponse,
};
use tower::ServiceExt;
use tower_service::Service;

use crate::error::BoxError;

/// A tower service (a Levee stack over an HTTP client) as rig's HTTP
/// client. See the [module docs](self).
#[derive(Clone)]
pub struct RigHttpClient<S> {
    service: S,
}

impl<S> RigHttpClient<S> {
    /// rig's client over `service`.
    pub fn new(service: S) -> Self {
        RigHttpClient { service }
    }

    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.service
    }

    /// The inner service, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.service
    }

    /// The inner service, unwrapped.
    pub fn into_inner(self) -> S {
        self.service
    }
}

impl<S> fmt::Debug for RigHttpClient<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RigHttpClient").finish_non_exhaustive()
    }
}

impl<S, RB> RigHttpClient<S>
where
    S: Service<Request<Full<Bytes>>, Response = Response<RB>> + Clone + Send + Sync + 'static,
    S::Future: Send,
    S::Error: Into<BoxError>,
    RB: Body<Data = Bytes> + Send + 'static,
    RB::Error: Into<BoxError>,
{
    /// Sends `request` through the stack: its answer if a success, else
    /// the error rig expects for it.
    fn call(
        &self,
        request: Request<Bytes>,
    ) -> impl Future<Output = Result<Response<RB>>> + Send + 'static {
        let service = self.service.clone();
        let request = request.map(Full::new);
        async move {
            let response = service.oneshot(request).await.map_err(instance)?;
            if response.status().is_success() {
                return Ok(response);
            }
            let (head, body) = response.into_parts();
            // The provider's own error, as rig's reqwest transport keeps it.
            let body = match body.collect().await {
                Ok(collected) => String::from_utf8_lossy(&collected.to_bytes()).into_owned(),
                Err(e) => format!("failed to read error response body: {}", e.into()),
            };
            Err(Error::non_success_with_details(
                head.status,
                head.headers,
                body,
            ))
        }
    }
}

/// A success's head with a body read only when rig awaits it.
fn lazy<RB, U>(response: Response<RB>) -> Response<LazyBody<U>>
where
    RB: Body<Data = Bytes> + Send + 'static,
    RB::Error: Into<BoxError>,
    U: From<Bytes> + Send + 'static,
{
    response.map(|body| -> LazyBody<U> {
        Box::pin(async move {
            let collected = body.collect().await.map_err(instance)?;
            Ok(U::from(collected.to_bytes()))
        })
    })
}

/// `form` encoded whole, with its content type; an error, unsent, if a
/// part's name or file name would break out of its quoted header value
/// (`MultipartForm::encode` writes them as they are).
fn multipart(form: &MultipartForm) -> Result<(HeaderValue, Bytes)> {
    for part in form.parts() {
        for name in std::iter::once(part.name()).chain(part.get_filename()) {
            if name.contains(['"', '\r', '\n']) {
                return Err(instance(MultipartNameError));
            }
        }
    }
    let (boundary, body) = form.encode();
    let content_type = HeaderValue::try_from(format!("multipart/form-data; boundary={boundary}"))?;
    Ok((content_type, body))
}

/// A multipart part whose name or file name holds a quote or a line break.
#[derive(Debug)]
#[non_exhaustive]
pub struct MultipartNameError;

impl fmt::Display for MultipartNameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a multipart part's name or file name holds a quote or a line break")
    }
}

impl std::error::Error for MultipartNameError {}

/// A body's error as rig's transport error, the original its source.
fn instance(e: impl Into<BoxError>) -> Error {
    Error::Instance(e.into())
}

impl<S, RB> HttpClientExt for RigHttpClient<S>
where
    S: Service<Request<Full<Bytes>>, Response = Response<RB>> + Clone + Send + Sync + 'static,
    S::Future: Send,
    S::Error: Into<BoxError>,
    RB: Body<Data = Bytes> + Send + 'static,
    RB::Error: Into<BoxError>,
{
    fn send<T, U>(
        &self,
        req: Request<T>,
    ) -> impl Future<Output = Result<Response<LazyBody<U>>>> + Send + 'static
    where
        T: Into<Bytes> + Send,
        U: From<Bytes> + Send + 'static,
    {
        let call = self.call(req.map(Into::into));
        async move { Ok(lazy(call.await?)) }
    }

    fn send_multipart<U>(
        &self,
        req: Request<MultipartForm>,
    ) -> impl Future<Output = Result<Response<LazyBody<U>>>> + Send + 'static
    where
        U: From<Bytes> + Send + 'static,
    {
        let (mut head, form) = req.into_parts();
        let call = multipart(&form).map(|(content_type, body)| {
            head.headers
                .insert(http::header::CONTENT_TYPE, content_type);
            self.call(Request::from_parts(head, body))
        });
        async move { Ok(lazy(call?.await?)) }
    }

    fn send_streaming<T>(
        &self,
        req: Request<T>,
    ) -> impl Future<Output = Result<StreamingResponse>> + Send
    where
        T: Into<Bytes> + Send,
    {
        let call = self.call(req.map(Into::into));
        async move {
            let response = call.await?;
            Ok(response.map(|body| -> BoxedStream {
                Box::pin(BodyDataStream::new(body).map(|chunk| chunk.map_err(instance)))
            }))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use crate::breaker::CircuitOpen;
    use crate::error::Rejection;

    /// What a call sent: its content type and body.
    type Sent = (Option<HeaderValue>, Bytes);

    /// A stack that answers by the request's path and records each body.
    #[derive(Clone, Default)]
    struct Provider {
        bodies: Arc<std::sync::Mutex<Vec<Sent>>>,
        calls: Arc<AtomicUsize>,
    }

    impl Service<Request<Full<Bytes>>> for Provider {
        type Response = Response<Full<Bytes>>;
        type Error = BoxError;
        type Future = std::pin::Pin<
            Box<dyn Future<Output = std::result::Result<Response<Full<Bytes>>, BoxError>> + Send>,
        >;

        fn poll_ready(
            &mut self,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<std::result::Result<(), BoxError>> {
            std::task::Poll::Ready(Ok(()))
        }

        fn call(&mut self, req: Request<Full<Bytes>>) -> Self::Future {
            self.calls.fetch_add(1, Ordering::SeqCst);
            let bodies = self.bodies.clone();
            Box::pin(async move {
                let path = req.uri().path().to_owned();
                let content_type = req.headers().get(http::header::CONTENT_TYPE).cloned();
                let body = req.into_body().collect().await?.to_bytes();
                bodies.lock().unwrap().push((content_type, body));
                let response = Response::builder().header("x-request-id", "req-1");
                Ok(match path.as_str() {
                    "/open" => {
                        return Err(CircuitOpen::new("api.openai.com", Default::default()).into());
                    }
                    "/bad" => response
                        .status(400)
                        .body(Full::from(r#"{"error":{"message":"bad"}}"#))?,
                    _ => response.body(Full::from("data: one\n\ndata: two\n\n"))?,
                })
            })
        }
    }

    fn request(path: &str) -> Request<&'static str> {
        Request::post(format!("http://provider{path}"))
            .body(r#"{"model":"gpt-4o"}"#)
            .unwrap()
    }

    /// The error of a call that must fail (a response's body is no `Debug`).
    fn error<T>(result: Result<T>) -> Error {
        match result {
            Ok(_) => panic!("an error expected"),
            Err(e) => e,
        }
    }

    #[tokio::test]
    async fn a_success_is_read_when_rig_asks_for_its_body() {
        let provider = Provider::default();
        let client = RigHttpClient::new(provider.clone());
        let response = client.send::<_, Vec<u8>>(request("/ok")).await.unwrap();
        assert_eq!(response.status(), 200);
        assert_eq!(response.headers()["x-request-id"], "req-1");
        let body = response.into_body().await.unwrap();
        assert_eq!(body, b"data: one\n\ndata: two\n\n");
        let sent = provider.bodies.lock().unwrap()[0].1.clone();
        assert_eq!(&sent[..], br#"{"model":"gpt-4o"}"#);
    }

    #[tokio::test]
    async fn a_stream_comes_back_chunk_by_chunk() {
        let client = RigHttpClient::new(Provider::default());
        let response = client.send_streaming(request("/stream")).await.unwrap();
        let chunks: Vec<_> = response.into_body().collect().await;
        let bytes: Vec<u8> = chunks
            .into_iter()
            .flat_map(|c| c.unwrap().to_vec())
            .collect();
        assert_eq!(bytes, b"data: one\n\ndata: two\n\n");
    }

    #[tokio::test]
    async fn an_error_answer_keeps_its_status_headers_and_body() {
        let client = RigHttpClient::new(Provider::default());
        for err in [
            error(client.send::<_, Vec<u8>>(request("/bad")).await),
            error(client.send_streaming(request("/bad")).await),
        ] {
            assert_eq!(
                err.non_success_status(),
                Some(http::StatusCode::BAD_REQUEST)
            );
            assert_eq!(
                err.non_success_body(),
                Some(r#"{"error":{"message":"bad"}}"#)
            );
            assert_eq!(err.non_success_headers().unwrap()["x-request-id"], "req-1");
        }
    }

    #[tokio::test]
    async fn a_levee_refusal_is_the_source_of_rigs_error() {
        let client = RigHttpClient::new(Provider::default());
        let err = error(client.send::<_, Vec<u8>>(request("/open")).await);
        assert!(matches!(err, Error::Instance(_)), "{err:?}");
        let found = Rejection::find(&err).expect("the Levee error is found");
        assert!(matches!(found, Rejection::CircuitOpen(_)), "{found:?}");
        let err = error(client.send_streaming(request("/open")).await);
        assert!(Rejection::find(&err).is_some());
    }

    #[tokio::test]
    async fn a_multipart_name_that_would_break_its_header_is_refused_unsent() {
        let provider = Provider::default();
        let client = RigHttpClient::new(provider.clone());
        let wav: rig_http::http_client::multipart::Part =
            rig_http::http_client::multipart::Part::bytes("file", Bytes::from_static(b"RIFF"))
                .filename("a\r\nb.wav");
        for form in [
            MultipartForm::new().text("model\"; x=\"y", "whisper-1"),
            MultipartForm::new().part(wav),
        ] {
            let request = Request::post("http://provider/v1/audio/transcriptions")
                .body(form)
                .unwrap();
            let err = error(client.send_multipart::<Vec<u8>>(request).await);
            let Error::Instance(source) = &err else {
                panic!("{err:?}");
            };
            assert!(source.is::<MultipartNameError>(), "{err}");
        }
        assert_eq!(provider.calls.load(Ordering::SeqCst), 0, "nothing sent");
    }

    #[tokio::test]
    async fn a_multipart_form_is_sent_encoded_with_its_boundary() {
        let provider = Provider::default();
        let client = RigHttpClient::new(provider.clone());
        let form = MultipartForm::new()
            .boundary("b0undary")
            .text("model", "whisper-1");
        let request = Request::post("http://provider/v1/audio/transcriptions")
            .body(form)
            .unwrap();
        let response = client.send_multipart::<Vec<u8>>(request).await.unwrap();
        assert_eq!(response.status(), 200);
        let (content_type, body) = provider.bodies.lock().unwrap()[0].clone();
        assert_eq!(
            content_type.unwrap(),
            "multipart/form-data; boundary=b0undary"
        );
        let body = String::from_utf8(body.to_vec()).unwrap();
        assert!(body.starts_with("--b0undary\r\nContent-Disposition: form-data; name=\"model\""));
        assert!(body.ends_with("--b0undary--\r\n"));
        assert_eq!(provider.calls.load(Ordering::SeqCst), 1);
    }
}
