//! [`HypercallBackend`]: the guest side of direct device assignment as a map backend of the
//! one DMA API (S1.1, S1.6). The guest has no IOMMU of its own, so its DMA layer runs in
//! identity addressing (a buffer's DMA address is its guest-physical address) and every
//! mapping it needs in the host IOMMU becomes a request on the hypercall [`Channel`]:
//!
//! ```text
//!  DmaApi::map_single(gpa, len)            (Translation::Identity)
//!    └► HypercallBackend::map   pages of the call collected
//!       HypercallBackend::after_map
//!         └► strategy S, per page ──► Channel: queue map / unmap requests
//!                                       └► Batching decides when a Hypercall goes ──► Host
//! ```
//!
//! The strategy ([`crate::strategy`]) decides *what* is requested; the channel's
//! [`Batching`] decides *how* requests are packed into hypercalls:
//!
//! | mode | maps | unmaps |
//! |---|---|---|
//! | `none` | one hypercall per page (`on-demand`: per miss, with the policy's batch) | one per page |
//! | `map` | a buffer's maps in one hypercall | one per page |
//! | `unmap` | as `none` | a buffer's unmaps (`on-demand`: a miss's evictions) in one hypercall |
//! | `piggyback` | as `none` | deferred, ride on the next map hypercall |
//! | `replace` | as `none` | a miss's evictions ride on its own map hypercall (S1.4's "remapping hypercall"); driver unmaps one per page |
//! | `map-unmap` | a buffer's maps in one hypercall | a buffer's unmaps (`on-demand`: the evictions its misses cause) in one hypercall |

use serde::{Deserialize, Serialize};

use crate::guest::GuestError;
use crate::host::Host;
use crate::hypercall::{HostStats, Hypercall};
use crate::strategy::{GuestStrategy, PageOutcome};
use iommulab_base::addr::{
    Access, Bdf, DmaDirection, DomainId, Gpa, Hpa, Iova, PAGE_4K, Perm, Pfn,
};
use iommulab_hw::cost::CostModel;
use iommulab_hw::error::MapError;
use iommulab_hw::fault::Fault;
use iommulab_hw::invalidate::InvRequest;
use iommulab_hw::unit::{InvalidationCaps, RemapUnit};
use iommulab_hw::vtd::Vtd;
use iommulab_os::dma::backend::{BackendError, MapAttrs, MapBackend};

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
    /// One hypercall per replacement: a miss's evictions and its maps (with a prefetching
    /// policy, the whole chain) go together. S1.4: "the remapping hypercall is trying to map
    /// n new pages, n old pages need to be evicted"; prefetching "batch\[es\] multiple page
    /// replacements together". A driver's unmap (no cache to keep it) goes at once.
    Replace,
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
            Batching::Replace => "replace",
        }
    }
}

/// The hypercall channel to the host (over remapping unit `U`, VT-d by default): the pending
/// [`Hypercall`] and the batching mode that decides when it is sent. Strategies queue
/// requests here.
#[derive(Debug)]
pub struct Channel<U = Vtd> {
    host: Host<U>,
    call: Hypercall,
    batching: Batching,
}

impl<U: RemapUnit> Channel<U> {
    /// A channel to `host` with `batching`.
    pub fn new(host: Host<U>, batching: Batching) -> Self {
        Self {
            host,
            call: Hypercall::new(),
            batching,
        }
    }

    /// The host.
    pub fn host(&self) -> &Host<U> {
        &self.host
    }

    /// The batching mode.
    pub fn batching(&self) -> Batching {
        self.batching
    }

    /// Requests queued but not sent (piggybacked unmaps, a batch in the making).
    pub fn pending(&self) -> &Hypercall {
        &self.call
    }

    /// Sends everything pending as one hypercall.
    pub fn flush(&mut self) -> Result<(), GuestError> {
        if !self.call.is_empty() {
            self.host.hypercall(&self.call)?;
        }
        self.call.clear();
        Ok(())
    }

