//! The IOTLB: a set-associative cache of second-level translations, tagged by domain (S3.2,
//! S2.8).
//!
//! Model: `sets × ways` entries, true LRU inside each set (a per-entry timestamp; the victim is
//! the first invalid way, else the least recently used one). An entry maps one 4 KiB page or
//! one 2 MiB / 1 GiB super-page; a lookup probes the 4 KiB, 2 MiB and 1 GiB tags in turn, as
//! QEMU's hw/i386/intel_iommu.c probes its levels. The set index is the low bits
//! of the entry's page number in its own size (`pfn >> 9k`); the domain is part of the tag,
//! not of the index. Real IOTLB geometry and replacement are not published (S2.8), so the
//! default 32 × 8 = 256 entries is an estimate, a parameter to sweep.
//!
//! Deviation from hardware: QEMU's emulated IOTLB has no associativity and resets itself when
//! full; this one models capacity and conflict misses instead.
//!
//! Complexity: lookup and insert are O(ways) (three probes); a page-selective invalidation of
//! `2^order` pages is O(ways × min(2^order, sets)); domain and global invalidations scan all
//! `sets × ways` entries. No heap allocation after [`Iotlb::new`].

use serde::{Deserialize, Serialize};

use crate::invalidate::InvRequest;
use iommulab_base::addr::{DomainId, Hpa, Iova, PageSize, Perm, Pfn};

/// The page sizes an entry can hold, in probe order.
const SIZES: [PageSize; 3] = [PageSize::Size4K, PageSize::Size2M, PageSize::Size1G];

/// Geometry of an [`Iotlb`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct IotlbConfig {
    /// Number of sets; a power of two (the index is the low bits of the page number).
    pub sets: usize,
    /// Entries per set (associativity). `sets = 1` gives a fully associative IOTLB.
    pub ways: usize,
}

impl Default for IotlbConfig {
    /// 32 sets × 8 ways = 256 entries. An estimate: no seed paper publishes the geometry of a
    /// VT-d IOTLB (S2.8 lists size, associativity and replacement as unknowns to explore).
    fn default() -> Self {
        Self { sets: 32, ways: 8 }
    }
}

impl IotlbConfig {
    /// A validated geometry: `sets` must be a power of two and `ways > 0`.
    ///
    /// ```
    /// use iommulab_hw::IotlbConfig;
    /// assert!(IotlbConfig::new(64, 4).is_ok());
    /// assert!(IotlbConfig::new(48, 4).is_err());
    /// ```
    pub fn new(sets: usize, ways: usize) -> Result<Self, IotlbConfigError> {
        let cfg = Self { sets, ways };
        cfg.validate()?;
        Ok(cfg)
    }

    /// Checks the invariants [`IotlbConfig::new`] enforces (the fields are public, so a
    /// deserialised config is checked again by [`Iotlb::new`]).
    pub fn validate(&self) -> Result<(), IotlbConfigError> {
        if !self.sets.is_power_of_two() {
            return Err(IotlbConfigError::Sets { sets: self.sets });
        }
        if self.ways == 0 {
            return Err(IotlbConfigError::Ways { ways: self.ways });
        }
        if self.sets.checked_mul(self.ways).is_none() {
            return Err(IotlbConfigError::Ways { ways: self.ways });
        }
        Ok(())
    }

    /// Total entries, `sets × ways`.
    pub fn entries(&self) -> usize {
        self.sets.saturating_mul(self.ways)
    }
}

/// An invalid [`IotlbConfig`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IotlbConfigError {
    /// The set count is zero or not a power of two.
    #[error("iotlb.sets = {sets:#x}, expected a power of two greater than zero")]
    Sets {
        /// The rejected set count.
        sets: usize,
    },
    /// The associativity is zero (or `sets × ways` overflows).
    #[error("iotlb.ways = {ways:#x}, expected at least 1 (and sets × ways to fit in usize)")]
    Ways {
        /// The rejected way count.
        ways: usize,
    },
}

