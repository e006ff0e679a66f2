//! ARCHITECTURE.md and the design documents stay true to the tree:
//! ARCHITECTURE.md fits its budget; every repository path that
//! ARCHITECTURE.md, docs/cluster.md and docs/design.md name (in backticks,
//! from the repository's root, when it starts with one of [`PATH_ROOTS`];
//! any relative link, from the document's folder) exists, a trailing `/`
//! meaning a folder; and ARCHITECTURE.md's "may depend on" list is exactly
//! the workspace crates each `Cargo.toml` lists under `[dependencies]`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

const ARCHITECTURE: &str = "ARCHITECTURE.md";
const ARCHITECTURE_BYTES_MAX: usize = 35_000;
/// The documents whose paths are checked, relative to the repository.
const DOCUMENTS: [&str; 3] = [ARCHITECTURE, "docs/cluster.md", "docs/design.md"];
/// A code span starting with one of these names a path of the repository.
const PATH_ROOTS: [&str; 5] = ["crates/", "src/", "tests/", "docs/", "benches/"];
/// The section of ARCHITECTURE.md that holds the "may depend on" list.
const DEPENDENCY_SECTION: &str = "## Crates and the allowed dependencies";
const MAY_DEPEND_ON: &str = "may depend on";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(relative: &str) -> String {
    let path = root().join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `markdown` without its fenced code blocks (each line of one blanked,
/// so line numbers stay).
fn outside_fences(markdown: &str) -> String {
    let mut fenced = false;
    let mut out = String::with_capacity(markdown.len());
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced {
            out.push_str(line);
        }
        out.push('\n');
    }
    out
}

/// The inline code spans of `markdown` (outside fences), each with the
/// line it starts on.
fn code_spans(markdown: &str) -> Vec<(usize, String)> {
    let text = outside_fences(markdown);
    let mut spans = Vec::new();
    let mut line = 1;
    for (i, piece) in text.split('`').enumerate() {
        if i % 2 == 1 {
            spans.push((line, piece.to_string()));
        }
        line += piece.matches('\n').count();
    }
    spans
}

/// The targets of the inline links of `markdown` (outside fences), each
/// with its line: what stands between `](` and the next `)`.
fn link_targets(markdown: &str) -> Vec<(usize, String)> {
    let text = outside_fences(markdown);
    let mut targets = Vec::new();
    for (n, line) in text.lines().enumerate() {
        for (at, _) in line.match_indices("](") {
            let rest = &line[at + 2..];
            if let Some(end) = rest.find(')') {
                targets.push((n + 1, rest[..end].to_string()));
            }
        }
    }
    targets
}

/// Whether `path` (relative to the repository) is there: a folder when
/// it ends in `/`, a file otherwise.
fn exists(path: &Path, folder: bool) -> bool {
    let full = root().join(path);
    if folder {
        full.is_dir()
    } else {
        full.is_file()
    }
}

/// One line per path `markdown` (the document `doc`) names that the tree
/// does not have, naming the document, the line and the path.
fn missing_paths(doc: &str, markdown: &str) -> Vec<String> {
    let mut named: Vec<(usize, String, String)> = Vec::new();
    for (line, span) in code_spans(markdown) {
        let span = span.split_whitespace().next().unwrap_or("");
        let path = span.split("::").next().unwrap_or("");
        if PATH_ROOTS.iter().any(|r| path.starts_with(r)) {
            named.push((line, path.to_string(), path.to_string()));
        }
    }
    let dir = Path::new(doc).parent().unwrap_or(Path::new(""));
    for (line, target) in link_targets(markdown) {
        let target = target.split('#').next().unwrap_or("");
        if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
            continue;
        }
        let joined = normalise(&dir.join(target), target.ends_with('/'));
        named.push((line, target.to_string(), joined));
    }
    named
        .into_iter()
        .filter(|(_, _, path)| !exists(Path::new(path), path.ends_with('/')))
        .map(|(line, written, _)| format!("{doc}:{line}: `{written}` is not in the tree"))
        .collect()
}

/// `path` with its `..` and `.` parts resolved, `/`-separated, a trailing
/// `/` kept when `folder`.
fn normalise(path: &Path, folder: bool) -> String {
    let mut parts: Vec<String> = Vec::new();
    for part in path.components() {
        match part {
            std::path::Component::ParentDir => {
                parts.pop();
            }
            std::path::Component::Normal(p) => parts.push(p.to_string_lossy().into_owned()),
            _ => {}
        }
    }
    let joined = parts.join("/");
    if folder {
        format!("{joined}/")
    } else {
        joined
    }
}

