//! Linux ftrace import: turns the text of `/sys/kernel/tracing/trace` (or `trace_pipe`) and of
//! `trace-cmd report` into [`Event`]s, from the `dma:` tracepoints (v6.12+) and
//! `iommu:map`/`iommu:unmap` (reference §5; recording recipe in docs/capture.md).
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

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fmt;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{Event, EventKind, EventSource, TraceDir, TraceError, TraceHeader};

/// The device name given to `iommu:map`/`iommu:unmap` records, which name no device.
pub const IOMMU_DEVICE: &str = "iommu";

/// The longest line accepted, in bytes (a 128-entry `dma_map_sg` line is about 8 KiB).
pub const MAX_LINE: u64 = 1 << 20;

/// How many `dma_map_sg` calls are kept open for matching `dma_unmap_sg`.
pub const MAX_OPEN_SG: usize = 1 << 16;

/// Physical addresses that key an open `dma_map_sg` (the kernel's `DMA_TRACE_MAX_ENTRIES`).
const SG_KEY_ENTRIES: usize = 128;

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
    /// Event lines imported or skipped as other events, by event name as printed (`map`,
    /// `iommu:map`, `dma_map_page`, `sched_switch`, ...).
    pub by_event: BTreeMap<String, u64>,
}

/// A streaming reader of ftrace text (see the module doc).
///
/// # Examples
///
/// ```
/// use iommulab::trace::EventSource;
/// use iommulab::trace::ftrace::{FtraceOptions, FtraceReader};
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
}

/// Names (devices, events) found by a linear scan before a hash lookup.
const LINEAR_SCAN: usize = 16;

/// An open `dma_map_sg`: its `SgSeg` records.
struct OpenSg {
    segs: Vec<Event>,
    n_phys: usize,
    truncated: bool,
}

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
        if line.last() != Some(&b'\n') && n as u64 >= MAX_LINE {
            self.skip_rest_of_line()?;
            return Err(self.error(
                format!("a line of at most {MAX_LINE} bytes"),
                line.as_slice(),
            ));
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

    fn dma_map_sg<'a>(&mut self, head: &Head<'a>) -> Result<Outcome, Bad<'a>> {
        let f = DmaFields::parse(head.body)?;
        let dir = f.dir()?;
        f.array(
            f.dma_addrs,
            "`dma_addrs={0x<hex>,...}`",
            &mut self.dma_addrs,
        )?;
        f.array(f.sizes, "`sizes={0x<hex>,...}`", &mut self.sizes)?;
        f.array(
            f.phys_addrs,
            "`phys_addrs={0x<hex>,...}`",
            &mut self.phys_addrs,
        )?;
        f.require(f.attrs, "`attrs=`")?;
        let sizes_tok = f.sizes.map_or(head.body, |(t, _)| t);
        if self.sizes.len() != self.dma_addrs.len() {
            return Err(Bad::new("as many `sizes` as `dma_addrs`", sizes_tok));
        }
        let mut truncated = f.truncated;
        if let Some((tok, v)) = f.nents {
            let (shown, total) = fraction(v).ok_or(Bad::new("`nents=<shown>/<total>`", tok))?;
            if shown != self.phys_addrs.len() as u64 {
                return Err(Bad::new(
                    "`nents=` shown count equal to the `phys_addrs` count",
                    tok,
                ));
            }
            truncated |= total > shown;
        }
        if let Some((tok, v)) = f.ents {
            let (shown, total) = fraction(v).ok_or(Bad::new("`ents=<shown>/<total>`", tok))?;
            if shown != self.dma_addrs.len() as u64 {
                return Err(Bad::new(
                    "`ents=` shown count equal to the `dma_addrs` count",
                    tok,
                ));
            }
            truncated |= total > shown;
        }
        let n = self.phys_addrs.len().max(self.dma_addrs.len());
        let Ok(nents) = u32::try_from(n) else {
            return Err(Bad::new("fewer than 2^32 segments", sizes_tok));
        };
        let dev = self.device(f.device)?;
        if truncated {
            self.report.truncated_sg += 1;
        }
        let mut e = self.record(head, dev, EventKind::MapSg, dir);
        e.dma = self.dma_addrs.first().copied();
        e.phys = self.phys_addrs.first().copied();
        e.len = self.sizes.iter().fold(0u64, |a, &b| a.saturating_add(b));
        e.nents = nents;
        self.push(e);
        let mut segs = self.seg_pool.pop().unwrap_or_default();
        for i in 0..n {
            segs.push(Event {
                kind: EventKind::SgSeg,
                dma: self.dma_addrs.get(i).copied(),
                phys: self.phys_addrs.get(i).copied(),
                len: self.sizes.get(i).copied().unwrap_or(0),
                nents: 0,
                ..e
            });
        }
        self.pending.extend(segs.iter().copied());
        self.report.events += segs.len() as u64;
        self.keep_open(dev, segs, truncated);
        Ok(Outcome::Imported)
    }

    /// Keeps a mapped sg list open for its `dma_unmap_sg`.
    fn keep_open(&mut self, dev: u16, mut segs: Vec<Event>, truncated: bool) {
        let n_phys = self.phys_addrs.len();
        if n_phys == 0 {
            segs.clear();
            self.seg_pool.push(segs);
            return;
        }
        if self.open_sg.len() + self.open_sg_more.len() >= MAX_OPEN_SG {
            self.report.untracked_map_sg += 1;
            segs.clear();
            self.seg_pool.push(segs);
            return;
        }
        let key = (dev, sg_hash(&self.phys_addrs));
        let open = OpenSg {
            segs,
            n_phys,
            truncated,
        };
        if let std::collections::hash_map::Entry::Vacant(v) = self.open_sg.entry(key) {
            v.insert(open);
        } else {
            self.open_sg_more.push((key, open));
        }
    }

    /// Takes the oldest open map of `dev` whose physical list is `self.phys_addrs`.
    fn take_open(&mut self, dev: u16) -> Option<OpenSg> {
        let phys = &self.phys_addrs;
        let key = (dev, sg_hash(phys));
        if self.open_sg.get(&key).is_some_and(|o| o.matches(phys)) {
            let found = self.open_sg.remove(&key);
            // Promote the next same-key map, keeping the oldest in the table.
            if let Some(i) = self.open_sg_more.iter().position(|(k, _)| *k == key) {
                let (_, o) = self.open_sg_more.remove(i);
                self.open_sg.insert(key, o);
            }
            return found;
        }
        let i = self
            .open_sg_more
            .iter()
            .position(|(k, o)| *k == key && o.matches(phys))?;
        Some(self.open_sg_more.remove(i).1)
    }

    fn dma_unmap_sg<'a>(&mut self, head: &Head<'a>) -> Result<Outcome, Bad<'a>> {
        let f = DmaFields::parse(head.body)?;
        let dir = f.dir()?;
        f.array(
            f.phys_addrs,
            "`phys_addrs={0x<hex>,...}`",
            &mut self.phys_addrs,
        )?;
        f.require(f.attrs, "`attrs=`")?;
        let n = self.phys_addrs.len();
        let Ok(nents) = u32::try_from(n) else {
            return Err(Bad::new("fewer than 2^32 segments", head.body));
        };
        let dev = self.device(f.device)?;
        let open = if n == 0 { None } else { self.take_open(dev) };
        if open.is_none() && n > 0 {
            self.report.unmatched_unmap_sg += 1;
        }
        let map_segs: &[Event] = open.as_ref().map_or(&[], |o| &o.segs);
        let mut e = self.record(head, dev, EventKind::UnmapSg, dir);
        e.phys = self.phys_addrs.first().copied();
        e.dma = map_segs.first().and_then(|s| s.dma);
        e.len = map_segs.iter().fold(0u64, |a, s| a.saturating_add(s.len));
        e.nents = nents;
        self.pending.push_back(e);
        for (i, &p) in self.phys_addrs.iter().enumerate() {
            let m = map_segs.get(i);
            self.pending.push_back(Event {
                kind: EventKind::SgSeg,
                dma: m.and_then(|s| s.dma),
                phys: Some(p),
                len: m.map_or(0, |s| s.len),
                nents: 0,
                ..e
            });
        }
        self.report.events += 1 + n as u64;
        if let Some(mut o) = open {
            o.segs.clear();
            self.seg_pool.push(o.segs);
        }
        Ok(Outcome::Imported)
    }
}

