//! Linux VT-d's IOVA allocator (S0.5): a red-black tree of used ranges, searched top-down
//! with next-fit from a cached node (`drivers/iommu/iova.c`, `__alloc_and_insert_iova_range`).
//!
//! One node per live range (`struct iova { rb_node; pfn_hi; pfn_lo }`), keyed by `pfn_lo`.
//! An allocation starts at `cached32_node` (limits at or below the 4 GiB boundary
//! `dma_32bit_pfn`) or `cached_node`, walks downward with `rb_prev` and takes the first gap
//! that fits, at the highest address in it aligned to `roundup_pow_of_two(size)`
//! (`size_aligned = true`, as `alloc_iova_fast` always asks). If the walk reaches the bottom
//! it retries once over the space above the cached node. A failure below 4 GiB records
//! `max32_alloc_size` so later requests of that size fail at once, until something below
//! 4 GiB is freed. An anchor node at pfn `!0` sits above the space, as in Linux. Pfn 0 is never
//! handed out (dma-iommu's `start_pfn = 1`): the constructor rejects a space that holds it.
//!
//! Deviations from Linux:
//! - nodes live in an arena (`Vec`) linked by `u32` indices and are recycled through a free
//!   list instead of `kmem_cache`; `node_allocs` counts arena growth only (a slab miss), so a
//!   steady state allocates nothing;
//! - `free` looks a range up by its exact `[pfn, pfn + pages)` (Linux `find_iova` takes any
//!   pfn inside a range and frees it whole) and rejects anything else without changing state;
//! - the rebalancing is CLRS's (sentinel node, 3rd-edition transplant), not Linux's
//!   `lib/rbtree.c`; the shapes and counts of rotations are the same kind, not identical.
//!
//! Counters: `tree_visits` counts every node touched by the search walk, the insert and
//! find descents and `rb_prev`/`rb_next` steps; `tree_rebalances` counts rotations and
//! recolourings; `lock_acquisitions` counts `iova_rbtree_lock`, once per alloc and per free.
//!
//! Complexity: insert, find and erase are `O(log n)`; the allocation walk is next-fit and
//! `O(k)` in the number of live ranges it passes (the "linear search" Peleg's 4.7 rcache
//! commit cites), `O(1)` expected for the LIFO-ish pattern of a DMA ring.
//!
//! A file per part: this file (the allocator: the top-down next-fit walk, the cached nodes,
//! `max32_alloc_size`, `IovaAllocator`), `tree.rs` (the red-black tree in an arena: insert,
//! erase, rebalancing, `rb_prev`/`rb_next`, and the core `rbtree_2626` walks itself) and
//! `control.rs` (what replays, the validator and tests need besides allocating:
//! `reserve_iova`, exact placement, prediction, the live ranges, the invariant check).

mod control;
mod tree;

use std::mem::size_of;

use super::{IovaAllocator, IovaError, IovaStats};
use iommulab_base::addr::{CpuId, Iova, Pfn};
use iommulab_base::clock::{ClockRate, Cycles};
use tree::{LEFT, Node, RIGHT};

/// The sentinel: index 0, always black, standing in for every NULL child (CLRS's `T.nil`).
pub(crate) const NIL: u32 = 0;
/// The anchor node (`iovad->anchor`), index 1, above all usable space.
const ANCHOR: u32 = 1;
/// `IOVA_ANCHOR`: the anchor's `pfn_lo == pfn_hi`.
const IOVA_ANCHOR: u64 = u64::MAX;
/// The 4 GiB boundary in 4 KiB pages (`dma_32bit_pfn = 1 << (32 - iova_shift)`).
pub const DMA_32BIT_PFN: u64 = 1 << 20;
/// The largest exclusive end a space may have: page numbers are at most 52 bits.
pub const MAX_PFN: u64 = 1 << 52;

