//! Trace statistics in one streaming pass ([`stats`]): event counts, mappings outstanding,
//! working set, page reuse distances, mapping sizes.
//!
//! A Linux trace can hold two **layers** of the same mappings: the DMA API (`dma:*`
//! tracepoints: what drivers asked for, one record per call, on the device that made it) and
//! the IOMMU page tables (`iommu:map`/`iommu:unmap`: what the IOMMU driver wrote, filed under
//! the device [`IOMMU_DEVICE`]). A `dma_map_page` through an IOMMU shows up in both, so the
//! layers are reported apart and never summed: [`TraceStats::dma_api`] (all devices) and
//! [`TraceStats::dma_api_by_device`], and [`TraceStats::iommu`] ([`IommuLayerStats`],
//! page-granular, see `stats_iommu.rs`). Replay and the `.oracleGeneral` export use the
//! DMA-API layer when there is one, the IOMMU layer only when it is alone.
//!
//! Memory is bounded by the trace's distinct pages, not its length: per 16-page chunk of
//! physical pages ever mapped a hash map entry and 16 ids (`page_ids.rs`) with a live count
//! and a last-access slot each, a bitmap of at most twice the distinct physical pages
//! (`stack_distance.rs`), a bitmap word per 64-page chunk of IOVA pages, and an entry per
//! live mapping. The stack distances are counted on a second thread, fed the pages the maps
//! covered a batch of records at a time.
//!
//! Definitions of the DMA-API layer (also in docs/trace-format.md, "Statistics"):
//!
//! - **maps**: `map` + `alloc` + `map_sg` (one per call, not per segment). **unmaps**: `unmap`
//!   + `free` + `unmap_sg`.
//! - **Mappings outstanding**: mapped and not yet unmapped. A single mapping is keyed by
//!   (device, DMA address), which `unmap`/`free` name; a scatter-gather mapping by (device,
//!   physical address of its first segment), which `unmap_sg` repeats (Linux's
//!   `dma_unmap_sg` tracepoint records no DMA addresses).
//!   `mean_outstanding` is **time-weighted** over `[first_ns, last_ns]` (per-event when the
//!   trace spans no time).
//! - **Pages** are 4 KiB; a mapping counts at most 2^20 pages (4 GiB), see
//!   `oversized_maps`. `distinct_pages` counts physical pages ever mapped,
//!   `distinct_iovas` DMA-address pages ever mapped, `working_set_pages` the most distinct
//!   physical pages mapped at once.
//! - **Reuse distance** (LRU stack distance) of a physical page each time a mapping covers it:
//!   the number of distinct other pages mapped since it was last mapped, or *cold* the first
//!   time. O(log n) per page with a Fenwick tree over last-access slots (Bennett & Kruskal),
//!   compacted when full.
//! - Histograms are log2-bucketed: bucket 0 holds 0, bucket `i ≥ 1` holds `[2^(i-1), 2^i)`.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use super::ftrace::IOMMU_DEVICE;
use super::pages::{MAX_PAGES_PER_MAP, PAGE_BYTES, pages};
use super::stats_iommu::IommuLayer;
pub use super::stats_iommu::IommuLayerStats;
use super::{Event, EventKind, EventSource, TraceError};
use crate::page_ids::{PageIds, PageSet};
use crate::stack_distance::ReuseCounter;
use iommulab_base::hash::FxHashMap;

/// Counts in log2 buckets: bucket 0 holds the value 0, bucket `i ≥ 1` holds `[2^(i-1), 2^i)`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Log2Histogram {
    /// Counts per bucket; trailing empty buckets are omitted.
    pub buckets: Vec<u64>,
}

impl Log2Histogram {
    /// The bucket of `v`.
    pub const fn bucket(v: u64) -> usize {
        (64 - v.leading_zeros()) as usize
    }

    /// The values bucket `i` holds, as text: `0`, `1`, `2-3`, `4-7`, ...
    pub fn label(i: usize) -> String {
        match i {
            0 => "0".to_owned(),
            1 => "1".to_owned(),
            64 => format!("{}-{}", 1u64 << 63, u64::MAX),
            i if i < 64 => format!("{}-{}", 1u64 << (i - 1), (1u64 << i) - 1),
            _ => String::new(),
        }
    }

    /// Counts one value.
    pub fn add(&mut self, v: u64) {
        let b = Self::bucket(v);
        if self.buckets.len() <= b {
            self.buckets.resize(b + 1, 0);
        }
        self.buckets[b] += 1;
    }

    /// All counts.
    pub fn total(&self) -> u64 {
        self.buckets.iter().sum()
    }
}

/// What [`stats`] reports. Serialises to JSON with these field names.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TraceStats {
    /// Records read, of both layers (a scatter-gather segment is a record).
    pub events: u64,
    /// The device table (names), as it stood at the end.
    pub devices: Vec<String>,
    /// Time of the first record.
    pub first_ns: Option<u64>,
    /// Latest record time.
    pub last_ns: Option<u64>,
    /// `last_ns - first_ns`.
    pub duration_ns: u64,
    /// Records whose time is earlier than a record before them (out of order: per-CPU
    /// buffers merged unsorted, or clocks that disagree).
    #[serde(default)]
    pub reordered_times: u64,
    /// The DMA-API layer (`dma:*` records) of every device but [`IOMMU_DEVICE`].
    pub dma_api: DmaApiStats,
    /// The DMA-API layer of each device, in device-table order (devices with records only).
    pub dma_api_by_device: Vec<DeviceStats>,
    /// The IOMMU page-table layer (`iommu:map`/`iommu:unmap`), if the trace has the device
    /// [`IOMMU_DEVICE`].
    pub iommu: Option<IommuLayerStats>,
}

