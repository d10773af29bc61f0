//! Replaying a trace: [`TraceWorkload`] turns a stream of trace [`Event`]s into the
//! [`DmaOp`]s every configuration runs, so a user's recorded trace drives the same runner as a
//! built-in workload.
//!
//! The trace's **physical buffers and timing are kept**; its DMA addresses only identify
//! mappings (an unmap finds its map by device and DMA address), because the configuration
//! under test allocates its own IOVAs. Scatter-gather unmaps are matched by device and the
//! first segment's physical address, since Linux's `dma_unmap_sg` event carries no DMA
//! addresses.
//!
//! Linux traces may hold both the DMA-API events (`dma:*`) and the IOMMU core's `iommu:map`
//! and `iommu:unmap` for the same mappings. The importer files the latter under a device named
//! `iommu`; once the events read so far — a batch of up to 4096 ahead of the one being
//! replayed — show any other device, `iommu` events are skipped (and counted), so nothing is
//! mapped twice. (Linux prints a call's `iommu:map` lines before its `dma:` line, so the first
//! lines of a trace are `iommu:` ones.) A trace of `iommu:` events alone replays from them.
//!
//! Time: an `Tick` op is emitted whenever the trace's clock has advanced by at least
//! [`TICK_NS`], so flush timers fire at the trace's pace.

use std::collections::hash_map::Entry;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::{DmaOp, OpSink, Segment, Workload, WorkloadError};
use iommulab_base::addr::{Access, CpuId, Hpa};
use iommulab_base::hash::AddrHashMap;
use iommulab_trace::{Event, EventColumns, EventKind, EventSource, TraceError, TraceHeader};

/// The trace clock advances the runner's clock in steps of at least this many ns (10 µs:
/// fine against the 10 ms flush timers, coarse enough to cost nothing).
pub const TICK_NS: u64 = 10_000;

/// The device name the ftrace importer gives `iommu:` events, which carry no device.
pub use iommulab_trace::ftrace::IOMMU_DEVICE;

/// The replay tables, keyed by (device, address) with the fast address hasher of
/// [`iommulab_base::hash`] (the std SipHash costs more than the rest of a map/unmap; plain FxHash
/// starts every page-aligned address of a device at the same bucket).
type AddrMap<V> = AddrHashMap<(u16, u64), V>;

/// What the replay did with the trace's events.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplayReport {
    /// Events read.
    pub events: u64,
    /// Maps (single, sg and coherent allocations) replayed.
    pub maps: u64,
    /// Unmaps (single, sg and coherent frees) replayed, with the `remapped_live` ones the
    /// replay implied (not in the trace).
    pub unmaps: u64,
    /// Device accesses replayed.
    pub accesses: u64,
    /// Unmaps whose map was not in the trace (it began before the capture).
    pub unmatched_unmaps: u64,
    /// Device accesses to no live mapping of the trace.
    pub unmatched_accesses: u64,
    /// Maps of an address the trace still had mapped: the old one is unmapped first.
    pub remapped_live: u64,
    /// Maps without a DMA address or a physical address to replay.
    pub incomplete: u64,
    /// `iommu:` events skipped because the trace has DMA-API events.
    pub skipped_iommu_events: u64,
    /// `dma_sync_*` events (no mapping change).
    pub syncs: u64,
    /// Events of other devices than the one [`TraceWorkload::only_device`] keeps.
    #[serde(default)]
    pub other_device_events: u64,
    /// Scatter-gather segments with no `map_sg`/`unmap_sg` before them.
    pub stray_segments: u64,
    /// Events earlier than one before them (out of order, e.g. merged per-CPU buffers):
    /// replayed in file order; the trace's clock gives no tick until it passes the latest.
    #[serde(default)]
    pub reordered_times: u64,
}

/// A trace as a [`Workload`].
#[derive(Debug)]
pub struct TraceWorkload<S> {
    src: S,
    /// Events read ahead from `src` in one [`EventSource::read_columns`] (field by field:
    /// an event's fields are loaded as the translation reads them), and the next one.
    /// Reading ahead also lets the device scan see the devices of the whole batch before its
    /// first event is replayed (`iommu:map` lines precede a device's first `dma:` line).
    batch: EventColumns,
    next: usize,
    /// Single mappings by (device, trace DMA address) → slot.
    singles: AddrMap<u32>,
    /// Scatter-gather mappings by (device, first segment's physical address) → slot.
    sgs: AddrMap<u32>,
    slots: FreeSlots,
    sg: Vec<Segment>,
    /// The ops of the last event [`Workload::next_op`] translated (a tick, an unmap and a
    /// map can come from one event) not yet returned, from `ops[pos]` on; reused, so it
    /// never allocates in steady state.
    ops: Vec<DmaOp>,
    pos: usize,
    last_tick_ns: u64,
    /// The latest event time seen, for `reordered_times`.
    latest_ns: u64,
    iommu_device: Option<u16>,
    other_devices: bool,
    /// Set by [`TraceWorkload::mappings_only`]: device accesses are neither looked up nor
    /// returned, and the trace's clock gives no ticks.
    mappings_only: bool,
    /// Set by [`TraceWorkload::fed`]: the source's end is only the end of what was fed so
    /// far, so a run that made no op yet is not refused there.
    fed: bool,
    /// Length of the device table at the last scan (text and native readers grow it).
    known_devices: usize,
    /// The header may have gained devices since `known_devices` was taken (a batch was read
    /// or the source lent out): checked once per batch, not per event.
    devices_may_change: bool,
    /// The one device replayed ([`TraceWorkload::only_device`]): its name, and its index once
    /// the device table holds it.
    only: Option<(String, Option<u16>)>,
    report: ReplayReport,
}

