//! End-to-end tests of the guest model in the CLI: `replay --strategy` and
//! `reproduce yassour2010 --quick`.

use std::path::Path;

use serde_json::Value;

fn iommulab() -> assert_cmd::Command {
    assert_cmd::cargo::cargo_bin_cmd!("iommulab")
}

fn netperf_trace(dir: &Path) -> std::path::PathBuf {
    let t = dir.join("netperf.iot");
    iommulab()
        .args([
            "trace",
            "generate",
            "netperf-send",
            "-q",
            "--events",
            "20000",
            "-o",
        ])
        .arg(&t)
        .assert()
        .success();
    t
}

fn replay_json(trace: &Path, extra: &[&str]) -> Value {
    let o = iommulab()
        .arg("replay")
        .arg(trace)
        .args(extra)
        .arg("--json")
        .assert()
        .success();
    serde_json::from_slice(&o.get_output().stdout).expect("JSON")
}

#[test]
fn replay_strategy_prints_hits_misses_hypercalls() {
    let dir = tempfile::tempdir().unwrap();
    let t = netperf_trace(dir.path());
    for ev in ["fifo", "lru", "opt", "opt-batch", "prefetch"] {
        let v = replay_json(
            &t,
            &["--strategy", "on-demand", "--quota", "12", "--eviction", ev],
        );
        let (h, m, r) = (
            v["hits"].as_u64().unwrap(),
            v["misses"].as_u64().unwrap(),
            v["refused"].as_u64().unwrap(),
        );
        assert_eq!(h + m + r, v["result"]["maps"].as_u64().unwrap(), "{ev}");
        assert!(v["hypercalls"].as_u64().unwrap() > 0, "{ev}");
        assert!(h > 0, "{ev}");
    }
    // Direct: no hypercall after setup, no miss.
    let v = replay_json(&t, &["--strategy", "direct"]);
    assert_eq!(v["hypercalls"], 0);
    assert_eq!(v["misses"], 0);
    // Single-use: every page map a hypercall, no stale access.
    let v = replay_json(&t, &["--strategy", "single-use"]);
    assert_eq!(v["hits"], 0);
    assert_eq!(v["result"]["stale_accesses"], 0);
    // Piggyback needs fewer hypercalls than no batching.
    let a = replay_json(&t, &["--strategy", "on-demand", "--quota", "12"]);
    let b = replay_json(
        &t,
        &[
            "--strategy",
            "on-demand",
            "--quota",
            "12",
            "--batching",
            "piggyback",
        ],
    );
    assert!(b["hypercalls"].as_u64() < a["hypercalls"].as_u64());
    assert_eq!(a["hits"], b["hits"]);
}

#[test]
fn replay_strategy_text_output() {
    let dir = tempfile::tempdir().unwrap();
    let t = netperf_trace(dir.path());
    let o = iommulab()
        .arg("replay")
        .arg(&t)
        .args(["--strategy", "shared"])
        .assert()
        .success();
    let s = String::from_utf8_lossy(&o.get_output().stdout).to_string();
    assert!(s.contains("hypercalls") && s.contains("hits"), "{s}");
}

#[test]
fn reproduce_expether_quick() {
    let dir = tempfile::tempdir().unwrap();
    iommulab()
        .args(["reproduce", "expether", "--quick", "--out"])
        .arg(dir.path())
        .assert()
        .success();
    let d = dir.path().join("expether");
    for f in [
        "results.json",
        "runs.csv",
        "sweep.csv",
        "README.md",
        "figure9.svg",
        "figure11.png",
    ] {
        assert!(d.join(f).is_file(), "missing {f}");
    }
    let v: Value =
        serde_json::from_str(&std::fs::read_to_string(d.join("results.json")).unwrap()).unwrap();
    let runs = v["runs"].as_array().unwrap();
    let total = |dir: &str, hosts: u64| {
        runs.iter()
            .find(|r| {
                r["figure"] == "9"
                    && r["direction"] == dir
                    && r["hosts"] == hosts
                    && r["qos"] == false
            })
            .unwrap()["gbps"]
            .as_f64()
            .unwrap()
    };
    for h in 1..=3 {
        assert!((total("send", h) - 9.90).abs() < 0.01);
        assert!(total("receive", h) < total("send", h) - 1.0);
    }
}

#[test]
fn reproduce_yassour2010_quick() {
    let dir = tempfile::tempdir().unwrap();
    let o = iommulab()
        .args(["reproduce", "yassour2010", "--quick", "--out"])
        .arg(dir.path())
        .assert()
        .success();
    let stdout = String::from_utf8_lossy(&o.get_output().stdout).to_string();
    assert!(stdout.contains("report: "), "{stdout}");
    let d = dir.path().join("yassour2010");
    for f in [
        "results.json",
        "hit_rate.csv",
        "cpu.csv",
        "README.md",
        "figure3_netperf-send_hit_rate.svg",
        "figure4_apache-sendfile_hit_rate.png",
        "figure5_netperf-send_cpu.svg",
        "figure6_apache-sendfile_cpu.png",
    ] {
        assert!(d.join(f).is_file(), "missing {f}");
    }
    let v: Value =
        serde_json::from_str(&std::fs::read_to_string(d.join("results.json")).unwrap()).unwrap();
    let ws = v["workloads"].as_array().unwrap();
    assert_eq!(ws.len(), 2);
    for w in ws {
        let names: Vec<&str> = w["policies"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["policy"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["fifo", "lru", "opt", "opt_batch", "prefetch"]);
        for p in w["policies"].as_array().unwrap() {
            let f = p["quota_fraction"].as_array().unwrap();
            let h = p["hit_rate"].as_array().unwrap();
            assert!(f.len() >= 20 && f.len() == h.len());
            assert_eq!(f[0].as_f64(), Some(0.0));
            assert_eq!(f.last().unwrap().as_f64(), Some(1.0));
            assert!(h.iter().all(|x| (0.0..=1.0).contains(&x.as_f64().unwrap())));
        }
        let series: Vec<&str> = w["cpu"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["series"].as_str().unwrap())
            .collect();
        assert_eq!(
            series,
            [
                "lru",
                "piggyback",
                "prefetch",
                "batching",
                "batching-ring-refill"
            ]
        );
        // S1.11: single-use and shared leave no stale access; on-demand does.
        let prot = w["protection"].as_array().unwrap();
        let stale = |s: &str| {
            prot.iter()
                .find(|p| p["strategy"] == s)
                .map(|p| p["stale_accesses"].as_u64().unwrap())
                .unwrap()
        };
        assert_eq!(stale("single-use"), 0);
        assert_eq!(stale("shared"), 0);
        assert!(stale("on-demand") > 0);
    }
}
