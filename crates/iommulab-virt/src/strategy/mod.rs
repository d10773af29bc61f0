//! Guest DMA-mapping strategies for a directly assigned device (S1.1, S1.5, S1.11): what a
//! guest page map or unmap becomes on the hypercall channel to the host. One file each,
//! chosen at the configuration boundary ([`with_strategy!`](crate::with_strategy)) like
//! allocators are, so the per-page path is monomorphised.
//!
//! | strategy | file | on a driver map | on a driver unmap | protection |
//! |---|---|---|---|---|
//! | `direct` | `direct.rs` | nothing (all guest memory mapped and pinned at setup) | nothing | none |
//! | `single-use` | `single_use.rs` | one map request per page | one unmap request per page | yes |
//! | `shared` | `shared.rs` | map request only for a page no in-flight DMA uses (refcount 0 → 1) | unmap at refcount 0 | yes |
//! | `persistent` | `persistent.rs` | map request for a page never mapped before | nothing (never unmaps) | none |
//! | `on-demand` | `on_demand.rs` | map cache (quota Q, eviction policy): a hit needs no hypercall | page stays mapped (evictable) | none |
//!
//! **Hits, misses, refused** count page maps: a page map served without a hypercall is a
//! hit (`direct` always; `shared` when the page is in flight; cache hits), one that needs
//! a map request is a miss, one the map cache cannot make room for is refused (the
//! driver's map of the buffer fails: its other pages are released).
//!
//! The relaxations [`CacheOnly::DmaAllocated`] and [`CacheOnly::ReadOnly`] (S1.11) let
//! `on-demand` and `persistent` cache only some pages; the rest take the `shared` path.
//! How requests are packed into hypercalls is not the strategy's business but the
//! channel's ([`crate::hypercall_backend::Batching`]).

mod direct;
mod on_demand;
mod persistent;
mod shared;
mod single_use;

use serde::{Deserialize, Serialize};

use crate::MapCacheStats;
use crate::guest::GuestError;
use crate::hypercall_backend::Channel;
use iommulab_base::addr::{DmaDirection, Gpa, Pfn};
use iommulab_hw::RemapUnit;

pub use direct::Direct;
pub use on_demand::OnDemand;
pub use persistent::Persistent;
pub use shared::Shared;
pub use single_use::SingleUse;

/// Which strategy a configuration asks for (S1.1).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Strategy {
    /// [`Direct`].
    Direct,
    /// [`SingleUse`].
    SingleUse,
    /// [`Shared`].
    Shared,
    /// [`Persistent`].
    Persistent,
    /// [`OnDemand`].
    #[default]
    OnDemand,
}

impl Strategy {
    /// Every strategy.
    pub const ALL: [Strategy; 5] = [
        Strategy::Direct,
        Strategy::SingleUse,
        Strategy::Shared,
        Strategy::Persistent,
        Strategy::OnDemand,
    ];
    /// Name as on the command line.
    pub const fn name(self) -> &'static str {
        match self {
            Strategy::Direct => "direct",
            Strategy::SingleUse => "single-use",
            Strategy::Shared => "shared",
            Strategy::Persistent => "persistent",
            Strategy::OnDemand => "on-demand",
        }
    }
    /// Whether the map cache serves (some) page maps.
    pub const fn caches(self) -> bool {
        matches!(self, Strategy::Persistent | Strategy::OnDemand)
    }
}

/// Which pages `on-demand` / `persistent` may cache (S1.11's relaxations); the others take
/// the `shared` path (mapped while in flight, unmapped at once).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum CacheOnly {
    /// Every page.
    #[default]
    All,
    /// Only buffers *allocated for DMA* (S1.11: "cache only pages which have been marked
    /// for DMA"): map ops with `workload::DmaOp::Map`'s `dma_alloc` flag — a trace's
    /// `alloc` (`dma_alloc_coherent`) events, and the built-in NIC senders' skb heads when
    /// `heads_allocated_for_dma` has them come from a slab set aside for DMA. Such memory holds nothing but DMA data, so a stale mapping of
    /// it exposes nothing else; pages handed to the driver by someone else (socket pages,
    /// the page cache under `sendfile`) are mapped for the DMA only.
    DmaAllocated,
    /// Only read-only (`ToDevice`) mappings, mapped read-only: a stale mapping can leak
    /// but not corrupt.
    ReadOnly,
}

