//! [`GapTree`]: an IOVA allocator that makes exactly the decisions of Linux 6.x's
//! red-black-tree walk ([`super::RbTree`]) in time logarithmic in the size of the space
//! instead of linear in the ranges walked over (what a kernel could ship).
//!
//! **Why the walk can be replaced.** `__alloc_and_insert_iova_range` walks down from the
//! cached node, gap by gap, and stops at the first gap whose top, rounded down to the
//! request's alignment `A` (its size rounded up to a power of two), leaves `size` pages
//! above the range below it. Within a gap the candidate aligned from its top is the
//! highest aligned block it holds, and candidates only fall as the walk descends, so the
//! walk returns *the highest `A`-aligned free block of `size` pages in `[low, top)`*, where
//! the first pass has `top = min(limit, cached.pfn_lo)`, `low = start_pfn` and the retry
//! `top = limit`, `low = cached.pfn_hi + 1` (Linux's `retry_pfn`). Everything else —
//! `max32_alloc_size`, which cached node serves a limit, how an insert and a free move them
//! (`__cached_rbnode_insert_update`, `__cached_rbnode_delete_update`) — is kept as Linux
//! keeps it; the cached nodes are ranges, and `rb_next` is "the lowest live page above".
//!
//! **The structure.** A segment tree over the page space `[0, 2^K)`, built lazily: a node
//! whose pages are all free or all used has no children. Each node keeps its longest free
//! run and its free prefix and suffix. An `A`-aligned block of `size ≤ A` pages lies at the
//! start of one aligned node of `A` pages, so the search descends right to left to that
//! level, skipping subtrees whose longest free run is shorter than `size`, and takes the
//! first node whose free prefix holds `size` pages. Marking a range used or free touches
//! `O(K)` nodes. Ranges are found for `free` by their first page in a hash map.
//!
//! Property tests hold it to [`super::RbTree`] on random and adversarial histories: the
//! same pfn (or the same failure) for every request, the same cached-node behaviour.

use iommulab_base::addr::{CpuId, Iova, Pfn};
use iommulab_base::clock::{ClockRate, Cycles};
use iommulab_base::hash::FxHashMap;

use super::rbtree::{DMA_32BIT_PFN, MAX_PFN, check_space};
use super::{IovaAllocator, IovaError, IovaStats, SpaceError};

/// The `link` of a node without children (all its pages free or all used).
const NO_KIDS: u64 = u64::MAX;

/// Leaves hold 2^6 = 64 pages as one bitmap word.
const LEAF_LEVEL: u32 = 6;

/// The low `len` bits set.
const fn ones(len: u64) -> u64 {
    if len >= 64 { !0 } else { (1 << len) - 1 }
}

/// Free prefix, free suffix and longest free run of a leaf of `len` pages whose used pages
/// are `bits`.
fn runs(bits: u64, len: u64) -> (u64, u64, u64) {
    let free = !bits & ones(len);
    let pre = u64::from(bits.trailing_zeros()).min(len);
    let suf = if len >= 64 {
        u64::from(bits.leading_zeros())
    } else {
        u64::from((bits << (64 - len)).leading_zeros()).min(len)
    };
    // Longest run of ones: shift-and until nothing is left.
    let (mut f, mut max) = (free, 0);
    while f != 0 {
        f &= f >> 1;
        max += 1;
    }
    (pre, suf, max)
}

/// Bit `j` set when the `n` bits from `j` up are all set in `f`.
fn runs_of(mut f: u64, n: u64) -> u64 {
    let mut covered = 1;
    while covered < n {
        let step = covered.min(n - covered);
        f &= f >> step;
        covered += step;
    }
    f
}

/// The anchor's pfn (Linux's `IOVA_ANCHOR`): a cached node that is no range.
const ANCHOR: (u64, u64) = (!0, !0);

/// A segment-tree node: the longest free run, free prefix and free suffix of its pages, and
/// a link: a leaf's page bitmap, or where an inner node's children are.
#[derive(Clone, Copy, Debug)]
#[repr(C)]
struct SegNode {
    max: u64,
    pre: u64,
    suf: u64,
    /// A leaf (the leaf level: 64 pages, or the whole space if smaller): bit `i` set when
    /// page `base + i` is used. An inner node: the index of the [`Pair`] holding its two
    /// children, or [`NO_KIDS`] when it is uniform (all free when `max` is its length).
    link: u64,
}

