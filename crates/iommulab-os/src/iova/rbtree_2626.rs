//! Linux 2.6.26's IOVA allocator, the one Fujita & Mori measured (S0.5, S0.8):
//! `drivers/pci/iova.c` `alloc_iova` / `find_iova` / `__free_iova` as `intel-iommu.c` called
//! them (`iommu_alloc_iova`, `intel_unmap_single`).
//!
//! What differs from today's walk ([`super::rbtree::RbTree`]):
//! - one cached node, `cached32_node`, used only when the request's (inclusive) limit is
//!   exactly `dma_32bit_pfn`; otherwise, or when it is `NULL`, the walk starts at `rb_last`
//!   (`__get_cached_rbnode`). With the cached node the walk starts at `rb_prev(cached)` with
//!   the limit just below it;
//! - no anchor node, no `max32_alloc_size`, no retry from the top: a walk that reaches the
//!   bottom fails;
//! - size alignment by padding: `alloc_iova` rounds the size up to a power of two and the
//!   walk pads below the limit (`iova_get_pad_size`: `(limit_pfn + 1) % size`);
//! - the insert descends from the walk's last node, `prev` (Mark Gross's "iova RB tree setup
//!   tweak", Feb 2008: `__alloc_and_insert_iova_range`), under two locks
//!   (`iova_alloc_lock`, then `iova_rbtree_lock`);
//! - the cached node moves on insert only for requests at the 32-bit limit
//!   (`__cached_rbnode_insert_update(iovad, saved_pfn, new)`) and on free to
//!   `rb_next(freed)` when the freed range is at or above it (`__cached_rbnode_delete_update`);
//! - the unmap path looks the range up with `find_iova` (a descent from the root under the
//!   rbtree lock) when the driver unmaps, and frees it with `__free_iova` (lock, cached-node
//!   update, `rb_erase`, slab free) when the flush policy lets it go: at once in strict mode,
//!   at the next flush of the deferred array otherwise ([`IovaAllocator::lookup_on_unmap`]).
//!
//! Sources: the walk, the pad, the `prev` insert and the two locks are verified against the
//! posted patch text (linux-mm, 2008-02-11, "iova RB tree setup tweak", against
//! 2.6.24-mm1); `__get_cached_rbnode`, `__cached_rbnode_insert_update`,
//! `__cached_rbnode_delete_update`, `find_iova` and `__free_iova` against the 2.6.2x `iova.c`
//! text of the same functions. Two points are reconstructed, not verified against a 2.6.26
//! tree: that the tweak is in 2.6.26-rc6 (it went in during the 2.6.26 merge window), and
//! whether 2.6.26-rc6's delete update already had the check the 2.6.2x text has ("only cache
//! if it's below 32bit pfn": the cache moves to `rb_next(freed)` only if that node lies below
//! the 32-bit boundary, else to `NULL`). The model has the check: without it a free could
//! cache a node above 4 GiB and the next 32-bit request would be placed above its limit
//! (the property test in `tests/iova_props.rs` finds that at once). The two agree whenever no
//! range lies above 4 GiB, as in every run of the pseudo driver.
//!
//! Deviation: when the walk's `prev` is `NULL` (an empty tree, or a cached node that is the
//! lowest node) 2.6.26 links the new node into a local variable, not the tree; the model
//! inserts from the root instead and counts it in [`RbTree2626::null_prev_inserts`]. A domain
//! always holds its reserved ranges ([`crate::iova::domain::RESERVED_2626_Q35`]), so the case
//! does not arise in the reproductions.
//!
//! For the CPU cache model every node the walk, the lookups, the insert descent and the
//! erase read is logged as one cache line (the `iommu_iova` slab is `SLAB_HWCACHE_ALIGN`:
//! one 40-byte `struct iova` per 64-byte line); the rebalancing's extra touches of siblings
//! are not logged (they are nodes next to the logged path).

