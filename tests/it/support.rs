//! What the end-to-end tests share beyond `fencelog_testkit`: the path of
//! the binary under test (only this crate's tests know it) and reading a
//! child's output line by line.

use fencelog_testkit::process::{ServerBuilder, ServerProcess};
use serde_json::Value;
use std::io::{BufRead, Write};
use std::process::{Command, Output, Stdio};

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

/// The client commands against one server, through `FENCELOG_URL`.
pub struct Cli {
    pub url: String,
}

impl Cli {
    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(BIN);
        c.args(args).env("FENCELOG_URL", &self.url);
        c
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.cmd(args).stdin(Stdio::null()).output().unwrap()
    }

    pub fn run_stdin(&self, args: &[&str], input: &[u8]) -> Output {
        let mut child = self
            .cmd(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(input).unwrap();
        child.wait_with_output().unwrap()
    }
}

pub fn code(o: &Output) -> i32 {
    o.status.code().expect("exited by signal")
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).unwrap()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8(o.stderr.clone()).unwrap()
}

pub fn json_out(o: &Output) -> Value {
    serde_json::from_str(stdout(o).trim()).unwrap_or_else(|e| panic!("{e}: {o:?}"))
}

pub fn json_err(o: &Output) -> Value {
    serde_json::from_str(stderr(o).trim()).unwrap_or_else(|e| panic!("{e}: {o:?}"))
}
