//! The shell snippets of README.md and docs/clients.md, run top to bottom
//! as written against a real server, so the documentation cannot drift
//! from the binary.
//!
//! Every ```` ```sh ```` block runs, unless the line before it is
//! `<!-- snippet: not run (WHY) -->`. A block is split into commands (a
//! trailing `\` continues a line); each runs in `bash -o pipefail -c`, in
//! one working directory per file, with the binary under test first on
//! `PATH` as `fencelog`, `FENCELOG_URL` set, and `localhost:7070` /
//! `127.0.0.1:7070` replaced by the test server's address — nothing else
//! is changed. A command must exit 0. The `#` comment lines right under a
//! command are what it prints: each, up to its first `...`, must begin a
//! line of its output, in order (runs of whitespace compare equal, so a
//! tab may be written as spaces; a comment line indented by two spaces
//! continues the one before and is not compared). A command that follows
//! a stream (`fencelog tail`, `curl -N`) runs until it has printed what
//! its comments show, then gets Ctrl-C.

use crate::support::{serve, BIN};
use fencelog_testkit::process::{ChildGuard, Signal};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

const NOT_RUN: &str = "<!-- snippet: not run (";
/// How long a following command may take to print what its comments show:
/// a deadline for a failure, not a wait for success.
const FOLLOW_DEADLINE: Duration = Duration::from_secs(30);

/// One command of a snippet and what its comments say it prints.
#[derive(Debug)]
struct Step {
    /// `file:line` of its first line.
    at: String,
    text: String,
    expect: Vec<String>,
}

/// The commands of every run block of `markdown`, and how many blocks
/// were marked not run (each with its reason).
fn steps(file: &str, markdown: &str) -> (Vec<Step>, usize) {
    let mut out = Vec::new();
    let mut skipped = 0;
    let mut prev = "";
    let mut lines = markdown.lines().enumerate();
    while let Some((n, line)) = lines.next() {
        if line.trim() != "```sh" {
            if !line.trim().is_empty() {
                prev = line;
            }
            continue;
        }
        let block: Vec<(usize, &str)> = lines
            .by_ref()
            .take_while(|(_, l)| l.trim() != "```")
            .collect();
        if let Some(why) = prev.trim_start().strip_prefix(NOT_RUN) {
            assert!(
                why.len() > ") -->".len(),
                "{file}:{n}: say why it is not run"
            );
            skipped += 1;
        } else {
            split_commands(file, &block, &mut out);
        }
        prev = "";
    }
    (out, skipped)
}

fn split_commands(file: &str, block: &[(usize, &str)], out: &mut Vec<Step>) {
    let first = out.len();
    let mut i = 0;
    while i < block.len() {
        let (n, line) = block[i];
        i += 1;
        let trimmed = line.trim_start();
        if let Some(comment) = trimmed.strip_prefix('#') {
            let step = out[first..]
                .last_mut()
                .unwrap_or_else(|| panic!("{file}:{}: output shown before any command", n + 1));
            if !comment.starts_with("  ") {
                step.expect.push(comment.trim_start().to_string());
            }
            continue;
        }
        if trimmed.is_empty() {
            continue;
        }
        let mut text = line.to_string();
        // The backslash stays: bash joins the lines as the reader would.
        while text.ends_with('\\') && i < block.len() {
            text.push('\n');
            text.push_str(block[i].1);
            i += 1;
        }
        out.push(Step {
            at: format!("{file}:{}", n + 1),
            text,
            expect: Vec::new(),
        });
    }
}

fn squash(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// What an expected line must begin with: up to its first `...`.
fn prefix(expect: &str) -> String {
    squash(expect.split("...").next().unwrap_or(""))
}

/// Checks that every expected line begins a line of `output`, in order.
fn matches(step: &Step, output: &str) {
    let lines: Vec<String> = output.lines().map(squash).collect();
    let mut from = 0;
    for want in step.expect.iter().map(|e| prefix(e)) {
        if want.is_empty() {
            continue;
        }
        match lines[from..].iter().position(|l| l.starts_with(&want)) {
            Some(i) => from += i + 1,
            None => panic!(
                "{}: `{}` printed no line starting {want:?} (after the lines already matched); \
                 it printed:\n{output}",
                step.at, step.text
            ),
        }
    }
}

struct Env<'a> {
    dir: &'a Path,
    addr: String,
    url: String,
}

