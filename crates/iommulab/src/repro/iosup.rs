//! The IOSUP paper (seed 003, S3.1–S3.5): Xen PV page-table updates against the IOTLB,
//! and the page-table pool that removes them. Three groups of the same churn (542.14
//! process creations per minute, a NIC receiving S3.5's netperf stream): `cache-disabled`,
//! `cache-pre-enabled` (the pool from boot) and `cache-dynamic-enabled` (switched on at
//! minute 5, when the disabled group's flush rate is stable, S3.5). Per minute: IOTLB
//! flushes (Figure 6), page-table allocation and free time per level (Figure 7), pool
//! sizes (Figures 8–9), and the NIC's IOTLB misses; then the per-process saving against
//! lmbench's fork+exit, and what the NIC's IOTLB effect is worth beside the cost of
//! mapping its buffers (S3.5's netperf conclusion).

use serde::Serialize;

use super::{ReproOptions, Reproduction, Steps};
use crate::Error;
use crate::experiment::{ExperimentConfig, NamedConfig, no_progress, run_bench};
use crate::hw::cost::CostPreset;
use crate::virt::xen::{
    ChurnConfig, ChurnResult, PoolMode, PtLevel, PvChurn, XenPvCosts, XenPvSetup,
};

/// The line of the reproductions' index.
pub const TITLE: &str = "IOSUP (Xen PV page tables vs the IOTLB): Figures 6–9, lmbench fork+exit and \
the netperf conclusion";

/// What the paper published (S3.5).
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Paper {
    /// Process creations per minute of the stress tool.
    pub forks_per_minute: f64,
    /// Page-table allocation CPU time, pre-enabled vs disabled (−45.1%).
    pub alloc_change: f64,
    /// Page-table free CPU time (−70.9%).
    pub free_change: f64,
    /// Most pages in the pools, pre-enabled group (250).
    pub pool_pages_pre: u64,
    /// Most pages in the pools, dynamic group (210).
    pub pool_pages_dynamic: u64,
    /// lmbench fork+exit with the pool, µs (344, "11% less").
    pub fork_exit_us: f64,
    /// Its change (−11%).
    pub fork_exit_change: f64,
    /// netperf TCP_STREAM, Mb/s: with the pool (dynamic) and without.
    pub netperf_mbps: (f64, f64),
}

/// S3.5's numbers.
pub const PAPER: Paper = Paper {
    forks_per_minute: 542.14,
    alloc_change: -0.451,
    free_change: -0.709,
    pool_pages_pre: 250,
    pool_pages_dynamic: 210,
    fork_exit_us: 344.0,
    fork_exit_change: -0.11,
    netperf_mbps: (87.927, 87.903),
};

/// One group's minute (a row of `runs`).
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// `cache-disabled`, `cache-pre-enabled`, `cache-dynamic-enabled`.
    pub group: String,
    /// Minute (0-based).
    pub minute: u32,
    /// IOTLB invalidations for page-table type changes (Figure 6).
    pub iotlb_flushes: u64,
    /// Processes created.
    pub forks: u64,
    /// Allocation time per level, µs: PGD, PMD, PTE (Figure 7).
    pub alloc_us: [f64; 3],
    /// Free time per level, µs.
    pub free_us: [f64; 3],
    /// Pages in each pool at the end of the minute (Figures 8–9).
    pub pool_pages: [u64; 3],
    /// Packets the NIC received.
    pub packets: u64,
    /// The NIC's IOTLB miss rate.
    pub nic_iotlb_miss_rate: f64,
    /// Its translation (page-walk) time per packet, ns.
    pub nic_walk_ns_per_packet: f64,
}

/// One group in steady state (the minutes after the dynamic group's switch).
#[derive(Clone, Debug, Serialize)]
pub struct GroupSummary {
    /// The group.
    pub group: String,
    /// IOTLB flushes per minute.
    pub flushes_per_minute: f64,
    /// Page-table allocation time per minute, µs (all levels).
    pub alloc_us_per_minute: f64,
    /// Free time per minute, µs.
    pub free_us_per_minute: f64,
    /// Page-table allocation + free time per process, µs.
    pub pt_us_per_process: f64,
    /// Most pages in all pools at once, over the run.
    pub peak_pool_pages: u64,
    /// The NIC's IOTLB miss rate.
    pub nic_iotlb_miss_rate: f64,
    /// Its page-walk time per packet, ns.
    pub nic_walk_ns_per_packet: f64,
}