/// Two sibling nodes in one cache line: a node's children are always made and released
/// together, and the walk back up from a change reads both.
#[derive(Clone, Copy, Debug)]
#[repr(C, align(64))]
struct Pair([SegNode; 2]);

/// The index into `pairs` of pair `p` (a `link` or `free_pairs`: below 2^31, see
/// `alloc_pair`).
#[inline]
#[allow(clippy::cast_possible_truncation)]
fn slot(p: u64) -> usize {
    p as usize
}

/// A node without children at `level`, all free or all used.
fn uniform_node(level: u32, leaf_level: u32, free: bool) -> SegNode {
    let len = 1u64 << level;
    let run = if free { len } else { 0 };
    let link = match (level == leaf_level, free) {
        (true, true) => 0,
        (true, false) => ones(len),
        (false, _) => NO_KIDS,
    };
    SegNode {
        max: run,
        pre: run,
        suf: run,
        link,
    }
}

/// Bytes of metadata one live range costs (its hash-map entry; tree nodes are shared).
pub const RANGE_BYTES: u64 = 16;

/// The `O(log space)` allocator with Linux 6.x's decisions (see the module doc).
///
/// # Examples
///
/// ```
/// use iommulab_base::addr::{CpuId, Pfn};
/// use iommulab_os::iova::{GapTree, IovaAllocator};
///
/// let mut t = GapTree::new(Pfn::new(1), Pfn::new(256)).unwrap();
/// let a = t.alloc(CpuId::new(0), 4, Pfn::new(256)).unwrap();
/// assert_eq!(a.get(), 252); // top-down, aligned to 4 pages, as the rbtree walk
/// t.free(CpuId::new(0), a, 4).unwrap();
/// ```
#[derive(Debug, Clone)]
pub struct GapTree {
    /// Node `x` is side `x & 1` of pair `x >> 1`; the root is node 0 (its sibling unused).
    pairs: Vec<Pair>,
    /// Released pairs, linked through their first node's `link` (`NO_KIDS` ends the list).
    free_pairs: u64,
    /// The tree covers `[0, 2^levels)`.
    levels: u32,
    /// Nodes at this level are leaves holding a bitmap of their pages.
    leaf_level: u32,
    /// Live ranges: first page → last page.
    ranges: FxHashMap<u64, u64>,
    cached_node: (u64, u64),
    cached32_node: (u64, u64),
    start_pfn: u64,
    end_pfn: u64,
    dma_32bit_pfn: u64,
    max32_alloc_size: u64,
    stats: IovaStats,
}

impl GapTree {
    /// An empty space `[start, end)` with the 4 GiB boundary at Linux's.
    pub fn new(start: Pfn<Iova>, end: Pfn<Iova>) -> Result<Self, SpaceError> {
        Self::with_dma32_boundary(start, end, Pfn::new(DMA_32BIT_PFN))
    }

    /// An empty space `[start, end)` whose `cached32_node` serves limits at or below
    /// `dma_32bit_pfn` (as [`super::RbTree::with_dma32_boundary`]).
    pub fn with_dma32_boundary(
        start: Pfn<Iova>,
        end: Pfn<Iova>,
        dma_32bit_pfn: Pfn<Iova>,
    ) -> Result<Self, SpaceError> {
        check_space(start.get(), end.get(), MAX_PFN)?;
        let levels = u64::BITS - (end.get() - 1).leading_zeros();
        let leaf_level = levels.min(LEAF_LEVEL);
        let root = uniform_node(levels, leaf_level, true);
        let mut pairs = Vec::with_capacity(128);
        pairs.push(Pair([root, root]));
        let t = GapTree {
            pairs,
            free_pairs: NO_KIDS,
            levels,
            leaf_level,
            ranges: FxHashMap::default(),
            cached_node: ANCHOR,
            cached32_node: ANCHOR,
            start_pfn: start.get(),
            end_pfn: end.get(),
            dma_32bit_pfn: dma_32bit_pfn.get(),
            max32_alloc_size: dma_32bit_pfn.get(),
            stats: IovaStats::default(),
        };
        Ok(t)
    }

    /// Live ranges.
    pub fn len(&self) -> u64 {
        self.ranges.len() as u64
    }

