//! Frequency-based prefetching (S1.4, paper §2.5 and §3.3): online; for each page remember
//! up to 3 *followers* (pages mapped right after it) with occurrence counts; a miss also
//! maps the page's most frequent follower if its count is above 2, then that follower's
//! follower, and so on up to `max_batch` pages; victims are chosen by LRU.
//!
//! Details the paper leaves open, decided here:
//! - "Mapped right after" counts every map request the driver makes (hits too), and a
//!   page mapped twice in a row is not its own follower.
//! - The threshold: §2.5 says "at least twice", §3.3 (the implementation) "higher than 2";
//!   we follow §3.3, `min_count = 3` by default (configurable).
//! - A fourth distinct follower replaces the least frequent one (the most recently added
//!   among equals keeps its place), starting at count 1.
//! - The chain walks through followers that are already cached (they need no mapping)
//!   and stops at a page already in the batch (a cycle), after `max_batch` hops, or when
//!   the batch holds `max_batch` pages. The paper gives no maximum; the default 32 is ours.
//!
//! Memory: the LRU list (8 bytes per slot) plus a follower table over every page ever
//! mapped (not only cached ones): 48 bytes per entry in a hash map.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::{EvictionPolicy, Lru, LruConfig, Room, Slot};
use crate::addr::{Gpa, Pfn};
use crate::virt::{Error, Lookahead, PageMap, Result};

/// Followers remembered per page (§3.3).
pub const FOLLOWERS: usize = 3;

/// Knobs of [`Prefetch`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PrefetchConfig {
    /// A follower is prefetched when it followed the page at least this often (§3.3:
    /// "higher than 2" → 3).
    pub min_count: u32,
    /// Pages one miss's hypercall maps at most, the missing page included. Default 32.
    pub max_batch: usize,
}

impl Default for PrefetchConfig {
    fn default() -> Self {
        Self {
            min_count: 3,
            max_batch: 32,
        }
    }
}

/// Up to [`FOLLOWERS`] `(page, count)` pairs; count 0 = empty.
type Followers = [(u64, u32); FOLLOWERS];

/// LRU victims plus prefetching of frequent followers on a miss.
#[derive(Clone, Debug)]
pub struct Prefetch {
    lru: Lru,
    min_count: u32,
    max_batch: usize,
    followers: PageMap<u64, Followers>,
    /// The previous map request.
    last: Option<u64>,
}

impl Prefetch {
    /// The follower of `gfn` the policy would prefetch, if any.
    pub fn follower(&self, gfn: Pfn<Gpa>) -> Option<Pfn<Gpa>> {
        let f = self.followers.get(&gfn.get())?;
        let best = f.iter().rev().max_by_key(|e| e.1)?; // rev: the first of equal maxima
        (best.1 >= self.min_count).then(|| Pfn::new(best.0))
    }

    /// Pages with a follower table (bounded by the distinct pages mapped).
    pub fn tracked_pages(&self) -> usize {
        self.followers.len()
    }

    fn record(&mut self, prev: u64, next: u64) {
        let f = self.followers.entry(prev).or_insert([(0, 0); FOLLOWERS]);
        if let Some(e) = f.iter_mut().find(|e| e.1 > 0 && e.0 == next) {
            e.1 = e.1.saturating_add(1);
            return;
        }
        // A free entry, else the least frequent (last among equals: the newest).
        let i = match f.iter().position(|e| e.1 == 0) {
            Some(i) => i,
            None => {
                let min = f.iter().map(|e| e.1).min().unwrap_or(0);
                f.iter().rposition(|e| e.1 == min).unwrap_or(FOLLOWERS - 1)
            }
        };
        f[i] = (next, 1);
    }
}

impl EvictionPolicy for Prefetch {
    type Config = PrefetchConfig;
    const NAME: &'static str = "prefetch";

    fn new(capacity: usize, config: &PrefetchConfig, _: Option<Arc<Lookahead>>) -> Result<Self> {
        if config.max_batch == 0 {
            return Err(Error::BadConfig {
                policy: Self::NAME,
                reason: "max_batch (0) must be at least 1".to_owned(),
            });
        }
        Ok(Self {
            lru: Lru::new(capacity, &LruConfig::default(), None)?,
            min_count: config.min_count,
            max_batch: config.max_batch,
            followers: PageMap::default(),
            last: None,
        })
    }

    fn reserve(&mut self, slots: usize) {
        self.lru.reserve(slots);
    }

    #[inline]
    fn on_reference(&mut self, gfn: Pfn<Gpa>) {
        let g = gfn.get();
        if let Some(prev) = self.last
            && prev != g
        {
            self.record(prev, g);
        }
        self.last = Some(g);
    }

    #[inline]
    fn on_insert(&mut self, slot: Slot, gfn: Pfn<Gpa>, pinned: bool) {
        self.lru.on_insert(slot, gfn, pinned);
    }

    #[inline]
    fn on_hit(&mut self, slot: Slot, gfn: Pfn<Gpa>, was_evictable: bool) {
        self.lru.on_hit(slot, gfn, was_evictable);
    }

    #[inline]
    fn on_unpin(&mut self, slot: Slot, gfn: Pfn<Gpa>) {
        self.lru.on_unpin(slot, gfn);
    }

    #[inline]
    fn on_remove(&mut self, slot: Slot, gfn: Pfn<Gpa>) {
        self.lru.on_remove(slot, gfn);
    }

    #[inline]
    fn victim(&mut self, evictable: impl FnMut(Slot) -> bool) -> Option<Slot> {
        self.lru.victim(evictable)
    }

    fn prefetch(
        &mut self,
        missing: Pfn<Gpa>,
        room: Room,
        cached: impl Fn(Pfn<Gpa>) -> bool,
        out: &mut Vec<Pfn<Gpa>>,
    ) {
        let limit = (self.max_batch - 1).min(room.total());
        let mut cur = missing;
        for _ in 0..self.max_batch {
            if out.len() >= limit {
                break;
            }
            let Some(f) = self.follower(cur) else { break };
            if f == missing || out.contains(&f) {
                break;
            }
            if !cached(f) {
                out.push(f);
            }
            cur = f;
        }
    }

    fn metadata_bytes(&self) -> usize {
        self.lru.metadata_bytes()
            + self.followers.capacity() * (std::mem::size_of::<(u64, Followers)>() + 1)
    }
}

#[cfg(any(test, feature = "test-utils"))]
impl super::Dump for Prefetch {
    fn dump(&self) -> Vec<Slot> {
        super::Dump::dump(&self.lru)
    }
}
