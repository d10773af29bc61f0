//! Cross-check against libCacheSim (PyPI `libcachesim` 0.3.5, installed by `make deps`).
//!
//! 1. **Curves** (`iommulab mrc`, the library's `mrc::hit_rate_curve`): on the committed real
//!    QEMU trace and on generated traces, the page-sequence LRU, FIFO and OPT hit counts equal
//!    libCacheSim's LRU, FIFO and Belady on the `.oracleGeneral` export of the same trace
//!    (`iommulab trace convert`) at **every** quota from 1 to the trace's distinct pages. The
//!    export's request count equals the curve's `maps`: both are the page sequence (each 4 KiB
//!    page a mapped buffer spans is one request, in order), read through the same replay.
//! 2. **Map cache** (`iommulab replay --strategy on-demand`): on a trace where every map is
//!    unmapped before the next one (no pinning), the guest model's own counts equal
//!    libCacheSim's at a few quotas.
//!
//! Semantics matched (see `scripts/libcachesim_crosscheck.py`): objects are 4096 bytes, so a
//! quota of Q pages is a cache of Q × 4096 bytes; a hit is `cache.get` finding the page, a
//! miss inserts it (both count the first access to a page as a miss, iommulab as one map
//! hypercall); OPT is Belady reading `next_access_vtime`. The page sequence never refuses a map
//! at a quota ≥ 1, so iommulab's `misses` is libCacheSim's misses.
//!
//! Python: `$IOMMULAB_PYTHON` (default `python3`; `make test` passes its `$(PYTHON)`). If it
//! cannot `import libcachesim` the tests print why and pass, unless
//! `IOMMULAB_REQUIRE_LIBCACHESIM=1` is set (then they fail).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn iommulab() -> assert_cmd::Command {
    assert_cmd::cargo::cargo_bin_cmd!("iommulab")
}

fn python() -> String {
    std::env::var("IOMMULAB_PYTHON").unwrap_or_else(|_| "python3".to_owned())
}

