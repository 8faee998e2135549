//! Tower middleware that keeps clients of LLM providers serving when the
//! providers throttle, run out of quota or fail.
//!
//! **Throttling is not failure.** A `429` means a busy, healthy account: it
//! closes a throttle gate until the provider's wait hint and never trips the
//! breaker. Timeouts, `5xx`, `529` and rejected keys trip the breaker. An
//! exhausted spend cap parks the account until it resets. Each mechanism is a
//! separate tower layer; the policy engine underneath is [`levee_core`],
//! re-exported here as [`core`].
//!
//! The layers, outermost first (every layer also works alone over any
//! `Service<http::Request<B>>`):
//!
//! ```
//! use std::time::Duration;
//! use http::{Request, Response};
//! use tower::{Service, ServiceBuilder, ServiceExt};
//! use tower_levee::{BreakerLayer, BulkheadLayer, CircuitOpen, RetryBudgetLayer};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), tower_levee::BoxError> {
//! // Stands in for a hyper or reqwest client.
//! let provider = tower::service_fn(|_req: Request<String>| async {
//!     Ok::<_, tower_levee::BoxError>(Response::new(String::from("{\"choices\":[]}")))
//! });
//! let breaker = BreakerLayer::new();
//! let health = breaker.handle();
//! let mut client = ServiceBuilder::new()
//!     .timeout(Duration::from_secs(120))        // the caller's overall deadline
//!     .layer(RetryBudgetLayer::with_defaults()) // the one place that retries
//!     .layer(BulkheadLayer::named("llm", 64))   // fail fast past 64 in flight
//!     .layer(breaker)                           // breaker + throttle gate + park
//!     .timeout(Duration::from_secs(60))         // per attempt
//!     .service(provider);
//!
//! let req = Request::post("https://api.openai.com/v1/chat/completions").body(String::new())?;
//! let res = client.ready().await?.call(req).await?;
//! assert!(res.status().is_success());
//!
//! // Take the account out of rotation ahead of maintenance: refused at once.
//! health.open("api.openai.com");
//! let req = Request::post("https://api.openai.com/v1/chat/completions").body(String::new())?;
//! let err = client.ready().await?.call(req).await.unwrap_err();
//! assert!(err.is::<CircuitOpen>());
//! # Ok(())
//! # }
//! ```

//! # Stability
//!
//! Types that may grow are `#[non_exhaustive]`: match them with a wildcard
//! arm, and build configurations through their builders, setters or
//! `Default`. Items hidden from these docs (`#[doc(hidden)]`) are shared
//! with Levee's own crates and carry no semver promise.
//!
//! # Features
//!
//! | feature | what it adds |
//! |---|---|
//! | `serde` | `tower_levee::config`: every layer's configuration from TOML/JSON/YAML, validated at load |
//! | `toml` | `tower_levee::config::from_toml`: a configuration file read with the key, line and column of what is wrong (turns on `serde`) |
//! | `reqwest` | `tower_levee::reqwest::HttpClient`: a `reqwest::Client` as a `Service<http::Request<B>>` |
//! | `reqwest-middleware` | `tower_levee::reqwest_middleware::LeveeMiddleware`: the breaker, gate and park as a reqwest middleware (rig, any `ClientWithMiddleware`) |
//! | `async-openai` | `tower_levee::async_openai::OpenAiService`: a Levee stack under `async_openai::Client::with_http_service` |
//! | `metrics` | `tower_levee::metrics::MetricsReporter`: every layer's state and counters through the `metrics` facade |
//! | `axum` | `tower_levee::axum`: every Levee error as a `429`/`503` JSON response with `Retry-After`, a health handler, the console (turns on `serde`) |
//! | `aws` | `tower_levee::aws::AwsHttpClient`: a Levee stack as the AWS SDK's HTTP client, for Bedrock's runtime SDK (needs the AWS SDK's newer Rust: see the module) |
//! | `rig` | `tower_levee::rig::RigHttpClient`: a Levee stack as rig's HTTP client, streams included (rig 0.44; needs Rust 1.95: see the module) |
//! | `otel` | `tower_levee::otel`: OpenTelemetry's GenAI spans and metrics, through the OpenTelemetry API, with Levee's verdicts, refusals and failover under `levee.*` |
//! | `api` | `tower_levee::api`: refusals and errors in an OpenAI or Anthropic API's own shape, for a server that speaks one; a request body read within a cap |
//!
//! A `hyper_util::client::legacy::Client` is already a
//! `Service<http::Request<B>>`: put the layers straight on it.
//!
//! # Architecture
//!
//! Policy lives in [`levee_core`]: sans-IO state machines (breaker, gate,
//! park, retry budget) that take a timestamp and return a
//! [`Transition`](levee_core::transition::Transition), and the classifier
//! that turns a response into a verdict. This crate decides nothing of its
//! own: each layer drives those machines from a tower service and turns
//! their transitions into events.
//!
//! Each layer is one folder, split by role as tower's are, and each file
//! imports only files below it (the `architecture` test checks it):
//!
//! | layer | files, top to bottom |
//! |---|---|
//! | [`breaker`] | `layer` (builder) → `service` → `future` → `body` (peek, stream watch) → `tracker` (one call's outcome) → `admission` (park → gate → breaker, as a call or as a read-only peek) → `shared` (the slow path) → `deadline` (the gate and park tables), `hot` (words read without a lock), `settings`, `scope` (the one rule for scope keys), `event`, `latency`, `error` |
//! | [`bulkhead`] | `layer`, `registry` → `service` → `future` → `compartment` → `error` |
//! | [`retry`] | `layer` → `service` → `future` → `decide` (the one retry decision, also used by `tower_policy`) → `policy`, `budget` |
//! | [`failover`] | `builder` → `service` → `future` → `state`, `health`, `target` → `error` |
//! | [`client_limit`] | `layer` → `service` → `future` → `body` (the answer's usage) → `state` (each caller's buckets) → `error` |
//! | [`error`] | `refusal` (`BoxError`, `RefusalKind`: imports no layer) ← every layer's `error.rs` ← `rejection` (the one place that finds a Levee rejection in an error) ← the layers' services |
//!
//! Shared below them all: `registry` (per-key state reached without
//! reference counts), `striped` (per-thread counters), [`clock`].
//! A `mod.rs` holds the module's docs and its re-exports, no logic.
//!
//! A new mechanism gets a state machine in `levee-core` (decide there) and a
//! folder here (act here). Anything a second file needs moves down to where
//! both can import it; nothing is copied, and nothing reaches up.
#![cfg_attr(docsrs, feature(doc_cfg))]
// A type users can build or match in full cannot grow without a breaking
// release: each public one is `#[non_exhaustive]`, or exhaustive on purpose
// with an `#[allow]` that says why.
#![deny(clippy::exhaustive_enums, clippy::exhaustive_structs)]

