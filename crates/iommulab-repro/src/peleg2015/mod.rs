//! `reproduce peleg2015`: Peleg, Morrison, Serebrin & Tsafrir, "Utilizing the IOMMU
//! Scalably" (USENIX ATC 2015), the many-core scaling of the stock and the per-core IOVA
//! designs (P5.1–P5.6).
//!
//! Each design runs the same streams on 1 to 16 cores of the many-core model
//! ([`iommulab::experiment::cores`]): every core maps, sends and unmaps one 1500-byte buffer
//! per packet (a netperf-like stream through the pseudo driver), with as many packets in
//! flight as cores. The designs are named for their mechanisms:
//!
//! | design | configuration | what the cores share |
//! |---|---|---|
//! | `no-iommu` | `passthrough` | nothing |
//! | `global-lock-strict` | `pre-4.7-strict` | the IOVA tree lock, the invalidation queue |
//! | `global-lock-deferred` | `2.6.26-deferred` | the tree lock, the global flush lock (held through each flush: the invalidation and 250 frees, P5.7) |
//! | `magazine-strict` | `linux-strict` | the depot lock (rarely), the invalidation queue |
//! | `magazine-flush-queue` | `linux-lazy` | the depot lock (rarely), a batched flush now and then |
//!
//! Of the paper's numbers only its abstract's range (88.5%–100% of no-IOMMU) is in this
//! lab's sources (P5.0): that claim is judged against it, the others by direction, each rule
//! stated, and the page says so. The lock-bound designs are rerun at both ends of
//! `lock_transfer`'s range ([`TransferSensitivity`]), since that estimate sets their ceiling.

pub mod claims;

use crate::Paper as _;

use serde::Serialize;

use crate::ReproError as Error;
use iommulab::experiment::cores::{CoreStats, MachineConfig};
use iommulab::experiment::{
    ExperimentConfig, HardwareConfig, NamedConfig, WorkloadSpec, no_progress, run_experiment,
};
use iommulab::hw::cost::{CONTENTION_PRICES, ContentionPrices, CostPreset, PriceSource};
use iommulab::workload::{PseudoScsiConfig, WorkloadConfig};

use super::{ReproOptions, Steps};
use crate::claims::Claim;

/// The line of `index.md`.
pub const TITLE: &str = "Peleg et al. 2015, Utilizing the IOMMU Scalably (throughput of the stock \
and per-core IOVA and invalidation designs on 1-16 cores, P5.1-P5.6)";

/// Peleg, Morrison, Serebrin & Tsafrir, "Utilizing the IOMMU Scalably" (USENIX ATC
/// 2015): throughput of the stock and per-core designs on 1–16 cores.
#[derive(Clone, Copy, Debug)]
pub struct Peleg2015;

impl crate::Paper for Peleg2015 {
    type Results = Peleg2015Results;
    const NAME: &'static str = "peleg2015";
    const TITLE: &'static str = TITLE;

    fn run(opts: &ReproOptions<'_>) -> Result<Peleg2015Results, Error> {
        run(opts)
    }

    fn claims(r: &Peleg2015Results) -> &[Claim] {
        &r.claims
    }

    fn quick(r: &Peleg2015Results) -> bool {
        r.quick
    }
}

/// A design: its name, the configuration that has its mechanisms, and what its cores share.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Design {
    /// The name in the results (`global-lock-strict`, ...).
    pub name: &'static str,
    /// The configuration with these mechanisms.
    #[serde(serialize_with = "named")]
    pub configuration: NamedConfig,
    /// What the cores contend for.
    pub shared: &'static str,
}

fn named<S: serde::Serializer>(c: &NamedConfig, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(c.name())
}

/// The designs, the baseline first.
pub const DESIGNS: [Design; 5] = [
    Design {
        name: "no-iommu",
        configuration: NamedConfig::Passthrough,
        shared: "nothing",
    },
    Design {
        name: "global-lock-strict",
        configuration: NamedConfig::StrictPre47,
        shared: "the IOVA tree lock; the invalidation queue at every unmap",
    },
    Design {
        name: "global-lock-deferred",
        configuration: NamedConfig::Deferred2626,
        shared: "the IOVA tree lock; the global flush lock, held through each flush (the global \
invalidation, then 250 frees, each under the tree lock)",
    },
    Design {
        name: "magazine-strict",
        configuration: NamedConfig::LinuxStrict,
        shared: "the depot lock (a miss of both magazines); the invalidation queue at every unmap",
    },
    Design {
        name: "magazine-flush-queue",
        configuration: NamedConfig::LinuxLazy,
        shared: "the depot lock; the invalidation queue once per batch",
    },
];

