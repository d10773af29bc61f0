//! Workloads: streams of DMA operations. Generators (here) and trace replay
//! ([`replay::TraceWorkload`], over any [`iommulab_trace::EventSource`]) implement [`Workload`],
//! so every experiment runs on a built-in workload or on a user's trace alike.
//!
//! Operations name their buffer by a `slot` (an index the workload chooses); the runner
//! remembers each slot's DMA address between its map and its unmap, as a driver would. Slots
//! are small integers reused as buffers complete, so the runner's table stays small.
//!
//! Built-in generators, chosen by [`WorkloadConfig`]: [`PseudoScsi`] (S0.8),
//! [`NetperfSend`] and [`ApacheSendfile`] (S1.8–S1.9, sharing the NIC transmit path of
//! [`netperf_send`]), [`Block`] and [`UniformRandom`]; [`NetRx`], a NIC receive ring under
//! NAPI (S2.7), feeds the Xen DMA-layer runs; [`NicDuplex`] puts a sender and that receive
//! ring in one NIC's stream, as recorded guests show it. Realistic physical buffers come from
//! [`page_alloc`] (Linux-like per-CPU LIFO page lists and a kmalloc slab); popularity from
//! [`zipf`]. Every generator is deterministic for its `seed` and allocates nothing per op
//! once warm (`tests/workload_props.rs`).

#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations)]

// The layers below are named by their crate paths (`iommulab_base::addr::Iova`), never aliased as
// local modules: a crate names only what its manifest lists, so the compiler enforces the layering
// (docs/architecture.md).

pub mod apache_sendfile;
pub mod block;
pub mod in_guest;
mod live_objects;
pub mod net_rx;
pub mod netperf_send;
pub mod nic_duplex;
pub mod oracle_general;
pub mod packet_sg;
pub mod page_alloc;
pub mod pseudo_scsi;
pub mod replay;
pub mod uniform_random;
pub mod zipf;

use serde::{Deserialize, Serialize};

use iommulab_base::addr::{Access, CpuId, DmaDirection, Hpa, PhysAddr};
use iommulab_trace::TraceError;

pub use apache_sendfile::{ApacheSendfile, ApacheSendfileConfig};
pub use block::{Block, BlockBuffers, BlockConfig, Pattern};
pub use in_guest::InGuest;
pub use net_rx::{NetRx, NetRxConfig};
pub use netperf_send::{
    HEAD_OBJECT, MAX_FRAGS, NetperfSend, NetperfSendConfig, TxMapping, max_payload_pages,
    packet_payload_bytes,
};
pub use nic_duplex::{DuplexRxConfig, DuplexTx, NicDuplex, NicDuplexAny, NicDuplexConfig};
pub use packet_sg::{PacketSg, PacketSgStats};
pub use page_alloc::PageAllocConfig;
pub use pseudo_scsi::{PseudoScsi, PseudoScsiConfig, ScsiDmaPath};
pub use replay::{ReplayReport, TraceWorkload};
pub use uniform_random::{UniformRandom, UniformRandomConfig};

/// One DMA operation issued by a driver or a device. `P` is the address space its buffers
/// are in: the physical memory of the machine that runs the workload, host-physical ([`Hpa`])
/// on bare metal, guest-physical ([`Gpa`](iommulab_base::addr::Gpa)) inside a guest ([`InGuest`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "op")]
pub enum DmaOp<P: PhysAddr = Hpa> {
    /// `dma_map_single(phys, len, dir)` by `device` on `cpu`, remembered as `slot`.
    Map {
        /// Buffer slot.
        slot: u32,
        /// Issuing CPU.
        cpu: CpuId,
        /// Device index (0-based, below [`Workload::devices`]).
        device: u16,
        /// Physical address of the buffer, in the workload's address space `P`.
        phys: P,
        /// Length in bytes.
        len: u64,
        /// Direction.
        dir: DmaDirection,
        /// The buffer was *allocated for DMA* (S1.11): it comes from memory the driver
        /// or stack set aside for DMA (`dma_alloc_coherent`, a trace's `alloc` event, or
        /// a slab a changed driver sets aside for DMA), not from an arbitrary page it was
        /// handed (page cache, socket pages). The guest model's `cache_only = dma-allocated`
        /// relaxation caches only these; [`PacketSg`] leaves them out of its lists and a
        /// recording writes them as `alloc`/`free` events, as for `dma_alloc_coherent`. An
        /// `sg` list counts as not DMA-allocated.
        dma_alloc: bool,
    },
    /// `dma_map_sg` of the segments [`Workload::sg_segments`] returns now, as `slot`.
    MapSg {
        /// Buffer slot.
        slot: u32,
        /// Issuing CPU.
        cpu: CpuId,
        /// Device index.
        device: u16,
        /// Direction.
        dir: DmaDirection,
    },
    /// The device accesses the whole buffer of `slot` once.
    Access {
        /// Buffer slot.
        slot: u32,
        /// Read or write.
        access: Access,
    },
    /// `dma_unmap_single` or `dma_unmap_sg` of `slot` on `cpu`; its I/O is complete (IOPS
    /// count these).
    Unmap {
        /// Buffer slot.
        slot: u32,
        /// Issuing CPU.
        cpu: CpuId,
    },
    /// The workload's own clock (a trace's timestamps): timers fire by it.
    Tick {
        /// Nanoseconds since the start.
        now_ns: u64,
    },
}