/// Why a space `[start, end)` was rejected by an allocator constructor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SpaceError {
    /// The space holds no page.
    #[error("empty IOVA space [{start:#x}, {end:#x})")]
    Empty {
        /// First page.
        start: u64,
        /// Exclusive end page.
        end: u64,
    },
    /// The space holds pfn 0, which is never handed out (dma-iommu `start_pfn = 1`).
    #[error("IOVA space starts at pfn 0, which is never handed out; start at pfn 1")]
    HoldsPfnZero,
    /// The space is larger than this allocator can represent.
    #[error("IOVA space end {end:#x} is above the largest supported end {max:#x}")]
    TooLarge {
        /// Exclusive end page asked for.
        end: u64,
        /// Largest supported exclusive end page.
        max: u64,
    },
}

/// Validates `[start, end)` for an allocator that supports ends up to `max`.
pub(crate) fn check_space(start: u64, end: u64, max: u64) -> Result<(), SpaceError> {
    if start == 0 {
        return Err(SpaceError::HoldsPfnZero);
    }
    if end <= start {
        return Err(SpaceError::Empty { start, end });
    }
    if end > max {
        return Err(SpaceError::TooLarge { end, max });
    }
    Ok(())
}

/// What the allocation search found.
#[derive(Clone, Copy, Debug)]
enum Walk {
    /// `max32_alloc_size` said no before any search.
    FastFail,
    /// The search (and its retry) found no gap: `max32_alloc_size` becomes the size.
    Fail,
    /// The gap's aligned top, and the node to start the insert from.
    Found { pfn: u64, prev: u32 },
}

/// Bytes of metadata one live range costs.
pub const NODE_BYTES: u64 = size_of::<Node>() as u64;

/// Linux VT-d's red-black-tree IOVA allocator (see the module doc).
///
/// # Examples
///
/// ```
/// use iommulab_base::addr::{CpuId, Pfn};
/// use iommulab_os::iova::{IovaAllocator, RbTree};
///
/// // A 1 MiB space of 4 KiB pages: [1, 256).
/// let mut t = RbTree::new(Pfn::new(1), Pfn::new(256)).unwrap();
/// let a = t.alloc(CpuId::new(0), 4, Pfn::new(256)).unwrap();
/// assert_eq!(a.get(), 252); // top-down, aligned to 4 pages
/// t.free(CpuId::new(0), a, 4).unwrap();
/// assert!(t.free(CpuId::new(0), a, 4).is_err()); // double free
/// ```
#[derive(Debug, Clone)]
pub struct RbTree {
    /// Arena: index 0 is the sentinel, 1 the anchor; the rest are ranges or free slots.
    nodes: Vec<Node>,
    root: u32,
    /// Head of the recycled-node list (linked through `left`), `NIL` when empty.
    free_head: u32,
    cached_node: u32,
    cached32_node: u32,
    start_pfn: u64,
    end_pfn: u64,
    dma_32bit_pfn: u64,
    /// "Size of last failed allocation" below 4 GiB: requests this large fail at once.
    max32_alloc_size: u64,
    live: u64,
    stats: IovaStats,
    /// Whether the anchor node is in the tree (Linux ≥ 4.15; the 2.6.26 allocator in
    /// [`crate::iova::rbtree_2626`] uses the tree without it).
    anchored: bool,
}

impl RbTree {
    /// An empty tree over `[start, end)` with the 4 GiB boundary at [`DMA_32BIT_PFN`].
    pub fn new(start: Pfn<Iova>, end: Pfn<Iova>) -> Result<Self, SpaceError> {
        Self::with_dma32_boundary(start, end, Pfn::new(DMA_32BIT_PFN))
    }

