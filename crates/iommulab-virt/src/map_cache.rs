//! The guest's map cache (S1.2, S1.5; paper §2.1 and §3.1): the set S = P ∪ E of guest
//! pages mapped in the host IOMMU, with a refcount per page and a host-set quota Q.
//!
//! - `map(gfn)`: cached → **hit**, refcount + 1 (an evictable page becomes pinned), no
//!   hypercall. Not cached → **miss**: evict pages of E chosen by the policy until there is
//!   room under Q, map the page with refcount 1 in one hypercall together with the pages the
//!   policy maps ahead (they enter E; their evictions count as evictions). When E cannot
//!   make room the map is **refused** and nothing changes (§2.1 property 4).
//! - `unmap(gfn)`: refcount − 1; at 0 the page joins E but stays mapped (§3.1).
//! - `set_quota(q)`: the host changes Q at run time (§3.1, §3.4). A shrink evicts pages of
//!   E until |S| ≤ q. **If too many pages are pinned, |S| stays above q** (the guest cannot
//!   unmap a page a DMA is using): the outcome reports the excess, every later miss is
//!   refused until the excess is gone, and each unmap that makes a page evictable
//!   immediately evicts one page (the policy's victim) while |S| > q. So |S| ≤ Q holds
//!   always except after a shrink, and then |S| never grows and falls back under Q as
//!   soon as enough pages are unmapped.
//!
//! Layout (≤ 32 bytes of metadata per cached page with [`Lru`](super::Lru) /
//! [`Fifo`](super::Fifo), measured by [`MapCache::metadata_bytes`]): a slab of entries,
//! split in two arrays by field (page number 8 bytes, refcount 4 bytes; a free entry's page
//! field links the free list), an open-addressing index of 4-byte slab indices with linear
//! probing, an FxHash-style multiplicative hash and backward-shift deletion (load ≤ 2/3,
//! so ≤ 10 bytes per page), and the policy's per-slot state (8 bytes for the LRU/FIFO
//! intrusive list). The slab is reserved exactly for the quota (up to 2^20 pages, then
//! grows by doubling). Steady-state operations allocate nothing: the outcome slices
//! borrow reusable buffers.

use std::sync::Arc;

use super::eviction::{CacheSlot, EvictionPolicy, Room};
use super::page_index::PageIndex;
use super::{Error, Lookahead, Result};
use iommulab_base::addr::{Gpa, Pfn};

/// Counters of one map cache.
///
/// `hits + misses + refused == maps`; `misses` is also the number of map hypercalls.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct MapCacheStats {
    /// Map requests from the driver.
    pub maps: u64,
    /// Maps of a cached page (no hypercall).
    pub hits: u64,
    /// Maps of an uncached page that were served (one map hypercall each).
    pub misses: u64,
    /// Maps refused: not cached and no evictable page to make room.
    pub refused: u64,
    /// Pages evicted (unmapped from the IOMMU), for misses, prefetches, quota shrinks and
    /// unmaps above the quota.
    pub evictions: u64,
    /// Unmap requests served (refcount − 1).
    pub unmaps: u64,
    /// Unmap requests rejected (page not cached or not pinned): driver bugs, or in a replay
    /// the unmap of a page whose map was refused.
    pub bad_unmaps: u64,
    /// Pages mapped ahead by a batching policy (beyond the missing page).
    pub prefetched: u64,
    /// Hits on a prefetched page before any other map of it: prefetches that paid off.
    pub prefetch_hits: u64,
    /// Prefetched pages evicted before any map of them.
    pub prefetch_wasted: u64,
}

impl MapCacheStats {
    /// `hits / maps`, `None` without maps.
    pub fn hit_ratio(&self) -> Option<f64> {
        (self.maps > 0).then(|| self.hits as f64 / self.maps as f64)
    }

    /// `misses / maps` (hypercalls per map), `None` without maps.
    pub fn miss_ratio(&self) -> Option<f64> {
        (self.maps > 0).then(|| self.misses as f64 / self.maps as f64)
    }

    /// Adds `other`'s counters (sweeps aggregate runs).
    pub fn merge(&mut self, other: &Self) {
        self.maps += other.maps;
        self.hits += other.hits;
        self.misses += other.misses;
        self.refused += other.refused;
        self.evictions += other.evictions;
        self.unmaps += other.unmaps;
        self.bad_unmaps += other.bad_unmaps;
        self.prefetched += other.prefetched;
        self.prefetch_hits += other.prefetch_hits;
        self.prefetch_wasted += other.prefetch_wasted;
    }
}

