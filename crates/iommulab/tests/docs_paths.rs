//! The docs name what exists: every source path `docs/architecture.md` names is a file or
//! folder of the repository, and every entry `BENCHMARKS.md`'s table of
//! today's numbers links to is a heading of that file. A moved or deleted file fails here
//! until the docs say where it went.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every file and folder of the repository's sources, as `a/b/c.rs` and `a/b/` (build output,
/// the virtual environment and version control left out).
fn tree() -> BTreeSet<String> {
    fn walk(root: &Path, rel: &str, out: &mut BTreeSet<String>) {
        for e in fs::read_dir(root.join(rel)).unwrap() {
            let e = e.unwrap();
            let name = e.file_name().to_string_lossy().into_owned();
            let path = if rel.is_empty() {
                name.clone()
            } else {
                format!("{rel}/{name}")
            };
            if e.file_type().unwrap().is_dir() {
                if rel.is_empty()
                    && matches!(name.as_str(), "target" | ".git" | ".venv" | "results")
                {
                    continue;
                }
                out.insert(format!("{path}/"));
                walk(root, &path, out);
            } else {
                out.insert(path);
            }
        }
    }
    let mut out = BTreeSet::new();
    walk(&repo(), "", &mut out);
    out
}

/// Whether `name`, as the docs write it, is in the tree: the path itself, a path ending in
/// it (docs name files under the crate or module they describe), or a crate-relative path
/// with the crate's short name (`hw/cost.rs` is `crates/iommulab-hw/src/cost.rs`; a crate's
/// `mod.rs` is its `lib.rs`).
fn exists(tree: &BTreeSet<String>, name: &str) -> bool {
    if tree.contains(name) || tree.iter().any(|p| p.ends_with(&format!("/{name}"))) {
        return true;
    }
    let Some((krate, rest)) = name.split_once('/') else {
        return false;
    };
    let base = format!("crates/iommulab-{krate}/src/");
    tree.contains(&format!("{base}{rest}"))
        || (rest == "mod.rs" && tree.contains(&format!("{base}lib.rs")))
}

/// The backticked source paths of a text: `x/y.rs`, `x.py`, `x/` and the like.
fn named_paths(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for span in text.split('`').skip(1).step_by(2) {
        let plausible = !span.is_empty()
            && span != "/"
            && span
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "_./-".contains(c))
            && (span.ends_with('/')
                || [".rs", ".py", ".pyi", ".toml", ".sh"]
                    .iter()
                    .any(|e| span.ends_with(e)));
        // Outputs a run writes (`results/...`) are not sources.
        if plausible && !span.starts_with("results/") && !span.starts_with('/') {
            out.push(span.to_string());
        }
    }
    out
}

fn missing_in(file: &str) -> Vec<String> {
    let tree = tree();
    let text = fs::read_to_string(repo().join(file)).unwrap();
    let names = named_paths(&text);
    assert!(names.len() > 20, "{file} names only {names:?}");
    names.into_iter().filter(|n| !exists(&tree, n)).collect()
}

#[test]
fn architecture_md_names_only_paths_that_exist() {
    let missing = missing_in("docs/architecture.md");
    assert!(
        missing.is_empty(),
        "docs/architecture.md names paths that are gone: {missing:?}"
    );
}

/// GitHub's anchor of a heading: lower case, letters, digits, `-` and `_` kept, spaces to
/// `-`, everything else dropped.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

#[test]
fn benchmarks_md_table_links_to_its_entries() {
    let text = fs::read_to_string(repo().join("BENCHMARKS.md")).unwrap();
    let headings: BTreeSet<String> = text
        .lines()
        .filter_map(|l| l.strip_prefix('#'))
        .map(|l| anchor(l.trim_start_matches('#')))
        .collect();
    let table = &text[..text.find("\n## History").expect("a History section")];
    let links: Vec<&str> = table
        .split("](#")
        .skip(1)
        .map(|s| &s[..s.find(')').unwrap()])
        .collect();
    assert!(links.len() >= 8, "today's table links {links:?}");
    let dangling: Vec<&&str> = links.iter().filter(|l| !headings.contains(**l)).collect();
    assert!(
        dangling.is_empty(),
        "BENCHMARKS.md links to no heading: {dangling:?}"
    );
}

#[test]
fn a_gone_path_is_reported() {
    let tree = tree();
    assert!(exists(&tree, "hw/cost.rs"));
    assert!(exists(&tree, "hw/unit.rs") && exists(&tree, "hw/mod.rs"));
    assert!(!exists(&tree, "hw/no_such_unit.rs"));
    assert_eq!(
        named_paths("see `hw/vtd/` and `x.rs`, not `results/index.md` or `a b`"),
        ["hw/vtd/", "x.rs"]
    );
    assert_eq!(
        anchor(" The flush queue's slots (2026-11-27 11:20–13:14 UTC)"),
        "the-flush-queues-slots-2026-11-27-11201314-utc"
    );
}
