//! Fuzz target: see `levee_fuzz::rules_match`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| levee_fuzz::rules_match(data));