/// One device's DMA-API layer.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DeviceStats {
    /// The device's name (a PCI address for Linux traces).
    pub device: String,
    /// Its statistics.
    #[serde(flatten)]
    pub stats: DmaApiStats,
}

/// The DMA-API layer of a set of devices (module doc for the definitions).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DmaApiStats {
    /// Records of the layer.
    pub events: u64,
    /// Records per kind ([`EventKind::name`]), every kind present.
    pub by_kind: BTreeMap<String, u64>,
    /// `map` + `alloc` + `map_sg` (a scatter-gather call counts once).
    pub maps: u64,
    /// `unmap` + `free` + `unmap_sg`.
    pub unmaps: u64,
    /// Unmaps that matched no outstanding mapping (for example mapped before the trace began).
    pub unmatched_unmaps: u64,
    /// Bytes mapped (sum of `len` over maps).
    pub bytes_mapped: u64,
    /// Maps longer than 4 GiB, whose pages beyond the first 2^20 are not counted.
    pub oversized_maps: u64,
    /// 4 KiB physical pages the maps covered, counted once per map (`reuse_cold` + the reuse
    /// histogram's total).
    pub page_maps: u64,
    /// Distinct 4 KiB physical pages ever mapped.
    pub distinct_pages: u64,
    /// Distinct 4 KiB DMA-address (IOVA) pages ever mapped.
    pub distinct_iovas: u64,
    /// Most distinct physical pages mapped at once.
    pub working_set_pages: u64,
    /// Most mappings outstanding at once.
    pub max_outstanding: u64,
    /// Time-weighted mean of mappings outstanding over the layer's first to last record
    /// (per-record mean if they span no time).
    pub mean_outstanding: f64,
    /// Mappings still outstanding at the end.
    pub outstanding_at_end: u64,
    /// Reuse (LRU stack) distances of physical pages across maps.
    pub reuse_distance: Log2Histogram,
    /// First-time page mappings (infinite reuse distance).
    pub reuse_cold: u64,
    /// Mapping sizes (`len` of maps), log2 buckets of bytes.
    pub map_size: Log2Histogram,
}

/// The key an unmap names its mapping by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Key {
    Single(u16, u64),
    Sg(u16, u64),
}

impl std::hash::Hash for Key {
    /// One word for the hasher, not the derive's three (its 8-byte discriminant is fed to
    /// Fx a byte at a time): the address rotated so its page number is in the low bits, which
    /// pick the hash table's bucket (page-aligned addresses would otherwise all share one),
    /// the device and the kind in the high bits.
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        let (sg, device, addr) = match *self {
            Key::Single(d, a) => (0, d, a),
            Key::Sg(d, a) => (1u64, d, a),
        };
        state.write_u64(addr.rotate_right(12) ^ (u64::from(device) << 36) ^ (sg << 35));
    }
}

/// The page runs `(first page, count)` of one mapping: one for a single map (kept inline,
/// no allocation per map), one per segment for a scatter-gather list.
#[derive(Clone, Debug)]
enum Ranges {
    One((u64, u64)),
    Many(Vec<(u64, u64)>),
}

impl Ranges {
    fn as_slice(&self) -> &[(u64, u64)] {
        match self {
            Ranges::One(r) => std::slice::from_ref(r),
            Ranges::Many(v) => v,
        }
    }
}

/// Id runs a live mapping keeps inline: a single map of up to 49 pages.
const INLINE_RUNS: usize = 4;

/// A live mapping's pages as its unmap needs them.
#[derive(Clone, Debug)]
enum LivePages {
    /// By id, `n` runs `[first, end)`: the unmap looks no page up.
    Ids {
        n: usize,
        runs: [(u32, u32); INLINE_RUNS],
    },
    /// Its page runs, numbered again at unmap (longer maps and scatter-gather lists of more
    /// than four runs: nothing allocated beyond the list's own runs).
    Pages(Ranges),
}

/// An open `map_sg`/`unmap_sg` collecting its segments.
#[derive(Clone, Debug)]
struct SgGroup {
    map: bool,
    device: u16,
    left: u32,
    key: Option<u64>,
    ranges: Vec<(u64, u64)>,
}

#[derive(Clone, Debug, Default)]
struct Acc {
    s: DmaApiStats,
    /// Events by kind ([`EventKind`] as index), moved into `s.by_kind` at the end.
    kinds: [u64; EventKind::ALL.len()],
    first_ns: Option<u64>,
    /// Physical pages numbered densely.
    ids: PageIds,
    /// Live mappings covering each page, by id.
    mapped: Vec<u32>,
    /// The pages the maps covered since [`stats`] last took them, by id, in order: their
    /// stack distances are counted by a [`ReuseCounter`] on another thread.
    accessed: Vec<u32>,
    /// Physical pages covered by a live mapping.
    live_pages: u64,
    iovas: PageSet,
    live: FxHashMap<Key, LivePages>,
    sg: Option<SgGroup>,
    prev_ns: Option<u64>,
    weighted: u128,
    per_event: u128,
    /// Set once the trace has more distinct pages than [`PageIds`] numbers; [`stats`] stops.
    too_many_pages: bool,
}

