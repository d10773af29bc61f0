//! The remapping-unit seam: what the OS side (the DMA API, the flush policies, a hypervisor's
//! host) needs from any I/O remapping hardware, so one software stack runs over VT-d's
//! multi-level tables or a flat TCE table alike.
//!
//! ```text
//!  DmaApi / FlushPolicy / Host ──► RemapUnit ──► VT-d (hw::vtd::Vtd): root → context → page tables
//!                                      │         TCE units (hw::tce: Calgary, DART): one flat table per bus, S2.1
//!                                      ├─ map_range / unmap_range / after_map   CPU cycles
//!                                      ├─ translate (device side)               device cycles, faults
//!                                      └─ invalidate, within InvalidationCaps   IOTLB
//! ```
//!
//! What a unit can invalidate is **data** ([`InvalidationCaps`]), not behaviour hidden in
//! each policy: VT-d invalidates a page block, a domain or everything, through registers or
//! a queue (S1.10, S3.2); a unit whose cache can only be flushed whole (the Calgary TCE
//! cache, S2.2) says so, and [`InvalidationCaps::widen`] turns the flush policy's request
//! into the narrowest one the hardware can perform, as a driver must.
//!
//! Everything below the trait is shared by any unit: the fault log ([`super::fault`]), the
//! IOTLB ([`super::iotlb`]), the invalidation requests and interfaces
//! ([`super::invalidate`]) and the simulated table memory ([`super::memory`]).
//!
//! The trait is used through generics (`DmaApi<A, F, U: RemapUnit>`), so the per-operation
//! loop is monomorphised for the unit: no dynamic dispatch on the hot path.

use serde::{Deserialize, Serialize};

use crate::cost::CostModel;
use crate::error::MapError;
use crate::fault::Fault;
use crate::invalidate::{InvRequest, InvalidationInterface};
use crate::stats::IommuStats;
use iommulab_base::addr::{Access, Bdf, DomainId, Hpa, Iova, Perm, Pfn};
use iommulab_base::clock::Cycles;

/// The invalidation granularities a remapping unit supports, and how requests reach it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InvalidationCaps {
    /// Page-selective invalidation and its largest address mask (`2^order` pages): VT-d's
    /// `CAP.PSI` and `CAP.MAMV`; `None` when the unit has none.
    pub page_selective: Option<u8>,
    /// Domain-selective invalidation (VT-d: always).
    pub domain_selective: bool,
    /// How requests are submitted (register or queued, S1.10).
    pub interface: InvalidationInterface,
    /// A whole-cache flush is only correct after in-flight DMA has been quiesced (the
    /// Calgary TCE cache); its cost is the unit's own.
    pub flush_needs_quiesce: bool,
}

impl InvalidationCaps {
    /// The narrowest request this unit can perform that invalidates at least what `req`
    /// asks for: a page block above the unit's largest mask, or on a unit without
    /// page-selective invalidation, becomes its domain; a domain request on a unit without
    /// domain-selective invalidation becomes global (a whole-cache flush).
    ///
    /// ```
    /// use iommulab_base::addr::{DomainId, Pfn};
    /// use iommulab_hw::{InvRequest, InvalidationCaps, InvalidationInterface};
    /// let whole_only = InvalidationCaps {
    ///     page_selective: None,
    ///     domain_selective: false,
    ///     interface: InvalidationInterface::Register,
    ///     flush_needs_quiesce: true,
    /// };
    /// let page = InvRequest::covering(DomainId::new(1), Pfn::new(7), 1);
    /// assert_eq!(whole_only.widen(page), InvRequest::Global);
    /// ```
    pub fn widen(&self, req: InvRequest) -> InvRequest {
        let req = match req {
            InvRequest::Page { domain, order, .. }
                if self.page_selective.is_none_or(|max| order > max) =>
            {
                InvRequest::Domain(domain)
            }
            r => r,
        };
        match req {
            InvRequest::Domain(_) if !self.domain_selective => InvRequest::Global,
            r => r,
        }
    }

