//! Linux ftrace import: turns the text of `/sys/kernel/tracing/trace` (or `trace_pipe`) and of
//! `trace-cmd report` into [`Event`]s, from the `dma:` tracepoints (v6.12+) and
//! `iommu:map`/`iommu:unmap` (Linux's include/trace/events/dma.h and iommu.h; recording
//! recipe in docs/capture.md).
//!
//! # Line shapes
//!
//! ```text
//!   iperf3-2041    [005] ..s1. 8123.456789: dma_map_page: 0000:3b:00.0 dir=TO_DEVICE dma_addr=ffffa000 size=1514 phys_addr=1f2a3c000 attrs=
//!   iperf3-2041    (   2041) [005] ..s1. 8123.456789: dma_map_page: ...      (record-tgid)
//!   iperf3-2041  [005]  8123.456789123: dma_map_page:         0000:3b:00.0 ... (trace-cmd report)
//! ```
//!
//! `TASK-PID`, an optional `(TGID)` column, `[CPU]`, an optional flags column (`..s1.`,
//! `d..2`: `trace` always prints it, `trace-cmd report` only with `-l`), `SECONDS.FRACTION:`
//! (1–9 decimals), the event name (`dma_map_page`, `map`, or with its system, `iommu:map`)
//! followed by `:` and padding, then the body. The task name may hold spaces and dashes and
//! is not used: the header is anchored on the first `[CPU]` preceded by `-PID`.
//! Timestamps become nanoseconds since the first imported event; an event stamped earlier
//! than that (out-of-order CPU buffers) gets 0.
//!
//! Skipped and counted in [`ImportReport`]: blank lines, `#` comments, `cpus=N`,
//! `version = 6` and `CPU N is empty` (trace-cmd), lost-event markers (`CPU:3 [LOST 123
//! EVENTS]`, `##### CPU 2 buffer started ####`), and events other than the ones below.
//!
//! # Events
//!
//! | event (any of these names) | record |
//! |---|---|
//! | `map`, `iommu:map` | `Map` on device `iommu`: `dma` = iova, `phys` = paddr, `len` = size |
//! | `unmap`, `iommu:unmap` | `Unmap` on device `iommu`: `dma` = iova, `len` = size |
//! | `dma_map_page`, `dma_map_phys`, `dma_map_resource` | `Map` |
//! | `dma_unmap_page`, `dma_unmap_phys`, `dma_unmap_resource` | `Unmap` |
//! | `dma_map_sg` | `MapSg` + `SgSeg`s (below) |
//! | `dma_unmap_sg` | `UnmapSg` + `SgSeg`s (below) |
//! | `dma_alloc`, `dma_alloc_pages` | `Alloc` (`phys` only in the v6.12 format) |
//! | `dma_free`, `dma_free_pages` | `Free` |
//! | `dma_sync_single_for_cpu` / `_for_device` | `SyncForCpu` / `SyncForDevice` |
//! | `dma_sync_sg_for_cpu` / `_for_device` | one `SyncForCpu` / `SyncForDevice`: `dma` = first address, `len` = sum of `sizes`, `nents` = 0 |
//! | `free_iova_fast`, `kprobes:free_iova_fast` (a kprobe, docs/capture.md) | `Free` on device `iommu`: `dma` = pfn × 4 KiB, `len` = size × 4 KiB, `phys` = the `iova_domain` pointer (`iovad=`, 0 if absent) |
//!
//! - `iommu:` events name no device, so they go to a device named [`IOMMU_DEVICE`]
//!   (`iommu`) and carry direction `None`. Both the pre-5.17 format (`iova=0x… paddr=…`) and
//!   the ranged one (`iova=0x… - 0x… paddr=…`) parse. When a trace holds both `dma_*` and
//!   `iommu:` events, the `iommu` records are the IOMMU-level view of the same calls: a
//!   replay of the DMA API should use one or the other, not both.
//! - An `iommu:unmap` whose `unmapped_size` differs from `size` keeps `len = size` and is
//!   counted in [`ImportReport::partial_iommu_unmaps`].
//! - A `dma_map_*` whose `dma_addr` is `DMA_MAPPING_ERROR` (`ffffffffffffffff`: the kernel
//!   traces failed maps too) produces no record and counts in [`ImportReport::map_errors`].
//! - Device names go into [`TraceHeader::devices`] in order of first appearance.
//! - `dma_alloc`/`dma_free` in v6.12 have no `dir=`: they get `Bidirectional` (coherent
//!   memory is).
//! - `dma_map_sg_err`, `dma_alloc_sgt*`, `dma_free_sgt`, `io_page_fault` and all other
//!   events are skipped and counted.
//! - Unknown `key=value` fields in a `dma_*` body are ignored (newer kernels may add some);
//!   the fields an event needs must be present and well formed.
//!
//! # Scatter-gather
//!
//! `dma_map_sg` prints the input list's physical addresses (`phys_addrs`, `nents` entries)
//! and the mapped list's DMA addresses and lengths (`dma_addrs`/`sizes`, `ents` ≤ `nents`
//! entries: an IOMMU merges IOVA-contiguous segments, so typically `ents` = 1). The tracepoint
//! does **not** record the input segments' lengths. The import emits:
//!
//! - `MapSg { nents: n, dma: first dma address, phys: first phys address, len: sum of sizes }`
//!   with n = max(`phys_addrs`, `dma_addrs`) entries, then
//! - n `SgSeg` records, the two lists zipped by position: record i has `phys = phys_addrs[i]`
//!   and `dma = dma_addrs[i]`, `len = sizes[i]` where those exist (`None`/0 past the end of
//!   the shorter list).
//!
//! When `ents == nents` (no merging: dma-direct, or an IOMMU that did not merge) record i is
//! exactly segment i. When `ents < nents` the records past `ents` carry a physical address
//! only, and only record 0's pairing is meaningful (the first mapped segment starts at the
//! first input segment); the sum of `len` over the records is still the mapped length, and a
//! replay that needs per-page physical addresses should spread the total over the listed
//! physical segments. Some trees cap the arrays at 128 entries (`nents=128/300 ents=…
//! [TRUNCATED]`): the records cover the printed entries only, and the line counts in
//! [`ImportReport::truncated_sg`].
//!
//! `dma_unmap_sg` prints only `phys_addrs`. The importer keeps the open `dma_map_sg` calls
//! (per device, keyed by the first 128 physical addresses) and matches each unmap to the
//! oldest open map with the same device and physical list. It emits `UnmapSg { nents:
//! phys_addrs, phys: first, dma and len: from the matched map }` and one `SgSeg` per physical
//! address with the map's record i's `dma`/`len` attached, so an unmap mirrors its map
//! record for record. An unmap with no open map gets `dma = None`, `len = 0` and counts in
//! [`ImportReport::unmatched_unmap_sg`]; a replay then has to match it by device and
//! physical addresses itself. At most [`MAX_OPEN_SG`] maps are kept open (constant memory on
//! traces that lost their unmaps); maps beyond that are counted in
//! [`ImportReport::untracked_map_sg`].
//!
//! # Errors and bytes
//!
//! A malformed line of a known event (`dir=SIDEWAYS`, no `size=`, bad hex, wrong array
//! lengths), a line that is neither an event nor a header, or a line longer than
//! [`MAX_LINE`] is [`TraceError::Parse`] naming the file, the line, what was expected and the
//! offending text (at most 120 characters); with [`FtraceOptions::lenient`] it is skipped and
//! counted in [`ImportReport::malformed_skipped`]. Lines are parsed as bytes: invalid UTF-8
//! in the task name is accepted (the name is not used); anywhere else it makes the line
//! malformed. No input makes the reader panic (`tests/ftrace_props.rs`, `fuzz/`).
//!
//! # Speed
//!
//! One reused line buffer, a hand-written byte parser, device names looked up by `&str` (and
//! the previous line's device compared first): no allocation per line in steady state. The
//! `ftrace/import` bench targets ≥ 2 M lines/s on one core.
//!
//! # Layout
//!
//! This file holds the reader loop and one handler per event kind; `lexer` splits a line into
//! its head (CPU, timestamp, event name) and body, `fields` parses the bodies of each event
//! format, `sg` pairs each `dma_map_sg` with its `dma_unmap_sg`.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fmt;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{Event, EventKind, EventSource, TraceDir, TraceError, TraceHeader};

