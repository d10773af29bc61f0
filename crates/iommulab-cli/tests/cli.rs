//! End-to-end tests of the `iommulab` binary (`assert_cmd` + `predicates`, as
//! hyperfine does): exit codes, stderr wording, JSON/CSV/table shapes, and that output files
//! are written whole or not at all.

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use assert_cmd::Command;
use predicates::prelude::*;
use serde_json::Value;
use tempfile::TempDir;

/// The six named configurations, in the order the tool runs them.
const ALL_CONFIGS: [&str; 6] = [
    "disabled",
    "default",
    "strict",
    "bitmap",
    "strict-bitmap",
    "modern",
];

/// A fresh `iommulab` command.
fn iommulab() -> Command {
    assert_cmd::cargo::cargo_bin_cmd!("iommulab")
}

/// Runs `iommulab` with `args`, asserts success with a quiet stderr, and returns stdout.
fn stdout_of(args: &[&str]) -> String {
    let out = iommulab().args(args).assert().success().stderr("");
    String::from_utf8(out.get_output().stdout.clone()).expect("stdout is UTF-8")
}

/// Runs `iommulab` with `args` and parses its stdout as JSON.
fn json_of(args: &[&str]) -> Value {
    let text = stdout_of(args);
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("stdout is not JSON ({e}):\n{text}"))
}

/// Writes `text` to `name` inside `dir` and returns its path.
fn write_file(dir: &TempDir, name: &str, text: &str) -> PathBuf {
    let p = dir.path().join(name);
    fs::write(&p, text).expect("write fixture");
    p
}

/// Every entry under `dir`, recursively, relative to it, sorted.
fn tree(dir: &Path) -> Vec<String> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) {
        for e in fs::read_dir(dir).expect("read_dir") {
            let p = e.expect("dir entry").path();
            out.push(p.strip_prefix(root).unwrap().display().to_string());
            if p.is_dir() {
                walk(root, &p, out);
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

fn field<'a>(v: &'a Value, key: &str) -> &'a Value {
    v.get(key)
        .unwrap_or_else(|| panic!("missing `{key}` in {v:#}"))
}

fn u64_of(v: &Value, key: &str) -> u64 {
    field(v, key)
        .as_u64()
        .unwrap_or_else(|| panic!("`{key}` is not an unsigned integer in {v:#}"))
}

fn f64_of(v: &Value, key: &str) -> f64 {
    field(v, key)
        .as_f64()
        .unwrap_or_else(|| panic!("`{key}` is not a number in {v:#}"))
}

fn str_of<'a>(v: &'a Value, key: &str) -> &'a str {
    field(v, key)
        .as_str()
        .unwrap_or_else(|| panic!("`{key}` is not a string in {v:#}"))
}

fn array_of(v: &Value) -> &Vec<Value> {
    v.as_array()
        .unwrap_or_else(|| panic!("expected a JSON array, got {v:#}"))
}

// ---------------------------------------------------------------------------------------
// bench: JSON
// ---------------------------------------------------------------------------------------

/// One configuration with `--json` prints a single JSON object with the documented keys.
#[test]
fn bench_json_single_config_prints_one_object() {
    let v = json_of(&["bench", "--config", "modern", "--ops", "20000", "--json"]);
    assert!(v.is_object(), "expected an object, got {v:#}");
    assert_eq!(str_of(&v, "config"), "modern");
    assert_eq!(u64_of(&v, "ops"), 20_000);
    assert!(f64_of(&v, "software_ns_per_op") > 0.0);
    assert!(f64_of(&v, "modeled_ns_per_op") > 0.0);
    assert!(f64_of(&v, "iops") > 0.0);
    let _ = u64_of(&v, "iotlb_flushes");
    assert_eq!(
        u64_of(&v, "stale_accesses"),
        0,
        "a benign device is never stale"
    );
    assert!(field(&v, "relative_to_disabled").is_null());
}

/// With a malicious device, deferred flushing (default) leaves stale windows; strict does not.
#[test]
fn bench_malicious_device_exploits_deferred_flush_but_not_strict() {
    let v = json_of(&[
        "bench",
        "--config",
        "default,strict",
        "--malicious",
        "--ops",
        "20000",
        "--json",
    ]);
    let runs = array_of(&v);
    assert_eq!(runs.len(), 2, "{v:#}");
    assert_eq!(str_of(&runs[0], "config"), "default");
    assert_eq!(str_of(&runs[1], "config"), "strict");
    assert!(runs.iter().all(|r| field(r, "malicious") == true));
    assert!(
        u64_of(&runs[0], "stale_accesses") > 0,
        "default's deferred flush should leave a window: {:#}",
        runs[0]
    );
    assert_eq!(u64_of(&runs[1], "stale_accesses"), 0);
}

