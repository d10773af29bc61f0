//! One guest with a directly assigned device (S1.1, S1.5–S1.11), run through the one DMA API:
//! the workload's driver calls go to a [`DmaApi`] in identity addressing over a
//! [`HypercallBackend`] (strategy × batching × the host), and the device's accesses are
//! translated by the host's IOMMU and classified by the DMA API's stale-access oracle
//! (`device::StaleOracle`).
//!
//! ```text
//!  Workload ──► Driver ─────►  DmaApi<NoIova, Strict, HypercallBackend<S, U>> ──► Host<U> (VT-d, or any unit)
//!                 │               (Translation::Identity: DMA address = guest-physical)
//!                 └─ after an unmap the device probes the pages no DMA uses any more
//!                    (read, then write): each that goes through is a stale access (S1.11)
//! ```
//!
//! The guest runs a `Workload<Phys = Gpa>`: its buffers are guest-physical. A generator or a
//! trace gives the physical addresses of the machine it runs on; wrapped in
//! [`InGuest`](iommulab_workload::InGuest) that machine is the guest's memory, so a bare-metal
//! workload cannot be handed to the guest (nor a guest's to bare metal) by mistake. A buffer
//! concerns the 4 KiB guest pages it spans (every segment's, for `MapSg`).

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::balloon::QuotaPolicy;
use crate::host::{GUEST_DEVICE, Host, HostConfig, InvalidationScope};
use crate::hypercall::HypercallError;
use crate::hypercall_backend::{Batching, HypercallBackend};
use crate::link::link_load;
use crate::strategy::{CacheOnly, GuestStrategy, Strategy};
use crate::{EvictionConfig, Lookahead, MapCacheStats, PageRef};
use iommulab_base::addr::{Bdf, DmaDirection, Gpa, Iova, PAGE_4K, Pfn};
use iommulab_hw::{CostModel, InvalidationInterface, RemapUnit, Vtd};
use iommulab_os::device::AccessOutcome;
use iommulab_os::dma::{BackendError, DeviceHandle, DmaApi, DmaConfig, DmaError, Translation};
use iommulab_os::driver::{Driver, Hooks, Slot};
use iommulab_os::flush::Strict;
use iommulab_os::iova::NoIova;
use iommulab_workload::{DmaOp, OpSink, Segment, Workload, WorkloadError};

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
    /// The guest's CPUs (vCPUs) that do its stack and mapping work ([`crate::link`]; 1: the
    /// paper does not say how many its guest had).
    pub cpus: u32,
    /// Run the stale-access oracle and check device accesses through the IOMMU.
    pub protection_oracle: bool,
    /// Quota over time (`on-demand`), applied at the workload's `Tick`s (S1.7).
    pub quota_policy: Option<QuotaPolicy>,
    /// How the host invalidates the PTEs one hypercall clears.
    pub host_invalidation: InvalidationScope,
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
            cpus: 1,
            protection_oracle: true,
            quota_policy: None,
            host_invalidation: InvalidationScope::Call,
        }
    }
}

/// What one guest run measured. Counts after setup (`direct`'s up-front
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
    /// Of the unit's invalidations, those performed domain-selective (a hypercall's
    /// covering request wider than the unit's address mask): priced `inv_domain`. Counted
    /// over the whole run, setup included (setup only maps).
    pub domain_invalidations: u64,
    /// Write-buffer flushes.
    pub write_buffer_flushes: u64,
    /// Modeled CPU cycles of mapping work (hypercalls, host bookkeeping, IOMMU).
    pub cycles: u64,
    /// `cycles / maps`.
    pub cycles_per_map: f64,
    /// Bytes of the buffers mapped.
    pub bytes: u64,
    /// Of those, bytes the device reads (to-device and bidirectional maps): what is sent, the
    /// link's payload ([`crate::link`]; a run that sends nothing counts all of `bytes`).
    pub tx_bytes: u64,
    /// Cycles of the guest's stack and driver besides mapping (`net_tx_per_kib`).
    pub stack_cycles: u64,
    /// Throughput in Mb/s: the link rate unless the CPUs cannot keep up ([`crate::link`]).
    pub throughput_mbps: f64,
    /// CPU utilisation during the run, mapping and stack (≤ 1; [`crate::link`]).
    pub cpu_utilization: f64,
    /// Of `cpu_utilization`, the mapping work's share.
    pub mapping_cpu: f64,
    /// What the CPUs would need to keep the link full, as a fraction of their capacity
    /// (> 1: CPU-bound, the link is not saturated).
    pub cpu_demand: f64,
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

impl GuestResult {
    /// The link's payload: the bytes sent, or for a run that sends nothing every byte mapped
    /// (a receive-only workload's link carries what it receives).
    pub fn sent_bytes(&self) -> u64 {
        if self.tx_bytes > 0 {
            self.tx_bytes
        } else {
            self.bytes
        }
    }
}

