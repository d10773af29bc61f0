//! Command-line arguments (clap derive). CLI-only value enums convert into core types; the
//! core never depends on clap. Every command's `--help` is meant to be enough to use it.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use iommulab::device::MAX_NEIGHBOURS;
use iommulab::experiment::{NamedConfig, SoftwareClock};
use iommulab::hw::cost::CostPreset;
use iommulab::hw::invalidate::InvalidationInterface;
use iommulab::workload::pseudo_scsi::{MAX_CPUS, MAX_OUTSTANDING};

/// `--version`: the crate version and the git revision it was built from (build.rs).
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (git ",
    env!("IOMMULAB_GIT_REV"),
    ")"
);

const LONG_ABOUT: &str = "\
iommulab models IOMMU hardware (Intel VT-d tables, IOTLB, invalidation, faults) and the OS
software that drives it (the DMA API, IOVA allocators, IOTLB flush policies), with a modeled
cycle clock and a measured wall clock, and reruns published experiments on the model.

Every command that prints results takes --json (machine-readable, on stdout) and -q/--quiet
(no progress bar, no informational lines); -o/--out FILE always names a file. Progress bars
are drawn on stderr, only when it is a terminal. Errors go to stderr with a non-zero exit status (2 for a bad argument).";

const AFTER_HELP: &str = "\
Examples:
  iommulab reproduce all                       # every paper; open results/index.html
  iommulab bench --config default,strict       # the pseudo-driver benchmark, one row each
  iommulab compare trace.txt.zst               # Linux strict vs lazy: cost and exposure window
  iommulab replay my.iot --config linux-strict,linux-lazy
  iommulab trace stats my.iot                  # DMA-API and IOMMU layers, apart
  iommulab mrc my.iot --policy lru             # hit rate vs map-cache quota
  iommulab expether --hosts 3                  # a NIC shared over ExpEther: Gb/s per host
  iommulab iosup --minutes 10                  # IOSUP's pool vs Xen PV's IOTLB flushes
  iommulab completions bash > ~/.local/share/bash-completion/completions/iommulab

Docs: README.md, docs/configuration.md, docs/trace-format.md, docs/capture.md.";