    /// An empty tree over `[start, end)` whose `cached32_node` serves limits at or below
    /// `dma_32bit_pfn` (tests move it into small spaces to exercise both cached nodes).
    pub fn with_dma32_boundary(
        start: Pfn<Iova>,
        end: Pfn<Iova>,
        dma_32bit_pfn: Pfn<Iova>,
    ) -> Result<Self, SpaceError> {
        check_space(start.get(), end.get(), MAX_PFN)?;
        let mut nodes = Vec::with_capacity(64);
        nodes.push(Node::blank());
        nodes.push(Node {
            pfn_lo: IOVA_ANCHOR,
            pfn_hi: IOVA_ANCHOR,
            ..Node::blank()
        });
        Ok(RbTree {
            nodes,
            root: ANCHOR,
            free_head: NIL,
            cached_node: ANCHOR,
            cached32_node: ANCHOR,
            start_pfn: start.get(),
            end_pfn: end.get(),
            dma_32bit_pfn: dma_32bit_pfn.get(),
            max32_alloc_size: dma_32bit_pfn.get(),
            live: 0,
            stats: IovaStats::default(),
            anchored: true,
        })
    }

    /// An empty tree over `[start, end)` without the anchor node: the red-black tree core
    /// for [`crate::iova::rbtree_2626::RbTree2626`], which walks it itself (its own cached node,
    /// no anchor, no `max32_alloc_size`). Its `IovaAllocator` methods are not used.
    pub(crate) fn unanchored(start: Pfn<Iova>, end: Pfn<Iova>) -> Result<Self, SpaceError> {
        let mut t = Self::new(start, end)?;
        t.root = NIL;
        t.cached_node = NIL;
        t.cached32_node = NIL;
        t.anchored = false;
        Ok(t)
    }

    /// Live ranges.
    pub fn len(&self) -> u64 {
        self.live
    }

    /// Whether no range is allocated.
    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// First page of the space.
    pub fn space_start(&self) -> Pfn<Iova> {
        Pfn::new(self.start_pfn)
    }

    /// The current `max32_alloc_size` (requests at least this large with a limit at or below
    /// the 4 GiB boundary fail without a search).
    pub fn max32_alloc_size(&self) -> u64 {
        self.max32_alloc_size
    }

    /// The 4 GiB boundary this tree uses, in pages.
    pub fn dma_32bit_pfn(&self) -> Pfn<Iova> {
        Pfn::new(self.dma_32bit_pfn)
    }

    /// `iova_find_limit`: the lowest node with `pfn_lo >= limit_pfn` (the anchor when the
    /// limit is above 4 GiB, Linux's "crude approximation").
    fn find_limit(&self, limit_pfn: u64, visits: &mut u64) -> u32 {
        if limit_pfn > self.dma_32bit_pfn {
            return ANCHOR;
        }
        let mut best = ANCHOR;
        let mut x = self.root;
        while x != NIL {
            *visits += 1;
            if self.n(x).pfn_lo >= limit_pfn {
                best = x;
                x = self.n(x).child[LEFT];
            } else {
                x = self.n(x).child[RIGHT];
            }
        }
        best
    }

    /// The node holding exactly `[pfn_lo, pfn_hi]`, by an `O(log n)` descent.
    fn find_exact(&mut self, pfn_lo: u64, pfn_hi: u64) -> Option<u32> {
        let mut x = self.root;
        while x != NIL {
            self.stats.tree_visits += 1;
            let n = self.n(x);
            if pfn_lo < n.pfn_lo {
                x = n.child[LEFT];
            } else if pfn_lo > n.pfn_lo {
                x = n.child[RIGHT];
            } else {
                return (n.pfn_hi == pfn_hi && x != ANCHOR).then_some(x);
            }
        }
        None
    }

