//! The library's layering, one crate per layer, so the compiler refuses a lower layer
//! that names a higher one. What the compiler cannot see is a manifest that grows an upward
//! dependency; this test reads every manifest and holds it to the layer table.
//!
//! ```text
//! base → hw → os ─────────────┐
//!        hw → pcie ───────────┼──────────→ façade
//! base → trace → workload ────┴→ virt → façade (iommulab: experiment, Error) → repro
//!                workload → os (the driver's input)
//! ```
//!
//! The reproductions (`iommulab-repro`) sit above the façade: the library never names a
//! paper, and a reproduction's error wraps the library's, never the reverse.
//!
//! Inside the OS crate, the IOVA allocators are pure software (the scaling benchmark and the
//! property tests run them with no IOMMU), so `iova/` uses the base layer only: checked here
//! by reading its sources, since it shares a crate with the DMA API.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

/// Each library crate and the library crates it may depend on (normal, dev and build).
const LAYERS: &[(&str, &[&str])] = &[
    ("iommulab-base", &[]),
    ("iommulab-hw", &["iommulab-base"]),
    // PCIe, SR-IOV and the ExpEther bridge: a VF's DMA goes through its host's RemapUnit.
    ("iommulab-pcie", &["iommulab-base", "iommulab-hw"]),
    ("iommulab-trace", &["iommulab-base"]),
    ("iommulab-workload", &["iommulab-base", "iommulab-trace"]),
    // The one driver (`driver/`) runs a `Workload` through the DMA API.
    (
        "iommulab-os",
        &["iommulab-base", "iommulab-hw", "iommulab-workload"],
    ),
    // The guest model runs a `Workload`; hit-rate curves read traces.
    (
        "iommulab-virt",
        &[
            "iommulab-base",
            "iommulab-hw",
            "iommulab-os",
            "iommulab-trace",
            "iommulab-workload",
        ],
    ),
    (
        "iommulab",
        &[
            "iommulab-base",
            "iommulab-hw",
            "iommulab-os",
            "iommulab-trace",
            "iommulab-workload",
            "iommulab-virt",
            "iommulab-pcie",
            // Its own tests enable `test-utils` on it.
            "iommulab",
        ],
    ),
    // Every paper's runs and claims, over the façade.
    ("iommulab-repro", &["iommulab"]),
];

fn crates_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The `iommulab*` dependencies of each `iommulab*` library crate of the workspace (the
/// renderers, CLI and Python bindings, which sit above the façade, are not layers).
fn manifests() -> BTreeMap<String, Vec<String>> {
    let mut out = BTreeMap::new();
    for entry in fs::read_dir(crates_dir()).unwrap() {
        let dir = entry.unwrap().path();
        let Ok(text) = fs::read_to_string(dir.join("Cargo.toml")) else {
            continue;
        };
        let doc: toml::Table = toml::from_str(&text).unwrap();
        let name = doc["package"]["name"].as_str().unwrap().to_owned();
        if !name.starts_with("iommulab")
            || ["iommulab-cli", "iommulab-py", "iommulab-report"].contains(&name.as_str())
        {
            continue;
        }
        let mut deps = Vec::new();
        for section in ["dependencies", "dev-dependencies", "build-dependencies"] {
            if let Some(t) = doc.get(section).and_then(|t| t.as_table()) {
                deps.extend(t.keys().filter(|k| k.starts_with("iommulab")).cloned());
            }
        }
        out.insert(name, deps);
    }
    out
}

#[test]
fn no_crate_depends_on_a_higher_layer() {
    let manifests = manifests();
    let mut bad = Vec::new();
    for (name, deps) in &manifests {
        let Some((_, allowed)) = LAYERS.iter().find(|(l, _)| l == name) else {
            bad.push(format!(
                "{name}: not in the layer table of tests/layering.rs"
            ));
            continue;
        };
        for d in deps {
            if !allowed.contains(&d.as_str()) {
                bad.push(format!("{name} depends on {d}, a layer it may not use"));
            }
        }
    }
    assert!(bad.is_empty(), "layering broken:\n{}", bad.join("\n"));
    // Every layer of the table is a crate of the workspace (the table cannot go stale).
    for (l, _) in LAYERS {
        assert!(
            manifests.contains_key(*l),
            "{l} is in the table but not a crate"
        );
    }
}

#[test]
fn the_layer_table_is_acyclic() {
    // Each crate's allowed layers come before it in the table (apart from itself).
    for (i, (name, allowed)) in LAYERS.iter().enumerate() {
        for a in *allowed {
            let j = LAYERS.iter().position(|(l, _)| l == a).unwrap();
            assert!(
                j < i || a == name,
                "{name} may use {a}, which is not below it"
            );
        }
    }
}

/// Lines of `src` that name a module of the OS or hardware layer: `crate::hw`, `crate::dma`,
/// `crate::flush`, `crate::device` or the hardware crate. Plain `//` comments are skipped;
/// doc comments count (a doc link to a higher layer breaks as surely as a `use`).
fn reaches_above_base(src: &str) -> Vec<usize> {
    src.lines()
        .enumerate()
        .filter(|(_, line)| {
            let t = line.trim_start();
            let code = if t.starts_with("///") || t.starts_with("//!") {
                t
            } else {
                line.split("//").next().unwrap_or("")
            };
            [
                "crate::hw",
                "crate::dma",
                "crate::flush",
                "crate::device",
                "iommulab_hw",
            ]
            .iter()
            .any(|p| code.contains(p))
        })
        .map(|(i, _)| i + 1)
        .collect()
}

#[test]
fn iova_allocators_use_the_base_layer_only() {
    let dir = crates_dir().join("iommulab-os/src/iova");
    let mut seen = 0;
    let mut bad = Vec::new();
    for entry in fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "rs") {
            seen += 1;
            let src = fs::read_to_string(&path).unwrap();
            for line in reaches_above_base(&src) {
                bad.push(format!("{}:{line}", path.display()));
            }
        }
    }
    assert!(
        seen >= 5,
        "expected the allocator files in {}",
        dir.display()
    );
    assert!(
        bad.is_empty(),
        "iova/ names a higher layer:\n{}",
        bad.join("\n")
    );
}

#[test]
fn the_iova_check_sees_code_and_doc_links_not_comments() {
    let src = "use crate::addr::Iova;\n\
               use crate::hw::vtd::Vtd;\n\
               // crate::dma in a comment\n\
               /// See [`crate::flush::Strict`].\n\
               let x = 1; // crate::device\n";
    assert_eq!(reaches_above_base(src), [2, 4]);
}
