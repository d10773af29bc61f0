//! Figures 5–6 (S1.9): modeled mapping CPU vs quota, from full guest runs (hypercalls,
//! host bookkeeping, VT-d PTE writes, write-buffer flushes and IOTLB invalidations, costs
//! `kvm-2010`, S1.10).

use std::sync::Arc;

use serde::Serialize;

use super::{Spec, check_failed, round_quota};
use crate::Error;
use crate::repro::Steps;
use crate::virt::{Batching, EvictionConfig, GuestConfig, Lookahead, Strategy};

/// Map-cache points of a CPU curve (plus one for 50% of the working set).
pub const CPU_POINTS: u64 = 20;

/// One series of Figures 5–6.
#[derive(Clone, Debug, Serialize)]
pub struct CpuCurve {
    /// `lru`, `piggyback`, `prefetch` or `batching`.
    pub series: String,
    /// The eviction policy.
    pub eviction: String,
    /// The hypercall batching.
    pub batching: String,
    /// `sg` (a packet is one scatter-gather list) or `per-fragment`.
    pub mapping: String,
    /// Per point: `single-use` for the first ("no caching allowed", quota 0), then
    /// `on-demand` from the minimal quota to the working set.
    pub strategy: Vec<String>,
    /// Quota as a fraction of the working set, per point.
    pub quota_fraction: Vec<f64>,
    /// Quota in pages, per point.
    pub quota_pages: Vec<u64>,
    /// Modeled mapping CPU utilisation ([`super::CPU_FORMULA`]).
    pub cpu_utilization: Vec<f64>,
    /// Hits / page maps.
    pub hit_rate: Vec<f64>,
    /// Refused maps (0 at every point: checked).
    pub refused: Vec<u64>,
    /// Hypercalls.
    pub hypercalls: Vec<u64>,
    /// Pages per hypercall.
    pub pages_per_hypercall: Vec<f64>,
    /// Modeled mapping cycles per page map.
    pub cycles_per_map: Vec<f64>,
    /// Page maps of the run (hits + misses + refused).
    pub page_maps: Vec<u64>,
    /// Page-selective IOTLB invalidations (one per PTE cleared).
    pub iotlb_invalidations: Vec<u64>,
}

/// A series of Figures 5–6 (S1.9).
struct Series {
    name: &'static str,
    eviction: EvictionConfig,
    batching: Batching,
    /// Whether the driver maps a packet as one sg list (S1.6).
    sg: bool,
}

fn series() -> [Series; 4] {
    [
        Series {
            name: "lru",
            eviction: EvictionConfig::Lru(Default::default()),
            batching: Batching::None,
            sg: false,
        },
        Series {
            name: "piggyback",
            eviction: EvictionConfig::Lru(Default::default()),
            batching: Batching::Piggyback,
            sg: false,
        },
        Series {
            name: "prefetch",
            eviction: EvictionConfig::Prefetch(Default::default()),
            batching: Batching::None,
            sg: false,
        },
        Series {
            name: "batching",
            eviction: EvictionConfig::Lru(Default::default()),
            batching: Batching::MapUnmap,
            sg: true,
        },
    ]
}

/// Integer quotas from `lo` to `hi`, about `CPU_POINTS + 1` of them, and `half` (50% of
/// the working set) when it is at least `lo`.
fn cpu_quotas(lo: u64, hi: u64, half: u64) -> Vec<u64> {
    let hi = hi.max(lo);
    let mut q: Vec<u64> = (0..=CPU_POINTS)
        .map(|i| lo + ((hi - lo) * i + CPU_POINTS / 2) / CPU_POINTS)
        .collect();
    if (lo..=hi).contains(&half) {
        q.push(half);
    }
    q.sort_unstable();
    q.dedup();
    q
}

