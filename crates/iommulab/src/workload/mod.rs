//! Workloads: iterators of DMA operations. Generators (here) and, later, trace readers
//! implement [`Workload`], so every experiment runs on a built-in workload or a user's trace.
//!
//! Operations name their buffer by a `slot` (an index the workload chooses, below
//! [`Workload::slots`]); the runner remembers each slot's DMA address between its map and
//! its unmap, as a driver would.

pub mod pseudo_scsi;

use serde::{Deserialize, Serialize};

use crate::addr::{Access, CpuId, DmaDirection, Hpa};

pub use pseudo_scsi::{PseudoScsi, PseudoScsiConfig};

/// One DMA operation issued by a driver or a device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "op")]
pub enum DmaOp {
    /// `dma_map_single(phys, len, dir)` on `cpu`, remembered as `slot`.
    Map {
        /// Buffer slot.
        slot: u32,
        /// Issuing CPU.
        cpu: CpuId,
        /// Physical address of the buffer.
        phys: Hpa,
        /// Length in bytes.
        len: u64,
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
    /// `dma_unmap_single` of `slot` on `cpu`; the I/O of that slot is complete (IOPS count
    /// these).
    Unmap {
        /// Buffer slot.
        slot: u32,
        /// Issuing CPU.
        cpu: CpuId,
    },
}

/// A source of DMA operations.
pub trait Workload {
    /// The next operation, or `None` at the end.
    fn next_op(&mut self) -> Option<DmaOp>;
    /// How many slots the workload uses at most (the runner sizes its table once).
    fn slots(&self) -> usize;
    /// Total I/Os the workload will complete, if known (for progress bars).
    fn total_ios(&self) -> Option<u64>;
}