/// IOMMU and DMA-mapping lab.
#[derive(Debug, Parser)]
#[command(
    name = "iommulab",
    version = VERSION,
    about = "IOMMU and DMA-mapping lab",
    long_about = LONG_ABOUT,
    after_help = AFTER_HELP,
    propagate_version = true
)]
pub struct Cli {
    /// No progress bar and no informational lines (results and errors are still printed).
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
    #[command(
        long_about = "Run Fujita & Mori's pseudo SCSI driver benchmark (S0.8): each I/O maps a \
buffer, lets the device use it and unmaps it, through the chosen configurations (IOVA \
allocator + IOTLB flush policy) on the modeled VT-d hardware. Prints one row per run: \
measured software ns/op, modeled ns/op (total and hardware), modeled IOPS, IOPS relative to \
`disabled`, IOTLB invalidations and flushes, peak allocator metadata, stale accesses (a device \
reaching a buffer after its unmap through a stale IOTLB entry; use --malicious) and faults.",
        after_help = "Examples:\n  iommulab bench\n  iommulab bench --config modern --ops 1000000 --json\n  \
iommulab bench --config default,strict --malicious --repeats 5 --out runs.csv\n  \
iommulab bench --config-file my.toml      # docs/configuration.md"
    )]
    Bench(BenchArgs),
    /// Run one experiment file (TOML or JSON): hardware × system (bare metal or a guest) ×
    /// workload (a generator or a trace) × device, as docs/configuration.md describes.
    #[command(
        after_help = "Examples:\n  iommulab run examples/guest-netperf.toml\n  \
iommulab run examples/bare-metal-trace.toml --json"
    )]
    Run(RunArgs),
    /// Rerun a paper's experiments and write its report (JSON, CSV, figures, markdown, HTML).
    #[command(
        long_about = "Rerun a paper's experiments on the model and write OUT/<paper>/: \
results.json, CSV tables, SVG and PNG figures, and README.md, which puts our numbers beside \
the published ones and explains each difference from the mechanisms. `all` runs every \
reproduction and also writes OUT/index.md and OUT/index.html, one self-contained page \
(no network needed) with every figure, table, explanation and data file. A full run takes a \
few minutes; --quick a few seconds.",
        after_help = "Examples:\n  iommulab reproduce all                 # then open results/index.html\n  \
iommulab reproduce fujita2008 --quick --out /tmp/r\n  iommulab reproduce yassour2010 --json"
    )]
    Reproduce(ReproduceArgs),
    /// Replay a DMA trace (native, CSV or Linux ftrace text) through a configuration.
    #[command(
        long_about = "Replay a recorded or generated DMA trace through bare-metal \
configurations (IOVAs re-allocated by the configuration's allocator; buffers, sizes and timing \
kept), or with --strategy through the guest model of direct device assignment (Yassour et al. \
2010). A Linux trace with both dma:* and iommu:map/unmap records is replayed from its \
DMA-API layer; the iommu records are skipped and counted.",
        after_help = "Examples:\n  iommulab replay my.iot --config default,strict,modern --malicious\n  \
iommulab replay trace.txt.zst --strategy on-demand --quota 512 --eviction lru --json"
    )]
    Replay(ReplayArgs),
    /// What Linux's strict and lazy modes cost on a trace, per device and in total, and how
    /// long each unmapped buffer stays reachable (the exposure window).
    #[command(
        long_about = "Replays a trace through Linux 6.x's two modes, linux-strict (iommu.strict=1: \
an IOTLB invalidation at every unmap) and linux-lazy (iommu.strict=0, the default: a flush \
queue invalidates per domain when a per-CPU ring fills or its 10 ms timer fires), and any \
configuration --config adds. Per device and in total: the modeled CPU time of the IOMMU's \
work per I/O (a map and its unmap; the preset's prices), that work as a share of one core over \
the trace's own duration (last timestamp - first), the IOTLB invalidations, and the exposure \
window of each unmap: the trace time from the unmap's return to the invalidation that covers \
it (0 under strict; p50/p99/max), with the most bytes and ranges left reachable at once. The \
windows come from the flush policy's own bookkeeping: no device probes, nothing added to the \
cost. Flush timers follow the trace's clock; windows have its 10 us resolution.",
        after_help = "Examples:\n  iommulab compare traces/fio-6.12.95+deb12-amd64.txt.zst\n  \
iommulab compare my.txt.zst --config 2.6.26-deferred --device 0000:01:00.0 --json"
    )]
    Compare(CompareArgs),
    /// Hit rate of the guest map cache against its quota over a trace, for one eviction
    /// policy (Yassour et al. 2010's Figures 3-4 method, on any trace).
    #[command(
        long_about = "The hit rate of the guest map cache against its quota (in 4 KiB pages) \
over a trace, for one eviction policy. Default view: the page sequence (every page a mapped \
buffer spans is an independent reference, S1.9; LRU and OPT in one pass over stack distances, \
OPT simulated per quota when a few large quotas are asked, equal to libCacheSim on the \
trace's .oracleGeneral export). --pinning: the pinned map cache \
(pages stay pinned while their DMA is in flight, so maps can be refused; one simulation per \
quota). Columns: quota, quota as % of the distinct pages, hits, misses, refused maps, hit rate.",
        after_help = "Examples:\n  iommulab mrc my.iot --policy opt\n  \
iommulab mrc my.iot --policy lru --pinning --quotas 8,64,512 --json"
    )]
    Mrc(MrcArgs),
    /// An SR-IOV NIC shared by hosts over ExpEther (Suzuki et al. 2010, S4.4): iperf
    /// goodput per host from the TLP-level timing model, with your NIC, network and hosts.
    #[command(
        long_about = "Runs the timing model behind `iommulab reproduce expether` with your own \
parameters: a 10 GbE SR-IOV NIC behind an ExpEther I/O-side bridge, each VF given to a \
different host, every DMA a TLP through the bridges, the Ethernet and the host's IOMMU. Send: \
the client sends to the hosts (the NIC's posted writes); receive: the hosts send to the client \
(the NIC's DMA reads, at most N outstanding, each a round trip over Ethernet); inter-host: \
host 1 sends to the others through the NIC's switch. A TOML or JSON file (the fields of \
`ExpEtherRun`: direction, streams, qos, duration_s and a [params] table) and the flags set the \
run; any parameter left out keeps its estimate (their ranges and sources: \
docs/reproductions/expether/README.md). Prints each host's goodput, the total, the read round \
trip and the limits the mechanisms set (the wire, N reads per round trip, each stream end's \
core alone).",
        after_help = "Examples:\n  iommulab expether --direction receive --hosts 3\n  \
iommulab expether --hosts 2 --set outstanding_reads=16 --set switch_ns=1000\n  \
iommulab expether my-nic.toml --json"
    )]
    Expether(ExpEtherArgs),
    /// IOSUP's page-table pool against Xen PV's IOTLB flushes, with your process churn: the
    /// three groups of S3.5 (no pool, pool from boot, pool switched on when stable).
    #[command(
        long_about = "Runs the model behind `iommulab reproduce iosup` with your own workload: a \
Xen PV guest whose processes come and go (each page-table allocation changes a frame's type \
from writable, and Xen unmaps it from the I/O page tables and invalidates the IOTLB, S3.3), a \
NIC receiving into a ring refilled from the same allocator, and IOSUP's per-level pools (S3.4) \
in S3.5's three groups: cache-disabled, cache-pre-enabled (the pool from boot) and \
cache-dynamic-enabled (switched on when the flush counter is stable, with the shrink rule). A \
TOML or JSON file (the fields of `IosupRun`: a [churn] table, [shrink], stable_within and \
[setup]) and the flags set the run; anything left out keeps the reproduction's value. Prints, \
per group over the steady minutes, the flush_iotlb_qi calls and IOTLB invalidations per \
minute, the time in the page-table allocation and free functions, the largest pool, the \
pages the shrink rule gave back and the NIC's IOTLB miss rate; with --json, everything \
(per-minute rows, step counts, the paper's claims judged by their rules on your run).",
        after_help = "Examples:\n  iommulab iosup --minutes 10\n  \
iommulab iosup --set forks_per_minute=2000 --set 'lifetime_s=[0.05, 1.0]'\n  \
iommulab iosup --set shrink.total=256 --coarse --json"
    )]
    Iosup(IosupArgs),
    /// dma-debug for a recorded trace: the checks of Linux's kernel/dma/debug.c on what the
    /// trace's drivers did, and iommu:map/unmap against the DMA layer. Exit 0 when clean,
    /// 3 when there are findings, 1 on errors.
    Check(CheckArgs),
    /// How exactly the Linux 6.x IOVA allocator model predicts every IOVA a real kernel
    /// chose: replays a trace's iommu:map/unmap through the model, open loop and one step,
    /// and scores each allocation (per device, with the first mismatches and their lines).
    #[command(
        long_about = "Replays the IOMMU-layer allocations of a Linux ftrace trace (iommu:map/unmap \
with the dma: events, kernel 6.12+) through the Linux 6.x IOVA allocator model (dma-iommu over \
iova.c: rbtree, per-CPU magazines, reserved windows, below-4 GiB first for PCI devices) and \
compares each IOVA the model picks with the one the kernel picked. Open loop: the model keeps \
its own choices. One step: after each prediction the model adopts the kernel's choice. The \
domain defaults are QEMU q35 with VT-d (docs/validation.md); the CPU count is the trace's.",
        after_help = "Examples:\n  iommulab validate traces/qemu-virtio-6.12.95+deb12-cloud-amd64.txt.zst\n  \
iommulab validate my-trace.txt --json --warmup 0.1 --group 0000:00:1f.0,0000:00:1f.2"
    )]
    Validate(ValidateArgs),
    /// Import, inspect, convert and generate DMA traces.
    Trace {
        /// The trace subcommand.
        #[command(subcommand)]
        command: TraceCommand,
    },
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell) to stdout.
    #[command(
        long_about = "Print a completion script for the shell to stdout.",
        after_help = "Install:\n  bash: iommulab completions bash > ~/.local/share/bash-completion/completions/iommulab\n  \
zsh:  iommulab completions zsh > ~/.zfunc/_iommulab   (with fpath+=~/.zfunc before compinit)\n  \
fish: iommulab completions fish > ~/.config/fish/completions/iommulab.fish"
    )]
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

