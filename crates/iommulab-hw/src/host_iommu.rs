//! The hypervisor side's owner of a remapping unit: what every model of a host that drives an
//! IOMMU for someone else's devices does the same way, written once.
//!
//! ```text
//!  KVM host (virt::Host)             pin counts, quota, gfn → hfn, per-call invalidation scope
//!  Xen PV hypervisor (xen::pv_dma)   P2M checks, queued multicall entries, never-free overwrite
//!  Xen protection coupling           a frame's type change → clear + invalidate / set back
//!  ExpEther host (pcie::bridge)      translates the VF's DMA for the VE's requester id
//!           │ (each keeps its policy)
//!           ▼
//!  HostIommu<U>  domains and their devices · set / replace / clear PTEs · queued or immediate
//!                invalidation, widened to what the unit can do · after-map work · the
//!                device side's translate and reach · counters
//!           ▼
//!  RemapUnit (VT-d, Calgary, DART, a test unit)
//! ```
//!
//! Every invalidation is widened with the unit's [`InvalidationCaps::widen`] before it is
//! submitted, as a driver must (a request the unit performs as asked is unchanged), so a
//! host runs on any unit. Which PTEs to clear and when to invalidate them is the caller's
//! policy, not this type's: the KVM host invalidates what a hypercall cleared at its end
//! (S1.10), Xen PV's domain asks through its flush policy (S2.4), the coupling invalidates
//! each frame at once (S3.3), and the ExpEther host only translates (its mappings are its
//! own DMA layer's, S4.3).
//!
//! [`InvalidationCaps::widen`]: crate::unit::InvalidationCaps::widen

use serde::{Deserialize, Serialize};

use crate::error::MapError;
use crate::fault::Fault;
use crate::invalidate::InvRequest;
use crate::unit::RemapUnit;
use iommulab_base::addr::{Access, Bdf, DomainId, Hpa, Iova, Perm, Pfn};
use iommulab_base::clock::Cycles;

/// What a [`HostIommu`] did to its unit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostIommuStats {
    /// Base-page entries set (including those set by [`HostIommu::replace`]).
    pub ptes_set: u64,
    /// Base-page entries cleared (not counting those [`HostIommu::replace`] overwrote).
    pub ptes_cleared: u64,
    /// Entries [`HostIommu::replace`] found present and overwrote.
    pub ptes_replaced: u64,
    /// Invalidation requests submitted, after widening.
    pub invalidation_requests: u64,
    /// Batches of invalidation requests submitted.
    pub invalidation_batches: u64,
    /// After-map work done ([`RemapUnit::after_map`]).
    pub after_maps: u64,
}

/// A remapping unit owned by a host (see the [module docs](self)).
#[derive(Clone, Debug)]
pub struct HostIommu<U> {
    unit: U,
    /// Invalidations queued and not yet submitted (reused: no allocation once warm).
    queued: Vec<InvRequest>,
    /// Scratch for widening an immediate batch.
    widened: Vec<InvRequest>,
    stats: HostIommuStats,
}

impl<U: RemapUnit> HostIommu<U> {
    /// A host driving `unit`.
    pub fn new(unit: U) -> Self {
        Self {
            unit,
            queued: Vec::new(),
            widened: Vec::new(),
            stats: HostIommuStats::default(),
        }
    }

    /// The unit (read-only: its caps, prices, counters and caches).
    #[inline]
    pub fn unit(&self) -> &U {
        &self.unit
    }

    /// The counters.
    pub fn stats(&self) -> HostIommuStats {
        self.stats
    }

    /// Modeled CPU time of the unit's work (table writes, after-map work, invalidations).
    #[inline]
    pub fn cpu_cycles(&self) -> Cycles {
        self.unit.cpu_cycles()
    }

    /// Creates `domain` and routes each of `devices`' DMA through it.
    pub fn add_domain(&mut self, domain: DomainId, devices: &[Bdf]) -> Result<(), MapError> {
        self.unit.create_domain(domain)?;
        for &bdf in devices {
            self.unit.attach(bdf, domain)?;
        }
        Ok(())
    }

    /// Routes `bdf`'s DMA through `domain`, creating the domain if it does not exist; `true`
    /// if it was created.
    pub fn attach(&mut self, bdf: Bdf, domain: DomainId) -> Result<bool, MapError> {
        let fresh = match self.unit.create_domain(domain) {
            Ok(()) => true,
            Err(MapError::DomainExists { .. }) => false,
            Err(e) => return Err(e),
        };
        self.unit.attach(bdf, domain)?;
        Ok(fresh)
    }

