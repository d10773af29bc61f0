//! Optimal batching (S1.3, paper §2.3 and §4.2 "Optimal batching"): offline; a miss's
//! hypercall maps the missing page **and the next distinct future pages that are not
//! cached**, up to `batch` pages in all; victims are chosen by OPT.
//!
//! The paper's N (pages mapped ahead) is `batch − 1`; its miss-rate bound 1/(N+1) =
//! 1/`batch` holds for a stream without reuse when the quota fits a batch (tested). The
//! paper gives no value for N; the default `batch = 32` (miss rate ≤ 1/32 ≈ 3% on such a
//! stream) is ours, in line with Figure 3's "close to 100% at a 10% quota".
//!
//! A page is mapped ahead only if it does no harm (Cao et al.'s rule for integrated
//! prefetching and caching): into a free entry, or in place of the OPT victim only if the
//! victim is next used *after* the prefetched page. Candidates come in order of next use
//! and victims in reverse order of next use, so the batch stops at the first pair that
//! fails. The scan looks at most `window` map requests ahead, bounding a miss's cost to
//! O(window · batch) even when every future page is already cached.
//!
//! Cost per miss: the scan plus O(batch · log batch) to walk the OPT heap's largest keys;
//! per-slot state as [`Opt`].

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
    /// N + 1). `1` is plain OPT. Default 32.
    pub batch: usize,
    /// How many future map requests a miss scans for pages to map ahead. Default 4096.
    pub window: usize,
}

impl Default for OptBatchConfig {
    fn default() -> Self {
        Self {
            batch: 32,
            window: 4096,
        }
    }
}

/// OPT victims plus mapping the next distinct uncached future pages on each miss.
#[derive(Clone, Debug)]
pub struct OptBatch {
    opt: Opt,
    batch: usize,
    window: usize,
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
        if config.batch == 0 || config.window == 0 {
            return Err(Error::BadConfig {
                policy: Self::NAME,
                reason: format!(
                    "batch ({}) and window ({}) must be at least 1",
                    config.batch, config.window
                ),
            });
        }
        let lookahead = lookahead.ok_or(Error::LookaheadRequired { policy: Self::NAME })?;
        Ok(Self {
            opt: Opt::new(capacity, &OptConfig::default(), Some(lookahead))?,
            batch: config.batch,
            window: config.window,
            pending: Vec::with_capacity(config.batch),
            pending_read: 0,
            frontier: BinaryHeap::with_capacity(2 * config.batch + 1),
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
        for j in start..end {
            let q = la.page(j);
            if q == missing || cached(q).is_some() || out.contains(&q) {
                continue;
            }
            let j = j as u64;
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
            if out.len() == limit {
                break;
            }
        }
    }

    fn metadata_bytes(&self) -> usize {
        self.opt.metadata_bytes()
            + self.pending.capacity() * std::mem::size_of::<(Pfn<Gpa>, u64)>()
            + self.frontier.capacity() * std::mem::size_of::<(u64, usize)>()
    }
}

#[cfg(any(test, feature = "test-utils"))]
impl super::Dump for OptBatch {
    fn dump(&self) -> Vec<CacheSlot> {
        super::Dump::dump(&self.opt)
    }
}
