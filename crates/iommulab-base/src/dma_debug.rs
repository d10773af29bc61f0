//! The rules of Linux's dma-debug (`CONFIG_DMA_API_DEBUG`, `kernel/dma/debug.c`), written once
//! for the two checkers that apply them: the live one inside the DMA API
//! (`iommulab_os::dma::debug`, which refuses a bad call before it changes anything) and the
//! trace checker (`iommulab_trace::check`, which reports every finding of a captured run as
//! the kernel prints them). Each checker keeps its own store of live mappings (the live one a
//! hash map per address, the trace one a B-tree ordered for sync lookups) and its own report;
//! what a call is measured against is decided here, so a rule changes in one place.
//!
//! | rule | Linux | here |
//! |---|---|---|
//! | which live entry an unmap refers to | `bucket_find_exact` | [`best_fit`] |
//! | what an unmap must repeat of its map | `check_unmap` | [`mismatches`], in Linux's order |
//! | an unmap or sync of no live entry | "has not allocated" | [`NotLive::classify`] |
//! | telling a double unmap from a never-mapped address | (Linux forgets unmapped entries) | [`RecentlyUnmapped`] |
//! | a sync's direction | `check_sync` | [`sync_findings`] |
//! | mappings left at the end | `dma_debug_device_change` | [`leaks_per_device`] |
//! | `DMA_MAPPING_ERROR` handed back | `check_unmap` | [`DMA_MAPPING_ERROR`] |
//!
//! Directions are the checker's own type ([`Direction`]): the DMA API's
//! [`DmaDirection`] or a trace's (which also has `DMA_NONE`).

use std::collections::BTreeMap;

use crate::addr::DmaDirection;
use crate::hash::AddrHashMap;

/// `DMA_MAPPING_ERROR`: the address a failed `dma_map_*` returns; unmapping it is a finding.
pub const DMA_MAPPING_ERROR: u64 = u64::MAX;

/// Unmapped addresses remembered per generation of [`RecentlyUnmapped`].
pub const UNMAPPED_MEMORY: usize = 1 << 15;

/// Linux's entry types (`type2name`): how a mapping was made.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MapType {
    /// `dma_map_single`/`dma_map_page`.
    Single,
    /// One segment of a `dma_map_sg`.
    Sg,
    /// `dma_alloc_coherent`.
    Coherent,
    /// `dma_map_resource`.
    Resource,
}

impl MapType {
    /// Linux's name for it (`type2name`).
    pub const fn name(self) -> &'static str {
        match self {
            MapType::Single => "single",
            MapType::Sg => "scatter-gather",
            MapType::Coherent => "coherent",
            MapType::Resource => "resource",
        }
    }
}

/// A DMA direction as a checker sees it: the three of the DMA API (a trace's may also be
/// `DMA_NONE`, which equals none of them).
pub trait Direction: Copy + Eq {
    /// `DMA_BIDIRECTIONAL`.
    const BIDIRECTIONAL: Self;
    /// `DMA_TO_DEVICE`.
    const TO_DEVICE: Self;
    /// `DMA_FROM_DEVICE`.
    const FROM_DEVICE: Self;
}

impl Direction for DmaDirection {
    const BIDIRECTIONAL: Self = DmaDirection::Bidirectional;
    const TO_DEVICE: Self = DmaDirection::ToDevice;
    const FROM_DEVICE: Self = DmaDirection::FromDevice;
}

/// The fields of a `dma_debug_entry` that an unmap is compared against: what the map
/// recorded, or what the unmap claims.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Claim<D> {
    /// Bytes.
    pub size: u64,
    /// How it was mapped (or is unmapped).
    pub ty: MapType,
    /// Its direction.
    pub dir: D,
    /// `sg_call_ents`: the `nents` of the `dma_map_sg` call (0 for other types).
    pub sg_nents: u32,
}

