//! Per-client limits for a server in front of a provider: [`ClientLimitLayer`].
//!
//! # Why
//!
//! A gateway or backend that serves many callers from one provider account
//! shares that account's rate limits between them. One caller in a loop
//! (a batch job, an agent that lost its way) can take the whole allowance:
//! the provider throttles the account, and every other caller is throttled
//! with it. The breaker layer keeps those throttles from becoming outages;
//! this layer keeps one caller from causing them, by holding each caller
//! to its own requests and tokens per minute.
//!
//! # How
//!
//! Each request names its caller with a [`ClientId`] extension (the server
//! sets it once it has authenticated the caller). The caller's limits are
//! buckets that hold a minute's worth and refill continuously
//! ([`MinuteLimit`](levee_core::limit::MinuteLimit)): a request takes one
//! from its requests bucket before it is sent; its tokens are known only
//! from the answer, so they are spent as the answer's body goes by, from its
//! `usage` ([`UsageScanner`](levee_core::usage::UsageScanner)), and a
//! caller is admitted while any tokens are left. An answer that does not say
//! what it used (an OpenAI stream asked for without
//! `stream_options.include_usage`) is counted by estimate: a token per
//! streamed event, or four bytes a token of a plain answer, plus four bytes
//! a token of the request's body for the prompt. Only successful answers
//! spend tokens; providers do not bill the others.
//!
//! A caller over a limit is refused at once with [`ClientLimited`], a Levee
//! rejection like the others (`429` with a `Retry-After` of the time until
//! the bucket admits it again, code `client_rate_limited`), never sent. A
//! request without a [`ClientId`], or of a caller the layer was not told
//! of, passes unlimited and uncounted.
//!
//! # Cost
//!
//! A counted request takes one short lock on its caller's buckets, and its
//! answer's body is scanned for `usage` as it passes (a substring search
//! per frame; nothing is buffered but the `usage` object itself). A caller
//! with no limits set is only counted.
//!
//! # Example
//!
//! ```
//! use std::num::NonZeroU64;
//! use http::{Request, Response};
//! use tower::{Service, ServiceBuilder, ServiceExt};
//! use tower_levee::client_limit::{ClientId, ClientLimitLayer, ClientLimited, ClientLimits};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! let limits = ClientLimitLayer::new()
//!     .client("batch-job", ClientLimits::new().requests_per_minute(NonZeroU64::new(1).unwrap()));
//! let handle = limits.handle();
//! let provider = tower::service_fn(|_req: Request<String>| async {
//!     Ok::<_, tower_levee::BoxError>(Response::new(String::from(r#"{"usage":{"total_tokens":7}}"#)))
//! });
//! let mut svc = ServiceBuilder::new().layer(limits).service(provider);
//! let request = || {
//!     let mut req = Request::new(String::new());
//!     req.extensions_mut().insert(ClientId::new("batch-job"));
//!     req
//! };
//!
//! let res = svc.ready().await.unwrap().call(request()).await.unwrap();
//! http_body_util::BodyExt::collect(res.into_body()).await.unwrap();
//! let err = svc.ready().await.unwrap().call(request()).await.unwrap_err();
//! assert!(err.is::<ClientLimited>());
//!
//! let seen = &handle.snapshot()[0];
//! assert_eq!((seen.requests, seen.tokens, seen.refused), (1, 7, 1));
//! # }
//! ```

mod body;
pub mod error;
pub mod future;
mod layer;
mod service;
mod state;

pub use self::body::ClientLimitBody;
pub use self::error::{ClientLimited, LimitKind};
pub use self::future::ResponseFuture;
pub use self::layer::{ClientLimitHandle, ClientLimitLayer};
pub use self::service::ClientLimit;
pub use self::state::{ClientId, ClientLimits, ClientSnapshot};