impl<S: EventSource> TraceWorkload<S> {
    /// Replays `src`.
    pub fn new(src: S) -> Self {
        let mut w = Self {
            src,
            batch: EventColumns::default(),
            next: 0,
            singles: AddrMap::default(),
            sgs: AddrMap::default(),
            slots: FreeSlots::default(),
            sg: Vec::new(),
            ops: Vec::new(),
            pos: 0,
            last_tick_ns: 0,
            latest_ns: 0,
            iommu_device: None,
            other_devices: false,
            mappings_only: false,
            fed: false,
            known_devices: 0,
            devices_may_change: false,
            only: None,
            report: ReplayReport::default(),
        };
        w.scan_devices();
        w
    }

    /// For a consumer of the mappings alone (the map cache's page references: `mrc`):
    /// device accesses are read and counted as events but neither looked up nor returned,
    /// so [`ReplayReport::accesses`] and [`ReplayReport::unmatched_accesses`] stay 0 (a
    /// third of a generated trace's events cost one table look-up less each), and the
    /// trace's clock gives no [`DmaOp::Tick`]s (no timer runs on the other side).
    #[must_use]
    pub fn mappings_only(mut self) -> Self {
        self.mappings_only = true;
        self
    }

    /// A source filled between calls (the `.oracleGeneral` export feeds the events it is
    /// given): its end is not the trace's, so running dry before any op is not an error.
    #[must_use]
    pub fn fed(mut self) -> Self {
        self.fed = true;
        self
    }

    /// Replays only the events of the device named `device` (as the trace names it, e.g. a
    /// PCI address `0000:01:00.0`); the others are read and counted
    /// ([`ReplayReport::other_device_events`]). The trace's clock still advances with every
    /// event, so flush timers fire as they did. A name the trace never shows is an error at
    /// its end, listing the devices it holds.
    #[must_use]
    pub fn only_device(mut self, device: &str) -> Self {
        self.only = Some((device.to_string(), None));
        self.scan_devices();
        self
    }

    /// What happened so far.
    pub fn report(&self) -> ReplayReport {
        self.report
    }

    /// The source, e.g. to feed events to one that is written to while it is replayed (the
    /// `.oracleGeneral` export). The device table may grow; events already read are not
    /// read again.
    pub fn source_mut(&mut self) -> &mut S {
        self.devices_may_change = true;
        &mut self.src
    }

    /// The CPU count the trace gives ([`EventSource::cpu_count`]), reading its first batch
    /// of events if none was read yet (the header comes before them); `None` when it gives
    /// none.
    pub fn trace_cpus(&mut self) -> Result<Option<u32>, TraceError> {
        if self.batch.is_empty() && self.next == 0 {
            self.src.read_columns(&mut self.batch)?;
            self.scan_devices();
        }
        Ok(self.src.cpu_count())
    }

    /// The trace's header (devices).
    pub fn header(&self) -> &TraceHeader {
        self.src.header()
    }

    /// Notes which device index is `iommu` and whether any other device exists (text readers
    /// add devices while reading, so this runs again when an unknown index shows up).
    fn scan_devices(&mut self) {
        let devices = &self.src.header().devices;
        self.known_devices = devices.len();
        self.iommu_device = devices
            .iter()
            .position(|d| d == IOMMU_DEVICE)
            .and_then(|i| u16::try_from(i).ok());
        self.other_devices = devices.iter().any(|d| d != IOMMU_DEVICE);
        if let Some((name, idx)) = &mut self.only {
            *idx = devices
                .iter()
                .position(|d| d == name)
                .and_then(|i| u16::try_from(i).ok());
        }
    }

    /// Counts the next event read and returns its index in the batch, reading the next
    /// batch when this one is used up; `None` at the end of the trace.
    fn advance(&mut self) -> Result<Option<usize>, TraceError> {
        if self.next == self.batch.len() {
            self.next = 0;
            if self.src.read_columns(&mut self.batch)? == 0 {
                return Ok(None);
            }
            self.devices_may_change = true;
        }
        let i = self.next;
        self.next += 1;
        self.report.events += 1;
        Ok(Some(i))
    }

    /// At the end of the trace: a trace that made no DMA-API op is refused, since a run of
    /// it would time no I/O (and report zeros as if they were results).
    fn at_end(&self) -> Result<(), TraceError> {
        let r = &self.report;
        if let Some((name, None)) = &self.only {
            let path = self
                .src
                .source_path()
                .map_or_else(|| "<trace>".into(), Path::to_path_buf);
            let devices: Vec<&str> = self
                .src
                .header()
                .devices
                .iter()
                .map(String::as_str)
                .filter(|d| *d != IOMMU_DEVICE)
                .collect();
            return Err(TraceError::Unsupported {
                path,
                what: format!(
                    "no device {name:?} in the trace; its devices: {}",
                    if devices.is_empty() {
                        "none".to_string()
                    } else {
                        devices.join(", ")
                    }
                ),
            });
        }
        if !self.fed && r.maps + r.unmaps + r.accesses == 0 {
            return Err(TraceError::NoDmaEvents {
                path: self
                    .src
                    .source_path()
                    .map_or_else(|| "<trace>".into(), Path::to_path_buf),
                events: r.events,
            });
        }
        Ok(())
    }

    fn next_raw(&mut self) -> Result<Option<Event>, TraceError> {
        Ok(self.advance()?.map(|i| self.batch.get(i)))
    }