    /// Whether no range is allocated.
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// The current `max32_alloc_size`.
    pub fn max32_alloc_size(&self) -> u64 {
        self.max32_alloc_size
    }

    /// Every live range `(first page, pages)`, in address order.
    pub fn ranges(&self) -> Vec<(Pfn<Iova>, u64)> {
        let mut v: Vec<(Pfn<Iova>, u64)> = self
            .ranges
            .iter()
            .map(|(&lo, &hi)| (Pfn::new(lo), hi - lo + 1))
            .collect();
        v.sort_unstable();
        v
    }

    const fn len_of(level: u32) -> u64 {
        1u64 << level
    }

    #[inline]
    fn node(&self, x: u32) -> &SegNode {
        &self.pairs[(x >> 1) as usize].0[(x & 1) as usize]
    }

    #[inline]
    fn node_mut(&mut self, x: u32) -> &mut SegNode {
        &mut self.pairs[(x >> 1) as usize].0[(x & 1) as usize]
    }

    /// The children of inner node `n` (at a level above the leaves), `None` if it is uniform.
    #[inline]
    fn kids(n: &SegNode) -> Option<[u32; 2]> {
        // Pair indices fit in u32: `alloc_pair` checks.
        #[allow(clippy::cast_possible_truncation)]
        (n.link != NO_KIDS).then_some([(n.link as u32) << 1, ((n.link as u32) << 1) | 1])
    }

    /// Whether `n`, at `level`, has no children (a leaf counts: its bitmap is all it has).
    #[inline]
    fn is_childless(&self, level: u32, n: &SegNode) -> bool {
        level == self.leaf_level || n.link == NO_KIDS
    }

    /// Two uniform siblings at `level`, all free or all used, from the free list or the
    /// arena; returns the pair's index.
    fn alloc_pair(&mut self, level: u32, free: bool) -> u64 {
        let n = uniform_node(level, self.leaf_level, free);
        if self.free_pairs != NO_KIDS {
            let p = self.free_pairs;
            self.free_pairs = self.pairs[slot(p)].0[0].link;
            self.pairs[slot(p)] = Pair([n, n]);
            p
        } else {
            self.pairs.push(Pair([n, n]));
            // Node ids are u32 (pair << 1 | side): 2^31 pairs would be 128 GiB of nodes.
            (self.pairs.len() - 1) as u64
        }
    }

    /// Releases `x`'s subtree below it and makes `x` uniform.
    fn make_uniform(&mut self, x: u32, level: u32, free: bool) {
        let n = *self.node(x);
        if level > self.leaf_level && n.link != NO_KIDS {
            self.release_pair(n.link, level - 1);
        }
        *self.node_mut(x) = uniform_node(level, self.leaf_level, free);
    }

    /// Returns pair `p` (two nodes at `level`) and everything below it to the free list.
    fn release_pair(&mut self, p: u64, level: u32) {
        if level > self.leaf_level {
            for side in 0..2 {
                let link = self.pairs[slot(p)].0[side].link;
                if link != NO_KIDS {
                    self.release_pair(link, level - 1);
                }
            }
        }
        self.pairs[slot(p)].0[0].link = self.free_pairs;
        self.free_pairs = p;
    }

    /// Marks `[lo, hi)` used or free. A range inside one leaf (every range of up to 64
    /// aligned pages) goes down one path without recursion, the child picked by a bit of
    /// `lo` instead of a branch the CPU cannot predict, and the path is summed up on the
    /// way back; others go through [`GapTree::set`]. Both visit (and count) the same nodes.
    fn mark(&mut self, lo: u64, hi: u64, free: bool) {
        let leaf = self.leaf_level;
        if self.levels == leaf || lo >> leaf != (hi - 1) >> leaf {
            self.set(0, self.levels, 0, lo, hi, free);
            return;
        }
        let mut path = [0u32; 64];
        let mut depth = 0;
        let (mut x, mut level) = (0u32, self.levels);
        while level > leaf {
            self.stats.tree_visits += 1;
            let Some(pair) = self.split_for(x, level, free) else {
                return;
            };
            path[depth] = x;
            depth += 1;
            level -= 1;
            #[allow(clippy::cast_possible_truncation)]
            let side = ((lo >> level) & 1) as u32;
            #[allow(clippy::cast_possible_truncation)]
            let child = ((pair as u32) << 1) | side;
            x = child;
        }
        self.stats.tree_visits += 1;
        let len = Self::len_of(leaf);
        let base = lo & !(len - 1);
        self.mark_leaf(x, ones(hi - lo) << (lo - base), free);
        // Back up the path: merge uniform children or sum them up.
        while depth > 0 {
            depth -= 1;
            level += 1;
            let x = path[depth];
            self.sum_up(x, level, self.node(x).link);
        }
    }