/// The core counts (the paper's machine: 16 cores, P5.1).
pub const CORES: [u16; 5] = [1, 2, 4, 8, 16];

/// The most cores.
const TOP_CORES: u16 = 16;

/// Bytes per packet buffer (an Ethernet MTU, P5.2).
pub const PACKET_BYTES: u64 = 1500;

/// The designs whose shared locks saturate, rerun at both ends of `lock_transfer`'s range
/// (the one price of the many-core model that is an estimate, P5.6).
pub const TRANSFER_SENSITIVE: [&str; 2] = ["global-lock-strict", "global-lock-deferred"];

/// A design's scaling with `lock_transfer` at one end of its range.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TransferSensitivity {
    /// The design's name.
    pub design: &'static str,
    /// The hand-off price, in cycles.
    pub lock_transfer: u64,
    /// Packets per second on 16 cores.
    pub throughput: f64,
    /// Over the same design and price on one core.
    pub speedup: f64,
}

/// One design on one core count.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Record {
    /// The design's name.
    pub design: &'static str,
    /// Its configuration.
    pub configuration: &'static str,
    /// Cores running a stream.
    pub cores: u16,
    /// Packets (I/Os) per second of the modeled machine.
    pub throughput: f64,
    /// `throughput` over the same design's on one core.
    pub speedup: f64,
    /// `throughput` over `no-iommu`'s on as many cores.
    pub relative_to_no_iommu: f64,
    /// CPU cycles per packet, waiting included.
    pub cpu_cycles_per_io: f64,
    /// Of those, waiting for a lock or the invalidation unit.
    pub wait_cycles_per_io: f64,
    /// Share of all CPU time spent waiting for the IOVA tree lock.
    pub tree_lock_wait_share: f64,
    /// Share of the run the tree lock was held.
    pub tree_lock_busy: f64,
    /// Mean invalidation batches a submitter found unfinished (the queue depth).
    pub invalidation_depth_mean: f64,
    /// The deepest.
    pub invalidation_depth_max: u64,
    /// The many-core model's whole measurement.
    pub stats: CoreStats,
}

/// What `reproduce peleg2015` returns.
#[derive(Clone, Debug, Serialize)]
pub struct Peleg2015Results {
    /// The shorter run.
    pub quick: bool,
    /// Packets each core sends.
    pub ios_per_core: u64,
    /// Bytes per packet.
    pub packet_bytes: u64,
    /// The cost preset (today's machine: queued invalidation, P5.1).
    pub cost_preset: &'static str,
    /// The contention prices and their provenance.
    pub contention: ContentionPrices,
    /// Where each contention price comes from.
    pub contention_sources: Vec<PriceSource>,
    /// The designs.
    pub designs: Vec<Design>,
    /// One per design and core count.
    pub records: Vec<Record>,
    /// The lock-bound designs on 16 cores with `lock_transfer` at the ends of its range.
    pub transfer_sensitivity: Vec<TransferSensitivity>,
    /// The paper's claims, judged.
    pub claims: Vec<Claim>,
}

impl Peleg2015Results {
    /// The record of `design` on `cores`.
    pub fn record(&self, design: &str, cores: u16) -> Option<&Record> {
        self.records
            .iter()
            .find(|r| r.design == design && r.cores == cores)
    }
}

/// The pseudo driver on `cores` cores, `ios_per_core` I/Os of `io_size` bytes each, with
/// the many-core model on: `base`'s configuration otherwise.
pub fn on_cores(
    base: &ExperimentConfig,
    cores: u16,
    ios_per_core: u64,
    io_size: u64,
) -> ExperimentConfig {
    let mut cfg = base.clone();
    let w = match &cfg.workload {
        WorkloadSpec::Generator(WorkloadConfig::PseudoScsi(w)) => *w,
        _ => PseudoScsiConfig::default(),
    };
    cfg.workload = WorkloadSpec::Generator(WorkloadConfig::PseudoScsi(PseudoScsiConfig {
        ios: ios_per_core * u64::from(cores),
        io_size,
        outstanding: u32::from(cores),
        cpus: cores,
        ..w
    }));
    cfg.duration_s = None;
    cfg.machine = Some(MachineConfig {
        cpus: cores,
        ..MachineConfig::default()
    });
    cfg
}

