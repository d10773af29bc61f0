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
//! marker in a tree of fan-out 16 (module `slot_tree`) that finds z and the least marker
//! below it, and takes the three slots a map changes in one pass up. Each page keeps its
//! markers in a skew heap (merged into y's, least taken), whose root is the least marker
//! its slot holds; the root records the slot, so the least marker's page is changed
//! without a search. The tree's lanes at a page's slot are all of its state (its count
//! of markers is w + 1): a page's own cell is its slot alone, and a map reads no cell of
//! y's or of the owner's page (in the slots' order, y's lanes are next to x's). A map
//! costs O(log D) for D distinct pages (passes over 16 lanes), and memory is proportional
//! to D, not to the maps: 4 bytes per page, 12 per marker and about 13 per slot (1.5 to 3
//! slots per page).

use super::slot_tree::{NONE, SlotTree};
use isa_dispatch::prefetch;

/// "None": no heap, no marker, no slot.
const NIL: u32 = u32::MAX;

/// A marker's place in its page's skew heap, 12 bytes (cells aligned to 16, one cache line
/// each, measured no faster: the markers are read at random, and a quarter more of them
/// competes for the cache with the tree).
#[derive(Clone, Copy, Debug)]
#[repr(C)]
struct Marker {
    /// Its heap children.
    kids: [u32; 2],
    /// At the root of a page's heap: that page's slot (so the page holding the least
    /// marker of a range is changed without a search).
    root_slot: u32,
}

const ALONE: Marker = Marker {
    kids: [NIL, NIL],
    root_slot: NIL,
};

/// The critical-marker state (module docs).
#[derive(Debug, Default)]
pub(super) struct OptMarkers {
    /// Per page number: its slot, or [`NIL`] before its first map.
    pages: Vec<u32>,
    /// Per marker.
    markers: Vec<Marker>,
    /// Per slot: the page at it (valid for live slots; read only to renumber).
    page_at: Vec<u32>,
    /// Live slots, one bit each.
    live: Vec<u64>,
    /// Per slot: its page's w and least marker (module `slot_tree`).
    tree: SlotTree,
    /// The live slots' (w, least marker) while they are renumbered (kept for its capacity).
    renumbered: Vec<(i32, i32)>,
    /// Slots used.
    next: usize,
    /// Distinct pages mapped (= markers handed out, counting the first page's none).
    distinct: u32,
}

/// A heap root as the tree holds it ([`NONE`] for none).
// Marker numbers are below 2^31.
#[allow(clippy::cast_possible_wrap)]
#[inline(always)]
fn lane(root: u32) -> i32 {
    if root == NIL { NONE } else { root as i32 }
}

/// A tree's least marker as a heap root ([`NIL`] for none).
#[allow(clippy::cast_sign_loss)]
#[inline(always)]
fn root(lane: i32) -> u32 {
    if lane == NONE { NIL } else { lane as u32 }
}

impl OptMarkers {
    /// A map of page `x` (page numbers are small and dense): its OPT stack depth (1-based:
    /// a hit at every quota ≥ the depth), or `None` at its first map.
    // Slots, markers and pages are below 2^31 (page numbers are below 2^30).
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    #[inline(always)]
    pub(super) fn access(&mut self, x: u32) -> Option<u32> {
        let xi = x as usize;
        if xi >= self.pages.len() {
            self.pages.resize((xi + 1).next_power_of_two(), NIL);
        }
        let s = self.pages[xi];
        if s == NIL {
            // A new page brings the marker of one more quota (the first page none: one page
            // is always a miss at quota 0, which has no marker).
            let k = self.distinct;
            self.distinct += 1;
            self.markers.push(ALONE);
            let (heap, w) = if k > 0 { (k, 0) } else { (NIL, -1) };
            self.push_slot(x, heap, w);
            return None;
        }
        let s = s as usize;
        if s + 1 == self.next {
            // The most recent page again: a hit at every quota, nothing moves.
            return Some(1);
        }
        let y_slot = self.next_live(s + 1);
        // x's and y's state, before anything changes: their slots' lanes.
        let tree = &self.tree;
        let (wx, wy) = (tree.w(s), tree.w(y_slot));
        let (hx, hy) = (root(tree.marker(s)), root(tree.marker(y_slot)));
        // Their heaps' roots are merged after the search: asked of the cache now, so that
        // the merge's first loads overlap the search.
        for h in [hx, hy] {
            if let Some(mk) = self.markers.get(h as usize) {
                prefetch(mk);
            }
        }
        // The deepest zero-sum boundary above y is the first slot after y's whose suffix
        // sums to zero (slots past the last used are empty, so one always does).
        let z = tree.first_zero(y_slot + 1);
        let m = tree.min_marker(z);
        debug_assert!(m != NONE, "a marker lies at or below z");
        let m = m as u32;
        // The least marker of a page is its heap's root: its cell names the page's slot.
        let Marker {
            kids: [a, b],
            root_slot,
        } = self.markers[m as usize];
        let owner_slot = root_slot as usize;
        debug_assert_eq!(self.tree.marker(owner_slot), lane(m));
        // The marker leaves its page ...
        let rest = self.merge(a, b);
        self.set_root(rest, root_slot);
        // ... x's others go to its predecessor (one fewer where the marker was x's or y's),
        // and x takes the marker alone.
        let (hx, wx_left) = if owner_slot == s {
            (rest, wx - 1)
        } else {
            (hx, wx)
        };
        let (hy, wy_left) = if owner_slot == y_slot {
            (rest, wy - 1)
        } else {
            (hy, wy)
        };
        let joined = self.merge(hy, hx);
        self.set_root(joined, y_slot as u32);
        // y holds (wy_left + 1) + (wx_left + 1) markers.
        let wy_new = wy_left + wx_left + 1;
        self.markers[m as usize] = ALONE;
        self.live[s / 64] &= !(1u64 << (s % 64));
        // Three slots change: y's, the owner's (unless it is y or x) and x's, now dead.
        // The owner's w falls by one and its least marker is its heap's new root.
        let owner_apart = owner_slot != y_slot && owner_slot != s;
        let tree = &mut self.tree;
        tree.add_ws([
            (y_slot, wy_new - wy),
            (s, -wx),
            if owner_apart {
                (owner_slot, -1)
            } else {
                (owner_slot, 0)
            },
        ]);
        tree.set_marker(y_slot, lane(joined));
        if owner_apart {
            tree.set_marker(owner_slot, lane(rest));
        }
        tree.set_marker(s, NONE);
        self.push_slot(x, m, 0);
        Some(m + 1)
    }