/// `iommulab run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The experiment: TOML, or JSON when the name ends in `.json`.
    pub experiment: PathBuf,
    /// Print the result as JSON.
    #[arg(long, conflicts_with = "csv")]
    pub json: bool,
    /// Print the result as CSV (a header and one line).
    #[arg(long)]
    pub csv: bool,
    /// Also write the results to this file: CSV if its name ends in `.csv`, JSON otherwise;
    /// repeat for several files.
    #[arg(long, short, value_name = "FILE")]
    pub out: Vec<PathBuf>,
}

/// `iommulab trace ...`.
#[derive(Debug, Subcommand)]
pub enum TraceCommand {
    /// Import a Linux ftrace text trace (or CSV) into the native format.
    Import(TraceImportArgs),
    /// Describe a trace: its DMA-API layer (all devices and per device) and its IOMMU
    /// page-table layer, apart.
    #[command(long_about = STATS_LONG_ABOUT)]
    Stats(TraceStatsArgs),
    /// Convert between formats, chosen by the output's extension: `.iot` (native), `.csv`,
    /// `.oracleGeneral` (libCacheSim binary), `.oracleGeneral.csv` (libCacheSim CSV).
    Convert(TraceConvertArgs),
    /// Write a built-in workload out as a trace.
    Generate(TraceGenerateArgs),
}

const STATS_LONG_ABOUT: &str = "\
Describe a trace in one pass. A Linux trace can record the same mappings in two layers, reported
apart and never added up:

