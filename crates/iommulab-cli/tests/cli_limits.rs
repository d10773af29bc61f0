//! No result without its cause: keys a model would ignore and counts without a bound are
//! refused by name, a guest's IOPS follows the same limit as its throughput, out-of-order
//! times and the unmaps a replay implied are reported as such, and `validate` with nothing to
//! score exits 2.

use std::fs;
use std::path::Path;

use assert_cmd::Command;
use predicates::prelude::*;
use serde_json::Value;
use tempfile::TempDir;

fn iommulab() -> Command {
    assert_cmd::cargo::cargo_bin_cmd!("iommulab")
}

fn write(dir: &TempDir, name: &str, text: &str) -> std::path::PathBuf {
    let p = dir.path().join(name);
    fs::write(&p, text).unwrap();
    p
}

fn run_json(exp: &Path) -> Value {
    let out = iommulab()
        .args(["run", "-q", "--json"])
        .arg(exp)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

const GUEST: &str = "[system]\nkind = \"guest\"\nstrategy = \"on-demand\"\n";
const NETPERF: &str = "[workload]\nkind = \"netperf-send\"\npackets = 2000\n";

#[test]
fn keys_a_model_ignores_and_unbounded_counts_are_refused_by_name() {
    let dir = TempDir::new().unwrap();
    let huge = i64::MAX;
    for (text, key) in [
        (format!("{GUEST}quota = 0\n{NETPERF}"), "system.quota"),
        (
            format!(
                "[system]\nkind = \"guest\"\nstrategy = \"persistent\"\nquota = 100\n{NETPERF}"
            ),
            "system.quota",
        ),
        (format!("dma_bits = 40\n{GUEST}{NETPERF}"), "dma_bits"),
        (format!("kernel = \"2.6.26\"\n{GUEST}{NETPERF}"), "kernel"),
        (format!("[workload]\nios = {huge}\n"), "workload.ios"),
        (
            format!("[workload]\nio_size = {huge}\n"),
            "workload.io_size",
        ),
        (
            format!("[workload]\nkind = \"netperf-send\"\npackets = {huge}\n"),
            "workload.packets",
        ),
        (
            format!("[workload]\nkind = \"uniform-random\"\nios = {huge}\n"),
            "workload.ios",
        ),
    ] {
        let exp = write(&dir, "e.toml", &text);
        iommulab()
            .args(["run", "-q"])
            .arg(&exp)
            .timeout(std::time::Duration::from_secs(20))
            .assert()
            .code(1)
            .stderr(predicate::str::contains(format!("`{key}`")));
    }
}

/// IOPS × bytes per buffer never exceeds the throughput the run reports, which never exceeds
/// the link: at 10 Gb/s the CPU is the limit, and a huge link rate leaves the CPU's.
#[test]
fn a_guest_reports_no_iops_its_limits_do_not_allow() {
    let dir = TempDir::new().unwrap();
    for link in [1_000u64, 10_000, u64::MAX / 2] {
        let exp = write(
            &dir,
            "g.toml",
            // S1.10's machine (`kvm-2010`): its CPUs, not a 10 Gb/s link, limit the stream.
            &format!("{GUEST}link_mbps = {link}\n{NETPERF}[hardware]\ncost = \"kvm-2010\"\n"),
        );
        let v = run_json(&exp);
        let g = &v["guest"];
        let throughput = g["throughput_mbps"].as_f64().unwrap();
        let iops = v["iops"].as_f64().unwrap();
        let ops = v["ops"].as_f64().unwrap();
        let tx = g["tx_bytes"].as_f64().unwrap();
        let bytes = if tx > 0.0 {
            tx
        } else {
            g["bytes"].as_f64().unwrap()
        };
        assert!(throughput > 0.0 && throughput <= link as f64, "{g}");
        // The rate the throughput allows, in buffers per second.
        let allowed = throughput * 1e6 / 8.0 / (bytes / ops);
        assert!(
            (iops - allowed).abs() <= allowed * 1e-9,
            "link {link}: iops {iops} vs {allowed} from {throughput} Mb/s"
        );
        if link > 1_000 {
            // The CPU, not the link, limits these runs.
            assert!(throughput < link as f64 * 0.99, "{link}: {throughput}");
        }
    }
}

const CSV_HEAD: &str = "# iommulab trace v1\ntime_ns,cpu,device,kind,dir,dma,phys,len,nents\n";

#[test]
fn reordered_times_and_implied_unmaps_are_reported() {
    let dir = TempDir::new().unwrap();
    let trace = write(
        &dir,
        "t.csv",
        &format!(
            "{CSV_HEAD}2000,0,d,map,TO_DEVICE,0x1000,0x5000,100,0\n\
             1000,0,d,map,TO_DEVICE,0x1000,0x6000,100,0\n\
             3000,0,d,unmap,TO_DEVICE,0x1000,,100,0\n"
        ),
    );
    let out = iommulab()
        .args(["trace", "stats", "--json"])
        .arg(&trace)
        .output()
        .unwrap();
    assert!(out.status.success());
    let s: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(s["reordered_times"], 1, "{s}");
    iommulab()
        .args(["trace", "stats"])
        .arg(&trace)
        .assert()
        .success()
        .stdout(predicate::str::contains("records out of time order"));
    let out = iommulab()
        .args(["replay", "-q", "--config", "strict", "--json"])
        .arg(&trace)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["replay"]["reordered_times"], 1, "{r}");
    assert_eq!(r["replay"]["remapped_live"], 1, "{r}");
    // The text counts the trace's one unmap, and labels the one the replay implied.
    iommulab()
        .args(["replay", "-q", "--config", "strict"])
        .arg(&trace)
        .assert()
        .success()
        .stdout(
            predicate::str::contains("2 maps, 1 unmaps (+ 1 implied by a map of a live address)")
                .and(predicate::str::contains("1 events out of time order")),
        );
}

#[test]
fn ftrace_times_before_the_first_event_are_counted() {
    let dir = TempDir::new().unwrap();
    let line = |ts: &str, addr: &str| {
        format!(
            "  fio-1  [000] .....  {ts}: dma_map_page: 0000:00:04.0 dir=TO_DEVICE \
             dma_addr={addr} size=4096 phys_addr=5000 attrs=\n"
        )
    };
    let text = line("100.000002", "1000") + &line("100.000001", "2000");
    let trace = write(&dir, "t.txt", &text);
    let out = iommulab()
        .args(["trace", "import", "--json", "-q"])
        .arg(&trace)
        .arg("-o")
        .arg(dir.path().join("t.iot"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["ftrace"]["clamped_timestamps"], 1, "{v}");
    assert_eq!(v["ftrace"]["reordered_timestamps"], 1, "{v}");
}

#[test]
fn validate_with_nothing_to_score_exits_2() {
    let dir = TempDir::new().unwrap();
    let trace = write(&dir, "empty.txt", "# tracer: nop\n#\n");
    iommulab()
        .arg("validate")
        .arg(&trace)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("nothing to validate"));
}