impl Acc {
    /// Calls `f(acc, first, end)` for each run of ids `[first, end)` of the page runs'
    /// pages, in order, numbering new pages (one run per 16-page chunk a page run touches).
    fn for_each_id_run(&mut self, ranges: &[(u64, u64)], mut f: impl FnMut(&mut Self, u32, u32)) {
        for &(first, count) in ranges {
            let end = first.saturating_add(count);
            let mut page = first;
            while page < end {
                let Ok(r) = self.ids.run(page, end) else {
                    self.too_many_pages = true;
                    return;
                };
                if r.fresh {
                    self.mapped.resize(self.ids.len(), 0);
                }
                f(self, r.base + r.lo, r.base + r.hi);
                page += u64::from(r.hi - r.lo);
            }
        }
    }

    /// Maps the pages: their accesses (for the stack distances) and live counts. Returns
    /// them as the mapping's unmap will need them.
    fn map_pages(&mut self, ranges: Ranges) -> LivePages {
        let mut runs = [(0u32, 0u32); INLINE_RUNS];
        let mut n = 0;
        self.for_each_id_run(ranges.as_slice(), |a, first, end| {
            for id in first..end {
                a.accessed.push(id);
                let m = &mut a.mapped[id as usize];
                a.live_pages += u64::from(*m == 0);
                *m += 1;
            }
            if let Some(r) = runs.get_mut(n) {
                *r = (first, end);
            }
            n += 1;
        });
        self.s.working_set_pages = self.s.working_set_pages.max(self.live_pages);
        if n <= INLINE_RUNS {
            LivePages::Ids { n, runs }
        } else {
            LivePages::Pages(ranges)
        }
    }

    fn unmap_pages(&mut self, live: &LivePages) {
        // Only pages of live mappings come here: each is numbered and mapped at least once.
        fn unmap_run(a: &mut Acc, first: u32, end: u32) {
            for id in first..end {
                let m = &mut a.mapped[id as usize];
                *m -= 1;
                a.live_pages -= u64::from(*m == 0);
            }
        }
        match live {
            LivePages::Ids { n, runs } => {
                for &(first, end) in &runs[..*n] {
                    unmap_run(self, first, end);
                }
            }
            LivePages::Pages(r) => self.for_each_id_run(r.as_slice(), unmap_run),
        }
    }

    fn mapped(&mut self, key: Option<Key>, ranges: Ranges) {
        let pages = self.map_pages(ranges);
        if let Some(old) = key.and_then(|key| self.live.insert(key, pages)) {
            self.unmap_pages(&old);
        }
        self.s.max_outstanding = self.s.max_outstanding.max(self.live.len() as u64);
    }

    fn unmapped(&mut self, key: Option<Key>) {
        match key.and_then(|k| self.live.remove(&k)) {
            Some(pages) => self.unmap_pages(&pages),
            None => self.s.unmatched_unmaps += 1,
        }
    }

    /// Closes the open scatter-gather group, if any. The check is inlined into the callers
    /// (almost every event has no group open); the closing is not.
    #[inline]
    fn close_sg(&mut self) {
        if let Some(g) = self.sg.take() {
            self.finish_sg(g);
        }
    }

    /// Accounts a closed group as one map or one unmap.
    #[inline(never)]
    fn finish_sg(&mut self, g: SgGroup) {
        let key = g.key.map(|a| Key::Sg(g.device, a));
        if g.map {
            self.mapped(key, Ranges::Many(g.ranges));
        } else {
            self.unmapped(key);
        }
    }

    fn range(addr: Option<u64>, len: u64) -> Ranges {
        match addr {
            Some(a) => {
                let r = pages(a, len);
                Ranges::One((*r.start(), r.end() - r.start() + 1))
            }
            None => Ranges::Many(Vec::new()),
        }
    }

    fn note_iovas(&mut self, dma: Option<u64>, len: u64) {
        if let Some(d) = dma {
            let r = pages(d, len);
            self.iovas.insert_run(*r.start(), r.end() + 1);
        }
    }

    fn event(&mut self, e: &Event) {
        let s = &mut self.s;
        s.events += 1;
        self.kinds[e.kind as usize] += 1;
        // Time: the integral of outstanding mappings up to this event.
        let outstanding = self.live.len() as u128;
        match self.prev_ns {
            None => self.first_ns = Some(e.time_ns),
            Some(p) if e.time_ns > p => self.weighted += outstanding * u128::from(e.time_ns - p),
            Some(_) => {}
        }
        self.prev_ns = Some(self.prev_ns.map_or(e.time_ns, |p| p.max(e.time_ns)));

        if e.kind == EventKind::SgSeg {
            if let Some(g) = self.sg.as_mut() {
                g.left -= 1;
                if g.key.is_none() {
                    g.key = e.phys.or(e.dma);
                }
                if let (true, Some(p)) = (g.map, e.phys) {
                    let r = pages(p, e.len);
                    g.ranges.push((*r.start(), r.end() - r.start() + 1));
                }
                let (map, left) = (g.map, g.left);
                if map {
                    self.note_iovas(e.dma, e.len);
                }
                if left == 0 {
                    self.close_sg();
                }
            }
        } else {
            // A group cut short by another event: close it with what it has.
            self.close_sg();
            let s = &mut self.s;
            match e.kind {
                EventKind::Map | EventKind::Alloc => {
                    s.maps += 1;
                    if e.len > MAX_PAGES_PER_MAP * PAGE_BYTES {
                        s.oversized_maps += 1;
                    }
                    s.bytes_mapped = s.bytes_mapped.saturating_add(e.len);
                    s.map_size.add(e.len);
                    self.note_iovas(e.dma, e.len);
                    let key = e.dma.map(|d| Key::Single(e.device, d));
                    self.mapped(key, Self::range(e.phys, e.len));
                }
                EventKind::Unmap | EventKind::Free => {
                    s.unmaps += 1;
                    self.unmapped(e.dma.map(|d| Key::Single(e.device, d)));
                }
                EventKind::MapSg | EventKind::UnmapSg => {
                    let map = e.kind == EventKind::MapSg;
                    if map {
                        s.maps += 1;
                        s.bytes_mapped = s.bytes_mapped.saturating_add(e.len);
                        s.map_size.add(e.len);
                    } else {
                        s.unmaps += 1;
                    }
                    self.sg = Some(SgGroup {
                        map,
                        device: e.device,
                        left: e.nents,
                        key: None,
                        ranges: Vec::new(),
                    });
                    if e.nents == 0 {
                        self.close_sg();
                    }
                }
                _ => {}
            }
        }
        self.per_event += self.live.len() as u128;
    }

