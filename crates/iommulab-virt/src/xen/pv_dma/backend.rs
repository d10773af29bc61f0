//! [`PvDmaBackend`]: the map backend of a Xen PV domain's DMA API. The domain's frames are
//! pseudo-physical ([`Gpa`]); the option `S` decides how requests cross into the
//! [`Hypervisor`], which owns the unit.

use iommulab_base::addr::{Access, Bdf, DomainId, Gpa, Hpa, Iova, Perm, Pfn};
use iommulab_hw::cost::CostModel;
use iommulab_hw::fault::Fault;
use iommulab_hw::invalidate::InvRequest;
use iommulab_hw::{InvalidationCaps, MapError, RemapUnit};
use iommulab_os::dma::{BackendError, MapAttrs, MapBackend};

use super::{Hypervisor, PvDmaOption};

/// The PV DMA backend over unit `U` with option `S`.
#[derive(Debug)]
pub struct PvDmaBackend<U, S> {
    hv: Hypervisor<U>,
    option: S,
    /// An error of work the backend had to do where it cannot report one (before an
    /// invalidation or a device access); returned by the next request.
    deferred: Option<MapError>,
}

impl<U: RemapUnit, S: PvDmaOption> PvDmaBackend<U, S> {
    /// A backend for a domain served by `hv`, with `option`.
    pub fn new(hv: Hypervisor<U>, option: S) -> Self {
        Self {
            hv,
            option,
            deferred: None,
        }
    }

    /// The hypervisor.
    pub fn hypervisor(&self) -> &Hypervisor<U> {
        &self.hv
    }

    /// The option.
    pub fn option(&self) -> &S {
        &self.option
    }

    /// Page flip of `gfn` (the domain gives the frame away; see [`super::P2m::flip`]).
    pub fn flip(&mut self, gfn: Pfn<Gpa>) -> Result<Pfn<Hpa>, crate::xen::XenError> {
        self.hv.flip(gfn)
    }

    fn take_deferred(&mut self) -> Result<(), BackendError> {
        match self.deferred.take() {
            Some(e) => Err(e.into()),
            None => Ok(()),
        }
    }
}

impl<U: RemapUnit, S: PvDmaOption> MapBackend for PvDmaBackend<U, S> {
    type Phys = Gpa;
    const NAME: &'static str = "xen-pv";

    fn caps(&self) -> InvalidationCaps {
        self.hv.unit().caps()
    }
    fn cost(&self) -> &CostModel {
        self.hv.unit().cost()
    }
    fn address_bits(&self) -> u8 {
        self.hv.unit().address_bits()
    }
    fn attach(&mut self, bdf: Bdf, domain: DomainId) -> Result<(), MapError> {
        if self.hv.attach(bdf, domain)? {
            self.option.setup(&mut self.hv, domain)?;
        }
        Ok(())
    }
    fn detach(&mut self, bdf: Bdf) -> Result<(), MapError> {
        self.hv.detach(bdf)
    }
    #[inline]
    fn map(
        &mut self,
        domain: DomainId,
        iova: Pfn<Iova>,
        frame: Pfn<Gpa>,
        pages: u64,
        perm: Perm,
        _attrs: MapAttrs,
    ) -> Result<(), BackendError> {
        self.take_deferred()?;
        self.option
            .map(&mut self.hv, domain, iova, frame, pages, perm)
    }
    #[inline]
    fn after_map(&mut self) -> Result<(), BackendError> {
        self.option.after_map(&mut self.hv)
    }
    #[inline]
    fn unmap(
        &mut self,
        domain: DomainId,
        iova: Pfn<Iova>,
        pages: u64,
        _attrs: MapAttrs,
    ) -> Result<(), BackendError> {
        self.take_deferred()?;
        self.option.unmap(&mut self.hv, domain, iova, pages)
    }
    #[inline]
    fn after_unmap(&mut self) -> Result<(), BackendError> {
        self.option.after_unmap(&mut self.hv)
    }
    fn invalidate(&mut self, reqs: &[InvRequest]) {
        if let Err(e) = self.option.before_invalidate(&mut self.hv) {
            self.deferred.get_or_insert(e);
        }
        self.hv.invalidate(reqs);
    }
    #[inline]
    fn translate(&mut self, bdf: Bdf, iova: Iova, access: Access) -> Result<Hpa, Fault> {
        if let Err(e) = self.option.before_device(&mut self.hv) {
            self.deferred.get_or_insert(e);
        }
        self.hv.translate(bdf, iova, access)
    }
    fn cache_holds(&self, domain: DomainId, iova: Pfn<Iova>) -> bool {
        self.hv.unit().cache_holds(domain, iova)
    }
}
