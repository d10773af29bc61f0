//! Fujita & Mori, "IOMMU performance evaluation in Linux" (2008), Figure 4: the IOPS of
//! the five configurations of S0.7 (and Linux's current `modern`) relative to `disabled`,
//! on the pseudo SCSI driver (S0.8), plus a separate malicious-device pass that measures
//! what each flush policy leaves open (S0.6).

pub mod claims;

use crate::Paper as _;

use serde::Serialize;

use super::{ReproOptions, Steps};
use crate::ReproError as Error;
use crate::claims::Claim;
use iommulab::device::DeviceMode;
use iommulab::experiment::config::Kernel;
use iommulab::experiment::{
    ExperimentConfig, HardwareConfig, NamedConfig, RunResult, Series, no_progress, run_bench,
    run_experiment, run_series,
};
use iommulab::hw::cost::{CostModel, CostPreset, PriceSource, VTD_2008_PRICES};
use iommulab::hw::cpu_cache::CpuCacheConfig;
use iommulab::workload::ScsiDmaPath;

/// The line of the reproductions' index.
pub const TITLE: &str = "Fujita & Mori 2008, IOMMU performance evaluation in Linux (Figure 4: IOPS of the \
five configurations relative to disabled)";

/// Fujita & Mori, "IOMMU performance evaluation in Linux" (2008): Figure 4.
#[derive(Clone, Copy, Debug)]
pub struct Fujita2008;

impl crate::Paper for Fujita2008 {
    type Results = Fujita2008Results;
    const NAME: &'static str = "fujita2008";
    const TITLE: &'static str = TITLE;

    fn run(opts: &ReproOptions<'_>) -> Result<Fujita2008Results, Error> {
        run(opts)
    }

    fn claims(r: &Fujita2008Results) -> &[Claim] {
        &r.claims
    }

    fn quick(r: &Fujita2008Results) -> bool {
        r.quick
    }
}

/// One bar of the paper's Figure 4: what Fujita & Mori published, relative to `disabled`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct PaperPoint {
    /// The configuration.
    pub config: NamedConfig,
    /// The published IOPS relative to `disabled` (`None`: not in the paper).
    pub relative_to_disabled: Option<f64>,
    /// Where the number comes from in the paper's text.
    pub source: &'static str,
    /// The paper prints no number for this bar: it is read off a sentence of the text
    /// ("almost no difference", "about 2%"), so the page and the figure mark it inferred.
    pub inferred: bool,
}

/// Figure 4 as published (S0.8), relative to `disabled`, with the text each number comes
/// from.
pub const PAPER_FIGURE4: [PaperPoint; 6] = [
    PaperPoint {
        config: NamedConfig::Disabled,
        relative_to_disabled: Some(1.0),
        source: "baseline",
        inferred: false,
    },
    PaperPoint {
        config: NamedConfig::Default,
        relative_to_disabled: Some(0.80),
        source: "\"20% lower\"; 124,337.2 IOPS",
        inferred: false,
    },
    PaperPoint {
        config: NamedConfig::Strict,
        relative_to_disabled: Some(0.80),
        source: "\"almost no difference\" from default",
        inferred: true,
    },
    PaperPoint {
        config: NamedConfig::Bitmap,
        relative_to_disabled: Some(0.87),
        source: "\"reduced to 13%\"",
        inferred: false,
    },
    PaperPoint {
        config: NamedConfig::StrictBitmap,
        relative_to_disabled: Some(0.82),
        source: "\"about 2%\" above strict",
        inferred: true,
    },
    PaperPoint {
        config: NamedConfig::Modern,
        relative_to_disabled: None,
        source: "not in the paper (Linux ≥ 4.7)",
        inferred: false,
    },
];

/// The published absolute IOPS of `default` (S0.8).
pub const PAPER_DEFAULT_IOPS: f64 = 124_337.2;

/// The paper's published numbers, as returned with the results.
#[derive(Clone, Debug, Serialize)]
pub struct Paper {
    /// Figure 4, relative to `disabled`.
    pub figure4: Vec<PaperPoint>,
    /// `default`'s absolute IOPS.
    pub default_iops: f64,
}

/// How the runs were made (S0.8: 30 s per run, mean of 5 runs; quick: 10 s, 2 runs).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Protocol {
    /// Modeled seconds per timing run.
    pub seconds: f64,
    /// Timing runs per configuration (seeds 1..=repeats).
    pub repeats: u32,
    /// Modeled seconds of the malicious-device run of each configuration.
    pub security_seconds: f64,
    /// Modeled seconds of each run of the sensitivity sweep (one run per configuration and
    /// point: the modeled clock does not depend on the seed).
    pub sweep_seconds: f64,
    /// Whether the sweep includes its grid (the full run) or only the one-at-a-time points.
    pub sweep_grid: bool,
}

