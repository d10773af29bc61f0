//! Belady's MIN (S1.3) on a page sequence whose next uses are known: the OPT of the
//! streamed curve (`mrc --quotas`), which keeps each map's page number while the trace is
//! read and runs this once per quota afterwards.
//!
//! Every map is a hit or a miss; a miss on a full cache evicts the cached page mapped again
//! farthest in the future (never again first). The cached pages sit in a max-heap keyed by
//! next use. The map cache's OPT policy has its own (binary, keys in a side table, in
//! `eviction/opt.rs`); this one is built for the one job of counting hits:
//!
//! - each entry is the key and the page packed in one `u64` (next use in the high half), so
//!   a sift compares entries in the heap itself instead of loading each one's key from a
//!   table indexed by page (the second, dependent cache miss per level);
//! - four children per node: a hit raises its page's key (the next use moves to a later map)
//!   and the entry climbs, one compare per level, over half the levels of a binary heap.
//!
//! Only the order of equal keys differs from the map cache's heap, and the only equal keys
//! are "never again": evicting one dead page or another leaves the same hits.

/// For each map of `seq` (page numbers below `numbered`), the position of the next map of
/// its page, or `u32::MAX`.
// Positions are below the streamed path's MAX_MAPS (checked while collecting).
#[allow(clippy::cast_possible_truncation)]
pub(super) fn next_uses(seq: &[u32], numbered: usize) -> Vec<u32> {
    let mut next = vec![u32::MAX; seq.len()];
    let mut last = vec![u32::MAX; numbered];
    for (i, &id) in seq.iter().enumerate().rev() {
        next[i] = std::mem::replace(&mut last[id as usize], i as u32);
    }
    next
}

/// Belady's MIN hits on `seq` (page numbers below `numbered`, next uses `next` from
/// [`next_uses`]) at quota `q ≥ 1`.
pub(super) fn belady_hits(seq: &[u32], next: &[u32], numbered: usize, q: usize) -> u64 {
    let mut heap = NextUseHeap::new(numbered, q);
    let mut hits = 0u64;
    for (&id, &nx) in seq.iter().zip(next) {
        // "Never again" is u32::MAX, the largest key.
        let e = (u64::from(nx) << 32) | u64::from(id);
        match heap.pos[id as usize] {
            // Its key was this position, the smallest: the new next use only rises.
            ABSENT if heap.entries.len() == q => heap.replace_top(e),
            ABSENT => heap.push(e),
            i => {
                hits += 1;
                heap.raise(i as usize, e);
            }
        }
    }
    hits
}

/// Children per heap node.
const ARITY: usize = 4;
/// "Not in the heap" in [`NextUseHeap::pos`].
const ABSENT: u32 = u32::MAX;

/// An indexed 4-ary max-heap of packed (next use, page) entries.
struct NextUseHeap {
    entries: Vec<u64>,
    /// Each page's index in `entries`, or [`ABSENT`].
    pos: Vec<u32>,
}

/// The page of a packed entry.
// The low half is the page number.
#[allow(clippy::cast_possible_truncation)]
#[inline]
fn page(e: u64) -> usize {
    e as u32 as usize
}

impl NextUseHeap {
    fn new(numbered: usize, q: usize) -> Self {
        NextUseHeap {
            entries: Vec::with_capacity(q.min(numbered)),
            pos: vec![ABSENT; numbered],
        }
    }

    // Heap indices are below the quota (at most 2^24 after validation).
    #[allow(clippy::cast_possible_truncation)]
    #[inline]
    fn set(&mut self, i: usize, e: u64) {
        self.entries[i] = e;
        self.pos[page(e)] = i as u32;
    }

    fn push(&mut self, e: u64) {
        self.entries.push(e);
        self.sift_up(self.entries.len() - 1, e);
    }

    /// Entry `i` takes `e`, the same page with a later next use.
    #[inline]
    fn raise(&mut self, i: usize, e: u64) {
        debug_assert!(page(self.entries[i]) == page(e) && self.entries[i] < e);
        self.sift_up(i, e);
    }

    /// Evicts the top (farthest next use) and puts `e` in.
    fn replace_top(&mut self, e: u64) {
        self.pos[page(self.entries[0])] = ABSENT;
        self.sift_down(e);
    }

    /// Places `e` at index `i` or above it.
    #[inline]
    fn sift_up(&mut self, mut i: usize, e: u64) {
        while i > 0 {
            let p = (i - 1) / ARITY;
            let pe = self.entries[p];
            if pe >= e {
                break;
            }
            self.set(i, pe);
            i = p;
        }
        self.set(i, e);
    }

    /// Places `e` at the root or below it.
    fn sift_down(&mut self, e: u64) {
        let n = self.entries.len();
        let mut i = 0;
        loop {
            let first = ARITY * i + 1;
            if first >= n {
                break;
            }
            let (mut c, mut ce) = (first, self.entries[first]);
            for j in first + 1..(first + ARITY).min(n) {
                let x = self.entries[j];
                if x > ce {
                    (c, ce) = (j, x);
                }
            }
            if ce <= e {
                break;
            }
            self.set(i, ce);
            i = c;
        }
        self.set(i, e);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Belady by the definition: on a miss with `q` pages cached, evict the one whose next
    /// map is farthest (a scan of the cache).
    fn naive_hits(seq: &[u32], next: &[u32], q: usize) -> u64 {
        // (page, its next map) for each cached page.
        let mut cached: Vec<(u32, u32)> = Vec::new();
        let mut hits = 0;
        for (&id, &nx) in seq.iter().zip(next) {
            if let Some(c) = cached.iter_mut().find(|c| c.0 == id) {
                hits += 1;
                c.1 = nx;
                continue;
            }
            if cached.len() == q {
                let far = (0..q).max_by_key(|&i| cached[i].1).unwrap_or(0);
                cached.swap_remove(far);
            }
            cached.push((id, nx));
        }
        hits
    }

    /// The definition's hits at every quota, on skewed and uniform sequences with dead pages
    /// (ties of "never again") and quotas around the heap's level boundaries.
    #[test]
    fn same_hits_as_the_definition() {
        let mut x = 0x9e37_79b9_7f4a_7c15_u64;
        let mut rnd = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for (len, span) in [(5_000usize, 300u64), (8_000, 1_000), (3_000, 40)] {
            // Half the maps from a small hot set, half uniform: hits and evictions both.
            #[allow(clippy::cast_possible_truncation)]
            let seq: Vec<u32> = (0..len)
                .map(|_| {
                    let r = rnd();
                    (if r & 1 == 0 {
                        r % (span / 8 + 1)
                    } else {
                        r % span
                    }) as u32
                })
                .collect();
            let numbered = usize::try_from(span).unwrap();
            let next = next_uses(&seq, numbered);
            for q in [1, 2, 4, 5, 21, 22, 85, 86, 200, numbered, numbered + 7] {
                assert_eq!(
                    belady_hits(&seq, &next, numbered, q),
                    naive_hits(&seq, &next, q),
                    "len {len} span {span} q {q}"
                );
            }
        }
    }

    #[test]
    fn next_uses_point_at_the_next_map_of_the_page() {
        assert_eq!(
            next_uses(&[3, 1, 3, 3, 0], 4),
            [2, u32::MAX, 3, u32::MAX, u32::MAX]
        );
    }
}
