//! Command-line arguments (clap derive). CLI-only value enums convert into core types; the
//! core never depends on clap.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use iommulab::experiment::{NamedConfig, SoftwareClock};
use iommulab::hw::cost::CostPreset;
use iommulab::hw::invalidate::InvalidationInterface;

/// IOMMU and DMA-mapping lab.
#[derive(Debug, Parser)]
#[command(
    name = "iommulab",
    version,
    about = "IOMMU and DMA-mapping lab",
    propagate_version = true
)]
pub struct Cli {
    /// No progress bar.
    #[arg(long, short, global = true)]
    pub quiet: bool,
    /// The subcommand.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the pseudo-driver benchmark (S0.8) and print a table.
    Bench(BenchArgs),
    /// Rerun a paper's experiments and write its report.
    Reproduce(ReproduceArgs),
    /// Replay a DMA trace (native, CSV or Linux ftrace text) through a configuration.
    Replay(ReplayArgs),
    /// Hit rate of the guest map cache against its quota over a trace, for one eviction
    /// policy (Yassour et al. 2010's Figures 3-4 method, on any trace).
    Mrc(MrcArgs),
    /// Import, inspect, convert and generate DMA traces.
    Trace {
        /// The trace subcommand.
        #[command(subcommand)]
        command: TraceCommand,
    },
}

/// `iommulab trace ...`.
#[derive(Debug, Subcommand)]
pub enum TraceCommand {
    /// Import a Linux ftrace text trace (or CSV) into the native format.
    Import(TraceImportArgs),
    /// Describe a trace: events by kind, devices, pages, working set, reuse distances.
    Stats(TraceStatsArgs),
    /// Convert between formats, chosen by the output's extension: `.iot` (native), `.csv`,
    /// `.oracleGeneral` (libCacheSim binary), `.oracleGeneral.csv` (libCacheSim CSV).
    Convert(TraceConvertArgs),
    /// Write a built-in workload out as a trace.
    Generate(TraceGenerateArgs),
}

/// The format of a trace to read.
#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum TraceFormatArg {
    /// From the contents (native magic, CSV header, otherwise ftrace text).
    Auto,
    /// Linux ftrace text (`/sys/kernel/tracing/trace` or `trace-cmd report`).
    Ftrace,
    /// iommulab CSV.
    Csv,
    /// iommulab native binary.
    Native,
}

/// `iommulab trace import`.
#[derive(Debug, Args)]
pub struct TraceImportArgs {
    /// The input (`.gz` and `.zst` are read transparently).
    pub input: PathBuf,
    /// The input's format.
    #[arg(long, value_enum, default_value = "auto")]
    pub format: TraceFormatArg,
    /// Skip malformed event lines (and report how many) instead of failing on the first.
    #[arg(long)]
    pub lenient: bool,
    /// The output file; its extension picks the format (`.iot` native, `.csv`).
    #[arg(short, long)]
    pub output: PathBuf,
}

/// `iommulab trace stats`.
#[derive(Debug, Args)]
pub struct TraceStatsArgs {
    /// The trace.
    pub input: PathBuf,
    /// The input's format.
    #[arg(long, value_enum, default_value = "auto")]
    pub format: TraceFormatArg,
    /// Skip malformed ftrace lines.
    #[arg(long)]
    pub lenient: bool,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// `iommulab trace convert`.
#[derive(Debug, Args)]
pub struct TraceConvertArgs {
    /// The input trace.
    pub input: PathBuf,
    /// The input's format.
    #[arg(long, value_enum, default_value = "auto")]
    pub format: TraceFormatArg,
    /// Skip malformed ftrace lines.
    #[arg(long)]
    pub lenient: bool,
    /// The output; its extension picks the format.
    #[arg(short, long)]
    pub output: PathBuf,
}

/// `iommulab trace generate`.
#[derive(Debug, Args)]
pub struct TraceGenerateArgs {
    /// The built-in workload.
    #[arg(value_enum)]
    pub workload: WorkloadArg,
    /// Stop after this many events.
    #[arg(long, default_value_t = 1_000_000)]
    pub events: u64,
    /// Workload seed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// The output; its extension picks the format (`.iot`, `.csv`, `.oracleGeneral`).
    #[arg(short, long)]
    pub output: PathBuf,
}

/// A built-in workload.
#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum WorkloadArg {
    /// Fujita & Mori's pseudo SCSI driver (S0.8).
    PseudoScsi,
    /// A netperf TCP_STREAM sender (S1.8–S1.9).
    NetperfSend,
    /// Apache serving static files with sendfile (S1.8–S1.9).
    ApacheSendfile,
    /// A block device with a queue depth.
    Block,
    /// Random maps and unmaps.
    UniformRandom,
}

