//! OPT's stack distances for every quota in one pass, without the future (S1.3, S1.9): the
//! critical markers of Bilardi, Ekanadham and Pattnaik ("Optimal on-line computation of
//! stack distances for MIN and OPT", ACM Computing Frontiers 2017).
//!
//! Mattson's priority stack (module `opt_stack`) orders the pages by next use, so it needs
//! each map's next use (a backward pass over the whole page sequence) and moves every
//! *record* above the mapped page's depth: about 550 entries per map on a uniform stream
//! over 65,536 pages, where the curve matters most. Yet a map's OPT depth depends only on
//! the past (whether the page stayed in MIN's cache of q pages since its previous map is
//! decided by the maps between), so it can be found as the trace is read.
//!
//! The pages are kept in LRU order, each holding a set of *markers*, one per quota: the
//! k-th distinct page brings marker k (the first brings none). Let w(p) = |markers of p| −
//! 1; the sum of w over the i most recent pages is never negative. A map of page x whose
//! predecessor in LRU order (the next more recent page) is y:
//!
//! - z is the deepest boundary above y where that sum is zero (the top counts), and the
//!   OPT depth of the map is the least marker held at or below z, plus one (the least
//!   quota at which x stayed cached);
//! - that marker moves to x, x's other markers move to y, and x becomes most recent.
//!
//! A map of the most recent page is at depth 1 and changes nothing. (This is the paper's
//! critical-marker update, restated with the markers held by pages: a marker's LRU depth
//! is the paper's critical marker of its quota, and the sums are its β.)
//!
//! Each page's place in LRU order is a *slot*, renumbered when the slots run out (as in
//! `iommulab-trace`'s stack-distance counter). Each slot holds its page's w and least
//! marker; a segment tree over blocks of 16 slots keeps, per block and node, the sum of w,
//! its least suffix sum (for z) and its least marker, and a block's slots are scanned (a
//! tree over single slots was slower: its lower levels miss the cache on every walk). Each
//! page keeps its markers in a leftist heap (merged into y's, least taken), and the page
//! whose heap a marker tops is recorded, so the least marker's page is found without a
//! search. A map costs O(log D + 16) for D distinct pages, and memory is proportional to D,
//! not to the maps: about 16 bytes per page, 13 per marker and 12 per slot (2 to 4 slots
//! per page).

/// "None": no heap, no marker, no slot.
const NIL: u32 = u32::MAX;
/// Slots per block of the tree's leaves.
const BLOCK: usize = 16;

/// A segment-tree node over the slots of a range of blocks.
#[derive(Clone, Copy, Debug)]
struct Node {
    /// Sum of w over the live slots.
    sum: i32,
    /// Least sum of w from a slot of the range to the range's end.
    min_suffix: i32,
    /// Least marker held by a page of the range, or [`NIL`].
    min_marker: u32,
}

/// A dead slot (or one beyond the last used).
const EMPTY: Node = Node {
    sum: 0,
    min_suffix: 0,
    min_marker: NIL,
};

impl Node {
    #[inline]
    fn join(l: Node, r: Node) -> Node {
        Node {
            sum: l.sum + r.sum,
            min_suffix: (l.min_suffix + r.sum).min(r.min_suffix),
            min_marker: l.min_marker.min(r.min_marker),
        }
    }
}

/// The critical-marker state (module docs).
#[derive(Debug, Default)]
pub(super) struct OptMarkers {
    /// Per page: its slot, or [`NIL`] before its first map.
    slot: Vec<u32>,
    /// Per page: the root (least marker) of its heap of markers, or [`NIL`].
    root: Vec<u32>,
    /// Per page: how many markers it holds.
    held: Vec<u32>,
    /// Per marker at the root of a page's heap: that page (so the page holding the least
    /// marker of a range is found without walking the tree down to it).
    root_of: Vec<u32>,
    /// Per marker: its heap children.
    kids: Vec<[u32; 2]>,
    /// Per marker: its leftist rank (the shortest path to a missing child).
    rank: Vec<u8>,
    /// Per slot: the page at it (valid for live slots).
    page_at: Vec<u32>,
    /// Live slots, one bit each.
    live: Vec<u64>,
    /// Per slot: w of its page (0 if dead).
    w: Vec<i32>,
    /// Per slot: the least marker of its page, or [`NIL`].
    mk: Vec<u32>,
    /// The segment tree over blocks of [`BLOCK`] slots: node 1 is the root, node
    /// `blocks + b` is block b (small enough to stay in cache).
    tree: Vec<Node>,
    /// Blocks (a power of two).
    blocks: usize,
    /// Slots (`blocks` × [`BLOCK`]).
    size: usize,
    /// Slots used.
    next: usize,
    /// Distinct pages mapped (= markers handed out, counting the first page's none).
    distinct: u32,
}