    /// Stops translating for `bdf`.
    pub fn detach(&mut self, bdf: Bdf) -> Result<(), MapError> {
        self.unit.detach(bdf)
    }

    /// Sets the entries of `pages` base pages `[iova, iova + pages)` → `[hpa, hpa + pages)`;
    /// every page must be unmapped. Needs [`HostIommu::after_map`] before a device uses them.
    #[inline]
    pub fn set(
        &mut self,
        domain: DomainId,
        iova: Pfn<Iova>,
        hpa: Pfn<Hpa>,
        pages: u64,
        perm: Perm,
    ) -> Result<(), MapError> {
        self.unit.map_range(domain, iova, hpa, pages, perm)?;
        self.stats.ptes_set += pages;
        Ok(())
    }

    /// Sets one page's entry whether or not it is present; `true` if a present one was
    /// overwritten (its cached translation stays until invalidated: the caller's policy).
    #[inline]
    pub fn replace(
        &mut self,
        domain: DomainId,
        iova: Pfn<Iova>,
        hpa: Pfn<Hpa>,
        perm: Perm,
    ) -> Result<bool, MapError> {
        let present = self.unit.lookup(domain, iova).is_some();
        if present {
            self.unit.unmap_range(domain, iova, 1)?;
            self.stats.ptes_replaced += 1;
        }
        self.set(domain, iova, hpa, 1, perm)?;
        Ok(present)
    }

    /// Clears the entries of `[iova, iova + pages)` (every page must be mapped). The device
    /// may still use a cached translation until it is invalidated.
    #[inline]
    pub fn clear(&mut self, domain: DomainId, iova: Pfn<Iova>, pages: u64) -> Result<(), MapError> {
        self.unit.unmap_range(domain, iova, pages)?;
        self.stats.ptes_cleared += pages;
        Ok(())
    }

    /// Queues an invalidation for [`HostIommu::submit_queued`].
    #[inline]
    pub fn queue_invalidation(&mut self, req: InvRequest) {
        self.queued.push(req);
    }

    /// Invalidations queued and not yet submitted.
    pub fn queued(&self) -> &[InvRequest] {
        &self.queued
    }

    /// Submits the queued invalidations as one batch, each widened to what the unit can do;
    /// with `merge`, page requests of one domain become the one request covering them all (a
    /// flush serves every mapping it covers, S1.10). Returns the requests submitted.
    pub fn submit_queued(&mut self, merge: bool) -> u64 {
        if merge
            && self.queued.len() > 1
            && let Some(covering) = Self::covering(&self.queued)
        {
            self.queued.clear();
            self.queued.push(covering);
        }
        let caps = self.unit.caps();
        for r in &mut self.queued {
            *r = caps.widen(*r);
        }
        let n = self.queued.len() as u64;
        if n > 0 {
            self.unit.invalidate(&self.queued);
            self.stats.invalidation_requests += n;
            self.stats.invalidation_batches += 1;
        }
        self.queued.clear();
        n
    }

    /// The one request covering page requests `reqs` of a single domain (`None` if they are
    /// not all page requests of one domain).
    fn covering(reqs: &[InvRequest]) -> Option<InvRequest> {
        let domain = match reqs.first()? {
            InvRequest::Page { domain, .. } => *domain,
            _ => return None,
        };
        let (mut lo, mut hi) = (u64::MAX, 0);
        for r in reqs {
            match (r, r.page_block()) {
                (InvRequest::Page { domain: d, .. }, Some((s, e))) if *d == domain => {
                    lo = lo.min(s);
                    hi = hi.max(e);
                }
                _ => return None,
            }
        }
        Some(InvRequest::covering(domain, Pfn::new(lo), hi - lo))
    }

    /// Submits `reqs` now as one batch, each widened to what the unit can do. Returns the
    /// requests submitted.
    pub fn invalidate(&mut self, reqs: &[InvRequest]) -> u64 {
        if reqs.is_empty() {
            return 0;
        }
        let caps = self.unit.caps();
        self.widened.clear();
        self.widened.extend(reqs.iter().map(|&r| caps.widen(r)));
        self.unit.invalidate(&self.widened);
        let n = self.widened.len() as u64;
        self.stats.invalidation_requests += n;
        self.stats.invalidation_batches += 1;
        n
    }

    /// The work the unit needs after entries were set before a device may use them (VT-d: a
    /// write-buffer flush where `CAP.RWBF` is set, S1.10).
    #[inline]
    pub fn after_map(&mut self) {
        self.unit.after_map();
        self.stats.after_maps += 1;
    }