    /// Reads the `nents` segments after a `MapSg`/`UnmapSg` of `total` bytes into `self.sg`.
    /// When the IOMMU merged segments, Linux's event lists every physical segment but only
    /// the merged lengths (the importer leaves the rest at 0): the bytes not accounted for are
    /// spread evenly over the segments without a length.
    fn read_segments(&mut self, nents: u32, total: u64) -> Result<(), TraceError> {
        self.sg.clear();
        for _ in 0..nents {
            let Some(seg) = self.next_raw()? else {
                break;
            };
            if seg.kind != EventKind::SgSeg {
                // A record that should have been a segment: count it and stop the list.
                self.report.stray_segments += 1;
                break;
            }
            if let Some(phys) = seg.phys.or(seg.dma) {
                self.sg.push(Segment {
                    phys: Hpa::new(phys),
                    len: seg.len,
                });
            }
        }
        let known: u64 = self.sg.iter().map(|s| s.len).sum();
        let unknown = self.sg.iter().filter(|s| s.len == 0).count() as u64;
        if let Some(share) = total.saturating_sub(known).checked_div(unknown) {
            let share = share.max(1);
            for s in self.sg.iter_mut().filter(|s| s.len == 0) {
                s.len = share;
            }
        }
        Ok(())
    }

    /// Counts a map under `key` in `table` and returns its slot, with one probe of the table:
    /// a free slot for a new key. A key still live (the trace mapped it again: its unmap fell
    /// outside the capture) has its old mapping closed first, by an unmap queued before the
    /// map, which then takes the slot that unmap frees.
    #[inline(always)]
    fn open<K: OpSink<Hpa>>(
        &mut self,
        table: Table,
        key: (u16, u64),
        cpu: CpuId,
        out: &mut K,
    ) -> u32 {
        self.report.maps += 1;
        let table = match table {
            Table::Singles => &mut self.singles,
            Table::Sgs => &mut self.sgs,
        };
        match table.entry(key) {
            Entry::Occupied(old) => {
                let slot = *old.get();
                self.report.remapped_live += 1;
                self.report.unmaps += 1;
                out.op(DmaOp::Unmap { slot, cpu }, &[]);
                slot
            }
            Entry::Vacant(v) => *v.insert(self.slots.take()),
        }
    }

    /// Turns event `i` of the batch into the ops it makes, handed to `out`: none, an op, or
    /// an unmap its map implies and the map.
    #[inline(always)]
    fn translate<K: OpSink<Hpa>>(&mut self, i: usize, out: &mut K) -> Result<(), TraceError> {
        let e = self.batch.get(i);
        if self.passed_over(&e)? {
            return Ok(());
        }
        let cpu = CpuId::new(e.cpu);
        let op = match e.kind {
            EventKind::Map | EventKind::Alloc => {
                let (Some(dma), Some(phys)) = (e.dma, e.phys.or(e.dma)) else {
                    self.report.incomplete += 1;
                    return Ok(());
                };
                let slot = self.open(Table::Singles, (e.device, dma), cpu, out);
                DmaOp::Map {
                    slot,
                    cpu,
                    device: e.device,
                    phys: Hpa::new(phys),
                    len: e.len.max(1),
                    dir: e.dir.dma(),
                    // S1.11: `dma_alloc_coherent` memory is allocated for DMA.
                    dma_alloc: e.kind == EventKind::Alloc,
                }
            }
            EventKind::Unmap | EventKind::Free => {
                let slot = e
                    .dma
                    .and_then(|dma| close(&mut self.singles, (e.device, dma)));
                let Some(slot) = slot else {
                    self.report.unmatched_unmaps += 1;
                    return Ok(());
                };
                self.slots.release(slot);
                self.report.unmaps += 1;
                DmaOp::Unmap { slot, cpu }
            }
            EventKind::MapSg => {
                self.read_segments(e.nents, e.len)?;
                let Some(first) = self.sg.first().map(|s| s.phys.get()) else {
                    self.report.incomplete += 1;
                    return Ok(());
                };
                let slot = self.open(Table::Sgs, (e.device, first), cpu, out);
                DmaOp::MapSg {
                    slot,
                    cpu,
                    device: e.device,
                    dir: e.dir.dma(),
                }
            }
            EventKind::UnmapSg => {
                self.read_segments(e.nents, e.len)?;
                let slot = self
                    .sg
                    .first()
                    .and_then(|s| close(&mut self.sgs, (e.device, s.phys.get())));
                let Some(slot) = slot else {
                    self.report.unmatched_unmaps += 1;
                    return Ok(());
                };
                self.slots.release(slot);
                self.report.unmaps += 1;
                DmaOp::Unmap { slot, cpu }
            }
            EventKind::DeviceRead | EventKind::DeviceWrite if self.mappings_only => {
                return Ok(());
            }
            EventKind::DeviceRead | EventKind::DeviceWrite => {
                let slot = e
                    .dma
                    .and_then(|dma| self.singles.get(&(e.device, dma)).copied());
                let Some(slot) = slot else {
                    self.report.unmatched_accesses += 1;
                    return Ok(());
                };
                self.report.accesses += 1;
                let access = if e.kind == EventKind::DeviceRead {
                    Access::Read
                } else {
                    Access::Write
                };
                DmaOp::Access { slot, access }
            }
            EventKind::SyncForCpu | EventKind::SyncForDevice => {
                self.report.syncs += 1;
                return Ok(());
            }
            EventKind::SgSeg => {
                self.report.stray_segments += 1;
                return Ok(());
            }
        };
        // A `MapSg`'s segments are in `self.sg`.
        out.op(op, &self.sg);
        Ok(())
    }

