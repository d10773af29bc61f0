//! dma-debug for any recorded trace: the checks of Linux's `kernel/dma/debug.c`
//! (`CONFIG_DMA_API_DEBUG`) that a trace can show, applied to what the *trace's* driver did,
//! plus a cross-check of the IOMMU layer's page-table events against the DMA layer.
//!
//! A production kernel has no dma-debug; its `dma:` tracepoints (6.12+) record every call
//! the checks need. `iommulab check TRACE` (and Python's `iommulab.check`) streams the trace
//! once, keeping only the live mappings, and reports each finding with the trace file and
//! line of both events (the map and the offending call), the device, the calling task and
//! CPU, and the Linux check it corresponds to ([`FindingKind::linux_check`]).
//!
//! | concern | file | Linux |
//! |---|---|---|
//! | live mappings; unmap, free, unmap_sg, sync, leaks, DMA mask | `dma.rs` | `check_unmap`, `check_sync`, `debug_dma_*`, `dma_debug_device_change` |
//! | overlapping mappings | `cacheline.rs` | `active_cacheline_*`, `add_dma_entry` |
//! | `iommu:map`/`iommu:unmap` against DMA maps/unmaps | `iommu.rs` | — |
//! | kinds, sites, findings | `finding.rs` | the `err_printk` messages |
//!
//! What a trace cannot show, and so is not checked: `dma_mapping_error` calls ("failed to
//! check map error"), stack/vmalloc/rodata addresses, sg segment limits, and the entry count
//! of `dma_sync_sg_*` (the importer folds a sync of a list into one record).
//!
//! Positions are 1-based lines of ftrace text; for the native and CSV formats, which keep no
//! lines, 1-based record numbers ([`CheckReport::position`]). Mappings made before the trace
//! began are unknown to the checker: their unmaps are reported as `unmap_not_mapped`, so
//! start tracing before the driver under test maps anything.
//!
//! Memory is bounded by the live mappings, plus a constant: the addresses recently unmapped
//! (two generations of at most [`UNMAPPED_MEMORY`]), which tell a double unmap from an
//! unmap of a never-mapped address.

mod cacheline;
mod dma;
mod finding;
mod iommu;

use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::Path;

use serde::{Deserialize, Serialize};

pub use finding::{Finding, FindingKind, Site};

use super::ftrace::{FtraceReader, IOMMU_DEVICE, IrqContext};
use super::{Event, EventKind, EventSource, TraceError, TraceFormat, TraceHeader};
use iommulab_base::hash::FxHashMap;

/// Unmaps remembered per generation (a double unmap is told from a never-mapped address
/// while its first unmap is remembered: at least the last this many unmaps); the live
/// checker's memory too.
pub use iommulab_base::dma_debug::UNMAPPED_MEMORY;

/// Findings kept in [`CheckReport::findings`] by default (all are counted).
pub const DEFAULT_MAX_FINDINGS: usize = 10_000;

/// A device's DMA mask as `--dma-mask DEVICE=MASK` and Python's `dma_masks` give it: a hex
/// mask (`0xffffffff`; not 0, which would put every mapping beyond it) or a number of bits
/// (see [`dma_mask_of_bits`]). `None` for anything else.
pub fn parse_dma_mask(s: &str) -> Option<u64> {
    let s = s.trim();
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok().filter(|&m| m != 0),
        None => s.parse().ok().and_then(dma_mask_of_bits),
    }
}

/// The mask of `bits` address bits, 1 to 64 (`DMA_BIT_MASK(bits)`: 32 is `0xffffffff`).
pub fn dma_mask_of_bits(bits: u32) -> Option<u64> {
    match bits {
        64 => Some(u64::MAX),
        1..=63 => Some((1u64 << bits) - 1),
        _ => None,
    }
}

/// How to check.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CheckOptions {
    /// Findings kept in the report's list (every finding is counted in `by_kind`).
    pub max_findings: usize,
    /// DMA masks by device name, in addition to those the trace prints
    /// (`swiotlb_bounced`'s `dma_mask=`): a mapping ending above its device's mask is a
    /// finding.
    pub dma_masks: Vec<(String, u64)>,
    /// Cross-check `iommu:map`/`iommu:unmap` against the DMA layer (when the trace has
    /// them).
    pub iommu: bool,
    /// Report the mappings still live when tracing stopped as `leak` findings (one per
    /// device). Without it they are counted as outstanding at end
    /// ([`CheckReport::outstanding_at_end`]): most captures stop while buffers are in
    /// flight.
    pub leaks: bool,
    /// The capture began before the traced devices mapped anything (at boot, or before
    /// their drivers probed): an unmap, free or sync of an address the trace never mapped is
    /// then `unmap_not_mapped`/`sync_not_mapped`. Without it such a call is counted as
    /// [`CheckReport::mapped_before_tracing`]: a trace that starts mid-run cannot tell a
    /// mapping made before it began from one never made.
    pub from_boot: bool,
}

