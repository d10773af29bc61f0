//! `on-demand` (S1.2–S1.5): the guest's map cache. A page the driver unmaps stays mapped
//! (evictable) so the next map of it is a hit without a hypercall; the host's quota bounds
//! the cache, and a miss with the cache full evicts pages the eviction policy `E` chooses
//! (their unmaps can ride on the miss's map hypercall, S1.6). With no evictable page the map
//! is refused. Pages a relaxation does not admit (S1.11) take the [`Shared`] path.

use std::sync::Arc;

use crate::guest::{GuestConfig, GuestError};
use crate::hypercall_backend::Channel;
use crate::{EvictionPolicy, Lookahead, MapCache, MapCacheStats, MapOutcome};
use iommulab_base::addr::{DmaDirection, Gpa, Perm, Pfn};
use iommulab_hw::RemapUnit;

use super::{CacheOnly, GuestStrategy, PageOutcome, Shared};

/// The map cache under a quota, over eviction policy `E`.
#[derive(Debug)]
pub struct OnDemand<E: EvictionPolicy> {
    cache: MapCache<E>,
    uncached: Shared,
    cache_only: CacheOnly,
    quota: u64,
    guest_pages: u64,
}

impl<E: EvictionPolicy> OnDemand<E> {
    /// A map cache of `cfg.quota` pages with policy `policy` (`lookahead`: the future, for
    /// offline policies).
    pub fn new(
        cfg: &GuestConfig,
        policy: &E::Config,
        lookahead: Option<Arc<Lookahead>>,
    ) -> Result<Self, GuestError> {
        Self::with_capacity(cfg, cfg.quota, policy, lookahead)
    }

    pub(super) fn with_capacity(
        cfg: &GuestConfig,
        pages: u64,
        policy: &E::Config,
        lookahead: Option<Arc<Lookahead>>,
    ) -> Result<Self, GuestError> {
        Ok(Self {
            cache: MapCache::new(
                usize::try_from(pages).unwrap_or(usize::MAX),
                policy,
                lookahead,
            )?,
            uncached: Shared::new(cfg),
            cache_only: cfg.cache_only,
            quota: pages,
            guest_pages: cfg.guest_pages,
        })
    }

    /// The map cache.
    pub fn cache(&self) -> &MapCache<E> {
        &self.cache
    }

    /// The host's limit for a cache quota: a relaxed cache leaves room for the pages on the
    /// `shared` path too.
    fn host_limit(&self, quota: u64) -> u64 {
        match self.cache_only {
            CacheOnly::All => quota,
            _ => quota.saturating_add(self.guest_pages),
        }
    }
}

impl<E: EvictionPolicy> GuestStrategy for OnDemand<E> {
    const NAME: &'static str = "on-demand";

    fn eviction(&self) -> &'static str {
        E::NAME
    }

    fn host_quota(&self) -> u64 {
        self.host_limit(self.quota)
    }

    fn map_page<U: RemapUnit>(
        &mut self,
        g: Pfn<Gpa>,
        dir: DmaDirection,
        dma_alloc: bool,
        ch: &mut Channel<U>,
    ) -> Result<PageOutcome, GuestError> {
        if !self.cache_only.admits(dir, dma_alloc) {
            return self.uncached.map_page(g, dir, dma_alloc, ch);
        }
        // S1.11: a read-only relaxation caches read-only mappings only.
        let perm = match self.cache_only {
            CacheOnly::ReadOnly => Perm::Read,
            _ => Perm::ReadWrite,
        };
        Ok(match self.cache.map(g) {
            MapOutcome::Hit => PageOutcome::Hit,
            MapOutcome::Refused => PageOutcome::Refused,
            MapOutcome::Miss { mapped, evicted } => {
                for &e in evicted {
                    ch.evict(e)?;
                }
                ch.end_evictions()?;
                for &m in mapped {
                    ch.queue_map(m, perm);
                }
                ch.end_page_maps()?;
                PageOutcome::Miss
            }
        })
    }

    fn release_page<U: RemapUnit>(
        &mut self,
        g: Pfn<Gpa>,
        dir: DmaDirection,
        dma_alloc: bool,
        ch: &mut Channel<U>,
    ) -> Result<(), GuestError> {
        if !self.cache_only.admits(dir, dma_alloc) {
            return self.uncached.release_page(g, dir, dma_alloc, ch);
        }
        // A quota lowered below the pinned pages evicts as they become evictable.
        if let Some(e) = self.cache.unmap(g)?.evicted {
            ch.release(e)?;
        }
        Ok(())
    }

    /// A shrink evicts from the map cache (one unmap hypercall) before the host lowers its
    /// limit; a growth raises the host's limit first.
    fn set_quota<U: RemapUnit>(
        &mut self,
        quota: u64,
        ch: &mut Channel<U>,
    ) -> Result<(), GuestError> {
        let limit = self.host_limit(quota);
        if limit > ch.host().quota() {
            ch.set_host_quota(limit);
        }
        self.quota = quota;
        let out = self
            .cache
            .set_quota(usize::try_from(quota).unwrap_or(usize::MAX));
        for &e in out.evicted {
            ch.queue_unmap(e);
        }
        ch.flush_unmaps()?;
        ch.set_host_quota(limit);
        Ok(())
    }

    fn cache_stats(&self) -> Option<MapCacheStats> {
        Some(*self.cache.stats())
    }

    fn cached_pages(&self) -> Vec<(Pfn<Gpa>, u32)> {
        self.cache.pages().collect()
    }
}