/// What a `map` did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MapOutcome<'a> {
    /// The page was cached: refcount + 1, no hypercall.
    Hit,
    /// One map hypercall.
    Miss {
        /// Pages the hypercall maps: the missing page first, then pages mapped ahead.
        mapped: &'a [Pfn<Gpa>],
        /// Pages the hypercall unmaps to stay under the quota (can piggyback, S1.6).
        evicted: &'a [Pfn<Gpa>],
    },
    /// Not cached and no evictable page to make room: the driver sees a mapping error.
    Refused,
}

impl MapOutcome<'_> {
    /// Whether this was a hit.
    pub const fn is_hit(&self) -> bool {
        matches!(self, MapOutcome::Hit)
    }
    /// Whether this was a miss (a hypercall).
    pub const fn is_miss(&self) -> bool {
        matches!(self, MapOutcome::Miss { .. })
    }
    /// Whether the map was refused.
    pub const fn is_refused(&self) -> bool {
        matches!(self, MapOutcome::Refused)
    }
}

/// What an `unmap` did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UnmapOutcome {
    /// The page's refcount after the unmap (0: it joined E).
    pub refcount: u32,
    /// A page evicted because the cache was above its quota (after a shrink).
    pub evicted: Option<Pfn<Gpa>>,
}

/// What a `set_quota` did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QuotaOutcome<'a> {
    /// Pages evicted to get under the new quota (one unmap hypercall).
    pub evicted: &'a [Pfn<Gpa>],
    /// Pages still above the quota because they are pinned (0 when |S| ≤ Q).
    pub over_quota: usize,
}

/// Most slots (pages) a cache can hold; larger quotas act as this.
pub const MAX_PAGES: usize = (u32::MAX - 1) as usize;
/// End of the slab's free list.
const FREE_END: u64 = u64::MAX;
/// Refcount bit: prefetched and not mapped since.
const PREFETCHED: u32 = 1 << 31;
/// Refcount bits.
const COUNT: u32 = PREFETCHED - 1;
/// Slab entries reserved up front at most; past it the slab grows by doubling.
const RESERVE_CAP: usize = 1 << 20;

/// Slab + open-addressing index: everything but the policy, so the policy's callbacks can
/// borrow it while the policy is borrowed mutably.
#[derive(Clone, Debug)]
struct Table {
    /// Page number per slot; for a free slot, the next free slot (or `FREE_END`).
    gfns: Vec<u64>,
    /// Refcount per slot, bit 31 = `PREFETCHED`.
    refs: Vec<u32>,
    /// Page number → slot.
    index: PageIndex,
    /// Head of the free-slot list.
    free: u64,
}

impl Table {
    fn new() -> Self {
        Self {
            gfns: Vec::new(),
            refs: Vec::new(),
            index: PageIndex::default(),
            free: FREE_END,
        }
    }

    /// `(bucket, slot)` of `gfn`.
    #[inline]
    fn find(&self, gfn: u64) -> Option<(usize, u32)> {
        let gfns = &self.gfns;
        self.index.find(gfn, |s| gfns[s as usize])
    }

    #[inline]
    fn contains(&self, gfn: Pfn<Gpa>) -> bool {
        self.find(gfn.get()).is_some()
    }

    #[inline]
    fn count(&self, s: CacheSlot) -> u32 {
        self.refs[s.index()] & COUNT
    }

    #[inline]
    fn link(&mut self, slot: u32) {
        let gfns = &self.gfns;
        self.index
            .insert(slot, gfns[slot as usize], |s| gfns[s as usize]);
    }

    #[inline]
    fn unlink(&mut self, bucket: usize) {
        let gfns = &self.gfns;
        self.index.remove_at(bucket, |s| gfns[s as usize]);
    }

    /// Slab capacity (slots that exist or can be pushed without reallocating).
    fn slot_capacity(&self) -> usize {
        self.gfns.capacity()
    }

    /// Makes room for `cap` slots (exact) and sizes the index for them at load ≤ 2/3.
    fn reserve_slots(&mut self, cap: usize) {
        if cap > self.gfns.capacity() {
            self.gfns.reserve_exact(cap - self.gfns.len());
            self.refs.reserve_exact(cap - self.refs.len());
        }
        let gfns = &self.gfns;
        self.index.reserve(cap, |s| gfns[s as usize]);
    }

    fn bytes(&self) -> usize {
        self.gfns.capacity() * 8 + self.refs.capacity() * 4 + self.index.bytes()
    }
}

