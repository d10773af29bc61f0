//! The hypervisor's side of a PV domain's DMA layer (S2.5): it owns the remapping unit,
//! checks each frame a domain asks to map against the domain's P2M, and applies the
//! entries a multicall (or a grant operation) carries. It counts what crossed into it:
//! hypercalls, entries, invalidations, and device accesses that reached a machine frame
//! the domain no longer owns (what a stale pre-allocated mapping does after a page flip).
//!
//! The unit is owned through [`HostIommu`], the hypervisor side's one owner of a remapping
//! unit (the KVM host and the ExpEther host use it too); the P2M, the queued multicall
//! entries and the crossings are Xen PV's own.

use serde::{Deserialize, Serialize};

use iommulab_base::addr::{Access, Bdf, DomainId, Gpa, Hpa, Iova, PAGE_4K, Perm, Pfn};
use iommulab_base::clock::Cycles;
use iommulab_hw::fault::Fault;
use iommulab_hw::host_iommu::HostIommu;
use iommulab_hw::invalidate::InvRequest;
use iommulab_hw::{MapError, RemapUnit};
use iommulab_os::dma::BackendError;

use super::multicall::{BatchSizes, Entry};
use super::p2m::P2m;

/// How queued entries reach the hypervisor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Crossing {
    /// A multicall of the DMA layer: one hypercall (recorded in [`BatchSizes`]).
    Hypercall,
    /// Inside a grant map or unmap the backend makes anyway (S2.6 grant-table
    /// integration): no crossing of its own.
    Grant,
    /// Mapping the domain's memory when it starts (pre-allocation): hypercalls, but not
    /// per I/O.
    Setup,
}

/// What crossed into the hypervisor.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PvDmaStats {
    /// Hypercalls of the I/O path: map/unmap multicalls and invalidation requests.
    pub hypercalls: u64,
    /// Of which invalidation requests (the flush policy's, e.g. at a roll-around).
    pub invalidation_hypercalls: u64,
    /// Batches applied inside grant operations, without a hypercall of their own.
    pub grant_batches: u64,
    /// Hypercalls that mapped the domain's memory at start (pre-allocation).
    pub setup_hypercalls: u64,
    /// Entries written at start.
    pub setup_entries: u64,
    /// Entries written on the I/O path.
    pub entries_mapped: u64,
    /// Entries cleared on the I/O path.
    pub entries_cleared: u64,
    /// Of the entries written, those that replaced an entry left present (never-free).
    pub entries_overwritten: u64,
    /// Device accesses translated to a machine frame the domain does not own.
    pub foreign_accesses: u64,
}

/// Entries per setup hypercall (pre-allocation maps memory in multicalls of this size).
pub const SETUP_BATCH: usize = 512;

/// The hypervisor over remapping unit `U`, for one PV domain.
#[derive(Debug)]
pub struct Hypervisor<U> {
    iommu: HostIommu<U>,
    p2m: P2m,
    /// Entries queued by the domain, not yet submitted (reused: no allocation once warm).
    pending: Vec<Entry>,
    stats: PvDmaStats,
    sizes: BatchSizes,
}

impl<U: RemapUnit> Hypervisor<U> {
    /// A hypervisor driving `unit` for a domain whose memory is `p2m`.
    pub fn new(unit: U, p2m: P2m) -> Self {
        Self {
            iommu: HostIommu::new(unit),
            p2m,
            pending: Vec::with_capacity(SETUP_BATCH),
            stats: PvDmaStats::default(),
            sizes: BatchSizes::default(),
        }
    }

    /// The remapping unit.
    pub fn unit(&self) -> &U {
        self.iommu.unit()
    }

    /// Routes `bdf`'s DMA through `domain`, creating the domain if it is new (`true`).
    pub fn attach(&mut self, bdf: Bdf, domain: DomainId) -> Result<bool, MapError> {
        self.iommu.attach(bdf, domain)
    }

    /// Stops translating for `bdf`.
    pub fn detach(&mut self, bdf: Bdf) -> Result<(), MapError> {
        self.iommu.detach(bdf)
    }

    /// The domain's P2M.
    pub fn p2m(&self) -> &P2m {
        &self.p2m
    }

    /// Counters.
    pub fn stats(&self) -> &PvDmaStats {
        &self.stats
    }

    /// Entries per map/unmap multicall.
    pub fn sizes(&self) -> &BatchSizes {
        &self.sizes
    }

    /// Entries queued and not yet submitted.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Whether the first queued entry is a map (`Some(true)`), an unmap, or none is queued.
    pub fn pending_is_map(&self) -> Option<bool> {
        self.pending.first().map(|e| matches!(e, Entry::Map { .. }))
    }

