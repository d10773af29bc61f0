//! The future of a reference stream, for the offline policies (S1.3: Belady's OPT and
//! optimal batching need to know when each page is mapped next).
//!
//! Built once from the whole stream in O(N) (the pages collected forward, then one backward
//! pass) and shared read-only (`Arc`) by the policies of every quota of a sweep. Only `Map`
//! requests count: position `i` is the `i`-th map of the stream, and
//! [`Lookahead::next_use`]`(i)` is the position of the next map of the same page.
//!
//! Memory: 8 bytes per map request (a 4-byte dense page id and the 4-byte position of the
//! next map), plus 8 bytes per distinct page (id → page) and, while building, a hash map of
//! the distinct pages. A stream of 2^32 − 1 maps or more, whose positions need more than 32
//! bits, keeps the page and the next use as 8 bytes each (16 per map).
//! [`Lookahead::from_guest_maps`] builds it straight from a workload, so the stream itself
//! (16 bytes per reference in a `Vec<PageRef>`) is never held.

use crate::strategy::CacheOnly;
use crate::{PageMap, PageRef};
use iommulab_base::addr::{Gpa, Pfn};
use iommulab_workload::{Workload, WorkloadError};

/// Sentinel "never mapped again".
pub const NEVER: u64 = u64::MAX;

/// "Never mapped again" in the 32-bit representation.
const NEVER32: u32 = u32::MAX;

/// Most map requests the 32-bit representation holds: positions stay below [`NEVER32`].
const NARROW_MAX: usize = u32::MAX as usize - 1;

/// Next-use index over the map requests of one reference stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lookahead {
    repr: Repr,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Repr {
    /// Fewer than 2^32 − 1 maps.
    Narrow {
        /// The dense id of each map request's page.
        ids: Vec<u32>,
        /// For each map request, the position of the next map of its page, or [`NEVER32`].
        next: Vec<u32>,
        /// The page of each id.
        pages: Vec<u64>,
    },
    /// Longer streams.
    Wide {
        /// The page of each map request.
        pages: Vec<u64>,
        /// For each map request, the position of the next map of its page, or [`NEVER`].
        next: Vec<u64>,
    },
}

impl Default for Lookahead {
    fn default() -> Self {
        LookaheadBuilder::default().finish()
    }
}

/// Collects the mapped pages of a stream one at a time ([`push`](Self::push)), then builds
/// the [`Lookahead`] ([`finish`](Self::finish)): 4 bytes per map while collecting.
#[derive(Clone, Debug)]
pub struct LookaheadBuilder {
    ids: Vec<u32>,
    pages: Vec<u64>,
    index: PageMap<u64, u32>,
    /// Every page, once the stream outgrew `narrow_max` maps.
    wide: Option<Vec<u64>>,
    narrow_max: usize,
}

impl Default for LookaheadBuilder {
    fn default() -> Self {
        Self {
            ids: Vec::new(),
            pages: Vec::new(),
            index: PageMap::default(),
            wide: None,
            narrow_max: NARROW_MAX,
        }
    }
}

impl LookaheadBuilder {
    /// A builder that switches to the 64-bit representation past `narrow_max` maps (tests
    /// reach the switch without billions of maps).
    #[cfg(test)]
    fn with_narrow_max(narrow_max: usize) -> Self {
        Self {
            narrow_max: narrow_max.min(NARROW_MAX),
            ..Self::default()
        }
    }

    /// The next map request's page.
    // Ids count distinct pages, fewer than the maps, which stay below NARROW_MAX here.
    #[allow(clippy::cast_possible_truncation)]
    pub fn push(&mut self, page: Pfn<Gpa>) {
        let p = page.get();
        if self.wide.is_none() && self.ids.len() >= self.narrow_max {
            let all = self.ids.iter().map(|&i| self.pages[i as usize]).collect();
            self.wide = Some(all);
            (self.ids, self.pages, self.index) = Default::default();
        }
        if let Some(all) = self.wide.as_mut() {
            all.push(p);
            return;
        }
        // Fewer distinct pages than maps, which are below NARROW_MAX.
        let fresh = self.pages.len() as u32;
        let id = *self.index.entry(p).or_insert(fresh);
        if id == fresh {
            self.pages.push(p);
        }
        self.ids.push(id);
    }