    /// The search of `__alloc_and_insert_iova_range(size, limit_pfn /*exclusive*/,
    /// size_aligned = true)`, without its insert: read-only, so [`RbTree::peek_alloc`]
    /// predicts with it. Nodes stepped through are added to `visits`.
    fn walk(&self, size: u64, limit_pfn: u64, visits: &mut u64) -> Walk {
        // `align_mask <<= fls_long(size - 1)`.
        let shift = u64::BITS - (size - 1).leading_zeros();
        let align_mask = if shift >= u64::BITS {
            0
        } else {
            !0u64 << shift
        };
        if limit_pfn <= self.dma_32bit_pfn && size >= self.max32_alloc_size {
            return Walk::FastFail;
        }
        let mut curr = if limit_pfn <= self.dma_32bit_pfn {
            self.cached32_node
        } else {
            self.cached_node
        };
        *visits += 1;
        let retry_pfn = self.n(curr).pfn_hi;
        let mut high_pfn = limit_pfn;
        let mut low_pfn = self.start_pfn;
        loop {
            let mut new_pfn;
            let mut prev;
            loop {
                high_pfn = high_pfn.min(self.n(curr).pfn_lo);
                new_pfn = high_pfn.wrapping_sub(size) & align_mask;
                prev = curr;
                curr = self.prev(curr, visits);
                if curr == NIL || new_pfn > self.n(curr).pfn_hi || new_pfn < low_pfn {
                    break;
                }
            }
            if high_pfn < size || new_pfn < low_pfn {
                if low_pfn == self.start_pfn && retry_pfn < limit_pfn {
                    // Retry once over the space above the cached node.
                    high_pfn = limit_pfn;
                    low_pfn = retry_pfn + 1;
                    curr = self.find_limit(limit_pfn, visits);
                    continue;
                }
                return Walk::Fail;
            }
            return Walk::Found { pfn: new_pfn, prev };
        }
    }

    /// `__alloc_and_insert_iova_range(size, limit_pfn /*exclusive*/, size_aligned = true)`.
    fn alloc_range(&mut self, size: u64, limit_pfn: u64) -> Option<u64> {
        let mut visits = 0;
        let walk = self.walk(size, limit_pfn, &mut visits);
        self.stats.tree_visits += visits;
        match walk {
            Walk::FastFail => None,
            Walk::Fail => {
                self.max32_alloc_size = size;
                None
            }
            Walk::Found { pfn, prev } => {
                let z = self.new_node(pfn, pfn + size - 1)?;
                self.insert(z, prev);
                self.cached_insert_update(z);
                Some(pfn)
            }
        }
    }

    /// `__cached_rbnode_insert_update`: the new node becomes the cached node of its side of
    /// the 4 GiB boundary.
    fn cached_insert_update(&mut self, z: u32) {
        if self.n(z).pfn_hi < self.dma_32bit_pfn {
            self.cached32_node = z;
        } else {
            self.cached_node = z;
        }
    }

    /// `__cached_rbnode_delete_update`, before the erase.
    fn cached_delete_update(&mut self, z: u32) {
        let (lo, hi) = (self.n(z).pfn_lo, self.n(z).pfn_hi);
        let c32 = self.cached32_node;
        if z == c32 || (hi < self.dma_32bit_pfn && lo >= self.n(c32).pfn_lo) {
            self.cached32_node = self.next(z);
        }
        if lo < self.dma_32bit_pfn {
            self.max32_alloc_size = self.dma_32bit_pfn;
        }
        if lo >= self.n(self.cached_node).pfn_lo {
            self.cached_node = self.next(z);
        }
    }
}

impl IovaAllocator for RbTree {
    fn alloc(&mut self, _cpu: CpuId, pages: u64, limit: Pfn<Iova>) -> Result<Pfn<Iova>, IovaError> {
        let space = self.end_pfn - self.start_pfn;
        if pages == 0 || pages > space {
            return Err(IovaError::BadRequest { pages, space });
        }
        self.stats.lock_acquisitions += 1;
        let limit_pfn = limit.get().min(self.end_pfn);
        match self.alloc_range(pages, limit_pfn) {
            Some(pfn) => {
                self.stats.allocs += 1;
                self.stats.slab_allocs += 1; // one `alloc_iova_mem` per insert
                self.live += 1;
                self.stats.peak_metadata_bytes =
                    self.stats.peak_metadata_bytes.max(self.live * NODE_BYTES);
                Ok(Pfn::new(pfn))
            }
            None => {
                self.stats.failures += 1;
                Err(IovaError::Exhausted {
                    pages,
                    limit: limit.get(),
                })
            }
        }
    }

