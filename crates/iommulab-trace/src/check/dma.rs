//! The DMA layer's live mappings and Linux's checks on them (`kernel/dma/debug.c`):
//! `check_unmap` for `dma_unmap_*`/`dma_free*`/`dma_unmap_sg`, `check_sync` for
//! `dma_sync_*`, the leak report of `dma_debug_device_change`, and the DMA-mask test of
//! dma-direct. Live mappings are Linux's `dma_debug_entry`s: one per `dma_map_*`/
//! `dma_alloc*`, one per mapped segment of a `dma_map_sg` (tied together as a group here,
//! since `dma_unmap_sg`'s event names the list by its physical addresses only). The rules
//! an event is measured against are the live checker's too, written once in
//! [`iommulab_base::dma_debug`]; this file keeps the trace's live entries and sg lists and
//! words each finding as the kernel prints it.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::cacheline::{ActiveCachelines, Insert};
use super::iommu::{Backing, IommuState};
use super::{At, Ctx, FindingKind, Flavour, Raw, Sink};
use crate::{Event, EventKind, TraceDir};
use iommulab_base::dma_debug::{
    self as rules, Claim, DMA_MAPPING_ERROR, MapType, Mismatch, NotLive, RecentlyUnmapped,
    SyncFinding,
};
use iommulab_base::hash::{AddrHashMap, FxHashMap};

/// Entries a sync looks back over for one containing its range (Linux walks back hash
/// buckets similarly far).
const SYNC_LOOKBACK: usize = 64;

fn dir_name(d: TraceDir) -> &'static str {
    match d {
        TraceDir::Bidirectional => "DMA_BIDIRECTIONAL",
        TraceDir::ToDevice => "DMA_TO_DEVICE",
        TraceDir::FromDevice => "DMA_FROM_DEVICE",
        TraceDir::None => "DMA_NONE",
    }
}

/// A live mapping (`struct dma_debug_entry`).
#[derive(Clone, Copy, Debug)]
struct Entry {
    size: u64,
    dir: TraceDir,
    ty: MapType,
    /// The CPU side: physical address (`phys_addr=`), or `virt_addr=` of newer allocs.
    phys: Option<u64>,
    virt: Option<u64>,
    /// `sg_call_ents`: the `nents` of the `dma_map_sg` (0 otherwise).
    sg_nents: u32,
    /// The sg group (0: none).
    group: u64,
    /// The active cacheline inserted for it.
    cacheline: Option<u64>,
    /// Whether `iommu:map` records backed it.
    backed: Backing,
    at: At,
}

impl Entry {
    /// The fields an unmap is compared against.
    fn claim(&self) -> Claim<TraceDir> {
        Claim {
            size: self.size,
            ty: self.ty,
            dir: self.dir,
            sg_nents: self.sg_nents,
        }
    }
}

/// A mapped scatter-gather list.
#[derive(Debug)]
struct Group {
    dev: u16,
    nents: u32,
    phys: Vec<Option<u64>>,
    /// Its entries' keys in `live`.
    entries: Vec<(u64, u64)>,
    at: At,
}

/// A `MapSg`/`UnmapSg` record whose `SgSeg`s are being collected.
#[derive(Debug)]
struct OpenList {
    head: Event,
    ctx: Ctx,
    at: At,
    segs: Vec<Event>,
}

/// Recently unmapped (device, DMA address) → (map, unmap) sites.
type Recent = RecentlyUnmapped<(At, At)>;

/// Key of a live entry: (device, DMA address, sequence number).
type Key = (u16, u64, u64);

#[derive(Debug, Default)]
pub(super) struct DmaState {
    live: BTreeMap<Key, Entry>,
    seq: u64,
    groups: FxHashMap<u64, Group>,
    /// Live groups by (device, first physical address), oldest first.
    groups_by_phys: AddrHashMap<(u16, u64), Vec<u64>>,
    /// Recently unmapped (device, DMA address) → (map, unmap) sites.
    unmapped: Recent,
    /// Recently unmapped sg lists by (device, first physical address).
    unmapped_sg: Recent,
    cachelines: ActiveCachelines,
    open_list: Option<OpenList>,
    max_live: u64,
    /// Whether the capture began before any mapping (see `CheckOptions::from_boot`).
    from_boot: bool,
    /// Calls on addresses taken as mapped before tracing began.
    before_tracing: u64,
}

