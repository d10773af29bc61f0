//! The committed report (`docs/reproductions`) and what the docs say about it: the
//! "Reproduced" line of each paper in `docs/sources.md` is the scoreboard of its committed
//! page, word for word, so no one writes a verdict by hand.

use std::fs;
use std::path::{Path, PathBuf};

use iommulab_repro::Reproduction;
use iommulab_repro::claims::Verdict;
use serde_json::Value;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The counts of the committed page's claims, in [`Verdict::ALL`]'s order.
fn committed_counts(r: Reproduction) -> [usize; 4] {
    let path = repo()
        .join("docs/reproductions")
        .join(r.name())
        .join("results.json");
    let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let json: Value = serde_json::from_str(&text).unwrap();
    let mut n = [0; 4];
    for c in json["claims"].as_array().expect("a claims list") {
        let v = c["verdict"].as_str().unwrap();
        let i = Verdict::ALL
            .iter()
            .position(|x| x.as_str() == v)
            .unwrap_or_else(|| panic!("{r}: unknown verdict {v}"));
        n[i] += 1;
    }
    n
}

#[test]
fn sources_md_says_what_the_committed_pages_decided() {
    // A list item wraps onto indented lines: read it as one line.
    let sources = fs::read_to_string(repo().join("docs/sources.md"))
        .unwrap()
        .replace("\n  ", " ");
    for &r in Reproduction::all() {
        let [ok, partly, not, input] = committed_counts(r);
        let line = format!(
            "- **Reproduced ({}):** {ok} of {} claims reproduced, {partly} partly, {not} not reproduced, {input} set by an input",
            r.name(),
            ok + partly + not + input
        );
        assert!(
            sources.contains(&line),
            "docs/sources.md must say, for {r}:\n{line}\n(regenerate the pages with `iommulab reproduce all --out docs/reproductions`, then copy the counts)"
        );
    }
    // And no other "Reproduced" line says something else.
    assert_eq!(
        sources.matches("- **Reproduced").count(),
        Reproduction::all().len()
    );
}