impl Protocol {
    /// The paper's protocol, or the quick one.
    pub const fn new(quick: bool) -> Self {
        // S0.8: 30 s per run, mean of 5 runs, 1024-byte I/Os, one outstanding.
        if quick {
            Protocol {
                seconds: 10.0,
                repeats: 2,
                security_seconds: 0.5,
                sweep_seconds: 0.2,
                sweep_grid: false,
            }
        } else {
            Protocol {
                seconds: 30.0,
                repeats: 5,
                security_seconds: 2.0,
                sweep_seconds: 2.0,
                sweep_grid: true,
            }
        }
    }
}

/// Counted kernel primitives per I/O: what the modeled software clock is made of.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct PerIo {
    /// Red-black tree node visits.
    pub tree_visits: f64,
    /// Rotations and recolourings.
    pub tree_rebalances: f64,
    /// Slab allocations plus frees.
    pub slab_allocs: f64,
    /// Bitmap words scanned.
    pub bitmap_words: f64,
    /// Lock hand-offs (allocator and flush policy).
    pub lock_acquisitions: f64,
    /// Magazine operations.
    pub magazine_ops: f64,
    /// IOTLB invalidations.
    pub invalidations: f64,
    /// Allocator-metadata line accesses served by L1D (CPU cache model).
    pub l1_hits: f64,
    /// Served by L2.
    pub l2_hits: f64,
    /// Served by memory.
    pub memory_accesses: f64,
}

impl PerIo {
    /// Of one run.
    pub fn of(r: &RunResult) -> Self {
        let n = r.ops.max(1) as f64;
        let i = &r.stats.iova;
        let f = &r.stats.flush;
        PerIo {
            tree_visits: i.tree_visits as f64 / n,
            tree_rebalances: i.tree_rebalances as f64 / n,
            slab_allocs: (i.slab_allocs + i.slab_frees) as f64 / n,
            bitmap_words: i.bitmap_words as f64 / n,
            lock_acquisitions: (i.lock_acquisitions + f.lock_acquisitions) as f64 / n,
            magazine_ops: i.magazine_ops as f64 / n,
            invalidations: r.iotlb_invalidations as f64 / n,
            l1_hits: r.stats.cpu_cache.map_or(0.0, |c| c.l1_hits as f64 / n),
            l2_hits: r.stats.cpu_cache.map_or(0.0, |c| c.l2_hits as f64 / n),
            memory_accesses: r.stats.cpu_cache.map_or(0.0, |c| c.misses as f64 / n),
        }
    }
}

/// One configuration's aggregate over repeats (a row of `results.json` and `results.csv`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Aggregate {
    /// The configuration's name.
    pub config: String,
    /// Its IOVA allocator.
    pub allocator: String,
    /// Its flush policy.
    pub flush: String,
    /// The kernel its mechanisms follow (`2.6.26`, the paper's; `6.12` for `modern`).
    pub kernel: String,
    /// Share of the modeled time the CPU is busy: `1 - io_wait / time per I/O` (the paper:
    /// about 70% in every configuration).
    pub cpu_utilisation: f64,
    /// Timing runs averaged.
    pub repeats: usize,
    /// Mean I/Os per run (integer division, as a count).
    pub ops: u64,
    /// Mean IOPS of the modeled machine.
    pub iops: f64,
    /// Sample standard deviation of the IOPS over repeats.
    pub iops_stddev: f64,
    /// `iops / iops(disabled)`.
    pub relative_to_disabled: Option<f64>,
    /// The paper's value ([`PAPER_FIGURE4`]).
    pub paper_relative_to_disabled: Option<f64>,
    /// Where the paper's value comes from.
    pub paper_source: String,
    /// The paper's value is read off its prose, not printed ([`PaperPoint::inferred`]).
    pub paper_inferred: bool,
    /// Modeled ns per I/O (the sum of the next three).
    pub modeled_ns_per_op: f64,
    /// The no-IOMMU cost of one I/O.
    pub io_path_ns_per_op: f64,
    /// IOMMU hardware work done by the CPU.
    pub modeled_hw_ns_per_op: f64,
    /// Kernel software primitives.
    pub modeled_sw_ns_per_op: f64,
    /// Measured wall time of iommulab's own code per I/O (differs run to run).
    pub software_ns_per_op: f64,
    /// Flush rounds (mean per run).
    pub iotlb_flushes: u64,
    /// IOTLB invalidation commands (mean per run).
    pub iotlb_invalidations: u64,
    /// Write-buffer flushes (mean per run).
    pub write_buffer_flushes: u64,
    /// Laps of the bitmap allocator (mean per run).
    pub allocator_wraps: u64,
    /// Most allocator metadata at once, over the repeats.
    pub peak_metadata_bytes: u64,
    /// Modeled seconds per run.
    pub modeled_seconds: f64,
    /// From the separate malicious-device run of the same configuration: device accesses
    /// that succeeded through an IOMMU mapping already unmapped (0 without an IOMMU: nothing
    /// is translated, so nothing is stale; see `unprotected_accesses`).
    pub stale_accesses: u64,
    /// Without an IOMMU (`disabled`): the malicious device's probes of unmapped memory,
    /// every one of which reached memory. 0 for the configurations with an IOMMU.
    pub unprotected_accesses: u64,
    /// Unmaps of the malicious run.
    pub malicious_unmaps: u64,
    /// Accesses to the rest of a mapped page beyond the buffer (malicious run).
    pub subpage_accesses: u64,
    /// IOMMU faults (malicious run).
    pub faults: u64,
    /// Most unmapped ranges waiting for an invalidation at once (malicious run): the window.
    pub max_pending: u64,
    /// Counted kernel primitives per I/O (first timing run).
    pub per_io: PerIo,
}

