//! [`InAdvance`] (S2.6 "allocate in advance and free when done"): a caching layer inside
//! the DMA API. Drivers keep calling map and unmap; the first map of a frame makes the
//! hypercall (TCE *i* → the frame behind pseudo-physical *i*, read-write, so any later
//! direction is covered) and every later map of it finds the entry there. Unmaps do
//! nothing. Every frame ever mapped stays reachable by the device, and a page flip leaves
//! its entry naming the old machine frame, like pre-allocation.

use iommulab_base::addr::{DomainId, Gpa, Iova, Perm, Pfn};
use iommulab_hw::RemapUnit;
use iommulab_os::dma::{BackendError, Translation};

use super::{Hypervisor, PvDmaOption};

/// Map a frame the first time, keep it.
#[derive(Clone, Debug, Default)]
pub struct InAdvance {
    /// One bit per pseudo-physical frame: mapped already (sized at setup for the domain).
    mapped: Vec<u64>,
}

impl InAdvance {
    /// Marks `gfn` mapped; whether it was. `gfn` is inside the domain (checked by the caller).
    #[inline]
    fn test_and_set(&mut self, gfn: u64) -> bool {
        let (w, b) = ((gfn / 64) as usize, gfn % 64);
        let was = self.mapped[w] >> b & 1 == 1;
        self.mapped[w] |= 1 << b;
        was
    }
}

impl PvDmaOption for InAdvance {
    const NAME: &'static str = "in-advance";
    const TRANSLATION: Translation = Translation::Identity;
    const PROTECTS_WITHIN_DOMAIN: bool = false;
    const KEEPS_ENTRIES: bool = true;

    fn setup<U: RemapUnit>(
        &mut self,
        hv: &mut Hypervisor<U>,
        _domain: DomainId,
    ) -> Result<(), iommulab_hw::MapError> {
        // Sized once for the domain's memory, so the I/O path never grows it.
        self.mapped = vec![0; usize::try_from(hv.p2m().pages().div_ceil(64)).unwrap_or(0)];
        Ok(())
    }

    #[inline]
    fn map<U: RemapUnit>(
        &mut self,
        hv: &mut Hypervisor<U>,
        domain: DomainId,
        _iova: Pfn<Iova>,
        gfn: Pfn<Gpa>,
        pages: u64,
        _perm: Perm,
    ) -> Result<(), BackendError> {
        hv.check_in_domain(gfn, pages)?;
        for i in 0..pages {
            let g = gfn.add(i);
            if !self.test_and_set(g.get()) {
                hv.queue_map(domain, Pfn::new(g.get()), g, 1, Perm::ReadWrite)?;
            }
        }
        Ok(())
    }
}