impl<R: BufRead> EventSource for FtraceReader<R> {
    fn header(&self) -> &TraceHeader {
        &self.header
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

impl OpenSg {
    /// Whether an unmap of `phys` undoes this map (the map's list may be cut at 128).
    fn matches(&self, phys: &[u64]) -> bool {
        let same_len = self.n_phys == phys.len() || (self.truncated && phys.len() > self.n_phys);
        same_len
            && self.segs[..self.n_phys.min(phys.len())]
                .iter()
                .zip(phys)
                .all(|(s, &p)| s.phys == Some(p))
    }
}

/// FNV-1a over the first [`SG_KEY_ENTRIES`] addresses.
fn sg_hash(phys: &[u64]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &p in &phys[..phys.len().min(SG_KEY_ENTRIES)] {
        h = (h ^ p).wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
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

/// Event kinds this importer models.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Known {
    IommuMap,
    IommuUnmap,
    Map,
    Unmap,
    MapSg,
    UnmapSg,
    Alloc,
    Free,
    SyncSingle(EventKind),
    SyncSg(EventKind),
}

/// The importer's view of an event name, with or without its system (`iommu:map`).
fn classify(name: &[u8]) -> Option<Known> {
    let (system, base) = match name.iter().position(|&b| b == b':') {
        Some(i) => (Some(&name[..i]), &name[i + 1..]),
        None => (None, name),
    };
    let iommu = matches!(system, None | Some(b"iommu"));
    let dma = matches!(system, None | Some(b"dma"));
    Some(match base {
        b"map" if iommu => Known::IommuMap,
        b"unmap" if iommu => Known::IommuUnmap,
        b"dma_map_page" | b"dma_map_phys" | b"dma_map_resource" if dma => Known::Map,
        b"dma_unmap_page" | b"dma_unmap_phys" | b"dma_unmap_resource" if dma => Known::Unmap,
        b"dma_map_sg" if dma => Known::MapSg,
        b"dma_unmap_sg" if dma => Known::UnmapSg,
        b"dma_alloc" | b"dma_alloc_pages" if dma => Known::Alloc,
        b"dma_free" | b"dma_free_pages" if dma => Known::Free,
        b"dma_sync_single_for_cpu" if dma => Known::SyncSingle(EventKind::SyncForCpu),
        b"dma_sync_single_for_device" if dma => Known::SyncSingle(EventKind::SyncForDevice),
        b"dma_sync_sg_for_cpu" if dma => Known::SyncSg(EventKind::SyncForCpu),
        b"dma_sync_sg_for_device" if dma => Known::SyncSg(EventKind::SyncForDevice),
        _ => return None,
    })
}

/// A line that is not an event.
enum NonEvent {
    Header,
    /// A lost-events marker, with the count it gives (0 when it gives none).
    Lost(u64),
}

/// Recognises header, comment and lost-event lines (`t` trimmed).
fn classify_non_event(t: &[u8]) -> Option<NonEvent> {
    if t.is_empty() {
        return Some(NonEvent::Header);
    }
    if t[0] == b'#' {
        if t.starts_with(b"#####") && contains(t, b"buffer started") {
            return Some(NonEvent::Lost(0));
        }
        return Some(NonEvent::Header);
    }
    if let Some(rest) = t.strip_prefix(b"CPU:") {
        // `CPU:3 [LOST 123 EVENTS]`
        let d = digits(rest);
        let rest = trim_start(&rest[d..]);
        if d > 0
            && let Some(rest) = rest.strip_prefix(b"[LOST")
        {
            let rest = trim_start(rest);
            let n = digits(rest);
            return Some(NonEvent::Lost(parse_dec(&rest[..n]).unwrap_or(0)));
        }
        return None;
    }
    if let Some(rest) = t.strip_prefix(b"cpus=") {
        return (!rest.is_empty() && digits(rest) == rest.len()).then_some(NonEvent::Header);
    }
    if let Some(rest) = t.strip_prefix(b"version") {
        let rest = trim_start(rest);
        return rest.starts_with(b"=").then_some(NonEvent::Header);
    }
    if let Some(rest) = t.strip_prefix(b"CPU ") {
        // trace-cmd: `CPU 1 is empty`
        let d = digits(rest);
        return (d > 0 && &rest[d..] == b" is empty").then_some(NonEvent::Header);
    }
    None
}

/// The common part of an event line.
#[derive(Debug, PartialEq, Eq)]
struct Head<'a> {
    cpu: u16,
    /// Absolute timestamp, ns.
    ts: u64,
    name: &'a [u8],
    body: &'a [u8],
}

/// Parses `TASK-PID [(TGID)] [CPU] [FLAGS] SECS.FRAC: EVENT: BODY` (`t` trimmed).
fn parse_head(t: &[u8]) -> Option<Head<'_>> {
    let n = t.len();
    let mut from = 0;
    let (cpu, mut i) = loop {
        let open = from + t[from..].iter().position(|&b| b == b'[')?;
        from = open + 1;
        let mut j = from;
        let mut cpu: u32 = 0;
        while j < n && j - from < 5 && t[j].is_ascii_digit() {
            cpu = cpu * 10 + u32::from(t[j] - b'0');
            j += 1;
        }
        if j == from || t.get(j) != Some(&b']') || !t.get(j + 1).is_some_and(is_space) {
            continue;
        }
        if !task_pid_before(&t[..open]) {
            continue;
        }
        let Ok(cpu) = u16::try_from(cpu) else {
            continue;
        };
        break (cpu, j + 1);
    };
    let word = |i: &mut usize| {
        while *i < n && is_space(&t[*i]) {
            *i += 1;
        }
        let start = *i;
        while *i < n && !is_space(&t[*i]) {
            *i += 1;
        }
        &t[start..*i]
    };
    let tok = word(&mut i);
    let ts = match tok.strip_suffix(b":").and_then(parse_ts) {
        Some(ts) => ts,
        None => {
            // A flags column (`..s1.`, `d..2`), then the timestamp.
            if tok.len() > 8 {
                return None;
            }
            word(&mut i).strip_suffix(b":").and_then(parse_ts)?
        }
    };
    while i < n && is_space(&t[i]) {
        i += 1;
    }
    // The event name ends at the first `:` followed by a blank or the end of the line.
    let start = i;
    loop {
        let b = *t.get(i)?;
        if b == b':' && t.get(i + 1).is_none_or(is_space) {
            break;
        }
        if !(b.is_ascii_alphanumeric() || b == b'_' || b == b':') {
            return None;
        }
        i += 1;
    }
    if i == start {
        return None;
    }
    Some(Head {
        cpu,
        ts,
        name: &t[start..i],
        body: trim_start(&t[i + 1..]),
    })
}

fn is_space(b: &u8) -> bool {
    *b == b' ' || *b == b'\t'
}

/// Whether `s` ends with `-PID`, optionally followed by a `(TGID)` column.
fn task_pid_before(s: &[u8]) -> bool {
    let mut s = trim_end(s);
    if s.last() == Some(&b')') {
        let Some(open) = s.iter().rposition(|&b| b == b'(') else {
            return false;
        };
        let inner = trim(&s[open + 1..s.len() - 1]);
        let tgid_ok = !inner.is_empty()
            && (inner.iter().all(u8::is_ascii_digit) || inner.iter().all(|&b| b == b'-'));
        if !tgid_ok {
            return false;
        }
        s = trim_end(&s[..open]);
    }
    let d = s.iter().rev().take_while(|b| b.is_ascii_digit()).count();
    d > 0 && s.len() > d && s[s.len() - d - 1] == b'-'
}

/// Fields of a `dma:` event body: `DEVICE key=value ...`; each is `(token, value)`.
#[derive(Debug, Default)]
struct DmaFields<'a> {
    body: &'a [u8],
    device: &'a [u8],
    dir: Option<(&'a [u8], &'a [u8])>,
    dma_addr: Option<(&'a [u8], &'a [u8])>,
    size: Option<(&'a [u8], &'a [u8])>,
    phys_addr: Option<(&'a [u8], &'a [u8])>,
    dma_addrs: Option<(&'a [u8], &'a [u8])>,
    sizes: Option<(&'a [u8], &'a [u8])>,
    phys_addrs: Option<(&'a [u8], &'a [u8])>,
    attrs: Option<(&'a [u8], &'a [u8])>,
    nents: Option<(&'a [u8], &'a [u8])>,
    ents: Option<(&'a [u8], &'a [u8])>,
    truncated: bool,
}

