//! FIFO eviction (S1.3, paper §4.2 "evict pages in a first in first out order"): the
//! victim is the evictable page that entered the map cache first; hits do not refresh it.
//!
//! One intrusive list holds every cached page in insertion order, pinned pages included
//! (taking a pinned page out and putting it back later would need an ordered insert). The
//! victim is the first evictable page from the head, so `victim` costs O(1 + p) where p is
//! the number of pinned pages older than the victim — in DMA workloads the oldest pages are
//! almost never still in flight. 8 bytes of per-slot state.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::{CacheSlot, CacheSlotList, EvictionPolicy};
use crate::{Lookahead, Result};
use iommulab_base::addr::{Gpa, Pfn};

/// FIFO has no knobs.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FifoConfig {}

/// First in, first out.
#[derive(Clone, Debug)]
pub struct Fifo {
    /// Every cached page, oldest first.
    queue: CacheSlotList,
}

impl EvictionPolicy for Fifo {
    type Config = FifoConfig;
    const NAME: &'static str = "fifo";

    fn new(capacity: usize, _: &FifoConfig, _: Option<Arc<Lookahead>>) -> Result<Self> {
        Ok(Self {
            queue: CacheSlotList::with_capacity(capacity),
        })
    }

    fn reserve(&mut self, slots: usize) {
        self.queue.reserve(slots);
    }

    #[inline]
    fn on_insert(&mut self, slot: CacheSlot, _: Pfn<Gpa>, _: bool) {
        self.queue.push_back(slot);
    }

    #[inline]
    fn on_hit(&mut self, _: CacheSlot, _: Pfn<Gpa>, _: bool) {}

    #[inline]
    fn on_unpin(&mut self, _: CacheSlot, _: Pfn<Gpa>) {}

    #[inline]
    fn on_remove(&mut self, slot: CacheSlot, _: Pfn<Gpa>) {
        self.queue.remove(slot);
    }

    #[inline]
    fn victim(&mut self, mut evictable: impl FnMut(CacheSlot) -> bool) -> Option<CacheSlot> {
        let mut s = self.queue.front();
        while let Some(x) = s {
            if evictable(x) {
                return Some(x);
            }
            s = self.queue.next(x);
        }
        None
    }

    fn metadata_bytes(&self) -> usize {
        self.queue.bytes()
    }
}

#[cfg(any(test, feature = "test-utils"))]
impl super::Dump for Fifo {
    fn dump(&self) -> Vec<CacheSlot> {
        self.queue.iter().collect()
    }
}
