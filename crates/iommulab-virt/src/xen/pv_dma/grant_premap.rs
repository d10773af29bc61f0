//! [`GrantPremap`] (S2.6, grant-table integration): in a driver domain, the backend driver
//! already makes a grant map (and later a grant unmap) hypercall for every page another
//! domain hands it. Writing the TCE entries inside those grant operations saves the DMA
//! layer's own crossings: the entries are the same, the multicalls are gone. Only I/O on
//! granted pages benefits — all of a driver domain's I/O on behalf of its guests.

use crate::addr::{DomainId, Gpa, Iova, Perm, Pfn};
use crate::dma::{BackendError, Translation};
use crate::hw::RemapUnit;

use super::{Crossing, Hypervisor, PvDmaOption};

/// Entries written inside the grant operations.
#[derive(Clone, Copy, Debug, Default)]
pub struct GrantPremap;

impl PvDmaOption for GrantPremap {
    const NAME: &'static str = "grant-premap";
    const TRANSLATION: Translation = Translation::Iommu;
    const PROTECTS_WITHIN_DOMAIN: bool = true;

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
        Ok(hv.submit(Crossing::Grant)?)
    }

    #[inline]
    fn unmap<U: RemapUnit>(
        &mut self,
        hv: &mut Hypervisor<U>,
        domain: DomainId,
        iova: Pfn<Iova>,
        pages: u64,
    ) -> Result<(), BackendError> {
        hv.queue_unmap(domain, iova, pages);
        Ok(())
    }

    #[inline]
    fn after_unmap<U: RemapUnit>(&mut self, hv: &mut Hypervisor<U>) -> Result<(), BackendError> {
        Ok(hv.submit(Crossing::Grant)?)
    }

    fn before_invalidate<U: RemapUnit>(
        &mut self,
        hv: &mut Hypervisor<U>,
    ) -> Result<(), crate::hw::MapError> {
        hv.submit(Crossing::Grant)
    }
}
