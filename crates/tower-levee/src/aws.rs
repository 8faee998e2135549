//! A Levee stack as the AWS SDK's HTTP client (feature `aws`): Bedrock
//! through `aws-sdk-bedrockruntime`, with Levee deciding every call.
//!
//! The AWS SDK sends through any `HttpClient`
//! (`aws_smithy_runtime_api::client::http`), set on a service's config
//! with `.http_client(..)`. [`AwsHttpClient`] is one over a tower service
//! of `http::Request<Full<Bytes>>`: a Levee stack over hyper, say. The SDK
//! signs each request (SigV4) for one region's host before handing it
//! over, so inside the client Levee gates, parks, breaks, budgets and
//! bounds, but never sends the request elsewhere: a signature is for its
//! host. Fail over across regions or providers above the SDK, one client
//! per region.
//!
//! The feature needs Rust 1.94.1, as the AWS SDK's crates do (the rest of
//! this crate needs 1.88).
//!
//! SDK settings that keep one decider:
//! - **`RetryConfig::disabled()`**: the SDK's own retries (standard or
//!   adaptive) would be a second retry loop around Levee's, each blind to
//!   the other's budget. The client warns (`tracing`, at construction) when
//!   they are on. Levee's refusals reach the SDK as client errors, so that
//!   even then it does not retry what Levee settled.
//! - **stalled-stream protection**: the SDK's, on by default, fails a
//!   download that sends nothing for its grace period (5 s). Levee's stream
//!   watch does the same with `BreakerLayerBuilder::stall_timeout` (off by
//!   default) and also tells the breaker; set it below the SDK's grace, or
//!   set it and turn the SDK's off (`StalledStreamProtectionConfig`). The
//!   upload side needs nothing: the client reads the request body to its
//!   end before the stack sends it.
//! - **timeouts**: the stack's own (a `tower::timeout` per attempt, the
//!   retry budget's deadline) govern each call; the SDK's connector
//!   settings (connect and read timeouts) are not applied, while its
//!   `operation_timeout` and `operation_attempt_timeout` bound Levee's
//!   whole loop, gate waits included.
//! - **signatures expire**: Levee sends again a request the SDK signed
//!   once. AWS refuses a signature older than about five minutes (and an
//!   STS session token past its expiry) as a credential error, which counts
//!   toward opening the region's breaker: keep a call's whole time, retries
//!   and gate waits included, well under that (the SDK's
//!   `operation_timeout`, or the retry layer's deadline).
//!
//! Bedrock names the model in the path (`/model/{id}/converse`), so the
//! breaker's default scopes are per region host (the failure domain) and
//! per model (the throttle gate). A `ConverseStream` whose event stream
//! carries an exception (`throttlingException`, `modelStreamErrorException`,
//! `serviceUnavailableException`) is classified by the stream watch, as
//! any other stream.
//!
//! A request body must be one the SDK can give again (Bedrock's are JSON in
//! memory): a streaming upload could not be sent twice, so it is refused
//! with a `ConnectorError` of kind user. The service must be `Sync` as
//! well as `Clone` (the SDK shares its client between tasks): box a stack
//! as a `tower::util::BoxCloneSyncService`. Levee's refusals reach the caller as the
//! SDK's dispatch failure, the Levee error as its source: find it with
//! [`Rejection::find`](crate::error::Rejection::find).
//!
//! ```no_run
//! use std::time::Duration;
//! use bytes::Bytes;
//! use http_body_util::Full;
//! use hyper_util::client::legacy::Client;
//! use hyper_util::rt::TokioExecutor;
//! use tower::ServiceBuilder;
//! use tower_levee::aws::AwsHttpClient;
//! use tower_levee::{BreakerLayer, BulkheadLayer, RetryBudgetLayer};
//!
//! # fn build() {
//! // A hyper client with TLS (hyper-rustls) in a real program.
//! let hyper = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
//! let stack = ServiceBuilder::new()
//!     .layer(RetryBudgetLayer::with_defaults())
//!     .layer(BulkheadLayer::named("bedrock-us-east-1", 64))
//!     .layer(
//!         BreakerLayer::builder()
//!             .stall_timeout(Duration::from_secs(3)) // below the SDK's 5-s grace
//!             .build()
//!             .expect("a valid stall timeout"),
//!     )
//!     .timeout(Duration::from_secs(60))
//!     .service(hyper);
//! let http_client = AwsHttpClient::new(stack);
//! // aws_sdk_bedrockruntime::Config::builder()
//! //     .http_client(http_client)
//! //     .retry_config(RetryConfig::disabled())
//! //     ...
//! # let _ = http_client;
//! # }
//! ```

use std::fmt;

