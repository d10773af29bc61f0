//! [`OpsWorkload`]: a fixed list of DMA operations as a [`Workload`], for tests and benches
//! that drive a run loop with exactly the operations they choose, in address space `P`
//! (host-physical for bare metal, guest-physical for a guest).

use crate::addr::{CpuId, DmaDirection, Hpa, PhysAddr};
use crate::workload::{DmaOp, Segment, Workload};

/// A `dma_map_single` of `len` bytes at `phys` as `slot`, by device 0 on CPU 0.
pub fn map_op<P: PhysAddr>(slot: u32, phys: P, len: u64, dir: DmaDirection) -> DmaOp<P> {
    DmaOp::Map {
        slot,
        cpu: CpuId::new(0),
        device: 0,
        phys,
        len,
        dir,
        dma_alloc: false,
    }
}

/// Replays `ops` in order (one device; `MapSg` gets no segments).
#[derive(Debug, Clone)]
pub struct OpsWorkload<P: PhysAddr = Hpa> {
    ops: Vec<DmaOp<P>>,
    next: usize,
    slots: usize,
}

impl<P: PhysAddr> Default for OpsWorkload<P> {
    fn default() -> Self {
        Self::new(Vec::new())
    }
}

impl<P: PhysAddr> OpsWorkload<P> {
    /// A workload of `ops`.
    pub fn new(ops: Vec<DmaOp<P>>) -> Self {
        let slots = ops
            .iter()
            .filter_map(|op| match *op {
                DmaOp::Map { slot, .. }
                | DmaOp::MapSg { slot, .. }
                | DmaOp::Access { slot, .. }
                | DmaOp::Unmap { slot, .. } => Some(slot as usize + 1),
                DmaOp::Tick { .. } => None,
            })
            .max()
            .unwrap_or(0);
        Self {
            ops,
            next: 0,
            slots,
        }
    }
}

impl<P: PhysAddr> Workload for OpsWorkload<P> {
    type Phys = P;
    fn next_op(&mut self) -> Result<Option<DmaOp<P>>, crate::workload::WorkloadError> {
        let op = self.ops.get(self.next).copied();
        self.next += usize::from(op.is_some());
        Ok(op)
    }
    fn sg_segments(&self) -> &[Segment<P>] {
        &[]
    }
    fn slots(&self) -> usize {
        self.slots
    }
    fn devices(&self) -> usize {
        1
    }
    fn total_ios(&self) -> Option<u64> {
        None
    }
}
