//! Guest DMA-mapping strategies for a directly assigned device (S1.1, S1.5, S1.6, S1.11)
//! and the guest DMA layer [`GuestDma`] that runs a [`Workload`] against a [`Host`].
//!
//! The workload's buffer addresses (`phys`) are taken as **guest-physical**; a buffer
//! concerns the 4 KiB guest pages it spans (every segment's, for `MapSg`).
//!
//! | [`Strategy`] | on a driver map | on a driver unmap | protection |
//! |---|---|---|---|
//! | `direct` | nothing (all guest memory was mapped and pinned at setup) | nothing | none |
//! | `single-use` | one map request per page | one unmap request per page | yes |
//! | `shared` | map request only for a page no in-flight DMA uses (refcount 0 → 1) | unmap at refcount 0 | yes |
//! | `persistent` | map request for a page never mapped before | nothing (never unmaps) | none |
//! | `on-demand` | map cache (quota Q, eviction policy): a hit needs no hypercall | page stays mapped (evictable) | none |
//!
//! **Hits, misses, refused** count page maps: a page map served without a hypercall is a
//! hit (`direct` always; `shared` when the page is in flight; cache hits), one that needs
//! a map request is a miss, one the map cache cannot make room for is refused (the
//! driver's map of the buffer fails: its other pages are released).
//!
//! [`Batching`] decides how requests are packed into hypercalls:
//!
//! | mode | maps | unmaps |
//! |---|---|---|
//! | `none` | one hypercall per page (`on-demand`: per miss, with the policy's batch) | one per page |
//! | `map` | a buffer's maps in one hypercall | one per page |
//! | `unmap` | as `none` | a buffer's unmaps (`on-demand`: a miss's evictions) in one hypercall |
//! | `piggyback` | as `none` | deferred, ride on the next map hypercall |
//! | `map-unmap` | a buffer's maps in one hypercall | a buffer's unmaps (`on-demand`: the evictions its misses cause) in one hypercall |
//!
//! **Intra-guest protection** (S1.11) is measured by the stale-access oracle: after a
//! driver unmap leaves a page without any in-flight DMA, the device tries to read and to
//! write it through the host IOMMU; each page access that goes through is a stale access.
//! The relaxations [`CacheOnly::DmaAllocated`] and [`CacheOnly::ReadOnly`] let
//! `on-demand` cache only some pages; the rest take the `shared` path.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::addr::{Access, DmaDirection, Gpa, Perm, Pfn};
use crate::hw::{CostModel, InvalidationInterface};
use crate::virt::balloon::QuotaPolicy;
use crate::virt::host::{Host, HostConfig};
use crate::virt::hypercall::{HostStats, Hypercall, HypercallError};
use crate::virt::{
    EvictionConfig, EvictionPolicy, Lookahead, MapCache, MapCacheStats, MapOutcome, PageMap,
    PageRef,
};
use crate::workload::{DmaOp, Workload, WorkloadError};

/// How the guest maps DMA buffers in the host IOMMU (S1.1).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Strategy {
    /// All guest memory mapped and pinned once, up front.
    Direct,
    /// Map before each DMA, unmap right after.
    SingleUse,
    /// One mapping serves concurrent DMAs to a page (refcount, unmap at 0).
    Shared,
    /// Map on first use, never unmap.
    Persistent,
    /// The map cache: persistent under a quota, with eviction.
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

/// How map and unmap requests are packed into hypercalls (S1.6; table in the module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Batching {
    /// No batching.
    #[default]
    None,
    /// Batch map: a buffer's pages in one hypercall.
    Map,
    /// Batch unmap.
    Unmap,
    /// Unmap piggyback: unmaps ride on the next map hypercall.
    Piggyback,
    /// Batch map and batch unmap together (the paper's "batching" series of Figures 5–6:
    /// "LRU with the map and unmap batching optimizations", S1.6, S1.9).
    MapUnmap,
}

impl Batching {
    /// Whether a buffer's maps go in one hypercall.
    pub const fn batches_maps(self) -> bool {
        matches!(self, Batching::Map | Batching::MapUnmap)
    }