impl<P: PhysAddr> DmaOp<P> {
    /// The same operation with its slot (if it has one) replaced by `f(slot)`: for
    /// workloads that merge or renumber another's buffers.
    pub fn with_slot(mut self, f: impl FnOnce(u32) -> u32) -> Self {
        match &mut self {
            DmaOp::Map { slot, .. }
            | DmaOp::MapSg { slot, .. }
            | DmaOp::Access { slot, .. }
            | DmaOp::Unmap { slot, .. } => *slot = f(*slot),
            DmaOp::Tick { .. } => {}
        }
        self
    }
}

/// One scatter-gather segment, in address space `P` (see [`DmaOp`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Segment<P: PhysAddr = Hpa> {
    /// Physical address.
    pub phys: P,
    /// Length in bytes.
    pub len: u64,
}

/// Where [`Workload::for_each_op`] hands a workload's ops, one at a time, in order.
pub trait OpSink<P: PhysAddr> {
    /// Takes `op`; for a `MapSg`, `sg` is its segments (what
    /// [`Workload::sg_segments`] would return).
    fn op(&mut self, op: DmaOp<P>, sg: &[Segment<P>]);
    /// Whether the sink takes no more ops (the runner's end time was reached, or an op
    /// failed): [`Workload::for_each_op`] returns before the next op it would read. Ops
    /// made from the input already read may still be handed over (a trace event can make
    /// a tick, an unmap and a map); a stopped sink ignores them.
    #[inline(always)]
    fn stopped(&self) -> bool {
        false
    }
}

/// Collects the ops (a `MapSg`'s segments are not kept).
impl<P: PhysAddr> OpSink<P> for Vec<DmaOp<P>> {
    #[inline(always)]
    fn op(&mut self, op: DmaOp<P>, _sg: &[Segment<P>]) {
        self.push(op);
    }
}

/// A source of DMA operations.
pub trait Workload {
    /// The address space of its buffers: the generators and a trace give the physical
    /// addresses of the machine they run on, [`Hpa`]; [`InGuest`] runs one inside a guest.
    type Phys: PhysAddr;
    /// The next operation, `Ok(None)` at the end, or an error (a bad trace).
    fn next_op(&mut self) -> Result<Option<DmaOp<Self::Phys>>, WorkloadError>;
    /// Hands every remaining op to `sink`, in order, until the workload ends or the sink
    /// [stops](OpSink::stopped): the loop `while let Some(op) = next_op()? { .. }` as one
    /// function the sink's code is inlined into. A trace translates its events straight
    /// into the sink.
    ///
    /// # Errors
    /// As [`next_op`](Self::next_op); the ops before the error have been handed over.
    fn for_each_op<K: OpSink<Self::Phys>>(&mut self, sink: &mut K) -> Result<(), WorkloadError>
    where
        Self: Sized,
    {
        while !sink.stopped()
            && let Some(op) = self.next_op()?
        {
            sink.op(op, self.sg_segments());
        }
        Ok(())
    }
    /// The segments of the `MapSg` just returned.
    fn sg_segments(&self) -> &[Segment<Self::Phys>];
    /// How many slots the workload expects to use at most (a sizing hint; more may come).
    fn slots(&self) -> usize;
    /// How many devices the workload drives (device indices are below this).
    fn devices(&self) -> usize;
    /// Total I/Os the workload will complete, if known (for progress bars).
    fn total_ios(&self) -> Option<u64>;
}

