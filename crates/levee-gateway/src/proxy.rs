//! The API routes: a request authenticated, read, routed by its model, sent
//! through its route's Levee stack, and answered with the provider's own
//! answer or Levee's refusal in the caller's API's shape.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Method, StatusCode};
use levee_core::classify::Classification;
use levee_core::classify::TransportFailure;
use levee_core::request::RequestFields;
use tokio::time::Instant;
use tower_levee::api::{ApiDialect, ReadBodyError, error_response, read_body, refusal_response};
use tower_levee::error::{Rejection, transport_failure};
use tower_levee::failover::ServedBy;
use tower_levee::retry::RetryOutcome;

use crate::Gateway;
use crate::table::{Caller, Table};
use crate::upstream::{ModelSpan, Payload};

/// The request's id, kept or made: sent upstream, returned, logged.
pub(crate) const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");
/// The target that served an answer.
pub(crate) const SERVED_BY: HeaderName = HeaderName::from_static("x-levee-served-by");
/// Why Levee's retries stopped before a real answer that is not a success
/// (`budget_exhausted`, `max_attempts`, `not_retryable`, ...).
pub(crate) const RETRY_STOP: HeaderName = HeaderName::from_static("x-levee-retry-stop");

/// What one request's log line says.
struct Line {
    request_id: HeaderValue,
    method: Method,
    /// The request's path and query, shared with its URI (only the path is logged).
    path: Option<http::uri::PathAndQuery>,
    route: Option<&'static str>,
    client: Option<Caller>,
    target: Option<&'static str>,
    verdict: &'static str,
    started: Instant,
}

/// An OpenAI route (`dialect` OpenAI) or an Anthropic one.
pub(crate) async fn api(
    State(gateway): State<Arc<Gateway>>,
    dialect: ApiDialect,
    request: Request,
) -> Response {
    let table = gateway.table();
    let (parts, body) = request.into_parts();
    let mut line = Line {
        request_id: request_id(&parts.headers),
        method: parts.method.clone(),
        path: parts.uri.path_and_query().cloned(),
        route: None,
        client: None,
        target: None,
        verdict: "-",
        started: Instant::now(),
    };
    let response = match answer(&table, dialect, parts, body, &mut line).await {
        Ok(response) => response,
        Err(response) => response,
    };
    finish(response, &line)
}

