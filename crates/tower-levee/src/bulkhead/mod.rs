//! A semaphore per dependency that fails fast: [`BulkheadLayer`].
//!
//! # Why
//!
//! A ship's hull is divided so that one breach floods one compartment. A
//! process that calls an LLM provider and a customer's CRM shares one pool of
//! workers, connections and memory between them; when the provider slows to
//! a crawl, its calls pile up (each one held open for the length of a
//! timeout or a backoff) until nothing is left for the CRM, and a failure of
//! one dependency has become an outage of everything.
//!
//! A bulkhead caps the calls in flight per dependency. With 8 permits for
//! `"llm"` and 4 for `"crm"`, a hung LLM holds at most 8 calls; the 9th is
//! refused at once with [`BulkheadFull`] (a typed rejection with a
//! `retry_after`, like every Levee rejection), and the CRM's 4 permits stay
//! free. Failing fast is the point: a caller queued blind behind a hung
//! dependency is a caller not serving anyone else. When a short wait is
//! acceptable, [`BulkheadLayer::max_wait`] queues a full caller for that long
//! instead, then refuses it.
//!
//! # Named compartments
//!
//! [`Bulkheads`] hands out named compartments: two services that call the
//! same dependency ask for the same name and share its permits; separate
//! dependencies get separate names and never share.
//!
//! # Permits
//!
//! The permit is taken in `call` and lives in the response future as a plain
//! field: it is released when the future is dropped, which covers
//! completion, error and cancellation alike. Nothing is acquired in
//! `poll_ready` (which only asks the inner service), so an idle clone that
//! was polled ready never sits on a permit (the permit-hoarding trap of
//! tower#793). No lock, no allocation, no reference count (the counters a
//! permit reaches are never freed, only reused once the compartment and its
//! last permit are gone). A waiter queue is used only for callers queued
//! under `max_wait`.
//!
//! A permit given back is cached on its thread (up to a 32nd of the limit
//! per thread, in 4 KiB of stripes per compartment), and the thread's next
//! call takes it from there: one count
//! that every call on every thread wrote twice would send its cache line
//! between the cores on each call, which costs more than the rest of the
//! bulkhead. A call that finds no permit cached on its thread takes one from
//! the shared count, and when that is at the limit, one cached on any other
//! thread: the limit holds exactly, and a call is refused only when it found
//! every permit out. A permit given back, while a call looked, to a thread
//! it had already looked at is missed, as if it had come back an instant
//! later.
//!
//! The inner service must be `Clone`: a caller queued under `max_wait` holds
//! a clone, to call once a permit frees.
//!
//! # Gauges
//!
//! [`BulkheadLayer::snapshot`] and [`Bulkheads::snapshot`] read the calls in
//! flight, free permits, queued callers and rejections of each compartment;
//! every rejection is also a `tracing` event (target `levee::bulkhead`)
//! carrying the same gauges.
//!
//! # Example
//!
//! ```
//! use std::convert::Infallible;
//! use tower::{Service, ServiceBuilder, ServiceExt};
//! use tower_levee::bulkhead::{BulkheadFull, Bulkheads};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let bulkheads = Bulkheads::new();
//! // A dependency that hangs.
//! let hung = tower::service_fn(|_: ()| std::future::pending::<Result<(), Infallible>>());
//! let mut llm = ServiceBuilder::new()
//!     .layer(bulkheads.compartment("llm", 1))
//!     .service(hung);
//!
//! let stuck = llm.ready().await.unwrap().call(()); // holds the only permit
//! let err = llm.ready().await.unwrap().call(()).await.unwrap_err();
//! assert!(err.is::<BulkheadFull>());
//!
//! drop(stuck); // cancelled: the permit is back
//! assert_eq!(bulkheads.snapshot()[0].available, 1);
//! # }
//! ```

mod compartment;
pub mod error;
pub mod future;
mod layer;
mod registry;
mod service;

pub use self::compartment::BulkheadSnapshot;
#[cfg(levee_loom)]
#[doc(hidden)]
pub use self::compartment::{free_gauges, model};
pub use self::error::BulkheadFull;
pub use self::future::ResponseFuture;
pub use self::layer::BulkheadLayer;
pub use self::registry::Bulkheads;
pub use self::service::Bulkhead;
