//! The library's layering (issue 9), enforced while it is still one crate: a module of a lower
//! layer never names a module of a higher one, so each layer can become its own crate.
//!
//! ```text
//! base (addr, clock, hash) → hw → os (iova, flush, dma, device) → virt (virt, mrc)
//! base → trace → workload → virt        everything → façade (experiment, error, lib.rs)
//! ```
//!
//! The check scans `src/` for paths that start at the crate root (`crate::x`, `$crate::x`,
//! `iommulab::x` in doc examples, `super::` chains that climb out of the top-level module,
//! `use` groups `crate::{x, y::z}`), in code and in doc comments (a doc link or a doc test
//! that names a higher layer would break once the layers are crates), not in plain comments or
//! string literals. `LAYERS` says which layers each layer may use; `MODULES` puts each
//! top-level module (and each item exported at the crate root) into a layer. A new top-level
//! module fails the check until it is classified here.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

/// Each layer and the layers below it that it may use (its own layer is always allowed).
const LAYERS: &[(&str, &[&str])] = &[
    ("base", &[]),
    ("hw", &["base"]),
    ("os", &["base", "hw"]),
    ("trace", &["base"]),
    ("workload", &["base", "trace"]),
    // The guest model (virt/guest.rs) runs a `Workload`.
    ("virt", &["base", "hw", "os", "trace", "workload"]),
    // Naive oracles for property tests (feature `test-utils`).
    (
        "testing",
        &["base", "hw", "os", "trace", "workload", "virt"],
    ),
    (
        "facade",
        &["base", "hw", "os", "trace", "workload", "virt", "testing"],
    ),
];

/// Top-level modules of `src/`, and items exported at the crate root, by layer.
const MODULES: &[(&str, &str)] = &[
    ("addr", "base"),
    ("clock", "base"),
    ("hash", "base"),
    ("hw", "hw"),
    ("iova", "os"),
    ("flush", "os"),
    ("dma", "os"),
    ("device", "os"),
    ("trace", "trace"),
    ("workload", "workload"),
    ("virt", "virt"),
    ("mrc", "virt"),
    // `#[macro_export]` of virt/eviction, so it lives at the crate root.
    ("with_eviction", "virt"),
    // `#[macro_export]` of virt/strategy, likewise.
    ("with_strategy", "virt"),
    ("testing", "testing"),
    ("experiment", "facade"),
    ("repro", "facade"),
    ("error", "facade"),
    ("Error", "facade"),
    ("Result", "facade"),
    ("lib", "facade"),
];

/// Modules held to less than their layer allows: the IOVA allocators are pure software (the
/// scaling benchmark and the property tests run them with no IOMMU), so they use base only.
const NARROWER: &[(&str, &[&str])] = &[("iova", &["base"])];

fn layer_of(module: &str) -> Option<&'static str> {
    MODULES.iter().find(|(m, _)| *m == module).map(|&(_, l)| l)
}

/// May top-level module `from` (of layer `from_layer`) name `to` (of layer `to_layer`)?
fn allowed(from: &str, from_layer: &str, to: &str, to_layer: &str) -> bool {
    if from == to {
        return true;
    }
    if let Some((_, deps)) = NARROWER.iter().find(|(m, _)| *m == from) {
        return deps.contains(&to_layer);
    }
    from_layer == to_layer
        || LAYERS
            .iter()
            .find(|(l, _)| *l == from_layer)
            .is_some_and(|(_, deps)| deps.contains(&to_layer))
}

/// One path out of a file: the line and the top-level module (or root item) it names.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Reference {
    line: usize,
    target: String,
}

