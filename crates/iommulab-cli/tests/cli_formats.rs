//! One meaning for the output flags on every command that prints a table: `--json` and
//! `--csv` print, `-o/--out FILE` writes, in the format the file's name picks (`.csv` is CSV,
//! any other name JSON), the same text the printing flag gives; repeatable.

use std::fs;
use std::path::{Path, PathBuf};

use predicates::prelude::*;
use tempfile::TempDir;

fn iommulab() -> assert_cmd::Command {
    assert_cmd::cargo::cargo_bin_cmd!("iommulab")
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn qemu() -> PathBuf {
    repo().join("traces/qemu-virtio-6.12.95+deb12-cloud-amd64.txt.zst")
}

/// What a successful command prints.
fn stdout_of(args: &[&std::ffi::OsStr]) -> String {
    let out = iommulab().args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// What the host's clock measures differs from run to run; everything else is modeled and
/// the same.
const MEASURED: [&str; 3] = ["software_ns_per_op", "measured_iops", "wall_seconds"];

/// The CSV without its measured columns.
fn modeled_csv(csv: &str) -> Vec<Vec<String>> {
    let header: Vec<&str> = csv.lines().next().unwrap_or("").split(',').collect();
    csv.lines()
        .map(|l| {
            l.split(',')
                .zip(&header)
                .filter(|(_, h)| !MEASURED.contains(h))
                .map(|(c, _)| c.to_string())
                .collect()
        })
        .collect()
}

/// The JSON without its measured fields.
fn drop_measured(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Object(m) => {
            for k in MEASURED {
                m.remove(k);
            }
            m.values_mut().for_each(drop_measured);
        }
        serde_json::Value::Array(a) => a.iter_mut().for_each(drop_measured),
        _ => {}
    }
}

/// Runs `args` three times: with `--csv`, with `--json`, and with `--out X.csv --out X.json`,
/// and checks the files hold what the flags print. Returns the CSV.
fn prints_what_it_writes(args: &[&std::ffi::OsStr]) -> String {
    let dir = TempDir::new().unwrap();
    let (csv_file, json_file) = (dir.path().join("r.csv"), dir.path().join("r.json"));
    let with = |extra: &[&std::ffi::OsStr]| {
        let mut a = args.to_vec();
        a.extend_from_slice(extra);
        stdout_of(&a)
    };
    let csv = with(&["--csv".as_ref()]);
    let json = with(&["--json".as_ref()]);
    let table = with(&[
        "--out".as_ref(),
        csv_file.as_os_str(),
        "-o".as_ref(),
        json_file.as_os_str(),
    ]);
    assert_eq!(
        modeled_csv(&fs::read_to_string(&csv_file).unwrap()),
        modeled_csv(&csv),
        "{args:?}"
    );
    let mut written: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(&json_file).unwrap()).unwrap();
    let mut printed: serde_json::Value = serde_json::from_str(&json).unwrap();
    drop_measured(&mut written);
    drop_measured(&mut printed);
    assert_eq!(written, printed, "{args:?}");
    // The table is neither.
    assert_ne!(table, csv);
    assert!(csv.lines().count() >= 2, "a header and rows: {csv}");
    let width = csv.lines().next().unwrap().split(',').count();
    assert!(width > 1, "{csv}");
    csv
}

#[test]
fn run_prints_and_writes_json_and_csv() {
    let exp = repo().join("examples/guest-netperf.toml");
    let csv = prints_what_it_writes(&["run".as_ref(), "-q".as_ref(), exp.as_os_str()]);
    assert!(csv.starts_with("config,"), "{csv}");
    assert_eq!(csv.lines().count(), 2, "one run: {csv}");
}

#[test]
fn mrc_prints_and_writes_json_and_csv_of_every_quota() {
    let csv = prints_what_it_writes(&["mrc".as_ref(), qemu().as_os_str(), "-q".as_ref()]);
    let mut lines = csv.lines();
    assert_eq!(
        lines.next(),
        Some("policy,pinning,quota,hits,misses,refused,hit_rate,maps,distinct_pages")
    );
    // Every quota 0..=distinct pages, where the table shows a subset.
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    let distinct: usize = rows[0][8].parse().unwrap();
    assert_eq!(rows.len(), distinct + 1);
    for (q, r) in rows.iter().enumerate() {
        assert_eq!(r[2], q.to_string());
    }
}

#[test]
fn compare_and_replay_write_what_they_print() {
    let csv = prints_what_it_writes(&["compare".as_ref(), qemu().as_os_str(), "-q".as_ref()]);
    assert!(
        csv.contains("linux-strict") && csv.contains("linux-lazy"),
        "{csv}"
    );
    let csv = prints_what_it_writes(&[
        "replay".as_ref(),
        qemu().as_os_str(),
        "-q".as_ref(),
        "--config".as_ref(),
        "linux-strict".as_ref(),
    ]);
    assert!(csv.lines().nth(1).unwrap().starts_with("linux-strict,"));
}

/// The guest model's replay has no CSV form: a `.csv` output is refused before the run and
/// nothing is written.
#[test]
fn a_csv_out_without_a_csv_form_is_refused_before_the_run() {
    let dir = TempDir::new().unwrap();
    let out = dir.path().join("g.csv");
    iommulab()
        .arg("replay")
        .arg(qemu())
        .args(["-q", "--strategy", "on-demand", "--out"])
        .arg(&out)
        .assert()
        .code(1)
        .stdout("")
        .stderr(predicate::str::contains("g.csv").and(predicate::str::contains("no CSV form")));
    assert!(!out.exists());
    iommulab()
        .arg("replay")
        .arg(qemu())
        .args(["-q", "--strategy", "on-demand", "--csv"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("--csv"));
}