use super::rbtree::{NIL, RbTree, SpaceError};
use super::{IovaAllocator, IovaError, IovaStats, LineLog, RangeControl};
use iommulab_base::addr::{CpuId, Iova, Pfn};
use iommulab_base::clock::{ClockRate, Cycles};

/// 2.6.26's `DMA_32BIT_PFN`: `IOVA_PFN(DMA_32BIT_MASK)`, the last page below 4 GiB
/// (inclusive, unlike today's exclusive `dma_32bit_pfn`).
pub const DMA_32BIT_PFN_2626: u64 = (1 << 20) - 1;

/// Linux 2.6.26's red-black-tree IOVA allocator (see the module doc).
///
/// # Examples
///
/// ```
/// use iommulab_base::addr::{CpuId, Pfn};
/// use iommulab_os::iova::{IovaAllocator, RangeControl, RbTree2626};
///
/// let c = CpuId::new(0);
/// let mut t = RbTree2626::new(Pfn::new(1), Pfn::new(1 << 20)).unwrap();
/// t.reserve(Pfn::new(0xfee00), 0x100).unwrap(); // the IOAPIC window
/// let a = t.alloc(c, 1, Pfn::new(1 << 20)).unwrap();
/// assert_eq!(a.get(), 0xfffff); // from rb_last, just below the 32-bit limit
/// t.lookup_on_unmap(c, a, 1);
/// t.free(c, a, 1).unwrap();
/// // The freed node was the cached one: the cache moves to rb_next (none), so the next
/// // allocation walks from rb_last again and reuses the same page.
/// assert_eq!(t.alloc(c, 1, Pfn::new(1 << 20)).unwrap().get(), 0xfffff);
/// ```
#[derive(Debug, Clone)]
pub struct RbTree2626 {
    tree: RbTree,
    /// `iovad->cached32_node`, `NIL` for `NULL`.
    cached32: u32,
    start_pfn: u64,
    end_pfn: u64,
    dma_32bit_pfn: u64,
    null_prev_inserts: u64,
    /// Node slots touched, for the cache model.
    lines: LineLog,
}

impl RbTree2626 {
    /// An empty domain over `[start, end)` with 2.6.26's 32-bit boundary
    /// ([`DMA_32BIT_PFN_2626`]).
    pub fn new(start: Pfn<Iova>, end: Pfn<Iova>) -> Result<Self, SpaceError> {
        Self::with_dma32_boundary(start, end, Pfn::new(DMA_32BIT_PFN_2626))
    }

    /// An empty domain whose cached node serves requests whose inclusive limit is exactly
    /// `dma_32bit_pfn` (tests move it into small spaces).
    pub fn with_dma32_boundary(
        start: Pfn<Iova>,
        end: Pfn<Iova>,
        dma_32bit_pfn: Pfn<Iova>,
    ) -> Result<Self, SpaceError> {
        Ok(RbTree2626 {
            tree: RbTree::unanchored(start, end)?,
            cached32: NIL,
            start_pfn: start.get(),
            end_pfn: end.get(),
            dma_32bit_pfn: dma_32bit_pfn.get(),
            null_prev_inserts: 0,
            lines: LineLog::with_capacity(256),
        })
    }

    /// Live and reserved ranges in address order, as `(first page, pages)`.
    pub fn ranges(&self) -> Vec<(Pfn<Iova>, u64)> {
        self.tree.ranges()
    }

    /// The cached node's range (`None`: `cached32_node` is `NULL`).
    pub fn cached32(&self) -> Option<(Pfn<Iova>, u64)> {
        (self.cached32 != NIL).then(|| {
            let (lo, hi) = self.tree.core_range(self.cached32);
            (Pfn::new(lo), hi - lo + 1)
        })
    }

    /// Inserts that Linux 2.6.26 would have linked into a local variable (see the module doc).
    pub fn null_prev_inserts(&self) -> u64 {
        self.null_prev_inserts
    }

