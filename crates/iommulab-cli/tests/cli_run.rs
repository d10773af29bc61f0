//! End-to-end tests of `iommulab run EXPERIMENT`: one file format for bare metal and guest,
//! generator and trace; bad files named with the key; workload flags refused where they do
//! not apply.

use std::path::{Path, PathBuf};

use predicates::prelude::*;
use serde_json::Value;

fn iommulab() -> assert_cmd::Command {
    assert_cmd::cargo::cargo_bin_cmd!("iommulab")
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The JSON a successful command prints.
fn json_of(mut cmd: assert_cmd::Command) -> Value {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn run_json(file: &Path) -> Value {
    let mut cmd = iommulab();
    cmd.current_dir(repo())
        .args(["run", "-q", "--json"])
        .arg(file);
    json_of(cmd)
}

#[test]
fn the_guest_example_runs_through_the_guest_model() {
    let v = run_json(&repo().join("examples/guest-netperf.toml"));
    assert_eq!(v["config"], "guest-on-demand");
    let g = &v["guest"];
    assert_eq!(g["strategy"], "on-demand");
    assert_eq!(g["quota"], 256);
    let (hits, maps) = (g["hits"].as_u64().unwrap(), g["maps"].as_u64().unwrap());
    assert!(hits > 0 && hits <= maps, "{g}");
    assert_eq!(v["ops"], g["buffers"]);
    assert!(v.get("replay").is_none());
}

#[test]
fn the_trace_example_replays_on_bare_metal() {
    // Its `trace` is relative to the file: it runs from any working directory.
    let mut cmd = iommulab();
    cmd.current_dir(std::env::temp_dir())
        .args(["run", "-q", "--json"])
        .arg(repo().join("examples/bare-metal-trace.toml"));
    let v = json_of(cmd);
    assert_eq!(v["config"], "linux-lazy");
    assert!(v.get("guest").is_none());
    assert!(
        v["replay"]["maps"].as_u64().unwrap() > 3000,
        "{}",
        v["replay"]
    );
    assert!(v["iotlb_invalidations"].as_u64().unwrap() > 0);
}

#[test]
fn json_experiments_read_like_toml_ones() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("e.json");
    std::fs::write(
        &f,
        r#"{"system": {"kind": "guest", "strategy": "single-use"},
            "hardware": {"cost": "kvm-2010"},
            "workload": {"kind": "netperf-send", "packets": 500}}"#,
    )
    .unwrap();
    let v = run_json(&f);
    assert_eq!(v["guest"]["strategy"], "single-use");
    assert_eq!(v["guest"]["hits"], 0);
}

#[test]
fn a_bad_experiment_names_the_file_and_key_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("bad.toml");
    let out = dir.path().join("out.json");
    std::fs::write(
        &f,
        "[system]\nkind = \"guest\"\nquota = 8\nstrategy = \"lazy\"\n",
    )
    .unwrap();
    iommulab()
        .args(["run", "-q"])
        .arg(&f)
        .arg("--out")
        .arg(&out)
        .assert()
        .failure()
        .stderr(predicate::str::contains("bad.toml").and(predicate::str::contains("lazy")));
    assert!(!out.exists());
    std::fs::write(&f, "dma_debug = true\n[system]\nkind = \"guest\"\n").unwrap();
    iommulab()
        .args(["run", "-q"])
        .arg(&f)
        .assert()
        .failure()
        .stderr(predicate::str::contains("dma_debug").and(predicate::str::contains("guest")));
}

/// A file that is not UTF-8 is named with the line and byte offset of the first bad byte, by
/// `run` and by the `--config-file` of `bench` and `replay`.
#[test]
fn non_utf8_config_names_line_and_byte() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("latin1.toml");
    std::fs::write(&f, b"dma_debug = false\n# caf\xe9\n").unwrap();
    let trace = dir.path().join("t.iot");
    iommulab()
        .args(["trace", "generate", "-q", "block", "--events", "100", "-o"])
        .arg(&trace)
        .assert()
        .success();
    let f = f.to_str().unwrap();
    for args in [
        vec!["run", f],
        vec!["bench", "--config-file", f],
        vec!["replay", trace.to_str().unwrap(), "--config-file", f],
    ] {
        iommulab().args(&args).assert().failure().stdout("").stderr(
            predicate::str::contains(format!("{f}:2:"))
                .and(predicate::str::contains("0xe9 at byte offset 23")),
        );
    }
}