impl Default for CheckOptions {
    fn default() -> Self {
        CheckOptions {
            max_findings: DEFAULT_MAX_FINDINGS,
            dma_masks: Vec::new(),
            iommu: true,
            leaks: false,
            from_boot: false,
        }
    }
}

/// How the IOMMU cross-check paired page-table events with DMA calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Pairing {
    /// By CPU and context (task, softirq, hardirq, NMI), from ftrace's flags column.
    Context,
    /// By CPU only: the trace has no flags column (or is not ftrace text).
    Cpu,
}

/// What a position in the report counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Position {
    /// 1-based lines of ftrace text.
    Line,
    /// 1-based record numbers (native, CSV).
    Record,
}

/// The result of a check.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckReport {
    /// The trace file.
    pub trace: String,
    /// What `line` in a [`Site`] counts.
    pub position: Position,
    /// Records read.
    pub events: u64,
    /// Findings of every kind.
    pub findings_total: u64,
    /// Findings by kind (kinds with none left out).
    pub by_kind: BTreeMap<FindingKind, u64>,
    /// The findings, in trace order (leaks and end-of-trace IOMMU findings last), at most
    /// [`CheckOptions::max_findings`].
    pub findings: Vec<Finding>,
    /// Findings counted but not kept in `findings`.
    pub findings_not_listed: u64,
    /// DMA-layer mappings still live when tracing stopped (outstanding at end; `leak`
    /// findings only with [`CheckOptions::leaks`]).
    pub outstanding_at_end: u64,
    /// The most DMA-layer mappings live at once.
    pub max_live: u64,
    /// Unmaps, frees and syncs of addresses the trace never mapped, taken as mapped before
    /// tracing began (findings instead with [`CheckOptions::from_boot`]).
    pub mapped_before_tracing: u64,
    /// Whether the IOMMU layer was checked (the trace has `iommu:` events and at least one
    /// device's maps were backed by them).
    pub iommu_checked: bool,
    /// How the IOMMU layer's events were paired with DMA calls.
    pub iommu_pairing: Pairing,
    /// Identity maps of reserved regions the IOMMU core set up (unclaimed `iommu:map`s with
    /// `iova == paddr` in task context), and their bytes.
    pub identity_maps: u64,
    /// The bytes of [`identity_maps`](Self::identity_maps).
    pub identity_bytes: u64,
    /// Halves of a call whose other half came before tracing began (not findings).
    pub cut_at_start: u64,
    /// Halves of a call whose other half came after tracing stopped (not findings).
    pub cut_at_end: u64,
    /// What was not checked, and why.
    pub notes: Vec<String>,
}

impl CheckReport {
    /// No findings.
    pub fn is_clean(&self) -> bool {
        self.findings_total == 0
    }

    /// The human-readable report: counts by kind, then up to `max` findings.
    pub fn to_text(&self, max: usize) -> String {
        let mut t = format!(
            "{}: {} events, {} findings{}\n",
            self.trace,
            self.events,
            self.findings_total,
            if self.is_clean() { " (clean)" } else { "" }
        );
        for (k, n) in &self.by_kind {
            t.push_str(&format!("  {:<28} {n}\n", k.name()));
        }
        t.push_str(&format!(
            "outstanding at end {} (still mapped when tracing stopped{}), most live {}, mapped before tracing {}\n",
            self.outstanding_at_end,
            if self.outstanding_at_end > 0 && !self.by_kind.contains_key(&FindingKind::Leak) {
                "; --leaks to list them"
            } else {
                ""
            },
            self.max_live,
            self.mapped_before_tracing,
        ));
        if self.iommu_checked {
            t.push_str(&format!(
                "IOMMU layer checked (paired by {}): identity maps {} ({} bytes), cut by the start of tracing {}, by its end {}\n",
                match self.iommu_pairing {
                    Pairing::Context => "CPU and context",
                    Pairing::Cpu => "CPU only",
                },
                self.identity_maps,
                self.identity_bytes,
                self.cut_at_start,
                self.cut_at_end
            ));
        } else {
            t.push_str("IOMMU layer not checked\n");
        }
        for n in &self.notes {
            t.push_str(&format!("note: {n}\n"));
        }
        let shown = self.findings.len().min(max);
        for f in &self.findings[..shown] {
            t.push_str(&f.display_with(&self.trace));
            t.push('\n');
        }
        let hidden = self.findings_total - shown as u64;
        if hidden > 0 {
            t.push_str(&format!(
                "... {hidden} more findings (--max N to print more, --json for the list)\n"
            ));
        }
        t
    }
}