    // `always` on `split_for`, `mark_leaf` and `sum_up`, shared by `mark` and `set`: with
    // plain `#[inline]` they stayed out of line and the churn bench took 10% longer.

    /// Inner node `x` at `level` is about to change in part: its pair of children, made
    /// (uniform, as `x` was) if it had none; `None` when `x` is uniform and already all
    /// `free` (or all used), so nothing below changes.
    #[inline(always)]
    fn split_for(&mut self, x: u32, level: u32, free: bool) -> Option<u64> {
        let n = *self.node(x);
        if n.link != NO_KIDS {
            return Some(n.link);
        }
        let was_free = n.max == Self::len_of(level);
        if was_free == free {
            return None;
        }
        let p = self.alloc_pair(level - 1, was_free);
        self.node_mut(x).link = p;
        Some(p)
    }

    /// Marks the pages of leaf `x` in `mask` used or free and recounts its runs.
    #[inline(always)]
    fn mark_leaf(&mut self, x: u32, mask: u64, free: bool) {
        let len = Self::len_of(self.leaf_level);
        let n = self.node_mut(x);
        if free {
            n.link &= !mask;
        } else {
            n.link |= mask;
        }
        (n.pre, n.suf, n.max) = runs(n.link, len);
    }

    /// Inner node `x` at `level`, whose children (pair `pair`) changed: uniform if both are
    /// childless and alike (the pair goes back to the free list, nothing below it to walk),
    /// else its runs summed from theirs.
    #[inline(always)]
    fn sum_up(&mut self, x: u32, level: u32, pair: u64) {
        let half = Self::len_of(level - 1);
        let [a, b] = self.pairs[slot(pair)].0;
        if self.is_childless(level - 1, &a)
            && self.is_childless(level - 1, &b)
            && a.max == b.max
            && (a.max == 0 || a.max == half)
        {
            self.pairs[slot(pair)].0[0].link = self.free_pairs;
            self.free_pairs = pair;
            *self.node_mut(x) = uniform_node(level, self.leaf_level, a.max == half);
            return;
        }
        let n = self.node_mut(x);
        n.pre = if a.pre == half { half + b.pre } else { a.pre };
        n.suf = if b.suf == half { half + a.suf } else { b.suf };
        n.max = a.max.max(b.max).max(a.suf + b.pre);
    }

    /// Marks `[lo, hi)` used or free in the subtree of `x` (level `level`, first page
    /// `base`).
    fn set(&mut self, x: u32, level: u32, base: u64, lo: u64, hi: u64, free: bool) {
        self.stats.tree_visits += 1;
        let len = Self::len_of(level);
        if lo <= base && base + len <= hi {
            self.make_uniform(x, level, free);
            return;
        }
        if level == self.leaf_level {
            let (from, to) = (lo.max(base) - base, hi.min(base + len) - base);
            self.mark_leaf(x, ones(to - from) << from, free);
            return;
        }
        let Some(pair) = self.split_for(x, level, free) else {
            return;
        };
        #[allow(clippy::cast_possible_truncation)]
        let (l, r) = ((pair as u32) << 1, ((pair as u32) << 1) | 1);
        let half = len / 2;
        if lo < base + half {
            self.set(l, level - 1, base, lo, hi, free);
        }
        if hi > base + half {
            self.set(r, level - 1, base + half, lo, hi, free);
        }
        self.sum_up(x, level, pair);
    }

