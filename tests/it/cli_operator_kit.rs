//! The operator's kit of the `fencelog` binary: `--version` names the
//! commit and the on-disk format, the completion scripts complete in the
//! real shells, and the man pages in `docs/man/` are what the binary
//! generates and render without warnings.
//!
//! The shells and groff are Debian packages (`zsh`, `fish`, `groff-base`;
//! `cargo xtask test` installs them); without one the test says `SKIPPED`
//! loudly, or fails under `cargo xtask test` (`fencelog_testkit::deps`).

use crate::support::BIN;
use fencelog_testkit::deps;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn fencelog(args: &[&str]) -> Output {
    let out = Command::new(BIN).args(args).output().unwrap();
    assert!(out.status.success(), "fencelog {args:?}: {out:?}");
    out
}

fn text(out: &Output) -> String {
    String::from_utf8(out.stdout.clone()).unwrap()
}

/// Runs `program` with `args`, asserting success, and returns its stdout;
/// `None` (after reporting) when the program is not installed.
fn run_in(program: &str, args: &[&str], test: &str) -> Option<String> {
    let Some(path) = deps::find_program(program) else {
        deps::missing(
            test,
            &format!("{program} is not on PATH (Debian package {program})"),
        );
        return None;
    };
    let out = Command::new(path).args(args).output().unwrap();
    assert!(
        out.status.success() && out.stderr.is_empty(),
        "{program} {args:?}: {out:?}"
    );
    Some(text(&out))
}

#[test]
fn version_names_the_release_the_commit_and_the_format() {
    let git = Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8(o.stdout).unwrap().trim().to_string());
    let commit = git.unwrap_or_else(|| "unknown".to_string());
    let want = format!(
        "fencelog {} (commit {commit}, on-disk format {})\n",
        env!("CARGO_PKG_VERSION"),
        fencelog_engine::FORMAT_VERSION
    );
    assert_eq!(text(&fencelog(&["--version"])), want);
    assert_eq!(text(&fencelog(&["-V"])), want);
}

fn script(shell: &str, dir: &Path) -> PathBuf {
    let path = dir.join(format!("fencelog.{shell}"));
    std::fs::write(&path, fencelog(&["completions", shell]).stdout).unwrap();
    path
}

#[test]
fn bash_completes_subcommands_and_options() {
    let tmp = tempfile::tempdir().unwrap();
    let bash = script("bash", tmp.path());
    // What bash's programmable completion does on TAB: the words so far,
    // the index of the one being completed, then the function the script
    // registered with `complete -F`.
    let complete = |words: &str, cword: usize| {
        let line = format!(
            "source {}; COMP_WORDS=({words}); COMP_CWORD={cword}; \
             _fencelog fencelog \"${{COMP_WORDS[COMP_CWORD]}}\" \"${{COMP_WORDS[COMP_CWORD-1]}}\"; \
             printf '%s\\n' \"${{COMPREPLY[@]}}\"",
            bash.display()
        );
        run_in("bash", &["-c", &line], "bash completion").unwrap()
    };
    assert_eq!(complete("fencelog se", 1), "serve\nseal\n");
    assert_eq!(complete("fencelog serve --data-d", 2), "--data-dir\n");
    let shells = complete("fencelog completions ''", 2);
    assert_eq!(
        shells
            .lines()
            .filter(|l| !l.starts_with('-'))
            .collect::<Vec<_>>(),
        ["bash", "zsh", "fish"]
    );
    let all = complete("fencelog ''", 1);
    for sub in [
        "append", "read", "tail", "fence", "status", "trim", "seal", "delete", "config", "man",
    ] {
        assert!(all.lines().any(|l| l == sub), "{sub} not offered: {all}");
    }
}

#[test]
fn fish_completes_subcommands_and_options() {
    let tmp = tempfile::tempdir().unwrap();
    let fish = script("fish", tmp.path());
    let complete = |line: &str| {
        let cmd = format!("source {}; complete -C '{line}'", fish.display());
        run_in("fish", &["--no-config", "-c", &cmd], "fish completion")
    };
    let Some(got) = complete("fencelog se") else {
        return;
    };
    assert_eq!(
        got,
        "seal\tSeal a stream: no more appends, fences or trims, whatever the token\n\
         serve\tRun the HTTP server on a data directory\n"
    );
    let got = complete("fencelog serve --data-d").unwrap();
    assert!(got.starts_with("--data-dir\t"), "{got}");
}

#[test]
fn zsh_loads_the_completion_function() {
    let tmp = tempfile::tempdir().unwrap();
    let zsh = script("zsh", tmp.path());
    let path = zsh.display().to_string();
    if run_in("zsh", &["-n", &path], "zsh completion").is_none() {
        return;
    }
    // Loaded the way compinit loads it (`autoload`), it defines the
    // completion function for the command.
    let dir = tmp.path().join("fpath");
    std::fs::create_dir(&dir).unwrap();
    std::fs::copy(&zsh, dir.join("_fencelog")).unwrap();
    let cmd = format!(
        "fpath=({} $fpath); autoload -U compinit; compinit -u -D; \
         autoload -U +X _fencelog; print -r -- ${{+functions[_fencelog]}} ${{_comps[fencelog]}}",
        dir.display()
    );
    let got = run_in("zsh", &["-f", "-c", &cmd], "zsh completion").unwrap();
    assert_eq!(got, "1 _fencelog\n");
}

fn docs_man() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/man")
}

fn sorted_files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&p).unwrap())
        })
        .collect();
    out.sort();
    out
}

#[test]
fn man_pages_in_docs_are_what_the_binary_generates() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("man");
    fencelog(&["man", "--out-dir", out.to_str().unwrap()]);
    let generated = sorted_files(&out);
    let committed = sorted_files(&docs_man());
    let names = |v: &[(String, Vec<u8>)]| v.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
    let regenerate = "regenerate with `cargo run -- man --out-dir docs/man` and commit";
    assert_eq!(names(&generated), names(&committed), "{regenerate}");
    for ((name, want), (_, have)) in generated.iter().zip(&committed) {
        assert!(want == have, "docs/man/{name} is stale: {regenerate}");
    }
    // `fencelog man` alone prints the top page.
    let top = &generated.iter().find(|(n, _)| n == "fencelog.1").unwrap().1;
    assert_eq!(&fencelog(&["man"]).stdout, top);
}

#[test]
fn man_pages_render_without_warnings_and_list_every_command() {
    let dir = docs_man();
    let mut rendered = String::new();
    for (name, _) in sorted_files(&dir) {
        let path = dir.join(&name).display().to_string();
        // Plain text (no SGR or overstrike), warnings on: stderr must stay empty.
        let Some(page) = run_in(
            "groff",
            &["-man", "-Tutf8", "-P-cbou", "-ww", &path],
            "man pages",
        ) else {
            return;
        };
        assert!(page.contains("NAME"), "{name} has no NAME section");
        if name == "fencelog.1" {
            rendered = page;
        }
    }
    for sub in [
        "serve",
        "append",
        "read",
        "tail",
        "fence",
        "status",
        "bench",
        "completions",
        "man",
    ] {
        assert!(
            rendered.contains(&format!("fencelog-{sub}(1)")),
            "fencelog(1) does not list {sub}"
        );
        assert!(
            dir.join(format!("fencelog-{sub}.1")).is_file(),
            "no page for {sub}"
        );
    }
}
