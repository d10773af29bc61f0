//! The one place where configuration enums become concrete generic types (the configuration
//! boundary). Everything below [`run_bench`] is monomorphised: the per-I/O loop has no
//! dynamic dispatch and no allocation.

use crate::addr::{Hpa, Iova, Pfn};
use crate::clock::{ClockRate, Cycles};
use crate::device::DeviceMode;
use crate::dma::{DmaApi, DmaConfig, Native};
use crate::error::Error;
use crate::flush::{Deferred, FlushConfig, FlushPolicy, FlushQueue, PerLap, Strict};
use crate::hw::vtd::Vtd;
use crate::hw::{Calgary, Dart, RemapUnit};
use crate::iova::domain::ByteRange;
use crate::iova::{
    AllocatorKind, Bitmap, GapTree, IovaAllocator, IovaError, Magazine, RangeControl, RbTree,
    RbTree2626,
};
use crate::workload::{
    NetRx, PseudoScsi, PseudoScsiConfig, ReplayReport, TraceWorkload, Workload, WorkloadConfig,
};

use super::config::{
    ExperimentConfig, HardwareConfig, Kernel, Resolved, ResolvedSystem, UnitKind, WorkloadSpec,
};
use super::cores::{CoreModel, Scopes};
use super::exposure::Accounting;
use super::progress::ProgressFn;
use super::result::RunResult;
use super::runner::{self, RunLabels};

/// The first IOVA page handed out: pfn 0 never is (Linux's `IOVA_START_PFN`).
pub const IOVA_START_PFN: u64 = 1;

/// The allocator's space for a device with a `dma_bits` mask: `[1, 2^(dma_bits - 12))`
/// pages (4 GiB → 2^20 pages, a 128 KiB bitmap, S0.5).
pub fn iova_space_end(dma_bits: u8) -> Pfn<Iova> {
    Pfn::new(1u64 << (u32::from(dma_bits.clamp(13, 64)) - 12).min(52))
}

/// Runs one experiment, whatever its system and workload: the one runner behind `iommulab
/// run`, `bench`, `replay --config-file` and Python's `run`, `run_batch` and `sweep`. The
/// configuration is resolved once; then
///
/// | system | workload | runs |
/// |---|---|---|
/// | bare metal | pseudo driver | the benchmark of S0.8 (`duration_s` honoured) |
/// | bare metal | another generator | [`run_workload`] |
/// | bare metal | trace | [`replay_trace`] (`replay` filled) |
/// | guest | generator or trace | the guest model, `virt::run_guest` (`guest` filled; a trace also fills `replay`) |
///
/// `progress(done, total)` is called as I/Os complete; when it says `Break` the run ends
/// with [`Error::Cancelled`].
pub fn run_experiment(
    cfg: &ExperimentConfig,
    progress: &mut ProgressFn<'_>,
) -> Result<RunResult, Error> {
    let resolved = cfg.resolve()?;
    match (&resolved.system, &cfg.workload) {
        (ResolvedSystem::BareMetal, WorkloadSpec::Generator(WorkloadConfig::PseudoScsi(w))) => {
            bench(cfg, &resolved, *w, progress)
        }
        (ResolvedSystem::BareMetal, WorkloadSpec::Generator(w)) => {
            struct Run<'a> {
                cfg: &'a ExperimentConfig,
                resolved: &'a Resolved,
                progress: &'a mut ProgressFn<'a>,
            }
            impl WorkloadVisitor for Run<'_> {
                type Output = RunResult;
                fn visit<W: Workload<Phys = Hpa>>(self, mut w: W) -> Result<RunResult, Error> {
                    Go {
                        cfg: self.cfg,
                        resolved: self.resolved,
                        workload: &mut w,
                        labels: labels_of(self.cfg),
                        oracle: false,
                        stop_at: None,
                        progress: self.progress,
                        cpus: None,
                        acct: None,
                    }
                    .run()
                }
            }
            with_workload(
                w,
                Run {
                    cfg,
                    resolved: &resolved,
                    progress,
                },
            )
        }
        (ResolvedSystem::BareMetal, WorkloadSpec::Trace(t)) => {
            let src = crate::trace::open(&t.trace, t.format, t.lenient)?;
            Ok(replay_resolved(cfg, &resolved, src, progress, None)?.0)
        }
        (ResolvedSystem::Guest(g), WorkloadSpec::Generator(w)) => {
            super::guest::run_on_generator(cfg, g, w, progress)
        }
        (ResolvedSystem::Guest(g), WorkloadSpec::Trace(t)) => {
            super::guest::run_on_trace(cfg, g, t, progress)
        }
        (ResolvedSystem::XenPv(x), WorkloadSpec::Generator(w)) => {
            super::pv_dma::run_on_generator(cfg, &resolved, x, w, progress)
        }
        (ResolvedSystem::XenPv(x), WorkloadSpec::Trace(t)) => {
            super::pv_dma::run_on_trace(cfg, &resolved, x, t, progress)
        }
    }
}