    /// The lookahead of the pages pushed.
    // Narrow positions are below NARROW_MAX.
    #[allow(clippy::cast_possible_truncation)]
    pub fn finish(self) -> Lookahead {
        if let Some(pages) = self.wide {
            let mut next = vec![NEVER; pages.len()];
            let mut last: PageMap<u64, u64> = PageMap::default();
            for (i, &p) in pages.iter().enumerate().rev() {
                if let Some(n) = last.insert(p, i as u64) {
                    next[i] = n;
                }
            }
            return Lookahead {
                repr: Repr::Wide { pages, next },
            };
        }
        drop(self.index);
        let (mut ids, mut pages) = (self.ids, self.pages);
        // Growth by doubling left up to twice the room needed.
        ids.shrink_to_fit();
        pages.shrink_to_fit();
        let mut next = vec![NEVER32; ids.len()];
        let mut last = vec![NEVER32; pages.len()];
        for (i, &id) in ids.iter().enumerate().rev() {
            let l = &mut last[id as usize];
            next[i] = *l;
            // Below NARROW_MAX.
            *l = i as u32;
        }
        Lookahead {
            repr: Repr::Narrow { ids, next, pages },
        }
    }
}

impl Lookahead {
    /// The lookahead of the `Map` requests of `refs` (unmaps are skipped).
    pub fn from_refs(refs: &[PageRef]) -> Self {
        Self::from_pages(refs.iter().filter_map(|r| match *r {
            PageRef::Map(g) => Some(g),
            PageRef::Unmap(_) => None,
        }))
    }

    /// The lookahead of a sequence of mapped pages.
    ///
    /// # Examples
    /// ```
    /// use iommulab_base::addr::Pfn;
    /// use iommulab_virt::Lookahead;
    /// use iommulab_virt::lookahead::NEVER;
    /// let la = Lookahead::from_pages([1u64, 2, 1].map(Pfn::new));
    /// assert_eq!((la.next_use(0), la.next_use(1), la.next_use(2)), (2, NEVER, NEVER));
    /// ```
    pub fn from_pages(pages: impl IntoIterator<Item = Pfn<Gpa>>) -> Self {
        let mut b = LookaheadBuilder::default();
        for p in pages {
            b.push(p);
        }
        b.finish()
    }

    /// The lookahead of the page maps the map cache of a guest with `cache_only` and
    /// `guest_pages` pages of memory sees on workload `w`: the `Map` requests of
    /// `guest_page_refs(w, cache_only)` below `guest_pages`, read as the workload runs
    /// instead of from a stream held whole (every page of each admitted `Map` and of each
    /// segment of each admitted `MapSg`, in order). A page outside guest memory is refused
    /// before the map cache sees it, so it has no position here: an offline policy stays
    /// in step with the cache's maps and never maps such a page ahead.
    pub fn from_guest_maps<W: Workload<Phys = Gpa>>(
        w: &mut W,
        cache_only: CacheOnly,
        guest_pages: u64,
    ) -> Result<Self, WorkloadError> {
        let mut b = LookaheadBuilder::default();
        crate::guest::for_each_guest_page_ref(w, cache_only, |r| {
            if let PageRef::Map(g) = r
                && g.get() < guest_pages
            {
                b.push(g);
            }
        })?;
        Ok(b.finish())
    }

    /// Number of map requests.
    pub fn len(&self) -> usize {
        match &self.repr {
            Repr::Narrow { ids, .. } => ids.len(),
            Repr::Wide { pages, .. } => pages.len(),
        }
    }

    /// Whether the stream has no map request.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The page of map request `pos`.
    ///
    /// # Panics
    /// If `pos >= len()`.
    #[inline]
    pub fn page(&self, pos: usize) -> Pfn<Gpa> {
        Pfn::new(match &self.repr {
            Repr::Narrow { ids, pages, .. } => pages[ids[pos] as usize],
            Repr::Wide { pages, .. } => pages[pos],
        })
    }

    /// The position of the next map of the page of request `pos`, or [`NEVER`]
    /// (also for `pos >= len()`).
    #[inline]
    pub fn next_use(&self, pos: usize) -> u64 {
        match &self.repr {
            Repr::Narrow { next, .. } => match next.get(pos) {
                Some(&n) if n != NEVER32 => u64::from(n),
                _ => NEVER,
            },
            Repr::Wide { next, .. } => next.get(pos).copied().unwrap_or(NEVER),
        }
    }

