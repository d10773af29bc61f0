//! 4 KiB page numbers of a trace as the statistics pass (`stats.rs`, `stats_iommu.rs`) and
//! the streamed hit-rate curves (`iommulab mrc --quotas`) keep them: numbered densely by
//! chunks of consecutive pages ([`PageIds`]), so per-page state lives in plain arrays, and sets
//! of pages as one bitmap word per 64-page chunk (`PageSet`). A mapping covers a run of
//! consecutive pages, so both pay one lookup per chunk the run touches instead of one per
//! page.

use iommulab_base::hash::FxHashMap;

/// log2 of the pages [`PageIds`] numbers at once.
const ID_CHUNK_SHIFT: u32 = 4;
/// Pages [`PageIds`] numbers at once: a run of up to 16 pages touches at most two chunks,
/// and a trace of scattered single pages costs at most 16 ids per page.
pub const ID_CHUNK: u64 = 1 << ID_CHUNK_SHIFT;

/// Most chunks [`PageIds`] numbers: 2^30 ids, so ids and the stack-distance slots (fewer
/// than twice the ids, plus 1024) fit in a `u32`.
const MAX_ID_CHUNKS: usize = 1 << (30 - ID_CHUNK_SHIFT);

/// Dense ids of 4 KiB pages: chunk `page / 16` gets the next 16 ids when it is first seen,
/// page `page` the id `base + page % 16`.
#[derive(Clone, Debug, Default)]
pub struct PageIds {
    /// Chunks below [`DIRECT_CHUNKS`] (the first 256 GiB of addresses, where a machine's
    /// RAM is): base id + 1 per chunk, 0 if not numbered; grown to the highest chunk seen.
    direct: Vec<u32>,
    /// Chunks above.
    chunks: FxHashMap<u64, u32>,
    /// Chunks numbered.
    numbered: usize,
}

/// Chunks [`PageIds`] looks up in a flat table instead of a hash map (2^22 chunks of 16 pages:
/// 256 GiB; at most 16 MiB of table, as large as the highest address seen needs).
const DIRECT_CHUNKS: u64 = 1 << 22;

/// The pages of one chunk a run covers: ids `base + lo .. base + hi`.
#[derive(Clone, Copy, Debug)]
pub struct IdRun {
    /// The id of the chunk's first page.
    pub base: u32,
    /// The first page of the run within the chunk.
    pub lo: u32,
    /// One past the run's last page within the chunk.
    pub hi: u32,
    /// The chunk was numbered by this call: its ids are new.
    pub fresh: bool,
}

/// More distinct pages than [`PageIds`] numbers (2^30 pages: 4 TiB of distinct memory).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TooManyPages;

impl PageIds {
    /// Ids numbered so far (16 per chunk).
    pub fn len(&self) -> usize {
        self.numbered << ID_CHUNK_SHIFT
    }

    /// Whether no page has been numbered.
    pub fn is_empty(&self) -> bool {
        self.numbered == 0
    }

    /// The part of the run `[page, end)` in `page`'s chunk (`page < end`), numbering the chunk
    /// if it is new.
    // Ids stay below 2^30 (MAX_ID_CHUNKS), in-chunk offsets below 16.
    #[allow(clippy::cast_possible_truncation)]
    #[inline]
    pub fn run(&mut self, page: u64, end: u64) -> Result<IdRun, TooManyPages> {
        let chunk = page >> ID_CHUNK_SHIFT;
        // Both below 16: the offsets of the run's first and last page inside the chunk.
        let lo = (page & (ID_CHUNK - 1)) as u32;
        let hi = (end - (chunk << ID_CHUNK_SHIFT)).min(ID_CHUNK) as u32;
        let (base, fresh) = match self.base(chunk) {
            Some(b) => (b, false),
            None => (self.number(chunk)?, true),
        };
        Ok(IdRun {
            base,
            lo,
            hi,
            fresh,
        })
    }