    fn free(&mut self, _cpu: CpuId, pfn: Pfn<Iova>, pages: u64) -> Result<(), IovaError> {
        self.stats.lock_acquisitions += 1;
        let not_allocated = IovaError::NotAllocated {
            pfn: pfn.get(),
            pages,
        };
        let lo = pfn.get();
        let Some(hi) = pages.checked_sub(1).and_then(|p| lo.checked_add(p)) else {
            return Err(not_allocated);
        };
        let Some(z) = self.find_exact(lo, hi) else {
            return Err(not_allocated);
        };
        self.cached_delete_update(z);
        self.erase(z);
        let head = self.free_head;
        *self.m(z) = Node::free_link(head);
        self.free_head = z;
        self.live -= 1;
        self.stats.frees += 1;
        self.stats.slab_frees += 1; // one `free_iova_mem` per erase
        Ok(())
    }

    fn on_tick(&mut self, _now: Cycles, _clock: ClockRate) {}

    fn stats(&self) -> IovaStats {
        self.stats
    }

    fn metadata_bytes(&self) -> u64 {
        self.live * NODE_BYTES
    }

    fn space_end(&self) -> Pfn<Iova> {
        Pfn::new(self.end_pfn)
    }

    fn name(&self) -> &'static str {
        "rbtree"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CPU: CpuId = CpuId::new(0);

    /// A tree over `[start, end)` with the 4 GiB boundary at `dma32`.
    fn tree(start: u64, end: u64, dma32: u64) -> RbTree {
        RbTree::with_dma32_boundary(Pfn::new(start), Pfn::new(end), Pfn::new(dma32)).unwrap()
    }

    fn alloc(t: &mut RbTree, pages: u64, limit: u64) -> Result<u64, IovaError> {
        let r = t.alloc(CPU, pages, Pfn::new(limit)).map(Pfn::get);
        t.check_invariants().unwrap();
        r
    }

    fn free(t: &mut RbTree, pfn: u64, pages: u64) -> Result<(), IovaError> {
        let r = t.free(CPU, Pfn::new(pfn), pages);
        t.check_invariants().unwrap();
        r
    }

    fn assert_ranges(t: &RbTree, want: &[(u64, u64)]) {
        let got: Vec<(u64, u64)> = t.ranges().into_iter().map(|(p, n)| (p.get(), n)).collect();
        assert_eq!(got, want);
    }

    /// The node fits Linux's 40-byte `struct iova` budget (the brief's bound is 48).
    #[test]
    fn node_is_at_most_48_bytes() {
        assert!(size_of::<Node>() <= 48, "{}", size_of::<Node>());
        assert_eq!(NODE_BYTES, 32);
    }

    /// S0.5: allocation is top-down and next-fit: each range goes just below the last.
    ///
    /// ```text
    /// pfn  1                 12  13  14  15  16 (end)
    ///      |....free.........| c | b | a  a |
    /// ```
    #[test]
    fn allocates_top_down_from_the_cached_node() {
        let mut t = tree(1, 16, 1 << 20);
        assert_eq!(alloc(&mut t, 2, 16), Ok(14)); // a: [14,16), aligned to 2
        assert_eq!(alloc(&mut t, 1, 16), Ok(13)); // b
        assert_eq!(alloc(&mut t, 1, 16), Ok(12)); // c
        assert_ranges(&t, &[(12, 1), (13, 1), (14, 2)]);
    }

    /// Size-aligned: a 3-page range starts on a 4-page boundary (`roundup_pow_of_two`).
    ///
    /// ```text
    /// pfn  1 ... 11 12 13 14 15 | 16 (end)
    ///               [a  a  a] x |
    /// ```
    #[test]
    fn aligns_to_the_rounded_up_power_of_two() {
        let mut t = tree(1, 16, 1 << 20);
        assert_eq!(alloc(&mut t, 1, 16), Ok(15)); // x
        assert_eq!(alloc(&mut t, 3, 16), Ok(12)); // (15 - 3) & !3
        assert_ranges(&t, &[(12, 3), (15, 1)]);
    }

