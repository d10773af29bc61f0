//! End-to-end tests of `iommulab validate`: the committed real trace's scores in
//! text and JSON, the options that set up the domain, and errors with file and line.

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

#[test]
fn real_trace_text_report() {
    iommulab()
        .arg("validate")
        .arg(qemu_trace())
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "exact: open loop 95.56% (3118/3263), one step 99.97% (3262/3263)",
        ))
        .stdout(predicate::str::contains(
            "1 CPU(s) (the trace's header (#P:N))",
        ))
        .stdout(predicate::str::contains(
            "qemu-virtio-6.12.95+deb12-cloud-amd64.txt.zst:10902: one_step #2724 0000:00:03.0",
        ));
}

#[test]
fn real_trace_json() {
    let out = iommulab()
        .args(["validate", "--json", "--warmup", "0.9"])
        .arg(qemu_trace())
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["allocations"], 3263);
    assert_eq!(v["scored"], 3263 - 2937);
    assert_eq!(
        v["one_step_rate"], 1.0,
        "the one miss (#2724) is in the warm-up"
    );
    let devices = v["devices"].as_array().unwrap();
    assert_eq!(devices.len(), 4);
    assert!(v["mismatch_kinds"]["open_loop"].is_object());
}

/// Without the default windows, with a 39-bit aperture, forcedac, groups and masks: the
/// options reach the model (here nothing changes: every range is just below 4 GiB, and
/// forcedac would put a 64-bit device above it, so the NIC's first range misses).
#[test]
fn domain_options_reach_the_model() {
    let out = iommulab()
        .args([
            "validate",
            "--json",
            "--no-default-windows",
            "--reserve",
            "0xfee00000-0xfeefffff",
            "--aperture-bits",
            "39",
            "--forcedac",
        ])
        .arg(qemu_trace())
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let first = &v["first_mismatches"][0];
    assert_eq!(first["model_iova"], Value::from(0x7f_ffff_e000u64));
    let out = iommulab()
        .args(["validate", "--json", "--dma-mask", "0000:00:04.0=32"])
        .arg(qemu_trace())
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["one_step"]["exact"], 3262);
}

#[test]
fn errors_name_file_and_line() {
    let d = TempDir::new().unwrap();
    let t = d.path().join("t.txt");
    std::fs::write(
        &t,
        "# tracer: nop\n t-1 [000] ..... 1.000001: map: IOMMU: iova=0x00000000fffff000 - 0x0000000100000000 paddr=0x0000000001000000 size=4096\n",
    )
    .unwrap();
    iommulab()
        .arg("validate")
        .arg(&t)
        .assert()
        .code(1)
        .stderr(predicate::str::contains("t.txt:2:").and(predicate::str::contains("never closed")));
    // Lenient: the report says what was skipped; nothing was left to score (exit 2).
    iommulab()
        .args(["validate", "--lenient", "--json"])
        .arg(&t)
        .assert()
        .code(2)
        .stdout(predicate::str::contains("\"unclosed_map_runs\": 1"))
        .stderr(predicate::str::contains("nothing to validate"));
    iommulab()
        .args(["validate", "--reserve", "0x10"])
        .arg(&t)
        .assert()
        .code(1)
        .stderr(predicate::str::contains("START-END"));
    iommulab()
        .args(["validate", "--kernel", "5.15"])
        .arg(&t)
        .assert()
        .code(1)
        .stderr(predicate::str::contains("kernel"));
}

/// A bad option is reported as the option it is, before the trace is read (the trace here
/// does not even exist), not blamed on the trace.
#[test]
fn bad_options_are_named_before_the_trace_is_read() {
    let missing = Path::new("no-such-trace.txt");
    for (args, expected) in [
        (
            &["--warmup", "1.5"][..],
            "for `warmup`: expected a fraction",
        ),
        (&["--group", ","][..], "none empty"),
        (
            &["--group", "a,b", "--group", "b"][..],
            "b is in an earlier group",
        ),
        (
            &["--aperture-bits", "3"][..],
            "bad IOVA domain: aperture_bits = 3: expected 13..=64\n",
        ),
    ] {
        iommulab()
            .arg("validate")
            .args(args)
            .arg(missing)
            .assert()
            .code(1)
            .stderr(
                predicate::str::contains(expected)
                    .and(predicate::str::contains("no-such-trace").not()),
            );
    }
}

