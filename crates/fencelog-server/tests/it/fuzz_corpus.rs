//! Replays the checked-in corpus of the HTTP decoders' fuzz target
//! (fuzz/corpus/http_append_body) through the body the fuzzer runs.

fn replay(target: &str, run: fn(&[u8])) {
    let n = fencelog_engine::fuzz::replay_corpus(target, run);
    eprintln!("{target}: {n} corpus inputs replayed");
}

#[test]
fn http_append_body_corpus() {
    replay("http_append_body", fencelog_server::fuzz::http_append_body);
}

#[test]
fn http_front_head_corpus() {
    replay("http_front_head", fencelog_server::fuzz::http_front_head);
}
