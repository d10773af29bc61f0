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

use super::ftrace::{FtraceReader, IOMMU_DEVICE};
use super::{Event, EventKind, EventSource, TraceError, TraceFormat, TraceHeader};
use crate::hash::FxHashMap;

/// Unmaps remembered per generation (a double unmap is told from a never-mapped address
/// while its first unmap is remembered: at least the last this many unmaps).
pub const UNMAPPED_MEMORY: usize = 1 << 15;

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
}

impl Default for CheckOptions {
    fn default() -> Self {
        CheckOptions {
            max_findings: DEFAULT_MAX_FINDINGS,
            dma_masks: Vec::new(),
            iommu: true,
        }
    }
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
    /// DMA-layer mappings live at the end.
    pub live_at_end: u64,
    /// The most DMA-layer mappings live at once.
    pub max_live: u64,
    /// Whether the IOMMU layer was checked (the trace has `iommu:` events and at least one
    /// device's maps were backed by them).
    pub iommu_checked: bool,
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
            "live mappings at end {}, most live {}; IOMMU layer {}\n",
            self.live_at_end,
            self.max_live,
            if self.iommu_checked {
                "checked"
            } else {
                "not checked"
            }
        ));
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

/// Checks the trace at `path` (any format `trace::open` reads; ftrace text gives lines,
/// tasks and `attrs=`).
pub fn check(
    path: &Path,
    format: TraceFormat,
    lenient: bool,
    options: &CheckOptions,
) -> Result<CheckReport, TraceError> {
    let format = super::resolve(path, format)?;
    let name = path.display().to_string();
    if format == TraceFormat::Ftrace {
        let mut r = super::open_ftrace(path, lenient)?;
        check_ftrace(&mut r, &name, options)
    } else {
        let mut src = super::open(path, format, lenient)?;
        check_source(&mut *src, &name, options)
    }
}

/// Checks ftrace text being read by `r` (`name` names it in the report).
pub fn check_ftrace<R: BufRead>(
    r: &mut FtraceReader<R>,
    name: &str,
    options: &CheckOptions,
) -> Result<CheckReport, TraceError> {
    let mut c = Checker::new(options, Position::Line);
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
            };
        }
        c.event(&e, &ctx, r.header());
    }
    Ok(c.finish(name, r.header()))
}

/// Checks any event source (positions are record numbers).
pub fn check_source(
    src: &mut dyn EventSource,
    name: &str,
    options: &CheckOptions,
) -> Result<CheckReport, TraceError> {
    let mut c = Checker::new(options, Position::Record);
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
            };
            c.event(e, &ctx, src.header());
        }
    }
    Ok(c.finish(name, src.header()))
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

/// Where findings go: all counted, the first `max` kept.
#[derive(Debug)]
pub(super) struct Sink {
    kept: Vec<Raw>,
    counts: [u64; FindingKind::ALL.len()],
    max: usize,
}

impl Sink {
    fn new(max: usize) -> Self {
        Sink {
            kept: Vec::new(),
            counts: [0; FindingKind::ALL.len()],
            max,
        }
    }

    pub(super) fn emit(&mut self, raw: Raw) {
        self.counts[raw.kind as usize] += 1;
        if self.kept.len() < self.max {
            self.kept.push(raw);
        }
    }

    /// Counts `n` findings of `kind` that are not listed.
    pub(super) fn count_only(&mut self, kind: FindingKind, n: u64) {
        self.counts[kind as usize] += n;
    }
}

/// The streaming checker.
#[derive(Debug)]
struct Checker {
    dma: dma::DmaState,
    iommu: Option<iommu::IommuState>,
    sink: Sink,
    names: Names,
    position: Position,
    events: u64,
    /// Whether each device index is the `iommu` pseudo-device.
    is_iommu: Vec<bool>,
    /// Masks from the options and the trace, by name; resolved per device into `masks`.
    option_masks: Vec<(String, u64)>,
    trace_masks: Vec<(String, u64)>,
    masks: Vec<Option<u64>>,
}

impl Checker {
    fn new(options: &CheckOptions, position: Position) -> Self {
        Checker {
            dma: dma::DmaState::default(),
            iommu: options.iommu.then(iommu::IommuState::default),
            sink: Sink::new(options.max_findings),
            names: Names::default(),
            position,
            events: 0,
            is_iommu: Vec::new(),
            option_masks: options.dma_masks.clone(),
            trace_masks: Vec::new(),
            masks: Vec::new(),
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

    fn event(&mut self, e: &Event, ctx: &Ctx, header: &TraceHeader) {
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
        };
        if self.is_iommu.get(dev).copied().unwrap_or(false) {
            if let Some(io) = &mut self.iommu {
                io.page_table_event(e, at, &mut self.sink);
            }
            return;
        }
        if let Some(io) = &mut self.iommu {
            io.tick(e.cpu, &mut self.sink);
        }
        let mask = self.masks.get(dev).copied().flatten();
        self.dma
            .event(e, ctx, at, mask, self.iommu.as_mut(), &mut self.sink);
    }

    fn finish(mut self, name: &str, header: &TraceHeader) -> CheckReport {
        let mut notes = Vec::new();
        self.dma.finish(&mut self.sink);
        let iommu_checked = match self.iommu.take() {
            Some(io) => io.finish(header, &mut self.sink, &mut notes),
            None => {
                notes.push("IOMMU layer not checked (turned off)".to_owned());
                false
            }
        };
        let device_name = |d: Option<u16>| match d {
            Some(d) => header
                .devices
                .get(usize::from(d))
                .cloned()
                .unwrap_or_else(|| format!("device #{d}")),
            None => IOMMU_DEVICE.to_owned(),
        };
        let mut findings: Vec<Finding> = self
            .sink
            .kept
            .iter()
            .map(|r| Finding {
                kind: r.kind,
                linux_check: r.kind.linux_check().to_owned(),
                device: device_name(r.device),
                at: self.names.site(&r.at),
                map: r.map.as_ref().map(|m| self.names.site(m)),
                detail: r.detail.clone(),
            })
            .collect();
        // Findings surface in stream order, IOMMU ones up to a window late; leaks (at their
        // oldest map) come last.
        findings.sort_by_key(|f| (f.kind == FindingKind::Leak, f.at.line));
        let by_kind: BTreeMap<FindingKind, u64> = FindingKind::ALL
            .iter()
            .zip(self.sink.counts)
            .filter(|(_, n)| *n > 0)
            .map(|(&k, n)| (k, n))
            .collect();
        let findings_total: u64 = by_kind.values().sum();
        CheckReport {
            trace: name.to_owned(),
            position: self.position,
            events: self.events,
            findings_total,
            by_kind,
            findings_not_listed: findings_total - findings.len() as u64,
            findings,
            live_at_end: self.dma.live_at_end(),
            max_live: self.dma.max_live(),
            iommu_checked,
            notes,
        }
    }
}

#[cfg(test)]
mod tests;
