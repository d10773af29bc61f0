//! Linux ftrace import (`trace::ftrace`) end to end and under random input.
//!
//! - The sample files in `tests/data/ftrace/` (written by hand from the kernel's printk
//!   formats, not captured) import to exactly the listed records and report counts.
//! - Arbitrary bytes never panic; a strict import that carries on past errors yields the
//!   same records as a lenient one, one `Parse` error per `malformed_skipped` line, and every
//!   line lands in exactly one report counter.
//! - Valid lines with a byte flipped, cut short or a byte inserted never panic, and either
//!   parse or fail with a `Parse` error naming the mutated line.
//! - Generated `dma_map_page` lines, in both header shapes with random task names, CPUs,
//!   timestamps and fields, import to the record they were generated from.

use std::path::{Path, PathBuf};

use iommulab::trace::ftrace::{FtraceOptions, FtraceReader, ImportReport};
use iommulab::trace::{Event, EventKind, EventSource, TraceDir, TraceError, TraceHeader};
use proptest::prelude::*;

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/ftrace")
        .join(name)
}

/// Everything a lenient or strict-but-continuing import gives.
struct Imported {
    events: Vec<Event>,
    errors: Vec<TraceError>,
    header: TraceHeader,
    report: ImportReport,
}

/// Imports `bytes`; in strict mode, collects each error and carries on.
fn import_bytes(bytes: &[u8], lenient: bool) -> Imported {
    let mut r = FtraceReader::new(bytes, "in.txt".into(), FtraceOptions { lenient });
    drain(&mut r)
}

fn drain<R: std::io::BufRead>(r: &mut FtraceReader<R>) -> Imported {
    let mut events = Vec::new();
    let mut errors = Vec::new();
    loop {
        match r.next_event() {
            Ok(Some(e)) => events.push(e),
            Ok(None) => break,
            Err(e) => errors.push(e),
        }
    }
    Imported {
        events,
        errors,
        header: r.header().clone(),
        report: r.report(),
    }
}

fn import_file(name: &str, lenient: bool) -> Imported {
    let mut r = FtraceReader::open(&data(name), FtraceOptions { lenient }).unwrap();
    drain(&mut r)
}

/// A record, field by field.
#[allow(clippy::too_many_arguments)]
fn ev(
    time_ns: u64,
    cpu: u16,
    device: u16,
    kind: EventKind,
    dir: TraceDir,
    dma: Option<u64>,
    phys: Option<u64>,
    len: u64,
    nents: u32,
) -> Event {
    Event {
        time_ns,
        cpu,
        device,
        kind,
        dir,
        dma,
        phys,
        len,
        nents,
    }
}

/// Every line is counted once.
fn assert_lines_add_up(r: &ImportReport) {
    assert_eq!(
        r.lines,
        r.imported_lines
            + r.skipped_header_or_comment
            + r.skipped_other_events
            + r.lost_event_markers
            + r.map_errors
            + r.malformed_skipped,
        "{r:?}"
    );
}