/// Why a guest run failed.
#[derive(Debug, thiserror::Error)]
pub enum GuestError {
    /// The map cache could not be built (e.g. an offline policy without a lookahead).
    #[error(transparent)]
    Cache(Box<super::Error>),
    /// The workload failed (a bad trace).
    #[error(transparent)]
    Workload(#[from] WorkloadError),
    /// The host refused a hypercall the guest model believed valid (a model bug).
    #[error("host refused a hypercall: {0}")]
    Host(#[from] HypercallError),
    /// The guest's DMA layer refused a driver call (a model bug or a bad trace).
    #[error(transparent)]
    Dma(Box<DmaError>),
    /// A page released more often than it was mapped (a model bug).
    #[error("guest page {gfn:#x} released but not in flight")]
    NotInFlight {
        /// The page.
        gfn: u64,
    },
    /// An offline policy's future was not the stream the map cache saw: its decisions
    /// were made on the wrong pages, so the run is not reported.
    #[error(
        "the offline policy's lookahead holds {lookahead} page maps but the map cache saw \
         {maps}: build it from the same workload with Lookahead::from_guest_maps (which \
         leaves out pages outside guest memory, refused before the cache sees them)"
    )]
    LookaheadMismatch {
        /// Map requests in the lookahead.
        lookahead: u64,
        /// Map requests the map cache saw.
        maps: u64,
    },
}

// The cold variants are boxed: strategies return `Result<_, GuestError>` for every page.
impl From<super::Error> for GuestError {
    fn from(e: super::Error) -> Self {
        GuestError::Cache(Box::new(e))
    }
}

impl From<DmaError> for GuestError {
    fn from(e: DmaError) -> Self {
        GuestError::Dma(Box::new(e))
    }
}

/// The guest's DMA layer: [`DmaApi`] over a [`HypercallBackend`] to a host on unit `U`.
pub type GuestDmaApi<S, U = Vtd> = DmaApi<NoIova, Strict, HypercallBackend<S, U>>;

/// One guest running a workload (see the [module docs](self)) on a host whose remapping unit
/// is `U` (VT-d by default): its DMA layer, its device and what the driver's hooks count.
#[derive(Debug)]
pub struct Guest<S: GuestStrategy, U: RemapUnit = Vtd> {
    api: GuestDmaApi<S, U>,
    dev: DeviceHandle,
    hooks: GuestHooks,
}

/// What a guest adds to the driver ([`Hooks`]): its bytes, the clamped map length, a refused
/// map that leaves the buffer unmapped, S1.11's probes after an unmap, and the quota over
/// time (S1.7). The in-flight buffers stay mapped at the end (the host's pinned pages then
/// are part of the result).
#[derive(Debug)]
pub struct GuestHooks {
    cfg: GuestConfig,
    quota: u64,
    bytes: u64,
    tx_bytes: u64,
    stale_accesses: u64,
    stale_writes: u64,
    faulted_accesses: u64,
}

/// The driver of a guest's workload.
pub type GuestDriver<'a, S, U = Vtd> =
    Driver<'a, NoIova, Strict, HypercallBackend<S, U>, GuestHooks>;

/// The requester id the guest's driver binds (the host assigned it as [`GUEST_DEVICE`]).
const DEVICE: Bdf = GUEST_DEVICE;

impl<S: GuestStrategy> Guest<S> {
    /// A guest under `cfg` mapping with `strategy` (built by
    /// [`with_strategy!`](crate::with_strategy) from the same `cfg`), on a host with
    /// Yassour's VT-d unit (S1.10).
    pub fn new(cfg: GuestConfig, strategy: S) -> Result<Self, GuestError> {
        let host = Host::new(host_config(&cfg));
        Self::on_host(cfg, strategy, host)
    }
}

/// The host of a guest under `cfg`: its memory, no quota beyond it, the guest's prices.
fn host_config(cfg: &GuestConfig) -> HostConfig {
    HostConfig {
        guest_pages: cfg.guest_pages,
        quota: cfg.guest_pages,
        cost: cfg.cost,
        invalidation: InvalidationInterface::Register,
        invalidation_scope: cfg.host_invalidation,
        ..HostConfig::default()
    }
}

impl<S: GuestStrategy, U: RemapUnit> Guest<S, U> {
    /// A guest under `cfg` mapping with `strategy`, on a host that drives `unit` (any
    /// remapping unit, e.g. a TCE unit; its table must cover the guest's memory, as the IOVA
    /// of a guest page is its guest-physical address).
    ///
    /// # Panics
    /// As [`Host::with_unit`].
    pub fn with_unit(cfg: GuestConfig, strategy: S, unit: U) -> Result<Self, GuestError> {
        let host = Host::with_unit(host_config(&cfg), unit);
        Self::on_host(cfg, strategy, host)
    }

