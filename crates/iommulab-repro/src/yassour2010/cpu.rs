//! Figures 5–6 (S1.9): CPU utilisation and throughput vs quota, from full guest runs
//! (hypercalls, host bookkeeping per call and per page, VT-d PTE writes, write-buffer
//! flushes and IOTLB invalidations, costs `kvm-2010`, S1.10) and the guest's CPU and link
//! ([`iommulab::virt::link`]: throughput = min(link, what the CPU can feed), utilisation ≤ 1).
//! The curves run on a generator or on a recorded trace (the recordings of
//! [`super::recorded`]) alike.

use serde::Serialize;

use super::{check_failed, round_quota};
use crate::ReproError as Error;
use crate::Steps;
use iommulab::virt::{
    Batching, EvictionConfig, GuestConfig, GuestResult, InvalidationScope, Strategy, link_load,
};

/// How the guest's driver hands a series' maps to the DMA API.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DriverMapping {
    /// As the driver is: one call per piece (a packet's head, each fragment, each receive
    /// buffer).
    PerFragment,
    /// S1.6's batching driver change: "when a large buffer with multiple pages is mapped for
    /// DMA, the driver calls dma_map_single several times", uses none of the mappings until
    /// the sequence is done, and so can map it with one hypercall; a NIC's large buffer is a
    /// packet (e1000's transmit map loop maps its head and fragments piece by piece). On a
    /// generator the packet is known; on a recording it is a run of back-to-back transmit
    /// maps of one CPU (which can hold several packets sent back to back).
    PerPacket,
    /// An extension, not the paper's: every run of back-to-back maps as one list, a
    /// receive-ring refill's separate buffers included.
    Runs,
}

impl DriverMapping {
    /// The name in `results.json` and the tables.
    pub(crate) fn name(self) -> &'static str {
        match self {
            DriverMapping::PerFragment => "per-fragment",
            DriverMapping::PerPacket => "per-packet",
            DriverMapping::Runs => "runs",
        }
    }
}

/// A workload the CPU curves can run, with its driver mapping as a series asks.
pub(crate) trait CpuWorkload {
    /// The series label.
    fn label(&self) -> &str;
    /// One guest run under `cfg` with the driver mapping `m`.
    fn run_cpu(&self, cfg: &GuestConfig, m: DriverMapping) -> Result<GuestResult, Error>;
}

/// Map-cache points of a CPU curve (plus one for 50% of the working set).
pub const CPU_POINTS: u64 = 20;

/// One series of Figures 5–6.
#[derive(Clone, Debug, Serialize)]
pub struct CpuCurve {
    /// `lru`, `piggyback`, `prefetch`, `batching` (S1.6: a packet's pieces per hypercall) or
    /// `batching-ring-refill` (an extension: each run of back-to-back maps as one list).
    pub series: String,
    /// The eviction policy.
    pub eviction: String,
    /// The hypercall batching.
    pub batching: String,
    /// How the driver hands its maps over: `per-fragment` (as it is), `per-packet` (S1.6's
    /// batching: a packet's pieces as one list) or `runs` (every run of back-to-back maps).
    pub mapping: String,
    /// Per point: `single-use` for the first ("no caching allowed", quota 0), then
    /// `on-demand` from the minimal quota to the working set.
    pub strategy: Vec<String>,
    /// Quota as a fraction of the working set, per point.
    pub quota_fraction: Vec<f64>,
    /// Quota in pages, per point.
    pub quota_pages: Vec<u64>,
    /// CPU utilisation, mapping and stack, during the run (≤ 1; [`super::CPU_FORMULA`]).
    pub cpu_utilization: Vec<f64>,
    /// Of it, the mapping work's share.
    pub mapping_cpu: Vec<f64>,
    /// Throughput in Mb/s (the link rate unless CPU-bound).
    pub throughput_mbps: Vec<f64>,
    /// What the CPU would need to fill the link (> 1: CPU-bound): busy cycles over the
    /// wire time's capacity, so the ratio of two series' demands is the ratio of their busy
    /// cycles per byte sent.
    pub cpu_demand: Vec<f64>,
    /// Mapping cycles of the run.
    pub mapping_cycles: Vec<u64>,
    /// The guest's other work (`net_tx_per_kib` × KiB sent).
    pub stack_cycles: Vec<u64>,
    /// Bytes sent.
    pub sent_bytes: Vec<u64>,
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
    /// Of the unit's invalidations, the domain-selective ones (priced `inv_domain`).
    pub domain_invalidations: Vec<u64>,
    /// Pages the hypercalls mapped (host map bookkeeping is per page).
    pub map_requests: Vec<u64>,
    /// Pages the hypercalls unmapped.
    pub unmap_requests: Vec<u64>,
}