/// A workspace crate as its manifest says: where the manifest is, and
/// the workspace crates it lists under `[dependencies]`.
struct Manifest {
    path: String,
    depends_on: BTreeSet<String>,
}

fn parse_toml(relative: &str) -> toml::Table {
    read(relative)
        .parse()
        .unwrap_or_else(|e| panic!("{relative}: {e}"))
}

/// Every crate of the workspace, the root package included, by name.
fn manifests() -> BTreeMap<String, Manifest> {
    let root_manifest = parse_toml("Cargo.toml");
    let members = root_manifest["workspace"]["members"]
        .as_array()
        .expect("the workspace lists its members");
    let mut paths = vec!["Cargo.toml".to_string()];
    paths.extend(
        members
            .iter()
            .map(|m| format!("{}/Cargo.toml", m.as_str().expect("a member is a path"))),
    );
    let tables: Vec<(String, toml::Table)> = paths
        .into_iter()
        .map(|p| (p.clone(), parse_toml(&p)))
        .collect();
    let names: BTreeSet<String> = tables.iter().map(|(_, t)| package_name(t)).collect();
    tables
        .into_iter()
        .map(|(path, table)| {
            let depends_on = normal_dependencies(&table)
                .into_iter()
                .filter(|d| names.contains(d))
                .collect();
            (package_name(&table), Manifest { path, depends_on })
        })
        .collect()
}

fn package_name(manifest: &toml::Table) -> String {
    manifest["package"]["name"]
        .as_str()
        .expect("a package has a name")
        .to_string()
}

/// The packages a manifest's normal dependencies name: `[dependencies]`
/// and every `[target.*.dependencies]`, a renamed one by its `package`.
fn normal_dependencies(manifest: &toml::Table) -> Vec<String> {
    let mut tables: Vec<&toml::Table> = manifest
        .get("dependencies")
        .and_then(|d| d.as_table())
        .into_iter()
        .collect();
    if let Some(targets) = manifest.get("target").and_then(|t| t.as_table()) {
        tables.extend(
            targets
                .values()
                .filter_map(|t| t.get("dependencies").and_then(|d| d.as_table())),
        );
    }
    tables
        .into_iter()
        .flat_map(|t| t.iter())
        .map(
            |(key, value)| match value.get("package").and_then(|p| p.as_str()) {
                Some(package) => package.to_string(),
                None => key.clone(),
            },
        )
        .collect()
}

/// ARCHITECTURE.md's list: each crate with the crates it may depend on,
/// or a line for each entry that names no workspace crate.
fn allowed(
    markdown: &str,
    crates: &BTreeSet<String>,
) -> (BTreeMap<String, BTreeSet<String>>, Vec<String>) {
    let section = markdown
        .split_once(DEPENDENCY_SECTION)
        .map(|(_, rest)| rest.split("\n## ").next().unwrap_or(""))
        .unwrap_or_else(|| panic!("{ARCHITECTURE} has no section {DEPENDENCY_SECTION:?}"));
    let mut list = BTreeMap::new();
    let mut problems = Vec::new();
    for line in section.lines().filter(|l| l.starts_with("- `")) {
        let Some((head, tail)) = line.split_once(MAY_DEPEND_ON) else {
            continue;
        };
        let name = head.split('`').nth(1).unwrap_or("").to_string();
        if !crates.contains(&name) {
            problems.push(format!(
                "{ARCHITECTURE}: the list names `{name}`, which is no crate of the workspace"
            ));
            continue;
        }
        let deps = code_spans(tail)
            .into_iter()
            .map(|(_, span)| span)
            .filter(|span| crates.contains(span))
            .collect();
        list.insert(name, deps);
    }
    (list, problems)
}

/// One line per difference between ARCHITECTURE.md's list and the
/// manifests: a crate without a line, an arrow the list lacks, one the
/// manifest lacks.
fn dependency_problems(markdown: &str, manifests: &BTreeMap<String, Manifest>) -> Vec<String> {
    let crates: BTreeSet<String> = manifests.keys().cloned().collect();
    let (list, mut problems) = allowed(markdown, &crates);
    for (name, manifest) in manifests {
        let Some(said) = list.get(name) else {
            problems.push(format!(
                "{ARCHITECTURE}: no \"- `{name}` {MAY_DEPEND_ON} ...\" line for crate `{name}`"
            ));
            continue;
        };
        for dep in manifest.depends_on.difference(said) {
            problems.push(format!(
                "{ARCHITECTURE}: `{name}` depends on `{dep}` ({}), but its line does not say so",
                manifest.path
            ));
        }
        for dep in said.difference(&manifest.depends_on) {
            problems.push(format!(
                "{ARCHITECTURE}: `{name}` {MAY_DEPEND_ON} `{dep}`, which {} does not list under [dependencies]",
                manifest.path
            ));
        }
    }
    problems
}