/// `bucket_find_exact`: among the live entries at one (device, address), the one an unmap
/// refers to. A perfect fit (size, type, direction and sg count) wins at once; else the best
/// fit — but only if it is the sole entry there: with several and none perfect, Linux
/// reports "has not allocated" (`None`).
#[inline]
pub fn best_fit<K, D: PartialEq>(
    candidates: impl IntoIterator<Item = (K, Claim<D>)>,
    wanted: &Claim<D>,
) -> Option<K> {
    let mut best: Option<(K, u32)> = None;
    let mut matches = 0;
    for (k, e) in candidates {
        matches += 1;
        let level = u32::from(e.size == wanted.size)
            + u32::from(e.ty == wanted.ty)
            + u32::from(e.dir == wanted.dir)
            + u32::from(e.sg_nents == wanted.sg_nents);
        if level == 4 {
            return Some(k);
        }
        if best.as_ref().is_none_or(|&(_, l)| level > l) {
            best = Some((k, level));
        }
    }
    if matches == 1 {
        best.map(|(k, _)| k)
    } else {
        None
    }
}

/// A field an unmap got wrong (`check_unmap`'s comparisons).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mismatch {
    /// "frees DMA memory with different size".
    Size,
    /// "frees DMA memory with wrong function" (single vs scatter-gather vs coherent).
    Type,
    /// "frees DMA sg list with different entry count".
    SgCount,
    /// "frees DMA memory with different direction".
    Direction,
}

/// What `unmap` got wrong against the entry it refers to (`mapped`), in the order Linux checks
/// (and prints) them: size, type, sg count (only when the unmap is an sg unmap that names a
/// count), direction. A checker that stops at the first finding reports the first of these.
pub fn mismatches<D: PartialEq>(
    mapped: &Claim<D>,
    unmap: &Claim<D>,
) -> impl Iterator<Item = Mismatch> + use<D> {
    let sg_count =
        unmap.sg_nents != 0 && unmap.ty == MapType::Sg && unmap.sg_nents != mapped.sg_nents;
    [
        (mapped.size != unmap.size).then_some(Mismatch::Size),
        (mapped.ty != unmap.ty).then_some(Mismatch::Type),
        sg_count.then_some(Mismatch::SgCount),
        (mapped.dir != unmap.dir).then_some(Mismatch::Direction),
    ]
    .into_iter()
    .flatten()
}

/// An unmap (or sync) of an address with no live entry: Linux's "has not allocated", told
/// apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NotLive {
    /// Unmapped before and not mapped since.
    DoubleUnmap,
    /// Never mapped while the checker watched.
    NeverMapped,
    /// Mapped before the checker began watching (a trace that does not start at boot): not
    /// a finding, only counted.
    BeforeTracing,
}

impl NotLive {
    /// Classifies a call on an address with no live entry: `recently_unmapped` if the checker
    /// remembers unmapping it ([`RecentlyUnmapped`]), `from_boot` if the checker saw every
    /// mapping from the start (the live checker always does).
    pub const fn classify(recently_unmapped: bool, from_boot: bool) -> NotLive {
        match (recently_unmapped, from_boot) {
            (true, _) => NotLive::DoubleUnmap,
            (false, false) => NotLive::BeforeTracing,
            (false, true) => NotLive::NeverMapped,
        }
    }
}

/// The recently unmapped (device, address) pairs, with what the checker keeps of each: two
/// generations of at most [`UNMAPPED_MEMORY`] each. When the newer fills up it becomes the
/// older and the older is dropped, so memory stays bounded and at least the last
/// `UNMAPPED_MEMORY` unmaps are remembered (an address unmapped twice further apart than that
/// reads as never mapped).
#[derive(Clone, Debug)]
pub struct RecentlyUnmapped<V> {
    new: AddrHashMap<(u16, u64), V>,
    old: AddrHashMap<(u16, u64), V>,
}

impl<V> Default for RecentlyUnmapped<V> {
    fn default() -> Self {
        Self {
            new: AddrHashMap::default(),
            old: AddrHashMap::default(),
        }
    }
}

impl<V: Copy> RecentlyUnmapped<V> {
    /// Remembers `key` as unmapped.
    pub fn insert(&mut self, key: (u16, u64), v: V) {
        if self.new.len() >= UNMAPPED_MEMORY {
            // The older generation is forgotten; its table is reused (capacity kept), so
            // a long run does not allocate per generation.
            std::mem::swap(&mut self.new, &mut self.old);
            self.new.clear();
        }
        self.new.insert(key, v);
    }

