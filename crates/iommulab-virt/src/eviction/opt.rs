//! Belady's OPT (S1.3, paper §2.3): evict the evictable page whose next map is farthest in
//! the future. Offline: the future comes from a [`Lookahead`] built over the same stream.
//!
//! Without batching and with fewer pinned pages than the quota, the DMA mapping problem is
//! the page replacement problem and OPT is optimal (§2.3); with pins it is the natural
//! greedy but not proven optimal. Per slot the policy keeps the page's next-use position
//! (4 bytes: positions past 2^32 − 1 maps count as "never") and its place in an indexed
//! binary max-heap of slot numbers over the evictable set E (4 + 4 bytes): 12 bytes per
//! slot, so the whole cache stays ≤ 32 bytes per page. `victim` is O(1), hits, unpins and
//! removals O(log |E|).
//!
//! The cache must make exactly the lookahead's map requests, in order (checked in debug
//! builds); maps past the lookahead's end count as never used again.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::{CacheSlot, EvictionPolicy};
use crate::lookahead::NEVER;
use crate::{Error, Lookahead, Result};
use iommulab_base::addr::{Gpa, Pfn};

/// OPT has no knobs.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OptConfig {}

const ABSENT: u32 = u32::MAX;

/// A next-use position as stored per slot: positions ≥ `u32::MAX` (a stream of over 4 G
/// maps) count as never used again.
#[inline]
pub(crate) fn key32(k: u64) -> u32 {
    u32::try_from(k).unwrap_or(u32::MAX)
}

/// An indexed binary max-heap of slots keyed by next use. The keys live in one per-slot
/// array (`key`, kept for pinned slots too), the heap holds slot numbers only: 12 bytes
/// per slot in all (key, heap position, heap entry).
#[derive(Clone, Debug, Default)]
pub(crate) struct KeyHeap {
    /// Slots, max-heap on `key[slot]`.
    heap: Vec<u32>,
    /// Index in `heap` per slot, or `ABSENT`.
    pos: Vec<u32>,
    /// Next use per slot (`u32::MAX`: never).
    key: Vec<u32>,
}

impl KeyHeap {
    pub(crate) fn reserve(&mut self, slots: usize) {
        if slots > self.pos.len() {
            self.pos.reserve_exact(slots - self.pos.len());
            self.pos.resize(slots, ABSENT);
            self.key.reserve_exact(slots - self.key.len());
            self.key.resize(slots, u32::MAX);
            self.heap
                .reserve_exact(slots.saturating_sub(self.heap.capacity()));
        }
    }

    #[inline]
    pub(crate) fn contains(&self, s: CacheSlot) -> bool {
        self.pos.get(s.index()).is_some_and(|&p| p != ABSENT)
    }

    /// Sets the key of a slot that is not in the heap.
    #[inline]
    pub(crate) fn set_key(&mut self, s: CacheSlot, key: u64) {
        if s.index() >= self.pos.len() {
            self.reserve(s.index() + 1);
        }
        debug_assert!(!self.contains(s));
        self.key[s.index()] = key32(key);
    }

    #[inline]
    pub(crate) fn top(&self) -> Option<(u64, CacheSlot)> {
        self.heap
            .first()
            .map(|&s| (self.key_of(s), CacheSlot::new(s)))
    }

    #[inline]
    fn key_of(&self, s: u32) -> u64 {
        let k = self.key[s as usize];
        if k == u32::MAX { NEVER } else { u64::from(k) }
    }

    /// The key at heap index `i` (for walking the heap in key order).
    #[inline]
    pub(crate) fn at(&self, i: usize) -> Option<u64> {
        self.heap.get(i).map(|&s| self.key_of(s))
    }

    // Slots and heap indices fit in u32: the map cache caps its slots below `u32::MAX`.
    #[allow(clippy::cast_possible_truncation)]
    #[inline]
    fn set(&mut self, i: usize, s: u32) {
        self.heap[i] = s;
        self.pos[s as usize] = i as u32;
    }

    /// Puts `s` (with the key last set) into the heap.
    #[allow(clippy::cast_possible_truncation)]
    #[inline]
    pub(crate) fn push(&mut self, s: CacheSlot) {
        debug_assert!(!self.contains(s));
        let i = self.heap.len();
        self.heap.push(s.get());
        self.pos[s.index()] = i as u32;
        self.sift_up(i);
    }

    #[inline]
    pub(crate) fn remove(&mut self, s: CacheSlot) {
        if !self.contains(s) {
            return;
        }
        let i = self.pos[s.index()] as usize;
        self.pos[s.index()] = ABSENT;
        let last = self.heap.pop().expect("non-empty heap");
        if i < self.heap.len() {
            let old = self.key[s.index()];
            self.set(i, last);
            if self.key[last as usize] > old {
                self.sift_up(i);
            } else {
                self.sift_down(i);
            }
        }
    }

    fn sift_up(&mut self, mut i: usize) {
        let e = self.heap[i];
        let k = self.key[e as usize];
        while i > 0 {
            let p = (i - 1) / 2;
            let pe = self.heap[p];
            if self.key[pe as usize] >= k {
                break;
            }
            self.set(i, pe);
            i = p;
        }
        self.set(i, e);
    }

