//! Breaker, throttle gate and park table: one layer, three mechanisms.
//!
//! A classic circuit breaker counts every error. In front of an LLM provider
//! that is wrong on the most common error of all: a `429` means the account
//! answered, promptly, and is busy. Count it and the breaker ejects a busy
//! account at peak, for longer than the throttle lasted, and cascades the load
//! onto the next account until every account is "open".
//!
//! [`Breaker`] classifies every response (a bounded peek of non-2xx bodies,
//! handed back whole) and feeds one of three mechanisms, each keyed by its own
//! scope ([`Scope`], [`default_scope`]):
//!
//! - **availability** failures (timeouts, connect errors, 5xx, 529) and
//!   **credential** rejections count toward the failure domain's breaker,
//!   which opens, cools off (growing, jittered) and admits probes;
//! - **throttled** responses close the quota scope's gate until the
//!   provider's wait hint — no probe, never a failure; a wait beyond the
//!   gate's cap parks instead;
//! - **quota** exhaustion parks the billing scope until its reset.
//!
//! A request for a parked, gated or open scope is refused at once with
//! [`Parked`], [`Throttled`] or [`CircuitOpen`], without touching the inner
//! service: the breaker never queues (fail fast rather than queue blind). A
//! retry layer or failover above it decides what to do next.
//!
//! A streamed `2xx` is watched as it passes, and its verdict is the
//! stream's: an in-band error, a cut or a stall counts when it happens.
//! Until the model's first output (a token, a tool call) the layer holds
//! the stream back ([`StreamHold`], on by default, bounded): one that fails
//! before it is settled as a failed answer, so a retry or failover above
//! replaces it as it would a `503` and the caller never sees it. After the
//! first output the stream is the caller's. `first_content_timeout` and
//! `stall_timeout` on the [builder](BreakerLayerBuilder) end a quiet stream
//! with a [`StreamTimeout`](crate::error::StreamTimeout).
//!
//! On the success path of a closed breaker the layer writes no shared memory:
//! it reads one published status word, and a response future holds a `Copy`
//! handle to its scope rather than a reference count. Under rolling tripping
//! a success must be counted, and is, on the calling thread's own stripe of
//! the window's current bucket (4 KiB of stripes per failure domain): no
//! lock, until the bucket ends or a failure is counted.
//!
//! ```
//! use std::convert::Infallible;
//! use http::{Request, Response, StatusCode};
//! use tower::{Service, ServiceBuilder, ServiceExt};
//! use tower_levee::breaker::{BreakerLayer, Throttled};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let layer = BreakerLayer::new();
//! let handle = layer.handle();
//! let mut client = ServiceBuilder::new().layer(layer).service_fn(|_req: Request<String>| async {
//!     Ok::<_, Infallible>(
//!         Response::builder()
//!             .status(StatusCode::TOO_MANY_REQUESTS)
//!             .header("retry-after", "7")
//!             .body(String::new())
//!             .unwrap(),
//!     )
//! });
//! let req = || Request::get("https://api.openai.com/v1/chat/completions").body(String::new()).unwrap();
//!
//! // The 429 reaches the caller, and gates the scope for 7 s ...
//! let res = client.ready().await.unwrap().call(req()).await.unwrap();
//! assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
//! // ... so the next call is refused without being sent,
//! let err = client.ready().await.unwrap().call(req()).await.unwrap_err();
//! assert!(err.is::<Throttled>());
//! // and the breaker never counted it.
//! assert_eq!(handle.breaker_status("api.openai.com").unwrap().as_str(), "closed");
//! # }
//! ```

mod admission;
pub(crate) mod body;
mod cost;
mod deadline;
pub mod error;
mod event;
mod fleet;
pub mod future;
mod handle;
mod hold;
mod hot;
mod latency;
mod layer;
mod reopening;
pub(crate) mod scope;
mod service;
mod settings;
mod shadow;
mod shared;
mod signal;
mod tracker;

pub(crate) use self::admission::{PeekCache, PeekMemo};
pub(crate) use self::body::{ResponseBody, ServedTag};
pub use self::cost::TokenCost;
pub use self::error::{CircuitOpen, Parked, Throttled};
pub use self::event::{EventSubscriber, Origin, ScopeEvent};
pub use self::fleet::{FleetUpdate, MAX_ADOPTED_OPEN};
pub use self::handle::{BreakerHandle, LimitLeft, Rejections, ScopeHealth};
pub use self::hold::StreamHold;
pub use self::latency::LatencyEstimate;
pub(crate) use self::latency::LatencyHistogram;
pub use self::layer::{BreakerLayer, BreakerLayerBuilder};
pub use self::reopening::Reopening;
pub use self::scope::{RequestHead, Scope, ScopeFn, ScopeKeys, default_scope};
pub use self::service::Breaker;
pub use self::settings::{DEFAULT_MAX_KEYS, DEFAULT_PEEK_LIMIT, SoftFailureFn};
pub use self::shadow::ShadowProbe;
pub use self::signal::{FLEET_ASK_WAIT, FleetSignal, FleetSignals};
