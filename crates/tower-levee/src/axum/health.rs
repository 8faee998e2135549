//! A handler that serves Levee's health as JSON.

use std::fmt;
use std::future::{Ready, ready};
use std::sync::Arc;

use ::axum::body::Body;
use ::axum::extract::Request;
use ::axum::handler::Handler;
use ::axum::response::Response;
use http::StatusCode;
use http::header::{CACHE_CONTROL, CONTENT_TYPE, HeaderValue};
use serde::Serialize;
use serde_json::Value;

use crate::breaker::{BreakerHandle, Rejections, ScopeHealth};
use crate::failover::FailoverHandle;

/// Something whose state a health route serves as JSON.
pub trait HealthSource: Send + Sync + 'static {
    /// The state now, as JSON.
    fn health(&self) -> Result<Value, serde_json::Error>;
}

/// The [`HealthSnapshot`](crate::failover::HealthSnapshot): every target,
/// its state and scopes, the fallback share.
impl HealthSource for FailoverHandle {
    fn health(&self) -> Result<Value, serde_json::Error> {
        serde_json::to_value(self.snapshot())
    }
}

/// `{"scopes":[..],"rejections":{"breaker":n,"gate":n,"park":n}}`: every
/// scope the breaker layer tracks (as in a failover's snapshot) and the
/// calls each mechanism refused.
impl HealthSource for BreakerHandle {
    fn health(&self) -> Result<Value, serde_json::Error> {
        #[derive(Serialize)]
        struct BreakerHealth {
            scopes: Vec<ScopeHealth>,
            rejections: Rejections,
        }
        serde_json::to_value(BreakerHealth {
            scopes: self.states(),
            rejections: self.rejections(),
        })
    }
}

impl<T: HealthSource + ?Sized> HealthSource for Arc<T> {
    fn health(&self) -> Result<Value, serde_json::Error> {
        (**self).health()
    }
}

/// Several health sources under one route, by name: `{"llm":{..},"crm":{..}}`.
///
/// ```
/// use tower_levee::BreakerLayer;
/// use tower_levee::axum::{HealthGroup, health_handler};
///
/// let (llm, crm) = (BreakerLayer::new(), BreakerLayer::new());
/// let health = HealthGroup::new().with("llm", llm.handle()).with("crm", crm.handle());
/// let route = axum::routing::get(health_handler(health));
/// # let _: axum::routing::MethodRouter = route;
/// ```
#[derive(Clone, Default)]
pub struct HealthGroup {
    members: Vec<(String, Arc<dyn HealthSource>)>,
}

impl HealthGroup {
    /// An empty group.
    pub fn new() -> Self {
        HealthGroup::default()
    }

    /// Adds `source` under `name` (a later one of the same name wins).
    pub fn with(mut self, name: impl Into<String>, source: impl HealthSource) -> Self {
        self.members.push((name.into(), Arc::new(source)));
        self
    }
}

impl HealthSource for HealthGroup {
    fn health(&self) -> Result<Value, serde_json::Error> {
        let mut map = serde_json::Map::new();
        for (name, source) in &self.members {
            map.insert(name.clone(), source.health()?);
        }
        Ok(Value::Object(map))
    }
}

impl fmt::Debug for HealthGroup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.members.iter().map(|(name, _)| name))
            .finish()
    }
}

/// An axum handler serving `source`'s health as JSON: `200` with
/// `Content-Type: application/json` and `Cache-Control: no-store` (a
/// health answer is stale at once). Reading it takes short locks and
/// changes nothing.
///
/// ```
/// use axum::{Router, routing::get};
/// use tower_levee::BreakerLayer;
/// use tower_levee::axum::health_handler;
///
/// let breaker = BreakerLayer::new();
/// let app: Router = Router::new().route("/health/llm", get(health_handler(breaker.handle())));
/// # let _ = app;
/// ```
pub fn health_handler<H: HealthSource>(source: H) -> HealthHandler<H> {
    HealthHandler {
        source: Arc::new(source),
    }
}

/// The handler [`health_handler`] returns; use it as an axum route handler.
pub struct HealthHandler<H> {
    source: Arc<H>,
}

impl<H: HealthSource> HealthHandler<H> {
    /// The response the handler sends now. Should serialising fail (it does
    /// not for Levee's own sources), a `500` with a JSON error body.
    pub fn response(&self) -> Response {
        let (status, body) = match self.source.health() {
            Ok(json) => (StatusCode::OK, json.to_string()),
            Err(_) => (
                StatusCode::INTERNAL_SERVER_ERROR,
                r#"{"error":{"code":"health_unavailable","message":"the health snapshot could not be serialised"}}"#.to_owned(),
            ),
        };
        let mut res = Response::new(Body::from(body));
        *res.status_mut() = status;
        let headers = res.headers_mut();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
        res
    }
}

impl<H: HealthSource, S> Handler<(), S> for HealthHandler<H> {
    type Future = Ready<Response>;

    fn call(self, _req: Request, _state: S) -> Self::Future {
        ready(self.response())
    }
}

impl<H> Clone for HealthHandler<H> {
    fn clone(&self) -> Self {
        HealthHandler {
            source: Arc::clone(&self.source),
        }
    }
}

impl<H> fmt::Debug for HealthHandler<H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HealthHandler").finish_non_exhaustive()
    }
}
