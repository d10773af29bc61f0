//! The real trace in `traces/` (recorded by `scripts/capture-qemu.sh` from Debian's
//! 6.12.95+deb12-cloud-amd64 kernel under QEMU with an emulated Intel VT-d IOMMU and
//! `iommu.strict=1`; `traces/README.md` says how) imports in strict mode, and what it imports
//! is consistent with what the kernel did:
//!
//! - the import report counts every event line the raw text holds, by name (counted here
//!   independently of the importer's parser), and matches the numbers in `traces/README.md`,
//!   with no malformed, lost or failed lines; `trace stats` gives the README's numbers too;
//! - every `dma_unmap_page` closes an open `dma_map_page` of the same device, address, size
//!   and direction, and every `dma_unmap_sg` its `dma_map_sg`, segment for segment (the
//!   importer copied the map's DMA addresses into it);
//! - the IOMMU page table rebuilt from `iommu:map`/`iommu:unmap` translates every DMA
//!   address a device mapped to the physical address its `dma_*` event printed, and (strict
//!   mode) no longer maps it once the device unmapped it.
//!
//! Devices, in order of first appearance (the guest loads virtio_net before virtio_blk):
//! `iommu`, 0000:00:04.0 virtio-net, 0000:00:01.0 virtio-blk (the data disk), 0000:00:02.0
//! virtio-blk (the disk the trace is written to, after tracing stopped), 0000:00:03.0 NVMe.

use std::collections::{BTreeMap, HashMap};
use std::io::BufRead;
use std::path::{Path, PathBuf};

use iommulab::trace::ftrace::{IOMMU_DEVICE, ImportReport};
use iommulab::trace::{
    Event, EventKind, EventSource, TraceDir, TraceFormat, open, open_ftrace, open_text, stats,
};

const TRACE: &str = "qemu-virtio-6.12.95+deb12-cloud-amd64.txt.zst";
const PAGE: u64 = 4096;
const DEVICES: [&str; 5] = [
    IOMMU_DEVICE,
    "0000:00:04.0",
    "0000:00:01.0",
    "0000:00:02.0",
    "0000:00:03.0",
];

fn trace_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../traces")
        .join(TRACE)
}

struct Imported {
    events: Vec<Event>,
    devices: Vec<String>,
    report: ImportReport,
}

/// Every event of a strict import: the first error fails the test.
fn import() -> Imported {
    let mut r = open_ftrace(&trace_path(), false).expect("open the committed trace");
    let mut events = Vec::new();
    while let Some(e) = r
        .next_event()
        .unwrap_or_else(|e| panic!("strict import of real kernel output: {e}"))
    {
        events.push(e);
    }
    Imported {
        events,
        devices: r.header().devices.clone(),
        report: r.report(),
    }
}

/// Event lines by name, counted from the text with a plain split (not the importer's
/// parser): the event name is the token after the `SECONDS.MICROS:` token.
fn count_lines_by_event() -> (u64, u64, BTreeMap<String, u64>) {
    let r = open_text(&trace_path()).unwrap();
    let (mut lines, mut comments) = (0, 0);
    let mut by = BTreeMap::new();
    for line in r.lines() {
        let line = line.unwrap();
        lines += 1;
        if line.starts_with('#') || line.trim().is_empty() {
            comments += 1;
            continue;
        }
        let tokens: Vec<&str> = line.split_whitespace().collect();
        let i = tokens
            .iter()
            .position(|t| {
                t.strip_suffix(':').is_some_and(|s| {
                    s.split_once('.').is_some_and(|(a, b)| {
                        !a.is_empty() && a.bytes().chain(b.bytes()).all(|c| c.is_ascii_digit())
                    })
                })
            })
            .unwrap_or_else(|| panic!("no timestamp in {line:?}"));
        let name = tokens[i + 1].strip_suffix(':').unwrap();
        *by.entry(name.to_owned()).or_insert(0) += 1;
    }
    (lines, comments, by)
}