    /// `__cached_rbnode_delete_update`: freeing at or above the cached node moves it to the
    /// freed node's successor, so the hole is the next thing reused.
    ///
    /// ```text
    /// pfn  12  13  14  15 | 16        free b, then alloc 1:   12  13  14  15
    ///       c   b  [a  a] |                                    c   d  [a  a]
    /// ```
    #[test]
    fn free_moves_the_cached_node_so_the_hole_is_reused() {
        let mut t = tree(1, 16, 1 << 20);
        assert_eq!(alloc(&mut t, 2, 16), Ok(14));
        assert_eq!(alloc(&mut t, 1, 16), Ok(13));
        assert_eq!(alloc(&mut t, 1, 16), Ok(12));
        free(&mut t, 13, 1).unwrap();
        assert_eq!(alloc(&mut t, 1, 16), Ok(13));
        assert_eq!(alloc(&mut t, 1, 16), Ok(11));
    }

    /// The walk goes downward from the cached node; only when it reaches the bottom does it
    /// retry once over the space above the cached node.
    ///
    /// ```text
    /// pfn  1  2  3  4  5  6  7  8 | 9 (end)
    ///      c [a  a]             d |
    /// a: limit 4; c: next-fit below a although 4..9 is free; d: c's walk fails, retry from top
    /// ```
    #[test]
    fn retries_above_the_cached_node_when_the_bottom_is_full() {
        let mut t = tree(1, 9, 1 << 20);
        assert_eq!(alloc(&mut t, 2, 4), Ok(2)); // a
        assert_eq!(alloc(&mut t, 1, 9), Ok(1)); // c
        assert_eq!(alloc(&mut t, 1, 9), Ok(8)); // d
    }

    /// `max32_alloc_size`: after a failure below 4 GiB, requests at least as large fail without
    /// a search, smaller ones still search, and any free below 4 GiB resets it.
    ///
    /// ```text
    /// pfn  1  2  3  4 | 5 (end)     4 pages aligned to 4 would need pfn 0
    ///        [b  b]   |
    /// ```
    #[test]
    fn max32_alloc_size_fails_fast_until_a_free() {
        let mut t = tree(1, 5, 1 << 20);
        assert!(matches!(
            alloc(&mut t, 4, 5),
            Err(IovaError::Exhausted { .. })
        ));
        assert_eq!(t.max32_alloc_size(), 4);
        let visits = t.stats().tree_visits;
        assert!(alloc(&mut t, 4, 5).is_err());
        assert_eq!(t.stats().tree_visits, visits, "fast fail touches no node");
        assert_eq!(alloc(&mut t, 2, 5), Ok(2)); // b
        free(&mut t, 2, 2).unwrap();
        assert_eq!(t.max32_alloc_size(), 1 << 20);
        assert_eq!(t.stats().failures, 2);
    }

    /// Frees must name a live range exactly; anything else is an error and changes nothing.
    ///
    /// ```text
    /// pfn  12  13  14  15 | 16
    ///          [a   a   a]      (3 pages aligned to 4 → starts at 12; here a = [12,15))
    /// ```
    #[test]
    fn rejects_partial_double_and_unknown_frees() {
        let mut t = tree(1, 16, 1 << 20);
        let a = alloc(&mut t, 3, 16).unwrap();
        assert_eq!(a, 12);
        let before = t.ranges();
        for (pfn, pages) in [(a, 2), (a, 4), (a + 1, 2), (1, 1), (0, 0), (u64::MAX, 2)] {
            assert_eq!(
                free(&mut t, pfn, pages),
                Err(IovaError::NotAllocated { pfn, pages })
            );
        }
        assert_eq!(t.ranges(), before);
        free(&mut t, a, 3).unwrap();
        assert!(free(&mut t, a, 3).is_err());
        assert!(t.is_empty());
    }

