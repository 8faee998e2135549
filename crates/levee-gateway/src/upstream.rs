//! The call to a provider: one HTTP client for every target, a per-attempt
//! timeout, and each target's rewrite of a request (its URL, its key, the
//! name it calls the model by, the scopes Levee keys it by).

use std::future::Future;
use std::ops::Range;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::Bytes;
use http::header::{AUTHORIZATION, HeaderName, HeaderValue};
use http::uri::{Authority, PathAndQuery, Scheme};
use http::{Request, Response, Uri};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use pin_project_lite::pin_project;
use tokio::time::Sleep;
use tower::Service;
use tower_levee::BoxError;
use tower_levee::breaker::Scope;

use crate::config::{AuthStyle, TargetConfig, TargetDialect};
use crate::intern::intern;
use crate::secret::Secret;

/// The client of every target (one per thread, see [`CLIENT`]): HTTP/1.1
/// and HTTP/2 (by ALPN) over rustls with Mozilla's roots, or plain HTTP for
/// a provider on the local network; pooled connections, `TCP_NODELAY`.
type HttpsClient = Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>;

/// How long a connection may take to open.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

fn https_client() -> HttpsClient {
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_nodelay(true);
    http.set_connect_timeout(Some(CONNECT_TIMEOUT));
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_webpki_roots()
        .https_or_http()
        .enable_http1()
        .enable_http2()
        .wrap_connector(http);
    Client::builder(TokioExecutor::new())
        .pool_idle_timeout(Duration::from_secs(90))
        .pool_timer(TokioTimer::new())
        .timer(TokioTimer::new())
        .build(https)
}

thread_local! {
    /// The calling thread's client, with a connection pool of its own.
    ///
    /// A pooled connection is driven by a task on the runtime that opened
    /// it. Shared across threads, a request served on one thread and sent
    /// over a connection of another would wake that thread twice (to send,
    /// and for the answer): on a quiet gateway, a sleeping thread woken
    /// for every request. With a pool per thread, and a runtime per thread
    /// (see `main.rs`), a request never leaves the thread that accepted it.
    static CLIENT: HttpsClient = https_client();
}

// === Payload ===

/// A request's body as the gateway holds it: read whole (each attempt sends
/// a copy, a reference count), one frame, and readable again by a target
/// that renames the model.
#[derive(Clone, Debug, Default)]
pub(crate) struct Payload(pub(crate) Bytes);

/// Read by a shadow probe's copy, to cap its output.
impl AsRef<[u8]> for Payload {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl From<Bytes> for Payload {
    fn from(bytes: Bytes) -> Self {
        Payload(bytes)
    }
}

impl http_body::Body for Payload {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        let data = std::mem::take(&mut self.0);
        Poll::Ready((!data.is_empty()).then(|| Ok(http_body::Frame::data(data))))
    }

    fn is_end_stream(&self) -> bool {
        self.0.is_empty()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        http_body::SizeHint::with_exact(self.0.len() as u64)
    }
}

// === Upstream ===

/// One attempt's call: the request's bytes sent by the calling thread's
/// client, given up after the attempt's timeout (a `tower` timeout error,
/// which Levee reads as an availability failure).
#[derive(Clone, Debug)]
pub(crate) struct Upstream {
    timeout: Option<Duration>,
}

impl Upstream {
    pub(crate) fn new(timeout: Option<Duration>) -> Self {
        Upstream { timeout }
    }
}

impl Service<Request<Payload>> for Upstream {
    type Response = Response<Incoming>;
    type Error = BoxError;
    type Future = UpstreamFuture;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        // hyper's client is always ready: a connection is waited for in
        // the call's future.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Payload>) -> Self::Future {
        let request = request.map(|p| Full::new(p.0));
        UpstreamFuture {
            response: CLIENT.with(|client| client.request(request)),
            deadline: self.timeout.map(tokio::time::sleep),
        }
    }
}

pin_project! {
    /// The future of an [`Upstream`] call.
    pub(crate) struct UpstreamFuture {
        #[pin]
        response: hyper_util::client::legacy::ResponseFuture,
        #[pin]
        deadline: Option<Sleep>,
    }
}

impl Future for UpstreamFuture {
    type Output = Result<Response<Incoming>, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        if let Poll::Ready(result) = this.response.poll(cx) {
            return Poll::Ready(result.map_err(Into::into));
        }
        if let Some(deadline) = this.deadline.as_pin_mut() {
            ready!(deadline.poll(cx));
            return Poll::Ready(Err(tower::timeout::error::Elapsed::new().into()));
        }
        Poll::Pending
    }
}

// === the rewrite ===

/// Where a request's model name sits in its body: set by the gateway, read
/// by a target that calls the model by another name.
#[derive(Clone, Debug)]
pub(crate) struct ModelSpan(pub(crate) Range<usize>);

