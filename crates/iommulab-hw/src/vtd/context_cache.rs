//! The context cache: recently used context entries, keyed by source id (S3.2).
//!
//! On a miss the hardware fetches the root entry (indexed by bus) and the context entry
//! (indexed by devfn): two memory reads. Real sizes are not published; the model is a small
//! fully associative cache with true LRU (O(entries) per operation, no allocation after
//! construction). A capacity of 0 disables caching.

use iommulab_base::addr::{Bdf, DomainId};

use super::table::SlTable;

/// What a cached context entry gives the walk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CachedContext {
    /// The context entry's domain id (the IOTLB tag).
    pub domain: DomainId,
    /// The second-level table (SLPTPTR and levels from AW).
    pub table: SlTable,
}

#[derive(Clone, Copy, Debug)]
struct Line {
    source_id: u16,
    ctx: CachedContext,
    stamp: u64,
}

/// A fully associative, LRU context cache.
#[derive(Debug, Clone)]
pub struct ContextCache {
    lines: Vec<Line>,
    capacity: usize,
    clock: u64,
}

impl ContextCache {
    /// An empty cache of `capacity` entries.
    pub fn new(capacity: usize) -> Self {
        Self {
            lines: Vec::with_capacity(capacity),
            capacity,
            clock: 0,
        }
    }

    /// The cached context of `bdf`, refreshing its LRU position.
    pub fn lookup(&mut self, bdf: Bdf) -> Option<CachedContext> {
        let sid = bdf.source_id();
        let line = self.lines.iter_mut().find(|l| l.source_id == sid)?;
        self.clock += 1;
        line.stamp = self.clock;
        Some(line.ctx)
    }

    /// Caches `ctx` for `bdf`, evicting the least recently used line if full.
    pub fn insert(&mut self, bdf: Bdf, ctx: CachedContext) {
        if self.capacity == 0 {
            return;
        }
        self.clock += 1;
        let line = Line {
            source_id: bdf.source_id(),
            ctx,
            stamp: self.clock,
        };
        if let Some(l) = self
            .lines
            .iter_mut()
            .find(|l| l.source_id == line.source_id)
        {
            *l = line;
        } else if self.lines.len() < self.capacity {
            self.lines.push(line);
        } else if let Some(victim) = self.lines.iter_mut().min_by_key(|l| l.stamp) {
            *victim = line;
        }
    }

    /// Device-selective invalidation: drops `bdf`'s entry.
    pub fn invalidate(&mut self, bdf: Bdf) {
        let sid = bdf.source_id();
        self.lines.retain(|l| l.source_id != sid);
    }

    /// Global invalidation.
    pub fn invalidate_all(&mut self) {
        self.lines.clear();
    }

    /// Number of cached entries.
    pub fn len(&self) -> usize {
        self.lines.len()
    }

    /// Whether nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use iommulab_base::addr::{Hpa, Pfn};

    fn ctx(d: u16) -> CachedContext {
        CachedContext {
            domain: DomainId::new(d),
            table: SlTable::from_root(Pfn::<Hpa>::new(u64::from(d)), 4),
        }
    }

    fn bdf(dev: u8) -> Bdf {
        Bdf::new(0, dev, 0).unwrap()
    }

    #[test]
    fn evicts_least_recently_used_context() {
        let mut c = ContextCache::new(2);
        c.insert(bdf(1), ctx(1));
        c.insert(bdf(2), ctx(2));
        assert_eq!(c.lookup(bdf(1)), Some(ctx(1)));
        c.insert(bdf(3), ctx(3));
        assert_eq!(c.lookup(bdf(2)), None);
        assert_eq!(c.lookup(bdf(1)), Some(ctx(1)));
        c.invalidate(bdf(1));
        assert_eq!(c.lookup(bdf(1)), None);
        assert_eq!(c.len(), 1);
    }

    #[test]
    fn zero_capacity_caches_nothing() {
        let mut c = ContextCache::new(0);
        c.insert(bdf(1), ctx(1));
        assert!(c.is_empty());
    }
}
