#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| fencelog_server::fuzz::http_front_head(data));
