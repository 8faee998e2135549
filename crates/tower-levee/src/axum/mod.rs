//! Levee in an axum server (feature `axum`): every Levee error as a
//! response, a handler that serves the health snapshot, and the
//! [`Console`]: every scope's state on one live page.
//!
//! A backend that calls a provider through a Levee stack has to answer its
//! own caller when Levee refuses. Each rejection implements
//! [`IntoResponse`](::axum::response::IntoResponse): a `429` when the
//! provider is only busy (the capacity is there and returns at a known
//! time), a `503` otherwise, a `Retry-After` in whole seconds (rounded up)
//! and a JSON body with a stable `code`:
//!
//! ```json
//! {"error":{"code":"circuit_open","message":"circuit open for `api.openai.com`; retry after 12.5s"}}
//! ```
//!
//! | error | status | `code` | `Retry-After` |
//! |---|---|---|---|
//! | [`Throttled`] | 429 | `provider_rate_limited` | the gate's reopening |
//! | [`Parked`] | 503 | `parked` | the quota's reset |
//! | [`CircuitOpen`] | 503 | `circuit_open` | the end of the cool-off |
//! | [`BulkheadFull`] | 503 | `bulkhead_full` | 1 (s) |
//! | [`NoTargetAvailable`], every target throttled | 429 | `provider_rate_limited` | the earliest reopening |
//! | [`NoTargetAvailable`], otherwise | 503 | that of the refusal (not a throttle) that ends first: `circuit_open`, `parked`, `bulkhead_full` | the earliest reopening, capped |
//! | [`ClientLimited`] | 429 | `client_rate_limited` | when the caller's limit admits it again |
//! | a timeout ([`LeveeError`] only) | 504 | `upstream_timeout` | — |
//! | anything else ([`LeveeError`] only) | 502 | `upstream_error` | — |
//!
//! The status and code of each rejection are its own
//! [`status_code`](CircuitOpen::status_code) and [`code`](CircuitOpen::code),
//! mapped once by [`RefusalKind`](crate::failover::RefusalKind); a server
//! that is not axum builds the same answer with `to_response(body)`.
//!
//! A layer returns a [`BoxError`](crate::BoxError); [`LeveeError`] takes one,
//! finds the Levee rejection in it (or in its source chain) and answers as
//! above. The message of a rejection names its scope or target (an
//! authority such as `api.openai.com`, never its userinfo); the message of
//! any other error is generic, since an upstream error may carry a URL with
//! a key in its query.
//!
//! Hold the stack in the router's state (boxed, e.g. in a
//! `BoxCloneSyncService`) and write handlers as `async fn`, as below: a
//! closure capturing an unboxed stack can meet rustc's "implementation of
//! `From` is not general enough" when axum checks that its future is `Send`.
//!
//! [`health_handler`] serves a [`FailoverHandle`](crate::failover::FailoverHandle)'s
//! snapshot, a [`BreakerHandle`](crate::BreakerHandle)'s scopes, or a
//! [`HealthGroup`] of several as JSON, with `Cache-Control: no-store`.
//!
//! ```
//! use axum::Router;
//! use axum::body::Body;
//! use axum::extract::State;
//! use axum::response::Response;
//! use axum::routing::{get, post};
//! use tower::util::BoxCloneSyncService;
//! use tower::{ServiceBuilder, ServiceExt};
//! use tower_levee::axum::{LeveeError, health_handler};
//! use tower_levee::{BoxError, BreakerLayer};
//!
//! type Llm = BoxCloneSyncService<http::Request<String>, Response, BoxError>;
//!
//! async fn chat(State(llm): State<Llm>, body: String) -> Result<Response, LeveeError> {
//!     let req = http::Request::post("https://api.openai.com/v1/chat/completions").body(body)?;
//!     // A refusal becomes a 429/503 with Retry-After and a JSON `code`.
//!     Ok(llm.oneshot(req).await?)
//! }
//!
//! // Stands in for a hyper or reqwest client.
//! let provider = tower::service_fn(|_req: http::Request<String>| async {
//!     Ok::<_, BoxError>(http::Response::new(String::from("{}")))
//! });
//! let breaker = BreakerLayer::new();
//! let health = breaker.handle();
//! let llm = ServiceBuilder::new()
//!     .layer(breaker)
//!     .service(provider)
//!     .map_response(|res| res.map(Body::new));
//!
//! let app: Router = Router::new()
//!     .route("/v1/chat", post(chat))
//!     .route("/health", get(health_handler(health)))
//!     .with_state(BoxCloneSyncService::new(llm));
//! # let _ = app;
//! ```

mod console;
mod error;
mod health;
mod key;
#[cfg(test)]
mod tests;

pub use self::console::{AdminAction, Console, EventLog, EventRecord, page_routes};
pub use self::error::LeveeError;
pub use self::health::{HealthGroup, HealthHandler, HealthSource, health_handler};
pub use self::key::{key_matches, presented_key};

#[cfg(doc)]
use crate::{
    BulkheadFull, CircuitOpen, NoTargetAvailable, Parked, Throttled, client_limit::ClientLimited,
};
