//! The IOMMU page-table layer of a trace's statistics: `iommu:map` and `iommu:unmap`
//! records (device [`super::ftrace::IOMMU_DEVICE`]), what the IOMMU driver wrote into the I/O
//! page tables.
//!
//! These records are page-table operations, not DMA-API calls: one `dma_map_sg` can become
//! several `iommu:map`s (one per merged run of segments) and one `iommu:unmap` for the whole
//! IOVA range, and a flush queue may unmap long after the driver did. So the layer is counted
//! by 4 KiB IOVA page, not matched call by call: a map makes the pages of `[iova, iova +
//! size)` mapped, an unmap makes those of its range unmapped. A page an unmap covers that no
//! map in the trace mapped (mapped before tracing began, or a range the driver rounded) is
//! counted in `unmapped_pages_not_mapped`; a map of a page already mapped in
//! `remapped_pages`.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use super::pages::pages;
use super::stats::Log2Histogram;
use super::{Event, EventKind};
use crate::page_ids::PageSet;

/// The IOMMU page-table layer (module doc for the definitions).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct IommuLayerStats {
    /// Records of the layer.
    pub events: u64,
    /// `iommu:map` records.
    pub map_events: u64,
    /// `iommu:unmap` records.
    pub unmap_events: u64,
    /// Sum of the maps' sizes.
    pub bytes_mapped: u64,
    /// Sum of the unmaps' sizes.
    pub bytes_unmapped: u64,
    /// 4 KiB IOVA pages the maps covered (a page per map that covers it).
    pub pages_mapped: u64,
    /// 4 KiB IOVA pages the unmaps covered.
    pub pages_unmapped: u64,
    /// Distinct 4 KiB IOVA pages ever mapped.
    pub distinct_iova_pages: u64,
    /// Distinct 4 KiB physical pages ever mapped.
    pub distinct_phys_pages: u64,
    /// Most IOVA pages mapped at once.
    pub max_mapped_pages: u64,
    /// IOVA pages still mapped at the end.
    pub mapped_pages_at_end: u64,
    /// Pages an unmap covered that were not mapped (mapped before the trace began, ...).
    pub unmapped_pages_not_mapped: u64,
    /// Pages a map covered that were already mapped.
    pub remapped_pages: u64,
    /// Map sizes, log2 buckets of bytes.
    pub map_size: Log2Histogram,
}

/// Accumulates [`IommuLayerStats`] record by record.
#[derive(Debug, Default)]
pub(crate) struct IommuLayer {
    s: IommuLayerStats,
    live: PageSet,
    iovas: PageSet,
    phys: PageSet,
}

impl IommuLayer {
    /// Counts one record of the `iommu` device (kinds other than map and unmap only count
    /// as records).
    pub(crate) fn event(&mut self, e: &Event) {
        self.s.events += 1;
        let Some(iova) = e.dma else { return };
        match e.kind {
            EventKind::Map => {
                self.s.map_events += 1;
                self.s.bytes_mapped = self.s.bytes_mapped.saturating_add(e.len);
                self.s.map_size.add(e.len);
                let r = pages(iova, e.len);
                let (first, end) = (*r.start(), r.end() + 1);
                self.s.pages_mapped += end - first;
                self.iovas.insert_run(first, end);
                self.s.remapped_pages += end - first - self.live.insert_run(first, end);
                if let Some(phys) = e.phys {
                    let r = pages(phys, e.len);
                    self.phys.insert_run(*r.start(), r.end() + 1);
                }
                self.s.max_mapped_pages = self.s.max_mapped_pages.max(self.live.len());
            }
            EventKind::Unmap => {
                self.s.unmap_events += 1;
                self.s.bytes_unmapped = self.s.bytes_unmapped.saturating_add(e.len);
                let r = pages(iova, e.len);
                let (first, end) = (*r.start(), r.end() + 1);
                self.s.pages_unmapped += end - first;
                self.s.unmapped_pages_not_mapped += end - first - self.live.remove_run(first, end);
            }
            _ => {}
        }
    }

    /// The statistics.
    pub(crate) fn finish(self) -> IommuLayerStats {
        let mut s = self.s;
        s.distinct_iova_pages = self.iovas.len();
        s.distinct_phys_pages = self.phys.len();
        s.mapped_pages_at_end = self.live.len();
        s
    }
}

impl IommuLayerStats {
    /// The layer's section of `iommulab trace stats`.
    pub fn to_table(&self) -> String {
        let mut t = String::from(
            "\nIOMMU page-table layer (iommu:map/unmap records: what the IOMMU driver wrote; \
             the same buffers as the DMA API layer, counted by 4 KiB IOVA page)\n",
        );
        let mut row = |k: &str, v: String| {
            let _ = writeln!(t, "  {k:<24} {v}");
        };
        row("map records", self.map_events.to_string());
        row("unmap records", self.unmap_events.to_string());
        row("bytes mapped", self.bytes_mapped.to_string());
        row("bytes unmapped", self.bytes_unmapped.to_string());
        row("pages mapped", self.pages_mapped.to_string());
        row("pages unmapped", self.pages_unmapped.to_string());
        row("distinct iova pages", self.distinct_iova_pages.to_string());
        row("distinct phys pages", self.distinct_phys_pages.to_string());
        row("max mapped pages", self.max_mapped_pages.to_string());
        row("mapped pages at end", self.mapped_pages_at_end.to_string());
        row(
            "unmapped, not mapped",
            format!("{} pages", self.unmapped_pages_not_mapped),
        );
        row("remapped", format!("{} pages", self.remapped_pages));
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(kind: EventKind, iova: u64, phys: Option<u64>, len: u64) -> Event {
        let mut e = Event::new(kind);
        (e.dma, e.phys, e.len) = (Some(iova), phys, len);
        e
    }

    #[test]
    fn pages_are_counted_by_iova_not_matched_by_call() {
        let mut l = IommuLayer::default();
        // Two maps (2 pages, then 1 page), one unmap covering all three, one unmap of a page
        // never mapped, and a map of a page already mapped.
        l.event(&ev(EventKind::Map, 0x10_000, Some(0x5000), 8192));
        l.event(&ev(EventKind::Map, 0x12_000, Some(0x9000), 4096));
        l.event(&ev(EventKind::Map, 0x12_000, Some(0x9000), 4096));
        l.event(&ev(EventKind::Unmap, 0x10_000, None, 3 * 4096));
        l.event(&ev(EventKind::Unmap, 0x40_000, None, 4096));
        let s = l.finish();
        assert_eq!((s.events, s.map_events, s.unmap_events), (5, 3, 2));
        assert_eq!((s.pages_mapped, s.pages_unmapped), (4, 4));
        assert_eq!((s.distinct_iova_pages, s.distinct_phys_pages), (3, 3));
        assert_eq!((s.max_mapped_pages, s.mapped_pages_at_end), (3, 0));
        assert_eq!((s.unmapped_pages_not_mapped, s.remapped_pages), (1, 1));
        assert_eq!(s.bytes_mapped, 16_384);
        assert!(s.to_table().contains("pages mapped"));
    }
}
