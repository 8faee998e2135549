//! Failover across accounts, deployments, regions and providers: [`Failover`].
//!
//! # Why
//!
//! An application with four provider accounts whose limits add up to more
//! than its traffic should never fail a request for lack of capacity, yet
//! the classic setup does: a breaker that counts `429`s ejects the busiest
//! account at peak, the load moves to the next account, which throttles and
//! is ejected too, until every breaker is open and requests fail that the
//! providers would have served a second later (the cascade INFRO describes
//! in [Circuit breakers for LLM providers: throttling is not
//! failure](https://infro.io/blog/llm-circuit-breakers-throttling)).
//!
//! The fix has two halves. The [breaker layer](crate::breaker) keeps the
//! three conditions apart: a `429` closes a throttle gate until the provider's
//! wait hint and never trips the breaker; an exhausted spend cap parks the
//! account until it resets; only timeouts, `5xx`, `529` and rejected keys
//! count as failures. This module is the other half: a router that, for each
//! request, takes **the first target whose state admits it** — not parked,
//! its quota scope not gated, its breaker not open (or a probe slot free) —
//! reading that state without calling anything. A gated primary
//! costs zero calls while gated; a routed-around account gets the quiet it
//! needs for its allowance to refill. (Compare a router that tries a
//! throttled primary first on every request: one wasted, limit-counting
//! call per request for as long as the throttle lasts.)
//!
//! # When it moves on
//!
//! A target that was called and answered **throttled, quota, availability or
//! credential** sends the request on to the next admissible target, up to
//! [`max_targets_per_request`](FailoverBuilder::max_targets_per_request). A
//! **`request`** verdict (`400`, `404`, `422`) is returned as it is: another
//! provider will reject a malformed body too. A
//! [`fallback_on`](FailoverBuilder::fallback_on) hook overrides the policy
//! per outcome. Verdicts come from the
//! [`Classification`](levee_core::classify::Classification) extension the
//! breaker puts on every non-success response (body-aware: a `429` naming a
//! spend cap is quota); transport errors are availability failures.
//!
//! Overload is rarely one account's problem: Anthropic's `529` is API-wide.
//! So after an availability failure, the same request next tries a target at
//! **another provider or region** (the [`provider`](Target::provider) and
//! [`region`](Target::region) labels) before the sibling accounts; and when
//! two targets of one provider and region fail within the
//! [`overload_window`](FailoverBuilder::overload_window) (30 s), that group is
//! tried last by every request until the window passes or one of them serves.
//!
//! # When nothing can serve
//!
//! If every target refuses, nothing is sent and the answer is
//! [`NoTargetAvailable`], listing each target's refusal, with a
//! `retry_after` of the earliest reopen (capped at 300 s): a `429
//! provider_rate_limited` when every target is only throttled (capacity
//! exists and returns at a known time), otherwise a `503` with the code of
//! the refusal that ends first among those that are not throttles
//! (`circuit_open`, `parked`, `bulkhead_full`). If targets were called and all failed, the caller gets the last
//! real answer instead of a synthetic one, as from the retry layer.
//!
//! # Streams
//!
//! Each target's breaker layer holds a streamed `2xx` back until the
//! model's first output (a token, a tool call; see
//! [`StreamHold`](crate::breaker::StreamHold)). A stream that errs in-band,
//! is cut, or goes quiet past the target's first-content or stall timeout
//! before then is a failed answer, and the failover moves on as after a
//! `503`, unseen: the caller reads only the stream that served. After the
//! first output the stream is the caller's, and an error in it passes
//! through (the breaker still counts it).
//!
//! # Speed
//!
//! A target that answers, slowly, is not failing, and its breaker will not
//! move traffic off it. With [`hedging`](FailoverBuilder::hedging) (on in
//! configs), a first call still waiting past its target's recent 95th
//! percentile time to first byte goes once more to the next target, the
//! first success winning; a target late three times in a row is tried
//! after the others until a trial finds it fast again; and a pool's
//! members are chosen by speed as well as by what they have left. See
//! [`Hedging`].
//!
//! Failover never queues and never sleeps (fail fast rather than queue
//! blind). The one retry layer above it decides; it retries a
//! `NoTargetAvailable` whose targets are all only throttled at the earliest
//! reopen if that fits the caller's deadline — the one wait that is known
//! rather than blind. Composition, outermost first:
//!
//! ```text
//! timeout → RetryBudget → Failover ─┬─ Bulkhead → Breaker → per-attempt timeout → client   (account A)
//!                                   ├─ Bulkhead → Breaker → per-attempt timeout → client   (account B)
//!                                   └─ …                                                  (other provider)
//! ```
//!
//! # Targets
//!
//! A [`Target`] is a name, a service (the per-attempt timeout and client),
//! an optional request [`rewrite`](Target::rewrite) (URI, key, model or
//! deployment for that target), an optional bulkhead, and its own
//! [`BreakerLayer`](crate::breaker::BreakerLayer): by default each target gets
//! a fresh one, so its breaker, gates and parks are its own and its health
//! reads apart from the others'. The failover builds each target's stack
//! (bulkhead → breaker → service) as one type for every target, so the
//! targets are a plain list and a call allocates nothing: the targets call
//! one service type through breakers with one classifier type. Rewrites,
//! labels, bulkheads and breaker settings differ freely; targets over
//! different client types are boxed with [`Target::boxed`] (one allocation
//! per call for the boxed future, next to an LLM call of hundreds of
//! milliseconds).
//!
//! A target's bulkhead is checked by taking its permit: a full bulkhead
//! refuses in `call` without calling its service, and the request goes on to
//! the next target (a separate peek would race anyway).
//!
//! # Request bodies
//!
//! Going on to the next target needs a copy of the request, so the body
//! must be `Clone` (`Full<Bytes>`, `String`, `Bytes`), as for the retry
//! layer. A copy is made only while another target may follow, before the
//! call that consumes the request; a single-target failover never copies.
//!
//! # Cost
//!
//! On the primary's success path a request costs: a read-only admission
//! check (none at all while no breaker of the target's layer is open and
//! no scope is parked or gated: a count says so; otherwise its scope names
//! and published status words, and a lock only for a domain not cached or
//! not closed; no write either way); a reference count on the failover's
//! shared state, held by the response future; a copy of the request if
//! another target may follow (a non-empty header map allocates, as for any
//! layer that can replay a request); no allocation of its own: every
//! target calls one service type, so its future lives inside the
//! failover's (targets over different types are made one with
//! [`Target::boxed`], one allocation per call), and a request that goes
//! on past its first call (a failure, a refusal only the call finds, a
//! target not polled ready) runs the failover loop in one allocation, next
//! to those its failure makes; [`ServedBy`], 4 bytes in
//! the response body beside its variant tag (its target name interned and
//! numbered; no extension, so no allocation, unless
//! [`served_by_extension`](FailoverBuilder::served_by_extension) asks for
//! one); and one increment of a served counter striped per thread, which
//! never shares a cache line between threads. The fallback share is
//! derived from those counters when a snapshot is taken; every other
//! counter is written only on the failover path. Measured over the same
//! trivial inner service on a 2-vCPU machine, a one-target failover costs
//! about twice a breaker alone (+127 ns against +64 ns), and a second
//! target adds the copy of the request (+186 ns): a few hundred
//! nanoseconds, next to an LLM call of hundreds of milliseconds. Hedging
//! adds nothing to a call answered at its first poll beyond a test of its
//! watch slot and one word read per choice; a call that waits costs a
//! clock read, an allocation, a timer and a histogram record.