    fn on_host(cfg: GuestConfig, strategy: S, host: Host<U>) -> Result<Self, GuestError> {
        let backend = HypercallBackend::new(host, cfg.guest_pages, strategy, cfg.batching)?;
        let dma = DmaConfig {
            translation: Translation::Identity,
            dma_bits: 64,
            debug: false,
            oracle: cfg.protection_oracle,
            forcedac: false,
        };
        let mut api = DmaApi::new(dma, backend, NoIova::new(), Strict::new());
        let dev = api.attach(DEVICE)?;
        Ok(Self {
            api,
            dev,
            hooks: GuestHooks {
                quota: cfg.quota,
                cfg,
                bytes: 0,
                tx_bytes: 0,
                stale_accesses: 0,
                stale_writes: 0,
                faulted_accesses: 0,
            },
        })
    }

    /// The guest's DMA layer.
    pub fn dma(&self) -> &GuestDmaApi<S, U> {
        &self.api
    }

    /// The backend: strategy, channel and host.
    pub fn backend(&self) -> &HypercallBackend<S, U> {
        self.api.backend()
    }

    /// A driver of this guest's device, for a caller that hands it ops one at a time
    /// ([`Driver::step`]); [`Guest::run`] runs a whole workload.
    pub fn driver(&mut self, slots: usize) -> GuestDriver<'_, S, U> {
        Driver::new(
            &mut self.api,
            std::slice::from_ref(&self.dev),
            slots,
            &mut self.hooks,
        )
    }

    /// Runs a whole workload (pending piggybacked unmaps are sent at the end).
    pub fn run<W: Workload<Phys = Gpa>>(&mut self, w: &mut W) -> Result<(), GuestError> {
        self.driver(w.slots()).run(w)?;
        self.api.backend_mut().flush()
    }

    /// The host changes the map-cache quota at run time (S1.7; only `on-demand` has one).
    pub fn set_quota(&mut self, quota: u64) -> Result<(), GuestError> {
        self.hooks.set_quota(&mut self.api, quota)
    }

    /// The result so far.
    pub fn result(&self) -> GuestResult {
        self.hooks.result(&self.api)
    }
}

impl GuestHooks {
    /// The result so far of the guest whose DMA layer is `api`.
    pub fn result<S: GuestStrategy, U: RemapUnit>(&self, api: &GuestDmaApi<S, U>) -> GuestResult {
        let b = api.backend();
        let c = b.counters();
        let s = b.host().stats();
        let setup = b.setup_stats();
        let d = |a: u64, b: u64| a - b;
        let mut r = GuestResult {
            strategy: S::NAME.into(),
            eviction: b.strategy().eviction().into(),
            batching: b.batching().name().into(),
            quota: self.quota,
            buffers: c.buffers,
            buffers_refused: c.buffers_refused,
            maps: c.maps,
            hits: c.hits,
            misses: c.misses,
            refused: c.refused,
            bytes: self.bytes,
            tx_bytes: self.tx_bytes,
            stale_accesses: self.stale_accesses,
            stale_writes: self.stale_writes,
            faulted_accesses: self.faulted_accesses,
            hypercalls: d(s.hypercalls, setup.hypercalls),
            map_requests: d(s.map_requests, setup.map_requests),
            unmap_requests: d(s.unmap_requests, setup.unmap_requests),
            iotlb_invalidations: d(s.iotlb_invalidations, setup.iotlb_invalidations),
            domain_invalidations: b.host().unit().stats().inv_domain,
            write_buffer_flushes: d(s.write_buffer_flushes, setup.write_buffer_flushes),
            cycles: d(s.cycles, setup.cycles),
            setup_hypercalls: setup.hypercalls,
            setup_cycles: setup.cycles,
            pinned_at_end: b.host().pinned(),
            cache: b.strategy().cache_stats(),
            ..GuestResult::default()
        };
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
        let l = link_load(
            &self.cfg.cost,
            self.cfg.cpus,
            self.cfg.link_mbps,
            r.sent_bytes(),
            r.cycles,
        );
        r.stack_cycles = l.stack_cycles;
        r.throughput_mbps = l.throughput_mbps;
        r.cpu_utilization = l.cpu_utilization;
        r.mapping_cpu = l.mapping_cpu;
        r.cpu_demand = l.demand;
        r
    }

    /// The host changes the map-cache quota at run time (S1.7; only `on-demand` has one).
    pub fn set_quota<S: GuestStrategy, U: RemapUnit>(
        &mut self,
        api: &mut GuestDmaApi<S, U>,
        quota: u64,
    ) -> Result<(), GuestError> {
        self.quota = quota;
        api.backend_mut().set_quota(quota)
    }

