//! Frequency-based prefetching (S1.4, paper §2.5 and §3.3): online; for each page remember
//! up to 3 *followers* (pages mapped right after it) with occurrence counts; a miss also
//! maps the page's most frequent follower if its count is above 2, then that follower's
//! follower, and so on up to `max_batch` pages; victims are chosen by LRU.
//!
//! Details the paper leaves open, decided here:
//! - "Mapped right after" counts every map request the driver makes (hits too), and a
//!   page mapped twice in a row is not its own follower.
//! - The threshold: §2.5 says "at least twice", §3.3 (the implementation) "higher than 2";
//!   we follow §3.3, `min_count = 3` by default (configurable, at most 255: counts are
//!   8-bit and saturate, which only matters above the threshold).
//! - A fourth distinct follower replaces the least frequent one (the most recently added
//!   among equals keeps its place), starting at count 1.
//! - The chain walks through followers that are already cached (they need no mapping)
//!   and stops at a page already on the chain (a cycle), after `max_batch − 1` hops, or
//!   when `max_batch − 1` pages are to be mapped. The paper gives no maximum; the default
//!   32 is ours.
//! - **The batch is capped by the quota.** A page mapped ahead takes a free entry or
//!   evicts an LRU victim; the victims never include a page of the chain: the cached
//!   followers the chain walked through are predicted to be mapped *before* the pages
//!   after them, so evicting one to make room for a later one would trade a near hit for
//!   a far one (with a quota of 2 on netperf's alternating head/data pages it evicted the
//!   partner page on every miss: 12% hits against LRU's 63%). So an evictable cached
//!   chain page uses up one unit of room, and while the batch is inserted the LRU victim
//!   search skips the chain (`victim` may then return `None` with evictable pages left:
//!   the batch stops there). The LRU order itself is not changed by a prediction.
//!
//! Memory (S1.4's "no more than 3 pages ... and the number of occurrences"): per *cached*
//! page the LRU list (8 bytes per slot). Per page *ever mapped* (the followers of an
//! evicted page are what makes its next miss a batch, so they cannot be dropped with the
//! page) a history entry: its page number (8 bytes), 3 followers as 4-byte indices of
//! their own entries, 3 one-byte counts — 23 bytes in three dense arrays, kept in
//! 4096-entry chunks (≤ 6.25% slack, in the last chunk only) — plus a 4-byte open-addressing index at load
//! ≤ 2/3 ([`PageIndex`]). [`EvictionPolicy::metadata_bytes`] reports the per-cached part,
//! [`EvictionPolicy::history_bytes`] the history.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::{CacheSlot, EvictionPolicy, Lru, LruConfig, Room};
use crate::page_index::PageIndex;
use crate::{Error, Lookahead, Result};
use iommulab_base::addr::{Gpa, Pfn};

/// Followers remembered per page (§3.3).
pub const FOLLOWERS: usize = 3;

/// History entries per chunk of the per-page arrays.
const CHUNK: usize = 4096;

/// Knobs of [`Prefetch`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PrefetchConfig {
    /// A follower is prefetched when it followed the page at least this often (§3.3:
    /// "higher than 2" → 3). 1..=255.
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

/// "No follower" in a history entry.
const NONE: u32 = u32::MAX;

/// Append-only per-page history: page number, follower ids and counts, in chunks.
#[derive(Clone, Debug, Default)]
struct History {
    gfns: Vec<Vec<u64>>,
    next: Vec<Vec<[u32; FOLLOWERS]>>,
    counts: Vec<Vec<[u8; FOLLOWERS]>>,
    len: usize,
    index: PageIndex,
}

impl History {
    #[inline]
    fn gfn(&self, id: u32) -> u64 {
        let i = id as usize;
        self.gfns[i / CHUNK][i % CHUNK]
    }

    #[inline]
    fn find(&self, gfn: u64) -> Option<u32> {
        self.index.find(gfn, |id| self.gfn(id)).map(|(_, id)| id)
    }

