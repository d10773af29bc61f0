//! [`Native`]: bare metal. The OS owns the remapping unit, so a map is PTE writes in its
//! tables, the after-map work is the unit's (a write-buffer flush on VT-d with `CAP.RWBF`,
//! S1.10), and invalidations go straight to the hardware.

use iommulab_base::addr::{Access, Bdf, DomainId, Hpa, Iova, Perm, Pfn};
use iommulab_hw::cost::CostModel;
use iommulab_hw::error::MapError;
use iommulab_hw::fault::Fault;
use iommulab_hw::invalidate::InvRequest;
use iommulab_hw::unit::{InvalidationCaps, RemapUnit};

use super::{BackendError, MapAttrs, MapBackend};

/// The bare-metal backend over remapping unit `U`.
#[derive(Debug, Clone)]
pub struct Native<U> {
    unit: U,
}

impl<U: RemapUnit> Native<U> {
    /// A backend driving `unit`.
    pub const fn new(unit: U) -> Self {
        Self { unit }
    }

    /// The remapping unit.
    pub fn unit(&self) -> &U {
        &self.unit
    }
}

impl<U: RemapUnit> MapBackend for Native<U> {
    type Phys = Hpa;
    const NAME: &'static str = "native";

    fn caps(&self) -> InvalidationCaps {
        self.unit.caps()
    }
    fn cost(&self) -> &CostModel {
        self.unit.cost()
    }
    fn address_bits(&self) -> u8 {
        self.unit.address_bits()
    }
    fn attach(&mut self, bdf: Bdf, domain: DomainId) -> Result<(), MapError> {
        match self.unit.create_domain(domain) {
            Ok(()) | Err(MapError::DomainExists { .. }) => {}
            Err(e) => return Err(e),
        }
        self.unit.attach(bdf, domain)
    }
    fn detach(&mut self, bdf: Bdf) -> Result<(), MapError> {
        self.unit.detach(bdf)
    }
    #[inline]
    fn map(
        &mut self,
        domain: DomainId,
        iova: Pfn<Iova>,
        frame: Pfn<Hpa>,
        pages: u64,
        perm: Perm,
        _attrs: MapAttrs,
    ) -> Result<(), BackendError> {
        Ok(self.unit.map_range(domain, iova, frame, pages, perm)?)
    }
    #[inline]
    fn after_map(&mut self) -> Result<(), BackendError> {
        self.unit.after_map();
        Ok(())
    }
    #[inline]
    fn unmap(
        &mut self,
        domain: DomainId,
        iova: Pfn<Iova>,
        pages: u64,
        _attrs: MapAttrs,
    ) -> Result<(), BackendError> {
        Ok(self.unit.unmap_range(domain, iova, pages)?)
    }
    #[inline]
    fn after_unmap(&mut self) -> Result<(), BackendError> {
        Ok(())
    }
    #[inline]
    fn invalidate(&mut self, reqs: &[InvRequest]) {
        self.unit.invalidate(reqs);
    }
    #[inline]
    fn translate(&mut self, bdf: Bdf, iova: Iova, access: Access) -> Result<Hpa, Fault> {
        self.unit.translate(bdf, iova, access)
    }
    fn cache_holds(&self, domain: DomainId, iova: Pfn<Iova>) -> bool {
        self.unit.cache_holds(domain, iova)
    }
}
