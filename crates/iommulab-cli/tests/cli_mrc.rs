//! End-to-end tests of `iommulab mrc`: both views of the committed real QEMU
//! trace, quota ranges and lists, every policy, the table and JSON outputs, and clear errors.
//! The curves' values are checked against libCacheSim in `libcachesim.rs`.

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

fn ftrace_data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../iommulab/tests/data/ftrace")
        .join(name)
}

fn ok_stdout(trace: &Path, args: &[&str]) -> String {
    let out = iommulab()
        .arg("mrc")
        .arg(trace)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "mrc {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn json(trace: &Path, args: &[&str]) -> Value {
    let mut a = args.to_vec();
    a.push("--json");
    serde_json::from_str(&ok_stdout(trace, &a)).unwrap()
}

fn u64s(v: &Value) -> Vec<u64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap())
        .collect()
}

fn f64s(v: &Value) -> Vec<f64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect()
}

/// A generated trace in a temporary folder.
fn generated(dir: &TempDir, workload: &str, events: u32) -> PathBuf {
    let p = dir.path().join(format!("{workload}.iot"));
    iommulab()
        .args(["trace", "generate", workload, "--events"])
        .arg(events.to_string())
        .arg("-o")
        .arg(&p)
        .assert()
        .success();
    p
}

/// The default is the page sequence of LRU over every quota up to the distinct pages, in one
/// pass; the curve is monotone, starts at 0 (all refused) and ends at the cold misses.
#[test]
fn default_is_the_lru_page_sequence_over_every_quota() {
    let c = json(&qemu_trace(), &[]);
    assert_eq!(c["policy"], "lru");
    assert_eq!(c["pinning"], false);
    assert_eq!(c["method"], "stack_distance");
    assert_eq!(c["exact"], true);
    let maps = c["maps"].as_u64().unwrap();
    let distinct = c["distinct_pages"].as_u64().unwrap();
    let quota = u64s(&c["quota"]);
    assert_eq!(quota, (0..=distinct).collect::<Vec<_>>());
    let (hits, misses, refused) = (u64s(&c["hits"]), u64s(&c["misses"]), u64s(&c["refused"]));
    assert_eq!((hits[0], refused[0]), (0, maps));
    assert!(refused[1..].iter().all(|&r| r == 0));
    assert!(hits.windows(2).all(|w| w[0] <= w[1]));
    assert_eq!(
        *misses.last().unwrap(),
        distinct,
        "only cold misses at the top"
    );
    let rate = f64s(&c["hit_rate"]);
    assert!((rate[8] - hits[8] as f64 / maps as f64).abs() < 1e-12);
    // The page sequence reads the maps alone: the pages in flight are not counted.
    assert_eq!(c["max_pinned"], Value::Null);
}

/// The pinned view simulates the map cache: at small quotas in-flight pages are pinned, maps
/// are refused and LRU hits far less than on the page sequence.
#[test]
fn pinned_view_refuses_maps_and_hits_less_at_small_quotas() {
    let t = qemu_trace();
    let seq = json(&t, &["--quotas", "8,64"]);
    let pinned = json(&t, &["--pinning", "--quotas", "8,64"]);
    assert_eq!(pinned["pinning"], true);
    assert_eq!(pinned["method"], "simulation");
    assert_eq!(pinned["maps"], seq["maps"]);
    // The trace keeps hundreds of pages in flight (S1.2's |P|).
    assert!(pinned["max_pinned"].as_u64().unwrap() > 100);
    let (s, p) = (f64s(&seq["hit_rate"]), f64s(&pinned["hit_rate"]));
    assert!(
        p[0] < s[0] && p[1] < s[1],
        "pinned {p:?} vs page sequence {s:?}"
    );
    assert!(u64s(&pinned["refused"]).iter().all(|&r| r > 0));
    assert!(u64s(&seq["refused"]).iter().all(|&r| r == 0));
}

