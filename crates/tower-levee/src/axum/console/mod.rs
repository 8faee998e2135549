//! The console: a live page of every scope, its event stream and its
//! admin routes. [`Console`] says what it serves, and why.

mod events;
mod page;

use std::fmt;
use std::sync::Arc;

use ::axum::Router;
use ::axum::body::Body;
use ::axum::extract::{Path, Query, State};
use ::axum::response::Response;
use ::axum::routing::{get, post};
use http::header::{CACHE_CONTROL, CONTENT_TYPE, HeaderValue};
use http::{HeaderMap, StatusCode};
use serde::Deserialize;
use serde_json::json;

use super::health::{HealthSource, health_handler};
use super::key::{key_matches, presented_key};
use crate::breaker::BreakerHandle;

pub use self::events::{EventLog, EventRecord};
pub use self::page::page_routes;

/// The console: every scope's state on one live page.
///
/// A throttle gate, a spend cap and an open breaker are different things
/// to the person on call — wait, call finance, look at the provider — and
/// the console shows them apart: each scope with its mechanism and state in
/// words and colour, the time until it reopens counting down, why, each
/// target's share of traffic and time to first byte, the retry budget and
/// the bulkheads, and a timeline of the state changes as they happen.
///
/// [`Console::router`] serves, under `/levee/`:
///
/// | route | what |
/// |---|---|
/// | `GET console` | the page: HTML, CSS and script embedded in the binary, nothing fetched from elsewhere |
/// | `GET health` | the health snapshot the page draws (the same JSON as [`health_handler`](crate::axum::health_handler)) |
/// | `GET events` | the [`EventLog`] as Server-Sent Events: the last 100 kept, then each change as it happens (`Last-Event-ID` resumes) |
/// | `GET admin/targets`, `POST admin/targets/{target}/{open\|close\|isolate\|unpark}?scope=` | with [`admin`](Console::admin) only, behind its key |
///
/// The page reads the snapshot every two seconds and the timeline as it is
/// pushed. The admin key, typed into the page, stays in the tab's memory
/// and goes only in the page's own requests (`Authorization: Bearer`);
/// without it the page has no buttons, and the admin routes answer `401`.
/// Its Content-Security-Policy lets it reach nothing but its own origin.
///
/// The health snapshot and the event stream need no key here: they name
/// targets, scopes and why they were refused, never a key or a body. A
/// service reachable by strangers puts the router behind its own guard
/// (`Router::route_layer`), as it would its health route; the admin
/// routes always ask for their key.
///
/// ```
/// use axum::Router;
/// use tower_levee::BreakerLayer;
/// use tower_levee::axum::{Console, EventLog, HealthGroup};
///
/// let events = EventLog::new();
/// let breaker = BreakerLayer::builder()
///     .on_event(events.listener("openai"))
///     .build()
///     .expect("a valid configuration");
/// let health = HealthGroup::new().with("openai", breaker.handle());
/// let console = Console::new(health, events)
///     // Buttons to open, close, isolate and unpark, for whoever has the key.
///     .admin("an-admin-key", [("openai", breaker.handle())]);
/// let app: Router = Router::new().merge(console.router());
/// # let _ = app;
/// ```
#[derive(Clone)]
pub struct Console {
    health: Arc<dyn HealthSource>,
    events: EventLog,
    admin: Option<Arc<Admin>>,
}

struct Admin {
    key: Box<str>,
    targets: Vec<(String, BreakerHandle)>,
}

impl Admin {
    fn presented(&self, headers: &HeaderMap) -> bool {
        presented_key(headers).is_some_and(|k| key_matches(self.key.as_bytes(), k))
    }
}

impl Console {
    /// A console over `health` (a [`FailoverHandle`](crate::failover::FailoverHandle),
    /// a [`BreakerHandle`], a [`HealthGroup`](super::HealthGroup)) and the
    /// `events` its breaker layers record.
    pub fn new(health: impl HealthSource, events: EventLog) -> Self {
        Console {
            health: Arc::new(health),
            events,
            admin: None,
        }
    }

    /// Adds the admin routes and the page's buttons, for requests that
    /// present `key` (`Authorization: Bearer`, or `x-api-key`): open, close
    /// and isolate a breaker's scope, unpark a billing scope, each on the
    /// breaker layer named here. The key is never logged or shown. An
    /// empty key (an unset variable read with `unwrap_or_default`) adds
    /// nothing: no key opens the admin routes.
    pub fn admin<N: Into<String>>(
        mut self,
        key: impl Into<String>,
        targets: impl IntoIterator<Item = (N, BreakerHandle)>,
    ) -> Self {
        let key = key.into();
        if key.trim().is_empty() {
            self.admin = None;
            return self;
        }
        self.admin = Some(Arc::new(Admin {
            key: key.into_boxed_str(),
            targets: targets
                .into_iter()
                .map(|(name, handle)| (name.into(), handle))
                .collect(),
        }));
        self
    }

    /// The routes, to merge into an application's router.
    pub fn router<S: Clone + Send + Sync + 'static>(self) -> Router<S> {
        let events = self.events.clone();
        let router = page_routes()
            .route(
                "/levee/health",
                get(health_handler(Arc::clone(&self.health))),
            )
            .route(
                "/levee/events",
                get(move |headers: HeaderMap| {
                    let events = events.clone();
                    async move { events.response(&headers) }
                }),
            );
        let Some(admin) = self.admin else {
            return router;
        };
        let actions: Router<S> = Router::new()
            .route("/levee/admin/targets", get(admin_targets))
            .route("/levee/admin/targets/{target}/{action}", post(admin_action))
            .with_state(admin);
        router.merge(actions)
    }
}