    /// The red-black and ordering invariants, and that the cached node is in the tree.
    pub fn check_invariants(&self) -> Result<(), String> {
        self.tree.check_invariants()?;
        if self.cached32 != NIL {
            let (lo, _) = self.tree.core_range(self.cached32);
            if self.tree.core_find(lo) != self.cached32 {
                return Err("cached32_node is not in the tree".into());
            }
        }
        Ok(())
    }

    #[inline]
    fn touch(&mut self, x: u32) {
        self.tree.core_stats_mut().tree_visits += 1;
        self.lines.push(u64::from(x));
    }

    /// `rb_last`: down the right spine from the root.
    fn last(&mut self) -> u32 {
        let x = self.tree.core_root();
        if x == NIL {
            return NIL;
        }
        self.touch(x);
        self.rightmost(x)
    }

    /// Down the right spine from `x` (already touched), touching every node it steps to.
    fn rightmost(&mut self, mut x: u32) -> u32 {
        loop {
            let (_, r, _) = self.tree.core_links(x);
            if r == NIL {
                return x;
            }
            x = r;
            self.touch(x);
        }
    }

    /// `rb_prev`, touching every node it steps through.
    fn prev(&mut self, mut x: u32) -> u32 {
        let (l, _, _) = self.tree.core_links(x);
        if l != NIL {
            self.touch(l);
            return self.rightmost(l);
        }
        loop {
            let (_, _, p) = self.tree.core_links(x);
            if p == NIL {
                return NIL;
            }
            self.touch(p);
            let (pl, _, _) = self.tree.core_links(p);
            if pl != x {
                return p;
            }
            x = p;
        }
    }

    /// `iova_get_pad_size(size, limit_pfn)`: `size` is a power of two here.
    fn pad(size: u64, limit_pfn: u64) -> u64 {
        if size > 1 { (limit_pfn + 1) % size } else { 0 }
    }

    /// `__alloc_and_insert_iova_range(size, limit_pfn /*inclusive*/, size_aligned = 1)`.
    fn alloc_range(&mut self, size: u64, limit: u64) -> Option<u64> {
        let saved_pfn = limit;
        let mut limit_pfn = limit;
        // `__get_cached_rbnode`.
        let mut curr = if limit_pfn != self.dma_32bit_pfn || self.cached32 == NIL {
            self.last()
        } else {
            let c = self.cached32;
            self.touch(c);
            // A range reserved from page 0 leaves nothing below it (2.6.26 would wrap here:
            // Linux never reserves page 0, a configured window may).
            limit_pfn = self.tree.core_range(c).0.checked_sub(1)?;
            self.prev(c)
        };
        let mut prev = curr;
        while curr != NIL {
            let (lo, hi) = self.tree.core_range(curr);
            if limit_pfn < lo {
                // goto move_left
            } else if limit_pfn < hi {
                limit_pfn = lo.checked_sub(1)?; // adjust_limit_pfn
            } else {
                let pad = Self::pad(size, limit_pfn);
                if hi + size + pad <= limit_pfn {
                    break; // found a free slot
                }
                limit_pfn = lo.checked_sub(1)?;
            }
            prev = curr;
            curr = self.prev(curr);
        }
        let pad = Self::pad(size, limit_pfn);
        if curr == NIL && self.start_pfn + size + pad > limit_pfn {
            return None;
        }
        let pfn_lo = limit_pfn - (size + pad) + 1;
        if prev == NIL {
            self.null_prev_inserts += 1;
        }
        if self.lines.is_on() {
            // The insert's descent from `prev` (counted as visits by the tree itself).
            let mut x = prev;
            while x != NIL {
                self.lines.push(u64::from(x));
                let (l, r, _) = self.tree.core_links(x);
                x = if pfn_lo < self.tree.core_range(x).0 {
                    l
                } else {
                    r
                };
            }
        }
        let z = self.tree.core_insert(pfn_lo, pfn_lo + size - 1, prev)?;
        self.lines.push(u64::from(z));
        // `__cached_rbnode_insert_update(iovad, saved_pfn, new)`.
        if saved_pfn == self.dma_32bit_pfn {
            self.cached32 = z;
        }
        Some(pfn_lo)
    }

