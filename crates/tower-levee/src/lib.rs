//! Tower middleware that keeps clients of LLM providers serving when the
//! providers throttle, run out of quota or fail.
//!
//! **Throttling is not failure.** A `429` means a busy, healthy account: it
//! closes a throttle gate until the provider's wait hint and never trips the
//! breaker. Timeouts, `5xx`, `529` and rejected keys trip the breaker. An
//! exhausted spend cap parks the account until it resets. Each mechanism is a
//! separate tower layer; the policy engine underneath is [`levee_core`],
//! re-exported here as [`core`].

pub use levee_core as core;

pub mod body;
pub mod breaker;
pub mod bulkhead;
pub mod clock;
pub mod error;
pub mod failover;
pub mod retry;

pub use bulkhead::{BulkheadFull, BulkheadLayer, Bulkheads};
pub use error::BoxError;
pub use failover::{Failover, NoTargetAvailable, ServedBy, Target};
pub use retry::{RetryBudget, RetryBudgetLayer};
