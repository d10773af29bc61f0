//! `dma_map_sg`/`dma_unmap_sg`: a scatter-gather list mapped into one contiguous IOVA range,
//! as intel-iommu does.

use super::{DeviceHandle, DmaApi, DmaError, MapAttrs, MapBackend, MapKind, SgEntry, Translation};
use crate::flush::FlushPolicy;
use crate::iova::IovaAllocator;
use iommulab_base::addr::{CpuId, DmaDirection, Iova, PAGE_4K, Pfn, PhysAddr};

impl<A: IovaAllocator, F: FlushPolicy, B: MapBackend> DmaApi<A, F, B> {
    /// `dma_map_sg`: maps every segment into one contiguous IOVA range (as intel-iommu does)
    /// and fills each entry's `dma`. Returns the number of entries mapped.
    pub fn map_sg(
        &mut self,
        dev: DeviceHandle,
        cpu: CpuId,
        sg: &mut [SgEntry<B::Phys>],
        dir: DmaDirection,
    ) -> Result<usize, DmaError> {
        let r = self.map_sg_inner(dev, cpu, sg, dir);
        self.count(r.is_ok(), |s| s.map_sgs += 1);
        r
    }

    fn sg_pages(sg: &[SgEntry<B::Phys>]) -> u64 {
        sg.iter()
            .map(|e| PAGE_4K.pages_spanned(e.phys.page_offset(PAGE_4K), e.len))
            .sum()
    }

    fn map_sg_inner(
        &mut self,
        dev: DeviceHandle,
        cpu: CpuId,
        sg: &mut [SgEntry<B::Phys>],
        dir: DmaDirection,
    ) -> Result<usize, DmaError> {
        let d = self.device(dev)?;
        let attrs = MapAttrs {
            dir,
            dma_alloc: false,
        };
        if sg.is_empty() {
            return Err(DmaError::EmptyScatterlist);
        }
        for e in sg.iter() {
            Self::check_len(e.phys, e.len)?;
        }
        let total_pages = Self::sg_pages(sg);
        match self.config.translation {
            Translation::Passthrough => {
                for e in sg.iter_mut() {
                    e.dma = Iova::new(e.phys.get());
                }
            }
            Translation::Iommu => {
                let base = self.alloc_iova(cpu, d, total_pages)?;
                let mut next = base;
                for entry in sg.iter_mut() {
                    let e = *entry;
                    let pages = PAGE_4K.pages_spanned(e.phys.page_offset(PAGE_4K), e.len);
                    if let Err(err) = self.backend.map(
                        d.domain,
                        next,
                        e.phys.pfn(PAGE_4K),
                        pages,
                        dir.perm(),
                        attrs,
                    ) {
                        // Undo the segments already mapped; nothing was used yet, so no flush.
                        let done = next.pages_since(base).unwrap_or(0);
                        if done > 0 {
                            self.backend
                                .unmap(d.domain, base, done, attrs)
                                .map_err(Self::backend_error)?;
                        }
                        self.iovas[Self::slot(d.domain)].free(cpu, base, total_pages)?;
                        return Err(Self::backend_error(err));
                    }
                    entry.dma = Iova::new(next.base(PAGE_4K).get() | e.phys.page_offset(PAGE_4K));
                    next = next.add(pages);
                }
                self.backend.after_map().map_err(Self::backend_error)?;
                self.stats.pages_mapped += total_pages;
            }
            Translation::Identity => {
                // Each segment at its own address; the backend sees the list as one call
                // (a guest batches it into one hypercall, S1.6) and maps all or nothing.
                let mut mapped = Ok(());
                for e in sg.iter_mut() {
                    let pfn = e.phys.pfn(PAGE_4K);
                    let pages = PAGE_4K.pages_spanned(e.phys.page_offset(PAGE_4K), e.len);
                    e.dma = Iova::new(e.phys.get());
                    mapped = self.backend.map(
                        d.domain,
                        Pfn::new(pfn.get()),
                        pfn,
                        pages,
                        dir.perm(),
                        attrs,
                    );
                    if mapped.is_err() {
                        break;
                    }
                }
                mapped
                    .and_then(|()| self.backend.after_map())
                    .map_err(Self::backend_error)?;
                self.stats.pages_mapped += total_pages;
            }
        }
        let len_total: u64 = sg.iter().map(|e| e.len).sum();
        if let Some(dbg) = self.debug.as_mut() {
            dbg.record_map(
                dev.0,
                sg[0].dma,
                len_total,
                dir,
                MapKind::Sg { nents: sg.len() },
            );
        }
        self.stats.exposed_bytes += total_pages * PAGE_4K.bytes() - len_total;
        if let Some(o) = self.oracle.as_mut() {
            for e in sg.iter() {
                o.on_map(
                    dev.0,
                    e.dma,
                    e.len,
                    PAGE_4K.pages_spanned(e.dma.page_offset(PAGE_4K), e.len),
                );
            }
        }
        Ok(sg.len())
    }

    /// `dma_unmap_sg`: unmaps what `map_sg` mapped for the same list.
    pub fn unmap_sg(
        &mut self,
        dev: DeviceHandle,
        cpu: CpuId,
        sg: &[SgEntry<B::Phys>],
        dir: DmaDirection,
    ) -> Result<(), DmaError> {
        let r = self.unmap_sg_inner(dev, cpu, sg, dir);
        self.count(r.is_ok(), |s| s.unmap_sgs += 1);
        r
    }

    fn unmap_sg_inner(
        &mut self,
        dev: DeviceHandle,
        cpu: CpuId,
        sg: &[SgEntry<B::Phys>],
        dir: DmaDirection,
    ) -> Result<(), DmaError> {
        let d = self.device(dev)?;
        let attrs = MapAttrs {
            dir,
            dma_alloc: false,
        };
        let Some(first) = sg.first() else {
            return Err(DmaError::EmptyScatterlist);
        };
        let len_total: u64 = sg.iter().map(|e| e.len).sum();
        if let Some(dbg) = self.debug.as_mut() {
            dbg.check_unmap(
                dev.0,
                first.dma,
                len_total,
                dir,
                MapKind::Sg { nents: sg.len() },
            )?;
        }
        match self.config.translation {
            Translation::Passthrough => {}
            Translation::Iommu => {
                let pages = Self::sg_pages(sg);
                self.teardown(cpu, d, first.dma.pfn(PAGE_4K), pages, attrs, true)?;
            }
            Translation::Identity => {
                for e in sg {
                    let pages = PAGE_4K.pages_spanned(e.phys.page_offset(PAGE_4K), e.len);
                    self.backend
                        .unmap(d.domain, e.dma.pfn(PAGE_4K), pages, attrs)
                        .map_err(Self::backend_error)?;
                }
                self.backend.after_unmap().map_err(Self::backend_error)?;
            }
        }
        if let Some(o) = self.oracle.as_mut() {
            for e in sg {
                o.on_unmap(
                    dev.0,
                    e.dma,
                    PAGE_4K.pages_spanned(e.dma.page_offset(PAGE_4K), e.len),
                );
            }
        }
        Ok(())
    }
}
