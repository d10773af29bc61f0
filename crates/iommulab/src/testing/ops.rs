//! [`OpsWorkload`]: a fixed list of DMA operations as a [`Workload`], for tests and benches
//! that drive a run loop with exactly the operations they choose.

use crate::workload::{DmaOp, Segment, Workload};

/// Replays `ops` in order (one device; `MapSg` gets no segments).
#[derive(Debug, Clone, Default)]
pub struct OpsWorkload {
    ops: Vec<DmaOp>,
    next: usize,
    slots: usize,
}

impl OpsWorkload {
    /// A workload of `ops`.
    pub fn new(ops: Vec<DmaOp>) -> Self {
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

impl Workload for OpsWorkload {
    fn next_op(&mut self) -> Result<Option<DmaOp>, crate::workload::WorkloadError> {
        let op = self.ops.get(self.next).copied();
        self.next += usize::from(op.is_some());
        Ok(op)
    }
    fn sg_segments(&self) -> &[Segment] {
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
