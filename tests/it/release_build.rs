//! The release build carries no deliberate bugs: the `mutations` features
//! (and the engine's test-only `sim` and `fuzz`) are switched on only by
//! the root package's `mutations` feature and by dev-dependencies, never
//! in the normal dependency graph `cargo build --release` builds.

use std::process::Command;

/// The features the normal dependency graph turns on for workspace crate
/// `krate`, as `cargo tree` prints them (with `extra` arguments).
fn enabled_features(krate: &str, extra: &[&str]) -> String {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args(["tree", "--offline", "-e", "normal,features", "-i", krate])
        .args(extra)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "cargo tree failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

const TEST_ONLY: [&str; 3] = ["\"mutations\"", "\"sim\"", "\"fuzz\""];

#[test]
fn no_crate_of_the_release_build_has_a_test_only_feature() {
    for krate in ["fencelog-engine", "fencelog-server", "fencelog-cluster"] {
        let tree = enabled_features(krate, &[]);
        for feature in TEST_ONLY {
            let on: Vec<&str> = tree
                .lines()
                .filter(|l| l.contains(&format!("{krate} feature {feature}")))
                .collect();
            assert!(
                on.is_empty(),
                "{krate} has {feature} in a release build: {on:?}"
            );
        }
    }
}

/// The check above can fail: with the root's `mutations` feature (what the
/// test builds use) every crate's deliberate bugs are there.
#[test]
fn the_test_build_has_every_crates_deliberate_bugs() {
    for krate in ["fencelog-engine", "fencelog-server", "fencelog-cluster"] {
        let tree = enabled_features(krate, &["--features", "mutations"]);
        assert!(
            tree.contains(&format!("{krate} feature \"mutations\"")),
            "{krate}: {tree}"
        );
    }
}
