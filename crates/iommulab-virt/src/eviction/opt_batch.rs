//! Optimal batching (S1.3, paper §2.3 and §4.2 "Optimal batching"): offline; a miss's
//! hypercall maps the missing page **and the next distinct future pages that are not
//! cached**; victims are chosen by OPT.
//!
//! The paper's N (pages mapped ahead) is `batch − 1`; its miss-rate bound 1/(N+1) =
//! 1/`batch` holds for a stream without reuse when the quota fits a batch (tested). The
//! paper gives no value for N: its optimal batching is "the optimal offline algorithm, but
//! with batching ... multiple pages can be replaced at the same time" (§4.2), so by default
//! a batch has no cap of its own: the quota, the rule below and the scan's window end it.
//! `batch = K` caps it at K pages (the sensitivity of Figures 3–4 sweeps K).
//!
//! A page is mapped ahead only if it does no harm (Cao et al.'s rule for integrated
//! prefetching and caching): into a free entry, or in place of the OPT victim only if the
//! victim is next used *after* the prefetched page. Candidates come in order of next use
//! and victims in reverse order of next use, so the batch stops at the first pair that
//! fails. The scan looks at most `window` map requests ahead, bounding a miss's cost even
//! when every future page is already cached. A page met again in the scan is known by its
//! position: the next uses of the pages already in the batch wait in a min-heap, so the
//! scan skips position j when j is the least of them.
//!
//! Cost per miss: O(window · log batch) for the scan plus O(batch · log batch) to walk the
//! OPT heap's largest keys; per-slot state as [`Opt`].

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::{CacheSlot, EvictionPolicy, Opt, OptConfig, Room};
use crate::lookahead::NEVER;
use crate::{Error, Lookahead, Result};
use iommulab_base::addr::{Gpa, Pfn};

/// Knobs of [`OptBatch`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OptBatchConfig {
    /// Pages one miss's hypercall maps at most, the missing page included (the paper's
    /// N + 1). `1` is plain OPT. Default: no cap (the quota, the do-no-harm rule and the
    /// window end a batch).
    pub batch: Option<usize>,
    /// How many future map requests a miss scans for pages to map ahead. Default 4096.
    pub window: usize,
}

impl Default for OptBatchConfig {
    fn default() -> Self {
        Self {
            batch: None,
            window: 4096,
        }
    }
}

/// OPT victims plus mapping the next distinct uncached future pages on each miss.
#[derive(Clone, Debug)]
pub struct OptBatch {
    opt: Opt,
    /// The cap on a batch, the missing page included (`usize::MAX`: none).
    batch: usize,
    window: usize,
    /// Next uses of the pages the current batch holds, least first: the scan's positions
    /// of pages it has already taken.
    taken: BinaryHeap<Reverse<u64>>,
    /// `(page, next use)` of the pages the last `prefetch` proposed, in order.
    pending: Vec<(Pfn<Gpa>, u64)>,
    /// Next `pending` entry `on_insert` expects.
    pending_read: usize,
    /// Scratch: frontier of the OPT heap walk, `(key, heap index)`.
    frontier: BinaryHeap<(u64, usize)>,
}

impl EvictionPolicy for OptBatch {
    type Config = OptBatchConfig;
    const NAME: &'static str = "opt_batch";
    const OFFLINE: bool = true;

    fn new(
        capacity: usize,
        config: &OptBatchConfig,
        lookahead: Option<Arc<Lookahead>>,
    ) -> Result<Self> {
        if config.batch == Some(0) || config.window == 0 {
            return Err(Error::BadConfig {
                policy: Self::NAME,
                reason: format!(
                    "batch ({}) and window ({}) must be at least 1",
                    config.batch.unwrap_or(usize::MAX),
                    config.window
                ),
            });
        }
        let lookahead = lookahead.ok_or(Error::LookaheadRequired { policy: Self::NAME })?;
        let batch = config.batch.unwrap_or(usize::MAX);
        // A batch holds at most the quota's pages and the window's; sized once, so a miss
        // allocates nothing.
        let most = batch.min(capacity.max(1)).min(config.window);
        Ok(Self {
            opt: Opt::new(capacity, &OptConfig::default(), Some(lookahead))?,
            batch,
            window: config.window,
            taken: BinaryHeap::with_capacity(most),
            pending: Vec::with_capacity(most),
            pending_read: 0,
            // Each victim taken adds at most two children and removes itself.
            frontier: BinaryHeap::with_capacity(most + 1),
        })
    }