#[test]
fn strict_import_counts_every_line_of_the_real_trace() {
    let Imported {
        events,
        devices,
        report,
    } = import();
    let (lines, comments, by_event) = count_lines_by_event();

    // The importer saw every event line the text holds, and nothing was lost or malformed.
    assert_eq!(report.lines, lines);
    assert_eq!(report.skipped_header_or_comment, comments);
    assert_eq!(report.by_event, by_event);
    assert_eq!(report.imported_lines, lines - comments);
    assert_eq!(report.events, events.len() as u64);
    assert_eq!(
        (
            report.skipped_other_events,
            report.lost_event_markers,
            report.lost_events,
            report.malformed_skipped,
            report.map_errors,
        ),
        (0, 0, 0, 0, 0)
    );
    assert_eq!(
        (
            report.unmatched_unmap_sg,
            report.truncated_sg,
            report.untracked_map_sg,
            report.partial_iommu_unmaps,
        ),
        (0, 0, 0, 0)
    );

    // The numbers in traces/README.md (there from grep).
    assert_eq!((lines, comments), (14_693, 12));
    let expected: BTreeMap<String, u64> = [
        ("dma_alloc", 5),
        ("dma_map_page", 3178),
        ("dma_map_sg", 80),
        ("dma_unmap_page", 2928),
        ("dma_unmap_sg", 80),
        ("map", 5402),
        ("unmap", 3008),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    assert_eq!(by_event, expected);
    assert_eq!(devices, DEVICES);

    // One CPU (-smp 1) and the `mono` clock: time never goes back.
    assert!(events.iter().all(|e| e.cpu == 0));
    assert!(events.windows(2).all(|w| w[0].time_ns <= w[1].time_ns));
    assert_eq!(events[0].time_ns, 0);
}

#[test]
fn trace_stats_of_the_real_trace() {
    // As `iommulab trace stats traces/...` opens it.
    let mut src = open(&trace_path(), TraceFormat::Auto, false).unwrap();
    let s = stats(&mut *src).unwrap();
    assert_eq!(s.devices, DEVICES);
    assert_eq!(s.events, 19_113);
    // The DMA-API layer (what drivers mapped) and the IOMMU layer (what the IOMMU driver
    // wrote) are counted apart: a map through the IOMMU is in both, never added up.
    let d = &s.dma_api;
    let by_kind: Vec<(&str, u64)> = d
        .by_kind
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(k, n)| (k.as_str(), *n))
        .collect();
    assert_eq!(
        by_kind,
        [
            ("alloc", 5),
            ("map", 3178),
            ("map_sg", 80),
            ("sg_seg", 4432),
            ("unmap", 2928),
            ("unmap_sg", 80),
        ]
    );
    assert_eq!((d.maps, d.unmaps, d.unmatched_unmaps), (3263, 3008, 0));
    assert_eq!(d.bytes_mapped, 28_282_556);
    let per_device: Vec<(&str, u64)> = s
        .dma_api_by_device
        .iter()
        .map(|x| (x.device.as_str(), x.stats.maps))
        .collect();
    assert_eq!(
        per_device,
        [
            ("0000:00:04.0", 397),
            ("0000:00:01.0", 2716),
            ("0000:00:02.0", 5),
            ("0000:00:03.0", 145)
        ]
    );
    let i = s
        .iommu
        .as_ref()
        .expect("the trace has iommu:map/unmap records");
    assert_eq!((i.map_events, i.unmap_events), (5402, 3008));
    assert_eq!(i.events + d.events, s.events);
    assert_eq!(i.unmapped_pages_not_mapped, 0);
    assert_eq!(s.duration_ns, 27_754_581_000);
}

/// An open device mapping: its length and direction, and for scatter-gather its segments.
#[derive(Debug, PartialEq)]
struct Open {
    len: u64,
    dir: TraceDir,
    segs: Vec<(Option<u64>, Option<u64>, u64)>,
}

/// Reads the `n` segment records after a `MapSg`/`UnmapSg` at `events[i]`.
fn segments(events: &[Event], i: usize) -> Vec<(Option<u64>, Option<u64>, u64)> {
    let n = events[i].nents as usize;
    let segs = &events[i + 1..i + 1 + n];
    assert!(segs.iter().all(|s| s.kind == EventKind::SgSeg));
    segs.iter().map(|s| (s.phys, s.dma, s.len)).collect()
}

