//! [`NoIova`]: the allocator of a DMA layer in identity addressing (a guest without an IOMMU
//! of its own, S1.1), where a buffer's DMA address is its own physical address and nothing
//! is allocated. Any request is refused, so a configuration that routes allocations here by
//! mistake fails loudly instead of inventing addresses.

use iommulab_base::addr::{CpuId, Iova, Pfn};
use iommulab_base::clock::{ClockRate, Cycles};

use super::{IovaAllocator, IovaError, IovaStats};

/// Allocates nothing (identity addressing).
#[derive(Debug, Default, Clone)]
pub struct NoIova {
    stats: IovaStats,
}

impl NoIova {
    /// The allocator.
    pub fn new() -> Self {
        Self::default()
    }
}

impl IovaAllocator for NoIova {
    fn alloc(&mut self, _cpu: CpuId, pages: u64, limit: Pfn<Iova>) -> Result<Pfn<Iova>, IovaError> {
        Err(IovaError::Exhausted {
            pages,
            limit: limit.get(),
        })
    }
    fn free(&mut self, _cpu: CpuId, pfn: Pfn<Iova>, pages: u64) -> Result<(), IovaError> {
        Err(IovaError::NotAllocated {
            pfn: pfn.get(),
            pages,
        })
    }
    fn on_tick(&mut self, _now: Cycles, _clock: ClockRate) {}
    fn stats(&self) -> IovaStats {
        self.stats
    }
    fn metadata_bytes(&self) -> u64 {
        0
    }
    fn space_end(&self) -> Pfn<Iova> {
        Pfn::new(1 << 52)
    }
    fn name(&self) -> &'static str {
        "none"
    }
}