    /// Whether event `e` is passed over by the device filters, counted: another device than
    /// [`only_device`](Self::only_device)'s, or an `iommu` event the DMA-API events repeat
    /// (a scatter-gather list's segments are read past with it).
    #[inline(always)]
    fn passed_over(&mut self, e: &Event) -> Result<bool, TraceError> {
        if self.devices_may_change {
            self.devices_may_change = false;
            if self.src.header().devices.len() != self.known_devices {
                self.scan_devices();
            }
        }
        if let Some((_, only)) = &self.only
            && *only != Some(e.device)
            && e.kind != EventKind::SgSeg
        {
            self.report.other_device_events += 1;
            if matches!(e.kind, EventKind::MapSg | EventKind::UnmapSg) {
                self.read_segments(e.nents, e.len)?;
            }
            return Ok(true);
        }
        // A `free_iova_fast` kprobe on the `iommu` device is the allocator's free, not an
        // unmap of the page tables: the unmap was its own record.
        if Some(e.device) == self.iommu_device && (self.other_devices || e.kind == EventKind::Free)
        {
            self.report.skipped_iommu_events += 1;
            if matches!(e.kind, EventKind::MapSg | EventKind::UnmapSg) {
                self.read_segments(e.nents, e.len)?;
            }
            return Ok(true);
        }
        Ok(false)
    }

    /// The page-request path (`iommulab mrc`'s page sequence, S1.9): calls `f(phys, len)`
    /// for each buffer a map op of [`Workload::for_each_op`] would carry — a map's or an
    /// allocation's buffer, each segment of a scatter-gather list — in trace order, with the
    /// same device filters, segment lengths and refusals, but without the tables of live
    /// mappings: unmaps, accesses and syncs are read past, so [`ReplayReport::unmaps`],
    /// `unmatched_unmaps` and `remapped_live` stay 0 (the tables' look-ups were the largest
    /// part of reading a trace for a curve). Call it on a fresh replay.
    ///
    /// # Errors
    /// As [`Workload::for_each_op`]: a trace that cannot be read, or one without a map.
    pub fn for_each_map_buffer(
        &mut self,
        mut f: impl FnMut(u64, u64),
    ) -> Result<(), WorkloadError> {
        while let Some(i) = self.advance()? {
            let e = self.batch.get(i);
            if self.passed_over(&e)? {
                continue;
            }
            match e.kind {
                EventKind::Map | EventKind::Alloc => match (e.dma, e.phys.or(e.dma)) {
                    (Some(_), Some(phys)) => {
                        self.report.maps += 1;
                        f(phys, e.len.max(1));
                    }
                    _ => self.report.incomplete += 1,
                },
                EventKind::MapSg => {
                    self.read_segments(e.nents, e.len)?;
                    if self.sg.is_empty() {
                        self.report.incomplete += 1;
                    } else {
                        self.report.maps += 1;
                        self.sg.iter().for_each(|s| f(s.phys.get(), s.len));
                    }
                }
                EventKind::UnmapSg => self.read_segments(e.nents, e.len)?,
                EventKind::SyncForCpu | EventKind::SyncForDevice => self.report.syncs += 1,
                EventKind::SgSeg => self.report.stray_segments += 1,
                _ => {}
            }
        }
        self.at_end()?;
        Ok(())
    }

    /// Event `i`'s ops: a tick first when the trace's clock has moved on by [`TICK_NS`],
    /// then what [`translate`](Self::translate) makes of it.
    #[inline(always)]
    fn step<K: OpSink<Hpa>>(&mut self, i: usize, out: &mut K) -> Result<(), TraceError> {
        if !self.mappings_only {
            let time_ns = self.batch.time_ns(i);
            if time_ns < self.latest_ns {
                self.report.reordered_times += 1;
            } else {
                self.latest_ns = time_ns;
            }
            if time_ns >= self.last_tick_ns.saturating_add(TICK_NS) {
                self.last_tick_ns = time_ns;
                out.op(DmaOp::Tick { now_ns: time_ns }, &[]);
            }
        }
        self.translate(i, out)
    }
}

/// The slots ops name their mappings by: a freed one is taken again first (last freed
/// first), else a new one.
#[derive(Debug, Default)]
struct FreeSlots {
    free: Vec<u32>,
    next: u32,
}

impl FreeSlots {
    #[inline]
    fn take(&mut self) -> u32 {
        self.free.pop().unwrap_or_else(|| {
            let s = self.next;
            self.next += 1;
            s
        })
    }

    #[inline]
    fn release(&mut self, slot: u32) {
        self.free.push(slot);
    }
}

/// Takes `key`'s slot out of `table`. Through `entry`, which inlines into the translation
/// (`remove` stayed a call, a third of an unmap's cost).
#[inline(always)]
fn close(table: &mut AddrMap<u32>, key: (u16, u64)) -> Option<u32> {
    match table.entry(key) {
        Entry::Occupied(o) => Some(o.remove()),
        Entry::Vacant(_) => None,
    }
}

/// Which table a map goes into.
#[derive(Clone, Copy)]
enum Table {
    Singles,
    Sgs,
}