/// `iommulab replay`.
#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// The trace (native `.iot`, `.csv`, or ftrace text; `.gz`/`.zst` read transparently).
    pub trace: PathBuf,
    /// The input's format.
    #[arg(long, value_enum, default_value = "auto")]
    pub format: TraceFormatArg,
    /// Skip malformed ftrace lines.
    #[arg(long)]
    pub lenient: bool,
    /// Configurations to run, comma separated [default: modern].
    #[arg(long = "config", value_delimiter = ',')]
    pub configs: Vec<ConfigArg>,
    /// A TOML file with the configuration (mechanisms, hardware, device; see
    /// docs/configuration.md); flags given override it.
    #[arg(long, value_name = "FILE")]
    pub config_file: Option<PathBuf>,
    /// Cost preset [default: modern].
    #[arg(long, value_enum)]
    pub cost: Option<CostArg>,
    /// A malicious device: retries every just-unmapped address and its neighbours.
    #[arg(long)]
    pub malicious: bool,
    /// Run the dma-debug checker.
    #[arg(long)]
    pub dma_debug: bool,
    /// Print JSON (an object, or an array for several configurations).
    #[arg(long)]
    pub json: bool,
    /// Also write the results as JSON to this file.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Run the guest model of direct device assignment with this DMA-mapping strategy
    /// (Yassour et al. 2010) instead of the bare-metal configurations; the trace's
    /// addresses are taken as guest-physical.
    #[arg(long, value_enum)]
    pub strategy: Option<StrategyArg>,
    /// Map-cache quota in pages (`--strategy on-demand`).
    #[arg(long, value_name = "PAGES", default_value_t = 4096)]
    pub quota: u64,
    /// Map-cache eviction policy (`--strategy on-demand|persistent`).
    #[arg(long, value_enum, default_value = "lru")]
    pub eviction: EvictionArg,
    /// Hypercall batching of the guest model.
    #[arg(long, value_enum, default_value = "none")]
    pub batching: BatchingArg,
    /// Guest memory in MiB for the guest model (pages above it are refused); at most 65536
    /// (64 GiB: the host model keeps a pin count per guest page).
    #[arg(long, value_name = "MIB", default_value_t = 2048, value_parser = clap::value_parser!(u64).range(1..=65536))]
    pub guest_mib: u64,
}

/// `iommulab mrc`.
#[derive(Debug, Args)]
pub struct MrcArgs {
    /// The trace (native `.iot`, `.csv`, or ftrace text; `.gz`/`.zst` read transparently).
    pub trace: PathBuf,
    /// The eviction policy.
    #[arg(long, value_enum, default_value = "lru")]
    pub policy: EvictionArg,
    /// The pinned map cache: a page stays pinned while its DMA is in flight (maps can be
    /// refused). Default: the page sequence, every page map an independent reference (S1.9).
    #[arg(long)]
    pub pinning: bool,
    /// Every quota from 0 to this many pages [default: the trace's distinct pages].
    #[arg(long, value_name = "PAGES", conflicts_with = "quotas")]
    pub max_quota: Option<usize>,
    /// Only these quotas, in pages, comma separated.
    #[arg(long, value_name = "Q,Q,..", value_delimiter = ',', num_args = 1..)]
    pub quotas: Option<Vec<usize>>,
    /// Print the curve as JSON (one array per column).
    #[arg(long)]
    pub json: bool,
    /// The input's format.
    #[arg(long, value_enum, default_value = "auto")]
    pub format: TraceFormatArg,
    /// Skip malformed ftrace lines.
    #[arg(long)]
    pub lenient: bool,
}

