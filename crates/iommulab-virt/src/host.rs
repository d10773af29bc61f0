//! The host side of direct device assignment (S1.1, S1.10): the hypervisor owns the
//! guest's VT-d domain and serves the guest's [`Hypercall`]s.
//!
//! ```text
//!  guest ──Hypercall{unmap, map}──► Host::hypercall
//!                                     1. validate every request (nothing changes on error)
//!                                     2. unmaps: pin − 1; at 0 clear the PTE
//!                                     3. maps:   pin + 1; at 1 translate gfn → hfn, set the PTE
//!                                     4. invalidate the cleared PTEs: one request covering all
//!                                        of the call's (`call`, default) or one per page (`page`)
//!                                     5. one write-buffer flush if a PTE was set
//! ```
//!
//! - **Addresses.** The device's DMA address is the guest-physical address (direct
//!   assignment: the guest programs guest-physical addresses into the device), so the
//!   domain maps IOVA page `gfn` to host frame `gfn + hfn_offset` (guest memory is one
//!   contiguous host range starting at `hfn_offset`; a fixed offset, documented).
//! - **Checks.** Every page must lie in guest memory `[0, guest_pages)`; an unmap must
//!   match an earlier map (pin count > 0, counting the batch's own unmaps); after the batch
//!   at most `quota` distinct pages may be pinned — unless the batch does not increase the
//!   pinned count (a guest above a just-shrunk quota can still unmap).
//! - **Costs** ([`CostModel`], e.g. `KVM_2010`): `hypercall` and `host_call_bookkeeping`
//!   (reading the request list from guest memory) per served call,
//!   `host_map_bookkeeping` per map request and `host_unmap_bookkeeping` per unmap request
//!   (pinning, gfn → hfn, the pin table), plus the IOMMU's own charges: `pte_set`,
//!   `pte_clear`, `write_buffer_flush` and the invalidation (with the register interface of
//!   Yassour's machine: `inv_page` per request). With `KVM_2010` a one-page map
//!   costs 6000 + 4400 + 1400 + 1200 = 13000 cycles and a one-page unmap 6000 + 2600 +
//!   1100 + 2000 = 11700, S1.10's breakdown exactly.
//! - **Invalidation scope** ([`InvalidationScope`]). A hypercall that clears several PTEs
//!   needs one invalidation that covers them all, not one per page: a flush serves every
//!   mapping it covers (S1.10: "batches share" the write-buffer flush, and the IOTLB flush
//!   is the same kind of operation). The request is the narrowest the unit can perform:
//!   one page-selective request with an address mask when the pages lie in one aligned
//!   block of at most 2^`MAMV` pages, else the domain (which also drops the domain's other
//!   cached translations: the cost shows up as IOTLB misses). `page` keeps one
//!   page-selective request per cleared PTE, for comparison.
//! - **Pin table.** A pin count (4 bytes) and the PTE permission (1 byte) per page of
//!   guest memory, a flat array: 5 MiB for a 4 GiB guest.
//! - **The unit** is owned through [`HostIommu`], the hypervisor side's one owner of a
//!   remapping unit (Xen's PV hypervisor, its protection coupling and the ExpEther host use
//!   it too): it sets and clears PTEs, widens and submits the queued invalidations and
//!   translates the device's accesses. The pin table, the quota, gfn → hfn and the
//!   invalidation scope are this host's policy and stay here.

use serde::{Deserialize, Serialize};

use iommulab_base::addr::{Access, Bdf, DomainId, Gpa, Hpa, Iova, Perm, Pfn};
use iommulab_hw::host_iommu::HostIommu;
use iommulab_hw::{CostModel, Fault, InvRequest, InvalidationInterface, RemapUnit, Vtd, VtdConfig};

use super::hypercall::{HostStats, Hypercall, HypercallError};

/// How the host is set up for one guest.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct HostConfig {
    /// Guest memory in 4 KiB pages (gfns `0..guest_pages`).
    pub guest_pages: u64,
    /// Host frame of guest page 0 (gfn → hfn = gfn + offset).
    pub hfn_offset: u64,
    /// Most pages the guest may have pinned (mapped) at once.
    pub quota: u64,
    /// Cycle costs.
    pub cost: CostModel,
    /// How invalidations are submitted (Yassour's VT-d 1.0 machine: register-based).
    pub invalidation: InvalidationInterface,
    /// How the PTEs one hypercall clears are invalidated (module docs).
    pub invalidation_scope: InvalidationScope,
}