    /// The statistics, given the stack distances of every page `accessed` held.
    fn finish(mut self, reuse: &ReuseCounter) -> DmaApiStats {
        self.close_sg();
        let mut s = self.s;
        s.reuse_distance = reuse.histogram.clone();
        s.reuse_cold = reuse.cold;
        for k in EventKind::ALL {
            s.by_kind
                .insert(k.name().to_owned(), self.kinds[k as usize]);
        }
        s.distinct_pages = reuse.distinct();
        s.distinct_iovas = self.iovas.len();
        s.outstanding_at_end = self.live.len() as u64;
        s.page_maps = s.reuse_cold + s.reuse_distance.total();
        let duration_ns = match (self.first_ns, self.prev_ns) {
            (Some(a), Some(b)) => b.saturating_sub(a),
            _ => 0,
        };
        s.mean_outstanding = if duration_ns > 0 {
            self.weighted as f64 / duration_ns as f64
        } else if s.events > 0 {
            self.per_event as f64 / s.events as f64
        } else {
            0.0
        };
        s
    }
}

/// Reads `src` to its end and returns its statistics (module doc for the definitions).
///
/// # Examples
///
/// ```
/// use iommulab_trace::{Event, EventKind, TraceHeader, stats};
/// use iommulab_trace::format::{NativeReader, NativeWriter};
///
/// let h = TraceHeader { devices: vec!["nvme0".into()], source: String::new() };
/// let mut w = NativeWriter::new(Vec::new(), &h).unwrap();
/// let mut m = Event::new(EventKind::Map);
/// (m.dma, m.phys, m.len) = (Some(0xf000), Some(0x1000), 8192);
/// w.write(&m).unwrap();
/// let mut u = m;
/// u.kind = EventKind::Unmap;
/// w.write(&u).unwrap();
/// let bytes = w.finish().unwrap();
/// let s = stats(&mut NativeReader::new(&bytes[..], "t.iot".into()).unwrap()).unwrap();
/// let d = &s.dma_api;
/// assert_eq!((d.maps, d.unmaps, d.distinct_pages, d.working_set_pages), (1, 1, 2, 2));
/// assert!(s.iommu.is_none()); // no `iommu` device: no IOMMU page-table layer
/// ```
pub fn stats(src: &mut dyn EventSource) -> Result<TraceStats, TraceError> {
    // The stack distances (a third of the work) are counted on a second thread, fed the
    // pages each accumulator's maps covered, a batch at a time.
    let (to_worker, from_main) = std::sync::mpsc::sync_channel::<ToReuse>(8);
    let (recycle, recycled) = std::sync::mpsc::channel::<Vec<u32>>();
    std::thread::scope(|scope| {
        let worker = std::thread::Builder::new()
            .name("trace-stats-reuse".into())
            .spawn_scoped(scope, move || {
                let mut counters: Vec<ReuseCounter> = Vec::new();
                for m in from_main {
                    match m {
                        ToReuse::Pages(i, ids) => {
                            if counters.len() <= i {
                                counters.resize_with(i + 1, ReuseCounter::default);
                            }
                            counters[i].feed(&ids);
                            // The main thread may have finished; the buffer is then dropped.
                            let _ = recycle.send(ids);
                        }
                        ToReuse::Copy { from, to } => {
                            let c = counters.get(from).cloned().unwrap_or_default();
                            if counters.len() <= to {
                                counters.resize_with(to + 1, ReuseCounter::default);
                            }
                            counters[to] = c;
                        }
                    }
                }
                counters
            })
            .map_err(|source| TraceError::Io {
                path: STATS_PATH.into(),
                source,
            })?;
        let accs = accumulate(src, &to_worker, &recycled);
        // The worker ends when the channel closes.
        drop(to_worker);
        let counters = match worker.join() {
            Ok(c) => c,
            Err(panic) => std::panic::resume_unwind(panic),
        };
        let (mut t, dma, by_device, iommu) = accs?;
        let none = ReuseCounter::default();
        let counter = |i: usize| counters.get(i).unwrap_or(&none);
        let devices = &src.header().devices;
        t.devices = devices.clone();
        t.duration_ns = match (t.first_ns, t.last_ns) {
            (Some(a), Some(b)) => b.saturating_sub(a),
            _ => 0,
        };
        t.dma_api_by_device = (0u16..)
            .zip(by_device)
            .filter_map(|(d, acc)| Some((d, acc?)))
            .map(|(d, acc)| DeviceStats {
                device: devices
                    .get(usize::from(d))
                    .cloned()
                    .unwrap_or_else(|| format!("#{d}")),
                stats: acc.finish(counter(device_slot(d))),
            })
            .collect();
        t.dma_api = match dma {
            Some(all) => all.finish(counter(ALL_DEVICES)),
            None => match t.dma_api_by_device.as_slice() {
                [one] => one.stats.clone(),
                _ => Acc::default().finish(&none),
            },
        };
        t.iommu = match iommu {
            Some(i) => Some(i.finish()),
            None if devices.iter().any(|d| d == IOMMU_DEVICE) => {
                Some(IommuLayer::default().finish())
            }
            None => None,
        };
        Ok(t)
    })
}

