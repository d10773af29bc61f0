//! Ben-Yehuda et al., "The Price of Safety: Evaluating IOMMU Performance" (OLS 2007),
//! Figures 2–7 (S2.1–S2.8): netperf `TCP_STREAM` receive throughput and CPU utilisation,
//! with and without a Calgary IOMMU, on bare metal, in Xen's dom0 (direct hardware access:
//! every map and unmap is a hypercall) and in a domU whose I/O goes through dom0 as its
//! driver domain (netfront/netback: the backend maps on the guest's behalf).
//!
//! **What is measured, what is a parameter.** The DMA layer is *counted on the model*: one
//! experiment per unit runs the real stack (the next-fit bitmap allocator with its
//! roll-around flush, S2.4; the DMA API; the Calgary or DART unit of `hw::tce`) for a NIC's
//! receive buffers and counts the steps of Linux's driver per map + unmap pair; the steps are
//! priced one by one ([`dma_layer`]): the kernel's call, lock and bitmap words at the x460's
//! prices, the unit's entry stores, line flushes, syncs and register sequences at its own
//! ([`TcePrices`]: a TCE write is a store to a table in memory and, on Calgary, a `clflush` of
//! its line, not a VT-d page-table update). The per-unmap
//! whole-cache flush the paper abandoned runs beside the roll-around flush. A Xen domain adds
//! the hypercalls its PV DMA layer counts (two per pair for the streaming API). Everything
//! else is the netperf harness ([`netperf`]). Every price is an estimate with a range or a
//! fact of Linux's code, and [`sensitivity`] sweeps each over its range and reports where
//! each claim's verdict holds; the paper publishes no cycle counts.
//!
//! **Multicalls and the options of S2.6.** The domain's DMA layer is also run over the Xen
//! PV backend ([`iommulab::virt::xen::pv_dma`]: the hypervisor owns the unit, requests cross as
//! multicalls) for a NIC's receive ring, once per option — the paper's streaming DMA API,
//! map-multi batches, never-free, pre-allocation, an allocate-in-advance cache and
//! grant-table pre-mapping — measuring hypercalls, cycles, stale retries that go through and
//! accesses to frames given away after page flips ([`options`]); and the multicall sizes of a
//! receive ring and of a TSO sender mapping per fragment or per scatterlist ([`multicalls`]).

pub mod claims;

use crate::claims::Claim;

use crate::Paper as _;

use serde::Serialize;

pub mod dma_layer;
pub mod netperf;
pub mod sensitivity;

use crate::ReproError as Error;
use iommulab::experiment::{PvDmaKind, PvDmaRun, PvDmaSpec, UnitKind, run_pv_dma, xen_2007_unit};
use iommulab::hw::TcePrices;
use iommulab::hw::cost::CostModel;
use iommulab::virt::xen::pv_dma::SizeBucket;

pub use dma_layer::{FlushMode, PairSteps, SoftwarePrices, StepCounts};
use iommulab::workload::{NetRx, NetRxConfig, NetperfSend, NetperfSendConfig, TxMapping};
pub use netperf::{NetperfModel, point};

use super::{ReproError, ReproOptions, Steps};

/// The paper and what is reproduced.
pub const TITLE: &str = "Ben-Yehuda et al. 2007, The Price of Safety: Evaluating IOMMU Performance (Figures 2-7: netperf TCP_STREAM throughput and CPU with Calgary, on bare metal, Xen dom0 and domU)";

/// Ben-Yehuda et al., "The Price of Safety: Evaluating IOMMU Performance" (OLS 2007):
/// Figures 2–7.
#[derive(Clone, Copy, Debug)]
pub struct BenYehuda2007;

impl crate::Paper for BenYehuda2007 {
    type Results = BenYehuda2007Results;
    const NAME: &'static str = "benyehuda2007";
    const TITLE: &'static str = TITLE;

    fn run(opts: &ReproOptions<'_>) -> Result<BenYehuda2007Results, Error> {
        run(opts)
    }