/// What the reproduction returns.
#[derive(Clone, Debug, Serialize)]
pub struct Fujita2008Results {
    /// Whether this was the quick run.
    pub quick: bool,
    /// How the runs were made.
    pub protocol: Protocol,
    /// One aggregate per configuration, in Figure 4's order (`results.json`).
    pub results: Vec<Aggregate>,
    /// Every run: the timing runs, then the malicious-device runs (`runs.json`, `runs.csv`).
    pub runs: Vec<RunResult>,
    /// What the paper published.
    pub paper: Paper,
    /// The provenance of every `vtd-2008` price ([`VTD_2008_PRICES`]) with its value.
    pub prices: Vec<Price>,
    /// The sensitivity sweep over the estimated prices.
    pub sweep: Vec<SweepPoint>,
    /// Figure 4 on each DMA API path of the pseudo driver, side by side (`dma_paths.json`).
    pub dma_paths: Vec<DmaPathRun>,
    /// The paper's claims, judged on this run ([`claims`]).
    pub claims: Vec<Claim>,
    /// §5's open question, one lock on many cores: 2.6.26's configurations on 1, 2, 4 and
    /// 8 cores of the many-core model (not in `results.json`: the page's own section).
    pub section5: Vec<CoreScaling>,
}

/// The cores §5's question is asked at.
pub const SECTION5_CORES: [u16; 4] = [1, 2, 4, 8];

/// The configurations §5's question is asked of (2.6.26's one allocator lock with each
/// flush policy).
pub const SECTION5_CONFIGS: [NamedConfig; 3] = [
    NamedConfig::Default,
    NamedConfig::Strict,
    NamedConfig::Bitmap,
];

/// One configuration on one core count of the many-core model.
#[derive(Clone, Debug, Serialize)]
pub struct CoreScaling {
    /// The configuration.
    pub config: String,
    /// Cores, each running its own pseudo-driver stream.
    pub cores: u16,
    /// I/Os per second of the modeled machine.
    pub iops: f64,
    /// Over the same configuration on one core.
    pub speedup: f64,
    /// Share of the run the allocator's lock was held.
    pub tree_lock_busy: f64,
    /// Share of all CPU time spent waiting for it.
    pub tree_lock_wait_share: f64,
    /// Share of all CPU time spent waiting for the deferred array's lock.
    pub flush_lock_wait_share: f64,
    /// Share of all CPU time spent waiting for the invalidation registers.
    pub invalidation_wait_share: f64,
}

/// Figure 4 on one DMA API path of the pseudo driver: `sg` (`scsi_dma_map` →
/// `dma_map_sg`, the path a SCSI host adapter's driver takes, S0.8) or `single`
/// (`dma_map_single`, what [`Fujita2008Results::results`] ran).
#[derive(Clone, Debug, Serialize)]
pub struct DmaPathRun {
    /// `sg` or `single` (the workload's `dma_path`).
    pub dma_path: String,
    /// The DMA API calls of the path.
    pub calls: String,
    /// The four IOMMU bars, relative to `disabled` on the same path.
    pub bars: Bars,
    /// Whether they have the paper's ordering ([`Bars::has_paper_ordering`]).
    pub ordering: bool,
    /// Which bars lie within [`TOLERANCE`] of the paper's (default, strict, bitmap,
    /// strict-bitmap).
    pub within: [bool; 4],
    /// The bars with `write_buffer_flush = 0` (what the unverified `CAP.RWBF` of Q35 would
    /// change; `sweep_seconds` per configuration).
    pub bars_without_rwbf: Bars,
    /// Flush counters of each configuration (first timing run).
    pub flushes: Vec<PathFlushes>,
    /// The aggregates of the five configurations of Figure 4 on this path (no
    /// malicious-device pass: its columns are 0).
    pub results: Vec<Aggregate>,
}