/// What [`stats`]' errors name in place of a file (it reads a stream; the CLI adds the
/// file's name).
const STATS_PATH: &str = "trace statistics";

/// What the main thread of [`stats`] sends the stack-distance thread.
enum ToReuse {
    /// Pages (by id) accumulator `.0` mapped, in order.
    Pages(usize, Vec<u32>),
    /// Accumulator `to` starts as a copy of accumulator `from`.
    Copy { from: usize, to: usize },
}

/// The stack-distance counter of the all-devices accumulator; device `d`'s is
/// [`device_slot`]`(d)`.
const ALL_DEVICES: usize = 0;

fn device_slot(d: u16) -> usize {
    usize::from(d) + 1
}

/// The accumulators at the end of the trace: records and times, all devices (when there
/// were two or more), each device, the IOMMU layer.
type Accumulated = (
    TraceStats,
    Option<Acc>,
    Vec<Option<Acc>>,
    Option<IommuLayer>,
);

/// Reads `src` to its end into the accumulators, sending the pages maps covered to the
/// stack-distance thread after each batch (buffers come back on `recycled`).
fn accumulate(
    src: &mut dyn EventSource,
    to_worker: &std::sync::mpsc::SyncSender<ToReuse>,
    recycled: &std::sync::mpsc::Receiver<Vec<u32>>,
) -> Result<Accumulated, TraceError> {
    let mut t = TraceStats::default();
    // While one device has been seen, its statistics are the all-devices ones (the same
    // events in the same order): the all-devices accumulator starts as a copy of it when a
    // second device appears, so a one-device trace is accumulated once, not twice.
    let mut dma: Option<Acc> = None;
    // Per device index, in device-table order; `first` is the first device seen.
    let mut by_device: Vec<Option<Acc>> = Vec::new();
    let mut first: Option<u16> = None;
    let mut iommu: Option<IommuLayer> = None;
    let mut batch = Vec::new();
    // The worker only stops when the channel closes, so a send fails only if it panicked:
    // its join reports that.
    let send = |m: ToReuse| to_worker.send(m).is_ok();
    let mut worker_alive = true;
    while worker_alive && src.read_batch(&mut batch)? != 0 {
        // Text readers grow the device table as they read; after a batch it names every
        // device of the batch.
        let iommu_device = src
            .header()
            .devices
            .iter()
            .position(|d| d == IOMMU_DEVICE)
            .and_then(|i| u16::try_from(i).ok());
        for e in &batch {
            t.events += 1;
            if t.first_ns.is_none() {
                t.first_ns = Some(e.time_ns);
            }
            if t.last_ns.is_some_and(|p| e.time_ns < p) {
                t.reordered_times += 1;
            }
            t.last_ns = Some(t.last_ns.map_or(e.time_ns, |p| p.max(e.time_ns)));
            if Some(e.device) == iommu_device {
                iommu.get_or_insert_with(IommuLayer::default).event(e);
                continue;
            }
            let d = usize::from(e.device);
            match first {
                None => first = Some(e.device),
                Some(f) if dma.is_none() && f != e.device => {
                    // The copy carries the pages of this batch not yet sent; the worker
                    // copies the counter as it stands before them, then is sent them twice.
                    dma = by_device.get(usize::from(f)).cloned().flatten();
                    worker_alive &= send(ToReuse::Copy {
                        from: device_slot(f),
                        to: ALL_DEVICES,
                    });
                }
                Some(_) => {}
            }
            if let Some(all) = dma.as_mut() {
                all.event(e);
            }
            if by_device.len() <= d {
                by_device.resize_with(d + 1, || None);
            }
            by_device[d].get_or_insert_with(Acc::default).event(e);
        }
        let accs = dma.iter_mut().map(|a| (ALL_DEVICES, a)).chain(
            (0u16..)
                .zip(by_device.iter_mut())
                .filter_map(|(d, a)| Some((device_slot(d), a.as_mut()?))),
        );
        for (slot, acc) in accs {
            if acc.too_many_pages {
                return Err(TraceError::Unsupported {
                    path: STATS_PATH.into(),
                    what: "more than 2^30 distinct 4 KiB pages (4 TiB) mapped: beyond what \
                           trace statistics count"
                        .into(),
                });
            }
            if !acc.accessed.is_empty() {
                let mut fresh = recycled.try_recv().unwrap_or_default();
                fresh.clear();
                let ids = std::mem::replace(&mut acc.accessed, fresh);
                worker_alive &= send(ToReuse::Pages(slot, ids));
            }
        }
    }
    Ok((t, dma, by_device, iommu))
}