    /// Numbers chunk `chunk`, new: the id of its first page. Out of line: a chunk is new
    /// once, and the look-up of a known one is what runs per map.
    // Below MAX_ID_CHUNKS << 4 = 2^30.
    #[allow(clippy::cast_possible_truncation)]
    #[inline(never)]
    fn number(&mut self, chunk: u64) -> Result<u32, TooManyPages> {
        if self.numbered >= MAX_ID_CHUNKS {
            return Err(TooManyPages);
        }
        let b = (self.numbered << ID_CHUNK_SHIFT) as u32;
        self.numbered += 1;
        if chunk < DIRECT_CHUNKS {
            let i = chunk as usize;
            if i >= self.direct.len() {
                self.direct.resize(i + 1, 0);
            }
            self.direct[i] = b + 1;
        } else {
            self.chunks.insert(chunk, b);
        }
        Ok(b)
    }

    /// The id of page `page`, if its chunk has been numbered (a look-up alone: [`run`]
    /// numbers a new chunk).
    ///
    /// [`run`]: Self::run
    // In-chunk offsets are below 16.
    #[allow(clippy::cast_possible_truncation)]
    #[inline]
    pub fn id(&self, page: u64) -> Option<u32> {
        self.chunk_base(page)
            .map(|b| b + (page & (ID_CHUNK - 1)) as u32)
    }

    /// The id of the first page of `page`'s chunk, if the chunk has been numbered.
    #[inline]
    pub fn chunk_base(&self, page: u64) -> Option<u32> {
        self.base(page >> ID_CHUNK_SHIFT)
    }

    /// The id of chunk `chunk`'s first page, if numbered.
    // Chunks below DIRECT_CHUNKS index the table.
    #[allow(clippy::cast_possible_truncation)]
    #[inline]
    fn base(&self, chunk: u64) -> Option<u32> {
        if chunk < DIRECT_CHUNKS {
            match self.direct.get(chunk as usize) {
                Some(&b) if b > 0 => Some(b - 1),
                _ => None,
            }
        } else {
            self.chunks.get(&chunk).copied()
        }
    }
}

/// A set of 4 KiB pages: one bitmap word per 64-page chunk that ever held a page.
#[derive(Clone, Debug, Default)]
pub(crate) struct PageSet {
    /// Words of chunks below [`DIRECT_WORDS`], grown to the highest one seen.
    direct: Vec<u64>,
    /// Words of chunks above.
    words: FxHashMap<u64, u64>,
    len: u64,
}

/// 64-page chunks [`PageSet`] keeps in a flat table (2^20 words: the first 256 GiB of
/// addresses, as [`PageIds`]'s table; at most 8 MiB, as large as the highest address needs).
const DIRECT_WORDS: u64 = 1 << 20;

impl PageSet {
    /// Pages in the set.
    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    /// Calls `f(chunk, mask)` for each 64-page chunk of the pages `[first, end)`, with the
    /// mask of the run's pages in it.
    fn for_each_chunk(first: u64, end: u64, mut f: impl FnMut(u64, u64)) {
        let mut page = first;
        while page < end {
            let chunk = page >> 6;
            let lo = page & 63;
            let hi = (end - (chunk << 6)).min(64);
            // Bits lo..hi: hi - lo in 1..=64.
            let mask = (u64::MAX >> (64 - (hi - lo))) << lo;
            f(chunk, mask);
            page = (chunk << 6) + hi;
        }
    }

    /// Adds the pages `[first, end)`; how many were not in the set.
    pub(crate) fn insert_run(&mut self, first: u64, end: u64) -> u64 {
        let mut added = 0;
        let (direct, words) = (&mut self.direct, &mut self.words);
        Self::for_each_chunk(first, end, |chunk, mask| {
            let w = if chunk < DIRECT_WORDS {
                // Below 2^20.
                #[allow(clippy::cast_possible_truncation)]
                let i = chunk as usize;
                if i >= direct.len() {
                    direct.resize(i + 1, 0);
                }
                &mut direct[i]
            } else {
                words.entry(chunk).or_insert(0)
            };
            added += u64::from((mask & !*w).count_ones());
            *w |= mask;
        });
        self.len += added;
        added
    }