/// A `disabled` run in the batch fills `relative_to_disabled` for every run.
#[test]
fn bench_relative_to_disabled_is_filled_when_disabled_runs() {
    let v = json_of(&[
        "bench",
        "--config",
        "disabled,default",
        "--ops",
        "20000",
        "--json",
    ]);
    let runs = array_of(&v);
    assert_eq!(runs.len(), 2);
    let off = f64_of(&runs[0], "relative_to_disabled");
    let def = f64_of(&runs[1], "relative_to_disabled");
    assert!(
        (off - 1.0).abs() < 1e-12,
        "disabled relative to itself: {off}"
    );
    assert!(def > 0.0 && def < 1.0, "default should be slower: {def}");
}

/// `--repeats` runs each configuration with consecutive seeds.
#[test]
fn bench_repeats_use_consecutive_seeds() {
    let v = json_of(&[
        "bench",
        "--config",
        "strict",
        "--ops",
        "500",
        "--repeats",
        "3",
        "--seed",
        "7",
        "--json",
    ]);
    let seeds: Vec<u64> = array_of(&v).iter().map(|r| u64_of(r, "seed")).collect();
    assert_eq!(seeds, [7, 8, 9]);
}

// ---------------------------------------------------------------------------------------
// bench: table
// ---------------------------------------------------------------------------------------

/// The table has a header with `config` and `IOPS` and one row per configuration, in order.
#[test]
fn bench_table_has_header_and_one_row_per_config() {
    let text = stdout_of(&[
        "bench",
        "--config",
        "disabled,default,strict",
        "--ops",
        "5000",
    ]);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 5, "{text}");
    // The preset the numbers are priced with comes first.
    assert_eq!(lines[0], "preset: modern", "{text}");
    let lines = &lines[1..];
    assert!(
        lines[0].split_whitespace().next() == Some("config"),
        "{text}"
    );
    assert!(lines[0].contains("IOPS"), "{text}");
    for (line, name) in lines[1..].iter().zip(["disabled", "default", "strict"]) {
        assert_eq!(line.split_whitespace().next(), Some(name), "{text}");
        assert!(line.contains("5,000"), "ops with a separator: {line}");
    }
}

/// Without `--config` or a config file, all six configurations run.
#[test]
fn bench_without_config_runs_all_six() {
    let text = stdout_of(&["bench", "--ops", "2000"]);
    let names: Vec<&str> = text
        .lines()
        .skip(2)
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(names, ALL_CONFIGS, "{text}");
}

// ---------------------------------------------------------------------------------------
// bench: bad flags and values (clap: exit code 2)
// ---------------------------------------------------------------------------------------

/// An unknown flag is a usage error (exit 2) naming the flag.
#[test]
fn bench_unknown_flag_is_usage_error() {
    iommulab()
        .args(["bench", "--bogus"])
        .assert()
        .code(2)
        .stdout("")
        .stderr(predicate::str::contains("--bogus"));
}

/// An unknown configuration name is a usage error that lists the possible values.
#[test]
fn bench_unknown_config_lists_possible_values() {
    iommulab()
        .args(["bench", "--config", "fast"])
        .assert()
        .code(2)
        .stderr(
            predicate::str::contains("'fast'")
                .and(predicate::str::contains("--config"))
                .and(predicate::str::contains("strict-bitmap"))
                .and(predicate::str::contains("modern")),
        );
}

/// Non-numeric and out-of-range numbers are usage errors naming the flag and the value.
#[test]
fn bench_bad_numbers_are_usage_errors() {
    for (flag, value, hint) in [
        ("--ops", "notanumber", "invalid digit"),
        ("--ops", "0", "not in 1.."),
        ("--threads", "0", "not in 1..=1024"),
        ("--io-size", "0", "not in 1.."),
        ("--outstanding", "0", "not in 1.."),
        ("--outstanding", "4294967295", "not in 1..=65536"),
        ("--repeats", "101", "not in 1..=100"),
        ("--levels", "7", "not in 3..=5"),
        // 2^64-1 neighbours probed 2^65 pages per unmap: a run that never ended.
        ("--neighbours", "4097", "not in 0..=4096"),
    ] {
        iommulab()
            .args(["bench", flag, value])
            .assert()
            .code(2)
            .stdout("")
            .stderr(
                predicate::str::contains(flag)
                    .and(predicate::str::contains(format!("'{value}'")))
                    .and(predicate::str::contains(hint)),
            );
    }
}