impl CacheOnly {
    /// Whether the map cache may hold a buffer mapped for `dir`, allocated for DMA or not.
    pub const fn admits(self, dir: DmaDirection, dma_alloc: bool) -> bool {
        match self {
            CacheOnly::All => true,
            CacheOnly::DmaAllocated => dma_alloc,
            CacheOnly::ReadOnly => matches!(dir, DmaDirection::ToDevice),
        }
    }
}

/// What became of one guest page map.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PageOutcome {
    /// Served without a map request.
    Hit,
    /// Needed a map request (sent or queued on the channel).
    Miss,
    /// Could not be mapped: the driver's map of the buffer fails.
    Refused,
}

/// A guest's mapping strategy (see the [module docs](self)).
pub trait GuestStrategy {
    /// Name as on the command line.
    const NAME: &'static str;

    /// The eviction policy's name, for strategies with a map cache.
    fn eviction(&self) -> &'static str {
        ""
    }

    /// Pages the host lets this guest keep mapped.
    fn host_quota(&self) -> u64;

    /// Work at guest start (`direct` maps all guest memory).
    fn setup<U: RemapUnit>(&mut self, _ch: &mut Channel<U>) -> Result<(), GuestError> {
        Ok(())
    }

    /// The driver maps guest page `g` (inside guest memory) for `dir`.
    fn map_page<U: RemapUnit>(
        &mut self,
        g: Pfn<Gpa>,
        dir: DmaDirection,
        dma_alloc: bool,
        ch: &mut Channel<U>,
    ) -> Result<PageOutcome, GuestError>;

    /// The driver drops one use of `g`, mapped earlier by [`GuestStrategy::map_page`]
    /// with the same `dir` and `dma_alloc` (not refused).
    fn release_page<U: RemapUnit>(
        &mut self,
        g: Pfn<Gpa>,
        dir: DmaDirection,
        dma_alloc: bool,
        ch: &mut Channel<U>,
    ) -> Result<(), GuestError>;

    /// The host changes the quota at run time (S1.7); only `on-demand` has one. Returns
    /// the new host limit to apply after the evictions were sent, if any.
    fn set_quota<U: RemapUnit>(
        &mut self,
        _quota: u64,
        _ch: &mut Channel<U>,
    ) -> Result<(), GuestError> {
        Ok(())
    }

    /// The map cache's counters (`on-demand`, `persistent`).
    fn cache_stats(&self) -> Option<MapCacheStats> {
        None
    }

    /// Cached pages and their reference counts (`on-demand`, `persistent`), for checks.
    fn cached_pages(&self) -> Vec<(Pfn<Gpa>, u32)> {
        Vec::new()
    }
}

/// Builds the strategy of `$cfg` (a `GuestConfig`) with `$la` (the offline policies'
/// lookahead) as the concrete type, binds it to `$s` and evaluates `$body` with it: the
/// one place the strategy and the map cache's eviction policy become types.
#[macro_export]
macro_rules! with_strategy {
    ($cfg:expr, $la:expr, $s:ident => $body:expr) => {{
        let cfg: &$crate::GuestConfig = $cfg;
        match cfg.strategy {
            $crate::Strategy::Direct => {
                let $s = $crate::strategy::Direct::new(cfg);
                $body
            }
            $crate::Strategy::SingleUse => {
                let $s = $crate::strategy::SingleUse::new(cfg);
                $body
            }
            $crate::Strategy::Shared => {
                let $s = $crate::strategy::Shared::new(cfg);
                $body
            }
            $crate::Strategy::Persistent => {
                $crate::with_eviction!(&cfg.eviction, E, c => {
                    match $crate::strategy::Persistent::<E>::new(cfg, c, $la) {
                        Ok($s) => $body,
                        Err(e) => Err(e.into()),
                    }
                })
            }
            $crate::Strategy::OnDemand => {
                $crate::with_eviction!(&cfg.eviction, E, c => {
                    match $crate::strategy::OnDemand::<E>::new(cfg, c, $la) {
                        Ok($s) => $body,
                        Err(e) => Err(e.into()),
                    }
                })
            }
        }
    }};
}