    /// What was kept of `key`'s unmap, if it is remembered.
    pub fn get(&self, key: (u16, u64)) -> Option<V> {
        self.new.get(&key).or_else(|| self.old.get(&key)).copied()
    }

    /// Whether `key` is remembered as unmapped.
    pub fn contains(&self, key: (u16, u64)) -> bool {
        self.get(key).is_some()
    }

    /// Forgets `key` (it is mapped again).
    pub fn remove(&mut self, key: (u16, u64)) {
        if !self.new.is_empty() {
            self.new.remove(&key);
        }
        if !self.old.is_empty() {
            self.old.remove(&key);
        }
    }

    /// Forgets every address of `device` (it detached).
    pub fn forget_device(&mut self, device: u16) {
        self.new.retain(|&(d, _), _| d != device);
        self.old.retain(|&(d, _), _| d != device);
    }
}

/// A sync's finding against the live entry containing it (`check_sync`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyncFinding {
    /// "syncs DMA memory with different direction".
    Direction,
    /// "syncs device read-only DMA memory for cpu".
    ReadOnlyForCpu,
    /// "syncs device write-only DMA memory to device".
    WriteOnlyForDevice,
}

/// `check_sync`'s direction rules for a sync with `synced` (`to_cpu`: `dma_sync_*_for_cpu`)
/// of an entry mapped with `mapped`, in Linux's order; a bidirectional mapping may be synced
/// any way.
pub fn sync_findings<D: Direction>(
    mapped: D,
    synced: D,
    to_cpu: bool,
) -> impl Iterator<Item = SyncFinding> {
    let checked = mapped != D::BIDIRECTIONAL;
    [
        (checked && synced != mapped).then_some(SyncFinding::Direction),
        (checked && to_cpu && mapped != D::FROM_DEVICE && synced != D::TO_DEVICE)
            .then_some(SyncFinding::ReadOnlyForCpu),
        (checked && !to_cpu && mapped != D::TO_DEVICE && synced != D::FROM_DEVICE)
            .then_some(SyncFinding::WriteOnlyForDevice),
    ]
    .into_iter()
    .flatten()
}

/// A device's mappings left live (`dma_debug_device_change` reports a driver's at unbind):
/// how many, and the one the report names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Leak<T> {
    /// Live mappings.
    pub count: u64,
    /// The one named: the first by the checker's order (its oldest, or lowest address).
    pub first: T,
}