    fn claims(r: &BenYehuda2007Results) -> &[Claim] {
        &r.claims
    }

    fn quick(r: &BenYehuda2007Results) -> bool {
        r.quick
    }
}

/// The message sizes of Figures 2–7 (64 B to 64 KiB).
pub const MESSAGE_SIZES: [u64; 11] = [
    64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536,
];

/// Where the netperf server runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum Scenario {
    /// Linux on bare metal drives the IOMMU (Figures 2, 3).
    #[serde(rename = "bare-metal")]
    BareMetal,
    /// Xen dom0 with direct hardware access: map and unmap are hypercalls (Figures 4, 5).
    #[serde(rename = "dom0")]
    Dom0,
    /// Xen domU with virtual I/O through dom0, which drives the NIC and the IOMMU
    /// (Figures 6, 7).
    #[serde(rename = "domU")]
    DomU,
}

impl Scenario {
    /// All three, in the paper's order.
    pub const ALL: [Scenario; 3] = [Scenario::BareMetal, Scenario::Dom0, Scenario::DomU];

    /// The name in `results.json`.
    pub const fn name(self) -> &'static str {
        match self {
            Scenario::BareMetal => "bare-metal",
            Scenario::Dom0 => "dom0",
            Scenario::DomU => "domU",
        }
    }
}

/// What the DMA layer costs per map + unmap pair on bare metal: counted on the model for one
/// unit and flush mode, priced per step.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DmaLayerCost {
    /// `calgary`, `dart`, or `calgary-per-unmap` (Calgary flushed after every unmap).
    pub unit: String,
    /// When the cache is flushed.
    pub flush: FlushMode,
    /// Map + unmap pairs run.
    pub pairs: u64,
    /// The steps counted.
    pub counts: StepCounts,
    /// The steps priced, per pair.
    pub steps: PairSteps,
    /// CPU cycles per pair (software + the unit's work).
    pub cycles_per_pair: f64,
    /// Of which kernel software (API call, lock, bitmap).
    pub software_cycles_per_pair: f64,
    /// Of which the unit's work on the CPU (stores, syncs, invalidations).
    pub hardware_cycles_per_pair: f64,
    /// Whole-cache flushes.
    pub whole_flushes: u64,
    /// Single-entry invalidations (Calgary: always 0, S2.2; DART: one per map).
    pub single_entry_invalidations: u64,
}

impl DmaLayerCost {
    /// `counts` of `unit` priced with `sw` and `hw`.
    pub fn priced(
        unit: &str,
        flush: FlushMode,
        counts: StepCounts,
        sw: &SoftwarePrices,
        hw: &TcePrices,
    ) -> Self {
        let steps = PairSteps::price(&counts, sw, hw, unit != "dart");
        Self {
            unit: unit.into(),
            flush,
            pairs: counts.pairs,
            counts,
            steps,
            cycles_per_pair: steps.total(),
            software_cycles_per_pair: steps.software(),
            hardware_cycles_per_pair: steps.hardware(),
            whole_flushes: counts.whole_flushes,
            single_entry_invalidations: counts.single_entry_invalidations,
        }
    }
}

/// One point of Figures 2–7.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct NetperfRun {
    /// `bare-metal`, `dom0` or `domU`.
    pub scenario: Scenario,
    /// The unit (`calgary`; `dart` for the bare-metal DART runs).
    pub unit: String,
    /// IOMMU enabled.
    pub iommu: bool,
    /// netperf message size in bytes.
    pub message_size: u64,
    /// Received payload throughput.
    pub throughput_mbps: f64,
    /// Busy fraction of all the scenario's CPUs (0..=1).
    pub cpu_utilization: f64,
    /// CPUs the utilisation is over.
    pub cpus: u32,
    /// What limits the throughput: `link`, or the CPU that saturates (`cpu`, `dom0`, `domU`).
    pub bottleneck: String,
    /// Packets per second received.
    pub packets_per_second: f64,
}