/// Where streamed findings go, one at a time in the order found (IOMMU findings up to a
/// window late, then what is still open at the end).
pub type OnFinding<'a> = &'a mut dyn FnMut(&Finding) -> std::io::Result<()>;

/// Why a streaming check stopped.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    /// The trace could not be read.
    #[error(transparent)]
    Trace(#[from] TraceError),
    /// The finding consumer failed.
    #[error("cannot write the findings")]
    Write(#[source] std::io::Error),
}

fn trace_only(r: Result<CheckReport, CheckError>) -> Result<CheckReport, TraceError> {
    r.map_err(|e| match e {
        CheckError::Trace(t) => t,
        // No consumer, no write.
        CheckError::Write(source) => TraceError::Io {
            path: "findings".into(),
            source,
        },
    })
}

/// Checks the trace at `path` (any format `trace::open` reads; ftrace text gives lines,
/// tasks, contexts and `attrs=`).
pub fn check(
    path: &Path,
    format: TraceFormat,
    lenient: bool,
    options: &CheckOptions,
) -> Result<CheckReport, TraceError> {
    trace_only(check_with(path, format, lenient, options, None))
}

/// [`check`], passing each finding to `on_finding` as it is found instead of keeping it:
/// memory stays flat in the number of findings. At most [`CheckOptions::max_findings`] are
/// passed (all are counted); the report's `findings` is empty.
pub fn check_streaming(
    path: &Path,
    format: TraceFormat,
    lenient: bool,
    options: &CheckOptions,
    on_finding: OnFinding<'_>,
) -> Result<CheckReport, CheckError> {
    check_with(path, format, lenient, options, Some(on_finding))
}

fn check_with(
    path: &Path,
    format: TraceFormat,
    lenient: bool,
    options: &CheckOptions,
    stream: Option<OnFinding<'_>>,
) -> Result<CheckReport, CheckError> {
    let format = super::resolve(path, format)?;
    let name = path.display().to_string();
    if format == TraceFormat::Ftrace {
        let mut r = super::open_ftrace(path, lenient)?;
        check_ftrace_with(&mut r, &name, options, stream)
    } else {
        let mut src = super::open(path, format, lenient)?;
        check_source_with(&mut *src, &name, options, stream)
    }
}

/// Checks ftrace text being read by `r` (`name` names it in the report).
pub fn check_ftrace<R: BufRead>(
    r: &mut FtraceReader<R>,
    name: &str,
    options: &CheckOptions,
) -> Result<CheckReport, TraceError> {
    trace_only(check_ftrace_with(r, name, options, None))
}

/// [`check_ftrace`], streaming the findings as [`check_streaming`] does.
pub fn check_ftrace_streaming<R: BufRead>(
    r: &mut FtraceReader<R>,
    name: &str,
    options: &CheckOptions,
    on_finding: OnFinding<'_>,
) -> Result<CheckReport, CheckError> {
    check_ftrace_with(r, name, options, Some(on_finding))
}

fn check_ftrace_with<R: BufRead>(
    r: &mut FtraceReader<R>,
    name: &str,
    options: &CheckOptions,
    stream: Option<OnFinding<'_>>,
) -> Result<CheckReport, CheckError> {
    let mut c = Checker::new(options, Position::Line, stream);
    let mut masks_seen = 0;
    let mut last_line = 0;
    let mut ctx = Ctx::default();
    while let Some(e) = r.next_event()? {
        if r.dma_masks().len() != masks_seen {
            masks_seen = r.dma_masks().len();
            c.trace_masks = r.dma_masks().to_vec();
            c.masks.clear();
        }
        // Every record of one line shares its origin: re-read it once per line.
        if r.line_number() != last_line
            && let Some(o) = r.last_origin()
        {
            last_line = o.line;
            ctx = Ctx {
                line: o.line,
                event: c.names.event(o.event),
                task: c.names.task(o.task),
                skip_cpu_sync: o.has_attr("SKIP_CPU_SYNC") || o.has_attr("CACHELINES_OVERLAP"),
                virt: o.virt_addr,
                flavour: Flavour::of(o.event),
                context: o.context,
            };
        }
        c.event(&e, &ctx, r.header())?;
    }
    c.finish(name, r.header())
}

/// Checks any event source (positions are record numbers).
pub fn check_source(
    src: &mut dyn EventSource,
    name: &str,
    options: &CheckOptions,
) -> Result<CheckReport, TraceError> {
    trace_only(check_source_with(src, name, options, None))
}

fn check_source_with(
    src: &mut dyn EventSource,
    name: &str,
    options: &CheckOptions,
    stream: Option<OnFinding<'_>>,
) -> Result<CheckReport, CheckError> {
    let mut c = Checker::new(options, Position::Record, stream);
    let mut batch = Vec::new();
    let mut n: u64 = 0;
    let kind_names: Vec<u16> = EventKind::ALL
        .iter()
        .map(|k| c.names.event(k.name().as_bytes()))
        .collect();
    while src.read_batch(&mut batch)? > 0 {
        for e in &batch {
            n += 1;
            let ctx = Ctx {
                line: n,
                event: kind_names[e.kind as usize],
                task: NO_TASK,
                skip_cpu_sync: false,
                virt: None,
                flavour: Flavour::Plain,
                context: None,
            };
            c.event(e, &ctx, src.header())?;
        }
    }
    c.finish(name, src.header())
}

/// No task known.
const NO_TASK: u32 = u32::MAX;

/// A site, compactly: what a live mapping remembers of its map call.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct At {
    line: u64,
    time_ns: u64,
    task: u32,
    event: u16,
    cpu: u16,
    /// The context from ftrace's flags column (`None`: no column, or not ftrace).
    ctx: Option<IrqContext>,
}