#[test]
fn architecture_fits_its_budget() {
    let bytes = read(ARCHITECTURE).len();
    assert!(
        bytes <= ARCHITECTURE_BYTES_MAX,
        "{ARCHITECTURE} is {bytes} bytes, over its budget of {ARCHITECTURE_BYTES_MAX}: \
         move the long explanations to docs/design.md"
    );
}

#[test]
fn architecture_and_design_docs_name_only_paths_that_exist() {
    let missing: Vec<String> = DOCUMENTS
        .iter()
        .flat_map(|doc| missing_paths(doc, &read(doc)))
        .collect();
    assert!(missing.is_empty(), "{}", missing.join("\n"));
}

#[test]
fn architecture_lists_exactly_the_dependencies_of_the_manifests() {
    let problems = dependency_problems(&read(ARCHITECTURE), &manifests());
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// A "may depend on" section as the manifests have it, after `edit` has
/// seen each crate's arrows (a crate for which it answers `false` gets no
/// line).
fn list_from(
    manifests: &BTreeMap<String, Manifest>,
    edit: impl Fn(&str, &mut BTreeSet<String>) -> bool,
) -> String {
    let mut text = format!("{DEPENDENCY_SECTION}\n\n");
    for (name, manifest) in manifests {
        let mut deps = manifest.depends_on.clone();
        if edit(name, &mut deps) {
            let deps: Vec<String> = deps.iter().map(|d| format!("`{d}`")).collect();
            text += &format!("- `{name}` {MAY_DEPEND_ON} {}.\n", deps.join(", "));
        }
    }
    text + "\n## The next section\n"
}

/// The path check names a path that is not there, in backticks or as a
/// link, and leaves fenced code alone.
#[test]
fn architecture_check_names_a_wrong_path() {
    let doc = "x `crates/fencelog-engine/src/fence.rs` and\n\
               `crates/fencelog-engine/src/no_such.rs::f`, `src/cli/` `src/main.rs/`\n\
               [a](docs/nowhere.md) [b](../README.md) [c](cluster.md#reads)\n\
               ```\n`crates/in/a/fence.rs`\n```\n";
    assert_eq!(
        missing_paths("docs/x.md", doc),
        [
            "docs/x.md:2: `crates/fencelog-engine/src/no_such.rs` is not in the tree",
            "docs/x.md:2: `src/main.rs/` is not in the tree",
            "docs/x.md:3: `docs/nowhere.md` is not in the tree",
        ]
    );
}

/// The dependency check names a missing arrow, an extra one and a crate
/// without a line.
#[test]
fn architecture_check_names_a_wrong_arrow() {
    let manifests = manifests();
    let server = "fencelog-server";
    let exact = list_from(&manifests, |_, _| true);
    let missing = list_from(&manifests, |name, deps| {
        name != server || deps.remove("fencelog-engine")
    });
    let extra = list_from(&manifests, |name, deps| {
        name != server || deps.insert("fencelog-client".to_string())
    });
    let no_line = list_from(&manifests, |name, _| name != server);
    assert_eq!(
        dependency_problems(&exact, &manifests),
        Vec::<String>::new()
    );
    assert_eq!(
        dependency_problems(&missing, &manifests),
        [
            "ARCHITECTURE.md: `fencelog-server` depends on `fencelog-engine` \
          (crates/fencelog-server/Cargo.toml), but its line does not say so"
        ]
    );
    assert_eq!(
        dependency_problems(&extra, &manifests),
        [
            "ARCHITECTURE.md: `fencelog-server` may depend on `fencelog-client`, which \
          crates/fencelog-server/Cargo.toml does not list under [dependencies]"
        ]
    );
    assert_eq!(
        dependency_problems(&no_line, &manifests),
        [
            "ARCHITECTURE.md: no \"- `fencelog-server` may depend on ...\" line for crate \
          `fencelog-server`"
        ]
    );
}
