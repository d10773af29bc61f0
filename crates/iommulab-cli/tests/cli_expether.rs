//! End-to-end tests of `iommulab expether`: the model behind `reproduce expether` run with a
//! user's file and `--set`s, its table and JSON, and clear errors that leave no output.

use assert_cmd::Command;
use predicates::prelude::*;
use serde_json::Value;
use tempfile::TempDir;

fn iommulab() -> Command {
    assert_cmd::cargo::cargo_bin_cmd!("iommulab")
}

fn json_of(args: &[&str]) -> Value {
    let out = iommulab()
        .arg("expether")
        .args(args)
        .arg("--json")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Receive with the estimates is S4.4's read limit: N reads per round trip, the same for
/// one host and three (the NIC-wide N); 16 reads lift it to what the links carry.
#[test]
fn receive_is_n_reads_per_round_trip() {
    let one = json_of(&["--duration", "0.01"]);
    let three = json_of(&["--hosts", "3", "--duration", "0.01"]);
    let limit = one["read_limit_gbps"].as_f64().unwrap();
    for r in [&one, &three] {
        let total = r["result"]["total_gbps"].as_f64().unwrap();
        assert!((total - limit).abs() / limit < 0.02, "{total} vs {limit}");
    }
    assert_eq!(
        three["result"]["per_host_gbps"].as_array().unwrap().len(),
        3
    );
    let lifted = json_of(&["--set", "outstanding_reads=16", "--duration", "0.01"]);
    assert_eq!(lifted["changed"], serde_json::json!(["outstanding_reads"]));
    assert!(
        lifted["result"]["total_gbps"].as_f64().unwrap() > limit + 2.0,
        "{lifted}"
    );
}

/// A run file sets the run and the flags override it; the table names each host and the
/// limits.
#[test]
fn a_file_and_flags_make_the_run() {
    let dir = TempDir::new().unwrap();
    let file = dir.path().join("nic.toml");
    std::fs::write(
        &file,
        "direction = \"send\"\nstreams = [1, 1]\nduration_s = 0.01\n[params]\nswitch_ns = 900\n",
    )
    .unwrap();
    let r = json_of(&[file.to_str().unwrap(), "--qos"]);
    assert_eq!(r["run"]["direction"], "send");
    assert_eq!(r["run"]["qos"], true);
    assert_eq!(r["run"]["params"]["switch_ns"], 900.0);
    assert!(r["read_limit_gbps"].is_null());
    let out = dir.path().join("r.json");
    iommulab()
        .arg("expether")
        .arg(&file)
        .args(["--hosts", "3", "--direction", "receive", "-o"])
        .arg(&out)
        .assert()
        .success()
        .stdout(
            predicate::str::contains("receive")
                .and(predicate::str::contains("3 host(s)"))
                .and(predicate::str::contains("reads: 8 outstanding"))
                .and(predicate::str::contains("the estimates but switch_ns")),
        );
    let saved: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(saved["run"]["streams"], serde_json::json!([1, 1, 1]));
}

/// A wrong key, a value out of range and a malformed file are named; nothing is written.
#[test]
fn bad_input_is_named_and_writes_nothing() {
    let dir = TempDir::new().unwrap();
    let out = dir.path().join("r.json");
    for (args, says) in [
        (
            vec!["--set", "outstanding_read=4"],
            "params.outstanding_read",
        ),
        (vec!["--set", "outstanding_reads=0"], "outstanding_reads"),
        (vec!["--hosts", "0"], "hosts"),
        (vec!["--set", "paths"], "NAME=VALUE"),
    ] {
        iommulab()
            .arg("expether")
            .args(&args)
            .arg("-o")
            .arg(&out)
            .assert()
            .failure()
            .stderr(predicate::str::contains(says));
        assert!(!out.exists(), "{args:?} wrote {}", out.display());
    }
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "direction = \n").unwrap();
    iommulab()
        .arg("expether")
        .arg(&bad)
        .assert()
        .failure()
        .stderr(predicate::str::contains("bad.toml").and(predicate::str::contains("line 1")));
    iommulab()
        .args(["expether", "--out", "r.csv"])
        .current_dir(dir.path())
        .assert()
        .failure()
        .stderr(predicate::str::contains("no CSV form"));
}