DMA API layer (dma:* records: the buffers drivers mapped; what replay, mrc and the
.oracleGeneral export use), for all devices and per device:
  maps                 map + alloc + map_sg calls (a scatter-gather list counts once)
  unmaps               unmap + free + unmap_sg calls
  unmatched unmaps     unmaps of no live mapping (e.g. mapped before the trace began)
  bytes mapped         sum of the maps' lengths
  page maps            4 KiB physical pages the maps covered, once per map (the page sequence)
  distinct pages       4 KiB physical pages ever mapped
  distinct iova pages  4 KiB DMA-address pages ever mapped
  working set          most distinct physical pages mapped at once
  max/mean outstanding live mappings (the mean weighted by time)
  outstanding at end   mappings never unmapped
  <kind> records       records per kind (sg_seg: one per scatter-gather segment)
  reuse distance       for each page a map covers, distinct other pages mapped since its last
                       map (log2 buckets; cold = first time)
  map size             log2 buckets of the maps' lengths

IOMMU page-table layer (iommu:map/iommu:unmap records, device `iommu`: what the IOMMU driver
wrote), counted by 4 KiB IOVA page rather than matched call by call:
  map/unmap records, bytes mapped/unmapped, pages mapped/unmapped, distinct iova and phys
  pages, max mapped pages, mapped pages at end, pages unmapped that were not mapped, pages
  remapped while mapped.

--json prints the same as an object: dma_api, dma_api_by_device, iommu (null without an iommu
device); docs/trace-format.md, \"Statistics\", defines every field.";

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

/// How a trace is read, for every command that reads one.
#[derive(Debug, Args)]
pub struct TraceReadArgs {
    /// The input's format.
    #[arg(long, value_enum, default_value = "auto")]
    pub format: TraceFormatArg,
    /// Skip malformed ftrace lines instead of failing on the first.
    #[arg(long)]
    pub lenient: bool,
}

/// Where a trace command writes its trace.
#[derive(Debug, Args)]
pub struct TraceOutArgs {
    /// The output file; its extension picks the format (`.iot` native, `.csv`; `trace
    /// generate` also writes `.oracleGeneral`).
    #[arg(
        short = 'o',
        long = "out",
        visible_alias = "output",
        value_name = "FILE"
    )]
    pub output: PathBuf,
}

