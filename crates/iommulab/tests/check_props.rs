//! Property tests of `trace::check`: a random *valid* history of DMA-API calls —
//! maps, allocs and scatter-gather lists on several devices and CPUs, unmapped with their
//! own size, direction and list, synced inside their range in a legal direction, with the
//! kernel's `iommu:map`/`iommu:unmap` events around them, everything unmapped at the end —
//! is always clean; and dropping any one unmap from it is always found.

use iommulab::trace::check::{CheckOptions, CheckReport, FindingKind, check_ftrace};
use iommulab::trace::ftrace::{FtraceOptions, FtraceReader};
use proptest::prelude::*;

const DIRS: [&str; 3] = ["BIDIRECTIONAL", "TO_DEVICE", "FROM_DEVICE"];

#[derive(Clone, Copy, Debug)]
enum Op {
    /// Map into a free slot: (slot, size, direction, kind 0 page / 1 alloc / 2 sg of n).
    Map {
        slot: usize,
        size: u64,
        dir: usize,
        kind: u8,
        n: u64,
        cpu: u16,
    },
    /// Sync a live slot at this offset fraction.
    Sync {
        slot: usize,
        for_cpu: bool,
        cpu: u16,
    },
    /// Unmap a live slot.
    Unmap { slot: usize, cpu: u16 },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (
            0usize..12,
            1u64..20_000,
            0usize..3,
            0u8..3,
            1u64..5,
            0u16..3
        )
            .prop_map(|(slot, size, dir, kind, n, cpu)| Op::Map {
                slot,
                size,
                dir,
                kind,
                n,
                cpu
            }),
        (0usize..12, any::<bool>(), 0u16..3).prop_map(|(slot, for_cpu, cpu)| Op::Sync {
            slot,
            for_cpu,
            cpu
        }),
        (0usize..12, 0u16..3).prop_map(|(slot, cpu)| Op::Unmap { slot, cpu }),
    ]
}

#[derive(Clone, Debug)]
struct Live {
    dev: usize,
    dma: u64,
    size: u64,
    dir: usize,
    kind: u8,
    phys: Vec<u64>,
}

/// The slot's device and DMA address: 4 devices, each slot its own IOVA range.
fn slot_dev(slot: usize) -> usize {
    slot % 4
}

fn slot_dma(slot: usize) -> u64 {
    0xf000_0000 + (slot as u64) * 0x10_0000
}

fn line(out: &mut Vec<String>, cpu: u16, event: &str, body: String) {
    let n = out.len();
    out.push(format!(
        "  task-{cpu} [{cpu:03}] ..... {}.{:06}: {event}: {body}\n",
        10 + n / 1_000_000,
        n % 1_000_000
    ));
}

fn pages(dma: u64, size: u64) -> (u64, u64) {
    let start = dma & !0xfff;
    (start, ((dma + size + 0xfff) & !0xfff) - start)
}

fn iommu(out: &mut Vec<String>, cpu: u16, map: bool, dma: u64, size: u64) {
    let (iova, len) = pages(dma, size);
    if map {
        // One iommu:map per page, as iommu-dma maps an sg list.
        for p in (0..len).step_by(4096) {
            line(
                out,
                cpu,
                "map",
                format!(
                    "IOMMU: iova=0x{:016x} - 0x{:016x} paddr=0x{:016x} size=4096",
                    iova + p,
                    iova + p + 4096,
                    0x1000 + p
                ),
            );
        }
    } else {
        line(
            out,
            cpu,
            "unmap",
            format!(
                "IOMMU: iova=0x{iova:016x} - 0x{:016x} size={len} unmapped_size={len}",
                iova + len
            ),
        );
    }
}

fn unmap_lines(out: &mut Vec<String>, l: &Live, cpu: u16) {
    let dev = format!("0000:00:0{}.0", l.dev);
    let dir = DIRS[l.dir];
    match l.kind {
        0 => {
            iommu(out, cpu, false, l.dma, l.size);
            line(
                out,
                cpu,
                "dma_unmap_page",
                format!(
                    "{dev} dir={dir} dma_addr={:x} size={} attrs=",
                    l.dma, l.size
                ),
            );
        }
        1 => {
            line(
                out,
                cpu,
                "dma_free",
                format!(
                    "{dev} dir=BIDIRECTIONAL dma_addr={:x} size={} virt_addr={:016x} attrs=",
                    l.dma, l.size, l.phys[0]
                ),
            );
            iommu(out, cpu, false, l.dma, l.size);
        }
        _ => {
            let p: Vec<String> = l.phys.iter().map(|p| format!("0x{p:x}")).collect();
            line(
                out,
                cpu,
                "dma_unmap_sg",
                format!("{dev} dir={dir} phys_addrs={{{}}} attrs=", p.join(",")),
            );
            iommu(out, cpu, false, l.dma, l.size);
        }
    }
}