    /// Sends only the pending unmaps, as one hypercall.
    pub fn flush_unmaps(&mut self) -> Result<(), GuestError> {
        if self.call.unmap.is_empty() {
            return Ok(());
        }
        let maps = std::mem::take(&mut self.call.map);
        let r = self.flush();
        self.call.map = maps;
        r
    }

    /// Queues a map request.
    pub fn queue_map(&mut self, g: Pfn<Gpa>, perm: Perm) {
        self.call.map.push((g, perm));
    }

    /// Queues an unmap request; a still-queued map of the same page cancels out instead.
    pub fn queue_unmap(&mut self, g: Pfn<Gpa>) {
        if let Some(i) = self.call.map.iter().position(|&(x, _)| x == g) {
            self.call.map.swap_remove(i);
        } else {
            self.call.unmap.push(g);
        }
    }

    /// The maps of one page are queued: sent now unless maps are batched per buffer.
    pub fn end_page_maps(&mut self) -> Result<(), GuestError> {
        if self.batching.batches_maps() {
            Ok(())
        } else {
            self.flush()
        }
    }

    /// Maps one page for a miss: [`Channel::queue_map`] + [`Channel::end_page_maps`].
    pub fn map(&mut self, g: Pfn<Gpa>, perm: Perm) -> Result<(), GuestError> {
        self.queue_map(g, perm);
        self.end_page_maps()
    }

    /// A map cache evicts `g` to make room for a miss: sent at once unless unmaps are
    /// batched, piggybacked, batched with the buffer or ride on the miss's map (`replace`).
    pub fn evict(&mut self, g: Pfn<Gpa>) -> Result<(), GuestError> {
        self.queue_unmap(g);
        match self.batching {
            Batching::None | Batching::Map => self.flush_unmaps(),
            _ => Ok(()),
        }
    }

    /// A miss's evictions are queued (`unmap` batching sends them as one hypercall).
    pub fn end_evictions(&mut self) -> Result<(), GuestError> {
        if self.batching == Batching::Unmap {
            self.flush_unmaps()?;
        }
        Ok(())
    }

    /// The driver no longer needs `g` mapped: unmapped now, or deferred to the end of the
    /// buffer (`unmap`, `map-unmap`) or the next map hypercall (`piggyback`).
    pub fn release(&mut self, g: Pfn<Gpa>) -> Result<(), GuestError> {
        self.queue_unmap(g);
        match self.batching {
            Batching::Piggyback | Batching::Unmap | Batching::MapUnmap => Ok(()),
            Batching::None | Batching::Map | Batching::Replace => self.flush_unmaps(),
        }
    }

    /// A buffer's unmaps are all queued.
    pub fn end_unmap_batch(&mut self) -> Result<(), GuestError> {
        if matches!(self.batching, Batching::Unmap | Batching::MapUnmap) {
            self.flush_unmaps()?;
        }
        Ok(())
    }

    /// Lets the host raise or lower the guest's limit.
    pub fn set_host_quota(&mut self, quota: u64) {
        self.host.set_quota(quota);
    }
}

/// Page-map counters of the guest's DMA layer (counts after setup).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PageCounters {
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
}

/// A guest's map backend: strategy `S` over a hypercall [`Channel`] to its [`Host`] on
/// remapping unit `U` (VT-d by default; see the [module docs](self)).
#[derive(Debug)]
pub struct HypercallBackend<S, U = Vtd> {
    strategy: S,
    ch: Channel<U>,
    guest_pages: u64,
    counters: PageCounters,
    /// Host counters after setup (`direct` maps all guest memory first).
    setup: HostStats,
    /// Pages of the driver call in progress, and its attributes.
    call_pages: Vec<Pfn<Gpa>>,
    call_attrs: Option<MapAttrs>,
    /// Pages of the buffer being mapped that were not refused (released again if another
    /// page of the buffer is refused).
    mapped_ok: Vec<Pfn<Gpa>>,
}

