//! What users read names no issue numbers: README.md, every text file
//! under docs/ (the man pages included), the clients' READMEs and every
//! command's `--help`, hidden commands too. "Cluster mode (issue 14)" says
//! where a feature came from; a user needs what it is.

use crate::support::BIN;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Whether `line` names an issue: "issue 14", "Issues 11/14", "issue-13",
/// "issue #9", in any case.
fn names_an_issue(line: &str) -> bool {
    let lower = line.to_ascii_lowercase();
    lower.match_indices("issue").any(|(at, word)| {
        let word_start = !lower[..at].ends_with(|c: char| c.is_ascii_alphanumeric());
        let rest = &lower[at + word.len()..];
        let rest = rest.strip_prefix('s').unwrap_or(rest);
        word_start
            && rest
                .strip_prefix([' ', '-'])
                .map(|r| r.strip_prefix('#').unwrap_or(r))
                .is_some_and(|r| r.starts_with(|c: char| c.is_ascii_digit()))
    })
}

/// `where:line: text` for each line of `text` that names an issue.
fn hits(place: &str, text: &str) -> Vec<String> {
    text.lines()
        .enumerate()
        .filter(|(_, line)| names_an_issue(line))
        .map(|(n, line)| format!("{place}:{}: {}", n + 1, line.trim()))
        .collect()
}

fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files_under(&path, out);
        } else {
            out.push(path);
        }
    }
}

/// README.md, the files under docs/, clients/README.md and each client's
/// README.md, relative to the repository.
fn documents(root: &Path) -> Vec<PathBuf> {
    let mut out = vec![root.join("README.md"), root.join("clients/README.md")];
    files_under(&root.join("docs"), &mut out);
    for entry in std::fs::read_dir(root.join("clients")).unwrap() {
        let readme = entry.unwrap().path().join("README.md");
        if readme.is_file() {
            out.push(readme);
        }
    }
    out.sort();
    out
}

fn help(command: &[String]) -> String {
    let out = Command::new(BIN)
        .args(command)
        .arg("--help")
        .output()
        .unwrap();
    assert!(out.status.success(), "fencelog {command:?} --help: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// The subcommands a help text lists under `Commands:`, `help` aside.
fn subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| l.trim() != "Commands:")
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_string)
        .collect()
}

/// Every command's `--help`, by its words after `fencelog`: the top level,
/// each listed subcommand at any depth, and the hidden ones.
fn every_help() -> Vec<(Vec<String>, String)> {
    let mut todo: Vec<Vec<String>> = vec![
        vec![],
        vec!["demo-worker".to_string()],
        vec!["bench-read".to_string()],
    ];
    let mut out = Vec::new();
    while let Some(command) = todo.pop() {
        let text = help(&command);
        for sub in subcommands(&text) {
            todo.push(command.iter().cloned().chain([sub]).collect());
        }
        out.push((command, text));
    }
    out
}

#[test]
fn the_matcher_finds_issue_numbers_in_any_spelling() {
    for line in [
        "Cluster mode (issue 14): every member",
        "Issues 11/14 as well",
        "the first issue-13 commit",
        "see ISSUE #9",
    ] {
        assert!(names_an_issue(line), "{line}");
    }
    for line in ["no issues here", "an issue with 3 nodes", "tissue 4"] {
        assert!(!names_an_issue(line), "{line}");
    }
}

#[test]
fn docs_and_help_name_no_issue_numbers() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut found = Vec::new();
    for path in documents(root) {
        // Images and other binary files carry no text to read.
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let place = path.strip_prefix(root).unwrap().display().to_string();
        found.extend(hits(&place, &text));
    }
    let helps = every_help();
    let seen = |words: &[&str]| helps.iter().any(|(c, _)| c == words);
    assert!(
        seen(&["serve"]) && seen(&["cluster", "status"]) && seen(&["token", "create"]),
        "the walk missed subcommands: {:?}",
        helps.iter().map(|(c, _)| c).collect::<Vec<_>>()
    );
    for (command, text) in &helps {
        let place = format!("`fencelog {} --help`", command.join(" "));
        found.extend(hits(&place, text));
    }
    assert!(
        found.is_empty(),
        "say what a feature is, not which issue brought it:\n{}",
        found.join("\n")
    );
}