/// Runs the pseudo-driver benchmark (S0.8) for one configuration (any other workload or
/// system in `cfg` is run by [`run_experiment`] as well).
///
/// `progress(done, total)` is called as I/Os complete; `Break` stops the run.
pub fn run_bench(
    cfg: &ExperimentConfig,
    progress: &mut ProgressFn<'_>,
) -> Result<RunResult, Error> {
    run_experiment(cfg, progress)
}

fn bench(
    cfg: &ExperimentConfig,
    resolved: &Resolved,
    workload: PseudoScsiConfig,
    progress: &mut ProgressFn<'_>,
) -> Result<RunResult, Error> {
    let (workload, stop_at) = match cfg.duration_s {
        Some(d) => (
            PseudoScsiConfig {
                ios: u64::MAX,
                ..workload
            },
            Some(resolved.unit.cost.clock.cycles_from_secs(d)),
        ),
        None => (workload, None),
    };
    let mut w = PseudoScsi::new(workload);
    let oracle = workload.touch || !matches!(cfg.device, DeviceMode::Benign);
    let go = Go {
        cfg,
        resolved,
        workload: &mut w,
        labels: labels_of(cfg),
        oracle,
        stop_at,
        progress,
        cpus: None,
        acct: None,
    };
    go.run()
}

/// The labels of a run of `cfg`: its configuration, and the workload's parameters where it
/// has them (a trace has no seed, I/O size or queue depth of its own: those stay zero).
pub fn labels_of(cfg: &ExperimentConfig) -> RunLabels {
    let mut labels = RunLabels {
        config: cfg.label(),
        cost_preset: cfg.hardware.cost.name().to_string(),
        seed: 0,
        io_size: 0,
        outstanding: 0,
        cpus: 0,
        touch: false,
    };
    match &cfg.workload {
        WorkloadSpec::Generator(WorkloadConfig::PseudoScsi(w)) => {
            labels.seed = w.seed;
            labels.io_size = w.io_size;
            labels.outstanding = w.outstanding;
            labels.cpus = w.cpus;
            labels.touch = w.touch;
        }
        WorkloadSpec::Generator(w) => labels.seed = w.seed(),
        WorkloadSpec::Trace(_) => {}
    }
    labels
}

/// Runs any workload (a generator or a trace) through the configuration `cfg` names: its
/// mechanisms, hardware, device mode and clocks (`cfg.workload` is not used). The stale-access
/// oracle runs when `oracle` is set or the device is malicious.
pub fn run_workload<W: Workload<Phys = Hpa>>(
    cfg: &ExperimentConfig,
    workload: &mut W,
    labels: RunLabels,
    oracle: bool,
    stop_at: Option<Cycles>,
    progress: &mut ProgressFn<'_>,
) -> Result<RunResult, Error> {
    let resolved = cfg.resolve()?;
    let go = Go {
        cfg,
        resolved: &resolved,
        workload,
        labels,
        oracle,
        stop_at,
        progress,
        cpus: None,
        acct: None,
    };
    go.run()
}

