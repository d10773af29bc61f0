//! Cross-check against libCacheSim (PyPI `libcachesim` 0.3.5, installed by `make deps`):
//! on a trace where every map is unmapped before the next one (no pinning), the guest map
//! cache's FIFO, LRU and OPT hit counts equal libCacheSim's FIFO, LRU and Belady on the
//! `.oracleGeneral` export of the same trace.
//!
//! Semantics matched (see `scripts/libcachesim_crosscheck.py`): one request per 4 KiB page
//! map; objects are 4096 bytes, so a quota of Q pages is a cache of Q × 4096 bytes; a hit is
//! `cache.get` finding the page, a miss inserts it (both count the first access to a page as
//! a miss, iommulab as one map hypercall); OPT is Belady reading `next_access_vtime`. With no
//! pinning nothing is refused at a quota ≥ 1, so iommulab's `misses` is libCacheSim's
//! misses.
//!
//! If `python3 -c "import libcachesim"` fails the test prints why and passes, unless
//! `IOMMULAB_REQUIRE_LIBCACHESIM=1` is set (then it fails).

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

use serde_json::Value;

fn iommulab() -> assert_cmd::Command {
    assert_cmd::cargo::cargo_bin_cmd!("iommulab")
}

/// A deterministic skewed page stream, each page mapped then unmapped (no pinning).
fn write_trace(path: &Path) {
    let mut s = String::from(
        "# iommulab trace v1\n# device: 0000:03:00.0\ntime_ns,cpu,device,kind,dir,dma,phys,len,nents\n",
    );
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut t = 0u64;
    for _ in 0..4000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        // Skewed: small pages much more often (a square of a uniform draw).
        let u = x % 1000;
        let g = u * u * 300 / 1_000_000;
        let phys = (0x40000 + g) << 12;
        t += 1000;
        let _ = writeln!(
            s,
            "{t},0,0000:03:00.0,map,TO_DEVICE,{phys:#x},{phys:#x},4096,0"
        );
        t += 1000;
        let _ = writeln!(s, "{t},0,0000:03:00.0,unmap,TO_DEVICE,{phys:#x},,4096,0");
    }
    std::fs::write(path, s).unwrap();
}

#[test]
fn fifo_lru_opt_hits_equal_libcachesim() {
    let have = Command::new("python3")
        .args(["-c", "import libcachesim"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !have {
        assert!(
            std::env::var("IOMMULAB_REQUIRE_LIBCACHESIM").as_deref() != Ok("1"),
            "libcachesim is not importable (python3 -m pip install libcachesim==0.3.5)"
        );
        eprintln!("skipped: python3 cannot import libcachesim (run `make deps`)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("t.csv");
    let og = dir.path().join("t.oracleGeneral");
    write_trace(&csv);
    iommulab()
        .args(["trace", "convert", "-q"])
        .arg(&csv)
        .arg("-o")
        .arg(&og)
        .assert()
        .success();
    let quotas = [1u64, 3, 8, 20, 50, 120, 400];
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/libcachesim_crosscheck.py");
    let out = Command::new("python3")
        .arg(&script)
        .arg(&og)
        .args(quotas.iter().map(u64::to_string))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lcs: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(lcs["requests"], 4000);
    for policy in ["fifo", "lru", "opt"] {
        for q in quotas {
            let o = iommulab()
                .args([
                    "replay",
                    "--strategy",
                    "on-demand",
                    "--eviction",
                    policy,
                    "--json",
                ])
                .arg("--quota")
                .arg(q.to_string())
                .arg(&csv)
                .assert()
                .success();
            let ours: Value = serde_json::from_slice(&o.get_output().stdout).unwrap();
            assert_eq!(ours["refused"], 0);
            assert_eq!(
                ours["hits"],
                lcs[policy][q.to_string()],
                "{policy} at quota {q}: ours {} vs libCacheSim {}",
                ours["hits"],
                lcs[policy][q.to_string()]
            );
        }
    }
}