use aws_smithy_runtime_api::client::http::{
    HttpClient, HttpConnector, HttpConnectorFuture, HttpConnectorSettings, SharedHttpConnector,
};
use aws_smithy_runtime_api::client::orchestrator::{HttpRequest, HttpResponse};
use aws_smithy_runtime_api::client::result::ConnectorError;
use aws_smithy_runtime_api::client::runtime_components::{
    RuntimeComponents, RuntimeComponentsBuilder,
};
use aws_smithy_types::body::SdkBody;
use aws_smithy_types::config_bag::ConfigBag;
use aws_smithy_types::retry::{ErrorKind, RetryConfig};
use bytes::Bytes;
use http::{Request, Response};
use http_body_util::BodyExt;
use http_body_util::Full;
use levee_core::classify::TransportFailure;
use tower::ServiceExt;
use tower_service::Service;

use crate::error::{BoxError, Rejection, transport_failure};

/// A tower service (a Levee stack over an HTTP client) as the AWS SDK's
/// HTTP client. See the [module docs](self).
#[derive(Clone)]
pub struct AwsHttpClient<S> {
    service: S,
    /// The one connector every attempt gets: the SDK asks for one per
    /// attempt, and the settings it would vary by are not applied.
    connector: SharedHttpConnector,
}

impl<S, RB> AwsHttpClient<S>
where
    S: Service<Request<Full<Bytes>>, Response = Response<RB>> + Clone + Send + Sync + 'static,
    S::Future: Send,
    S::Error: Into<BoxError>,
    RB: http_body::Body<Data = Bytes> + Send + Sync + 'static,
    RB::Error: Into<BoxError>,
{
    /// The SDK's client over `service`.
    pub fn new(service: S) -> Self {
        let connector = SharedHttpConnector::new(Connector {
            service: service.clone(),
        });
        AwsHttpClient { service, connector }
    }
}

impl<S> AwsHttpClient<S> {
    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.service
    }

    /// The inner service, unwrapped.
    pub fn into_inner(self) -> S {
        self.service
    }
}

impl<S> fmt::Debug for AwsHttpClient<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AwsHttpClient").finish_non_exhaustive()
    }
}

// The connector was built (and its bounds checked) in `new`.
impl<S: Send + Sync> HttpClient for AwsHttpClient<S> {
    fn http_connector(
        &self,
        _settings: &HttpConnectorSettings,
        _components: &RuntimeComponents,
    ) -> SharedHttpConnector {
        // The stack's own timeouts govern: the SDK's connector settings
        // (connect and read timeouts) are for a client that has none.
        self.connector.clone()
    }

    fn validate_base_client_config(
        &self,
        _components: &RuntimeComponentsBuilder,
        cfg: &ConfigBag,
    ) -> Result<(), aws_smithy_runtime_api::box_error::BoxError> {
        // A warning, not an error: the SDK turns an error here into a panic.
        if let Some(retry) = cfg.load::<RetryConfig>()
            && retry.max_attempts() > 1
        {
            tracing::warn!(
                target: "levee::aws",
                max_attempts = retry.max_attempts(),
                "the AWS SDK's own retries are on over Levee's AwsHttpClient: a second retry \
                 loop around Levee's budget; set retry_config(RetryConfig::disabled())"
            );
        }
        Ok(())
    }
}

/// What the SDK calls for each request.
#[derive(Clone)]
struct Connector<S> {
    service: S,
}

impl<S> fmt::Debug for Connector<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Connector").finish_non_exhaustive()
    }
}

impl<S, RB> HttpConnector for Connector<S>
where
    S: Service<Request<Full<Bytes>>, Response = Response<RB>> + Clone + Send + Sync + 'static,
    S::Future: Send,
    S::Error: Into<BoxError>,
    RB: http_body::Body<Data = Bytes> + Send + Sync + 'static,
    RB::Error: Into<BoxError>,
{
    fn call(&self, request: HttpRequest) -> HttpConnectorFuture {
        let service = self.service.clone();
        HttpConnectorFuture::new(async move {
            let request = request
                .try_into_http1x()
                .map_err(|e| ConnectorError::user(e.into()))?;
            let (parts, body) = request.into_parts();
            if body.bytes().is_none() && body.try_clone().is_none() {
                return Err(ConnectorError::user(
                    "a streaming request body: Levee's AWS client sends bodies it can \
                     send again"
                        .into(),
                ));
            }
            // Read to its end, as a client sending it would: the SDK's
            // upload stall check watches this read, and would time out a
            // body never read.
            let bytes = body
                .collect()
                .await
                .map_err(ConnectorError::user)?
                .to_bytes();
            let request = Request::from_parts(parts, Full::new(bytes));
            let response = service
                .oneshot(request)
                .await
                .map_err(|e| connector_error(e.into()))?;
            let response = response.map(|body| {
                SdkBody::from_body_1_x(http_body_util::BodyExt::map_err(body, Into::into))
            });
            HttpResponse::try_from(response).map_err(|e| ConnectorError::other(e.into(), None))
        })
    }
}