impl<S: GuestStrategy, U: RemapUnit> HypercallBackend<S, U> {
    /// A guest of `guest_pages` pages whose device the host assigned with `host`'s unit,
    /// mapping under `strategy` with `batching`. The host's quota is the strategy's; the
    /// strategy's setup (`direct`: all guest memory) runs here and is not counted.
    pub fn new(
        mut host: Host<U>,
        guest_pages: u64,
        mut strategy: S,
        batching: Batching,
    ) -> Result<Self, GuestError> {
        host.set_quota(strategy.host_quota());
        let mut ch = Channel::new(host, batching);
        strategy.setup(&mut ch)?;
        Ok(Self {
            setup: ch.host().stats(),
            strategy,
            ch,
            guest_pages,
            counters: PageCounters::default(),
            call_pages: Vec::new(),
            call_attrs: None,
            mapped_ok: Vec::new(),
        })
    }

    /// The host.
    pub fn host(&self) -> &Host<U> {
        self.ch.host()
    }

    /// The strategy.
    pub fn strategy(&self) -> &S {
        &self.strategy
    }

    /// Requests queued and not yet sent.
    pub fn pending(&self) -> &Hypercall {
        self.ch.pending()
    }

    /// The page-map counters.
    pub fn counters(&self) -> &PageCounters {
        &self.counters
    }

    /// Host counters at the end of setup.
    pub fn setup_stats(&self) -> HostStats {
        self.setup
    }

    /// The batching mode.
    pub fn batching(&self) -> Batching {
        self.ch.batching()
    }

    /// Sends everything still queued (piggybacked unmaps at the end of a run).
    pub fn flush(&mut self) -> Result<(), GuestError> {
        self.ch.flush()
    }

    /// The driver maps a buffer of guest pages `pages` (may repeat) for `dir`, allocated
    /// for DMA or not (`dma_alloc`, S1.11); `false` when the map fails (a page refused),
    /// with nothing left mapped for it.
    pub fn map_buffer(
        &mut self,
        pages: &[Pfn<Gpa>],
        dir: DmaDirection,
        dma_alloc: bool,
    ) -> Result<bool, GuestError> {
        self.counters.buffers += 1;
        let mut failed = false;
        self.mapped_ok.clear();
        for &g in pages {
            self.counters.maps += 1;
            let outcome = if g.get() >= self.guest_pages {
                PageOutcome::Refused
            } else {
                self.strategy.map_page(g, dir, dma_alloc, &mut self.ch)?
            };
            match outcome {
                PageOutcome::Hit => self.counters.hits += 1,
                PageOutcome::Miss => self.counters.misses += 1,
                PageOutcome::Refused => {
                    self.counters.refused += 1;
                    failed = true;
                    continue;
                }
            }
            self.mapped_ok.push(g);
        }
        if self.ch.batching().batches_maps() {
            // The buffer's evictions (one unmap hypercall), then its maps (one map
            // hypercall).
            self.ch.flush_unmaps()?;
            self.ch.flush()?;
        }
        if failed {
            self.counters.buffers_refused += 1;
            let done = std::mem::take(&mut self.mapped_ok);
            for &g in &done {
                self.strategy
                    .release_page(g, dir, dma_alloc, &mut self.ch)?;
            }
            self.mapped_ok = done;
            self.ch.end_unmap_batch()?;
        }
        Ok(!failed)
    }

    /// The driver unmaps a buffer mapped by [`HypercallBackend::map_buffer`] with pages
    /// `pages` for `dir` and `dma_alloc`.
    pub fn unmap_buffer(
        &mut self,
        pages: &[Pfn<Gpa>],
        dir: DmaDirection,
        dma_alloc: bool,
    ) -> Result<(), GuestError> {
        for &g in pages {
            self.strategy
                .release_page(g, dir, dma_alloc, &mut self.ch)?;
        }
        self.ch.end_unmap_batch()
    }

