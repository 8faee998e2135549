//! The synchronisation primitives of the lock-free paths: the registry's
//! slots, the breaker's published status word, the gates' and parks'
//! published deadlines, and the bulkhead's gauges (whose pool, a `static`,
//! is declared with `loom::lazy_static!` under loom, since a loom static
//! must be: see `bulkhead/compartment.rs`).
//!
//! They are std's, except in a build with `--cfg levee_loom`, where they
//! are [loom]'s: `tests/loom.rs` then checks the same code under every
//! interleaving loom explores (the refusal path that reads the status word
//! and deadline without a lock, probe admission and release, a bulkhead
//! dropped while a permit is out, its permits moving between threads'
//! stripes and reaching queued callers). Nothing else changes between the
//! two builds, but for what loom needs to see them: each loom thread has a
//! stripe of its own (`striped::stripe_index`), and a bulkhead's release
//! takes a fence that stands in for its SeqCst accesses (see
//! `bulkhead/compartment.rs`).
//!
//! [loom]: https://docs.rs/loom

#[cfg(not(levee_loom))]
pub(crate) use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering, fence};
#[cfg(not(levee_loom))]
pub(crate) use std::sync::{Mutex, MutexGuard, RwLock};

#[cfg(levee_loom)]
pub(crate) use loom::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering, fence};
#[cfg(levee_loom)]
pub(crate) use loom::sync::{Mutex, MutexGuard, RwLock};