impl<S: EventSource> Workload for TraceWorkload<S> {
    type Phys = Hpa;
    fn next_op(&mut self) -> Result<Option<DmaOp>, WorkloadError> {
        // Events that make no op are passed over; an error keeps the ops its event made
        // before it (a tick) for the next call.
        while self.pos == self.ops.len() {
            self.ops.clear();
            self.pos = 0;
            let Some(i) = self.advance()? else {
                self.at_end()?;
                return Ok(None);
            };
            let mut ops = std::mem::take(&mut self.ops);
            let made = self.step(i, &mut ops);
            self.ops = ops;
            made?;
        }
        let op = self.ops[self.pos];
        self.pos += 1;
        Ok(Some(op))
    }

    fn for_each_op<K: OpSink<Hpa>>(&mut self, sink: &mut K) -> Result<(), WorkloadError> {
        // Ops `next_op` translated but did not return yet go first.
        while let Some(&op) = self.ops.get(self.pos) {
            self.pos += 1;
            sink.op(op, &self.sg);
        }
        while !sink.stopped() {
            let Some(i) = self.advance()? else {
                return Ok(self.at_end()?);
            };
            self.step(i, sink)?;
        }
        Ok(())
    }

    fn sg_segments(&self) -> &[Segment] {
        &self.sg
    }

    fn slots(&self) -> usize {
        64
    }

    fn devices(&self) -> usize {
        self.src.header().devices.len().max(1)
    }

    fn total_ios(&self) -> Option<u64> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use iommulab_trace::{MemorySource, TraceDir};

    fn ev(
        kind: EventKind,
        t: u64,
        device: u16,
        dma: Option<u64>,
        phys: Option<u64>,
        len: u64,
        nents: u32,
    ) -> Event {
        Event {
            time_ns: t,
            cpu: 0,
            device,
            kind,
            dir: TraceDir::ToDevice,
            dma,
            phys,
            len,
            nents,
        }
    }

    fn ops(devices: &[&str], events: Vec<Event>) -> (Vec<DmaOp>, ReplayReport) {
        let header = TraceHeader {
            devices: devices.iter().map(|d| d.to_string()).collect(),
            source: "test".into(),
        };
        let mut w = TraceWorkload::new(MemorySource::new(header, events));
        let mut out = Vec::new();
        while let Some(op) = w.next_op().unwrap() {
            out.push(op);
        }
        (out, w.report())
    }

    /// The page-request path gives the buffers of exactly the map ops the full replay makes
    /// (maps, allocations, scatter-gather segments with merged lengths spread, `iommu`
    /// events skipped once another device shows, maps without an address refused), and the
    /// same counts of what it passes over.
    #[test]
    fn the_page_request_path_gives_the_buffers_of_the_map_ops() {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut rnd = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut events = Vec::new();
        let kinds = [
            EventKind::Map,
            EventKind::Alloc,
            EventKind::Unmap,
            EventKind::Free,
            EventKind::MapSg,
            EventKind::UnmapSg,
            EventKind::SyncForCpu,
            EventKind::DeviceRead,
            EventKind::SgSeg,
        ];
        for t in 0..3000u64 {
            let r = rnd();
            let kind = kinds[usize::try_from(r % kinds.len() as u64).unwrap()];
            // Device 0 is `iommu`, shown first; device 1 is a NIC.
            let device = u16::from(r % 5 == 0);
            let addr = (r >> 8) % 64 * 0x1000 + (r >> 20) % 3 * 0x800;
            let dma = (r % 11 != 0).then_some(0xfff0_0000 + addr);
            let phys = (r % 7 != 0).then_some(0x4000_0000 + addr);
            let len = (r >> 30) % 9000;
            let nents = if matches!(kind, EventKind::MapSg | EventKind::UnmapSg) {
                u32::try_from(1 + (r >> 40) % 3).unwrap()
            } else {
                0
            };
            events.push(ev(kind, t, device, dma, phys, len, nents));
            for s in 0..nents {
                let seg_len = if (r >> (44 + s)) & 1 == 0 { 0 } else { 4096 };
                events.push(ev(EventKind::SgSeg, t, device, dma, phys, seg_len, 0));
            }
        }
        for devices in [&["iommu", "nic"][..], &["iommu"]] {
            let header = TraceHeader {
                devices: devices.iter().map(|d| d.to_string()).collect(),
                source: "test".into(),
            };
            let events: Vec<Event> = events
                .iter()
                .map(|&e| Event {
                    device: e.device.min(u16::try_from(devices.len() - 1).unwrap()),
                    ..e
                })
                .collect();
            let open = || TraceWorkload::new(MemorySource::new(header.clone(), events.clone()));
            /// The buffers of the map ops.
            struct Buffers(Vec<(u64, u64)>);
            impl OpSink<Hpa> for Buffers {
                fn op(&mut self, op: DmaOp, sg: &[Segment]) {
                    match op {
                        DmaOp::Map { phys, len, .. } => self.0.push((phys.get(), len)),
                        DmaOp::MapSg { .. } => {
                            self.0.extend(sg.iter().map(|s| (s.phys.get(), s.len)));
                        }
                        _ => {}
                    }
                }
            }
            let mut full = open().mappings_only();
            let mut sink = Buffers(Vec::new());
            full.for_each_op(&mut sink).unwrap();
            let want = sink.0;
            let mut maps = open().mappings_only();
            let mut got = Vec::new();
            maps.for_each_map_buffer(|phys, len| got.push((phys, len)))
                .unwrap();
            assert!(want.len() > 200, "{devices:?}: {}", want.len());
            assert_eq!(got, want, "{devices:?}");
            let (a, b) = (full.report(), maps.report());
            assert_eq!(
                (a.events, a.maps, a.incomplete, a.skipped_iommu_events),
                (b.events, b.maps, b.incomplete, b.skipped_iommu_events),
                "{devices:?}"
            );
            assert_eq!((a.syncs, a.stray_segments), (b.syncs, b.stray_segments));
        }
    }

