//! Fuzz target: see `levee_fuzz::classify`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| levee_fuzz::classify(data));
