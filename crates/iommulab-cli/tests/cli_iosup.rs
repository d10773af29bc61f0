//! End-to-end tests of `iommulab iosup`: S3.5's three groups with a user's churn, the table
//! and JSON, and clear errors that leave no output.

use assert_cmd::Command;
use predicates::prelude::*;
use serde_json::Value;
use tempfile::TempDir;

fn iommulab() -> Command {
    assert_cmd::cargo::cargo_bin_cmd!("iommulab")
}

fn json_of(args: &[&str]) -> Value {
    let out = iommulab()
        .args(["iosup", "-q"])
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

fn flushes(r: &Value, group: usize) -> f64 {
    r["groups"][group]["flushes_per_minute"].as_f64().unwrap()
}

/// The pool ends the type changes: with it from boot the flush counter is a few percent of
/// the disabled group's; more process churn flushes more without the pool.
#[test]
fn the_pool_ends_the_flushes_and_churn_sets_them() {
    let base = json_of(&["--minutes", "5"]);
    assert_eq!(base["churn"]["minutes"], 5);
    assert!(
        flushes(&base, 1) < 0.05 * flushes(&base, 0),
        "{}",
        base["groups"]
    );
    let busy = json_of(&["--minutes", "5", "--set", "forks_per_minute=1084.28"]);
    assert!(flushes(&busy, 0) > 1.8 * flushes(&base, 0));
    let dir = TempDir::new().unwrap();
    let file = dir.path().join("run.toml");
    std::fs::write(
        &file,
        "stable_within = 0.2\n[churn]\nminutes = 5\nlifetime_s = [0.05, 0.1]\n[shrink]\ntotal = 512\n",
    )
    .unwrap();
    let r = json_of(&[file.to_str().unwrap(), "--set", "shrink.proportion=2"]);
    assert_eq!(r["dynamic_shrink"]["total"], 512);
    assert_eq!(r["dynamic_shrink"]["proportion"], 2.0);
    assert_eq!(r["stable_within"], 0.2);
    assert_eq!(r["churn"]["lifetime_s"], serde_json::json!([0.05, 0.1]));
    iommulab()
        .args(["iosup", "-q", "--minutes", "5", "--xsa78-fixed", "--coarse"])
        .assert()
        .success()
        .stdout(
            predicate::str::contains("cache-dynamic-enabled")
                .and(predicate::str::contains("flush_iotlb_qi calls / min"))
                .and(predicate::str::contains("invalidates the domain"))
                .and(predicate::str::contains("allocation functions' time")),
        );
}

/// S3.5's Xen 4.2.1 calls the flush on every type change and invalidates nothing, leaving
/// the NIC's cached translations of new tables; XSA-78's fix, by flag or by the run's
/// `[setup]`, invalidates on each allocation from the page allocator.
#[test]
fn xen_4_2_1_invalidates_nothing_and_the_fix_does() {
    let group = |r: &Value, key: &str| r["groups"][0][key].as_f64().unwrap();
    let old = json_of(&["--minutes", "3"]);
    assert_eq!(old["setup"]["unmap_flush"], "skipped");
    assert_eq!(group(&old, "invalidations_per_minute"), 0.0);
    assert!(group(&old, "tables_left_cached_per_minute") > 0.0);
    for args in [
        vec!["--minutes", "3", "--xsa78-fixed"],
        vec!["--minutes", "3", "--set", "setup.unmap_flush=invalidates"],
    ] {
        let fixed = json_of(&args);
        assert_eq!(fixed["setup"]["unmap_flush"], "invalidates", "{args:?}");
        let (calls, inv) = (
            group(&fixed, "flushes_per_minute"),
            group(&fixed, "invalidations_per_minute"),
        );
        assert!(
            (calls / inv - 2.0).abs() < 0.05,
            "{calls} calls, {inv} invalidations"
        );
        assert_eq!(group(&fixed, "tables_left_cached_per_minute"), 0.0);
        assert_eq!(calls, group(&old, "flushes_per_minute"), "the same calls");
    }
}

/// A wrong key, a value the model refuses and a malformed file are named; nothing is
/// written.
#[test]
fn bad_input_is_named_and_writes_nothing() {
    let dir = TempDir::new().unwrap();
    let out = dir.path().join("r.json");
    for (args, says) in [
        (vec!["--set", "forks_per_minit=3"], "churn.forks_per_minit"),
        (vec!["--set", "forks_per_minute=0"], "forks_per_minute"),
        (vec!["--minutes", "0"], "churn.minutes"),
        (vec!["--stable-within=-1"], "stable_within"),
        (vec!["--set", "shrink.total=many"], "shrink.total"),
        (vec!["--set", "churn.shrink.total=9"], "[shrink]"),
        (vec!["--coarse"], "--xsa78-fixed"),
    ] {
        iommulab()
            .args(["iosup", "-q"])
            .args(&args)
            .arg("-o")
            .arg(&out)
            .assert()
            .failure()
            .stderr(predicate::str::contains(says));
        assert!(!out.exists(), "{args:?} wrote {}", out.display());
    }
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "[churn\n").unwrap();
    iommulab()
        .arg("iosup")
        .arg(&bad)
        .assert()
        .failure()
        .stderr(predicate::str::contains("bad.toml").and(predicate::str::contains("line 1")));
}