/// Two traces of one boot: one report each and a total; JSON holds `traces` and `total`.
/// A range mapped in the first and unmapped in the second is known; alone, the second's
/// unmap is of a range mapped before tracing (an error only with `--strict-trace`).
#[test]
fn several_traces_of_one_boot() {
    let d = TempDir::new().unwrap();
    let (a, b) = (d.path().join("a.txt"), d.path().join("b.txt"));
    std::fs::write(
        &a,
        "# tracer: nop\n t-1 [000] ..... 1.000001: map: IOMMU: iova=0x00000000fffff000 - 0x0000000100000000 paddr=0x0000000001000000 size=4096\n t-1 [000] ..... 1.000002: dma_map_page: 0000:00:04.0 dir=TO_DEVICE dma_addr=fffff000 size=4096 phys_addr=1000000 attrs=\n",
    )
    .unwrap();
    std::fs::write(
        &b,
        "# tracer: nop\n t-1 [000] ..... 2.000001: unmap: IOMMU: iova=0x00000000fffff000 - 0x0000000100000000 size=4096 unmapped_size=4096\n t-1 [000] ..... 2.000002: dma_unmap_page: 0000:00:04.0 dir=TO_DEVICE dma_addr=fffff000 size=4096 attrs=\n t-1 [000] ..... 2.000003: map: IOMMU: iova=0x00000000fffff000 - 0x0000000100000000 paddr=0x0000000001000000 size=4096\n t-1 [000] ..... 2.000004: dma_map_page: 0000:00:04.0 dir=TO_DEVICE dma_addr=fffff000 size=4096 phys_addr=1000000 attrs=\n",
    )
    .unwrap();
    let out = iommulab()
        .args(["validate", "--json"])
        .arg(&a)
        .arg(&b)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["traces"].as_array().unwrap().len(), 2);
    assert_eq!(v["traces"][1]["frees"], 1);
    assert_eq!(v["traces"][1]["mapped_before_tracing"], 0);
    assert_eq!(v["total"]["trace"], "total");
    assert_eq!(v["total"]["allocations"], 2);
    iommulab()
        .arg("validate")
        .arg(&a)
        .arg(&b)
        .assert()
        .success()
        .stdout(
            predicate::str::contains("a.txt: Linux 6.12")
                .and(predicate::str::contains("total: Linux 6.12")),
        );
    iommulab()
        .arg("validate")
        .arg(&b)
        .assert()
        .success()
        .stdout(predicate::str::contains("mapped before tracing"));
    iommulab()
        .args(["validate", "--strict-trace"])
        .arg(&b)
        .assert()
        .code(1)
        .stderr(
            predicate::str::contains("b.txt:2:").and(predicate::str::contains("--strict-trace")),
        );
    // In the wrong order: the second starts before the first.
    iommulab()
        .arg("validate")
        .arg(&b)
        .arg(&a)
        .assert()
        .code(1)
        .stderr(predicate::str::contains("in the order they were recorded"));
    // --lazy without recorded frees says, in one line, that exact rates are not expected.
    iommulab()
        .args(["validate", "--lazy"])
        .arg(&a)
        .assert()
        .success()
        .stdout(predicate::str::contains("exact rates are not expected").count(1));
}

/// `--csv` prints the scores (a total and one line per device); `-o FILE.csv` and `-o
/// FILE.json` write what `--csv` and `--json` print.
#[test]
fn csv_and_out_files() {
    let csv = iommulab()
        .args(["validate", "--csv"])
        .arg(qemu_trace())
        .output()
        .unwrap();
    assert!(csv.status.success());
    let csv = String::from_utf8(csv.stdout).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(
        lines[0],
        "trace,device,allocations,scored,open_loop_exact,open_loop_rate,one_step_exact,one_step_rate"
    );
    assert_eq!(
        lines.len(),
        1 + 1 + 4,
        "header, total, four devices:\n{csv}"
    );
    assert!(lines[1].contains(",total,3263,3263,3118,"), "{}", lines[1]);
    let d = TempDir::new().unwrap();
    let (c, j) = (d.path().join("v.csv"), d.path().join("v.json"));
    iommulab()
        .args(["validate", "-q"])
        .arg(qemu_trace())
        .arg("-o")
        .arg(&c)
        .arg("--out")
        .arg(&j)
        .assert()
        .success();
    assert_eq!(std::fs::read_to_string(&c).unwrap(), csv);
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&j).unwrap()).unwrap();
    assert_eq!(v["allocations"], 3263);
}
