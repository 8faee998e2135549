//! Errors: the vocabulary every layer shares, and how an error is read.
//!
//! Every Levee layer returns a [`BoxError`]. When a layer refuses a request
//! without sending it, the error is one of its small rejection types —
//! [`CircuitOpen`], [`Throttled`], [`Parked`], [`BulkheadFull`],
//! [`NoTargetAvailable`] — each checkable with `err.is::<T>()` and each
//! carrying a `retry_after`. [`Rejection`] finds one anywhere in an error's
//! source chain and reads them all the same way; [`is_rejection`] says
//! whether there is one. Anything else came from the provider or the
//! transport: [`transport_failure`] says which kind of transport failure
//! (a [`StreamTimeout`], a stream gone quiet, is a timeout).
//!
//! [`CircuitOpen`]: crate::breaker::CircuitOpen
//! [`Throttled`]: crate::breaker::Throttled
//! [`Parked`]: crate::breaker::Parked
//! [`BulkheadFull`]: crate::bulkhead::BulkheadFull
//! [`NoTargetAvailable`]: crate::failover::NoTargetAvailable

mod refusal;
mod rejection;
mod stream;
mod transport;

pub(crate) use self::refusal::rejection_response;
#[cfg(feature = "api")]
pub(crate) use self::refusal::retry_after_secs;
pub use self::refusal::{BoxError, RefusalKind};
pub use self::rejection::{Rejection, is_rejection};
pub use self::stream::{StreamTimeout, StreamTimeoutKind};
pub use self::transport::transport_failure;
