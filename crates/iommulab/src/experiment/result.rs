//! `RunResult`: everything one run measured, serialisable to JSON and CSV.
//!
//! JSON shape (top level, all numbers):
//! `config`, `allocator`, `flush`, `cost_preset`, `seed`, `ops` (I/Os completed), `io_size`,
//! `outstanding`, `cpus`, `touch`, `malicious`, `software_clock`,
//! `software_ns_per_op` (measured wall time of the run loop per I/O),
//! `modeled_ns_per_op` (= `io_path_ns_per_op + modeled_hw_ns_per_op + modeled_sw_ns_per_op +
//! device_ns_per_op`), its parts, `iops` (I/Os per second of the modeled machine, with the
//! software part taken from `software_clock`), `measured_iops` (the same with the measured
//! software time), `relative_to_disabled` (filled when a `disabled` run is in the same batch),
//! `iotlb_invalidations`, `iotlb_flushes`, `write_buffer_flushes`, `peak_metadata_bytes`,
//! `stale_accesses`, `subpage_accesses`, `exposed_bytes`, `faults`, `wall_seconds`,
//! `modeled_seconds`, and `stats` with the per-component counters; then the parts that apply:
//! `guest` (the guest's counters: hypercalls, host, map cache) when the system is a guest,
//! `replay` (what the replay made of the trace's events) when the workload is a trace.
//!
//! A guest run fills the common fields from the guest model (S1.8–S1.10): `ops` are driver
//! buffer maps, `modeled_seconds` is the time the run's bytes take at the throughput its
//! limits allow (the link, `system.link_mbps`, or the guest's CPUs, whichever is slower), so
//! `iops` is buffers per second at that throughput, and
//! `modeled_hw_ns_per_op` is the mapping work per buffer (hypercalls, host bookkeeping, IOMMU);
//! the bare-metal breakdown it has no model for (`io_path`, `modeled_sw`, `device`,
//! `measured_iops`, `iotlb_flushes`, allocator metadata) is 0, and `stats` holds zeros (the
//! guest's own counters are in `guest`).

use serde::{Deserialize, Serialize};

use crate::device::AccessOutcome;
use crate::dma::DmaStats;
use crate::flush::FlushStats;
use crate::hw::IommuStats;
use crate::iova::IovaStats;
use crate::virt::GuestResult;
use crate::workload::ReplayReport;

/// The per-component counters of a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ComponentStats {
    /// The IOMMU model.
    pub iommu: IommuStats,
    /// The IOVA allocator.
    pub iova: IovaStats,
    /// The flush policy.
    pub flush: FlushStats,
    /// The DMA layer.
    pub dma: DmaStats,
    /// Device accesses as the oracle classified them.
    pub access: AccessOutcome,
    /// The allocator's metadata accesses by cache level (runs with `[hardware.cpu_cache]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_cache: Option<crate::hw::CpuCacheStats>,
}