pub use levee_core as core;

/// The crates whose types or traits appear in this crate's API, at the
/// versions it was built with. Name them through here and a second,
/// mismatched version of one cannot creep into a build. `api/tower-levee.txt`
/// lists them (`public dependency …`), and the snapshot check fails when
/// one is added or dropped.
pub mod deps {
    #[cfg(feature = "async-openai")]
    pub use async_openai;
    #[cfg(feature = "aws")]
    pub use aws_smithy_runtime_api;
    #[cfg(feature = "aws")]
    pub use aws_smithy_types;
    #[cfg(feature = "axum")]
    pub use axum;
    pub use bytes;
    pub use http;
    pub use http_body;
    // The `aws` and `rig` clients take a stack of `http::Request<Full<Bytes>>`.
    #[cfg(any(feature = "aws", feature = "rig"))]
    pub use http_body_util;
    pub use levee_core;
    #[cfg(feature = "otel")]
    pub use opentelemetry;
    #[cfg(feature = "reqwest")]
    pub use reqwest;
    #[cfg(feature = "reqwest-middleware")]
    pub use reqwest_middleware;
    #[cfg(feature = "rig")]
    pub use rig_http;
    #[cfg(feature = "serde")]
    pub use serde;
    #[cfg(any(feature = "api", feature = "axum", feature = "async-openai"))]
    pub use serde_json;
    pub use tokio;
    pub use tower;
    pub use tower_layer;
    pub use tower_service;
}

#[cfg(feature = "api")]
pub mod api;
#[cfg(feature = "async-openai")]
pub mod async_openai;
#[cfg(feature = "aws")]
pub mod aws;
#[cfg(feature = "axum")]
pub mod axum;
pub mod breaker;
pub mod builder;
pub mod bulkhead;
pub mod client_limit;
pub mod clock;
#[cfg(feature = "serde")]
pub mod config;
pub mod error;
pub mod failover;
mod inline_str;
#[cfg(feature = "metrics")]
pub mod metrics;
#[cfg(feature = "serde")]
mod millis;
#[cfg(feature = "otel")]
pub mod otel;
mod registry;
#[cfg(feature = "reqwest")]
pub mod reqwest;
#[cfg(feature = "reqwest-middleware")]
pub mod reqwest_middleware;
pub mod retry;
#[cfg(feature = "rig")]
pub mod rig;
mod striped;
mod sync;
#[cfg(test)]
mod test_util;

/// The response body a Levee stack hands back: the provider's body,
/// unchanged, peeked or watched on its way by the breaker layer.
pub mod body {
    pub use crate::breaker::body::ResponseBody;
}

pub use breaker::{BreakerHandle, BreakerLayer, CircuitOpen, Parked, Scope, Throttled};
pub use builder::ServiceBuilderExt;
pub use bulkhead::{BulkheadFull, BulkheadLayer, Bulkheads};
pub use error::BoxError;
pub use failover::{Failover, NoTargetAvailable, ServedBy, Target};
pub use retry::{RetryBudget, RetryBudgetLayer};
