//! Runs a workload through a Xen PV domain's DMA layer ([`crate::virt::xen::pv_dma`]): the
//! domain's DMA API (next-fit bitmap allocator, roll-around flush, S2.4) over the
//! [`PvDmaBackend`], with one of the S2.6 options, on a Calgary, DART or VT-d unit that the
//! hypervisor owns. This is the one place the option and unit enums become types.
//!
//! The workload's buffers become the domain's pseudo-physical memory ([`InGuest`]); after
//! every unmap the device may probe the buffer it just lost (the stale-access oracle
//! classifies it), and with `page_flip` each received buffer's frames are flipped to
//! another domain after the unmap, as the old netback's receive path did. The workload's
//! devices share one device handle, so one I/O address space (a TCE table serves the devices
//! of a bus, S2.1); timer ticks are ignored (the roll-around flush has no timer).

use serde::{Deserialize, Serialize};

use crate::addr::{Access, Bdf, DmaDirection, Gpa, Hpa, Iova, PAGE_4K, Pfn};
use crate::device::AccessOutcome;
use crate::dma::{DeviceHandle, DmaApi, DmaConfig, MapBackend};
use crate::driver::{Driver, Hooks, Slot, access_for};
use crate::error::Error;
use crate::flush::{FlushPolicy, PerLap};
use crate::hw::{Calgary, CostModel, Dart, RemapUnit, Vtd, VtdConfig};
use crate::iova::{Bitmap, IovaAllocator};
use crate::virt::xen::pv_dma::{
    GrantPremap, Hypervisor, InAdvance, MapMulti, NeverFree, P2m, PreAllocate, PvDmaBackend,
    PvDmaOption, PvDmaStats, SizeBucket, Streaming,
};
use crate::workload::{InGuest, TraceWorkload, Workload, WorkloadConfig};

use std::time::Instant;

use super::build::{IOVA_START_PFN, WorkloadVisitor, iova_space_end, labels_of, with_workload};
use super::config::{ExperimentConfig, HardwareConfig, Resolved, TraceSpec, UnitKind};
use super::progress::{ProgressFn, Watched};
use super::result::RunResult;
use super::runner::modeled_software;

/// Which S2.6 option the domain's DMA layer uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PvDmaKind {
    /// One multicall per map and per unmap request (what the paper measured).
    Streaming,
    /// Consecutive requests batched into `map_multi`/`unmap_multi`.
    MapMulti,
    /// Entries never cleared.
    NeverFree,
    /// All memory mapped at start, pseudo-physical DMA addresses.
    PreAllocate,
    /// A caching layer: map a frame the first time, keep it.
    InAdvance,
    /// Entries written inside the driver domain's grant operations.
    GrantPremap,
}

impl PvDmaKind {
    /// Every option.
    pub const ALL: [PvDmaKind; 6] = [
        PvDmaKind::Streaming,
        PvDmaKind::MapMulti,
        PvDmaKind::NeverFree,
        PvDmaKind::PreAllocate,
        PvDmaKind::InAdvance,
        PvDmaKind::GrantPremap,
    ];

    /// The option's name.
    pub const fn name(self) -> &'static str {
        match self {
            PvDmaKind::Streaming => Streaming::NAME,
            PvDmaKind::MapMulti => MapMulti::NAME,
            PvDmaKind::NeverFree => NeverFree::NAME,
            PvDmaKind::PreAllocate => PreAllocate::NAME,
            PvDmaKind::InAdvance => InAdvance::NAME,
            PvDmaKind::GrantPremap => GrantPremap::NAME,
        }
    }
}

/// One PV DMA-layer run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PvDmaSpec {
    /// The option.
    pub option: PvDmaKind,
    /// The unit the hypervisor owns.
    pub unit: UnitKind,
    /// `map_multi`/`unmap_multi` batch (requests), for [`PvDmaKind::MapMulti`].
    pub batch: u32,
    /// Flip each received buffer's frames to another domain after its unmap.
    pub page_flip: bool,
    /// Pseudo-physical frames of the domain (its memory).
    pub domain_pages: u64,
}

impl Default for PvDmaSpec {
    fn default() -> Self {
        Self {
            option: PvDmaKind::Streaming,
            unit: UnitKind::Calgary,
            batch: 16,
            page_flip: false,
            // 2 GiB: the workloads' buffers lie above the first GiB.
            domain_pages: 1 << 19,
        }
    }
}

