//! End-to-end tests of `iommulab compare` and of Linux's configuration names: one preset
//! for every entry point, the exposure window from the flush policy's bookkeeping, per-device
//! rows and the `--device` filter, and the README's example as printed.

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::Value;

fn iommulab() -> assert_cmd::Command {
    assert_cmd::cargo::cargo_bin_cmd!("iommulab")
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The small committed trace: a virtio disk, a virtio NIC and an NVMe disk, strict mode.
const QEMU: &str = "traces/qemu-virtio-6.12.95+deb12-cloud-amd64.txt.zst";

/// The expected `compare --json` of [`QEMU`], which Python's `iommulab.compare` is held to
/// as well (`tests/python/test_compare.py`). Refresh after a deliberate change of the model:
/// `iommulab compare traces/qemu-virtio-6.12.95+deb12-cloud-amd64.txt.zst --json >
/// crates/iommulab-cli/tests/golden/compare-qemu-virtio.json`.
const GOLDEN: &str = "crates/iommulab-cli/tests/golden/compare-qemu-virtio.json";

fn stdout_of(args: &[&str]) -> String {
    let out = iommulab().current_dir(repo()).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn json_of(args: &[&str]) -> Value {
    let t = stdout_of(args);
    serde_json::from_str(&t).unwrap_or_else(|e| panic!("not JSON ({e}):\n{t}"))
}

fn f(v: &Value, k: &str) -> f64 {
    v[k].as_f64().unwrap_or_else(|| panic!("{k} in {v}"))
}

fn u(v: &Value, k: &str) -> u64 {
    v[k].as_u64().unwrap_or_else(|| panic!("{k} in {v}"))
}

fn config<'a>(v: &'a Value, name: &str) -> &'a Value {
    v["configs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no {name} in {v}"))
}

#[test]
fn compare_gives_strict_and_lazy_per_device_and_in_total() {
    let v = json_of(&["compare", QEMU, "--json", "-q"]);
    assert_eq!(v["preset"], "modern");
    let duration = u(&v, "duration_ns");
    // The trace spans about 33 s of guest time.
    assert!(
        (10_000_000_000..60_000_000_000).contains(&duration),
        "{duration}"
    );
    let names: Vec<&str> = v["configs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["linux-strict", "linux-lazy"]);
    let (strict, lazy) = (config(&v, "linux-strict"), config(&v, "linux-lazy"));
    for c in [strict, lazy] {
        let t = &c["total"];
        assert!(t.get("device").is_none(), "{t}");
        let devices = c["devices"].as_array().unwrap();
        assert!(devices.len() >= 2, "{c}");
        // The devices' rows add up to the total.
        let ios: u64 = devices.iter().map(|d| u(d, "ios")).sum();
        let inv: u64 = devices.iter().map(|d| u(d, "invalidations")).sum();
        let share: f64 = devices.iter().map(|d| f(d, "extra_cpu_share")).sum();
        assert_eq!(ios, u(t, "ios"), "{c}");
        assert_eq!(inv, u(t, "invalidations"), "{c}");
        assert!((share - f(t, "extra_cpu_share")).abs() < 1e-9, "{c}");
        let s = f(t, "extra_cpu_share");
        assert!(s > 0.0 && s < 1.0, "{s}");
        assert!(f(t, "cpu_ns_per_op") > 0.0);
        for d in devices {
            assert!(d["device"].as_str().is_some_and(|n| !n.is_empty()), "{d}");
        }
    }
    // Strict: every unmap is invalidated before it returns.
    let e = &strict["total"]["exposure"];
    for k in ["p50_ns", "p99_ns", "max_ns", "bytes", "max_pending"] {
        assert_eq!(u(e, k), 0, "strict {k}: {e}");
    }
    // Lazy: the flush queue leaves ranges reachable until its timer (10 ms at HZ=250 is 8-12
    // ms) or a full ring; the longest window is about a timer period.
    let e = &lazy["total"]["exposure"];
    assert!(
        u(e, "max_ns") >= 8_000_000 && u(e, "max_ns") < 13_000_000,
        "{e}"
    );
    assert!(
        u(e, "p99_ns") <= u(e, "max_ns") && u(e, "p50_ns") <= u(e, "p99_ns"),
        "{e}"
    );
    assert!(u(e, "bytes") >= 4096 && u(e, "max_pending") >= 1, "{e}");
    assert!(u(&lazy["total"], "invalidations") < u(&strict["total"], "invalidations"));
    assert!(f(&lazy["total"], "cpu_ns_per_op") < f(&strict["total"], "cpu_ns_per_op"));
}

/// The same configuration by the CLI's name, an alias, a config file and (in the Python
/// tests) `iommulab.compare`: the same numbers, held to one committed file.
#[test]
fn cli_config_file_and_golden_agree() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("modern.toml");
    fs::write(&file, "configuration = \"modern\"\n").unwrap();
    let v = json_of(&[
        "compare",
        QEMU,
        "--json",
        "-q",
        "--config-file",
        file.to_str().unwrap(),
    ]);
    let (lazy, modern) = (config(&v, "linux-lazy"), config(&v, "modern"));
    assert_eq!(lazy["total"], modern["total"]);
    assert_eq!(lazy["devices"], modern["devices"]);
    let golden: Value =
        serde_json::from_str(&fs::read_to_string(repo().join(GOLDEN)).unwrap()).unwrap();
    let plain = json_of(&["compare", QEMU, "--json", "-q"]);
    assert_eq!(plain, golden, "refresh {GOLDEN} after a deliberate change");
}