impl OptMarkers {
    /// A map of page `x` (page numbers are small and dense): its OPT stack depth (1-based:
    /// a hit at every quota ≥ the depth), or `None` at its first map.
    // Slots, markers and pages are below 2^31 (page numbers are below 2^30).
    #[allow(clippy::cast_possible_truncation)]
    pub(super) fn access(&mut self, x: u32) -> Option<u32> {
        let xi = x as usize;
        if xi >= self.slot.len() {
            let n = (xi + 1).next_power_of_two();
            self.slot.resize(n, NIL);
            self.root.resize(n, NIL);
            self.held.resize(n, 0);
        }
        let s = self.slot[xi];
        if s == NIL {
            // A new page brings the marker of one more quota (the first page none: one page
            // is always a miss at quota 0, which has no marker).
            let k = self.distinct;
            self.distinct += 1;
            self.kids.push([NIL, NIL]);
            self.rank.push(1);
            self.root_of.push(NIL);
            if k > 0 {
                self.set_root(xi, k);
                self.held[xi] = 1;
            }
            self.push_slot(x);
            return None;
        }
        let s = s as usize;
        if s + 1 == self.next {
            // The most recent page again: a hit at every quota, nothing moves.
            return Some(1);
        }
        let y_slot = self.next_live(s + 1);
        let y = self.page_at[y_slot] as usize;
        // The deepest zero-sum boundary above y is the first slot after y's whose suffix
        // sums to zero (slots past the last used are empty, so one always does).
        let z = self.first_zero(y_slot + 1);
        let m = self.min_marker(z);
        debug_assert!(m != NIL, "a marker lies at or below z");
        // The least marker of a page is its heap's root.
        let owner = self.root_of[m as usize] as usize;
        let owner_slot = self.slot[owner] as usize;
        // The marker leaves its page ...
        let [a, b] = self.kids[m as usize];
        let rest = self.merge(a, b);
        self.set_root(owner, rest);
        self.held[owner] -= 1;
        // ... x's others go to its predecessor, and x takes the marker alone.
        let joined = self.merge(self.root[y], self.root[xi]);
        self.set_root(y, joined);
        self.held[y] += self.held[xi];
        self.kids[m as usize] = [NIL, NIL];
        self.rank[m as usize] = 1;
        self.set_root(xi, m);
        self.held[xi] = 1;
        self.live[s / 64] &= !(1u64 << (s % 64));
        self.set_slot(y_slot, y);
        self.set_slot(owner_slot, owner);
        // (Last: the owner may be x, whose slot s is now dead.)
        (self.w[s], self.mk[s]) = (0, NIL);
        self.slot[xi] = NIL;
        if self.next == self.size {
            // Renumbering rebuilds every block.
            self.push_slot(x);
        } else {
            let t = self.next;
            self.next += 1;
            self.slot[xi] = t as u32;
            self.page_at[t] = x;
            self.live[t / 64] |= 1u64 << (t % 64);
            self.set_slot(t, xi);
            // The four blocks' paths to the root share their upper nodes: one walk.
            let mut at = [s / BLOCK, y_slot / BLOCK, owner_slot / BLOCK, t / BLOCK];
            at.sort_unstable();
            self.refresh_all(at);
        }
        Some(m + 1)
    }