    /// Exhaustion is an error value, and every page can be handed out (pfn 0 never is).
    ///
    /// ```text
    /// pfn  0 | 1  2  3  4  5  6  7  8 | 9
    ///      x | all used                |
    /// ```
    #[test]
    fn exhaustion_is_an_error_not_a_panic() {
        let mut t = tree(1, 9, 1 << 20);
        let mut got: Vec<u64> = (0..8).map(|_| alloc(&mut t, 1, 9).unwrap()).collect();
        got.sort_unstable();
        assert_eq!(got, (1..9).collect::<Vec<_>>());
        assert_eq!(
            alloc(&mut t, 1, 9),
            Err(IovaError::Exhausted { pages: 1, limit: 9 })
        );
        assert_eq!(
            alloc(&mut t, 9, 9),
            Err(IovaError::BadRequest { pages: 9, space: 8 })
        );
        assert!(matches!(
            alloc(&mut t, 0, 9),
            Err(IovaError::BadRequest { .. })
        ));
    }

    /// Nodes are recycled: a steady alloc/free loop never grows the arena.
    #[test]
    fn recycles_nodes_in_steady_state() {
        let mut t = tree(1, 1 << 20, 1 << 20);
        let mut ring = std::collections::VecDeque::new();
        for i in 0..10_000u64 {
            let pages = 1 + i % 4;
            ring.push_back((t.alloc(CPU, pages, Pfn::new(1 << 20)).unwrap(), pages));
            if ring.len() > 32 {
                let (p, n) = ring.pop_front().unwrap();
                t.free(CPU, p, n).unwrap();
            }
        }
        t.check_invariants().unwrap();
        assert_eq!(t.stats().node_allocs, 33);
        assert_eq!(t.stats().lock_acquisitions, 10_000 + 10_000 - 32);
        assert_eq!(t.stats().peak_metadata_bytes, 33 * NODE_BYTES);
        assert_eq!(t.metadata_bytes(), 32 * NODE_BYTES);
    }

    /// Rejects spaces holding pfn 0, empty spaces and spaces above 52-bit page numbers.
    #[test]
    fn constructor_validates_the_space() {
        let new = |s, e| RbTree::new(Pfn::new(s), Pfn::new(e)).map(|_| ());
        assert_eq!(new(0, 10), Err(SpaceError::HoldsPfnZero));
        assert_eq!(new(5, 5), Err(SpaceError::Empty { start: 5, end: 5 }));
        assert!(matches!(
            new(1, MAX_PFN + 1),
            Err(SpaceError::TooLarge { .. })
        ));
        assert_eq!(new(1, MAX_PFN), Ok(()));
    }