/// Counters of one [`Iotlb`]. Invariant: `hits + misses == lookups`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IotlbStats {
    /// Translation lookups (one per device access that reached the IOTLB, whatever the size
    /// probes).
    pub lookups: u64,
    /// Lookups that found an entry.
    pub hits: u64,
    /// Lookups that found none (each leads to a page walk).
    pub misses: u64,
    /// Entries filled after a walk.
    pub inserts: u64,
    /// Valid entries displaced by an insert (capacity or conflict).
    pub evictions: u64,
    /// Valid entries removed by invalidation requests.
    pub invalidated_entries: u64,
}

impl IotlbStats {
    /// `hits / lookups`, or `None` before the first lookup (never NaN).
    pub fn hit_ratio(&self) -> Option<f64> {
        (self.lookups > 0).then(|| self.hits as f64 / self.lookups as f64)
    }

    /// Adds `other`'s counters to `self` (to aggregate runs).
    pub fn merge(&mut self, other: &Self) {
        self.lookups += other.lookups;
        self.hits += other.hits;
        self.misses += other.misses;
        self.inserts += other.inserts;
        self.evictions += other.evictions;
        self.invalidated_entries += other.invalidated_entries;
    }
}

/// One cached translation, as seen from outside the IOTLB.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IotlbEntry {
    /// The domain tag.
    pub domain: DomainId,
    /// First 4 KiB page the entry maps (aligned to `size`).
    pub iova: Pfn<Iova>,
    /// First 4 KiB frame it maps to (aligned to `size`).
    pub hpa: Pfn<Hpa>,
    /// Permissions of the leaf PTE.
    pub perm: Perm,
    /// Page size of the leaf.
    pub size: PageSize,
}

impl IotlbEntry {
    /// Whether the entry covers 4 KiB page `pfn` (of any domain).
    pub fn covers(&self, pfn: Pfn<Iova>) -> bool {
        pfn.pages_since(self.iova)
            .is_some_and(|off| off < self.size.base_pages())
    }

    /// The 4 KiB host frame that `pfn` (inside this entry) maps to.
    pub fn frame_of(&self, pfn: Pfn<Iova>) -> Pfn<Hpa> {
        let off = pfn.get() & (self.size.base_pages() - 1);
        self.hpa.add(off)
    }
}

/// One way of a set. `vpn` is the page number in units of the entry's size; `meta` packs
/// the rest of the tag (valid bit, size, domain) so a tag compare is two integer compares.
#[derive(Clone, Copy, Debug)]
struct Way {
    vpn: u64,
    hpa: u64,
    stamp: u64,
    meta: u32,
    perm: Perm,
}

/// Bit 31 of [`Way::meta`]: the way holds an entry.
const VALID: u32 = 1 << 31;

const EMPTY: Way = Way {
    vpn: 0,
    hpa: 0,
    stamp: 0,
    meta: 0,
    perm: Perm::Read,
};

/// The tag bits other than the page number: valid, size code (bits 17:16), domain (15:0).
const fn meta(domain: DomainId, size: PageSize) -> u32 {
    let code = match size {
        PageSize::Size4K => 0,
        PageSize::Size2M => 1,
        PageSize::Size1G => 2,
    };
    VALID | (code << 16) | domain.get() as u32
}

impl Way {
    const fn valid(&self) -> bool {
        self.meta & VALID != 0
    }

    const fn domain(&self) -> DomainId {
        DomainId::new((self.meta & 0xffff) as u16)
    }

    /// The size code of the tag: 0, 1, 2 for 4 KiB, 2 MiB, 1 GiB (the index into
    /// [`SIZES`] and [`Iotlb`]'s per-size counts).
    const fn size_code(&self) -> usize {
        ((self.meta >> 16) & 3) as usize
    }

