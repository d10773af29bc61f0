//! Protection coupling (S3.2–S3.3): the I/O page tables of a PV guest with an assigned
//! device map every writable frame of the guest (gfn → hfn) and no page-table or
//! descriptor frame. When a frame's type changes from writable to protected, Xen clears its
//! I/O PTE and invalidates the device's cached translation of it (one page-selective
//! request through the queued interface: "it is enough for Xen to require several
//! page-based invalidations using queued invalidation interface", S3.3); when it becomes
//! writable again the PTE is set back (non-present → present: a write-buffer flush at most,
//! no invalidation, S1.10).
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

/// Counters of the coupling.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CouplingStats {
    /// I/O PTEs cleared because their frame became a page or descriptor table.
    pub unmapped: u64,
    /// I/O PTEs set back because their frame became writable again.
    pub remapped: u64,
    /// IOTLB invalidation requests submitted (S3.3's "IOTLB flushes").
    pub iotlb_flushes: u64,
}

/// The device-visible view of one PV guest's memory (see the [module docs](self)).
#[derive(Clone, Debug)]
pub struct IoProtection<U> {
    iommu: HostIommu<U>,
    domain: DomainId,
    devices: Vec<Bdf>,
    hfn_offset: u64,
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
            stats: CouplingStats::default(),
        })
    }

    /// Mirrors a type change in the I/O page tables.
    pub fn on_change(&mut self, c: TypeChange) -> Result<(), XenError> {
        let iova = Pfn::<Iova>::new(c.frame.get());
        let was = self.iommu.lookup(self.domain, iova).is_some();
        if c.to.protected() && was {
            self.iommu.clear(self.domain, iova, 1)?;
            // S3.3: one page-selective request (widened where the unit has none).
            self.iommu.invalidate(&[InvRequest::Page {
                domain: self.domain,
                pfn: iova,
                order: 0,
            }]);
            self.stats.unmapped += 1;
            self.stats.iotlb_flushes += 1;
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

    /// Whether the device can reach `frame` (software lookup, no caches).
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
        assert_eq!(io.stats().iotlb_flushes, 1);
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
}