type Field<'a> = Option<(&'a [u8], &'a [u8])>;

impl<'a> DmaFields<'a> {
    fn parse(body: &'a [u8]) -> Result<Self, Bad<'a>> {
        let mut f = DmaFields {
            body,
            ..DmaFields::default()
        };
        let mut words = Words::new(body);
        f.device = match words.next() {
            Some(d) if !d.contains(&b'=') => d,
            _ => return Err(Bad::new("a device name first", body)),
        };
        while let Some(w) = words.next() {
            if w == b"[TRUNCATED]" {
                f.truncated = true;
                continue;
            }
            let Some(eq) = w.iter().position(|&b| b == b'=') else {
                return Err(Bad::new("`key=value` fields after the device name", w));
            };
            let v = Some((w, &w[eq + 1..]));
            match &w[..eq] {
                b"dir" => f.dir = v,
                b"dma_addr" => f.dma_addr = v,
                b"size" => f.size = v,
                b"phys_addr" => f.phys_addr = v,
                b"dma_addrs" => f.dma_addrs = v,
                b"sizes" => f.sizes = v,
                b"phys_addrs" => f.phys_addrs = v,
                b"attrs" => f.attrs = v,
                b"nents" => f.nents = v,
                b"ents" => f.ents = v,
                _ => {}
            }
        }
        Ok(f)
    }

    fn require(&self, field: Field<'a>, what: &'static str) -> Result<&'a [u8], Bad<'a>> {
        field.map(|(_, v)| v).ok_or(Bad::new(what, self.body))
    }

    fn dir(&self) -> Result<TraceDir, Bad<'a>> {
        const WHAT: &str = "`dir=` BIDIRECTIONAL, TO_DEVICE, FROM_DEVICE or NONE";
        let (tok, v) = self.dir.ok_or(Bad::new(WHAT, self.body))?;
        match v {
            b"BIDIRECTIONAL" => Ok(TraceDir::Bidirectional),
            b"TO_DEVICE" => Ok(TraceDir::ToDevice),
            b"FROM_DEVICE" => Ok(TraceDir::FromDevice),
            b"NONE" => Ok(TraceDir::None),
            _ => Err(Bad::new(WHAT, tok)),
        }
    }

