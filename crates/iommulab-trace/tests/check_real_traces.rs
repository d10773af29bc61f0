//! `check` on real Linux 6.12 captures: every shipped trace in `traces/` is clean (the large
//! ones on a bounded prefix, to keep debug test time short; `iommulab check` on the whole
//! file is in docs/check.md), with the defaults and with `from_boot` (they were captured from
//! boot); and mid-run captures, cut from the shipped ones at a line well into the run
//! (tests/data/mid-run, the original header kept), are clean by default but not with
//! `from_boot`, which says they hold every mapping. Misuse injected into a mid-run capture is
//! still found.

use std::io::{BufRead, Read};
use std::path::{Path, PathBuf};

use iommulab_trace::check::{CheckOptions, CheckReport, FindingKind, Pairing, check_ftrace};
use iommulab_trace::ftrace::{FtraceOptions, FtraceReader};
use iommulab_trace::open_text;

fn traces() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../traces")
}

fn mid_run(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/mid-run")
        .join(format!("mid-run-{name}.txt.zst"))
}

/// The first `max_lines` lines of a (compressed) trace.
fn text(path: &Path, max_lines: usize) -> String {
    let mut r = open_text(path).unwrap();
    let mut out = String::new();
    let mut line = String::new();
    for _ in 0..max_lines {
        line.clear();
        if r.read_line(&mut line).unwrap() == 0 {
            break;
        }
        out.push_str(&line);
    }
    if max_lines == usize::MAX {
        let mut rest = String::new();
        r.read_to_string(&mut rest).unwrap();
        out.push_str(&rest);
    }
    out
}

fn check(text: &str, options: &CheckOptions) -> CheckReport {
    let mut r = FtraceReader::new(text.as_bytes(), "t.txt".into(), FtraceOptions::default());
    check_ftrace(&mut r, "t.txt", options).unwrap()
}

fn from_boot() -> CheckOptions {
    CheckOptions {
        from_boot: true,
        ..CheckOptions::default()
    }
}

#[test]
fn shipped_traces_are_clean() {
    // (file, lines checked): the three large ones on their first 60,000 lines.
    for (name, lines) in [
        ("probe-6.12.95+deb12-amd64", usize::MAX),
        ("qemu-virtio-6.12.95+deb12-cloud-amd64", usize::MAX),
        ("yassour-httpd-6.12.95+deb12-amd64", usize::MAX),
        ("yassour-tcp-6.12.95+deb12-amd64", 60_000),
        ("fio-6.12.95+deb12-amd64", 60_000),
        ("lazy-6.12.95+deb12-amd64", 60_000),
    ] {
        let t = text(&traces().join(format!("{name}.txt.zst")), lines);
        for opts in [CheckOptions::default(), from_boot()] {
            let r = check(&t, &opts);
            assert!(r.is_clean(), "{name}: {}", r.to_text(5));
            assert!(r.iommu_checked, "{name}");
            assert_eq!(r.iommu_pairing, Pairing::Context, "{name}");
            assert_eq!(r.mapped_before_tracing, 0, "{name}: captured from boot");
        }
        // The ISA bridge's 16 MiB identity map (VT-d, every trace but the cloud kernel's).
        if !name.contains("cloud") {
            let r = check(&t, &CheckOptions::default());
            assert_eq!((r.identity_maps, r.identity_bytes), (1, 16 << 20), "{name}");
        }
    }
}

/// Real captures that start mid-run (tracing turned on from tracefs after the drivers
/// probed and a warm-up, 2 CPUs: traces/README.md): clean by default, with the ranges mapped
/// before tracing counted; `from_boot` calls their unmaps misuse. `midrun` on its first
/// 60,000 lines (its pre-trace ranges are unmapped at its end), `midrun-tx` whole.
/// `lazy-kprobe` traces from before the drivers load, with a `free_iova_fast` kprobe line
/// per free, and is clean both ways.
#[test]
fn real_mid_run_captures_are_clean() {
    for (name, lines, mid_run) in [
        ("midrun-6.12.95+deb12-amd64", 60_000, None),
        ("midrun-tx-6.12.95+deb12-amd64", usize::MAX, Some(true)),
        ("lazy-kprobe-6.12.95+deb12-amd64", 60_000, Some(false)),
    ] {
        let t = text(&traces().join(format!("{name}.txt.zst")), lines);
        let r = check(&t, &CheckOptions::default());
        assert!(r.is_clean(), "{name}: {}", r.to_text(5));
        assert_eq!(r.iommu_pairing, Pairing::Context, "{name}");
        let Some(mid_run) = mid_run else {
            continue;
        };
        assert_eq!(r.mapped_before_tracing > 0, mid_run, "{name}");
        let r = check(&t, &from_boot());
        assert_eq!(
            r.by_kind.get(&FindingKind::UnmapNotMapped).copied() > Some(0),
            mid_run,
            "{name}: {}",
            r.to_text(3)
        );
    }
}

