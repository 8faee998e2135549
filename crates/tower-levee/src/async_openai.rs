//! A Levee stack under [async-openai](https://docs.rs/async-openai)'s client
//! (feature `async-openai`).
//!
//! async-openai (feature `middleware`) executes every request through a
//! tower service of its [`HttpRequestFactory`], which rebuilds a fresh
//! `reqwest::Request` for each attempt, and reads every answer, streams
//! included, as a `reqwest::Response`. [`OpenAiService`] is that service:
//! it builds the request, hands it to a Levee stack as an
//! `http::Request<Bytes>` (async-openai's bodies are serialised JSON in
//! memory, so a retry can replay them), and returns the stack's answer as
//! a `reqwest::Response` whose body is still the live, watched stream.
//!
//! OpenAI names the model in the body, not the URL, and rate-limits per
//! model: the service reads the body's top-level `model` into a
//! [`Scope`] (so a 429 gates that model's quota scope, not the whole
//! account) and its size and `max_tokens` into a [`TokenCost`] (so pacing
//! counts tokens in flight), unless the request already carries them.
//!
//! ```no_run
//! use async_openai::Client;
//! use async_openai::config::OpenAIConfig;
//! use tower::ServiceBuilder;
//! use tower_levee::async_openai::OpenAiService;
//! use tower_levee::reqwest::HttpClient;
//! use tower_levee::{BreakerLayer, BulkheadLayer, RetryBudgetLayer};
//!
//! let levee = ServiceBuilder::new()
//!     .layer(RetryBudgetLayer::with_defaults())
//!     .layer(BulkheadLayer::named("openai", 64))
//!     .layer(BreakerLayer::new())
//!     .service(HttpClient::new(reqwest::Client::new()));
//! let client = Client::with_config(OpenAIConfig::new().with_api_key("sk-..."))
//!     .with_http_service(OpenAiService::new(levee));
//! ```
//!
//! # Levee is the one retry layer
//!
//! `with_http_service` replaces async-openai's default executor, retries
//! included (its `OpenAIRetryLayer` retries 429s and 5xx on its own
//! schedule): every attempt is then one Levee decides, under its retry
//! budget, gates and breakers. Do not add async-openai's retry layer
//! around this service, or a 429 is retried by a loop that ignores the
//! gate it closed.
//!
//! # Errors
//!
//! A Levee refusal reaches the caller as `OpenAIError::Boxed`, holding the
//! Levee error itself:
//!
//! ```
//! use async_openai::error::OpenAIError;
//! use tower_levee::{CircuitOpen, Parked, Throttled};
//!
//! fn describe(err: &OpenAIError) -> String {
//!     match err {
//!         OpenAIError::Boxed(e) if e.is::<Throttled>() => "throttled: wait, or try another account".into(),
//!         OpenAIError::Boxed(e) if e.is::<Parked>() => "the spend cap is reached".into(),
//!         OpenAIError::Boxed(e) if e.is::<CircuitOpen>() => "the provider is down".into(),
//!         other => other.to_string(),
//!     }
//! }
//! ```
//!
//! A provider's own error answer (a 429 the stack let through, a 400)
//! reaches async-openai as the response it was, and async-openai reports
//! it as `OpenAIError::ApiError` as usual.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use ::async_openai::middleware::HttpRequestFactory;
use bytes::Bytes;
use http_body::Body;
use http_body_util::{BodyDataStream, BodyExt};
use tower::ServiceExt;
use tower_service::Service;

use crate::BoxError;
use crate::breaker::scope::{is_json, model_of_json};
use crate::breaker::{Scope, TokenCost};

/// async-openai's HTTP service, over a Levee stack of
/// `http::Request<Bytes>` → `http::Response<B>`: pass it to
/// `async_openai::Client::with_http_service`. See the [module docs](self).
#[derive(Clone)]
pub struct OpenAiService<S> {
    inner: S,
}

impl<S> OpenAiService<S> {
    /// Runs async-openai's requests through `stack`.
    pub fn new(stack: S) -> Self {
        OpenAiService { inner: stack }
    }

    /// The stack.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The stack, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// The stack, unwrapped.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S> fmt::Debug for OpenAiService<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiService").finish_non_exhaustive()
    }
}

/// The answer of one request: boxed, as async-openai erases the service's
/// future behind its executor anyway (one allocation per request, against
/// a network round trip).
pub type ResponseFuture =
    Pin<Box<dyn Future<Output = Result<::reqwest::Response, BoxError>> + Send + 'static>>;

impl<S, B> Service<HttpRequestFactory> for OpenAiService<S>
where
    S: Service<http::Request<Bytes>, Response = http::Response<B>> + Clone + Send + 'static,
    S::Error: Into<BoxError>,
    S::Future: Send,
    B: Body + Send + 'static,
    B::Data: Into<Bytes>,
    B::Error: Into<BoxError>,
{
    type Response = ::reqwest::Response;
    type Error = BoxError;
    type Future = ResponseFuture;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        // Each call drives a clone of the stack to readiness itself: the
        // request is built (asynchronously) before the stack sees it.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, factory: HttpRequestFactory) -> ResponseFuture {
        let stack = self.inner.clone();
        Box::pin(async move {
            let request = factory.build().await?;
            let request = to_http(request).await?;
            let response = stack.oneshot(request).await.map_err(Into::into)?;
            Ok(::reqwest::Response::from(response.map(|body| {
                ::reqwest::Body::wrap_stream(BodyDataStream::new(
                    body.map_frame(|f| f.map_data(Into::into))
                        .map_err(Into::into),
                ))
            })))
        })
    }
}

/// A built `reqwest::Request` as the `http::Request<Bytes>` the layers
/// read and a retry replays. A streamed body (a multipart upload) is read
/// into memory first: a retry needs it whole anyway.
async fn to_http(request: ::reqwest::Request) -> Result<http::Request<Bytes>, BoxError> {
    let request: http::Request<::reqwest::Body> = request.try_into()?;
    let (mut parts, body) = request.into_parts();
    let body = match body.as_bytes() {
        Some(bytes) => Bytes::copy_from_slice(bytes),
        None => body.collect().await?.to_bytes(),
    };
    if is_json(&parts.headers) {
        if parts.extensions.get::<Scope>().is_none()
            && let Some(model) = model_of_json(&body)
        {
            parts.extensions.insert(Scope::new().model(model));
        }
        if parts.extensions.get::<TokenCost>().is_none() {
            parts.extensions.insert(TokenCost::of_json(&body));
        }
    }
    Ok(http::Request::from_parts(parts, body))
}

#[cfg(test)]
mod tests {
    use super::{is_json, model_of_json as model_of};

    #[test]
    fn the_model_is_the_top_level_one() {
        let body = br#"{"messages":[{"role":"user","content":"\"model\": \"x\""}],"tools":[{"type":"function","function":{"name":"f","parameters":{"properties":{"model":{"type":"string"}}}}}],"model":"gpt-4o"}"#;
        assert_eq!(model_of(body).as_deref(), Some("gpt-4o"));
        assert_eq!(model_of(br#"{"input":"x"}"#), None);
        assert_eq!(model_of(br#"{"model":""}"#), None);
        assert_eq!(model_of(b"not json"), None);
        let mut headers = http::HeaderMap::new();
        assert!(!is_json(&headers), "no content-type");
        headers.insert(
            "content-type",
            "application/json; charset=utf-8".parse().unwrap(),
        );
        assert!(is_json(&headers));
    }
}
