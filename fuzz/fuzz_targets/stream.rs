//! Fuzz target: see `levee_fuzz::stream`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| levee_fuzz::stream(data));