impl CpuCurve {
    /// A curve with no points.
    pub(crate) fn empty(series: &str, eviction: &str, batching: &str, mapping: &str) -> Self {
        Self {
            series: series.into(),
            eviction: eviction.into(),
            batching: batching.into(),
            mapping: mapping.into(),
            strategy: Vec::new(),
            quota_fraction: Vec::new(),
            quota_pages: Vec::new(),
            cpu_utilization: Vec::new(),
            mapping_cpu: Vec::new(),
            throughput_mbps: Vec::new(),
            cpu_demand: Vec::new(),
            mapping_cycles: Vec::new(),
            stack_cycles: Vec::new(),
            sent_bytes: Vec::new(),
            hit_rate: Vec::new(),
            refused: Vec::new(),
            hypercalls: Vec::new(),
            pages_per_hypercall: Vec::new(),
            cycles_per_map: Vec::new(),
            page_maps: Vec::new(),
            iotlb_invalidations: Vec::new(),
            domain_invalidations: Vec::new(),
            map_requests: Vec::new(),
            unmap_requests: Vec::new(),
        }
    }

    /// Appends run `r` at quota `q` of a `ws`-page working set.
    pub(crate) fn push(&mut self, strategy: Strategy, q: u64, ws: u64, r: &GuestResult) {
        self.strategy.push(strategy.name().into());
        self.quota_fraction.push(q as f64 / ws.max(1) as f64);
        self.quota_pages.push(q);
        self.cpu_utilization.push(r.cpu_utilization);
        self.mapping_cpu.push(r.mapping_cpu);
        self.throughput_mbps.push(r.throughput_mbps);
        self.cpu_demand.push(r.cpu_demand);
        self.mapping_cycles.push(r.cycles);
        self.stack_cycles.push(r.stack_cycles);
        self.sent_bytes.push(r.sent_bytes());
        self.hit_rate.push(r.hit_rate);
        self.refused.push(r.refused);
        self.hypercalls.push(r.hypercalls);
        self.pages_per_hypercall.push(r.pages_per_hypercall);
        self.cycles_per_map.push(r.cycles_per_map);
        self.page_maps.push(r.maps);
        self.iotlb_invalidations.push(r.iotlb_invalidations);
        self.domain_invalidations.push(r.domain_invalidations);
        self.map_requests.push(r.map_requests);
        self.unmap_requests.push(r.unmap_requests);
    }
}

/// A series of Figures 5–6 (S1.9).
struct Series {
    name: &'static str,
    eviction: EvictionConfig,
    batching: Batching,
    /// How the driver hands its maps over.
    mapping: DriverMapping,
}