/// How the PTEs one hypercall clears are invalidated (see the [module docs](self)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum InvalidationScope {
    /// One request covering every page the call cleared (the narrowest the unit performs).
    #[default]
    Call,
    /// One page-selective request per cleared page.
    Page,
}

impl Default for HostConfig {
    fn default() -> Self {
        Self {
            guest_pages: 1 << 18,
            hfn_offset: 1 << 20,
            quota: u64::MAX,
            cost: CostModel::KVM_2010,
            invalidation: InvalidationInterface::Register,
            invalidation_scope: InvalidationScope::Call,
        }
    }
}

/// The hypervisor's view of one guest with an assigned device (see the [module docs](self)),
/// over remapping unit `U` (VT-d by default).
#[derive(Clone, Debug)]
pub struct Host<U = Vtd> {
    cfg: HostConfig,
    iommu: HostIommu<U>,
    domain: DomainId,
    bdf: Bdf,
    /// Pin count per guest page.
    pins: Vec<u32>,
    /// PTE permission per guest page (`Perm as u8`, 0 = not present).
    perms: Vec<u8>,
    /// Distinct pinned pages.
    pinned: u64,
    stats: HostStats,
    /// Own cycles (transitions and bookkeeping); the IOMMU counts its own.
    own_cycles: u64,
    /// Validation scratch: the pin counts a batch's tentative application changed, with
    /// their values before it (restored after the checks).
    journal: Vec<(usize, u32)>,
}

/// The assigned device's requester id.
pub const GUEST_DEVICE: Bdf = match Bdf::new(0, 3, 0) {
    Some(b) => b,
    None => panic!("bad bdf"),
};

impl Host<Vtd> {
    /// A host with a VT-d unit (the configured cost and invalidation interface, `CAP.RWBF`
    /// set, as on Yassour's machine, S1.10) and an empty domain for the guest's device.
    ///
    /// # Panics
    /// As [`Host::with_unit`].
    pub fn new(cfg: HostConfig) -> Self {
        Self::with_unit(cfg, Self::vtd(&cfg))
    }

    /// The VT-d unit [`Host::new`] drives: `cfg`'s cost and invalidation interface, `CAP.RWBF`
    /// set, as on Yassour's machine (S1.10).
    pub fn vtd(cfg: &HostConfig) -> Vtd {
        let icfg = VtdConfig {
            cost: cfg.cost,
            invalidation: cfg.invalidation,
            write_buffer_flush: true,
            ..VtdConfig::default()
        };
        Vtd::new(icfg).expect("valid IOMMU config")
    }
}