    /// A device access as the hardware translates it (through the unit's cache); a denied
    /// one is recorded in the unit's fault log.
    #[inline]
    pub fn translate(&mut self, bdf: Bdf, iova: Iova, access: Access) -> Result<Hpa, Fault> {
        self.unit.translate(bdf, iova, access)
    }

    /// Software lookup of `domain`'s entry for `iova` (no caches, no cycles).
    #[inline]
    pub fn lookup(&self, domain: DomainId, iova: Pfn<Iova>) -> Option<(Pfn<Hpa>, Perm)> {
        self.unit.lookup(domain, iova)
    }

    /// Whether a device of `domain` can still reach `iova`: through an entry, or a cached
    /// translation not yet invalidated.
    pub fn reaches(&self, domain: DomainId, iova: Pfn<Iova>) -> bool {
        self.unit.lookup(domain, iova).is_some() || self.unit.cache_holds(domain, iova)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tce::{Calgary, TceConfig};
    use crate::vtd::{Vtd, VtdConfig};

    const DEV: Bdf = match Bdf::new(0, 3, 0) {
        Some(b) => b,
        None => panic!("bad bdf"),
    };

    fn d() -> DomainId {
        DomainId::new(1)
    }

    /// Set, use, clear, invalidate: on VT-d a merged queue is one page-selective request; on
    /// Calgary (whole-cache flush only) the same queue is widened to one global flush. Either
    /// way the device no longer reaches the pages.
    fn set_clear_invalidate<U: RemapUnit>(unit: U) -> (HostIommu<U>, InvRequest) {
        let mut h = HostIommu::new(unit);
        h.add_domain(d(), &[DEV]).unwrap();
        h.set(d(), Pfn::new(8), Pfn::new(0x100), 4, Perm::Read)
            .unwrap();
        h.after_map();
        for p in 8..12 {
            h.translate(DEV, Iova::new(p << 12), Access::Read).unwrap();
        }
        h.clear(d(), Pfn::new(8), 4).unwrap();
        for p in 8..12 {
            assert!(h.reaches(d(), Pfn::new(p)), "cached until invalidated");
            h.queue_invalidation(InvRequest::covering(d(), Pfn::new(p), 1));
        }
        let req = HostIommu::<U>::covering(h.queued()).unwrap();
        assert_eq!(h.submit_queued(true), 1);
        for p in 8..12 {
            assert!(!h.reaches(d(), Pfn::new(p)));
            assert!(h.translate(DEV, Iova::new(p << 12), Access::Read).is_err());
        }
        let s = h.stats();
        assert_eq!(
            (s.ptes_set, s.ptes_cleared, s.invalidation_requests),
            (4, 4, 1)
        );
        (h, req)
    }

    #[test]
    fn one_owner_drives_vtd_and_calgary() {
        let (v, req) = set_clear_invalidate(Vtd::new(VtdConfig::default()).unwrap());
        assert_eq!(req, InvRequest::covering(d(), Pfn::new(8), 4));
        let (c, _) = set_clear_invalidate(Calgary::new(TceConfig::default()).unwrap());
        assert_ne!(v.cpu_cycles(), c.cpu_cycles());
    }

    /// `replace` overwrites a present entry (the never-free option) and says so; unmerged
    /// queues go as they are, widened.
    #[test]
    fn replace_and_unmerged_queues() {
        let mut h = HostIommu::new(Vtd::new(VtdConfig::default()).unwrap());
        assert!(h.attach(DEV, d()).unwrap());
        assert!(!h.attach(Bdf::new(0, 4, 0).unwrap(), d()).unwrap());
        assert!(
            !h.replace(d(), Pfn::new(3), Pfn::new(0x30), Perm::Read)
                .unwrap()
        );
        assert!(
            h.replace(d(), Pfn::new(3), Pfn::new(0x31), Perm::Write)
                .unwrap()
        );
        assert_eq!(
            h.lookup(d(), Pfn::new(3)),
            Some((Pfn::new(0x31), Perm::Write))
        );
        h.queue_invalidation(InvRequest::covering(d(), Pfn::new(3), 1));
        h.queue_invalidation(InvRequest::covering(d(), Pfn::new(40_000), 1));
        assert_eq!(h.submit_queued(false), 2);
        assert_eq!(h.invalidate(&[InvRequest::Domain(d())]), 1);
        let s = h.stats();
        assert_eq!(
            (s.ptes_set, s.ptes_replaced, s.invalidation_batches),
            (2, 1, 2)
        );
        h.clear(d(), Pfn::new(3), 1).unwrap();
        assert!(h.clear(d(), Pfn::new(3), 1).is_err());
    }
}