struct Go<'a, W> {
    cfg: &'a ExperimentConfig,
    resolved: &'a Resolved,
    workload: &'a mut W,
    labels: RunLabels,
    oracle: bool,
    stop_at: Option<Cycles>,
    progress: &'a mut ProgressFn<'a>,
    /// The CPUs a trace replay models (the trace's count); `None` for a generator.
    cpus: Option<usize>,
    /// Per-device accounting (`iommulab compare`).
    acct: Option<&'a mut Accounting>,
}

impl<W: Workload<Phys = Hpa>> Go<'_, W> {
    /// The one place the resolved allocator and flush policy become types.
    fn run(mut self) -> Result<RunResult, Error> {
        let cfg = self.cfg;
        let m = self.resolved.mechanisms;
        let clock = self.resolved.unit.cost.clock;
        let start = Pfn::new(IOVA_START_PFN);
        let end = iova_space_end(cfg.dma_bits);
        // The magazines' and flush queues' CPUs: a trace's own, the pseudo driver's, else
        // one (generators other than the pseudo driver run on CPU 0).
        let cpus = self
            .cpus
            .unwrap_or_else(|| usize::from(cfg.pseudo_scsi().map_or(1, |w| w.cpus)))
            .max(cfg.machine.map_or(1, |m| usize::from(m.cpus)))
            .max(1);
        self.oracle |= !matches!(cfg.device, DeviceMode::Benign);
        let go = self;
        let reserved = &go.resolved.reserved;
        match (go.resolved.kernel, m.allocator) {
            (Kernel::V2_6_26, AllocatorKind::Rbtree) => {
                let t = reserve(RbTree2626::new(start, end)?, reserved)?;
                go.with_flush(t, m.flush, cpus, clock)
            }
            (_, AllocatorKind::Rbtree) => {
                let t = reserve(RbTree::new(start, end)?, reserved)?;
                go.with_flush(t, m.flush, cpus, clock)
            }
            (_, AllocatorKind::Bitmap) => {
                let b = reserve(Bitmap::new(start, end)?, reserved)?;
                go.with_flush(b, m.flush, cpus, clock)
            }
            (_, AllocatorKind::GapTree) => {
                go.with_flush(GapTree::new(start, end)?, m.flush, cpus, clock)
            }
            (_, AllocatorKind::Magazine) => {
                let magazine = crate::iova::MagazineConfig { cpus, ..m.magazine };
                let mut a = Magazine::new(RbTree::new(start, end)?, magazine)?;
                for w in reserved {
                    let (p, n) = w.pages();
                    a.reserve(p, n)?;
                }
                go.with_flush(a, m.flush, cpus, clock)
            }
        }
    }

    fn with_flush<A: IovaAllocator>(
        self,
        a: A,
        flush: FlushConfig,
        cpus: usize,
        clock: ClockRate,
    ) -> Result<RunResult, Error> {
        match flush {
            FlushConfig::Strict => self.go(a, Strict::new()),
            // 2.6.26's `intel_unmap_sg` never queued: it invalidated and freed at once.
            FlushConfig::Deferred(c) => {
                let sg_at_once = self.resolved.kernel == Kernel::V2_6_26;
                self.go(a, Deferred::new(c, clock).unmap_sg_at_once(sg_at_once))
            }
            FlushConfig::PerLap => self.go(a, PerLap::new()),
            FlushConfig::FlushQueue(c) => self.go(a, FlushQueue::new(c, cpus, clock)),
        }
    }

    /// The one place the configured remapping unit becomes a type.
    fn go<A: IovaAllocator, F: FlushPolicy>(self, a: A, f: F) -> Result<RunResult, Error> {
        let vtd = self.resolved.unit;
        match self.cfg.hardware.unit {
            UnitKind::Vtd => self.on(Vtd::new(vtd)?, a, f),
            UnitKind::Calgary => {
                let tce = HardwareConfig::tce(&vtd, self.cfg.dma_bits);
                self.on(Calgary::new(tce)?, a, f)
            }
            UnitKind::Dart => {
                let tce = HardwareConfig::tce(&vtd, self.cfg.dma_bits);
                self.on(Dart::new(tce)?, a, f)
            }
        }
    }

    fn on<U: RemapUnit, A: IovaAllocator, F: FlushPolicy>(
        self,
        iommu: U,
        a: A,
        f: F,
    ) -> Result<RunResult, Error> {
        let cfg = self.cfg;
        let dma = DmaConfig {
            translation: self.resolved.mechanisms.translation,
            dma_bits: cfg.dma_bits,
            debug: cfg.dma_debug,
            oracle: self.oracle,
            forcedac: false,
        };
        // With `[machine]`, the many-core model runs beside the one-CPU model.
        let cores = cfg.machine.map(|machine| {
            let scopes = Scopes {
                interface: self.resolved.unit.invalidation,
                global_flush_lock: matches!(
                    self.resolved.mechanisms.flush,
                    FlushConfig::Deferred(_)
                ),
            };
            let model = CoreModel::new(
                machine.cpus,
                scopes,
                machine.prices(self.resolved.mechanisms.allocator),
                self.resolved.unit.cost.clock,
            );
            (model, scopes)
        });
        let mut api = DmaApi::new(dma, Native::new(iommu), a, f);
        runner::run(
            &mut api,
            self.workload,
            cfg.device,
            cfg.software_clock,
            self.labels,
            self.stop_at,
            cfg.hardware.cpu_cache,
            self.progress,
            self.acct,
            cores,
        )
    }
}

