//! A `reqwest::Client` (reqwest 0.13) as a `Service<http::Request<B>>`
//! (feature `reqwest`).
//!
//! Levee's layers speak `http`: they read the status and headers of an
//! `http::Response`, peek at a non-2xx body and watch a 2xx stream through
//! its `http_body::Body`. `reqwest::Client` is a tower service too, but of
//! `reqwest::Request` to `reqwest::Response`, which the layers cannot see
//! into. [`HttpClient`] bridges the two: it turns each `http::Request<B>`
//! into a `reqwest::Request`, sends it, and hands back an
//! `http::Response<reqwest::Body>` whose body is still the live stream
//! (nothing is buffered), so classification stays complete: status,
//! headers, a bounded peek of an error body, and a watch on a streamed
//! success until its last byte.
//!
//! ```no_run
//! use std::time::Duration;
//! use http::Request;
//! use tower::{Service, ServiceBuilder, ServiceExt};
//! use tower_levee::reqwest::HttpClient;
//! use tower_levee::{BreakerLayer, BulkheadLayer, RetryBudgetLayer};
//!
//! # async fn run() -> Result<(), tower_levee::BoxError> {
//! let mut client = ServiceBuilder::new()
//!     .layer(RetryBudgetLayer::with_defaults())
//!     .layer(BulkheadLayer::named("openai", 64))
//!     .layer(BreakerLayer::new())
//!     .timeout(Duration::from_secs(60))
//!     .service(HttpClient::new(reqwest::Client::new()));
//!
//! let req = Request::post("https://api.openai.com/v1/chat/completions")
//!     .header("authorization", "Bearer sk-...")
//!     .header("content-type", "application/json")
//!     .body(r#"{"model":"gpt-4o","messages":[]}"#.to_owned())?;
//! // The stack accepts any body reqwest does: name the one used.
//! let res = ServiceExt::<Request<String>>::ready(&mut client).await?.call(req).await?;
//! println!("{}", res.status());
//! # Ok(())
//! # }
//! ```
//!
//! The request body can be anything reqwest accepts (`String`, `Vec<u8>`,
//! `bytes::Bytes`, `&'static str`, `reqwest::Body`). This crate enables no
//! reqwest feature: turn on TLS (`rustls-tls`, `native-tls`) and anything
//! else in your own dependency on reqwest.
//!
//! Errors are reqwest's, boxed, with two changes: a timeout is wrapped in an
//! `io::Error` of kind `TimedOut` (so the breaker counts it as a timeout, as
//! it does a `tower::timeout` one), and the URL reqwest attaches to an error
//! loses its query string and userinfo, where API keys travel (Gemini's
//! `?key=`), so errors can be logged.

use std::fmt;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use pin_project_lite::pin_project;
use tower_service::Service;

use crate::BoxError;

type Pending = <::reqwest::Client as Service<::reqwest::Request>>::Future;

/// A `reqwest::Client` as a `Service<http::Request<B>>` returning
/// `http::Response<reqwest::Body>`. Cheap to clone (the client is an `Arc`).
#[derive(Clone, Default)]
pub struct HttpClient {
    client: ::reqwest::Client,
}

impl HttpClient {
    /// Wraps `client`; its connection pool, timeouts and TLS settings apply.
    pub fn new(client: ::reqwest::Client) -> Self {
        HttpClient { client }
    }

    /// The wrapped client.
    pub fn get_ref(&self) -> &::reqwest::Client {
        &self.client
    }

    /// The wrapped client, mutably.
    pub fn get_mut(&mut self) -> &mut ::reqwest::Client {
        &mut self.client
    }

    /// Unwraps the client.
    pub fn into_inner(self) -> ::reqwest::Client {
        self.client
    }
}

impl From<::reqwest::Client> for HttpClient {
    fn from(client: ::reqwest::Client) -> Self {
        HttpClient::new(client)
    }
}

impl fmt::Debug for HttpClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpClient").finish_non_exhaustive()
    }
}

impl<B> Service<http::Request<B>> for HttpClient
where
    B: Into<::reqwest::Body>,
{
    type Response = http::Response<::reqwest::Body>;
    type Error = BoxError;
    type Future = ResponseFuture;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Service::<::reqwest::Request>::poll_ready(&mut self.client, cx).map_err(into_box)
    }

    fn call(&mut self, req: http::Request<B>) -> ResponseFuture {
        let state = match ::reqwest::Request::try_from(req) {
            Ok(req) => State::Sending {
                pending: Service::<::reqwest::Request>::call(&mut self.client, req),
            },
            Err(err) => State::Invalid {
                err: Some(into_box(err)),
            },
        };
        ResponseFuture { state }
    }
}

pin_project! {
    /// The response future of [`HttpClient`].
    pub struct ResponseFuture {
        #[pin]
        state: State,
    }
}

pin_project! {
    #[project = StateProj]
    enum State {
        Sending { #[pin] pending: Pending },
        // The request could not be converted (e.g. a relative URI).
        Invalid { err: Option<BoxError> },
    }
}

impl Future for ResponseFuture {
    type Output = Result<http::Response<::reqwest::Body>, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().state.project() {
            StateProj::Sending { pending } => pending
                .poll(cx)
                .map(|res| res.map(http::Response::from).map_err(into_box)),
            StateProj::Invalid { err } => Poll::Ready(Err(err
                .take()
                .unwrap_or_else(|| "HttpClient future polled after completion".into()))),
        }
    }
}

impl fmt::Debug for ResponseFuture {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseFuture").finish_non_exhaustive()
    }
}

/// Boxes a reqwest error: timeouts become `io::ErrorKind::TimedOut`, and the
/// URL keeps no query or userinfo.
fn into_box(mut err: ::reqwest::Error) -> BoxError {
    if let Some(url) = err.url_mut() {
        url.set_query(None);
        url.set_fragment(None);
        // Both fail only for URLs that cannot have credentials at all.
        let _ = url.set_password(None);
        let _ = url.set_username("");
    }
    if err.is_timeout() {
        Box::new(io::Error::new(io::ErrorKind::TimedOut, err))
    } else {
        Box::new(err)
    }
}