mod fields;
mod lexer;
mod origin;
mod sg;

pub use origin::{IrqContext, LineOrigin};

use fields::{DmaFields, parse_iommu, parse_iova_free};
use lexer::{Head, Known, NonEvent, classify, classify_non_event, parse_head, trim, trim_end};
use sg::OpenSg;

/// The device name given to `iommu:map`/`iommu:unmap` records, which name no device.
pub const IOMMU_DEVICE: &str = "iommu";

/// The IOVA granule a `free_iova_fast` kprobe's `pfn` and `size` count in (4 KiB: x86's).
pub const IOVA_GRANULE: u64 = 4096;

/// The longest line accepted, in bytes (a 128-entry `dma_map_sg` line is about 8 KiB).
pub const MAX_LINE: u64 = 1 << 20;

/// How many `dma_map_sg` calls are kept open for matching `dma_unmap_sg`.
pub const MAX_OPEN_SG: usize = 1 << 16;

/// `found` text in errors is cut to this many characters.
const FOUND_MAX: usize = 120;

/// The kernel's `DMA_MAPPING_ERROR`.
const DMA_MAPPING_ERROR: u64 = u64::MAX;

/// What a line that is not an event nor a header was expected to be.
const EXPECTED_LINE: &str =
    "an event line `TASK-PID [CPU] [FLAGS] SECONDS.FRACTION: EVENT: BODY` or a header line";

/// How to import.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FtraceOptions {
    /// Skip malformed lines (counting them in [`ImportReport::malformed_skipped`]) instead of
    /// failing on the first one.
    pub lenient: bool,
}