/// The paper's published results (S2.7), as text: its figures are not given as numbers.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Published {
    /// Per scenario, what the paper reports.
    pub claims: Vec<(Scenario, &'static str)>,
}

/// Headline comparison of IOMMU on vs off, per scenario and unit.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Headline {
    /// The scenario.
    pub scenario: Scenario,
    /// The unit.
    pub unit: String,
    /// Largest relative CPU-utilisation increase with the IOMMU (0.3 = +30%).
    pub max_cpu_increase: f64,
    /// Median relative CPU-utilisation increase over the message sizes.
    pub median_cpu_increase: f64,
    /// Largest relative throughput loss for messages of 1024 bytes and up.
    pub max_loss_ge_1024: f64,
    /// Largest relative throughput loss below 1024 bytes.
    pub max_loss_lt_1024: f64,
}

/// One option of S2.6 (and the paper's own streaming DMA API), measured on the model: the
/// domain's DMA layer over the PV backend ([`iommulab::virt::xen::pv_dma`]) on Calgary, for a
/// NIC's receive ring, then charged to the netperf model.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct OptionRow {
    /// Where it runs: `dom0` (a domain driving its own device) or `domU` (its I/O mapped by
    /// dom0, its driver domain: grant-table pre-mapping applies there).
    pub scenario: Scenario,
    /// The run on the receive ring (2 KiB buffers, no page flipping).
    pub run: PvDmaRun,
    /// Page flips of the second run, which flips every received page to another domain
    /// (4 KiB buffers, one per page).
    pub flips: u64,
    /// Device accesses of that run that reached a frame the domain had given away.
    pub foreign_accesses_after_flips: u64,
    /// The scenario's CPU utilisation with the option over the IOMMU off, at 1024-byte
    /// messages (0.4 = +40%).
    pub cpu_increase_1024: f64,
    /// Throughput lost against the IOMMU off at 64-byte messages (0.2 = −20%).
    pub throughput_loss_64: f64,
}

/// The sizes of the map/unmap multicalls a workload makes (S2.5).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MulticallRow {
    /// The workload and how its driver maps.
    pub workload: String,
    /// Multicalls made.
    pub multicalls: u64,
    /// Fraction with one entry.
    pub single_entry_fraction: f64,
    /// Mean entries per multicall.
    pub mean_entries: f64,
    /// The distribution.
    pub sizes: Vec<SizeBucket>,
}

/// Everything the reproduction produced.
#[derive(Clone, Debug, Serialize)]
pub struct BenYehuda2007Results {
    /// The shorter run.
    pub quick: bool,
    /// The harness's parameters (netperf with Nagle, its default).
    pub model: NetperfModel,
    /// The kernel's per-step prices.
    pub software_prices: SoftwarePrices,
    /// Calgary's per-step prices.
    pub calgary_prices: TcePrices,
    /// DART's per-step prices.
    pub dart_prices: TcePrices,
    /// The measured DMA layer: Calgary (roll-around flush), DART, Calgary flushed per unmap.
    pub dma: Vec<DmaLayerCost>,
    /// Every point (netperf's default, Nagle on).
    pub runs: Vec<NetperfRun>,
    /// IOMMU on vs off.
    pub headline: Vec<Headline>,
    /// The labelled variant `netperf -D` (`TCP_NODELAY`): one packet train per message.
    pub nodelay_runs: Vec<NetperfRun>,
    /// Its headlines.
    pub nodelay_headline: Vec<Headline>,
    /// The paper's numbers.
    pub published: Published,
    /// The options of S2.6, measured.
    pub options: Vec<OptionRow>,
    /// Multicall sizes per workload (S2.5).
    pub multicalls: Vec<MulticallRow>,
    /// The paper's claims, judged on this run ([`claims`]).
    pub claims: Vec<crate::claims::Claim>,
    /// Each estimated price swept over its range: where each claim's verdict holds.
    pub sensitivity: Vec<sensitivity::SensitivityRow>,
}