    /// Makes heap `h` page `p`'s markers.
    #[inline]
    fn set_root(&mut self, p: usize, h: u32) {
        self.root[p] = h;
        if h != NIL {
            // Page numbers are below 2^30.
            #[allow(clippy::cast_possible_truncation)]
            let pu = p as u32;
            self.root_of[h as usize] = pu;
        }
    }

    /// Writes page `p`'s w and least marker at its slot `t` (its block is refreshed by the
    /// caller).
    // Markers held are below 2^31.
    #[allow(clippy::cast_possible_wrap)]
    #[inline]
    fn set_slot(&mut self, t: usize, p: usize) {
        self.w[t] = self.held[p] as i32 - 1;
        self.mk[t] = self.root[p];
    }

    /// Block b's node, from its slots.
    #[inline]
    fn block_node(&self, b: usize) -> Node {
        let r = b * BLOCK..(b + 1) * BLOCK;
        let (mut sum, mut min_suffix) = (0i32, i32::MAX);
        for &w in self.w[r.clone()].iter().rev() {
            sum += w;
            min_suffix = min_suffix.min(sum);
        }
        let min_marker = self.mk[r].iter().copied().min().unwrap_or(NIL);
        Node {
            sum,
            min_suffix,
            min_marker,
        }
    }

    /// Recomputes the nodes of blocks `at` (sorted) and their ancestors, each once.
    #[inline]
    fn refresh_all(&mut self, mut at: [usize; 4]) {
        let mut k = 0;
        for j in 0..4 {
            if j == 0 || at[j] != at[k - 1] {
                at[k] = at[j];
                k += 1;
            }
        }
        for a in &mut at[..k] {
            self.tree[self.blocks + *a] = self.block_node(*a);
            *a += self.blocks;
        }
        while at[0] > 1 {
            let mut n = 0;
            for j in 0..k {
                let i = at[j] / 2;
                if n == 0 || at[n - 1] != i {
                    at[n] = i;
                    n += 1;
                }
            }
            k = n;
            for &i in &at[..k] {
                self.tree[i] = Node::join(self.tree[2 * i], self.tree[2 * i + 1]);
            }
        }
    }

    /// Recomputes block b's node and its ancestors.
    #[inline]
    fn refresh(&mut self, b: usize) {
        let mut i = self.blocks + b;
        self.tree[i] = self.block_node(b);
        while i > 1 {
            i /= 2;
            self.tree[i] = Node::join(self.tree[2 * i], self.tree[2 * i + 1]);
        }
    }

    /// Gives page `x` the next slot (the most recent), renumbering first if none is left.
    #[allow(clippy::cast_possible_truncation)]
    fn push_slot(&mut self, x: u32) {
        if self.next == self.size {
            self.compact();
        }
        let t = self.next;
        self.next += 1;
        self.slot[x as usize] = t as u32;
        self.page_at[t] = x;
        self.live[t / 64] |= 1u64 << (t % 64);
        self.set_slot(t, x as usize);
        self.refresh(t / BLOCK);
    }

    /// Renumbers the live slots `0..d` in order and rebuilds the tree with room for as many
    /// again (so renumbering costs O(1) per map, amortized).
    #[allow(clippy::cast_possible_truncation)]
    fn compact(&mut self) {
        let mut d = 0usize;
        for w in 0..self.live.len() {
            let mut bits = self.live[w];
            while bits != 0 {
                let t = w * 64 + bits.trailing_zeros() as usize;
                // d ≤ t: reading page_at[t] before writing page_at[d] keeps it in place.
                let p = self.page_at[t];
                self.page_at[d] = p;
                self.slot[p as usize] = d as u32;
                d += 1;
                bits &= bits - 1;
            }
        }
        self.size = (2 * d + 1024).next_power_of_two();
        self.blocks = self.size / BLOCK;
        self.next = d;
        self.page_at.resize(self.size, NIL);
        self.live.clear();
        self.live.resize(self.size / 64, 0);
        for t in 0..d {
            self.live[t / 64] |= 1u64 << (t % 64);
        }
        self.w.clear();
        self.w.resize(self.size, 0);
        self.mk.clear();
        self.mk.resize(self.size, NIL);
        for t in 0..d {
            self.set_slot(t, self.page_at[t] as usize);
        }
        self.tree.clear();
        self.tree.resize(2 * self.blocks, EMPTY);
        for b in 0..self.blocks {
            self.tree[self.blocks + b] = self.block_node(b);
        }
        for i in (1..self.blocks).rev() {
            self.tree[i] = Node::join(self.tree[2 * i], self.tree[2 * i + 1]);
        }
    }