impl At {
    /// The lane of the IOMMU cross-check: the CPU and the context (task when unknown).
    fn lane(&self) -> usize {
        usize::from(self.cpu) * IrqContext::ALL.len() + self.ctx.map_or(0, |c| c as usize)
    }
}

/// Which DMA-API function a record came from, where the event model folds several into one
/// kind (Linux's entry types: `dma_map_resource` makes a resource entry, `dma_alloc_pages` a
/// single one, a `dma_sync_sg_*` record covers several segments).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) enum Flavour {
    #[default]
    Plain,
    Resource,
    Pages,
    SyncSg,
}

impl Flavour {
    fn of(event: &[u8]) -> Self {
        let base = event.rsplit(|&b| b == b':').next().unwrap_or(event);
        match base {
            b"dma_map_resource" | b"dma_unmap_resource" => Flavour::Resource,
            b"dma_alloc_pages" | b"dma_free_pages" => Flavour::Pages,
            b"dma_sync_sg_for_cpu" | b"dma_sync_sg_for_device" => Flavour::SyncSg,
            _ => Flavour::Plain,
        }
    }
}

/// What the checker knows of a record beyond the event model.
#[derive(Clone, Copy, Debug)]
pub(super) struct Ctx {
    line: u64,
    event: u16,
    task: u32,
    skip_cpu_sync: bool,
    virt: Option<u64>,
    flavour: Flavour,
    context: Option<IrqContext>,
}

impl Default for Ctx {
    fn default() -> Self {
        Ctx {
            line: 0,
            event: 0,
            task: NO_TASK,
            skip_cpu_sync: false,
            virt: None,
            flavour: Flavour::Plain,
            context: None,
        }
    }
}

/// Interned task and event names.
#[derive(Debug)]
struct Names {
    events: Vec<String>,
    event_ids: FxHashMap<Box<[u8]>, u16>,
    tasks: Vec<String>,
    task_ids: FxHashMap<Box<[u8]>, u32>,
    /// The last few tasks seen (one per busy CPU, typically).
    recent_tasks: [u32; 4],
}

impl Default for Names {
    fn default() -> Self {
        Names {
            events: Vec::new(),
            event_ids: FxHashMap::default(),
            tasks: Vec::new(),
            task_ids: FxHashMap::default(),
            recent_tasks: [NO_TASK; 4],
        }
    }
}

impl Names {
    fn event(&mut self, name: &[u8]) -> u16 {
        // A trace has a handful of event names: a scan beats hashing.
        if let Some(i) = self.events.iter().position(|e| e.as_bytes() == name) {
            return u16::try_from(i).unwrap_or(u16::MAX);
        }
        if let Some(&i) = self.event_ids.get(name) {
            return i;
        }
        let i = u16::try_from(self.events.len()).unwrap_or(u16::MAX);
        if i < u16::MAX {
            self.events.push(String::from_utf8_lossy(name).into_owned());
            self.event_ids.insert(name.into(), i);
        }
        i
    }