/// What a PV DMA-layer run measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PvDmaRun {
    /// The option's name.
    pub option: String,
    /// The unit's name.
    pub unit: String,
    /// Batch size (map-multi), else 1.
    pub batch: u32,
    /// Whether received frames were flipped away.
    pub page_flip: bool,
    /// Unmaps (completed I/Os).
    pub pairs: u64,
    /// Map and unmap calls of the DMA API.
    pub dma_calls: u64,
    /// What crossed into the hypervisor.
    pub hypervisor: PvDmaStats,
    /// I/O-path hypercalls per map + unmap pair.
    pub hypercalls_per_pair: f64,
    /// Entries per map/unmap multicall.
    pub multicall_sizes: Vec<SizeBucket>,
    /// Fraction of multicalls with one entry (S2.5: over 99%).
    pub single_entry_fraction: f64,
    /// Mean entries per multicall.
    pub mean_entries: f64,
    /// Whole-cache flushes (Calgary) or global invalidations.
    pub whole_flushes: u64,
    /// Single-entry (page) invalidations.
    pub single_entry_invalidations: u64,
    /// Domain CPU cycles per pair: the DMA API, allocator and flush policy.
    pub domain_cycles_per_pair: f64,
    /// Hypervisor CPU cycles per pair: crossings, entry writes and clears, flushes (setup
    /// excluded).
    pub hypervisor_cycles_per_pair: f64,
    /// Both.
    pub cycles_per_pair: f64,
    /// Device probes of a buffer just unmapped.
    pub probes: u64,
    /// Of which went through the IOMMU (stale accesses).
    pub probes_through: u64,
    /// Late probes: the buffer unmapped [`LATE_PROBE_LAG`] pairs earlier, retried by a
    /// device that kept its address (skipped when the address is mapped again).
    pub late_probes: u64,
    /// Of which went through.
    pub late_probes_through: u64,
    /// Device accesses that reached a frame the domain no longer owns.
    pub foreign_accesses: u64,
    /// Page flips made.
    pub flips: u64,
    /// Whether the device can reach only buffers mapped now.
    pub protects_within_domain: bool,
}

/// The unit of Ben-Yehuda et al.'s measurements: the `vtd-2008` preset's prices with Xen's
/// hypercall ([`CostModel::XEN_2007`]), the default IOTLB, a device with a 32-bit mask.
pub fn xen_2007_unit() -> Result<VtdConfig, Error> {
    let cfg = ExperimentConfig::from_toml("[hardware]\ncost = \"vtd-2008\"\n")?;
    let mut vtd = cfg.resolve()?.unit;
    vtd.cost = CostModel::XEN_2007;
    Ok(vtd)
}

/// Runs `workload` through a PV domain's DMA layer as `spec` says, on the unit `unit`
/// describes (its prices, IOTLB and, for VT-d, its tables), for a device with a `dma_bits`
/// mask.
pub fn run_pv_dma<W: Workload<Phys = Hpa>>(
    spec: &PvDmaSpec,
    unit: &VtdConfig,
    dma_bits: u8,
    workload: W,
) -> Result<PvDmaRun, Error> {
    Ok(run_keeping(spec, unit, dma_bits, workload)?.0)
}

/// [`run_pv_dma`], handing the workload back (a trace's replay report).
fn run_keeping<W: Workload<Phys = Hpa>>(
    spec: &PvDmaSpec,
    unit: &VtdConfig,
    dma_bits: u8,
    workload: W,
) -> Result<(PvDmaRun, W), Error> {
    let tce = HardwareConfig::tce(unit, dma_bits);
    match spec.unit {
        UnitKind::Vtd => with_option(spec, Vtd::new(*unit)?, dma_bits, workload),
        UnitKind::Calgary => with_option(spec, Calgary::new(tce)?, dma_bits, workload),
        UnitKind::Dart => with_option(spec, Dart::new(tce)?, dma_bits, workload),
    }
}