/// What an import read, skipped and could not match. Every line is counted exactly once in
/// one of `imported_lines`, `skipped_header_or_comment`, `skipped_other_events`,
/// `lost_event_markers`, `map_errors` or `malformed_skipped`, which sum to `lines`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImportReport {
    /// Lines read.
    pub lines: u64,
    /// Event lines that produced records.
    pub imported_lines: u64,
    /// Records produced (`SgSeg` records included).
    pub events: u64,
    /// Blank lines, `#` comments, `cpus=`, `version =`, `CPU N is empty`.
    pub skipped_header_or_comment: u64,
    /// Lines of events this importer does not model (`sched_switch`, `dma_map_sg_err`, ...).
    pub skipped_other_events: u64,
    /// `CPU:N [LOST M EVENTS]` and `##### CPU N buffer started ####` lines.
    pub lost_event_markers: u64,
    /// The sum of `M` over `[LOST M EVENTS]` markers.
    pub lost_events: u64,
    /// Malformed lines skipped in lenient mode.
    pub malformed_skipped: u64,
    /// `dma_map_*` lines with `dma_addr=ffffffffffffffff` (failed maps): no record.
    pub map_errors: u64,
    /// `dma_unmap_sg` lines that matched no open `dma_map_sg` of the same device and
    /// physical addresses.
    pub unmatched_unmap_sg: u64,
    /// `dma_map_sg` lines whose arrays the kernel cut short (`[TRUNCATED]`).
    pub truncated_sg: u64,
    /// `dma_map_sg` calls not kept for matching because [`MAX_OPEN_SG`] were open.
    pub untracked_map_sg: u64,
    /// `iommu:unmap` lines with `unmapped_size != size`.
    pub partial_iommu_unmaps: u64,
    /// Records whose timestamp is earlier than the first imported event's: their time is
    /// clamped to 0 (the trace's times count from its first event).
    #[serde(default)]
    pub clamped_timestamps: u64,
    /// Records whose timestamp is earlier than a record before them (out of order, e.g.
    /// per-CPU buffers merged unsorted): kept in file order, with their own times.
    #[serde(default)]
    pub reordered_timestamps: u64,
    /// Event lines imported or skipped as other events, by event name as printed (`map`,
    /// `iommu:map`, `dma_map_page`, `sched_switch`, ...).
    pub by_event: BTreeMap<String, u64>,
}

/// A streaming reader of ftrace text (see the module doc).
///
/// # Examples
///
/// ```
/// use iommulab_trace::EventSource;
/// use iommulab_trace::ftrace::{FtraceOptions, FtraceReader};
///
/// let text = "# tracer: nop\n\
///   fio-3310 [002] ..... 8123.500012: dma_map_page: 0000:01:00.0 dir=FROM_DEVICE dma_addr=fff00000 size=4096 phys_addr=12c400000 attrs=\n";
/// let mut r = FtraceReader::new(text.as_bytes(), "trace.txt".into(), FtraceOptions::default());
/// let e = r.next_event().unwrap().unwrap();
/// assert_eq!((e.dma, e.phys, e.len), (Some(0xfff0_0000), Some(0x1_2c40_0000), 4096));
/// assert_eq!(r.header().devices, ["0000:01:00.0"]);
/// assert!(r.next_event().unwrap().is_none());
/// assert_eq!(r.report().skipped_header_or_comment, 1);
/// ```
pub struct FtraceReader<R: BufRead> {
    reader: R,
    path: PathBuf,
    options: FtraceOptions,
    header: TraceHeader,
    /// Device name → index into `header.devices`; consulted only when the name differs from
    /// `last_device`'s.
    devices: HashMap<String, u16>,
    last_device: Option<u16>,
    /// The reused line buffer.
    line: Vec<u8>,
    line_no: u64,
    eof: bool,
    /// Absolute timestamp of the first imported event.
    first_ts: Option<u64>,
    /// The latest absolute timestamp imported, for `reordered_timestamps`.
    latest_ts: u64,
    /// Records parsed but not yet returned (a `dma_map_sg` line makes several).
    pending: VecDeque<Event>,
    /// Reused parse buffers for sg arrays.
    dma_addrs: Vec<u64>,
    sizes: Vec<u64>,
    phys_addrs: Vec<u64>,
    /// Open `dma_map_sg` calls by (device, key hash); same-key duplicates go to `open_sg_more`.
    open_sg: HashMap<(u16, u64), OpenSg>,
    open_sg_more: Vec<((u16, u64), OpenSg)>,
    /// Spare segment vectors, so matching allocates nothing in steady state.
    seg_pool: Vec<Vec<Event>>,
    /// Lines per event name, in order of first sight (`report.by_event` is built from it):
    /// the previous line's name is tried first, then a short linear scan, then `event_index`.
    event_counts: Vec<(Box<[u8]>, u64)>,
    event_index: HashMap<Box<[u8]>, usize>,
    last_event: usize,
    report: ImportReport,
    /// Device DMA masks from `swiotlb_bounced` lines (`origin`).
    dma_masks: Vec<(String, u64)>,
    /// The CPU count a header line gave (`#P:N` of `trace`, `cpus=N` of `trace-cmd report`).
    header_cpus: Option<u32>,
}

/// The CPU count of a header line: `# entries-in-buffer/entries-written: 14681/14681   #P:1`
/// or `cpus=2`.
fn header_cpus(t: &[u8]) -> Option<u32> {
    let rest = if let Some(i) = t.windows(3).position(|w| w == b"#P:") {
        &t[i + 3..]
    } else {
        t.strip_prefix(b"cpus=")?
    };
    let d = lexer::digits(rest);
    let n = lexer::parse_dec(&rest[..d])?;
    u32::try_from(n).ok().filter(|&n| n > 0)
}

/// Names (devices, events) found by a linear scan before a hash lookup.
const LINEAR_SCAN: usize = 16;

impl<R: BufRead> fmt::Debug for FtraceReader<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FtraceReader")
            .field("path", &self.path)
            .field("options", &self.options)
            .field("line", &self.line_no)
            .field("devices", &self.header.devices.len())
            .field("open_sg", &(self.open_sg.len() + self.open_sg_more.len()))
            .field("report", &self.report)
            .finish_non_exhaustive()
    }
}