impl BenYehuda2007Results {
    /// Hypercalls per map + unmap pair of the streaming DMA API in dom0, as counted.
    pub fn dma_hypercalls_per_pair(&self) -> f64 {
        self.options
            .iter()
            .find(|o| o.scenario == Scenario::Dom0 && o.run.option == "streaming")
            .map_or(f64::NAN, |o| o.run.hypercalls_per_pair)
    }
}

/// What the model counted, before any price: the input of [`assemble`].
#[derive(Clone, Debug)]
pub struct Counted {
    /// The shorter run.
    pub quick: bool,
    /// Calgary with the roll-around flush.
    pub calgary: StepCounts,
    /// DART.
    pub dart: StepCounts,
    /// Calgary flushed after every unmap.
    pub calgary_per_unmap: StepCounts,
    /// The options' PV runs: (scenario, ring run, page-flip run).
    pub options: Vec<(Scenario, PvDmaRun, PvDmaRun)>,
    /// Multicall sizes.
    pub multicalls: Vec<MulticallRow>,
}

/// Every price the reproduction uses.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Prices {
    /// The harness.
    pub model: NetperfModel,
    /// The kernel's steps.
    pub software: SoftwarePrices,
    /// Calgary's.
    pub calgary: TcePrices,
    /// DART's.
    pub dart: TcePrices,
}

impl Default for Prices {
    fn default() -> Self {
        Self {
            model: NetperfModel::default(),
            software: SoftwarePrices::X460,
            calgary: TcePrices::CALGARY_X460,
            dart: TcePrices::DART_CPC945,
        }
    }
}

/// The PV runs of the options of S2.6 on Calgary: each on `packets` received packets, with
/// and without page flipping.
pub fn option_runs(
    sw: &SoftwarePrices,
    packets: u64,
) -> Result<Vec<(Scenario, PvDmaRun, PvDmaRun)>, Error> {
    let ring = |buf_size| {
        NetRx::new(NetRxConfig {
            packets,
            buf_size,
            ..NetRxConfig::default()
        })
    };
    let mut unit = xen_2007_unit()?;
    unit.cost = sw.apply(unit.cost);
    let mut out = Vec::new();
    for (scenario, option) in [
        (Scenario::Dom0, PvDmaKind::Streaming),
        (Scenario::Dom0, PvDmaKind::MapMulti),
        (Scenario::Dom0, PvDmaKind::NeverFree),
        (Scenario::Dom0, PvDmaKind::PreAllocate),
        (Scenario::Dom0, PvDmaKind::InAdvance),
        (Scenario::DomU, PvDmaKind::Streaming),
        (Scenario::DomU, PvDmaKind::GrantPremap),
    ] {
        let spec = PvDmaSpec {
            option,
            unit: UnitKind::Calgary,
            ..PvDmaSpec::default()
        };
        let run = run_pv_dma(&spec, &unit, 32, ring(2048))?;
        let flipped = run_pv_dma(
            &PvDmaSpec {
                page_flip: true,
                ..spec
            },
            &unit,
            32,
            ring(4096),
        )?;
        out.push((scenario, run, flipped));
    }
    Ok(out)
}

/// The options charged to the netperf model of their scenario: the PV run's cycles per pair
/// without its hypercalls, plus its counted hypercalls at the model's price.
pub fn options(model: &NetperfModel, runs: &[(Scenario, PvDmaRun, PvDmaRun)]) -> Vec<OptionRow> {
    #[expect(clippy::cast_precision_loss, reason = "a cycle price")]
    let priced_hypercall = CostModel::XEN_2007.hypercall as f64;
    runs.iter()
        .map(|(scenario, run, flipped)| {
            let charge = DmaCharge {
                unit: run.unit.clone(),
                bare_metal: (run.cycles_per_pair - run.hypercalls_per_pair * priced_hypercall)
                    .max(0.0),
                hypercalls_per_pair: run.hypercalls_per_pair,
            };
            let change = |m: u64| {
                let off = point(model, *scenario, m, None);
                let on = point(model, *scenario, m, Some(&charge));
                (
                    on.cpu_utilization / off.cpu_utilization - 1.0,
                    1.0 - on.throughput_mbps / off.throughput_mbps,
                )
            };
            OptionRow {
                scenario: *scenario,
                flips: flipped.flips,
                foreign_accesses_after_flips: flipped.foreign_accesses,
                cpu_increase_1024: change(1024).0,
                throughput_loss_64: change(64).1,
                run: run.clone(),
            }
        })
        .collect()
}