/// What one configuration's flush policy did on one path (first timing run).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PathFlushes {
    /// The configuration.
    pub config: String,
    /// Unmaps the flush policy was told about.
    pub unmaps: u64,
    /// Invalidation rounds.
    pub flushes: u64,
    /// Of which page-selective flushes 2.6.26's `unmap_sg` issued at once, bypassing the
    /// deferred array.
    pub sg_flushes_at_once: u64,
    /// `flushes / unmaps`.
    pub flushes_per_unmap: f64,
}

/// One price of the preset and where it comes from.
#[derive(Clone, Debug, Serialize)]
pub struct Price {
    /// The cost-model field.
    pub field: String,
    /// Its value in `vtd-2008` (cycles; `ghz` in tenths).
    pub value: u64,
    /// The source or the estimate's reasoning.
    pub source: String,
    /// `None`: measured; else the estimate's plausible range.
    pub range: Option<(u64, u64)>,
    /// `input` (taken from the paper's own results: [`FROM_PAPER`]), `measured` or
    /// `estimate`.
    pub kind: &'static str,
}

/// The prices derived from the paper's own results (its disabled rate and CPU use), not
/// from a measurement: inputs, whatever agreement they produce.
pub const FROM_PAPER: [&str; 2] = ["io_path", "io_wait"];

/// The four IOMMU bars of Figure 4 at one point of the sweep, relative to `disabled`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Bars {
    /// `default`.
    pub default: f64,
    /// `strict`.
    pub strict: f64,
    /// `bitmap`.
    pub bitmap: f64,
    /// `strict-bitmap`.
    pub strict_bitmap: f64,
}

/// Tolerance of "≈" and of "within" a paper bar (the acceptance: 0.02).
pub const TOLERANCE: f64 = 0.02;

/// The paper's four bars (strict and strict-bitmap inferred, see [`PAPER_FIGURE4`]).
pub const PAPER_BARS: Bars = Bars {
    default: 0.80,
    strict: 0.80,
    bitmap: 0.87,
    strict_bitmap: 0.82,
};

impl Bars {
    /// The paper's ordering: bitmap > strict-bitmap > default ≈ strict (≈: within
    /// [`TOLERANCE`]).
    pub fn has_paper_ordering(&self) -> bool {
        self.bitmap > self.strict_bitmap
            && self.strict_bitmap > self.default.max(self.strict)
            && (self.default - self.strict).abs() <= TOLERANCE
    }

    /// Which bars lie within [`TOLERANCE`] of the paper's, in the order default, strict,
    /// bitmap, strict-bitmap.
    pub fn within_paper(&self) -> [bool; 4] {
        let near = |a: f64, b: f64| (a - b).abs() <= TOLERANCE + 1e-12;
        [
            near(self.default, PAPER_BARS.default),
            near(self.strict, PAPER_BARS.strict),
            near(self.bitmap, PAPER_BARS.bitmap),
            near(self.strict_bitmap, PAPER_BARS.strict_bitmap),
        ]
    }
}

/// One point of the sensitivity sweep.
#[derive(Clone, Debug, Serialize)]
pub struct SweepPoint {
    /// `baseline`, `one-at-a-time` or `grid`.
    pub kind: String,
    /// What was changed from the preset: `(field, value)`; `io_path_lines` and
    /// `io_path_fresh_lines` are the CPU cache model's footprint, the rest cost fields.
    pub changes: Vec<(String, u64)>,
    /// The bars at this point.
    pub bars: Bars,
    /// Whether they have the paper's ordering ([`Bars::has_paper_ordering`]).
    pub ordering: bool,
    /// How many of the four bars lie within [`TOLERANCE`] of the paper's.
    pub within: usize,
}

impl Fujita2008Results {
    /// The aggregate of configuration `name`.
    pub fn get(&self, name: &str) -> Option<&Aggregate> {
        self.results.iter().find(|a| a.config == name)
    }
}