/// `--quotas` are sorted and deduplicated and equal the full curve's entries; `--max-quota`
/// gives 0..=N.
#[test]
fn quota_lists_and_max_quota_pick_entries_of_the_full_curve() {
    let t = qemu_trace();
    let full = json(&t, &["--policy", "opt"]);
    let listed = json(&t, &["--policy", "opt", "--quotas", "64,3,64,0,1000000"]);
    assert_eq!(u64s(&listed["quota"]), [0, 3, 64, 1_000_000]);
    let fh = u64s(&full["hits"]);
    let lh = u64s(&listed["hits"]);
    assert_eq!(&lh[..3], &[fh[0], fh[3], fh[64]]);
    assert_eq!(
        lh[3],
        *fh.last().unwrap(),
        "past the distinct pages nothing changes"
    );
    let short = json(&t, &["--policy", "opt", "--max-quota", "5"]);
    assert_eq!(u64s(&short["quota"]), [0, 1, 2, 3, 4, 5]);
    assert_eq!(u64s(&short["hits"]), &fh[..6]);
}

/// Every policy runs; FIFO and the batching policies simulate, and OPT is never below LRU.
#[test]
fn every_policy_runs_and_opt_bounds_lru() {
    let dir = TempDir::new().unwrap();
    let t = generated(&dir, "apache-sendfile", 20_000);
    let q = ["--max-quota", "12"];
    let lru = json(&t, &q);
    let opt = json(&t, &[&["--policy", "opt"][..], &q].concat());
    for (l, o) in f64s(&lru["hit_rate"]).iter().zip(f64s(&opt["hit_rate"])) {
        assert!(o >= *l - 1e-12, "opt {o} < lru {l}");
    }
    for policy in ["fifo", "opt-batch", "prefetch"] {
        let c = json(&t, &[&["--policy", policy][..], &q].concat());
        assert_eq!(c["method"], "simulation", "{policy}");
        assert_eq!(c["policy"], policy.replace('-', "_"));
        assert_eq!(u64s(&c["quota"]).len(), 13);
        assert!(u64s(&c["hits"])[12] > 0, "{policy}");
        assert!(c["policy_config"]["kind"].is_string());
    }
}

/// The table prints a header and, for a long curve, a readable subset with a note; a short
/// curve or a `--quotas` list prints every row.
#[test]
fn table_shows_a_subset_of_long_curves_and_every_listed_quota() {
    let t = qemu_trace();
    let long = ok_stdout(&t, &[]);
    for s in [
        "policy          lru",
        "page sequence",
        "hit rate",
        "quotas shown",
    ] {
        assert!(long.contains(s), "{s:?} not in\n{long}");
    }
    let rows = |text: &str| {
        text.lines()
            .skip_while(|l| !l.contains("hit rate"))
            .skip(1)
            .take_while(|l| !l.is_empty())
            .count()
    };
    assert!((15..=40).contains(&rows(&long)), "{long}");
    let listed = ok_stdout(&t, &["--pinning", "--quotas", "1,2,3"]);
    assert!(listed.contains("pinned map cache") && !listed.contains("quotas shown"));
    assert_eq!(rows(&listed), 3, "{listed}");
}