/// Multicall sizes of the streaming DMA API for a receive ring and for a TSO sender whose
/// driver maps a packet's pieces one by one (e1000e, ixgbe) or as one scatterlist.
pub fn multicalls(packets: u64) -> Result<Vec<MulticallRow>, Error> {
    let spec = PvDmaSpec::default();
    let unit = xen_2007_unit()?;
    let row = |workload: &str, r: PvDmaRun| MulticallRow {
        workload: workload.into(),
        multicalls: r.multicall_sizes.iter().map(|b| b.multicalls).sum(),
        single_entry_fraction: r.single_entry_fraction,
        mean_entries: r.mean_entries,
        sizes: r.multicall_sizes,
    };
    let rx = run_pv_dma(
        &spec,
        &unit,
        32,
        NetRx::new(NetRxConfig {
            packets,
            ..NetRxConfig::default()
        }),
    )?;
    let send = |mapping| -> Result<PvDmaRun, Error> {
        let w = NetperfSend::new(NetperfSendConfig {
            packets: packets / 4,
            tso: true,
            mapping,
            ..NetperfSendConfig::default()
        })?;
        Ok(run_pv_dma(&spec, &unit, 32, w)?)
    };
    Ok(vec![
        row(
            "netperf receive: 2 KiB ring buffers, one map per packet",
            rx,
        ),
        row(
            "netperf send, TSO: head and each fragment mapped by its own call (e1000e, ixgbe)",
            send(TxMapping::PerFragment)?,
        ),
        row(
            "netperf send, TSO: each packet mapped as one scatterlist",
            send(TxMapping::Sg)?,
        ),
    ])
}

/// What the IOMMU adds to one map + unmap pair where the netperf model charges it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DmaCharge {
    /// The unit.
    pub unit: String,
    /// Cycles per pair on bare metal.
    pub bare_metal: f64,
    /// Hypercalls per pair in a Xen domain that drives the device (counted by the PV run:
    /// 2 for the streaming DMA API, one single-entry multicall per map and per unmap, S2.5).
    pub hypercalls_per_pair: f64,
}

fn headline(runs: &[NetperfRun], scenario: Scenario, unit: &str) -> Headline {
    let mut cpu = Vec::new();
    let (mut ge, mut lt) = (0.0_f64, 0.0_f64);
    for on in runs
        .iter()
        .filter(|r| r.scenario == scenario && r.unit == unit && r.iommu)
    {
        let Some(off) = runs
            .iter()
            .find(|r| r.scenario == scenario && !r.iommu && r.message_size == on.message_size)
        else {
            continue;
        };
        cpu.push(on.cpu_utilization / off.cpu_utilization - 1.0);
        let loss = 1.0 - on.throughput_mbps / off.throughput_mbps;
        if on.message_size >= 1024 {
            ge = ge.max(loss);
        } else {
            lt = lt.max(loss);
        }
    }
    cpu.sort_by(f64::total_cmp);
    Headline {
        scenario,
        unit: unit.into(),
        max_cpu_increase: cpu.last().copied().unwrap_or(0.0),
        median_cpu_increase: cpu.get(cpu.len() / 2).copied().unwrap_or(0.0),
        max_loss_ge_1024: ge,
        max_loss_lt_1024: lt,
    }
}

