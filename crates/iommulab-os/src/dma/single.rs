//! `dma_map_single`/`dma_unmap_single` (and their `_attrs` forms): one buffer, one IOVA
//! range, one device.

use super::{Device, DeviceHandle, DmaApi, DmaError, MapAttrs, MapBackend, MapKind, Translation};
use crate::flush::FlushPolicy;
use crate::iova::IovaAllocator;
use iommulab_base::addr::{CpuId, DmaDirection, Iova, PAGE_4K, PhysAddr};

impl<A: IovaAllocator, F: FlushPolicy, B: MapBackend> DmaApi<A, F, B> {
    /// `dma_map_single`: maps `len` bytes at `phys` for `dir`, on behalf of CPU `cpu`.
    pub fn map_single(
        &mut self,
        dev: DeviceHandle,
        cpu: CpuId,
        phys: B::Phys,
        len: u64,
        dir: DmaDirection,
    ) -> Result<Iova, DmaError> {
        self.map_single_attrs(
            dev,
            cpu,
            phys,
            len,
            MapAttrs {
                dir,
                dma_alloc: false,
            },
        )
    }

    /// `dma_map_single_attrs`: [`DmaApi::map_single`] with what the driver knows of the
    /// buffer ([`MapAttrs`]).
    pub fn map_single_attrs(
        &mut self,
        dev: DeviceHandle,
        cpu: CpuId,
        phys: B::Phys,
        len: u64,
        attrs: MapAttrs,
    ) -> Result<Iova, DmaError> {
        let r = self.map_single_inner(dev, cpu, phys, len, attrs);
        self.count(r.is_ok(), |s| s.maps += 1);
        r
    }

    fn map_single_inner(
        &mut self,
        dev: DeviceHandle,
        cpu: CpuId,
        phys: B::Phys,
        len: u64,
        attrs: MapAttrs,
    ) -> Result<Iova, DmaError> {
        let d = self.device(dev)?;
        Self::check_len(phys, len)?;
        let offset = phys.page_offset(PAGE_4K);
        let pages = PAGE_4K.pages_spanned(offset, len);
        let addr = match self.config.translation {
            Translation::Passthrough => Iova::new(phys.get()),
            Translation::Iommu | Translation::Identity => {
                let pfn = self.map_pages(cpu, d, phys.pfn(PAGE_4K), pages, attrs)?;
                Iova::new(pfn.base(PAGE_4K).get() | offset)
            }
        };
        let dir = attrs.dir;
        if let Some(dbg) = self.debug.as_mut() {
            if let Err(e) = dbg.check_map(dev.0, addr) {
                self.undo_map(cpu, d, addr, pages, attrs)?;
                return Err(e.into());
            }
            dbg.record_map(dev.0, addr, len, dir, MapKind::Single);
        }
        self.stats.exposed_bytes += pages * PAGE_4K.bytes() - len;
        if let Some(o) = self.oracle.as_mut() {
            o.on_map(dev.0, addr, len, pages);
        }
        Ok(addr)
    }

    /// Reverses a map that the checker refused (cannot happen unless the layer is buggy).
    fn undo_map(
        &mut self,
        cpu: CpuId,
        d: Device,
        addr: Iova,
        pages: u64,
        attrs: MapAttrs,
    ) -> Result<(), DmaError> {
        if self.config.translation != Translation::Passthrough {
            self.teardown(cpu, d, addr.pfn(PAGE_4K), pages, attrs, false)?;
        }
        Ok(())
    }

    /// `dma_unmap_single`.
    pub fn unmap_single(
        &mut self,
        dev: DeviceHandle,
        cpu: CpuId,
        addr: Iova,
        len: u64,
        dir: DmaDirection,
    ) -> Result<(), DmaError> {
        self.unmap_single_attrs(
            dev,
            cpu,
            addr,
            len,
            MapAttrs {
                dir,
                dma_alloc: false,
            },
        )
    }

    /// `dma_unmap_single_attrs`: [`DmaApi::unmap_single`] with the attributes of the map.
    pub fn unmap_single_attrs(
        &mut self,
        dev: DeviceHandle,
        cpu: CpuId,
        addr: Iova,
        len: u64,
        attrs: MapAttrs,
    ) -> Result<(), DmaError> {
        let r = self.unmap_single_inner(dev, cpu, addr, len, attrs);
        self.count(r.is_ok(), |s| s.unmaps += 1);
        r
    }

    fn unmap_single_inner(
        &mut self,
        dev: DeviceHandle,
        cpu: CpuId,
        addr: Iova,
        len: u64,
        attrs: MapAttrs,
    ) -> Result<(), DmaError> {
        let dir = attrs.dir;
        let d = self.device(dev)?;
        if len == 0 {
            return Err(DmaError::BadLength {
                phys: addr.get(),
                len,
            });
        }
        if let Some(dbg) = self.debug.as_mut() {
            dbg.check_unmap(dev.0, addr, len, dir, MapKind::Single)?;
        }
        let pages = PAGE_4K.pages_spanned(addr.page_offset(PAGE_4K), len);
        if self.config.translation != Translation::Passthrough {
            self.teardown(cpu, d, addr.pfn(PAGE_4K), pages, attrs, false)?;
        }
        if let Some(o) = self.oracle.as_mut() {
            o.on_unmap(dev.0, addr, pages);
        }
        Ok(())
    }
}