/// The guest's map cache over eviction policy `E` (see the [module docs](self)).
///
/// # Examples
/// ```
/// use iommulab_base::addr::Pfn;
/// use iommulab_virt::{Lru, LruConfig, MapCache, MapOutcome};
/// let mut c = MapCache::<Lru>::new(1, &LruConfig::default(), None).unwrap();
/// let (a, b) = (Pfn::new(0xa), Pfn::new(0xb));
/// assert!(c.map(a).is_miss());
/// assert!(c.map(b).is_refused()); // `a` is pinned and the quota is 1
/// c.unmap(a).unwrap(); // `a` stays mapped, evictable
/// assert!(c.map(a).is_hit());
/// c.unmap(a).unwrap();
/// assert_eq!(c.map(b), MapOutcome::Miss { mapped: &[b], evicted: &[a] });
/// ```
#[derive(Clone, Debug)]
pub struct MapCache<E> {
    table: Table,
    policy: E,
    quota: usize,
    /// |S|.
    len: usize,
    /// |P|.
    pinned: usize,
    stats: MapCacheStats,
    /// Reusable outcome buffers (no allocation per operation).
    mapped: Vec<Pfn<Gpa>>,
    evicted: Vec<Pfn<Gpa>>,
    ahead: Vec<Pfn<Gpa>>,
}

impl<E: EvictionPolicy> MapCache<E> {
    /// An empty cache with quota `quota` pages (clamped to [`MAX_PAGES`]). `lookahead` is
    /// required by offline policies (built from the stream this cache will see).
    pub fn new(
        quota: usize,
        config: &E::Config,
        lookahead: Option<Arc<Lookahead>>,
    ) -> Result<Self> {
        let quota = quota.min(MAX_PAGES);
        let reserve = quota.min(RESERVE_CAP);
        let mut table = Table::new();
        table.reserve_slots(reserve);
        let mut policy = E::new(reserve, config, lookahead)?;
        policy.reserve(table.slot_capacity());
        Ok(Self {
            table,
            policy,
            quota,
            len: 0,
            pinned: 0,
            stats: MapCacheStats::default(),
            mapped: Vec::with_capacity(64),
            evicted: Vec::with_capacity(64),
            ahead: Vec::with_capacity(64),
        })
    }