    /// A trace that makes no op (empty, or only an unmap of nothing mapped) is refused at its
    /// end by `next_op` and `for_each_op` alike, naming what was read.
    #[test]
    fn a_trace_that_makes_no_op_is_refused_at_its_end() {
        let header = TraceHeader {
            devices: vec!["nic".into()],
            source: "test".into(),
        };
        let stray = ev(EventKind::Unmap, 1, 0, Some(0x1000), None, 64, 0);
        for events in [vec![], vec![stray]] {
            let n = events.len() as u64;
            let open = || TraceWorkload::new(MemorySource::new(header.clone(), events.clone()));
            let by_next = open().next_op();
            let by_each = open().for_each_op(&mut Vec::<DmaOp>::new());
            for r in [by_next.map(drop), by_each] {
                match r {
                    Err(WorkloadError::Trace(e)) => match *e {
                        TraceError::NoDmaEvents { events, .. } => assert_eq!(events, n),
                        other => panic!("{other:?}"),
                    },
                    other => panic!("{other:?}"),
                }
            }
        }
    }

    /// An unmap finds its map by device and DMA address; the trace's physical address is kept.
    #[test]
    fn unmap_matches_its_map_and_keeps_the_physical_buffer() {
        let (o, r) = ops(
            &["0000:01:00.0"],
            vec![
                ev(
                    EventKind::Map,
                    0,
                    0,
                    Some(0xfff0_0000),
                    Some(0x1234_5000),
                    1514,
                    0,
                ),
                ev(EventKind::Unmap, 100, 0, Some(0xfff0_0000), None, 1514, 0),
            ],
        );
        assert_eq!(o.len(), 2);
        assert!(
            matches!(o[0], DmaOp::Map { slot: 0, phys, len: 1514, .. } if phys == Hpa::new(0x1234_5000))
        );
        assert!(matches!(o[1], DmaOp::Unmap { slot: 0, .. }));
        assert_eq!((r.maps, r.unmaps, r.unmatched_unmaps), (1, 1, 0));
    }

    /// `dma_unmap_sg` has no DMA addresses: it is matched by its first physical address.
    #[test]
    fn unmap_sg_matches_by_first_physical_address() {
        let (o, r) = ops(
            &["nvme0"],
            vec![
                ev(EventKind::MapSg, 0, 0, None, None, 0, 2),
                ev(
                    EventKind::SgSeg,
                    0,
                    0,
                    Some(0xf000_0000),
                    Some(0x10_0000),
                    4096,
                    0,
                ),
                ev(
                    EventKind::SgSeg,
                    0,
                    0,
                    Some(0xf000_1000),
                    Some(0x20_0000),
                    4096,
                    0,
                ),
                ev(EventKind::UnmapSg, 5, 0, None, None, 0, 2),
                ev(EventKind::SgSeg, 5, 0, None, Some(0x10_0000), 4096, 0),
                ev(EventKind::SgSeg, 5, 0, None, Some(0x20_0000), 4096, 0),
            ],
        );
        assert!(matches!(o[0], DmaOp::MapSg { slot: 0, .. }));
        assert!(matches!(o[1], DmaOp::Unmap { slot: 0, .. }));
        assert_eq!((r.maps, r.unmaps, r.events), (1, 1, 6));
    }

    /// With DMA-API events present, the `iommu:` duplicates of the same mappings are skipped.
    #[test]
    fn iommu_events_are_skipped_when_dma_events_exist() {
        let (o, r) = ops(
            &[IOMMU_DEVICE, "0000:3b:00.0"],
            vec![
                ev(
                    EventKind::Map,
                    0,
                    0,
                    Some(0xffff_a000),
                    Some(0x1_f2a3_c000),
                    4096,
                    0,
                ),
                ev(
                    EventKind::Map,
                    1,
                    1,
                    Some(0xffff_a000),
                    Some(0x1_f2a3_c000),
                    1514,
                    0,
                ),
                ev(EventKind::Unmap, 2, 0, Some(0xffff_a000), None, 4096, 0),
                ev(EventKind::Unmap, 3, 1, Some(0xffff_a000), None, 1514, 0),
            ],
        );
        assert_eq!(o.len(), 2);
        assert_eq!(r.skipped_iommu_events, 2);
    }

    /// Unmaps whose maps precede the capture are counted, not replayed; a live address mapped
    /// again is closed first.
    #[test]
    fn unmatched_unmaps_and_remaps_are_counted() {
        let (o, r) = ops(
            &["d"],
            vec![
                ev(EventKind::Unmap, 0, 0, Some(0x5000), None, 64, 0),
                ev(EventKind::Map, 1, 0, Some(0x6000), Some(0x9000), 64, 0),
                ev(EventKind::Map, 2, 0, Some(0x6000), Some(0xa000), 64, 0),
            ],
        );
        assert_eq!(r.unmatched_unmaps, 1);
        assert_eq!(r.remapped_live, 1);
        assert!(matches!(o[0], DmaOp::Map { slot: 0, .. }));
        assert!(matches!(o[1], DmaOp::Unmap { slot: 0, .. }));
        assert!(matches!(o[2], DmaOp::Map { slot: 0, .. }));
    }

