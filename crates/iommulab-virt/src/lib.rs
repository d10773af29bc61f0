//! The guest side of on-demand DMA mapping (S1.1, S1.2, S1.5): the guest's **map cache** of
//! pages mapped in the host IOMMU, the eviction policies that choose what to give up when
//! the host's quota is reached (S1.3, S1.4), and the offline [`Lookahead`] the optimal
//! policies read the future from.
//!
//! ```text
//!  driver map/unmap ──► MapCache<E> ──(miss: one hypercall maps a batch, evicts victims)──► host
//!  (PageRef stream)     S = P ∪ E, |S| ≤ Q        E: EvictionPolicy (FIFO, LRU, OPT, ...)
//! ```
//!
//! The model is Yassour, Ben-Yehuda and Wasserman, "On the DMA mapping problem in direct
//! device assignment" (SYSTOR 2010), §2.1 and §3.1: a page with refcount > 0 is *pinned*
//! (set P: a DMA may be using it), a page with refcount 0 is *evictable* (set E: still
//! mapped, so the next map of it is a hit without a hypercall). A miss when `|S| = Q`
//! evicts a page of E chosen by the policy; if E is empty the map is *refused*.
//!
//! | item | what it is |
//! |---|---|
//! | [`MapCache`] | the map cache, generic over the policy (monomorphised, no `dyn`) |
//! | [`eviction`] | [`EvictionPolicy`], one file per policy, [`EvictionConfig`] |
//! | [`Lookahead`] | next-use index of a whole reference stream, for OPT and optimal batching |
//! | [`PageRef`], [`replay`] | the reference stream the map cache replays, and the replay loop |
//!
//! The one-pass hit-rate curves over all quotas live in [`crate::mrc`].

#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations)]

// The layers below are named by their crate paths (`iommulab_base::addr::Iova`), never aliased as
// local modules: a crate names only what its manifest lists, so the compiler enforces the layering
// (docs/architecture.md).

pub mod balloon;
pub mod eviction;
pub mod guest;
pub mod host;
pub mod hypercall;
pub mod hypercall_backend;
pub mod link;
pub mod lookahead;
pub mod map_cache;
pub mod mrc;
pub mod page_index;
pub mod strategy;
pub mod xen;

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use iommulab_base::addr::{Gpa, Pfn};

pub use balloon::{QuotaPolicy, working_set_pages};
pub use eviction::{
    CacheSlot, EvictionConfig, EvictionPolicy, Fifo, FifoConfig, Lru, LruConfig, Opt, OptBatch,
    OptBatchConfig, OptConfig, Prefetch, PrefetchConfig,
};
pub use guest::{
    Guest, GuestConfig, GuestDmaApi, GuestDriver, GuestError, GuestHooks, GuestResult, PageRun,
    for_each_guest_page_ref, for_each_guest_page_run, guest_page_refs, run_guest, run_guest_on,
};
pub use host::{Host, HostConfig, InvalidationScope};
pub use hypercall::{HostStats, Hypercall, HypercallError};
pub use hypercall_backend::{Batching, Channel, HypercallBackend, PageCounters};
pub use link::{LinkLoad, link_load};
pub use lookahead::{Lookahead, LookaheadBuilder};
pub use map_cache::{MapCache, MapCacheStats, MapOutcome, QuotaOutcome, UnmapOutcome};
pub use strategy::{CacheOnly, GuestStrategy, PageOutcome, Strategy};

/// One driver request to the guest's DMA layer, reduced to the guest page it concerns.
///
/// A multi-page buffer is several `Map`s in a row (the paper's traces record pages, §4.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "op", content = "gfn", rename_all = "snake_case")]
pub enum PageRef {
    /// The driver maps this page for DMA (refcount + 1).
    Map(Pfn<Gpa>),
    /// The driver is done with this page (refcount − 1).
    Unmap(Pfn<Gpa>),
}