impl DmaState {
    pub(super) fn new(from_boot: bool) -> Self {
        DmaState {
            from_boot,
            ..DmaState::default()
        }
    }

    pub(super) fn before_tracing(&self) -> u64 {
        self.before_tracing
    }

    pub(super) fn live_at_end(&self) -> u64 {
        self.live.len() as u64
    }

    pub(super) fn max_live(&self) -> u64 {
        self.max_live
    }

    pub(super) fn event(
        &mut self,
        e: &Event,
        ctx: &Ctx,
        at: At,
        mask: Option<u64>,
        mut iommu: Option<&mut IommuState>,
        sink: &mut Sink,
    ) {
        if e.kind == EventKind::SgSeg {
            if let Some(open) = &mut self.open_list {
                open.segs.push(*e);
                if open.segs.len() >= open.head.nents as usize {
                    self.close_list(mask, iommu, sink);
                }
            }
            return;
        }
        // A list that lost segments ends at the next call.
        if self.open_list.is_some() {
            self.close_list(mask, iommu.as_deref_mut(), sink);
        }
        match e.kind {
            EventKind::Map | EventKind::Alloc => {
                let Some(dma) = e.dma else { return };
                let ty = match (e.kind, ctx.flavour) {
                    (EventKind::Map, Flavour::Resource) => MapType::Resource,
                    (EventKind::Alloc, Flavour::Pages) | (EventKind::Map, _) => MapType::Single,
                    _ => MapType::Coherent,
                };
                let mut entry = Entry {
                    size: e.len,
                    dir: e.dir,
                    ty,
                    phys: e.phys,
                    virt: ctx.virt,
                    sg_nents: 0,
                    group: 0,
                    cacheline: None,
                    backed: Backing::No,
                    at,
                };
                if let Some(io) = iommu {
                    entry.backed = io.dma_map(e.device, &[(dma, e.len)], at, sink);
                }
                self.add(e.device, dma, entry, ctx.skip_cpu_sync, mask, sink);
            }
            EventKind::MapSg | EventKind::UnmapSg => {
                self.open_list = Some(OpenList {
                    head: *e,
                    ctx: *ctx,
                    at,
                    segs: Vec::new(),
                });
                if e.nents == 0 {
                    self.close_list(mask, iommu, sink);
                }
            }
            EventKind::Unmap | EventKind::Free => {
                let Some(dma) = e.dma else { return };
                let ty = match (e.kind, ctx.flavour) {
                    (EventKind::Unmap, Flavour::Resource) => MapType::Resource,
                    (EventKind::Free, Flavour::Pages) | (EventKind::Unmap, _) => MapType::Single,
                    _ => MapType::Coherent,
                };
                let cpu_addr = (e.phys, ctx.virt);
                self.check_unmap(e.device, dma, e.len, e.dir, ty, cpu_addr, at, iommu, sink);
            }
            EventKind::SyncForCpu | EventKind::SyncForDevice => {
                let Some(dma) = e.dma else { return };
                let to_cpu = e.kind == EventKind::SyncForCpu;
                let start_only = ctx.flavour == Flavour::SyncSg;
                self.check_sync(e.device, dma, e.len, e.dir, to_cpu, start_only, at, sink);
            }
            EventKind::SgSeg | EventKind::DeviceRead | EventKind::DeviceWrite => {}
        }
    }

