//! Deliberately simple models of the guest map cache (S1.2, S1.5), checked
//! against [`crate::virt::MapCache`] and the one-pass curves of [`crate::mrc`].
//!
//! [`NaiveCache`] keeps the cached pages in a `Vec` and finds victims by linear scans:
//! FIFO by insertion number, LRU by the time the page last became evictable (its
//! `NaiveLru` order is a `Vec` of evictable pages, least recent first), OPT by scanning the
//! future map requests for each candidate. Same semantics as the real cache (refusals,
//! over-quota after a shrink, one eviction per unmap while above the quota), none of its
//! cleverness.

use crate::addr::{Gpa, Pfn};
use crate::virt::PageRef;

/// Which victim rule the naive cache follows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NaiveKind {
    /// Oldest insertion first.
    Fifo,
    /// Least recently became evictable first (a `Vec` kept in recency order).
    Lru,
    /// Farthest next map, found by scanning `future` (the whole stream's mapped pages)
    /// from the current position.
    Opt {
        /// Every map request's page, in order.
        future: Vec<Pfn<Gpa>>,
    },
}

/// A naive map-cache outcome (owned).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NaiveOutcome {
    /// Cached.
    Hit,
    /// Mapped after evicting these pages, in order.
    Miss(Vec<Pfn<Gpa>>),
    /// No room.
    Refused,
}

/// A map cache as a `Vec` of `(page, refcount, inserted_at)` plus an LRU `Vec`.
#[derive(Clone, Debug)]
pub struct NaiveCache {
    kind: NaiveKind,
    quota: usize,
    /// `(page, refcount, insertion number)`.
    pages: Vec<(Pfn<Gpa>, u32, u64)>,
    /// Evictable pages, least recently released first (LRU only).
    lru: Vec<Pfn<Gpa>>,
    inserted: u64,
    /// Map requests seen (position in `future` for OPT).
    pos: usize,
    /// Hits, misses, refusals, evictions.
    pub counts: (u64, u64, u64, u64),
}

/// The naive LRU map cache (`NaiveLru`).
pub type NaiveLru = NaiveCache;

impl NaiveCache {
    /// An empty cache.
    pub fn new(kind: NaiveKind, quota: usize) -> Self {
        Self {
            kind,
            quota,
            pages: Vec::new(),
            lru: Vec::new(),
            inserted: 0,
            pos: 0,
            counts: (0, 0, 0, 0),
        }
    }

    /// An empty LRU cache.
    pub fn lru(quota: usize) -> Self {
        Self::new(NaiveKind::Lru, quota)
    }

    fn find(&self, g: Pfn<Gpa>) -> Option<usize> {
        self.pages.iter().position(|p| p.0 == g)
    }

    fn evictable(&self) -> usize {
        self.pages.iter().filter(|p| p.1 == 0).count()
    }

    fn victim(&self) -> Option<Pfn<Gpa>> {
        match &self.kind {
            NaiveKind::Lru => self.lru.first().copied(),
            NaiveKind::Fifo => self
                .pages
                .iter()
                .filter(|p| p.1 == 0)
                .min_by_key(|p| p.2)
                .map(|p| p.0),
            NaiveKind::Opt { future } => self
                .pages
                .iter()
                .filter(|p| p.1 == 0)
                .max_by_key(|p| {
                    future[self.pos..]
                        .iter()
                        .position(|&f| f == p.0)
                        .unwrap_or(usize::MAX)
                })
                .map(|p| p.0),
        }
    }

    fn evict(&mut self) -> Option<Pfn<Gpa>> {
        let v = self.victim()?;
        self.pages.retain(|p| p.0 != v);
        self.lru.retain(|&p| p != v);
        self.counts.3 += 1;
        Some(v)
    }

    /// Maps `g`.
    pub fn map(&mut self, g: Pfn<Gpa>) -> NaiveOutcome {
        // OPT looks for the next use after this request.
        self.pos += 1;
        if let Some(i) = self.find(g) {
            if self.pages[i].1 == 0 {
                self.lru.retain(|&p| p != g);
            }
            self.pages[i].1 += 1;
            self.counts.0 += 1;
            return NaiveOutcome::Hit;
        }
        let need = (self.pages.len() + 1).saturating_sub(self.quota);
        if need > self.evictable() {
            self.counts.2 += 1;
            return NaiveOutcome::Refused;
        }
        let evicted = (0..need).filter_map(|_| self.evict()).collect();
        self.inserted += 1;
        self.pages.push((g, 1, self.inserted));
        self.counts.1 += 1;
        NaiveOutcome::Miss(evicted)
    }

    /// Unmaps `g`: `Err(())` if it is not pinned; else the page evicted above quota.
    #[allow(clippy::result_unit_err)]
    pub fn unmap(&mut self, g: Pfn<Gpa>) -> Result<Option<Pfn<Gpa>>, ()> {
        let i = self.find(g).ok_or(())?;
        if self.pages[i].1 == 0 {
            return Err(());
        }
        self.pages[i].1 -= 1;
        if self.pages[i].1 == 0 {
            self.lru.push(g);
            if self.pages.len() > self.quota {
                return Ok(self.evict());
            }
        }
        Ok(None)
    }

    /// Sets the quota; returns the pages evicted.
    pub fn set_quota(&mut self, q: usize) -> Vec<Pfn<Gpa>> {
        self.quota = q;
        let mut out = Vec::new();
        while self.pages.len() > q {
            match self.evict() {
                Some(v) => out.push(v),
                None => break,
            }
        }
        out
    }

    /// Cached pages with refcounts, sorted by page.
    pub fn snapshot(&self) -> Vec<(Pfn<Gpa>, u32)> {
        let mut v: Vec<_> = self.pages.iter().map(|p| (p.0, p.1)).collect();
        v.sort();
        v
    }

    /// LRU only: evictable pages, next victim first.
    pub fn lru_order(&self) -> &[Pfn<Gpa>] {
        &self.lru
    }
}

/// Replays `refs` through a naive cache of `kind` at `quota`; returns `(hits, misses,
/// refused)`. The per-quota oracle for the one-pass curves.
pub fn naive_replay(refs: &[PageRef], quota: usize, kind: &NaiveKind) -> (u64, u64, u64) {
    let mut c = NaiveCache::new(kind.clone(), quota);
    for r in refs {
        match *r {
            PageRef::Map(g) => {
                c.map(g);
            }
            PageRef::Unmap(g) => {
                let _ = c.unmap(g);
            }
        }
    }
    (c.counts.0, c.counts.1, c.counts.2)
}

/// The pages of the map requests of `refs` (the future an OPT oracle scans).
pub fn map_pages(refs: &[PageRef]) -> Vec<Pfn<Gpa>> {
    refs.iter()
        .filter_map(|r| match *r {
            PageRef::Map(g) => Some(g),
            PageRef::Unmap(_) => None,
        })
        .collect()
}