/// `reserve_iova` of every window into a fresh allocator (the domain's set-up).
fn reserve<A: RangeControl>(mut a: A, windows: &[ByteRange]) -> Result<A, IovaError> {
    for w in windows {
        let (p, n) = w.pages();
        a.reserve(p, n)?;
    }
    Ok(a)
}

/// Something to do with a concrete workload type: the builder hands each
/// [`WorkloadConfig`] variant to [`WorkloadVisitor::visit`] as
/// its own type, so the caller's loop is monomorphised per generator.
pub trait WorkloadVisitor {
    /// What the visit returns.
    type Output;
    /// Called once with the built generator.
    fn visit<W: Workload<Phys = Hpa>>(self, workload: W) -> Result<Self::Output, Error>;
}

/// Builds the generator `cfg` names and hands it to `visitor`.
pub fn with_workload<V: WorkloadVisitor>(
    cfg: &crate::workload::WorkloadConfig,
    visitor: V,
) -> Result<V::Output, Error> {
    use crate::workload::{ApacheSendfile, Block, NetperfSend, UniformRandom, WorkloadConfig};
    match cfg {
        WorkloadConfig::PseudoScsi(c) => visitor.visit(PseudoScsi::new(*c)),
        WorkloadConfig::NetperfSend(c) => visitor.visit(NetperfSend::new(*c)?),
        WorkloadConfig::ApacheSendfile(c) => visitor.visit(ApacheSendfile::new(*c)?),
        WorkloadConfig::Block(c) => visitor.visit(Block::new(*c)?),
        WorkloadConfig::UniformRandom(c) => visitor.visit(UniformRandom::new(*c)?),
        WorkloadConfig::NetRx(c) => visitor.visit(NetRx::new(*c)),
        WorkloadConfig::NicDuplex(c) => match c.with(|w| w)? {
            crate::workload::NicDuplexAny::Netperf(w) => visitor.visit(w),
            crate::workload::NicDuplexAny::Apache(w) => visitor.visit(w),
        },
    }
}

/// Replays the trace `src` through the configuration `cfg` (its mechanisms, hardware,
/// device mode and clocks) with the stale-access oracle on: the one implementation behind
/// `iommulab replay` and Python's `iommulab.replay`. Returns the run and what the replay made
/// of the trace's events. `cfg.workload` is not used; a `cfg.system` other than bare metal
/// is refused (a guest or a Xen PV domain replays a trace through [`run_experiment`]), and
/// so is `cfg.duration_s` (a trace replays whole).
pub fn replay_trace<S: crate::trace::EventSource>(
    cfg: &ExperimentConfig,
    src: S,
    progress: &mut ProgressFn<'_>,
) -> Result<(RunResult, ReplayReport), Error> {
    let resolved = cfg.resolve()?;
    refuse_unreplayable(cfg, &resolved)?;
    replay_resolved(cfg, &resolved, src, progress, None)
}

