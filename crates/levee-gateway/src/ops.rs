//! The operations endpoints: liveness, readiness, the health snapshot,
//! Prometheus metrics, and the admin API.
//!
//! `/healthz` and `/readyz` answer without a key: load balancers' checks
//! often cannot send one, and neither says anything about the providers.
//! `/readyz` is `200` while the gateway serves a configuration and `503`
//! once it drains; it is never tied to the providers' state, so a throttle
//! or an outage upstream never takes every replica out of rotation.
//! `/metrics`, `/levee/health` and `/levee/events` (the state changes as
//! Server-Sent Events) hold no secret and answer without a key unless
//! `ops_key_env` names one; then the admin key reads them too, so the
//! console works with the one key its operator typed. `/levee/console` is
//! the page itself, served to anyone: it holds no state. `/levee/admin/*`
//! exists only when `admin_key_env` names a key, and asks for it.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, Query, Request, State};
use axum::response::Response;
use axum::routing::{get, post};
use http::header::{CACHE_CONTROL, CONTENT_TYPE, HeaderValue};
use http::{HeaderMap, StatusCode};
use metrics::{Counter, Histogram, counter, gauge, histogram};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use serde::Deserialize;
use serde_json::{Value, json};
use tower_levee::api::ApiDialect;
use tower_levee::axum::AdminAction;

use crate::Gateway;
use crate::proxy::{own_error, presented_key};
use crate::secret::Secret;

/// Requests the gateway answered, by route, client, status and verdict.
pub(crate) const REQUESTS: &str = "levee_gateway_requests_total";
/// Seconds from a request's arrival to its answer's head, by route.
pub(crate) const REQUEST_DURATION: &str = "levee_gateway_request_duration_seconds";
/// Requests a client's limits admitted, by client.
pub(crate) const CLIENT_REQUESTS: &str = "levee_gateway_client_requests_total";
/// Tokens a client's answers used, by client (reported, else estimated).
pub(crate) const CLIENT_TOKENS: &str = "levee_gateway_client_tokens_total";
/// Requests a client's limits refused, by client.
pub(crate) const CLIENT_REFUSED: &str = "levee_gateway_client_refused_total";
/// 1 while the gateway serves, 0 while it drains.
pub(crate) const READY: &str = "levee_gateway_ready";

/// The process's Prometheus recorder, installed once.
pub(crate) fn prometheus() -> PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            let recorder = PrometheusBuilder::new()
                .set_buckets_for_metric(
                    Matcher::Full(REQUEST_DURATION.to_owned()),
                    &[
                        0.001, 0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
                    ],
                )
                .expect("the buckets are not empty")
                .build_recorder();
            let handle = recorder.handle();
            // Another recorder may be installed (a test, an embedding
            // program): then this one only renders what it records itself.
            let _ = metrics::set_global_recorder(recorder);
            tower_levee::metrics::describe();
            handle
        })
        .clone()
}

/// Counts one answered request. Its labels are interned names, so this
/// thread's handles are found by their addresses: the registry (the labels
/// hashed under a lock) is read once per combination and thread, not per
/// request.
pub(crate) fn count_request(
    route: &'static str,
    client: &'static str,
    status: u16,
    verdict: &'static str,
    secs: f64,
) {
    type Labels = (usize, usize, u16, usize);
    thread_local! {
        static HANDLES: RefCell<HashMap<Labels, (Counter, Histogram)>> = RefCell::default();
    }
    let labels = (addr(route), addr(client), status, addr(verdict));
    HANDLES.with(|handles| {
        let mut handles = handles.borrow_mut();
        let (requests, duration) = handles.entry(labels).or_insert_with(|| {
            let requests = counter!(
                REQUESTS,
                "route" => route,
                "client" => client,
                "status" => status.to_string(),
                "verdict" => verdict,
            );
            (requests, histogram!(REQUEST_DURATION, "route" => route))
        });
        requests.increment(1);
        duration.record(secs);
    });
}

fn addr(s: &'static str) -> usize {
    s.as_ptr() as usize
}