    /// `find_iova`: the node holding `pfn`, by a descent from the root (touched, counted).
    fn find_iova(&mut self, pfn: u64) -> u32 {
        let mut x = self.tree.core_root();
        while x != NIL {
            self.touch(x);
            let (lo, hi) = self.tree.core_range(x);
            let (l, r, _) = self.tree.core_links(x);
            if pfn >= lo && pfn <= hi {
                return x;
            }
            x = if pfn < lo { l } else { r };
        }
        NIL
    }

    /// `__cached_rbnode_delete_update` then `rb_erase` (the body of `__free_iova`).
    fn free_node(&mut self, z: u32) {
        if self.cached32 != NIL {
            let c = self.cached32;
            self.touch(c);
            if self.tree.core_range(z).0 >= self.tree.core_range(c).0 {
                // "only cache if it's below 32bit pfn".
                let next = self.tree.core_next(z);
                self.cached32 = if next != NIL && self.tree.core_range(next).0 < self.dma_32bit_pfn
                {
                    next
                } else {
                    NIL
                };
            }
        }
        if self.lines.is_on() {
            let (l, r, p) = self.tree.core_links(z);
            for x in [z, p, l, r] {
                if x != NIL {
                    self.lines.push(u64::from(x));
                }
            }
        }
        self.tree.core_erase(z);
    }
}

impl IovaAllocator for RbTree2626 {
    fn alloc(&mut self, _cpu: CpuId, pages: u64, limit: Pfn<Iova>) -> Result<Pfn<Iova>, IovaError> {
        let space = self.end_pfn - self.start_pfn;
        if pages == 0 || pages > space {
            return Err(IovaError::BadRequest { pages, space });
        }
        // `alloc_iova(..., size_aligned = 1)`: `size = __roundup_pow_of_two(size)`.
        let size = pages.next_power_of_two();
        // `iova_alloc_lock`, then `iova_rbtree_lock` inside it.
        self.tree.core_stats_mut().lock_acquisitions += 2;
        let limit_incl = limit.get().min(self.end_pfn).saturating_sub(1);
        match self.alloc_range(size, limit_incl) {
            Some(pfn) => {
                self.tree.core_stats_mut().allocs += 1;
                Ok(Pfn::new(pfn))
            }
            None => {
                // `alloc_iova_mem` ran before the walk; the failure frees it.
                let s = self.tree.core_stats_mut();
                s.failures += 1;
                s.slab_allocs += 1;
                s.slab_frees += 1;
                Err(IovaError::Exhausted {
                    pages,
                    limit: limit.get(),
                })
            }
        }
    }

    fn lookup_on_unmap(&mut self, _cpu: CpuId, pfn: Pfn<Iova>, _pages: u64) {
        // `intel_unmap_single`: `find_iova(&domain->iovad, IOVA_PFN(dev_addr))`.
        self.tree.core_stats_mut().lock_acquisitions += 1;
        self.find_iova(pfn.get());
    }

    fn free(&mut self, _cpu: CpuId, pfn: Pfn<Iova>, pages: u64) -> Result<(), IovaError> {
        let not_allocated = IovaError::NotAllocated {
            pfn: pfn.get(),
            pages,
        };
        if pages == 0 {
            return Err(not_allocated);
        }
        // The kernel holds the node from `find_iova`: locate it without counting.
        let z = self.tree.core_find(pfn.get());
        if z == NIL {
            return Err(not_allocated);
        }
        let (lo, hi) = self.tree.core_range(z);
        if lo != pfn.get() || hi - lo + 1 != pages.next_power_of_two() {
            return Err(not_allocated);
        }
        self.tree.core_stats_mut().lock_acquisitions += 1;
        self.free_node(z);
        self.tree.core_stats_mut().frees += 1;
        Ok(())
    }

    fn on_tick(&mut self, _now: Cycles, _clock: ClockRate) {}

    fn stats(&self) -> IovaStats {
        self.tree.stats()
    }