/// What the NIC's IOTLB effect is worth beside mapping its buffers.
#[derive(Clone, Debug, Serialize)]
pub struct NetperfConclusion {
    /// Time on the wire of one packet at the stream's rate, ns.
    pub packet_ns: f64,
    /// Page-walk time per packet without the pool minus with it (pre-enabled), ns; may be
    /// negative (the NIC's own ring turnover dominates its misses).
    pub walk_ns_saved_per_packet: f64,
    /// Modeled CPU time of one map + unmap, ns, per configuration (`modern` prices).
    pub map_unmap_ns: Vec<(String, f64)>,
    /// How many times cheaper than `modern`'s map + unmap mapping must get before the
    /// IOTLB difference (either sign) is a tenth of it.
    pub cheaper_by_for_10_percent: f64,
}

/// Everything the reproduction produced.
#[derive(Clone, Debug, Serialize)]
pub struct IosupResults {
    /// The shorter run.
    pub quick: bool,
    /// The churn parameters (common to the groups).
    pub churn: ChurnConfig,
    /// The minute the dynamic group switches the pool on.
    pub dynamic_minute: u32,
    /// Per group and minute.
    pub runs: Vec<Row>,
    /// Per group, steady state.
    pub groups: Vec<GroupSummary>,
    /// Pre-enabled vs disabled: allocation and free time change.
    pub alloc_change: f64,
    /// See `alloc_change`.
    pub free_change: f64,
    /// Page-table time saved per process (one fork + exit), µs.
    pub fork_exit_saving_us: f64,
    /// The netperf conclusion.
    pub netperf: NetperfConclusion,
    /// The paper's numbers.
    pub paper: Paper,
}

const GROUPS: [(&str, PoolMode); 3] = [
    ("cache-disabled", PoolMode::Disabled),
    ("cache-pre-enabled", PoolMode::PreEnabled),
    ("cache-dynamic-enabled", PoolMode::Dynamic { minute: 5 }),
];

/// Runs the three groups.
pub fn run(opts: &ReproOptions<'_>) -> Result<IosupResults, Error> {
    let (minutes, dynamic_minute) = if opts.quick { (4, 2) } else { (30, 5) };
    let churn = ChurnConfig {
        minutes,
        guest_frames: if opts.quick { 1 << 16 } else { 1 << 18 },
        ..ChurnConfig::default()
    };
    let setup = XenPvSetup::default();
    let mut steps = Steps::new(
        opts,
        Reproduction::Iosup,
        GROUPS.len() as u64 * u64::from(minutes) + 2,
    );
    let mut runs = Vec::new();
    let mut results: Vec<(&str, ChurnResult)> = Vec::new();
    for (name, pool) in GROUPS {
        let pool = match pool {
            PoolMode::Dynamic { .. } => PoolMode::Dynamic {
                minute: dynamic_minute,
            },
            p => p,
        };
        let mut g = PvChurn::new(
            ChurnConfig {
                pool,
                ..churn.clone()
            },
            &setup,
        )
        .map_err(super::ReproError::from)?;
        for minute in 0..minutes {
            steps.start(|| format!("{name}, minute {}", minute + 1))?;
            g.run_minute().map_err(super::ReproError::from)?;
        }
        let r = g.finish();
        for m in &r.minutes {
            runs.push(Row {
                group: name.into(),
                minute: m.minute,
                iotlb_flushes: m.iotlb_flushes,
                forks: m.forks,
                alloc_us: m.alloc_ns.map(|x| x / 1e3),
                free_us: m.free_ns.map(|x| x / 1e3),
                pool_pages: m.pooled,
                packets: m.packets,
                nic_iotlb_miss_rate: m.iotlb_misses as f64 / m.iotlb_lookups.max(1) as f64,
                nic_walk_ns_per_packet: m.device_walk_ns / m.packets.max(1) as f64,
            });
        }
        results.push((name, r));
    }
    // Steady state: after the dynamic switch and one process lifetime.
    let from = dynamic_minute + 1;
    let groups: Vec<GroupSummary> = results
        .iter()
        .map(|(name, r)| summary(name, r, from))
        .collect();
    let (off, pre) = (&groups[0], &groups[1]);
    let change = |a: f64, b: f64| if a > 0.0 { b / a - 1.0 } else { 0.0 };
    let netperf = netperf(&churn, off, pre, &mut steps)?;
    steps.finish()?;
    Ok(IosupResults {
        quick: opts.quick,
        alloc_change: change(off.alloc_us_per_minute, pre.alloc_us_per_minute),
        free_change: change(off.free_us_per_minute, pre.free_us_per_minute),
        fork_exit_saving_us: off.pt_us_per_process - pre.pt_us_per_process,
        churn,
        dynamic_minute,
        runs,
        groups,
        netperf,
        paper: PAPER,
    })
}