/// Values the flags refuse are refused from a config file too, naming the file and key, and
/// an I/O size past 2^63 is the mapping's error, not a panic (it divided by zero; a queue
/// depth of 2^32-1 aborted allocating its slots; 0 ran as 1 under a result saying 0).
#[test]
fn bench_out_of_range_workload_values_are_clear_errors() {
    let dir = TempDir::new().unwrap();
    for (body, key) in [
        ("outstanding = 0", "workload.outstanding"),
        ("outstanding = 4294967295", "workload.outstanding"),
        ("cpus = 0", "workload.cpus"),
        ("cpus = 65535", "workload.cpus"),
        (
            "[device]\nkind = \"malicious\"\nneighbours = 9223372036854775807",
            "device.neighbours",
        ),
    ] {
        let file = write_file(&dir, "w.toml", &format!("[workload]\nios = 10\n{body}\n"));
        iommulab()
            .args(["bench", "--config-file"])
            .arg(&file)
            .assert()
            .code(1)
            .stdout("")
            .stderr(
                predicate::str::contains("w.toml")
                    .and(predicate::str::contains(key))
                    .and(predicate::str::contains("panicked").not()),
            );
    }
    // A duration the run could never reach (it ran for ever) or past an hour of modeled time.
    let file = write_file(&dir, "d.toml", "duration_s = 1e300\n");
    for (source, args) in [
        ("d.toml", vec!["--config-file", file.to_str().unwrap()]),
        ("", vec!["--duration", "3600.5"]),
        ("", vec!["--duration", "inf"]),
    ] {
        iommulab()
            .arg("bench")
            .args(&args)
            .assert()
            .code(1)
            .stdout("")
            .stderr(
                predicate::str::contains(source)
                    .and(predicate::str::contains("duration_s"))
                    .and(predicate::str::contains("at most 3600")),
            );
    }
    iommulab()
        .args(["bench", "--config", "strict", "--ops", "10"])
        .args(["--io-size", "18446744073709551615"])
        .assert()
        .code(1)
        .stdout("")
        .stderr(
            predicate::str::contains("`workload.io_size`")
                .and(predicate::str::contains("at most 1073741824"))
                .and(predicate::str::contains("panicked").not()),
        );
}

/// Repeats past the largest seed go on from seed 0 (a debug build panicked on the overflow).
#[test]
fn bench_repeats_from_the_largest_seed_wrap_to_zero() {
    let v = json_of(&[
        "bench",
        "-q",
        "--json",
        "--config",
        "strict",
        "--ops",
        "10",
        "--seed",
        "18446744073709551615",
        "--repeats",
        "2",
    ]);
    let seeds: Vec<u64> = array_of(&v).iter().map(|r| u64_of(r, "seed")).collect();
    assert_eq!(seeds, [u64::MAX, 0]);
}