/// The SDK's kind of `err`: a refusal as a client error (Levee decided it,
/// retries included: the SDK must not retry it), a transport failure as a
/// timeout or an I/O error.
fn connector_error(err: BoxError) -> ConnectorError {
    if Rejection::find(&*err).is_some() {
        return ConnectorError::other(err, Some(ErrorKind::ClientError));
    }
    match transport_failure(&*err) {
        TransportFailure::Timeout => ConnectorError::timeout(err),
        TransportFailure::Connect | TransportFailure::Reset => ConnectorError::io(err),
        _ => ConnectorError::other(err, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_is_a_client_error_the_sdk_does_not_retry() {
        let throttled: BoxError = Box::new(crate::breaker::Throttled::new(
            "bedrock-runtime.us-east-1.amazonaws.com/m",
            std::time::Duration::from_secs(1),
        ));
        let e = connector_error(throttled);
        assert!(e.is_other());
        assert_eq!(e.as_other(), Some(ErrorKind::ClientError));
        let timeout: BoxError = Box::new(std::io::Error::from(std::io::ErrorKind::TimedOut));
        assert!(connector_error(timeout).is_timeout());
    }

    /// A connector over a service that echoes the request body, counting calls.
    fn echo(
        calls: &std::sync::Arc<std::sync::atomic::AtomicUsize>,
    ) -> Connector<
        impl Service<
            Request<Full<Bytes>>,
            Response = Response<Full<Bytes>>,
            Error = BoxError,
            Future: Send,
        > + Clone
        + Send
        + Sync
        + 'static,
    > {
        let calls = std::sync::Arc::clone(calls);
        Connector {
            service: tower::service_fn(move |req: Request<Full<Bytes>>| {
                calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                async move {
                    let body = req.into_body().collect().await?.to_bytes();
                    Ok::<_, BoxError>(Response::new(Full::new(body)))
                }
            }),
        }
    }

    #[tokio::test]
    async fn a_body_held_in_memory_is_sent_and_the_answer_comes_back() {
        let calls = std::sync::Arc::default();
        let mut request = HttpRequest::new(SdkBody::from("{\"messages\":[]}"));
        request
            .set_uri("https://bedrock-runtime.us-east-1.amazonaws.com/model/m/converse")
            .unwrap();
        let response = echo(&calls).call(request).await.unwrap();
        assert_eq!(response.status().as_u16(), 200);
        let body = response.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(&body[..], b"{\"messages\":[]}");
        assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 1);
    }

    /// Keeps the targets of the warnings logged while it is the default.
    #[derive(Clone, Default)]
    struct Warnings(std::sync::Arc<std::sync::Mutex<Vec<String>>>);

    impl<T: tracing::Subscriber> tracing_subscriber::Layer<T> for Warnings {
        fn on_event(
            &self,
            event: &tracing::Event<'_>,
            _: tracing_subscriber::layer::Context<'_, T>,
        ) {
            if *event.metadata().level() == tracing::Level::WARN {
                let target = event.metadata().target().to_owned();
                self.0.lock().unwrap().push(target);
            }
        }
    }

    /// The warnings the client's config check logs for `retry`.
    fn warnings_for(retry: RetryConfig) -> Vec<String> {
        use tracing_subscriber::layer::SubscriberExt;
        let warnings = Warnings::default();
        let subscriber = tracing_subscriber::registry().with(warnings.clone());
        let client = AwsHttpClient::new(echo(&std::sync::Arc::default()).service);
        let mut layer = aws_smithy_types::config_bag::Layer::new("test");
        layer.store_put(retry);
        let config = ConfigBag::of_layers(vec![layer]);
        tracing::subscriber::with_default(subscriber, || {
            let components = RuntimeComponentsBuilder::new("test");
            client
                .validate_base_client_config(&components, &config)
                .expect("a warning, never an error (the SDK would panic)");
        });
        warnings.0.lock().unwrap().clone()
    }

    #[test]
    fn the_sdks_own_retries_on_are_warned_of_and_off_are_not() {
        assert_eq!(warnings_for(RetryConfig::standard()), ["levee::aws"]);
        assert_eq!(warnings_for(RetryConfig::adaptive()), ["levee::aws"]);
        assert!(warnings_for(RetryConfig::disabled()).is_empty());
    }

    #[tokio::test]
    async fn a_streaming_upload_is_refused_unsent_as_a_user_error() {
        let calls = std::sync::Arc::default();
        let stream = http_body_util::StreamBody::new(futures_util::stream::iter([Ok::<
            _,
            std::convert::Infallible,
        >(
            http_body::Frame::data(Bytes::from_static(b"chunk")),
        )]));
        let mut request = HttpRequest::new(SdkBody::from_body_1_x(stream));
        request
            .set_uri("https://bedrock-runtime.us-east-1.amazonaws.com/model/m/invoke")
            .unwrap();
        let err = echo(&calls).call(request).await.unwrap_err();
        assert!(err.is_user(), "{err}");
        assert_eq!(
            calls.load(std::sync::atomic::Ordering::SeqCst),
            0,
            "nothing sent"
        );
    }
}
