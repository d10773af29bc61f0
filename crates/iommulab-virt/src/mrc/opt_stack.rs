//! OPT's stack distances for every quota in one pass (S1.3, S1.9): Mattson et al.'s (1970)
//! priority stack with priority = next use, an earlier next use ranking higher.
//!
//! The top q entries of the stack are Belady's MIN cache of q pages, so a map at depth d is
//! a hit at every quota ≥ d. A map of page x at depth d puts x on top and carries the old
//! top down: at each depth above d the entry with the later next use is carried on and the
//! other stays, and the carried one takes x's old depth. Only the *records* move — the
//! depths whose next use is later than every one above them — each to the next record's
//! depth, the last to d; every other entry stays where it is.
//!
//! A linear walk of the depths (`opt_one_pass` in `mrc.rs`) costs d compares per map, and d
//! is large where a curve matters: on a 2 M-map uniform stream over 100 K pages the mean
//! depth is about 24,000, while its records fall in about 15 distinct 64-entry blocks
//! (measured; records cluster). So the next uses sit in a flat array with the maximum of
//! every 64-entry block and of every 64 blocks beside it: the walk for the next record
//! (the first depth whose next use beats the carried one) skips every block whose maximum
//! does not, and scans the few that do. A record only ever takes an earlier next use, so a
//! stale block maximum is an upper bound and the skip stays correct; the touched blocks are
//! recomputed after each map. Cost per map: d / 4096 + d / 64 block checks plus 64 compares
//! per block holding a record. Memory: 12 bytes per distinct page (next use, page, depth)
//! beside the caller's page numbers and next uses (8 bytes per map).
//!
//! Equal next uses are only "never again" (`u32::MAX`); as in `opt_one_pass`, the carried
//! entry moves on only past a strictly later next use, so the histograms are the same.

/// Entries per block.
const BLOCK: usize = 64;
/// Blocks per super-block.
const SUPER: usize = 64;
/// "Not on the stack" in the depth table.
const ABSENT: u32 = u32::MAX;

/// The OPT stack: entries by depth (0 = top) and two levels of block maxima.
struct OptStack {
    /// Next use of the entry at each depth.
    keys: Vec<u32>,
    /// Page of the entry at each depth.
    pages: Vec<u32>,
    /// Depth of each page, or [`ABSENT`].
    depth: Vec<u32>,
    /// Upper bound (exact after each map) of the keys of each block.
    block_max: Vec<u32>,
    /// Upper bound of the block maxima of each super-block.
    super_max: Vec<u32>,
    /// Blocks whose maximum must be recomputed (records were placed there).
    touched: Vec<u32>,
}

impl OptStack {
    fn new(pages: usize) -> Self {
        Self {
            keys: Vec::new(),
            pages: Vec::new(),
            depth: vec![ABSENT; pages],
            block_max: Vec::new(),
            super_max: Vec::new(),
            touched: Vec::new(),
        }
    }

    /// The first depth in `from..to` whose key exceeds `m`.
    #[inline]
    fn first_above(&self, from: usize, to: usize, m: u32) -> Option<usize> {
        let keys = &self.keys;
        let mut j = from;
        // The rest of the block `from` is in.
        let end = to.min(from.next_multiple_of(BLOCK));
        if let Some(k) = keys[j..end].iter().position(|&k| k > m) {
            return Some(j + k);
        }
        j = end;
        while j < to {
            if j.is_multiple_of(BLOCK * SUPER)
                && j + BLOCK * SUPER <= to
                && self.super_max[j / (BLOCK * SUPER)] <= m
            {
                j += BLOCK * SUPER;
                continue;
            }
            let end = to.min(j + BLOCK);
            if self.block_max[j / BLOCK] > m
                && let Some(k) = keys[j..end].iter().position(|&k| k > m)
            {
                return Some(j + k);
            }
            j = end;
        }
        None
    }

    /// Sets `keys[i] = k`, raising the block maxima (for a key that may rise).
    #[inline]
    fn raise(&mut self, i: usize, k: u32) {
        self.keys[i] = k;
        let b = &mut self.block_max[i / BLOCK];
        *b = (*b).max(k);
        let s = &mut self.super_max[i / (BLOCK * SUPER)];
        *s = (*s).max(k);
    }

