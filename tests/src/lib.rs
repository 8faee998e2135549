//! Integration tests live in `tests/*.rs` of this package.
