//! Intra-guest protection (S1.11): after the driver unmaps, the device probes the pages
//! through the host IOMMU; which strategies leave them reachable.

use serde::Serialize;

use super::Spec;
use crate::ReproError as Error;
use crate::Steps;
use iommulab::virt::{CacheOnly, GuestConfig, Strategy};

/// One row of the protection table.
#[derive(Clone, Debug, Serialize)]
pub struct Protection {
    /// The mapping strategy.
    pub strategy: String,
    /// What the map cache may cache (`all`, `read-only`, `dma-allocated (skb heads)`).
    pub cache_only: String,
    /// Quota in pages.
    pub quota: u64,
    /// Hits / page maps.
    pub hit_rate: f64,
    /// Hypercalls.
    pub hypercalls: u64,
    /// Modeled mapping CPU utilisation.
    pub cpu_utilization: f64,
    /// Device accesses that succeeded after the driver's unmap.
    pub stale_accesses: u64,
    /// Of those, writes.
    pub stale_writes: u64,
}

/// The strategies and relaxations compared (S1.11), with the table's label.
pub(crate) const CASES: [(Strategy, CacheOnly, &str); 6] = [
    (Strategy::SingleUse, CacheOnly::All, "all"),
    (Strategy::Shared, CacheOnly::All, "all"),
    (Strategy::Direct, CacheOnly::All, "all"),
    (Strategy::OnDemand, CacheOnly::All, "all"),
    (Strategy::OnDemand, CacheOnly::ReadOnly, "read-only"),
    (
        Strategy::OnDemand,
        CacheOnly::DmaAllocated,
        "dma-allocated (skb heads)",
    ),
];

/// The protection table at half the working set (at least the pinned pages).
pub(crate) fn table(
    spec: &Spec,
    ws: u64,
    pinned: u64,
    steps: &mut Steps<'_, '_>,
) -> Result<Vec<Protection>, Error> {
    let half = (ws / 2).max(pinned).max(1);
    let mut out = Vec::new();
    for (s, only, label) in CASES {
        steps.start(|| format!("{}: protection, {} ({label})", spec.name(), s.name()))?;
        let cfg = GuestConfig {
            strategy: s,
            quota: half,
            cache_only: only,
            ..super::guest_base()
        };
        // Memory allocated for DMA exists only in a driver changed to set it aside.
        let r = if only == CacheOnly::DmaAllocated {
            spec.with_heads_allocated_for_dma().run(&cfg, None)?
        } else {
            spec.run(&cfg, None)?
        };
        out.push(Protection {
            strategy: s.name().into(),
            cache_only: label.into(),
            quota: half,
            hit_rate: r.hit_rate,
            hypercalls: r.hypercalls,
            cpu_utilization: r.cpu_utilization,
            stale_accesses: r.stale_accesses,
            stale_writes: r.stale_writes,
        });
    }
    Ok(out)
}
