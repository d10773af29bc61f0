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
//! `iommulab-trace`'s stack-distance counter). A segment tree over the slots keeps, per
//! node, the sum of w, its least suffix sum (for z) and its least marker; each page keeps
//! its markers in a leftist heap (merged into y's, least taken). So a map costs
//! O(log D) for D distinct pages, and memory is proportional to D, not to the maps: about
//! 13 bytes per page, 4 per marker and 14 per slot (2 to 4 slots per page).

/// "None": no heap, no marker, no slot.
const NIL: u32 = u32::MAX;

/// A segment-tree node over slots `[l, r)`.
#[derive(Clone, Copy, Debug)]
struct Node {
    /// Sum of w over the live slots.
    sum: i32,
    /// Least sum of w over `[t, r)`, for t in `[l, r)`.
    min_suffix: i32,
    /// Least marker held by a page in `[l, r)`, or [`NIL`].
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
    /// Per marker: its heap children.
    kids: Vec<[u32; 2]>,
    /// Per marker: its leftist rank (the shortest path to a missing child).
    rank: Vec<u8>,
    /// Per slot: the page at it (valid for live slots).
    page_at: Vec<u32>,
    /// Live slots, one bit each.
    live: Vec<u64>,
    /// The segment tree: node 1 is the root, node `size + t` is slot t.
    tree: Vec<Node>,
    /// Slots (a power of two).
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
            if k > 0 {
                self.root[xi] = k;
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
        let z = self
            .first_zero(1, 0, self.size, y_slot + 1, 0)
            .unwrap_or(self.size);
        let (m, owner_slot) = self.min_marker(z);
        debug_assert!(m != NIL, "a marker lies at or below z");
        let owner = self.page_at[owner_slot] as usize;
        // The marker leaves its page (it is that page's least) ...
        let [a, b] = self.kids[m as usize];
        self.root[owner] = self.merge(a, b);
        self.held[owner] -= 1;
        // ... x's others go to its predecessor, and x takes the marker alone.
        self.root[y] = self.merge(self.root[y], self.root[xi]);
        self.held[y] += self.held[xi];
        self.kids[m as usize] = [NIL, NIL];
        self.rank[m as usize] = 1;
        self.root[xi] = m;
        self.held[xi] = 1;
        self.live[s / 64] &= !(1u64 << (s % 64));
        self.set_leaf(s, EMPTY);
        self.set_leaf(y_slot, self.leaf(y));
        if owner != y && owner != xi {
            self.set_leaf(owner_slot, self.leaf(owner));
        }
        self.slot[xi] = NIL;
        self.push_slot(x);
        Some(m + 1)
    }

    /// The leaf of a live page.
    // Markers held are below 2^31.
    #[allow(clippy::cast_possible_wrap)]
    #[inline]
    fn leaf(&self, p: usize) -> Node {
        let w = self.held[p] as i32 - 1;
        Node {
            sum: w,
            min_suffix: w,
            min_marker: self.root[p],
        }
    }

    #[inline]
    fn set_leaf(&mut self, t: usize, n: Node) {
        let mut i = self.size + t;
        self.tree[i] = n;
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
        self.set_leaf(t, self.leaf(x as usize));
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
        self.next = d;
        self.page_at.resize(self.size, NIL);
        self.live.clear();
        self.live.resize(self.size / 64, 0);
        for t in 0..d {
            self.live[t / 64] |= 1u64 << (t % 64);
        }
        self.tree.clear();
        self.tree.resize(2 * self.size, EMPTY);
        for t in 0..d {
            self.tree[self.size + t] = self.leaf(self.page_at[t] as usize);
        }
        for i in (1..self.size).rev() {
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

    /// The first slot t in node `i` (slots `[l, r)`), t ≥ `lo`, whose suffix sums to zero
    /// (`right`: the sum of the slots after r). Sums are never negative, so a node wholly
    /// at or after `lo` whose least suffix is positive is skipped, and one whose least
    /// suffix is zero holds the answer: O(log slots).
    fn first_zero(&self, i: usize, l: usize, r: usize, lo: usize, right: i32) -> Option<usize> {
        if r <= lo || (lo <= l && self.tree[i].min_suffix + right > 0) {
            return None;
        }
        if r - l == 1 {
            return Some(l);
        }
        let mid = (l + r) / 2;
        let rsum = self.tree[2 * i + 1].sum;
        self.first_zero(2 * i, l, mid, lo, right + rsum)
            .or_else(|| self.first_zero(2 * i + 1, mid, r, lo, right))
    }

    /// The least marker held in slots `[0, hi)` and its slot, or [`NIL`]: the least of
    /// the nodes that tile `[0, hi)`, then down that node to its leaf (markers are held
    /// once, so inside the node the child holding it is the one whose least it is).
    fn min_marker(&self, hi: usize) -> (u32, usize) {
        let (mut i, mut l, mut r) = (1, 0, self.size);
        let (mut best, mut at) = (NIL, 0);
        while l < hi {
            if hi >= r {
                if self.tree[i].min_marker < best {
                    (best, at) = (self.tree[i].min_marker, i);
                }
                break;
            }
            let mid = (l + r) / 2;
            if hi > mid && self.tree[2 * i].min_marker < best {
                (best, at) = (self.tree[2 * i].min_marker, 2 * i);
            }
            (i, l, r) = if hi <= mid {
                (2 * i, l, mid)
            } else {
                (2 * i + 1, mid, r)
            };
        }
        if best == NIL {
            return (NIL, 0);
        }
        while at < self.size {
            at = if self.tree[2 * at].min_marker == best {
                2 * at
            } else {
                2 * at + 1
            };
        }
        (best, at - self.size)
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
    use super::super::opt_stack;
    use super::*;

    fn sequence(seed: u64, len: usize, span: u64, skew: bool) -> Vec<u32> {
        let mut x = seed | 1;
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let r = x % span;
                // Below span (a few thousand).
                #[allow(clippy::cast_possible_truncation)]
                let v = if skew { r * r / span } else { r } as u32;
                v
            })
            .collect()
    }

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
