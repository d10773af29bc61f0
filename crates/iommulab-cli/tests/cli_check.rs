//! End-to-end tests of `iommulab check`: exit codes (0 clean, 3 findings, 1
//! errors, 2 usage), the text and JSON reports, `--max`, `--dma-mask`, the committed QEMU
//! trace (only its explained leaks), and the same findings in `replay`'s report.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use predicates::prelude::*;
use serde_json::Value;
use tempfile::TempDir;

fn iommulab() -> Command {
    assert_cmd::cargo::cargo_bin_cmd!("iommulab")
}

fn qemu_trace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../traces/qemu-virtio-6.12.95+deb12-cloud-amd64.txt.zst")
}

/// The trace: a double unmap, a size+direction mismatch, a leak.
const BUGGY: &str = "\
# tracer: nop
 fio-3310 [002] ..... 8123.500001: dma_map_page: 0000:01:00.0 dir=TO_DEVICE dma_addr=fff00000 size=4096 phys_addr=12c400000 attrs=
 fio-3310 [002] ..... 8123.500002: dma_unmap_page: 0000:01:00.0 dir=TO_DEVICE dma_addr=fff00000 size=4096 attrs=
 fio-3310 [002] ..... 8123.500003: dma_unmap_page: 0000:01:00.0 dir=TO_DEVICE dma_addr=fff00000 size=4096 attrs=
 fio-3310 [002] ..... 8123.500004: dma_map_page: 0000:01:00.0 dir=TO_DEVICE dma_addr=ffef0000 size=4096 phys_addr=12c401000 attrs=
 fio-3310 [002] ..... 8123.500005: dma_unmap_page: 0000:01:00.0 dir=FROM_DEVICE dma_addr=ffef0000 size=2048 attrs=
 fio-3310 [002] ..... 8123.500006: dma_map_page: 0000:01:00.0 dir=TO_DEVICE dma_addr=ffee0000 size=4096 phys_addr=12c402000 attrs=
";

const CLEAN: &str = "\
 fio-3310 [002] ..... 8123.500001: dma_map_page: 0000:01:00.0 dir=TO_DEVICE dma_addr=fff00000 size=4096 phys_addr=12c400000 attrs=
 fio-3310 [002] ..... 8123.500002: dma_unmap_page: 0000:01:00.0 dir=TO_DEVICE dma_addr=fff00000 size=4096 attrs=
";

fn write(dir: &TempDir, name: &str, text: &str) -> PathBuf {
    let p = dir.path().join(name);
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn findings_exit_3_and_name_both_lines() {
    let d = TempDir::new().unwrap();
    let t = write(&d, "buggy.txt", BUGGY);
    let out = iommulab()
        .args(["check", "--leaks"])
        .arg(&t)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    let s = String::from_utf8(out.stdout).unwrap();
    assert!(s.contains("6 events, 4 findings"), "{s}");
    for kind in [
        "double_unmap",
        "unmap_size_mismatch",
        "unmap_direction_mismatch",
        "leak",
    ] {
        assert!(s.contains(kind), "{kind} missing in {s}");
    }
    assert!(
        s.contains("buggy.txt:4: double_unmap dma_unmap_page 0000:01:00.0 (fio-3310, cpu 2)"),
        "{s}"
    );
    assert!(s.contains("dma_map_page at "), "{s}");
    assert!(s.contains("buggy.txt:2 (fio-3310, cpu 2)"), "{s}");
    assert!(s.contains("device driver frees DMA memory with different size"));
}

#[test]
fn clean_exits_0() {
    let d = TempDir::new().unwrap();
    let t = write(&d, "clean.txt", CLEAN);
    iommulab()
        .arg("check")
        .arg(&t)
        .assert()
        .code(0)
        .stdout(predicate::str::contains("0 findings (clean)"));
}

#[test]
fn json_lists_findings_and_max_bounds_them() {
    let d = TempDir::new().unwrap();
    let t = write(&d, "buggy.txt", BUGGY);
    let out = iommulab()
        .args(["check", "--json", "--leaks"])
        .arg(&t)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["findings_total"], 4);
    assert_eq!(v["by_kind"]["double_unmap"], 1);
    assert_eq!(v["findings"].as_array().unwrap().len(), 4);
    assert_eq!(v["findings"][0]["at"]["line"], 4);
    assert_eq!(v["findings"][0]["map"]["line"], 2);
    assert_eq!(v["findings"][0]["at"]["task"], "fio-3310");
    assert_eq!(v["position"], "line");
    let out = iommulab()
        .args(["check", "--max", "1", "--leaks"])
        .arg(&t)
        .output()
        .unwrap();
    let s = String::from_utf8(out.stdout).unwrap();
    assert_eq!(s.matches("    linux: ").count(), 1, "{s}");
    assert!(s.contains("... 3 more findings"), "{s}");
    // --json --max bounds the list, not the counts.
    let out = iommulab()
        .args(["check", "--json", "--leaks", "--max", "2"])
        .arg(&t)
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["findings"].as_array().unwrap().len(), 2);
    assert_eq!(
        (
            v["findings_total"].as_u64(),
            v["findings_not_listed"].as_u64()
        ),
        (Some(4), Some(2))
    );
    // Without --leaks the mapping still live is outstanding at end, not a finding.
    let out = iommulab()
        .args(["check", "--json"])
        .arg(&t)
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["findings_total"], 3);
    assert_eq!(v["outstanding_at_end"], 1);
    assert_eq!(v["by_kind"].get("leak"), None);
}