/// One [`Leak`] per device of the `live` entries `(device, order, entry)`, naming each
/// device's entry of least `order` (the first met among equals), devices in ascending order.
pub fn leaks_per_device<O: Ord, T>(
    live: impl IntoIterator<Item = (u16, O, T)>,
) -> BTreeMap<u16, Leak<T>> {
    let mut per_dev: BTreeMap<u16, (O, Leak<T>)> = BTreeMap::new();
    for (dev, order, e) in live {
        match per_dev.get_mut(&dev) {
            None => {
                per_dev.insert(dev, (order, Leak { count: 1, first: e }));
            }
            Some((o, leak)) => {
                leak.count += 1;
                if order < *o {
                    *o = order;
                    leak.first = e;
                }
            }
        }
    }
    per_dev.into_iter().map(|(d, (_, l))| (d, l)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(size: u64, ty: MapType, dir: DmaDirection, sg_nents: u32) -> Claim<DmaDirection> {
        Claim {
            size,
            ty,
            dir,
            sg_nents,
        }
    }

    const TO: DmaDirection = DmaDirection::ToDevice;
    const FROM: DmaDirection = DmaDirection::FromDevice;
    const BI: DmaDirection = DmaDirection::Bidirectional;

    /// `bucket_find_exact`: a perfect fit wins among several; a lone entry is the one meant
    /// however badly it fits; several with none perfect is "has not allocated".
    #[test]
    fn best_fit_is_bucket_find_exact() {
        let want = claim(64, MapType::Single, TO, 0);
        let a = claim(64, MapType::Single, FROM, 0);
        let b = claim(64, MapType::Single, TO, 0);
        assert_eq!(best_fit([(0, a), (1, b)], &want), Some(1));
        assert_eq!(best_fit([(0, a)], &want), Some(0));
        let c = claim(128, MapType::Sg, FROM, 2);
        assert_eq!(best_fit([(0, c)], &want), Some(0));
        assert_eq!(best_fit([(0, a), (1, c)], &want), None);
        assert_eq!(best_fit(std::iter::empty::<(u8, _)>(), &want), None);
    }

    /// Every field that differs is reported, in Linux's order; the sg count only for an sg
    /// unmap naming one.
    #[test]
    fn mismatches_come_in_linux_order() {
        let mapped = claim(64, MapType::Sg, TO, 3);
        let all: Vec<_> = mismatches(&mapped, &claim(32, MapType::Single, FROM, 0)).collect();
        assert_eq!(all, [Mismatch::Size, Mismatch::Type, Mismatch::Direction]);
        let sg: Vec<_> = mismatches(&mapped, &claim(32, MapType::Sg, TO, 4)).collect();
        assert_eq!(sg, [Mismatch::Size, Mismatch::SgCount]);
        assert_eq!(
            mismatches(&mapped, &claim(64, MapType::Sg, TO, 0)).count(),
            0
        );
        assert_eq!(mismatches(&mapped, &mapped).count(), 0);
    }

    #[test]
    fn a_call_on_no_live_entry_is_classified() {
        assert_eq!(NotLive::classify(true, false), NotLive::DoubleUnmap);
        assert_eq!(NotLive::classify(true, true), NotLive::DoubleUnmap);
        assert_eq!(NotLive::classify(false, true), NotLive::NeverMapped);
        assert_eq!(NotLive::classify(false, false), NotLive::BeforeTracing);
    }

    /// The newest `UNMAPPED_MEMORY` unmaps at least are remembered; older ones may be
    /// forgotten, so memory is bounded.
    #[test]
    fn recently_unmapped_is_bounded() {
        let mut r = RecentlyUnmapped::default();
        let n = UNMAPPED_MEMORY as u64;
        for a in 0..3 * n {
            r.insert((0, a), a);
        }
        assert!(r.new.len() + r.old.len() <= 2 * UNMAPPED_MEMORY);
        for a in 2 * n..3 * n {
            assert_eq!(r.get((0, a)), Some(a));
        }
        assert!(!r.contains((0, 0)));
        r.remove((0, 3 * n - 1));
        assert!(!r.contains((0, 3 * n - 1)));
        r.insert((1, 5), 5);
        r.forget_device(1);
        assert!(!r.contains((1, 5)));
    }

    #[test]
    fn sync_direction_rules() {
        let f = |m, s, to_cpu| sync_findings(m, s, to_cpu).collect::<Vec<_>>();
        assert!(
            f(BI, TO, true).is_empty(),
            "a bidirectional mapping syncs any way"
        );
        assert!(f(TO, TO, true).is_empty());
        assert!(f(TO, TO, false).is_empty());
        assert!(f(FROM, FROM, true).is_empty());
        assert!(f(FROM, FROM, false).is_empty());
        assert_eq!(
            f(TO, BI, true),
            [SyncFinding::Direction, SyncFinding::ReadOnlyForCpu]
        );
        assert_eq!(
            f(FROM, BI, false),
            [SyncFinding::Direction, SyncFinding::WriteOnlyForDevice]
        );
        assert_eq!(f(TO, FROM, false), [SyncFinding::Direction]);
    }

    #[test]
    fn leaks_name_the_first_by_order() {
        let l = leaks_per_device([(2, 7, 'a'), (0, 5, 'b'), (2, 3, 'c'), (2, 3, 'd')]);
        assert_eq!(l.len(), 2);
        assert_eq!(
            l[&0],
            Leak {
                count: 1,
                first: 'b'
            }
        );
        assert_eq!(
            l[&2],
            Leak {
                count: 3,
                first: 'c'
            }
        );
    }
}