/// The most packets or requests whose I/O count a generator works out before it runs (for
/// [`Workload::total_ios`]: it walks every packet's or request's size once, about a tenth of
/// a second at this size). Beyond it the total is unknown: a generator of 10^15 packets must
/// start at once (a run is stopped through its progress callback, which counting would not
/// reach), and so must validating its configuration.
pub(crate) const COUNTED_TOTAL_MAX: u64 = 1 << 22;

/// Which built-in generator to run, with its parameters: the `[workload]` table of an
/// experiment, tagged by `kind`. Every field of every variant has a default, so
/// `kind = "netperf-send"` alone is a complete configuration.
///
/// | `kind` | generator | size knob | models |
/// |---|---|---|---|
/// | `pseudo-scsi` | [`PseudoScsi`] | `ios` | Fujita & Mori's pseudo driver (S0.8) |
/// | `netperf-send` | [`NetperfSend`] | `packets` | netperf TCP_STREAM send (S1.8–S1.9) |
/// | `apache-sendfile` | [`ApacheSendfile`] | `requests` | Apache static pages via sendfile (S1.8–S1.9) |
/// | `block` | [`Block`] | `requests` | fio-like disk / NVMe I/O |
/// | `uniform-random` | [`UniformRandom`] | `ios` | random maps, the stress test |
/// | `net-rx` | [`NetRx`] | `packets` | a NIC receive ring under NAPI (S2.7) |
/// | `nic-duplex` | [`NicDuplex`] | `tx.packets` / `tx.requests` | a sender and its NIC's receive ring in one stream (S1.9) |
///
/// The hot loop is monomorphised: the caller matches on the variant and builds the concrete
/// generator, so no `dyn Workload` is involved.
///
/// # Examples
/// ```
/// use iommulab_workload::{NetperfSendConfig, WorkloadConfig};
/// let w: WorkloadConfig = toml::from_str("kind = \"netperf-send\"\nsockets = 4").unwrap();
/// assert_eq!(w.name(), "netperf-send");
/// assert_eq!(w, WorkloadConfig::NetperfSend(NetperfSendConfig { sockets: 4, ..Default::default() }));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum WorkloadConfig {
    /// Fujita & Mori's pseudo SCSI driver (S0.8).
    PseudoScsi(PseudoScsiConfig),
    /// A netperf TCP_STREAM sender (S1.8–S1.9).
    NetperfSend(NetperfSendConfig),
    /// Apache serving static files with sendfile (S1.8–S1.9).
    ApacheSendfile(ApacheSendfileConfig),
    /// A block device at a queue depth.
    Block(BlockConfig),
    /// Random maps of random sizes: the stress workload.
    UniformRandom(UniformRandomConfig),
    /// A NIC's receive ring under NAPI (S2.7).
    NetRx(NetRxConfig),
    /// A sender and its NIC's receive ring in one stream (S1.9's recordings).
    NicDuplex(NicDuplexConfig),
}

impl Default for WorkloadConfig {
    /// The pseudo SCSI driver of S0.8, the paper's benchmark.
    fn default() -> Self {
        WorkloadConfig::PseudoScsi(PseudoScsiConfig::default())
    }
}

impl WorkloadConfig {
    /// Every kind, each with its defaults.
    pub fn all_defaults() -> [WorkloadConfig; 7] {
        [
            WorkloadConfig::PseudoScsi(PseudoScsiConfig::default()),
            WorkloadConfig::NetperfSend(NetperfSendConfig::default()),
            WorkloadConfig::ApacheSendfile(ApacheSendfileConfig::default()),
            WorkloadConfig::Block(BlockConfig::default()),
            WorkloadConfig::UniformRandom(UniformRandomConfig::default()),
            WorkloadConfig::NetRx(NetRxConfig::default()),
            WorkloadConfig::NicDuplex(NicDuplexConfig::default()),
        ]
    }

