//! Fuzz target: see `levee_fuzz::hints`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| levee_fuzz::hints(data));