/// Runs Figure 4: every configuration `repeats` times on the `vtd-2008` preset (seeds
/// 1..=repeats), then once each with a malicious device.
fn run(opts: &ReproOptions<'_>) -> Result<Fujita2008Results, Error> {
    let protocol = Protocol::new(opts.quick);
    // S0.8: Linux 2.6.26-rc6's mechanisms on the E6850 with its caches modeled.
    let base = ExperimentConfig {
        duration_s: Some(protocol.seconds),
        kernel: Kernel::V2_6_26,
        hardware: HardwareConfig {
            // The paper's machine, named here: the schema's default preset is today's.
            cost: CostPreset::Vtd2008,
            cpu_cache: Some(CpuCacheConfig::default()),
            ..HardwareConfig::default()
        },
        ..ExperimentConfig::default()
    };
    let configs = NamedConfig::ALL;
    let plan = sweep_plan(protocol.sweep_grid);
    // The sg path: the five bars of Figure 4, repeated, and once without the write-buffer
    // flush; the single path's no-RWBF bars are one more sweep point.
    let total = configs.len() as u64 * (u64::from(protocol.repeats) + 1)
        + plan.len() as u64 * SWEPT.len() as u64
        + SWEPT.len() as u64 * (u64::from(protocol.repeats) + 2)
        + (SECTION5_CONFIGS.len() * SECTION5_CORES.len()) as u64;
    let mut steps = Steps::new(opts, total);
    let timing = run_configs(&base, &configs, protocol.repeats, &mut steps, "")?;
    // The security pass: the same configurations with a malicious device (a separate run,
    // because the device's page walks would add latency the paper's benchmark did not have).
    let security_base = ExperimentConfig {
        duration_s: Some(protocol.security_seconds),
        device: DeviceMode::Malicious { neighbours: 1 },
        ..base.clone()
    };
    let security = run_configs(
        &security_base,
        &configs,
        1,
        &mut steps,
        ", malicious device",
    )?;
    let mut sweep = Vec::with_capacity(plan.len());
    for (kind, changes) in &plan {
        sweep.push(sweep_point(
            &base,
            kind,
            changes,
            protocol.sweep_seconds,
            &mut steps,
        )?);
    }
    let dma_paths = dma_paths(&base, &timing, protocol, &mut steps)?;
    let section5 = section5(&base, if opts.quick { 2_000 } else { 20_000 }, &mut steps)?;
    steps.finish()?;
    let results = aggregate(&timing, &security);
    let mut runs = timing;
    runs.extend(security);
    let mut r = Fujita2008Results {
        quick: opts.quick,
        protocol,
        results,
        runs,
        paper: Paper {
            figure4: PAPER_FIGURE4.to_vec(),
            default_iops: PAPER_DEFAULT_IOPS,
        },
        prices: prices(),
        sweep,
        dma_paths,
        claims: Vec::new(),
        section5,
    };
    r.claims = claims::claims(&r);
    Ok(r)
}

/// §5's question on the many-core model: `base` (2.6.26 on `vtd-2008`) with flat metadata
/// prices (the many-core model prices the lock's hold from the counters), each
/// configuration on each of [`SECTION5_CORES`], `ios_per_core` 1024-byte I/Os per core.
fn section5(
    base: &ExperimentConfig,
    ios_per_core: u64,
    steps: &mut Steps<'_, '_>,
) -> Result<Vec<CoreScaling>, Error> {
    let flat = ExperimentConfig {
        hardware: HardwareConfig {
            cpu_cache: None,
            ..base.hardware.clone()
        },
        ..base.clone()
    };
    let mut v = Vec::with_capacity(SECTION5_CONFIGS.len() * SECTION5_CORES.len());
    for config in SECTION5_CONFIGS {
        let mut one = 0.0;
        for cores in SECTION5_CORES {
            steps.start(|| format!("§5: {} on {cores} cores", config.name()))?;
            let cfg = ExperimentConfig {
                configuration: config,
                ..super::peleg2015::on_cores(&flat, cores, ios_per_core, 1024)
            };
            let r = run_experiment(&cfg, &mut no_progress)?;
            let Some(c) = r.cores else {
                return Err(super::ReproError::Check {
                    reproduction: Fujita2008::NAME,
                    what: format!(
                        "§5: {} on {cores} cores: no many-core result",
                        config.name()
                    ),
                });
            };
            if cores == 1 {
                one = c.throughput;
            }
            let busy = (c.cpu_cycles_per_io * c.ios as f64).max(1.0);
            let inv_wait = c.invalidation.lock.wait_cycles
                + c.invalidation
                    .poll_cycles
                    .saturating_sub(c.invalidation.hw_busy_cycles);
            v.push(CoreScaling {
                config: config.name().to_string(),
                cores,
                iops: c.throughput,
                speedup: if one > 0.0 { c.throughput / one } else { 0.0 },
                tree_lock_busy: c.tree_lock.hold_cycles as f64 / c.makespan_cycles.max(1) as f64,
                tree_lock_wait_share: c.tree_lock.wait_cycles as f64 / busy,
                flush_lock_wait_share: c.flush_lock.wait_cycles as f64 / busy,
                invalidation_wait_share: inv_wait as f64 / busy,
            });
        }
    }
    Ok(v)
}

/// `base` with the pseudo driver on `path`.
fn on_path(base: &ExperimentConfig, path: ScsiDmaPath) -> ExperimentConfig {
    let mut cfg = base.clone();
    // The reproduction's base is the default workload, the pseudo driver.
    debug_assert!(cfg.pseudo_scsi().is_some());
    if let Some(w) = cfg.pseudo_scsi_mut() {
        w.dma_path = path;
    }
    cfg
}