    fn task(&mut self, name: &[u8]) -> u32 {
        if name.is_empty() {
            return NO_TASK;
        }
        for &i in &self.recent_tasks {
            if self
                .tasks
                .get(i as usize)
                .is_some_and(|t| t.as_bytes() == name)
            {
                return i;
            }
        }
        let i = match self.task_ids.get(name) {
            Some(&i) => i,
            None => {
                let i = u32::try_from(self.tasks.len()).unwrap_or(NO_TASK);
                if i != NO_TASK {
                    self.tasks.push(String::from_utf8_lossy(name).into_owned());
                    self.task_ids.insert(name.into(), i);
                }
                i
            }
        };
        self.recent_tasks.rotate_right(1);
        self.recent_tasks[0] = i;
        i
    }

    fn site(&self, at: &At) -> Site {
        Site {
            line: at.line,
            event: self
                .events
                .get(usize::from(at.event))
                .cloned()
                .unwrap_or_default(),
            task: self.tasks.get(at.task as usize).cloned(),
            cpu: at.cpu,
            context: at.ctx.map(|c| c.name().to_owned()),
            time_ns: at.time_ns,
        }
    }
}

/// A finding before names are resolved.
#[derive(Debug)]
pub(super) struct Raw {
    kind: FindingKind,
    /// Device index; `None` for the `iommu` pseudo-device.
    device: Option<u16>,
    at: At,
    map: Option<At>,
    detail: String,
}

/// Where findings go: all counted, the first `max` listed (kept, or passed on by the
/// checker after each event when streaming).
#[derive(Debug)]
pub(super) struct Sink {
    kept: Vec<Raw>,
    counts: [u64; FindingKind::ALL.len()],
    max: usize,
    /// Findings listed so far (kept or passed on).
    listed: usize,
}

impl Sink {
    fn new(max: usize) -> Self {
        Sink {
            kept: Vec::new(),
            counts: [0; FindingKind::ALL.len()],
            max,
            listed: 0,
        }
    }

    pub(super) fn emit(&mut self, raw: Raw) {
        self.counts[raw.kind as usize] += 1;
        if self.listed < self.max {
            self.listed += 1;
            self.kept.push(raw);
        }
    }

    /// Counts `n` findings of `kind` that are not listed.
    pub(super) fn count_only(&mut self, kind: FindingKind, n: u64) {
        self.counts[kind as usize] += n;
    }
}

/// The streaming checker.
struct Checker<'s> {
    dma: dma::DmaState,
    iommu: Option<iommu::IommuState>,
    sink: Sink,
    names: Names,
    position: Position,
    events: u64,
    leaks: bool,
    /// Whether each device index is the `iommu` pseudo-device.
    is_iommu: Vec<bool>,
    /// Masks from the options and the trace, by name; resolved per device into `masks`.
    option_masks: Vec<(String, u64)>,
    trace_masks: Vec<(String, u64)>,
    masks: Vec<Option<u64>>,
    /// Where findings go as they are found (else they are kept in the sink).
    stream: Option<OnFinding<'s>>,
}

impl<'s> Checker<'s> {
    fn new(options: &CheckOptions, position: Position, stream: Option<OnFinding<'s>>) -> Self {
        Checker {
            dma: dma::DmaState::new(options.from_boot),
            iommu: options.iommu.then(iommu::IommuState::default),
            sink: Sink::new(options.max_findings),
            names: Names::default(),
            position,
            events: 0,
            leaks: options.leaks,
            is_iommu: Vec::new(),
            option_masks: options.dma_masks.clone(),
            trace_masks: Vec::new(),
            masks: Vec::new(),
            stream,
        }
    }

    /// Resolves per-device tables for devices the header added since.
    fn learn_devices(&mut self, header: &TraceHeader) {
        let n = header.devices.len();
        if self.is_iommu.len() < n {
            self.is_iommu = header.devices.iter().map(|d| d == IOMMU_DEVICE).collect();
        }
        if self.masks.len() < n {
            self.masks = header
                .devices
                .iter()
                .map(|d| {
                    // The user's mask wins over the trace's.
                    self.option_masks
                        .iter()
                        .chain(&self.trace_masks)
                        .find(|(name, _)| name == d)
                        .map(|&(_, m)| m)
                })
                .collect();
        }
    }

