#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| fencelog_engine::fuzz::ops_model(data));