impl FtraceReader<BufReader<File>> {
    /// Opens a text file.
    pub fn open(path: &Path, options: FtraceOptions) -> Result<Self, TraceError> {
        let file = File::open(path).map_err(|source| TraceError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Ok(Self::new(
            BufReader::with_capacity(1 << 16, file),
            path.to_path_buf(),
            options,
        ))
    }
}

impl<R: BufRead> FtraceReader<R> {
    /// A reader of `reader`; `path` names it in errors.
    pub fn new(reader: R, path: PathBuf, options: FtraceOptions) -> Self {
        let source = format!("linux ftrace text: {}", path.display());
        FtraceReader {
            reader,
            path,
            options,
            header: TraceHeader {
                devices: Vec::new(),
                source,
            },
            devices: HashMap::new(),
            last_device: None,
            line: Vec::with_capacity(512),
            line_no: 0,
            eof: false,
            first_ts: None,
            latest_ts: 0,
            pending: VecDeque::with_capacity(256),
            dma_addrs: Vec::new(),
            sizes: Vec::new(),
            phys_addrs: Vec::new(),
            open_sg: HashMap::new(),
            open_sg_more: Vec::new(),
            seg_pool: Vec::new(),
            event_counts: Vec::new(),
            event_index: HashMap::new(),
            last_event: 0,
            report: ImportReport::default(),
            dma_masks: Vec::new(),
            header_cpus: None,
        }
    }

    /// What has been read so far (complete once `next_event` returned `Ok(None)`).
    pub fn report(&self) -> ImportReport {
        let mut report = self.report.clone();
        report.by_event = self
            .event_counts
            .iter()
            .map(|(name, n)| (String::from_utf8_lossy(name).into_owned(), *n))
            .collect();
        report
    }

    /// The options.
    pub fn options(&self) -> FtraceOptions {
        self.options
    }

    /// The file name used in errors.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The first imported event's timestamp as the trace printed it, in ns (`time_ns` of
    /// every record counts from it): traces of one boot share this clock.
    pub fn first_timestamp_ns(&self) -> Option<u64> {
        self.first_ts
    }

    /// The number of CPUs the trace's header gave, if it gave one: `#P:N` on the
    /// `# entries-in-buffer/entries-written` line of `/sys/kernel/tracing/trace`, or
    /// `cpus=N` of `trace-cmd report`. Known once the header lines are read.
    pub fn header_cpus(&self) -> Option<u32> {
        self.header_cpus
    }

    /// The 1-based number of the last line read (0 before the first).
    pub fn line_number(&self) -> u64 {
        self.line_no
    }

    /// Reads the next line into `line`; false at the end of input.
    fn read_line(&mut self, line: &mut Vec<u8>) -> Result<bool, TraceError> {
        line.clear();
        let n = (&mut self.reader)
            .take(MAX_LINE)
            .read_until(b'\n', line)
            .map_err(|source| TraceError::Io {
                path: self.path.clone(),
                source,
            })?;
        if n == 0 {
            return Ok(false);
        }
        self.line_no += 1;
        self.report.lines += 1;
        if line.last() != Some(&b'\n') {
            if n as u64 >= MAX_LINE {
                self.skip_rest_of_line()?;
                return Err(self.error(
                    format!("a line of at most {MAX_LINE} bytes"),
                    line.as_slice(),
                ));
            }
            // The input ends inside this line. The kernel ends every line of `trace` with a
            // newline, so the file was cut short, and a number cut short still parses
            // (`size=40` of `size=4096`): refused, not read as a smaller event.
            if !trim(line).is_empty() {
                return Err(self.error(
                    "a line that ends with a newline (the input ends inside this line: \
                     is the file cut short?)"
                        .into(),
                    line.as_slice(),
                ));
            }
        }
        Ok(true)
    }

    /// Discards input up to and including the next newline.
    fn skip_rest_of_line(&mut self) -> Result<(), TraceError> {
        loop {
            let buf = self.reader.fill_buf().map_err(|source| TraceError::Io {
                path: self.path.clone(),
                source,
            })?;
            if buf.is_empty() {
                return Ok(());
            }
            if let Some(i) = buf.iter().position(|&b| b == b'\n') {
                self.reader.consume(i + 1);
                return Ok(());
            }
            let n = buf.len();
            self.reader.consume(n);
        }
    }

    fn error(&self, expected: String, found: &[u8]) -> TraceError {
        TraceError::Parse {
            path: self.path.clone(),
            line: self.line_no,
            expected,
            found: found_text(found),
        }
    }

    /// Parses one line, queueing its records.
    fn process_line(&mut self, line: &[u8]) -> Result<(), TraceError> {
        let t = trim(line);
        match classify_non_event(t) {
            Some(NonEvent::Header) => {
                self.report.skipped_header_or_comment += 1;
                if let Some(n) = header_cpus(t) {
                    self.header_cpus = Some(n);
                }
                return Ok(());
            }
            Some(NonEvent::Lost(n)) => {
                self.report.lost_event_markers += 1;
                self.report.lost_events = self.report.lost_events.saturating_add(n);
                return Ok(());
            }
            None => {}
        }
        let Some(head) = parse_head(t) else {
            return Err(self.error(EXPECTED_LINE.to_owned(), t));
        };
        let Some(known) = classify(head.name) else {
            if head.name.ends_with(b"swiotlb_bounced") {
                self.note_swiotlb_bounced(head.body);
            }
            self.report.skipped_other_events += 1;
            self.count_event(head.name);
            return Ok(());
        };
        let outcome = match known {
            Known::IommuMap => self.iommu_map(&head),
            Known::IommuUnmap => self.iommu_unmap(&head),
            Known::Map => self.dma_map(&head),
            Known::Unmap => self.dma_single(&head, EventKind::Unmap, true),
            Known::MapSg => self.dma_map_sg(&head),
            Known::UnmapSg => self.dma_unmap_sg(&head),
            Known::Alloc => self.dma_alloc_free(&head, EventKind::Alloc),
            Known::Free => self.dma_alloc_free(&head, EventKind::Free),
            Known::SyncSingle(kind) => self.dma_single(&head, kind, false),
            Known::SyncSg(kind) => self.dma_sync_sg(&head, kind),
            Known::IovaFree => self.iova_free(&head),
        };
        match outcome {
            Ok(Outcome::Imported) => self.report.imported_lines += 1,
            Ok(Outcome::MapError) => self.report.map_errors += 1,
            Err(bad) => {
                let name = String::from_utf8_lossy(head.name);
                return Err(self.error(format!("{} in {name}", bad.expected), bad.found));
            }
        }
        self.count_event(head.name);
        Ok(())
    }