/// Bad input: a missing file or a bad trace line exits 1 naming it (and `--lenient` skips
/// the line); a bad policy or conflicting flags are usage errors (exit 2); a quota above the
/// limit names the limit.
#[test]
fn bad_input_is_a_clear_error() {
    iommulab()
        .args(["mrc", "/nonexistent/t.iot"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("/nonexistent/t.iot"));
    let bad = ftrace_data("malformed.txt");
    iommulab()
        .arg("mrc")
        .arg(&bad)
        .assert()
        .code(1)
        .stderr(predicate::str::contains("malformed.txt:3:"));
    // The same with a few quotas, simulated while the trace is read: no curve is printed.
    iommulab()
        .arg("mrc")
        .arg(&bad)
        .args(["--quotas", "8", "--json"])
        .assert()
        .code(1)
        .stdout(predicate::str::is_empty())
        .stderr(predicate::str::contains("malformed.txt:3:"));
    let c = json(&bad, &["--lenient"]);
    assert!(c["maps"].as_u64().unwrap() > 0);
    let t = qemu_trace();
    for args in [
        &["--policy", "clock"][..],
        &["--max-quota", "3", "--quotas", "4"],
        &["--quotas", "1,x"],
        &["--max-quota", "-1"],
    ] {
        iommulab().arg("mrc").arg(&t).args(args).assert().code(2);
    }
    iommulab()
        .arg("mrc")
        .arg(&t)
        .args(["--max-quota", "100000000000"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("max_quota").and(predicate::str::contains("16777216")));
    iommulab()
        .arg("mrc")
        .arg(&t)
        .args(["--quotas", "8,100000000000"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("quotas").and(predicate::str::contains("16777216")));
}

/// libCacheSim's `.oracleGeneral` is an input: the export of a trace gives the trace's own
/// curves (every quota, and listed ones), one page in flight at a time; `trace stats` counts
/// its requests as the trace's page maps.
#[test]
fn an_oracle_general_export_reads_back_as_the_page_sequence() {
    let dir = TempDir::new().unwrap();
    let t = generated(&dir, "apache-sendfile", 6000);
    let og = dir.path().join("t.oracleGeneral");
    iommulab()
        .args(["trace", "convert", "-q"])
        .arg(&t)
        .arg("-o")
        .arg(&og)
        .assert()
        .success();
    for args in [
        &["--policy", "opt"][..],
        &["--policy", "lru", "--quotas", "3,40"],
        &["--policy", "fifo", "--max-quota", "30"],
        &["--policy", "prefetch", "--quotas", "8"],
    ] {
        let (a, b) = (json(&t, args), json(&og, args));
        for key in [
            "quota",
            "hits",
            "misses",
            "refused",
            "maps",
            "distinct_pages",
            "method",
        ] {
            assert_eq!(a[key], b[key], "{args:?}: {key}");
        }
        // One request in flight at a time.
        assert_eq!(b["max_pinned"], 1);
    }
    let stats = iommulab()
        .args(["trace", "stats", "--json"])
        .arg(&og)
        .assert()
        .success();
    let stats: Value = serde_json::from_slice(&stats.get_output().stdout).unwrap();
    let c = json(&t, &["--quotas", "1"]);
    assert_eq!(stats["requests"], c["maps"]);
    assert_eq!(stats["distinct_pages"], c["distinct_pages"]);
}

/// A file that ends inside a request is an error naming the byte where that request starts,
/// and no output file is left.
#[test]
fn a_truncated_oracle_general_file_is_an_error_at_its_byte() {
    let dir = TempDir::new().unwrap();
    let og = dir.path().join("cut.oracleGeneral");
    let mut bytes = Vec::new();
    for obj in [5u64, 6, 7] {
        bytes.extend_from_slice(&0u32.to_le_bytes());
        bytes.extend_from_slice(&obj.to_le_bytes());
        bytes.extend_from_slice(&4096u32.to_le_bytes());
        bytes.extend_from_slice(&(-1i64).to_le_bytes());
    }
    bytes.truncate(24 * 2 + 10);
    std::fs::write(&og, bytes).unwrap();
    let out = dir.path().join("curve.json");
    iommulab()
        .arg("mrc")
        .arg(&og)
        .arg("--out")
        .arg(&out)
        .assert()
        .code(1)
        .stderr(
            predicate::str::contains("cut.oracleGeneral")
                .and(predicate::str::contains("byte 48"))
                .and(predicate::str::contains("24-byte oracleGeneral request"))
                .and(predicate::str::contains("ends 10 bytes into it")),
        );
    assert!(!out.exists());
    iommulab()
        .args(["trace", "stats"])
        .arg(&og)
        .assert()
        .code(1)
        .stderr(predicate::str::contains("byte 48"));
}