/// An experiment with `system.kind = "xen-pv"` on a generator.
pub(super) fn run_on_generator(
    cfg: &ExperimentConfig,
    resolved: &Resolved,
    spec: &PvDmaSpec,
    w: &WorkloadConfig,
    progress: &mut ProgressFn<'_>,
) -> Result<RunResult, Error> {
    struct Run<'a> {
        cfg: &'a ExperimentConfig,
        resolved: &'a Resolved,
        spec: &'a PvDmaSpec,
        progress: &'a mut ProgressFn<'a>,
    }
    impl WorkloadVisitor for Run<'_> {
        type Output = RunResult;
        fn visit<W: Workload<Phys = Hpa>>(self, w: W) -> Result<RunResult, Error> {
            let start = Instant::now();
            let w = Watched::new(w, self.progress);
            let (run, _) = watched_run(self.spec, &self.resolved.unit, self.cfg.dma_bits, w)?;
            Ok(RunResult::from_xen_pv(
                labels_of(self.cfg),
                self.resolved.unit.cost.clock,
                run,
                start.elapsed().as_secs_f64(),
            ))
        }
    }
    with_workload(
        w,
        Run {
            cfg,
            resolved,
            spec,
            progress,
        },
    )
}

/// An experiment with `system.kind = "xen-pv"` on a trace.
pub(super) fn run_on_trace(
    cfg: &ExperimentConfig,
    resolved: &Resolved,
    spec: &PvDmaSpec,
    t: &TraceSpec,
    progress: &mut ProgressFn<'_>,
) -> Result<RunResult, Error> {
    let start = Instant::now();
    let w = TraceWorkload::new(crate::trace::open(&t.trace, t.format, t.lenient)?);
    let (run, w) = watched_run(
        spec,
        &resolved.unit,
        cfg.dma_bits,
        Watched::new(w, progress),
    )?;
    let mut r = RunResult::from_xen_pv(
        labels_of(cfg),
        resolved.unit.cost.clock,
        run,
        start.elapsed().as_secs_f64(),
    );
    r.replay = Some(w.report());
    Ok(r)
}

/// [`run_keeping`] of a watched workload: [`Error::Cancelled`] if its progress callback
/// stopped it.
fn watched_run<W: Workload<Phys = Hpa>>(
    spec: &PvDmaSpec,
    unit: &VtdConfig,
    dma_bits: u8,
    w: Watched<'_, '_, W>,
) -> Result<(PvDmaRun, W), Error> {
    // The run takes the workload and hands it back; the watch's verdict is read after it.
    let (run, w) = run_keeping(spec, unit, dma_bits, w)?;
    w.finish(Ok(run))
}

fn with_option<U: RemapUnit, W: Workload<Phys = Hpa>>(
    spec: &PvDmaSpec,
    unit: U,
    dma_bits: u8,
    workload: W,
) -> Result<(PvDmaRun, W), Error> {
    match spec.option {
        PvDmaKind::Streaming => run_with(spec, unit, Streaming, dma_bits, workload),
        PvDmaKind::MapMulti => run_with(spec, unit, MapMulti::new(spec.batch), dma_bits, workload),
        PvDmaKind::NeverFree => run_with(spec, unit, NeverFree, dma_bits, workload),
        PvDmaKind::PreAllocate => run_with(spec, unit, PreAllocate, dma_bits, workload),
        PvDmaKind::InAdvance => run_with(spec, unit, InAdvance::default(), dma_bits, workload),
        PvDmaKind::GrantPremap => run_with(spec, unit, GrantPremap, dma_bits, workload),
    }
}

/// How many pairs after its unmap a buffer is probed again (longer than any translation
/// cache here holds an entry without use; shorter than a lap of the allocator).
pub const LATE_PROBE_LAG: usize = 4096;

/// A buffer beyond the domain's memory is a configuration error (the domain is too small
/// for the workload), named as such rather than as the hypervisor's refusal.
fn check_in_domain(spec: &PvDmaSpec, phys: Gpa, len: u64) -> Result<(), Error> {
    let end = phys.get().saturating_add(len.max(1) - 1) >> PAGE_4K.shift();
    if end >= spec.domain_pages {
        return Err(super::ConfigError::Invalid {
            key: "system.domain_mib".into(),
            value: (spec.domain_pages / 256).to_string(),
            expected: format!(
                "at least {} MiB: the workload maps memory up to {:#x}",
                (end + 1).div_ceil(256),
                phys.get().saturating_add(len)
            ),
        }
        .into());
    }
    Ok(())
}