    fn count_event(&mut self, name: &[u8]) {
        let counts = &mut self.event_counts;
        let i = if counts
            .get(self.last_event)
            .is_some_and(|(n, _)| **n == *name)
        {
            self.last_event
        } else if let Some(i) = counts
            .iter()
            .take(LINEAR_SCAN)
            .position(|(n, _)| **n == *name)
        {
            i
        } else if let Some(&i) = self.event_index.get(name) {
            i
        } else {
            counts.push((name.into(), 0));
            self.event_index.insert(name.into(), counts.len() - 1);
            counts.len() - 1
        };
        counts[i].1 += 1;
        self.last_event = i;
    }

    /// The device index of `name`, adding it to the header on first sight.
    fn device<'a>(&mut self, name: &'a [u8]) -> Result<u16, Bad<'a>> {
        if let Some(i) = self.last_device
            && self.header.devices[usize::from(i)].as_bytes() == name
        {
            return Ok(i);
        }
        if let Some((_, i)) = self
            .header
            .devices
            .iter()
            .take(LINEAR_SCAN)
            .zip(0u16..)
            .find(|(d, _)| d.as_bytes() == name)
        {
            self.last_device = Some(i);
            return Ok(i);
        }
        let Ok(s) = std::str::from_utf8(name) else {
            return Err(Bad::new("a UTF-8 device name", name));
        };
        let i = match self.devices.get(s) {
            Some(&i) => i,
            None => {
                let Ok(i) = u16::try_from(self.header.devices.len()) else {
                    return Err(Bad::new("at most 65536 distinct devices", name));
                };
                self.devices.insert(s.to_owned(), i);
                self.header.devices.push(s.to_owned());
                i
            }
        };
        self.last_device = Some(i);
        Ok(i)
    }

    /// Nanoseconds since the first imported event.
    fn time(&mut self, ts: u64) -> u64 {
        let first = *self.first_ts.get_or_insert(ts);
        if ts < self.latest_ts {
            self.report.reordered_timestamps += 1;
        } else {
            self.latest_ts = ts;
        }
        if ts < first {
            self.report.clamped_timestamps += 1;
        }
        ts.saturating_sub(first)
    }

    /// A record with the line's time and CPU.
    fn record(&mut self, head: &Head<'_>, device: u16, kind: EventKind, dir: TraceDir) -> Event {
        Event {
            time_ns: self.time(head.ts),
            cpu: head.cpu,
            device,
            dir,
            ..Event::new(kind)
        }
    }

    fn push(&mut self, e: Event) {
        self.pending.push_back(e);
        self.report.events += 1;
    }

    fn iommu_map<'a>(&mut self, head: &Head<'a>) -> Result<Outcome, Bad<'a>> {
        let f = parse_iommu(head.body, true)?;
        let dev = self.device(IOMMU_DEVICE.as_bytes())?;
        let mut e = self.record(head, dev, EventKind::Map, TraceDir::None);
        e.dma = Some(f.iova);
        e.phys = Some(f.paddr);
        e.len = f.size;
        self.push(e);
        Ok(Outcome::Imported)
    }

    fn iommu_unmap<'a>(&mut self, head: &Head<'a>) -> Result<Outcome, Bad<'a>> {
        let f = parse_iommu(head.body, false)?;
        let dev = self.device(IOMMU_DEVICE.as_bytes())?;
        if f.unmapped != f.size {
            self.report.partial_iommu_unmaps += 1;
        }
        let mut e = self.record(head, dev, EventKind::Unmap, TraceDir::None);
        e.dma = Some(f.iova);
        e.len = f.size;
        self.push(e);
        Ok(Outcome::Imported)
    }

    /// A `free_iova_fast` kprobe: the moment and CPU an IOVA range went back to the
    /// allocator (in lazy mode, the flush queue's later free).
    fn iova_free<'a>(&mut self, head: &Head<'a>) -> Result<Outcome, Bad<'a>> {
        let f = parse_iova_free(head.body)?;
        let dev = self.device(IOMMU_DEVICE.as_bytes())?;
        let mut e = self.record(head, dev, EventKind::Free, TraceDir::None);
        e.dma = Some(f.pfn.saturating_mul(IOVA_GRANULE));
        e.len = f.size.saturating_mul(IOVA_GRANULE);
        e.phys = Some(f.iovad);
        self.push(e);
        Ok(Outcome::Imported)
    }

    /// `dma_map_page`/`dma_map_phys`/`dma_map_resource`.
    fn dma_map<'a>(&mut self, head: &Head<'a>) -> Result<Outcome, Bad<'a>> {
        let f = DmaFields::parse(head.body)?;
        let dir = f.dir()?;
        let dma = f.hex(f.dma_addr, "`dma_addr=<hex>`")?;
        let size = f.dec(f.size, "`size=<decimal>`")?;
        let phys = f.hex(f.phys_addr, "`phys_addr=<hex>`")?;
        f.require(f.attrs, "`attrs=`")?;
        let dev = self.device(f.device)?;
        if dma == DMA_MAPPING_ERROR {
            return Ok(Outcome::MapError);
        }
        let mut e = self.record(head, dev, EventKind::Map, dir);
        e.dma = Some(dma);
        e.phys = Some(phys);
        e.len = size;
        self.push(e);
        Ok(Outcome::Imported)
    }

    /// `dma_unmap_*` (with `attrs=`) and `dma_sync_single_*` (without).
    fn dma_single<'a>(
        &mut self,
        head: &Head<'a>,
        kind: EventKind,
        attrs: bool,
    ) -> Result<Outcome, Bad<'a>> {
        let f = DmaFields::parse(head.body)?;
        let dir = f.dir()?;
        let dma = f.hex(f.dma_addr, "`dma_addr=<hex>`")?;
        let size = f.dec(f.size, "`size=<decimal>`")?;
        if attrs {
            f.require(f.attrs, "`attrs=`")?;
        }
        let dev = self.device(f.device)?;
        let mut e = self.record(head, dev, kind, dir);
        e.dma = Some(dma);
        e.len = size;
        self.push(e);
        Ok(Outcome::Imported)
    }

    /// `dma_alloc*`/`dma_free*`, in the v6.12 (`phys_addr=`, no `dir=`) and later
    /// (`dir=`, `virt_addr=`) formats.
    fn dma_alloc_free<'a>(&mut self, head: &Head<'a>, kind: EventKind) -> Result<Outcome, Bad<'a>> {
        let f = DmaFields::parse(head.body)?;
        let dir = match f.dir {
            Some(_) => f.dir()?,
            None => TraceDir::Bidirectional,
        };
        let dma = f.hex(f.dma_addr, "`dma_addr=<hex>`")?;
        let size = f.dec(f.size, "`size=<decimal>`")?;
        let phys = match f.phys_addr {
            Some(_) => Some(f.hex(f.phys_addr, "`phys_addr=<hex>`")?),
            None => None,
        };
        f.require(f.attrs, "`attrs=`")?;
        let dev = self.device(f.device)?;
        let mut e = self.record(head, dev, kind, dir);
        e.dma = Some(dma);
        e.phys = phys;
        e.len = size;
        self.push(e);
        Ok(Outcome::Imported)
    }

    fn dma_sync_sg<'a>(&mut self, head: &Head<'a>, kind: EventKind) -> Result<Outcome, Bad<'a>> {
        let f = DmaFields::parse(head.body)?;
        let dir = f.dir()?;
        f.array(
            f.dma_addrs,
            "`dma_addrs={0x<hex>,...}`",
            &mut self.dma_addrs,
        )?;
        f.array(f.sizes, "`sizes={0x<hex>,...}`", &mut self.sizes)?;
        if self.sizes.len() != self.dma_addrs.len() {
            return Err(Bad::new(
                "as many `sizes` as `dma_addrs`",
                f.sizes.map_or(head.body, |(t, _)| t),
            ));
        }
        let dev = self.device(f.device)?;
        let mut e = self.record(head, dev, kind, dir);
        e.dma = self.dma_addrs.first().copied();
        e.len = self.sizes.iter().fold(0u64, |a, &b| a.saturating_add(b));
        self.push(e);
        Ok(Outcome::Imported)
    }
}