    /// The highest `align`-aligned `p` with `lo_p ≤ p ≤ hi_p` whose `size` pages are free;
    /// `align_level` = log2(align), `size ≤ align`. A depth-first search, right child
    /// first, pruned by the bounds and by each subtree's longest free run; the pending left
    /// children wait on a stack (at most one per level) instead of in recursive calls.
    fn highest_block(&mut self, align_level: u32, size: u64, lo_p: u64, hi_p: u64) -> Option<u64> {
        let mut stack = [(0u32, 0u32, 0u64); 66];
        stack[0] = (0, self.levels, 0);
        let mut depth = 1;
        while depth > 0 {
            depth -= 1;
            let (x, level, base) = stack[depth];
            self.stats.tree_visits += 1;
            let len = Self::len_of(level);
            if base > hi_p || base + len <= lo_p {
                continue;
            }
            let n = *self.node(x);
            if n.max < size {
                continue;
            }
            if level == align_level {
                if n.pre >= size && base >= lo_p {
                    return Some(base);
                }
                continue;
            }
            if level == self.leaf_level {
                // Start positions inside the leaf whose `size` pages are free, aligned, in
                // bounds.
                let align = Self::len_of(align_level);
                let mut starts = runs_of(!n.link & ones(len), size);
                let mut aligned = 0u64;
                let mut k = 0;
                while k < len {
                    aligned |= 1 << k;
                    k += align;
                }
                starts &= aligned;
                let from = lo_p.max(base) - base;
                let to = hi_p.min(base + len - 1) - base;
                starts &= ones(to + 1) & !ones(from);
                if starts != 0 {
                    return Some(base + u64::from(63 - starts.leading_zeros()));
                }
                continue;
            }
            let Some([l, r]) = Self::kids(&n) else {
                // All free: the highest aligned position inside the node and the bounds.
                let top = hi_p.min(base + len - Self::len_of(align_level));
                if top >= lo_p.max(base) {
                    return Some(top);
                }
                continue;
            };
            // Left below right: the right subtree is searched whole first.
            let half = len / 2;
            stack[depth] = (l, level - 1, base);
            stack[depth + 1] = (r, level - 1, base + half);
            depth += 2;
        }
        None
    }

    /// The lowest live page above `pfn`, `None` if there is none.
    fn lowest_used_above(&mut self, pfn: u64) -> Option<u64> {
        let (mut x, mut level, mut base) = (0u32, self.levels, 0u64);
        // Descend along the path of `pfn + 1`, remembering right siblings to try.
        let target = pfn.checked_add(1)?;
        if target >> self.levels != 0 {
            return None;
        }
        let mut stack: [(u32, u32, u64); 64] = [(0, 0, 0); 64];
        let mut depth = 0;
        loop {
            self.stats.tree_visits += 1;
            let n = *self.node(x);
            let len = Self::len_of(level);
            if level == self.leaf_level {
                let above = n.link & !ones(target - base);
                if above != 0 {
                    return Some(base + u64::from(above.trailing_zeros()));
                }
                break;
            }
            let Some([l, r]) = Self::kids(&n) else {
                if n.max == 0 {
                    return Some(target.max(base));
                }
                break;
            };
            let half = len / 2;
            if target < base + half {
                stack[depth] = (r, level - 1, base + half);
                depth += 1;
                x = l;
            } else {
                x = r;
                base += half;
            }
            level -= 1;
        }
        // The nearest right sibling on the path with a used page holds the answer: its
        // leftmost used page.
        while depth > 0 {
            depth -= 1;
            let (y, ylevel, ybase) = stack[depth];
            if self.node(y).max < Self::len_of(ylevel) {
                return Some(self.leftmost_used(y, ylevel, ybase));
            }
        }
        None
    }

    /// The leftmost used page of a subtree that has one.
    fn leftmost_used(&mut self, mut x: u32, mut level: u32, mut base: u64) -> u64 {
        loop {
            self.stats.tree_visits += 1;
            let n = *self.node(x);
            if level == self.leaf_level {
                return base + u64::from(n.link.trailing_zeros());
            }
            let Some([l, r]) = Self::kids(&n) else {
                return base;
            };
            let half = Self::len_of(level) / 2;
            if self.node(l).max < half {
                x = l;
            } else {
                x = r;
                base += half;
            }
            level -= 1;
        }
    }

    /// `rb_next` of the range whose last page is `hi`: the next range up, or the anchor.
    fn next_range(&mut self, hi: u64) -> (u64, u64) {
        match self.lowest_used_above(hi) {
            Some(lo) => (lo, self.ranges.get(&lo).copied().unwrap_or(lo)),
            None => ANCHOR,
        }
    }