    /// Refuses a buffer of `pages` frames from `gfn` that is not all inside the domain
    /// (what options that map nothing per request still owe the caller).
    #[inline]
    pub fn check_in_domain(&self, gfn: Pfn<Gpa>, pages: u64) -> Result<(), BackendError> {
        if gfn.get().saturating_add(pages) > self.p2m.pages() {
            return Err(BackendError::Refused { pages });
        }
        Ok(())
    }

    /// Queues the mapping of `pages` I/O pages from `iova` to the domain's frames from `gfn`;
    /// a frame the domain does not own refuses the whole request (nothing queued).
    #[inline]
    pub fn queue_map(
        &mut self,
        domain: DomainId,
        iova: Pfn<Iova>,
        gfn: Pfn<Gpa>,
        pages: u64,
        perm: Perm,
    ) -> Result<(), BackendError> {
        let start = self.pending.len();
        for i in 0..pages {
            let Some(frame) = self.p2m.machine(gfn.add(i)) else {
                self.pending.truncate(start);
                return Err(BackendError::Refused { pages });
            };
            self.pending.push(Entry::Map {
                domain,
                iova: iova.add(i),
                frame,
                perm,
            });
        }
        Ok(())
    }

    /// Queues clearing `pages` I/O pages from `iova`.
    #[inline]
    pub fn queue_unmap(&mut self, domain: DomainId, iova: Pfn<Iova>, pages: u64) {
        for i in 0..pages {
            self.pending.push(Entry::Unmap {
                domain,
                iova: iova.add(i),
            });
        }
    }

    /// Applies every queued entry, crossing `via`. A map over an entry left present (the
    /// never-free option) replaces it. On an error the entries this submission mapped are
    /// cleared again and the queue is emptied.
    pub fn submit(&mut self, via: Crossing) -> Result<(), MapError> {
        let n = self.pending.len();
        if n == 0 {
            return Ok(());
        }
        match via {
            Crossing::Hypercall => {
                self.stats.hypercalls += 1;
                self.sizes.record(n);
            }
            Crossing::Grant => self.stats.grant_batches += 1,
            Crossing::Setup => self.stats.setup_hypercalls += 1,
        }
        for i in 0..n {
            if let Err(e) = self.apply(self.pending[i], via) {
                for &done in &self.pending[..i] {
                    if let Entry::Map { domain, iova, .. } = done {
                        let _ = self.iommu.clear(domain, iova, 1);
                    }
                }
                self.pending.clear();
                return Err(e);
            }
        }
        self.pending.clear();
        Ok(())
    }

    fn apply(&mut self, e: Entry, via: Crossing) -> Result<(), MapError> {
        match e {
            Entry::Map {
                domain,
                iova,
                frame,
                perm,
            } => {
                // Never-free leaves entries present: a map replaces one.
                if self.iommu.replace(domain, iova, frame, perm)? {
                    self.stats.entries_overwritten += 1;
                }
                if via == Crossing::Setup {
                    self.stats.setup_entries += 1;
                } else {
                    self.stats.entries_mapped += 1;
                }
            }
            Entry::Unmap { domain, iova } => {
                self.iommu.clear(domain, iova, 1)?;
                self.stats.entries_cleared += 1;
            }
        }
        Ok(())
    }

    /// The domain asks the hypervisor to invalidate the translation cache: one hypercall.
    pub fn invalidate(&mut self, reqs: &[InvRequest]) {
        if reqs.is_empty() {
            return;
        }
        self.stats.hypercalls += 1;
        self.stats.invalidation_hypercalls += 1;
        // The domain's flush policy asked for what the unit supports: widening keeps them.
        self.iommu.invalidate(reqs);
    }

    /// A device access through the unit; one that reaches a machine frame the domain no
    /// longer owns is counted (it corrupts another domain's memory).
    #[inline]
    pub fn translate(&mut self, bdf: Bdf, iova: Iova, access: Access) -> Result<Hpa, Fault> {
        let hpa = self.iommu.translate(bdf, iova, access)?;
        if !self.p2m.owns(hpa.pfn(PAGE_4K)) {
            self.stats.foreign_accesses += 1;
        }
        Ok(hpa)
    }

    /// Page flip of `gfn` (see [`P2m::flip`]); the unit's entries are not touched.
    pub fn flip(&mut self, gfn: Pfn<Gpa>) -> Result<Pfn<Hpa>, super::super::XenError> {
        self.p2m.flip(gfn)
    }

    /// CPU cycles spent in the hypervisor: each hypercall's crossing (the unit's cost
    /// model's `hypercall`) plus the unit's own work (entry writes and clears, flushes).
    pub fn cycles(&self) -> Cycles {
        let c = self.iommu.unit().cost();
        let crossings = self.stats.hypercalls + self.stats.setup_hypercalls;
        Cycles::new(crossings * c.hypercall) + self.iommu.cpu_cycles()
    }
}