    /// `add_dma_entry`, plus the DMA-mask test of dma-direct.
    fn add(
        &mut self,
        dev: u16,
        dma: u64,
        mut entry: Entry,
        skip_cpu_sync: bool,
        mask: Option<u64>,
        sink: &mut Sink,
    ) -> Key {
        if let Some(mask) = mask {
            let last = dma.saturating_add(entry.size.saturating_sub(1));
            if last > mask {
                sink.emit(Raw {
                    kind: FindingKind::BeyondDmaMask,
                    device: Some(dev),
                    at: entry.at,
                    map: None,
                    detail: format!(
                        "[device address={dma:#018x}] [size={} bytes] [last byte={last:#x}] [dma mask={mask:#x}]",
                        entry.size
                    ),
                });
            }
        }
        // active_cacheline_insert: device-writable mappings only.
        if entry.dir != TraceDir::ToDevice
            && let Some(phys) = entry.phys
        {
            let cln = ActiveCachelines::number(phys);
            entry.cacheline = Some(cln);
            if let Insert::Exists { first, overflow } = self.cachelines.insert(cln, entry.at) {
                if overflow {
                    sink.emit(Raw {
                        kind: FindingKind::OverlapCounterOverflow,
                        device: Some(dev),
                        at: entry.at,
                        map: Some(first),
                        detail: format!(
                            "[cacheline={:#x}] [phys address={phys:#x}] more than 7 overlapping mappings",
                            cln << super::cacheline::L1_CACHE_SHIFT
                        ),
                    });
                }
                if !skip_cpu_sync {
                    sink.emit(Raw {
                        kind: FindingKind::OverlappingMapping,
                        device: Some(dev),
                        at: entry.at,
                        map: Some(first),
                        detail: format!(
                            "[device address={dma:#018x}] [size={} bytes] [phys address={phys:#x}] [mapped with {}]: its first cacheline is in a live device-writable mapping",
                            entry.size,
                            dir_name(entry.dir)
                        ),
                    });
                }
            }
        }
        self.seq += 1;
        let key = (dev, dma, self.seq);
        self.live.insert(key, entry);
        self.max_live = self.max_live.max(self.live.len() as u64);
        self.unmapped.remove((dev, dma));
        key
    }

    /// Removes a live entry (`hash_bucket_del` + `dma_entry_free`).
    fn remove(&mut self, key: Key) -> Option<Entry> {
        let entry = self.live.remove(&key)?;
        if let Some(cln) = entry.cacheline {
            self.cachelines.remove(cln);
        }
        if entry.group != 0 {
            let gone = match self.groups.get_mut(&entry.group) {
                Some(g) => {
                    g.entries.retain(|&(d, s)| (d, s) != (key.1, key.2));
                    g.entries.is_empty()
                }
                None => false,
            };
            if gone {
                self.drop_group(entry.group);
            }
        }
        Some(entry)
    }

    fn drop_group(&mut self, id: u64) -> Option<Group> {
        let g = self.groups.remove(&id)?;
        if let Some(Some(first)) = g.phys.first()
            && let Some(ids) = self.groups_by_phys.get_mut(&(g.dev, *first))
        {
            ids.retain(|&i| i != id);
            if ids.is_empty() {
                self.groups_by_phys.remove(&(g.dev, *first));
            }
        }
        Some(g)
    }

    fn remember_unmap(&mut self, key: (u16, u64), map: At, unmap: At) {
        self.unmapped.insert(key, (map, unmap));
    }

    /// `bucket_find_exact`: the best fit among the device's live entries at `dma`; none when
    /// several match and none perfectly (Linux then reports "has not allocated" too).
    fn find_exact(
        &self,
        dev: u16,
        dma: u64,
        size: u64,
        ty: MapType,
        dir: TraceDir,
        nents: u32,
    ) -> Option<Key> {
        let wanted = Claim {
            size,
            ty,
            dir,
            sg_nents: nents,
        };
        let here = self.live.range((dev, dma, 0)..=(dev, dma, u64::MAX));
        rules::best_fit(here.map(|(k, e)| (*k, e.claim())), &wanted)
    }