    /// The highest free `size`-page block aligned to `2^align_level` in `[low, top)`.
    fn search(&mut self, size: u64, align_level: u32, low: u64, top: u64) -> Option<u64> {
        let align = 1u64 << align_level;
        if top < size {
            return None;
        }
        let hi_p = (top - size) & !(align - 1);
        let lo_p = low.div_ceil(align).checked_mul(align)?;
        if hi_p < lo_p {
            return None;
        }
        self.highest_block(align_level, size, lo_p, hi_p)
    }

    /// `__alloc_and_insert_iova_range(size, limit_pfn, size_aligned = true)`.
    fn alloc_range(&mut self, size: u64, limit_pfn: u64) -> Option<u64> {
        let align_level = u64::BITS - (size - 1).leading_zeros();
        if align_level > self.levels.max(1) {
            return None;
        }
        if limit_pfn <= self.dma_32bit_pfn && size >= self.max32_alloc_size {
            return None;
        }
        let cached = if limit_pfn <= self.dma_32bit_pfn {
            self.cached32_node
        } else {
            self.cached_node
        };
        let retry_pfn = cached.1;
        let mut found = self.search(size, align_level, self.start_pfn, limit_pfn.min(cached.0));
        if found.is_none() && retry_pfn < limit_pfn {
            found = self.search(size, align_level, retry_pfn + 1, limit_pfn);
        }
        let Some(new_pfn) = found else {
            self.max32_alloc_size = size;
            return None;
        };
        let hi = new_pfn + size - 1;
        self.mark(new_pfn, hi + 1, false);
        self.ranges.insert(new_pfn, hi);
        if hi < self.dma_32bit_pfn {
            self.cached32_node = (new_pfn, hi);
        } else {
            self.cached_node = (new_pfn, hi);
        }
        Some(new_pfn)
    }
}