    /// A few maps before one of page `x`: its slot is read now, and its slot's lanes and
    /// the next slot's (y's, most often), which its map reads first, are asked of the
    /// cache, so that those misses overlap the maps between. A hint: the slots may move
    /// before the map.
    #[inline(always)]
    pub(super) fn prefetch(&self, x: u32) {
        if let Some(&s) = self.pages.get(x as usize) {
            // Past the slots (no prefetch) before its first map.
            self.tree.prefetch(s as usize);
        }
    }

    /// Makes heap `h` the markers of the page at `slot` (in the heap's root).
    #[inline(always)]
    fn set_root(&mut self, h: u32, slot: u32) {
        if h != NIL {
            self.markers[h as usize].root_slot = slot;
        }
    }

    /// Gives page `x`, holding heap `heap` (w: its markers − 1), the next slot (the most
    /// recent), renumbering first if none is left.
    #[allow(clippy::cast_possible_truncation)]
    #[inline(always)]
    fn push_slot(&mut self, x: u32, heap: u32, w: i32) {
        if self.next == self.tree.size() {
            self.compact();
        }
        let t = self.next;
        self.next += 1;
        self.pages[x as usize] = t as u32;
        self.set_root(heap, t as u32);
        self.page_at[t] = x;
        self.live[t / 64] |= 1u64 << (t % 64);
        let d = w - self.tree.w(t);
        self.tree.add_ws([(t, d), (t, 0), (t, 0)]);
        self.tree.set_marker(t, lane(heap));
    }

    /// Renumbers the live slots `0..d` in order and rebuilds the tree with room for at least
    /// half as many again (so renumbering costs O(1) per map, amortized). Not more: at 65,536
    /// pages, 131,072 slots (renumbered every 65,536 maps or more) took less time per map
    /// than 262,144, whose slots fall out of the cache.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    #[cold]
    #[inline(never)]
    fn compact(&mut self) {
        let mut d = 0usize;
        self.renumbered.clear();
        for w in 0..self.live.len() {
            let mut bits = self.live[w];
            while bits != 0 {
                let t = w * 64 + bits.trailing_zeros() as usize;
                // d ≤ t: reading page_at[t] before writing page_at[d] keeps it in place.
                let p = self.page_at[t];
                self.page_at[d] = p;
                self.pages[p as usize] = d as u32;
                let mk = self.tree.marker(t);
                self.set_root(root(mk), d as u32);
                self.renumbered.push((self.tree.w(t), mk));
                d += 1;
                bits &= bits - 1;
            }
        }
        let size = (d + d / 2 + 1024).next_power_of_two();
        self.next = d;
        self.page_at.resize(size, NIL);
        self.live.clear();
        self.live.resize(size / 64, 0);
        for t in 0..d {
            self.live[t / 64] |= 1u64 << (t % 64);
        }
        self.tree.rebuild(size, self.renumbered.iter().copied());
    }

    /// The first live slot at or after `t` (one exists: the most recent).
    #[inline(always)]
    fn next_live(&self, t: usize) -> usize {
        let mut w = t / 64;
        let mut bits = self.live[w] & (u64::MAX << (t % 64));
        while bits == 0 {
            w += 1;
            bits = self.live[w];
        }
        w * 64 + bits.trailing_zeros() as usize
    }

    /// The union of two skew heaps of markers (least on top): down the right path of the
    /// merged heap, each node's children swapped (amortized O(log n) per union or removal
    /// of the least, a loop rather than recursion). Unlike a leftist heap, it reads no rank
    /// of the children (two more random loads per level).
    #[inline(always)]
    fn merge(&mut self, a: u32, b: u32) -> u32 {
        if a == NIL {
            return b;
        }
        if b == NIL {
            return a;
        }
        let (root, mut other) = if a < b { (a, b) } else { (b, a) };
        let mut cur = root as usize;
        loop {
            let [l, r] = self.markers[cur].kids;
            // The right child moves left; the union of the old right and `other` becomes the
            // new left.
            if r == NIL {
                self.markers[cur].kids = [other, l];
                return root;
            }
            let (lo, hi) = if r < other { (r, other) } else { (other, r) };
            self.markers[cur].kids = [lo, l];
            cur = lo as usize;
            other = hi;
        }
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