    /// `check_unmap` for single/resource/coherent unmaps.
    #[allow(clippy::too_many_arguments)]
    fn check_unmap(
        &mut self,
        dev: u16,
        dma: u64,
        size: u64,
        dir: TraceDir,
        ty: MapType,
        cpu_addr: (Option<u64>, Option<u64>),
        at: At,
        iommu: Option<&mut IommuState>,
        sink: &mut Sink,
    ) {
        if dma == DMA_MAPPING_ERROR {
            sink.emit(Raw {
                kind: FindingKind::UnmapInvalidAddress,
                device: Some(dev),
                at,
                map: None,
                detail: format!("[device address={dma:#018x}] [size={size} bytes]"),
            });
            return;
        }
        let Some(key) = self.find_exact(dev, dma, size, ty, dir, 0) else {
            if self.not_allocated(dev, dma, size, at, sink)
                && let Some(io) = iommu
            {
                // dma_free traces before tearing down, dma_unmap_page/_resource after.
                let follows = ty == MapType::Coherent;
                io.dma_unmap_before_tracing(dev, Some(&[(dma, size)]), at, follows, sink);
            }
            return;
        };
        let Some(entry) = self.remove(key) else {
            return;
        };
        // dma_free traces before tearing down, dma_unmap_page/_resource after.
        let follows = ty == MapType::Coherent;
        self.compare(dev, dma, size, dir, ty, 0, &entry, at, sink);
        if entry.ty == MapType::Coherent && ty == MapType::Coherent {
            let (phys, virt) = cpu_addr;
            let differs =
                |a: Option<u64>, b: Option<u64>| matches!((a, b), (Some(x), Some(y)) if x != y);
            if differs(entry.phys, phys) || differs(entry.virt, virt) {
                let show = |p: Option<u64>, v: Option<u64>| match (p, v) {
                    (_, Some(v)) => format!("{v:#018x}"),
                    (Some(p), None) => format!("{p:#018x}"),
                    (None, None) => "?".to_owned(),
                };
                sink.emit(Raw {
                    kind: FindingKind::FreeCpuAddressMismatch,
                    device: Some(dev),
                    at,
                    map: Some(entry.at),
                    detail: format!(
                        "[device address={dma:#018x}] [size={size} bytes] [cpu alloc address={}] [cpu free address={}]",
                        show(entry.phys, entry.virt),
                        show(phys, virt)
                    ),
                });
            }
        }
        if let Some(io) = iommu {
            let r = [(dma, entry.size)];
            io.dma_unmap(dev, &r, at, entry.at, entry.backed, follows, sink);
        }
        self.remember_unmap((dev, dma), entry.at, at);
    }

    /// Linux's "has not allocated", told apart into a double unmap, a never-mapped address
    /// (a capture from boot) and a mapping made before tracing began (counted, and
    /// remembered as unmapped: a second unmap is a double unmap). Returns whether the
    /// mapping is unknown (its page-table events are then claimed without a check).
    fn not_allocated(&mut self, dev: u16, dma: u64, size: u64, at: At, sink: &mut Sink) -> bool {
        let recent = self.unmapped.get((dev, dma));
        let (kind, map, detail) = match (
            NotLive::classify(recent.is_some(), self.from_boot),
            recent,
        ) {
            (NotLive::DoubleUnmap, Some((map, first_unmap))) => (
                FindingKind::DoubleUnmap,
                Some(map),
                format!(
                    "[device address={dma:#018x}] [size={size} bytes] already unmapped at line {}",
                    first_unmap.line
                ),
            ),
            (NotLive::BeforeTracing, _) => {
                self.before_tracing += 1;
                // The map is unknown (line 0: no site).
                self.remember_unmap((dev, dma), At::default(), at);
                return true;
            }
            _ => (
                FindingKind::UnmapNotMapped,
                None,
                format!("[device address={dma:#018x}] [size={size} bytes] never mapped"),
            ),
        };
        sink.emit(Raw {
            kind,
            device: Some(dev),
            at,
            map,
            detail,
        });
        // A never-mapped address still claims the page-table events around it (one
        // finding, not one per layer).
        kind == FindingKind::UnmapNotMapped
    }

    /// The field comparisons of `check_unmap`.
    #[allow(clippy::too_many_arguments)]
    fn compare(
        &self,
        dev: u16,
        dma: u64,
        size: u64,
        dir: TraceDir,
        ty: MapType,
        nents: u32,
        entry: &Entry,
        at: At,
        sink: &mut Sink,
    ) {
        let mut emit = |kind, detail: String| {
            sink.emit(Raw {
                kind,
                device: Some(dev),
                at,
                map: Some(entry.at),
                detail,
            });
        };
        let wanted = Claim {
            size,
            ty,
            dir,
            sg_nents: nents,
        };
        let mapped = entry.claim();
        // Nearly every unmap of a sane trace matches its map: skip the field walk.
        if mapped == wanted {
            return;
        }
        for m in rules::mismatches(&mapped, &wanted) {
            let (kind, detail) = match m {
                Mismatch::Size => (
                    FindingKind::UnmapSizeMismatch,
                    format!(
                        "[device address={dma:#018x}] [map size={} bytes] [unmap size={size} bytes]",
                        entry.size
                    ),
                ),
                Mismatch::Type => (
                    FindingKind::UnmapWrongFunction,
                    format!(
                        "[device address={dma:#018x}] [size={size} bytes] [mapped as {}] [unmapped as {}]",
                        entry.ty.name(),
                        ty.name()
                    ),
                ),
                Mismatch::SgCount => (
                    FindingKind::UnmapSgCountMismatch,
                    format!("[map count={}] [unmap count={nents}]", entry.sg_nents),
                ),
                Mismatch::Direction => (
                    FindingKind::UnmapDirectionMismatch,
                    format!(
                        "[device address={dma:#018x}] [size={size} bytes] [mapped with {}] [unmapped with {}]",
                        dir_name(entry.dir),
                        dir_name(dir)
                    ),
                ),
            };
            emit(kind, detail);
        }
    }