/// `--device` replays one device: its numbers are its row of the whole trace (its domain has
/// its own allocator and flush queue).
#[test]
fn device_filter_keeps_one_device() {
    let all = json_of(&["compare", QEMU, "--json", "-q"]);
    let lazy = config(&all, "linux-lazy");
    let first = &lazy["devices"][0];
    let name = first["device"].as_str().unwrap();
    let one = json_of(&["compare", QEMU, "--json", "-q", "--device", name]);
    let only = config(&one, "linux-lazy");
    assert_eq!(only["devices"].as_array().unwrap().len(), 1, "{only}");
    assert_eq!(only["devices"][0]["device"], name);
    for k in ["ios", "invalidations"] {
        assert_eq!(only["total"][k], first[k], "{k}");
    }
    assert_eq!(one["duration_ns"], all["duration_ns"]);
    // replay --device too; an unknown device is named with the trace's devices.
    let r = json_of(&["replay", QEMU, "--json", "-q", "--device", name]);
    assert_eq!(r["ops"], first["ios"]);
    let out = iommulab()
        .current_dir(repo())
        .args(["compare", QEMU, "--device", "0000:99:00.0"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("0000:99:00.0") && err.contains(name), "{err}");
}

/// One preset for every entry point: `replay --config X` and a file holding only
/// `configuration = "X"` give the same numbers, and both say which preset ran.
#[test]
fn replay_flag_and_file_price_alike() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["strict", "linux-strict", "lazy"] {
        let file = dir.path().join("c.toml");
        fs::write(
            &file,
            format!(
                "configuration = \"{name}\"\n[workload]\ntrace = \"{}\"\n",
                repo().join(QEMU).display()
            ),
        )
        .unwrap();
        let flag = json_of(&["replay", QEMU, "--config", name, "--json", "-q"]);
        let run = json_of(&["run", "-q", "--json", file.to_str().unwrap()]);
        assert_eq!(flag["preset"], "modern");
        assert_eq!(run["cost_preset"], "modern");
        assert_eq!(
            flag["modeled_ns_per_op"], run["modeled_ns_per_op"],
            "{name}"
        );
        let label = if name == "lazy" { "linux-lazy" } else { name };
        assert_eq!(flag["config"], label);
    }
    let t = stdout_of(&["replay", QEMU, "-q"]);
    assert!(t.starts_with("preset: modern\n"), "{t}");
    // -q: the results only, no dma-debug findings.
    assert!(!t.contains("dma-debug"), "{t}");
    let csv = stdout_of(&[
        "replay",
        QEMU,
        "-q",
        "--csv",
        "--config",
        "linux-strict,linux-lazy",
    ]);
    assert_eq!(csv.lines().count(), 3, "{csv}");
    assert!(
        csv.lines().nth(1).unwrap().starts_with("linux-strict,"),
        "{csv}"
    );
}

/// The README's compare example is what the command prints.
#[test]
fn readme_compare_example_is_what_it_prints() {
    let readme = fs::read_to_string(repo().join("README.md")).unwrap();
    let start = "$ iommulab compare ";
    let at = readme.find(start).expect("the README shows a compare");
    let block = &readme[at..];
    let block = &block[..block.find("```").expect("the block ends")];
    let mut lines = block.lines();
    let command = lines.next().unwrap().trim_start_matches("$ iommulab ");
    let shown: Vec<&str> = lines.collect();
    let args: Vec<&str> = command.split_whitespace().collect();
    let mut with_q = args.clone();
    with_q.push("-q");
    let printed = stdout_of(&with_q);
    let printed: Vec<&str> = printed.lines().collect();
    assert_eq!(
        shown, printed,
        "README.md shows another output than `iommulab {command}`"
    );
}
