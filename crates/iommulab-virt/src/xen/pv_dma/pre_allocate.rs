//! [`PreAllocate`] (S2.6 "pre-allocation"): when the domain starts, TCE *i* is made to map
//! the machine frame behind pseudo-physical frame *i*, for every frame, and the domain
//! passes pseudo-physical addresses to its devices as if it had no IOMMU. Maps and unmaps
//! cost nothing and no entry is ever invalidated. Other domains stay protected; the domain's
//! own memory does not (every frame is reachable at any time), and the mapping is only right
//! while the P2M does not change: after a page flip or a balloon the entry still names the
//! old machine frame, now another domain's (counted as foreign accesses).

use iommulab_base::addr::{DomainId, Gpa, Iova, Perm, Pfn};
use iommulab_hw::{MapError, RemapUnit};
use iommulab_os::dma::{BackendError, Translation};

use super::{Crossing, Hypervisor, PvDmaOption, SETUP_BATCH};

/// All of the domain's memory mapped once.
#[derive(Clone, Copy, Debug, Default)]
pub struct PreAllocate;

impl PvDmaOption for PreAllocate {
    const NAME: &'static str = "pre-allocate";
    const TRANSLATION: Translation = Translation::Identity;
    const PROTECTS_WITHIN_DOMAIN: bool = false;
    const KEEPS_ENTRIES: bool = true;

    fn setup<U: RemapUnit>(
        &mut self,
        hv: &mut Hypervisor<U>,
        domain: DomainId,
    ) -> Result<(), MapError> {
        let pages = hv.p2m().pages();
        let mut gfn = 0;
        while gfn < pages {
            let n = (pages - gfn).min(SETUP_BATCH as u64);
            // Every frame of the P2M is the domain's: queue_map cannot refuse here.
            hv.queue_map(domain, Pfn::new(gfn), Pfn::new(gfn), n, Perm::ReadWrite)
                .map_err(|_| MapError::NoSuchDomain {
                    domain: domain.get(),
                })?;
            hv.submit(Crossing::Setup)?;
            gfn += n;
        }
        Ok(())
    }

    #[inline]
    fn map<U: RemapUnit>(
        &mut self,
        hv: &mut Hypervisor<U>,
        _domain: DomainId,
        _iova: Pfn<Iova>,
        gfn: Pfn<Gpa>,
        pages: u64,
        _perm: Perm,
    ) -> Result<(), BackendError> {
        // Nothing to do, but a buffer outside the domain was never mapped.
        hv.check_in_domain(gfn, pages)
    }
}