/// Figure 4 on the `sg` path (new runs) and on the `single` path (the timing runs already
/// made), each with its bars without the write-buffer flush.
fn dma_paths(
    base: &ExperimentConfig,
    single_timing: &[RunResult],
    protocol: Protocol,
    steps: &mut Steps<'_, '_>,
) -> Result<Vec<DmaPathRun>, Error> {
    let no_rwbf = [("write_buffer_flush".to_string(), 0)];
    let sg_base = on_path(base, ScsiDmaPath::Sg);
    let sg_timing = run_configs(&sg_base, &SWEPT, protocol.repeats, steps, ", dma_map_sg")?;
    let sg_no_rwbf = sweep_point(&sg_base, "sg", &no_rwbf, protocol.sweep_seconds, steps)?;
    let single_no_rwbf = sweep_point(
        &on_path(base, ScsiDmaPath::Single),
        "single",
        &no_rwbf,
        protocol.sweep_seconds,
        steps,
    )?;
    Ok(vec![
        path_run(
            ScsiDmaPath::Sg,
            "scsi_dma_map → dma_map_sg / dma_unmap_sg (one 1024-byte entry)",
            &sg_timing,
            sg_no_rwbf.bars,
        ),
        path_run(
            ScsiDmaPath::Single,
            "dma_map_single / dma_unmap_single",
            single_timing,
            single_no_rwbf.bars,
        ),
    ])
}

fn path_run(
    path: ScsiDmaPath,
    calls: &str,
    timing: &[RunResult],
    bars_without_rwbf: Bars,
) -> DmaPathRun {
    let results: Vec<Aggregate> = aggregate(timing, &[])
        .into_iter()
        .filter(|a| SWEPT.iter().any(|c| c.name() == a.config))
        .collect();
    let bars = bars_of(&results);
    let flushes = SWEPT
        .iter()
        .filter_map(|c| timing.iter().find(|r| r.config == c.name()))
        .map(|r| {
            let f = &r.stats.flush;
            PathFlushes {
                config: r.config.clone(),
                unmaps: f.unmaps,
                flushes: f.flushes,
                sg_flushes_at_once: f.sg_flushes_at_once,
                flushes_per_unmap: if f.unmaps > 0 {
                    f.flushes as f64 / f.unmaps as f64
                } else {
                    0.0
                },
            }
        })
        .collect();
    DmaPathRun {
        dma_path: path.name().into(),
        calls: calls.into(),
        ordering: bars.has_paper_ordering(),
        within: bars.within_paper(),
        bars,
        bars_without_rwbf,
        flushes,
        results,
    }
}

/// The four IOMMU bars of aggregates relative to `disabled` (0 where a configuration is
/// missing).
pub fn bars_of(agg: &[Aggregate]) -> Bars {
    let rel = |n: &str| {
        agg.iter()
            .find(|a| a.config == n)
            .and_then(|a| a.relative_to_disabled)
            .unwrap_or(0.0)
    };
    Bars {
        default: rel("default"),
        strict: rel("strict"),
        bitmap: rel("bitmap"),
        strict_bitmap: rel("strict-bitmap"),
    }
}

/// [`VTD_2008_PRICES`] with the preset's values.
pub fn prices() -> Vec<Price> {
    let m = CostModel::VTD_2008;
    VTD_2008_PRICES
        .iter()
        .map(|p: &PriceSource| Price {
            field: p.field.into(),
            value: m.field(p.field).unwrap_or(0),
            source: p.source.into(),
            range: p.range,
            kind: if FROM_PAPER.contains(&p.field) {
                "input"
            } else if p.range.is_some() {
                "estimate"
            } else {
                "measured"
            },
        })
        .collect()
}

/// The configurations a sweep point runs (`disabled` is the reference).
const SWEPT: [NamedConfig; 5] = [
    NamedConfig::Disabled,
    NamedConfig::Default,
    NamedConfig::Strict,
    NamedConfig::Bitmap,
    NamedConfig::StrictBitmap,
];

/// The CPU cache model's footprint knobs, swept like prices: (name, low, high).
pub const FOOTPRINT_RANGES: [(&str, u64, u64); 2] = [
    ("io_path_lines", 100, 1000),
    ("io_path_fresh_lines", 64, 256),
];

/// The points of the sweep: the baseline; every estimated price at the low and the high end
/// of its range, one at a time, and the cache footprint likewise; with `grid`, the grid of
/// the write-buffer flush (the unverified RWBF), memory latency and fresh footprint.
pub fn sweep_plan(grid: bool) -> Vec<(&'static str, Vec<(String, u64)>)> {
    let mut plan = vec![("baseline", Vec::new())];
    for p in VTD_2008_PRICES {
        if let Some((lo, hi)) = p.range {
            for v in [lo, hi] {
                plan.push(("one-at-a-time", vec![(p.field.to_string(), v)]));
            }
        }
    }
    for (f, lo, hi) in FOOTPRINT_RANGES {
        for v in [lo, hi] {
            plan.push(("one-at-a-time", vec![(f.to_string(), v)]));
        }
    }
    if grid {
        for wbf in [0, 1200] {
            for mem in [150, 220, 300] {
                for fresh in [0, 64, 256] {
                    plan.push((
                        "grid",
                        vec![
                            ("write_buffer_flush".to_string(), wbf),
                            ("memory_access".to_string(), mem),
                            ("io_path_fresh_lines".to_string(), fresh),
                        ],
                    ));
                }
            }
        }
    }
    plan
}

