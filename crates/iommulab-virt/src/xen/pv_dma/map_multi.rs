//! [`MapMulti`] (S2.6 "allocate and free in large batches"): drivers issue runs of maps as
//! one `map_multi` and runs of unmaps as one `unmap_multi`, up to `batch` requests each.
//! The model batches what the driver issues back to back: consecutive map requests share a
//! multicall until `batch` of them are queued, a request of the other kind comes, or the
//! device is about to use the buffers (a driver posts buffers once `map_multi` returns).
//! Queued unmaps take effect only when their batch is issued: until then the device can
//! still reach those buffers.

use iommulab_base::addr::{DomainId, Gpa, Iova, Perm, Pfn};
use iommulab_hw::{MapError, RemapUnit};
use iommulab_os::dma::{BackendError, Translation};

use super::{Crossing, Hypervisor, PvDmaOption};

/// Requests batched into `map_multi`/`unmap_multi` calls.
#[derive(Clone, Copy, Debug)]
pub struct MapMulti {
    batch: u32,
    /// Requests queued in the current batch.
    queued: u32,
}

impl MapMulti {
    /// Batches of up to `batch` requests (at least 1).
    pub fn new(batch: u32) -> Self {
        Self {
            batch: batch.max(1),
            queued: 0,
        }
    }

    /// The batch size.
    pub fn batch(&self) -> u32 {
        self.batch
    }

    fn issue<U: RemapUnit>(&mut self, hv: &mut Hypervisor<U>) -> Result<(), MapError> {
        self.queued = 0;
        hv.submit(Crossing::Hypercall)
    }

    /// A request of kind `map` is coming: a batch of the other kind goes out first.
    fn switch_to<U: RemapUnit>(
        &mut self,
        hv: &mut Hypervisor<U>,
        map: bool,
    ) -> Result<(), MapError> {
        if hv.pending_is_map() == Some(!map) {
            self.issue(hv)?;
        }
        Ok(())
    }

    fn count<U: RemapUnit>(&mut self, hv: &mut Hypervisor<U>) -> Result<(), MapError> {
        self.queued += 1;
        if self.queued >= self.batch {
            self.issue(hv)?;
        }
        Ok(())
    }
}

impl PvDmaOption for MapMulti {
    const NAME: &'static str = "map-multi";
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
        self.switch_to(hv, true)?;
        hv.queue_map(domain, iova, gfn, pages, perm)
    }

    #[inline]
    fn after_map<U: RemapUnit>(&mut self, hv: &mut Hypervisor<U>) -> Result<(), BackendError> {
        Ok(self.count(hv)?)
    }

    #[inline]
    fn unmap<U: RemapUnit>(
        &mut self,
        hv: &mut Hypervisor<U>,
        domain: DomainId,
        iova: Pfn<Iova>,
        pages: u64,
    ) -> Result<(), BackendError> {
        self.switch_to(hv, false)?;
        hv.queue_unmap(domain, iova, pages);
        Ok(())
    }

    #[inline]
    fn after_unmap<U: RemapUnit>(&mut self, hv: &mut Hypervisor<U>) -> Result<(), BackendError> {
        Ok(self.count(hv)?)
    }

    #[inline]
    fn before_device<U: RemapUnit>(&mut self, hv: &mut Hypervisor<U>) -> Result<(), MapError> {
        if hv.pending_is_map() == Some(true) {
            self.issue(hv)?;
        }
        Ok(())
    }

    fn before_invalidate<U: RemapUnit>(&mut self, hv: &mut Hypervisor<U>) -> Result<(), MapError> {
        self.issue(hv)
    }
}