    /// S1.11's protection check: after the driver's unmap, the device tries to read and then
    /// to write each page of the buffer `[addr, addr + len)` that no DMA uses any more; each
    /// page it still reaches through the host IOMMU is a stale access (a stale write if it
    /// could write).
    fn probe<S: GuestStrategy, U: RemapUnit>(
        &mut self,
        api: &mut GuestDmaApi<S, U>,
        dev: DeviceHandle,
        addr: Iova,
        len: u64,
    ) -> Result<(), GuestError> {
        let first = addr.pfn(PAGE_4K);
        for i in 0..PAGE_4K.pages_spanned(addr.page_offset(PAGE_4K), len) {
            let page = first.add(i).base(PAGE_4K);
            if let Some((read, write)) = api.probe_unmapped(dev, page)? {
                self.stale_accesses += u64::from(read || write);
                self.stale_writes += u64::from(write);
            }
        }
        Ok(())
    }
}

impl<S: GuestStrategy, U: RemapUnit> Hooks<NoIova, Strict, HypercallBackend<S, U>> for GuestHooks {
    type Error = GuestError;

    // The result reports what the workload did: its buffers still in flight stay mapped.
    const COMPLETE_AT_END: bool = false;

    /// Counts a buffer's bytes, and as sent if the device reads it; maps at least one byte
    /// and no more than the page references count (`map_len`).
    #[inline(always)]
    fn buffer(&mut self, phys: Gpa, len: u64, dir: DmaDirection) -> Result<u64, GuestError> {
        self.bytes += len;
        if matches!(dir, DmaDirection::ToDevice | DmaDirection::Bidirectional) {
            self.tx_bytes += len;
        }
        Ok(map_len(phys.get(), len))
    }

    /// A refused map leaves the buffer unmapped; anything else is an error.
    #[inline(always)]
    fn map_failed(&mut self, e: DmaError) -> Result<(), GuestError> {
        match e {
            DmaError::Backend(BackendError::Refused { .. }) | DmaError::EmptyScatterlist => Ok(()),
            e => Err(e.into()),
        }
    }

    #[inline(always)]
    fn device_accesses(&self) -> bool {
        self.cfg.protection_oracle
    }

    #[inline(always)]
    fn accessed(&mut self, out: &AccessOutcome) {
        self.faulted_accesses += out.faulted;
    }

    #[inline(always)]
    fn after_unmap(
        &mut self,
        api: &mut GuestDmaApi<S, U>,
        dev: DeviceHandle,
        s: &Slot<Gpa>,
        _access: &mut AccessOutcome,
    ) -> Result<(), GuestError> {
        if self.cfg.protection_oracle {
            if let Some(list) = s.sg() {
                for e in list {
                    self.probe(api, dev, e.dma, e.len)?;
                }
            } else {
                self.probe(api, dev, s.addr(), s.bytes())?;
            }
        }
        Ok(())
    }

    #[inline(always)]
    fn tick(
        &mut self,
        api: &mut GuestDmaApi<S, U>,
        _ios: u64,
        now_ns: u64,
    ) -> Result<(), GuestError> {
        if let Some(q) = self.cfg.quota_policy.as_ref().map(|p| p.quota_at(now_ns))
            && q != self.quota
        {
            self.set_quota(api, q)?;
        }
        Ok(())
    }
}

/// The length a guest maps for a buffer of `len` bytes at `phys`: at least one byte (a
/// zero-length map still concerns its page) and no more than the pages the page references
/// count ([`iommulab_trace::pages::pages`], at most 4 GiB: the same pages as trace statistics
/// and the `.oracleGeneral` export, so a corrupt trace length cannot make a replay allocate
/// without bound).
fn map_len(phys: u64, len: u64) -> u64 {
    let pages = iommulab_trace::pages::pages(phys, len);
    let n = pages.end() - pages.start() + 1;
    len.max(1).min(n * PAGE_4K.bytes() - phys % PAGE_4K.bytes())
}

/// The page-reference stream the map cache of `cfg` sees on workload `w` (its cacheable
/// page maps and unmaps), for [`Lookahead::from_refs`] and the one-pass curves of
/// [`crate::mrc`]. For `cache_only = all` this is every page map and unmap.
pub fn guest_page_refs<W: Workload<Phys = Gpa>>(
    w: &mut W,
    cache_only: CacheOnly,
) -> Result<Vec<PageRef>, WorkloadError> {
    let mut refs = Vec::new();
    for_each_guest_page_ref(w, cache_only, |r| refs.push(r))?;
    Ok(refs)
}