    /// The id of `gfn`, added if new.
    #[allow(clippy::cast_possible_truncation)] // ids < 2^32 − 1 (checked)
    fn id(&mut self, gfn: u64) -> u32 {
        if let Some(id) = self.find(gfn) {
            return id;
        }
        assert!(self.len < NONE as usize, "prefetch history is full");
        if self.len.is_multiple_of(CHUNK) {
            self.gfns.push(Vec::new());
            self.next.push(Vec::new());
            self.counts.push(Vec::new());
        }
        let c = self.len / CHUNK;
        let used = self.gfns[c].len();
        if used == self.gfns[c].capacity() {
            // Grow a chunk by 1/16 (at least 64 entries) up to CHUNK: ≤ 6.25% slack, in
            // the last chunk only (amortised O(1) copies per entry).
            let extra = (used / 16).max(64).min(CHUNK - used);
            self.gfns[c].reserve_exact(extra);
            self.next[c].reserve_exact(extra);
            self.counts[c].reserve_exact(extra);
        }
        self.gfns[c].push(gfn);
        self.next[c].push([NONE; FOLLOWERS]);
        self.counts[c].push([0; FOLLOWERS]);
        let id = self.len as u32;
        self.len += 1;
        let (gfns, index) = (&self.gfns, &mut self.index);
        let key = |i: u32| gfns[i as usize / CHUNK][i as usize % CHUNK];
        index.grow_for(self.len, key);
        index.insert(id, gfn, key);
        id
    }

    #[inline]
    fn entry_mut(&mut self, id: u32) -> (&mut [u32; FOLLOWERS], &mut [u8; FOLLOWERS]) {
        let i = id as usize;
        (
            &mut self.next[i / CHUNK][i % CHUNK],
            &mut self.counts[i / CHUNK][i % CHUNK],
        )
    }

    #[inline]
    fn entry(&self, id: u32) -> (&[u32; FOLLOWERS], &[u8; FOLLOWERS]) {
        let i = id as usize;
        (
            &self.next[i / CHUNK][i % CHUNK],
            &self.counts[i / CHUNK][i % CHUNK],
        )
    }

    fn bytes(&self) -> usize {
        let per = std::mem::size_of::<u64>()
            + std::mem::size_of::<[u32; FOLLOWERS]>()
            + std::mem::size_of::<[u8; FOLLOWERS]>();
        self.gfns.iter().map(Vec::capacity).sum::<usize>() * per
            + self.gfns.capacity() * 3 * std::mem::size_of::<Vec<u64>>()
            + self.index.bytes()
    }
}

/// LRU victims plus prefetching of frequent followers on a miss.
#[derive(Clone, Debug)]
pub struct Prefetch {
    lru: Lru,
    min_count: u8,
    max_batch: usize,
    history: History,
    /// History id of the previous map request.
    last: Option<u32>,
    /// History id of the current map request.
    current: u32,
    /// Ids on the current miss's chain (cycle check); scratch.
    chain: Vec<u32>,
    /// Cached slots on the chain, which the batch's victims must skip; cleared by
    /// [`EvictionPolicy::on_batch_end`].
    protected: Vec<CacheSlot>,
}

impl Prefetch {
    /// The follower of `gfn` the policy would prefetch, if any.
    pub fn follower(&self, gfn: Pfn<Gpa>) -> Option<Pfn<Gpa>> {
        let id = self.history.find(gfn.get())?;
        self.best(id).map(|f| Pfn::new(self.history.gfn(f)))
    }

    /// Pages with a history entry (the distinct pages mapped).
    pub fn tracked_pages(&self) -> usize {
        self.history.len
    }

    /// The most frequent follower of `id` if its count reaches `min_count` (the first of
    /// equal maxima).
    #[inline]
    fn best(&self, id: u32) -> Option<u32> {
        let (next, counts) = self.history.entry(id);
        let mut b = 0;
        for i in 1..FOLLOWERS {
            if counts[i] > counts[b] {
                b = i;
            }
        }
        (counts[b] >= self.min_count && next[b] != NONE).then_some(next[b])
    }

