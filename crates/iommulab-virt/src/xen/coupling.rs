//! Protection coupling (S3.2–S3.3): the I/O page tables of a PV guest with an assigned
//! device map every writable frame of the guest (gfn → hfn) and no page-table or
//! descriptor frame. When a frame's type changes from writable to protected, Xen clears its
//! I/O PTE and asks for the device's cached translation of it to be invalidated (one
//! page-selective request through the queued interface: "it is enough for Xen to require
//! several page-based invalidations using queued invalidation interface", S3.3); when it
//! becomes writable again the PTE is set back (non-present → present: a write-buffer flush at
//! most, no invalidation, S1.10).
//!
//! Whether the unmap's request reaches the hardware depends on Xen's release
//! ([`UnmapFlush`]): up to 4.2.3 and 4.3.1, which includes S3.5's 4.2.1, it does not, and the
//! device keeps its cached translation of a frame that is now a page table (XSA-78).
//!
//! The unit is any [`RemapUnit`] (VT-d by default, with root and context entries for each
//! device); its cycle prices are the cost model's. Every device assigned to the guest is
//! attached to the guest's one domain, as Xen does, so hiding a frame in the domain's
//! tables and invalidating it there hides it from all of them. The unit is owned through
//! [`HostIommu`], the hypervisor side's one owner of a remapping unit; which frames to hide
//! is this module's policy.

use iommulab_base::addr::{Access, Bdf, DomainId, Gpa, Hpa, Iova, PAGE_4K, Perm, Pfn};
use iommulab_hw::host_iommu::HostIommu;
use iommulab_hw::{Fault, InvRequest, RemapUnit};

use super::XenError;
use super::page_type::{PageType, TypeChange};

/// What Xen does with the IOTLB when a type change clears a frame's I/O PTE.
///
/// Xen's `dma_pte_clear_one` (VT-d) calls `__intel_iommu_iotlb_flush(d, gfn,
/// dma_old_pte_present, 1)`. Up to 4.2.3 and 4.3.1 it passed 0 there, so
/// `iommu_flush_iotlb_psi` reached `flush_iotlb_qi` with `flush_non_present_entry` set, and
/// on hardware without caching mode (real VT-d units) that returns before queuing anything.
/// XSA-78 (November 2013; 4.2.4, 4.3.2, 4.4) passes 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum UnmapFlush {
    /// Xen 4.2.0–4.2.3 and 4.3.0–4.3.1 (S3.5 ran 4.2.1): `flush_iotlb_qi` is called and
    /// returns at once; nothing is invalidated.
    Skipped,
    /// XSA-78's fix: one page-selective request, queued and waited for.
    Invalidates,
}

/// Counters of the coupling.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CouplingStats {
    /// I/O PTEs cleared because their frame became a page or descriptor table (each with a
    /// call of Xen's IOTLB flush, performed or not: [`UnmapFlush`]).
    pub unmapped: u64,
    /// I/O PTEs set back because their frame became writable again.
    pub remapped: u64,
    /// IOTLB invalidation requests the hardware performed (the unmaps', [`UnmapFlush::Invalidates`]).
    pub invalidations: u64,
    /// Unmaps after which a device's IOTLB still translated the frame, now a table
    /// ([`UnmapFlush::Skipped`]): the device could write the table until the entry is evicted.
    pub left_cached: u64,
}

/// The device-visible view of one PV guest's memory (see the [module docs](self)).
#[derive(Clone, Debug)]
pub struct IoProtection<U> {
    iommu: HostIommu<U>,
    domain: DomainId,
    devices: Vec<Bdf>,
    hfn_offset: u64,
    unmap_flush: UnmapFlush,
    stats: CouplingStats,
}

impl<U: RemapUnit> IoProtection<U> {
    /// The guest's domain in `unit`, with the assigned `devices` attached and `writable`
    /// frames `[0, writable)` mapped read-write to host frames `hfn_offset + gfn` (boot: Xen
    /// maps the guest's memory for its devices).
    pub fn new(unit: U, devices: &[Bdf], writable: u64, hfn_offset: u64) -> Result<Self, XenError> {
        let domain = DomainId::new(1);
        let mut iommu = HostIommu::new(unit);
        iommu.add_domain(domain, devices)?;
        iommu.set(
            domain,
            Pfn::new(0),
            Pfn::new(hfn_offset),
            writable,
            Perm::ReadWrite,
        )?;
        iommu.after_map();
        Ok(Self {
            iommu,
            domain,
            devices: devices.to_vec(),
            hfn_offset,
            unmap_flush: UnmapFlush::Invalidates,
            stats: CouplingStats::default(),
        })
    }

    /// These frames with Xen's unmap flush `flush` (the constructor's:
    /// [`UnmapFlush::Invalidates`]).
    #[must_use]
    pub fn with_unmap_flush(mut self, flush: UnmapFlush) -> Self {
        self.unmap_flush = flush;
        self
    }