    const fn size(&self) -> PageSize {
        match self.size_code() {
            0 => PageSize::Size4K,
            1 => PageSize::Size2M,
            _ => PageSize::Size1G,
        }
    }

    fn entry(&self) -> IotlbEntry {
        let size = self.size();
        IotlbEntry {
            domain: self.domain(),
            iova: Pfn::new(self.vpn << size_shift(size)),
            hpa: Pfn::new(self.hpa),
            perm: self.perm,
            size,
        }
    }

    #[inline]
    fn is(&self, meta: u32, vpn: u64) -> bool {
        self.vpn == vpn && self.meta == meta
    }
}

/// The size code of a tag's `meta` (see [`Way::size_code`]).
const fn size_code_of(meta: u32) -> usize {
    ((meta >> 16) & 3) as usize
}

/// log2 of the number of 4 KiB pages in `size`: 0, 9 or 18.
const fn size_shift(size: PageSize) -> u32 {
    size.shift() - 12
}

/// A set-associative, domain-tagged IOTLB with true LRU per set.
#[derive(Debug, Clone)]
pub struct Iotlb {
    cfg: IotlbConfig,
    /// `sets × ways` ways, set-major: set `s` is `ways[s*W .. (s+1)*W]`. One flat array so a
    /// set is contiguous and nothing allocates after construction.
    ways: Vec<Way>,
    /// LRU clock; every hit and insert stamps the way with the next value.
    clock: u64,
    /// Valid entries of each size, indexed like [`SIZES`]: a lookup or a page-selective
    /// invalidation skips the sizes no entry has (with 4 KiB mappings only, two of its three
    /// probes). Changes no result, only the work.
    held: [u64; 3],
    stats: IotlbStats,
}

impl Iotlb {
    /// An empty IOTLB of the given geometry.
    ///
    /// ```
    /// use iommulab_hw::{Iotlb, IotlbConfig};
    /// let tlb = Iotlb::new(IotlbConfig::default()).unwrap();
    /// assert_eq!(tlb.len(), 0);
    /// ```
    pub fn new(cfg: IotlbConfig) -> Result<Self, IotlbConfigError> {
        cfg.validate()?;
        Ok(Self {
            cfg,
            ways: vec![EMPTY; cfg.entries()],
            clock: 0,
            held: [0; 3],
            stats: IotlbStats::default(),
        })
    }

    /// The geometry.
    pub fn config(&self) -> &IotlbConfig {
        &self.cfg
    }

    /// Counters so far.
    pub fn stats(&self) -> IotlbStats {
        self.stats
    }

