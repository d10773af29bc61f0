//! [`NeverFree`] (S2.6 "never free"): unmap requests leave the entries in the table. The
//! allocator still frees the IOVA (the domain must know which entries it may reuse), and a
//! later map of that IOVA overwrites the entry inside its multicall. Unmaps cost no
//! hypercall; the price is that a DMA to an unmapped buffer goes through until its entry is
//! reused ("any errant DMA ... will go through").

use crate::addr::{DomainId, Gpa, Iova, Perm, Pfn};
use crate::dma::{BackendError, Translation};
use crate::hw::RemapUnit;

use super::{Crossing, Hypervisor, PvDmaOption};

/// Entries are written, never cleared.
#[derive(Clone, Copy, Debug, Default)]
pub struct NeverFree;

impl PvDmaOption for NeverFree {
    const NAME: &'static str = "never-free";
    const TRANSLATION: Translation = Translation::Iommu;
    const PROTECTS_WITHIN_DOMAIN: bool = false;

    #[inline]
    fn map<U: RemapUnit>(
        &mut self,
        hv: &mut Hypervisor<U>,
        domain: DomainId,
        iova: Pfn<Iova>,
        gfn: Pfn<Gpa>,
        pages: u64,
        perm: Perm,
    ) -> Result<(), BackendError> {
        hv.queue_map(domain, iova, gfn, pages, perm)
    }

    #[inline]
    fn after_map<U: RemapUnit>(&mut self, hv: &mut Hypervisor<U>) -> Result<(), BackendError> {
        Ok(hv.submit(Crossing::Hypercall)?)
    }

    #[inline]
    fn unmap<U: RemapUnit>(
        &mut self,
        _hv: &mut Hypervisor<U>,
        _domain: DomainId,
        _iova: Pfn<Iova>,
        _pages: u64,
    ) -> Result<(), BackendError> {
        Ok(())
    }

    #[inline]
    fn after_unmap<U: RemapUnit>(&mut self, _hv: &mut Hypervisor<U>) -> Result<(), BackendError> {
        Ok(())
    }
}