    /// Ends the open `MapSg`/`UnmapSg`.
    fn close_list(&mut self, mask: Option<u64>, iommu: Option<&mut IommuState>, sink: &mut Sink) {
        let Some(list) = self.open_list.take() else {
            return;
        };
        match list.head.kind {
            EventKind::MapSg => self.map_sg(&list, mask, iommu, sink),
            _ => self.unmap_sg(&list, iommu, sink),
        }
    }

    /// `debug_dma_map_sg`: one entry per mapped segment (those with a DMA address).
    fn map_sg(
        &mut self,
        list: &OpenList,
        mask: Option<u64>,
        iommu: Option<&mut IommuState>,
        sink: &mut Sink,
    ) {
        let dev = list.head.device;
        let ranges: Vec<(u64, u64)> = list
            .segs
            .iter()
            .filter_map(|s| s.dma.map(|d| (d, s.len)))
            .collect();
        if ranges.is_empty() {
            return;
        }
        let backed = iommu.map_or(Backing::No, |io| io.dma_map(dev, &ranges, list.at, sink));
        self.seq += 1;
        let id = self.seq;
        let mut group = Group {
            dev,
            nents: list.head.nents,
            phys: list.segs.iter().map(|s| s.phys).collect(),
            entries: Vec::with_capacity(ranges.len()),
            at: list.at,
        };
        for s in &list.segs {
            let Some(dma) = s.dma else { continue };
            let entry = Entry {
                size: s.len,
                dir: list.head.dir,
                ty: MapType::Sg,
                phys: s.phys,
                virt: None,
                sg_nents: list.head.nents,
                group: id,
                cacheline: None,
                backed,
                at: list.at,
            };
            let key = self.add(dev, dma, entry, list.ctx.skip_cpu_sync, mask, sink);
            group.entries.push((key.1, key.2));
        }
        if let Some(Some(first)) = group.phys.first() {
            self.groups_by_phys
                .entry((dev, *first))
                .or_default()
                .push(id);
            self.unmapped_sg.remove((dev, *first));
        }
        self.groups.insert(id, group);
    }