/// Runs the reproduction.
fn run(opts: &ReproOptions<'_>) -> Result<Peleg2015Results, Error> {
    let ios_per_core: u64 = if opts.quick { 2_000 } else { 40_000 };
    let base = ExperimentConfig {
        hardware: HardwareConfig {
            cost: CostPreset::Modern,
            ..HardwareConfig::default()
        },
        ..ExperimentConfig::default()
    };
    let range = CONTENTION_PRICES
        .iter()
        .find(|p| p.field == "lock_transfer")
        .and_then(|p| p.range)
        .unwrap_or((
            ContentionPrices::DEFAULT.lock_transfer,
            ContentionPrices::DEFAULT.lock_transfer,
        ));
    let total = (DESIGNS.len() * CORES.len() + TRANSFER_SENSITIVE.len() * 4) as u64;
    let mut steps = Steps::new(opts, total);
    let mut raw: Vec<(Design, u16, CoreStats)> = Vec::with_capacity(DESIGNS.len() * CORES.len());
    for d in DESIGNS {
        for cores in CORES {
            steps.start(|| format!("{} on {cores} cores", d.name))?;
            let cfg = ExperimentConfig {
                configuration: d.configuration,
                ..on_cores(&base, cores, ios_per_core, PACKET_BYTES)
            };
            let r = run_experiment(&cfg, &mut no_progress)?;
            let stats = r.cores.ok_or_else(|| super::ReproError::Check {
                reproduction: Peleg2015::NAME,
                what: format!("{} on {cores} cores: no many-core result", d.name),
            })?;
            raw.push((d, cores, stats));
        }
    }
    let mut transfer_sensitivity = Vec::with_capacity(TRANSFER_SENSITIVE.len() * 2);
    for d in DESIGNS
        .iter()
        .filter(|d| TRANSFER_SENSITIVE.contains(&d.name))
    {
        for price in [range.0, range.1] {
            let mut at = [0.0; 2];
            for (k, cores) in [1, TOP_CORES].into_iter().enumerate() {
                steps.start(|| format!("{} on {cores} cores, lock_transfer {price}", d.name))?;
                let mut cfg = ExperimentConfig {
                    configuration: d.configuration,
                    ..on_cores(&base, cores, ios_per_core, PACKET_BYTES)
                };
                if let Some(m) = cfg.machine.as_mut() {
                    m.lock_transfer = Some(price);
                }
                let r = run_experiment(&cfg, &mut no_progress)?;
                at[k] = r.cores.map_or(0.0, |c| c.throughput);
            }
            transfer_sensitivity.push(TransferSensitivity {
                design: d.name,
                lock_transfer: price,
                throughput: at[1],
                speedup: ratio(at[1], at[0]),
            });
        }
    }
    steps.finish()?;
    let tput = |design: &str, cores: u16| {
        raw.iter()
            .find(|(d, c, _)| d.name == design && *c == cores)
            .map_or(0.0, |(_, _, s)| s.throughput)
    };
    let records = raw
        .iter()
        .map(|(d, cores, s)| {
            let one = tput(d.name, 1);
            let bare = tput("no-iommu", *cores);
            let busy = s.cpu_cycles_per_io * s.ios as f64;
            Record {
                design: d.name,
                configuration: d.configuration.name(),
                cores: *cores,
                throughput: s.throughput,
                speedup: ratio(s.throughput, one),
                relative_to_no_iommu: ratio(s.throughput, bare),
                cpu_cycles_per_io: s.cpu_cycles_per_io,
                wait_cycles_per_io: s.wait_cycles_per_io,
                tree_lock_wait_share: ratio(s.tree_lock.wait_cycles as f64, busy),
                tree_lock_busy: ratio(s.tree_lock.hold_cycles as f64, s.makespan_cycles as f64),
                invalidation_depth_mean: ratio(
                    s.invalidation.depth_sum as f64,
                    s.invalidation.batches as f64,
                ),
                invalidation_depth_max: s.invalidation.max_depth,
                stats: s.clone(),
            }
        })
        .collect();
    let mut results = Peleg2015Results {
        quick: opts.quick,
        ios_per_core,
        packet_bytes: PACKET_BYTES,
        cost_preset: CostPreset::Modern.name(),
        contention: ContentionPrices::DEFAULT,
        contention_sources: CONTENTION_PRICES.to_vec(),
        designs: DESIGNS.to_vec(),
        records,
        transfer_sensitivity,
        claims: Vec::new(),
    };
    results.claims = claims::claims(&results);
    Ok(results)
}

fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 { a / b } else { 0.0 }
}