    fn reserve(&mut self, slots: usize) {
        self.opt.reserve(slots);
    }

    #[inline]
    fn on_reference(&mut self, gfn: Pfn<Gpa>) {
        self.opt.on_reference(gfn);
    }

    #[inline]
    fn on_insert(&mut self, slot: CacheSlot, gfn: Pfn<Gpa>, pinned: bool) {
        if pinned {
            self.opt.on_insert(slot, gfn, true);
            return;
        }
        let mut key = NEVER;
        while let Some(&(g, k)) = self.pending.get(self.pending_read) {
            self.pending_read += 1;
            if g == gfn {
                key = k;
                break;
            }
        }
        self.opt.insert_with_key(slot, key, false);
    }

    #[inline]
    fn on_hit(&mut self, slot: CacheSlot, gfn: Pfn<Gpa>, was_evictable: bool) {
        self.opt.on_hit(slot, gfn, was_evictable);
    }

    #[inline]
    fn on_unpin(&mut self, slot: CacheSlot, gfn: Pfn<Gpa>) {
        self.opt.on_unpin(slot, gfn);
    }

    #[inline]
    fn on_remove(&mut self, slot: CacheSlot, gfn: Pfn<Gpa>) {
        self.opt.on_remove(slot, gfn);
    }

    #[inline]
    fn victim(&mut self, evictable: impl FnMut(CacheSlot) -> bool) -> Option<CacheSlot> {
        self.opt.victim(evictable)
    }

    fn prefetch(
        &mut self,
        missing: Pfn<Gpa>,
        room: Room,
        cached: impl Fn(Pfn<Gpa>) -> Option<CacheSlot>,
        out: &mut Vec<Pfn<Gpa>>,
    ) {
        self.pending.clear();
        self.pending_read = 0;
        let limit = (self.batch - 1).min(room.total());
        if limit == 0 {
            return;
        }
        self.frontier.clear();
        let heap = self.opt.heap();
        if let Some(k) = heap.at(0) {
            self.frontier.push((k, 0));
        }
        let mut free = room.free;
        let la = self.opt.lookahead();
        let start = self.opt.position() + 1;
        let end = la.len().min(start.saturating_add(self.window));
        self.taken.clear();
        for j in start..end {
            let j64 = j as u64;
            if self.taken.peek() == Some(&Reverse(j64)) {
                // A page this batch already holds, met again: wait for its next use.
                self.taken.pop();
                let n = la.next_use(j);
                if n != NEVER {
                    self.taken.push(Reverse(n));
                }
                continue;
            }
            let q = la.page(j);
            if q == missing || cached(q).is_some() {
                continue;
            }
            let next = la.next_use(j);
            let j = j64;
            if free > 0 {
                free -= 1;
            } else {
                // The next OPT victim: the largest key not yet claimed by this batch.
                let Some((vk, vi)) = self.frontier.pop() else {
                    break;
                };
                if vk <= j {
                    break; // the victim is needed before `q`: mapping `q` would do harm
                }
                for c in [2 * vi + 1, 2 * vi + 2] {
                    if let Some(k) = heap.at(c) {
                        self.frontier.push((k, c));
                    }
                }
            }
            out.push(q);
            self.pending.push((q, j));
            if next != NEVER {
                self.taken.push(Reverse(next));
            }
            if out.len() == limit {
                break;
            }
        }
    }

    fn metadata_bytes(&self) -> usize {
        self.opt.metadata_bytes()
            + self.pending.capacity() * std::mem::size_of::<(Pfn<Gpa>, u64)>()
            + self.frontier.capacity() * std::mem::size_of::<(u64, usize)>()
            + self.taken.capacity() * std::mem::size_of::<u64>()
    }
}

#[cfg(any(test, feature = "test-utils"))]
impl super::Dump for OptBatch {
    fn dump(&self) -> Vec<CacheSlot> {
        super::Dump::dump(&self.opt)
    }
}