/// What a Xen PV domain adds to the driver: every buffer inside the domain, the device's
/// probe of each buffer just unmapped (and again [`LATE_PROBE_LAG`] pairs later), and with
/// `page_flip` each received buffer's frames flipped to another domain after its unmap.
struct XenPv<'a> {
    spec: &'a PvDmaSpec,
    /// Probes, of which went through; late probes, of which went through.
    probes: [u64; 4],
    /// The addresses of the last [`LATE_PROBE_LAG`] unmapped buffers, a ring: `cursor` is
    /// the oldest once it is full.
    past: Vec<(Iova, DmaDirection)>,
    cursor: usize,
}

/// Whether a probe's read or write (as `dir`'s device access) went through.
const fn went_through((r, w): (bool, bool), dir: DmaDirection) -> bool {
    match access_for(dir) {
        Access::Read => r,
        Access::Write => w,
    }
}

impl<U: RemapUnit, S: PvDmaOption> Hooks<Bitmap, PerLap, PvDmaBackend<U, S>> for XenPv<'_> {
    type Error = Error;

    #[inline(always)]
    fn buffer(&mut self, phys: Gpa, len: u64, _dir: DmaDirection) -> Result<u64, Error> {
        check_in_domain(self.spec, phys, len)?;
        Ok(len)
    }

    fn after_unmap(
        &mut self,
        api: &mut DmaApi<Bitmap, PerLap, PvDmaBackend<U, S>>,
        dev: DeviceHandle,
        s: &Slot<Gpa>,
        _access: &mut AccessOutcome,
    ) -> Result<(), Error> {
        let dir = s.dir();
        let [probes, through, late, late_through] = &mut self.probes;
        // A device that keeps the old address retries it once it is unmapped.
        if let Some(rw) = api.probe_unmapped(dev, s.addr())? {
            *probes += 1;
            *through += u64::from(went_through(rw, dir));
        }
        if self.past.len() < LATE_PROBE_LAG {
            self.past.push((s.addr(), dir));
        } else {
            let (old, old_dir) = std::mem::replace(&mut self.past[self.cursor], (s.addr(), dir));
            self.cursor = (self.cursor + 1) % LATE_PROBE_LAG;
            if let Some(rw) = api.probe_unmapped(dev, old)? {
                *late += 1;
                *late_through += u64::from(went_through(rw, old_dir));
            }
        }
        if self.spec.page_flip && dir == DmaDirection::FromDevice && s.sg().is_none() {
            let phys = s.phys();
            let first = phys.pfn(PAGE_4K).get();
            let n = PAGE_4K.pages_spanned(phys.page_offset(PAGE_4K), s.bytes());
            for g in first..first + n {
                api.backend_mut().flip(Pfn::new(g))?;
            }
        }
        Ok(())
    }
}

fn run_with<U: RemapUnit, S: PvDmaOption, W: Workload<Phys = Hpa>>(
    spec: &PvDmaSpec,
    unit: U,
    option: S,
    dma_bits: u8,
    workload: W,
) -> Result<(PvDmaRun, W), Error> {
    let mut workload = InGuest::new(workload);
    // The domain's machine frames start at 4 GiB; the partner domain of page flips owns
    // the next 64 Ki frames.
    let p2m = P2m::new(Pfn::new(1 << 20), spec.domain_pages, 1 << 16)?;
    let backend = PvDmaBackend::new(Hypervisor::new(unit, p2m), option);
    let dma = DmaConfig {
        translation: S::TRANSLATION,
        dma_bits,
        oracle: true,
        ..DmaConfig::default()
    };
    let iova = Bitmap::new(Pfn::new(IOVA_START_PFN), iova_space_end(dma_bits))?;
    let mut api = DmaApi::new(dma, backend, iova, PerLap::new());
    let dev: DeviceHandle = api.attach(Bdf::new(0, 1, 0).unwrap_or_default())?;
    // What the domain's start cost (pre-allocation's mapping of all memory) is not I/O.
    let setup_cycles = api.backend().hypervisor().cycles();
    let mut hooks = XenPv {
        spec,
        probes: [0; 4],
        past: Vec::with_capacity(LATE_PROBE_LAG),
        cursor: 0,
    };
    let mut driver = Driver::new(&mut api, std::slice::from_ref(&dev), 1, &mut hooks);
    driver.run(&mut workload)?;
    let pairs = driver.ios();
    api.drain()?;
    let run = summarise(spec, &api, setup_cycles, pairs, hooks.probes);
    Ok((run, workload.into_inner()))
}

