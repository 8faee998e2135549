//! What the unit tests share.

use std::error::Error;
use std::fmt;

use crate::error::BoxError;

/// An error of another kind wrapping `0`, as a client or another layer
/// would: reachable only through `source()`.
#[derive(Debug)]
pub(crate) struct Wrapped(pub(crate) BoxError);

impl fmt::Display for Wrapped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("wrapped")
    }
}

impl Error for Wrapped {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        Some(&*self.0)
    }
}
