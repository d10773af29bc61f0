//! Deliberately simple oracles for the clever structures.
//!
//! [`NaiveTable`] is a `HashMap` from 4 KiB I/O page to `(frame, permission)`: the
//! observable behaviour of one domain's second-level page table (S0.1) without levels,
//! super-pages or caches. Property tests drive the same operations through it and through
//! [`crate::hw::Vtd`] and compare after every step.

use std::collections::HashMap;

use crate::addr::{Access, Hpa, Iova, PAGE_4K, Perm, Pfn};
use crate::hw::{FaultReason, MapError};

/// One domain's mappings as a flat map of 4 KiB pages.
#[derive(Debug, Clone, Default)]
pub struct NaiveTable {
    pages: HashMap<Pfn<Iova>, (Pfn<Hpa>, Perm)>,
}

impl NaiveTable {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of mapped pages.
    pub fn len(&self) -> usize {
        self.pages.len()
    }

    /// Whether nothing is mapped.
    pub fn is_empty(&self) -> bool {
        self.pages.is_empty()
    }

    /// Maps `[iova, iova + pages)` → `[hpa, hpa + pages)`; fails with the lowest mapped page
    /// (as a byte address, like [`MapError::AlreadyMapped`]) and changes nothing.
    pub fn map(
        &mut self,
        iova: Pfn<Iova>,
        hpa: Pfn<Hpa>,
        pages: u64,
        perm: Perm,
    ) -> Result<(), MapError> {
        if let Some(p) = (0..pages)
            .map(|i| iova.add(i))
            .find(|p| self.pages.contains_key(p))
        {
            return Err(MapError::AlreadyMapped {
                iova: p.base(PAGE_4K).get(),
            });
        }
        for i in 0..pages {
            self.pages.insert(iova.add(i), (hpa.add(i), perm));
        }
        Ok(())
    }

    /// Unmaps `[iova, iova + pages)`; fails with the lowest unmapped page and changes nothing.
    pub fn unmap(&mut self, iova: Pfn<Iova>, pages: u64) -> Result<(), MapError> {
        if let Some(p) = (0..pages)
            .map(|i| iova.add(i))
            .find(|p| !self.pages.contains_key(p))
        {
            return Err(MapError::NotMapped {
                iova: p.base(PAGE_4K).get(),
            });
        }
        for i in 0..pages {
            self.pages.remove(&iova.add(i));
        }
        Ok(())
    }

    /// The frame and permission of page `iova`.
    pub fn lookup(&self, iova: Pfn<Iova>) -> Option<(Pfn<Hpa>, Perm)> {
        self.pages.get(&iova).copied()
    }

    /// What an up-to-date (never stale) IOMMU does with `access` at `iova`.
    pub fn translate(&self, iova: Iova, access: Access) -> Result<Hpa, FaultReason> {
        let (frame, perm) = self
            .lookup(iova.pfn(PAGE_4K))
            .ok_or(FaultReason::NotPresent)?;
        if !perm.allows(access) {
            return Err(match access {
                Access::Read => FaultReason::ReadDenied,
                Access::Write => FaultReason::WriteDenied,
            });
        }
        Ok(Hpa::new(
            frame.base(PAGE_4K).get() | iova.page_offset(PAGE_4K),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn naive_table_maps_unmaps_and_reports_first_conflict() {
        let mut t = NaiveTable::new();
        t.map(Pfn::new(4), Pfn::new(40), 4, Perm::Read).unwrap();
        assert_eq!(
            t.map(Pfn::new(2), Pfn::new(0), 3, Perm::Read),
            Err(MapError::AlreadyMapped { iova: 0x4000 })
        );
        assert_eq!(
            t.unmap(Pfn::new(6), 3),
            Err(MapError::NotMapped { iova: 0x8000 })
        );
        assert_eq!(
            t.translate(Iova::new(0x5abc), Access::Read),
            Ok(Hpa::new(0x29abc))
        );
        assert_eq!(
            t.translate(Iova::new(0x5abc), Access::Write),
            Err(FaultReason::WriteDenied)
        );
        t.unmap(Pfn::new(4), 4).unwrap();
        assert!(t.is_empty());
    }
}