fn summarise<A: IovaAllocator, F: FlushPolicy, U: RemapUnit, S: PvDmaOption>(
    spec: &PvDmaSpec,
    api: &DmaApi<A, F, PvDmaBackend<U, S>>,
    setup_cycles: crate::clock::Cycles,
    pairs: u64,
    [probes, probes_through, late_probes, late_probes_through]: [u64; 4],
) -> PvDmaRun {
    let hv = api.backend().hypervisor();
    let cost = *api.backend().cost();
    let d = api.stats();
    let dma_calls = d.maps + d.unmaps + d.map_sgs + d.unmap_sgs;
    let domain = modeled_software(&cost, dma_calls, &api.allocator_stats(), &api.flush_stats());
    let hyper = hv.cycles().get().saturating_sub(setup_cycles.get());
    #[expect(clippy::cast_precision_loss, reason = "counts below 2^53")]
    let per = |x: u64| {
        if pairs == 0 {
            0.0
        } else {
            x as f64 / pairs as f64
        }
    };
    let unit = hv.unit().stats();
    let stats = *hv.stats();
    PvDmaRun {
        option: S::NAME.into(),
        unit: U::KIND.into(),
        batch: if spec.option == PvDmaKind::MapMulti {
            spec.batch.max(1)
        } else {
            1
        },
        page_flip: spec.page_flip,
        pairs,
        dma_calls,
        hypervisor: stats,
        hypercalls_per_pair: per(stats.hypercalls),
        multicall_sizes: hv.sizes().buckets(),
        single_entry_fraction: hv.sizes().single_entry_fraction(),
        mean_entries: hv.sizes().mean(),
        whole_flushes: unit.inv_global,
        single_entry_invalidations: unit.inv_page,
        domain_cycles_per_pair: per(domain.get()),
        hypervisor_cycles_per_pair: per(hyper),
        cycles_per_pair: per(domain.get() + hyper),
        probes,
        probes_through,
        late_probes,
        late_probes_through,
        foreign_accesses: stats.foreign_accesses,
        flips: hv.p2m().flips(),
        protects_within_domain: S::PROTECTS_WITHIN_DOMAIN,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::{NetRx, NetRxConfig};

    fn run(option: PvDmaKind, page_flip: bool) -> PvDmaRun {
        let spec = PvDmaSpec {
            option,
            page_flip,
            ..PvDmaSpec::default()
        };
        let w = NetRx::new(NetRxConfig {
            packets: 20_000,
            // Page flipping hands whole pages over: one buffer per page.
            buf_size: if page_flip { 4096 } else { 2048 },
            ..NetRxConfig::default()
        });
        run_pv_dma(&spec, &xen_2007_unit().unwrap(), 32, w).unwrap()
    }

    /// What the paper measured: two single-entry multicalls per packet, Calgary flushing
    /// only whole, and the S2.4 window: a buffer retried right after its unmap is still in
    /// the cache; retried 4,096 packets later it faults.
    #[test]
    fn streaming_is_two_single_entry_multicalls_per_pair() {
        let r = run(PvDmaKind::Streaming, false);
        assert_eq!(r.pairs, 20_000);
        assert_eq!(
            r.hypervisor.hypercalls,
            2 * r.pairs + r.hypervisor.invalidation_hypercalls
        );
        assert!((r.single_entry_fraction - 1.0).abs() < f64::EPSILON);
        assert_eq!(r.single_entry_invalidations, 0, "Calgary flushes whole");
        assert!(r.whole_flushes >= 1);
        assert_eq!(r.probes_through, r.probes);
        assert!(r.late_probes > 10_000);
        assert_eq!(r.late_probes_through, 0);
        assert!(r.protects_within_domain);
        // The crossings are the difference to the same entries written without them.
        let g = run(PvDmaKind::GrantPremap, false);
        assert_eq!(
            g.hypervisor.hypercalls,
            g.hypervisor.invalidation_hypercalls
        );
        assert_eq!(g.hypervisor.entries_mapped, r.hypervisor.entries_mapped);
        let saved = r.cycles_per_pair - g.cycles_per_pair;
        let hypercall = CostModel::XEN_2007.hypercall as f64;
        assert!((saved - 2.0 * hypercall).abs() < 1.0, "{saved}");
    }

    /// A NAPI poll's 64 unmaps and 64 maps go out as 4 + 4 multicalls of 16.
    #[test]
    fn map_multi_batches_the_runs_of_requests() {
        let r = run(PvDmaKind::MapMulti, false);
        assert_eq!(r.batch, 16);
        assert!((r.mean_entries - 16.0).abs() < f64::EPSILON, "{r:?}");
        assert!((r.hypercalls_per_pair - 2.0 / 16.0).abs() < 0.001, "{r:?}");
        assert_eq!(r.late_probes_through, 0);
    }

    /// Never-free: no hypercall for an unmap, and a buffer unmapped long ago is still
    /// reachable (its entry was never cleared nor reused).
    #[test]
    fn never_free_leaves_the_hole_open() {
        let r = run(PvDmaKind::NeverFree, false);
        assert_eq!(r.hypervisor.entries_cleared, 0);
        assert_eq!(
            r.hypervisor.hypercalls,
            r.pairs + r.hypervisor.invalidation_hypercalls
        );
        assert!(r.late_probes > 10_000);
        assert_eq!(r.late_probes_through, r.late_probes);
        assert!(!r.protects_within_domain);
    }

    /// Pre-allocation: no hypercall per I/O, every frame mapped at start; right until the
    /// P2M changes, after which received pages land in frames given away.
    #[test]
    fn pre_allocation_breaks_with_page_flipping() {
        let r = run(PvDmaKind::PreAllocate, false);
        assert_eq!(r.hypervisor.hypercalls, 0);
        assert_eq!(
            r.hypervisor.setup_entries,
            PvDmaSpec::default().domain_pages
        );
        assert_eq!(r.hypervisor_cycles_per_pair, 0.0);
        assert_eq!(r.foreign_accesses, 0);
        assert_eq!(r.late_probes_through, r.late_probes);
        let f = run(PvDmaKind::PreAllocate, true);
        assert_eq!(f.flips, 20_000);
        assert!(f.foreign_accesses > 1_000, "{f:?}");
        // Streaming maps the frame the P2M names at each map: flips break nothing.
        let s = run(PvDmaKind::Streaming, true);
        assert_eq!(s.flips, 20_000);
        assert_eq!(s.foreign_accesses, 0, "{s:?}");
    }

    /// The caching layer maps each frame once: hypercalls = distinct frames used.
    #[test]
    fn in_advance_maps_each_frame_once() {
        let r = run(PvDmaKind::InAdvance, false);
        assert!(r.hypervisor.hypercalls <= 4096, "{r:?}");
        assert_eq!(r.hypervisor.hypercalls, r.hypervisor.entries_mapped);
        assert!(r.hypercalls_per_pair < 0.25);
        assert_eq!(r.late_probes_through, r.late_probes);
        assert!(run(PvDmaKind::InAdvance, true).foreign_accesses > 0);
    }

    /// Why the paper saw single-entry requests (S2.5): Linux maps a packet's head and each
    /// fragment with a call of its own; only a driver that maps the packet as one
    /// scatterlist makes multi-entry multicalls.
    #[test]
    fn netperf_send_multicall_sizes_follow_the_drivers_mapping() {
        use crate::workload::{NetperfSend, NetperfSendConfig, TxMapping};
        let sizes = |mapping| {
            let w = NetperfSend::new(NetperfSendConfig {
                packets: 5_000,
                tso: true,
                mapping,
                ..NetperfSendConfig::default()
            })
            .unwrap();
            run_pv_dma(&PvDmaSpec::default(), &xen_2007_unit().unwrap(), 32, w).unwrap()
        };
        let per_frag = sizes(TxMapping::PerFragment);
        let sg = sizes(TxMapping::Sg);
        eprintln!("{per_frag:?}\n{sg:?}");
        assert!(per_frag.single_entry_fraction > 0.99, "{per_frag:?}");
        assert!(sg.mean_entries > 4.0, "{sg:?}");
    }
}