impl fmt::Debug for Console {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Console")
            .field("events", &self.events)
            .field("admin", &self.admin.as_ref().map(|a| a.targets.len()))
            .finish_non_exhaustive()
    }
}

impl EventLog {
    /// The event stream as a response: `text/event-stream`, the events
    /// after the request's `Last-Event-ID` (or the last 100 kept), then each
    /// new one.
    pub fn response(&self, headers: &HeaderMap) -> Response {
        let after = headers
            .get("last-event-id")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse().ok());
        let mut res = Response::new(Body::new(self.stream(after)));
        let headers = res.headers_mut();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
        headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
        // Tells buffering proxies (nginx) to pass each event on at once.
        headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
        res
    }
}

/// What an operator may do to a scope, from the console's buttons or an
/// admin route (`POST …/targets/{target}/{action}`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum AdminAction {
    /// Open a failure domain's breaker (take the target out of rotation).
    Open,
    /// Close a failure domain's breaker.
    Close,
    /// Hold a failure domain's breaker open until it is closed by hand.
    Isolate,
    /// Unpark a billing scope.
    Unpark,
}

impl AdminAction {
    /// What an unknown action's answer says is known.
    pub const EXPECTED: &'static str = "the actions are open, close, isolate and unpark";

    /// The action its route names: `open`, `close`, `isolate`, `unpark`.
    pub fn from_name(name: &str) -> Option<AdminAction> {
        match name {
            "open" => Some(AdminAction::Open),
            "close" => Some(AdminAction::Close),
            "isolate" => Some(AdminAction::Isolate),
            "unpark" => Some(AdminAction::Unpark),
            _ => None,
        }
    }

    /// Its name in a route.
    pub fn as_str(self) -> &'static str {
        match self {
            AdminAction::Open => "open",
            AdminAction::Close => "close",
            AdminAction::Isolate => "isolate",
            AdminAction::Unpark => "unpark",
        }
    }

    /// Does it to `scope` through `handle`; whether an unpark found the
    /// scope parked (always `false` for the others).
    pub fn apply(self, handle: &BreakerHandle, scope: &str) -> bool {
        match self {
            AdminAction::Open => handle.open(scope),
            AdminAction::Close => handle.close(scope),
            AdminAction::Isolate => handle.isolate(scope),
            AdminAction::Unpark => return handle.unpark(scope),
        }
        false
    }
}

async fn admin_targets(State(admin): State<Arc<Admin>>, headers: HeaderMap) -> Response {
    if !admin.presented(&headers) {
        return unauthorized();
    }
    let targets: Vec<_> = admin
        .targets
        .iter()
        .map(|(name, handle)| json!({ "name": name, "scopes": handle.states() }))
        .collect();
    json_response(StatusCode::OK, &json!({ "targets": targets }))
}

#[derive(Deserialize)]
struct ScopeQuery {
    scope: Option<String>,
}

async fn admin_action(
    State(admin): State<Arc<Admin>>,
    Path((target, action)): Path<(String, String)>,
    Query(query): Query<ScopeQuery>,
    headers: HeaderMap,
) -> Response {
    if !admin.presented(&headers) {
        return unauthorized();
    }
    let Some(action) = AdminAction::from_name(&action) else {
        return error(
            StatusCode::NOT_FOUND,
            "unknown_action",
            &format!("`{action}`: {}", AdminAction::EXPECTED),
        );
    };
    let handles: Vec<&BreakerHandle> = admin
        .targets
        .iter()
        .filter(|(name, _)| *name == target)
        .map(|(_, handle)| handle)
        .collect();
    if handles.is_empty() {
        let known: Vec<&str> = admin.targets.iter().map(|(n, _)| n.as_str()).collect();
        return error(
            StatusCode::NOT_FOUND,
            "target_not_found",
            &format!(
                "no target is named `{target}` (the targets: {})",
                known.join(", ")
            ),
        );
    }
    let Some(scope) = query.scope.filter(|s| !s.is_empty()) else {
        return error(
            StatusCode::BAD_REQUEST,
            "scope_required",
            "name the scope: `?scope=<key>` (a breaker's failure domain, or a park's billing scope)",
        );
    };
    let mut was_parked = false;
    for handle in handles {
        was_parked |= action.apply(handle, &scope);
    }
    tracing::info!(target: "levee::console", target_name = %target, action = action.as_str(), scope = %scope, "admin action");
    let mut body = json!({ "target": target, "action": action.as_str(), "scope": scope });
    if action == AdminAction::Unpark {
        body["was_parked"] = json!(was_parked);
    }
    json_response(StatusCode::OK, &body)
}

fn unauthorized() -> Response {
    error(
        StatusCode::UNAUTHORIZED,
        "invalid_api_key",
        "an admin key is required (Authorization: Bearer, or x-api-key)",
    )
}

fn error(status: StatusCode, code: &str, message: &str) -> Response {
    json_response(
        status,
        &json!({ "error": { "code": code, "message": message } }),
    )
}

fn json_response(status: StatusCode, value: &serde_json::Value) -> Response {
    let mut res = Response::new(Body::from(value.to_string()));
    *res.status_mut() = status;
    let headers = res.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    res
}

#[cfg(test)]
mod tests;