impl TraceStats {
    /// A table for people: the records, then the DMA-API layer (all devices, then one
    /// column per device), then the IOMMU page-table layer, each under its own heading.
    pub fn to_table(&self) -> String {
        let mut t = String::new();
        let _ = writeln!(t, "{:<26} {}", "records (both layers)", self.events);
        let _ = writeln!(t, "{:<26} {}", "devices", self.devices.join(", "));
        let _ = writeln!(t, "{:<26} {} ns", "duration", self.duration_ns);
        if self.reordered_times > 0 {
            let _ = writeln!(
                t,
                "{:<26} {} (earlier than a record before them)",
                "records out of time order", self.reordered_times
            );
        }
        let _ = writeln!(
            t,
            "\nDMA API layer (dma:* records: the buffers drivers mapped; what replay, mrc and \
             the .oracleGeneral export use)"
        );
        let d = &self.dma_api;
        let mut cols: Vec<(&str, &DmaApiStats)> = vec![("all devices", d)];
        if self.dma_api_by_device.len() > 1 {
            cols.extend(
                self.dma_api_by_device
                    .iter()
                    .map(|x| (x.device.as_str(), &x.stats)),
            );
        }
        let width = cols.iter().map(|(n, _)| n.len()).max().unwrap_or(0).max(10);
        let _ = write!(t, "  {:<24}", "");
        for (n, _) in &cols {
            let _ = write!(t, " {n:>width$}");
        }
        t.push('\n');
        let mut line = |label: &str, f: &dyn Fn(&DmaApiStats) -> String| {
            let _ = write!(t, "  {label:<24}");
            for (_, c) in &cols {
                let _ = write!(t, " {:>width$}", f(c));
            }
            t.push('\n');
        };
        line("maps", &|c| c.maps.to_string());
        line("unmaps", &|c| c.unmaps.to_string());
        line("unmatched unmaps", &|c| c.unmatched_unmaps.to_string());
        line("bytes mapped", &|c| c.bytes_mapped.to_string());
        line("page maps (4 KiB)", &|c| c.page_maps.to_string());
        line("distinct pages", &|c| c.distinct_pages.to_string());
        line("distinct iova pages", &|c| c.distinct_iovas.to_string());
        line("working set (pages)", &|c| c.working_set_pages.to_string());
        line("max outstanding", &|c| c.max_outstanding.to_string());
        line("mean outstanding", &|c| {
            format!("{:.2}", c.mean_outstanding)
        });
        line("outstanding at end", &|c| c.outstanding_at_end.to_string());
        for k in EventKind::ALL {
            let name = k.name();
            if cols
                .iter()
                .any(|(_, c)| c.by_kind.get(name).copied().unwrap_or(0) > 0)
            {
                line(&format!("{name} records"), &|c| {
                    c.by_kind.get(name).copied().unwrap_or(0).to_string()
                });
            }
        }
        let mut hist = |title: &str, h: &Log2Histogram, extra: Option<(&str, u64)>| {
            let _ = writeln!(t, "  {title}");
            for (i, c) in h.buckets.iter().enumerate() {
                if *c > 0 {
                    let _ = writeln!(t, "    {:<22} {c}", Log2Histogram::label(i));
                }
            }
            if let Some((k, v)) = extra {
                let _ = writeln!(t, "    {k:<22} {v}");
            }
        };
        hist(
            "reuse distance (pages, all devices)",
            &d.reuse_distance,
            Some(("cold", d.reuse_cold)),
        );
        hist("map size (bytes, all devices)", &d.map_size, None);
        match &self.iommu {
            None => {
                let _ = writeln!(
                    t,
                    "\nIOMMU page-table layer: none (no `{IOMMU_DEVICE}` device: no iommu:map/unmap records)"
                );
            }
            Some(i) => t.push_str(&i.to_table()),
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::TraceHeader;

    struct VecSource(TraceHeader, std::vec::IntoIter<Event>);
    impl EventSource for VecSource {
        fn header(&self) -> &TraceHeader {
            &self.0
        }
        fn next_event(&mut self) -> Result<Option<Event>, TraceError> {
            Ok(self.1.next())
        }
    }

    fn run(events: Vec<Event>) -> TraceStats {
        let h = TraceHeader {
            devices: vec!["d".into()],
            source: String::new(),
        };
        stats(&mut VecSource(h, events.into_iter())).unwrap()
    }

    fn ev(kind: EventKind, t: u64, dma: Option<u64>, phys: Option<u64>, len: u64) -> Event {
        let mut e = Event::new(kind);
        (e.time_ns, e.dma, e.phys, e.len) = (t, dma, phys, len);
        e
    }

    /// Three devices whose first records come at different points: the all-devices
    /// statistics equal one accumulator fed every record (the one-device shortcut and the
    /// copy made when the second device appears change nothing), and a one-device trace's
    /// all-devices statistics equal its device's.
    #[test]
    fn all_devices_equal_one_accumulator_of_every_record() {
        let mut events = Vec::new();
        let mut x = 0x9e37_79b9_u64;
        for i in 0..3000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // Device 0 alone for 500 records, then 0 and 1, then all three.
            let devices = if i < 500 {
                1
            } else if i < 1500 {
                2
            } else {
                3
            };
            let device = u16::try_from(x % devices).unwrap();
            let page = (x >> 8) % 300;
            let kind = if x.is_multiple_of(3) {
                EventKind::Unmap
            } else {
                EventKind::Map
            };
            let mut e = ev(
                kind,
                i * 10,
                Some(page << 12),
                Some((page + 7) << 12),
                4096 + (x >> 20) % 9000,
            );
            e.device = device;
            events.push(e);
        }
        let h = TraceHeader {
            devices: vec!["a".into(), "b".into(), "c".into()],
            source: String::new(),
        };
        let s = stats(&mut VecSource(h, events.clone().into_iter())).unwrap();
        let mut all = Acc::default();
        for e in &events {
            all.event(e);
        }
        let mut reuse = ReuseCounter::default();
        reuse.feed(&all.accessed);
        assert_eq!(s.dma_api, all.finish(&reuse));
        assert_eq!(s.dma_api_by_device.len(), 3);
        let one: Vec<Event> = events[..500].to_vec();
        let s1 = run(one);
        assert_eq!(s1.dma_api_by_device.len(), 1);
        assert_eq!(s1.dma_api, s1.dma_api_by_device[0].stats);
        assert!(s1.dma_api.maps > 0);
    }

    /// The page-level statistics of single maps and unmaps counted the plain way, with a
    /// hash map or set per quantity and the stack distance by counting the pages mapped
    /// since (the
    /// representation `trace stats` had): distinct pages, distinct IOVA
    /// pages, working set, reuse histogram and cold maps.
    fn reference(events: &[Event]) -> (u64, u64, u64, Log2Histogram, u64) {
        use std::collections::{HashMap, HashSet};
        let (mut last, mut clock) = (HashMap::<u64, u64>::new(), 0u64);
        let mut live: HashMap<(u16, u64), (u64, u64)> = HashMap::new();
        let mut live_pages: HashMap<u64, u32> = HashMap::new();
        let mut iovas = HashSet::new();
        let (mut ws, mut hist, mut cold) = (0u64, Log2Histogram::default(), 0u64);
        let unmap = |live_pages: &mut HashMap<u64, u32>, (first, n): (u64, u64)| {
            for p in first..first + n {
                let c = live_pages.get_mut(&p).unwrap();
                *c -= 1;
                if *c == 0 {
                    live_pages.remove(&p);
                }
            }
        };
        for e in events {
            let key = (e.device, e.dma.unwrap());
            if e.kind == EventKind::Map {
                iovas.extend(pages(e.dma.unwrap(), e.len));
                let r = pages(e.phys.unwrap(), e.len);
                let run = (*r.start(), r.end() - r.start() + 1);
                for p in r {
                    // Distinct pages last mapped after p was.
                    match last.get(&p) {
                        Some(&prev) => {
                            hist.add(last.values().filter(|&&t| t > prev).count() as u64)
                        }
                        None => cold += 1,
                    }
                    last.insert(p, clock);
                    clock += 1;
                    *live_pages.entry(p).or_insert(0) += 1;
                }
                ws = ws.max(live_pages.len() as u64);
                if let Some(old) = live.insert(key, run) {
                    unmap(&mut live_pages, old);
                }
            } else if let Some(old) = live.remove(&key) {
                unmap(&mut live_pages, old);
            }
        }
        (last.len() as u64, iovas.len() as u64, ws, hist, cold)
    }

    /// Random single maps (1 to 24 pages, at random offsets, some of a key already live)
    /// and unmaps (some of nothing live) on three devices, over few and many pages: the
    /// dense ids, bitmaps and word tree give what the plain representation gives.
    #[test]
    fn page_statistics_match_the_plain_representation() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::SmallRng::seed_from_u64(9);
        for pool in [64u64, 3000, 200_000] {
            let mut events = Vec::new();
            for i in 0..3000u64 {
                let kind = if rng.gen_bool(0.55) {
                    EventKind::Map
                } else {
                    EventKind::Unmap
                };
                let mut e = ev(
                    kind,
                    i,
                    Some(rng.gen_range(0..64u64) << 12),
                    Some((rng.gen_range(0..pool) << 12) + rng.gen_range(0..4096)),
                    rng.gen_range(1..24 * 4096),
                );
                e.device = rng.gen_range(0..3);
                events.push(e);
            }
            let h = TraceHeader {
                devices: vec!["a".into(), "b".into(), "c".into()],
                source: String::new(),
            };
            let s = stats(&mut VecSource(h, events.clone().into_iter())).unwrap();
            let d = &s.dma_api;
            let (distinct, iovas, ws, hist, cold) = reference(&events);
            assert_eq!(d.distinct_pages, distinct, "pool {pool}");
            assert_eq!(d.distinct_iovas, iovas, "pool {pool}");
            assert_eq!(d.working_set_pages, ws, "pool {pool}");
            assert_eq!(d.reuse_distance, hist, "pool {pool}");
            assert_eq!(d.reuse_cold, cold, "pool {pool}");
            assert!(d.reuse_distance.total() > 0 && ws > 0, "pool {pool}");
        }
    }