/// The answer to an API request: `Err` for the gateway's own refusals of
/// bad input, `Ok` for everything the stack answered.
async fn answer(
    table: &Table,
    dialect: ApiDialect,
    parts: http::request::Parts,
    body: Body,
    line: &mut Line,
) -> Result<Response, Response> {
    line.client = authenticate(table, &parts.headers).map_err(|m| {
        line.verdict = "unauthenticated";
        own_error(dialect, StatusCode::UNAUTHORIZED, "invalid_api_key", m)
    })?;
    let server = &table.config.server;
    let bytes = match tokio::time::timeout(
        server.body_read_timeout,
        read_body(body, server.max_body_bytes),
    )
    .await
    {
        Ok(Ok(bytes)) => bytes,
        Ok(Err(ReadBodyError::TooLarge { limit })) => {
            line.verdict = "too_large";
            return Err(own_error(
                dialect,
                StatusCode::PAYLOAD_TOO_LARGE,
                "request_too_large",
                &format!("the request body is larger than {limit} bytes"),
            ));
        }
        Ok(Err(_)) | Err(_) => {
            line.verdict = "body_unread";
            return Err(own_error(
                dialect,
                StatusCode::REQUEST_TIMEOUT,
                "request_timeout",
                "the request body did not arrive in time",
            ));
        }
    };
    let fields = RequestFields::peek(&bytes).map_err(|e| {
        line.verdict = "bad_request";
        own_error(
            dialect,
            StatusCode::BAD_REQUEST,
            "invalid_request",
            &e.to_string(),
        )
    })?;
    let Some(route) = table.route(fields.model()) else {
        line.verdict = "unknown_model";
        let message = format!(
            "the model `{}` is not served here; the models served: {}",
            fields.model(),
            table.models.join(", ")
        );
        return Err(own_error(
            dialect,
            StatusCode::NOT_FOUND,
            "model_not_found",
            &message,
        ));
    };
    line.route = Some(route.label);
    let model_span = fields.model_span();
    let Some(api) = route.api(dialect) else {
        line.verdict = "wrong_api";
        let other = match dialect {
            ApiDialect::OpenAi => "Anthropic's (/v1/messages)",
            _ => "OpenAI's (/v1/chat/completions and the like)",
        };
        let message = format!(
            "the model `{}` is served on {other} API only: its targets speak that API",
            route.model
        );
        return Err(own_error(
            dialect,
            StatusCode::NOT_FOUND,
            "model_not_found",
            &message,
        ));
    };

    let mut upstream = http::Request::new(Payload(bytes.clone()));
    *upstream.method_mut() = parts.method;
    // The caller's path and query, shared, not parsed again.
    *upstream.uri_mut() = line
        .path
        .clone()
        .map_or_else(|| http::Uri::from_static("/"), http::Uri::from);
    *upstream.headers_mut() = forwarded(parts.headers);
    upstream
        .headers_mut()
        .insert(REQUEST_ID, line.request_id.clone());
    upstream.extensions_mut().insert(ModelSpan(model_span));
    if table.recorded {
        // The model the caller asked for, for the GenAI record (each
        // target's rewrite puts its own scope in its place).
        upstream
            .extensions_mut()
            .insert(tower_levee::breaker::Scope::new().model(route.label));
    }
    if let Some(client) = &line.client {
        upstream.extensions_mut().insert(client.id.clone());
    }
    match api.call(upstream).await {
        Ok(response) => {
            let served = ServedBy::of_body(response.body().get_ref().get_ref());
            let stop = response.extensions().get::<RetryOutcome>().map(|o| o.stop);
            line.target = served.map(|s| s.target);
            line.verdict = response
                .extensions()
                .get::<Classification>()
                .map_or("success", |c| c.verdict.as_str());
            let (mut parts, body) = response.into_parts();
            strip_hop_by_hop(&mut parts.headers);
            if let Some(served) = served
                && let Ok(value) = HeaderValue::from_str(served.target)
            {
                parts.headers.insert(SERVED_BY, value);
            }
            if let Some(stop) = stop {
                parts
                    .headers
                    .insert(RETRY_STOP, HeaderValue::from_static(stop.as_str()));
            }
            Ok(Response::from_parts(parts, Body::new(body)))
        }
        Err(error) => {
            if let Some(rejection) = Rejection::find(&*error) {
                line.verdict = rejection.kind().as_str();
                return Ok(
                    refusal_response::<Vec<u8>>(dialect, &rejection, route.max_retry_after)
                        .map(Body::from),
                );
            }
            // No answer at all: every target failed to connect or time.
            let (status, code, message) = match transport_failure(&*error) {
                TransportFailure::Timeout => (
                    StatusCode::GATEWAY_TIMEOUT,
                    "upstream_timeout",
                    "no target answered in time",
                ),
                _ => (
                    StatusCode::BAD_GATEWAY,
                    "upstream_error",
                    "no target could be reached",
                ),
            };
            line.verdict = "availability";
            Ok(own_error(dialect, status, code, message))
        }
    }
}

/// The caller named by the key it presents, when the gateway has clients.
fn authenticate(table: &Table, headers: &HeaderMap) -> Result<Option<Caller>, &'static str> {
    if !table.requires_key() {
        return Ok(None);
    }
    let presented = presented_key(headers).ok_or(
        "a client key is required: send it as `Authorization: Bearer <key>` or `x-api-key: <key>`",
    )?;
    table
        .client(presented)
        .cloned()
        .map(Some)
        .ok_or("the key presented is not a client key of this gateway")
}

/// The key a caller presents: `Authorization: Bearer`, `x-api-key` or
/// Azure's `api-key`.
pub(crate) use tower_levee::axum::presented_key;

/// The gateway's own error, in the caller's API's shape.
pub(crate) fn own_error(
    dialect: ApiDialect,
    status: StatusCode,
    code: &str,
    message: &str,
) -> Response {
    error_response::<Vec<u8>>(dialect, status, code, message).map(Body::from)
}

/// The request's id: the caller's `x-request-id` when it is a sane one
/// (visible ASCII, at most 128 bytes), else a new one.
fn request_id(headers: &HeaderMap) -> HeaderValue {
    headers
        .get(REQUEST_ID)
        .filter(|v| {
            let b = v.as_bytes();
            !b.is_empty() && b.len() <= 128 && b.iter().all(|c| c.is_ascii_graphic())
        })
        .cloned()
        .unwrap_or_else(|| {
            let id = format!("{:016x}{:016x}", fastrand::u64(..), fastrand::u64(..));
            HeaderValue::from_str(&id).expect("hex is a header value")
        })
}

/// Whether `name` describes one connection, not the message (RFC 9110
/// section 7.6.1), so a proxy does not pass it on.
fn hop_by_hop(name: &HeaderName) -> bool {
    name == header::CONNECTION
        || name == header::PROXY_AUTHENTICATE
        || name == header::PROXY_AUTHORIZATION
        || name == header::TE
        || name == header::TRAILER
        || name == header::TRANSFER_ENCODING
        || name == header::UPGRADE
        || name.as_str() == "keep-alive"
        || name.as_str() == "proxy-connection"
}

