//! What the client examples share: naming a Levee refusal and checking the
//! outcomes against the ones the example promises.

use tower_levee::BoxError;
use tower_levee::breaker::{CircuitOpen, Parked, Throttled};
use tower_levee::bulkhead::BulkheadFull;

/// The type of a Levee refusal, or `other`.
pub(crate) fn rejection_name(err: &BoxError) -> &'static str {
    if err.is::<CircuitOpen>() {
        "CircuitOpen"
    } else if err.is::<Throttled>() {
        "Throttled"
    } else if err.is::<Parked>() {
        "Parked"
    } else if err.is::<BulkheadFull>() {
        "BulkheadFull"
    } else {
        "other"
    }
}

/// `Ok` if the outcomes are the expected ones (printing `ok`), else an error
/// that names the first difference.
pub(crate) fn check(seen: &[String], expected: &[&str]) -> Result<(), BoxError> {
    if seen.iter().map(String::as_str).eq(expected.iter().copied()) {
        println!("ok");
        Ok(())
    } else {
        Err(format!("expected {expected:?}, got {seen:?}").into())
    }
}
