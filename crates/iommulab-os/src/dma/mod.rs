//! The DMA API (S0.4): `map_single`/`unmap_single` and `map_sg`/`unmap_sg` over an IOMMU,
//! built from an IOVA allocator `A` and a flush policy `F` (monomorphised: no dynamic
//! dispatch on the per-operation path).
//!
//! One domain per device group (a device attached alone gets a domain of its own, as behind
//! ACS every PCI device is its own IOMMU group; [`DmaApi::attach_to_group_of`] puts one in an
//! existing group's domain). Each domain has its own IOVA allocator, as Linux keeps an
//! `iova_domain` in every DMA domain's cookie (`iommu_dma_init_domain`); a flush policy with
//! [`FlushPolicy::PER_DOMAIN`] (the ≥ 4.14 flush queue) is kept per domain too, one without
//! (2.6.26's global deferred array) is shared. A mapping of `len` bytes at physical address `phys` takes
//! `ceil((phys % 4096 + len) / 4096)` I/O pages; the returned DMA address keeps the sub-page
//! offset, as Linux's does. The direction sets the page permission (to-device → read,
//! from-device → write). After non-present → present PTE changes only a write-buffer flush
//! is needed, never an IOTLB invalidation (S1.10); unmaps hand the range to the flush policy.
//!
//! In `Passthrough` mode ("disabled", `intel_iommu=off`) the DMA address is the physical
//! address and devices reach all memory.

mod access;
pub mod backend;
pub mod debug;
mod sg;
mod single;

use serde::{Deserialize, Serialize};

use crate::device::StaleOracle;
use crate::flush::{FlushCtx, FlushPolicy, FlushStats, Unmapped};
use iommulab_base::addr::{Bdf, CpuId, DomainId, Hpa, Iova, PAGE_4K, Pfn, PhysAddr};
use iommulab_base::clock::Cycles;
use iommulab_hw::error::MapError;
use iommulab_hw::unit::RemapUnit;
use iommulab_hw::vtd::Vtd;

use crate::iova::rbtree::DMA_32BIT_PFN;
use crate::iova::{IovaAllocator, IovaError, IovaStats};
pub use backend::{BackendError, MapAttrs, MapBackend, Native};

pub use debug::{DmaDebug, DmaDebugError, MapKind};

/// Errors the DMA API returns to a driver. On any of them nothing has changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DmaError {
    /// The dma-debug checker found a driver bug.
    #[error(transparent)]
    Debug(#[from] DmaDebugError),
    /// The IOVA allocator failed (exhausted even after draining the flush policy).
    #[error(transparent)]
    Iova(#[from] IovaError),
    /// The I/O page tables refused the change.
    #[error(transparent)]
    Map(#[from] MapError),
    /// The backend did not carry out the mapping (refused by a guest's strategy, or a host
    /// error).
    #[error(transparent)]
    Backend(BackendError),
    /// A device index that was never attached.
    #[error("no device with index {0}")]
    NoSuchDevice(u16),
    /// A scatterlist with no entries.
    #[error("empty scatterlist")]
    EmptyScatterlist,
    /// A mapping of zero bytes, or one whose end overflows the address space.
    #[error("bad mapping length {len} at physical address {phys:#x}")]
    BadLength {
        /// Physical address.
        phys: u64,
        /// Length in bytes.
        len: u64,
    },
}

/// Whether DMA goes through the IOMMU.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Translation {
    /// DMA addresses are IOVAs translated by the IOMMU.
    Iommu,
    /// DMA addresses are physical addresses (`intel_iommu=off`, S0.7 "disabled").
    Passthrough,
    /// DMA addresses are the buffers' own (physical) addresses, and the backend maps each
    /// buffer 1:1 before the device may use it: a guest with an assigned device and no
    /// IOMMU of its own, whose host maps guest-physical pages on request (S1.1). No IOVA is
    /// allocated and no flush policy runs: the host invalidates when it unmaps.
    Identity,
}

/// A device attached to the DMA layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DeviceHandle(u16);

impl DeviceHandle {
    /// The device's index.
    pub const fn index(self) -> u16 {
        self.0
    }
}

/// One scatterlist entry: the driver fills `phys`/`len`, `map_sg` fills `dma`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct SgEntry<P = Hpa> {
    /// Physical address of the segment (host- or guest-physical: the backend's space).
    pub phys: P,
    /// Length in bytes.
    pub len: u64,
    /// The DMA address `map_sg` assigned.
    pub dma: Iova,
}