    /// Name as on the command line.
    pub const fn name(self) -> &'static str {
        match self {
            Batching::None => "none",
            Batching::Map => "map",
            Batching::Unmap => "unmap",
            Batching::Piggyback => "piggyback",
            Batching::MapUnmap => "map-unmap",
        }
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
    /// for DMA"): map ops with [`DmaOp::Map`]'s `dma_alloc` flag — a trace's `alloc`
    /// (`dma_alloc_coherent`) events, the built-in NIC workloads' skb heads from a
    /// DMA-dedicated slab. Such memory holds nothing but DMA data, so a stale mapping of
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

/// One guest's DMA-mapping configuration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct GuestConfig {
    /// The strategy.
    pub strategy: Strategy,
    /// Map-cache quota in pages (`on-demand` only).
    pub quota: u64,
    /// Eviction policy of the map cache.
    pub eviction: EvictionConfig,
    /// Hypercall batching.
    pub batching: Batching,
    /// Relaxation of `on-demand` / `persistent` (S1.11).
    pub cache_only: CacheOnly,
    /// Cycle costs (`kvm-2010`: S1.10).
    pub cost: CostModel,
    /// Guest memory in 4 KiB pages (default 524288 = 2 GiB: the built-in workloads'
    /// buffers live at 1–1.25 GiB, see `workload::page_alloc`).
    pub guest_pages: u64,
    /// Link rate for `cpu_utilization`, in Mb/s (1000: Yassour's 1 GbE).
    pub link_mbps: u64,
    /// Run the stale-access oracle and check device accesses through the IOMMU.
    pub protection_oracle: bool,
    /// Quota over time (`on-demand`), applied at the workload's `Tick`s (S1.7).
    pub quota_policy: Option<QuotaPolicy>,
}

impl Default for GuestConfig {
    fn default() -> Self {
        Self {
            strategy: Strategy::OnDemand,
            quota: 4096,
            eviction: EvictionConfig::default(),
            batching: Batching::None,
            cache_only: CacheOnly::All,
            cost: CostModel::KVM_2010,
            guest_pages: 1 << 19,
            link_mbps: 1000,
            protection_oracle: true,
            quota_policy: None,
        }
    }
}

/// What one guest run measured (style L13). Counts after setup (`direct`'s up-front
/// mapping is in `setup_*`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GuestResult {
    /// Strategy name.
    pub strategy: String,
    /// Eviction policy name (`on-demand`, `persistent`).
    pub eviction: String,
    /// Batching mode name.
    pub batching: String,
    /// Quota in pages.
    pub quota: u64,
    /// Driver buffer maps.
    pub buffers: u64,
    /// Buffer maps that failed (a page refused).
    pub buffers_refused: u64,
    /// Page maps (`hits + misses + refused`).
    pub maps: u64,
    /// Page maps served without a hypercall.
    pub hits: u64,
    /// Page maps that needed a map request.
    pub misses: u64,
    /// Page maps refused.
    pub refused: u64,
    /// `hits / maps`.
    pub hit_rate: f64,
    /// Hypercalls after setup.
    pub hypercalls: u64,
    /// Mean pages (map + unmap requests) per hypercall.
    pub pages_per_hypercall: f64,
    /// Most pages in one hypercall.
    pub max_pages_per_hypercall: u64,
    /// Map requests (pages).
    pub map_requests: u64,
    /// Unmap requests (pages).
    pub unmap_requests: u64,
    /// IOTLB invalidations (page-selective).
    pub iotlb_invalidations: u64,
    /// Write-buffer flushes.
    pub write_buffer_flushes: u64,
    /// Modeled CPU cycles of mapping work (hypercalls, host bookkeeping, IOMMU).
    pub cycles: u64,
    /// `cycles / maps`.
    pub cycles_per_map: f64,
    /// Bytes of the buffers mapped (the link time's payload).
    pub bytes: u64,
    /// Mapping CPU at the link rate: `cycles / (bytes × 8 / link_bps) / (GHz × 1e9)`.
    pub cpu_utilization: f64,
    /// Pages the driver had unmapped that the device could still access.
    pub stale_accesses: u64,
    /// Of those, pages it could still write.
    pub stale_writes: u64,
    /// Device accesses to in-flight buffers that faulted (0 unless the model is wrong).
    pub faulted_accesses: u64,
    /// Host pinned pages at the end.
    pub pinned_at_end: u64,
    /// Hypercalls and cycles of setup (`direct`).
    pub setup_hypercalls: u64,
    /// Cycles of setup.
    pub setup_cycles: u64,
    /// The map cache's counters (`on-demand`, `persistent`).
    pub cache: Option<MapCacheStats>,
}