/// `iommulab trace import`.
#[derive(Debug, Args)]
pub struct TraceImportArgs {
    /// The input (`.gz` and `.zst` are read transparently).
    pub input: PathBuf,
    // How the trace is read: `--format`, `--lenient`.
    #[command(flatten)]
    pub read: TraceReadArgs,
    // Where the trace goes: `-o/--out FILE`.
    #[command(flatten)]
    pub out: TraceOutArgs,
    /// Print the import report (events, lines, skipped and unknown lines) as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `iommulab trace stats`.
#[derive(Debug, Args)]
pub struct TraceStatsArgs {
    /// The trace (or libCacheSim's binary `.oracleGeneral`: its requests, pages and reuse
    /// distances).
    pub input: PathBuf,
    // How the trace is read: `--format`, `--lenient`.
    #[command(flatten)]
    pub read: TraceReadArgs,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// `iommulab trace convert`.
#[derive(Debug, Args)]
pub struct TraceConvertArgs {
    /// The input trace.
    pub input: PathBuf,
    // How the trace is read: `--format`, `--lenient`.
    #[command(flatten)]
    pub read: TraceReadArgs,
    // Where the trace goes: `-o/--out FILE`.
    #[command(flatten)]
    pub out: TraceOutArgs,
    /// Print a JSON summary (input, output, events) instead of a line.
    #[arg(long)]
    pub json: bool,
}

/// `iommulab trace generate`.
#[derive(Debug, Args)]
pub struct TraceGenerateArgs {
    /// The built-in workload.
    #[arg(value_enum)]
    pub workload: WorkloadArg,
    /// Stop after this many events, then unmap what is still mapped (so the trace ends with
    /// every mapping closed; a few more events may follow).
    #[arg(long, default_value_t = 1_000_000)]
    pub events: u64,
    /// Workload seed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    // Where the trace goes: `-o/--out FILE`.
    #[command(flatten)]
    pub out: TraceOutArgs,
    /// Print a JSON summary (workload, output, events, operations) instead of a line.
    #[arg(long)]
    pub json: bool,
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
    /// A NIC's receive ring under NAPI (S2.7).
    NetRx,
    /// A sender and its NIC's receive ring in one stream (S1.9's recordings).
    NicDuplex,
}

/// `iommulab replay`.
#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// The trace (native `.iot`, `.csv`, or ftrace text; `.gz`/`.zst` read transparently).
    pub trace: PathBuf,
    // How the trace is read: `--format`, `--lenient`.
    #[command(flatten)]
    pub read: TraceReadArgs,
    /// Configurations to run, comma separated [default: linux-lazy].
    #[arg(long = "config", value_delimiter = ',')]
    pub configs: Vec<ConfigArg>,
    /// A TOML file with the configuration (mechanisms, hardware, device; see
    /// docs/configuration.md); flags given override it. A guest or Xen PV `[system]` in it
    /// runs the trace through that system.
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
    #[arg(long, conflicts_with = "csv")]
    pub json: bool,
    /// Print the table as CSV (one line per configuration).
    #[arg(long)]
    pub csv: bool,
    /// Also write the results to this file: CSV if its name ends in `.csv`, JSON otherwise;
    /// repeat for several files.
    #[arg(long, short, value_name = "FILE")]
    pub out: Vec<PathBuf>,
    /// Only this device's events (as the trace names it, e.g. 0000:01:00.0); the trace's
    /// clock still advances with every event.
    #[arg(long, value_name = "BDF")]
    pub device: Option<String>,
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

/// `iommulab compare`.
#[derive(Debug, Args)]
pub struct CompareArgs {
    /// The trace (Linux ftrace text, native `.iot` or `.csv`; `.gz`/`.zst` read
    /// transparently).
    pub trace: PathBuf,
    /// A configuration to compare besides linux-strict and linux-lazy; repeat or comma
    /// separate.
    #[arg(long = "config", value_delimiter = ',')]
    pub configs: Vec<ConfigArg>,
    /// A configuration file (docs/configuration.md) to compare besides them, labelled by its
    /// `configuration` (or `custom` for `[mechanisms]`); its `[hardware]` prices them all.
    #[arg(long, value_name = "FILE")]
    pub config_file: Option<PathBuf>,
    /// Only this device's events (as the trace names it, e.g. 0000:01:00.0).
    #[arg(long, value_name = "BDF")]
    pub device: Option<String>,
    /// Cost preset [default: modern].
    #[arg(long, value_enum)]
    pub cost: Option<CostArg>,
    // How the trace is read: `--format`, `--lenient`.
    #[command(flatten)]
    pub read: TraceReadArgs,
    /// Print JSON: {"preset", "duration_ns", "configs": [{"name", "total", "devices"}]}.
    #[arg(long, conflicts_with = "csv")]
    pub json: bool,
    /// Print CSV: one line per configuration and device (device `total` for all).
    #[arg(long)]
    pub csv: bool,
    /// Also write the results to this file: CSV (as `--csv` prints it) if its name ends in `.csv`, the JSON otherwise;
    /// repeat for several files.
    #[arg(long, short, value_name = "FILE")]
    pub out: Vec<PathBuf>,
}

/// `iommulab check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The trace (ftrace text gives lines and tasks; native `.iot` and `.csv` give record
    /// numbers; `.gz`/`.zst` read transparently).
    pub trace: PathBuf,
    /// Print the report as JSON (counts by kind and the list of findings, streamed: memory
    /// stays flat in their number).
    #[arg(long)]
    pub json: bool,
    /// Findings to print (all are counted) [default: 50; with --json: all].
    #[arg(long, value_name = "N")]
    pub max: Option<usize>,
    /// Report the mappings still live when tracing stopped as `leak` findings (one per
    /// device); without it they are only counted ("outstanding at end").
    #[arg(long)]
    pub leaks: bool,
    /// The capture began before the traced devices mapped anything (tracing enabled at boot,
    /// e.g. `trace_event=` on the kernel command line, or before the driver was loaded): an
    /// unmap or sync of an address the trace never mapped is then a finding
    /// (`unmap_not_mapped`, `sync_not_mapped`); without it, it is counted as "mapped before
    /// tracing".
    #[arg(long)]
    pub from_boot: bool,
    /// A device's DMA mask, `DEVICE=MASK` (hex like 0xffffffff, or bits like 32); repeat
    /// or comma separate. Masks the trace prints (swiotlb_bounced) are used too.
    #[arg(long = "dma-mask", value_name = "DEVICE=MASK", value_delimiter = ',')]
    pub dma_masks: Vec<String>,
    /// Do not cross-check iommu:map/iommu:unmap against the DMA layer.
    #[arg(long)]
    pub no_iommu: bool,
    // How the trace is read: `--format`, `--lenient`.
    #[command(flatten)]
    pub read: TraceReadArgs,
}

/// `iommulab validate`.
#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// The trace: Linux ftrace text with iommu:map/unmap and dma: events (`.gz`/`.zst`
    /// read transparently). Several traces of one boot, in order, are validated as one
    /// history: the model carries over from each to the next; one report per trace and a
    /// total.
    #[arg(required = true, num_args = 1..)]
    pub trace: Vec<PathBuf>,
    /// The kernel whose allocator to model (Linux 6.x).
    #[arg(long, default_value = "6.12")]
    pub kernel: String,
    /// Print the report as JSON.
    #[arg(long, conflicts_with = "csv")]
    pub json: bool,
    /// Print the scores as CSV: per trace, its total and one line per device.
    #[arg(long)]
    pub csv: bool,
    /// Also write the report to this file: the CSV if its name ends in `.csv`, the JSON
    /// otherwise; repeat for several files.
    #[arg(long, short, value_name = "FILE")]
    pub out: Vec<PathBuf>,
    /// Fraction of the allocations replayed but not scored (0 <= F < 1).
    #[arg(long, value_name = "F", default_value_t = 0.0)]
    pub warmup: f64,
    /// Skip unmatched events and calls (counted in the report) instead of stopping at the
    /// first with its file and line.
    #[arg(long)]
    pub lenient: bool,
    /// A free of a range the trace never mapped is an error (with --lenient: skipped).
    /// Without it such a range was mapped before tracing began: it is learned where the
    /// kernel had it and counted ("mapped before tracing").
    #[arg(long)]
    pub strict_trace: bool,
    /// The kernel ran with lazy invalidation (iommu.strict=0): frees go through a modelled
    /// flush queue.
    #[arg(long)]
    pub lazy: bool,
    /// CPUs, if the trace's header does not give them (#P:N).
    #[arg(long, value_name = "N")]
    pub cpus: Option<usize>,
    /// A device's DMA mask, `DEVICE=MASK` (hex or bits) [default: 64 bits].
    #[arg(long = "dma-mask", value_name = "DEVICE=MASK", value_delimiter = ',')]
    pub dma_masks: Vec<String>,
    /// Devices of one IOMMU group (one domain), comma separated; repeat for more groups.
    #[arg(long = "group", value_name = "DEV,DEV,...")]
    pub groups: Vec<String>,
    /// First IOVA page handed out.
    #[arg(long, value_name = "PFN", default_value_t = 1)]
    pub start_pfn: u64,
    /// The domain's address width in bits (VT-d: 48 with a 4-level table, 39 with 3).
    #[arg(long, value_name = "BITS", default_value_t = 48)]
    pub aperture_bits: u32,
    /// A reserved window `START-END` (inclusive byte addresses, hex), added to the defaults;
    /// repeat or comma separate.
    #[arg(long = "reserve", value_name = "START-END", value_delimiter = ',')]
    pub reserve: Vec<String>,
    /// Drop the default reserved windows (q35's PCI windows, VT-d's IOAPIC/MSI window).
    #[arg(long)]
    pub no_default_windows: bool,
    /// iommu.forcedac=1: no below-4 GiB first attempt.
    #[arg(long)]
    pub forcedac: bool,
    /// Mismatches listed per mode (all are counted).
    #[arg(long, value_name = "N", default_value_t = 20)]
    pub max: usize,
    /// Flush-queue timeout in ms (lazy mode; Linux: 10).
    #[arg(long, value_name = "MS", default_value_t = 10)]
    pub fq_timeout_ms: u64,
    /// The kernel's CONFIG_HZ (lazy mode): the flush-queue timer fires on a jiffy boundary
    /// (Debian: 250); 0 fires it exactly --fq-timeout-ms later.
    #[arg(long, value_name = "HZ", default_value_t = 250)]
    pub fq_hz: u32,
}