    #[test]
    fn counts_maps_unmaps_and_outstanding() {
        // Two overlapping 8 KiB maps over 10 ns, then unmaps.
        let s = run(vec![
            ev(EventKind::Map, 0, Some(0xa000), Some(0x1000), 8192),
            ev(EventKind::Map, 4, Some(0xc000), Some(0x2000), 8192),
            ev(EventKind::Unmap, 6, Some(0xa000), None, 8192),
            ev(EventKind::Unmap, 10, Some(0xc000), None, 8192),
            ev(EventKind::Unmap, 10, Some(0xe000), None, 8192),
        ]);
        let (all, s) = (&s, &s.dma_api);
        assert_eq!((s.maps, s.unmaps, s.unmatched_unmaps), (2, 3, 1));
        assert_eq!(s.distinct_pages, 3);
        assert_eq!(s.distinct_iovas, 4);
        assert_eq!(s.working_set_pages, 3);
        assert_eq!(s.max_outstanding, 2);
        // 1 mapping over [0,4), 2 over [4,6), 1 over [6,10): 12 / 10.
        assert!((s.mean_outstanding - 1.2).abs() < 1e-9);
        assert_eq!(s.reuse_cold, 3);
        // Page 2 again after page 1 (first map: 1,2; second: 2,3): distance 0.
        assert_eq!(s.reuse_distance.buckets, [1]);
        assert_eq!(s.map_size.buckets[Log2Histogram::bucket(8192)], 2);
        assert_eq!(
            (all.first_ns, all.last_ns, all.duration_ns),
            (Some(0), Some(10), 10)
        );
        assert_eq!(s.page_maps, 4);
        assert_eq!(all.dma_api_by_device.len(), 1);
        assert_eq!(all.dma_api_by_device[0].stats, *s);
    }