    /// Mirrors a type change in the I/O page tables.
    pub fn on_change(&mut self, c: TypeChange) -> Result<(), XenError> {
        let iova = Pfn::<Iova>::new(c.frame.get());
        let was = self.iommu.lookup(self.domain, iova).is_some();
        if c.to.protected() && was {
            self.iommu.clear(self.domain, iova, 1)?;
            match self.unmap_flush {
                UnmapFlush::Invalidates => {
                    // S3.3: one page-selective request (widened where the unit has none).
                    self.iommu.invalidate(&[InvRequest::Page {
                        domain: self.domain,
                        pfn: iova,
                        order: 0,
                    }]);
                    self.stats.invalidations += 1;
                }
                UnmapFlush::Skipped => {
                    if self.iommu.reaches(self.domain, iova) {
                        self.stats.left_cached += 1;
                    }
                }
            }
            self.stats.unmapped += 1;
        } else if c.to == PageType::Writable && !was {
            let hfn = Pfn::<Hpa>::new(self.hfn_offset + c.frame.get());
            self.iommu.set(self.domain, iova, hfn, 1, Perm::ReadWrite)?;
            self.iommu.after_map();
            self.stats.remapped += 1;
        }
        Ok(())
    }

    /// Assigned device `device` (an index into the devices given to [`IoProtection::new`])
    /// accesses guest frame `frame` (through the IOTLB and, on a miss, a walk).
    pub fn dma(&mut self, device: usize, frame: Pfn<Gpa>, access: Access) -> Result<Hpa, Fault> {
        let iova = Iova::new(frame.base(PAGE_4K).get());
        let bdf = self.devices.get(device).copied().unwrap_or_default();
        self.iommu.translate(bdf, iova, access)
    }

    /// Whether the I/O page tables map `frame` (its entry alone, not the IOTLB).
    pub fn maps(&self, frame: Pfn<Gpa>) -> bool {
        self.iommu
            .lookup(self.domain, Pfn::<Iova>::new(frame.get()))
            .is_some()
    }

    /// Whether the device can reach `frame`: through its entry or a cached translation.
    pub fn device_can_reach(&self, frame: Pfn<Gpa>) -> bool {
        let iova = Pfn::<Iova>::new(frame.get());
        self.iommu.reaches(self.domain, iova)
    }

    /// The unit.
    pub fn unit(&self) -> &U {
        self.iommu.unit()
    }

    /// The counters.
    pub fn stats(&self) -> CouplingStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::xen::PageTypes;
    use iommulab_hw::{Vtd, VtdConfig};

    /// Two assigned devices: a frame that becomes a page table is out of reach of both,
    /// their cached translations included, and back for both once it is writable again.
    #[test]
    fn a_table_frame_is_hidden_from_every_assigned_device() {
        let devs = [Bdf::new(0, 3, 0).unwrap(), Bdf::new(0, 4, 0).unwrap()];
        let mut io =
            IoProtection::new(Vtd::new(VtdConfig::default()).unwrap(), &devs, 64, 1 << 20).unwrap();
        let mut t = PageTypes::new(64);
        let f = Pfn::<Gpa>::new(9);
        t.get_type(f, PageType::Writable).unwrap();
        t.put_type(f).unwrap();
        for d in 0..2 {
            io.dma(d, f, Access::Write).unwrap(); // cached in the IOTLB
        }
        let c = t.pin_table(f, PageType::L1, &[]).unwrap().unwrap();
        io.on_change(c).unwrap();
        assert_eq!(io.stats().invalidations, 1);
        for d in 0..2 {
            assert!(
                io.dma(d, f, Access::Read).is_err(),
                "device {d} still reaches it"
            );
        }
        assert!(!io.device_can_reach(f));
        t.unpin(f).unwrap();
        let back = t.get_type(f, PageType::Writable).unwrap().unwrap();
        io.on_change(back).unwrap();
        for d in 0..2 {
            io.dma(d, f, Access::Write).unwrap();
        }
    }

    /// Xen 4.2.1's unmap: the PTE is cleared but the device's cached translation stays, so
    /// it can still write the frame that is now a table; a frame it never cached is out of
    /// reach at once.
    #[test]
    fn xen_4_2_1_leaves_the_cached_translation() {
        let dev = [Bdf::new(0, 3, 0).unwrap()];
        let mut io = IoProtection::new(Vtd::new(VtdConfig::default()).unwrap(), &dev, 64, 1 << 20)
            .unwrap()
            .with_unmap_flush(UnmapFlush::Skipped);
        let mut t = PageTypes::new(64);
        let (cached, cold) = (Pfn::<Gpa>::new(9), Pfn::<Gpa>::new(10));
        for f in [cached, cold] {
            t.get_type(f, PageType::Writable).unwrap();
            t.put_type(f).unwrap();
        }
        io.dma(0, cached, Access::Write).unwrap();
        for f in [cached, cold] {
            let c = t.pin_table(f, PageType::L1, &[]).unwrap().unwrap();
            io.on_change(c).unwrap();
        }
        let s = io.stats();
        assert_eq!((s.unmapped, s.invalidations, s.left_cached), (2, 0, 1));
        assert!(
            io.dma(0, cached, Access::Write).is_ok(),
            "the stale entry translates"
        );
        assert!(io.device_can_reach(cached) && !io.maps(cached));
        assert!(io.dma(0, cold, Access::Write).is_err());
    }
}