/// What one target makes of a request on one route.
#[derive(Debug)]
pub(crate) struct TargetRewrite {
    scheme: Scheme,
    authority: Authority,
    path: PathRule,
    auth: Option<(HeaderName, HeaderValue)>,
    headers: Vec<(HeaderName, HeaderValue)>,
    anthropic_version: bool,
    /// The model's upstream name, when it differs from the route's.
    rename: Option<String>,
    scope: Scope,
}

#[derive(Debug)]
enum PathRule {
    /// The client's path as it is (`base_url` is an origin).
    Same,
    /// The base's path, then the client's after `/v1` (`base_url` is the
    /// API's base URL as its SDK takes it: `https://api.groq.com/openai/v1`).
    Under(String),
    /// Azure: `{prefix}/deployments/{deployment}/{rest}?api-version=..`.
    Azure {
        prefix: String,
        deployment: String,
        query: String,
    },
}

/// The prefix every client path of the API starts with.
const API_PREFIX: &str = "/v1";

impl TargetRewrite {
    /// `target`'s rewrite of a request for `route_model`.
    pub(crate) fn new(target: &TargetConfig, route_model: &str) -> Self {
        let upstream_model = target.model.as_deref().unwrap_or(route_model);
        let parts = target.base_url.clone().into_parts();
        let base_path = parts
            .path_and_query
            .as_ref()
            .map_or("", |p| p.path())
            .trim_end_matches('/')
            .to_owned();
        let path = match target.dialect {
            TargetDialect::Azure => PathRule::Azure {
                prefix: if base_path.is_empty() {
                    "/openai".to_owned()
                } else {
                    base_path
                },
                deployment: target
                    .deployment
                    .clone()
                    .unwrap_or_else(|| upstream_model.to_owned()),
                query: format!("api-version={}", target.api_version),
            },
            _ if base_path.is_empty() => PathRule::Same,
            _ => PathRule::Under(base_path),
        };
        let auth = target
            .key
            .as_ref()
            .and_then(|key| auth_header(target.auth, key));
        let headers = target
            .headers
            .iter()
            .filter_map(|(name, value)| {
                Some((
                    HeaderName::from_bytes(name.as_bytes()).ok()?,
                    HeaderValue::from_str(value).ok()?,
                ))
            })
            .collect();
        let scope = Scope::new()
            .domain(intern(&target.name))
            .model(intern(upstream_model))
            .billing(intern(target.account.as_deref().unwrap_or(&target.name)));
        TargetRewrite {
            scheme: parts.scheme.unwrap_or(Scheme::HTTPS),
            authority: parts.authority.expect("a checked base_url has a host"),
            path,
            auth,
            headers,
            anthropic_version: target.dialect == TargetDialect::Anthropic,
            rename: target
                .model
                .as_ref()
                .filter(|m| m.as_str() != route_model)
                .cloned(),
            scope,
        }
    }

    /// Points `request` (whose URI is the client's path and query) at the
    /// target, with its key, headers, model name and scopes.
    pub(crate) fn apply(&self, request: &mut Request<Payload>) {
        let path_and_query = self.path_and_query(request.uri());
        let mut parts = http::uri::Parts::default();
        parts.scheme = Some(self.scheme.clone());
        parts.authority = Some(self.authority.clone());
        parts.path_and_query = path_and_query;
        if let Ok(uri) = Uri::from_parts(parts) {
            *request.uri_mut() = uri;
        }
        let headers = request.headers_mut();
        if let Some((name, value)) = &self.auth {
            headers.insert(name.clone(), value.clone());
        }
        for (name, value) in &self.headers {
            headers.insert(name.clone(), value.clone());
        }
        if self.anthropic_version && !headers.contains_key("anthropic-version") {
            headers.insert(
                HeaderName::from_static("anthropic-version"),
                HeaderValue::from_static("2023-06-01"),
            );
        }
        if let Some(model) = &self.rename
            && let Some(span) = request.extensions().get::<ModelSpan>()
            && let Some(renamed) =
                levee_core::request::rename_model(&request.body().0, span.0.clone(), model)
        {
            *request.body_mut() = Payload(Bytes::from(renamed));
        }
        request.extensions_mut().insert(self.scope.clone());
    }