/// `--ops` and `--duration` cannot be combined.
#[test]
fn bench_ops_conflicts_with_duration() {
    iommulab()
        .args(["bench", "--ops", "10", "--duration", "1"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("cannot be used with"));
}

// ---------------------------------------------------------------------------------------
// bench: --config-file
// ---------------------------------------------------------------------------------------

/// A misspelt key in the TOML file fails (exit 1) naming the file and the key.
#[test]
fn config_file_unknown_key_names_file_and_key() {
    let dir = TempDir::new().unwrap();
    let file = write_file(&dir, "bench.toml", "configuraton = \"strict\"\n");
    iommulab()
        .arg("bench")
        .arg("--config-file")
        .arg(&file)
        .assert()
        .code(1)
        .stdout("")
        .stderr(
            predicate::str::contains(file.display().to_string())
                .and(predicate::str::contains("configuraton"))
                .and(predicate::str::contains("expected one of")),
        );
}

/// A config file that does not exist fails (exit 1) naming the path.
#[test]
fn config_file_missing_names_path() {
    let dir = TempDir::new().unwrap();
    let file = dir.path().join("no-such.toml");
    iommulab()
        .arg("bench")
        .arg("--config-file")
        .arg(&file)
        .assert()
        .code(1)
        .stdout("")
        .stderr(predicate::str::contains(file.display().to_string()));
}

/// A valid file picks the configuration and the I/O count; flags not given keep its values.
#[test]
fn config_file_values_apply_when_flags_not_given() {
    let dir = TempDir::new().unwrap();
    let file = write_file(
        &dir,
        "bench.toml",
        "configuration = \"strict\"\n[workload]\nios = 5000\ntouch = true\nseed = 42\n",
    );
    let path = file.to_str().unwrap();
    let v = json_of(&["bench", "--config-file", path, "--json"]);
    assert_eq!(str_of(&v, "config"), "strict");
    assert_eq!(
        u64_of(&v, "ops"),
        5000,
        "the file's ios, not --ops' default"
    );
    assert_eq!(u64_of(&v, "seed"), 42);
    assert_eq!(field(&v, "touch"), true);
}

/// Flags the user passes override the file's values.
#[test]
fn config_file_is_overridden_by_given_flags() {
    let dir = TempDir::new().unwrap();
    let file = write_file(
        &dir,
        "bench.toml",
        "configuration = \"strict\"\nduration_s = 100.0\n[workload]\nios = 5000\nseed = 42\n",
    );
    let path = file.to_str().unwrap();
    let v = json_of(&[
        "bench",
        "--config-file",
        path,
        "--ops",
        "3000",
        "--seed",
        "5",
        "--config",
        "bitmap",
        "--json",
    ]);
    assert_eq!(str_of(&v, "config"), "bitmap");
    assert_eq!(
        u64_of(&v, "ops"),
        3000,
        "--ops wins over the file's ios and duration"
    );
    assert_eq!(u64_of(&v, "seed"), 5);
}

// ---------------------------------------------------------------------------------------
// bench: output files
// ---------------------------------------------------------------------------------------

/// `--out` writes the per-run results whole, in the format each file's name picks: a JSON
/// array, and a rectangular CSV for a `.csv` name (the same text `--csv` prints).
#[test]
fn bench_out_and_csv_write_complete_files() {
    let dir = TempDir::new().unwrap();
    let json = dir.path().join("nested/runs.json");
    let csv = dir.path().join("runs.csv");
    iommulab()
        .args(["bench", "--config", "disabled,strict", "--ops", "2000"])
        .arg("--out")
        .arg(&json)
        .arg("--out")
        .arg(&csv)
        .assert()
        .success()
        .stderr("");

    let v: Value = serde_json::from_str(&fs::read_to_string(&json).unwrap()).unwrap();
    let runs = array_of(&v);
    assert_eq!(runs.len(), 2);
    assert_eq!(str_of(&runs[0], "config"), "disabled");
    assert_eq!(str_of(&runs[1], "config"), "strict");

    let text = fs::read_to_string(&csv).unwrap();
    assert!(text.ends_with('\n'));
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "header + one line per run:\n{text}");
    let header: Vec<&str> = lines[0].split(',').collect();
    assert_eq!(header[0], "config");
    let rel = header
        .iter()
        .position(|h| *h == "relative_to_disabled")
        .expect("relative_to_disabled column");
    for (line, name) in lines[1..].iter().zip(["disabled", "strict"]) {
        let cells: Vec<&str> = line.split(',').collect();
        assert_eq!(cells.len(), header.len(), "{line}");
        assert_eq!(cells[0], name);
        assert!(
            !cells[rel].is_empty(),
            "relative_to_disabled filled: {line}"
        );
    }

    // Nothing but the two outputs (and the folder made for one of them).
    assert_eq!(tree(dir.path()), ["nested", "nested/runs.json", "runs.csv"]);
    // `--csv` prints what the `.csv` file holds.
    let printed = iommulab()
        .args([
            "bench",
            "--config",
            "disabled,strict",
            "--ops",
            "2000",
            "--csv",
        ])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let printed = String::from_utf8(printed).unwrap();
    assert_eq!(printed.lines().next(), Some(lines[0]));
    assert_eq!(printed.lines().count(), 3, "{printed}");
}