    fn hex(&self, field: Field<'a>, what: &'static str) -> Result<u64, Bad<'a>> {
        let (tok, v) = field.ok_or(Bad::new(what, self.body))?;
        parse_hex(v).ok_or(Bad::new(what, tok))
    }

    fn dec(&self, field: Field<'a>, what: &'static str) -> Result<u64, Bad<'a>> {
        let (tok, v) = field.ok_or(Bad::new(what, self.body))?;
        parse_dec(v).ok_or(Bad::new(what, tok))
    }

    /// Parses `{0x1,0x2}` into `out` (cleared first).
    fn array(
        &self,
        field: Field<'a>,
        what: &'static str,
        out: &mut Vec<u64>,
    ) -> Result<(), Bad<'a>> {
        let (tok, v) = field.ok_or(Bad::new(what, self.body))?;
        out.clear();
        let inner = v
            .strip_prefix(b"{")
            .and_then(|v| v.strip_suffix(b"}"))
            .ok_or(Bad::new(what, tok))?;
        if inner.is_empty() {
            return Ok(());
        }
        for el in inner.split(|&b| b == b',') {
            out.push(parse_hex(el).ok_or(Bad::new(what, tok))?);
        }
        Ok(())
    }
}

/// Fields of an `iommu:map`/`iommu:unmap` body.
#[derive(Debug, PartialEq, Eq)]
struct IommuFields {
    iova: u64,
    paddr: u64,
    size: u64,
    unmapped: u64,
}

/// Parses `IOMMU: iova=0x… [- 0x…] paddr=0x… size=N` (map) or
/// `IOMMU: iova=0x… [- 0x…] size=N unmapped_size=N` (unmap): the fields in this order,
/// separated by blanks.
fn parse_iommu(body: &[u8], map: bool) -> Result<IommuFields, Bad<'_>> {
    const END: &str = "the range end `0x<hex>` after `-`";
    let mut words = Words::new(body);
    if words.next() != Some(b"IOMMU:".as_slice()) {
        return Err(Bad::new("`IOMMU:` at the start of the body", body));
    }
    let mut f = IommuFields {
        iova: words.value(b"iova=", "`iova=0x<hex>`", parse_hex)?,
        paddr: 0,
        size: 0,
        unmapped: 0,
    };
    if words.peek() == Some(b"-".as_slice()) {
        words.next();
        let end = words.next().ok_or(Bad::new(END, body))?;
        parse_hex(end).ok_or(Bad::new(END, end))?;
    }
    if map {
        f.paddr = words.value(b"paddr=", "`paddr=0x<hex>`", parse_hex)?;
    }
    f.size = words.value(b"size=", "`size=<decimal>`", parse_dec)?;
    if !map {
        f.unmapped = words.value(b"unmapped_size=", "`unmapped_size=<decimal>`", parse_dec)?;
    }
    match words.next() {
        None => Ok(f),
        Some(w) => Err(Bad::new("the end of the body", w)),
    }
}

/// Blank-separated words of a body, with one word of lookahead.
struct Words<'a> {
    body: &'a [u8],
    rest: &'a [u8],
    peeked: Option<&'a [u8]>,
}

impl<'a> Words<'a> {
    fn new(body: &'a [u8]) -> Self {
        Words {
            body,
            rest: body,
            peeked: None,
        }
    }

    fn next(&mut self) -> Option<&'a [u8]> {
        if let Some(w) = self.peeked.take() {
            return Some(w);
        }
        let s = trim_start(self.rest);
        if s.is_empty() {
            self.rest = s;
            return None;
        }
        let (w, rest) = split_word(s);
        self.rest = rest;
        Some(w)
    }

    fn peek(&mut self) -> Option<&'a [u8]> {
        if self.peeked.is_none() {
            self.peeked = self.next();
        }
        self.peeked
    }

    /// The next word, which must be `key` followed by a value `parse` accepts.
    fn value(
        &mut self,
        key: &[u8],
        what: &'static str,
        parse: fn(&[u8]) -> Option<u64>,
    ) -> Result<u64, Bad<'a>> {
        let w = self.next().ok_or(Bad::new(what, self.body))?;
        w.strip_prefix(key).and_then(parse).ok_or(Bad::new(what, w))
    }
}

/// `shown/total`.
fn fraction(v: &[u8]) -> Option<(u64, u64)> {
    let slash = v.iter().position(|&b| b == b'/')?;
    Some((parse_dec(&v[..slash])?, parse_dec(&v[slash + 1..])?))
}