    /// The driver maps `gfn` for DMA. See the [module docs](self).
    #[inline(always)]
    pub fn map(&mut self, gfn: Pfn<Gpa>) -> MapOutcome<'_> {
        self.stats.maps += 1;
        self.policy.on_reference(gfn);
        if let Some((_, s)) = self.table.find(gfn.get()) {
            let r = &mut self.table.refs[s as usize];
            let count = *r & COUNT;
            if *r & PREFETCHED != 0 {
                self.stats.prefetch_hits += 1;
            }
            *r = count + 1;
            if count == 0 {
                self.pinned += 1;
            }
            self.stats.hits += 1;
            self.policy.on_hit(CacheSlot::new(s), gfn, count == 0);
            return MapOutcome::Hit;
        }
        // Miss: evictions needed to insert one page under the quota.
        let need = (self.len + 1).saturating_sub(self.quota);
        if need > self.len - self.pinned {
            self.stats.refused += 1;
            return MapOutcome::Refused;
        }
        self.stats.misses += 1;
        self.mapped.clear();
        self.evicted.clear();
        for _ in 0..need {
            self.evict_one();
        }
        self.insert(gfn, true);
        self.mapped.push(gfn);
        let room = Room {
            free: self.quota - self.len,
            evictable: self.len - self.pinned,
        };
        if room.total() > 0 {
            self.ahead.clear();
            let table = &self.table;
            self.policy.prefetch(
                gfn,
                room,
                |g| table.find(g.get()).map(|(_, s)| CacheSlot::new(s)),
                &mut self.ahead,
            );
            for i in 0..self.ahead.len().min(room.total()) {
                let p = self.ahead[i];
                if self.table.contains(p) {
                    continue;
                }
                if self.len >= self.quota && !self.evict_one() {
                    break;
                }
                self.insert(p, false);
                self.mapped.push(p);
                self.stats.prefetched += 1;
            }
            self.policy.on_batch_end();
        }
        MapOutcome::Miss {
            mapped: &self.mapped,
            evicted: &self.evicted,
        }
    }

    /// The driver is done with `gfn`: refcount − 1; at 0 the page joins E (still mapped),
    /// and if the cache is above its quota one page is evicted.
    ///
    /// # Errors
    /// [`Error::NotMapped`] / [`Error::NotPinned`] for an unmap without a matching map
    /// (counted in [`MapCacheStats::bad_unmaps`]; nothing changes).
    #[inline(always)]
    pub fn unmap(&mut self, gfn: Pfn<Gpa>) -> Result<UnmapOutcome> {
        let Some((_, s)) = self.table.find(gfn.get()) else {
            self.stats.bad_unmaps += 1;
            return Err(Error::NotMapped { gfn: gfn.get() });
        };
        let r = &mut self.table.refs[s as usize];
        let count = *r & COUNT;
        if count == 0 {
            self.stats.bad_unmaps += 1;
            return Err(Error::NotPinned { gfn: gfn.get() });
        }
        *r = count - 1;
        self.stats.unmaps += 1;
        let mut evicted = None;
        if count == 1 {
            self.pinned -= 1;
            self.policy.on_unpin(CacheSlot::new(s), gfn);
            if self.len > self.quota {
                self.evicted.clear();
                if self.evict_one() {
                    evicted = self.evicted.first().copied();
                }
            }
        }
        Ok(UnmapOutcome {
            refcount: count - 1,
            evicted,
        })
    }

    /// The host sets a new quota (clamped to [`MAX_PAGES`]). A shrink evicts evictable
    /// pages (policy order) until |S| ≤ `quota`; pinned pages above it stay (see the
    /// [module docs](self)).
    pub fn set_quota(&mut self, quota: usize) -> QuotaOutcome<'_> {
        self.quota = quota.min(MAX_PAGES);
        self.evicted.clear();
        while self.len > self.quota && self.len > self.pinned {
            if !self.evict_one() {
                break;
            }
        }
        QuotaOutcome {
            evicted: &self.evicted,
            over_quota: self.len.saturating_sub(self.quota),
        }
    }

    /// Evicts the policy's victim into `self.evicted`; false if nothing is evictable.
    #[inline]
    fn evict_one(&mut self) -> bool {
        let table = &self.table;
        let Some(v) = self.policy.victim(|s| table.count(s) == 0) else {
            return false;
        };
        assert_eq!(
            self.table.count(v),
            0,
            "eviction policy {} chose pinned slot {v:?}",
            E::NAME
        );
        let g = self.table.gfns[v.index()];
        let (bucket, _) = self.table.find(g).expect("victim is cached");
        self.policy.on_remove(v, Pfn::new(g));
        self.table.unlink(bucket);
        if self.table.refs[v.index()] & PREFETCHED != 0 {
            self.stats.prefetch_wasted += 1;
        }
        self.table.gfns[v.index()] = self.table.free;
        self.table.free = u64::from(v.get());
        self.len -= 1;
        self.stats.evictions += 1;
        self.evicted.push(Pfn::new(g));
        true
    }

    /// Inserts an uncached page (caller checked room under the quota).
    #[inline]
    fn insert(&mut self, gfn: Pfn<Gpa>, pinned: bool) {
        let t = &mut self.table;
        #[allow(clippy::cast_possible_truncation)] // slots < MAX_PAGES < u32::MAX
        let slot = if t.free != FREE_END {
            let s = t.free as u32;
            t.free = t.gfns[s as usize];
            t.gfns[s as usize] = gfn.get();
            t.refs[s as usize] = if pinned { 1 } else { PREFETCHED };
            s
        } else {
            if t.gfns.len() == t.gfns.capacity() {
                let cap = t.gfns.capacity();
                let want = (cap * 2).max(16).min(self.quota.max(cap + 1));
                t.reserve_slots(want);
                self.policy.reserve(t.slot_capacity());
            }
            let s = t.gfns.len() as u32;
            t.gfns.push(gfn.get());
            t.refs.push(if pinned { 1 } else { PREFETCHED });
            s
        };
        self.table.link(slot);
        self.len += 1;
        if pinned {
            self.pinned += 1;
        }
        self.policy.on_insert(CacheSlot::new(slot), gfn, pinned);
    }

    /// The quota Q.
    pub fn quota(&self) -> usize {
        self.quota
    }
    /// |S|: cached pages.
    pub fn len(&self) -> usize {
        self.len
    }
    /// Whether no page is cached.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// |P|: pinned pages (refcount > 0).
    pub fn pinned(&self) -> usize {
        self.pinned
    }
    /// |E|: evictable pages.
    pub fn evictable(&self) -> usize {
        self.len - self.pinned
    }
    /// Pages above the quota (non-zero only after a shrink blocked by pins).
    pub fn over_quota(&self) -> usize {
        self.len.saturating_sub(self.quota)
    }
    /// Whether `gfn` is cached.
    pub fn contains(&self, gfn: Pfn<Gpa>) -> bool {
        self.table.contains(gfn)
    }
    /// `gfn`'s refcount, `None` if not cached.
    pub fn refcount(&self, gfn: Pfn<Gpa>) -> Option<u32> {
        self.table
            .find(gfn.get())
            .map(|(_, s)| self.table.refs[s as usize] & COUNT)
    }
    /// The counters.
    pub fn stats(&self) -> &MapCacheStats {
        &self.stats
    }
    /// The policy (read-only).
    pub fn policy(&self) -> &E {
        &self.policy
    }
    /// Cached pages with their refcounts, in no particular order.
    pub fn pages(&self) -> impl Iterator<Item = (Pfn<Gpa>, u32)> + '_ {
        self.table.index.ids().map(|s| {
            (
                Pfn::new(self.table.gfns[s as usize]),
                self.table.refs[s as usize] & COUNT,
            )
        })
    }
    /// Heap bytes of the metadata that scales with the cache: slab, index, the policy's
    /// per-slot state and the outcome buffers (the issue's ≤ 32 bytes per cached page).
    /// The prefetcher's history of uncached pages is [`history_bytes`](Self::history_bytes).
    pub fn metadata_bytes(&self) -> usize {
        self.table.bytes()
            + self.policy.metadata_bytes()
            + (self.mapped.capacity() + self.evicted.capacity() + self.ahead.capacity()) * 8
    }

    /// Heap bytes the policy keeps about pages ever mapped, cached or not
    /// ([`EvictionPolicy::history_bytes`]; 0 but for prefetching).
    pub fn history_bytes(&self) -> usize {
        self.policy.history_bytes()
    }

    /// Checks the internal bookkeeping (tests): counts, index, refcounts.
    #[cfg(any(test, feature = "test-utils"))]
    pub fn check(&self) -> std::result::Result<(), String> {
        let pages: Vec<_> = self.pages().collect();
        if pages.len() != self.len {
            return Err(format!(
                "index holds {} pages, len {}",
                pages.len(),
                self.len
            ));
        }
        let pinned = pages.iter().filter(|p| p.1 > 0).count();
        if pinned != self.pinned {
            return Err(format!("{pinned} pinned pages, counter {}", self.pinned));
        }
        for &(g, _) in &pages {
            if !self.contains(g) {
                return Err(format!("{g:?} in the index but not found"));
            }
        }
        Ok(())
    }
}