/// `--out` under a regular file fails clearly and leaves nothing behind.
#[test]
fn bench_out_under_regular_file_fails_without_leftovers() {
    let dir = TempDir::new().unwrap();
    let blocker = write_file(&dir, "blocker", "not a folder\n");
    for target in ["blocker/runs.json", "blocker/sub/runs.json"] {
        iommulab()
            .args(["bench", "--config", "strict", "--ops", "200"])
            .arg("--out")
            .arg(dir.path().join(target))
            .assert()
            .code(1)
            .stdout("")
            .stderr(
                predicate::str::contains("cannot create folder")
                    .and(predicate::str::contains(blocker.display().to_string())),
            );
        assert_eq!(tree(dir.path()), ["blocker"], "after --out {target}");
    }
}

/// When the final rename fails (the target is a folder), the temporary file is removed.
#[test]
fn bench_out_onto_folder_fails_and_removes_temp_file() {
    let dir = TempDir::new().unwrap();
    fs::create_dir(dir.path().join("taken")).unwrap();
    iommulab()
        .args(["bench", "--config", "strict", "--ops", "200"])
        .arg("--out")
        .arg(dir.path().join("taken"))
        .assert()
        .code(1)
        .stdout("")
        .stderr(predicate::str::contains("taken"));
    assert_eq!(tree(dir.path()), ["taken"]);
}

/// An output naming the config file, or both outputs naming one file, is refused before the
/// run: the rename into place would have replaced the config (or one output) silently.
#[test]
fn bench_output_naming_an_input_or_the_other_output_is_refused() {
    let dir = TempDir::new().unwrap();
    let config = "[workload]\nios = 100\n";
    let file = write_file(&dir, "b.toml", config);
    for flag in ["--out", "-o"] {
        iommulab()
            .args(["bench", "--config-file"])
            .arg(&file)
            .arg(flag)
            .arg(dir.path().join(".").join("b.toml"))
            .assert()
            .code(1)
            .stdout("")
            .stderr(
                predicate::str::contains("--out ")
                    .and(predicate::str::contains("same file as --config-file")),
            );
        assert_eq!(fs::read_to_string(&file).unwrap(), config, "after {flag}");
    }
    let both = dir.path().join("runs");
    iommulab()
        .args(["bench", "--config", "strict", "--ops", "100", "--out"])
        .arg(&both)
        .arg("--out")
        .arg(dir.path().join(".").join("runs"))
        .assert()
        .code(1)
        .stderr(predicate::str::contains("same file as --out"));
    assert_eq!(tree(dir.path()), ["b.toml"]);
}

/// A run that fails validation writes no `--out` file.
#[test]
fn bench_failed_run_writes_no_output_file() {
    let dir = TempDir::new().unwrap();
    let file = write_file(&dir, "bad.toml", "[hardware]\nlevels = 7\n");
    let out = dir.path().join("runs.json");
    let csv = dir.path().join("runs.csv");
    iommulab()
        .arg("bench")
        .arg("--config-file")
        .arg(&file)
        .arg("--out")
        .arg(&out)
        .arg("--out")
        .arg(&csv)
        .assert()
        .code(1)
        .stdout("")
        .stderr(predicate::str::contains("hardware.levels").and(predicate::str::contains("\"7\"")));
    assert_eq!(tree(dir.path()), ["bad.toml"]);
}

