//! Exact LRU stack (reuse) distances of a page stream, as `trace stats` reports them: for
//! each access, the number of distinct other pages accessed since the same page's previous
//! access, or none the first time (Bennett & Kruskal's counting over access slots).
//!
//! Every access takes the next slot; a page's last access is its one live slot, so the
//! distance is the number of live slots after the page's previous one. Live slots are bits
//! of a bitmap, and a Fenwick tree over the bitmap's 64-slot words counts the live slots of
//! the words below a given one: the tree is 64 times smaller than one over slots
//! (L1-resident at 100 K distinct pages), and the word that new slots fill (the top) enters
//! it only once full, so an access costs one tree query and one tree update (that of the
//! previous slot), not three. When the slots run out the live ones are renumbered in order
//! (compaction).
//!
//! The one LRU stack-distance counter of the workspace: `trace stats` runs it on a thread of
//! its own (`ReuseCounter`), fed the pages the maps covered a batch at a time, and the
//! hit-rate curves (`iommulab-virt`'s `mrc`) turn its distances into LRU's hits at every
//! quota (a hit at quota q iff distance + 1 ≤ q; Mattson et al. 1970). Its memory is
//! proportional to the distinct pages, not to the accesses: about 4 bytes per page id for
//! the last slots and 2 bits per live slot.

use crate::stats::Log2Histogram;

/// No access yet.
const NO_SLOT: u32 = u32::MAX;

/// The stack-distance counter (module doc). Page ids are small dense numbers (below 2^30),
/// e.g. from [`crate::page_ids::PageIds`].
#[derive(Clone, Debug, Default)]
pub struct StackDistance {
    /// Per page (by [`crate::page_ids::PageIds`] id): the slot of its last access,
    /// [`NO_SLOT`] before its first.
    last: Vec<u32>,
    /// Distinct pages accessed: the live slots.
    distinct: u64,
    /// Live slots, 64 per word.
    words: Vec<u64>,
    /// Fenwick tree (0-based: node `i` covers words `[i & (i + 1), i]`) of the live slots of
    /// the sealed words, those below `sealed`.
    tree: Vec<u32>,
    sealed: usize,
    /// Slots in use; `capacity` in all.
    next: usize,
    capacity: usize,
    /// The page of each live slot, rebuilt by each compaction from `last` (kept out of
    /// the per-access path: a slot-to-page array written on every access would take as much
    /// cache as `last` itself).
    page_at: Vec<u32>,
}

impl StackDistance {
    /// Distinct pages accessed.
    pub fn distinct(&self) -> u64 {
        self.distinct
    }

    /// Live slots in words `[0, w)` (all sealed).
    fn words_below(&self, w: usize) -> u64 {
        let mut i = w;
        let mut s = 0u64;
        while i > 0 {
            let node = i - 1;
            s += u64::from(self.tree[node]);
            i &= node;
        }
        s
    }

    fn tree_add(&mut self, w: usize, v: u32) {
        let mut i = w;
        while let Some(t) = self.tree.get_mut(i) {
            *t += v;
            i |= i + 1;
        }
    }

    fn tree_sub_one(&mut self, w: usize) {
        let mut i = w;
        while let Some(t) = self.tree.get_mut(i) {
            *t -= 1;
            i |= i + 1;
        }
    }

    /// Renumbers the live slots `0..distinct` in access order and rebuilds the bitmap and
    /// the tree with room for as many again.
    // Slots stay below 2 * distinct pages + 1024 < 2^31 (ids are below 2^30).
    #[allow(clippy::cast_possible_truncation)]
    fn compact(&mut self) {
        self.page_at.clear();
        self.page_at.resize(self.next, 0);
        for (id, &last) in (0u32..).zip(&self.last) {
            if last != NO_SLOT {
                self.page_at[last as usize] = id;
            }
        }
        let mut d = 0usize;
        for w in 0..self.next.div_ceil(64) {
            let mut bits = self.words[w];
            while bits != 0 {
                let s = w * 64 + bits.trailing_zeros() as usize;
                let page = self.page_at[s];
                // d counts distinct pages, each numbered by a u32 id.
                self.last[page as usize] = d as u32;
                d += 1;
                bits &= bits - 1;
            }
        }
        let n = (2 * d).max(1024).next_multiple_of(64);
        let nw = n / 64;
        self.capacity = n;
        self.words.clear();
        self.words.resize(nw, 0);
        for (i, w) in self.words.iter_mut().enumerate().take(d.div_ceil(64)) {
            let left = d - i * 64;
            *w = if left >= 64 {
                u64::MAX
            } else {
                (1u64 << left) - 1
            };
        }
        self.sealed = d / 64;
        self.tree.clear();
        self.tree.resize(nw, 0);
        for i in 0..nw {
            if i < self.sealed {
                self.tree[i] += 64;
            }
            let parent = i | (i + 1);
            if parent < nw {
                self.tree[parent] += self.tree[i];
            }
        }
        self.next = d;
    }