/// A system other than bare metal, or a `duration_s`, which a replay would ignore.
fn refuse_unreplayable(cfg: &ExperimentConfig, resolved: &Resolved) -> Result<(), Error> {
    if !matches!(resolved.system, ResolvedSystem::BareMetal) {
        // Replaying bare metal under a guest's label would report numbers of a system the
        // config does not describe.
        return Err(super::ConfigError::Invalid {
            key: "system.kind".into(),
            value: cfg.system.kind_name().into(),
            expected: "\"bare-metal\": replay_trace runs a trace through a bare-metal \
                       configuration; a guest or a Xen PV domain runs it as its workload \
                       (`workload.trace` with run_experiment, `iommulab run`)"
                .into(),
        }
        .into());
    }
    if let Some(d) = cfg.duration_s {
        return Err(super::ConfigError::Invalid {
            key: "duration_s".into(),
            value: d.to_string(),
            expected: "no `duration_s` in a replay: a trace replays whole".into(),
        }
        .into());
    }
    Ok(())
}

/// What a replay should keep apart: one device of the trace only (by the trace's name for
/// it), and per-device accounting ([`Accounting`]: `iommulab compare`).
#[derive(Debug, Default)]
pub struct ReplayOptions<'a> {
    /// Replay only this device's events (the trace's clock still advances with all).
    pub device: Option<&'a str>,
    /// Keep per-device cycles, invalidations and exposure windows here.
    pub accounting: Option<&'a mut Accounting>,
}

/// [`replay_trace`] with [`ReplayOptions`]; also returns the trace's device names, by the
/// index [`Accounting::devices`] uses.
pub fn replay_trace_with<S: crate::trace::EventSource>(
    cfg: &ExperimentConfig,
    src: S,
    progress: &mut ProgressFn<'_>,
    opts: ReplayOptions<'_>,
) -> Result<(RunResult, ReplayReport, Vec<String>), Error> {
    let resolved = cfg.resolve()?;
    refuse_unreplayable(cfg, &resolved)?;
    let mut names = Vec::new();
    let (run, report) = replay_resolved(cfg, &resolved, src, progress, Some((opts, &mut names)))?;
    Ok((run, report, names))
}

type Extra<'a, 'b> = Option<(ReplayOptions<'a>, &'b mut Vec<String>)>;

fn replay_resolved<S: crate::trace::EventSource>(
    cfg: &ExperimentConfig,
    resolved: &Resolved,
    src: S,
    progress: &mut ProgressFn<'_>,
    extra: Extra<'_, '_>,
) -> Result<(RunResult, ReplayReport), Error> {
    let (opts, names) = match extra {
        Some((o, n)) => (o, Some(n)),
        None => (ReplayOptions::default(), None),
    };
    let mut w = TraceWorkload::new(src);
    if let Some(d) = opts.device {
        w = w.only_device(d);
    }
    let acct = opts.accounting;
    // The magazines' and flush queues' CPUs: the trace's own (`#P:N`), else the config's.
    let trace_cpus = w.trace_cpus()?.map(|n| n as usize);
    // A trace has no seed, I/O size or queue depth of its own: those labels stay zero.
    let labels = RunLabels {
        seed: 0,
        io_size: 0,
        outstanding: 0,
        cpus: 0,
        touch: false,
        ..labels_of(cfg)
    };
    let mut run = Go {
        cfg,
        resolved,
        workload: &mut w,
        labels,
        oracle: true,
        stop_at: None,
        progress,
        cpus: Some(trace_cpus.unwrap_or(resolved.mechanisms.magazine.cpus)),
        acct,
    }
    .run()?;
    run.replay = Some(w.report());
    if let Some(n) = names {
        n.clone_from(&w.header().devices);
    }
    Ok((run, w.report()))
}