/// `tracefs_net.txt`: the `/sys/kernel/tracing/trace` shape (header block, flags column,
/// ranged iommu events, a merged sg list and its unmap, a lost-events marker).
#[test]
fn tracefs_sample_imports_exactly() {
    use EventKind::*;
    use TraceDir::{Bidirectional as Bi, FromDevice as From, None as No, ToDevice as To};
    let got = import_file("tracefs_net.txt", false);
    assert!(got.errors.is_empty());
    assert_eq!(
        got.header.devices,
        ["0000:3b:00.0", "iommu", "0000:01:00.0"]
    );
    let sg_t = 43_223_000;
    let unsg_t = 43_623_000;
    let want = vec![
        ev(
            0,
            5,
            0,
            Map,
            To,
            Some(0xffffa000),
            Some(0x1f2a3c000),
            1514,
            0,
        ),
        ev(
            2_000,
            5,
            1,
            Map,
            No,
            Some(0xffffa000),
            Some(0x1f2a3c000),
            4096,
            0,
        ),
        ev(111_000, 5, 1, Unmap, No, Some(0xffffa000), None, 4096, 0),
        ev(113_000, 5, 0, Unmap, To, Some(0xffffa000), None, 1514, 0),
        ev(
            211_000,
            5,
            0,
            SyncForCpu,
            From,
            Some(0xfffe0000),
            None,
            2048,
            0,
        ),
        ev(
            221_000,
            5,
            0,
            SyncForDevice,
            From,
            Some(0xfffe0000),
            None,
            2048,
            0,
        ),
        ev(
            sg_t,
            2,
            2,
            MapSg,
            From,
            Some(0xfff00000),
            Some(0x12c400000),
            0x20000,
            2,
        ),
        ev(
            sg_t,
            2,
            2,
            SgSeg,
            From,
            Some(0xfff00000),
            Some(0x12c400000),
            0x20000,
            0,
        ),
        ev(sg_t, 2, 2, SgSeg, From, None, Some(0x12c420000), 0, 0),
        ev(
            43_231_000,
            2,
            1,
            Map,
            No,
            Some(0xfff00000),
            Some(0x12c400000),
            131072,
            0,
        ),
        ev(
            43_621_000,
            2,
            1,
            Unmap,
            No,
            Some(0xfff00000),
            None,
            131072,
            0,
        ),
        ev(
            unsg_t,
            2,
            2,
            UnmapSg,
            From,
            Some(0xfff00000),
            Some(0x12c400000),
            0x20000,
            2,
        ),
        ev(
            unsg_t,
            2,
            2,
            SgSeg,
            From,
            Some(0xfff00000),
            Some(0x12c400000),
            0x20000,
            0,
        ),
        ev(unsg_t, 2, 2, SgSeg, From, None, Some(0x12c420000), 0, 0),
        ev(
            143_211_000,
            1,
            2,
            Alloc,
            Bi,
            Some(0xffe00000),
            None,
            16384,
            0,
        ),
        ev(
            143_311_000,
            1,
            2,
            Free,
            Bi,
            Some(0xffe00000),
            None,
            16384,
            0,
        ),
    ];
    assert_eq!(got.events, want);
    let r = &got.report;
    assert_eq!((r.lines, r.imported_lines, r.events), (26, 12, 16));
    assert_eq!(
        (r.skipped_header_or_comment, r.skipped_other_events),
        (12, 1)
    );
    assert_eq!((r.lost_event_markers, r.lost_events), (1, 17));
    assert_eq!(
        (r.malformed_skipped, r.map_errors, r.unmatched_unmap_sg),
        (0, 0, 0)
    );
    assert_eq!((r.truncated_sg, r.partial_iommu_unmaps), (0, 0));
    let by_event: Vec<_> = r.by_event.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    assert_eq!(
        by_event,
        [
            ("dma_alloc", 1),
            ("dma_free", 1),
            ("dma_map_page", 1),
            ("dma_map_sg", 1),
            ("dma_sync_single_for_cpu", 1),
            ("dma_sync_single_for_device", 1),
            ("dma_unmap_page", 1),
            ("dma_unmap_sg", 1),
            ("map", 2),
            ("sched_waking", 1),
            ("unmap", 2),
        ]
    );
    assert_lines_add_up(r);
}