/// Calls `f` on each reference of [`guest_page_refs`]`(w, cache_only)` in order, as the
/// workload runs, so a consumer that streams (the lookahead builder) never holds the stream.
pub fn for_each_guest_page_ref<W: Workload<Phys = Gpa>>(
    w: &mut W,
    cache_only: CacheOnly,
    mut f: impl FnMut(PageRef),
) -> Result<(), WorkloadError> {
    for_each_guest_page_run(w, cache_only, |r| r.refs().for_each(&mut f))
}

/// Consecutive pages one buffer (or one scatter-gather segment) maps or unmaps: the
/// references [`guest_page_refs`] lists one page at a time, [`PageRun::refs`]. 16 bytes, so
/// a batch of runs handed between threads stays small.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PageRun {
    /// The run's first page.
    pub first: Pfn<Gpa>,
    /// Its pages (1 to [`MAX_PAGES_PER_MAP`](iommulab_trace::pages::MAX_PAGES_PER_MAP)).
    pub pages: u32,
    /// `true` for the unmap of the run, `false` for its map.
    pub unmap: bool,
}

impl PageRun {
    /// The map of the pages `len` bytes at `phys` touch.
    #[inline]
    pub(crate) fn mapping(phys: u64, len: u64) -> Self {
        let p = iommulab_trace::pages::pages(phys, len);
        PageRun {
            first: Pfn::new(*p.start()),
            // At most MAX_PAGES_PER_MAP (2^20).
            #[allow(clippy::cast_possible_truncation)]
            pages: (p.end() - p.start() + 1) as u32,
            unmap: false,
        }
    }

    /// The run's page references, first page first.
    pub fn refs(self) -> impl Iterator<Item = PageRef> {
        let (unmap, first) = (self.unmap, self.first.get());
        (first..first + u64::from(self.pages)).map(move |g| {
            if unmap {
                PageRef::Unmap(Pfn::new(g))
            } else {
                PageRef::Map(Pfn::new(g))
            }
        })
    }
}

/// [`for_each_guest_page_ref`] a run at a time: a consumer pays per buffer, not per page, to
/// receive them (`mrc --quotas` hands runs from the reading thread to the simulating one).
pub fn for_each_guest_page_run<W: Workload<Phys = Gpa>>(
    w: &mut W,
    cache_only: CacheOnly,
    f: impl FnMut(PageRun),
) -> Result<(), WorkloadError> {
    // The buffer's page runs (as mapped) and whether the cache sees it, per slot; `None`
    // when not live.
    let mut runs = RunsOf {
        slots: Vec::new(),
        cache_only,
        f,
    };
    w.for_each_op(&mut runs)
}

/// The sink behind [`for_each_guest_page_run`]: each live buffer's runs by slot, and `f`.
struct RunsOf<F> {
    slots: Vec<LiveRuns>,
    cache_only: CacheOnly,
    f: F,
}

impl<F: FnMut(PageRun)> OpSink<Gpa> for RunsOf<F> {
    #[inline(always)]
    fn op(&mut self, op: DmaOp<Gpa>, sg: &[Segment<Gpa>]) {
        let f = &mut self.f;
        let (slot, keep) = match op {
            DmaOp::Map {
                slot,
                dir,
                dma_alloc,
                ..
            } => (slot, self.cache_only.admits(dir, dma_alloc)),
            DmaOp::MapSg { slot, dir, .. } => (slot, self.cache_only.admits(dir, false)),
            DmaOp::Unmap { slot, .. } => {
                if let Some(s) = self.slots.get_mut(slot as usize)
                    && std::mem::take(&mut s.live)
                    && s.keep
                {
                    let unmap = |r: PageRun| PageRun { unmap: true, ..r };
                    match s.sg {
                        false => f(unmap(s.run)),
                        true => s.runs.iter().for_each(|&r| f(unmap(r))),
                    }
                }
                return;
            }
            _ => return,
        };
        let i = slot as usize;
        if i >= self.slots.len() {
            self.slots.resize_with(i + 1, LiveRuns::default);
        }
        let s = &mut self.slots[i];
        (s.live, s.keep) = (true, keep);
        match op {
            DmaOp::Map { phys, len, .. } => {
                s.sg = false;
                // Handed on from the register, not read back from `s.run`: a 16-byte load of
                // fields just stored one by one waits for the stores (a stalled store
                // forwarding was a sixth of `mrc`'s reading thread's cycles).
                let run = PageRun::mapping(phys.get(), len);
                s.run = run;
                if keep {
                    f(run);
                }
            }
            _ => {
                s.sg = true;
                s.runs.clear();
                let segs = sg.iter();
                s.runs
                    .extend(segs.map(|g| PageRun::mapping(g.phys.get(), g.len)));
                if keep {
                    s.runs.iter().for_each(|&r| f(r));
                }
            }
        }
    }
}