/// A guest DMA-mapping strategy (S1.1).
#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum StrategyArg {
    /// All guest memory mapped and pinned up front.
    Direct,
    /// Map before each DMA, unmap right after.
    SingleUse,
    /// One mapping per page serves concurrent DMAs.
    Shared,
    /// Never unmap.
    Persistent,
    /// The quota-bound map cache.
    OnDemand,
}

impl From<StrategyArg> for iommulab::virt::Strategy {
    fn from(s: StrategyArg) -> Self {
        use iommulab::virt::Strategy as S;
        match s {
            StrategyArg::Direct => S::Direct,
            StrategyArg::SingleUse => S::SingleUse,
            StrategyArg::Shared => S::Shared,
            StrategyArg::Persistent => S::Persistent,
            StrategyArg::OnDemand => S::OnDemand,
        }
    }
}

/// A map-cache eviction policy (S1.3–S1.4).
#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum EvictionArg {
    /// First in, first out.
    Fifo,
    /// Least recently used.
    Lru,
    /// Belady's optimal (offline).
    Opt,
    /// Optimal batching (offline).
    OptBatch,
    /// Follower prefetching.
    Prefetch,
}

impl From<EvictionArg> for iommulab::virt::EvictionConfig {
    fn from(e: EvictionArg) -> Self {
        use iommulab::virt::EvictionConfig as E;
        match e {
            EvictionArg::Fifo => E::Fifo(Default::default()),
            EvictionArg::Lru => E::Lru(Default::default()),
            EvictionArg::Opt => E::Opt(Default::default()),
            EvictionArg::OptBatch => E::OptBatch(Default::default()),
            EvictionArg::Prefetch => E::Prefetch(Default::default()),
        }
    }
}

/// Hypercall batching (S1.6).
#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum BatchingArg {
    /// No batching.
    None,
    /// Batch map.
    Map,
    /// Batch unmap.
    Unmap,
    /// Unmaps ride on the next map hypercall.
    Piggyback,
    /// Batch map and batch unmap.
    MapUnmap,
}

impl From<BatchingArg> for iommulab::virt::Batching {
    fn from(b: BatchingArg) -> Self {
        use iommulab::virt::Batching as B;
        match b {
            BatchingArg::None => B::None,
            BatchingArg::Map => B::Map,
            BatchingArg::Unmap => B::Unmap,
            BatchingArg::Piggyback => B::Piggyback,
            BatchingArg::MapUnmap => B::MapUnmap,
        }
    }
}

/// A named configuration (S0.7 + modern).
#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum ConfigArg {
    /// IOMMU off: DMA addresses are physical.
    Disabled,
    /// rbtree + deferred flush (250 entries / 10 ms).
    Default,
    /// rbtree + invalidation at every unmap.
    Strict,
    /// bitmap + flush once per lap.
    Bitmap,
    /// bitmap + invalidation at every unmap.
    StrictBitmap,
    /// per-CPU magazines + per-CPU flush queues.
    Modern,
}

impl From<ConfigArg> for NamedConfig {
    fn from(c: ConfigArg) -> Self {
        match c {
            ConfigArg::Disabled => NamedConfig::Disabled,
            ConfigArg::Default => NamedConfig::Default,
            ConfigArg::Strict => NamedConfig::Strict,
            ConfigArg::Bitmap => NamedConfig::Bitmap,
            ConfigArg::StrictBitmap => NamedConfig::StrictBitmap,
            ConfigArg::Modern => NamedConfig::Modern,
        }
    }
}

/// A cost preset.
#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum CostArg {
    /// Fujita & Mori's Core 2 Duo + Q35 (2008).
    #[value(name = "vtd-2008")]
    Vtd2008,
    /// Yassour et al.'s Core 2 + VT-d (2010, S1.10).
    #[value(name = "kvm-2010")]
    Kvm2010,
    /// A current server.
    Modern,
}

impl From<CostArg> for CostPreset {
    fn from(c: CostArg) -> Self {
        match c {
            CostArg::Vtd2008 => CostPreset::Vtd2008,
            CostArg::Kvm2010 => CostPreset::Kvm2010,
            CostArg::Modern => CostPreset::Modern,
        }
    }
}