#[test]
fn every_device_unmap_closes_its_map() {
    let Imported {
        events, devices, ..
    } = import();
    let iommu = u16::try_from(devices.iter().position(|d| d == IOMMU_DEVICE).unwrap()).unwrap();
    let mut singles: HashMap<(u16, u64), Open> = HashMap::new();
    let mut sgs: HashMap<(u16, u64), Open> = HashMap::new();
    let mut closed: BTreeMap<&str, u64> = BTreeMap::new();
    let mut i = 0;
    while i < events.len() {
        let e = &events[i];
        let name = devices[e.device as usize].as_str();
        i += 1;
        if e.device == iommu {
            continue;
        }
        match e.kind {
            EventKind::Map | EventKind::Alloc => {
                let open = Open {
                    len: e.len,
                    dir: e.dir,
                    segs: Vec::new(),
                };
                let old = singles.insert((e.device, e.dma.unwrap()), open);
                assert!(old.is_none(), "{name} mapped {:x?} twice", e.dma);
            }
            EventKind::Unmap | EventKind::Free => {
                let open = singles
                    .remove(&(e.device, e.dma.unwrap()))
                    .unwrap_or_else(|| panic!("{name} unmapped {:x?}, never mapped", e.dma));
                assert_eq!((open.len, open.dir), (e.len, e.dir), "{name} {:x?}", e.dma);
                *closed.entry(name).or_insert(0) += 1;
            }
            EventKind::MapSg => {
                let segs = segments(&events, i - 1);
                i += segs.len();
                // An IOMMU merges the segments into one IOVA range: one DMA address.
                assert_eq!(segs.iter().filter(|s| s.1.is_some()).count(), 1);
                assert_eq!(segs.iter().map(|s| s.2).sum::<u64>(), e.len);
                let open = Open {
                    len: e.len,
                    dir: e.dir,
                    segs,
                };
                assert!(sgs.insert((e.device, e.phys.unwrap()), open).is_none());
            }
            EventKind::UnmapSg => {
                let segs = segments(&events, i - 1);
                i += segs.len();
                let open = sgs.remove(&(e.device, e.phys.unwrap())).unwrap();
                assert_eq!(
                    open,
                    Open {
                        len: e.len,
                        dir: e.dir,
                        segs
                    }
                );
                *closed.entry(name).or_insert(0) += 1;
            }
            k => panic!("unexpected {k:?} on {name}"),
        }
    }
    assert!(sgs.is_empty(), "every dma_map_sg was unmapped");
    // Closed per device: the data disk's and NVMe's requests all completed.
    let closed: Vec<(&str, u64)> = closed.into_iter().collect();
    assert_eq!(
        closed,
        [
            ("0000:00:01.0", 2715),
            ("0000:00:02.0", 4),
            ("0000:00:03.0", 65 + 80),
            ("0000:00:04.0", 144),
        ]
    );
    // Still open at the end: each virtqueue's ring (dma_alloc) and virtio-net's receive
    // buffers, posted when the interface came up.
    let mut open: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
    for ((dev, _), o) in &singles {
        let n = open.entry(devices[*dev as usize].as_str()).or_default();
        if o.dir == TraceDir::Bidirectional {
            n.0 += 1;
        } else {
            assert_eq!(o.dir, TraceDir::FromDevice);
            n.1 += 1;
        }
    }
    let open: Vec<(&str, (u64, u64))> = open.into_iter().collect();
    assert_eq!(
        open,
        [
            ("0000:00:01.0", (1, 0)),
            ("0000:00:02.0", (1, 0)),
            ("0000:00:04.0", (3, 250)),
        ]
    );
}

/// Applies `iommu:map`/`iommu:unmap` records to a page table (IOVA page -> physical page).
fn apply(pt: &mut HashMap<u64, u64>, e: &Event) {
    let (iova, len) = (e.dma.unwrap(), e.len);
    assert!(
        iova.is_multiple_of(PAGE) && len.is_multiple_of(PAGE),
        "{e:x?}"
    );
    for k in 0..len / PAGE {
        if e.kind == EventKind::Map {
            let phys = e.phys.unwrap();
            assert!(phys.is_multiple_of(PAGE), "{e:x?}");
            let old = pt.insert(iova / PAGE + k, phys / PAGE + k);
            assert!(old.is_none(), "IOVA {:x} mapped twice", iova + k * PAGE);
        } else {
            let old = pt.remove(&(iova / PAGE + k));
            assert!(
                old.is_some(),
                "IOVA {:x} unmapped, not mapped",
                iova + k * PAGE
            );
        }
    }
}

