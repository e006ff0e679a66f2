//! Replays the checked-in corpus of the HTTP decoders' fuzz target
//! (fuzz/corpus/http_append_body) through the body the fuzzer runs.

use std::path::Path;

fn replay(target: &str, run: fn(&[u8])) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target);
    let mut inputs: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("corpus {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    inputs.sort();
    assert!(!inputs.is_empty(), "corpus {} is empty", dir.display());
    for path in &inputs {
        let data = std::fs::read(path).unwrap();
        let outcome = std::panic::catch_unwind(|| run(&data));
        assert!(outcome.is_ok(), "{} failed on {}", target, path.display());
    }
    eprintln!("{target}: {} corpus inputs replayed", inputs.len());
}

#[test]
fn http_append_body_corpus() {
    replay("http_append_body", fencelog_server::fuzz::http_append_body);
}
