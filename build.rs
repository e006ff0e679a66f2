//! Records the git commit the binary is built from, for `fencelog
//! --version`: `FENCELOG_GIT_COMMIT` from the environment when set (a
//! packager building from a tarball knows it), else `git rev-parse --short
//! HEAD`, else `unknown` (not a git checkout, or no git).

use std::path::PathBuf;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    let text = text.trim();
    (out.status.success() && !text.is_empty()).then(|| text.to_string())
}

fn main() {
    println!("cargo:rerun-if-env-changed=FENCELOG_GIT_COMMIT");
    let commit = std::env::var("FENCELOG_GIT_COMMIT")
        .ok()
        .filter(|c| !c.is_empty())
        .or_else(|| git(&["rev-parse", "--short", "HEAD"]))
        .unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=FENCELOG_GIT_COMMIT={commit}");
    // Rerun when HEAD moves: HEAD itself (a checkout), the branch it names
    // (a commit), and packed-refs (where a branch may live after gc). In a
    // worktree HEAD is in the worktree's git dir, branches in the common one.
    // Only files that exist: cargo reruns a script on every build while a
    // path it watches is missing.
    let mut watch = Vec::new();
    if let Some(dir) = git(&["rev-parse", "--git-dir"]) {
        watch.push(PathBuf::from(dir).join("HEAD"));
    }
    if let Some(common) = git(&["rev-parse", "--git-common-dir"]) {
        let common = PathBuf::from(common);
        watch.push(common.join("packed-refs"));
        if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
            watch.push(common.join(branch));
        }
    }
    for path in watch.iter().filter(|p| p.exists()) {
        println!("cargo:rerun-if-changed={}", path.display());
    }
    // Without any (not a checkout), watch this script alone, not the
    // whole package.
    println!("cargo:rerun-if-changed=build.rs");
}