    /// The `kind` tag: `pseudo-scsi`, `netperf-send`, `apache-sendfile`, `block`,
    /// `uniform-random`, `net-rx` or `nic-duplex`.
    pub const fn name(&self) -> &'static str {
        match self {
            WorkloadConfig::PseudoScsi(_) => "pseudo-scsi",
            WorkloadConfig::NetperfSend(_) => "netperf-send",
            WorkloadConfig::ApacheSendfile(_) => "apache-sendfile",
            WorkloadConfig::Block(_) => "block",
            WorkloadConfig::UniformRandom(_) => "uniform-random",
            WorkloadConfig::NetRx(_) => "net-rx",
            WorkloadConfig::NicDuplex(_) => "nic-duplex",
        }
    }

    /// The generator's seed.
    pub const fn seed(&self) -> u64 {
        match self {
            WorkloadConfig::PseudoScsi(c) => c.seed,
            WorkloadConfig::NetperfSend(c) => c.seed,
            WorkloadConfig::ApacheSendfile(c) => c.seed,
            WorkloadConfig::Block(c) => c.seed,
            WorkloadConfig::UniformRandom(c) => c.seed,
            WorkloadConfig::NetRx(c) => c.seed,
            WorkloadConfig::NicDuplex(c) => match c.tx {
                DuplexTx::NetperfSend(t) => t.seed,
                DuplexTx::ApacheSendfile(t) => t.seed,
            },
        }
    }

    /// Sets the generator's seed (sweeps over seeds).
    pub fn set_seed(&mut self, seed: u64) {
        match self {
            WorkloadConfig::PseudoScsi(c) => c.seed = seed,
            WorkloadConfig::NetperfSend(c) => c.seed = seed,
            WorkloadConfig::ApacheSendfile(c) => c.seed = seed,
            WorkloadConfig::Block(c) => c.seed = seed,
            WorkloadConfig::UniformRandom(c) => c.seed = seed,
            WorkloadConfig::NetRx(c) => c.seed = seed,
            WorkloadConfig::NicDuplex(c) => {
                c.rx.seed = seed;
                match &mut c.tx {
                    DuplexTx::NetperfSend(t) => t.seed = seed,
                    DuplexTx::ApacheSendfile(t) => t.seed = seed,
                }
            }
        }
    }

    /// Checks the parameters by building the generator once (cheap for every default; the
    /// Apache generator lays out its files), so a bad field is reported before a run.
    pub fn validate(&self) -> Result<(), ParamError> {
        self.check_sizes()?;
        match *self {
            WorkloadConfig::PseudoScsi(c) if c.io_size == 0 => {
                Err(invalid("workload.io_size", 0, "at least 1 byte"))
            }
            // `new` would run 0 as 1 while the results name 0: refused, like the flags do.
            WorkloadConfig::PseudoScsi(c)
                if !(1..=pseudo_scsi::MAX_OUTSTANDING).contains(&c.outstanding) =>
            {
                Err(invalid(
                    "workload.outstanding",
                    c.outstanding,
                    &format!(
                        "1..={} I/Os in flight (NVMe's deepest queue)",
                        pseudo_scsi::MAX_OUTSTANDING
                    ),
                ))
            }
            WorkloadConfig::PseudoScsi(c) if !(1..=pseudo_scsi::MAX_CPUS).contains(&c.cpus) => {
                Err(invalid(
                    "workload.cpus",
                    c.cpus,
                    &format!("1..={} CPUs", pseudo_scsi::MAX_CPUS),
                ))
            }
            WorkloadConfig::PseudoScsi(_) => Ok(()),
            WorkloadConfig::NetperfSend(c) => NetperfSend::new(c).map(drop),
            WorkloadConfig::ApacheSendfile(c) => ApacheSendfile::new(c).map(drop),
            WorkloadConfig::Block(c) => Block::new(c).map(drop),
            WorkloadConfig::UniformRandom(c) => UniformRandom::new(c).map(drop),
            WorkloadConfig::NetRx(c) if c.ring == 0 || c.budget == 0 => Err(invalid(
                if c.ring == 0 {
                    "workload.ring"
                } else {
                    "workload.budget"
                },
                0,
                "at least 1",
            )),
            // `pool_pages` is checked with the other sizes (`check_sizes`).
            WorkloadConfig::NetRx(c) if c.buf_size == 0 => {
                Err(invalid("workload.buf_size", 0, "at least 1"))
            }
            WorkloadConfig::NetRx(c) => net_rx::check_pool("workload.pool_pages", &c),
            WorkloadConfig::NicDuplex(c) => c.with(drop),
        }
    }
}

