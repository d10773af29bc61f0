//! Strict flushing (S0.6, S0.7 "strict"): every unmap is followed at once by a page-selective
//! IOTLB invalidation covering the range, and only then is the IOVA freed. No stale window at
//! all, at the price of one invalidation (and its wait) per unmap. Linux: `intel_iommu=strict`,
//! `iommu.strict=1`.

use super::{FlushCtx, FlushPolicy, FlushStats, Unmapped};
use crate::dma::backend::MapBackend;
use crate::iova::{IovaAllocator, IovaError};
use iommulab_base::addr::CpuId;
use iommulab_base::clock::Cycles;
use iommulab_hw::invalidate::InvRequest;

/// Invalidate on every unmap, then free.
#[derive(Debug, Default, Clone)]
pub struct Strict {
    stats: FlushStats,
}

impl Strict {
    /// A strict policy.
    pub fn new() -> Self {
        Self::default()
    }
}

/// The strict unmap: a page-selective invalidation covering `range`, then its free. Also
/// 2.6.26's `intel_unmap_sg` under the deferred policy, which flushed a list at once.
pub(crate) fn invalidate_then_free<A: IovaAllocator, B: MapBackend>(
    stats: &mut FlushStats,
    ctx: &mut FlushCtx<'_, A, B>,
    cpu: CpuId,
    range: &Unmapped,
) -> Result<(), IovaError> {
    stats.unmaps += 1;
    stats.flushes += 1;
    ctx.invalidate(InvRequest::covering(range.domain, range.pfn, range.pages));
    stats.frees += 1;
    ctx.free(cpu, range)
}

impl FlushPolicy for Strict {
    fn on_unmap<A: IovaAllocator, B: MapBackend>(
        &mut self,
        ctx: &mut FlushCtx<'_, A, B>,
        cpu: CpuId,
        range: Unmapped,
    ) -> Result<(), IovaError> {
        invalidate_then_free(&mut self.stats, ctx, cpu, &range)
    }

    fn on_wrap<A: IovaAllocator, B: MapBackend>(
        &mut self,
        _ctx: &mut FlushCtx<'_, A, B>,
    ) -> Result<(), IovaError> {
        // Nothing is ever stale: every unmap was already invalidated.
        Ok(())
    }

    fn on_tick<A: IovaAllocator, B: MapBackend>(
        &mut self,
        _ctx: &mut FlushCtx<'_, A, B>,
    ) -> Result<(), IovaError> {
        Ok(())
    }

    fn drain<A: IovaAllocator, B: MapBackend>(
        &mut self,
        _ctx: &mut FlushCtx<'_, A, B>,
    ) -> Result<(), IovaError> {
        Ok(())
    }

    fn pending(&self) -> usize {
        0
    }

    fn stats(&self) -> &FlushStats {
        &self.stats
    }

    fn covered_unmaps(&self) -> u64 {
        // Each unmap is invalidated before it returns.
        self.stats.unmaps
    }

    fn next_deadline(&self) -> Option<Cycles> {
        None
    }

    fn name(&self) -> &'static str {
        "strict"
    }
}
