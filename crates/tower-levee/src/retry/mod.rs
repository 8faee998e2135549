//! The one place that retries: [`RetryBudgetLayer`].
//!
//! # Why one layer, and why a budget
//!
//! Retries multiply. The provider SDKs retry twice by default (3 calls); wrap
//! the SDK in a retry decorator of 3 and run it from a queue worker that
//! retries 3 times, and one user request becomes 3 × 3 × 3 = 27 calls. In one
//! published fault drill ([fdetimes.net]'s guide to breakers, bulkheads and
//! retry budgets for LLM APIs), 50 requests to a dependency that answers
//! `503` reach it 1,350 times, every one of them while it is down. So Levee retries
//! in exactly one layer, outside the breaker, and everything beneath it fails
//! fast.
//!
//! Even one layer of "3 attempts" triples the load on a dependency at the
//! moment it fails: at 100 requests/s, a full outage turns into 300 calls/s.
//! A [`RetryBudget`] caps retries by *traffic* instead: each request deposits
//! a tenth of a token, each retry spends one, and a reserve of
//! `min_per_sec × ttl` (10 × 10 s) lets a quiet client retry at all. In the
//! same outage the dependency sees 100 + 10 + 10 = 120 calls/s once the
//! reserve is spent: 1.2× instead of 3×. While the dependency is healthy,
//! retries are rare and the budget never binds. (See
//! [`levee_core::budget`] for the window and the exact bound.)
//!
//! # When a request is retried
//!
//! After each attempt, the outcome is classified. A response carrying a
//! [`Classification`] extension (the breaker layer inserts one after peeking
//! at the body) is taken at its word; otherwise the layer's own
//! [`Classify`] sees the status and headers
//! only, with an empty body. Put the breaker layer beneath this one to get
//! the full, body-aware verdict (a `429` naming a spend cap is quota, not
//! throttling). Errors from the inner service are read with
//! [`transport_failure`](crate::error::transport_failure).
//!
//! The request is retried only when all of these hold:
//!
//! - the verdict is **retryable**: an availability failure (timeout, `5xx`,
//!   `529`), or throttling. A credential, quota or request failure never is.
//!   `x-should-retry: false` forbids a retry; `x-should-retry: true` allows
//!   one the verdict would not (never for a success);
//! - the error is **not a Levee rejection**: [`CircuitOpen`], [`Throttled`],
//!   [`Parked`] and [`BulkheadFull`] mean the request was never sent; they
//!   are returned at once, never retried and never slept on (a caller with
//!   failover routes around them instead). Two exceptions: a
//!   [`NoTargetAvailable`] whose targets are all only throttled, and a
//!   [`Throttled`] for at most a second (a scope spread at its provider's
//!   rate), are retried at their `retry_after` (the earliest reopen) when
//!   that fits the deadline and the budget grants a token — the wait is
//!   known, not blind;
//! - **attempts remain** (3 in all by default);
//! - the **wait fits**: the provider's hint (`retry-after` and friends,
//!   [`Classification::wait`]), rounded up to the millisecond and never cut
//!   short, else capped exponential backoff with full jitter (500 ms base,
//!   8 s cap, as the SDKs do) — and never less than what the breaker beneath
//!   said: an answer that closed its scope (a gate, a park, an open breaker)
//!   carries a [`Reopening`], and the retry waits at least until then, since
//!   sooner it would only be refused. No retry starts if its wait would end
//!   past the caller's deadline ([`RetryBudgetLayerBuilder::timeout`] or a
//!   [`Deadline`] extension), or exceeds [`RetryBudgetLayerBuilder::max_wait`]
//!   (60 s): a `429` asking for 600 s under a 30 s deadline is returned, not
//!   slept on, and so is a `429` without a hint whose gate outlasts the
//!   deadline;
//! - the **budget** grants a token (taken last, only for a retry that will
//!   happen).
//!
//! When any fails, the caller gets the last real response or error, not a
//! synthetic one. So does a caller whose retry a Levee layer refuses after
//! all (a scope closed while it waited): the answer before the refusal is
//! returned, its body untouched, with [`Stop::Refused`]. While a retry is on
//! its way the layer keeps that answer (boxed, its body unread). A response that is not a success carries a
//! [`RetryOutcome`] extension saying how many attempts were made and why
//! they stopped; a refusal by the budget also counts in
//! [`BudgetSnapshot::budget_exhausted`] and emits a `tracing` event.
//!
//! # With tower's own `Retry`
//!
//! A stack that keeps `tower::retry::Retry` gets the same rules from
//! [`BudgetPolicy`] (a `tower::retry::Policy` over a [`RetryBudget`]), and a
//! policy of its own can skip Levee's rejections with
//! [`is_rejection`](crate::error::is_rejection).
//!
//! # Request bodies
//!
//! Every attempt sends a copy of the request, so the body must be in memory
//! and `Clone`: `Full<Bytes>`, `String`, `Vec<u8>`, `Bytes` or any
//! `B: Clone`. A streaming body (hyper's `Incoming`, a boxed stream) cannot
//! be replayed and is not retried: the layer does not accept it. Collect it
//! first (`http_body_util::BodyExt::collect`) if it must be retried, or
//! leave this layer out of that route.
//!
//! # Cost
//!
//! On the success path the layer adds: one copy of the request, made before
//! the first attempt because the inner service consumes the original (for a
//! `Full<Bytes>` body a reference count; the method, URI, header map and
//! extensions are copied, and a non-empty header map allocates: this copy is
//! most of the layer's cost, as for any layer that can replay a request);
//! one deposit into the budget, which touches a per-thread counter, never one
//! shared with another thread; and a reference count on the service's
//! state. The inner service is cloned only when a request retries (keep it
//! cheap to clone, as for tower's `Retry`), from a spare each clone of the
//! layer keeps. Nothing else allocates, no lock is taken and the clock is not read
//! (unless a [`timeout`](RetryBudgetLayerBuilder::timeout) is set). Each clone of
//! the service has its own copy of that state (sharing the budget), so that
//! reference count never bounces between threads; the price is one small
//! allocation per clone of the service, so keep a clone per task or worker
//! rather than cloning it for every request where you can. The
//! `benches/benches/retry_bulkhead.rs` benchmark measures it next to tower's
//! own `Retry`.
//!
//! # Example
//!
//! ```
//! use std::sync::Arc;
//! use std::sync::atomic::{AtomicUsize, Ordering};
//! use http::{Request, Response, StatusCode};
//! use tower::{Service, ServiceBuilder, ServiceExt};
//! use tower_levee::retry::{RetryBudget, RetryBudgetLayer};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! let calls = Arc::new(AtomicUsize::new(0));
//! let c = calls.clone();
//! // A provider that fails with 503 once, then answers.
//! let provider = tower::service_fn(move |_req: Request<String>| {
//!     let n = c.fetch_add(1, Ordering::SeqCst);
//!     let status = if n == 0 { StatusCode::SERVICE_UNAVAILABLE } else { StatusCode::OK };
//!     async move {
//!         Ok::<_, std::convert::Infallible>(
//!             Response::builder().status(status).body(String::new()).unwrap(),
//!         )
//!     }
//! });
//!
//! let budget = Arc::new(RetryBudget::default()); // one per dependency
//! let mut client = ServiceBuilder::new()
//!     .layer(RetryBudgetLayer::new(budget.clone()))
//!     .service(provider);
//!
//! let response = client.ready().await.unwrap().call(Request::new("hi".into())).await.unwrap();
//! assert_eq!(response.status(), StatusCode::OK);
//! assert_eq!(calls.load(Ordering::SeqCst), 2);
//! assert_eq!(budget.snapshot().retries, 1);
//! # }
//! ```
//!
//! [fdetimes.net]: https://fdetimes.net/en/guides/circuit-breaker-bulkhead-retry-budget-llm-apis/
//! [`Reopening`]: crate::breaker::Reopening
//! [`CircuitOpen`]: crate::breaker::CircuitOpen
//! [`Throttled`]: crate::breaker::Throttled
//! [`Parked`]: crate::breaker::Parked
//! [`BulkheadFull`]: crate::bulkhead::BulkheadFull
//! [`NoTargetAvailable`]: crate::failover::NoTargetAvailable
//! [`Classification`]: levee_core::classify::Classification
//! [`Classify`]: levee_core::classify::Classify
//! [`Classification::wait`]: levee_core::classify::Classification::wait

mod budget;
mod decide;
pub mod future;
mod layer;
mod policy;
mod service;
mod tower_policy;

pub use self::budget::{BudgetSnapshot, RetryBudget};
pub use self::future::ResponseFuture;
pub use self::layer::{RetryBudgetLayer, RetryBudgetLayerBuilder};
#[cfg(feature = "serde")]
pub(crate) use self::policy::Policy;
pub use self::policy::{Deadline, RetryOutcome, Stop};
pub use self::service::Retry;
pub use self::tower_policy::{BudgetPolicy, BudgetPolicyBuilder};