    /// Heap bytes held.
    pub fn bytes(&self) -> usize {
        match &self.repr {
            Repr::Narrow { ids, next, pages } => {
                (ids.capacity() + next.capacity()) * 4 + pages.capacity() * 8
            }
            Repr::Wide { pages, next } => (pages.capacity() + next.capacity()) * 8,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The earlier representation: the page and the next use of every map as
    /// `u64`s, the next use found with a page → last-seen hash map.
    fn plain(pages: &[u64]) -> Vec<(u64, u64)> {
        let mut next = vec![NEVER; pages.len()];
        let mut last: std::collections::HashMap<u64, u64> = Default::default();
        for (i, &p) in pages.iter().enumerate().rev() {
            if let Some(n) = last.insert(p, i as u64) {
                next[i] = n;
            }
        }
        pages.iter().copied().zip(next).collect()
    }

    fn read(la: &Lookahead) -> Vec<(u64, u64)> {
        (0..la.len())
            .map(|i| (la.page(i).get(), la.next_use(i)))
            .collect()
    }

    /// Random streams (uniform over few and many pages, skewed, with huge page numbers):
    /// the 32-bit ids and positions, and the 64-bit form a stream switches to past its
    /// limit (here at a few hundred maps, partway through), read back exactly the plain
    /// representation, past the end too.
    #[test]
    fn compact_and_wide_forms_match_the_plain_one() {
        let mut x = 0x9e37_79b9_7f4a_7c15_u64;
        for (distinct, len) in [(1u64, 50usize), (10, 2000), (500, 3000), (100_000, 3000)] {
            let pages: Vec<u64> = (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    // Skewed to small pages: the smaller of two uniform draws.
                    let p = ((x >> 8) % distinct).min((x >> 40) % distinct);
                    if p % 7 == 3 { u64::MAX / 4096 - p } else { p }
                })
                .collect();
            let want = plain(&pages);
            for limit in [NARROW_MAX, len / 3, 0] {
                let mut b = LookaheadBuilder::with_narrow_max(limit);
                for &p in &pages {
                    b.push(Pfn::new(p));
                }
                let la = b.finish();
                assert_eq!(read(&la), want, "{distinct} pages, limit {limit}");
                assert_eq!(la.next_use(len), NEVER);
                assert_eq!(la.len(), len);
                let wide = matches!(la.repr, Repr::Wide { .. });
                assert_eq!(wide, limit < len, "{distinct} pages, limit {limit}");
            }
        }
        assert!(Lookahead::default().is_empty());
    }

    /// Read as the workload runs, the maps are those of `guest_page_refs`: random single
    /// and scatter-gather maps in every direction, for each kind of guest cache.
    #[test]
    fn guest_maps_are_the_maps_of_guest_page_refs() {
        use crate::guest_page_refs;
        use iommulab_workload::{InGuest, UniformRandom, UniformRandomConfig};
        let w = || {
            InGuest::new(
                UniformRandom::new(UniformRandomConfig {
                    ios: 3000,
                    sg_fraction: 0.3,
                    pool_pages: 4096,
                    ..UniformRandomConfig::default()
                })
                .unwrap(),
            )
        };
        for cache_only in [CacheOnly::All, CacheOnly::DmaAllocated, CacheOnly::ReadOnly] {
            let refs = guest_page_refs(&mut w(), cache_only).unwrap();
            let la = Lookahead::from_guest_maps(&mut w(), cache_only, u64::MAX).unwrap();
            assert_eq!(la, Lookahead::from_refs(&refs), "{cache_only:?}");
            if cache_only == CacheOnly::All {
                assert!(la.len() > 10_000);
            }
        }
    }

    /// 8 bytes per map (plus the distinct pages), half the plain form's 16.
    #[test]
    fn compact_form_takes_8_bytes_per_map() {
        let la = Lookahead::from_pages((0..100_000u64).map(|i| Pfn::new(i % 1000)));
        assert!(la.bytes() <= 100_000 * 8 + 1000 * 8 + 64, "{}", la.bytes());
    }
}