impl IovaAllocator for GapTree {
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
                self.stats.peak_metadata_bytes =
                    self.stats.peak_metadata_bytes.max(self.len() * RANGE_BYTES);
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
        let lo = pfn.get();
        let not_allocated = IovaError::NotAllocated { pfn: lo, pages };
        let Some(hi) = pages.checked_sub(1).and_then(|p| lo.checked_add(p)) else {
            return Err(not_allocated);
        };
        if self.ranges.get(&lo) != Some(&hi) {
            return Err(not_allocated);
        }
        // `__cached_rbnode_delete_update`, before the erase.
        let c32 = self.cached32_node;
        if c32 == (lo, hi) || (hi < self.dma_32bit_pfn && lo >= c32.0) {
            self.cached32_node = self.next_range(hi);
        }
        if lo < self.dma_32bit_pfn {
            self.max32_alloc_size = self.dma_32bit_pfn;
        }
        if lo >= self.cached_node.0 {
            self.cached_node = self.next_range(hi);
        }
        self.ranges.remove(&lo);
        self.mark(lo, hi + 1, true);
        self.stats.frees += 1;
        Ok(())
    }

    fn on_tick(&mut self, _now: Cycles, _clock: ClockRate) {}

    fn stats(&self) -> IovaStats {
        self.stats
    }

    fn metadata_bytes(&self) -> u64 {
        self.len() * RANGE_BYTES + self.pairs.len() as u64 * size_of::<Pair>() as u64
    }

    fn space_end(&self) -> Pfn<Iova> {
        Pfn::new(self.end_pfn)
    }

    fn name(&self) -> &'static str {
        "gap-tree"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::iova::RbTree;
    use proptest::prelude::*;

    const CPU: CpuId = CpuId::new(0);

    /// The rbtree's own examples give the same answers.
    #[test]
    fn the_rbtree_examples() {
        let mut t = GapTree::new(Pfn::new(1), Pfn::new(16)).unwrap();
        let mut a = |p, l| t.alloc(CPU, p, Pfn::new(l)).map(Pfn::get);
        assert_eq!(a(2, 16), Ok(14));
        assert_eq!(a(1, 16), Ok(13));
        assert_eq!(a(1, 16), Ok(12));
        t.free(CPU, Pfn::new(13), 1).unwrap();
        assert_eq!(t.alloc(CPU, 1, Pfn::new(16)).map(Pfn::get), Ok(13));
        assert_eq!(t.alloc(CPU, 1, Pfn::new(16)).map(Pfn::get), Ok(11));
        let mut t = GapTree::new(Pfn::new(1), Pfn::new(9)).unwrap();
        assert_eq!(t.alloc(CPU, 2, Pfn::new(4)).map(Pfn::get), Ok(2));
        assert_eq!(t.alloc(CPU, 1, Pfn::new(9)).map(Pfn::get), Ok(1));
        assert_eq!(t.alloc(CPU, 1, Pfn::new(9)).map(Pfn::get), Ok(8));
    }

    #[derive(Clone, Debug)]
    enum Op {
        Alloc { pages: u64, limit_frac: u8 },
        Free { pick: usize },
    }

    fn op(max_pages: u64) -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => (1..=max_pages, 0u8..=255).prop_map(|(pages, limit_frac)| Op::Alloc { pages, limit_frac }),
            2 => any::<usize>().prop_map(|pick| Op::Free { pick }),
        ]
    }

    /// Runs `ops` on both allocators over `[1, end)` with the 4 GiB boundary at `dma32`;
    /// every answer must be the same.
    fn same(end: u64, dma32: u64, ops: &[Op]) -> Result<(), TestCaseError> {
        let mut rb =
            RbTree::with_dma32_boundary(Pfn::new(1), Pfn::new(end), Pfn::new(dma32)).unwrap();
        let mut gt =
            GapTree::with_dma32_boundary(Pfn::new(1), Pfn::new(end), Pfn::new(dma32)).unwrap();
        let mut live: Vec<(Pfn<Iova>, u64)> = Vec::new();
        for (i, o) in ops.iter().enumerate() {
            match *o {
                Op::Alloc { pages, limit_frac } => {
                    // Limits below, at and above the 4 GiB boundary, and the whole space.
                    let limit = 1 + (end - 1) * (u64::from(limit_frac) + 1) / 256;
                    let a = rb.alloc(CPU, pages, Pfn::new(limit));
                    let b = gt.alloc(CPU, pages, Pfn::new(limit));
                    prop_assert_eq!(&a, &b, "op {} {:?}", i, o);
                    if let Ok(p) = a {
                        live.push((p, pages));
                    }
                }
                Op::Free { pick } => {
                    if live.is_empty() {
                        continue;
                    }
                    let (p, n) = live.swap_remove(pick % live.len());
                    prop_assert_eq!(rb.free(CPU, p, n), Ok(()));
                    prop_assert_eq!(gt.free(CPU, p, n), Ok(()));
                }
            }
            prop_assert_eq!(rb.max32_alloc_size(), gt.max32_alloc_size());
        }
        prop_assert_eq!(rb.ranges(), gt.ranges());
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Random histories in a small space (frequent exhaustion, retries, wraps).
        #[test]
        fn picks_what_the_linux_walk_picks_small(ops in prop::collection::vec(op(9), 1..400), dma32 in 8u64..200) {
            same(200, dma32, &ops)?;
        }

        /// Random histories in a 4 GiB space.
        #[test]
        fn picks_what_the_linux_walk_picks_4g(ops in prop::collection::vec(op(64), 1..300)) {
            same(1 << 20, 1 << 20, &ops)?;
        }
    }

    /// Adversarial: a fragmented space where most gaps hold `size` pages but not aligned, then
    /// churn with mixed sizes and limits.
    #[test]
    fn picks_what_the_linux_walk_picks_when_fragmented() {
        let mut ops = Vec::new();
        for i in 0..2000u64 {
            ops.push(Op::Alloc {
                pages: 1 + (i * 7) % 5,
                limit_frac: u8::try_from((i * 37) % 256).unwrap(),
            });
            if i % 3 == 0 {
                ops.push(Op::Free {
                    pick: usize::try_from(i * 13).unwrap(),
                });
            }
        }
        same(4096, 2048, &ops).unwrap();
    }

    /// Steady churn neither grows the node arena without bound nor the map.
    #[test]
    fn churn_reuses_nodes() {
        let mut t = GapTree::new(Pfn::new(1), Pfn::new(1 << 20)).unwrap();
        let mut ring = std::collections::VecDeque::new();
        for i in 0..50_000u64 {
            ring.push_back((
                t.alloc(CPU, 1 + i % 4, Pfn::new(1 << 20)).unwrap(),
                1 + i % 4,
            ));
            if ring.len() > 1000 {
                let (p, n) = ring.pop_front().unwrap();
                t.free(CPU, p, n).unwrap();
            }
        }
        assert!(t.pairs.len() < 100_000, "{}", t.pairs.len());
    }
}
