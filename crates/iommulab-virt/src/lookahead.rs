//! The future of a reference stream, for the offline policies (S1.3: Belady's OPT and
//! optimal batching need to know when each page is mapped next).
//!
//! Built once from the whole stream in O(N) (one backward pass with a page → last-seen
//! hash map) and shared read-only (`Arc`) by the policies of every quota of a sweep. Only
//! `Map` requests count: position `i` is the `i`-th map of the stream, and
//! [`Lookahead::next_use`]`(i)` is the position of the next map of the same page.
//!
//! Memory: 16 bytes per map request (the page, 8 bytes, and its next use, 8 bytes), plus a
//! transient hash map of the distinct pages while building.

use crate::addr::{Gpa, Pfn};
use crate::{PageMap, PageRef};

/// Sentinel "never mapped again".
pub const NEVER: u64 = u64::MAX;

/// Next-use index over the map requests of one reference stream.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Lookahead {
    /// The page of each map request, in order.
    pages: Vec<u64>,
    /// For each map request, the position of the next map of the same page, or [`NEVER`].
    next: Vec<u64>,
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
        let pages: Vec<u64> = pages.into_iter().map(Pfn::get).collect();
        let mut next = vec![NEVER; pages.len()];
        let mut last: PageMap<u64, u64> = PageMap::default();
        for (i, &p) in pages.iter().enumerate().rev() {
            if let Some(n) = last.insert(p, i as u64) {
                next[i] = n;
            }
        }
        Self { pages, next }
    }

    /// Number of map requests.
    pub fn len(&self) -> usize {
        self.pages.len()
    }

    /// Whether the stream has no map request.
    pub fn is_empty(&self) -> bool {
        self.pages.is_empty()
    }

    /// The page of map request `pos`.
    ///
    /// # Panics
    /// If `pos >= len()`.
    #[inline]
    pub fn page(&self, pos: usize) -> Pfn<Gpa> {
        Pfn::new(self.pages[pos])
    }

    /// The position of the next map of the page of request `pos`, or [`NEVER`]
    /// (also for `pos >= len()`).
    #[inline]
    pub fn next_use(&self, pos: usize) -> u64 {
        self.next.get(pos).copied().unwrap_or(NEVER)
    }

    /// Heap bytes held.
    pub fn bytes(&self) -> usize {
        (self.pages.capacity() + self.next.capacity()) * 8
    }
}