/// The paper's claims (S2.7).
pub fn published() -> Published {
    Published {
        claims: vec![
            (
                Scenario::BareMetal,
                "practically no throughput difference; CPU utilisation up to 60% more, usually closer to 30% (Calgary; DART largely the same)",
            ),
            (
                Scenario::Dom0,
                "messages of 1024 B and up: no noticeable throughput difference, 40–60% more CPU; below 1024 B: significantly less throughput",
            ),
            (
                Scenario::DomU,
                "up to 15% less throughput for messages smaller than 512 B; up to 40% more CPU for larger messages",
            ),
        ],
    }
}

/// Runs the reproduction: the DMA layer counted on Calgary, DART and Calgary flushed per
/// unmap, the PV options and multicalls, then everything priced and judged.
fn run(opts: &ReproOptions<'_>) -> Result<BenYehuda2007Results, Error> {
    let pairs = if opts.quick { 20_000 } else { 400_000 };
    let packets = if opts.quick { 20_000 } else { 200_000 };
    let mut steps = Steps::new(opts, 6);
    steps.start(|| "DMA layer on calgary".into())?;
    let calgary = dma_layer::count_steps(UnitKind::Calgary, FlushMode::RollAround, pairs)?;
    steps.start(|| "DMA layer on dart".into())?;
    let dart = dma_layer::count_steps(UnitKind::Dart, FlushMode::RollAround, pairs)?;
    steps.start(|| "DMA layer on calgary, flushed per unmap".into())?;
    // The per-unmap flush is slow to run as well as to price: a tenth of the pairs.
    let calgary_per_unmap =
        dma_layer::count_steps(UnitKind::Calgary, FlushMode::PerUnmap, pairs / 10)?;
    steps.start(|| "the options of S2.6".into())?;
    let options = option_runs(&SoftwarePrices::X460, packets)?;
    steps.start(|| "multicall sizes".into())?;
    let multicalls = multicalls(packets)?;
    let counted = Counted {
        quick: opts.quick,
        calgary,
        dart,
        calgary_per_unmap,
        options,
        multicalls,
    };
    steps.start(|| "pricing and the sensitivity sweep".into())?;
    let mut r = assemble(&counted, &Prices::default())?;
    r.sensitivity = sensitivity::sweep(&counted, &r.claims)?;
    steps.finish()?;
    Ok(r)
}

/// The netperf runs of one model: every scenario × IOMMU off/on × message size (DART and
/// Calgary flushed per unmap on bare metal only: the paper ran DART there, S2.7).
fn netperf_runs(
    model: &NetperfModel,
    calgary: &DmaCharge,
    bare_only: &[&DmaCharge],
) -> (Vec<NetperfRun>, Vec<Headline>) {
    let mut runs = Vec::new();
    for scenario in Scenario::ALL {
        for m in MESSAGE_SIZES {
            runs.push(point(model, scenario, m, None));
        }
        for m in MESSAGE_SIZES {
            runs.push(point(model, scenario, m, Some(calgary)));
            if scenario == Scenario::BareMetal {
                for c in bare_only {
                    runs.push(point(model, scenario, m, Some(c)));
                }
            }
        }
    }
    let mut headlines: Vec<Headline> = Scenario::ALL
        .into_iter()
        .map(|s| headline(&runs, s, &calgary.unit))
        .collect();
    for c in bare_only {
        headlines.push(headline(&runs, Scenario::BareMetal, &c.unit));
    }
    (runs, headlines)
}