/// `trace_cmd_report.txt`: the `trace-cmd report` shape (preamble, TGID column, task names
/// with spaces, 9-decimal stamps, `iommu:`-prefixed old-format events, an unmerged sg list,
/// an unmatched `dma_unmap_sg`, a failed map).
#[test]
fn trace_cmd_sample_imports_exactly() {
    use EventKind::*;
    use TraceDir::{FromDevice as From, None as No, ToDevice as To};
    let got = import_file("trace_cmd_report.txt", false);
    assert!(got.errors.is_empty());
    assert_eq!(got.header.devices, ["0000:00:04.0", "iommu", "virtio0"]);
    let (a, b, c) = (0x1a0000000, 0x1a0010000, 0x1a0020000);
    let (da, db, dc) = (0xffd00000, 0xffd10000, 0xffd20000);
    let want = vec![
        ev(
            0,
            0,
            0,
            Map,
            To,
            Some(0xfffff000),
            Some(0x10b6f4e00),
            512,
            0,
        ),
        ev(
            899,
            0,
            1,
            Map,
            No,
            Some(0xfffff000),
            Some(0x10b6f4000),
            4096,
            0,
        ),
        ev(9_999, 1, 0, MapSg, To, Some(da), Some(a), 0x2800, 3),
        ev(9_999, 1, 0, SgSeg, To, Some(da), Some(a), 0x1000, 0),
        ev(9_999, 1, 0, SgSeg, To, Some(db), Some(b), 0x1000, 0),
        ev(9_999, 1, 0, SgSeg, To, Some(dc), Some(c), 0x800, 0),
        ev(19_999, 1, 0, SyncForCpu, To, Some(da), None, 0x2800, 0),
        ev(29_999, 1, 0, UnmapSg, To, Some(da), Some(a), 0x2800, 3),
        ev(29_999, 1, 0, SgSeg, To, Some(da), Some(a), 0x1000, 0),
        ev(29_999, 1, 0, SgSeg, To, Some(db), Some(b), 0x1000, 0),
        ev(29_999, 1, 0, SgSeg, To, Some(dc), Some(c), 0x800, 0),
        ev(30_499, 1, 0, UnmapSg, To, None, Some(0x1b0000000), 0, 1),
        ev(30_499, 1, 0, SgSeg, To, None, Some(0x1b0000000), 0, 0),
        ev(39_999, 0, 1, Unmap, No, Some(0xfffff000), None, 4096, 0),
        ev(40_099, 0, 0, Unmap, To, Some(0xfffff000), None, 512, 0),
        ev(59_999, 0, 2, Alloc, From, Some(0xffa00000), None, 8192, 0),
        ev(69_999, 0, 2, Free, From, Some(0xffa00000), None, 8192, 0),
    ];
    assert_eq!(got.events, want);
    let r = &got.report;
    assert_eq!(
        r,
        &ImportReport {
            lines: 15,
            imported_lines: 10,
            events: 17,
            skipped_header_or_comment: 3,
            lost_event_markers: 1,
            lost_events: 2,
            map_errors: 1,
            unmatched_unmap_sg: 1,
            by_event: r.by_event.clone(),
            ..ImportReport::default()
        }
    );
    assert_eq!(r.by_event.get("iommu:map"), Some(&1));
    assert_eq!(r.by_event.get("dma_map_phys"), Some(&2));
    assert_eq!(r.by_event.values().sum::<u64>(), 11);
    assert_lines_add_up(r);
}

/// `malformed.txt`: strict import fails at each bad line with its number and what was
/// expected; lenient import skips and counts them.
#[test]
fn malformed_sample_strict_and_lenient() {
    let path = data("malformed.txt");
    let strict = import_file("malformed.txt", false);
    let msgs: Vec<String> = strict.errors.iter().map(ToString::to_string).collect();
    let p = path.display();
    assert_eq!(
        msgs,
        [
            format!(
                "{p}:3: expected `dir=` BIDIRECTIONAL, TO_DEVICE, FROM_DEVICE or NONE in dma_map_page, found \"dir=SIDEWAYS\""
            ),
            format!(
                "{p}:4: expected `size=<decimal>` in dma_map_page, found \"0000:3b:00.0 dir=TO_DEVICE dma_addr=ffffc000 phys_addr=1f2a3e000 attrs=\""
            ),
            format!("{p}:5: expected `iova=0x<hex>` in map, found \"iova=0x00000000ffffzz00\""),
            format!(
                "{p}:6: expected an event line `TASK-PID [CPU] [FLAGS] SECONDS.FRACTION: EVENT: BODY` or a header line, found \"this line is not ftrace output\""
            ),
        ]
    );
    let lenient = import_file("malformed.txt", true);
    assert!(lenient.errors.is_empty());
    assert_eq!(lenient.events, strict.events);
    assert_eq!(lenient.events.len(), 2);
    assert_eq!(lenient.header.devices, ["0000:3b:00.0"]);
    let r = &lenient.report;
    assert_eq!(
        (
            r.lines,
            r.imported_lines,
            r.malformed_skipped,
            r.skipped_header_or_comment
        ),
        (7, 2, 4, 1)
    );
    assert_lines_add_up(r);
}

