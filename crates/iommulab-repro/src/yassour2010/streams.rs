//! The page-reference streams side by side (S1.9): each recording beside the generator that
//! stands in for it, and beside that generator set up as the recording was made (the
//! capture's own parameters: one stream, its socket buffer, TSO; the web server's file count,
//! sizes, popularity and one connection at a time), by the statistics the hit-rate curves
//! depend on: working set, maps per page, pages pinned at once, reuse distances, and the
//! share of maps that are receive buffers (the generators model the transmit path only).

use serde::Serialize;

use crate::ReproError as Error;
use iommulab::addr::{DmaDirection, Gpa};
use iommulab::mrc;
use iommulab::virt::PageRef;
use iommulab::workload::{DmaOp, Workload};

/// One stream's statistics (an entry of `results.json`'s `streams`).
#[derive(Clone, Debug, Serialize)]
pub struct StreamStats {
    /// `recorded-…`, a generator's name, or `… (as recorded)`.
    pub stream: String,
    /// What it is, in words.
    pub config: String,
    /// Page maps.
    pub page_maps: u64,
    /// Distinct pages mapped.
    pub working_set_pages: u64,
    /// Page maps per distinct page.
    pub maps_per_page: f64,
    /// Most pages mapped at once.
    pub max_pinned_pages: u64,
    /// Reuse distance (distinct pages mapped between two maps of a page) that half of the
    /// re-maps stay within: the smallest LRU quota that hits half of them.
    pub reuse_p50_pages: u64,
    /// The same for 90% of the re-maps.
    pub reuse_p90_pages: u64,
    /// Share of page maps that are receive buffers (the device writes them).
    pub rx_share: f64,
}

/// The statistics of `refs`, with `rx_share` from `w` (the same stream as a workload).
pub(crate) fn stats<W: Workload<Phys = Gpa>>(
    stream: &str,
    config: String,
    refs: &[PageRef],
    w: &mut W,
) -> Result<StreamStats, Error> {
    let seq = mrc::page_sequence(refs);
    let ws = mrc::distinct_pages(&seq);
    let curve = mrc::lru_one_pass(&seq, ws);
    let page_maps = curve.maps;
    let remaps = page_maps - ws as u64;
    // The smallest quota whose LRU hits reach `f` of the re-maps (every re-map hits at the
    // working set).
    let within = |f: f64| {
        curve
            .points
            .iter()
            .find(|p| p.hits as f64 >= f * remaps as f64)
            .map_or(ws as u64, |p| p.quota as u64)
    };
    let (mut rx, mut all) = (0u64, 0u64);
    while let Some(op) = w.next_op()? {
        let (dir, pages) = match op {
            DmaOp::Map { phys, len, dir, .. } => (dir, pages(phys.get(), len)),
            DmaOp::MapSg { dir, .. } => (
                dir,
                w.sg_segments()
                    .iter()
                    .map(|s| pages(s.phys.get(), s.len))
                    .sum(),
            ),
            _ => continue,
        };
        all += pages;
        if dir == DmaDirection::FromDevice {
            rx += pages;
        }
    }
    Ok(StreamStats {
        stream: stream.into(),
        config,
        page_maps,
        working_set_pages: ws as u64,
        maps_per_page: page_maps as f64 / ws.max(1) as f64,
        max_pinned_pages: mrc::max_pinned(refs),
        reuse_p50_pages: within(0.5),
        reuse_p90_pages: within(0.9),
        rx_share: rx as f64 / all.max(1) as f64,
    })
}

/// The 4 KiB pages a buffer spans, as the page-reference stream counts them.
fn pages(phys: u64, len: u64) -> u64 {
    let r = iommulab::trace::pages::pages(phys, len);
    r.end() - r.start() + 1
}

#[cfg(test)]
mod tests {
    use super::*;
    use iommulab::addr::Pfn;
    use iommulab::testing::ops::{OpsWorkload, map_op};

    /// Pages 1 2 3 1 2 3 4 1: re-maps of 1, 2, 3 at distance 3 and of 1 at distance 4 (4
    /// distinct pages between), so half the re-maps fit in 3 pages and 90% need 4; one of
    /// the three buffers is a receive buffer of 2 pages out of 6 mapped.
    #[test]
    fn reuse_distances_and_receive_share() {
        let refs: Vec<PageRef> = [1u64, 2, 3, 1, 2, 3, 4, 1]
            .iter()
            .flat_map(|&g| [PageRef::Map(Pfn::new(g)), PageRef::Unmap(Pfn::new(g))])
            .collect();
        let map = |slot, phys: u64, len, dir| map_op(slot, Gpa::new(phys), len, dir);
        let mut w = OpsWorkload::new(vec![
            map(0, 0x1000, 4096, DmaDirection::ToDevice),
            map(1, 0x2800, 4096, DmaDirection::FromDevice),
            map(2, 0x5000, 3 * 4096, DmaDirection::ToDevice),
        ]);
        let s = stats("t", "test".into(), &refs, &mut w).unwrap();
        assert_eq!((s.page_maps, s.working_set_pages), (8, 4));
        assert_eq!((s.reuse_p50_pages, s.reuse_p90_pages), (3, 4));
        assert_eq!(s.max_pinned_pages, 1);
        assert!((s.rx_share - 2.0 / 6.0).abs() < 1e-12);
        assert!((s.maps_per_page - 2.0).abs() < 1e-12);
    }
}