    fn metadata_bytes(&self) -> u64 {
        self.tree.metadata_bytes()
    }

    fn space_end(&self) -> Pfn<Iova> {
        Pfn::new(self.end_pfn)
    }

    fn name(&self) -> &'static str {
        "rbtree-2.6.26"
    }

    fn line_log(&self) -> Option<&LineLog> {
        Some(&self.lines)
    }

    fn line_log_mut(&mut self) -> Option<&mut LineLog> {
        Some(&mut self.lines)
    }
}

impl RangeControl for RbTree2626 {
    fn peek_alloc(&self, pages: u64, limit: Pfn<Iova>) -> Option<Pfn<Iova>> {
        let mut copy = self.clone();
        copy.lines.set(false);
        copy.alloc(CpuId::new(0), pages, limit).ok()
    }

    fn place(&mut self, pfn: Pfn<Iova>, pages: u64) -> Result<(), IovaError> {
        let lo = pfn.get();
        let not_free = IovaError::NotFree { pfn: lo, pages };
        let Some(hi) = pages.checked_sub(1).and_then(|p| lo.checked_add(p)) else {
            return Err(not_free);
        };
        if lo < self.start_pfn || hi >= self.end_pfn || self.tree.overlapping(pfn, pages).is_some()
        {
            return Err(not_free);
        }
        let z = self.tree.core_insert(lo, hi, NIL).ok_or(not_free)?;
        if hi <= self.dma_32bit_pfn {
            self.cached32 = z;
        }
        self.tree.core_stats_mut().allocs += 1;
        Ok(())
    }

    /// `reserve_iova` (through `copy_reserved_iova`): as today's, an insert from the root
    /// that merges overlaps and leaves the cached node alone.
    fn reserve(&mut self, pfn: Pfn<Iova>, pages: u64) -> Result<(), IovaError> {
        self.tree.reserve(pfn, pages)
    }