impl PageRef {
    /// The page the request concerns.
    pub const fn gfn(self) -> Pfn<Gpa> {
        match self {
            PageRef::Map(g) | PageRef::Unmap(g) => g,
        }
    }
}

/// Errors of the map cache and its policies.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// An offline policy (OPT, optimal batching) was built without the future.
    #[error(
        "eviction policy `{policy}` is offline and needs a lookahead over the reference stream"
    )]
    LookaheadRequired {
        /// The policy's [`EvictionConfig::name`].
        policy: &'static str,
    },
    /// `unmap` of a page that is mapped but has refcount 0 (already unmapped by the driver).
    #[error("unmap of guest page {gfn:#x}, which is cached but not pinned (refcount 0)")]
    NotPinned {
        /// The page.
        gfn: u64,
    },
    /// `unmap` of a page the map cache does not hold.
    #[error("unmap of guest page {gfn:#x}, which is not in the map cache")]
    NotMapped {
        /// The page.
        gfn: u64,
    },
    /// A policy parameter that cannot work.
    #[error("invalid `{policy}` eviction config: {reason}")]
    BadConfig {
        /// The policy's [`EvictionConfig::name`].
        policy: &'static str,
        /// What is wrong, with the value.
        reason: String,
    },
}

/// `Result` with the map cache's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

/// The hasher of page-number keys ([`iommulab_base::hash`]): SipHash would cost more than the rest
/// of a map.
pub type PageHasher = iommulab_base::hash::FxHasher;

/// A `HashMap` keyed by page numbers with [`PageHasher`].
pub type PageMap<K, V> = iommulab_base::hash::FxHashMap<K, V>;

/// Replays `refs` through a fresh `MapCache<E>` with quota `quota` and returns its
/// statistics.
///
/// `lookahead` must be built from the same `refs` (see [`Lookahead::from_refs`]); it is
/// required by offline policies and ignored by online ones. Unmaps the cache rejects
/// (typically the unmap of a page whose map was refused) are skipped and counted in
/// [`MapCacheStats::bad_unmaps`].
///
/// # Examples
/// ```
/// use iommulab_base::addr::Pfn;
/// use iommulab_virt::{replay, Lru, LruConfig, PageRef};
/// let refs: Vec<PageRef> = [1u64, 2, 1, 3, 1]
///     .iter()
///     .flat_map(|&g| [PageRef::Map(Pfn::new(g)), PageRef::Unmap(Pfn::new(g))])
///     .collect();
/// let stats = replay::<Lru>(&refs, 2, &LruConfig::default(), None).unwrap();
/// assert_eq!((stats.hits, stats.misses), (2, 3));
/// ```
pub fn replay<E: EvictionPolicy>(
    refs: &[PageRef],
    quota: usize,
    config: &E::Config,
    lookahead: Option<Arc<Lookahead>>,
) -> Result<MapCacheStats> {
    let mut cache = MapCache::<E>::new(quota, config, lookahead)?;
    replay_into(&mut cache, refs);
    Ok(*cache.stats())
}

/// Replays `refs` through an existing cache (see [`replay`]); the cache's statistics
/// accumulate.
pub fn replay_into<E: EvictionPolicy>(cache: &mut MapCache<E>, refs: &[PageRef]) {
    for r in refs {
        match *r {
            PageRef::Map(g) => {
                cache.map(g);
            }
            PageRef::Unmap(g) => {
                // Rejected unmaps are counted in the stats; replay goes on.
                let _ = cache.unmap(g);
            }
        }
    }
}

/// [`replay`] for a runtime [`EvictionConfig`]; dispatches once and runs the monomorphised
/// loop.
pub fn replay_config(
    refs: &[PageRef],
    quota: usize,
    config: &EvictionConfig,
    lookahead: Option<Arc<Lookahead>>,
) -> Result<MapCacheStats> {
    crate::with_eviction!(config, E, cfg => replay::<E>(refs, quota, cfg, lookahead))
}