/// `iommulab mrc`.
#[derive(Debug, Args)]
pub struct MrcArgs {
    /// The trace (native `.iot`, `.csv`, or ftrace text; or libCacheSim's binary
    /// `.oracleGeneral`/`.oracleGeneral.bin`, each object a page; `.gz`/`.zst` read
    /// transparently).
    pub trace: PathBuf,
    /// The eviction policy.
    #[arg(long, value_enum, default_value = "lru")]
    pub policy: EvictionArg,
    /// The pinned map cache: a page stays pinned while its DMA is in flight (maps can be
    /// refused). Default: the page sequence, every page map an independent reference (S1.9).
    #[arg(long)]
    pub pinning: bool,
    /// Every quota from 0 to this many pages [default: the trace's distinct pages]; past the
    /// distinct pages, where nothing changes, only this one.
    #[arg(long, value_name = "PAGES", conflicts_with = "quotas")]
    pub max_quota: Option<usize>,
    /// Only these quotas, in pages, comma separated.
    #[arg(long, value_name = "Q,Q,..", value_delimiter = ',', num_args = 1..)]
    pub quotas: Option<Vec<usize>>,
    /// Print the curve as JSON (one array per column).
    #[arg(long, conflicts_with = "csv")]
    pub json: bool,
    /// Print the curve as CSV (one line per quota, every quota).
    #[arg(long)]
    pub csv: bool,
    /// Also write the curve to this file: CSV if its name ends in `.csv`, JSON otherwise;
    /// repeat for several files.
    #[arg(long, short, value_name = "FILE")]
    pub out: Vec<PathBuf>,
    // How the trace is read: `--format`, `--lenient`.
    #[command(flatten)]
    pub read: TraceReadArgs,
}