/// The operations and admin routes.
pub(crate) fn routes(admin: bool) -> Router<Arc<Gateway>> {
    let router = Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/levee/health", get(health))
        .route("/levee/events", get(events))
        .route("/metrics", get(metrics_text))
        .merge(tower_levee::axum::page_routes());
    if !admin {
        return router;
    }
    router
        .route("/levee/admin/targets", get(admin_targets))
        .route("/levee/admin/targets/{target}/{action}", post(admin_action))
        .route("/levee/admin/events", get(admin_events))
}

async fn healthz() -> Response {
    text(StatusCode::OK, "ok\n")
}

async fn readyz(State(gateway): State<Arc<Gateway>>) -> Response {
    if gateway.is_ready() {
        text(StatusCode::OK, "ready\n")
    } else {
        text(StatusCode::SERVICE_UNAVAILABLE, "draining\n")
    }
}

/// Every route's failover snapshot (each target's state and scopes, the
/// fallback share), each route's retry budget, and each client's counts.
async fn health(State(gateway): State<Arc<Gateway>>, request: Request) -> Response {
    if let Some(denied) = check_ops_key(&gateway, request.headers()) {
        return denied;
    }
    json_response(StatusCode::OK, &health_json(&gateway))
}

pub(crate) fn health_json(gateway: &Gateway) -> Value {
    let table = gateway.table();
    let mut routes = serde_json::Map::new();
    for route in table.routes() {
        let mut apis = serde_json::Map::new();
        for (name, api) in [("openai", &route.openai), ("anthropic", &route.anthropic)] {
            if let Some(api) = api {
                apis.insert(
                    name.to_owned(),
                    json!({
                        "failover": api.failover.snapshot(),
                        "retry_budget": api.budget.snapshot(),
                    }),
                );
            }
        }
        routes.insert(route.model.clone(), Value::Object(apis));
    }
    json!({
        "ready": gateway.is_ready(),
        "routes": routes,
        "clients": table.client_limits.handle().snapshot(),
    })
}

/// The console's timeline: every state change as Server-Sent Events,
/// behind the same key as the health snapshot.
async fn events(State(gateway): State<Arc<Gateway>>, request: Request) -> Response {
    if let Some(denied) = check_ops_key(&gateway, request.headers()) {
        return denied;
    }
    gateway.events.log().response(request.headers())
}

async fn metrics_text(State(gateway): State<Arc<Gateway>>, request: Request) -> Response {
    if let Some(denied) = check_ops_key(&gateway, request.headers()) {
        return denied;
    }
    let table = gateway.table();
    table.reporter.record();
    for client in table.client_limits.handle().snapshot() {
        let labels = [("client", client.name.clone())];
        counter!(CLIENT_REQUESTS, &labels).absolute(client.requests);
        counter!(CLIENT_TOKENS, &labels).absolute(client.tokens);
        counter!(CLIENT_REFUSED, &labels).absolute(client.refused);
    }
    gauge!(READY).set(if gateway.is_ready() { 1.0 } else { 0.0 });
    let mut res = Response::new(Body::from(gateway.metrics.render()));
    res.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    res
}

// === admin ===

async fn admin_targets(State(gateway): State<Arc<Gateway>>, request: Request) -> Response {
    if let Some(denied) = check_admin_key(&gateway, request.headers()) {
        return denied;
    }
    let table = gateway.table();
    let targets: Vec<Value> = table
        .targets
        .iter()
        .map(|(name, states)| {
            let scopes: Vec<_> = states
                .iter()
                .flat_map(|s| s.breaker.handle().states())
                .collect();
            json!({ "name": name, "scopes": scopes })
        })
        .collect();
    json_response(StatusCode::OK, &json!({ "targets": targets }))
}

#[derive(Deserialize)]
struct ScopeQuery {
    scope: Option<String>,
}

