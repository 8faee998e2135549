//! Fuzz target: see `levee_fuzz::request`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| levee_fuzz::request(data));