/// `iommulab expether`.
#[derive(Debug, Args)]
pub struct ExpEtherArgs {
    /// A run file (TOML, or JSON when the name ends in `.json`): `direction`, `streams`,
    /// `qos`, `duration_s` and a `[params]` table; the flags below override it.
    pub config: Option<PathBuf>,
    /// Which way the data goes [default: receive].
    #[arg(long, value_enum)]
    pub direction: Option<DirectionArg>,
    /// Hosts sharing the NIC, one iperf stream each (1..=16).
    #[arg(long, value_name = "N", conflicts_with = "streams")]
    pub hosts: Option<u32>,
    /// Streams per host, comma separated (their count is the number of hosts).
    #[arg(long, value_name = "S,S,..", value_delimiter = ',', num_args = 1..)]
    pub streams: Option<Vec<u32>>,
    /// Per-VF QoS in the NIC: equal shares whatever each host asks.
    #[arg(long)]
    pub qos: bool,
    /// Modeled seconds [default: 0.1; the model is in steady state within microseconds].
    #[arg(long, value_name = "S")]
    pub duration: Option<f64>,
    /// Set one field: a plain NAME is a model parameter of `[params]`
    /// (`outstanding_reads=16`), a dotted one a path from the top; repeat for several.
    #[arg(long = "set", value_name = "NAME=VALUE")]
    pub set: Vec<String>,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// Also write the report to this file as JSON; repeat for several files.
    #[arg(long, short, value_name = "FILE")]
    pub out: Vec<PathBuf>,
}

/// `iommulab iosup`.
#[derive(Debug, Args)]
pub struct IosupArgs {
    /// A run file (TOML, or JSON when the name ends in `.json`): `[churn]`, `[shrink]`,
    /// `stable_within` and `[setup]`; the flags below override it.
    pub config: Option<PathBuf>,
    /// Modeled minutes per group [default: 30, the paper's Figure 6].
    #[arg(long, value_name = "N")]
    pub minutes: Option<u32>,
    /// Xen's domain-wide fallback: each type change invalidates the whole domain's IOTLB
    /// entries (a unit without page-selective invalidation), not one page's. Only with
    /// `--xsa78-fixed`: S3.5's Xen 4.2.1 invalidates nothing on a type change.
    #[arg(long)]
    pub coarse: bool,
    /// A Xen with XSA-78's fix (4.2.4, 4.3.2, 4.4 on), whose type changes invalidate the
    /// IOTLB; by default the groups run S3.5's Xen 4.2.1, whose type changes call the flush
    /// and invalidate nothing.
    #[arg(long)]
    pub xsa78_fixed: bool,
    /// The dynamic group's stability rule: the largest relative change between two
    /// minutes' flush counters that counts as stable [default: 0.05].
    #[arg(long, value_name = "F")]
    pub stable_within: Option<f64>,
    /// Set one field: a plain NAME is the churn's (`forks_per_minute=2000`), a dotted one a
    /// path from the top (`shrink.total=256`, `setup.cost.hypercall=1500`); repeat for
    /// several.
    #[arg(long = "set", value_name = "NAME=VALUE")]
    pub set: Vec<String>,
    /// Print everything as JSON.
    #[arg(long)]
    pub json: bool,
    /// Also write the JSON to this file; repeat for several files.
    #[arg(long, short, value_name = "FILE")]
    pub out: Vec<PathBuf>,
}

/// Which way the data goes over the shared NIC.
#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum DirectionArg {
    /// The client sends to the hosts (the NIC writes host memory).
    Send,
    /// The hosts send to the client (the NIC reads host memory).
    Receive,
    /// Host 1 sends to the other hosts through the NIC's internal switch.
    InterHost,
}

impl From<DirectionArg> for iommulab::pcie::timing::Direction {
    fn from(d: DirectionArg) -> Self {
        use iommulab::pcie::timing::Direction as D;
        match d {
            DirectionArg::Send => D::Send,
            DirectionArg::Receive => D::Receive,
            DirectionArg::InterHost => D::InterHost,
        }
    }
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
    /// A miss's evictions ride on its own map hypercall (one hypercall per replacement).
    Replace,
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
            BatchingArg::Replace => B::Replace,
        }
    }
}