/// The page runs of a slot's buffer as mapped, for its unmap: a single buffer's run inline,
/// a scatter-gather list's in a vector reused by the slot.
#[derive(Debug, Default)]
struct LiveRuns {
    /// Mapped and not yet unmapped.
    live: bool,
    /// The cache sees the buffer ([`CacheOnly::admits`]).
    keep: bool,
    /// A scatter-gather list (`runs`), not a single buffer (`run`).
    sg: bool,
    run: PageRun,
    runs: Vec<PageRun>,
}

/// Runs `w` under `cfg` with the concrete strategy and eviction policy of `cfg` (one
/// dispatch, then a monomorphised loop). Offline policies (OPT, optimal batching) need the
/// future: pass `lookahead` built by [`Lookahead::from_guest_maps`] (or from
/// [`guest_page_refs`] without the pages at or above `cfg.guest_pages`) over an identical
/// workload (e.g. a regenerated one or a second read of the trace). A lookahead that does
/// not hold exactly the map cache's map requests is [`GuestError::LookaheadMismatch`].
pub fn run_guest<W: Workload<Phys = Gpa>>(
    w: &mut W,
    cfg: &GuestConfig,
    lookahead: Option<Arc<Lookahead>>,
) -> Result<GuestResult, GuestError> {
    let unit = Host::vtd(&host_config(cfg));
    run_guest_on(w, cfg, lookahead, unit)
}

