//! The tree beyond allocating and freeing: `reserve_iova`, exact placement (a replay adopting
//! the kernel's choice), the prediction of the next allocation, the live ranges and the
//! invariant check tests run.

use super::tree::{LEFT, Node, RIGHT};
use super::{ANCHOR, IOVA_ANCHOR, MAX_PFN, NIL, NODE_BYTES, RbTree, Walk};
use crate::iova::IovaError;
use iommulab_base::addr::{Iova, Pfn};

impl RbTree {
    /// The live ranges in address order, as `(first page, pages)`. `O(n)`, not counted.
    pub fn ranges(&self) -> Vec<(Pfn<Iova>, u64)> {
        let mut out = Vec::with_capacity(usize::try_from(self.live).unwrap_or(0));
        self.in_order(self.root, &mut |n: &Node| {
            if n.pfn_lo != IOVA_ANCHOR {
                out.push((Pfn::new(n.pfn_lo), n.pfn_hi - n.pfn_lo + 1));
            }
        });
        out
    }

    /// What [`IovaAllocator::alloc`](crate::iova::IovaAllocator::alloc) would return for `pages` below `limit`, without
    /// changing anything (not even the counters): the same top-down next-fit search from the
    /// same cached node. `None` where the allocation would fail.
    pub fn peek_alloc(&self, pages: u64, limit: Pfn<Iova>) -> Option<Pfn<Iova>> {
        if pages == 0 || pages > self.end_pfn - self.start_pfn {
            return None;
        }
        let mut visits = 0;
        match self.walk(pages, limit.get().min(self.end_pfn), &mut visits) {
            Walk::Found { pfn, .. } => Some(Pfn::new(pfn)),
            Walk::Fail | Walk::FastFail => None,
        }
    }

    /// The highest live (or reserved) range overlapping `[pfn, pfn + pages)`, as `(first
    /// page, pages)`, if any. `O(log n)`, not counted.
    pub fn overlapping(&self, pfn: Pfn<Iova>, pages: u64) -> Option<(Pfn<Iova>, u64)> {
        let lo = pfn.get();
        let hi = lo.checked_add(pages.checked_sub(1)?)?;
        let x = self.overlap_node(lo, hi);
        (x != NIL).then(|| {
            let n = self.n(x);
            (Pfn::new(n.pfn_lo), n.pfn_hi - n.pfn_lo + 1)
        })
    }

    /// The node overlapping `[lo, hi]` (inclusive), `NIL` if none. Ranges are disjoint and
    /// keyed by `pfn_lo`, so the only candidate is the last node starting at or below `hi`.
    fn overlap_node(&self, lo: u64, hi: u64) -> u32 {
        let mut best = NIL;
        let mut x = self.root;
        while x != NIL {
            if self.n(x).pfn_lo <= hi {
                best = x;
                x = self.n(x).child[RIGHT];
            } else {
                x = self.n(x).child[LEFT];
            }
        }
        if best != NIL && best != ANCHOR && self.n(best).pfn_hi >= lo {
            best
        } else {
            NIL
        }
    }

    /// `reserve_iova`: marks `[pfn, pfn + pages)` as never to be handed out (the IOAPIC/MSI
    /// window, a PCI host bridge's MMIO windows, RMRRs). As in Linux, a range overlapping
    /// existing ones extends the lowest of them downward and only the part above them gets
    /// a node of its own; the cached nodes do not move. The range may lie partly or wholly
    /// outside the space (Linux reserves bridge windows above the DMA limit too). Reserved
    /// ranges count in [`RbTree::len`] and [`RbTree::ranges`], not in the `allocs` counter.
    pub fn reserve(&mut self, pfn: Pfn<Iova>, pages: u64) -> Result<(), IovaError> {
        let bad = IovaError::BadRequest {
            pages,
            space: self.end_pfn - self.start_pfn,
        };
        let mut lo = pfn.get();
        let Some(hi) = pages.checked_sub(1).and_then(|p| lo.checked_add(p)) else {
            return Err(bad);
        };
        if hi >= MAX_PFN {
            return Err(bad);
        }
        // `for (node = rb_first(); node; node = rb_next(node))`, from the first candidate.
        let mut x = self.overlap_node(lo, lo);
        if x == NIL {
            let mut v = 0;
            x = self.ceiling(lo, &mut v);
        }
        let mut overlap = false;
        while x != NIL && x != ANCHOR {
            let n = *self.n(x);
            if n.pfn_lo <= hi && lo <= n.pfn_hi {
                // `__adjust_overlap_range`.
                if lo < n.pfn_lo {
                    self.m(x).pfn_lo = lo;
                }
                if hi <= n.pfn_hi {
                    return Ok(());
                }
                lo = n.pfn_hi + 1;
                overlap = true;
            } else if overlap || n.pfn_lo > hi {
                break;
            }
            x = self.next(x);
        }
        let z = self.new_node(lo, hi).ok_or(bad)?;
        self.insert(z, NIL);
        self.live += 1;
        self.stats.slab_allocs += 1;
        self.stats.peak_metadata_bytes = self.stats.peak_metadata_bytes.max(self.live * NODE_BYTES);
        Ok(())
    }