impl<R: BufRead> EventSource for FtraceReader<R> {
    fn header(&self) -> &TraceHeader {
        &self.header
    }

    fn source_path(&self) -> Option<&Path> {
        Some(&self.path)
    }

    fn cpu_count(&self) -> Option<u32> {
        self.header_cpus
    }

    fn next_event(&mut self) -> Result<Option<Event>, TraceError> {
        loop {
            if let Some(e) = self.pending.pop_front() {
                return Ok(Some(e));
            }
            if self.eof {
                return Ok(None);
            }
            let mut line = std::mem::take(&mut self.line);
            let result = match self.read_line(&mut line) {
                Ok(true) => self.process_line(&line),
                Ok(false) => {
                    self.eof = true;
                    Ok(())
                }
                Err(e) => Err(e),
            };
            self.line = line;
            match result {
                Ok(()) => {}
                Err(TraceError::Parse { .. }) if self.options.lenient => {
                    self.report.malformed_skipped += 1;
                }
                Err(e) => return Err(e),
            }
        }
    }
}

/// How a known event line went.
enum Outcome {
    Imported,
    MapError,
}

/// Why a line does not parse: what was expected and the offending text.
#[derive(Debug)]
struct Bad<'a> {
    expected: &'static str,
    found: &'a [u8],
}

impl<'a> Bad<'a> {
    fn new(expected: &'static str, found: &'a [u8]) -> Self {
        Bad { expected, found }
    }
}