/// `src` with plain comments and the insides of string and char literals blanked (newlines
/// kept, so line numbers hold); doc comments (`///`, `//!`) are kept as text.
fn scannable(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    let blank = |out: &mut Vec<u8>, c: u8| out.push(if c == b'\n' { b'\n' } else { b' ' });
    while i < b.len() {
        let rest = &b[i..];
        if rest.starts_with(b"///") || rest.starts_with(b"//!") {
            while i < b.len() && b[i] != b'\n' {
                out.push(b[i]);
                i += 1;
            }
        } else if rest.starts_with(b"//") {
            while i < b.len() && b[i] != b'\n' {
                out.push(b' ');
                i += 1;
            }
        } else if rest.starts_with(b"/*") {
            let mut depth = 0usize;
            while i < b.len() {
                if b[i..].starts_with(b"/*") {
                    depth += 1;
                    out.extend_from_slice(b"  ");
                    i += 2;
                } else if b[i..].starts_with(b"*/") {
                    depth -= 1;
                    out.extend_from_slice(b"  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    blank(&mut out, b[i]);
                    i += 1;
                }
            }
        } else if (b[i] == b'r' || (b[i] == b'b' && rest.get(1) == Some(&b'r')))
            && !prev_is_ident(b, i)
            && raw_string_hashes(&b[i + usize::from(b[i] == b'b') + 1..]).is_some()
        {
            let start = i + usize::from(b[i] == b'b') + 1;
            let hashes = raw_string_hashes(&b[start..]).unwrap_or(0);
            let mut close = vec![b'"'];
            close.extend(std::iter::repeat_n(b'#', hashes));
            let body = start + hashes + 1;
            out.extend(std::iter::repeat_n(b' ', body - i));
            i = body;
            while i < b.len() && !b[i..].starts_with(&close) {
                blank(&mut out, b[i]);
                i += 1;
            }
            out.extend(std::iter::repeat_n(b' ', close.len().min(b.len() - i)));
            i += close.len();
        } else if b[i] == b'"' {
            out.push(b' ');
            i += 1;
            while i < b.len() && b[i] != b'"' {
                let n = if b[i] == b'\\' { 2 } else { 1 };
                for _ in 0..n.min(b.len() - i) {
                    blank(&mut out, b[i]);
                    i += 1;
                }
            }
            out.push(b' ');
            i += 1;
        } else if b[i] == b'\'' {
            // A char literal ('x', '\n', '\u{..}') or a lifetime ('a).
            let len = if rest.get(1) == Some(&b'\\') {
                rest[2..].iter().position(|&c| c == b'\'').map(|p| p + 3)
            } else {
                // `i + 1` is a char boundary: `'` is one byte.
                src[i + 1..]
                    .chars()
                    .next()
                    .map(char::len_utf8)
                    .filter(|&n| rest.get(1 + n) == Some(&b'\''))
                    .map(|n| n + 2)
            };
            let len = len.unwrap_or(1);
            out.extend(std::iter::repeat_n(b' ', len));
            i += len;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn prev_is_ident(b: &[u8], i: usize) -> bool {
    i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_')
}

/// `Some(hashes)` when `b` starts a raw string body: `#...#"`.
fn raw_string_hashes(b: &[u8]) -> Option<usize> {
    let hashes = b.iter().take_while(|&&c| c == b'#').count();
    (b.get(hashes) == Some(&b'"')).then_some(hashes)
}

fn ident_at(s: &str) -> Option<&str> {
    let s = s.trim_start();
    let end = s
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    (end > 0).then(|| &s[..end])
}

/// The first segment of each path a `use` group `{a::b, c, d::{e}}` at the start of `s` names.
fn group_heads(s: &str) -> Vec<String> {
    let mut heads = Vec::new();
    let mut depth = 0usize;
    let mut item_start = true;
    for (i, c) in s.char_indices() {
        match c {
            '{' => {
                depth += 1;
                if depth == 1 {
                    item_start = true;
                    continue;
                }
            }
            '}' => {
                depth -= 1;
                if depth == 0 {
                    break;
                }
            }
            ',' if depth == 1 => {
                item_start = true;
                continue;
            }
            _ => {}
        }
        if depth == 1 && item_start && !c.is_whitespace() {
            item_start = false;
            if let Some(id) = ident_at(&s[i..]) {
                heads.push(id.to_string());
            }
        }
    }
    heads
}

/// The heads of the path that continues at the start of `s` (after `crate::`).
fn heads(s: &str) -> Vec<String> {
    if s.trim_start().starts_with('{') {
        group_heads(s.trim_start())
    } else {
        ident_at(s).map(|h| vec![h.to_string()]).unwrap_or_default()
    }
}

/// Every path in `src` that names a top-level module or root item, for a file whose module
/// path is `module_depth` deep (`trace/replay.rs`: 2, `trace/mod.rs` and `mrc.rs`: 1).
fn references(src: &str, module_depth: usize) -> Vec<Reference> {
    let text = scannable(src);
    let b = text.as_bytes();
    let line_at = |i: usize| b[..i].iter().filter(|&&c| c == b'\n').count() + 1;
    let mut refs = Vec::new();
    let mut push = |i: usize, hs: Vec<String>| {
        for target in hs.into_iter().filter(|h| h != "self" && h != "super") {
            refs.push(Reference {
                line: line_at(i),
                target,
            });
        }
    };
    // Inline `mod x { .. }` blocks deepen `super::` chains: the brace depths they opened at.
    let mut depth = 0usize;
    let mut inline_mods: Vec<usize> = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let at_word = !prev_is_ident(b, i);
        match b[i] {
            b'{' => {
                let before = text[..i].trim_end();
                let mut words = before.rsplit(|c: char| c.is_whitespace());
                let name = words.next().unwrap_or("");
                if words.next() == Some("mod") && ident_at(name) == Some(name) {
                    inline_mods.push(depth);
                }
                depth += 1;
            }
            b'}' => {
                depth = depth.saturating_sub(1);
                if inline_mods.last() == Some(&depth) {
                    inline_mods.pop();
                }
            }
            _ => {}
        }
        for prefix in ["crate::", "iommulab::"] {
            if at_word && b[i..].starts_with(prefix.as_bytes()) {
                push(i, heads(&text[i + prefix.len()..]));
            }
        }
        if at_word && b[i..].starts_with(b"super::") {
            let mut j = i;
            let mut n = 0;
            while text[j..].starts_with("super::") {
                n += 1;
                j += "super::".len();
            }
            if n >= module_depth + inline_mods.len() {
                push(i, heads(&text[j..]));
            }
            i = j;
            continue;
        }
        i += 1;
    }
    refs
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// (top-level module, module depth) of a file under `src/`.
fn module_of(rel: &Path) -> (String, usize) {
    let parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let stem = |s: &str| s.trim_end_matches(".rs").to_string();
    let depth = parts.len() - usize::from(parts.last().is_some_and(|l| l == "mod.rs"));
    let depth = if parts == ["lib.rs"] { 0 } else { depth };
    (stem(&parts[0]), depth)
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Leak {
    file: String,
    line: usize,
    from: &'static str,
    target: String,
    to: &'static str,
}

/// Every reference of a lower layer to a higher one in `src/`, and every unclassified module.
fn leaks() -> (Vec<Leak>, BTreeSet<String>) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut leaks = Vec::new();
    let mut unknown = BTreeSet::new();
    for path in files {
        let rel = path.strip_prefix(&src).unwrap();
        let (module, depth) = module_of(rel);
        let Some(from) = layer_of(&module) else {
            unknown.insert(format!("module `{module}` ({})", rel.display()));
            continue;
        };
        let text = fs::read_to_string(&path).unwrap();
        for r in references(&text, depth) {
            let Some(to) = layer_of(&r.target) else {
                // Root-level items the table does not know: classify them.
                if r.target.chars().next().is_some_and(char::is_alphabetic) {
                    unknown.insert(format!(
                        "`crate::{}` ({}:{})",
                        r.target,
                        rel.display(),
                        r.line
                    ));
                }
                continue;
            };
            if !allowed(&module, from, &r.target, to) {
                leaks.push(Leak {
                    file: rel.display().to_string().replace('\\', "/"),
                    line: r.line,
                    from,
                    target: r.target,
                    to,
                });
            }
        }
    }
    (leaks, unknown)
}

/// Leaks not mended yet, by file and the higher module named, each with why it is there. An
/// entry that no longer leaks fails the test too, so the list only shrinks.
const KNOWN: &[(&str, &str, &str)] = &[
    // The libCacheSim export writes the replay's page sequence, so it reads events through
    // `workload::TraceWorkload`; the replay's event-matching rules belong in trace/ (with
    // `TraceWorkload` turning their output into `DmaOp`s), or the export moves up beside
    // `create_trace`'s by-extension dispatch.
    (
        "trace/oracle_general.rs",
        "workload",
        "export = the replay's page sequence",
    ),
    (
        "trace/oracle_general.rs",
        "virt",
        "its test compares with the guest's page refs",
    ),
    (
        "trace/oracle_general.rs",
        "mrc",
        "doc link and test: the page sequence",
    ),
];

#[test]
fn lower_layers_never_use_higher_ones() {
    let (mut leaks, unknown) = leaks();
    for &(file, target, _why) in KNOWN {
        let before = leaks.len();
        leaks.retain(|l| !(l.file == file && l.target == target));
        assert!(
            leaks.len() < before,
            "{file} no longer names `{target}`: remove it from KNOWN"
        );
    }
    assert!(
        unknown.is_empty(),
        "classify these in tests/layering.rs (MODULES): {unknown:#?}"
    );
    let found: Vec<String> = leaks
        .iter()
        .map(|l| {
            format!(
                "src/{}:{}: layer {} names `{}` of layer {}",
                l.file, l.line, l.from, l.target, l.to
            )
        })
        .collect();
    assert!(
        found.is_empty(),
        "{} layering leak(s):\n{}",
        found.len(),
        found.join("\n")
    );
}

#[test]
fn the_layer_table_is_acyclic_and_complete() {
    for (layer, deps) in LAYERS {
        for d in *deps {
            let (_, below) = LAYERS.iter().find(|(n, _)| n == d).unwrap();
            assert!(!below.contains(layer), "{layer} <-> {d}");
            // Transitive closure stays below: what a dependency may use, the layer may too.
            for dd in *below {
                assert!(deps.contains(dd), "{layer} uses {d}, which uses {dd}");
            }
        }
    }
    for (_, layer) in MODULES {
        assert!(LAYERS.iter().any(|(l, _)| l == layer), "{layer}");
    }
}

#[test]
fn the_scanner_sees_paths_and_skips_comments_and_strings() {
    let src = r##"
use crate::addr::Iova;
use crate::{hw::cost::{CostModel, Cycles}, iova, self};
// use crate::experiment::ConfigError;
/* crate::error::Error */
let s = "crate::trace::Event";
let r = r#"crate::virt::Lru"#;
let c = '"'; let l: &'static str = crate::dma::NAME;
/// [`Workload`](crate::workload::Workload)
fn f() -> crate::Result<()> { $crate::virt::Fifo }
use super::Sibling;
mod tests {
    use super::super::mrc::x;
    use super::*;
}
"##;
    let found: Vec<(usize, String)> = references(src, 1)
        .into_iter()
        .map(|r| (r.line, r.target))
        .collect();
    let want: Vec<(usize, String)> = [
        (2, "addr"),
        (3, "hw"),
        (3, "iova"),
        (8, "dma"),
        (9, "workload"),
        (10, "Result"),
        (10, "virt"),
        (11, "Sibling"),
        (13, "mrc"),
    ]
    .into_iter()
    .map(|(l, t)| (l, t.to_string()))
    .collect();
    assert_eq!(found, want);
    assert_eq!(module_of(Path::new("trace/replay.rs")), ("trace".into(), 2));
    assert_eq!(module_of(Path::new("trace/mod.rs")), ("trace".into(), 1));
    assert_eq!(module_of(Path::new("mrc.rs")), ("mrc".into(), 1));
    assert_eq!(module_of(Path::new("lib.rs")), ("lib".into(), 0));
}