impl Env<'_> {
    fn command(&self, script: &str) -> Command {
        let text = script
            .replace("localhost:7070", &self.addr)
            .replace("127.0.0.1:7070", &self.addr);
        let bin_dir = Path::new(BIN).parent().unwrap();
        let path = format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap());
        let mut c = Command::new("bash");
        c.args(["-o", "pipefail", "-c", &text])
            .current_dir(self.dir)
            .env("PATH", path)
            .env("FENCELOG_URL", &self.url)
            .env_remove("RUST_LOG")
            .stdin(Stdio::null());
        c
    }

    fn run(&self, step: &Step) {
        let o = self.command(&step.text).output().unwrap();
        let stdout = String::from_utf8_lossy(&o.stdout);
        assert!(
            o.status.success(),
            "{}: `{}` failed: {:?}\nstdout:\n{stdout}\nstderr:\n{}",
            step.at,
            step.text,
            o.status,
            String::from_utf8_lossy(&o.stderr)
        );
        matches(step, &stdout);
    }

    /// Runs a command that never ends by itself until it has printed every
    /// line its comments show, then stops it as a person would.
    fn follow(&self, step: &Step) {
        assert!(!step.expect.is_empty(), "{}: show what it prints", step.at);
        let mut child = ChildGuard::spawn(
            self.command(&format!("exec {}", step.text))
                .stdout(Stdio::piped())
                .stderr(Stdio::null()),
        );
        let out = BufReader::new(child.child_mut().stdout.take().unwrap());
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in out.lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        let wanted: Vec<String> = step.expect.iter().map(|e| prefix(e)).collect();
        let mut printed = String::new();
        let mut next = wanted.iter().filter(|w| !w.is_empty()).peekable();
        while let Some(want) = next.peek() {
            let line = rx.recv_timeout(FOLLOW_DEADLINE).unwrap_or_else(|e| {
                panic!("{}: waiting for {want:?} ({e}); got:\n{printed}", step.at)
            });
            if squash(&line).starts_with(want.as_str()) {
                next.next();
            }
            printed.push_str(&line);
            printed.push('\n');
        }
        // SIGTERM, not Ctrl-C's SIGINT: a test run started in the
        // background (`cmd &` in a non-interactive shell) hands its children
        // SIGINT ignored, and curl then never exits.
        child.signal(Signal::Term);
        child.wait();
    }
}

fn follows(text: &str) -> bool {
    text.trim_start().starts_with("fencelog tail") || text.contains(" -N ")
}

fn run_file(file: &str) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let markdown = std::fs::read_to_string(root.join(file)).unwrap();
    let (steps, skipped) = steps(file, &markdown);
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let server = serve().data_dir(tmp.path().join("data")).start();
    let env = Env {
        dir: &work,
        addr: server.addr().to_string(),
        url: server.url().to_string(),
    };
    for step in &steps {
        if follows(&step.text) {
            env.follow(step);
        } else {
            env.run(step);
        }
    }
    eprintln!(
        "{file}: ran {} commands, {skipped} block(s) marked not run",
        steps.len()
    );
    assert!(steps.len() >= 8, "{file}: only {} commands", steps.len());
}

#[test]
fn readme_snippets_run_as_written() {
    run_file("README.md");
}

#[test]
fn clients_doc_snippets_run_as_written() {
    run_file("docs/clients.md");
}

#[test]
fn the_runner_catches_what_drifted() {
    let md = "x\n```sh\necho 'a  b'   # said\n# a b\n#  ignored\ncurl -s \\\n  -N x\n# ...\n```\n\
              <!-- snippet: not run (why) -->\n```sh\nexit 1\n```\n";
    let (steps, skipped) = steps("t.md", md);
    assert_eq!(skipped, 1);
    assert_eq!(steps.len(), 2);
    assert_eq!(steps[0].expect, ["a b"]);
    assert_eq!(steps[1].text, "curl -s \\\n  -N x");
    assert!(follows(&steps[1].text));
    matches(&steps[0], "a\tb\n");
    let wrong = std::panic::catch_unwind(|| matches(&steps[0], "b a\n"));
    assert!(wrong.is_err(), "a line that differs must fail");
}