/// Whether `name` is the caller's own (its credentials, or what hyper sets
/// for the target's URL and the body sent), or `Accept-Encoding`, so the
/// provider answers uncompressed and Levee reads its errors and streams.
fn callers_own(name: &HeaderName) -> bool {
    name == header::HOST
        || name == header::AUTHORIZATION
        || name == header::CONTENT_LENGTH
        || name == header::ACCEPT_ENCODING
        || name.as_str() == "x-api-key"
        || name.as_str() == "api-key"
}

/// Removes every header `doomed` names, and those `Connection` names.
/// One pass over the names finds them (usually none): a removal by name
/// hashes it, and most messages carry none of these.
fn remove(headers: &mut HeaderMap, doomed: fn(&HeaderName) -> bool) {
    let mut names: Vec<HeaderName> = headers.keys().filter(|n| doomed(n)).cloned().collect();
    if names.is_empty() {
        return;
    }
    names.extend(
        headers
            .get_all(header::CONNECTION)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .filter_map(|name| HeaderName::from_bytes(name.trim().as_bytes()).ok()),
    );
    for name in names {
        headers.remove(name);
    }
}

/// Removes hop-by-hop headers, and those `Connection` names.
fn strip_hop_by_hop(headers: &mut HeaderMap) {
    remove(headers, hop_by_hop);
}

/// The caller's headers as they go to a target: without hop-by-hop
/// headers and without the caller's own (see [`callers_own`]); the
/// target's own key is set by its rewrite.
fn forwarded(mut headers: HeaderMap) -> HeaderMap {
    remove(&mut headers, |name| hop_by_hop(name) || callers_own(name));
    headers
}

/// Adds the request id, logs the request's line and counts it.
fn finish(mut response: Response, line: &Line) -> Response {
    response
        .headers_mut()
        .insert(REQUEST_ID, line.request_id.clone());
    let status = response.status().as_u16();
    let latency = line.started.elapsed();
    let route = line.route.unwrap_or("-");
    let client = line.client.as_ref().map_or("-", |c| c.label);
    if crate::access::enabled() {
        line.write(route, client, status, latency);
    }
    crate::ops::count_request(route, client, status, line.verdict, latency.as_secs_f64());
    response
}

impl Line {
    /// Writes the request's access line (see [`crate::access`]).
    fn write(&self, route: &str, client: &str, status: u16, latency: Duration) {
        let mut out = crate::access::Line::new();
        out.pair("request_id", self.request_id.to_str().unwrap_or("-"))
            .pair("method", self.method.as_str())
            .pair("path", self.path.as_ref().map_or("/", |pq| pq.path()))
            .pair("route", route)
            .pair("client", client)
            .pair("target", self.target.unwrap_or("-"))
            .number("status", u64::from(status))
            .pair("verdict", self.verdict)
            .number(
                "latency_us",
                u64::try_from(latency.as_micros()).unwrap_or(u64::MAX),
            );
        out.write();
    }
}

/// `GET /v1/models`: the routes' models, in OpenAI's list shape, or
/// Anthropic's for a caller that sends `anthropic-version`.
pub(crate) async fn models(State(gateway): State<Arc<Gateway>>, request: Request) -> Response {
    let table = gateway.table();
    let anthropic = request.headers().contains_key("anthropic-version");
    let dialect = if anthropic {
        ApiDialect::Anthropic
    } else {
        ApiDialect::OpenAi
    };
    if let Err(message) = authenticate(&table, request.headers()) {
        return own_error(
            dialect,
            StatusCode::UNAUTHORIZED,
            "invalid_api_key",
            message,
        );
    }
    let body = if anthropic {
        let data: Vec<_> = table
            .models
            .iter()
            .map(|m| {
                serde_json::json!({
                    "type": "model", "id": m, "display_name": m,
                    "created_at": "1970-01-01T00:00:00Z"
                })
            })
            .collect();
        serde_json::json!({
            "data": data,
            "has_more": false,
            "first_id": table.models.first(),
            "last_id": table.models.last(),
        })
    } else {
        let data: Vec<_> = table
            .models
            .iter()
            .map(|m| serde_json::json!({ "id": m, "object": "model", "created": 0, "owned_by": "levee-gateway" }))
            .collect();
        serde_json::json!({ "object": "list", "data": data })
    };
    let mut res = Response::new(Body::from(body.to_string()));
    res.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    res
}