/// A named configuration: Linux's modes by their kernel names, then S0.7's names (aliases
/// of the kernel-named ones, labelled as given).
#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum ConfigArg {
    /// Linux 6.x iommu.strict=1: per-CPU magazines + invalidation at every unmap.
    LinuxStrict,
    /// Linux 6.x iommu.strict=0 (its default): per-CPU magazines + flush queue.
    #[value(alias = "lazy")]
    LinuxLazy,
    /// iommu.passthrough=1: identity, DMA addresses are physical.
    Passthrough,
    /// Linux 2.6.26's default: rbtree + deferred flush (250 entries / 10 ms).
    #[value(name = "2.6.26-deferred")]
    Deferred2626,
    /// rbtree + invalidation at every unmap, no per-CPU caches (Linux before 4.7).
    #[value(name = "pre-4.7-strict")]
    StrictPre47,
    /// S0.7's bitmap + flush once per lap (2.6.26).
    #[value(name = "2.6.26-bitmap")]
    Bitmap2626,
    /// S0.7's bitmap + invalidation at every unmap (2.6.26).
    #[value(name = "2.6.26-strict-bitmap")]
    StrictBitmap2626,
    /// Alias of passthrough (intel_iommu=off; S0.7's name).
    Disabled,
    /// Alias of 2.6.26-deferred (S0.7's name).
    Default,
    /// Alias of pre-4.7-strict (S0.7's name).
    Strict,
    /// Alias of 2.6.26-bitmap (S0.7's name).
    Bitmap,
    /// Alias of 2.6.26-strict-bitmap (S0.7's name).
    StrictBitmap,
    /// Alias of linux-lazy.
    Modern,
}

impl From<ConfigArg> for NamedConfig {
    fn from(c: ConfigArg) -> Self {
        match c {
            ConfigArg::LinuxStrict => NamedConfig::LinuxStrict,
            ConfigArg::LinuxLazy => NamedConfig::LinuxLazy,
            ConfigArg::Passthrough => NamedConfig::Passthrough,
            ConfigArg::Deferred2626 => NamedConfig::Deferred2626,
            ConfigArg::StrictPre47 => NamedConfig::StrictPre47,
            ConfigArg::Bitmap2626 => NamedConfig::Bitmap2626,
            ConfigArg::StrictBitmap2626 => NamedConfig::StrictBitmap2626,
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
    #[arg(long, conflicts_with = "duration", value_parser = clap::value_parser!(u64).range(1..))]
    pub ops: Option<u64>,
    /// Run for this many seconds of modeled time instead of a number of I/Os (at most 3600).
    #[arg(long, value_name = "SECONDS")]
    pub duration: Option<f64>,
    /// Bytes per I/O [default: 1024].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub io_size: Option<u64>,
    /// I/Os in flight, at most 65536 [default: 1].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_OUTSTANDING)))]
    pub outstanding: Option<u32>,
    /// Simulated CPUs issuing I/Os round-robin (per-CPU magazines and flush queues)
    /// [default: 1].
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=i64::from(MAX_CPUS)))]
    pub threads: Option<u16>,
    /// Let the device access each buffer once while it is mapped.
    #[arg(long)]
    pub touch: bool,
    /// A malicious device: retries every just-unmapped address and its neighbours.
    #[arg(long)]
    pub malicious: bool,
    /// Pages on each side of an unmapped page a malicious device probes, at most 4096
    /// [default: 1].
    #[arg(long, value_parser = clap::value_parser!(u64).range(0..=MAX_NEIGHBOURS))]
    pub neighbours: Option<u64>,
    /// Cost preset of the modeled machine [default: modern; the paper's machine: vtd-2008].
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
    #[arg(long, conflicts_with = "csv")]
    pub json: bool,
    /// Print the per-run results as CSV (one line per run) instead of a table.
    #[arg(long)]
    pub csv: bool,
    /// Also write the per-run results to this file: CSV if its name ends in `.csv`, JSON otherwise;
    /// repeat for several files.
    #[arg(long, short, value_name = "FILE")]
    pub out: Vec<PathBuf>,
}

/// The papers `reproduce` takes: every registered reproduction (its title as the help),
/// then `all`.
fn papers() -> clap::builder::PossibleValuesParser {
    iommulab_repro::Reproduction::all()
        .iter()
        .map(|r| clap::builder::PossibleValue::new(r.name()).help(r.title()))
        .chain([clap::builder::PossibleValue::new("all").help("Every reproduction that exists")])
        .collect::<Vec<_>>()
        .into()
}

/// `iommulab reproduce`.
#[derive(Debug, Args)]
pub struct ReproduceArgs {
    /// Which paper.
    #[arg(value_parser = papers())]
    pub paper: String,
    /// A shorter run (fewer repeats, less modeled time) for CI and a first look.
    #[arg(long)]
    pub quick: bool,
    /// The folder the results go to (a folder per paper inside). `--out` is its old name,
    /// still accepted: everywhere else `-o/--out` names a file.
    #[arg(
        long = "out-dir",
        alias = "out",
        value_name = "DIR",
        default_value = "results"
    )]
    pub out: PathBuf,
    /// Print the paths written and each reproduction's results as JSON.
    #[arg(long)]
    pub json: bool,
}