/// `POST /levee/admin/targets/{target}/{open|close|isolate|unpark}`, on the
/// target's failure domain (or billing scope, to unpark) unless `?scope=`
/// names another.
async fn admin_action(
    State(gateway): State<Arc<Gateway>>,
    Path((target, action)): Path<(String, String)>,
    Query(query): Query<ScopeQuery>,
    request: Request,
) -> Response {
    if let Some(denied) = check_admin_key(&gateway, request.headers()) {
        return denied;
    }
    let table = gateway.table();
    let Some(states) = table.targets.get(&target) else {
        let known: Vec<&str> = table.targets.keys().map(String::as_str).collect();
        return own_error(
            ApiDialect::OpenAi,
            StatusCode::NOT_FOUND,
            "target_not_found",
            &format!(
                "no target is named `{target}` (the targets: {})",
                known.join(", ")
            ),
        );
    };
    let config = table.config.target(&target);
    let billing = config
        .and_then(|t| t.account.clone())
        .unwrap_or_else(|| target.clone());
    let Some(action) = AdminAction::from_name(&action) else {
        return own_error(
            ApiDialect::OpenAi,
            StatusCode::NOT_FOUND,
            "unknown_action",
            &format!("`{action}`: {}", AdminAction::EXPECTED),
        );
    };
    // A breaker's failure domain is the target's name; a park's billing
    // scope its account's.
    let default_scope = match action {
        AdminAction::Unpark => &billing,
        _ => &target,
    };
    let scope = query.scope.as_deref().unwrap_or(default_scope);
    let mut changed = false;
    for state in states {
        changed |= action.apply(&state.breaker.handle(), scope);
    }
    tracing::info!(target: "levee_gateway::admin", target_name = %target, action = action.as_str(), scope = %scope, "admin action");
    let mut body = json!({ "target": target, "action": action.as_str(), "scope": scope });
    if action == AdminAction::Unpark {
        body["was_parked"] = Value::Bool(changed);
    }
    json_response(StatusCode::OK, &body)
}

#[derive(Deserialize)]
struct EventsQuery {
    limit: Option<usize>,
}

async fn admin_events(
    State(gateway): State<Arc<Gateway>>,
    Query(query): Query<EventsQuery>,
    request: Request,
) -> Response {
    if let Some(denied) = check_admin_key(&gateway, request.headers()) {
        return denied;
    }
    let events = gateway.events.last(query.limit.unwrap_or(100));
    json_response(StatusCode::OK, &json!({ "events": events }))
}

// === keys ===

/// `None` when the admin key was presented, else the `401` to send.
fn check_admin_key(gateway: &Gateway, headers: &HeaderMap) -> Option<Response> {
    let table = gateway.table();
    check_key(table.config.admin_key.as_ref(), headers, "an admin key")
}

/// `None` when no operations key is configured, or it or the admin key
/// (which can do more) was presented: the console reads with the one key
/// its operator typed.
fn check_ops_key(gateway: &Gateway, headers: &HeaderMap) -> Option<Response> {
    let table = gateway.table();
    let ops = table.config.ops_key.as_ref()?;
    let admin = table.config.admin_key.as_ref();
    let presented = presented_key(headers);
    if presented.is_some_and(|k| ops.matches(k) || admin.is_some_and(|a| a.matches(k))) {
        return None;
    }
    Some(denied("the operations key (or the admin key)"))
}

fn check_key(key: Option<&Secret>, headers: &HeaderMap, what: &str) -> Option<Response> {
    let ok = match (key, presented_key(headers)) {
        (Some(key), Some(presented)) => key.matches(presented),
        _ => false,
    };
    (!ok).then(|| denied(what))
}

/// The `401` for a request without `what`.
fn denied(what: &str) -> Response {
    own_error(
        ApiDialect::OpenAi,
        StatusCode::UNAUTHORIZED,
        "invalid_api_key",
        &format!("{what} is required (Authorization: Bearer, or x-api-key)"),
    )
}

// === answers ===

fn text(status: StatusCode, body: &'static str) -> Response {
    let mut res = Response::new(Body::from(body));
    *res.status_mut() = status;
    res.headers_mut()
        .insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    res
}

fn json_response(status: StatusCode, value: &Value) -> Response {
    let mut res = Response::new(Body::from(value.to_string()));
    *res.status_mut() = status;
    let headers = res.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    res
}