/// The most pages a buffer pool may hold (`pool_pages`): 2^36, 256 TiB, so every buffer's
/// address stays below 2^52, the widest physical address a VT-d entry holds.
pub const MAX_POOL_PAGES: u64 = 1 << 36;

/// The most pages a generator's page allocator may manage (`memory.pages`): 2^26, 256 GiB. It
/// keeps 8 bytes per free page.
pub const MAX_MEMORY_PAGES: u64 = 1 << 26;

/// The most devices a generator may drive: a run places device `i` at bus `i / 31`, device
/// `i % 31 + 1`, so 31 × 256 fit on the buses there are.
pub const MAX_DEVICES: u16 = 31 * 256;

/// The largest buffer or per-frame byte count (`buf_size`, `tx_bytes_per_rx_frame`,
/// `io_size`): 1 GiB.
pub const MAX_BUFFER_BYTES: u64 = 1 << 30;

/// The most operations any count may ask for (`ios`, `packets`, `requests`): 2^32, about an
/// hour of modeled time at a million operations a second, as `duration_s` is capped at an
/// hour. One rule for every count, so no key runs for ever.
pub const MAX_COUNT: u64 = 1 << 32;

/// Why [`MAX_COUNT`] is the limit, in the error message.
const COUNT_LIMIT: &str =
    "about an hour of modeled time at a million a second; `duration_s` is capped alike";

impl WorkloadConfig {
    /// The sizes every generator shares: a run of at least one packet, request or I/O, and
    /// pools, memories and buffers whose addresses and byte counts the model can hold.
    fn check_sizes(&self) -> Result<(), ParamError> {
        let at_most = |key: &str, n: u64, max: u64, what: &str| {
            if n > max {
                Err(invalid(key, n, &format!("at most {max} ({what})")))
            } else {
                Ok(())
            }
        };
        let at_least_one = |key: &str, n: u64| {
            if n == 0 {
                Err(invalid(
                    key,
                    0,
                    "at least 1 (a run of nothing has no result)",
                ))
            } else {
                Ok(())
            }
        };
        // Every count of operations: at least one, at most MAX_COUNT.
        let count = |key: &str, n: u64| {
            at_least_one(key, n)?;
            at_most(key, n, MAX_COUNT, COUNT_LIMIT)
        };
        let pool = |key: &str, n: u64| {
            at_least_one(key, n)?;
            at_most(key, n, MAX_POOL_PAGES, "256 TiB of 4 KiB pages")
        };
        let memory = |m: &page_alloc::PageAllocConfig| {
            at_least_one("workload.memory.pages", m.pages)?;
            at_most(
                "workload.memory.pages",
                m.pages,
                MAX_MEMORY_PAGES,
                "256 GiB of 4 KiB pages",
            )
        };
        let buffer = |key: &str, n: u64| at_most(key, n, MAX_BUFFER_BYTES, "1 GiB");
        match self {
            WorkloadConfig::PseudoScsi(c) => {
                pool("workload.pool_pages", c.pool_pages)?;
                // `ios = 0` with `duration_s` runs for the time: checked with it (experiment).
                at_most("workload.ios", c.ios, MAX_COUNT, COUNT_LIMIT)?;
                buffer("workload.io_size", c.io_size)
            }
            WorkloadConfig::NetperfSend(c) => {
                count("workload.packets", c.packets)?;
                memory(&c.memory)
            }
            WorkloadConfig::ApacheSendfile(c) => {
                count("workload.requests", c.requests)?;
                memory(&c.memory)
            }
            WorkloadConfig::Block(c) => {
                count("workload.requests", c.requests)?;
                memory(&c.memory)
            }
            WorkloadConfig::UniformRandom(c) => {
                count("workload.ios", c.ios)?;
                pool("workload.pool_pages", c.pool_pages)?;
                at_most(
                    "workload.devices",
                    u64::from(c.devices),
                    u64::from(MAX_DEVICES),
                    "31 devices on each of 256 buses",
                )
            }
            WorkloadConfig::NetRx(c) => {
                count("workload.packets", c.packets)?;
                pool("workload.pool_pages", c.pool_pages)?;
                buffer("workload.buf_size", c.buf_size)
            }
            WorkloadConfig::NicDuplex(c) => {
                match c.tx {
                    DuplexTx::NetperfSend(t) => {
                        count("workload.tx.packets", t.packets)?;
                        memory(&t.memory)?;
                    }
                    DuplexTx::ApacheSendfile(t) => {
                        count("workload.tx.requests", t.requests)?;
                        memory(&t.memory)?;
                    }
                }
                pool("workload.rx.pool_pages", c.rx.pool_pages)?;
                buffer("workload.rx.buf_size", c.rx.buf_size)?;
                buffer("workload.tx_bytes_per_rx_frame", c.tx_bytes_per_rx_frame)
            }
        }
    }
}