/// Valid lines of every shape, for mutation.
const VALID: &[&str] = &[
    "  iperf3-2041    [005] ..s1. 8123.456789: dma_map_page: 0000:3b:00.0 dir=TO_DEVICE dma_addr=ffffa000 size=1514 phys_addr=1f2a3c000 attrs=",
    "  iperf3-2041    [005] ..s1. 8123.456791: map: IOMMU: iova=0x00000000ffffa000 - 0x00000000ffffb000 paddr=0x00000001f2a3c000 size=4096",
    "  <idle>-0       [005] d.h2. 8123.456900: unmap: IOMMU: iova=0x00000000ffffa000 - 0x00000000ffffb000 size=4096 unmapped_size=4096",
    "  <idle>-0       [005] d.h2. 8123.456902: dma_unmap_page: 0000:3b:00.0 dir=TO_DEVICE dma_addr=ffffa000 size=1514 attrs=",
    "  fio-3310       [002] ..... 8123.500012: dma_map_sg: 0000:01:00.0 dir=FROM_DEVICE dma_addrs={0xfff00000} sizes={0x20000} phys_addrs={0x12c400000,0x12c420000} attrs=",
    "  fio-3310       [002] ..... 8123.500013: dma_unmap_sg: 0000:01:00.0 dir=FROM_DEVICE phys_addrs={0x12c400000,0x12c420000} attrs=",
    "   nvme loop-1-812 (  812) [000]  2041.000000001: iommu:map:  IOMMU: iova=0x00000000fffff000 paddr=0x000000010b6f4000 size=4096",
    "  fio-3311  (  3310) [001]  2041.000010000: dma_map_sg:   0000:00:04.0 dir=TO_DEVICE nents=2/2 ents=2/2 dma_addrs={0xffd00000,0xffd10000} sizes={0x1000,0x800} phys_addrs={0x1a0000000,0x1a0010000} attrs=",
    "  fio-3311 [001] 2041.000020000: dma_sync_sg_for_cpu:  0000:00:04.0 dir=TO_DEVICE dma_addrs={0xffd00000,0xffd10000} sizes={0x1000,0x800}",
    "  a-1 [000] ..... 1.0: dma_alloc: 0000:00:04.0 dma_addr=fffc0000 size=16384 phys_addr=10a000000 flags=GFP_KERNEL attrs=",
    "  a-1 [000] ..... 1.0: dma_free_pages: 0000:00:04.0 dir=FROM_DEVICE dma_addr=fffb0000 size=4096 virt_addr=00000000c0ffee11 attrs=NO_KERNEL_MAPPING",
    "  a-1 [000] ..... 1.0: dma_sync_single_for_device: virtio0 dir=BIDIRECTIONAL dma_addr=1000 size=64",
    "CPU:3 [LOST 123 EVENTS]",
    "# tracer: nop",
];

/// How to damage a line.
#[derive(Clone, Debug)]
enum Mutation {
    Flip { at: usize, mask: u8 },
    Truncate { at: usize },
    Insert { at: usize, byte: u8 },
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), 1..=255u8).prop_map(|(at, mask)| Mutation::Flip { at, mask }),
        any::<usize>().prop_map(|at| Mutation::Truncate { at }),
        (any::<usize>(), any::<u8>()).prop_map(|(at, byte)| Mutation::Insert { at, byte }),
    ]
}

fn mutate(line: &str, m: &Mutation) -> Vec<u8> {
    let mut b = line.as_bytes().to_vec();
    match *m {
        Mutation::Flip { at, mask } => {
            let i = at % b.len();
            b[i] ^= mask;
        }
        Mutation::Truncate { at } => b.truncate(at % b.len()),
        Mutation::Insert { at, byte } => b.insert(at % (b.len() + 1), byte),
    }
    b
}