fn summary(name: &str, r: &ChurnResult, from: u32) -> GroupSummary {
    let steady: Vec<_> = r.minutes.iter().filter(|m| m.minute >= from).collect();
    let n = steady.len().max(1) as f64;
    let sum = |f: &dyn Fn(&crate::virt::xen::MinuteStats) -> f64| {
        steady.iter().map(|m| f(m)).sum::<f64>()
    };
    let alloc = sum(&|m| m.alloc_ns.iter().sum::<f64>()) / 1e3;
    let free = sum(&|m| m.free_ns.iter().sum::<f64>()) / 1e3;
    let forks = sum(&|m| m.forks as f64).max(1.0);
    let lookups = sum(&|m| m.iotlb_lookups as f64).max(1.0);
    GroupSummary {
        group: name.into(),
        flushes_per_minute: sum(&|m| m.iotlb_flushes as f64) / n,
        alloc_us_per_minute: alloc / n,
        free_us_per_minute: free / n,
        pt_us_per_process: (alloc + free) / forks,
        peak_pool_pages: r.peak_pooled,
        nic_iotlb_miss_rate: sum(&|m| m.iotlb_misses as f64) / lookups,
        nic_walk_ns_per_packet: sum(&|m| m.device_walk_ns) / sum(&|m| m.packets as f64).max(1.0),
    }
}

/// The NIC's page-walk saving per packet beside the modeled cost of mapping a buffer
/// (`default` and `modern` configurations on `modern` prices: the pseudo driver's one map +
/// unmap per I/O).
fn netperf(
    churn: &ChurnConfig,
    off: &GroupSummary,
    pre: &GroupSummary,
    steps: &mut Steps<'_, '_>,
) -> Result<NetperfConclusion, Error> {
    let mut map_unmap_ns = Vec::new();
    for c in [NamedConfig::Default, NamedConfig::Modern] {
        steps.start(|| format!("map+unmap cost, {}", c.name()))?;
        let mut cfg = ExperimentConfig {
            configuration: c,
            duration_s: Some(0.02),
            ..ExperimentConfig::default()
        };
        cfg.hardware.cost = CostPreset::Modern;
        let r = run_bench(&cfg, &mut no_progress)?;
        map_unmap_ns.push((
            c.name().to_string(),
            r.modeled_hw_ns_per_op + r.modeled_sw_ns_per_op,
        ));
    }
    let saved = off.nic_walk_ns_per_packet - pre.nic_walk_ns_per_packet;
    let modern = map_unmap_ns.last().map_or(0.0, |x| x.1);
    Ok(NetperfConclusion {
        packet_ns: churn.packet_bytes as f64 * 8.0 / churn.stream_mbps * 1e3,
        walk_ns_saved_per_packet: saved,
        cheaper_by_for_10_percent: if saved != 0.0 {
            modern / (10.0 * saved.abs())
        } else {
            f64::INFINITY
        },
        map_unmap_ns,
    })
}

/// The costs the model used (for the page).
pub fn costs() -> XenPvCosts {
    XenPvCosts::default()
}

/// Levels in table order.
pub const LEVELS: [PtLevel; 3] = PtLevel::ALL;

#[cfg(test)]
mod tests {
    use super::*;

    /// The quick run's headline numbers, pinned: the pool removes the flushes, cuts
    /// allocation and free time, and the NIC's stream is link-bound either way.
    #[test]
    fn quick_headline() {
        let r = run(&ReproOptions {
            quick: true,
            progress: None,
        })
        .unwrap();
        let off = &r.groups[0];
        let pre = &r.groups[1];
        let dynamic = &r.groups[2];
        assert!(
            off.flushes_per_minute > 10_000.0,
            "{}",
            off.flushes_per_minute
        );
        assert!(pre.flushes_per_minute < off.flushes_per_minute / 100.0);
        assert!(dynamic.flushes_per_minute < off.flushes_per_minute / 10.0);
        assert!(
            r.alloc_change < -0.5 && r.free_change < -0.5,
            "{} {}",
            r.alloc_change,
            r.free_change
        );
        assert!(r.fork_exit_saving_us > 0.0);
        assert!(r.netperf.walk_ns_saved_per_packet.abs() < r.netperf.packet_ns / 1000.0);
        assert_eq!(r.runs.len(), 3 * 4);
    }
}
