//! End-to-end tests of `iommulab trace ...` and `iommulab replay`: import of real
//! ftrace text shapes, stats, conversions, generated workloads, replay, and clear errors for
//! bad input with no output left behind.

use std::fs;
use std::path::{Path, PathBuf};

use assert_cmd::Command;
use predicates::prelude::*;
use serde_json::Value;
use tempfile::TempDir;

fn iommulab() -> Command {
    assert_cmd::cargo::cargo_bin_cmd!("iommulab")
}

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../iommulab/tests/data/ftrace")
        .join(name)
}

fn ok_stdout(args: &[&str]) -> String {
    let out = iommulab().args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn json(args: &[&str]) -> Value {
    serde_json::from_str(&ok_stdout(args)).unwrap()
}

fn files_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// Writes `events` events of the built-in `workload` to `out`.
fn generate(workload: &str, events: u64, out: &Path) {
    ok_stdout(&[
        "trace",
        "generate",
        workload,
        "--events",
        &events.to_string(),
        "-o",
        out.to_str().unwrap(),
    ]);
}

/// ftrace text (tracefs shape) imports to the native format; stats report the DMA-API view.
#[test]
fn import_then_stats_reports_maps_unmaps_and_pages() {
    let dir = TempDir::new().unwrap();
    let out = dir.path().join("net.iot");
    ok_stdout(&[
        "trace",
        "import",
        data("tracefs_net.txt").to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    let s = json(&["trace", "stats", out.to_str().unwrap(), "--json"]);
    for key in ["maps", "unmaps", "distinct_pages"] {
        assert!(s["dma_api"][key].is_u64(), "stats lacks {key}: {s}");
    }
    // The DMA API: one dma_map_page, one map_sg counted once, one dma_alloc; the two
    // iommu:map records are the IOMMU page-table layer, reported apart, never added.
    assert_eq!(s["dma_api"]["maps"], 3, "{s}");
    assert_eq!(s["dma_api"]["unmaps"], 3, "{s}");
    assert_eq!(s["iommu"]["map_events"], 2, "{s}");
    assert_eq!(s["iommu"]["unmap_events"], 2, "{s}");
    assert!(s.get("maps").is_none(), "no summed `maps`: {s}");
}

/// trace-cmd report output imports too.
#[test]
fn trace_cmd_report_output_imports() {
    let dir = TempDir::new().unwrap();
    let out = dir.path().join("tc.csv");
    ok_stdout(&[
        "trace",
        "import",
        data("trace_cmd_report.txt").to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    let text = fs::read_to_string(&out).unwrap();
    assert!(text.lines().any(|l| l.contains(",map,")), "{text}");
}

/// A malformed event line is an error naming file, line and what was expected; nothing is
/// written. With --lenient the line is skipped and counted.
#[test]
fn malformed_line_names_file_and_line_and_leaves_no_output() {
    let dir = TempDir::new().unwrap();
    let out = dir.path().join("bad.iot");
    let input = data("malformed.txt");
    iommulab()
        .args([
            "trace",
            "import",
            input.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
        ])
        .assert()
        .failure()
        .stderr(
            predicate::str::contains("malformed.txt:3:").and(predicate::str::contains("expected")),
        );
    assert!(
        files_in(dir.path()).is_empty(),
        "left {:?}",
        files_in(dir.path())
    );
    let text = ok_stdout(&[
        "trace",
        "import",
        input.to_str().unwrap(),
        "--lenient",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(text.contains("malformed skipped"), "{text}");
    assert!(out.exists());
}

/// native → CSV → native keeps every event: the two CSV renderings are identical.
#[test]
fn native_csv_native_round_trip_is_exact() {
    let dir = TempDir::new().unwrap();
    let a = dir.path().join("a.iot");
    let b = dir.path().join("b.csv");
    let c = dir.path().join("c.iot");
    let d = dir.path().join("d.csv");
    generate("block", 5000, &a);
    ok_stdout(&[
        "trace",
        "convert",
        a.to_str().unwrap(),
        "-o",
        b.to_str().unwrap(),
    ]);
    ok_stdout(&[
        "trace",
        "convert",
        b.to_str().unwrap(),
        "-o",
        c.to_str().unwrap(),
    ]);
    ok_stdout(&[
        "trace",
        "convert",
        c.to_str().unwrap(),
        "-o",
        d.to_str().unwrap(),
    ]);
    assert_eq!(
        fs::read(&a).unwrap(),
        fs::read(&c).unwrap(),
        "native files differ"
    );
    assert_eq!(
        fs::read_to_string(&b).unwrap(),
        fs::read_to_string(&d).unwrap()
    );
}

/// Every built-in workload can be written out as a trace and replayed, and what its driver
/// did passes dma-debug's checks: no buffer mapped twice while live (a receive ring drawing
/// a posted slab object again), no streaming map written as a coherent allocation (a
/// sender's skb heads were).
#[test]
fn every_workload_generates_a_replayable_trace() {
    let dir = TempDir::new().unwrap();
    for w in [
        "pseudo-scsi",
        "netperf-send",
        "apache-sendfile",
        "block",
        "uniform-random",
        "net-rx",
        "nic-duplex",
    ] {
        let p = dir.path().join(format!("{w}.iot"));
        generate(w, 3000, &p);
        let s = json(&["trace", "stats", p.to_str().unwrap(), "--json"]);
        assert!(s["dma_api"]["maps"].as_u64().unwrap() > 0, "{w}: {s}");
        assert_eq!(
            s["dma_api"]["maps"], s["dma_api"]["unmaps"],
            "{w}: generated traces close every mapping: {s}"
        );
        assert_eq!(s["dma_api"]["by_kind"]["alloc"], 0, "{w}: {s}");
        let c = json(&["check", p.to_str().unwrap(), "--json"]);
        assert_eq!(c["findings"].as_array().map(Vec::len), Some(0), "{w}: {c}");
        let r = json(&[
            "replay",
            p.to_str().unwrap(),
            "--config",
            "modern",
            "--json",
        ]);
        assert_eq!(r["replay"]["unmatched_unmaps"], 0, "{w}: {r}");
        assert_eq!(
            r["ops"], s["dma_api"]["unmaps"],
            "{w}: every unmap replayed: {r}"
        );
    }
}

/// Replay through several configurations; a malicious device finds deferred flushing's
/// window and not strict's.
#[test]
fn replay_shows_the_deferred_window_and_not_the_strict_one() {
    let dir = TempDir::new().unwrap();
    let p = dir.path().join("n.iot");
    generate("netperf-send", 20000, &p);
    let v = json(&[
        "replay",
        p.to_str().unwrap(),
        "--config",
        "strict,default",
        "--malicious",
        "--json",
    ]);
    let arr = v.as_array().unwrap();
    assert_eq!(arr[0]["config"], "strict");
    assert_eq!(arr[0]["stale_accesses"], 0);
    assert!(arr[1]["stale_accesses"].as_u64().unwrap() > 0, "{v}");
}

/// libCacheSim's oracleGeneral export: 24 bytes per request.
#[test]
fn oracle_general_export_has_24_byte_records() {
    let dir = TempDir::new().unwrap();
    let a = dir.path().join("a.iot");
    let o = dir.path().join("a.oracleGeneral");
    generate("pseudo-scsi", 1000, &a);
    ok_stdout(&[
        "trace",
        "convert",
        a.to_str().unwrap(),
        "-o",
        o.to_str().unwrap(),
    ]);
    let len = fs::metadata(&o).unwrap().len();
    assert!(len > 0 && len.is_multiple_of(24), "{len}");
}

/// A truncated native file is reported as such, with the byte offset.
#[test]
fn truncated_native_trace_is_an_error_with_offset() {
    let dir = TempDir::new().unwrap();
    let a = dir.path().join("a.iot");
    generate("uniform-random", 20000, &a);
    let bytes = fs::read(&a).unwrap();
    let cut = dir.path().join("cut.iot");
    fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    iommulab()
        .args(["trace", "stats", cut.to_str().unwrap()])
        .assert()
        .failure()
        .stderr(predicate::str::contains("cut.iot").and(predicate::str::contains("byte")));
}

/// `replay --out` naming the trace is refused before anything runs (bare metal and guest
/// model alike): the JSON would have replaced the trace.
#[test]
fn replay_out_naming_the_trace_is_refused_and_keeps_it() {
    let dir = TempDir::new().unwrap();
    let t = dir.path().join("t.iot");
    generate("block", 200, &t);
    let before = fs::read(&t).unwrap();
    for extra in [&[][..], &["--strategy", "direct"][..]] {
        iommulab()
            .args(["replay", t.to_str().unwrap(), "--out", t.to_str().unwrap()])
            .args(extra)
            .assert()
            .failure()
            .stdout("")
            .stderr(predicate::str::contains("same file as the trace"));
        assert_eq!(fs::read(&t).unwrap(), before, "with {extra:?}");
    }
    assert_eq!(files_in(dir.path()), ["t.iot"]);
}

/// Bad arguments: an unknown workload is a usage error (exit 2); a missing file names it.
#[test]
fn bad_trace_arguments_are_clear_errors() {
    iommulab()
        .args(["trace", "generate", "bogus", "-o", "x.iot"])
        .assert()
        .code(2);
    iommulab()
        .args(["trace", "stats", "/nonexistent/t.iot"])
        .assert()
        .failure()
        .stderr(predicate::str::contains("/nonexistent/t.iot"));
}

/// The committed real trace has both layers. `trace stats` keeps them apart, and the
/// `.oracleGeneral` export is the DMA-API layer's page sequence as replay reads it (the
/// `iommu:map` duplicates skipped): as many requests as `mrc` has page maps, not the sum of
/// both layers' pages.
#[test]
fn real_trace_layers_are_apart_and_the_export_uses_the_dma_api() {
    let trace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../traces/qemu-virtio-6.12.95+deb12-cloud-amd64.txt.zst");
    let t = trace.to_str().unwrap();
    let s = json(&["trace", "stats", t, "--json"]);
    let dma_pages = s["dma_api"]["page_maps"].as_u64().unwrap();
    let iommu_pages = s["iommu"]["pages_mapped"].as_u64().unwrap();
    assert!(dma_pages > 0 && iommu_pages > 0, "{s}");
    let table = ok_stdout(&["trace", "stats", t]);
    assert!(
        table.contains("DMA API layer") && table.contains("IOMMU page-table layer"),
        "{table}"
    );

    let dir = TempDir::new().unwrap();
    let og = dir.path().join("t.oracleGeneral");
    ok_stdout(&["trace", "convert", t, "-o", og.to_str().unwrap()]);
    let requests = fs::metadata(&og).unwrap().len() / 24;
    let curve = json(&["mrc", t, "--quotas", "8", "--json"]);
    assert_eq!(requests, curve["maps"].as_u64().unwrap());
    assert_eq!(requests, 10_194);
    // Within the DMA layer's page count (the replay spreads merged scatter-gather lengths
    // over the segments that lack one), far from both layers added up.
    assert!(
        requests.abs_diff(dma_pages) < 20,
        "{requests} vs {dma_pages}"
    );
    assert!(requests < dma_pages + iommu_pages - 1000);
}

/// A trace with no DMA events gives no run: `replay` (bare metal and guest model) and `mrc`
/// refuse it by name and write no output, instead of printing a time per I/O of zero I/Os.
/// `trace stats` still describes it (zero counts are a description).
#[test]
fn a_trace_without_dma_events_is_refused_by_replay_and_mrc() {
    let dir = TempDir::new().unwrap();
    let t = dir.path().join("t.txt");
    fs::write(&t, "# tracer: nop\n#\n").unwrap();
    let out = dir.path().join("r.json");
    let (t, out) = (t.to_str().unwrap(), out.to_str().unwrap());
    for extra in [&[][..], &["--strategy", "on-demand"][..]] {
        iommulab()
            .args(["replay", t, "--out", out])
            .args(extra)
            .assert()
            .code(1)
            .stdout("")
            .stderr(predicate::str::contains(
                "t.txt: nothing to replay: no DMA-API map, unmap or access event",
            ));
    }
    iommulab()
        .args(["mrc", t, "--policy", "lru", "--quotas", "4"])
        .assert()
        .code(1)
        .stdout("")
        .stderr(predicate::str::contains("t.txt: nothing to replay"));
    assert_eq!(files_in(dir.path()), ["t.txt"]);
    ok_stdout(&["trace", "stats", t]);
}

/// A format asked for that the contents contradict is refused, and libCacheSim's export,
/// which `trace convert` writes, is named when it is given back as input.
#[test]
fn a_wrong_format_or_a_libcachesim_export_is_refused_by_name() {
    let dir = TempDir::new().unwrap();
    let a = dir.path().join("a.iot");
    let c = dir.path().join("a.csv");
    let o = dir.path().join("a.oracleGeneral");
    generate("block", 200, &a);
    for out in [&c, &o] {
        ok_stdout(&[
            "trace",
            "convert",
            a.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
        ]);
    }
    iommulab()
        .args(["replay", c.to_str().unwrap(), "--format", "native"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "asked to read an iommulab native trace (.iot), but its contents are an iommulab CSV trace",
        ));
    for cmd in ["replay", "check", "validate"] {
        iommulab()
            .args([cmd, o.to_str().unwrap()])
            .assert()
            .code(1)
            .stderr(
                predicate::str::contains("holds page requests, not DMA events").and(
                    predicate::str::contains("`iommulab mrc` and `iommulab trace stats`"),
                ),
            );
    }
}

/// A `trace generate` stopped by SIGINT or SIGTERM while it writes removes its hidden
/// temporary file and exits with 128 + the signal (130, 143), as a shell reports it; before,
/// the file stayed.
#[cfg(unix)]
#[test]
fn a_signal_while_writing_leaves_no_temporary_file() {
    use std::time::{Duration, Instant};
    for (signal, code) in [("-INT", 130), ("-TERM", 143)] {
        let dir = TempDir::new().unwrap();
        let out = dir.path().join("big.iot");
        let child = std::process::Command::new(assert_cmd::cargo::cargo_bin!("iommulab"))
            .args([
                "trace",
                "generate",
                "uniform-random",
                "--events",
                "200000000",
                "-q",
                "-o",
            ])
            .arg(&out)
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // Wait until the temporary file has bytes: the handler is installed before any
        // output (an empty file may be the check that the folder is writable).
        let start = Instant::now();
        while !std::fs::read_dir(dir.path())
            .unwrap()
            .any(|e| e.unwrap().metadata().unwrap().len() > 0)
        {
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "no temporary file appeared"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        let kill = std::process::Command::new("kill")
            .arg(signal)
            .arg(child.id().to_string())
            .status()
            .unwrap();
        assert!(kill.success());
        let output = child.wait_with_output().unwrap();
        assert_eq!(output.status.code(), Some(code), "{signal}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains("removed 1 unfinished output file"),
            "{signal}: {stderr}"
        );
        assert!(
            files_in(dir.path()).is_empty(),
            "{signal}: {:?}",
            files_in(dir.path())
        );
    }
}
