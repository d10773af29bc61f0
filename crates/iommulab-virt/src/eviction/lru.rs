//! LRU eviction (S1.3, S1.4 victims, paper §2.4 and §4.2): the victim is the evictable page
//! least recently used.
//!
//! "Used" means mapped or held: a page is in use while pinned, so its recency is the time
//! it became evictable (its last unmap), and a prefetched page counts as used when it was
//! mapped ahead. The intrusive list holds only the evictable set E, least recent first: a
//! hit on an evictable page takes it out (it is pinned now), the unmap that drops its
//! refcount to 0 appends it. Every operation, `victim` included, is O(1); 8 bytes of
//! per-slot state. When every map is unmapped before the next map (no pinning), the order
//! is plain recency of maps, and LRU is a stack algorithm ([`crate::mrc`]).

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::{CacheSlot, CacheSlotList, EvictionPolicy};
use crate::{Lookahead, Result};
use iommulab_base::addr::{Gpa, Pfn};

/// LRU has no knobs.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LruConfig {}

/// Least recently used.
#[derive(Clone, Debug)]
pub struct Lru {
    /// Evictable pages, least recently used first.
    list: CacheSlotList,
}

impl Lru {
    /// Whether the page in `slot` is on the list (evictable).
    #[inline]
    pub(crate) fn is_evictable(&self, slot: CacheSlot) -> bool {
        self.list.contains(slot)
    }

    /// The least recently used evictable page for which `ok` holds.
    #[inline]
    pub(crate) fn first_where(&self, ok: impl Fn(CacheSlot) -> bool) -> Option<CacheSlot> {
        let mut s = self.list.front();
        while let Some(x) = s {
            if ok(x) {
                return Some(x);
            }
            s = self.list.next(x);
        }
        None
    }
}

impl EvictionPolicy for Lru {
    type Config = LruConfig;
    const NAME: &'static str = "lru";

    fn new(capacity: usize, _: &LruConfig, _: Option<Arc<Lookahead>>) -> Result<Self> {
        Ok(Self {
            list: CacheSlotList::with_capacity(capacity),
        })
    }

    fn reserve(&mut self, slots: usize) {
        self.list.reserve(slots);
    }

    #[inline]
    fn on_insert(&mut self, slot: CacheSlot, _: Pfn<Gpa>, pinned: bool) {
        if !pinned {
            self.list.push_back(slot);
        }
    }

    #[inline]
    fn on_hit(&mut self, slot: CacheSlot, _: Pfn<Gpa>, was_evictable: bool) {
        if was_evictable {
            self.list.remove(slot);
        }
    }

    #[inline]
    fn on_unpin(&mut self, slot: CacheSlot, _: Pfn<Gpa>) {
        self.list.push_back(slot);
    }

    #[inline]
    fn on_remove(&mut self, slot: CacheSlot, _: Pfn<Gpa>) {
        self.list.remove(slot);
    }

    #[inline]
    fn victim(&mut self, mut evictable: impl FnMut(CacheSlot) -> bool) -> Option<CacheSlot> {
        let v = self.list.front();
        debug_assert!(v.is_none_or(&mut evictable), "LRU list holds a pinned page");
        v
    }

    fn metadata_bytes(&self) -> usize {
        self.list.bytes()
    }
}

#[cfg(any(test, feature = "test-utils"))]
impl super::Dump for Lru {
    fn dump(&self) -> Vec<CacheSlot> {
        self.list.iter().collect()
    }
}
