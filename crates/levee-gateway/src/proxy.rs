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
use tower::ServiceExt;
use tower_levee::api::{ApiDialect, ReadBodyError, error_response, read_body, refusal_response};
use tower_levee::client_limit::ClientId;
use tower_levee::error::{Rejection, transport_failure};
use tower_levee::failover::ServedBy;
use tower_levee::retry::RetryOutcome;

use crate::Gateway;
use crate::table::Table;
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
    path: String,
    route: Option<String>,
    client: Option<ClientId>,
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
        path: parts.uri.path().to_owned(),
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
    line.route = Some(route.model.clone());
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
    *upstream.uri_mut() = parts.uri.path_and_query().map_or_else(
        || http::Uri::from_static("/"),
        |pq| pq.as_str().parse().unwrap_or_default(),
    );
    *upstream.headers_mut() = forwarded(parts.headers);
    upstream
        .headers_mut()
        .insert(REQUEST_ID, line.request_id.clone());
    upstream.extensions_mut().insert(ModelSpan(model_span));
    if let Some(client) = &line.client {
        upstream.extensions_mut().insert(client.clone());
    }
    match api.stack.clone().oneshot(upstream).await {
        Ok(response) => {
            let served = response.extensions().get::<ServedBy>().copied();
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
fn authenticate(table: &Table, headers: &HeaderMap) -> Result<Option<ClientId>, &'static str> {
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
pub(crate) fn presented_key(headers: &HeaderMap) -> Option<&[u8]> {
    if let Some(value) = headers.get(header::AUTHORIZATION) {
        let bytes = value.as_bytes();
        let prefix = b"bearer ";
        if bytes.len() > prefix.len() && bytes[..prefix.len()].eq_ignore_ascii_case(prefix) {
            return Some(bytes[prefix.len()..].trim_ascii());
        }
    }
    ["x-api-key", "api-key"]
        .into_iter()
        .find_map(|name| headers.get(name))
        .map(|v| v.as_bytes().trim_ascii())
        .filter(|k| !k.is_empty())
}

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

/// Headers that describe one connection, not the request.
const HOP_BY_HOP: [HeaderName; 8] = [
    header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    HeaderName::from_static("proxy-connection"),
    header::PROXY_AUTHENTICATE,
    header::PROXY_AUTHORIZATION,
    header::TE,
    header::TRAILER,
    header::TRANSFER_ENCODING,
];

/// Removes hop-by-hop headers, and those `Connection` names.
fn strip_hop_by_hop(headers: &mut HeaderMap) {
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|name| HeaderName::from_bytes(name.trim().as_bytes()).ok())
        .collect();
    for name in HOP_BY_HOP.iter().chain(&named) {
        headers.remove(name);
    }
    headers.remove(header::UPGRADE);
}

/// The caller's headers as they go to a target: without hop-by-hop
/// headers, without the caller's credentials (the target's own key is
/// set by its rewrite), without `Host` and `Content-Length` (set for the
/// target's URL and the body sent), and without `Accept-Encoding`, so the
/// provider answers uncompressed and Levee reads its errors and streams.
fn forwarded(mut headers: HeaderMap) -> HeaderMap {
    strip_hop_by_hop(&mut headers);
    for name in [
        header::HOST,
        header::AUTHORIZATION,
        header::CONTENT_LENGTH,
        header::ACCEPT_ENCODING,
        HeaderName::from_static("x-api-key"),
        HeaderName::from_static("api-key"),
    ] {
        headers.remove(name);
    }
    headers
}

/// Adds the request id, logs the request's line and counts it.
fn finish(mut response: Response, line: &Line) -> Response {
    response
        .headers_mut()
        .insert(REQUEST_ID, line.request_id.clone());
    let status = response.status().as_u16();
    let latency = line.started.elapsed();
    let route = line.route.as_deref().unwrap_or("-");
    let client = line.client.as_ref().map_or("-", ClientId::as_str);
    tracing::info!(
        target: "levee_gateway::access",
        request_id = line.request_id.to_str().unwrap_or("-"),
        method = %line.method,
        path = %line.path,
        route,
        client,
        target_name = line.target.unwrap_or("-"),
        status,
        verdict = line.verdict,
        latency_ms = latency.as_secs_f64() * 1e3,
    );
    crate::ops::count_request(route, client, status, line.verdict, latency_secs(latency));
    response
}

fn latency_secs(d: Duration) -> f64 {
    d.as_secs_f64()
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