/// The ftrace text of a valid history, and the line numbers of its unmap calls.
fn history(ops: &[Op]) -> (String, Vec<usize>) {
    let mut out = vec!["# tracer: nop\n".to_owned()];
    let mut live: Vec<Option<Live>> = vec![None; 12];
    let mut next_page: u64 = 0x10_0000;
    let mut unmaps = Vec::new();
    for &o in ops {
        match o {
            Op::Map {
                slot,
                size,
                dir,
                kind,
                n,
                cpu,
            } => {
                if live[slot].is_some() {
                    continue;
                }
                let dev = slot_dev(slot);
                let dma = slot_dma(slot) + (size % 7) * 64;
                // Fresh pages for every mapping: no two live mappings share a cacheline.
                let phys: Vec<u64> = (0..if kind == 2 { n } else { 1 })
                    .map(|i| {
                        next_page += 0x1000 * 8;
                        next_page + i * 64
                    })
                    .collect();
                let dir = if kind == 1 { 0 } else { dir };
                let l = Live {
                    dev,
                    dma,
                    size,
                    dir,
                    kind,
                    phys,
                };
                iommu(&mut out, cpu, true, dma, size);
                let devn = format!("0000:00:0{dev}.0");
                let d = DIRS[dir];
                match kind {
                    0 => line(
                        &mut out,
                        cpu,
                        "dma_map_page",
                        format!(
                            "{devn} dir={d} dma_addr={dma:x} size={size} phys_addr={:x} attrs=",
                            l.phys[0]
                        ),
                    ),
                    1 => line(
                        &mut out,
                        cpu,
                        "dma_alloc",
                        format!(
                            "{devn} dir=BIDIRECTIONAL dma_addr={dma:x} size={size} virt_addr={:016x} flags=GFP_KERNEL attrs=",
                            l.phys[0]
                        ),
                    ),
                    _ => {
                        let p: Vec<String> = l.phys.iter().map(|p| format!("0x{p:x}")).collect();
                        let k = l.phys.len();
                        line(
                            &mut out,
                            cpu,
                            "dma_map_sg",
                            format!(
                                "{devn} dir={d} nents={k}/{k} ents=1/1 dma_addrs={{0x{dma:x}}} sizes={{0x{size:x}}} phys_addrs={{{}}} attrs=",
                                p.join(",")
                            ),
                        );
                    }
                }
                live[slot] = Some(l);
            }
            Op::Sync { slot, for_cpu, cpu } => {
                let Some(l) = &live[slot] else { continue };
                let ev = if for_cpu {
                    "dma_sync_single_for_cpu"
                } else {
                    "dma_sync_single_for_device"
                };
                let off = l.size / 3;
                line(
                    &mut out,
                    cpu,
                    ev,
                    format!(
                        "0000:00:0{}.0 dir={} dma_addr={:x} size={}",
                        l.dev,
                        DIRS[l.dir],
                        l.dma + off,
                        l.size - off
                    ),
                );
            }
            Op::Unmap { slot, cpu } => {
                let Some(l) = live[slot].take() else { continue };
                let before = out.len();
                unmap_lines(&mut out, &l, cpu);
                unmaps.push(before);
            }
        }
    }
    for l in live.iter_mut().filter_map(Option::take) {
        let before = out.len();
        unmap_lines(&mut out, &l, 0);
        unmaps.push(before);
    }
    (out.concat(), unmaps)
}

/// The histories hold every call from the first map to the last unmap: `from_boot` and
/// `leaks` state it.
fn check_text(text: &str) -> CheckReport {
    let mut r = FtraceReader::new(text.as_bytes(), "p.txt".into(), FtraceOptions::default());
    let options = CheckOptions {
        from_boot: true,
        leaks: true,
        ..CheckOptions::default()
    };
    check_ftrace(&mut r, "p.txt", &options).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Valid histories are clean, with the IOMMU layer checked whenever anything was mapped.
    #[test]
    fn valid_histories_are_clean(ops in proptest::collection::vec(op(), 0..120)) {
        let (text, unmaps) = history(&ops);
        let r = check_text(&text);
        prop_assert!(r.is_clean(), "{}\n{}", r.to_text(20), text);
        prop_assert_eq!(r.outstanding_at_end, 0);
        prop_assert_eq!(r.iommu_checked, !unmaps.is_empty());
    }

    /// Dropping the lines of one unmap call (the DMA event and its iommu:unmap) leaves
    /// exactly one leak.
    #[test]
    fn a_dropped_unmap_is_a_leak(ops in proptest::collection::vec(op(), 1..80), pick in any::<prop::sample::Index>()) {
        let (text, unmaps) = history(&ops);
        prop_assume!(!unmaps.is_empty());
        let lines: Vec<&str> = text.split_inclusive('\n').collect();
        let start = unmaps[pick.index(unmaps.len())];
        // An unmap call is its dma_* line and one iommu:unmap line.
        let cut: String = lines[..start].concat() + &lines[start + 2..].concat();
        let r = check_text(&cut);
        prop_assert_eq!(r.by_kind.get(&FindingKind::Leak).copied(), Some(1), "{}", r.to_text(20));
        // The stale mapping may also be what a later sync in its range finds (as in Linux).
        let stale_sync = [
            FindingKind::SyncDirectionMismatch,
            FindingKind::SyncReadOnlyForCpu,
            FindingKind::SyncWriteOnlyForDevice,
            FindingKind::SyncOutsideMapping,
        ];
        prop_assert!(
            r.by_kind.keys().all(|k| *k == FindingKind::Leak || stale_sync.contains(k)),
            "{}",
            r.to_text(20)
        );
    }
}