    /// A map of page `x` whose next use is `nx`: its depth before (0-based), or `None` the
    /// first time.
    // Depths are below the distinct pages, which are below 2^32 (page numbers are u32).
    #[allow(clippy::cast_possible_truncation)]
    fn access(&mut self, x: u32, nx: u32) -> Option<usize> {
        let old = self.depth[x as usize];
        let d = if old == ABSENT {
            // A new page: the stack grows by one entry at the bottom, which the carried entry
            // will take.
            let n = self.keys.len();
            if n.is_multiple_of(BLOCK) {
                self.block_max.push(0);
            }
            if n.is_multiple_of(BLOCK * SUPER) {
                self.super_max.push(0);
            }
            self.keys.push(0);
            self.pages.push(x);
            n
        } else {
            old as usize
        };
        if d == 0 {
            // x was on top (its key this map's position, the least): the key only rises.
            self.depth[x as usize] = 0;
            self.raise(0, nx);
            return (old != ABSENT).then_some(0);
        }
        // x goes on top; the old top is carried down through the records above depth d.
        let (mut ck, mut cp) = (self.keys[0], self.pages[0]);
        self.pages[0] = x;
        self.depth[x as usize] = 0;
        // The old top's key may have been its block's maximum.
        self.keys[0] = nx;
        self.touched.push(0);
        let mut i = 1;
        while let Some(j) = self.first_above(i, d, ck) {
            // A record: the carried entry stays here, the record is carried on.
            std::mem::swap(&mut ck, &mut self.keys[j]);
            std::mem::swap(&mut cp, &mut self.pages[j]);
            self.depth[self.pages[j] as usize] = j as u32;
            let b = (j / BLOCK) as u32;
            if self.touched.last() != Some(&b) {
                self.touched.push(b);
            }
            i = j + 1;
        }
        self.pages[d] = cp;
        self.depth[cp as usize] = d as u32;
        // x's key was this map's position, below every other: ck only raises the maxima.
        self.raise(d, ck);
        for b in self.touched.drain(..) {
            let b = b as usize;
            let end = self.keys.len().min((b + 1) * BLOCK);
            self.block_max[b] = self.keys[b * BLOCK..end].iter().copied().max().unwrap_or(0);
            let s = b / SUPER;
            let send = self.block_max.len().min((s + 1) * SUPER);
            self.super_max[s] = self.block_max[s * SUPER..send]
                .iter()
                .copied()
                .max()
                .unwrap_or(0);
        }
        (old != ABSENT).then_some(d)
    }
}

/// OPT's stack-distance histogram of the page sequence `seq` (page numbers below `numbered`)
/// whose next uses are `next` (`belady::next_uses`): `hist[d]` maps at depth d (1-based: a
/// hit at every quota ≥ d), `hist.len()` = the distinct pages + 1.
pub(super) fn opt_histogram(seq: &[u32], next: &[u32], numbered: usize) -> Vec<u64> {
    let mut stack = OptStack::new(numbered);
    let mut hist = Vec::new();
    for (&x, &nx) in seq.iter().zip(next) {
        if let Some(d) = stack.access(x, nx) {
            if hist.len() <= d + 1 {
                hist.resize(d + 2, 0);
            }
            hist[d + 1] += 1;
        }
    }
    hist.resize(stack.keys.len() + 1, 0);
    hist
}

/// A test stream of `len` page numbers below `span` (xorshift from `seed`), uniform or
/// skewed towards the low pages (`skew`): the reference tests' input here and in
/// `opt_markers`.
pub(super) fn sequence(seed: u64, len: usize, span: u64, skew: bool) -> Vec<u32> {
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

#[cfg(test)]
mod tests {
    use super::super::belady::{belady_hits, next_uses};
    use super::*;

    /// The linear walk of every depth (as `opt_one_pass`): the definition of the update.
    fn linear_histogram(seq: &[u32], next: &[u32]) -> Vec<u64> {
        let (mut keys, mut pages): (Vec<u32>, Vec<u32>) = (Vec::new(), Vec::new());
        let mut hist = vec![0u64; 1];
        for (&x, &nx) in seq.iter().zip(next) {
            let (mut ck, mut cp) = (nx, x);
            let mut found = false;
            for i in 0..pages.len() {
                let (k, p) = (keys[i], pages[i]);
                if p == x {
                    keys[i] = ck;
                    pages[i] = cp;
                    if hist.len() <= i + 1 {
                        hist.resize(i + 2, 0);
                    }
                    hist[i + 1] += 1;
                    found = true;
                    break;
                }
                if i == 0 || ck < k {
                    keys[i] = ck;
                    pages[i] = cp;
                    ck = k;
                    cp = p;
                }
            }
            if !found {
                keys.push(ck);
                pages.push(cp);
            }
        }
        hist.resize(pages.len() + 1, 0);
        hist
    }

    /// Uniform and skewed streams over more pages than a super-block (4,096), so block and
    /// super-block skips both happen: the same histogram as the linear walk, and its running
    /// sum is Belady's hits at sampled quotas.
    #[test]
    fn equals_the_linear_walk_and_belady_at_every_depth() {
        for (seed, len, span, skew) in [
            (3, 3_000, 40, false),
            (5, 30_000, 9_000, false),
            (7, 30_000, 12_000, true),
            (9, 20_000, 300, true),
        ] {
            let seq = sequence(seed, len, span, skew);
            let numbered = usize::try_from(span).unwrap();
            let next = next_uses(&seq, numbered);
            let hist = opt_histogram(&seq, &next, numbered);
            assert_eq!(hist, linear_histogram(&seq, &next), "seed {seed}");
            let distinct = hist.len() - 1;
            for q in [1, 2, 63, 64, 65, 4_097, distinct / 3, distinct] {
                let q = q.min(distinct).max(1);
                let hits: u64 = hist[..=q].iter().sum();
                assert_eq!(
                    hits,
                    belady_hits(&seq, &next, numbered, q),
                    "seed {seed} q {q}"
                );
            }
        }
    }

    #[test]
    fn a_repeated_page_is_at_depth_one() {
        let seq = [4, 4, 1, 4];
        let next = next_uses(&seq, 5);
        assert_eq!(opt_histogram(&seq, &next, 5), [0, 1, 1]);
    }
}