    /// `mappings_only` returns the same ops but the device accesses, which it neither looks
    /// up nor counts, and the ticks.
    #[test]
    fn mappings_only_drops_accesses_and_ticks_and_keeps_the_rest() {
        let events = vec![
            ev(EventKind::Map, 0, 0, Some(0x6000), Some(0x9000), 64, 0),
            ev(EventKind::DeviceRead, 20_000, 0, Some(0x6000), None, 64, 0),
            ev(EventKind::DeviceWrite, 40_000, 0, Some(0x7000), None, 64, 0),
            ev(EventKind::Unmap, 60_000, 0, Some(0x6000), None, 64, 0),
        ];
        let header = TraceHeader {
            devices: vec!["d".into()],
            source: "test".into(),
        };
        let (all, full) = ops(&["d"], events.clone());
        let mut w = TraceWorkload::new(MemorySource::new(header, events)).mappings_only();
        let mut maps_only = Vec::new();
        while let Some(op) = w.next_op().unwrap() {
            maps_only.push(op);
        }
        let r = w.report();
        assert_eq!((full.accesses, full.unmatched_accesses), (1, 1));
        assert_eq!((r.accesses, r.unmatched_accesses), (0, 0));
        assert_eq!((r.events, r.maps, r.unmaps), (4, 1, 1));
        assert_eq!(
            all.iter()
                .filter(|o| matches!(o, DmaOp::Tick { .. }))
                .count(),
            3
        );
        let kept: Vec<_> = all
            .into_iter()
            .filter(|o| !matches!(o, DmaOp::Access { .. } | DmaOp::Tick { .. }))
            .collect();
        assert_eq!(maps_only, kept);
        assert_eq!(maps_only.len(), 2);
    }

    /// The trace clock reaches the runner as ticks, at most one per `TICK_NS`.
    #[test]
    fn time_becomes_ticks() {
        let (o, _) = ops(
            &["d"],
            vec![
                ev(EventKind::Map, 50_000, 0, Some(0x6000), Some(0x9000), 64, 0),
                ev(EventKind::Unmap, 51_000, 0, Some(0x6000), None, 64, 0),
                ev(EventKind::Map, 70_000, 0, Some(0x6000), Some(0x9000), 64, 0),
            ],
        );
        let ticks: Vec<u64> = o
            .iter()
            .filter_map(|op| match op {
                DmaOp::Tick { now_ns } => Some(*now_ns),
                _ => None,
            })
            .collect();
        assert_eq!(ticks, vec![50_000, 70_000]);
        assert!(matches!(o[0], DmaOp::Tick { .. }));
    }

    /// A trace of every kind of event, over several read batches: maps (some of a live
    /// address), scatter-gather lists, unmaps (some unmatched), accesses, syncs, `iommu:`
    /// events and a clock that ticks.
    fn mixed_trace(n: usize) -> (TraceHeader, Vec<Event>) {
        let header = TraceHeader {
            devices: vec!["iommu".into(), "0000:01:00.0".into(), "nvme0".into()],
            source: "test".into(),
        };
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut events = Vec::new();
        let mut t = 0;
        while events.len() < n {
            let r = next();
            t += r % 7_000;
            let dma = Some(0x1000 * (r >> 8 & 31));
            let phys = Some(0x10_0000 + 0x1000 * (r >> 16 & 63));
            let device = (r >> 24 & 1) as u16 + 1;
            let kind = r >> 32 & 15;
            match kind {
                0..=4 => events.push(ev(EventKind::Map, t, device, dma, phys, 1 + r % 9000, 0)),
                5..=8 => events.push(ev(EventKind::Unmap, t, device, dma, None, 64, 0)),
                9 | 10 => {
                    let nents = (r >> 40 & 3) as u32;
                    let k = if kind == 9 {
                        EventKind::MapSg
                    } else {
                        EventKind::UnmapSg
                    };
                    events.push(ev(k, t, 2, None, None, 0, nents));
                    for s in 0..u64::from(nents) {
                        let p = Some(0x40_0000 + 0x1000 * ((r >> 44) % 8 + 8 * s));
                        events.push(ev(EventKind::SgSeg, t, 2, p, p, 2048 * s, 0));
                    }
                }
                11 => events.push(ev(EventKind::DeviceRead, t, device, dma, None, 8, 0)),
                12 => events.push(ev(EventKind::SyncForCpu, t, device, dma, None, 8, 0)),
                13 => events.push(ev(EventKind::Map, t, 0, dma, phys, 4096, 0)),
                _ => events.push(ev(EventKind::Map, t, device, None, phys, 64, 0)),
            }
        }
        (header, events)
    }

    /// Each op with the segments of a `MapSg`.
    type Seen = Vec<(DmaOp, Vec<Segment>)>;

    impl OpSink<Hpa> for Seen {
        fn op(&mut self, op: DmaOp, sg: &[Segment]) {
            let sg = if matches!(op, DmaOp::MapSg { .. }) {
                sg.to_vec()
            } else {
                Vec::new()
            };
            self.push((op, sg));
        }
    }

    fn by_next_op<S: EventSource>(w: &mut TraceWorkload<S>, limit: usize, seen: &mut Seen) {
        while seen.len() < limit
            && let Some(op) = w.next_op().unwrap()
        {
            seen.op(op, w.sg_segments());
        }
    }