impl<U: RemapUnit> Host<U> {
    /// A host driving `unit`, with an empty domain for the guest's device.
    ///
    /// # Panics
    /// If `guest_pages + hfn_offset` does not fit the 52-bit host frame field or the guest
    /// memory exceeds 48-bit addresses (not a realistic guest), or if `unit` already has
    /// domain 1 or the guest's device.
    pub fn with_unit(cfg: HostConfig, unit: U) -> Self {
        assert!(
            cfg.guest_pages <= 1 << 36 && cfg.hfn_offset <= 1 << 38,
            "guest memory beyond 48-bit addresses"
        );
        let domain = DomainId::new(1);
        let mut iommu = HostIommu::new(unit);
        iommu
            .add_domain(domain, &[GUEST_DEVICE])
            .expect("fresh domain and device");
        let n = usize::try_from(cfg.guest_pages).expect("guest pages fit usize");
        Self {
            cfg,
            iommu,
            domain,
            bdf: GUEST_DEVICE,
            pins: vec![0; n],
            perms: vec![0; n],
            pinned: 0,
            stats: HostStats::default(),
            own_cycles: 0,
            journal: Vec::new(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &HostConfig {
        &self.cfg
    }

    /// The quota in pages.
    pub fn quota(&self) -> u64 {
        self.cfg.quota
    }

    /// Changes the quota (S1.7). Pages already pinned stay; a guest above a lower quota can
    /// only unmap until it is under it.
    pub fn set_quota(&mut self, quota: u64) {
        self.cfg.quota = quota;
    }

    /// Distinct pages pinned (mapped in the IOMMU).
    pub fn pinned(&self) -> u64 {
        self.pinned
    }

    /// Pin count of `gfn` (0 outside guest memory).
    pub fn pin_count(&self, gfn: Pfn<Gpa>) -> u32 {
        usize::try_from(gfn.get())
            .ok()
            .and_then(|i| self.pins.get(i).copied())
            .unwrap_or(0)
    }

    /// Host frame backing `gfn`.
    pub const fn hfn(&self, gfn: Pfn<Gpa>) -> Pfn<Hpa> {
        Pfn::new(gfn.get() + self.cfg.hfn_offset)
    }

    /// The counters; `cycles` includes the IOMMU's.
    pub fn stats(&self) -> HostStats {
        let mut s = self.stats;
        s.cycles = self.own_cycles + self.iommu.cpu_cycles().get();
        s
    }

    /// The guest's remapping unit (read-only: the stale-access oracle reads translations
    /// through [`Host::device_access`]).
    pub fn unit(&self) -> &U {
        self.iommu.unit()
    }

    /// The assigned device accesses guest page `gfn` (its DMA address is the gpa), through
    /// the IOMMU and its IOTLB; `Ok` when the access goes through.
    pub fn device_access(&mut self, gfn: Pfn<Gpa>, access: Access) -> Result<Pfn<Hpa>, Fault> {
        let iova = Iova::new(gfn.get() << 12);
        self.iommu
            .translate(self.bdf, iova, access)
            .map(|h| Pfn::new(h.get() >> 12))
    }

    /// Serves one hypercall (see the [module docs](self)). On error nothing changed.
    pub fn hypercall(&mut self, call: &Hypercall) -> Result<(), HypercallError> {
        if let Err(e) = self.validate(call) {
            self.stats.refused += 1;
            return Err(e);
        }
        self.apply(call);
        Ok(())
    }

    fn index(&self, gfn: Pfn<Gpa>) -> Result<usize, HypercallError> {
        let g = gfn.get();
        if g >= self.cfg.guest_pages {
            return Err(HypercallError::OutsideGuest {
                gfn: g,
                guest_pages: self.cfg.guest_pages,
            });
        }
        #[allow(clippy::cast_possible_truncation)]
        Ok(g as usize)
    }

    /// Checks `call` against the pin table without changing it: the batch is applied to
    /// the pin counts tentatively (unmaps, then maps, as `apply` does), the distinct pinned
    /// pages counted, and every touched count restored from a journal. (A hash map of net
    /// changes per page did the same at several times the cost: `cargo bench --bench guest`.)
    fn validate(&mut self, call: &Hypercall) -> Result<(), HypercallError> {
        self.journal.clear();
        let mut pinned = self.pinned;
        let r = self.try_batch(call, &mut pinned);
        for &(i, before) in self.journal.iter().rev() {
            self.pins[i] = before;
        }
        r?;
        if pinned > self.cfg.quota && pinned > self.pinned {
            return Err(HypercallError::OverQuota {
                pinned,
                quota: self.cfg.quota,
            });
        }
        Ok(())
    }

    /// The tentative half of [`Host::validate`]: journals and applies pin changes, counting
    /// distinct pinned pages in `pinned`; stops at the first request it must refuse.
    fn try_batch(&mut self, call: &Hypercall, pinned: &mut u64) -> Result<(), HypercallError> {
        for &g in &call.unmap {
            let i = self.index(g)?;
            if self.pins[i] == 0 {
                return Err(HypercallError::NotMapped { gfn: g.get() });
            }
            self.journal.push((i, self.pins[i]));
            self.pins[i] -= 1;
            if self.pins[i] == 0 {
                *pinned -= 1;
            }
        }
        for &(g, _) in &call.map {
            let i = self.index(g)?;
            self.journal.push((i, self.pins[i]));
            if self.pins[i] == 0 {
                *pinned += 1;
            }
            self.pins[i] += 1;
        }
        Ok(())
    }

    fn iova(g: u64) -> Pfn<Iova> {
        Pfn::new(g)
    }

    fn apply(&mut self, call: &Hypercall) {
        let c = self.cfg.cost;
        let mut set_any = false;
        for &g in &call.unmap {
            #[allow(clippy::cast_possible_truncation)]
            let i = g.get() as usize;
            self.pins[i] -= 1;
            if self.pins[i] == 0 {
                self.iommu
                    .clear(self.domain, Self::iova(g.get()), 1)
                    .expect("pinned page is mapped");
                self.perms[i] = 0;
                self.pinned -= 1;
                self.stats.ptes_cleared += 1;
                self.iommu.queue_invalidation(InvRequest::Page {
                    domain: self.domain,
                    pfn: Self::iova(g.get()),
                    order: 0,
                });
            }
        }
        for &(g, perm) in &call.map {
            #[allow(clippy::cast_possible_truncation)]
            let i = g.get() as usize;
            self.pins[i] += 1;
            let want = perm as u8;
            let have = self.perms[i];
            if self.pins[i] == 1 || have | want != have {
                let merged = have | want;
                if self.pins[i] > 1 {
                    // Widen the permission: rewrite the PTE, drop the cached narrower one.
                    self.iommu
                        .clear(self.domain, Self::iova(g.get()), 1)
                        .expect("pinned page is mapped");
                    self.iommu.queue_invalidation(InvRequest::Page {
                        domain: self.domain,
                        pfn: Self::iova(g.get()),
                        order: 0,
                    });
                } else {
                    self.pinned += 1;
                }
                let p = Perm::from_bits(merged & 1 != 0, merged & 2 != 0).unwrap_or(perm);
                self.iommu
                    .set(self.domain, Self::iova(g.get()), self.hfn(g), 1, p)
                    .expect("page checked unmapped and in range");
                self.perms[i] = merged;
                self.stats.ptes_set += 1;
                set_any = true;
            }
        }
        // `call`: one request covering every page the call cleared (S1.10).
        let merge = self.cfg.invalidation_scope == InvalidationScope::Call;
        self.stats.iotlb_invalidations += self.iommu.submit_queued(merge);
        if set_any {
            self.iommu.after_map();
            self.stats.write_buffer_flushes += 1;
        }
        let (nu, nm) = (call.unmap.len() as u64, call.map.len() as u64);
        self.stats.hypercalls += 1;
        self.stats.unmap_requests += nu;
        self.stats.map_requests += nm;
        self.stats.max_pages_per_hypercall = self.stats.max_pages_per_hypercall.max(nu + nm);
        // S1.10: the transition and the request list's retrieval once per call, the
        // translation and pin-table work per page.
        self.own_cycles += c.hypercall
            + c.host_call_bookkeeping
            + nm * c.host_map_bookkeeping
            + nu * c.host_unmap_bookkeeping;
    }

    /// Checks the pin table against the IOMMU and the counters (tests).
    pub fn check(&self) -> Result<(), String> {
        let pinned = self.pins.iter().filter(|&&p| p > 0).count() as u64;
        if pinned != self.pinned {
            return Err(format!("pinned {} != counted {}", pinned, self.pinned));
        }
        for (i, (&p, &perm)) in self.pins.iter().zip(&self.perms).enumerate() {
            let mapped = self
                .iommu
                .lookup(self.domain, Self::iova(i as u64))
                .is_some();
            if (p > 0) != mapped || (p > 0) != (perm != 0) {
                return Err(format!(
                    "page {i:#x}: pins {p}, perm {perm}, mapped {mapped}"
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn g(x: u64) -> Pfn<Gpa> {
        Pfn::new(x)
    }

    #[test]
    fn kvm_2010_costs_match_s1_10() {
        let mut h = Host::new(HostConfig {
            guest_pages: 64,
            ..HostConfig::default()
        });
        let mut c = Hypercall::new();
        c.map.push((g(3), Perm::Read));
        h.hypercall(&c).unwrap();
        assert_eq!(h.stats().cycles, 13_000);
        c.clear();
        c.unmap.push(g(3));
        h.hypercall(&c).unwrap();
        assert_eq!(h.stats().cycles, 13_000 + 11_700);
        h.check().unwrap();
    }

    /// A batched call pays the transition, the request list's retrieval, one write-buffer
    /// flush and one invalidation once, and the translation and PTE work per page (S1.6,
    /// S1.10): 4 pages mapped in one call cost less than 4 one-page calls by 3 × (6000 +
    /// 1000 + 1200), and unmapped in one call (one aligned block: one request) by 3 × (6000 +
    /// 1000 + 2000).
    #[test]
    fn a_batched_call_pays_per_call_work_once() {
        let cfg = HostConfig {
            guest_pages: 64,
            ..HostConfig::default()
        };
        let (mut one, mut four) = (Host::new(cfg), Host::new(cfg));
        let mut c = Hypercall::new();
        for p in 8..12 {
            c.clear();
            c.map.push((g(p), Perm::Read));
            one.hypercall(&c).unwrap();
        }
        c.clear();
        c.map.extend((8..12).map(|p| (g(p), Perm::Read)));
        four.hypercall(&c).unwrap();
        let m = CostModel::KVM_2010;
        let per_call_map = m.hypercall + m.host_call_bookkeeping + m.write_buffer_flush;
        assert_eq!(one.stats().cycles - four.stats().cycles, 3 * per_call_map);
        let (o, f) = (one.stats().cycles, four.stats().cycles);
        for p in 8..12 {
            c.clear();
            c.unmap.push(g(p));
            one.hypercall(&c).unwrap();
        }
        c.clear();
        c.unmap.extend((8..12).map(g));
        four.hypercall(&c).unwrap();
        assert_eq!(four.stats().iotlb_invalidations, 1);
        let per_call_unmap = m.hypercall + m.host_call_bookkeeping + m.inv_page;
        assert_eq!(
            (one.stats().cycles - o) - (four.stats().cycles - f),
            3 * per_call_unmap
        );
    }

    #[test]
    fn refused_batches_change_nothing() {
        let mut h = Host::new(HostConfig {
            guest_pages: 16,
            quota: 2,
            ..HostConfig::default()
        });
        let mut c = Hypercall::new();
        c.map.extend([(g(1), Perm::Read), (g(2), Perm::Read)]);
        h.hypercall(&c).unwrap();
        let before = (h.stats(), h.pinned());
        c.clear();
        c.map.push((g(3), Perm::Read));
        assert!(matches!(
            h.hypercall(&c),
            Err(HypercallError::OverQuota { .. })
        ));
        c.clear();
        c.unmap.push(g(4));
        assert!(matches!(
            h.hypercall(&c),
            Err(HypercallError::NotMapped { gfn: 4 })
        ));
        c.clear();
        c.map.push((g(99), Perm::Read));
        assert!(matches!(
            h.hypercall(&c),
            Err(HypercallError::OutsideGuest { .. })
        ));
        let mut after = h.stats();
        after.refused = 0;
        assert_eq!((after, h.pinned()), before);
        // Piggyback: an unmap makes room for a map in the same call.
        c.clear();
        c.unmap.push(g(1));
        c.map.push((g(3), Perm::Read));
        h.hypercall(&c).unwrap();
        assert_eq!(h.stats().iotlb_invalidations, 1);
        assert!(h.device_access(g(1), Access::Read).is_err());
        assert!(h.device_access(g(3), Access::Read).is_ok());
        assert!(h.device_access(g(3), Access::Write).is_err());
        h.check().unwrap();
    }

    /// One batched unmap of pages the device had cached: `call` invalidates them with one
    /// request (a masked page block when they share an aligned block, the domain when
    /// they do not), `page` with one each; either way no translation survives, and the
    /// cycles differ by the invalidations saved.
    #[test]
    fn one_invalidation_covers_a_batched_unmap() {
        for (pages, scope, invalidations) in [
            (&[8u64, 9, 10, 11][..], InvalidationScope::Call, 1),
            (&[8, 9, 10, 11][..], InvalidationScope::Page, 4),
            (&[3, 40_000][..], InvalidationScope::Call, 1),
            (&[3, 40_000][..], InvalidationScope::Page, 2),
        ] {
            let mut h = Host::new(HostConfig {
                guest_pages: 1 << 17,
                invalidation_scope: scope,
                ..HostConfig::default()
            });
            let mut c = Hypercall::new();
            c.map.extend(pages.iter().map(|&p| (g(p), Perm::Read)));
            h.hypercall(&c).unwrap();
            for &p in pages {
                h.device_access(g(p), Access::Read).unwrap();
            }
            let before = h.stats();
            let mut c = Hypercall::new();
            c.unmap.extend(pages.iter().map(|&p| g(p)));
            h.hypercall(&c).unwrap();
            let after = h.stats();
            assert_eq!(
                after.iotlb_invalidations - before.iotlb_invalidations,
                invalidations
            );
            for &p in pages {
                assert!(
                    h.device_access(g(p), Access::Read).is_err(),
                    "page {p} still reachable"
                );
            }
            // S1.10: the transition and the call's part of the bookkeeping once, the rest of
            // the bookkeeping and the PTE clear per page.
            let n = pages.len() as u64;
            assert_eq!(
                after.cycles - before.cycles,
                6000 + 1000 + n * (1600 + 1100) + invalidations * 2000,
                "{scope:?} {pages:?}"
            );
        }
    }
}