/// A workload parameter that cannot work: the key (spelled as in the experiment TOML,
/// `workload.…`), the value given and what is allowed. The façade turns it into
/// `experiment::ConfigError::Invalid`, whose message it shares.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid value {value:?} for `{key}`: expected {expected}")]
pub struct ParamError {
    /// The offending key.
    pub key: String,
    /// The value given.
    pub value: String,
    /// What is allowed.
    pub expected: String,
}

/// Why a workload cannot produce its next operation.
#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    /// A parameter that cannot work (found when building, or when a generator runs out of
    /// the memory its parameters gave it).
    #[error(transparent)]
    Param(Box<ParamError>),
    /// A trace that cannot be read.
    #[error(transparent)]
    Trace(Box<TraceError>),
}

// Boxed: every `next_op` returns a `Result` of this type, so it stays two words wide.
impl From<ParamError> for WorkloadError {
    fn from(e: ParamError) -> Self {
        WorkloadError::Param(Box::new(e))
    }
}

impl From<TraceError> for WorkloadError {
    fn from(e: TraceError) -> Self {
        WorkloadError::Trace(Box::new(e))
    }
}

/// A [`ParamError`] for `key` (spelled as in the experiment TOML, `workload.…`).
pub(crate) fn invalid(key: &str, value: impl std::fmt::Display, expected: &str) -> ParamError {
    ParamError {
        key: key.into(),
        value: value.to_string(),
        expected: expected.into(),
    }
}

/// `v` as an index (generators' indices are far below `usize::MAX` on any target).
pub(crate) fn idx(v: u64) -> usize {
    usize::try_from(v).unwrap_or(usize::MAX)
}

/// A checker of op streams shared by the generators' unit tests.
#[cfg(test)]
pub(crate) mod check {
    use std::collections::{HashMap, HashSet};

    use super::{DmaOp, Workload};
    use iommulab_base::addr::{Access, DmaDirection, PAGE_4K};

    /// What a checked run saw.
    #[derive(Debug, Default)]
    pub struct Checked {
        /// `Map` + `MapSg`.
        pub maps: u64,
        /// Maps by direction: ToDevice, FromDevice, Bidirectional.
        pub maps_by_dir: [u64; 3],
        /// `MapSg` ops.
        pub sg_maps: u64,
        /// Most segments of one `MapSg`.
        pub max_sg_segments: usize,
        /// Bytes of all `MapSg` segments.
        pub sg_bytes: u64,
        /// `Unmap` ops (the runner's I/Os).
        pub unmaps: u64,
        /// Device reads and writes.
        pub reads: u64,
        /// Device writes.
        pub writes: u64,
        /// Longest single map.
        pub max_len: u64,
        /// The last tick.
        pub last_tick: u64,
        /// Most slots mapped at once.
        pub peak_live: usize,
        /// Distinct physical page numbers of mapped bytes.
        pub pages: HashSet<u64>,
        /// Every single map's (phys, len).
        pub buffers: Vec<(u64, u64)>,
    }