/// Counters of the DMA layer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DmaStats {
    /// `map_single` calls that succeeded.
    pub maps: u64,
    /// `unmap_single` calls that succeeded.
    pub unmaps: u64,
    /// `map_sg` calls that succeeded.
    pub map_sgs: u64,
    /// `unmap_sg` calls that succeeded.
    pub unmap_sgs: u64,
    /// I/O pages mapped.
    pub pages_mapped: u64,
    /// Calls refused with an error (including maps a guest's backend refused by policy).
    pub errors: u64,
    /// Allocations that first failed and succeeded after draining the flush policy.
    pub drain_retries: u64,
    /// Bytes of mapped pages outside the buffers the driver asked for: what sub-page
    /// mappings expose to the device (summed over all maps).
    pub exposed_bytes: u64,
}

/// Parameters of the DMA layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DmaConfig {
    /// IOMMU or passthrough.
    pub translation: Translation,
    /// The device's DMA mask in bits: IOVAs stay below `2^dma_bits` (32, like the 2008 SCSI
    /// adapters; Linux tries below 4 GiB first).
    pub dma_bits: u8,
    /// Run the dma-debug checker.
    pub debug: bool,
    /// Run the stale-access oracle (needed when devices access memory).
    pub oracle: bool,
    /// `iommu.forcedac=1`: no below-4 GiB first attempt for a device whose mask is wider.
    pub forcedac: bool,
}