    /// The host changes the quota at run time (S1.7).
    pub fn set_quota(&mut self, quota: u64) -> Result<(), GuestError> {
        self.strategy.set_quota(quota, &mut self.ch)
    }

    fn pages_of(frame: Pfn<Gpa>, pages: u64) -> impl Iterator<Item = Pfn<Gpa>> {
        (0..pages).map(move |i| frame.add(i))
    }

    fn take_call(&mut self) -> Result<(Vec<Pfn<Gpa>>, MapAttrs), BackendError> {
        let attrs = self
            .call_attrs
            .take()
            .ok_or_else(|| BackendError::Host("a driver call ended with no pages".into()))?;
        Ok((std::mem::take(&mut self.call_pages), attrs))
    }

    fn host_error(e: GuestError) -> BackendError {
        BackendError::Host(e.to_string())
    }
}

impl<S: GuestStrategy, U: RemapUnit> MapBackend for HypercallBackend<S, U> {
    type Phys = Gpa;
    const NAME: &'static str = "hypercall";

    fn caps(&self) -> InvalidationCaps {
        self.host().unit().caps()
    }
    fn cost(&self) -> &CostModel {
        self.host().unit().cost()
    }
    fn address_bits(&self) -> u8 {
        self.host().unit().address_bits()
    }
    /// The host assigned the device when it created the guest; the guest's driver binding
    /// it changes nothing on the host.
    fn attach(&mut self, _bdf: Bdf, _domain: DomainId) -> Result<(), MapError> {
        Ok(())
    }
    fn detach(&mut self, _bdf: Bdf) -> Result<(), MapError> {
        Ok(())
    }
    #[inline]
    fn map(
        &mut self,
        _domain: DomainId,
        _iova: Pfn<Iova>,
        frame: Pfn<Gpa>,
        pages: u64,
        _perm: Perm,
        attrs: MapAttrs,
    ) -> Result<(), BackendError> {
        self.call_pages.extend(Self::pages_of(frame, pages));
        self.call_attrs = Some(attrs);
        Ok(())
    }
    #[inline]
    fn after_map(&mut self) -> Result<(), BackendError> {
        let (pages, attrs) = self.take_call()?;
        let refused_before = self.counters.refused;
        let r = self.map_buffer(&pages, attrs.dir, attrs.dma_alloc);
        self.call_pages = pages;
        self.call_pages.clear();
        match r.map_err(Self::host_error)? {
            true => Ok(()),
            false => Err(BackendError::Refused {
                pages: self.counters.refused - refused_before,
            }),
        }
    }
    #[inline]
    fn unmap(
        &mut self,
        _domain: DomainId,
        iova: Pfn<Iova>,
        pages: u64,
        attrs: MapAttrs,
    ) -> Result<(), BackendError> {
        self.call_pages
            .extend(Self::pages_of(Pfn::new(iova.get()), pages));
        self.call_attrs = Some(attrs);
        Ok(())
    }
    #[inline]
    fn after_unmap(&mut self) -> Result<(), BackendError> {
        let (pages, attrs) = self.take_call()?;
        let r = self.unmap_buffer(&pages, attrs.dir, attrs.dma_alloc);
        self.call_pages = pages;
        self.call_pages.clear();
        r.map_err(Self::host_error)
    }
    /// The guest cannot invalidate the host's IOTLB: the host invalidates when it clears a
    /// PTE (S1.10). Identity addressing never asks.
    fn invalidate(&mut self, _reqs: &[InvRequest]) {}
    fn translate(&mut self, _bdf: Bdf, iova: Iova, access: Access) -> Result<Hpa, Fault> {
        let g = Pfn::<Gpa>::new(iova.pfn(PAGE_4K).get());
        self.ch
            .host
            .device_access(g, access)
            .map(|h| Hpa::new(h.base(PAGE_4K).get() | iova.page_offset(PAGE_4K)))
    }
    fn cache_holds(&self, domain: DomainId, iova: Pfn<Iova>) -> bool {
        self.host().unit().cache_holds(domain, iova)
    }
}