    fn record(&mut self, prev: u32, next_id: u32) {
        let (next, counts) = self.history.entry_mut(prev);
        if let Some(i) = (0..FOLLOWERS).find(|&i| counts[i] > 0 && next[i] == next_id) {
            counts[i] = counts[i].saturating_add(1);
            return;
        }
        // A free entry, else the least frequent (last among equals: the newest).
        let i = match counts.iter().position(|&c| c == 0) {
            Some(i) => i,
            None => {
                let min = counts.iter().copied().min().unwrap_or(0);
                counts
                    .iter()
                    .rposition(|&c| c == min)
                    .unwrap_or(FOLLOWERS - 1)
            }
        };
        next[i] = next_id;
        counts[i] = 1;
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
        let Ok(min_count @ 1..) = u8::try_from(config.min_count) else {
            return Err(Error::BadConfig {
                policy: Self::NAME,
                reason: format!("min_count ({}) must be in 1..=255", config.min_count),
            });
        };
        Ok(Self {
            lru: Lru::new(capacity, &LruConfig::default(), None)?,
            min_count,
            max_batch: config.max_batch,
            history: History::default(),
            last: None,
            current: NONE,
            chain: Vec::with_capacity(config.max_batch.min(1024)),
            protected: Vec::with_capacity(config.max_batch.min(1024)),
        })
    }

    fn reserve(&mut self, slots: usize) {
        self.lru.reserve(slots);
    }

    #[inline]
    fn on_reference(&mut self, gfn: Pfn<Gpa>) {
        let id = self.history.id(gfn.get());
        if let Some(prev) = self.last
            && prev != id
        {
            self.record(prev, id);
        }
        self.last = Some(id);
        self.current = id;
    }

    #[inline]
    fn on_insert(&mut self, slot: CacheSlot, gfn: Pfn<Gpa>, pinned: bool) {
        self.lru.on_insert(slot, gfn, pinned);
    }

    #[inline]
    fn on_hit(&mut self, slot: CacheSlot, gfn: Pfn<Gpa>, was_evictable: bool) {
        self.lru.on_hit(slot, gfn, was_evictable);
    }

    #[inline]
    fn on_unpin(&mut self, slot: CacheSlot, gfn: Pfn<Gpa>) {
        self.lru.on_unpin(slot, gfn);
    }

    #[inline]
    fn on_remove(&mut self, slot: CacheSlot, gfn: Pfn<Gpa>) {
        self.lru.on_remove(slot, gfn);
    }

    #[inline]
    fn victim(&mut self, mut evictable: impl FnMut(CacheSlot) -> bool) -> Option<CacheSlot> {
        if self.protected.is_empty() {
            return self.lru.victim(evictable);
        }
        let protected = &self.protected;
        let v = self.lru.first_where(|s| !protected.contains(&s));
        debug_assert!(v.is_none_or(&mut evictable), "LRU list holds a pinned page");
        v
    }

    fn prefetch(
        &mut self,
        missing: Pfn<Gpa>,
        room: Room,
        cached: impl Fn(Pfn<Gpa>) -> Option<CacheSlot>,
        out: &mut Vec<Pfn<Gpa>>,
    ) {
        debug_assert_eq!(self.history.find(missing.get()), Some(self.current));
        // S1.4: the batch (missing page + pages mapped ahead) holds at most max_batch
        // pages, and it can only use the room the quota leaves.
        let most = self.max_batch - 1;
        let mut budget = room.total();
        self.chain.clear();
        self.protected.clear();
        self.chain.push(self.current);
        let mut cur = self.current;
        for _ in 0..most {
            if budget == 0 || out.len() >= most {
                break;
            }
            let Some(f) = self.best(cur) else { break };
            if self.chain.contains(&f) {
                break;
            }
            self.chain.push(f);
            let g = Pfn::new(self.history.gfn(f));
            match cached(g) {
                Some(slot) => {
                    if self.lru.is_evictable(slot) {
                        // Kept through the batch: it takes one unit of room.
                        budget -= 1;
                        self.protected.push(slot);
                    }
                }
                None => {
                    budget -= 1;
                    out.push(g);
                }
            }
            cur = f;
        }
    }

    fn on_batch_end(&mut self) {
        self.protected.clear();
    }

    fn metadata_bytes(&self) -> usize {
        self.lru.metadata_bytes()
            + (self.chain.capacity() + self.protected.capacity()) * std::mem::size_of::<u32>()
    }

    fn history_bytes(&self) -> usize {
        self.history.bytes()
    }
}

