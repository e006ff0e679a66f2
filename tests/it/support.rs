//! What the end-to-end tests share beyond `fencelog_testkit`: the path of
//! the binary under test (only this crate's tests know it) and reading a
//! child's output line by line.

use fencelog_testkit::process::{ServerBuilder, ServerProcess};
use std::io::BufRead;

pub const BIN: &str = env!("CARGO_BIN_EXE_fencelog");

/// `fencelog serve`, this crate's build of it.
pub fn serve() -> ServerBuilder {
    ServerProcess::builder(BIN)
}

/// The next line a child printed, without the newline; panics at EOF.
pub fn next_line(out: &mut impl BufRead, who: &str) -> String {
    let mut line = String::new();
    let n = out.read_line(&mut line).unwrap();
    assert!(n > 0, "{who} closed its stdout");
    line.trim_end().to_string()
}
