//! An open-addressing index from guest page numbers to dense `u32` ids, for the map cache's
//! slab ([`super::MapCache`]) and the prefetcher's per-page history (S1.4, S1.5).
//!
//! The index stores only the 4-byte ids; the page number of an id is read through a
//! closure from the owner's own array, so the index adds 4 bytes per bucket and nothing
//! per entry. Linear probing, an FxHash/Fibonacci multiplicative hash reduced to the table
//! size by a multiply-shift ("fastrange", Lemire 2019) so the size need not be a power of
//! two, and backward-shift deletion (no tombstones). The load stays ≤ 2/3: at most 6 bytes
//! per entry when sized exactly by [`PageIndex::reserve`], ≤ 7.5 when grown by
//! [`PageIndex::grow_for`] (which grows by 1.25×, not 2×). (At load 0.8 the probe runs of
//! linear probing made deletion a fifth of the map cache's replay time: `--bench map_cache`.)

/// An empty bucket.
const EMPTY: u32 = u32::MAX;

/// Page number → id (see the [module docs](self)).
#[derive(Clone, Debug, Default)]
pub struct PageIndex {
    buckets: Vec<u32>,
}

impl PageIndex {
    /// Fewest buckets for `n` entries at load ≤ 2/3.
    const fn buckets_for(n: usize) -> usize {
        n.div_ceil(2) * 3 + 1
    }

    #[inline]
    fn home(&self, gfn: u64) -> usize {
        let h = gfn.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32;
        // h < 2^32 and len ≤ 2^32: the product fits in u64 and the result is < len.
        #[allow(clippy::cast_possible_truncation)]
        let i = ((h * self.buckets.len() as u64) >> 32) as usize;
        i
    }

    #[inline]
    fn next(&self, i: usize) -> usize {
        let j = i + 1;
        if j == self.buckets.len() { 0 } else { j }
    }

    /// `(bucket, id)` of `gfn`; `key` gives the page number of an id.
    #[inline]
    pub fn find(&self, gfn: u64, key: impl Fn(u32) -> u64) -> Option<(usize, u32)> {
        if self.buckets.is_empty() {
            return None;
        }
        let mut i = self.home(gfn);
        loop {
            let s = self.buckets[i];
            if s == EMPTY {
                return None;
            }
            if key(s) == gfn {
                return Some((i, s));
            }
            i = self.next(i);
        }
    }

    /// Adds `id` for page `gfn` (not present; the caller keeps the load with
    /// [`reserve`](Self::reserve) or [`grow_for`](Self::grow_for)).
    #[inline]
    pub fn insert(&mut self, id: u32, gfn: u64, key: impl Fn(u32) -> u64) {
        debug_assert!(
            self.find(gfn, &key).is_none(),
            "page {gfn:#x} indexed twice"
        );
        let mut i = self.home(gfn);
        while self.buckets[i] != EMPTY {
            i = self.next(i);
        }
        self.buckets[i] = id;
    }

    /// Removes the entry in `bucket` (from [`find`](Self::find)) by backward shift.
    pub fn remove_at(&mut self, mut bucket: usize, key: impl Fn(u32) -> u64) {
        let mut j = bucket;
        loop {
            j = self.next(j);
            let s = self.buckets[j];
            if s == EMPTY {
                break;
            }
            let k = self.home(key(s));
            // Move `s` back to `bucket` unless its home lies cyclically in (bucket, j].
            let stays = if bucket <= j {
                bucket < k && k <= j
            } else {
                bucket < k || k <= j
            };
            if !stays {
                self.buckets[bucket] = s;
                bucket = j;
            }
        }
        self.buckets[bucket] = EMPTY;
    }

    /// Sizes the table for `n` entries exactly (load ≤ 2/3), rehashing if it grows.
    pub fn reserve(&mut self, n: usize, key: impl Fn(u32) -> u64) {
        let want = Self::buckets_for(n);
        if want > self.buckets.len() {
            self.rehash(want, key);
        }
    }

    /// Makes room for `n` entries, growing by 1.25× when the load would pass 2/3 (so the
    /// load stays in 0.53..=0.67; amortised O(1) per insert).
    #[inline]
    pub fn grow_for(&mut self, n: usize, key: impl Fn(u32) -> u64) {
        if Self::buckets_for(n) > self.buckets.len() {
            self.rehash(Self::buckets_for(n * 5 / 4 + 4), key);
        }
    }

    fn rehash(&mut self, buckets: usize, key: impl Fn(u32) -> u64) {
        assert!(buckets <= 1 << 32, "page index over 2^32 buckets");
        let old = std::mem::take(&mut self.buckets);
        self.buckets.reserve_exact(buckets);
        self.buckets.resize(buckets, EMPTY);
        for s in old.into_iter().filter(|&s| s != EMPTY) {
            let g = key(s);
            self.insert(s, g, &key);
        }
    }

    /// The ids present, in bucket order.
    pub fn ids(&self) -> impl Iterator<Item = u32> + '_ {
        self.buckets.iter().copied().filter(|&s| s != EMPTY)
    }

    /// Heap bytes.
    pub fn bytes(&self) -> usize {
        self.buckets.capacity() * std::mem::size_of::<u32>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Inserts, finds and removes against a `HashMap` model, across rehashes and with
    /// colliding keys (multiples of a large power of two hash close together).
    #[test]
    fn matches_a_hash_map_model() {
        let mut keys: Vec<u64> = Vec::new();
        let mut idx = PageIndex::default();
        let mut model = std::collections::HashMap::new();
        let mut x = 7u64;
        for step in 0..20_000u32 {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            let g = if step % 3 == 0 {
                (x >> 50) << 40
            } else {
                x >> 40
            };
            if x.is_multiple_of(5) {
                // Remove a present key.
                if let Some((&k, &id)) = model.iter().next() {
                    let (b, got) = idx.find(k, |s| keys[s as usize]).unwrap();
                    assert_eq!(got, id);
                    idx.remove_at(b, |s| keys[s as usize]);
                    model.remove(&k);
                }
            } else if !model.contains_key(&g) {
                let id = u32::try_from(keys.len()).unwrap();
                keys.push(g);
                idx.grow_for(model.len() + 1, |s| keys[s as usize]);
                idx.insert(id, g, |s| keys[s as usize]);
                model.insert(g, id);
            }
            if step % 997 == 0 {
                for (&k, &id) in &model {
                    assert_eq!(idx.find(k, |s| keys[s as usize]).map(|f| f.1), Some(id));
                }
                assert_eq!(idx.ids().count(), model.len());
            }
        }
        assert!(idx.find(u64::MAX, |s| keys[s as usize]).is_none());
    }

    /// Exact sizing keeps the index at ≤ 6 bytes per entry (+ one bucket).
    #[test]
    fn reserve_is_six_bytes_per_entry() {
        for n in [1usize, 100, 4096, 5000, 100_000] {
            let mut i = PageIndex::default();
            i.reserve(n, |_| 0);
            assert!(i.bytes() <= 6 * n + 20, "{n}: {}", i.bytes());
        }
    }
}