#[cfg(any(test, feature = "test-utils"))]
impl super::Dump for Prefetch {
    fn dump(&self) -> Vec<CacheSlot> {
        super::Dump::dump(&self.lru)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(g: u64) -> Pfn<Gpa> {
        Pfn::new(g)
    }

    /// Teaches `a → b → c` (three times each, S1.4's "more than 2").
    fn taught() -> Prefetch {
        let mut f = Prefetch::new(8, &PrefetchConfig::default(), None).unwrap();
        for _ in 0..3 {
            for g in [1, 2, 3, 9] {
                f.on_reference(p(g));
            }
        }
        f
    }

    /// S1.4 with a quota: the chain walks through the cached follower `b` to map `c`, and
    /// the victim that makes room for `c` is not `b` (the LRU front) but the next LRU page.
    #[test]
    fn batch_victims_skip_cached_chain_pages() {
        let mut f = taught();
        let (sb, sy, sa) = (CacheSlot::new(0), CacheSlot::new(1), CacheSlot::new(2));
        f.on_insert(sb, p(2), false); // b: least recently used
        f.on_insert(sy, p(7), false);
        f.on_reference(p(1));
        f.on_insert(sa, p(1), true); // the missing page, pinned
        let cached = |g: Pfn<Gpa>| match g.get() {
            2 => Some(sb),
            7 => Some(sy),
            1 => Some(sa),
            _ => None,
        };
        let mut out = Vec::new();
        let room = Room {
            free: 0,
            evictable: 2,
        };
        f.prefetch(p(1), room, cached, &mut out);
        assert_eq!(out, [p(3)]);
        assert_eq!(f.victim(|_| true), Some(sy));
        f.on_batch_end();
        assert_eq!(f.victim(|_| true), Some(sb));
    }

    /// With room for only one page and that room held by the cached follower `b`, nothing
    /// is mapped ahead (the batch is capped by the quota, not only by `max_batch`).
    #[test]
    fn batch_is_capped_by_the_room_the_quota_leaves() {
        let mut f = taught();
        let (sb, sa) = (CacheSlot::new(0), CacheSlot::new(1));
        f.on_insert(sb, p(2), false);
        f.on_reference(p(1));
        f.on_insert(sa, p(1), true);
        let cached = |g: Pfn<Gpa>| match g.get() {
            2 => Some(sb),
            1 => Some(sa),
            _ => None,
        };
        let mut out = Vec::new();
        f.prefetch(
            p(1),
            Room {
                free: 0,
                evictable: 1,
            },
            cached,
            &mut out,
        );
        assert!(out.is_empty(), "{out:?}");
        // Free room instead: `c` is mapped into it and `b` stays.
        f.on_batch_end();
        f.prefetch(
            p(1),
            Room {
                free: 1,
                evictable: 1,
            },
            cached,
            &mut out,
        );
        assert_eq!(out, [p(3)]);
        // max_batch = 2 allows one page ahead: the chain stops after `b`'s hop.
        let mut g = Prefetch::new(
            8,
            &PrefetchConfig {
                min_count: 3,
                max_batch: 2,
            },
            None,
        )
        .unwrap();
        for _ in 0..3 {
            for x in [1, 2, 3, 9] {
                g.on_reference(p(x));
            }
        }
        g.on_reference(p(1));
        let mut out = Vec::new();
        g.prefetch(
            p(1),
            Room {
                free: 8,
                evictable: 0,
            },
            |_| None,
            &mut out,
        );
        assert_eq!(out, [p(2)]);
    }

    /// Counts are 8-bit: thresholds above 255 are rejected, counts saturate.
    #[test]
    fn counts_saturate_and_threshold_is_checked() {
        assert!(
            Prefetch::new(
                1,
                &PrefetchConfig {
                    min_count: 256,
                    max_batch: 4
                },
                None
            )
            .is_err()
        );
        assert!(
            Prefetch::new(
                1,
                &PrefetchConfig {
                    min_count: 0,
                    max_batch: 4
                },
                None
            )
            .is_err()
        );
        let mut f = Prefetch::new(1, &PrefetchConfig::default(), None).unwrap();
        for _ in 0..300 {
            f.on_reference(p(1));
            f.on_reference(p(2));
        }
        assert_eq!(f.follower(p(1)), Some(p(2)));
        assert_eq!(f.tracked_pages(), 2);
    }
}