    /// Removes the pages `[first, end)`; how many were in the set.
    pub(crate) fn remove_run(&mut self, first: u64, end: u64) -> u64 {
        let mut removed = 0;
        let (direct, words) = (&mut self.direct, &mut self.words);
        Self::for_each_chunk(first, end, |chunk, mask| {
            let w = if chunk < DIRECT_WORDS {
                // Below 2^20.
                #[allow(clippy::cast_possible_truncation)]
                direct.get_mut(chunk as usize)
            } else {
                words.get_mut(&chunk)
            };
            if let Some(w) = w {
                removed += u64::from((mask & *w).count_ones());
                *w &= !mask;
            }
        });
        self.len -= removed;
        removed
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{HashMap, HashSet};

    use rand::{Rng, SeedableRng};

    use super::*;

    /// Random runs (short and long, across chunk edges) inserted and removed: the bitmap set
    /// agrees with a `HashSet` of pages on every count.
    #[test]
    fn page_set_matches_a_hash_set() {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(3);
        let mut s = PageSet::default();
        let mut h = HashSet::new();
        // Low pages (the flat table), pages across its border, and high ones (the hash map).
        let border = DIRECT_WORDS * 64;
        for _ in 0..20_000 {
            let first = match rng.gen_range(0..3) {
                0 => rng.gen_range(0..5000u64),
                1 => rng.gen_range(border - 400..border + 100),
                _ => rng.gen_range(border * 64..border * 64 + 5000),
            };
            let n = if rng.gen_bool(0.1) {
                rng.gen_range(1..300)
            } else {
                rng.gen_range(1..20)
            };
            let end = first + n;
            if rng.gen_bool(0.5) {
                let want = (first..end).filter(|p| h.insert(*p)).count() as u64;
                assert_eq!(s.insert_run(first, end), want);
            } else {
                let want = (first..end).filter(|p| h.remove(p)).count() as u64;
                assert_eq!(s.remove_run(first, end), want);
            }
            assert_eq!(s.len(), h.len() as u64);
        }
        // The top of the page-number space.
        let top = u64::MAX / 4096;
        assert_eq!(s.insert_run(top - 70, top + 1), 71);
    }

    /// Every page keeps one id, distinct pages get distinct ids, and a chunk is fresh once,
    /// whether its chunk sits in the flat table or the hash map (and across their border).
    #[test]
    fn ids_are_dense_and_stable() {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(4);
        let mut ids = PageIds::default();
        let mut seen: HashMap<u64, u32> = HashMap::new();
        let mut by_id: HashMap<u32, u64> = HashMap::new();
        let border = DIRECT_CHUNKS * ID_CHUNK;
        for _ in 0..5000 {
            let first = match rng.gen_range(0..3) {
                0 => rng.gen_range(0..100_000u64),
                1 => rng.gen_range(border - 200..border + 200),
                _ => rng.gen_range(u64::MAX / 8192..u64::MAX / 8192 + 100_000),
            };
            let end = first + rng.gen_range(1..40);
            let mut page = first;
            while page < end {
                let r = ids.run(page, end).unwrap();
                assert!(r.lo < r.hi && u64::from(r.hi) <= ID_CHUNK);
                assert_eq!(r.fresh, !seen.contains_key(&(page - u64::from(r.lo))));
                for i in r.lo..r.hi {
                    let p = page - u64::from(r.lo) + u64::from(i);
                    let id = r.base + i;
                    assert_eq!(*seen.entry(p).or_insert(id), id);
                    assert_eq!(*by_id.entry(id).or_insert(p), p);
                }
                seen.entry(page - u64::from(r.lo)).or_insert(r.base);
                assert_eq!(ids.chunk_base(page), Some(r.base));
                page += u64::from(r.hi - r.lo);
            }
        }
        assert!(by_id.keys().all(|&id| (id as usize) < ids.len()));
        assert!(ids.direct.len() as u64 <= DIRECT_CHUNKS && !ids.chunks.is_empty());
        assert_eq!(ids.chunk_base(border * 4), None);
    }
}