/// Hex with an optional `0x`: 1 to 16 digits.
fn parse_hex(s: &[u8]) -> Option<u64> {
    let s = s
        .strip_prefix(b"0x")
        .or_else(|| s.strip_prefix(b"0X"))
        .unwrap_or(s);
    if s.is_empty() || s.len() > 16 {
        return None;
    }
    let mut v: u64 = 0;
    for &b in s {
        let d = HEX[usize::from(b)];
        if d == NOT_HEX {
            return None;
        }
        v = (v << 4) | u64::from(d);
    }
    Some(v)
}

const NOT_HEX: u8 = 0xff;

/// Hex digit values by byte, [`NOT_HEX`] for others.
static HEX: [u8; 256] = {
    let mut t = [NOT_HEX; 256];
    let mut d: u8 = 0;
    while d < 10 {
        t[(b'0' + d) as usize] = d;
        d += 1;
    }
    let mut d: u8 = 0;
    while d < 6 {
        t[(b'a' + d) as usize] = 10 + d;
        t[(b'A' + d) as usize] = 10 + d;
        d += 1;
    }
    t
};

/// Decimal, 1 to 20 digits, no overflow.
fn parse_dec(s: &[u8]) -> Option<u64> {
    if s.is_empty() || s.len() > 20 {
        return None;
    }
    if s.len() <= 19 {
        // 19 digits cannot overflow.
        let mut v: u64 = 0;
        for &b in s {
            let d = b.wrapping_sub(b'0');
            if d > 9 {
                return None;
            }
            v = v * 10 + u64::from(d);
        }
        return Some(v);
    }
    let mut v: u64 = 0;
    for &b in s {
        if !b.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(b - b'0'))?;
    }
    Some(v)
}

/// `SECONDS.FRACTION` (1–9 decimals) in ns.
fn parse_ts(s: &[u8]) -> Option<u64> {
    const SCALE: [u64; 10] = [
        1_000_000_000,
        100_000_000,
        10_000_000,
        1_000_000,
        100_000,
        10_000,
        1_000,
        100,
        10,
        1,
    ];
    let dot = s.iter().position(|&b| b == b'.')?;
    let (secs, frac) = (&s[..dot], &s[dot + 1..]);
    if frac.is_empty() || frac.len() > 9 {
        return None;
    }
    let ns = parse_dec(frac)? * SCALE[frac.len()];
    parse_dec(secs)?.checked_mul(1_000_000_000)?.checked_add(ns)
}

/// Leading ASCII digits.
fn digits(s: &[u8]) -> usize {
    s.iter().take_while(|b| b.is_ascii_digit()).count()
}

fn split_word(s: &[u8]) -> (&[u8], &[u8]) {
    let end = s
        .iter()
        .position(|&b| b == b' ' || b == b'\t')
        .unwrap_or(s.len());
    s.split_at(end)
}

fn is_blank(b: &u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n')
}

fn trim_start(s: &[u8]) -> &[u8] {
    let i = s.iter().position(|b| !is_blank(b)).unwrap_or(s.len());
    &s[i..]
}

fn trim_end(s: &[u8]) -> &[u8] {
    let i = s.iter().rposition(|b| !is_blank(b)).map_or(0, |i| i + 1);
    &s[..i]
}