/// An invalidation interface.
#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum InvalidationArg {
    /// One register write and poll per invalidation.
    Register,
    /// Descriptors in a queue, one wait per batch.
    Queued,
}

impl From<InvalidationArg> for InvalidationInterface {
    fn from(c: InvalidationArg) -> Self {
        match c {
            InvalidationArg::Register => InvalidationInterface::Register,
            InvalidationArg::Queued => InvalidationInterface::Queued,
        }
    }
}

/// Which clock the software part of `iops` uses.
#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum ClockArg {
    /// Counted kernel primitives × the preset's costs (deterministic).
    Modeled,
    /// iommulab's own measured wall time.
    Measured,
}

impl From<ClockArg> for SoftwareClock {
    fn from(c: ClockArg) -> Self {
        match c {
            ClockArg::Modeled => SoftwareClock::Modeled,
            ClockArg::Measured => SoftwareClock::Measured,
        }
    }
}

/// `iommulab bench`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Configurations to run, comma separated [default: all six].
    #[arg(long = "config", value_delimiter = ',')]
    pub configs: Vec<ConfigArg>,
    /// A TOML file with a full bench configuration (see docs/configuration.md); flags given
    /// on the command line override it, flags not given keep the file's values.
    #[arg(long, value_name = "FILE")]
    pub config_file: Option<PathBuf>,
    /// I/Os to run (each is one map + one unmap) [default: 200000].
    #[arg(long, conflicts_with = "duration")]
    pub ops: Option<u64>,
    /// Run for this many seconds of modeled time instead of a number of I/Os.
    #[arg(long, value_name = "SECONDS")]
    pub duration: Option<f64>,
    /// Bytes per I/O [default: 1024].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub io_size: Option<u64>,
    /// I/Os in flight [default: 1].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub outstanding: Option<u32>,
    /// Simulated CPUs issuing I/Os round-robin (per-CPU magazines and flush queues)
    /// [default: 1].
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub threads: Option<u16>,
    /// Let the device access each buffer once while it is mapped.
    #[arg(long)]
    pub touch: bool,
    /// A malicious device: retries every just-unmapped address and its neighbours.
    #[arg(long)]
    pub malicious: bool,
    /// Pages on each side of an unmapped page a malicious device probes [default: 1].
    #[arg(long)]
    pub neighbours: Option<u64>,
    /// Cost preset of the modeled machine [default: vtd-2008].
    #[arg(long, value_enum)]
    pub cost: Option<CostArg>,
    /// Page-table levels (3, 4, 5) [default: the preset's].
    #[arg(long, value_parser = clap::value_parser!(u8).range(3..=5))]
    pub levels: Option<u8>,
    /// Invalidation interface [default: the preset's].
    #[arg(long, value_enum)]
    pub invalidation: Option<InvalidationArg>,
    /// Which clock the software part of `iops` uses [default: modeled].
    #[arg(long, value_enum)]
    pub software_clock: Option<ClockArg>,
    /// Run the dma-debug checker on every call.
    #[arg(long)]
    pub dma_debug: bool,
    /// Workload seed [default: 1].
    #[arg(long)]
    pub seed: Option<u64>,
    /// Runs per configuration (seeds seed, seed+1, ...); one row per run.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub repeats: u32,
    /// Print JSON (an object, or an array when several configurations run) instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Also write the per-run results as JSON to this file.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Also write the per-run results as CSV to this file.
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
}

/// A paper to reproduce.
#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum Paper {
    /// Fujita & Mori, "IOMMU performance evaluation in Linux" (2008): Figure 4.
    Fujita2008,
    /// Yassour, Ben-Yehuda & Wasserman, "On the DMA mapping problem in direct device
    /// assignment" (SYSTOR 2010): Figures 3–6.
    Yassour2010,
    /// Every reproduction that exists.
    All,
}

/// `iommulab reproduce`.
#[derive(Debug, Args)]
pub struct ReproduceArgs {
    /// Which paper.
    #[arg(value_enum)]
    pub paper: Paper,
    /// A shorter run (fewer repeats, less modeled time) for CI and a first look.
    #[arg(long)]
    pub quick: bool,
    /// Where the results go (a folder per paper inside).
    #[arg(long, default_value = "results")]
    pub out: PathBuf,
}