    /// The first live slot at or after `t` (one exists: the most recent).
    #[inline]
    fn next_live(&self, t: usize) -> usize {
        let mut w = t / 64;
        let mut bits = self.live[w] & (u64::MAX << (t % 64));
        while bits == 0 {
            w += 1;
            bits = self.live[w];
        }
        w * 64 + bits.trailing_zeros() as usize
    }

    /// The first slot t ≥ `lo` whose suffix (the slots from t on) sums to zero, or `size`
    /// if none: in lo's block, else in the first later block whose least suffix is zero.
    fn first_zero(&self, lo: usize) -> usize {
        if lo >= self.size {
            return self.size;
        }
        let b = lo / BLOCK;
        // The sum of the blocks after b.
        let (mut i, mut right) = (self.blocks + b, 0);
        while i > 1 {
            if i.is_multiple_of(2) {
                right += self.tree[i + 1].sum;
            }
            i /= 2;
        }
        let end = (b + 1) * BLOCK;
        let from_lo: i32 = self.w[lo..end].iter().sum();
        if let Some(t) = self.scan_zero(lo, end, from_lo + right) {
            return t;
        }
        // The first later block with a zero suffix: up from block b + 1 to the largest
        // nodes starting there, then down (`pre`: the sum of the blocks before node i).
        let total = self.tree[1].sum;
        let mut pre = total - right;
        let mut i = self.blocks + b + 1;
        if i.is_power_of_two() {
            return self.size;
        }
        while i.is_multiple_of(2) {
            i /= 2;
        }
        loop {
            if self.tree[i].min_suffix + (total - pre - self.tree[i].sum) <= 0 {
                break;
            }
            pre += self.tree[i].sum;
            i += 1;
            if i.is_power_of_two() {
                return self.size;
            }
            while i.is_multiple_of(2) {
                i /= 2;
            }
        }
        while i < self.blocks {
            let l = 2 * i;
            let n = self.tree[l];
            if n.min_suffix + (total - pre - n.sum) <= 0 {
                i = l;
            } else {
                pre += n.sum;
                i = l + 1;
            }
        }
        let start = (i - self.blocks) * BLOCK;
        self.scan_zero(start, start + BLOCK, total - pre)
            .unwrap_or(self.size)
    }

    /// The first slot t in `[from, end)` whose suffix is zero, `suffix` being that of `from`.
    #[inline]
    fn scan_zero(&self, from: usize, end: usize, mut suffix: i32) -> Option<usize> {
        for t in from..end {
            if suffix <= 0 {
                return Some(t);
            }
            suffix -= self.w[t];
        }
        None
    }

    /// The least marker held in slots `[0, hi)`, or [`NIL`]: the least of the blocks that
    /// tile `[0, hi)` (from the nodes that tile them), then of the slots of the last one.
    fn min_marker(&self, hi: usize) -> u32 {
        let hb = hi / BLOCK;
        let (mut i, mut l, mut r) = (1, 0, self.blocks);
        let mut best = NIL;
        while l < hb {
            if hb >= r {
                best = best.min(self.tree[i].min_marker);
                break;
            }
            let mid = (l + r) / 2;
            (i, l, r) = if hb <= mid {
                (2 * i, l, mid)
            } else {
                best = best.min(self.tree[2 * i].min_marker);
                (2 * i + 1, mid, r)
            };
        }
        let start = hb * BLOCK;
        if hi > start {
            best = best.min(self.mk[start..hi].iter().copied().min().unwrap_or(NIL));
        }
        best
    }

    fn rank_of(&self, h: u32) -> u8 {
        if h == NIL { 0 } else { self.rank[h as usize] }
    }