impl Default for DmaConfig {
    fn default() -> Self {
        Self {
            translation: Translation::Iommu,
            dma_bits: 32,
            debug: false,
            oracle: false,
            forcedac: false,
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct Device {
    bdf: Bdf,
    domain: DomainId,
    attached: bool,
    /// `dev->iommu->pci_32bit_workaround`: still trying below 4 GiB first.
    pci_32bit_workaround: bool,
}

/// The DMA API over IOVA allocator `A`, flush policy `F` and map backend `B` (bare metal
/// over VT-d by default: [`Native`]`<`[`Vtd`]`>`).
#[derive(Debug)]
pub struct DmaApi<A, F, B = Native<Vtd>> {
    config: DmaConfig,
    backend: B,
    /// The allocator as configured, never used: each new domain starts as a clone of it.
    iova_template: A,
    /// One allocator per domain, domain `d`'s at index `d − 1`.
    iovas: Vec<A>,
    /// `iovas[i].stats().wraps` when last checked (the wrap flush).
    last_wraps: Vec<u64>,
    /// The policy as configured; each domain's is a clone when [`FlushPolicy::PER_DOMAIN`].
    flush_template: F,
    /// One policy per domain ([`FlushPolicy::PER_DOMAIN`]) or exactly one, shared.
    flushes: Vec<F>,
    devices: Vec<Device>,
    debug: Option<DmaDebug>,
    oracle: Option<StaleOracle>,
    limit: Pfn<Iova>,
    now: Cycles,
    stats: DmaStats,
}

impl<A: IovaAllocator, F: FlushPolicy, B: MapBackend> DmaApi<A, F, B> {
    /// A DMA layer mapping through `backend`; every domain gets a fresh copy of allocator
    /// `iova`, and of policy `flush` when it is per-domain.
    pub fn new(config: DmaConfig, backend: B, iova: A, flush: F) -> Self {
        let bits = u32::from(config.dma_bits.clamp(13, 63));
        // dma-iommu caps the device's limit at the domain's aperture (`force_aperture`,
        // `iommu_dma_alloc_iova`): a 3-level VT-d table (39 bits) never gets an IOVA it
        // cannot map, whatever the DMA mask.
        let aperture = u32::from(backend.address_bits()).clamp(13, 63);
        let limit = Pfn::new((1u64 << (bits.min(aperture) - 12)).min(iova.space_end().get()));
        let flushes = if F::PER_DOMAIN {
            Vec::new()
        } else {
            vec![flush.clone()]
        };
        Self {
            config,
            backend,
            iova_template: iova,
            iovas: Vec::new(),
            last_wraps: Vec::new(),
            flush_template: flush,
            flushes,
            devices: Vec::new(),
            debug: config
                .debug
                .then(|| DmaDebug::new(config.translation == Translation::Iommu)),
            oracle: config.oracle.then(StaleOracle::new),
            limit,
            now: Cycles::ZERO,
            stats: DmaStats::default(),
        }
    }

    /// Attaches the device `bdf` in a domain of its own (its own IOMMU group), with a fresh
    /// allocator (and flush queue, for a per-domain policy).
    pub fn attach(&mut self, bdf: Bdf) -> Result<DeviceHandle, DmaError> {
        let index =
            u16::try_from(self.devices.len()).map_err(|_| DmaError::NoSuchDevice(u16::MAX))?;
        let domain = u16::try_from(self.iovas.len() + 1)
            .map(DomainId::new)
            .map_err(|_| DmaError::NoSuchDevice(u16::MAX))?;
        self.attach_in(bdf, index, domain)?;
        let a = self.iova_template.clone();
        self.last_wraps.push(a.stats().wraps);
        self.iovas.push(a);
        if F::PER_DOMAIN {
            self.flushes.push(self.flush_template.clone());
        }
        Ok(DeviceHandle(index))
    }

    /// Attaches the device `bdf` in the domain of `peer` (the same IOMMU group: devices
    /// behind one PCIe-to-PCI bridge, or functions without ACS), sharing its IOVA space.
    pub fn attach_to_group_of(
        &mut self,
        bdf: Bdf,
        peer: DeviceHandle,
    ) -> Result<DeviceHandle, DmaError> {
        let domain = self.device(peer)?.domain;
        let index =
            u16::try_from(self.devices.len()).map_err(|_| DmaError::NoSuchDevice(u16::MAX))?;
        self.attach_in(bdf, index, domain)?;
        Ok(DeviceHandle(index))
    }

    fn attach_in(&mut self, bdf: Bdf, index: u16, domain: DomainId) -> Result<(), DmaError> {
        if index == u16::MAX {
            return Err(DmaError::NoSuchDevice(index));
        }
        if self.config.translation != Translation::Passthrough {
            self.backend.attach(bdf, domain)?;
        }
        self.devices.push(Device {
            bdf,
            domain,
            attached: true,
            pci_32bit_workaround: !self.config.forcedac,
        });
        Ok(())
    }

    /// Detaches a device: tears down every mapping it still holds, drains the flush policy
    /// and reports leaked mappings through the dma-debug checker (`Err(Leaked)`; the device
    /// is detached and the state consistent either way).
    pub fn detach(&mut self, dev: DeviceHandle) -> Result<(), DmaError> {
        let d = self.device(dev)?;
        let leaked = self
            .debug
            .as_ref()
            .map(|dbg| dbg.live_of(dev.0))
            .unwrap_or_default();
        for &(addr, len, dir, kind) in &leaked {
            let pages = match kind {
                MapKind::Single => PAGE_4K.pages_spanned(addr.page_offset(PAGE_4K), len),
                MapKind::Sg { .. } => len.div_ceil(PAGE_4K.bytes()),
            };
            let attrs = MapAttrs {
                dir,
                dma_alloc: false,
            };
            let sg = matches!(kind, MapKind::Sg { .. });
            self.teardown(CpuId::new(0), d, addr.pfn(PAGE_4K), pages, attrs, sg)?;
        }
        self.drain()?;
        if self.config.translation != Translation::Passthrough {
            self.backend.detach(d.bdf)?;
        }
        self.devices[usize::from(dev.0)].attached = false;
        match self.debug.as_mut() {
            Some(dbg) => dbg.on_detach(dev.0).map_err(DmaError::from),
            None => Ok(()),
        }
    }

    /// Index of `domain`'s allocator.
    #[inline]
    fn slot(domain: DomainId) -> usize {
        usize::from(domain.get()) - 1
    }

    /// Index of the flush policy serving `domain`.
    #[inline]
    fn flush_slot(domain: DomainId) -> usize {
        if F::PER_DOMAIN { Self::slot(domain) } else { 0 }
    }

    fn device(&self, dev: DeviceHandle) -> Result<Device, DmaError> {
        match self.devices.get(usize::from(dev.0)) {
            Some(d) if d.attached => Ok(*d),
            _ => Err(DmaError::NoSuchDevice(dev.0)),
        }
    }

    /// Sets the modeled time (the runner advances it) and lets expired timers fire.
    // Inline: the runner ticks once per I/O (19 instructions less per I/O).
    #[inline]
    pub fn tick(&mut self, now: Cycles) -> Result<(), DmaError> {
        self.now = now;
        let clock = self.backend.cost().clock;
        for a in &mut self.iovas {
            a.on_tick(now, clock);
        }
        let mut ctx = FlushCtx {
            backend: &mut self.backend,
            iovas: &mut self.iovas,
            now,
        };
        let mut result = Ok(());
        for f in &mut self.flushes {
            let r = f.on_tick(&mut ctx);
            if result.is_ok() {
                result = r;
            }
        }
        Ok(result?)
    }

    /// Flushes and frees everything every flush policy holds.
    pub fn drain(&mut self) -> Result<(), DmaError> {
        let mut ctx = FlushCtx {
            backend: &mut self.backend,
            iovas: &mut self.iovas,
            now: self.now,
        };
        let mut result = Ok(());
        for f in &mut self.flushes {
            let r = f.drain(&mut ctx);
            if result.is_ok() {
                result = r;
            }
        }
        Ok(result?)
    }

    /// Flushes and frees what the policy serving `domain` holds (its own queue when the
    /// policy is per-domain).
    fn drain_for(&mut self, domain: DomainId) -> Result<(), DmaError> {
        let mut ctx = FlushCtx {
            backend: &mut self.backend,
            iovas: &mut self.iovas,
            now: self.now,
        };
        let f = &mut self.flushes[Self::flush_slot(domain)];
        f.drain(&mut ctx)?;
        Ok(())
    }

    /// Allocates `pages` IOVA pages for device `d`, draining the flush policy and retrying
    /// once if the space is exhausted (freed ranges may be waiting for a flush), and runs the
    /// wrap flush before the range can be mapped.
    ///
    /// dma-iommu's `iommu_dma_alloc_iova` for a PCI device (every device here is one) whose
    /// limit is above 4 GiB: first below 4 GiB with `flush_rcache = false`; the first time
    /// that fails the device stops trying (`pci_32bit_workaround = false`, sticky).
    fn alloc_iova(&mut self, cpu: CpuId, d: Device, pages: u64) -> Result<Pfn<Iova>, DmaError> {
        let below_4g = Pfn::new(DMA_32BIT_PFN);
        let slot = Self::slot(d.domain);
        if d.pci_32bit_workaround && self.limit > below_4g {
            match self.iovas[slot].alloc_fast(cpu, pages, below_4g, false) {
                Ok(p) => return self.after_alloc(d.domain, p),
                Err(IovaError::Exhausted { .. }) => {
                    let i = usize::from(d.domain.get() - 1);
                    if let Some(dev) = self.devices.get_mut(i) {
                        dev.pci_32bit_workaround = false;
                    }
                }
                Err(e) => return Err(e.into()),
            }
        }
        let pfn = match self.iovas[slot].alloc(cpu, pages, self.limit) {
            Ok(p) => p,
            Err(IovaError::Exhausted { .. })
                if self.flushes[Self::flush_slot(d.domain)].pending() > 0 =>
            {
                self.drain_for(d.domain)?;
                self.stats.drain_retries += 1;
                self.iovas[slot].alloc(cpu, pages, self.limit)?
            }
            Err(e) => return Err(e.into()),
        };
        self.after_alloc(d.domain, pfn)
    }

    /// Runs the wrap flush if the allocation in `domain` wrapped.
    fn after_alloc(&mut self, domain: DomainId, pfn: Pfn<Iova>) -> Result<Pfn<Iova>, DmaError> {
        let slot = Self::slot(domain);
        let wraps = self.iovas[slot].stats().wraps;
        if wraps != self.last_wraps[slot] {
            self.last_wraps[slot] = wraps;
            let mut ctx = FlushCtx {
                backend: &mut self.backend,
                iovas: &mut self.iovas,
                now: self.now,
            };
            self.flushes[Self::flush_slot(domain)].on_wrap(&mut ctx)?;
        }
        Ok(pfn)
    }

    /// Chooses the DMA address of a `pages`-page buffer at `phys` (an IOVA from the
    /// allocator, or the buffer's own page in identity mode) and maps it there.
    fn map_pages(
        &mut self,
        cpu: CpuId,
        d: Device,
        phys: Pfn<B::Phys>,
        pages: u64,
        attrs: MapAttrs,
    ) -> Result<Pfn<Iova>, DmaError> {
        let identity = self.config.translation == Translation::Identity;
        let pfn = if identity {
            Pfn::new(phys.get())
        } else {
            self.alloc_iova(cpu, d, pages)?
        };
        let mapped = self
            .backend
            .map(d.domain, pfn, phys, pages, attrs.dir.perm(), attrs)
            .and_then(|()| self.backend.after_map());
        if let Err(e) = mapped {
            // The range was never mapped, so it cannot be cached: free it at once.
            if !identity {
                self.iovas[Self::slot(d.domain)].free(cpu, pfn, pages)?;
            }
            return Err(Self::backend_error(e));
        }
        self.stats.pages_mapped += pages;
        Ok(pfn)
    }

    fn backend_error(e: BackendError) -> DmaError {
        match e {
            BackendError::Map(m) => DmaError::Map(m),
            e => DmaError::Backend(e),
        }
    }

    /// Removes the mapping of a range and, with an IOVA allocator, hands its IOVA to the
    /// flush policy (as an `unmap_sg`'s when `sg`).
    // Inline into the unmaps (27 instructions less per `modern` I/O; inlining
    // the unmaps and maps themselves into the runner costs more than it saves).
    #[inline]
    fn teardown(
        &mut self,
        cpu: CpuId,
        d: Device,
        pfn: Pfn<Iova>,
        pages: u64,
        attrs: MapAttrs,
        sg: bool,
    ) -> Result<(), DmaError> {
        self.backend
            .unmap(d.domain, pfn, pages, attrs)
            .and_then(|()| self.backend.after_unmap())
            .map_err(Self::backend_error)?;
        if self.config.translation == Translation::Identity {
            return Ok(());
        }
        // The allocator's unmap-time work (2.6.26's `find_iova`), before the policy.
        self.iovas[Self::slot(d.domain)].lookup_on_unmap(cpu, pfn, pages);
        let mut ctx = FlushCtx {
            backend: &mut self.backend,
            iovas: &mut self.iovas,
            now: self.now,
        };
        let range = Unmapped {
            domain: d.domain,
            pfn,
            pages,
        };
        let f = &mut self.flushes[Self::flush_slot(d.domain)];
        if sg {
            f.on_unmap_sg(&mut ctx, cpu, range)?;
        } else {
            f.on_unmap(&mut ctx, cpu, range)?;
        }
        Ok(())
    }

    fn check_len(phys: B::Phys, len: u64) -> Result<(), DmaError> {
        if len == 0 || phys.checked_add(len).is_none() {
            return Err(DmaError::BadLength {
                phys: phys.get(),
                len,
            });
        }
        Ok(())
    }

    fn count(&mut self, ok: bool, f: impl FnOnce(&mut DmaStats)) {
        if ok {
            f(&mut self.stats);
        } else {
            self.stats.errors += 1;
        }
    }

    /// The DMA layer's counters.
    pub fn stats(&self) -> &DmaStats {
        &self.stats
    }

    /// The map backend.
    pub fn backend(&self) -> &B {
        &self.backend
    }

    /// The map backend, mutable (a guest's quota changes at run time, S1.7).
    pub fn backend_mut(&mut self) -> &mut B {
        &mut self.backend
    }

    /// The IOVA allocator of each domain, domain `d`'s at index `d − 1` (one per device
    /// attached alone).
    pub fn allocators(&self) -> &[A] {
        &self.iovas
    }

    /// The allocator of `dev`'s domain.
    pub fn allocator_of(&self, dev: DeviceHandle) -> Option<&A> {
        let d = self.devices.get(usize::from(dev.0))?;
        self.iovas.get(Self::slot(d.domain))
    }

    /// Every domain's allocator, mutably (the runner drains their touched-line logs).
    pub fn allocators_mut(&mut self) -> &mut [A] {
        &mut self.iovas
    }

    /// The allocator as configured (what every new domain's starts as): its name and space.
    pub fn allocator_template(&self) -> &A {
        &self.iova_template
    }

    /// Every domain's allocator counters added up; the peak metadata is the sum of each
    /// domain's peak (an upper bound on the peak of the sum).
    pub fn allocator_stats(&self) -> IovaStats {
        let mut s = IovaStats::default();
        let mut peak = 0;
        for a in &self.iovas {
            s.merge(&a.stats());
            peak += a.stats().peak_metadata_bytes;
        }
        s.peak_metadata_bytes = peak;
        s
    }

    /// The flush policies: one per domain ([`FlushPolicy::PER_DOMAIN`]) or the one shared.
    pub fn flush_policies(&self) -> &[F] {
        &self.flushes
    }

    /// The flush policy as configured: its name.
    pub fn flush_template(&self) -> &F {
        &self.flush_template
    }

    /// Every flush policy's counters added up (`max_pending`: the largest of any one).
    pub fn flush_stats(&self) -> FlushStats {
        let mut s = FlushStats::default();
        for f in &self.flushes {
            s.merge(f.stats());
        }
        s
    }

    /// Ranges the flush policies hold, waiting for an invalidation.
    pub fn flush_policy_pending(&self) -> usize {
        self.flushes.iter().map(FlushPolicy::pending).sum()
    }

    /// The dma-debug checker, if enabled.
    pub fn debug(&self) -> Option<&DmaDebug> {
        self.debug.as_ref()
    }

    /// The stale-access oracle, if enabled.
    pub fn oracle(&self) -> Option<&StaleOracle> {
        self.oracle.as_ref()
    }

    /// The configuration.
    pub fn config(&self) -> &DmaConfig {
        &self.config
    }

    /// The domain of a device (for invariant checks in tests).
    pub fn domain_of(&self, dev: DeviceHandle) -> Option<DomainId> {
        self.devices.get(usize::from(dev.0)).map(|d| d.domain)
    }

    /// The index in [`DmaApi::flush_policies`] of the policy serving `dev`'s unmaps: its
    /// domain's when each domain has its own ([`FlushPolicy::PER_DOMAIN`]), else 0.
    pub fn flush_index_of(&self, dev: DeviceHandle) -> Option<usize> {
        self.domain_of(dev).map(Self::flush_slot)
    }
}

impl<A: IovaAllocator, F: FlushPolicy, U: RemapUnit> DmaApi<A, F, Native<U>> {
    /// The remapping unit of a bare-metal DMA layer (stats, cycles, faults).
    pub fn unit(&self) -> &U {
        self.backend.unit()
    }
}