/// A reader that goes away early (`| head -c 10`) is not an error.
#[test]
fn bench_closed_stdout_is_not_an_error() {
    // ~500 KB of JSON: more than a pipe buffer, so the writer is still writing when the
    // reader closes, and its write fails with EPIPE.
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin!("iommulab"))
        .args([
            "bench",
            "--config",
            "disabled,default",
            "--ops",
            "10",
            "--repeats",
            "100",
            "--json",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn iommulab");
    let mut stdout = child.stdout.take().unwrap();
    let mut head = [0u8; 10];
    stdout.read_exact(&mut head).unwrap();
    assert_eq!(head[0], b'[');
    drop(stdout);
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{:?}: {stderr}", out.status);
    assert!(stderr.is_empty(), "{stderr}");
}

// ---------------------------------------------------------------------------------------
// help
// ---------------------------------------------------------------------------------------

/// `--help` lists the subcommands.
#[test]
fn help_lists_subcommands() {
    iommulab().arg("--help").assert().success().stdout(
        predicate::str::contains("bench")
            .and(predicate::str::contains("reproduce"))
            .and(predicate::str::contains("--quiet")),
    );
}

/// `bench --help` documents the flags and their defaults.
#[test]
fn bench_help_documents_flags_and_defaults() {
    iommulab()
        .args(["bench", "--help"])
        .assert()
        .success()
        .stdout(
            predicate::str::contains("--malicious")
                .and(predicate::str::contains("--config-file"))
                .and(predicate::str::contains("strict-bitmap"))
                .and(predicate::str::contains("[default: 200000]"))
                .and(predicate::str::contains("[default: modern;")),
        );
}

/// `--version` prints the crate version.
#[test]
fn version_prints_crate_version() {
    iommulab()
        .arg("--version")
        .assert()
        .success()
        .stdout(predicate::str::contains(env!("CARGO_PKG_VERSION")));
}

// ---------------------------------------------------------------------------------------
// reproduce
// ---------------------------------------------------------------------------------------

/// `reproduce fujita2008 --quick` writes the whole report: JSON, CSV, figures and README.
#[test]
fn reproduce_fujita2008_quick_writes_report() {
    let dir = TempDir::new().unwrap();
    let report = dir.path().join("fujita2008");
    iommulab()
        .args(["reproduce", "fujita2008", "--quick", "--out"])
        .arg(dir.path())
        .assert()
        .success()
        .stdout(predicate::str::contains(
            report.join("README.md").display().to_string(),
        ));

    // results.json: one aggregate per configuration, and the judged claims.
    let v: Value =
        serde_json::from_str(&fs::read_to_string(report.join("results.json")).unwrap()).unwrap();
    assert!(!array_of(&v["claims"]).is_empty(), "{v:#}");
    let agg = array_of(&v["results"]);
    let names: Vec<&str> = agg.iter().map(|a| str_of(a, "config")).collect();
    assert_eq!(names, ALL_CONFIGS);
    for a in agg {
        assert!(f64_of(a, "iops") > 0.0, "{a:#}");
        assert!(f64_of(a, "relative_to_disabled") > 0.0, "{a:#}");
        assert!(u64_of(a, "ops") > 0, "{a:#}");
        let _ = u64_of(a, "iotlb_flushes");
        let _ = u64_of(a, "stale_accesses");
    }
    let by = |name: &str| agg.iter().find(|a| str_of(a, "config") == name).unwrap();
    assert!((f64_of(by("disabled"), "relative_to_disabled") - 1.0).abs() < 1e-12);
    assert_eq!(u64_of(by("strict"), "stale_accesses"), 0);
    assert_eq!(u64_of(by("strict-bitmap"), "stale_accesses"), 0);
    // Without an IOMMU nothing is stale: every probe of unmapped memory reaches it.
    assert_eq!(u64_of(by("disabled"), "stale_accesses"), 0);
    assert!(u64_of(by("disabled"), "unprotected_accesses") > 0);
    assert!(u64_of(by("default"), "stale_accesses") > 0);
    assert_eq!(u64_of(by("default"), "unprotected_accesses"), 0);

    // results.csv: header + one row per configuration, rectangular.
    let csv = fs::read_to_string(report.join("results.csv")).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 1 + ALL_CONFIGS.len(), "{csv}");
    let cols = lines[0].split(',').count();
    assert!(lines.iter().all(|l| l.split(',').count() == cols), "{csv}");

    // Figures.
    let svg = fs::read_to_string(report.join("figure4.svg")).unwrap();
    assert!(svg.contains("<svg"), "not an SVG");
    let png = fs::read(report.join("figure4.png")).unwrap();
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");

    // README: the paper's absolute number and a row per configuration.
    let readme = fs::read_to_string(report.join("README.md")).unwrap();
    assert!(readme.contains("124,337"), "{readme}");
    assert!(
        readme.lines().any(|l| l.starts_with("| strict-bitmap |")),
        "{readme}"
    );

    // No temporary files left beside the outputs.
    let stray: Vec<String> = tree(dir.path())
        .into_iter()
        .filter(|p| p.contains(".tmp-"))
        .collect();
    assert!(stray.is_empty(), "{stray:?}");
}

/// An unknown paper is a usage error that lists the known ones.
#[test]
fn reproduce_unknown_paper_lists_known_ones() {
    iommulab()
        .args(["reproduce", "smith1999"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("fujita2008"));
}