    fn sift_down(&mut self, mut i: usize) {
        let e = self.heap[i];
        let k = self.key[e as usize];
        let n = self.heap.len();
        loop {
            let l = 2 * i + 1;
            if l >= n {
                break;
            }
            let r = l + 1;
            let kl = self.key[self.heap[l] as usize];
            let c = if r < n && self.key[self.heap[r] as usize] > kl {
                r
            } else {
                l
            };
            let ce = self.heap[c];
            if self.key[ce as usize] <= k {
                break;
            }
            self.set(i, ce);
            i = c;
        }
        self.set(i, e);
    }

    /// Slots in descending key order (test dumps).
    #[cfg(any(test, feature = "test-utils"))]
    pub(crate) fn sorted(&self) -> Vec<CacheSlot> {
        let mut v = self.heap.clone();
        v.sort_by(|&a, &b| {
            self.key[b as usize]
                .cmp(&self.key[a as usize])
                .then(a.cmp(&b))
        });
        v.into_iter().map(CacheSlot::new).collect()
    }

    pub(crate) fn bytes(&self) -> usize {
        (self.heap.capacity() + self.pos.capacity() + self.key.capacity()) * 4
    }
}

/// Belady's optimal replacement: evict the page mapped again farthest in the future.
#[derive(Clone, Debug)]
pub struct Opt {
    la: Arc<Lookahead>,
    /// Position of the current map request in the lookahead.
    pos: usize,
    /// Position the next `on_reference` takes.
    next_pos: usize,
    /// Evictable pages by next use; holds the next use of every slot (kept while
    /// pinned, for the unpin).
    heap: KeyHeap,
}

impl Opt {
    /// Next use of the page of the current request.
    #[inline]
    pub(crate) fn current_next_use(&self) -> u64 {
        self.la.next_use(self.pos)
    }

    /// Position of the current request.
    pub(crate) fn position(&self) -> usize {
        self.pos
    }

    pub(crate) fn lookahead(&self) -> &Lookahead {
        &self.la
    }

    pub(crate) fn heap(&self) -> &KeyHeap {
        &self.heap
    }

    /// Tracks `slot` with next use `key`.
    #[inline]
    pub(crate) fn insert_with_key(&mut self, slot: CacheSlot, key: u64, pinned: bool) {
        self.heap.set_key(slot, key);
        if !pinned {
            self.heap.push(slot);
        }
    }
}

impl EvictionPolicy for Opt {
    type Config = OptConfig;
    const NAME: &'static str = "opt";
    const OFFLINE: bool = true;

    fn new(capacity: usize, _: &OptConfig, lookahead: Option<Arc<Lookahead>>) -> Result<Self> {
        let la = lookahead.ok_or(Error::LookaheadRequired { policy: Self::NAME })?;
        let mut o = Self {
            la,
            pos: 0,
            next_pos: 0,
            heap: KeyHeap::default(),
        };
        o.reserve(capacity);
        Ok(o)
    }

    fn reserve(&mut self, slots: usize) {
        self.heap.reserve(slots);
    }

    #[inline]
    fn on_reference(&mut self, gfn: Pfn<Gpa>) {
        self.pos = self.next_pos;
        self.next_pos += 1;
        debug_assert!(
            self.pos >= self.la.len() || self.la.page(self.pos) == gfn,
            "map of {gfn:?} at position {} but the lookahead has {:?}",
            self.pos,
            self.la.page(self.pos)
        );
    }

    #[inline]
    fn on_insert(&mut self, slot: CacheSlot, _: Pfn<Gpa>, pinned: bool) {
        // Without batching only the missing page (the current request) is inserted; a
        // page inserted otherwise has no known next use here.
        let key = if pinned {
            self.current_next_use()
        } else {
            NEVER
        };
        self.insert_with_key(slot, key, pinned);
    }

    #[inline]
    fn on_hit(&mut self, slot: CacheSlot, _: Pfn<Gpa>, was_evictable: bool) {
        if was_evictable {
            self.heap.remove(slot);
        }
        self.heap.set_key(slot, self.current_next_use());
    }

    #[inline]
    fn on_unpin(&mut self, slot: CacheSlot, _: Pfn<Gpa>) {
        self.heap.push(slot);
    }

    #[inline]
    fn on_remove(&mut self, slot: CacheSlot, _: Pfn<Gpa>) {
        self.heap.remove(slot);
    }

    #[inline]
    fn victim(&mut self, mut evictable: impl FnMut(CacheSlot) -> bool) -> Option<CacheSlot> {
        let v = self.heap.top().map(|(_, s)| s);
        debug_assert!(v.is_none_or(&mut evictable), "OPT heap holds a pinned page");
        v
    }

    fn metadata_bytes(&self) -> usize {
        self.heap.bytes()
    }
}

#[cfg(any(test, feature = "test-utils"))]
impl super::Dump for Opt {
    fn dump(&self) -> Vec<CacheSlot> {
        self.heap.sorted()
    }
}
