//! The IOSUP paper (seed 003, S3.1–S3.5): Xen PV page-table updates against the IOTLB,
//! and the page-table pool that removes them. Three groups of the same churn (542.14
//! process creations per minute, a NIC receiving S3.5's netperf stream): `cache-disabled`,
//! `cache-pre-enabled` (the pool from boot) and `cache-dynamic-enabled` (switched on at
//! minute 5, when the disabled group's flush rate is stable, S3.5). Per minute: IOTLB
//! flushes (Figure 6), page-table allocation and free time per level (Figure 7), pool
//! sizes (Figures 8–9), and the NIC's IOTLB misses; then the per-process saving against
//! lmbench's fork+exit and the netperf claim, on the groups the paper compares for each
//! (dynamic against disabled), with each verdict computed by a stated rule.

use serde::Serialize;

use super::claims::{self, Claim};
use super::{ReproOptions, Steps};
use crate::Error;
use crate::virt::xen::{
    ChurnConfig, ChurnResult, PoolMode, PtLevel, PvChurn, ShrinkConfig, XenPvCosts, XenPvSetup,
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
    /// Allocation time per table allocated, ns (all levels).
    pub alloc_ns_per_table: f64,
    /// Free time per table freed, ns (all levels).
    pub free_ns_per_table: f64,
    /// Page-table allocation + free time per process, µs.
    pub pt_us_per_process: f64,
    /// Most pages in all pools at once, over the run.
    pub peak_pool_pages: u64,
    /// Per level (PGD, PMD, PTE), the most tables in use at a minute's end, over the run.
    pub peak_in_use: [u64; 3],
    /// Per level, the largest pool / in-use proportion right after a free into the pool
    /// (what the shrink rule compares with its proportion).
    pub max_pool_proportion: [f64; 3],
    /// Whether the group runs the shrink rule (S3.5: the dynamic group only).
    pub shrinks: bool,
    /// Pages its pools gave back by shrinking, over the run.
    pub shrunk_pages: u64,
    /// The NIC's received throughput, Mb/s (packets × packet bits over the minutes).
    pub nic_mbps: f64,
    /// The NIC's IOTLB miss rate.
    pub nic_iotlb_miss_rate: f64,
    /// Its page-walk time per packet, ns.
    pub nic_walk_ns_per_packet: f64,
}

/// The netperf claim (S3.5) on this model: the groups the paper compares
/// (`cache-dynamic-enabled` against `cache-disabled`).
#[derive(Clone, Debug, Serialize)]
pub struct NetperfConclusion {
    /// Time on the wire of one packet at the stream's rate, ns.
    pub packet_ns: f64,
    /// The stream's configured rate, Mb/s: an input (packets arrive at fixed spacing).
    pub input_mbps: f64,
    /// The largest relative difference between a group's received throughput and the input.
    pub max_throughput_deviation: f64,
    /// Page-walk time per packet, disabled minus dynamic, ns (saved by the pool: +).
    pub walk_ns_saved_per_packet: f64,
    /// Page-walk time per packet, pre-enabled minus dynamic, ns: two groups with the pool
    /// on, whose pools hold the same pages in steady state; what differs between them is
    /// not the pool, so this is the spread the saving must exceed to be the pool's.
    pub same_pool_spread_ns: f64,
}

/// Everything the reproduction produced.
#[derive(Clone, Debug, Serialize)]
pub struct IosupResults {
    /// The shorter run.
    pub quick: bool,
    /// The churn parameters common to the groups (the dynamic group adds `dynamic_shrink`).
    pub churn: ChurnConfig,
    /// The dynamic group's shrink thresholds (ours: S3.5 tuned its own and published none).
    pub dynamic_shrink: ShrinkConfig,
    /// The minute the dynamic group switches the pool on.
    pub dynamic_minute: u32,
    /// Per group and minute.
    pub runs: Vec<Row>,
    /// Per group, steady state.
    pub groups: Vec<GroupSummary>,
    /// Pre-enabled vs disabled (Figure 7's groups): allocation and free time change.
    pub alloc_change: f64,
    /// See `alloc_change`.
    pub free_change: f64,
    /// Page-table time saved per process (one fork + exit), disabled minus dynamic
    /// (lmbench's groups), µs.
    pub fork_exit_saving_us: f64,
    /// The paper's fork+exit saving, µs, **inferred**: 344 µs is "11% less", so the
    /// disabled group took 344 / 0.89 and the saving is the difference (not published).
    pub paper_fork_exit_saving_us: f64,
    /// The netperf claim.
    pub netperf: NetperfConclusion,
    /// The paper's claims, judged on this run ([`claims::iosup`]).
    pub claims: Vec<Claim>,
    /// The prices of the guest's and Xen's work (all estimates).
    pub costs: XenPvCosts,
    /// The paper's numbers.
    pub paper: Paper,
}