fn series() -> [Series; 5] {
    [
        Series {
            name: "lru",
            eviction: EvictionConfig::Lru(Default::default()),
            batching: Batching::None,
            mapping: DriverMapping::PerFragment,
        },
        Series {
            name: "piggyback",
            eviction: EvictionConfig::Lru(Default::default()),
            batching: Batching::Piggyback,
            mapping: DriverMapping::PerFragment,
        },
        Series {
            name: "prefetch",
            eviction: EvictionConfig::Prefetch(Default::default()),
            // S1.4: a miss's chain and the evictions that make room for it are one
            // "remapping hypercall".
            batching: Batching::Replace,
            mapping: DriverMapping::PerFragment,
        },
        // S1.6's batching: the driver maps a packet's pieces as one list, mapped by one
        // hypercall, and so are their unmaps.
        Series {
            name: "batching",
            eviction: EvictionConfig::Lru(Default::default()),
            batching: Batching::MapUnmap,
            mapping: DriverMapping::PerPacket,
        },
        // An extension, not the paper's: the driver changed to map each run of back-to-back
        // maps (a receive-ring refill's buffers too) as one list and one hypercall.
        Series {
            name: "batching-ring-refill",
            eviction: EvictionConfig::Lru(Default::default()),
            batching: Batching::MapUnmap,
            mapping: DriverMapping::Runs,
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

/// The minimal quota's run (no caching: single-use, quota 0) with `batching` at `cost`, the
/// rest as `base`: the point the CPU claims are judged at.
pub(crate) fn no_caching(
    base: &GuestConfig,
    batching: Batching,
    cost: iommulab::hw::CostModel,
) -> GuestConfig {
    GuestConfig {
        strategy: Strategy::SingleUse,
        quota: 0,
        batching,
        cost,
        protection_oracle: false,
        ..base.clone()
    }
}

/// Every series' curve for `w`.
pub(crate) fn curves(
    w: &impl CpuWorkload,
    ws: u64,
    pinned: u64,
    steps: &mut Steps<'_, '_>,
) -> Result<Vec<CpuCurve>, Error> {
    let base = GuestConfig {
        protection_oracle: false,
        ..super::guest_base()
    };
    let workload = w.label();
    let mut out = Vec::new();
    for s in series() {
        let name = s.name;
        let mut c = CpuCurve::empty(name, s.eviction.name(), s.batching.name(), s.mapping.name());
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
            let r = w.run_cpu(&cfg, s.mapping)?;
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
            c.push(strategy, q, ws, &r);
        }
        out.push(c);
    }
    Ok(out)
}

/// The claims of Figures 5–6 at the left end (no caching) under one choice of the estimated
/// prices: `host_call_bookkeeping` (the per-call part of S1.10's bookkeeping),
/// `net_tx_per_kib` (the guest's stack) and the guest's CPUs.
#[derive(Clone, Debug, Serialize)]
pub struct CpuSensitivity {
    /// Per-call host bookkeeping (the per-page parts are S1.10's 4400 and 2600 less it).
    pub host_call_bookkeeping: u64,
    /// The guest's stack and driver per KiB sent.
    pub net_tx_per_kib: u64,
    /// The guest's CPUs.
    pub cpus: u32,
    /// LRU's CPU utilisation with no caching.
    pub lru_cpu: f64,
    /// LRU's throughput with no caching, Mb/s.
    pub lru_throughput_mbps: f64,
    /// Piggyback's CPU utilisation.
    pub piggyback_cpu: f64,
    /// Batching's CPU utilisation.
    pub batching_cpu: f64,
    /// Batching's throughput, Mb/s.
    pub batching_throughput_mbps: f64,
    /// Piggyback's busy cycles per byte sent over LRU's (= the CPU ratio on a saturated link).
    pub piggyback_busy_ratio: f64,
    /// Batching's busy cycles per byte sent over LRU's.
    pub batching_busy_ratio: f64,
}

/// The no-caching claims with one IOTLB invalidation per cleared PTE (`host_invalidation =
/// page`) instead of one per hypercall, every price at the run's value: the paper's VT-d had
/// register-based invalidation only, where "software needs to wait for the completion of
/// each address invalidation" (§2.2), so what a hypercall's unmaps share is its transition
/// and bookkeeping, not the invalidation.
#[derive(Clone, Debug, Serialize)]
pub struct PerPageInvalidation {
    /// Piggyback's busy cycles per byte sent over LRU's.
    pub piggyback_busy_ratio: f64,
    /// Batching's busy cycles per byte sent over LRU's.
    pub batching_busy_ratio: f64,
    /// IOTLB invalidations: LRU, piggyback, batching.
    pub invalidations: [u64; 3],
}

/// Guest runs of [`per_page_invalidation`].
pub(crate) const PER_PAGE_STEPS: u64 = 3;

/// The no-caching claims' runs (LRU, piggyback, batching) with `host_invalidation = page`.
pub(crate) fn per_page_invalidation(
    w: &impl CpuWorkload,
    steps: &mut Steps<'_, '_>,
) -> Result<PerPageInvalidation, Error> {
    let base = GuestConfig {
        host_invalidation: InvalidationScope::Page,
        ..super::guest_base()
    };
    let mut run = |name: &str, batching, m| -> Result<GuestResult, Error> {
        steps.start(|| format!("{}: {name}, an invalidation per page", w.label()))?;
        w.run_cpu(&no_caching(&base, batching, base.cost), m)
    };
    let lru = run("lru", Batching::None, DriverMapping::PerFragment)?;
    let pig = run("piggyback", Batching::Piggyback, DriverMapping::PerFragment)?;
    let bat = run("batching", Batching::MapUnmap, DriverMapping::PerPacket)?;
    let busy = |x: &GuestResult| {
        let load = link_load(
            &base.cost,
            base.cpus,
            base.link_mbps,
            x.sent_bytes(),
            x.cycles,
        );
        (x.cycles + load.stack_cycles) as f64 / x.sent_bytes().max(1) as f64
    };
    Ok(PerPageInvalidation {
        piggyback_busy_ratio: busy(&pig) / busy(&lru),
        batching_busy_ratio: busy(&bat) / busy(&lru),
        invalidations: [
            lru.iotlb_invalidations,
            pig.iotlb_invalidations,
            bat.iotlb_invalidations,
        ],
    })
}

/// The estimated prices' values the sensitivity table covers (low end, taken value, high
/// end of `KVM_2010_PRICES`' ranges).
pub const HOST_CALL_BOOKKEEPING: [u64; 3] = [0, 1000, 2200];
/// See [`HOST_CALL_BOOKKEEPING`].
pub const NET_TX_PER_KIB: [u64; 3] = [2048, 4096, 8192];
/// See [`HOST_CALL_BOOKKEEPING`].
pub const CPUS: [u32; 2] = [1, 2];

/// Progress steps of [`sensitivity`].
pub(crate) const SENSITIVITY_STEPS: u64 = HOST_CALL_BOOKKEEPING.len() as u64 * 3;

/// The no-caching claims over the estimated prices' ranges: three guest runs per per-call
/// bookkeeping value (LRU, piggyback, batching), then the CPU and link model for each stack
/// price and CPU count (they do not change the mapping work).
pub(crate) fn sensitivity(
    w: &impl CpuWorkload,
    steps: &mut Steps<'_, '_>,
) -> Result<Vec<CpuSensitivity>, Error> {
    let base = super::guest_base();
    let mut out = Vec::new();
    for hc in HOST_CALL_BOOKKEEPING {
        let kvm = base.cost;
        // S1.10's one-page totals stay: the per-page parts shrink by what the call takes.
        let (map, unmap) = (
            kvm.host_call_bookkeeping + kvm.host_map_bookkeeping,
            kvm.host_call_bookkeeping + kvm.host_unmap_bookkeeping,
        );
        let cost = iommulab::hw::CostModel {
            host_call_bookkeeping: hc,
            host_map_bookkeeping: map - hc,
            host_unmap_bookkeeping: unmap - hc,
            ..kvm
        };
        let mut run = |name: &str, batching, m| -> Result<GuestResult, Error> {
            steps.start(|| format!("{}: sensitivity {name}, call bookkeeping {hc}", w.label()))?;
            w.run_cpu(&no_caching(&base, batching, cost), m)
        };
        let lru = run("lru", Batching::None, DriverMapping::PerFragment)?;
        let pig = run("piggyback", Batching::Piggyback, DriverMapping::PerFragment)?;
        let bat = run("batching", Batching::MapUnmap, DriverMapping::PerPacket)?;
        for net in NET_TX_PER_KIB {
            for cpus in CPUS {
                let c = iommulab::hw::CostModel {
                    net_tx_per_kib: net,
                    ..cost
                };
                let load =
                    |r: &GuestResult| link_load(&c, cpus, base.link_mbps, r.sent_bytes(), r.cycles);
                let (l, p, b) = (load(&lru), load(&pig), load(&bat));
                // Busy cycles per byte sent, relative to LRU's (each run sent its own bytes).
                let busy = |x: &GuestResult| {
                    (x.cycles + load(x).stack_cycles) as f64 / x.sent_bytes().max(1) as f64
                };
                out.push(CpuSensitivity {
                    host_call_bookkeeping: hc,
                    net_tx_per_kib: net,
                    cpus,
                    lru_cpu: l.cpu_utilization,
                    lru_throughput_mbps: l.throughput_mbps,
                    piggyback_cpu: p.cpu_utilization,
                    batching_cpu: b.cpu_utilization,
                    batching_throughput_mbps: b.throughput_mbps,
                    piggyback_busy_ratio: busy(&pig) / busy(&lru),
                    batching_busy_ratio: busy(&bat) / busy(&lru),
                });
            }
        }
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
        assert_eq!(steps(66, 70), 5 * p.len() as u64);
    }
}
