//! Examples live in `*.rs` files of this package; run them with `cargo run -p examples --example NAME`.
