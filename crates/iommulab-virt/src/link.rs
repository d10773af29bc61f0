//! A guest's CPU and its link (S1.9: "all tests saturated the 1GbE link used"): the
//! throughput a sending guest reaches is the smaller of what the link carries and what its
//! CPUs can feed, and its CPU utilisation is its busy time over the run, never above 100%.
//!
//! ```text
//!  busy   = mapping cycles (hypercalls, host bookkeeping, VT-d work, all on the vCPU)
//!         + net_tx_per_kib × KiB sent (the guest's stack and driver without mapping)
//!  wire   = bytes sent × 8 / link rate            (the link alone)
//!  cpu    = busy / (cpus × clock)                 (the CPU alone)
//!  run    = max(wire, cpu)                        (whichever limits)
//!  throughput = bytes sent × 8 / run,  utilisation = busy / (cpus × clock × run)
//! ```
//!
//! The hypercall's host-side work runs on the vCPU that made the call (KVM handles the exit
//! on the vCPU's thread), so it is counted against the guest's CPUs. `demand` = busy /
//! (cpus × clock × wire) is what the CPU would need to keep the link full: above 1 the
//! guest is CPU-bound and the link is not saturated.

use serde::{Deserialize, Serialize};

use iommulab_hw::CostModel;

/// What limits a run and how busy its CPUs are (see the [module docs](self)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LinkLoad {
    /// Cycles of the guest's stack and driver besides mapping (`net_tx_per_kib` × KiB sent).
    pub stack_cycles: u64,
    /// Throughput reached, in Mb/s (at most the link rate).
    pub throughput_mbps: f64,
    /// Busy cycles over the CPUs' capacity during the run (≤ 1).
    pub cpu_utilization: f64,
    /// Of that, the mapping work's share (≤ `cpu_utilization`).
    pub mapping_cpu: f64,
    /// Busy cycles over the capacity during the wire time alone: > 1 means CPU-bound.
    pub demand: f64,
}

/// The load of a run that sent `bytes` with `mapping_cycles` of mapping work, on `cpus`
/// CPUs of `cost`'s clock behind a `link_mbps` link.
#[must_use]
pub fn link_load(
    cost: &CostModel,
    cpus: u32,
    link_mbps: u64,
    bytes: u64,
    mapping_cycles: u64,
) -> LinkLoad {
    let stack_cycles = bytes.saturating_mul(cost.net_tx_per_kib) / 1024;
    let busy = (mapping_cycles + stack_cycles) as f64;
    let capacity = f64::from(cpus.max(1)) * cost.clock.hz();
    let wire_s = bytes as f64 * 8.0 / (link_mbps.max(1) as f64 * 1e6);
    let cpu_s = busy / capacity;
    let run_s = wire_s.max(cpu_s);
    if run_s <= 0.0 {
        return LinkLoad {
            stack_cycles,
            ..LinkLoad::default()
        };
    }
    LinkLoad {
        stack_cycles,
        throughput_mbps: bytes as f64 * 8.0 / run_s / 1e6,
        cpu_utilization: busy / capacity / run_s,
        mapping_cpu: mapping_cycles as f64 / capacity / run_s,
        demand: if wire_s > 0.0 { cpu_s / wire_s } else { 0.0 },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 125 MB at 1 Gb/s is one second of wire; on one 2.66 GHz CPU with 4096 cycles per KiB
    /// of stack the stack alone is 4 cycles per byte = 500 M cycles = 18.8% of it.
    #[test]
    fn link_bound_runs_report_the_link_and_their_busy_share() {
        let c = CostModel::KVM_2010;
        let bytes = 125_000_000;
        let l = link_load(&c, 1, 1000, bytes, 0);
        assert_eq!(l.stack_cycles, 500_000_000);
        assert!((l.throughput_mbps - 1000.0).abs() < 1e-9);
        assert!((l.cpu_utilization - 5e8 / 2.66e9).abs() < 1e-12);
        assert_eq!(l.mapping_cpu, 0.0);
        let m = link_load(&c, 1, 1000, bytes, 1_000_000_000);
        assert!((m.mapping_cpu - 1e9 / 2.66e9).abs() < 1e-12);
        assert!(m.demand < 1.0);
    }

    /// When the CPU cannot keep up, throughput falls below the link and utilisation is 100%;
    /// a second CPU doubles the capacity.
    #[test]
    fn cpu_bound_runs_lose_throughput_not_exceed_one() {
        let c = CostModel::KVM_2010;
        let bytes = 125_000_000;
        let mapping = 4_820_000_000; // 5.32 G cycles busy in all: 2 s on one CPU
        let l = link_load(&c, 1, 1000, bytes, mapping);
        assert!((l.demand - 2.0).abs() < 1e-9);
        assert!((l.cpu_utilization - 1.0).abs() < 1e-12);
        assert!((l.throughput_mbps - 500.0).abs() < 1e-6);
        assert!(l.mapping_cpu < l.cpu_utilization);
        let two = link_load(&c, 2, 1000, bytes, mapping);
        assert!((two.throughput_mbps - 1000.0).abs() < 1e-6);
        assert!((two.cpu_utilization - 1.0).abs() < 1e-12);
        assert_eq!(link_load(&c, 1, 1000, 0, 0), LinkLoad::default());
    }
}
