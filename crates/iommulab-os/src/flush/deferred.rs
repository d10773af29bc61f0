//! Deferred flushing as in Linux 2.6.25/26 VT-d (S0.6, Linux's drivers/pci/intel-iommu.c,
//! Mark Gross's "PCI: iommu: iotlb flushing"): unmapped ranges go into one array; when the array
//! already holds `entries` (250, the `HIGH_WATER_MARK`) ranges, or `timeout_ms` (10 ms) after
//! the first range entered it, one **global** IOTLB invalidation is issued and every range in
//! the array is freed. The array and the timer sit under one lock (`async_umap_flush_lock`).
//!
//! The stale window: a range stays reachable through a cached IOTLB entry until the next
//! flush, i.e. for up to 250 unmaps or 10 ms.
//!
//! Only `intel_unmap_single` went through the array in 2.6.25/26: `intel_unmap_sg` kept the
//! code from before the patch, a page-selective invalidation of the list's range and
//! `__free_iova` at once, whatever `intel_iommu=strict` said (v2.6.26
//! `drivers/pci/intel-iommu.c`; the split into strict/`add_unmap` for lists came in later
//! kernels). [`Deferred::unmap_sg_at_once`] models that kernel.

use serde::{Deserialize, Serialize};

use super::strict::invalidate_then_free;
use super::{FlushCtx, FlushPolicy, FlushStats, Unmapped};
use crate::dma::backend::MapBackend;
use crate::iova::{IovaAllocator, IovaError};
use iommulab_base::addr::CpuId;
use iommulab_base::clock::{ClockRate, Cycles};
use iommulab_hw::invalidate::InvRequest;

/// Parameters of [`Deferred`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DeferredConfig {
    /// Ranges the array holds before it forces a flush (S0.6: 250).
    pub entries: usize,
    /// Milliseconds of simulated time after the first queued range before the timer flushes
    /// (S0.6: 10 ms).
    pub timeout_ms: u64,
}

impl Default for DeferredConfig {
    fn default() -> Self {
        // S0.6: flush when 250 entries queue up or 10 ms pass.
        Self {
            entries: 250,
            timeout_ms: 10,
        }
    }
}

/// One global array of unmapped ranges, flushed when full or on a timer.
#[derive(Debug, Clone)]
pub struct Deferred {
    config: DeferredConfig,
    /// Pre-sized to `entries`, so queueing never allocates.
    array: Vec<(CpuId, Unmapped)>,
    /// `Some(deadline)` while the 10 ms timer is armed.
    timer: Option<Cycles>,
    timeout: Cycles,
    /// `unmap_sg` invalidates its range and frees it at once instead of queueing it
    /// (2.6.26's `intel_unmap_sg`).
    sg_at_once: bool,
    stats: FlushStats,
    /// Unmaps a global invalidation has covered ([`FlushPolicy::covered_unmaps`]).
    covered: u64,
}

impl Deferred {
    /// A deferred policy on a machine running at `clock` (to turn the timeout into cycles).
    /// An `entries` of 0 is treated as 1 (flush before every queued range).
    pub fn new(config: DeferredConfig, clock: ClockRate) -> Self {
        let entries = config.entries.max(1);
        Self {
            config: DeferredConfig { entries, ..config },
            array: Vec::with_capacity(entries),
            timer: None,
            timeout: clock.cycles_from_ms(config.timeout_ms),
            sg_at_once: false,
            stats: FlushStats::default(),
            covered: 0,
        }
    }

    /// With `at_once`, `unmap_sg` bypasses the array: one page-selective invalidation of the
    /// list's range, then the IOVA goes back to the allocator, as 2.6.26's `intel_unmap_sg`
    /// did (no `async_umap_flush_lock`, no timer). `unmap_single` is queued either way.
    #[must_use]
    pub fn unmap_sg_at_once(mut self, at_once: bool) -> Self {
        self.sg_at_once = at_once;
        self
    }