    #[test]
    fn map_sg_counts_once_and_unmap_sg_matches_by_phys() {
        let mut m = ev(EventKind::MapSg, 0, None, None, 8192);
        m.nents = 2;
        let mut u = ev(EventKind::UnmapSg, 5, None, None, 8192);
        u.nents = 2;
        let s = run(vec![
            m,
            ev(EventKind::SgSeg, 0, Some(0x10_000), Some(0x5000), 4096),
            ev(EventKind::SgSeg, 0, Some(0x11_000), Some(0x9000), 4096),
            u,
            ev(EventKind::SgSeg, 5, None, Some(0x5000), 4096),
            ev(EventKind::SgSeg, 5, None, Some(0x9000), 4096),
        ]);
        let s = &s.dma_api;
        assert_eq!((s.maps, s.unmaps, s.unmatched_unmaps), (1, 1, 0));
        assert_eq!(s.distinct_pages, 2);
        assert_eq!(s.outstanding_at_end, 0);
        assert_eq!(s.by_kind["sg_seg"], 4);
        assert_eq!(s.by_kind["free"], 0);
    }

    #[test]
    fn table_and_json_carry_required_fields() {
        let s = run(vec![ev(EventKind::Alloc, 0, Some(0), Some(0), 4096)]);
        let json = serde_json::to_value(&s).unwrap();
        for k in ["maps", "unmaps", "distinct_pages", "page_maps"] {
            assert!(json["dma_api"].get(k).is_some(), "{k}");
            assert!(json["dma_api_by_device"][0].get(k).is_some(), "{k}");
            assert!(json.get(k).is_none(), "{k} is per layer, not summed");
        }
        assert_eq!(json["dma_api_by_device"][0]["device"], "d");
        assert!(json["iommu"].is_null());
        let t = s.to_table();
        assert!(t.contains("distinct pages"));
        assert!(t.contains("cold"));
        assert_eq!(Log2Histogram::label(3), "4-7");
    }
}

#[cfg(test)]
mod layer_tests {
    use super::*;
    use crate::TraceHeader;

    struct VecSource(TraceHeader, std::vec::IntoIter<Event>);
    impl EventSource for VecSource {
        fn header(&self) -> &TraceHeader {
            &self.0
        }
        fn next_event(&mut self) -> Result<Option<Event>, TraceError> {
            Ok(self.1.next())
        }
    }

    /// A `dma_map_page` through an IOMMU is recorded twice (`iommu:map` first, then the
    /// `dma:` record): the layers report it once each, never summed.
    #[test]
    fn the_dma_api_and_iommu_layers_are_apart() {
        let h = TraceHeader {
            devices: vec![IOMMU_DEVICE.into(), "nvme0".into(), "eth0".into()],
            source: String::new(),
        };
        let rec = |kind, device, dma, phys: Option<u64>, len| {
            let mut e = Event::new(kind);
            (e.device, e.dma, e.phys, e.len) = (device, Some(dma), phys, len);
            e
        };
        let events = vec![
            rec(EventKind::Map, 0, 0xf000, Some(0x1000), 4096),
            rec(EventKind::Map, 1, 0xf000, Some(0x1000), 4096),
            rec(EventKind::Map, 0, 0xc000, Some(0x2000), 8192),
            rec(EventKind::Map, 2, 0xc000, Some(0x2000), 8192),
            rec(EventKind::Unmap, 1, 0xf000, None, 4096),
            rec(EventKind::Unmap, 0, 0xf000, None, 4096),
        ];
        let s = stats(&mut VecSource(h, events.into_iter())).unwrap();
        assert_eq!(s.events, 6);
        assert_eq!((s.dma_api.maps, s.dma_api.unmaps), (2, 1));
        assert_eq!(s.dma_api.by_kind["map"], 2);
        let names: Vec<_> = s
            .dma_api_by_device
            .iter()
            .map(|d| d.device.as_str())
            .collect();
        assert_eq!(names, ["nvme0", "eth0"]);
        assert_eq!(s.dma_api_by_device[0].stats.maps, 1);
        assert_eq!(s.dma_api_by_device[1].stats.page_maps, 2);
        let i = s.iommu.as_ref().expect("the iommu layer");
        assert_eq!((i.map_events, i.unmap_events, i.pages_mapped), (2, 1, 3));
        assert_eq!(i.mapped_pages_at_end, 2);
        let table = s.to_table();
        assert!(table.contains("DMA API layer") && table.contains("IOMMU page-table layer"));
        assert!(table.contains("nvme0") && table.contains("eth0"), "{table}");
    }
}