/// The streamed JSON holds the same report as the library's, finding for finding, also
/// with no findings at all (an empty list).
#[test]
fn streamed_json_is_the_library_report() {
    use iommulab::trace::check::{CheckOptions, check};
    let d = TempDir::new().unwrap();
    for (name, text) in [("buggy.txt", BUGGY), ("clean.txt", CLEAN)] {
        let t = write(&d, name, text);
        let out = iommulab()
            .args(["check", "--json", "--leaks", "--from-boot"])
            .arg(&t)
            .output()
            .unwrap();
        let streamed: Value = serde_json::from_slice(&out.stdout).unwrap();
        let opts = CheckOptions {
            leaks: true,
            from_boot: true,
            max_findings: usize::MAX,
            ..CheckOptions::default()
        };
        let report = check(&t, iommulab::trace::TraceFormat::Auto, false, &opts).unwrap();
        let mut want = serde_json::to_value(&report).unwrap();
        // The library sorts leaks last; the stream writes in the order found, which here is
        // the same.
        assert_eq!(streamed, want.take(), "{name}");
    }
}

/// A trace that fails to parse part-way leaves no JSON on stdout.
#[test]
fn json_of_a_bad_trace_writes_nothing() {
    let d = TempDir::new().unwrap();
    let t = write(&d, "bad.txt", &format!("{BUGGY}this is not a trace\n"));
    let out = iommulab()
        .args(["check", "--json", "--leaks"])
        .arg(&t)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("bad.txt:8"));
}

#[test]
fn dma_mask_option() {
    let d = TempDir::new().unwrap();
    let t = write(&d, "clean.txt", CLEAN);
    let out = iommulab()
        .args(["check", "--dma-mask", "0000:01:00.0=28"])
        .arg(&t)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stdout).contains("beyond_dma_mask"));
    iommulab()
        .args(["check", "--dma-mask", "0000:01:00.0=32"])
        .arg(&t)
        .assert()
        .code(0);
    iommulab()
        .args(["check", "--dma-mask", "nonsense"])
        .arg(&t)
        .assert()
        .code(1)
        .stderr(predicate::str::contains("DEVICE=MASK"));
}

#[test]
fn errors_keep_their_own_codes() {
    iommulab()
        .args(["check", "/nonexistent/trace.txt"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("/nonexistent/trace.txt"));
    let d = TempDir::new().unwrap();
    let t = write(&d, "garbage.txt", "this is not a trace\n");
    iommulab()
        .arg("check")
        .arg(&t)
        .assert()
        .code(1)
        .stderr(predicate::str::contains("garbage.txt:1: expected"));
    iommulab().args(["check", "--bogus"]).assert().code(2);
}

/// The committed QEMU trace is clean; with `--leaks`, only the leaks traces/README.md
/// explains (rings and posted receive buffers still mapped when tracing stopped), and the
/// IOMMU layer agrees.
#[test]
fn qemu_trace_has_only_its_explained_leaks() {
    let out = iommulab()
        .args(["check", "--json"])
        .arg(qemu_trace())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["by_kind"], serde_json::json!({}));
    assert_eq!(v["outstanding_at_end"], 255);
    let out = iommulab()
        .args(["check", "--json", "--leaks", "--from-boot"])
        .arg(qemu_trace())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["by_kind"], serde_json::json!({"leak": 3}));
    assert_eq!(v["outstanding_at_end"], 255);
    assert_eq!(v["iommu_checked"], true);
    let counts: Vec<(String, String)> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["device"].as_str().unwrap().to_owned(),
                f["detail"].as_str().unwrap()[..10].to_owned(),
            )
        })
        .collect();
    assert_eq!(
        counts,
        [
            ("0000:00:04.0".to_owned(), "[count=253".to_owned()),
            ("0000:00:01.0".to_owned(), "[count=1] ".to_owned()),
            ("0000:00:02.0".to_owned(), "[count=1] ".to_owned()),
        ]
    );
}

/// `replay` reports the same findings.
#[test]
fn replay_reports_the_findings() {
    let d = TempDir::new().unwrap();
    let t = write(&d, "buggy.txt", BUGGY);
    let out = iommulab()
        .args(["replay", "--config", "strict"])
        .arg(&t)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s = String::from_utf8(out.stdout).unwrap();
    // The mapping still live at the end is outstanding, not a leak, by default.
    assert!(s.contains("dma-debug (iommulab check): 3 findings"), "{s}");
    assert!(s.contains("double_unmap"), "{s}");
    let out = iommulab()
        .args(["replay", "--config", "strict", "--json"])
        .arg(&t)
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["check"]["findings_total"], 3);
    assert_eq!(v["check"]["by_kind"]["unmap_size_mismatch"], 1);
}