    fn path_and_query(&self, client: &Uri) -> Option<PathAndQuery> {
        let path = client.path();
        let rest = path.strip_prefix(API_PREFIX).unwrap_or(path);
        let joined = match &self.path {
            PathRule::Same => return client.path_and_query().cloned(),
            PathRule::Under(base) => match client.query() {
                Some(q) => format!("{base}{rest}?{q}"),
                None => format!("{base}{rest}"),
            },
            PathRule::Azure {
                prefix,
                deployment,
                query,
            } => {
                // The Responses API names its model in the body, at one
                // URL; the model list is the resource's, not a deployment's.
                if rest.starts_with("/responses") || rest == "/models" {
                    format!("{prefix}{rest}?{query}")
                } else {
                    format!("{prefix}/deployments/{deployment}{rest}?{query}")
                }
            }
        };
        joined.parse().ok()
    }
}

/// The header a target's key travels in.
fn auth_header(style: AuthStyle, key: &Secret) -> Option<(HeaderName, HeaderValue)> {
    match style {
        AuthStyle::Bearer => Some((AUTHORIZATION, key.header_value("Bearer ")?)),
        AuthStyle::XApiKey => Some((HeaderName::from_static("x-api-key"), key.header_value("")?)),
        AuthStyle::ApiKey => Some((HeaderName::from_static("api-key"), key.header_value("")?)),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::path::Path;

    use super::*;
    use crate::config::GatewayConfig;

    fn target(extra: &str) -> TargetConfig {
        let env = HashMap::from([("K".to_owned(), "sk-test".to_owned())]);
        let text = format!(
            "listen = \"127.0.0.1:0\"\n[[target]]\nname = \"t\"\napi_key_env = \"K\"\n{extra}\n[[route]]\nmodel = \"gpt-4o\"\ntargets = [\"t\"]\n"
        );
        GatewayConfig::parse(&text, Path::new("."), &env)
            .unwrap()
            .targets
            .remove(0)
    }

    fn rewrite(extra: &str, path: &str, body: &'static str) -> Request<Payload> {
        let rw = TargetRewrite::new(&target(extra), "gpt-4o");
        let mut req = Request::post(path)
            .body(Payload(Bytes::from_static(body.as_bytes())))
            .unwrap();
        if let Ok(f) = levee_core::request::RequestFields::peek(body.as_bytes()) {
            req.extensions_mut().insert(ModelSpan(f.model_span()));
        }
        rw.apply(&mut req);
        req
    }

    #[test]
    fn an_origin_keeps_the_clients_path_and_a_base_url_replaces_v1() {
        let r = rewrite(
            "base_url = \"https://api.openai.com\"",
            "/v1/chat/completions?x=1",
            "{}",
        );
        assert_eq!(r.uri(), "https://api.openai.com/v1/chat/completions?x=1");
        assert_eq!(r.headers()["authorization"], "Bearer sk-test");
        let r = rewrite(
            "base_url = \"https://generativelanguage.googleapis.com/v1beta/openai/\"",
            "/v1/chat/completions",
            "{}",
        );
        assert_eq!(
            r.uri(),
            "https://generativelanguage.googleapis.com/v1beta/openai/chat/completions"
        );
    }

    #[test]
    fn azure_calls_the_deployment_with_its_key_header_and_version() {
        let r = rewrite(
            "base_url = \"https://res.openai.azure.com\"\ndialect = \"azure\"\ndeployment = \"prod-4o\"",
            "/v1/chat/completions",
            "{}",
        );
        assert_eq!(
            r.uri(),
            "https://res.openai.azure.com/openai/deployments/prod-4o/chat/completions?api-version=2024-10-21"
        );
        assert_eq!(r.headers()["api-key"], "sk-test");
        assert!(r.headers().get("authorization").is_none());
    }

    #[test]
    fn azure_lists_the_resources_models_not_a_deployments() {
        let r = rewrite(
            "base_url = \"https://res.openai.azure.com\"\ndialect = \"azure\"\ndeployment = \"prod-4o\"",
            "/v1/models",
            "",
        );
        assert_eq!(
            r.uri(),
            "https://res.openai.azure.com/openai/models?api-version=2024-10-21"
        );
    }

    #[test]
    fn anthropic_gets_its_key_header_and_a_version_and_a_renamed_model_in_place() {
        let r = rewrite(
            "base_url = \"https://api.anthropic.com\"\ndialect = \"anthropic\"\nmodel = \"claude-x-2025\"",
            "/v1/messages",
            r#"{"max_tokens":5, "model": "gpt-4o" ,"messages":[]}"#,
        );
        assert_eq!(r.uri(), "https://api.anthropic.com/v1/messages");
        assert_eq!(r.headers()["x-api-key"], "sk-test");
        assert_eq!(r.headers()["anthropic-version"], "2023-06-01");
        assert_eq!(
            r.body().0,
            r#"{"max_tokens":5, "model": "claude-x-2025" ,"messages":[]}"#
        );
        let scope = r.extensions().get::<Scope>().unwrap();
        assert_eq!(
            scope,
            &Scope::new().domain("t").model("claude-x-2025").billing("t")
        );
    }
}
