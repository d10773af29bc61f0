//! Per-lap flushing (S0.6, S2.4): the policy of next-fit bitmap allocators (Calgary, GART,
//! and the "bitmap" configuration of S0.7). Unmapped ranges go back to the bitmap at once,
//! because the bitmap does not hand out anything freed in the current lap before it wraps;
//! when the allocator wraps to the bottom, one global invalidation makes every stale entry
//! from the previous lap disappear before the first reused range is mapped.
//!
//! It is only correct with an allocator that keeps that promise: the plain bitmap. The
//! experiment builder refuses per-lap over the red-black tree (which never wraps, so it
//! would never flush) or over magazines (which re-hand freed ranges at once).

use super::{FlushCtx, FlushPolicy, FlushStats, Unmapped};
use crate::dma::backend::MapBackend;
use crate::iova::{IovaAllocator, IovaError};
use iommulab_base::addr::CpuId;
use iommulab_base::clock::Cycles;
use iommulab_hw::invalidate::InvRequest;

/// Free at once; invalidate everything when the allocator wraps.
#[derive(Debug, Default, Clone)]
pub struct PerLap {
    stats: FlushStats,
    /// Ranges freed since the last wrap flush that might still be cached: only for
    /// `max_pending`, the size of the stale window.
    since_flush: u64,
    /// Unmaps a wrap (or drain) flush has covered ([`FlushPolicy::covered_unmaps`]).
    covered: u64,
}

impl PerLap {
    /// A per-lap policy.
    pub fn new() -> Self {
        Self::default()
    }
}

impl FlushPolicy for PerLap {
    fn on_unmap<A: IovaAllocator, B: MapBackend>(
        &mut self,
        ctx: &mut FlushCtx<'_, A, B>,
        cpu: CpuId,
        range: Unmapped,
    ) -> Result<(), IovaError> {
        self.stats.unmaps += 1;
        self.stats.frees += 1;
        self.since_flush += 1;
        self.stats.max_pending = self.stats.max_pending.max(self.since_flush);
        ctx.free(cpu, &range)
    }

    fn on_wrap<A: IovaAllocator, B: MapBackend>(
        &mut self,
        ctx: &mut FlushCtx<'_, A, B>,
    ) -> Result<(), IovaError> {
        // S0.6: one flush per lap of the IOVA space.
        self.stats.flushes += 1;
        self.stats.flushes_wrap += 1;
        self.since_flush = 0;
        ctx.invalidate(InvRequest::Global);
        self.covered = self.stats.unmaps;
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
        ctx: &mut FlushCtx<'_, A, B>,
    ) -> Result<(), IovaError> {
        if self.since_flush > 0 {
            self.stats.flushes += 1;
            self.stats.flushes_drain += 1;
            self.since_flush = 0;
            ctx.invalidate(InvRequest::Global);
            self.covered = self.stats.unmaps;
        }
        Ok(())
    }

    fn pending(&self) -> usize {
        // Nothing waits: freed ranges are already back in the bitmap.
        0
    }

    fn stats(&self) -> &FlushStats {
        &self.stats
    }

    fn covered_unmaps(&self) -> u64 {
        self.covered
    }

    fn next_deadline(&self) -> Option<Cycles> {
        None
    }

    fn name(&self) -> &'static str {
        "per_lap"
    }
}