/// A pseudo-driver run of no I/O is refused (it printed a time per I/O for zero I/Os);
/// with `duration_s` the count does not apply.
#[test]
fn zero_ios_is_refused_unless_the_run_is_bound_by_time() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("z.toml");
    std::fs::write(&f, "[workload]\nios = 0\n").unwrap();
    iommulab()
        .args(["run", "-q"])
        .arg(&f)
        .assert()
        .failure()
        .stdout("")
        .stderr(predicate::str::contains("z.toml").and(predicate::str::contains("workload.ios")));
    std::fs::write(&f, "duration_s = 0.0001\n[workload]\nios = 0\n").unwrap();
    iommulab().args(["run", "-q"]).arg(&f).assert().success();
}

/// `--out` naming the experiment itself is refused before the run, and the file is kept.
#[test]
fn out_naming_the_experiment_is_refused_and_keeps_it() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("e.toml");
    std::fs::write(&f, "[workload]\nios = 100\n").unwrap();
    iommulab()
        .args(["run", "-q"])
        .arg(&f)
        .arg("--out")
        .arg(&f)
        .assert()
        .failure()
        .stdout("")
        .stderr(
            predicate::str::contains("same file as the experiment")
                .and(predicate::str::contains(f.display().to_string())),
        );
    assert_eq!(
        std::fs::read_to_string(&f).unwrap(),
        "[workload]\nios = 100\n"
    );
}

#[test]
fn bench_refuses_pseudo_driver_flags_for_another_workload() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("n.toml");
    std::fs::write(&f, "[workload]\nkind = \"block\"\n").unwrap();
    iommulab()
        .args(["bench", "-q", "--io-size", "512", "--config-file"])
        .arg(&f)
        .assert()
        .failure()
        .stderr(predicate::str::contains("--io-size").and(predicate::str::contains("block")));
}

#[test]
fn the_xen_pv_example_runs_the_never_free_option() {
    let v = run_json(&repo().join("examples/xen-pv-never-free.toml"));
    assert_eq!(v["config"], "xen-pv-never-free@calgary");
    let x = &v["xen_pv"];
    assert_eq!(x["option"], "never-free");
    assert_eq!(x["hypervisor"]["entries_cleared"], 0);
    // Every buffer lost long ago is still reachable: the hole never-free leaves (S2.6).
    assert!(x["late_probes"].as_u64().unwrap() > 0);
    assert_eq!(x["late_probes_through"], x["late_probes"]);
    assert!(v.get("guest").is_none());
    // The table shows no I/O rate for it (the model has none), not a rate of 0.
    let out = iommulab()
        .arg("run")
        .arg(repo().join("examples/xen-pv-never-free.toml"))
        .assert()
        .success();
    let text = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("preset: vtd-2008"), "{text}");
    let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    let row: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    let iops = header.iter().position(|h| *h == "IOPS").unwrap();
    // "sw ns/op", "model ns/op" and "hw ns/op" are two words each in the header.
    assert_eq!(row[iops - 3], "-", "{text}");
}

/// `replay --config-file` with a guest or Xen PV `system` runs the trace through that system
/// (as `run` with `[workload] trace = ...` does) instead of replaying bare metal under its
/// label; with bare-metal `--config` names beside it, it is refused.
#[test]
fn replay_with_a_system_config_file_runs_that_system() {
    let dir = tempfile::tempdir().unwrap();
    let trace = repo().join("traces/qemu-virtio-6.12.95+deb12-cloud-amd64.txt.zst");
    for (system, part) in [
        (
            "[system]\nkind = \"guest\"\nstrategy = \"on-demand\"\nquota = 64\n[hardware]\ncost = \"kvm-2010\"\n",
            "guest",
        ),
        ("[system]\nkind = \"xen-pv\"\ndomain_mib = 8192\n", "xen_pv"),
    ] {
        let f = dir.path().join(format!("{part}.toml"));
        std::fs::write(&f, system).unwrap();
        let mut cmd = iommulab();
        cmd.args(["replay", "-q", "--json", "--config-file"])
            .arg(&f)
            .arg(&trace);
        let v = json_of(cmd);
        assert!(v.get(part).is_some_and(|p| !p.is_null()), "{part}: {v}");
        assert!(v["replay"]["maps"].as_u64().unwrap() > 0, "{part}");
        assert!(v["check"].is_object(), "{part}");
        iommulab()
            .args(["replay", "-q", "--config", "strict", "--config-file"])
            .arg(&f)
            .arg(&trace)
            .assert()
            .failure()
            .stderr(predicate::str::contains("describes a"));
        // `bench` too: it used to drop the names and run the file's system.
        iommulab()
            .args(["bench", "-q", "--config", "strict", "--config-file"])
            .arg(&f)
            .assert()
            .failure()
            .stderr(predicate::str::contains("describes a"));
    }
}