    /// Random allocs and frees keep the red-black invariants (a cheap local fuzz; the
    /// property tests check against the naive oracle).
    #[test]
    fn random_churn_keeps_invariants() {
        let mut t = tree(1, 4096, 2048);
        let mut live: Vec<(u64, u64)> = Vec::new();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..4000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            if !x.is_multiple_of(3) || live.is_empty() {
                let pages = 1 + (x >> 8) % 9;
                let limit = if (x >> 20).is_multiple_of(2) {
                    2048
                } else {
                    4096
                };
                if let Ok(p) = alloc(&mut t, pages, limit) {
                    assert!(p >= 1 && p + pages <= limit);
                    live.push((p, pages));
                }
            } else {
                let i = usize::try_from((x >> 16) % live.len() as u64).unwrap();
                let (p, n) = live.swap_remove(i);
                free(&mut t, p, n).unwrap();
            }
        }
        assert_eq!(t.len(), live.len() as u64);
        assert!(t.stats().tree_rebalances > 0);
    }

    /// `peek_alloc` predicts every allocation of a random churn exactly and changes nothing
    /// (not even the counters).
    #[test]
    fn peek_alloc_predicts_alloc_without_changing_state() {
        let mut t = tree(1, 4096, 2048);
        let mut live: Vec<(u64, u64)> = Vec::new();
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..3000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            if !x.is_multiple_of(3) || live.is_empty() {
                let pages = 1 + (x >> 8) % 9;
                let limit = if (x >> 20).is_multiple_of(2) {
                    2048
                } else {
                    4096
                };
                let stats = t.stats();
                let ranges = t.ranges();
                let peek = t.peek_alloc(pages, Pfn::new(limit)).map(Pfn::get);
                assert_eq!(t.stats(), stats);
                assert_eq!(t.ranges(), ranges);
                let got = alloc(&mut t, pages, limit).ok();
                if got.is_some() || t.max32_alloc_size() != pages {
                    assert_eq!(peek, got);
                }
                if let Some(p) = got {
                    live.push((p, pages));
                }
            } else {
                let i = usize::try_from((x >> 16) % live.len() as u64).unwrap();
                let (p, n) = live.swap_remove(i);
                free(&mut t, p, n).unwrap();
            }
        }
    }

    /// `reserve_iova`: a reserved window is never handed out; an overlapping reservation
    /// extends the lowest overlapped node downward and adds a node only for the part above
    /// (`__adjust_overlap_range`); a reservation inside an existing one changes nothing.
    ///
    /// ```text
    /// pfn  1 ... 8 9 10 11 12 13 14 15 | 16
    ///              [r  r  r] [a]        r: reserved 9..12; a: allocations skip it
    /// ```
    #[test]
    fn reserved_windows_are_skipped_and_merge_like_linux() {
        let mut t = tree(1, 16, 1 << 20);
        t.reserve(Pfn::new(9), 3).unwrap();
        t.check_invariants().unwrap();
        assert_eq!(alloc(&mut t, 4, 16), Ok(12));
        assert_eq!(
            alloc(&mut t, 1, 16),
            Ok(8),
            "the walk steps over the window"
        );
        assert_eq!(t.stats().allocs, 2);
        // Overlapping [7, 10]: node [8] extends down to 7, and [9, 11] already covers the rest.
        t.reserve(Pfn::new(7), 4).unwrap();
        t.check_invariants().unwrap();
        assert_ranges(&t, &[(7, 2), (9, 3), (12, 4)]);
        // [5, 13]: [7,8] extends to 5; 9..11 is covered; 12..15 covers 12..13.
        t.reserve(Pfn::new(5), 9).unwrap();
        assert_ranges(&t, &[(5, 4), (9, 3), (12, 4)]);
        // Wholly inside: nothing changes.
        t.reserve(Pfn::new(10), 1).unwrap();
        assert_ranges(&t, &[(5, 4), (9, 3), (12, 4)]);
        // A gap between two overlapped nodes: the second extends down over it.
        let mut u = tree(1, 64, 1 << 20);
        u.reserve(Pfn::new(10), 2).unwrap();
        u.reserve(Pfn::new(20), 2).unwrap();
        u.reserve(Pfn::new(8), 20).unwrap();
        u.check_invariants().unwrap();
        assert_ranges(&u, &[(8, 4), (12, 10), (22, 6)]);
        assert!(u.reserve(Pfn::new(3), 0).is_err());
    }

    /// `place` takes exactly the range asked for, moves the cached node to it as an
    /// allocation would, and refuses a range that is not wholly free and inside the space.
    #[test]
    fn place_takes_a_free_range_and_moves_the_cached_node() {
        let mut t = tree(1, 64, 1 << 20);
        assert_eq!(alloc(&mut t, 1, 64), Ok(63));
        t.place(Pfn::new(20), 4).unwrap();
        t.check_invariants().unwrap();
        assert_eq!(
            alloc(&mut t, 1, 64),
            Ok(19),
            "next-fit continues below the placed range"
        );
        for (p, n) in [(22, 1), (19, 1), (60, 8), (0, 1), (40, 0)] {
            assert_eq!(
                t.place(Pfn::new(p), n),
                Err(IovaError::NotFree { pfn: p, pages: n })
            );
        }
        assert_eq!(t.overlapping(Pfn::new(18), 2), Some((Pfn::new(19), 1)));
        assert_eq!(
            t.overlapping(Pfn::new(18), 4),
            Some((Pfn::new(20), 4)),
            "the highest"
        );
        assert_eq!(t.overlapping(Pfn::new(30), 4), None);
        free(&mut t, 20, 4).unwrap();
    }
}
