//! [`FlatUnit`]: the smallest remapping unit that is not VT-d, to test the seam
//! ([`crate::hw::RemapUnit`]) with capabilities VT-d lacks: one flat table of entries per
//! domain and a translation cache that can only be flushed whole (as the Calgary TCE cache, S2.2).
//! Not a model of any real unit; no costs.

use std::collections::BTreeMap;

use crate::addr::{Access, Bdf, DomainId, Hpa, Iova, PAGE_4K, Perm, Pfn};
use crate::clock::Cycles;
use crate::hw::cost::CostModel;
use crate::hw::error::{MapError, bytes};
use crate::hw::fault::{Fault, FaultLog, FaultReason};
use crate::hw::invalidate::{InvRequest, InvalidationInterface};
use crate::hw::stats::IommuStats;
use crate::hw::unit::{InvalidationCaps, RemapUnit};

/// A flat-table unit whose cache has no page- or domain-selective invalidation.
#[derive(Debug)]
pub struct FlatUnit {
    cost: CostModel,
    tables: BTreeMap<DomainId, BTreeMap<u64, (Pfn<Hpa>, Perm)>>,
    devices: BTreeMap<Bdf, DomainId>,
    /// Cached translations, filled by every walk that finds an entry; used before the table.
    cache: BTreeMap<(DomainId, u64), (Pfn<Hpa>, Perm)>,
    faults: FaultLog,
    stats: IommuStats,
}

impl Default for FlatUnit {
    fn default() -> Self {
        Self {
            cost: CostModel::MODERN,
            tables: BTreeMap::new(),
            devices: BTreeMap::new(),
            cache: BTreeMap::new(),
            faults: FaultLog::new(64),
            stats: IommuStats::default(),
        }
    }
}

impl FlatUnit {
    fn table(
        &mut self,
        domain: DomainId,
    ) -> Result<&mut BTreeMap<u64, (Pfn<Hpa>, Perm)>, MapError> {
        self.tables.get_mut(&domain).ok_or(MapError::NoSuchDomain {
            domain: domain.get(),
        })
    }
}

impl RemapUnit for FlatUnit {
    const KIND: &'static str = "flat-test";

    fn caps(&self) -> InvalidationCaps {
        InvalidationCaps {
            page_selective: None,
            domain_selective: false,
            interface: InvalidationInterface::Register,
            flush_needs_quiesce: true,
        }
    }
    fn cost(&self) -> &CostModel {
        &self.cost
    }
    fn address_bits(&self) -> u8 {
        48
    }
    fn create_domain(&mut self, id: DomainId) -> Result<(), MapError> {
        if self.tables.insert(id, BTreeMap::new()).is_some() {
            return Err(MapError::DomainExists { domain: id.get() });
        }
        Ok(())
    }
    fn attach(&mut self, bdf: Bdf, domain: DomainId) -> Result<(), MapError> {
        self.table(domain)?;
        self.devices.insert(bdf, domain);
        Ok(())
    }
    fn detach(&mut self, bdf: Bdf) -> Result<(), MapError> {
        self.devices
            .remove(&bdf)
            .map(|_| ())
            .ok_or(MapError::NotAttached { bdf })
    }
    fn domain_of(&self, bdf: Bdf) -> Option<DomainId> {
        self.devices.get(&bdf).copied()
    }
    fn map_range(
        &mut self,
        domain: DomainId,
        iova: Pfn<Iova>,
        hpa: Pfn<Hpa>,
        pages: u64,
        perm: Perm,
    ) -> Result<(), MapError> {
        let t = self.table(domain)?;
        if let Some(p) = (0..pages).find(|i| t.contains_key(&(iova.get() + i))) {
            return Err(MapError::AlreadyMapped {
                iova: bytes(iova.get() + p),
            });
        }
        for i in 0..pages {
            t.insert(iova.get() + i, (hpa.add(i), perm));
        }
        self.stats.pte_sets += pages;
        Ok(())
    }
    fn unmap_range(
        &mut self,
        domain: DomainId,
        iova: Pfn<Iova>,
        pages: u64,
    ) -> Result<(), MapError> {
        let t = self.table(domain)?;
        if let Some(p) = (0..pages).find(|i| !t.contains_key(&(iova.get() + i))) {
            return Err(MapError::NotMapped {
                iova: bytes(iova.get() + p),
            });
        }
        for i in 0..pages {
            t.remove(&(iova.get() + i));
        }
        self.stats.pte_clears += pages;
        Ok(())
    }
    fn after_map(&mut self) {}
    fn invalidate(&mut self, reqs: &[InvRequest]) {
        for &r in reqs {
            assert_eq!(
                r,
                InvRequest::Global,
                "this unit can only flush its whole cache"
            );
            self.stats.inv_global += 1;
            self.cache.clear();
        }
    }
    fn translate(&mut self, bdf: Bdf, iova: Iova, access: Access) -> Result<Hpa, Fault> {
        self.stats.translations += 1;
        let fault = |reason| Fault {
            bdf,
            iova,
            access,
            reason,
        };
        let r = match self.devices.get(&bdf) {
            None => Err(fault(FaultReason::ContextNotPresent)),
            Some(&d) => {
                let page = iova.pfn(PAGE_4K).get();
                // The cache is consulted first: a cached translation outlives its table
                // entry until the next whole flush (the stale window flush policies close).
                let entry = match self.cache.get(&(d, page)) {
                    Some(&e) => Some(e),
                    None => self.tables[&d].get(&page).copied(),
                };
                match entry {
                    Some((frame, perm)) => {
                        self.cache.insert((d, page), (frame, perm));
                        if perm.allows(access) {
                            Ok(Hpa::new(
                                frame.base(PAGE_4K).get() | iova.page_offset(PAGE_4K),
                            ))
                        } else {
                            Err(fault(match access {
                                Access::Read => FaultReason::ReadDenied,
                                Access::Write => FaultReason::WriteDenied,
                            }))
                        }
                    }
                    None => Err(fault(FaultReason::NotPresent)),
                }
            }
        };
        if let Err(f) = r {
            self.stats.faults += 1;
            self.faults.record(f);
        }
        r
    }
    fn lookup(&self, domain: DomainId, iova: Pfn<Iova>) -> Option<(Pfn<Hpa>, Perm)> {
        self.tables.get(&domain)?.get(&iova.get()).copied()
    }
    fn cache_holds(&self, domain: DomainId, iova: Pfn<Iova>) -> bool {
        self.cache.contains_key(&(domain, iova.get()))
    }
    fn stats(&self) -> IommuStats {
        self.stats
    }
    fn cpu_cycles(&self) -> Cycles {
        Cycles::ZERO
    }
    fn device_cycles(&self) -> Cycles {
        Cycles::ZERO
    }
    fn faults(&self) -> &[Fault] {
        self.faults.records()
    }
    fn faults_dropped(&self) -> u64 {
        self.faults.dropped()
    }
    fn table_bytes(&self) -> u64 {
        self.tables.values().map(|t| t.len() as u64 * 8).sum()
    }
}