#[test]
fn iommu_page_table_translates_every_device_mapping() {
    let Imported {
        events, devices, ..
    } = import();
    let iommu = u16::try_from(devices.iter().position(|d| d == IOMMU_DEVICE).unwrap()).unwrap();
    // Each device has an IOMMU group, so a domain and IOVA space, of its own, and
    // `iommu:map`/`iommu:unmap` do not say which. The kernel traces them inside the DMA call
    // that made them: before that call's `dma_*` event for maps, allocations and
    // `dma_unmap_page`, after it for `dma_unmap_sg` (v6.12 traces that one on entry). So the
    // `iommu` records between two `dma_*` events belong to the later one, except that a
    // `dma_unmap_sg`'s own unmaps come first. The test fails if an interrupt ever
    // interleaved two calls.
    let mut pts: HashMap<u16, HashMap<u64, u64>> = HashMap::new();
    let mut pending: Vec<&Event> = Vec::new();
    // A dma_unmap_sg whose iommu:unmap records are still to come: (device, dma, len).
    let mut sg_unmap: Option<(u16, u64, u64)> = None;
    // Device mappings open: device -> DMA address -> length.
    let mut open: HashMap<u16, HashMap<u64, u64>> = HashMap::new();
    let translate = |pt: &HashMap<u64, u64>, iova: u64| {
        pt.get(&(iova / PAGE)).map(|page| page * PAGE + iova % PAGE)
    };
    let pages = |dma: u64, len: u64| (dma / PAGE)..(dma + len.max(1)).div_ceil(PAGE);
    let (mut checked_maps, mut checked_unmaps, mut checked_sg) = (0, 0, 0);
    let mut iommu_records = 0;
    let mut i = 0;
    while i <= events.len() {
        let e = events.get(i);
        i += 1;
        if let Some(e) = e.filter(|e| e.device == iommu) {
            assert!(matches!(e.kind, EventKind::Map | EventKind::Unmap));
            pending.push(e);
            continue;
        }
        if let Some((dev, dma, len)) = sg_unmap.take() {
            // The unmaps that follow a dma_unmap_sg cover its IOVA range, and only that.
            let range = pages(dma, len);
            let n = pending
                .iter()
                .take_while(|p| {
                    let (a, l) = (p.dma.unwrap(), p.len);
                    p.kind == EventKind::Unmap
                        && range.contains(&(a / PAGE))
                        && (a + l) / PAGE <= range.end
                })
                .count();
            let covered: u64 = pending[..n].iter().map(|p| p.len / PAGE).sum();
            assert_eq!(covered, range.end - range.start, "{pending:x?}");
            let pt = pts.get_mut(&dev).unwrap();
            iommu_records += n;
            for p in pending.drain(..n) {
                apply(pt, p);
            }
            assert!(pages(dma, len).all(|p| !pt.contains_key(&p)));
            checked_unmaps += 1;
        }
        let Some(e) = e else { break };
        let dma = e.dma.unwrap();
        let dev_open = open.entry(e.device).or_default();
        if matches!(e.kind, EventKind::Unmap | EventKind::UnmapSg) {
            assert_eq!(dev_open.remove(&dma), Some(e.len), "{e:x?}");
        } else {
            assert!(dev_open.insert(dma, e.len).is_none(), "{e:x?}");
        }
        if e.kind == EventKind::UnmapSg {
            assert!(pending.is_empty(), "{pending:x?} then {e:x?}");
            sg_unmap = Some((e.device, e.dma.unwrap(), e.len));
            i += e.nents as usize;
            continue;
        }
        // A map call made only iommu:map records, an unmap call only iommu:unmap ones, and
        // each made at least one (a new IOVA range per map; strict invalidation per unmap).
        let want = if e.kind == EventKind::Unmap {
            EventKind::Unmap
        } else {
            EventKind::Map
        };
        assert!(!pending.is_empty(), "no iommu records before {e:x?}");
        assert!(
            pending.iter().all(|p| p.kind == want),
            "{pending:x?} then {e:x?}"
        );
        let pt = pts.entry(e.device).or_default();
        iommu_records += pending.len();
        for p in pending.drain(..) {
            apply(pt, p);
        }
        match e.kind {
            EventKind::Map => {
                // The DMA address translates to the printed physical address, page by page.
                let (dma, phys) = (e.dma.unwrap(), e.phys.unwrap());
                for off in (0..e.len.div_ceil(PAGE)).map(|k| k * PAGE) {
                    assert_eq!(translate(pt, dma + off), Some(phys + off), "{e:x?}");
                }
                checked_maps += 1;
            }
            EventKind::Alloc => {
                // v6.12's dma_alloc prints no physical address: mapped is all we can check.
                assert!(pages(e.dma.unwrap(), e.len).all(|p| pt.contains_key(&p)));
            }
            EventKind::MapSg => {
                // The merged IOVA range translates, in order, to each physical segment.
                let segs = segments(&events, i - 1);
                i += segs.len();
                let mut want = segs.iter().map(|s| s.0.unwrap()).peekable();
                for p in pages(e.dma.unwrap(), e.len) {
                    let got = pt[&p] * PAGE;
                    if want.peek().is_some_and(|w| w / PAGE * PAGE == got) {
                        want.next();
                    }
                }
                assert!(want.next().is_none(), "segments not all mapped: {e:x?}");
                checked_sg += 1;
            }
            EventKind::Unmap => {
                // iommu.strict=1: the page-table entries were gone before the DMA event.
                assert!(pages(e.dma.unwrap(), e.len).all(|p| !pt.contains_key(&p)));
                checked_unmaps += 1;
            }
            k => panic!("unexpected {k:?}"),
        }
    }
    assert!(pending.is_empty() && sg_unmap.is_none());
    assert_eq!(iommu_records, 5402 + 3008);
    assert_eq!(
        (checked_maps, checked_sg, checked_unmaps),
        (3178, 80, 2928 + 80)
    );
    // At the end each device's IOMMU page table maps exactly the pages of its mappings still
    // open (its rings and virtio-net's receive buffers; NVMe mapped its queues at boot,
    // before tracing started, so neither side has them).
    let mut left: Vec<(&str, usize)> = Vec::new();
    for (dev, pt) in &pts {
        let mut mapped: Vec<u64> = pt.keys().copied().collect();
        mapped.sort_unstable();
        let mut want: Vec<u64> = open[dev]
            .iter()
            .flat_map(|(&dma, &len)| pages(dma, len))
            .collect();
        want.sort_unstable();
        assert_eq!(mapped, want, "{}", devices[*dev as usize]);
        left.push((devices[*dev as usize].as_str(), open[dev].len()));
    }
    left.sort_unstable();
    assert_eq!(
        left,
        [
            ("0000:00:01.0", 1),
            ("0000:00:02.0", 1),
            ("0000:00:03.0", 0),
            ("0000:00:04.0", 253),
        ]
    );
}