#[test]
fn mid_run_captures_are_clean_unless_said_to_be_from_boot() {
    for name in ["fio", "yassour-tcp", "yassour-httpd", "qemu-virtio"] {
        let t = text(&mid_run(name), usize::MAX);
        let r = check(&t, &CheckOptions::default());
        assert!(r.is_clean(), "{name}: {}", r.to_text(5));
        assert!(r.mapped_before_tracing > 0, "{name}");
        assert!(r.outstanding_at_end > 0, "{name}");
        assert_eq!(r.iommu_pairing, Pairing::Context, "{name}");
        // Stated to hold every mapping, the same capture shows its pre-trace unmaps as misuse.
        let r = check(&t, &from_boot());
        assert!(
            r.by_kind.get(&FindingKind::UnmapNotMapped).copied() > Some(0),
            "{name}: {}",
            r.to_text(3)
        );
    }
}

/// The fio capture has hard interrupts unmapping on both CPUs between a task's iommu:maps
/// and its dma_map_sg. Without the flags column the same lines still check clean here (the
/// window is wide enough), and the report says it paired per CPU.
#[test]
fn without_the_flags_column_pairing_is_per_cpu() {
    let t = text(&mid_run("fio"), usize::MAX);
    let nesting = t
        .lines()
        .filter(|l| l.contains(" d.h") || l.contains(" d.H"))
        .count();
    assert!(nesting > 1000, "{nesting}");
    let stripped: String = t
        .lines()
        .map(|l| match l.find("] ") {
            Some(i) if !l.starts_with('#') => format!("{}{}\n", &l[..i + 2], &l[i + 8..]),
            _ => format!("{l}\n"),
        })
        .collect();
    let r = check(&stripped, &CheckOptions::default());
    assert_eq!(r.iommu_pairing, Pairing::Cpu);
    assert!(
        r.notes.iter().any(|n| n.contains("no flags column")),
        "{:?}",
        r.notes
    );
    assert_eq!(r.events, check(&t, &CheckOptions::default()).events);
}

/// Misuse injected into a real mid-run capture is found with the default options.
#[test]
fn misuse_in_a_mid_run_capture_is_found() {
    let t = text(&mid_run("fio"), usize::MAX);
    let lines: Vec<&str> = t.lines().collect();
    // A dma_map_page the capture made, and its dma_unmap_page.
    let mapped: Vec<usize> = (0..lines.len())
        .filter(|&i| lines[i].contains("dma_map_page:"))
        .collect();
    let addr = |l: &str| {
        l.split_whitespace()
            .find_map(|w| w.strip_prefix("dma_addr="))
            .unwrap()
            .to_owned()
    };
    // From the middle: its iommu:map is in the capture too.
    let (i, u) = mapped
        .iter()
        .skip(mapped.len() / 2)
        .find_map(|&m| {
            let a = format!("dma_addr={} ", addr(lines[m]));
            (m + 1..lines.len())
                .find(|&u| lines[u].contains("dma_unmap_page:") && lines[u].contains(&a))
                .map(|u| (m, u))
        })
        .unwrap();
    assert!(i < u);
    let with = |edit: &dyn Fn(&mut Vec<String>)| {
        let mut v: Vec<String> = lines.iter().map(|l| (*l).to_owned()).collect();
        edit(&mut v);
        check(&(v.join("\n") + "\n"), &CheckOptions::default())
    };
    // Unmapped twice.
    let r = with(&|v| {
        let dup = v[u].clone();
        v.insert(u + 1, dup);
    });
    assert_eq!(
        r.by_kind.get(&FindingKind::DoubleUnmap),
        Some(&1),
        "{}",
        r.to_text(3)
    );
    // Unmapped with another size.
    let r = with(&|v| v[u] = v[u].replacen(" size=", " size=1", 1));
    assert_eq!(
        r.by_kind.get(&FindingKind::UnmapSizeMismatch),
        Some(&1),
        "{}",
        r.to_text(3)
    );
    // Its iommu:map lost: the DMA map is not backed.
    let r = with(&|v| {
        let a = addr(&v[i]);
        let page = u64::from_str_radix(&a, 16).unwrap() & !0xfff;
        let j = (0..i)
            .rev()
            .find(|&j| v[j].contains(&format!("map: IOMMU: iova=0x{page:016x}")))
            .unwrap();
        v.remove(j);
    });
    assert!(
        r.by_kind.get(&FindingKind::IommuMapMissing).copied() >= Some(1),
        "{}",
        r.to_text(3)
    );
}