    /// Whether the unit performs `req` as asked (without widening).
    pub fn supports(&self, req: InvRequest) -> bool {
        self.widen(req) == req
    }
}

/// An I/O remapping unit: I/O page tables per domain, a translation cache, invalidation,
/// device-side translation with fault recording, and the modeled cycles of both sides.
///
/// Every method that changes tables either succeeds or returns a [`MapError`] with nothing
/// changed. Unmapping never touches the translation cache: the old translation stays usable
/// by the device until software invalidates it (S0.3) — that window is what flush policies
/// trade against speed.
pub trait RemapUnit {
    /// Short name for tables and JSON (`"vtd"`).
    const KIND: &'static str;

    /// What the unit can invalidate.
    fn caps(&self) -> InvalidationCaps;

    /// The cycle prices the unit charges.
    fn cost(&self) -> &CostModel;

    /// Input address width of a domain, in bits: IOVAs at or above `2^bits` cannot be mapped.
    fn address_bits(&self) -> u8;

    /// Creates an empty I/O address space.
    fn create_domain(&mut self, id: DomainId) -> Result<(), MapError>;

    /// Routes requester `bdf`'s DMA through `domain`.
    fn attach(&mut self, bdf: Bdf, domain: DomainId) -> Result<(), MapError>;

    /// Stops translating for `bdf` (its DMA faults from now on).
    fn detach(&mut self, bdf: Bdf) -> Result<(), MapError>;

    /// The domain `bdf` is attached to.
    fn domain_of(&self, bdf: Bdf) -> Option<DomainId>;

    /// Maps `pages` base pages `[iova, iova + pages)` → `[hpa, hpa + pages)` with `perm`.
    fn map_range(
        &mut self,
        domain: DomainId,
        iova: Pfn<Iova>,
        hpa: Pfn<Hpa>,
        pages: u64,
        perm: Perm,
    ) -> Result<(), MapError>;

    /// Clears the entries of `[iova, iova + pages)`; every page must be mapped.
    fn unmap_range(
        &mut self,
        domain: DomainId,
        iova: Pfn<Iova>,
        pages: u64,
    ) -> Result<(), MapError>;

    /// The work hardware needs after non-present → present changes before a device may use
    /// them (VT-d: a write-buffer flush where `CAP.RWBF` is set, S1.10; never an IOTLB
    /// invalidation).
    fn after_map(&mut self);

    /// Submits `reqs` as one batch. Each request must be one the unit supports
    /// ([`InvalidationCaps::supports`]); callers widen first with [`InvalidationCaps::widen`].
    fn invalidate(&mut self, reqs: &[InvRequest]);

    /// Translates a device access as the hardware does; a denied access is recorded in the
    /// fault log and returned as a [`Fault`] (an outcome, not an error).
    fn translate(&mut self, bdf: Bdf, iova: Iova, access: Access) -> Result<Hpa, Fault>;

    /// Software lookup of `domain`'s tables for base page `iova` (no caches, no cycles).
    fn lookup(&self, domain: DomainId, iova: Pfn<Iova>) -> Option<(Pfn<Hpa>, Perm)>;

    /// Whether the translation cache holds an entry covering `iova` in `domain`, without
    /// touching it: the flush invariant's check.
    fn cache_holds(&self, domain: DomainId, iova: Pfn<Iova>) -> bool;

    /// The unit's counters.
    fn stats(&self) -> IommuStats;

    /// Modeled CPU time of table writes, after-map work and invalidations.
    fn cpu_cycles(&self) -> Cycles;

    /// Modeled device-side translation latency.
    fn device_cycles(&self) -> Cycles;

    /// The recorded faults, oldest first.
    fn faults(&self) -> &[Fault];

    /// Faults counted but not recorded because the log was full.
    fn faults_dropped(&self) -> u64;

    /// Bytes of translation tables in memory.
    fn table_bytes(&self) -> u64;
}
