//! IOTLB flush policies (S0.6): when to invalidate the IOTLB after an unmap, and when the
//! unmapped IOVA may go back to the allocator.
//!
//! - [`strict::Strict`]: page-selective invalidation at every unmap, then free (S0.6, S0.7).
//! - [`deferred::Deferred`]: Linux 2.6.25/26 VT-d: queue up to 250 unmapped ranges, one
//!   global invalidation when the array is full or 10 ms have passed, then free them all.
//! - [`per_lap::PerLap`]: the bitmap allocators' policy: free at once, flush the whole IOTLB
//!   when the allocator wraps (nothing freed in a lap is reused before the lap ends).
//! - [`flush_queue::FlushQueue`]: Linux ≥ 4.14 dma-iommu: per-CPU rings of 256 entries, a
//!   domain-selective invalidation when a ring fills or a 10 ms timer fires.
//!
//! **The invariant every policy keeps** (tested for all of them in `tests/flush_invariant.rs`):
//! an IOVA is never returned to the allocator while a stale IOTLB entry for it may exist. A
//! policy returns a range to the allocator only after an invalidation that covers it has
//! completed (or, for [`per_lap::PerLap`], relies on the allocator not reusing it before the
//! wrap, whose flush the DMA layer triggers before the new range is mapped).

pub mod deferred;
pub mod flush_queue;
pub mod per_lap;
pub mod strict;

use serde::{Deserialize, Serialize};

use crate::dma::backend::MapBackend;
use crate::iova::{IovaAllocator, IovaError};
use iommulab_base::addr::{CpuId, DomainId, Iova, Pfn};
use iommulab_base::clock::Cycles;
use iommulab_hw::invalidate::InvRequest;

pub use deferred::{Deferred, DeferredConfig};
pub use flush_queue::{FlushQueue, FlushQueueConfig};
pub use per_lap::PerLap;
pub use strict::Strict;

/// A range whose PTEs have just been cleared and whose IOVA the policy now owns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Unmapped {
    /// The domain (address space) the range belonged to.
    pub domain: DomainId,
    /// First I/O page.
    pub pfn: Pfn<Iova>,
    /// Length in pages (as allocated).
    pub pages: u64,
}

/// Counters of a flush policy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlushStats {
    /// Unmaps the policy was told about.
    pub unmaps: u64,
    /// Invalidation rounds the policy issued (each is one or more descriptors + one wait).
    pub flushes: u64,
    /// Flushes because a queue or array was full.
    pub flushes_full: u64,
    /// Flushes because the timer expired.
    pub flushes_timeout: u64,
    /// Flushes because the allocator wrapped (per-lap).
    pub flushes_wrap: u64,
    /// Flushes because the policy was drained (device detach, end of run).
    pub flushes_drain: u64,
    /// IOVA ranges returned to the allocator.
    pub frees: u64,
    /// Most ranges waiting for a flush at once.
    pub max_pending: u64,
    /// Entries appended to a deferred array or flush queue (modeled software cost).
    pub queue_appends: u64,
    /// Times the flush timer was armed (modeled software cost).
    pub timer_arms: u64,
    /// Lock hand-offs a kernel would make on this path (modeled software cost).
    pub lock_acquisitions: u64,
    /// Page-selective invalidations issued at once for an `unmap_sg`, bypassing the policy's
    /// queue (2.6.26's `intel_unmap_sg`; counted in `flushes` too). Left out of JSON when 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub sg_flushes_at_once: u64,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

impl FlushStats {
    /// Adds `other` into `self`; `max_pending` takes the max.
    pub fn merge(&mut self, other: &Self) {
        self.unmaps += other.unmaps;
        self.flushes += other.flushes;
        self.flushes_full += other.flushes_full;
        self.flushes_timeout += other.flushes_timeout;
        self.flushes_wrap += other.flushes_wrap;
        self.flushes_drain += other.flushes_drain;
        self.frees += other.frees;
        self.max_pending = self.max_pending.max(other.max_pending);
        self.queue_appends += other.queue_appends;
        self.timer_arms += other.timer_arms;
        self.lock_acquisitions += other.lock_acquisitions;
        self.sg_flushes_at_once += other.sg_flushes_at_once;
    }
}

/// What a policy may touch when it acts: the map backend (to invalidate the remapping
/// unit's cache) and the domains' allocators (to free).
#[derive(Debug)]
pub struct FlushCtx<'a, A, B> {
    /// The backend whose remapping unit's translation cache the policy invalidates.
    pub backend: &'a mut B,
    /// One allocator per domain, domain `d`'s at index `d − 1`: Linux keeps an `iova_domain`
    /// in every DMA domain's cookie (`iommu_dma_init_domain`), so a range goes back to the
    /// allocator of the domain it was unmapped from.
    pub iovas: &'a mut [A],
    /// The modeled time now.
    pub now: Cycles,
}