    /// Runs `w` to the end, asserting the stream's invariants: maps only of free slots,
    /// unmaps and accesses only of mapped ones, accesses the mapping's direction allows,
    /// non-empty segments, devices in range, a monotonic clock, `total_ios` unmaps, no slot
    /// left mapped, and `None` for ever after the end.
    pub fn run_checked<W: Workload<Phys = iommulab_base::addr::Hpa>>(w: &mut W) -> Checked {
        let mut c = Checked::default();
        let mut live: HashMap<u32, DmaDirection> = HashMap::new();
        let note = |c: &mut Checked, phys: u64, len: u64| {
            assert!(len > 0, "zero-length buffer at {phys:#x}");
            let first = phys >> PAGE_4K.shift();
            let last = (phys + len - 1) >> PAGE_4K.shift();
            c.pages.extend(first..=last);
        };
        while let Some(op) = w.next_op().unwrap() {
            match op {
                DmaOp::Map {
                    slot,
                    device,
                    phys,
                    len,
                    dir,
                    ..
                } => {
                    assert!(usize::from(device) < w.devices());
                    assert!((slot as usize) < w.slots(), "slot {slot} beyond the hint");
                    assert!(live.insert(slot, dir).is_none(), "slot {slot} mapped twice");
                    note(&mut c, phys.get(), len);
                    c.buffers.push((phys.get(), len));
                    c.max_len = c.max_len.max(len);
                    c.maps += 1;
                    c.maps_by_dir[dir as usize] += 1;
                }
                DmaOp::MapSg {
                    slot, device, dir, ..
                } => {
                    assert!(usize::from(device) < w.devices());
                    assert!((slot as usize) < w.slots(), "slot {slot} beyond the hint");
                    assert!(live.insert(slot, dir).is_none(), "slot {slot} mapped twice");
                    let segs = w.sg_segments();
                    assert!(!segs.is_empty(), "MapSg without segments");
                    for s in segs {
                        note(&mut c, s.phys.get(), s.len);
                        c.sg_bytes += s.len;
                    }
                    c.max_sg_segments = c.max_sg_segments.max(segs.len());
                    c.sg_maps += 1;
                    c.maps += 1;
                    c.maps_by_dir[dir as usize] += 1;
                }
                DmaOp::Access { slot, access } => {
                    let dir = live.get(&slot).copied();
                    let dir = dir.unwrap_or_else(|| panic!("access of unmapped slot {slot}"));
                    assert!(dir.perm().allows(access), "{access:?} through {dir:?}");
                    match access {
                        Access::Read => c.reads += 1,
                        Access::Write => c.writes += 1,
                    }
                }
                DmaOp::Unmap { slot, .. } => {
                    assert!(
                        live.remove(&slot).is_some(),
                        "unmap of unmapped slot {slot}"
                    );
                    c.unmaps += 1;
                }
                DmaOp::Tick { now_ns } => {
                    assert!(now_ns >= c.last_tick, "clock went back");
                    c.last_tick = now_ns;
                }
            }
            c.peak_live = c.peak_live.max(live.len());
        }
        assert!(live.is_empty(), "slots left mapped: {live:?}");
        if let Some(total) = w.total_ios() {
            assert_eq!(c.unmaps, total, "total_ios");
        }
        assert!(w.next_op().unwrap().is_none(), "ops after the end");
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs of nothing, and pools, memories, device counts and buffers past what the model
    /// can address or hold, are refused by key (they used to run as nothing, overflow an
    /// address or exhaust memory); the largest allowed still validates.
    #[test]
    fn sizes_a_run_cannot_hold_are_refused_by_key() {
        let parse = |t: &str| -> WorkloadConfig { toml::from_str(t).unwrap() };
        for (text, key) in [
            ("kind = \"netperf-send\"\npackets = 0", "workload.packets"),
            // One cap for every count (2^32 + 1 here).
            (
                "kind = \"netperf-send\"\npackets = 4294967297",
                "workload.packets",
            ),
            (
                "kind = \"block\"\nrequests = 9223372036854775807",
                "workload.requests",
            ),
            (
                "kind = \"uniform-random\"\nios = 4294967297",
                "workload.ios",
            ),
            (
                "kind = \"apache-sendfile\"\nrequests = 0",
                "workload.requests",
            ),
            ("kind = \"block\"\nrequests = 0", "workload.requests"),
            ("kind = \"uniform-random\"\nios = 0", "workload.ios"),
            ("kind = \"net-rx\"\npackets = 0", "workload.packets"),
            (
                "kind = \"pseudo-scsi\"\npool_pages = 0",
                "workload.pool_pages",
            ),
            (
                "kind = \"pseudo-scsi\"\npool_pages = 9223372036854775807",
                "workload.pool_pages",
            ),
            (
                "kind = \"uniform-random\"\npool_pages = 68719476737",
                "workload.pool_pages",
            ),
            (
                "kind = \"uniform-random\"\ndevices = 7937",
                "workload.devices",
            ),
            (
                "kind = \"net-rx\"\nbuf_size = 9223372036854775807",
                "workload.buf_size",
            ),
            (
                "kind = \"netperf-send\"\nmemory = { pages = 2147483648 }",
                "workload.memory.pages",
            ),
            (
                "kind = \"nic-duplex\"\ntx_bytes_per_rx_frame = 9223372036854775807",
                "workload.tx_bytes_per_rx_frame",
            ),
            (
                "kind = \"nic-duplex\"\ntx = { kind = \"netperf-send\", packets = 0 }",
                "workload.tx.packets",
            ),
        ] {
            match parse(text).validate() {
                Err(e) => assert_eq!(e.key, key, "{text}: {e}"),
                Ok(()) => panic!("{text}: accepted"),
            }
        }
        for text in [
            "kind = \"uniform-random\"\nios = 10\npool_pages = 68719476736\ndevices = 7936",
            "kind = \"pseudo-scsi\"\npool_pages = 68719476736",
        ] {
            parse(text).validate().unwrap();
        }
    }

    /// Every kind round-trips through TOML, tagged by its `name()`.
    #[test]
    fn configs_round_trip_through_toml_with_their_kind() {
        for w in WorkloadConfig::all_defaults() {
            let text = toml::to_string(&w).unwrap();
            assert!(text.contains(&format!("kind = \"{}\"", w.name())), "{text}");
            let back: WorkloadConfig = toml::from_str(&text).unwrap();
            assert_eq!(back, w);
            let bare: WorkloadConfig = toml::from_str(&format!("kind = \"{}\"", w.name())).unwrap();
            assert_eq!(bare, w, "a bare kind means the defaults");
            w.validate().unwrap();
        }
    }

    #[test]
    fn unknown_fields_and_kinds_are_rejected() {
        let err = toml::from_str::<WorkloadConfig>("kind = \"block\"\nqueue_dept = 4").unwrap_err();
        assert!(err.to_string().contains("queue_dept"), "{err}");
        assert!(toml::from_str::<WorkloadConfig>("kind = \"netperf\"").is_err());
        let nested: WorkloadConfig =
            toml::from_str("kind = \"apache-sendfile\"\nmapping = \"sg\"\n[memory]\npages = 9")
                .unwrap();
        let WorkloadConfig::ApacheSendfile(c) = nested else {
            panic!("{nested:?}");
        };
        assert_eq!((c.mapping, c.memory.pages), (TxMapping::Sg, 9));
        let bad = WorkloadConfig::ApacheSendfile(c).validate().unwrap_err();
        assert!(bad.to_string().contains("workload.memory.pages"), "{bad}");
    }

    /// The pseudo driver's queue depth and CPUs are refused outside what the `bench` flags
    /// accept (0 ran as 1 under a result labelled 0; 2^32-1 aborted allocating its slots), and
    /// an I/O size past 2^63 builds a generator instead of dividing by zero.
    #[test]
    fn pseudo_scsi_bounds_are_checked() {
        let base = PseudoScsiConfig::default();
        for (c, key) in [
            (
                PseudoScsiConfig {
                    outstanding: 0,
                    ..base
                },
                "workload.outstanding",
            ),
            (
                PseudoScsiConfig {
                    outstanding: u32::MAX,
                    ..base
                },
                "workload.outstanding",
            ),
            (PseudoScsiConfig { cpus: 0, ..base }, "workload.cpus"),
            (PseudoScsiConfig { cpus: 1025, ..base }, "workload.cpus"),
            // Past its bound a size failed mid-run, naming no key; a count ran for ever.
            (
                PseudoScsiConfig {
                    io_size: u64::MAX,
                    ..base
                },
                "workload.io_size",
            ),
            (
                PseudoScsiConfig {
                    ios: MAX_COUNT + 1,
                    ..base
                },
                "workload.ios",
            ),
        ] {
            let e = WorkloadConfig::PseudoScsi(c).validate().unwrap_err();
            assert_eq!(e.key, key, "{c:?}");
        }
        for c in [
            PseudoScsiConfig {
                outstanding: 65_536,
                cpus: 1024,
                ..base
            },
            PseudoScsiConfig {
                io_size: MAX_BUFFER_BYTES,
                ios: MAX_COUNT,
                ..base
            },
        ] {
            assert_eq!(WorkloadConfig::PseudoScsi(c).validate(), Ok(()), "{c:?}");
            let _ = PseudoScsi::new(c);
        }
    }

    #[test]
    fn seeds_are_read_and_set() {
        for mut w in WorkloadConfig::all_defaults() {
            w.set_seed(77);
            assert_eq!(w.seed(), 77);
        }
    }
}