//! # Example
//!
//! ```
//! use std::convert::Infallible;
//! use http::{Request, Response, StatusCode};
//! use tower::{Service, ServiceExt};
//! use tower_levee::failover::{Failover, ServedBy, Target};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! // Two accounts behind one client type (targets over different types
//! // are boxed: `Target::boxed`). The primary account is throttled; the
//! // backup serves.
//! let account = |status: u16| {
//!     tower::service_fn(move |_req: Request<String>| async move {
//!         let res = Response::builder().status(status).header("retry-after", "20");
//!         Ok::<_, Infallible>(res.body("hello".to_owned()).unwrap())
//!     })
//! };
//! let mut llm = Failover::builder()
//!     .target(Target::new("primary", account(429)).provider("openai"))
//!     .target(Target::new("backup", account(200)).provider("anthropic"))
//!     .build()
//!     .unwrap();
//! let req = || Request::post("https://api.example.com/v1/chat").body(String::new()).unwrap();
//!
//! let res = llm.ready().await.unwrap().call(req()).await.unwrap();
//! assert_eq!(res.status(), StatusCode::OK);
//! let served = ServedBy::of(&res).unwrap();
//! assert_eq!((served.target, served.attempt, served.fallback), ("backup", 2, true));
//!
//! // The primary is gated now: the next request goes straight to the
//! // backup, without a call to the primary.
//! let res = llm.ready().await.unwrap().call(req()).await.unwrap();
//! assert_eq!(ServedBy::of(&res).unwrap().attempt, 1);
//!
//! let health = llm.handle().snapshot();
//! assert_eq!(health.targets[0].state, "throttled");
//! assert_eq!(health.fallback_share, 1.0);
//! # }
//! ```

mod builder;
pub mod error;
pub mod future;
mod health;
mod service;
mod shadow;
mod speed;
mod stack;
mod state;
mod target;

pub use self::builder::{
    DEFAULT_MAX_RETRY_AFTER, DEFAULT_OVERLOAD_WINDOW, FailoverBuilder, MAX_TARGETS,
};
pub use self::error::{NoTargetAvailable, Refusal, RefusalKind};
pub use self::health::{BulkheadHealth, FailoverHandle, HealthSnapshot, TargetHealth, TargetState};
pub use self::service::Failover;
#[cfg(feature = "serde")]
pub(crate) use self::shadow::share_credit;
pub use self::shadow::{
    DEFAULT_SHADOW_INTERVAL, DEFAULT_SHADOW_SHARE, DEFAULT_SHADOW_TIMEOUT, ShadowProbes,
    cap_output_tokens,
};
#[cfg(feature = "serde")]
pub(crate) use self::speed::FieldNames;
pub use self::speed::{DEFAULT_HEDGE_RATIO, HedgeCopy, Hedging};
pub use self::stack::TargetService;
pub use self::state::Advance;
pub use self::target::{BoxTargetService, Rewrite, ServedBy, Target};
/// One scope of a target's breaker layer, as the health snapshot lists it.
pub use crate::breaker::ScopeHealth;