    /// The parameters in force.
    pub fn config(&self) -> &DeferredConfig {
        &self.config
    }

    fn flush<A: IovaAllocator, B: MapBackend>(
        &mut self,
        ctx: &mut FlushCtx<'_, A, B>,
    ) -> Result<(), IovaError> {
        self.timer = None;
        if self.array.is_empty() {
            return Ok(());
        }
        self.stats.flushes += 1;
        // One global invalidation per IOMMU (2.6.26 `iommu_flush_iotlb_global`); there is one.
        ctx.invalidate(InvRequest::Global);
        // The array holds every unmap not yet covered, in order.
        self.covered += self.array.len() as u64;
        let mut first_err = Ok(());
        for (cpu, r) in self.array.drain(..) {
            self.stats.frees += 1;
            if let Err(e) = ctx.free(cpu, &r)
                && first_err.is_ok()
            {
                first_err = Err(e);
            }
        }
        first_err
    }
}

impl FlushPolicy for Deferred {
    fn on_unmap<A: IovaAllocator, B: MapBackend>(
        &mut self,
        ctx: &mut FlushCtx<'_, A, B>,
        cpu: CpuId,
        range: Unmapped,
    ) -> Result<(), IovaError> {
        self.stats.unmaps += 1;
        self.stats.lock_acquisitions += 1;
        // 2.6.26 `add_unmap`: flush first if the array is already at the high-water mark.
        let flushed = if self.array.len() >= self.config.entries {
            self.stats.flushes_full += 1;
            self.flush(ctx)
        } else {
            Ok(())
        };
        self.array.push((cpu, range));
        self.stats.queue_appends += 1;
        self.stats.max_pending = self.stats.max_pending.max(self.array.len() as u64);
        if self.timer.is_none() {
            self.timer = Some(ctx.now + self.timeout);
            self.stats.timer_arms += 1;
        }
        flushed
    }

    fn on_unmap_sg<A: IovaAllocator, B: MapBackend>(
        &mut self,
        ctx: &mut FlushCtx<'_, A, B>,
        cpu: CpuId,
        range: Unmapped,
    ) -> Result<(), IovaError> {
        if !self.sg_at_once {
            return self.on_unmap(ctx, cpu, range);
        }
        // 2.6.26 `intel_unmap_sg`: `iommu_flush_iotlb_psi` of the range, then `__free_iova`.
        self.stats.sg_flushes_at_once += 1;
        invalidate_then_free(&mut self.stats, ctx, cpu, &range)
    }

    fn on_wrap<A: IovaAllocator, B: MapBackend>(
        &mut self,
        _ctx: &mut FlushCtx<'_, A, B>,
    ) -> Result<(), IovaError> {
        // Ranges are freed only after a flush, so a wrap exposes nothing stale.
        Ok(())
    }

    fn on_tick<A: IovaAllocator, B: MapBackend>(
        &mut self,
        ctx: &mut FlushCtx<'_, A, B>,
    ) -> Result<(), IovaError> {
        match self.timer {
            Some(deadline) if ctx.now >= deadline => {
                self.stats.lock_acquisitions += 1;
                if !self.array.is_empty() {
                    self.stats.flushes_timeout += 1;
                }
                self.flush(ctx)
            }
            _ => Ok(()),
        }
    }

    fn drain<A: IovaAllocator, B: MapBackend>(
        &mut self,
        ctx: &mut FlushCtx<'_, A, B>,
    ) -> Result<(), IovaError> {
        if !self.array.is_empty() {
            self.stats.flushes_drain += 1;
        }
        self.flush(ctx)
    }

    fn pending(&self) -> usize {
        self.array.len()
    }

    fn stats(&self) -> &FlushStats {
        &self.stats
    }

    fn covered_unmaps(&self) -> u64 {
        self.covered
    }

    fn next_deadline(&self) -> Option<Cycles> {
        self.timer
    }

    fn name(&self) -> &'static str {
        "deferred"
    }
}