/// [`run_guest`] on a host that drives `unit` instead of Yassour's VT-d (see
/// [`Guest::with_unit`]).
pub fn run_guest_on<W: Workload<Phys = Gpa>, U: RemapUnit>(
    w: &mut W,
    cfg: &GuestConfig,
    lookahead: Option<Arc<Lookahead>>,
    unit: U,
) -> Result<GuestResult, GuestError> {
    let planned = lookahead
        .as_ref()
        .filter(|_| cfg.eviction.is_offline())
        .map(|la| la.len() as u64);
    crate::with_strategy!(cfg, lookahead, s => {
        let mut g = Guest::with_unit(cfg.clone(), s, unit)?;
        g.run(w)?;
        let seen = g.backend().strategy().cache_stats().map(|c| c.maps);
        if let (Some(lookahead), Some(maps)) = (planned, seen)
            && lookahead != maps
        {
            return Err(GuestError::LookaheadMismatch { lookahead, maps });
        }
        Ok(g.result())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::strategy::OnDemand;
    use crate::{EvictionConfig, Lru, LruConfig, OptConfig};
    use iommulab_workload::{
        ApacheSendfile, ApacheSendfileConfig, InGuest, NetperfSend, NetperfSendConfig,
    };

    fn netperf() -> InGuest<NetperfSend> {
        InGuest::new(
            NetperfSend::new(NetperfSendConfig {
                packets: 3000,
                ..NetperfSendConfig::default()
            })
            .unwrap(),
        )
    }

    fn on_demand_lru(cfg: &GuestConfig) -> Guest<OnDemand<Lru>> {
        let s = OnDemand::<Lru>::new(cfg, &LruConfig::default(), None).unwrap();
        Guest::new(cfg.clone(), s).unwrap()
    }

    fn run(cfg: &GuestConfig) -> GuestResult {
        let la = cfg.eviction.is_offline().then(|| {
            Arc::new(Lookahead::from_refs(
                &guest_page_refs(&mut netperf(), cfg.cache_only).unwrap(),
            ))
        });
        run_guest(&mut netperf(), cfg, la).unwrap()
    }

    /// A guest smaller than the workload's buffers refuses their top pages before the map
    /// cache sees them. The offline policies' future leaves those pages out, so OPT and
    /// optimal batching stay in step with the cache (a debug build checks every position)
    /// and optimal batching never maps one ahead, which the host would refuse; a
    /// lookahead that still holds them is refused instead of steering the run.
    #[test]
    fn pages_outside_guest_memory_keep_the_offline_policies_in_step() {
        let refs = guest_page_refs(&mut netperf(), CacheOnly::All).unwrap();
        let top = refs
            .iter()
            .map(|r| match r {
                PageRef::Map(g) | PageRef::Unmap(g) => g.get(),
            })
            .max()
            .unwrap();
        let guest_pages = top - 1; // the two top pages are outside guest memory
        let mut refused = None;
        for eviction in [
            EvictionConfig::Lru(LruConfig::default()),
            EvictionConfig::Opt(OptConfig::default()),
            EvictionConfig::OptBatch(crate::OptBatchConfig::default()),
        ] {
            let cfg = GuestConfig {
                quota: 64,
                eviction,
                guest_pages,
                ..GuestConfig::default()
            };
            let la = cfg.eviction.is_offline().then(|| {
                Arc::new(
                    Lookahead::from_guest_maps(&mut netperf(), CacheOnly::All, guest_pages)
                        .unwrap(),
                )
            });
            let r = run_guest(&mut netperf(), &cfg, la).unwrap();
            assert_eq!(r.hits + r.misses + r.refused, r.maps);
            // The pages refused for being outside memory never reach the cache.
            let c = r.cache.unwrap();
            let outside = r.refused - c.refused;
            assert!(outside > 0, "{}", r.eviction);
            assert_eq!(*refused.get_or_insert(outside), outside, "{}", r.eviction);
            assert_eq!(c.maps + outside, r.maps, "{}", r.eviction);
            if cfg.eviction.is_offline() {
                // A future with one map more than the cache makes is refused at the end.
                // (One out of step earlier trips the policy's debug check at that map.)
                let pages = refs.iter().filter_map(|r| match r {
                    PageRef::Map(g) if g.get() < guest_pages => Some(*g),
                    _ => None,
                });
                let longer = Arc::new(Lookahead::from_pages(pages.chain([Pfn::new(1)])));
                let e = run_guest(&mut netperf(), &cfg, Some(longer)).map(|_| ());
                assert!(
                    matches!(e, Err(GuestError::LookaheadMismatch { .. })),
                    "{}: {e:?}",
                    r.eviction
                );
            }
        }
    }

    /// Figures 5–6's "no caching allowed" end (S1.9) is `single-use`: no page map hits,
    /// every map and unmap is a request. Without batching each is a hypercall (two per page
    /// map); piggyback carries each unmap on the next map hypercall (one per page map, plus
    /// the last flush); batch map + batch unmap of a packet mapped as one sg list is one map
    /// and one unmap hypercall per packet, with at most one write-buffer flush per map
    /// hypercall and one IOTLB invalidation per unmap hypercall (S1.6, S1.10).
    #[test]
    fn single_use_counts_the_hypercalls_of_each_batching() {
        let packets = 2000u64;
        let run_scoped = |mapping, batching, host_invalidation| {
            let w = NetperfSend::new(NetperfSendConfig {
                packets,
                mapping,
                ..NetperfSendConfig::default()
            })
            .unwrap();
            let cfg = GuestConfig {
                strategy: Strategy::SingleUse,
                quota: 0,
                batching,
                host_invalidation,
                ..GuestConfig::default()
            };
            run_guest(&mut InGuest::new(w), &cfg, None).unwrap()
        };
        let run_on = |mapping, batching| run_scoped(mapping, batching, InvalidationScope::Call);
        use iommulab_workload::TxMapping;
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
        // One invalidation covers an unmap hypercall's cleared PTEs; one per page clears
        // exactly the PTEs the unbatched run clears.
        assert!(bat.iotlb_invalidations <= packets);
        assert!(bat.iotlb_invalidations < lru.iotlb_invalidations);
        let per_page = run_scoped(TxMapping::Sg, Batching::MapUnmap, InvalidationScope::Page);
        assert_eq!(per_page.iotlb_invalidations, lru.iotlb_invalidations);
        assert!(bat.cycles < per_page.cycles && per_page.cycles < lru.cycles);
    }

    /// `replace` sends a miss's evictions with its map: one hypercall per miss, where
    /// `none` makes one more per eviction; the pages mapped and unmapped are the same.
    #[test]
    fn replace_sends_a_miss_and_its_evictions_in_one_hypercall() {
        let cfg = |batching| GuestConfig {
            strategy: Strategy::OnDemand,
            quota: 8,
            batching,
            ..GuestConfig::default()
        };
        let none = run(&cfg(Batching::None));
        let rep = run(&cfg(Batching::Replace));
        assert_eq!((rep.hits, rep.misses), (none.hits, none.misses));
        assert_eq!(rep.unmap_requests, none.unmap_requests);
        assert!(rep.unmap_requests > 0);
        assert_eq!(none.hypercalls, none.misses + none.unmap_requests);
        assert_eq!(rep.hypercalls, rep.misses);
        assert!(rep.cycles < none.cycles);
    }

    #[test]
    fn strategies_on_netperf() {
        for s in Strategy::ALL {
            for b in [
                Batching::None,
                Batching::Map,
                Batching::Unmap,
                Batching::Piggyback,
                Batching::Replace,
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

    /// The host's unit is a type parameter: the same guest workload on Yassour's VT-d and on
    /// a Calgary TCE unit makes the same hypercalls with the same map and unmap requests (the
    /// guest's strategy decides those), while the IOMMU's share of the cycles is each unit's
    /// own (VT-d's multi-level PTE writes and page-selective invalidations vs Calgary's
    /// 8-byte TCE writes and whole-cache flushes).
    #[test]
    fn a_guest_runs_on_vtd_and_on_calgary_with_the_same_requests() {
        use iommulab_hw::{Calgary, TceConfig};
        let cfg = GuestConfig {
            quota: 16,
            guest_pages: 1 << 19,
            ..GuestConfig::default()
        };
        let lru = || OnDemand::<Lru>::new(&cfg, &LruConfig::default(), None).unwrap();
        let mut vtd = on_demand_lru(&cfg);
        vtd.run(&mut netperf()).unwrap();
        let tce = TceConfig {
            table_entries: cfg.guest_pages,
            cost: cfg.cost,
            ..TceConfig::default()
        };
        let mut calgary = Guest::with_unit(cfg.clone(), lru(), Calgary::new(tce).unwrap()).unwrap();
        calgary.run(&mut netperf()).unwrap();
        let (v, c) = (vtd.result(), calgary.result());
        assert!(v.map_requests > 0 && v.unmap_requests > 0);
        let requests = |r: &GuestResult| {
            (
                r.maps,
                r.hits,
                r.misses,
                r.hypercalls,
                r.map_requests,
                r.unmap_requests,
                r.pinned_at_end,
            )
        };
        assert_eq!(requests(&c), requests(&v));
        assert_eq!((c.faulted_accesses, v.faulted_accesses), (0, 0));
        assert_ne!(c.cycles, v.cycles);
        // The host's own work (transitions, bookkeeping) is the same on both: the whole
        // difference is the units' table writes and invalidations.
        fn own<U: RemapUnit>(host: &Host<U>) -> u64 {
            host.stats().cycles - host.unit().cpu_cycles().get()
        }
        let unit_v = vtd.backend().host().unit().cpu_cycles().get();
        let unit_c = calgary.backend().host().unit().cpu_cycles().get();
        assert_eq!(own(vtd.backend().host()), own(calgary.backend().host()));
        assert_ne!(unit_v, unit_c);
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
        let mut g = on_demand_lru(&fixed);
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
        let mut g = on_demand_lru(&cfg);
        g.run(&mut netperf()).unwrap();
        let r = g.result();
        assert_eq!(r.quota, 10);
        assert_eq!(g.backend().host().quota(), 10);
        assert!(g.backend().strategy().cache().len() <= 10);
        assert!(r.hits < before.hits && r.refused > before.refused);
        g.backend().host().check().unwrap();
    }

    /// S1.11: with `cache_only = dma-allocated` the map cache holds only pages of buffers
    /// the workload marked as allocated for DMA (netperf's skb heads, from a slab the
    /// changed driver sets aside for DMA); the payload pages the stack hands over go the
    /// `shared` path, so the device keeps stale access to fewer pages than with `all`.
    #[test]
    fn dma_allocated_relaxation_caches_only_dma_buffers() {
        use std::collections::HashSet;
        let netperf = || {
            InGuest::new(
                NetperfSend::new(NetperfSendConfig {
                    packets: 3000,
                    heads_allocated_for_dma: true,
                    ..NetperfSendConfig::default()
                })
                .unwrap(),
            )
        };
        // Linux as it is marks nothing: every map is of memory handed to the driver.
        let mut plain = self::netperf();
        while let Some(op) = plain.next_op().unwrap() {
            assert!(
                !matches!(
                    op,
                    DmaOp::Map {
                        dma_alloc: true,
                        ..
                    }
                ),
                "{op:?}"
            );
        }
        let (mut heads, mut other) = (HashSet::new(), HashSet::new());
        let mut w = netperf();
        while let Some(op) = w.next_op().unwrap() {
            if let DmaOp::Map {
                phys,
                len,
                dma_alloc,
                ..
            } = op
            {
                if dma_alloc { &mut heads } else { &mut other }
                    .extend(iommulab_trace::pages::pages(phys.get(), len));
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
        let mut g = on_demand_lru(&relaxed);
        g.run(&mut netperf()).unwrap();
        let cached: Vec<u64> = g
            .backend()
            .strategy()
            .cache()
            .pages()
            .map(|(p, _)| p.get())
            .collect();
        assert!(!cached.is_empty());
        assert!(cached.iter().all(|p| heads.contains(p)), "{cached:?}");
        let r = g.result();
        let all = run(&GuestConfig {
            quota: 64,
            ..GuestConfig::default()
        });
        assert!(r.stale_accesses > 0 && r.stale_accesses < all.stale_accesses);
        assert!(r.hypercalls > all.hypercalls);
        g.backend().host().check().unwrap();
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
            let st = crate::replay_config(&refs, usize::try_from(q).unwrap(), &cfg.eviction, None)
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