fn trim(s: &[u8]) -> &[u8] {
    trim_start(trim_end(s))
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
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
    fn import(text: &str, lenient: bool) -> (Vec<Event>, TraceHeader, ImportReport) {
        let mut r = FtraceReader::new(text.as_bytes(), "t.txt".into(), FtraceOptions { lenient });
        let mut events = Vec::new();
        while let Some(e) = r.next_event().unwrap() {
            events.push(e);
        }
        (events, r.header().clone(), r.report())
    }

    /// The one record of a one-line trace.
    fn one(line: &str) -> Event {
        let (events, _, report) = import(line, false);
        assert_eq!(events.len(), 1, "{events:?}");
        assert_eq!(report.imported_lines, 1);
        events[0]
    }

    /// The Display text of the first error.
    fn error(text: &str) -> String {
        let mut r = FtraceReader::new(text.as_bytes(), "t.txt".into(), FtraceOptions::default());
        loop {
            match r.next_event() {
                Ok(Some(_)) => {}
                Ok(None) => panic!("no error in {text:?}"),
                Err(e) => return e.to_string(),
            }
        }
    }

    fn rec(kind: EventKind, dir: TraceDir, dma: Option<u64>, phys: Option<u64>, len: u64) -> Event {
        Event {
            dir,
            dma,
            phys,
            len,
            ..Event::new(kind)
        }
    }

    const MAP_PAGE: &str = "  iperf3-2041    [005] ..s1. 8123.456789: dma_map_page: 0000:3b:00.0 dir=TO_DEVICE dma_addr=ffffa000 size=1514 phys_addr=1f2a3c000 attrs=\n";

    /// Reference §5.3: the `trace` file shape, with the 5-character flags column.
    #[test]
    fn dma_map_page_in_trace_shape() {
        let e = one(MAP_PAGE);
        let want = Event {
            cpu: 5,
            ..rec(
                EventKind::Map,
                TraceDir::ToDevice,
                Some(0xffffa000),
                Some(0x1f2a3c000),
                1514,
            )
        };
        assert_eq!(e, want);
    }

    /// `trace-cmd report`: no flags, padded event name, 9 decimals, unpadded CPU.
    #[test]
    fn trace_cmd_report_shape() {
        let e = one(
            "          iperf3-2041  [5]  8123.456789123: dma_unmap_page:       0000:3b:00.0 dir=TO_DEVICE dma_addr=ffffa000 size=1514 attrs=",
        );
        assert_eq!(e.cpu, 5);
        assert_eq!(
            e,
            Event {
                cpu: 5,
                ..rec(
                    EventKind::Unmap,
                    TraceDir::ToDevice,
                    Some(0xffffa000),
                    None,
                    1514
                )
            }
        );
    }

    /// `trace-cmd report -l`: a 4-character latency column.
    #[test]
    fn trace_cmd_report_with_latency_flags() {
        let e = one(
            "fio-3310 [002] d..1 8123.500012: dma_sync_single_for_cpu: 0000:01:00.0 dir=FROM_DEVICE dma_addr=fff00000 size=4096",
        );
        assert_eq!(
            e,
            Event {
                cpu: 2,
                ..rec(
                    EventKind::SyncForCpu,
                    TraceDir::FromDevice,
                    Some(0xfff00000),
                    None,
                    4096
                )
            }
        );
    }

    /// `record-tgid`: a `(TGID)` column between TASK-PID and [CPU], also `(-------)`.
    #[test]
    fn tgid_column() {
        let a = one(
            "  iperf3-2041    (   2041) [005] ..s1. 8123.456789: dma_map_page: 0000:3b:00.0 dir=TO_DEVICE dma_addr=ffffa000 size=1514 phys_addr=1f2a3c000 attrs=",
        );
        let b = one(
            "  <idle>-0       (-------) [005] d.h2. 8123.456789: dma_map_page: 0000:3b:00.0 dir=TO_DEVICE dma_addr=ffffa000 size=1514 phys_addr=1f2a3c000 attrs=",
        );
        assert_eq!(a, b);
        assert_eq!(a.len, 1514);
    }

    /// The task name may hold spaces, dashes, brackets and digits; the last `-PID` before
    /// `[CPU]` ends it.
    #[test]
    fn comm_with_spaces_and_dashes() {
        for comm in [
            "my app-x-12",
            "kworker/u16:3-events_unbound",
            "a [1] b-7",
            "<...>",
            "-",
        ] {
            let line = format!(
                "{comm}-4242 [001] ..... 1.000001: dma_sync_single_for_device: virtio0 dir=BIDIRECTIONAL dma_addr=1000 size=64"
            );
            let e = one(&line);
            assert_eq!(
                (e.cpu, e.kind, e.len),
                (1, EventKind::SyncForDevice, 64),
                "{comm}"
            );
        }
    }

    /// Reference §5.1: the ranged (≥ 5.17) and the old `iommu:map` formats, with or without
    /// the system prefix, give the same record on device `iommu`.
    #[test]
    fn iommu_map_old_and_new_formats() {
        let new = "iperf3-2041 [005] ..s1. 8123.456791: map: IOMMU: iova=0x00000000ffffa000 - 0x00000000ffffb000 paddr=0x00000001f2a3c000 size=4096";
        let old = "iperf3-2041 [005] ..s1. 8123.456791: map: IOMMU: iova=0x00000000ffffa000 paddr=0x00000001f2a3c000 size=4096";
        let sys = "iperf3-2041 [005] 8123.456791: iommu:map: IOMMU: iova=0x00000000ffffa000 paddr=0x00000001f2a3c000 size=4096";
        let want = Event {
            cpu: 5,
            ..rec(
                EventKind::Map,
                TraceDir::None,
                Some(0xffffa000),
                Some(0x1f2a3c000),
                4096,
            )
        };
        for line in [new, old, sys] {
            let (events, header, _) = import(line, false);
            assert_eq!(events, [want]);
            assert_eq!(header.devices, [IOMMU_DEVICE]);
        }
    }

    /// Reference §5.1: `iommu:unmap`, old and new; a short unmap is counted.
    #[test]
    fn iommu_unmap_old_and_new_formats() {
        let new = "<idle>-0 [005] d.h2. 8123.456900: unmap: IOMMU: iova=0x00000000ffffa000 - 0x00000000ffffb000 size=4096 unmapped_size=4096";
        let old = "<idle>-0 [005] d.h2. 8123.456900: unmap: IOMMU: iova=0x00000000ffffa000 size=4096 unmapped_size=0";
        let want = Event {
            cpu: 5,
            ..rec(
                EventKind::Unmap,
                TraceDir::None,
                Some(0xffffa000),
                None,
                4096,
            )
        };
        let (events, _, report) = import(&format!("{new}\n{old}\n"), false);
        assert_eq!(events, [want, want]);
        assert_eq!(report.partial_iommu_unmaps, 1);
    }

    /// `dma_map_phys`/`dma_unmap_phys` (≥ 6.18) and `*_resource` parse like `*_page`; attrs
    /// may be names, `|`-joined names or hex.
    #[test]
    fn phys_resource_and_attrs() {
        let text = "\
a-1 [000] ..... 1.000000: dma_map_phys: 0000:00:02.0 dir=BIDIRECTIONAL dma_addr=1000 size=8 phys_addr=2000 attrs=SKIP_CPU_SYNC
a-1 [000] ..... 1.000001: dma_map_resource: 0000:00:02.0 dir=FROM_DEVICE dma_addr=3000 size=8 phys_addr=fe000000 attrs=WEAK_ORDERING|MMIO
a-1 [000] ..... 1.000002: dma_unmap_resource: 0000:00:02.0 dir=FROM_DEVICE dma_addr=3000 size=8 attrs=0x10000
a-1 [000] ..... 1.000003: dma_unmap_phys: 0000:00:02.0 dir=NONE dma_addr=1000 size=8 attrs=
";
        let (events, header, report) = import(text, false);
        let kinds: Vec<_> = events.iter().map(|e| (e.kind, e.dir, e.time_ns)).collect();
        assert_eq!(
            kinds,
            [
                (EventKind::Map, TraceDir::Bidirectional, 0),
                (EventKind::Map, TraceDir::FromDevice, 1000),
                (EventKind::Unmap, TraceDir::FromDevice, 2000),
                (EventKind::Unmap, TraceDir::None, 3000),
            ]
        );
        assert_eq!(events[1].phys, Some(0xfe000000));
        assert_eq!(header.devices, ["0000:00:02.0"]);
        assert_eq!(report.by_event.get("dma_map_phys"), Some(&1));
        assert_eq!(report.by_event.len(), 4);
    }

    /// Reference §5.2: a merged sg list (IOMMU): 1 DMA segment for 2 physical ones gives
    /// MapSg{nents 2} + 2 SgSeg, zipped by position.
    #[test]
    fn map_sg_merged_by_iommu() {
        let (events, _, _) = import(
            "fio-3310 [002] ..... 8123.500012: dma_map_sg: 0000:01:00.0 dir=FROM_DEVICE dma_addrs={0xfff00000} sizes={0x20000} phys_addrs={0x12c400000,0x12c420000} attrs=",
            false,
        );
        let d = TraceDir::FromDevice;
        let head = Event {
            nents: 2,
            ..rec(
                EventKind::MapSg,
                d,
                Some(0xfff00000),
                Some(0x12c400000),
                0x20000,
            )
        };
        let want: Vec<Event> = [
            head,
            rec(
                EventKind::SgSeg,
                d,
                Some(0xfff00000),
                Some(0x12c400000),
                0x20000,
            ),
            rec(EventKind::SgSeg, d, None, Some(0x12c420000), 0),
        ]
        .into_iter()
        .map(|e| Event { cpu: 2, ..e })
        .collect();
        assert_eq!(events, want);
    }

    /// The current format (`nents=a/b ents=c/d`) with one DMA segment per physical one.
    #[test]
    fn map_sg_unmerged_with_counts() {
        let (events, _, report) = import(
            "a-1 [000] ..... 1.0: dma_map_sg: virtio0 dir=TO_DEVICE nents=2/2 ents=2/2 dma_addrs={0x1000,0x5000} sizes={0x200,0x1000} phys_addrs={0xa000,0xb000} attrs=",
            false,
        );
        let d = TraceDir::ToDevice;
        assert_eq!(
            events,
            [
                Event {
                    nents: 2,
                    ..rec(EventKind::MapSg, d, Some(0x1000), Some(0xa000), 0x1200)
                },
                rec(EventKind::SgSeg, d, Some(0x1000), Some(0xa000), 0x200),
                rec(EventKind::SgSeg, d, Some(0x5000), Some(0xb000), 0x1000),
            ]
        );
        assert_eq!(report.truncated_sg, 0);
    }

    /// Trees that cap the arrays print `[TRUNCATED]`: counted, records cover what is printed.
    #[test]
    fn map_sg_truncated_is_counted() {
        let (events, _, report) = import(
            "a-1 [000] ..... 1.0: dma_map_sg: virtio0 dir=TO_DEVICE nents=2/300 ents=1/1 [TRUNCATED] dma_addrs={0x1000} sizes={0x2000} phys_addrs={0xa000,0xb000} attrs=",
            false,
        );
        assert_eq!(events.len(), 3);
        assert_eq!(events[0].nents, 2);
        assert_eq!(report.truncated_sg, 1);
    }

    /// `dma_unmap_sg` carries only physical addresses: it is matched to the open map with the
    /// same device and list, and mirrors its records; an unknown list is counted unmatched.
    #[test]
    fn unmap_sg_matches_its_map() {
        let text = "\
a-1 [000] ..... 1.000000: dma_map_sg: dev0 dir=FROM_DEVICE dma_addrs={0xfff00000} sizes={0x20000} phys_addrs={0x12c400000,0x12c420000} attrs=
a-1 [000] ..... 1.000001: dma_map_sg: dev1 dir=FROM_DEVICE dma_addrs={0xeee00000} sizes={0x20000} phys_addrs={0x12c400000,0x12c420000} attrs=
a-1 [000] ..... 1.000002: dma_unmap_sg: dev0 dir=FROM_DEVICE phys_addrs={0x12c400000,0x12c420000} attrs=
a-1 [000] ..... 1.000003: dma_unmap_sg: dev0 dir=FROM_DEVICE phys_addrs={0x12c400000,0x12c420000} attrs=
";
        let (events, header, report) = import(text, false);
        assert_eq!(header.devices, ["dev0", "dev1"]);
        let d = TraceDir::FromDevice;
        let t = 2000;
        let unmap = &events[6..9];
        assert_eq!(
            unmap,
            [
                Event {
                    time_ns: t,
                    nents: 2,
                    ..rec(
                        EventKind::UnmapSg,
                        d,
                        Some(0xfff00000),
                        Some(0x12c400000),
                        0x20000
                    )
                },
                Event {
                    time_ns: t,
                    ..rec(
                        EventKind::SgSeg,
                        d,
                        Some(0xfff00000),
                        Some(0x12c400000),
                        0x20000
                    )
                },
                Event {
                    time_ns: t,
                    ..rec(EventKind::SgSeg, d, None, Some(0x12c420000), 0)
                },
            ]
        );
        // The second unmap of dev0 has no open map left (dev1's does not count).
        assert_eq!(events[9].kind, EventKind::UnmapSg);
        assert_eq!(
            (events[9].dma, events[9].len, events[9].nents),
            (None, 0, 2)
        );
        assert_eq!(report.unmatched_unmap_sg, 1);
        assert_eq!(report.events, 12);
    }

    /// Two open maps of the same list are undone oldest first.
    #[test]
    fn duplicate_open_sg_lists_match_in_order() {
        let text = "\
a-1 [000] ..... 1.0: dma_map_sg: d dir=TO_DEVICE dma_addrs={0x1000} sizes={0x10} phys_addrs={0xa000} attrs=
a-1 [000] ..... 1.0: dma_map_sg: d dir=TO_DEVICE dma_addrs={0x2000} sizes={0x10} phys_addrs={0xa000} attrs=
a-1 [000] ..... 1.0: dma_map_sg: d dir=TO_DEVICE dma_addrs={0x3000} sizes={0x10} phys_addrs={0xa000} attrs=
a-1 [000] ..... 1.0: dma_unmap_sg: d dir=TO_DEVICE phys_addrs={0xa000} attrs=
a-1 [000] ..... 1.0: dma_unmap_sg: d dir=TO_DEVICE phys_addrs={0xa000} attrs=
a-1 [000] ..... 1.0: dma_unmap_sg: d dir=TO_DEVICE phys_addrs={0xa000} attrs=
";
        let (events, _, report) = import(text, false);
        let unmapped: Vec<_> = events
            .iter()
            .filter(|e| e.kind == EventKind::UnmapSg)
            .map(|e| e.dma)
            .collect();
        assert_eq!(unmapped, [Some(0x1000), Some(0x2000), Some(0x3000)]);
        assert_eq!(report.unmatched_unmap_sg, 0);
    }

    /// `dma_sync_sg_*`: one record, len = sum of the (hex) sizes.
    #[test]
    fn sync_sg_is_one_record() {
        let e = one(
            "a-1 [003] ..... 1.0: dma_sync_sg_for_device: 0000:01:00.0 dir=TO_DEVICE dma_addrs={0x1000,0x3000} sizes={0x800,0x100}",
        );
        assert_eq!(
            e,
            Event {
                cpu: 3,
                ..rec(
                    EventKind::SyncForDevice,
                    TraceDir::ToDevice,
                    Some(0x1000),
                    None,
                    0x900
                )
            }
        );
    }

    /// Reference §5.2: v6.12 `dma_alloc` (no dir, phys_addr) and the later format (dir,
    /// virt_addr, flags); `dma_free` likewise.
    #[test]
    fn alloc_and_free_formats() {
        let text = "\
a-1 [000] ..... 1.0: dma_alloc: 0000:00:04.0 dma_addr=fffc0000 size=16384 phys_addr=10a000000 flags=GFP_KERNEL|__GFP_ZERO attrs=
a-1 [000] ..... 1.0: dma_alloc_pages: 0000:00:04.0 dir=FROM_DEVICE dma_addr=fffb0000 size=4096 virt_addr=00000000c0ffee11 flags=GFP_KERNEL attrs=
a-1 [000] ..... 1.0: dma_free: 0000:00:04.0 dma_addr=fffc0000 size=16384 phys_addr=10a000000 attrs=
a-1 [000] ..... 1.0: dma_free_pages: 0000:00:04.0 dir=FROM_DEVICE dma_addr=fffb0000 size=4096 virt_addr=00000000c0ffee11 attrs=NO_KERNEL_MAPPING
";
        let (events, _, _) = import(text, false);
        assert_eq!(
            events,
            [
                rec(
                    EventKind::Alloc,
                    TraceDir::Bidirectional,
                    Some(0xfffc0000),
                    Some(0x10a000000),
                    16384
                ),
                rec(
                    EventKind::Alloc,
                    TraceDir::FromDevice,
                    Some(0xfffb0000),
                    None,
                    4096
                ),
                rec(
                    EventKind::Free,
                    TraceDir::Bidirectional,
                    Some(0xfffc0000),
                    Some(0x10a000000),
                    16384
                ),
                rec(
                    EventKind::Free,
                    TraceDir::FromDevice,
                    Some(0xfffb0000),
                    None,
                    4096
                ),
            ]
        );
    }

    /// Headers, comments, trace-cmd preambles and lost-event markers are skipped and
    /// counted; other events are counted by name.
    #[test]
    fn headers_markers_and_other_events_are_counted() {
        let text = "\
cpus=2
version = 6
CPU 1 is empty
# tracer: nop
#
# entries-in-buffer/entries-written: 3/3   #P:8
#           TASK-PID     CPU#  |||||  TIMESTAMP  FUNCTION
#              | |         |   |||||     |         |

##### CPU 2 buffer started ####
CPU:3 [LOST 123 EVENTS]
  <idle>-0 [002] d..2. 10.000000: sched_switch: prev_comm=swapper/2 prev_pid=0 ==> next_comm=fio next_pid=9
  fio-9 [002] ..... 10.000100: dma_map_sg_err: 0000:01:00.0 dir=TO_DEVICE dma_addrs={0x1} err=-12 attrs=
";
        let (events, header, report) = import(text, false);
        assert!(events.is_empty());
        assert!(header.devices.is_empty());
        let by_event: Vec<_> = report
            .by_event
            .iter()
            .map(|(k, v)| (k.as_str(), *v))
            .collect();
        assert_eq!(by_event, [("dma_map_sg_err", 1), ("sched_switch", 1)]);
        assert_eq!(
            report,
            ImportReport {
                lines: 13,
                skipped_header_or_comment: 9,
                skipped_other_events: 2,
                lost_event_markers: 2,
                lost_events: 123,
                by_event: report.by_event.clone(),
                ..ImportReport::default()
            }
        );
    }

    /// A failed map (`DMA_MAPPING_ERROR`) makes no record.
    #[test]
    fn failed_map_is_skipped() {
        let (events, _, report) = import(
            "a-1 [000] ..... 1.0: dma_map_page: d dir=TO_DEVICE dma_addr=ffffffffffffffff size=64 phys_addr=1000 attrs=",
            false,
        );
        assert!(events.is_empty());
        assert_eq!(report.map_errors, 1);
    }

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

    #[test]
    fn number_parsers() {
        assert_eq!(parse_hex(b"0x00000001f2a3c000"), Some(0x1f2a3c000));
        assert_eq!(parse_hex(b"FFFFffff"), Some(0xffff_ffff));
        assert_eq!(parse_hex(b"ffffffffffffffff"), Some(u64::MAX));
        assert_eq!(parse_hex(b"1ffffffffffffffff"), None);
        assert_eq!(parse_hex(b"0x"), None);
        assert_eq!(parse_hex(b"g"), None);
        assert_eq!(parse_dec(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(parse_dec(b"18446744073709551616"), None);
        assert_eq!(parse_ts(b"8123.456789"), Some(8_123_456_789_000));
        assert_eq!(parse_ts(b"8123.456789123"), Some(8_123_456_789_123));
        assert_eq!(parse_ts(b"1.5"), Some(1_500_000_000));
        assert_eq!(parse_ts(b"1.1234567890"), None);
        assert_eq!(parse_ts(b"99999999999999999999.0"), None);
    }
}