impl<A: IovaAllocator, B> FlushCtx<'_, A, B> {
    /// Returns `range` to its domain's allocator on behalf of `cpu`.
    #[inline]
    pub fn free(&mut self, cpu: CpuId, range: &Unmapped) -> Result<(), IovaError> {
        let i = usize::from(range.domain.get()).wrapping_sub(1);
        match self.iovas.get_mut(i) {
            Some(a) => a.free(cpu, range.pfn, range.pages),
            None => Err(IovaError::NoSuchDomain {
                domain: range.domain.get(),
            }),
        }
    }
}

impl<A, B: MapBackend> FlushCtx<'_, A, B> {
    /// Invalidates at least what `req` covers: the narrowest request the unit can perform
    /// ([`iommulab_hw::InvalidationCaps::widen`]; a page request on a unit that can only
    /// flush its whole cache becomes a global flush).
    #[inline]
    pub fn invalidate(&mut self, req: InvRequest) {
        let req = self.backend.caps().widen(req);
        self.backend.invalidate(&[req]);
    }
}

/// Decides when to invalidate the IOTLB and when freed IOVAs may return to the allocator.
///
/// Invariant (see the module doc): an IOVA is never returned to the allocator while a
/// stale IOTLB entry for it may exist.
pub trait FlushPolicy: Clone {
    /// Whether a kernel keeps one instance of this policy per DMA domain (Linux ≥ 4.14's
    /// flush queue lives in the domain's cookie) rather than one for the whole IOMMU
    /// (2.6.26's deferred array is global: `deferred_flush`, one list for every domain). The
    /// DMA layer clones the policy per domain when this is `true`.
    const PER_DOMAIN: bool = false;

    /// The PTEs of `range` were just cleared on `cpu`; the policy now owns its IOVA.
    fn on_unmap<A: IovaAllocator, B: MapBackend>(
        &mut self,
        ctx: &mut FlushCtx<'_, A, B>,
        cpu: CpuId,
        range: Unmapped,
    ) -> Result<(), IovaError>;

    /// The PTEs of a scatter-gather list's range were just cleared (`dma_unmap_sg`); the
    /// policy now owns its IOVA. The same as [`FlushPolicy::on_unmap`] unless a kernel routed
    /// `unmap_sg` differently (2.6.26: see [`Deferred::unmap_sg_at_once`]).
    #[inline]
    fn on_unmap_sg<A: IovaAllocator, B: MapBackend>(
        &mut self,
        ctx: &mut FlushCtx<'_, A, B>,
        cpu: CpuId,
        range: Unmapped,
    ) -> Result<(), IovaError> {
        self.on_unmap(ctx, cpu, range)
    }

    /// The allocator wrapped during the allocation that is about to be mapped.
    fn on_wrap<A: IovaAllocator, B: MapBackend>(
        &mut self,
        ctx: &mut FlushCtx<'_, A, B>,
    ) -> Result<(), IovaError>;

    /// Time passed; timers that expired at or before `ctx.now` fire.
    fn on_tick<A: IovaAllocator, B: MapBackend>(
        &mut self,
        ctx: &mut FlushCtx<'_, A, B>,
    ) -> Result<(), IovaError>;

    /// Flushes and frees everything pending (detach, end of run, or an exhausted allocator).
    fn drain<A: IovaAllocator, B: MapBackend>(
        &mut self,
        ctx: &mut FlushCtx<'_, A, B>,
    ) -> Result<(), IovaError>;

    /// Ranges waiting for a flush now.
    fn pending(&self) -> usize;

    /// The counters so far.
    fn stats(&self) -> &FlushStats;

    /// How many of the unmaps so far (counted as [`FlushStats::unmaps`] counts them) an
    /// invalidation has covered: always a prefix of them, since every policy's invalidation
    /// covers at least every range it held. The time from an unmap to the moment this
    /// passes it is the unmap's exposure window (what a device may still reach through a
    /// stale IOTLB entry), read from the policy's own bookkeeping, with no probe.
    fn covered_unmaps(&self) -> u64;

    /// When the policy's timer fires, if one is armed.
    fn next_deadline(&self) -> Option<Cycles>;

    /// A short name for tables and JSON.
    fn name(&self) -> &'static str;
}

/// Which flush policy a configuration asks for, with its parameters (the configuration
/// boundary).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum FlushConfig {
    /// [`Strict`].
    Strict,
    /// [`Deferred`].
    Deferred(DeferredConfig),
    /// [`PerLap`].
    PerLap,
    /// [`FlushQueue`].
    FlushQueue(FlushQueueConfig),
}

impl FlushConfig {
    /// Config/CLI name of the policy.
    pub const fn name(&self) -> &'static str {
        match self {
            FlushConfig::Strict => "strict",
            FlushConfig::Deferred(_) => "deferred",
            FlushConfig::PerLap => "per_lap",
            FlushConfig::FlushQueue(_) => "flush_queue",
        }
    }
}