const GROUPS: [(&str, PoolMode); 3] = [
    ("cache-disabled", PoolMode::Disabled),
    ("cache-pre-enabled", PoolMode::PreEnabled),
    ("cache-dynamic-enabled", PoolMode::Dynamic { minute: 5 }),
];

/// Flush rate with the pool below this share of the rate without it counts as "~0".
pub const NEAR_ZERO_SHARE: f64 = 0.01;
/// Time left with the pool over the paper's: within this factor either way, reproduced;
/// within [`PARTLY_FACTOR`], partly.
pub const CLOSE_FACTOR: f64 = 1.25;
/// See [`CLOSE_FACTOR`].
pub const PARTLY_FACTOR: f64 = 2.0;
/// A group's throughput within this share of the input counts as the input.
pub const INPUT_TOLERANCE: f64 = 0.001;

/// Runs the three groups.
pub fn run(opts: &ReproOptions<'_>) -> Result<IosupResults, Error> {
    let (minutes, dynamic_minute) = if opts.quick { (4, 2) } else { (30, 5) };
    let churn = ChurnConfig {
        minutes,
        guest_frames: if opts.quick { 1 << 16 } else { 1 << 18 },
        ..ChurnConfig::default()
    };
    let dynamic_shrink = ShrinkConfig::default();
    let setup = XenPvSetup::default();
    let mut steps = Steps::new(opts, GROUPS.len() as u64 * u64::from(minutes));
    let mut runs = Vec::new();
    let mut results: Vec<(&str, ChurnResult, bool)> = Vec::new();
    for (name, pool) in GROUPS {
        // S3.5 adds the freeing mechanism to the dynamic group only; the pre-enabled
        // group's pools keep every page.
        let (pool, shrink) = match pool {
            PoolMode::Dynamic { .. } => (
                PoolMode::Dynamic {
                    minute: dynamic_minute,
                },
                Some(dynamic_shrink),
            ),
            p => (p, None),
        };
        let mut g = PvChurn::new(
            ChurnConfig {
                pool,
                shrink,
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
        results.push((name, r, shrink.is_some()));
    }
    // Steady state: after the dynamic switch and one process lifetime.
    let from = dynamic_minute + 1;
    let groups: Vec<GroupSummary> = results
        .iter()
        .map(|(name, r, shrinks)| summary(name, r, from, *shrinks, &churn))
        .collect();
    let (off, pre, dynamic) = (&groups[0], &groups[1], &groups[2]);
    let change = |a: f64, b: f64| if a > 0.0 { b / a - 1.0 } else { 0.0 };
    let netperf = netperf(&churn, &groups);
    let alloc_change = change(off.alloc_us_per_minute, pre.alloc_us_per_minute);
    let free_change = change(off.free_us_per_minute, pre.free_us_per_minute);
    let fork_exit_saving_us = off.pt_us_per_process - dynamic.pt_us_per_process;
    let paper_fork_exit_saving_us =
        PAPER.fork_exit_us / (1.0 + PAPER.fork_exit_change) - PAPER.fork_exit_us;
    steps.finish()?;
    let mut r = IosupResults {
        quick: opts.quick,
        alloc_change,
        free_change,
        fork_exit_saving_us,
        paper_fork_exit_saving_us,
        churn,
        dynamic_shrink,
        dynamic_minute,
        runs,
        groups,
        netperf,
        claims: Vec::new(),
        costs: costs(),
        paper: PAPER,
    };
    r.claims = claims::iosup::claims(&r);
    Ok(r)
}

fn summary(
    name: &str,
    r: &ChurnResult,
    from: u32,
    shrinks: bool,
    churn: &ChurnConfig,
) -> GroupSummary {
    let steady: Vec<_> = r.minutes.iter().filter(|m| m.minute >= from).collect();
    let n = steady.len().max(1) as f64;
    let sum = |f: &dyn Fn(&crate::virt::xen::MinuteStats) -> f64| {
        steady.iter().map(|m| f(m)).sum::<f64>()
    };
    let alloc = sum(&|m| m.alloc_ns.iter().sum::<f64>()) / 1e3;
    let free = sum(&|m| m.free_ns.iter().sum::<f64>()) / 1e3;
    let allocs = sum(&|m| m.allocs.iter().sum::<u64>() as f64).max(1.0);
    let frees = sum(&|m| m.frees.iter().sum::<u64>() as f64).max(1.0);
    let forks = sum(&|m| m.forks as f64).max(1.0);
    let lookups = sum(&|m| m.iotlb_lookups as f64).max(1.0);
    let packets = sum(&|m| m.packets as f64);
    let mut peak_in_use = [0; 3];
    for m in &r.minutes {
        for (p, u) in peak_in_use.iter_mut().zip(m.in_use) {
            *p = (*p).max(u);
        }
    }
    GroupSummary {
        group: name.into(),
        flushes_per_minute: sum(&|m| m.iotlb_flushes as f64) / n,
        alloc_us_per_minute: alloc / n,
        free_us_per_minute: free / n,
        alloc_ns_per_table: alloc * 1e3 / allocs,
        free_ns_per_table: free * 1e3 / frees,
        pt_us_per_process: (alloc + free) / forks,
        peak_pool_pages: r.peak_pooled,
        peak_in_use,
        max_pool_proportion: r.max_proportion,
        shrinks,
        shrunk_pages: r.shrunk,
        nic_mbps: packets * churn.packet_bytes as f64 * 8.0 / (n * 60.0) / 1e6,
        nic_iotlb_miss_rate: sum(&|m| m.iotlb_misses as f64) / lookups,
        nic_walk_ns_per_packet: sum(&|m| m.device_walk_ns) / packets.max(1.0),
    }
}

/// The netperf claim on the groups the paper compares (dynamic against disabled), with
/// the pre-enabled group as the spread of two groups that have the same pool.
pub(crate) fn netperf(churn: &ChurnConfig, groups: &[GroupSummary]) -> NetperfConclusion {
    let (off, pre, dynamic) = (&groups[0], &groups[1], &groups[2]);
    NetperfConclusion {
        packet_ns: churn.packet_bytes as f64 * 8.0 / churn.stream_mbps * 1e3,
        input_mbps: churn.stream_mbps,
        max_throughput_deviation: groups
            .iter()
            .map(|g| (g.nic_mbps / churn.stream_mbps - 1.0).abs())
            .fold(0.0, f64::max),
        walk_ns_saved_per_packet: off.nic_walk_ns_per_packet - dynamic.nic_walk_ns_per_packet,
        same_pool_spread_ns: pre.nic_walk_ns_per_packet - dynamic.nic_walk_ns_per_packet,
    }
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

    /// The quick run's headline numbers and verdicts, pinned: the pool removes the flushes,
    /// cuts allocation and free time by ratios of estimated prices, and the NIC's
    /// throughput is the input in every group, so netperf's claim is not tested.
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
        // The free change is the ratio of the per-table prices: 60 cycles into the pool
        // against 1000 + 250 cycles and the IOMMU's PTE set.
        let ratio = pre.free_ns_per_table / off.free_ns_per_table - 1.0;
        assert!(
            (r.free_change - ratio).abs() < 1e-3,
            "{} {ratio}",
            r.free_change
        );
        assert!(r.fork_exit_saving_us > 0.0);
        // 344 µs is "11% less": 344 / 0.89 − 344.
        assert!((r.paper_fork_exit_saving_us - 42.516).abs() < 1e-3);
        // Freeing only in the dynamic group (S3.5); with our thresholds it never fires.
        assert_eq!(
            r.groups.iter().map(|g| g.shrinks).collect::<Vec<_>>(),
            [false, false, true]
        );
        assert!(r.groups.iter().all(|g| g.shrunk_pages == 0));
        assert!(dynamic.max_pool_proportion.iter().all(|&p| p < 1.0));
        // The NIC receives the input rate in every group.
        assert!(r.netperf.max_throughput_deviation < INPUT_TOLERANCE);
        let got: Vec<(&str, &str)> = r
            .claims
            .iter()
            .map(|c| (c.id.as_str(), c.verdict.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                ("iotlb-miss-rate", "not reproduced"),
                ("flush-rate-zero", "reproduced"),
                ("alloc-cpu-45pct", "not reproduced"),
                ("free-cpu-71pct", "not reproduced"),
                ("pool-size", "partly"),
                ("fork-exit-11pct", "not reproduced"),
                ("specint-unchanged", "input — not tested"),
                ("netperf-unchanged", "input — not tested"),
            ]
        );
        assert_eq!(r.runs.len(), 3 * 4);
    }
}