/// Whether libCacheSim can be imported; panics if it cannot and it is required.
fn have_libcachesim() -> bool {
    let py = python();
    let have = Command::new(&py)
        .args(["-c", "import libcachesim"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !have {
        assert!(
            std::env::var("IOMMULAB_REQUIRE_LIBCACHESIM").as_deref() != Ok("1"),
            "{py} cannot import libcachesim ({py} -m pip install libcachesim==0.3.5, or set \
             IOMMULAB_PYTHON to a Python that can)"
        );
        eprintln!("skipped: {py} cannot import libcachesim (run `make deps`)");
    }
    have
}

/// Runs `scripts/libcachesim_crosscheck.py` on an `.oracleGeneral` trace.
fn libcachesim(og: &Path, args: &[String]) -> Value {
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/libcachesim_crosscheck.py");
    let out = Command::new(python())
        .arg(&script)
        .arg(og)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn convert(trace: &Path, og: &Path) {
    iommulab()
        .args(["trace", "convert", "-q"])
        .arg(trace)
        .arg("-o")
        .arg(og)
        .assert()
        .success();
}

fn generate(dir: &Path, workload: &str, events: u32) -> PathBuf {
    let p = dir.join(format!("{workload}.iot"));
    iommulab()
        .args(["trace", "generate", workload, "--events"])
        .arg(events.to_string())
        .arg("-o")
        .arg(&p)
        .assert()
        .success();
    p
}

/// The curve of `policy` over every quota, from `iommulab mrc --json`.
fn mrc(trace: &Path, policy: &str) -> Value {
    let o = iommulab()
        .arg("mrc")
        .arg(trace)
        .args(["--policy", policy, "--json"])
        .assert()
        .success();
    serde_json::from_slice(&o.get_output().stdout).unwrap()
}

/// `iommulab mrc` equals libCacheSim at every quota 1..=distinct pages for FIFO, LRU and OPT,
/// and `iommulab mrc` of the `.oracleGeneral` export gives the trace's own curves.
fn curves_equal_libcachesim(trace: &Path) {
    let dir = tempfile::tempdir().unwrap();
    let og = dir.path().join("t.oracleGeneral");
    convert(trace, &og);
    let ours: BTreeMap<&str, Value> = ["fifo", "lru", "opt"]
        .into_iter()
        .map(|p| (p, mrc(trace, p)))
        .collect();
    for (policy, c) in &ours {
        let from_og = mrc(&og, policy);
        for key in [
            "quota",
            "hits",
            "misses",
            "refused",
            "maps",
            "distinct_pages",
            "method",
        ] {
            assert_eq!(from_og[key], c[key], "{} {policy}: {key}", trace.display());
        }
    }
    let distinct = ours["lru"]["distinct_pages"].as_u64().unwrap();
    assert!(
        distinct > 1,
        "{}: {distinct} distinct pages",
        trace.display()
    );
    let lcs = libcachesim(&og, &["--up-to".to_owned(), distinct.to_string()]);
    for (policy, c) in &ours {
        assert_eq!(c["pinning"], false);
        assert_eq!(
            lcs["requests"],
            c["maps"],
            "{}: the export is not the page sequence",
            trace.display()
        );
        let quota = c["quota"].as_array().unwrap();
        let hits = c["hits"].as_array().unwrap();
        assert_eq!(quota.len() as u64, distinct + 1);
        let mut checked = 0;
        for (q, h) in quota.iter().zip(hits).skip(1) {
            let q = q.as_u64().unwrap().to_string();
            assert_eq!(
                *h,
                lcs[*policy][&q],
                "{} {policy} at quota {q}: ours {h} vs libCacheSim {}",
                trace.display(),
                lcs[*policy][&q]
            );
            checked += 1;
        }
        assert_eq!(checked, distinct);
    }
}

/// The committed real trace (Debian 6.12 under QEMU, virtio-net, virtio-blk and NVMe, with
/// `iommu:` events the replay and the export both skip), read as ftrace text.
#[test]
fn qemu_trace_curves_equal_libcachesim_at_every_quota() {
    if !have_libcachesim() {
        return;
    }
    curves_equal_libcachesim(
        &Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../traces/qemu-virtio-6.12.95+deb12-cloud-amd64.txt.zst"),
    );
}

/// Generated workloads: buffers in flight (apache-sendfile, block), one page at a time with a
/// large footprint (pseudo-scsi), and the skewed CSV below.
#[test]
fn generated_trace_curves_equal_libcachesim_at_every_quota() {
    if !have_libcachesim() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for (w, events) in [
        ("apache-sendfile", 20_000),
        ("block", 20_000),
        ("pseudo-scsi", 4_000),
    ] {
        curves_equal_libcachesim(&generate(dir.path(), w, events));
    }
    let csv = dir.path().join("skewed.csv");
    write_skewed_trace(&csv);
    curves_equal_libcachesim(&csv);
}

/// A file libCacheSim itself wrote (`Util.convert_to_oracleGeneral` from a CSV of object
/// requests, ids up to 2^40) reads as its requests: `iommulab mrc` equals libCacheSim's
/// LRU, FIFO and Belady at every quota, and `trace stats` counts its requests and objects.
#[test]
fn an_oracle_general_file_libcachesim_wrote_equals_libcachesim_at_every_quota() {
    if !have_libcachesim() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("requests.csv");
    let og = dir.path().join("lcs.oracleGeneral");
    let mut text = String::from("time,obj,size\n");
    let mut x: u64 = 0x2545_F491_4F6C_DD1D;
    for t in 0..3000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let u = x % 1000;
        let _ = writeln!(text, "{t},{},4096", (1u64 << 40) + u * u / 2000);
    }
    std::fs::write(&csv, text).unwrap();
    let script = "import sys, libcachesim as lcs\n\
        p = lcs.ReaderInitParam(has_header=True, has_header_set=True, delimiter=',')\n\
        p.time_field, p.obj_id_field, p.obj_size_field = 1, 2, 3\n\
        r = lcs.TraceReader(sys.argv[1], lcs.TraceType.CSV_TRACE, reader_init_params=p)\n\
        lcs.Util.convert_to_oracleGeneral(r._reader, sys.argv[2])\n";
    let out = Command::new(python())
        .args(["-c", script])
        .arg(&csv)
        .arg(&og)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stats = iommulab()
        .args(["trace", "stats", "--json"])
        .arg(&og)
        .assert()
        .success();
    let stats: Value = serde_json::from_slice(&stats.get_output().stdout).unwrap();
    assert_eq!(stats["requests"], 3000);
    let distinct = stats["distinct_pages"].as_u64().unwrap();
    assert!(distinct > 100, "{distinct}");
    let lcs = libcachesim(&og, &["--up-to".to_owned(), distinct.to_string()]);
    for policy in ["fifo", "lru", "opt"] {
        let c = mrc(&og, policy);
        assert_eq!(c["maps"], 3000);
        assert_eq!(c["distinct_pages"], distinct);
        let hits = c["hits"].as_array().unwrap();
        assert_eq!(hits.len() as u64, distinct + 1);
        for (q, h) in hits.iter().enumerate().skip(1) {
            assert_eq!(*h, lcs[policy][q.to_string()], "{policy} at quota {q}");
        }
    }
}

/// A deterministic skewed page stream, each page mapped then unmapped (no pinning).
fn write_skewed_trace(path: &Path) {
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

/// The guest model's map cache itself (not the curve) equals libCacheSim on a trace without
/// pinning, and the script's fast path (libCacheSim's C request loop) equals calling
/// `cache.get` per request.
#[test]
fn map_cache_replay_hits_equal_libcachesim() {
    if !have_libcachesim() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("t.csv");
    let og = dir.path().join("t.oracleGeneral");
    write_skewed_trace(&csv);
    convert(&csv, &og);
    let quotas = [1u64, 3, 8, 20, 50, 120, 400];
    let args: Vec<String> = quotas.iter().map(u64::to_string).collect();
    let lcs = libcachesim(&og, &args);
    let mut get_args = args.clone();
    get_args.extend(["--method".to_owned(), "get".to_owned()]);
    assert_eq!(libcachesim(&og, &get_args), lcs);
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