    /// The union of two leftist heaps of markers (least on top).
    fn merge(&mut self, a: u32, b: u32) -> u32 {
        if a == NIL {
            return b;
        }
        if b == NIL {
            return a;
        }
        let (a, b) = if a < b { (a, b) } else { (b, a) };
        let ai = a as usize;
        let r = self.merge(self.kids[ai][1], b);
        let l = self.kids[ai][0];
        let (l, r) = if self.rank_of(l) < self.rank_of(r) {
            (r, l)
        } else {
            (l, r)
        };
        self.kids[ai] = [l, r];
        self.rank[ai] = self.rank_of(r) + 1;
        a
    }
}

/// OPT's stack-distance histogram of the page sequence `seq` (page numbers small and
/// dense): `hist[d]` maps at depth d (1-based), `hist.len()` = the distinct pages + 1.
#[cfg(test)]
pub(super) fn opt_histogram(seq: &[u32]) -> Vec<u64> {
    let mut m = OptMarkers::default();
    let mut hist = vec![0u64; 1];
    for &x in seq {
        if let Some(d) = m.access(x) {
            let d = d as usize;
            if hist.len() <= d {
                hist.resize(d + 1, 0);
            }
            hist[d] += 1;
        }
    }
    hist.resize(m.distinct as usize + 1, 0);
    hist
}

#[cfg(test)]
mod tests {
    use super::super::belady::{belady_hits, next_uses};
    use super::super::opt_stack::{self, sequence};
    use super::*;

    /// The priority stack's histogram (the next uses known) and Belady's hits at sampled
    /// quotas, on uniform and skewed streams: pages mapped once (never again: the ties of
    /// next use), cold misses throughout (spans larger than the stream) and streams long
    /// enough that the slots are renumbered many times.
    #[test]
    fn equals_the_priority_stack_and_belady() {
        for (seed, len, span, skew) in [
            (3, 400, 5, false),
            (5, 3_000, 40, false),
            (7, 3_000, 700, true),
            (9, 4_000, 2_500, false),
            (11, 4_000, 9_000, false),
            (13, 5_000, 300, true),
            (15, 2_000, 1, false),
        ] {
            let seq = sequence(seed, len, span, skew);
            let numbered = usize::try_from(span).unwrap();
            let next = next_uses(&seq, numbered);
            let hist = opt_histogram(&seq);
            assert_eq!(
                hist,
                opt_stack::opt_histogram(&seq, &next, numbered),
                "seed {seed}"
            );
            let distinct = hist.len() - 1;
            for q in [
                1,
                2,
                3,
                64,
                distinct / 3,
                distinct.saturating_sub(1),
                distinct,
            ] {
                let q = q.clamp(1, distinct);
                let hits: u64 = hist[..=q].iter().sum();
                assert_eq!(
                    hits,
                    belady_hits(&seq, &next, numbered, q),
                    "seed {seed} q {q}"
                );
            }
        }
    }

    /// Many short streams over a few pages (every pattern of reuse a small cache meets).
    #[test]
    fn equals_the_priority_stack_on_short_streams() {
        let mut x = 12_345u64;
        for _ in 0..3_000 {
            let len = 1 + usize::try_from(x % 30).unwrap();
            let span = 1 + (x >> 8) % 6;
            let seq = sequence(x, len, span, false);
            x = x.wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(1);
            let numbered = usize::try_from(span).unwrap();
            let next = next_uses(&seq, numbered);
            assert_eq!(
                opt_histogram(&seq),
                opt_stack::opt_histogram(&seq, &next, numbered),
                "{seq:?}"
            );
        }
    }

    /// Small cases worked by hand: a repeat is at depth 1; in a b c a, a stayed in MIN's
    /// cache of 2 (b or c is dropped, never used again); in a b a b, MIN keeps both at 2.
    #[test]
    fn depths_of_small_sequences() {
        assert_eq!(opt_histogram(&[4, 4, 1, 4]), [0, 1, 1]);
        assert_eq!(opt_histogram(&[0, 1, 2, 0]), [0, 0, 1, 0]);
        assert_eq!(opt_histogram(&[0, 1, 0, 1]), [0, 0, 2]);
        assert_eq!(opt_histogram(&[]), [0]);
    }
}