    /// The lowest node with `pfn_lo >= pfn` (the anchor if none is lower).
    fn ceiling(&self, pfn: u64, visits: &mut u64) -> u32 {
        let mut best = ANCHOR;
        let mut x = self.root;
        while x != NIL {
            *visits += 1;
            if self.n(x).pfn_lo >= pfn {
                best = x;
                x = self.n(x).child[LEFT];
            } else {
                x = self.n(x).child[RIGHT];
            }
        }
        best
    }

    /// Allocates exactly `[pfn, pfn + pages)`, which must be free and inside the space: what
    /// a re-synchronising replay does when the kernel chose a range the model's search
    /// would not have. The cached node moves to it as after an allocation
    /// (`__cached_rbnode_insert_update`), since the kernel's search ended there.
    pub fn place(&mut self, pfn: Pfn<Iova>, pages: u64) -> Result<(), IovaError> {
        let lo = pfn.get();
        let not_free = IovaError::NotFree { pfn: lo, pages };
        let Some(hi) = pages.checked_sub(1).and_then(|p| lo.checked_add(p)) else {
            return Err(not_free);
        };
        if lo < self.start_pfn || hi >= self.end_pfn || self.overlap_node(lo, hi) != NIL {
            return Err(not_free);
        }
        let z = self.new_node(lo, hi).ok_or(not_free)?;
        self.insert(z, NIL);
        self.cached_insert_update(z);
        self.live += 1;
        self.stats.allocs += 1;
        self.stats.slab_allocs += 1;
        self.stats.lock_acquisitions += 1;
        self.stats.peak_metadata_bytes = self.stats.peak_metadata_bytes.max(self.live * NODE_BYTES);
        Ok(())
    }

    /// Checks the red-black and ordering invariants and that the cached nodes are live;
    /// `O(n)`, for tests. Returns a description of the first violation.
    pub fn check_invariants(&self) -> Result<(), String> {
        if self.nodes[NIL as usize].red {
            return Err("sentinel is red".into());
        }
        if self.nodes[self.root as usize].red {
            return Err("root is red".into());
        }
        if self.root != NIL && self.nodes[self.root as usize].parent != NIL {
            return Err("root has a parent".into());
        }
        let mut count = 0u64;
        let mut last_hi: Option<u64> = None;
        let mut bad = None;
        self.in_order(self.root, &mut |n: &Node| {
            count += 1;
            if last_hi.is_some_and(|h| n.pfn_lo <= h) && bad.is_none() {
                bad = Some(format!(
                    "range at {:#x} overlaps or is out of order",
                    n.pfn_lo
                ));
            }
            last_hi = Some(n.pfn_hi);
        });
        if let Some(b) = bad {
            return Err(b);
        }
        if count != self.live + u64::from(self.anchored) {
            return Err(format!(
                "{count} nodes in tree, {} live (anchor: {})",
                self.live, self.anchored
            ));
        }
        self.black_height(self.root)?;
        if !self.anchored {
            return Ok(());
        }
        for (name, c) in [
            ("cached", self.cached_node),
            ("cached32", self.cached32_node),
        ] {
            if !self.reachable(c) {
                return Err(format!("{name} node {c} is not in the tree"));
            }
        }
        Ok(())
    }

    fn black_height(&self, x: u32) -> Result<u32, String> {
        if x == NIL {
            return Ok(1);
        }
        let n = &self.nodes[x as usize];
        for c in [n.child[LEFT], n.child[RIGHT]] {
            if c != NIL && self.nodes[c as usize].parent != x {
                return Err(format!("child {c} of {x} has a wrong parent"));
            }
            if n.red && self.nodes[c as usize].red {
                return Err(format!("red node {x} has a red child"));
            }
        }
        let l = self.black_height(n.child[LEFT])?;
        let r = self.black_height(n.child[RIGHT])?;
        if l != r {
            return Err(format!("black heights differ under {x}: {l} vs {r}"));
        }
        Ok(l + u32::from(!n.red))
    }

    fn reachable(&self, mut x: u32) -> bool {
        if x == NIL {
            return false;
        }
        while self.nodes[x as usize].parent != NIL {
            let p = self.nodes[x as usize].parent;
            let pn = &self.nodes[p as usize];
            if pn.child[LEFT] != x && pn.child[RIGHT] != x {
                return false;
            }
            x = p;
        }
        x == self.root
    }

    fn in_order(&self, x: u32, f: &mut impl FnMut(&Node)) {
        if x == NIL {
            return;
        }
        let n = self.nodes[x as usize];
        self.in_order(n.child[LEFT], f);
        f(&n);
        self.in_order(n.child[RIGHT], f);
    }
}