    fn overlapping(&self, pfn: Pfn<Iova>, pages: u64) -> Option<(Pfn<Iova>, u64)> {
        self.tree.overlapping(pfn, pages)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::iova::domain::{RESERVED_2626_Q35, VTD_IOAPIC_WINDOW};

    const C: CpuId = CpuId::new(0);
    const END: u64 = 1 << 20;

    fn domain() -> RbTree2626 {
        let mut t = RbTree2626::new(Pfn::new(1), Pfn::new(END)).unwrap();
        for w in RESERVED_2626_Q35 {
            let (p, n) = w.pages();
            t.reserve(p, n).unwrap();
        }
        t
    }

    fn alloc(t: &mut RbTree2626, pages: u64) -> u64 {
        let p = t.alloc(C, pages, Pfn::new(END)).unwrap().get();
        t.check_invariants().unwrap();
        p
    }

    fn unmap(t: &mut RbTree2626, pfn: u64, pages: u64) {
        t.lookup_on_unmap(C, Pfn::new(pfn), pages);
        t.free(C, Pfn::new(pfn), pages).unwrap();
        t.check_invariants().unwrap();
    }

    /// `__get_cached_rbnode` with `cached32_node == NULL`: the walk starts at `rb_last`
    /// (here the IOAPIC window, the highest reserved range) and takes the top of the space.
    #[test]
    fn first_walk_starts_at_rb_last() {
        let mut t = domain();
        assert_eq!(t.cached32(), None);
        assert_eq!(alloc(&mut t, 1), END - 1);
        assert_eq!(t.cached32(), Some((Pfn::new(END - 1), 1)));
    }

    /// `__cached_rbnode_insert_update` + `__get_cached_rbnode`: while nothing is freed, each
    /// allocation starts at `rb_prev(cached32_node)` with the limit just below the cached
    /// node, so ranges march downward (the deferred array's 250 live ranges).
    #[test]
    fn cached_node_walk_marches_down() {
        let mut t = domain();
        let got: Vec<u64> = (0..4).map(|_| alloc(&mut t, 1)).collect();
        assert_eq!(got, vec![END - 1, END - 2, END - 3, END - 4]);
    }

    /// `__cached_rbnode_delete_update`: freeing a range at or above the cached node moves the
    /// cache to `rb_next(freed)`; with nothing above, `NULL`, and the next walk starts from
    /// `rb_last` again. Strict mode therefore reuses the same page every time.
    #[test]
    fn free_at_or_above_the_cache_resets_it() {
        let mut t = domain();
        for _ in 0..5 {
            let p = alloc(&mut t, 1);
            assert_eq!(p, END - 1);
            unmap(&mut t, p, 1);
            assert_eq!(t.cached32(), None);
        }
        // Deferred: 3 live (a above b above c, c cached). Freeing b (at or above the cache)
        // moves the cache to rb_next(b) = a, unless a is not below `dma_32bit_pfn`: here a is
        // the boundary page 0xfffff itself, so the cache becomes NULL (the test is strict).
        let a = alloc(&mut t, 1);
        let b = alloc(&mut t, 1);
        let c = alloc(&mut t, 1);
        assert_eq!((a, b, c), (END - 1, END - 2, END - 3));
        t.free(C, Pfn::new(b), 1).unwrap();
        assert_eq!(
            t.cached32(),
            None,
            "rb_next(b) = a = 0xfffff is not below the boundary"
        );
        // The walk from rb_last fills the hole b left, then goes on below c.
        let d = alloc(&mut t, 1);
        assert_eq!(d, END - 2, "from rb_last (a): the hole b left");
        let e = alloc(&mut t, 1);
        assert_eq!(e, END - 4, "from rb_prev(d) = c: below c");
        // Freeing the cached node e moves the cache to rb_next(e) = c, below the boundary.
        t.free(C, Pfn::new(e), 1).unwrap();
        assert_eq!(t.cached32(), Some((Pfn::new(c), 1)));
        // Freeing d (above the cache): rb_next(d) = a is the boundary page, so NULL.
        t.free(C, Pfn::new(d), 1).unwrap();
        assert_eq!(t.cached32(), None);
        // Freeing below a NULL cache changes nothing.
        t.free(C, Pfn::new(c), 1).unwrap();
        t.free(C, Pfn::new(a), 1).unwrap();
        assert_eq!(t.cached32(), None);
        t.check_invariants().unwrap();
    }

    /// `__cached_rbnode_delete_update` caches `rb_next(freed)` only below the 32-bit
    /// boundary: a node above it (from a request with a higher limit) never becomes the
    /// cache, so a later 32-bit request stays below its limit.
    #[test]
    fn delete_update_never_caches_above_the_boundary() {
        let mut t =
            RbTree2626::with_dma32_boundary(Pfn::new(1), Pfn::new(64), Pfn::new(15)).unwrap();
        let low = t.alloc(C, 1, Pfn::new(16)).unwrap().get();
        assert_eq!(low, 15);
        let high = t.alloc(C, 1, Pfn::new(64)).unwrap().get();
        assert_eq!(high, 63, "limit above the boundary: from rb_last");
        t.free(C, Pfn::new(low), 1).unwrap();
        assert_eq!(t.cached32(), None, "rb_next is above the boundary: NULL");
        let again = t.alloc(C, 1, Pfn::new(16)).unwrap().get();
        assert!(again < 16, "{again}");
        t.check_invariants().unwrap();
    }

    /// `alloc_iova` rounds the size up to a power of two and `iova_get_pad_size` pads below
    /// the limit so the start is size-aligned: 3 pages take 4, at a multiple of 4.
    #[test]
    fn size_is_rounded_and_aligned_by_padding() {
        let mut t = domain();
        assert_eq!(alloc(&mut t, 1), END - 1);
        let p = alloc(&mut t, 3);
        assert_eq!(p % 4, 0);
        assert_eq!(p, END - 8, "limit END-2, pad (END-1) % 4 = 3");
        assert!(t.free(C, Pfn::new(p), 4).is_ok(), "frees the rounded node");
    }

    /// No `max32_alloc_size`: a walk that reaches the bottom fails (when
    /// `IOVA_START_PFN + size + pad > limit_pfn`, so the first page of the space is never
    /// handed out), and every later request walks again instead of failing at once.
    #[test]
    fn walk_to_the_bottom_fails_and_is_repeated() {
        let mut t = RbTree2626::new(Pfn::new(1), Pfn::new(8)).unwrap();
        t.dma_32bit_pfn = 7;
        t.reserve(Pfn::new(1), 1).unwrap();
        let got: Vec<u64> = (0..6)
            .map(|_| t.alloc(C, 1, Pfn::new(8)).unwrap().get())
            .collect();
        assert_eq!(got, vec![7, 6, 5, 4, 3, 2]);
        assert_eq!(t.null_prev_inserts(), 0);
        for _ in 0..2 {
            let v = t.stats().tree_visits;
            assert!(t.alloc(C, 1, Pfn::new(8)).is_err());
            assert!(t.stats().tree_visits > v, "walked again");
        }
        t.check_invariants().unwrap();
    }

    /// The reserved windows of `dmar_init_reserved_ranges` are never handed out: allocations
    /// that walk down to the IOAPIC window jump below it.
    #[test]
    fn reserved_windows_are_skipped() {
        let mut t = RbTree2626::new(Pfn::new(1), Pfn::new(END)).unwrap();
        let (p, n) = VTD_IOAPIC_WINDOW.pages();
        t.reserve(p, n).unwrap();
        let top = END - 0xfef00; // pages between the window's top and the limit
        for _ in 0..top {
            alloc(&mut t, 1);
        }
        assert_eq!(alloc(&mut t, 1), 0xfedff);
    }

    /// A window reserved from page 0 leaves nothing below it: the walk reports the space
    /// exhausted instead of wrapping its limit below page 0 (a debug build panicked, a release
    /// build handed out a page near 2^64).
    #[test]
    fn a_window_from_page_zero_exhausts_the_space_below_it() {
        let mut t = RbTree2626::new(Pfn::new(1), Pfn::new(END)).unwrap();
        t.reserve(Pfn::new(0), END).unwrap();
        assert!(matches!(
            t.alloc(C, 1, Pfn::new(END)),
            Err(IovaError::Exhausted { .. })
        ));
        // The cached node's path too: a window from 0 below a live range.
        let mut t = RbTree2626::new(Pfn::new(1), Pfn::new(END)).unwrap();
        t.reserve(Pfn::new(0), END - 1).unwrap();
        assert_eq!(alloc(&mut t, 1), END - 1);
        assert!(t.alloc(C, 1, Pfn::new(END)).is_err());
    }

    /// The unmap-time `find_iova` and the free count 1 + 1 locks, the allocation 2.
    #[test]
    fn locks_per_map_and_unmap() {
        let mut t = domain();
        let before = t.stats().lock_acquisitions;
        let p = alloc(&mut t, 1);
        unmap(&mut t, p, 1);
        assert_eq!(t.stats().lock_acquisitions - before, 4);
    }

    /// Node touches are logged only when asked, and `clear_touched_lines` empties the log.
    #[test]
    fn touched_lines_are_logged_on_request() {
        let mut t = domain();
        alloc(&mut t, 1);
        assert!(t.touched_lines().is_empty());
        t.log_touched_lines(true);
        let p = alloc(&mut t, 1);
        assert!(!t.touched_lines().is_empty());
        t.clear_touched_lines();
        unmap(&mut t, p, 1);
        assert!(t.touched_lines().len() >= 2);
    }

    /// A double free or a wrong length is refused and changes nothing.
    #[test]
    fn bad_frees_are_refused() {
        let mut t = domain();
        let p = alloc(&mut t, 1);
        assert!(t.free(C, Pfn::new(p), 2).is_err());
        t.free(C, Pfn::new(p), 1).unwrap();
        assert!(t.free(C, Pfn::new(p), 1).is_err());
        t.check_invariants().unwrap();
    }
}