    /// `debug_dma_unmap_sg`: finds the list (by the DMA address the importer paired, else
    /// by device and first physical address) and compares count, list and direction.
    fn unmap_sg(&mut self, list: &OpenList, iommu: Option<&mut IommuState>, sink: &mut Sink) {
        let dev = list.head.device;
        let at = list.at;
        let dir = list.head.dir;
        let nents = list.head.nents;
        let first_dma = list.segs.first().and_then(|s| s.dma);
        let first_phys = list.segs.first().and_then(|s| s.phys);
        let mut group_id = None;
        if let Some(dma) = first_dma {
            // Best fit, as bucket_find_exact: an sg entry at that address before any other.
            // Among several (a lost unmap), the list with the same first entry.
            let mut other = None;
            let mut any_group = None;
            for (k, e) in self.live.range((dev, dma, 0)..=(dev, dma, u64::MAX)) {
                if e.group == 0 {
                    other = other.or(Some((*k, *e)));
                } else if first_phys.is_some() && e.phys == first_phys {
                    group_id = Some(e.group);
                    break;
                } else {
                    any_group = any_group.or(Some(e.group));
                }
            }
            if group_id.is_none()
                && let Some(p) = first_phys
            {
                group_id = self
                    .groups_by_phys
                    .get(&(dev, p))
                    .and_then(|ids| ids.first().copied());
            }
            group_id = group_id.or(any_group);
            if group_id.is_none()
                && let Some((key, entry)) = other
            {
                // dma_unmap_sg of a dma_map_page/dma_alloc entry.
                let _ = self.remove(key);
                self.compare(
                    dev,
                    dma,
                    entry.size,
                    dir,
                    MapType::Sg,
                    nents,
                    &entry,
                    at,
                    sink,
                );
                if let Some(io) = iommu {
                    let r = [(dma, entry.size)];
                    io.dma_unmap(dev, &r, at, entry.at, entry.backed, true, sink);
                }
                return;
            }
        }
        if group_id.is_none()
            && let Some(p) = first_phys
        {
            group_id = self
                .groups_by_phys
                .get(&(dev, p))
                .and_then(|ids| ids.first().copied());
        }
        let Some(id) = group_id else {
            let remembered = first_phys.and_then(|p| self.unmapped_sg.get((dev, p)));
            let not_live = NotLive::classify(remembered.is_some(), self.from_boot);
            let (kind, map, mut detail) = match (not_live, remembered) {
                (NotLive::DoubleUnmap, Some((map, first_unmap))) => (
                    FindingKind::DoubleUnmap,
                    Some(map),
                    format!("sg list already unmapped at line {}", first_unmap.line),
                ),
                (NotLive::BeforeTracing, _) => {
                    self.before_tracing += 1;
                    if let Some(p) = first_phys {
                        self.unmapped_sg.insert((dev, p), (At::default(), at));
                    }
                    if let Some(io) = iommu {
                        let ranges: Vec<(u64, u64)> = list
                            .segs
                            .iter()
                            .filter_map(|s| s.dma.map(|d| (d, s.len)))
                            .collect();
                        let ranges = (!ranges.is_empty()).then_some(&ranges[..]);
                        io.dma_unmap_before_tracing(dev, ranges, at, true, sink);
                    }
                    return;
                }
                _ => (
                    FindingKind::UnmapNotMapped,
                    None,
                    "no live dma_map_sg of this device starts at this list's first entry"
                        .to_owned(),
                ),
            };
            if let Some(p) = first_phys {
                let _ = write!(detail, " [first phys address={p:#x}] [count={nents}]");
            }
            sink.emit(Raw {
                kind,
                device: Some(dev),
                at,
                map,
                detail,
            });
            if kind == FindingKind::UnmapNotMapped
                && let Some(io) = iommu
            {
                io.dma_unmap_before_tracing(dev, None, at, true, sink);
            }
            return;
        };
        let Some(group) = self.drop_group(id) else {
            return;
        };
        let mut entries = Vec::with_capacity(group.entries.len());
        for &(dma, seq) in &group.entries {
            if let Some(mut e) = self.live.remove(&(dev, dma, seq)) {
                if let Some(cln) = e.cacheline.take() {
                    self.cachelines.remove(cln);
                }
                entries.push((dma, e));
            }
        }
        let map_at = group.at;
        let mut emit = |kind, detail: String| {
            sink.emit(Raw {
                kind,
                device: Some(dev),
                at,
                map: Some(map_at),
                detail,
            });
        };
        if nents != group.nents {
            emit(
                FindingKind::UnmapSgCountMismatch,
                format!("[map count={}] [unmap count={nents}]", group.nents),
            );
        }
        let unmap_phys: Vec<Option<u64>> = list.segs.iter().map(|s| s.phys).collect();
        if let Some(i) = group
            .phys
            .iter()
            .zip(&unmap_phys)
            .position(|(a, b)| a.is_some() && b.is_some() && a != b)
        {
            emit(
                FindingKind::UnmapSgListMismatch,
                format!(
                    "entry {i}: [map phys address={:#x}] [unmap phys address={:#x}]",
                    group.phys[i].unwrap_or(0),
                    unmap_phys[i].unwrap_or(0)
                ),
            );
        }
        if let Some((dma, e)) = entries.first()
            && e.dir != dir
        {
            emit(
                FindingKind::UnmapDirectionMismatch,
                format!(
                    "[device address={dma:#018x}] [size={} bytes] [mapped with {}] [unmapped with {}]",
                    e.size,
                    dir_name(e.dir),
                    dir_name(dir)
                ),
            );
        }
        if let Some(io) = iommu {
            // One list, one backing.
            let backing = entries.first().map_or(Backing::No, |(_, e)| e.backed);
            let ranges: Vec<(u64, u64)> = entries.iter().map(|(d, e)| (*d, e.size)).collect();
            io.dma_unmap(dev, &ranges, at, map_at, backing, true, sink);
        }
        if let Some(Some(p)) = group.phys.first() {
            self.unmapped_sg.insert((dev, *p), (map_at, at));
        }
    }

