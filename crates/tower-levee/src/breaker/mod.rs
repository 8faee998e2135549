//! The breaker layer: breaker, throttle gate and park table per scope.
//!
//! (Filled in by issue 3.)

pub mod error;

pub use self::error::{CircuitOpen, Parked, Throttled};
