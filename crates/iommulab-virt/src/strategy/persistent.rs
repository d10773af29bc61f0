//! `persistent` (S1.1): a page is mapped on its first use and never unmapped: the map
//! cache of [`OnDemand`] with room for all guest memory, so nothing is ever evicted and
//! every map after the first is a hit. No protection once a page has been used.

use std::sync::Arc;

use crate::guest::{GuestConfig, GuestError};
use crate::hypercall_backend::Channel;
use crate::{EvictionPolicy, Lookahead, MapCache, MapCacheStats};
use iommulab_base::addr::{DmaDirection, Gpa, Pfn};
use iommulab_hw::RemapUnit;

use super::{GuestStrategy, OnDemand, PageOutcome};

/// Map on first use, never unmap.
#[derive(Debug)]
pub struct Persistent<E: EvictionPolicy> {
    cache: OnDemand<E>,
    guest_pages: u64,
}

impl<E: EvictionPolicy> Persistent<E> {
    /// The strategy for a guest of `cfg.guest_pages` pages (`policy` never has to choose).
    pub fn new(
        cfg: &GuestConfig,
        policy: &E::Config,
        lookahead: Option<Arc<Lookahead>>,
    ) -> Result<Self, GuestError> {
        Ok(Self {
            cache: OnDemand::with_capacity(cfg, cfg.guest_pages, policy, lookahead)?,
            guest_pages: cfg.guest_pages,
        })
    }

    /// The map cache.
    pub fn cache(&self) -> &MapCache<E> {
        self.cache.cache()
    }
}

impl<E: EvictionPolicy> GuestStrategy for Persistent<E> {
    const NAME: &'static str = "persistent";

    fn eviction(&self) -> &'static str {
        E::NAME
    }

    fn host_quota(&self) -> u64 {
        self.guest_pages
    }

    fn map_page<U: RemapUnit>(
        &mut self,
        g: Pfn<Gpa>,
        dir: DmaDirection,
        dma_alloc: bool,
        ch: &mut Channel<U>,
    ) -> Result<PageOutcome, GuestError> {
        self.cache.map_page(g, dir, dma_alloc, ch)
    }

    fn release_page<U: RemapUnit>(
        &mut self,
        g: Pfn<Gpa>,
        dir: DmaDirection,
        dma_alloc: bool,
        ch: &mut Channel<U>,
    ) -> Result<(), GuestError> {
        self.cache.release_page(g, dir, dma_alloc, ch)
    }

    fn cache_stats(&self) -> Option<MapCacheStats> {
        self.cache.cache_stats()
    }

    fn cached_pages(&self) -> Vec<(Pfn<Gpa>, u32)> {
        self.cache.cached_pages()
    }
}