    /// Number of valid entries.
    pub fn len(&self) -> usize {
        // At most `sets × ways`, a usize.
        #[expect(
            clippy::cast_possible_truncation,
            reason = "bounded by the entry count"
        )]
        let n = self.held.iter().sum::<u64>() as usize;
        n
    }

    /// Whether no entry is valid.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The set an entry of `size` holding 4 KiB page `pfn` lives in.
    pub fn set_index(&self, pfn: Pfn<Iova>, size: PageSize) -> usize {
        self.set_of_vpn(pfn.get() >> size_shift(size))
    }

    fn set_of_vpn(&self, vpn: u64) -> usize {
        // `sets` is a power of two, so the mask keeps the value below `sets: usize`.
        #[expect(clippy::cast_possible_truncation, reason = "masked below sets")]
        let s = (vpn & (self.cfg.sets as u64 - 1)) as usize;
        s
    }

    fn set_range(&self, set: usize) -> std::ops::Range<usize> {
        let w = self.cfg.ways;
        set * w..set * w + w
    }

    /// Finds the way holding `pfn` for `domain`, probing 4 KiB, 2 MiB, then 1 GiB entries.
    fn find(&self, domain: DomainId, pfn: Pfn<Iova>) -> Option<usize> {
        SIZES.iter().zip(self.held).find_map(|(&size, held)| {
            if held == 0 {
                return None;
            }
            let vpn = pfn.get() >> size_shift(size);
            let range = self.set_range(self.set_of_vpn(vpn));
            let base = range.start;
            let m = meta(domain, size);
            self.ways[range]
                .iter()
                .position(|w| w.is(m, vpn))
                .map(|i| base + i)
        })
    }

    /// Looks up 4 KiB page `pfn` of `domain`: counts a lookup and a hit or miss, and on a hit
    /// makes the entry the most recently used of its set.
    pub fn lookup(&mut self, domain: DomainId, pfn: Pfn<Iova>) -> Option<IotlbEntry> {
        self.stats.lookups += 1;
        match self.find(domain, pfn) {
            Some(i) => {
                self.stats.hits += 1;
                self.clock += 1;
                self.ways[i].stamp = self.clock;
                Some(self.ways[i].entry())
            }
            None => {
                self.stats.misses += 1;
                None
            }
        }
    }

    /// Like [`Iotlb::lookup`] but without counting or touching the LRU order (for invariant
    /// checks).
    pub fn peek(&self, domain: DomainId, pfn: Pfn<Iova>) -> Option<IotlbEntry> {
        self.find(domain, pfn).map(|i| self.ways[i].entry())
    }

    /// Fills an entry. `entry.iova` and `entry.hpa` are rounded down to `entry.size`. An
    /// existing entry with the same tag is overwritten in place; otherwise the victim is the
    /// first invalid way of the set, else its least recently used way (counted as an
    /// eviction). The new entry becomes the most recently used.
    pub fn insert(&mut self, entry: IotlbEntry) {
        let shift = size_shift(entry.size);
        let vpn = entry.iova.get() >> shift;
        let range = self.set_range(self.set_of_vpn(vpn));
        let set = &mut self.ways[range];
        let m = meta(entry.domain, entry.size);
        // One pass over the set: the way with this tag, else the first invalid way, else the
        // least recently used one.
        let (mut same, mut free, mut lru, mut lru_stamp) = (None, None, 0, u64::MAX);
        for (i, w) in set.iter().enumerate() {
            if w.is(m, vpn) {
                same = Some(i);
                break;
            }
            if !w.valid() {
                free = free.or(Some(i));
            } else if w.stamp < lru_stamp {
                (lru, lru_stamp) = (i, w.stamp);
            }
        }
        let slot = match (same, free) {
            (Some(i), _) => i,
            (None, Some(i)) => {
                self.held[size_code_of(m)] += 1;
                i
            }
            (None, None) => {
                self.stats.evictions += 1;
                self.held[set[lru].size_code()] -= 1;
                self.held[size_code_of(m)] += 1;
                lru
            }
        };
        self.stats.inserts += 1;
        self.clock += 1;
        set[slot] = Way {
            vpn,
            hpa: entry.hpa.get() & !((1u64 << shift) - 1),
            stamp: self.clock,
            meta: m,
            perm: entry.perm,
        };
    }

    /// Applies one invalidation request and returns how many valid entries it removed
    /// (also added to [`IotlbStats::invalidated_entries`]). A page-selective request removes
    /// every entry of its domain, of any size, that overlaps the aligned block (S1.10, S3.2).
    pub fn invalidate(&mut self, req: InvRequest) -> u64 {
        let removed = match req {
            InvRequest::Global => Self::drop_where(&mut self.ways, &mut self.held, |_| true),
            InvRequest::Domain(d) => {
                Self::drop_where(&mut self.ways, &mut self.held, |w| w.domain() == d)
            }
            InvRequest::Page { domain, .. } => {
                let (start, end) = req.page_block().unwrap_or((0, u64::MAX));
                let mut removed = 0;
                for (code, size) in SIZES.into_iter().enumerate() {
                    if self.held[code] > 0 {
                        removed += self.invalidate_block(domain, size, start, end);
                    }
                }
                removed
            }
        };
        self.stats.invalidated_entries += removed;
        removed
    }

    /// Removes `domain`'s entries of `size` overlapping pages `[start, end)`.
    fn invalidate_block(&mut self, domain: DomainId, size: PageSize, start: u64, end: u64) -> u64 {
        let shift = size_shift(size);
        let lo = start >> shift;
        let hi = (end - 1) >> shift; // inclusive
        let m = meta(domain, size);
        let hit = |w: &Way| w.meta == m;
        if hi - lo >= self.cfg.sets as u64 {
            // The block touches every set: one scan.
            return Self::drop_where(&mut self.ways, &mut self.held, |w| {
                hit(w) && (lo..=hi).contains(&w.vpn)
            });
        }
        let mut removed = 0;
        for vpn in lo..=hi {
            let range = self.set_range(self.set_of_vpn(vpn));
            removed += Self::drop_where(&mut self.ways[range], &mut self.held, |w| {
                hit(w) && w.vpn == vpn
            });
        }
        removed
    }

    fn drop_where(
        ways: &mut [Way],
        held: &mut [u64; 3],
        mut pred: impl FnMut(&Way) -> bool,
    ) -> u64 {
        let mut n = 0;
        for w in ways.iter_mut().filter(|w| w.valid()) {
            if pred(w) {
                held[w.size_code()] -= 1;
                w.meta &= !VALID;
                n += 1;
            }
        }
        n
    }

    /// The valid entries of set `set`, most recently used first (a test-only `Dump`).
    /// Allocates; not for the hot path.
    pub fn lru_order(&self, set: usize) -> Vec<IotlbEntry> {
        let mut v: Vec<&Way> = self.ways[self.set_range(set)]
            .iter()
            .filter(|w| w.valid())
            .collect();
        v.sort_by_key(|w| std::cmp::Reverse(w.stamp));
        v.into_iter().map(Way::entry).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const D1: DomainId = DomainId::new(1);
    const D2: DomainId = DomainId::new(2);

    fn e4k(domain: DomainId, iova: u64, hpa: u64) -> IotlbEntry {
        IotlbEntry {
            domain,
            iova: Pfn::new(iova),
            hpa: Pfn::new(hpa),
            perm: Perm::ReadWrite,
            size: PageSize::Size4K,
        }
    }

    fn tlb(sets: usize, ways: usize) -> Iotlb {
        Iotlb::new(IotlbConfig::new(sets, ways).unwrap()).unwrap()
    }

    fn iovas(v: &[IotlbEntry]) -> Vec<u64> {
        v.iter().map(|e| e.iova.get()).collect()
    }

    #[test]
    fn rejects_bad_geometry() {
        assert_eq!(
            IotlbConfig::new(0, 4),
            Err(IotlbConfigError::Sets { sets: 0 })
        );
        assert_eq!(
            IotlbConfig::new(12, 4),
            Err(IotlbConfigError::Sets { sets: 12 })
        );
        assert_eq!(
            IotlbConfig::new(4, 0),
            Err(IotlbConfigError::Ways { ways: 0 })
        );
        assert!(Iotlb::new(IotlbConfig { sets: 3, ways: 1 }).is_err());
    }

    /// S2.8: true LRU per set evicts exactly the least recently used way.
    #[test]
    fn lru_evicts_least_recently_used_way() {
        let mut t = tlb(1, 4);
        for p in [10, 11, 12, 13] {
            t.insert(e4k(D1, p, p + 100));
        }
        // Touch 10: the LRU way is now 11.
        assert!(t.lookup(D1, Pfn::new(10)).is_some());
        assert_eq!(iovas(&t.lru_order(0)), vec![10, 13, 12, 11]);
        t.insert(e4k(D1, 14, 114));
        assert_eq!(iovas(&t.lru_order(0)), vec![14, 10, 13, 12]);
        assert!(t.peek(D1, Pfn::new(11)).is_none());
        assert_eq!(t.stats().evictions, 1);
    }

    /// S2.8: entries conflict only within their set.
    #[test]
    fn pages_index_sets_by_low_page_number_bits() {
        let mut t = tlb(4, 1);
        t.insert(e4k(D1, 1, 1));
        t.insert(e4k(D1, 2, 2));
        t.insert(e4k(D1, 5, 5)); // set 1 again: evicts page 1
        assert!(t.peek(D1, Pfn::new(1)).is_none());
        assert!(t.peek(D1, Pfn::new(2)).is_some());
        assert!(t.peek(D1, Pfn::new(5)).is_some());
        assert_eq!(t.set_index(Pfn::new(5), PageSize::Size4K), 1);
    }

    /// S3.2: the IOTLB is tagged by domain; the same IOVA in two domains is two entries.
    #[test]
    fn domain_tag_separates_address_spaces() {
        let mut t = tlb(4, 2);
        t.insert(e4k(D1, 7, 70));
        t.insert(e4k(D2, 7, 700));
        assert_eq!(t.lookup(D1, Pfn::new(7)).unwrap().hpa, Pfn::new(70));
        assert_eq!(t.lookup(D2, Pfn::new(7)).unwrap().hpa, Pfn::new(700));
        assert!(t.lookup(DomainId::new(9), Pfn::new(7)).is_none());
    }

    /// A 2 MiB entry covers all 512 of its 4 KiB pages and translates each to its own frame.
    #[test]
    fn super_page_entry_covers_all_its_pages() {
        let mut t = tlb(8, 2);
        t.insert(IotlbEntry {
            domain: D1,
            iova: Pfn::new(512),
            hpa: Pfn::new(4096),
            perm: Perm::Read,
            size: PageSize::Size2M,
        });
        for p in 512..1024 {
            let e = t.lookup(D1, Pfn::new(p)).unwrap();
            assert_eq!(e.frame_of(Pfn::new(p)), Pfn::new(4096 + p - 512));
        }
        assert!(t.lookup(D1, Pfn::new(1024)).is_none());
        assert!(t.lookup(D1, Pfn::new(511)).is_none());
    }

    /// S1.10, S3.2: a PSI with address mask removes exactly the aligned block's entries.
    #[test]
    fn page_selective_invalidation_removes_exactly_the_aligned_block() {
        let mut t = tlb(64, 4);
        for p in 0..32 {
            t.insert(e4k(D1, p, p));
        }
        // order 3 at page 13: block [8, 16).
        let n = t.invalidate(InvRequest::Page {
            domain: D1,
            pfn: Pfn::new(13),
            order: 3,
        });
        assert_eq!(n, 8);
        for p in 0..32 {
            assert_eq!(
                t.peek(D1, Pfn::new(p)).is_none(),
                (8..16).contains(&p),
                "page {p}"
            );
        }
        assert_eq!(t.stats().invalidated_entries, 8);
    }

    /// A block wider than the set count takes the scan-all path with the same result.
    #[test]
    fn wide_page_invalidation_scans_all_sets() {
        let mut t = tlb(4, 32);
        for p in 0..40 {
            t.insert(e4k(D1, p, p));
            t.insert(e4k(D2, p, p));
        }
        let n = t.invalidate(InvRequest::Page {
            domain: D1,
            pfn: Pfn::new(0),
            order: 5,
        });
        assert_eq!(n, 32);
        assert!((0..32).all(|p| t.peek(D1, Pfn::new(p)).is_none()));
        assert!((32..40).all(|p| t.peek(D1, Pfn::new(p)).is_some()));
        assert!((0..40).all(|p| t.peek(D2, Pfn::new(p)).is_some()));
    }

    /// A PSI on one 4 KiB page inside a super-page removes the super-page entry.
    #[test]
    fn page_invalidation_removes_overlapping_super_page() {
        let mut t = tlb(8, 2);
        t.insert(IotlbEntry {
            domain: D1,
            iova: Pfn::new(0),
            hpa: Pfn::new(0),
            perm: Perm::Read,
            size: PageSize::Size1G,
        });
        assert!(t.peek(D1, Pfn::new(77_777)).is_some());
        t.invalidate(InvRequest::Page {
            domain: D1,
            pfn: Pfn::new(77_777),
            order: 0,
        });
        assert!(t.peek(D1, Pfn::new(0)).is_none());
    }

    /// S1.10: domain-selective invalidation leaves other domains' entries.
    #[test]
    fn domain_invalidation_leaves_other_domains() {
        let mut t = tlb(4, 4);
        for p in 0..4 {
            t.insert(e4k(D1, p, p));
            t.insert(e4k(D2, p, p));
        }
        assert_eq!(t.invalidate(InvRequest::Domain(D1)), 4);
        assert!((0..4).all(|p| t.peek(D1, Pfn::new(p)).is_none()));
        assert!((0..4).all(|p| t.peek(D2, Pfn::new(p)).is_some()));
        assert_eq!(t.invalidate(InvRequest::Global), 4);
        assert!(t.is_empty());
    }

    /// L13: hits + misses == lookups, and the ratio is None before any lookup.
    #[test]
    fn stats_add_up() {
        let mut t = tlb(2, 2);
        assert_eq!(t.stats().hit_ratio(), None);
        t.insert(e4k(D1, 0, 0));
        t.lookup(D1, Pfn::new(0));
        t.lookup(D1, Pfn::new(1));
        t.lookup(D1, Pfn::new(0));
        let s = t.stats();
        assert_eq!((s.lookups, s.hits, s.misses), (3, 2, 1));
        assert_eq!(s.hit_ratio(), Some(2.0 / 3.0));
        let mut m = s;
        m.merge(&s);
        assert_eq!(m.lookups, 6);
    }

    /// Re-inserting a tag updates the entry in place rather than duplicating it.
    #[test]
    fn reinsert_overwrites_same_tag() {
        let mut t = tlb(1, 2);
        t.insert(e4k(D1, 3, 30));
        t.insert(e4k(D1, 3, 31));
        assert_eq!(t.len(), 1);
        assert_eq!(t.peek(D1, Pfn::new(3)).unwrap().hpa, Pfn::new(31));
        assert_eq!(t.stats().evictions, 0);
    }

    /// The IOTLB against a naive model (a list of tagged entries with LRU stamps, every
    /// lookup and invalidation a full scan): the same hits, entries, evictions and counts
    /// for any mix of page sizes, domains and requests. The per-size counts that let the
    /// IOTLB skip probes must never change an answer.
    mod against_naive {
        use super::*;
        use proptest::prelude::*;

        #[derive(Clone, Debug)]
        enum Op {
            Insert(u16, u64, u64, usize),
            Lookup(u16, u64),
            Page(u16, u64, u8),
            Domain(u16),
            Global,
        }

        fn op() -> impl Strategy<Value = Op> {
            prop_oneof![
                6 => (1u16..4, 0u64..1 << 19, 0u64..1 << 20, prop_oneof![8 => Just(0usize), 1 => Just(1), 1 => Just(2)])
                    .prop_map(|(d, p, h, s)| Op::Insert(d, p, h, s)),
                6 => (1u16..4, 0u64..1 << 19).prop_map(|(d, p)| Op::Lookup(d, p)),
                3 => (1u16..4, 0u64..1 << 19, 0u8..12).prop_map(|(d, p, o)| Op::Page(d, p, o)),
                1 => (1u16..4).prop_map(Op::Domain),
                1 => Just(Op::Global),
            ]
        }

        /// `(entry, set, stamp)`.
        #[derive(Default)]
        struct Naive {
            entries: Vec<(IotlbEntry, usize, u64)>,
            clock: u64,
            stats: IotlbStats,
        }

        impl Naive {
            fn tag(e: &IotlbEntry) -> (DomainId, PageSize, u64) {
                (e.domain, e.size, e.iova.get() >> size_shift(e.size))
            }
            fn lookup(&mut self, d: DomainId, pfn: u64) -> Option<IotlbEntry> {
                self.stats.lookups += 1;
                for size in SIZES {
                    let tag = (d, size, pfn >> size_shift(size));
                    if let Some(x) = self.entries.iter_mut().find(|x| Self::tag(&x.0) == tag) {
                        self.stats.hits += 1;
                        self.clock += 1;
                        x.2 = self.clock;
                        return Some(x.0);
                    }
                }
                self.stats.misses += 1;
                None
            }
            fn insert(&mut self, mut e: IotlbEntry, sets: usize, ways: usize) {
                let shift = size_shift(e.size);
                e.iova = Pfn::new(e.iova.get() >> shift << shift);
                e.hpa = Pfn::new(e.hpa.get() >> shift << shift);
                let set = usize::try_from((e.iova.get() >> shift) & (sets as u64 - 1)).unwrap();
                self.stats.inserts += 1;
                self.clock += 1;
                if let Some(x) = self
                    .entries
                    .iter_mut()
                    .find(|x| Self::tag(&x.0) == Self::tag(&e))
                {
                    *x = (e, set, self.clock);
                    return;
                }
                if self.entries.iter().filter(|x| x.1 == set).count() == ways {
                    self.stats.evictions += 1;
                    let lru = (0..self.entries.len())
                        .filter(|&i| self.entries[i].1 == set)
                        .min_by_key(|&i| self.entries[i].2)
                        .unwrap();
                    self.entries.remove(lru);
                }
                self.entries.push((e, set, self.clock));
            }
            fn invalidate(&mut self, req: InvRequest) {
                let before = self.entries.len();
                self.entries.retain(|(e, _, _)| match req {
                    InvRequest::Global => false,
                    InvRequest::Domain(d) => e.domain != d,
                    InvRequest::Page { domain, .. } => {
                        let (start, end) = req.page_block().unwrap();
                        let (lo, hi) = (e.iova.get(), e.iova.get() + e.size.base_pages());
                        e.domain != domain || hi <= start || lo >= end
                    }
                });
                self.stats.invalidated_entries += (before - self.entries.len()) as u64;
            }
        }

        proptest! {
            #[test]
            fn iotlb_matches_naive_model(
                sets in prop_oneof![Just(1usize), Just(4), Just(32)],
                ways in 1usize..5,
                ops in proptest::collection::vec(op(), 1..400),
            ) {
                let mut t = tlb(sets, ways);
                let mut n = Naive::default();
                for op in ops {
                    match op {
                        Op::Insert(d, p, h, s) => {
                            let e = IotlbEntry {
                                domain: DomainId::new(d),
                                iova: Pfn::new(p),
                                hpa: Pfn::new(h),
                                perm: Perm::ReadWrite,
                                size: SIZES[s],
                            };
                            t.insert(e);
                            n.insert(e, sets, ways);
                        }
                        Op::Lookup(d, p) => {
                            let d = DomainId::new(d);
                            prop_assert_eq!(t.lookup(d, Pfn::new(p)), n.lookup(d, p));
                        }
                        Op::Page(d, p, o) => {
                            let r = InvRequest::Page { domain: DomainId::new(d), pfn: Pfn::new(p), order: o };
                            t.invalidate(r);
                            n.invalidate(r);
                        }
                        Op::Domain(d) => {
                            t.invalidate(InvRequest::Domain(DomainId::new(d)));
                            n.invalidate(InvRequest::Domain(DomainId::new(d)));
                        }
                        Op::Global => {
                            t.invalidate(InvRequest::Global);
                            n.invalidate(InvRequest::Global);
                        }
                    }
                    prop_assert_eq!(t.len(), n.entries.len());
                    prop_assert_eq!(t.len(), t.ways.iter().filter(|w| w.valid()).count());
                    prop_assert_eq!(t.stats(), n.stats);
                }
            }
        }
    }
}
