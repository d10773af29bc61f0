//! Workloads: streams of DMA operations. Generators (here) and trace readers
//! ([`crate::trace::replay::TraceWorkload`]) implement [`Workload`], so every experiment runs on
//! a built-in workload or on a user's trace alike.
//!
//! Operations name their buffer by a `slot` (an index the workload chooses); the runner
//! remembers each slot's DMA address between its map and its unmap, as a driver would. Slots
//! are small integers reused as buffers complete, so the runner's table stays small.

pub mod page_alloc;
pub mod pseudo_scsi;
pub mod zipf;

use serde::{Deserialize, Serialize};

use crate::addr::{Access, CpuId, DmaDirection, Hpa};
use crate::error::Error;

pub use pseudo_scsi::{PseudoScsi, PseudoScsiConfig};

/// One DMA operation issued by a driver or a device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "op")]
pub enum DmaOp {
    /// `dma_map_single(phys, len, dir)` by `device` on `cpu`, remembered as `slot`.
    Map {
        /// Buffer slot.
        slot: u32,
        /// Issuing CPU.
        cpu: CpuId,
        /// Device index (0-based, below [`Workload::devices`]).
        device: u16,
        /// Physical address of the buffer.
        phys: Hpa,
        /// Length in bytes.
        len: u64,
        /// Direction.
        dir: DmaDirection,
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

/// One scatter-gather segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Segment {
    /// Physical address.
    pub phys: Hpa,
    /// Length in bytes.
    pub len: u64,
}

/// A source of DMA operations.
pub trait Workload {
    /// The next operation, `Ok(None)` at the end, or an error (a bad trace).
    fn next_op(&mut self) -> Result<Option<DmaOp>, Error>;
    /// The segments of the `MapSg` just returned.
    fn sg_segments(&self) -> &[Segment];
    /// How many slots the workload expects to use at most (a sizing hint; more may come).
    fn slots(&self) -> usize;
    /// How many devices the workload drives (device indices are below this).
    fn devices(&self) -> usize;
    /// Total I/Os the workload will complete, if known (for progress bars).
    fn total_ios(&self) -> Option<u64>;
}