/// Prices what was counted and judges the claims (no sensitivity sweep).
pub fn assemble(c: &Counted, p: &Prices) -> Result<BenYehuda2007Results, Error> {
    let calgary = DmaLayerCost::priced(
        "calgary",
        FlushMode::RollAround,
        c.calgary,
        &p.software,
        &p.calgary,
    );
    let dart = DmaLayerCost::priced("dart", FlushMode::RollAround, c.dart, &p.software, &p.dart);
    let per_unmap = DmaLayerCost::priced(
        "calgary-per-unmap",
        FlushMode::PerUnmap,
        c.calgary_per_unmap,
        &p.software,
        &p.calgary,
    );
    let streaming = c
        .options
        .iter()
        .find(|o| o.0 == Scenario::Dom0 && o.1.option == "streaming")
        .map(|o| o.1.hypercalls_per_pair)
        .ok_or_else(|| ReproError::Check {
            reproduction: BenYehuda2007::NAME,
            what: "no streaming run among the options".into(),
        })?;
    let charge = |d: &DmaLayerCost| DmaCharge {
        unit: d.unit.clone(),
        bare_metal: d.cycles_per_pair,
        hypercalls_per_pair: streaming,
    };
    let (cc, dc, pc) = (charge(&calgary), charge(&dart), charge(&per_unmap));
    let (runs, headline) = netperf_runs(&p.model, &cc, &[&dc, &pc]);
    let nodelay = NetperfModel {
        nodelay: true,
        ..p.model
    };
    let (nodelay_runs, nodelay_headline) = netperf_runs(&nodelay, &cc, &[]);
    let mut r = BenYehuda2007Results {
        quick: c.quick,
        model: p.model,
        software_prices: p.software,
        calgary_prices: p.calgary,
        dart_prices: p.dart,
        dma: vec![calgary, dart, per_unmap],
        runs,
        headline,
        nodelay_runs,
        nodelay_headline,
        published: published(),
        options: options(&p.model, &c.options),
        multicalls: c.multicalls.clone(),
        claims: Vec::new(),
        sensitivity: Vec::new(),
    };
    r.claims = claims::claims(&r);
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The quick run: the mechanisms' counts and signs, a few numbers pinned.
    #[test]
    fn quick_headline() {
        let r = run(&ReproOptions::new(true)).unwrap();
        let (c, d, k) = (&r.dma[0], &r.dma[1], &r.dma[2]);
        assert_eq!(
            c.single_entry_invalidations, 0,
            "Calgary never flushes one entry"
        );
        // A TCE write is a store and a line flush: two per pair, and the lap's blasts.
        let p = TcePrices::CALGARY_X460;
        #[expect(clippy::cast_precision_loss, reason = "small integers")]
        let stores = 2.0 * p.entry_store as f64;
        assert!((c.steps.stores - stores).abs() < 1e-9, "{c:?}");
        assert_eq!(c.steps.build_sync, 0.0);
        // Each store and clear is followed by flush_tce's clflush; DART flushes no line.
        #[expect(clippy::cast_precision_loss, reason = "small integers")]
        let flushes = 2.0 * p.entry_flush as f64;
        assert!((c.steps.line_flushes - flushes).abs() < 1e-9, "{c:?}");
        assert_eq!(d.steps.line_flushes, 0.0);
        // DART invalidates each entry as it builds it: not Calgary by construction.
        assert_eq!(d.single_entry_invalidations, d.pairs);
        assert!(d.cycles_per_pair > c.cycles_per_pair + 500.0, "{d:?} {c:?}");
        // Per-unmap: one blast per pair.
        assert_eq!(k.whole_flushes, k.pairs);
        assert!(k.cycles_per_pair > 10.0 * c.cycles_per_pair, "{k:?}");
        let h = |s: Scenario, u: &str| {
            r.headline
                .iter()
                .find(|h| h.scenario == s && h.unit == u)
                .unwrap()
        };
        // Nagle: full segments at every size, the link limits bare metal with and without.
        let b = h(Scenario::BareMetal, "calgary");
        assert_eq!(b.max_loss_lt_1024, 0.0);
        assert_eq!(b.max_loss_ge_1024, 0.0);
        assert!(b.median_cpu_increase > 0.0);
        // A send() per message: at 64 B the sender, not the link, sets the rate, for IOMMU off
        // and on alike, so the receiver's CPU use is lower there than where the link limits.
        let at = |runs: &[NetperfRun], m: u64, iommu: bool| {
            runs.iter()
                .find(|x| {
                    x.scenario == Scenario::BareMetal
                        && x.unit == "calgary"
                        && x.iommu == iommu
                        && x.message_size == m
                })
                .unwrap()
                .clone()
        };
        let (s64, l64k) = (at(&r.runs, 64, false), at(&r.runs, 65536, false));
        assert_eq!(
            (s64.bottleneck.as_str(), l64k.bottleneck.as_str()),
            ("sender", "link")
        );
        assert!(
            s64.cpu_utilization < l64k.cpu_utilization,
            "{s64:?} {l64k:?}"
        );
        assert_eq!(at(&r.runs, 64, true).bottleneck, "sender");
        // -D: a packet per message; the sender's per-segment work makes it slower still.
        let nd = at(&r.nodelay_runs, 64, false);
        assert_eq!(nd.bottleneck, "sender");
        assert!(nd.throughput_mbps < s64.throughput_mbps, "{nd:?}");
        // dom0 pays the hypercalls on top: dearer than bare metal.
        assert!(h(Scenario::Dom0, "calgary").median_cpu_increase > b.median_cpu_increase);
        assert!(
            h(Scenario::BareMetal, "calgary-per-unmap").max_cpu_increase > 5.0 * b.max_cpu_increase
        );
        assert_eq!(r.runs.len(), 11 * (3 + 3 + 2));
        assert_eq!(r.sensitivity.len(), 3 + 5 + 5 + 13);
        // The options of S2.6: what each costs and what it leaves open.
        let opt = |s: Scenario, name: &str| {
            r.options
                .iter()
                .find(|o| o.scenario == s && o.run.option == name)
                .unwrap()
        };
        let st = opt(Scenario::Dom0, "streaming");
        assert!((st.run.hypercalls_per_pair - 2.0).abs() < 0.001, "{st:?}");
        assert_eq!(st.run.late_probes_through, 0);
        assert_eq!(st.foreign_accesses_after_flips, 0);
        let mm = opt(Scenario::Dom0, "map-multi");
        assert!((mm.run.mean_entries - 16.0).abs() < 1e-9);
        assert!(mm.cpu_increase_1024 < st.cpu_increase_1024, "{mm:?}");
        let nf = opt(Scenario::Dom0, "never-free");
        assert_eq!(nf.run.late_probes_through, nf.run.late_probes);
        assert!(nf.run.late_probes > 0);
        let pa = opt(Scenario::Dom0, "pre-allocate");
        assert_eq!(pa.run.hypervisor.hypercalls, 0);
        assert!(pa.cpu_increase_1024 < mm.cpu_increase_1024, "{pa:?}");
        assert!(pa.foreign_accesses_after_flips > 0);
        assert!(opt(Scenario::Dom0, "in-advance").foreign_accesses_after_flips > 0);
        let gp = opt(Scenario::DomU, "grant-premap");
        assert!(gp.cpu_increase_1024 < opt(Scenario::DomU, "streaming").cpu_increase_1024);
        // Multicalls: the receive ring and per-fragment sends are all single-entry (S2.5).
        assert!((r.multicalls[0].single_entry_fraction - 1.0).abs() < 1e-12);
        assert!((r.multicalls[1].single_entry_fraction - 1.0).abs() < 1e-12);
        assert!(r.multicalls[2].mean_entries > 10.0);
        // Turning the IOMMU on never raises throughput nor lowers CPU use.
        for runs in [&r.runs, &r.nodelay_runs] {
            for on in runs.iter().filter(|x| x.iommu) {
                let off = runs
                    .iter()
                    .find(|x| {
                        !x.iommu && x.scenario == on.scenario && x.message_size == on.message_size
                    })
                    .unwrap();
                assert!(on.throughput_mbps <= off.throughput_mbps + 1e-9);
                if on.bottleneck == "link" {
                    assert!(on.cpu_utilization > off.cpu_utilization);
                }
            }
        }
        // The sweep's default point reproduces the run's verdicts.
        for row in &r.sensitivity {
            for ch in &row.changes {
                assert!(
                    ch.holds_from <= row.default && row.default <= ch.holds_to,
                    "{row:?}"
                );
            }
        }
    }
}