fn dir_strategy() -> impl Strategy<Value = TraceDir> {
    prop_oneof![
        Just(TraceDir::Bidirectional),
        Just(TraceDir::ToDevice),
        Just(TraceDir::FromDevice),
        Just(TraceDir::None),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Arbitrary bytes: no panic, strict-and-continue equals lenient, counters add up.
    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..2048)) {
        let lenient = import_bytes(&bytes, true);
        prop_assert!(lenient.errors.is_empty());
        assert_lines_add_up(&lenient.report);
        let strict = import_bytes(&bytes, false);
        prop_assert_eq!(&strict.events, &lenient.events);
        prop_assert_eq!(strict.errors.len() as u64, lenient.report.malformed_skipped);
        for e in &strict.errors {
            let TraceError::Parse { line, found, .. } = e else {
                panic!("not a parse error: {e:?}");
            };
            prop_assert!(*line >= 1 && *line <= lenient.report.lines);
            prop_assert!(found.chars().count() <= 120);
        }
    }

    /// Arbitrary bytes spliced into valid text (newlines likely): no panic.
    #[test]
    fn valid_text_with_garbage_never_panics(
        picks in proptest::collection::vec((0..VALID.len(), proptest::collection::vec(any::<u8>(), 0..40)), 1..12),
    ) {
        let mut text = Vec::new();
        for (i, junk) in &picks {
            text.extend_from_slice(VALID[*i].as_bytes());
            text.extend_from_slice(junk);
            text.push(b'\n');
        }
        let lenient = import_bytes(&text, true);
        assert_lines_add_up(&lenient.report);
        let strict = import_bytes(&text, false);
        prop_assert_eq!(strict.events, lenient.events);
    }

    /// A mutated valid line among valid lines: it parses, or a Parse error names its line.
    #[test]
    fn mutated_lines_parse_or_name_their_line(
        before in proptest::collection::vec(0..VALID.len(), 0..6),
        target in 0..VALID.len(),
        m in mutation(),
        after in proptest::collection::vec(0..VALID.len(), 0..6),
    ) {
        let mut text = Vec::new();
        for &i in &before {
            text.extend_from_slice(VALID[i].as_bytes());
            text.push(b'\n');
        }
        let bad = mutate(VALID[target], &m);
        text.extend_from_slice(&bad);
        text.push(b'\n');
        for &i in &after {
            text.extend_from_slice(VALID[i].as_bytes());
            text.push(b'\n');
        }
        let line = before.len() as u64 + 1;
        // An inserted or flipped-in newline splits the line in two.
        let last = line + bad.iter().filter(|&&b| b == b'\n').count() as u64;
        let got = import_bytes(&text, false);
        for e in &got.errors {
            let TraceError::Parse { line: l, .. } = e else {
                panic!("not a parse error: {e:?}");
            };
            prop_assert!((line..=last).contains(l), "error at {} not in {}..={}: {}", l, line, last, e);
        }
        let valid_lines = (before.len() + after.len()) as u64;
        prop_assert_eq!(got.report.lines, valid_lines + 1 + (last - line));
    }

    /// Generated `dma_map_page` lines import to the record they came from.
    #[test]
    fn generated_map_lines_round_trip(
        comm in "[a-zA-Z0-9 _/:<>.-]{0,20}",
        pid in 0..4_000_000u32,
        tgid in proptest::option::of(0..4_000_000u32),
        cpu in 0..1024u16,
        flags in proptest::option::of("[.dNnhHsSzb0-9X]{4,5}"),
        secs in 0..10_000_000u64,
        micros in 0..1_000_000u64,
        nine in any::<bool>(),
        dev in "[0-9a-z:.]{1,16}",
        dir in dir_strategy(),
        dma in any::<u64>().prop_filter("not DMA_MAPPING_ERROR", |&d| d != u64::MAX),
        phys in any::<u64>(),
        size in any::<u64>(),
        attrs in "(|SKIP_CPU_SYNC|WEAK_ORDERING\\|NO_WARN|0x[0-9a-f]{1,4})",
        pad in 0..12usize,
    ) {
        let tgid = tgid.map_or(String::new(), |t| format!("({t:>7}) "));
        let flags = flags.map_or(String::new(), |f| format!("{f} "));
        let ts = if nine { format!("{secs}.{micros:06}000") } else { format!("{secs}.{micros:06}") };
        let line = format!(
            "{comm:>16}-{pid:<7} {tgid}[{cpu:03}] {flags}{ts}: dma_map_page:{:pad$} {dev} dir={} dma_addr={dma:x} size={size} phys_addr={phys:x} attrs={attrs}\n",
            "",
            dir.linux_name(),
        );
        let got = import_bytes(line.as_bytes(), false);
        prop_assert!(got.errors.is_empty(), "{:?} for {}", got.errors, line);
        let want = Event { cpu, dir, dma: Some(dma), phys: Some(phys), len: size, ..Event::new(EventKind::Map) };
        prop_assert_eq!(got.events, vec![want]);
        prop_assert_eq!(got.header.devices, vec![dev]);
    }
}
