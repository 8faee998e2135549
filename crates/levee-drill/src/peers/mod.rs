//! The stacks a user would build instead of Levee, over the same simulated
//! providers as `unprotected`, `naive` and `levee`:
//!
//! - `tower-resilience` ([`tower_resilience`]): the
//!   [tower-resilience](https://docs.rs/tower-resilience/0.13.0) crate's
//!   circuit breaker per account, failure-classified as its docs show for
//!   HTTP responses (5xx and transport errors), under its retry layer.
//! - `failsafe` ([`failsafe`]): the [failsafe](https://docs.rs/failsafe/1.3.0)
//!   crate's circuit breaker with its default policy per account, each call
//!   run through `failsafe::futures::CircuitBreaker::call`, with the SDKs'
//!   own two retries around it.
//! - `gateway-router` ([`gateway`]): our implementation of the documented
//!   default policy of LiteLLM's Router (per-deployment cooldowns, ordered
//!   deployments, `num_retries`); there is no Rust crate of it.
//!
//! Neither crate fails over across accounts by itself, so both stacks do
//! what `naive` does and what a user of them writes: one breaker per
//! account, and each attempt goes to the first account (in the scenario's
//! order) whose breaker lets it through; only a refusal moves on. A fleet
//! runs one copy per replica, unshared, as `levee` does.
//!
//! Both crates measure time with `std::time::Instant`, which does not move
//! under the drill's paused tokio clock. tower-resilience's circuit breaker
//! is the published 0.13.0 with its open-state timer on tokio's clock (a
//! three-line patch, `vendor/README.md`); failsafe reads its own test clock
//! (`failsafe::clock`), which [`failsafe`] sets to virtual time around each
//! of its calls. Neither changes what the crates decide.

pub mod failsafe;
pub mod gateway;
pub mod tower_resilience;

use std::sync::{Arc, Mutex};

use tokio::time::Instant;

use crate::outcome::TransitionRecord;

/// Where a peer stack's breakers record their transitions; `Send + Sync`
/// because the crates' listeners must be.
#[derive(Clone, Debug)]
pub struct TransitionLog {
    start: Instant,
    records: Arc<Mutex<Vec<TransitionRecord>>>,
}

impl TransitionLog {
    /// A log whose times count from `start`.
    pub fn new(start: Instant) -> Self {
        TransitionLog {
            start,
            records: Arc::default(),
        }
    }

    /// Records a breaker transition of `target`, now.
    pub fn breaker(&self, target: &str, from: &str, to: &str, reason: &str) {
        let record = TransitionRecord {
            t_ms: (Instant::now() - self.start).as_millis() as u64,
            target: target.to_owned(),
            scope: target.to_owned(),
            mechanism: "breaker".into(),
            from: from.into(),
            to: to.into(),
            reason: reason.into(),
        };
        // A poisoned log only means another recorder panicked; keep recording.
        self.records
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(record);
    }

    /// The transitions recorded so far.
    pub fn records(&self) -> Vec<TransitionRecord> {
        self.records
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}