    /// Most page ids [`access`](Self::access) takes (ids are below this).
    pub const MAX_IDS: usize = 1 << 30;

    /// Records an access to page `id` (below [`MAX_IDS`](Self::MAX_IDS)): its stack
    /// distance (the distinct other pages accessed since its previous access), or `None`
    /// the first time.
    ///
    /// # Panics
    /// If `id` is not below [`MAX_IDS`](Self::MAX_IDS) (slots would overflow `u32`).
    // Slots stay below 2 * distinct pages + 1024 < 2^31 (ids are below 2^30).
    #[allow(clippy::cast_possible_truncation)]
    #[inline]
    pub fn access(&mut self, id: u32) -> Option<u64> {
        assert!((id as usize) < Self::MAX_IDS, "page id {id} past 2^30");
        let i = id as usize;
        if i >= self.last.len() {
            self.last.resize((i + 1).next_multiple_of(16), NO_SLOT);
        }
        if self.next == self.capacity {
            self.compact();
        }
        let slot = self.next;
        self.next += 1;
        let top = slot / 64;
        while self.sealed < top {
            let live = self.words[self.sealed].count_ones();
            self.tree_add(self.sealed, live);
            self.sealed += 1;
        }
        // Slots stay below 2 * distinct pages + 1024, and ids number at most 2^30 pages.
        let prev = std::mem::replace(&mut self.last[i], slot as u32);
        let r = if prev == NO_SLOT {
            self.distinct += 1;
            None
        } else {
            // Every live slot lies below `slot`: those after `prev` are all of them minus
            // those at or before it.
            let p = prev as usize;
            let (w, bit) = (p / 64, p % 64);
            let upto = self.words_below(w) + u64::from((self.words[w] << (63 - bit)).count_ones());
            self.words[w] &= !(1u64 << bit);
            if w < self.sealed {
                self.tree_sub_one(w);
            }
            Some(self.distinct - upto)
        };
        self.words[top] |= 1u64 << (slot % 64);
        r
    }
}

/// The stack distances of one page stream as the statistics report them: a log2
/// histogram and the cold (first) accesses.
#[derive(Clone, Debug, Default)]
pub(crate) struct ReuseCounter {
    sd: StackDistance,
    pub(crate) histogram: Log2Histogram,
    pub(crate) cold: u64,
}

impl ReuseCounter {
    /// Counts accesses to the pages `ids`, in order.
    pub(crate) fn feed(&mut self, ids: &[u32]) {
        for &id in ids {
            match self.sd.access(id) {
                Some(d) => self.histogram.add(d),
                None => self.cold += 1,
            }
        }
    }

    /// Distinct pages accessed.
    pub(crate) fn distinct(&self) -> u64 {
        self.sd.distinct()
    }
}

#[cfg(test)]
#[allow(clippy::cast_possible_truncation)] // streams of a few thousand small page ids
mod tests {
    use rand::{Rng, SeedableRng};

    use super::*;

    /// Naive LRU stack distance: distinct pages since the last access.
    fn naive_distances(seq: &[u32]) -> Vec<Option<u64>> {
        let mut out = Vec::with_capacity(seq.len());
        for i in 0..seq.len() {
            out.push(seq[..i].iter().rposition(|&p| p == seq[i]).map(|prev| {
                let between: std::collections::HashSet<_> = seq[prev + 1..i].iter().collect();
                between.len() as u64
            }));
        }
        out
    }

    fn run(seq: &[u32]) -> Vec<Option<u64>> {
        let mut r = StackDistance::default();
        seq.iter().map(|&p| r.access(p)).collect()
    }

    /// Uniform, skewed and looping streams over few and many pages, long enough for many
    /// compactions and for words to be sealed, cleared and refilled.
    #[test]
    fn matches_naive_stack_distance_across_compactions() {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(9);
        for &(pages, len) in &[(3u32, 500usize), (300, 5000), (700, 6000), (2000, 8000)] {
            let uniform: Vec<u32> = (0..len).map(|_| rng.gen_range(0..pages)).collect();
            assert_eq!(run(&uniform), naive_distances(&uniform), "{pages}");
            let skewed: Vec<u32> = (0..len)
                .map(|_| {
                    let x: f64 = rng.gen_range(0.0..1.0);
                    ((x * x * x) * f64::from(pages)) as u32
                })
                .collect();
            assert_eq!(run(&skewed), naive_distances(&skewed), "{pages}");
            let looping: Vec<u32> = (0..len).map(|i| (i as u32 * 7) % pages).collect();
            assert_eq!(run(&looping), naive_distances(&looping), "{pages}");
        }
    }

    #[test]
    fn first_access_is_cold_and_repeat_is_zero() {
        assert_eq!(run(&[5, 5, 1, 5]), [None, Some(0), None, Some(1)]);
    }
}