/// Why a guest run failed.
#[derive(Debug, thiserror::Error)]
pub enum GuestError {
    /// The map cache could not be built (e.g. an offline policy without a lookahead).
    #[error(transparent)]
    Cache(#[from] super::Error),
    /// The workload failed (a bad trace).
    #[error(transparent)]
    Workload(#[from] WorkloadError),
    /// The host refused a hypercall the guest model believed valid (a model bug).
    #[error("host refused a hypercall: {0}")]
    Host(#[from] HypercallError),
}

#[derive(Clone, Debug, Default)]
struct Buffer {
    pages: Vec<u64>,
    dir: Option<DmaDirection>,
    dma_alloc: bool,
    live: bool,
}

/// The guest DMA layer over map-cache policy `E` (see the [module docs](self)).
pub struct GuestDma<E: EvictionPolicy> {
    cfg: GuestConfig,
    host: Host,
    cache: Option<MapCache<E>>,
    /// Pages of in-flight buffers (driver view) and, for the `shared` path, their count.
    live: PageMap<u64, u32>,
    /// In-flight count of pages on the `shared` path.
    shared: PageMap<u64, u32>,
    slots: Vec<Buffer>,
    call: Hypercall,
    res: GuestResult,
    setup: HostStats,
    scratch: Vec<u64>,
    mapped_ok: Vec<(u64, bool)>,
}

impl<E: EvictionPolicy> GuestDma<E> {
    /// A guest with an empty host domain (`direct`: all guest memory mapped in one setup
    /// hypercall). `lookahead` is required by offline policies: build it with
    /// [`guest_page_refs`] over the same workload.
    pub fn new(
        cfg: GuestConfig,
        policy: &E::Config,
        lookahead: Option<Arc<Lookahead>>,
    ) -> Result<Self, GuestError> {
        let relaxed = !matches!(cfg.cache_only, CacheOnly::All);
        let host_quota = match cfg.strategy {
            Strategy::OnDemand if relaxed => cfg.quota.saturating_add(cfg.guest_pages),
            Strategy::OnDemand => cfg.quota,
            _ => cfg.guest_pages,
        };
        let host = Host::new(HostConfig {
            guest_pages: cfg.guest_pages,
            quota: host_quota,
            cost: cfg.cost,
            invalidation: InvalidationInterface::Register,
            ..HostConfig::default()
        });
        let cache = match cfg.strategy {
            Strategy::OnDemand => Some(MapCache::<E>::new(
                usize::try_from(cfg.quota).unwrap_or(usize::MAX),
                policy,
                lookahead,
            )?),
            Strategy::Persistent => Some(MapCache::<E>::new(
                usize::try_from(cfg.guest_pages).unwrap_or(usize::MAX),
                policy,
                lookahead,
            )?),
            _ => None,
        };
        let mut g = Self {
            res: GuestResult {
                strategy: cfg.strategy.name().into(),
                eviction: if cfg.strategy.caches() {
                    E::NAME.into()
                } else {
                    String::new()
                },
                batching: cfg.batching.name().into(),
                quota: cfg.quota,
                ..GuestResult::default()
            },
            cfg,
            host,
            cache,
            live: PageMap::default(),
            shared: PageMap::default(),
            slots: Vec::new(),
            call: Hypercall::new(),
            setup: HostStats::default(),
            scratch: Vec::new(),
            mapped_ok: Vec::new(),
        };
        if g.cfg.strategy == Strategy::Direct {
            for p in 0..g.cfg.guest_pages {
                g.call.map.push((Pfn::new(p), Perm::ReadWrite));
            }
            g.flush()?;
        }
        g.setup = g.host.stats();
        Ok(g)
    }

    /// The host.
    pub fn host(&self) -> &Host {
        &self.host
    }

    /// The map cache (`on-demand`, `persistent`).
    pub fn cache(&self) -> Option<&MapCache<E>> {
        self.cache.as_ref()
    }

    /// Pending (not yet sent) requests: piggybacked unmaps.
    pub fn pending(&self) -> &Hypercall {
        &self.call
    }

    fn send(&mut self, call: &Hypercall) -> Result<(), GuestError> {
        if call.is_empty() {
            return Ok(());
        }
        self.host.hypercall(call)?;
        Ok(())
    }

    /// Sends everything pending as one hypercall.
    pub fn flush(&mut self) -> Result<(), GuestError> {
        let call = std::mem::take(&mut self.call);
        let r = self.send(&call);
        self.call = call;
        self.call.clear();
        r
    }

    /// Sends only the pending unmaps, one hypercall.
    fn flush_unmaps(&mut self) -> Result<(), GuestError> {
        if self.call.unmap.is_empty() {
            return Ok(());
        }
        let maps = std::mem::take(&mut self.call.map);
        let r = self.flush();
        self.call.map = maps;
        r
    }

    fn push_map(&mut self, g: u64, perm: Perm) {
        self.call.map.push((Pfn::new(g), perm));
    }

    fn push_unmap(&mut self, g: u64) {
        if let Some(i) = self.call.map.iter().position(|&(x, _)| x.get() == g) {
            self.call.map.swap_remove(i);
        } else {
            self.call.unmap.push(Pfn::new(g));
        }
    }

    fn cacheable(&self, dir: DmaDirection, dma_alloc: bool) -> bool {
        self.cache.is_some() && self.cfg.cache_only.admits(dir, dma_alloc)
    }

    fn cache_perm(&self) -> Perm {
        match self.cfg.cache_only {
            CacheOnly::ReadOnly => Perm::Read,
            _ => Perm::ReadWrite,
        }
    }

    /// The driver maps a buffer of guest pages `pages` (may repeat) for `dir`, allocated
    /// for DMA or not (`dma_alloc`, S1.11); `false` when the map fails (a page refused),
    /// with nothing left mapped for it.
    pub fn map_buffer(
        &mut self,
        pages: &[u64],
        dir: DmaDirection,
        dma_alloc: bool,
    ) -> Result<bool, GuestError> {
        self.res.buffers += 1;
        let mut failed = false;
        self.mapped_ok.clear();
        let b = self.cfg.batching;
        for &g in pages {
            self.res.maps += 1;
            if g >= self.cfg.guest_pages {
                self.res.refused += 1;
                failed = true;
                continue;
            }
            let cached = self.cacheable(dir, dma_alloc);
            if cached {
                let perm = self.cache_perm();
                let cache = self.cache.as_mut().expect("cacheable implies a cache");
                match cache.map(Pfn::new(g)) {
                    MapOutcome::Hit => self.res.hits += 1,
                    MapOutcome::Refused => {
                        self.res.refused += 1;
                        failed = true;
                        continue;
                    }
                    MapOutcome::Miss { mapped, evicted } => {
                        self.res.misses += 1;
                        self.scratch.clear();
                        self.scratch.extend(evicted.iter().map(|p| p.get()));
                        let n_ev = self.scratch.len();
                        self.scratch.extend(mapped.iter().map(|p| p.get()));
                        for i in 0..n_ev {
                            let e = self.scratch[i];
                            self.push_unmap(e);
                            if matches!(b, Batching::None | Batching::Map) {
                                self.flush_unmaps()?;
                            }
                        }
                        if b == Batching::Unmap {
                            self.flush_unmaps()?;
                        }
                        for i in n_ev..self.scratch.len() {
                            let m = self.scratch[i];
                            self.push_map(m, perm);
                        }
                        if !b.batches_maps() {
                            self.flush()?;
                        }
                    }
                }
            } else {
                match self.cfg.strategy {
                    Strategy::Direct => self.res.hits += 1,
                    Strategy::SingleUse => {
                        self.res.misses += 1;
                        self.push_map(g, dir.perm());
                        if !b.batches_maps() {
                            self.flush()?;
                        }
                    }
                    _ => {
                        // `shared`, or an uncacheable page of a relaxed cache.
                        // Mapped read-write: one mapping serves in-flight DMAs of any
                        // direction; unmapped when the last one completes.
                        let rc = self.shared.entry(g).or_insert(0);
                        *rc += 1;
                        if *rc > 1 {
                            self.res.hits += 1;
                        } else {
                            self.res.misses += 1;
                            self.push_map(g, Perm::ReadWrite);
                            if !b.batches_maps() {
                                self.flush()?;
                            }
                        }
                    }
                }
            }
            *self.live.entry(g).or_insert(0) += 1;
            self.mapped_ok.push((g, cached));
        }
        if b.batches_maps() {
            // The buffer's evictions (one unmap hypercall), then its maps (one map
            // hypercall).
            self.flush_unmaps()?;
            self.flush()?;
        }
        if failed {
            self.res.buffers_refused += 1;
            let done = std::mem::take(&mut self.mapped_ok);
            for &(g, cached) in &done {
                self.release_page(g, cached)?;
            }
            self.mapped_ok = done;
            self.end_unmap_batch()?;
        }
        Ok(!failed)
    }

    fn flush_unmaps_or_defer(&mut self) -> Result<(), GuestError> {
        match self.cfg.batching {
            Batching::Piggyback | Batching::Unmap | Batching::MapUnmap => Ok(()),
            _ => self.flush_unmaps(),
        }
    }

    fn end_unmap_batch(&mut self) -> Result<(), GuestError> {
        if matches!(self.cfg.batching, Batching::Unmap | Batching::MapUnmap) {
            self.flush_unmaps()?;
        }
        Ok(())
    }

    /// Drops one in-flight use of page `g` (driver unmap of one page of a buffer).
    fn release_page(&mut self, g: u64, cached: bool) -> Result<(), GuestError> {
        let c = self.live.get_mut(&g).expect("released page is live");
        *c -= 1;
        if *c == 0 {
            self.live.remove(&g);
        }
        if cached {
            let cache = self.cache.as_mut().expect("cached implies a cache");
            let out = cache.unmap(Pfn::new(g))?;
            if let Some(e) = out.evicted {
                self.push_unmap(e.get());
                self.flush_unmaps_or_defer()?;
            }
            return Ok(());
        }
        match self.cfg.strategy {
            Strategy::Direct => {}
            Strategy::SingleUse => {
                self.push_unmap(g);
                self.flush_unmaps_or_defer()?;
            }
            _ => {
                let rc = self.shared.get_mut(&g).expect("shared page has a count");
                *rc -= 1;
                if *rc == 0 {
                    self.shared.remove(&g);
                    self.push_unmap(g);
                    self.flush_unmaps_or_defer()?;
                }
            }
        }
        Ok(())
    }

    /// The driver unmaps a buffer mapped by [`GuestDma::map_buffer`] with pages `pages`
    /// for `dir` and `dma_alloc`, then the stale-access oracle probes the pages left
    /// without DMA.
    pub fn unmap_buffer(
        &mut self,
        pages: &[u64],
        dir: DmaDirection,
        dma_alloc: bool,
    ) -> Result<(), GuestError> {
        let cached = self.cacheable(dir, dma_alloc);
        for &g in pages {
            self.release_page(g, cached)?;
        }
        self.end_unmap_batch()?;
        if self.cfg.protection_oracle {
            for &g in pages {
                if self.live.contains_key(&g) {
                    continue;
                }
                let p = Pfn::<Gpa>::new(g);
                if self.host.device_access(p, Access::Read).is_ok() {
                    self.res.stale_accesses += 1;
                    if self.host.device_access(p, Access::Write).is_ok() {
                        self.res.stale_writes += 1;
                    }
                } else if self.host.device_access(p, Access::Write).is_ok() {
                    self.res.stale_accesses += 1;
                    self.res.stale_writes += 1;
                }
            }
        }
        Ok(())
    }

    /// The device accesses an in-flight buffer; checked through the IOMMU.
    pub fn device_access(&mut self, pages: &[u64], access: Access) {
        if !self.cfg.protection_oracle {
            return;
        }
        for &g in pages {
            if self.host.device_access(Pfn::new(g), access).is_err() {
                self.res.faulted_accesses += 1;
            }
        }
    }

    /// The host changes the quota at run time (S1.7): a shrink evicts from the map cache
    /// (one unmap hypercall) before the host lowers its limit; a growth raises the host's
    /// limit first.
    pub fn set_quota(&mut self, quota: u64) -> Result<(), GuestError> {
        self.res.quota = quota;
        if self.cfg.strategy != Strategy::OnDemand {
            return Ok(());
        }
        let relaxed = !matches!(self.cfg.cache_only, CacheOnly::All);
        let hq = if relaxed {
            quota.saturating_add(self.cfg.guest_pages)
        } else {
            quota
        };
        if hq > self.host.quota() {
            self.host.set_quota(hq);
        }
        let cache = self.cache.as_mut().expect("on-demand has a cache");
        let out = cache.set_quota(usize::try_from(quota).unwrap_or(usize::MAX));
        self.scratch.clear();
        self.scratch.extend(out.evicted.iter().map(|p| p.get()));
        for i in 0..self.scratch.len() {
            let e = self.scratch[i];
            self.push_unmap(e);
        }
        self.flush_unmaps()?;
        self.host.set_quota(hq);
        Ok(())
    }

    /// Runs a whole workload (pending piggybacked unmaps are sent at the end).
    pub fn run<W: Workload>(&mut self, w: &mut W) -> Result<(), GuestError> {
        while let Some(op) = w.next_op()? {
            self.step(w, op)?;
        }
        self.flush()
    }

    /// Applies one workload operation.
    pub fn step<W: Workload>(&mut self, w: &W, op: DmaOp) -> Result<(), GuestError> {
        match op {
            DmaOp::Map {
                slot,
                phys,
                len,
                dir,
                dma_alloc,
                ..
            } => {
                let mut pages = self.take_slot(slot);
                push_pages(&mut pages, phys.get(), len);
                self.res.bytes += len;
                self.finish_map(slot, pages, dir, dma_alloc)?;
            }
            DmaOp::MapSg { slot, dir, .. } => {
                let mut pages = self.take_slot(slot);
                for s in w.sg_segments() {
                    push_pages(&mut pages, s.phys.get(), s.len);
                    self.res.bytes += s.len;
                }
                self.finish_map(slot, pages, dir, false)?;
            }
            DmaOp::Access { slot, access } => {
                if self.slots.get(slot as usize).is_some_and(|b| b.live) {
                    let pages = std::mem::take(&mut self.slots[slot as usize].pages);
                    self.device_access(&pages, access);
                    self.slots[slot as usize].pages = pages;
                }
            }
            DmaOp::Unmap { slot, .. } => {
                let i = slot as usize;
                if self.slots.get(i).is_some_and(|b| b.live) {
                    let pages = std::mem::take(&mut self.slots[i].pages);
                    let dir = self.slots[i].dir.expect("live slot has a direction");
                    let dma_alloc = self.slots[i].dma_alloc;
                    self.unmap_buffer(&pages, dir, dma_alloc)?;
                    self.slots[i].pages = pages;
                    self.slots[i].live = false;
                }
            }
            DmaOp::Tick { now_ns } => {
                if let Some(q) = self.cfg.quota_policy.as_ref().map(|p| p.quota_at(now_ns))
                    && q != self.res.quota
                {
                    self.set_quota(q)?;
                }
            }
        }
        Ok(())
    }

    fn take_slot(&mut self, slot: u32) -> Vec<u64> {
        let i = slot as usize;
        if i >= self.slots.len() {
            self.slots.resize_with(i + 1, Buffer::default);
        }
        let mut v = std::mem::take(&mut self.slots[i].pages);
        v.clear();
        v
    }

    fn finish_map(
        &mut self,
        slot: u32,
        pages: Vec<u64>,
        dir: DmaDirection,
        dma_alloc: bool,
    ) -> Result<(), GuestError> {
        let ok = self.map_buffer(&pages, dir, dma_alloc)?;
        let b = &mut self.slots[slot as usize];
        b.pages = pages;
        b.dir = Some(dir);
        b.dma_alloc = dma_alloc;
        b.live = ok;
        Ok(())
    }

    /// The result so far.
    pub fn result(&self) -> GuestResult {
        let mut r = self.res.clone();
        let s = self.host.stats();
        let d = |a: u64, b: u64| a - b;
        r.hypercalls = d(s.hypercalls, self.setup.hypercalls);
        r.map_requests = d(s.map_requests, self.setup.map_requests);
        r.unmap_requests = d(s.unmap_requests, self.setup.unmap_requests);
        r.iotlb_invalidations = d(s.iotlb_invalidations, self.setup.iotlb_invalidations);
        r.write_buffer_flushes = d(s.write_buffer_flushes, self.setup.write_buffer_flushes);
        r.cycles = d(s.cycles, self.setup.cycles);
        r.setup_hypercalls = self.setup.hypercalls;
        r.setup_cycles = self.setup.cycles;
        r.max_pages_per_hypercall = if r.hypercalls > 0 {
            s.max_pages_per_hypercall
        } else {
            0
        };
        r.pages_per_hypercall = if r.hypercalls > 0 {
            (r.map_requests + r.unmap_requests) as f64 / r.hypercalls as f64
        } else {
            0.0
        };
        r.hit_rate = if r.maps > 0 {
            r.hits as f64 / r.maps as f64
        } else {
            0.0
        };
        r.cycles_per_map = if r.maps > 0 {
            r.cycles as f64 / r.maps as f64
        } else {
            0.0
        };
        let link_s = r.bytes as f64 * 8.0 / (self.cfg.link_mbps.max(1) as f64 * 1e6);
        r.cpu_utilization = if link_s > 0.0 {
            r.cycles as f64 / link_s / self.cfg.cost.clock.hz()
        } else {
            0.0
        };
        r.pinned_at_end = self.host.pinned();
        r.cache = self.cache.as_ref().map(|c| *c.stats());
        r
    }
}

impl<E: EvictionPolicy> std::fmt::Debug for GuestDma<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GuestDma")
            .field("cfg", &self.cfg)
            .field("res", &self.res)
            .finish_non_exhaustive()
    }
}

/// Appends the 4 KiB page numbers of `[phys, phys + len)` (one page for `len == 0`).
fn push_pages(v: &mut Vec<u64>, phys: u64, len: u64) {
    let first = phys >> 12;
    let last = phys.saturating_add(len.max(1) - 1) >> 12;
    v.extend(first..=last);
}

/// The page-reference stream the map cache of `cfg` sees on workload `w` (its cacheable
/// page maps and unmaps), for [`Lookahead::from_refs`] and the one-pass curves of
/// [`crate::mrc`]. For `cache_only = all` this is every page map and unmap.
pub fn guest_page_refs<W: Workload>(
    w: &mut W,
    cache_only: CacheOnly,
) -> Result<Vec<PageRef>, WorkloadError> {
    let mut refs = Vec::new();
    // Pages and whether the cache sees the buffer, per slot; `None` when not live.
    let mut slots: Vec<(Vec<u64>, Option<bool>)> = Vec::new();
    while let Some(op) = w.next_op()? {
        let (slot, keep) = match op {
            DmaOp::Map {
                slot,
                dir,
                dma_alloc,
                ..
            } => (slot, cache_only.admits(dir, dma_alloc)),
            DmaOp::MapSg { slot, dir, .. } => (slot, cache_only.admits(dir, false)),
            DmaOp::Unmap { slot, .. } => {
                if let Some((pages, live)) = slots.get_mut(slot as usize)
                    && let Some(keep) = live.take()
                    && keep
                {
                    refs.extend(pages.iter().map(|&g| PageRef::Unmap(Pfn::new(g))));
                }
                continue;
            }
            _ => continue,
        };
        let i = slot as usize;
        if i >= slots.len() {
            slots.resize_with(i + 1, || (Vec::new(), None));
        }
        let (pages, live) = &mut slots[i];
        pages.clear();
        match op {
            DmaOp::Map { phys, len, .. } => push_pages(pages, phys.get(), len),
            _ => {
                for s in w.sg_segments() {
                    push_pages(pages, s.phys.get(), s.len);
                }
            }
        }
        *live = Some(keep);
        if keep {
            refs.extend(pages.iter().map(|&g| PageRef::Map(Pfn::new(g))));
        }
    }
    Ok(refs)
}

/// Runs `w` under `cfg` with the concrete policy of `cfg.eviction` (one dispatch, then a
/// monomorphised loop). Offline policies (OPT, optimal batching) need the future: pass
/// `lookahead` built by [`guest_page_refs`] over an identical workload (e.g. a regenerated
/// one or a second read of the trace).
pub fn run_guest<W: Workload>(
    w: &mut W,
    cfg: &GuestConfig,
    lookahead: Option<Arc<Lookahead>>,
) -> Result<GuestResult, GuestError> {
    crate::with_eviction!(&cfg.eviction, E, c => {
        let mut g = GuestDma::<E>::new(cfg.clone(), c, lookahead)?;
        g.run(w)?;
        Ok(g.result())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::virt::{EvictionConfig, LruConfig, OptConfig};
    use crate::workload::{ApacheSendfile, ApacheSendfileConfig, NetperfSend, NetperfSendConfig};

    fn netperf() -> NetperfSend {
        NetperfSend::new(NetperfSendConfig {
            packets: 3000,
            ..NetperfSendConfig::default()
        })
        .unwrap()
    }

    fn run(cfg: &GuestConfig) -> GuestResult {
        let la = cfg.eviction.is_offline().then(|| {
            Arc::new(Lookahead::from_refs(
                &guest_page_refs(&mut netperf(), cfg.cache_only).unwrap(),
            ))
        });
        run_guest(&mut netperf(), cfg, la).unwrap()
    }

    /// Figures 5–6's "no caching allowed" end (S1.9) is `single-use`: no page map hits,
    /// every map and unmap is a request. Without batching each is a hypercall (two per page
    /// map); piggyback carries each unmap on the next map hypercall (one per page map, plus
    /// the last flush); batch map + batch unmap of a packet mapped as one sg list is one map
    /// and one unmap hypercall per packet, with at most one write-buffer flush per map
    /// hypercall and the same IOTLB invalidations (S1.6, S1.10).
    #[test]
    fn single_use_counts_the_hypercalls_of_each_batching() {
        let packets = 2000u64;
        let run_on = |mapping, batching| {
            let mut w = NetperfSend::new(NetperfSendConfig {
                packets,
                mapping,
                ..NetperfSendConfig::default()
            })
            .unwrap();
            let cfg = GuestConfig {
                strategy: Strategy::SingleUse,
                quota: 0,
                batching,
                ..GuestConfig::default()
            };
            run_guest(&mut w, &cfg, None).unwrap()
        };
        use crate::workload::TxMapping;
        let lru = run_on(TxMapping::PerFragment, Batching::None);
        assert_eq!(lru.hits, 0);
        assert_eq!(lru.misses, lru.maps);
        assert_eq!(lru.hypercalls, 2 * lru.maps);
        assert_eq!(lru.unmap_requests, lru.maps);
        // The host clears a PTE (and invalidates it) when no request holds the page any
        // more: a head slab page and a data page serve several packets on the ring.
        assert!(lru.iotlb_invalidations > 0 && lru.iotlb_invalidations < lru.unmap_requests);
        let pig = run_on(TxMapping::PerFragment, Batching::Piggyback);
        assert_eq!(pig.hits, 0);
        assert_eq!(pig.hypercalls, pig.maps + 1);
        assert!(pig.cycles < lru.cycles);
        let bat = run_on(TxMapping::Sg, Batching::MapUnmap);
        assert_eq!(bat.hits, 0);
        assert_eq!(bat.maps, lru.maps, "the same pages, as sg lists");
        assert_eq!(bat.hypercalls, 2 * packets);
        // At most one write-buffer flush per map hypercall (none when every page of it was
        // already mapped for another packet on the ring).
        assert!(bat.write_buffer_flushes <= packets);
        assert!(bat.write_buffer_flushes < lru.write_buffer_flushes);
        assert_eq!(bat.unmap_requests, bat.maps);
        assert_eq!(bat.iotlb_invalidations, lru.iotlb_invalidations);
        assert!(bat.cycles < lru.cycles);
    }

    #[test]
    fn strategies_on_netperf() {
        for s in Strategy::ALL {
            for b in [
                Batching::None,
                Batching::Map,
                Batching::Unmap,
                Batching::Piggyback,
            ] {
                for ev in [
                    EvictionConfig::Lru(LruConfig::default()),
                    EvictionConfig::Opt(OptConfig::default()),
                ] {
                    let cfg = GuestConfig {
                        strategy: s,
                        batching: b,
                        quota: 16,
                        eviction: ev,
                        guest_pages: 1 << 19,
                        ..GuestConfig::default()
                    };
                    let r = run(&cfg);
                    eprintln!(
                        "{:>10} {:>9} {:>4} hits {:>6} miss {:>6} ref {:>4} hc {:>6} ppc {:.2} cyc/map {:>8.0} cpu {:.3} stale {:>5}/{:>5} fault {}",
                        r.strategy,
                        r.batching,
                        r.eviction,
                        r.hits,
                        r.misses,
                        r.refused,
                        r.hypercalls,
                        r.pages_per_hypercall,
                        r.cycles_per_map,
                        r.cpu_utilization,
                        r.stale_accesses,
                        r.stale_writes,
                        r.faulted_accesses
                    );
                    assert_eq!(r.hits + r.misses + r.refused, r.maps);
                    assert_eq!(r.faulted_accesses, 0);
                    match s {
                        Strategy::Direct => assert_eq!(r.hypercalls, 0),
                        Strategy::SingleUse | Strategy::Shared if b != Batching::Piggyback => {
                            assert_eq!(r.stale_accesses, 0);
                        }
                        _ => {}
                    }
                    if let Some(c) = r.cache
                        && s == Strategy::OnDemand
                    {
                        {
                            assert_eq!(
                                (c.hits, c.misses, c.refused),
                                (r.hits, r.misses, r.refused)
                            );
                        }
                    }
                }
            }
        }
    }

    /// S1.7: a cooperative guest's quota follows Mmax − B(t); inflating the balloon at run
    /// time shrinks the map cache (evictions) and the host's limit.
    #[test]
    fn balloon_inflation_shrinks_the_cache() {
        let fixed = GuestConfig {
            quota: 64,
            guest_pages: 1 << 19,
            ..GuestConfig::default()
        };
        let mut g =
            GuestDma::<crate::virt::Lru>::new(fixed.clone(), &LruConfig::default(), None).unwrap();
        g.run(&mut netperf()).unwrap();
        let before = g.result();
        let cfg = GuestConfig {
            quota_policy: Some(QuotaPolicy::Cooperative {
                max_pages: 100,
                requested: 64,
                balloon: vec![(1_000_000, 90)],
            }),
            ..fixed
        };
        let mut g = GuestDma::<crate::virt::Lru>::new(cfg, &LruConfig::default(), None).unwrap();
        g.run(&mut netperf()).unwrap();
        let r = g.result();
        assert_eq!(r.quota, 10);
        assert_eq!(g.host().quota(), 10);
        assert!(g.cache().unwrap().len() <= 10);
        assert!(r.hits < before.hits && r.refused > before.refused);
        g.host().check().unwrap();
    }

    /// S1.11: with `cache_only = dma-allocated` the map cache holds only pages of buffers
    /// the workload marked as allocated for DMA (netperf's skb heads, from the head slab);
    /// the payload pages the stack hands over go the `shared` path, so the device keeps
    /// stale access to fewer pages than with `all`.
    #[test]
    fn dma_allocated_relaxation_caches_only_dma_buffers() {
        use std::collections::HashSet;
        let (mut heads, mut other) = (HashSet::new(), HashSet::new());
        let mut w = netperf();
        let mut v = Vec::new();
        while let Some(op) = w.next_op().unwrap() {
            if let DmaOp::Map {
                phys,
                len,
                dma_alloc,
                ..
            } = op
            {
                v.clear();
                push_pages(&mut v, phys.get(), len);
                if dma_alloc { &mut heads } else { &mut other }.extend(v.iter().copied());
            }
        }
        assert!(!heads.is_empty() && !other.is_empty());
        assert!(
            heads.is_disjoint(&other),
            "slab pages are not payload pages"
        );
        let refs = guest_page_refs(&mut netperf(), CacheOnly::DmaAllocated).unwrap();
        assert!(!refs.is_empty());
        assert!(refs.iter().all(|r| heads.contains(&r.gfn().get())));
        let relaxed = GuestConfig {
            quota: 64,
            cache_only: CacheOnly::DmaAllocated,
            ..GuestConfig::default()
        };
        let mut g =
            GuestDma::<crate::virt::Lru>::new(relaxed, &LruConfig::default(), None).unwrap();
        g.run(&mut netperf()).unwrap();
        let cached: Vec<u64> = g.cache().unwrap().pages().map(|(p, _)| p.get()).collect();
        assert!(!cached.is_empty());
        assert!(cached.iter().all(|p| heads.contains(p)), "{cached:?}");
        let r = g.result();
        let all = run(&GuestConfig {
            quota: 64,
            ..GuestConfig::default()
        });
        assert!(r.stale_accesses > 0 && r.stale_accesses < all.stale_accesses);
        assert!(r.hypercalls > all.hypercalls);
        g.host().check().unwrap();
    }

    #[test]
    fn on_demand_hits_match_the_map_cache_replay() {
        let refs = guest_page_refs(&mut netperf(), CacheOnly::All).unwrap();
        for q in [20u64, 64, 300] {
            let cfg = GuestConfig {
                quota: q,
                guest_pages: 1 << 19,
                ..GuestConfig::default()
            };
            let r = run(&cfg);
            let st =
                crate::virt::replay_config(&refs, usize::try_from(q).unwrap(), &cfg.eviction, None)
                    .unwrap();
            eprintln!(
                "q {q}: {} {} {} vs {} {} {}",
                r.hits, r.misses, r.refused, st.hits, st.misses, st.refused
            );
            assert_eq!(
                (r.hits, r.misses, r.refused),
                (st.hits, st.misses, st.refused)
            );
        }
        let _ = ApacheSendfile::new(ApacheSendfileConfig::default()).unwrap();
    }
}