/// Replay through `strict` replays exactly the trace's device-level calls: every
/// `dma_map_page`/`dma_map_sg`/`dma_alloc` once (the `iommu:*` duplicates all skipped —
/// including the two `iommu:map` lines that precede every device's first `dma:` line, which
/// the replay's one-batch read-ahead sees past), every unmap matched, no stale access.
#[test]
fn replay_replays_each_device_call_once() {
    let src = open(&trace_path(), TraceFormat::Ftrace, false).expect("open the committed trace");
    let cfg = iommulab::experiment::ExperimentConfig {
        configuration: iommulab::experiment::NamedConfig::Strict,
        ..Default::default()
    };
    let (run, report) =
        iommulab::experiment::replay_trace(&cfg, src, &mut iommulab::experiment::no_progress)
            .expect("replay");
    let (_, _, by_event) = count_lines_by_event();
    let n = |k: &str| by_event.get(k).copied().unwrap_or(0);
    assert_eq!(
        report.maps,
        n("dma_map_page") + n("dma_map_sg") + n("dma_alloc")
    );
    assert_eq!(report.unmaps, n("dma_unmap_page") + n("dma_unmap_sg"));
    assert_eq!(report.skipped_iommu_events, n("map") + n("unmap"));
    assert_eq!(report.unmatched_unmaps, 0);
    assert_eq!(run.stale_accesses, 0);
}