/// What one run measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    /// Configuration label (`default`, `strict`, ...).
    pub config: String,
    /// Allocator name.
    pub allocator: String,
    /// Flush policy name.
    pub flush: String,
    /// Cost preset name.
    pub cost_preset: String,
    /// Workload seed.
    pub seed: u64,
    /// I/Os completed (each is one map + one unmap).
    pub ops: u64,
    /// Bytes per I/O.
    pub io_size: u64,
    /// I/Os in flight.
    pub outstanding: u32,
    /// CPUs issuing I/Os.
    pub cpus: u16,
    /// Whether the device touched each buffer.
    pub touch: bool,
    /// Whether the device was malicious.
    pub malicious: bool,
    /// Which clock `iops` used for software time.
    pub software_clock: String,
    /// Measured wall time of the run loop per I/O, in ns.
    pub software_ns_per_op: f64,
    /// Modeled time per I/O, in ns (all parts below).
    pub modeled_ns_per_op: f64,
    /// Modeled I/O path without the IOMMU, per I/O.
    pub io_path_ns_per_op: f64,
    /// Modeled hardware work done by the CPU (PTE writes, write-buffer flushes,
    /// invalidations), per I/O.
    pub modeled_hw_ns_per_op: f64,
    /// Modeled kernel software (locks, slab, tree, bitmap, queues), per I/O.
    pub modeled_sw_ns_per_op: f64,
    /// Modeled page-walk latency of device accesses, per I/O.
    pub device_ns_per_op: f64,
    /// I/Os per second.
    pub iops: f64,
    /// I/Os per second with the measured software time instead of the modeled one.
    pub measured_iops: f64,
    /// `iops / iops(disabled)` when a disabled run is in the same batch.
    pub relative_to_disabled: Option<f64>,
    /// IOTLB invalidation commands (page + domain + global).
    pub iotlb_invalidations: u64,
    /// Flush rounds the policy ran (each ends in one wait).
    pub iotlb_flushes: u64,
    /// Write-buffer flushes.
    pub write_buffer_flushes: u64,
    /// Peak allocator metadata in bytes.
    pub peak_metadata_bytes: u64,
    /// Device accesses that succeeded through a mapping already unmapped.
    pub stale_accesses: u64,
    /// Device accesses that succeeded outside the buffer inside a mapped page.
    pub subpage_accesses: u64,
    /// Bytes of mapped pages beyond the buffers, summed over maps.
    pub exposed_bytes: u64,
    /// IOMMU faults recorded.
    pub faults: u64,
    /// Wall time of the run loop, in seconds.
    pub wall_seconds: f64,
    /// Modeled time of the run, in seconds.
    pub modeled_seconds: f64,
    /// Per-component counters.
    pub stats: ComponentStats,
    /// The guest's counters (hypercalls, host, map cache), when the system is a guest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guest: Option<GuestResult>,
    /// A Xen PV domain's DMA layer (hypercalls, multicalls, what it leaves open), when the
    /// system is `xen-pv`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub xen_pv: Option<super::PvDmaRun>,
    /// What the replay made of the trace's events, when the workload is a trace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay: Option<ReplayReport>,
    /// The many-core model's measurements, when the configuration has a `[machine]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cores: Option<super::cores::CoreStats>,
}

impl RunResult {
    /// The CSV header matching [`RunResult::csv_row`].
    pub const CSV_HEADER: &'static str = "config,allocator,flush,cost_preset,seed,ops,io_size,outstanding,cpus,touch,malicious,\
software_clock,software_ns_per_op,modeled_ns_per_op,io_path_ns_per_op,modeled_hw_ns_per_op,modeled_sw_ns_per_op,\
device_ns_per_op,iops,measured_iops,relative_to_disabled,iotlb_invalidations,iotlb_flushes,write_buffer_flushes,\
peak_metadata_bytes,stale_accesses,subpage_accesses,exposed_bytes,faults,wall_seconds,modeled_seconds";

    /// One CSV row (no quoting needed: no field holds a comma).
    pub fn csv_row(&self) -> String {
        let rel = self
            .relative_to_disabled
            .map(|r| format!("{r:.6}"))
            .unwrap_or_default();
        format!(
            "{},{},{},{},{},{},{},{},{},{},{},{},{:.3},{:.3},{:.3},{:.3},{:.3},{:.3},{:.1},{:.1},{},{},{},{},{},{},{},{},{},{:.6},{:.6}",
            self.config,
            self.allocator,
            self.flush,
            self.cost_preset,
            self.seed,
            self.ops,
            self.io_size,
            self.outstanding,
            self.cpus,
            self.touch,
            self.malicious,
            self.software_clock,
            self.software_ns_per_op,
            self.modeled_ns_per_op,
            self.io_path_ns_per_op,
            self.modeled_hw_ns_per_op,
            self.modeled_sw_ns_per_op,
            self.device_ns_per_op,
            self.iops,
            self.measured_iops,
            rel,
            self.iotlb_invalidations,
            self.iotlb_flushes,
            self.write_buffer_flushes,
            self.peak_metadata_bytes,
            self.stale_accesses,
            self.subpage_accesses,
            self.exposed_bytes,
            self.faults,
            self.wall_seconds,
            self.modeled_seconds,
        )
    }