/// The offending text for an error: lossy UTF-8, at most [`FOUND_MAX`] characters.
fn found_text(b: &[u8]) -> String {
    String::from_utf8_lossy(trim_end(b))
        .chars()
        .take(FOUND_MAX)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Imports `text` completely.
    pub(super) fn import(text: &str, lenient: bool) -> (Vec<Event>, TraceHeader, ImportReport) {
        let text = as_file(text);
        let mut r = FtraceReader::new(text.as_bytes(), "t.txt".into(), FtraceOptions { lenient });
        let mut events = Vec::new();
        while let Some(e) = r.next_event().unwrap() {
            events.push(e);
        }
        (events, r.header().clone(), r.report())
    }

    /// The error importing `text` stops at (non-lenient).
    pub(super) fn import_err(text: &str) -> String {
        let text = as_file(text);
        let mut r = FtraceReader::new(text.as_bytes(), "t.txt".into(), FtraceOptions::default());
        loop {
            match r.next_event() {
                Ok(Some(_)) => {}
                Ok(None) => panic!("no error importing {text:?}"),
                Err(e) => return e.to_string(),
            }
        }
    }

    /// The one record of a one-line trace.
    pub(super) fn one(line: &str) -> Event {
        let (events, _, report) = import(line, false);
        assert_eq!(events.len(), 1, "{events:?}");
        assert_eq!(report.imported_lines, 1);
        events[0]
    }

    /// The CPU count comes from `#P:N` (ftrace) or `cpus=N` (trace-cmd), not from events.
    #[test]
    fn header_gives_the_cpu_count() {
        let cpus = |text: &str| {
            let mut r = FtraceReader::new(text.as_bytes(), "t".into(), FtraceOptions::default());
            while r.next_event().unwrap().is_some() {}
            r.header_cpus()
        };
        assert_eq!(
            cpus("# tracer: nop\n#\n# entries-in-buffer/entries-written: 14681/14681   #P:4\n"),
            Some(4)
        );
        assert_eq!(cpus("cpus=2\n"), Some(2));
        assert_eq!(cpus("# tracer: nop\n#P:0\n"), None);
        assert_eq!(cpus("# tracer: nop\n"), None);
    }

    /// `text` as the kernel writes it: every line ends with a newline (the tests write one
    /// line without it; a file that ends inside a line was cut short).
    fn as_file(text: &str) -> String {
        if text.is_empty() || text.ends_with('\n') {
            text.to_owned()
        } else {
            format!("{text}\n")
        }
    }

    /// The Display text of the first error.
    pub(super) fn error(text: &str) -> String {
        let text = as_file(text);
        let mut r = FtraceReader::new(text.as_bytes(), "t.txt".into(), FtraceOptions::default());
        loop {
            match r.next_event() {
                Ok(Some(_)) => {}
                Ok(None) => panic!("no error in {text:?}"),
                Err(e) => return e.to_string(),
            }
        }
    }

    pub(super) fn rec(
        kind: EventKind,
        dir: TraceDir,
        dma: Option<u64>,
        phys: Option<u64>,
        len: u64,
    ) -> Event {
        Event {
            dir,
            dma,
            phys,
            len,
            ..Event::new(kind)
        }
    }

    pub(super) const MAP_PAGE: &str = "  iperf3-2041    [005] ..s1. 8123.456789: dma_map_page: 0000:3b:00.0 dir=TO_DEVICE dma_addr=ffffa000 size=1514 phys_addr=1f2a3c000 attrs=\n";

    /// Times are ns since the first imported event; earlier stamps saturate to 0.
    #[test]
    fn times_are_relative_to_first_event() {
        let text = "\
a-1 [000] ..... 5.000000: sched_switch: x
a-1 [000] ..... 100.000000001: dma_sync_single_for_cpu: d dir=NONE dma_addr=0 size=1
a-1 [001] ..... 100.5: dma_sync_single_for_cpu: d dir=NONE dma_addr=0 size=1
a-1 [002] ..... 99.999999: dma_sync_single_for_cpu: d dir=NONE dma_addr=0 size=1
";
        let (events, _, _) = import(text, false);
        let t: Vec<_> = events.iter().map(|e| e.time_ns).collect();
        assert_eq!(t, [0, 499_999_999, 0]);
    }

    /// Errors name file:line, what was expected, and the offending text.
    #[test]
    fn error_messages_name_line_and_expectation() {
        let bad_dir = format!(
            "{MAP_PAGE}a-1 [000] ..... 1.0: dma_map_page: 0000:00:01.0 dir=SIDEWAYS dma_addr=1 size=1 phys_addr=1 attrs=\n"
        );
        assert_eq!(
            error(&bad_dir),
            "t.txt:2: expected `dir=` BIDIRECTIONAL, TO_DEVICE, FROM_DEVICE or NONE in dma_map_page, found \"dir=SIDEWAYS\""
        );
        assert_eq!(
            error("a-1 [000] ..... 1.0: dma_unmap_page: d dir=NONE dma_addr=1 attrs="),
            "t.txt:1: expected `size=<decimal>` in dma_unmap_page, found \"d dir=NONE dma_addr=1 attrs=\""
        );
        assert_eq!(
            error("a-1 [000] ..... 1.0: dma_unmap_page: d dir=NONE dma_addr=xyz size=1 attrs="),
            "t.txt:1: expected `dma_addr=<hex>` in dma_unmap_page, found \"dma_addr=xyz\""
        );
        assert_eq!(
            error("# ok\nthis is not ftrace\n"),
            format!("t.txt:2: expected {EXPECTED_LINE}, found \"this is not ftrace\"")
        );
        assert_eq!(
            error("a-1 [000] ..... 1.0: map: IOMMU: iova=0x1 - 0x2 size=1"),
            "t.txt:1: expected `paddr=0x<hex>` in map, found \"size=1\""
        );
        assert_eq!(
            error(
                "a-1 [000] ..... 1.0: dma_map_sg: d dir=NONE dma_addrs={0x1,0x2} sizes={0x1} phys_addrs={0x1,0x2} attrs="
            ),
            "t.txt:1: expected as many `sizes` as `dma_addrs` in dma_map_sg, found \"sizes={0x1}\""
        );
        assert_eq!(
            error(
                "a-1 [000] ..... 1.0: dma_map_sg: d dir=NONE nents=3/3 ents=1/1 dma_addrs={0x1} sizes={0x1} phys_addrs={0x1,0x2} attrs="
            ),
            "t.txt:1: expected `nents=` shown count equal to the `phys_addrs` count in dma_map_sg, found \"nents=3/3\""
        );
    }

    /// The offending text is cut to 120 characters.
    #[test]
    fn found_text_is_truncated() {
        let long = "x".repeat(500);
        let msg = error(&long);
        assert!(
            msg.ends_with(&format!("found \"{}\"", "x".repeat(120))),
            "{msg}"
        );
    }

    /// Lenient mode skips malformed lines (and garbage, and invalid UTF-8) and counts them;
    /// every line lands in exactly one counter.
    #[test]
    fn lenient_skips_and_counts() {
        let mut text = Vec::new();
        text.extend_from_slice(MAP_PAGE.as_bytes());
        text.extend_from_slice(b"garbage\n");
        text.extend_from_slice(
            b"a-1 [000] ..... 1.0: dma_map_page: d dir=UP dma_addr=1 size=1 phys_addr=1 attrs=\n",
        );
        text.extend_from_slice(b"a-1 [000] ..... 1.0: dma_map_page: \xff\xfe dir=NONE dma_addr=1 size=1 phys_addr=1 attrs=\n");
        text.extend_from_slice(b"\xffcomm\xfe-1 [000] ..... 1.0: dma_map_page: d dir=NONE dma_addr=1 size=1 phys_addr=1 attrs=\n");
        text.extend_from_slice(MAP_PAGE.as_bytes());
        let mut r = FtraceReader::new(
            text.as_slice(),
            "t.txt".into(),
            FtraceOptions { lenient: true },
        );
        let mut n = 0;
        while r.next_event().unwrap().is_some() {
            n += 1;
        }
        let report = r.report();
        assert_eq!(n, 3);
        assert_eq!(report.malformed_skipped, 3);
        assert_eq!(report.imported_lines, 3);
        assert_eq!(report.lines, 6);
        assert_eq!(r.header().devices, ["0000:3b:00.0", "d"]);
    }

    /// A strict import stops at the first malformed line, and can go on after it.
    #[test]
    fn strict_reports_then_continues() {
        let text = format!("garbage\n{MAP_PAGE}");
        let mut r = FtraceReader::new(text.as_bytes(), "t.txt".into(), FtraceOptions::default());
        assert!(matches!(
            r.next_event(),
            Err(TraceError::Parse { line: 1, .. })
        ));
        assert!(r.next_event().unwrap().is_some());
        assert!(r.next_event().unwrap().is_none());
    }

    /// An input that ends inside a line was cut short: the cut line is refused even where
    /// what is left of it parses (an IOMMU map's `size=4096` cut to `size=40`), and skipped
    /// and counted in lenient mode. Blanks after the last newline are not a cut line.
    #[test]
    fn a_last_line_without_newline_is_refused() {
        let cut = "iperf3-2041 [005] ..s1. 8123.456791: map: IOMMU: iova=0x00000000ffffa000 \
                   - 0x00000000ffffb000 paddr=0x00000001f2a3c000 size=40";
        let text = format!("{MAP_PAGE}{cut}");
        let mut r = FtraceReader::new(text.as_bytes(), "t.txt".into(), FtraceOptions::default());
        assert!(r.next_event().unwrap().is_some());
        match r.next_event() {
            Err(e @ TraceError::Parse { line: 2, .. }) => {
                assert!(e.to_string().contains("cut short"), "{e}");
            }
            other => panic!("{other:?}"),
        }
        let mut r = FtraceReader::new(
            text.as_bytes(),
            "t.txt".into(),
            FtraceOptions { lenient: true },
        );
        assert!(r.next_event().unwrap().is_some());
        assert!(r.next_event().unwrap().is_none());
        assert_eq!(r.report().malformed_skipped, 1);
        for tail in ["", "  \t"] {
            let text = format!("{MAP_PAGE}{tail}");
            let mut r =
                FtraceReader::new(text.as_bytes(), "t.txt".into(), FtraceOptions::default());
            assert!(r.next_event().unwrap().is_some());
            assert!(r.next_event().unwrap().is_none(), "{tail:?}");
        }
    }

    /// Lines over MAX_LINE are rejected without buffering the rest of them.
    #[test]
    fn overlong_line_is_malformed() {
        let mut text = vec![b'a'; usize::try_from(MAX_LINE).unwrap() + 10];
        text.push(b'\n');
        text.extend_from_slice(MAP_PAGE.as_bytes());
        let mut r = FtraceReader::new(
            text.as_slice(),
            "t.txt".into(),
            FtraceOptions { lenient: true },
        );
        assert!(r.next_event().unwrap().is_some());
        assert_eq!(r.report().malformed_skipped, 1);
        assert_eq!(r.report().lines, 2);
        assert_eq!(r.line_number(), 2);
    }

    /// CRLF line ends and a missing final newline are fine.
    #[test]
    fn crlf_and_no_final_newline() {
        let text = MAP_PAGE.replace('\n', "\r\n") + MAP_PAGE.trim_end();
        let (events, _, _) = import(&text, false);
        assert_eq!(events.len(), 2);
        assert_eq!(events[1].len, 1514);
    }
}
