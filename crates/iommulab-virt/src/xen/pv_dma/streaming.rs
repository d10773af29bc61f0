//! [`Streaming`]: what the paper measured (S2.5). Every map and every unmap request of the
//! streaming DMA API is one multicall carrying one entry per I/O page.

use crate::addr::{DomainId, Gpa, Iova, Perm, Pfn};
use crate::dma::{BackendError, Translation};
use crate::hw::RemapUnit;

use super::{Crossing, Hypervisor, PvDmaOption};

/// One multicall per request.
#[derive(Clone, Copy, Debug, Default)]
pub struct Streaming;

impl PvDmaOption for Streaming {
    const NAME: &'static str = "streaming";
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
        Ok(hv.submit(Crossing::Hypercall)?)
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
        Ok(hv.submit(Crossing::Hypercall)?)
    }
}