    /// A guest run's result: the common fields from the guest model (see the module doc).
    pub fn from_guest(
        labels: super::RunLabels,
        clock: crate::clock::ClockRate,
        g: GuestResult,
        wall_seconds: f64,
    ) -> RunResult {
        let ops = g.buffers;
        let n = ops.max(1) as f64;
        // The run's time is the one its limits give (`virt::link`, S1.9): its link payload
        // at the throughput reached, the smaller of what the link carries and what the CPUs
        // feed. IOPS follows the same limit as the throughput, never the link alone.
        let modeled_seconds = if g.throughput_mbps > 0.0 {
            g.sent_bytes() as f64 * 8.0 / (g.throughput_mbps * 1e6)
        } else {
            0.0
        };
        let hw_ns = clock.ns(crate::clock::Cycles::new(g.cycles)) / n;
        RunResult {
            config: labels.config,
            allocator: "none".into(),
            flush: "strict".into(),
            cost_preset: labels.cost_preset,
            seed: labels.seed,
            ops,
            io_size: labels.io_size,
            outstanding: labels.outstanding,
            cpus: labels.cpus,
            touch: labels.touch,
            malicious: false,
            software_clock: "modeled".into(),
            software_ns_per_op: wall_seconds * 1e9 / n,
            modeled_ns_per_op: hw_ns,
            io_path_ns_per_op: 0.0,
            modeled_hw_ns_per_op: hw_ns,
            modeled_sw_ns_per_op: 0.0,
            device_ns_per_op: 0.0,
            iops: if modeled_seconds > 0.0 {
                ops as f64 / modeled_seconds
            } else {
                0.0
            },
            measured_iops: 0.0,
            relative_to_disabled: None,
            iotlb_invalidations: g.iotlb_invalidations,
            iotlb_flushes: 0,
            write_buffer_flushes: g.write_buffer_flushes,
            peak_metadata_bytes: 0,
            stale_accesses: g.stale_accesses,
            subpage_accesses: 0,
            exposed_bytes: 0,
            faults: g.faulted_accesses,
            wall_seconds,
            modeled_seconds,
            stats: ComponentStats::default(),
            guest: Some(g),
            xen_pv: None,
            replay: None,
            cores: None,
        }
    }

    /// A Xen PV domain's run: `ops` are map + unmap pairs; the modeled time per op is the
    /// domain's DMA-layer cycles (`modeled_sw`) and the hypervisor's (`modeled_hw`: crossings,
    /// entry writes, flushes); there is no I/O path, so `iops` is 0; `stale_accesses` counts the
    /// device's retries of lost buffers that went through (at once and later); the rest of
    /// the domain's counters are in `xen_pv`.
    pub fn from_xen_pv(
        labels: super::RunLabels,
        clock: crate::clock::ClockRate,
        x: super::PvDmaRun,
        wall_seconds: f64,
    ) -> RunResult {
        let ops = x.pairs;
        let n = ops.max(1) as f64;
        let ns = |cycles_per_pair: f64| cycles_per_pair / clock.as_ghz();
        RunResult {
            config: labels.config,
            allocator: if x.option == "pre-allocate" || x.option == "in-advance" {
                "none".into()
            } else {
                "bitmap".into()
            },
            flush: "per-lap".into(),
            cost_preset: labels.cost_preset,
            seed: labels.seed,
            ops,
            io_size: labels.io_size,
            outstanding: labels.outstanding,
            cpus: labels.cpus,
            touch: labels.touch,
            malicious: false,
            software_clock: "modeled".into(),
            software_ns_per_op: wall_seconds * 1e9 / n,
            modeled_ns_per_op: ns(x.cycles_per_pair),
            io_path_ns_per_op: 0.0,
            modeled_hw_ns_per_op: ns(x.hypervisor_cycles_per_pair),
            modeled_sw_ns_per_op: ns(x.domain_cycles_per_pair),
            device_ns_per_op: 0.0,
            iops: 0.0,
            measured_iops: 0.0,
            relative_to_disabled: None,
            iotlb_invalidations: x.whole_flushes + x.single_entry_invalidations,
            iotlb_flushes: x.whole_flushes,
            write_buffer_flushes: 0,
            peak_metadata_bytes: 0,
            stale_accesses: x.probes_through + x.late_probes_through,
            subpage_accesses: 0,
            exposed_bytes: 0,
            faults: (x.probes - x.probes_through) + (x.late_probes - x.late_probes_through),
            wall_seconds,
            modeled_seconds: ns(x.cycles_per_pair) * n / 1e9,
            stats: ComponentStats::default(),
            guest: None,
            xen_pv: Some(x),
            replay: None,
            cores: None,
        }
    }

    /// Fills `relative_to_disabled` in every result from the `disabled` one, if present.
    pub fn fill_relative(results: &mut [RunResult]) {
        let base = results
            .iter()
            .find(|r| r.config == "disabled" || r.config == "passthrough")
            .map(|r| r.iops);
        if let Some(base) = base.filter(|b| *b > 0.0) {
            for r in results {
                r.relative_to_disabled = Some(r.iops / base);
            }
        }
    }
}
