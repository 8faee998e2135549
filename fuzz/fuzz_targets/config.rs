//! Fuzz target: see `levee_fuzz::config`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| levee_fuzz::config(data));