#[cfg(any(test, feature = "test-utils"))]
impl<E: EvictionPolicy + super::eviction::Dump> MapCache<E> {
    /// The evictable pages in the order the policy would evict them (test-only).
    pub fn eviction_order(&self) -> Vec<Pfn<Gpa>> {
        self.policy
            .dump()
            .into_iter()
            .filter(|&s| self.table.count(s) == 0)
            .map(|s| Pfn::new(self.table.gfns[s.index()]))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eviction::{
        Fifo, FifoConfig, Lru, LruConfig, Opt, OptBatch, OptBatchConfig, OptConfig, Prefetch,
        PrefetchConfig,
    };
    use crate::{PageRef, replay};

    fn p(g: u64) -> Pfn<Gpa> {
        Pfn::new(g)
    }
    fn pages(gs: &[u64]) -> Vec<Pfn<Gpa>> {
        gs.iter().map(|&g| p(g)).collect()
    }
    /// `map g; unmap g` for each page: the no-pinning stream of a single-use driver.
    fn pairs(gs: &[u64]) -> Vec<PageRef> {
        gs.iter()
            .flat_map(|&g| [PageRef::Map(p(g)), PageRef::Unmap(p(g))])
            .collect()
    }
    fn lru(q: usize) -> MapCache<Lru> {
        MapCache::new(q, &LruConfig::default(), None).unwrap()
    }
    fn fifo(q: usize) -> MapCache<Fifo> {
        MapCache::new(q, &FifoConfig::default(), None).unwrap()
    }
    fn touch<E: EvictionPolicy>(c: &mut MapCache<E>, gs: &[u64]) {
        for &g in gs {
            assert!(!c.map(p(g)).is_refused());
            c.unmap(p(g)).unwrap();
        }
    }

    /// S1.3: LRU evicts the least recently used; a hit refreshes the page.
    #[test]
    fn lru_evicts_least_recent_and_hits_refresh() {
        let mut c = lru(3);
        touch(&mut c, &[1, 2, 3, 1]);
        assert_eq!(c.eviction_order(), pages(&[2, 3, 1]));
        assert_eq!(
            c.map(p(4)),
            MapOutcome::Miss {
                mapped: &[p(4)],
                evicted: &[p(2)]
            }
        );
        c.unmap(p(4)).unwrap();
        assert_eq!(c.eviction_order(), pages(&[3, 1, 4]));
    }

    /// S1.3: FIFO evicts in insertion order; hits do not refresh.
    #[test]
    fn fifo_evicts_in_insertion_order_ignoring_hits() {
        let mut c = fifo(3);
        touch(&mut c, &[1, 2, 3, 1]);
        assert_eq!(c.eviction_order(), pages(&[1, 2, 3]));
        touch(&mut c, &[4]);
        assert_eq!(c.eviction_order(), pages(&[2, 3, 4]));
    }

    /// S1.2: pinned pages are skipped, and FIFO evicts a page as soon as it is released.
    #[test]
    fn fifo_skips_pinned_head_then_evicts_it_first() {
        let mut c = fifo(3);
        touch(&mut c, &[2, 3]);
        assert!(c.map(p(1)).is_miss()); // 1 pinned, but newest
        c.unmap(p(1)).unwrap();
        assert!(c.map(p(2)).is_hit()); // 2 (the oldest) pinned
        assert_eq!(
            c.map(p(4)),
            MapOutcome::Miss {
                mapped: &[p(4)],
                evicted: &[p(3)]
            }
        );
        c.unmap(p(2)).unwrap();
        assert_eq!(c.eviction_order(), pages(&[2, 1]));
    }

    /// S1.2: pinned pages leave the LRU list and return as most recent on their last unmap.
    #[test]
    fn lru_pinned_pages_return_as_most_recent() {
        let mut c = lru(3);
        touch(&mut c, &[1, 2, 3]);
        assert!(c.map(p(1)).is_hit());
        assert!(c.map(p(1)).is_hit()); // refcount 2
        assert_eq!(c.eviction_order(), pages(&[2, 3]));
        assert_eq!(c.unmap(p(1)).unwrap().refcount, 1);
        assert_eq!(c.eviction_order(), pages(&[2, 3]));
        c.unmap(p(1)).unwrap();
        assert_eq!(c.eviction_order(), pages(&[2, 3, 1]));
    }

    /// S1.2: no evictable page → the map is refused and nothing changes.
    #[test]
    fn refuses_map_when_everything_is_pinned() {
        let mut c = lru(2);
        assert!(c.map(p(1)).is_miss());
        assert!(c.map(p(2)).is_miss());
        assert!(c.map(p(3)).is_refused());
        assert_eq!((c.len(), c.pinned()), (2, 2));
        assert!(!c.contains(p(3)));
        let s = c.stats();
        assert_eq!((s.maps, s.misses, s.refused), (3, 2, 1));
        assert_eq!(c.unmap(p(3)), Err(Error::NotMapped { gfn: 3 }));
    }

    /// A quota of 0 refuses everything.
    #[test]
    fn zero_quota_refuses_every_map() {
        let mut c = lru(0);
        assert!(c.map(p(1)).is_refused());
        assert_eq!(c.stats().refused, 1);
        assert!(c.is_empty());
    }

    /// S1.5: unmapping an unpinned page is a driver bug the cache rejects.
    #[test]
    fn rejects_unmap_of_unpinned_page() {
        let mut c = lru(2);
        touch(&mut c, &[1]);
        assert_eq!(c.unmap(p(1)), Err(Error::NotPinned { gfn: 1 }));
        assert_eq!(c.stats().bad_unmaps, 1);
        assert_eq!(c.refcount(p(1)), Some(0));
    }

    /// S1.5: a quota shrink evicts what it can; pins keep |S| above Q until they are
    /// released, one eviction per release.
    #[test]
    fn quota_shrink_blocked_by_pins_drains_on_unmap() {
        let mut c = lru(4);
        touch(&mut c, &[1, 2]);
        assert!(c.map(p(3)).is_miss());
        assert!(c.map(p(4)).is_miss());
        let out = c.set_quota(1);
        assert_eq!(out.evicted, &pages(&[1, 2])[..]);
        assert_eq!(out.over_quota, 1);
        assert_eq!(c.len(), 2);
        assert!(c.map(p(5)).is_refused());
        assert!(c.map(p(3)).is_hit()); // hits still work
        c.unmap(p(3)).unwrap();
        let u = c.unmap(p(3)).unwrap();
        assert_eq!(
            u,
            UnmapOutcome {
                refcount: 0,
                evicted: Some(p(3))
            }
        );
        assert_eq!((c.len(), c.over_quota()), (1, 0));
        let u = c.unmap(p(4)).unwrap();
        assert_eq!(u.evicted, None);
        assert_eq!(c.set_quota(8).evicted, &[] as &[Pfn<Gpa>]);
        touch(&mut c, &[5, 6, 7]);
        assert_eq!(c.len(), 4);
    }

    /// Fills a cache of quota `q` with a stream of `seen` distinct pages, each mapped a
    /// few times, and returns `(metadata bytes, history bytes, cached pages)`.
    fn measure<E: EvictionPolicy>(q: usize, seen: u64, cfg: &E::Config) -> (usize, usize, usize) {
        // Each page mapped 4 times in a row: the prefetcher learns followers, OPT has keys.
        let gs: Vec<u64> = (0..4 * seen).map(|i| (i % seen) * 7).collect();
        let refs = pairs(&gs);
        let la = Arc::new(Lookahead::from_refs(&refs));
        let mut c = MapCache::<E>::new(q, cfg, Some(la)).unwrap();
        crate::replay_into(&mut c, &refs);
        (c.metadata_bytes(), c.history_bytes(), c.len())
    }

    /// The issue's bound: ≤ 32 bytes of metadata per cached page for every policy when the
    /// cache is full (quotas chosen around the index's size steps), and for prefetching
    /// ≤ 32 bytes of follower history per page ever mapped (S1.4).
    #[test]
    fn metadata_is_at_most_32_bytes_per_page() {
        fn check<E: EvictionPolicy>(cfg: &E::Config) {
            for q in [100usize, 1000, 3277, 4096, 5000, 100_000] {
                let seen = 2 * q as u64;
                let (bytes, history, len) = measure::<E>(q, seen, cfg);
                assert_eq!(len, q, "{}", E::NAME);
                // Fixed scratch (outcome buffers, a prefetch chain, a batch frontier).
                let fixed = 4096;
                assert!(
                    bytes <= 32 * q + fixed,
                    "{} q={q}: {bytes} bytes = {:.1}/page",
                    E::NAME,
                    bytes as f64 / q as f64
                );
                assert!(
                    history <= 32 * usize::try_from(seen).unwrap() + fixed,
                    "{} q={q}: history {history} bytes = {:.1}/seen page",
                    E::NAME,
                    history as f64 / seen as f64
                );
            }
        }
        check::<Lru>(&LruConfig::default());
        check::<Fifo>(&FifoConfig::default());
        check::<Opt>(&OptConfig::default());
        // Capped, a miss's batch scratch is fixed; uncapped (the default) it grows with the
        // largest batch (at most the quota's pages and the scan window's 4096): 40 bytes a
        // page in the policy (its pages with their next uses, its OPT victims' frontier,
        // the next uses it skips) and 32 in the cache (its lists of pages mapped ahead,
        // mapped and evicted, capacities doubling).
        check::<OptBatch>(&OptBatchConfig {
            batch: Some(32),
            ..OptBatchConfig::default()
        });
        for q in [100usize, 5000] {
            let (bytes, _, _) = measure::<OptBatch>(q, 2 * q as u64, &OptBatchConfig::default());
            assert!(
                bytes <= 32 * q + 4096 + 72 * q.min(4096),
                "opt_batch q={q}: {bytes} bytes"
            );
        }
        check::<Prefetch>(&PrefetchConfig::default());
        // Only the prefetcher keeps history, and it does cover every page seen.
        assert_eq!(measure::<Lru>(100, 200, &LruConfig::default()).1, 0);
        assert!(measure::<Prefetch>(100, 200, &PrefetchConfig::default()).1 >= 200 * 23);
    }

    /// S1.3: OPT evicts the page mapped again farthest in the future.
    #[test]
    fn opt_evicts_farthest_next_use() {
        let refs = pairs(&[1, 2, 3, 1, 2, 4, 1, 2, 3]);
        let la = Arc::new(Lookahead::from_refs(&refs));
        let mut c = MapCache::<Opt>::new(3, &OptConfig::default(), Some(la)).unwrap();
        let mut evicted = Vec::new();
        for r in &refs {
            match *r {
                PageRef::Map(g) => {
                    if let MapOutcome::Miss { evicted: e, .. } = c.map(g) {
                        evicted.extend_from_slice(e);
                    }
                }
                PageRef::Unmap(g) => {
                    c.unmap(g).unwrap();
                }
            }
        }
        // At the map of 4, 3 is used last (after 1 and 2); at the final 3, 4 is never used.
        assert_eq!(evicted, pages(&[3, 4]));
        assert_eq!(c.stats().hits, 4);
        assert!(matches!(
            MapCache::<Opt>::new(3, &OptConfig::default(), None),
            Err(Error::LookaheadRequired { policy: "opt" })
        ));
    }

    /// S1.3: optimal batching on a stream without reuse misses once per batch, the paper's
    /// 1/(N+1) bound with N = batch − 1.
    #[test]
    fn opt_batch_meets_the_no_reuse_bound() {
        let gs: Vec<u64> = (0..1000).collect();
        let refs = pairs(&gs);
        let la = Arc::new(Lookahead::from_refs(&refs));
        for batch in [1usize, 2, 8, 32] {
            let cfg = OptBatchConfig {
                batch: Some(batch),
                ..OptBatchConfig::default()
            };
            let s = replay::<OptBatch>(&refs, batch + 1, &cfg, Some(la.clone())).unwrap();
            assert_eq!(s.misses, 1000u64.div_ceil(batch as u64), "batch {batch}");
            assert_eq!(s.hits + s.misses, 1000);
            assert_eq!(s.prefetch_hits, s.prefetched);
        }
        // Uncapped, the quota ends a batch: a miss maps the next `quota` pages.
        for quota in [3usize, 10, 64] {
            let s = replay::<OptBatch>(&refs, quota, &OptBatchConfig::default(), Some(la.clone()))
                .unwrap();
            assert_eq!(s.misses, 1000u64.div_ceil(quota as u64), "quota {quota}");
        }
    }

    /// Optimal batching maps each page once per batch: a page met again in the scan does
    /// not use up the batch.
    #[test]
    fn opt_batch_takes_a_page_once_per_batch() {
        // 0, then 1 and 2 alternating 50 times, then 3..=20: 21 distinct pages.
        let mut gs = vec![0u64];
        for _ in 0..50 {
            gs.extend([1, 2]);
        }
        gs.extend(3..=20);
        let refs = pairs(&gs);
        let la = Arc::new(Lookahead::from_refs(&refs));
        let s =
            replay::<OptBatch>(&refs, 21, &OptBatchConfig::default(), Some(la.clone())).unwrap();
        assert_eq!((s.misses, s.prefetched), (1, 20));
        // Capped at 4 pages: 0 with 1, 2, 3; then 4..=7, 8..=11, ... — 1 + 17/4 rounded up.
        let cfg = OptBatchConfig {
            batch: Some(4),
            ..OptBatchConfig::default()
        };
        let s = replay::<OptBatch>(&refs, 21, &cfg, Some(la)).unwrap();
        assert_eq!(s.misses, 1 + 17u64.div_ceil(4));
    }

    /// S1.4: a follower seen more than twice is mapped with the missing page, chained.
    #[test]
    fn prefetch_maps_frequent_followers_in_a_chain() {
        let mut c = MapCache::<Prefetch>::new(3, &PrefetchConfig::default(), None).unwrap();
        // Teach 1 → 2 → 3 three times, with 9 in between to push them out (quota 3).
        for _ in 0..3 {
            touch(&mut c, &[1, 2, 3, 9, 10, 11]);
        }
        assert_eq!(c.policy().follower(p(1)), Some(p(2)));
        assert_eq!(c.policy().follower(p(2)), Some(p(3)));
        assert!(!c.contains(p(1)));
        let MapOutcome::Miss { mapped, evicted } = c.map(p(1)) else {
            panic!("expected a miss");
        };
        assert_eq!(mapped, &pages(&[1, 2, 3])[..]);
        assert_eq!(evicted.len(), 3);
        c.unmap(p(1)).unwrap();
        assert!(c.map(p(2)).is_hit());
        assert_eq!(c.stats().prefetch_hits, 1);
        assert_eq!(c.stats().prefetched, 2);
    }

    /// Below the threshold (§3.3: more than 2 occurrences) nothing is prefetched.
    #[test]
    fn prefetch_ignores_followers_seen_twice() {
        let mut c = MapCache::<Prefetch>::new(2, &PrefetchConfig::default(), None).unwrap();
        for _ in 0..2 {
            touch(&mut c, &[1, 2, 9, 10]);
        }
        assert_eq!(c.policy().follower(p(1)), None);
        touch(&mut c, &[1]);
        assert_eq!(c.stats().prefetched, 0);
    }

    /// Stats add up: hits + misses + refused == maps.
    #[test]
    fn stats_add_up() {
        let mut c = lru(2);
        for g in [1, 2, 3, 1, 1, 2] {
            c.map(p(g));
        }
        let s = *c.stats();
        assert_eq!(s.hits + s.misses + s.refused, s.maps);
        assert_eq!(s.hit_ratio(), Some(s.hits as f64 / 6.0));
        c.check().unwrap();
    }
}