    /// `for_each_op` hands over what `next_op` returns, in order, with each list's segments,
    /// and the two can be mixed: ops `next_op` translated ahead are not lost.
    #[test]
    fn for_each_op_gives_what_next_op_gives() {
        let (header, events) = mixed_trace(3 * iommulab_trace::BATCH + 77);
        let open = || TraceWorkload::new(MemorySource::new(header.clone(), events.clone()));
        let mut w = open();
        let mut one_at_a_time = Seen::new();
        by_next_op(&mut w, usize::MAX, &mut one_at_a_time);
        let report = w.report();
        assert!(report.remapped_live > 0 && report.unmatched_unmaps > 0 && report.syncs > 0);
        assert!(report.skipped_iommu_events > 0 && report.incomplete > 0);
        let lists = one_at_a_time
            .iter()
            .filter(|(_, sg)| !sg.is_empty())
            .count();
        let ticks = one_at_a_time
            .iter()
            .filter(|(op, _)| matches!(op, DmaOp::Tick { .. }))
            .count();
        assert!(lists > 100 && ticks > 100, "{lists} lists, {ticks} ticks");
        for first in [0, 1, 2, 1000, 5000] {
            let mut w = open();
            let mut seen = Seen::new();
            by_next_op(&mut w, first, &mut seen);
            w.for_each_op(&mut seen).unwrap();
            assert!(seen == one_at_a_time, "after {first} ops by next_op");
            assert_eq!(w.report(), report);
            assert!(w.next_op().unwrap().is_none());
        }
    }

    /// Takes ops until it holds `limit`, then stops; the ops handed over after that (the
    /// rest of the event being translated) are counted, not kept.
    struct Stopping {
        seen: Seen,
        limit: usize,
        after_stop: usize,
    }

    impl OpSink<Hpa> for Stopping {
        fn op(&mut self, op: DmaOp, sg: &[Segment]) {
            if self.stopped() {
                self.after_stop += 1;
            } else {
                self.seen.op(op, sg);
            }
        }

        fn stopped(&self) -> bool {
            self.seen.len() >= self.limit
        }
    }

    /// A sink that stops ends `for_each_op` with the event that made its last op: no
    /// further event is read.
    #[test]
    fn for_each_op_stops_with_the_sink() {
        let (header, events) = mixed_trace(3 * iommulab_trace::BATCH + 77);
        let open = || TraceWorkload::new(MemorySource::new(header.clone(), events.clone()));
        let mut all = Seen::new();
        open().for_each_op(&mut all).unwrap();
        for limit in [1, 2, 3, 100, 5000] {
            let mut w = open();
            let mut sink = Stopping {
                seen: Seen::new(),
                limit,
                after_stop: 0,
            };
            w.for_each_op(&mut sink).unwrap();
            assert!(sink.seen[..] == all[..limit], "limit {limit}");
            // At most the rest of one event's ops (a tick, an unmap and a map) came after.
            assert!(sink.after_stop <= 2, "limit {limit}: {}", sink.after_stop);
            let read = w.report().events;
            assert!(read < events.len() as u64, "limit {limit}: read {read}");
            // The event that made the last op kept is the last one read.
            let mut again = open();
            let mut upto = Seen::new();
            by_next_op(&mut again, limit, &mut upto);
            assert_eq!(again.report().events, read, "limit {limit}");
        }
    }

    /// A source that ends in an error after its events, as a block reader does: the
    /// events of its last batch are read, the error comes with the next.
    struct Failing(MemorySource);

    impl Failing {
        fn error() -> TraceError {
            TraceError::Invalid {
                path: "failing".into(),
                what: "the end".into(),
            }
        }
    }

    impl EventSource for Failing {
        fn header(&self) -> &TraceHeader {
            self.0.header()
        }

        fn next_event(&mut self) -> Result<Option<Event>, TraceError> {
            self.0.next_event()?.map(Some).ok_or_else(Self::error)
        }

        fn read_batch(&mut self, out: &mut Vec<Event>) -> Result<usize, TraceError> {
            match self.0.read_batch(out)? {
                0 => Err(Self::error()),
                n => Ok(n),
            }
        }
    }

    /// The ops of the events before a read error come first, then the error: also when the
    /// error cuts a scatter-gather list, in the middle of a batch of events.
    #[test]
    fn ops_before_an_error_come_first() {
        let (header, mut events) = mixed_trace(2 * iommulab_trace::BATCH + 100);
        // The last list misses its last segment: its read meets the error.
        events.push(ev(EventKind::MapSg, 0, 2, None, None, 0, 2));
        events.push(ev(
            EventKind::SgSeg,
            0,
            2,
            Some(0x1000),
            Some(0x1000),
            64,
            0,
        ));
        let whole = {
            let mut w = TraceWorkload::new(MemorySource::new(header.clone(), events.clone()));
            let mut seen = Seen::new();
            by_next_op(&mut w, usize::MAX, &mut seen);
            seen
        };
        let failing =
            || TraceWorkload::new(Failing(MemorySource::new(header.clone(), events.clone())));
        // Up to the cut list, whose map is lost with the error.
        let before = &whole[..whole.len() - 1];
        let mut w = failing();
        let mut seen = Seen::new();
        let err = loop {
            match w.next_op() {
                Ok(Some(op)) => seen.op(op, w.sg_segments()),
                Ok(None) => panic!("no error"),
                Err(e) => break e,
            }
        };
        assert!(err.to_string().contains("the end"), "{err}");
        // The last batch's ops, up to the cut list, are among them.
        let first_batches = ops(
            &["iommu", "0000:01:00.0", "nvme0"],
            events[..2 * iommulab_trace::BATCH].to_vec(),
        )
        .0;
        assert!(before.len() > first_batches.len() + 10);
        assert!(seen == before);
        let mut w = failing();
        let mut seen = Seen::new();
        assert!(w.for_each_op(&mut seen).is_err());
        assert!(seen == before);
    }
}