    /// `check_sync`.
    #[allow(clippy::too_many_arguments)]
    fn check_sync(
        &mut self,
        dev: u16,
        dma: u64,
        size: u64,
        dir: TraceDir,
        to_cpu: bool,
        start_only: bool,
        at: At,
        sink: &mut Sink,
    ) {
        let end = dma.saturating_add(if start_only { 1 } else { size.max(1) });
        let mut containing = None;
        let mut partial = None;
        for (&(_, start, _), e) in self
            .live
            .range(
                (dev, 0, 0)
                    ..=(
                        dev,
                        dma.saturating_add(size.max(1)).saturating_sub(1),
                        u64::MAX,
                    ),
            )
            .rev()
            .take(SYNC_LOOKBACK)
        {
            let e_end = start.saturating_add(e.size);
            if start <= dma && end <= e_end {
                containing = Some(*e);
                break;
            }
            if partial.is_none() && start < end && dma < e_end {
                partial = Some((start, *e));
            }
        }
        let Some(entry) = containing else {
            let (kind, map, detail) = match partial {
                Some((start, e)) => (
                    FindingKind::SyncOutsideMapping,
                    Some(e.at),
                    format!(
                        "[device address={start:#018x}] [allocation size={} bytes] [sync address={dma:#x}] [sync size={size} bytes]",
                        e.size
                    ),
                ),
                None if NotLive::classify(self.unmapped.contains((dev, dma)), self.from_boot)
                    == NotLive::BeforeTracing =>
                {
                    // Of a mapping made before tracing began (a sync of an address the
                    // trace saw unmapped is still a finding).
                    self.before_tracing += 1;
                    return;
                }
                None => (
                    FindingKind::SyncNotMapped,
                    None,
                    format!("[device address={dma:#018x}] [size={size} bytes]"),
                ),
            };
            sink.emit(Raw {
                kind,
                device: Some(dev),
                at,
                map,
                detail,
            });
            return;
        };
        let mut findings = rules::sync_findings(entry.dir, dir, to_cpu).peekable();
        if findings.peek().is_none() {
            return;
        }
        let detail = format!(
            "[device address={dma:#018x}] [size={} bytes] [mapped with {}] [synced with {}]",
            entry.size,
            dir_name(entry.dir),
            dir_name(dir)
        );
        let mut emit = |kind| {
            sink.emit(Raw {
                kind,
                device: Some(dev),
                at,
                map: Some(entry.at),
                detail: detail.clone(),
            });
        };
        for f in findings {
            emit(match f {
                SyncFinding::Direction => FindingKind::SyncDirectionMismatch,
                SyncFinding::ReadOnlyForCpu => FindingKind::SyncReadOnlyForCpu,
                SyncFinding::WriteOnlyForDevice => FindingKind::SyncWriteOnlyForDevice,
            });
        }
    }

    /// Leaks: the mappings live at the end, one finding per device (as
    /// `dma_debug_device_change` reports a driver's at unbind), naming its oldest; only
    /// counted (`live_at_end`) unless `leaks`.
    pub(super) fn finish(&mut self, sink: &mut Sink, leaks: bool) {
        self.open_list = None;
        if !leaks {
            return;
        }
        let live = self
            .live
            .iter()
            .map(|(&(dev, dma, _), e)| (dev, e.at.line, (dma, *e)));
        for (dev, leak) in rules::leaks_per_device(live) {
            let (count, (dma, e)) = (leak.count, leak.first);
            sink.emit(Raw {
                kind: FindingKind::Leak,
                device: Some(dev),
                at: e.at,
                map: None,
                detail: format!(
                    "[count={count}] still mapped at the end of the trace; oldest: [device address={dma:#018x}] [size={} bytes] [mapped with {}] [mapped as {}]",
                    e.size,
                    dir_name(e.dir),
                    e.ty.name()
                ),
            });
        }
    }
}