/// Runs the four IOMMU configurations and `disabled` once with `changes` applied.
fn sweep_point(
    base: &ExperimentConfig,
    kind: &str,
    changes: &[(String, u64)],
    seconds: f64,
    steps: &mut Steps<'_, '_>,
) -> Result<SweepPoint, Error> {
    let mut cfg = ExperimentConfig {
        duration_s: Some(seconds),
        ..base.clone()
    };
    let mut cache = cfg.hardware.cpu_cache.unwrap_or_default();
    for (k, v) in changes {
        match k.as_str() {
            "io_path_lines" => cache.io_path_lines = u32::try_from(*v).unwrap_or(u32::MAX),
            "io_path_fresh_lines" => {
                cache.io_path_fresh_lines = u32::try_from(*v).unwrap_or(u32::MAX);
            }
            _ => {
                let v = i64::try_from(*v).unwrap_or(i64::MAX);
                cfg.hardware
                    .cost_overrides
                    .insert(k.clone(), toml::Value::Integer(v));
            }
        }
    }
    cfg.hardware.cpu_cache = Some(cache);
    let what = if changes.is_empty() {
        "preset".to_string()
    } else {
        changes
            .iter()
            .map(|(k, v)| format!("{k} = {v}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut iops = [0.0; 5];
    for (i, &c) in SWEPT.iter().enumerate() {
        steps.start(|| format!("sweep ({what}): {}", c.name()))?;
        let run = run_bench(
            &ExperimentConfig {
                configuration: c,
                ..cfg.clone()
            },
            &mut no_progress,
        )?;
        iops[i] = run.iops;
    }
    let rel = |i: usize| {
        if iops[0] > 0.0 {
            iops[i] / iops[0]
        } else {
            0.0
        }
    };
    let bars = Bars {
        default: rel(1),
        strict: rel(2),
        bitmap: rel(3),
        strict_bitmap: rel(4),
    };
    Ok(SweepPoint {
        kind: kind.into(),
        changes: changes.to_vec(),
        bars,
        ordering: bars.has_paper_ordering(),
        within: bars.within_paper().iter().filter(|w| **w).count(),
    })
}

/// Every configuration `repeats` times with seeds `seed..seed+repeats`, `relative_to_disabled`
/// filled within the batch: `iommulab bench`'s series ([`run_series`]), each run a step.
fn run_configs(
    base: &ExperimentConfig,
    configs: &[NamedConfig],
    repeats: u32,
    steps: &mut Steps<'_, '_>,
    what: &str,
) -> Result<Vec<RunResult>, Error> {
    run_series(base, configs, repeats, &mut PaperRuns { steps, what })
}

/// Fujita's runs as a bench series: `modern` on 6.12's mechanisms, each run a step.
struct PaperRuns<'s, 'o, 'a> {
    steps: &'s mut Steps<'o, 'a>,
    what: &'s str,
}

impl Series for PaperRuns<'_, '_, '_> {
    type Error = Error;

    fn start(&mut self, cfg: &mut ExperimentConfig) -> Result<(), Error> {
        // 2.6.26 had no magazines or flush queues: `modern` runs on 6.12's.
        if cfg.configuration == NamedConfig::Modern {
            cfg.kernel = Kernel::V6_12;
        }
        let seed = cfg.seed().unwrap_or_default();
        let (name, what) = (cfg.configuration.name(), self.what);
        self.steps.start(|| format!("{name}, seed {seed}{what}"))?;
        Ok(())
    }
}

fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

fn stddev(v: &[f64]) -> f64 {
    if v.len() < 2 {
        return 0.0;
    }
    let m = mean(v);
    (v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (v.len() - 1) as f64).sqrt()
}

/// One [`Aggregate`] per configuration of [`PAPER_FIGURE4`] that ran.
fn aggregate(timing: &[RunResult], security: &[RunResult]) -> Vec<Aggregate> {
    let mut out: Vec<Aggregate> = Vec::new();
    for paper in PAPER_FIGURE4 {
        let name = paper.config.name();
        let runs: Vec<&RunResult> = timing.iter().filter(|r| r.config == name).collect();
        let Some(first) = runs.first() else { continue };
        let f = |g: fn(&RunResult) -> f64| mean(&runs.iter().map(|r| g(r)).collect::<Vec<_>>());
        let sum =
            |g: fn(&RunResult) -> u64| runs.iter().map(|r| g(r)).sum::<u64>() / runs.len() as u64;
        let iops: Vec<f64> = runs.iter().map(|r| r.iops).collect();
        let sec = security.iter().find(|r| r.config == name);
        // `disabled` has no IOMMU: its device reaches all memory, which is no stale
        // translation but no protection at all.
        let protected = paper.config != NamedConfig::Disabled;
        let kernel = if paper.config == NamedConfig::Modern {
            Kernel::V6_12
        } else {
            Kernel::V2_6_26
        };
        let io_wait_ns = CostModel::VTD_2008
            .clock
            .ns(iommulab::clock::Cycles::new(CostModel::VTD_2008.io_wait));
        let total_ns = f(|r| r.modeled_ns_per_op);
        out.push(Aggregate {
            config: name.into(),
            allocator: first.allocator.clone(),
            flush: first.flush.clone(),
            kernel: kernel.name().into(),
            cpu_utilisation: if total_ns > 0.0 {
                1.0 - io_wait_ns / total_ns
            } else {
                0.0
            },
            repeats: runs.len(),
            ops: sum(|r| r.ops),
            iops: mean(&iops),
            iops_stddev: stddev(&iops),
            relative_to_disabled: None,
            paper_relative_to_disabled: paper.relative_to_disabled,
            paper_source: paper.source.into(),
            paper_inferred: paper.inferred,
            modeled_ns_per_op: f(|r| r.modeled_ns_per_op),
            io_path_ns_per_op: f(|r| r.io_path_ns_per_op),
            modeled_hw_ns_per_op: f(|r| r.modeled_hw_ns_per_op),
            modeled_sw_ns_per_op: f(|r| r.modeled_sw_ns_per_op),
            software_ns_per_op: f(|r| r.software_ns_per_op),
            iotlb_flushes: sum(|r| r.iotlb_flushes),
            iotlb_invalidations: sum(|r| r.iotlb_invalidations),
            write_buffer_flushes: sum(|r| r.write_buffer_flushes),
            allocator_wraps: sum(|r| r.stats.iova.wraps),
            peak_metadata_bytes: runs
                .iter()
                .map(|r| r.peak_metadata_bytes)
                .max()
                .unwrap_or(0),
            modeled_seconds: f(|r| r.modeled_seconds),
            stale_accesses: sec.filter(|_| protected).map_or(0, |r| r.stale_accesses),
            unprotected_accesses: sec.filter(|_| !protected).map_or(0, |r| r.stale_accesses),
            malicious_unmaps: sec.map_or(0, |r| r.ops),
            subpage_accesses: sec.map_or(0, |r| r.subpage_accesses),
            faults: sec.map_or(0, |r| r.faults),
            max_pending: sec.map_or(0, |r| r.stats.flush.max_pending),
            per_io: PerIo::of(first),
        });
    }
    let base = out.iter().find(|a| a.config == "disabled").map(|a| a.iops);
    if let Some(b) = base.filter(|b| *b > 0.0) {
        for a in &mut out {
            a.relative_to_disabled = Some(a.iops / b);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_paper_lists_every_configuration_once_in_figure_order() {
        let names: Vec<NamedConfig> = PAPER_FIGURE4.iter().map(|p| p.config).collect();
        assert_eq!(names, NamedConfig::ALL);
    }

    /// The ordering test: the paper's own bars have it; swapping bitmap and strict-bitmap,
    /// or separating default and strict by more than the tolerance, loses it.
    #[test]
    fn paper_bars_have_the_paper_ordering() {
        assert!(PAPER_BARS.has_paper_ordering());
        assert_eq!(PAPER_BARS.within_paper(), [true; 4]);
        let swapped = Bars {
            bitmap: 0.81,
            ..PAPER_BARS
        };
        assert!(!swapped.has_paper_ordering());
        let apart = Bars {
            strict: 0.75,
            ..PAPER_BARS
        };
        assert!(!apart.has_paper_ordering());
        assert_eq!(apart.within_paper(), [true, false, true, true]);
    }

    /// Every estimated price gets a low and a high point; the grid adds 18.
    #[test]
    fn sweep_plan_covers_every_estimate() {
        let estimates = VTD_2008_PRICES.iter().filter(|p| p.range.is_some()).count();
        let quick = sweep_plan(false);
        assert_eq!(quick.len(), 1 + 2 * estimates + 2 * FOOTPRINT_RANGES.len());
        assert_eq!(sweep_plan(true).len(), quick.len() + 18);
    }

    #[test]
    fn stddev_is_the_sample_one() {
        assert_eq!(stddev(&[1.0]), 0.0);
        assert!((stddev(&[1.0, 3.0]) - 2f64.sqrt()).abs() < 1e-12);
        assert_eq!(mean(&[]), 0.0);
    }
}
