//! A device's own accesses through the unit: a read or write of a DMA address, and the probe
//! of pages the driver has unmapped (what a malicious device tries; the stale-access oracle
//! classifies each).

use super::{DeviceHandle, DmaApi, DmaError, MapBackend, Translation};
use crate::device::AccessOutcome;
use crate::flush::FlushPolicy;
use crate::iova::IovaAllocator;
use iommulab_base::addr::{Access, Iova, PAGE_4K};

impl<A: IovaAllocator, F: FlushPolicy, B: MapBackend> DmaApi<A, F, B> {
    /// The device behind `dev` reads or writes `len` bytes at DMA address `addr`, one
    /// translation per page touched. The oracle classifies each page access.
    pub fn device_access(
        &mut self,
        dev: DeviceHandle,
        addr: Iova,
        len: u64,
        access: Access,
    ) -> Result<AccessOutcome, DmaError> {
        let d = match self.devices.get(usize::from(dev.0)) {
            Some(d) => *d,
            None => return Err(DmaError::NoSuchDevice(dev.0)),
        };
        let mut out = AccessOutcome::default();
        let pages = PAGE_4K.pages_spanned(addr.page_offset(PAGE_4K), len.max(1));
        for i in 0..pages {
            let page_addr = if i == 0 {
                addr
            } else {
                addr.pfn(PAGE_4K).add(i).base(PAGE_4K)
            };
            let ok = match self.config.translation {
                Translation::Passthrough => true,
                Translation::Iommu | Translation::Identity => {
                    self.backend.translate(d.bdf, page_addr, access).is_ok()
                }
            };
            if let Some(o) = self.oracle.as_mut() {
                o.classify(dev.0, page_addr, ok, &mut out);
            } else if ok {
                out.succeeded += 1;
            } else {
                out.faulted += 1;
            }
        }
        Ok(out)
    }

    /// After an unmap, the device behind `dev` tries to read and then to write the page
    /// holding `addr` (S1.11's protection check). `None` when a live mapping still covers
    /// the page (no access is made); otherwise whether each access went through the IOMMU.
    /// With the oracle on, each access is classified (one that went through is stale).
    pub fn probe_unmapped(
        &mut self,
        dev: DeviceHandle,
        addr: Iova,
    ) -> Result<Option<(bool, bool)>, DmaError> {
        let d = match self.devices.get(usize::from(dev.0)) {
            Some(d) => *d,
            None => return Err(DmaError::NoSuchDevice(dev.0)),
        };
        if self.oracle.as_ref().is_some_and(|o| o.is_live(dev.0, addr)) {
            return Ok(None);
        }
        let mut through = [true; 2];
        for (ok, access) in through.iter_mut().zip([Access::Read, Access::Write]) {
            if self.config.translation != Translation::Passthrough {
                *ok = self.backend.translate(d.bdf, addr, access).is_ok();
            }
            if let Some(o) = self.oracle.as_mut() {
                o.classify_unmapped(*ok, &mut AccessOutcome::default());
            }
        }
        Ok(Some((through[0], through[1])))
    }
}