/// The points of every curve: no caching, then the map cache from the minimal quota.
fn points(pinned: u64, ws: u64) -> Vec<(Strategy, u64)> {
    // The paper's left end, "minimal quota (i.e., no caching allowed)" (S1.9): every page
    // map is a map request and every unmap an unmap request (`single-use`), packed into
    // hypercalls by the series' batching; then the map cache from the minimal quota (the
    // most pages pinned at once) to the working set.
    std::iter::once((Strategy::SingleUse, 0))
        .chain(
            cpu_quotas(pinned, ws, round_quota(0.5, ws))
                .into_iter()
                .map(|q| (Strategy::OnDemand, q)),
        )
        .collect()
}

/// Progress steps of [`curves`]: one guest run per point of each series.
pub(crate) fn steps(pinned: u64, ws: u64) -> u64 {
    (series().len() * points(pinned, ws).len()) as u64
}

/// Every series' curve for `spec`.
pub(crate) fn curves(
    spec: &Spec,
    ws: u64,
    pinned: u64,
    la: &Arc<Lookahead>,
    steps: &mut Steps<'_, '_>,
) -> Result<Vec<CpuCurve>, Error> {
    let base = GuestConfig {
        protection_oracle: false,
        ..GuestConfig::default()
    };
    let sg = spec.with_sg();
    let workload = spec.name();
    let mut out = Vec::new();
    for s in series() {
        let name = s.name;
        let mut c = CpuCurve {
            series: name.into(),
            eviction: s.eviction.name().into(),
            batching: s.batching.name().into(),
            mapping: if s.sg { "sg" } else { "per-fragment" }.into(),
            strategy: Vec::new(),
            quota_fraction: Vec::new(),
            quota_pages: Vec::new(),
            cpu_utilization: Vec::new(),
            hit_rate: Vec::new(),
            refused: Vec::new(),
            hypercalls: Vec::new(),
            pages_per_hypercall: Vec::new(),
            cycles_per_map: Vec::new(),
            page_maps: Vec::new(),
            iotlb_invalidations: Vec::new(),
        };
        for (strategy, q) in points(pinned, ws) {
            steps.start(|| match strategy {
                Strategy::SingleUse => format!("{workload}: cpu {name}, no caching"),
                _ => format!("{workload}: cpu {name} @{q} p"),
            })?;
            let cfg = GuestConfig {
                strategy,
                quota: q,
                eviction: s.eviction.clone(),
                batching: s.batching,
                ..base.clone()
            };
            let w = if s.sg { &sg } else { spec };
            let r = w.run(&cfg, s.eviction.is_offline().then(|| la.clone()))?;
            if r.refused != 0 {
                return Err(check_failed(format!(
                    "{workload}: {name} refused {} maps at quota {q} ≥ the most pages pinned ({pinned})",
                    r.refused
                )));
            }
            if strategy == Strategy::SingleUse && r.hits != 0 {
                return Err(check_failed(format!(
                    "{workload}: {name} hit {} page maps with no caching",
                    r.hits
                )));
            }
            c.strategy.push(strategy.name().into());
            c.quota_fraction.push(q as f64 / ws.max(1) as f64);
            c.quota_pages.push(q);
            c.cpu_utilization.push(r.cpu_utilization);
            c.hit_rate.push(r.hit_rate);
            c.refused.push(r.refused);
            c.hypercalls.push(r.hypercalls);
            c.pages_per_hypercall.push(r.pages_per_hypercall);
            c.cycles_per_map.push(r.cycles_per_map);
            c.page_maps.push(r.maps);
            c.iotlb_invalidations.push(r.iotlb_invalidations);
        }
        out.push(c);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_quotas_span_minimal_to_working_set_with_the_half() {
        let q = cpu_quotas(10, 110, 55);
        assert_eq!(q.first(), Some(&10));
        assert_eq!(q.last(), Some(&110));
        assert!(q.contains(&55));
        assert_eq!(q.len(), 21); // 5-page steps, 55 among them
        // Below the minimal quota, 50% is left out.
        assert!(!cpu_quotas(66, 70, 35).contains(&35));
        let p = points(66, 70);
        assert_eq!(p[0], (Strategy::SingleUse, 0));
        assert_eq!(steps(66, 70), 4 * p.len() as u64);
    }
}
