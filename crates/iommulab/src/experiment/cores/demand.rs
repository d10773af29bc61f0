//! What one DMA operation asks of the machine, split by who must wait for it: the counters
//! the one-CPU model keeps, read before and after the operation, priced by today's
//! [`CostModel`]. The CPU's own work needs nothing shared; the sections under a shared lock
//! and the invalidation unit's work are what other CPUs may queue behind.

use crate::clock::Cycles;
use crate::dma::{DmaApi, Native};
use crate::flush::FlushPolicy;
use crate::hw::cost::CostModel;
use crate::hw::invalidate::InvalidationInterface;
use crate::hw::unit::RemapUnit;
use crate::iova::IovaAllocator;

pub use super::invalidation::InvWork;

/// The counters a demand is the difference of.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Counters {
    /// The one-CPU modeled clock (I/O path, IOMMU CPU work, kernel software).
    modeled: u64,
    /// Allocator locks, all kinds.
    locks: u64,
    cpu_locks: u64,
    depot_locks: u64,
    tree_visits: u64,
    tree_rebalances: u64,
    bitmap_words: u64,
    /// Flush-policy locks and queue appends.
    flush_locks: u64,
    queue_appends: u64,
    inv_page: u64,
    inv_domain: u64,
    inv_global: u64,
    inv_waits: u64,
}

impl Counters {
    /// The counters of `api` now; `modeled` is its one-CPU modeled clock.
    #[inline]
    pub(crate) fn of<A: IovaAllocator, F: FlushPolicy, U: RemapUnit>(
        api: &DmaApi<A, F, Native<U>>,
        modeled: Cycles,
    ) -> Self {
        let mut c = Counters {
            modeled: modeled.get(),
            ..Counters::default()
        };
        for a in api.allocators() {
            let s = a.stats();
            c.locks += s.lock_acquisitions;
            c.cpu_locks += s.cpu_locks;
            c.depot_locks += s.depot_locks;
            c.tree_visits += s.tree_visits;
            c.tree_rebalances += s.tree_rebalances;
            c.bitmap_words += s.bitmap_words;
        }
        for f in api.flush_policies() {
            let s = f.stats();
            c.flush_locks += s.lock_acquisitions;
            c.queue_appends += s.queue_appends;
        }
        let u = api.unit().stats();
        c.inv_page = u.inv_page;
        c.inv_domain = u.inv_domain;
        c.inv_global = u.inv_global;
        c.inv_waits = u.inv_waits;
        c
    }
}

/// Which locks of the configured software are shared by every CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scopes {
    /// The invalidation interface of the unit.
    pub interface: InvalidationInterface,
    /// The flush policy's lock is one for all CPUs (2.6.26's `async_umap_flush_lock`, held
    /// while it appends and while it flushes); otherwise per CPU (the flush queue's
    /// `fq->lock`) or none (strict).
    pub global_flush_lock: bool,
}

/// One operation's demand, in cycles (public so the model can be driven, and benchmarked,
/// without the one-CPU model; a run builds them from the counters).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Demand {
    /// Work no other CPU waits for: the I/O path, the DMA-API call, PTE writes, slab
    /// objects, per-CPU locks and magazines, timers.
    pub private: u64,
    /// Under the IOVA tree lock (`iova_rbtree_lock`; 2.6.26 and 6.x alike): the lock
    /// hand-offs and the tree or bitmap work done holding it (`alloc_iova_mem` is outside).
    pub tree: u64,
    /// How many times the operation takes the tree lock (a flush frees each queued IOVA
    /// under its own acquisition, `__free_iova`).
    pub tree_sections: u32,
    /// Under a magazine depot lock.
    pub depot: u64,
    /// Under the global flush lock (its hand-offs and appends; the invalidation it does
    /// holding the lock is `inv`).
    pub flush: u64,
    /// Invalidation work.
    pub inv: InvWork,
}

impl Demand {
    /// The demand between two snapshots.
    #[inline]
    pub(crate) fn between(b: &Counters, a: &Counters, cost: &CostModel, scopes: Scopes) -> Self {
        let d = |x: u64, y: u64| y.saturating_sub(x);
        let tree_locks = d(
            b.locks.saturating_sub(b.cpu_locks + b.depot_locks),
            a.locks.saturating_sub(a.cpu_locks + a.depot_locks),
        );
        let tree = tree_locks * cost.lock_handoff
            + d(b.tree_visits, a.tree_visits) * cost.tree_visit
            + d(b.tree_rebalances, a.tree_rebalances) * cost.tree_rebalance
            + d(b.bitmap_words, a.bitmap_words) * cost.bitmap_word;
        // A depot exchange moves one magazine under the lock.
        let depot = d(b.depot_locks, a.depot_locks) * (cost.lock_handoff + cost.magazine_op);
        let flush = if scopes.global_flush_lock {
            d(b.flush_locks, a.flush_locks) * cost.lock_handoff
                + d(b.queue_appends, a.queue_appends) * cost.queue_append
        } else {
            0
        };
        let (pages, domains, globals) = (
            d(b.inv_page, a.inv_page),
            d(b.inv_domain, a.inv_domain),
            d(b.inv_global, a.inv_global),
        );
        let requests = pages + domains + globals;
        let hw = pages * cost.inv_page + domains * cost.inv_domain + globals * cost.inv_global;
        let inv = match scopes.interface {
            InvalidationInterface::Register => InvWork {
                cpu: requests * cost.inv_register_overhead,
                hw,
                wait: 0,
            },
            InvalidationInterface::Queued => InvWork {
                cpu: requests * cost.inv_descriptor,
                hw,
                wait: d(b.inv_waits, a.inv_waits) * cost.inv_wait,
            },
        };
        let shared = tree + depot + flush + inv.cpu + inv.hw + inv.wait;
        Demand {
            private: d(b.modeled, a.modeled).saturating_sub(shared),
            tree,
            tree_sections: u32::try_from(tree_locks).unwrap_or(u32::MAX),
            depot,
            flush,
            inv,
        }
    }

    /// Every cycle of it, as one CPU alone would spend them.
    pub fn total(&self) -> u64 {
        self.private
            + self.tree
            + self.depot
            + self.flush
            + self.inv.cpu
            + self.inv.hw
            + self.inv.wait
    }
}