    fn event(&mut self, e: &Event, ctx: &Ctx, header: &TraceHeader) -> Result<(), CheckError> {
        self.events += 1;
        let dev = usize::from(e.device);
        if dev >= self.is_iommu.len() || dev >= self.masks.len() {
            self.learn_devices(header);
        }
        let at = At {
            line: ctx.line,
            time_ns: e.time_ns,
            task: ctx.task,
            event: ctx.event,
            cpu: e.cpu,
            ctx: ctx.context,
        };
        if self.is_iommu.get(dev).copied().unwrap_or(false) {
            if let Some(io) = &mut self.iommu {
                io.page_table_event(e, at, &mut self.sink);
            }
        } else {
            // A list's segment records belong to its call: they do not age the lane.
            if e.kind != EventKind::SgSeg
                && let Some(io) = &mut self.iommu
            {
                io.tick(at.lane(), at.line, &mut self.sink);
            }
            let mask = self.masks.get(dev).copied().flatten();
            self.dma
                .event(e, ctx, at, mask, self.iommu.as_mut(), &mut self.sink);
        }
        if self.stream.is_some() && !self.sink.kept.is_empty() {
            self.pass_on(header)?;
        }
        Ok(())
    }

    /// A kept finding with its names.
    fn resolve(&self, r: &Raw, header: &TraceHeader) -> Finding {
        let device = match r.device {
            Some(d) => header
                .devices
                .get(usize::from(d))
                .cloned()
                .unwrap_or_else(|| format!("device #{d}")),
            None => IOMMU_DEVICE.to_owned(),
        };
        Finding {
            kind: r.kind,
            linux_check: r.kind.linux_check().to_owned(),
            device,
            at: self.names.site(&r.at),
            map: r
                .map
                .as_ref()
                .filter(|m| m.line > 0)
                .map(|m| self.names.site(m)),
            detail: r.detail.clone(),
        }
    }

    /// Passes the kept findings to the stream.
    fn pass_on(&mut self, header: &TraceHeader) -> Result<(), CheckError> {
        let kept = std::mem::take(&mut self.sink.kept);
        for r in &kept {
            let f = self.resolve(r, header);
            if let Some(out) = self.stream.as_mut() {
                out(&f).map_err(CheckError::Write)?;
            }
        }
        // The buffer is reused: no allocation per finding once it has room.
        self.sink.kept = kept;
        self.sink.kept.clear();
        Ok(())
    }

    fn finish(mut self, name: &str, header: &TraceHeader) -> Result<CheckReport, CheckError> {
        let mut notes = Vec::new();
        self.dma.finish(&mut self.sink, self.leaks);
        let (iommu_checked, counts) = match self.iommu.as_mut() {
            Some(io) => (io.finish(header, &mut self.sink, &mut notes), io.counts()),
            None => {
                notes.push("IOMMU layer not checked (turned off)".to_owned());
                (false, iommu::IommuCounts::default())
            }
        };
        let mut findings = Vec::new();
        if self.stream.is_some() {
            self.pass_on(header)?;
        } else {
            findings = self
                .sink
                .kept
                .iter()
                .map(|r| self.resolve(r, header))
                .collect();
            // Findings surface in stream order, IOMMU ones up to a window late; leaks (at
            // their oldest map) come last.
            findings.sort_by_key(|f: &Finding| (f.kind == FindingKind::Leak, f.at.line));
        }
        let by_kind: BTreeMap<FindingKind, u64> = FindingKind::ALL
            .iter()
            .zip(self.sink.counts)
            .filter(|(_, n)| *n > 0)
            .map(|(&k, n)| (k, n))
            .collect();
        let findings_total: u64 = by_kind.values().sum();
        Ok(CheckReport {
            trace: name.to_owned(),
            position: self.position,
            events: self.events,
            findings_total,
            by_kind,
            findings_not_listed: findings_total - self.sink.listed as u64,
            findings,
            outstanding_at_end: self.dma.live_at_end(),
            max_live: self.dma.max_live(),
            mapped_before_tracing: self.dma.before_tracing(),
            iommu_checked,
            iommu_pairing: if counts.by_context {
                Pairing::Context
            } else {
                Pairing::Cpu
            },
            identity_maps: counts.identity_maps,
            identity_bytes: counts.identity_bytes,
            cut_at_start: counts.cut_at_start,
            cut_at_end: counts.cut_at_end,
            notes,
        })
    }
}

#[cfg(test)]
mod tests;
