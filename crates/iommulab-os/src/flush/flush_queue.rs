//! The modern Linux flush queue (dma-iommu.c since 5.17, iova.c since 4.14; reference
//! §2.1–2.2): one ring per CPU of `entries` slots (256), a domain-selective invalidation
//! ("flush_iotlb_all") when a CPU's ring is full or when a one-shot `timeout_ms` (10 ms)
//! timer fires, and generation counters so that a flush done by one CPU lets every CPU reap
//! the entries it covered.
//!
//! Faithful details: a ring is full when `(tail + 1) & mask == head`, so it holds
//! `entries - 1` ranges; each entry records `flush_start_cnt` when queued and is freed once
//! `flush_finish_cnt` has passed it; before queueing, a CPU first reaps what others' flushes
//! already covered. The flush invalidates every domain with queued entries: the DMA layer keeps
//! one queue set per domain as Linux does ([`FlushPolicy::PER_DOMAIN`]), so that is the
//! queue's own domain; a queue shared by hand between domains flushes each dirty one.
//!
//! Reaped ranges go back to the IOVA allocator (`free_iova_fast`) on the CPU that reaps
//! them, whichever CPU queued them: on the unmap path, the unmapping CPU reaps its own ring;
//! when the timer fires (`fq_flush_timeout`), the CPU running the timer (the one that armed
//! it: `mod_timer` queues on the current CPU) reaps every ring, so every range lands in
//! *its* per-CPU magazines. The timer counts jiffies as Linux's does
//! (`mod_timer(&cookie->fq_timer, jiffies + msecs_to_jiffies(IOVA_FQ_TIMEOUT))`): at `hz` = 250
//! (Debian's `CONFIG_HZ_250`) 10 ms is 3 jiffies, so it fires 8–12 ms after arming, on a
//! tick boundary ([`Jiffies`]); `hz = 0` makes it exact at `timeout_ms`. `drain` (the model's own exhaustion
//! path; Linux has none) reaps on the timer's CPU, CPU 0 when none is armed.

use serde::{Deserialize, Serialize};

use super::{FlushCtx, FlushPolicy, FlushStats, Unmapped};
use crate::dma::backend::MapBackend;
use crate::iova::{IovaAllocator, IovaError};
use iommulab_base::addr::{CpuId, DomainId, Pfn};
use iommulab_base::clock::{ClockRate, Cycles, Jiffies};
use iommulab_hw::invalidate::InvRequest;

/// Parameters of [`FlushQueue`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FlushQueueConfig {
    /// Slots per CPU ring, rounded up to a power of two (`IOVA_DEFAULT_FQ_SIZE` 256).
    pub entries: usize,
    /// The one-shot timer in milliseconds of simulated time (`IOVA_DEFAULT_FQ_TIMEOUT` 10).
    pub timeout_ms: u64,
    /// The kernel's timer frequency (`CONFIG_HZ`): the timer fires on a jiffy boundary
    /// (module docs). 250 is Debian's and the kernel's default; 0 = exactly `timeout_ms`.
    pub hz: u32,
}

impl Default for FlushQueueConfig {
    fn default() -> Self {
        Self {
            entries: 256,
            timeout_ms: 10,
            hz: 250,
        }
    }
}

/// A ring slot. Only the slots from `head` to `tail` hold a queued range; the others keep
/// whatever was last reaped from them (no `Option`: nothing reads a slot outside the queue).
#[derive(Debug, Clone, Copy)]
struct Entry {
    range: Unmapped,
    /// `flush_start_cnt` when queued.
    counter: u64,
}

impl Entry {
    const EMPTY: Self = Self {
        range: Unmapped {
            domain: DomainId::new(0),
            pfn: Pfn::new(0),
            pages: 0,
        },
        counter: 0,
    };
}

#[derive(Debug, Clone)]
struct Ring {
    entries: Box<[Entry]>,
    head: usize,
    tail: usize,
}

impl Ring {
    fn new(size: usize) -> Self {
        Self {
            entries: vec![Entry::EMPTY; size].into_boxed_slice(),
            head: 0,
            tail: 0,
        }
    }
    fn mask(&self) -> usize {
        self.entries.len() - 1
    }
    fn len(&self) -> usize {
        self.tail.wrapping_sub(self.head) & self.mask()
    }
    fn full(&self) -> bool {
        (self.tail + 1) & self.mask() == self.head
    }
}

/// Per-CPU flush queues with a domain flush when full or on a timer.
#[derive(Debug, Clone)]
pub struct FlushQueue {
    config: FlushQueueConfig,
    rings: Vec<Ring>,
    flush_start_cnt: u64,
    flush_finish_cnt: u64,
    /// The deadline and the CPU that armed the timer (and so runs it).
    timer: Option<(Cycles, CpuId)>,
    timeout: Cycles,
    /// The jiffies base when `hz` > 0.
    jiffies: Option<Jiffies>,
    /// Domains with entries queued since the last flush; reserved up front.
    dirty: Vec<DomainId>,
    /// Entries in all rings (kept so the per-unmap path need not sum the rings).
    queued: usize,
    stats: FlushStats,
    /// Unmaps a domain invalidation has covered ([`FlushPolicy::covered_unmaps`]).
    covered: u64,
}

impl FlushQueue {
    /// Rings for `cpus` CPUs on a machine running at `clock`.
    pub fn new(config: FlushQueueConfig, cpus: usize, clock: ClockRate) -> Self {
        let size = config.entries.max(2).next_power_of_two();
        Self {
            config: FlushQueueConfig {
                entries: size,
                ..config
            },
            rings: (0..cpus.max(1)).map(|_| Ring::new(size)).collect(),
            flush_start_cnt: 0,
            flush_finish_cnt: 0,
            timer: None,
            timeout: clock.cycles_from_ms(config.timeout_ms),
            jiffies: Jiffies::new(config.timeout_ms, config.hz, clock),
            dirty: Vec::with_capacity(16),
            queued: 0,
            stats: FlushStats::default(),
            covered: 0,
        }
    }

    /// The parameters in force (entries rounded to a power of two).
    pub fn config(&self) -> &FlushQueueConfig {
        &self.config
    }

    /// `fq_flush_iotlb`: one domain invalidation per dirty domain, bracketed by the counters.
    fn flush_iotlb<A: IovaAllocator, B: MapBackend>(&mut self, ctx: &mut FlushCtx<'_, A, B>) {
        self.flush_start_cnt += 1;
        self.stats.flushes += 1;
        // Every range queued so far, on any CPU's ring: one append per unmap, and an unmap
        // that finds its ring full flushes before it appends.
        self.covered = self.stats.queue_appends;
        for &d in &self.dirty {
            ctx.invalidate(InvRequest::Domain(d));
        }
        self.dirty.clear();
        self.flush_finish_cnt += 1;
    }

    /// `fq_ring_free_locked`: frees the entries of ring `i` that a finished flush covered,
    /// into the allocator on behalf of `on`, the CPU doing it (`free_iova_fast` puts them
    /// in the current CPU's magazines).
    #[inline]
    fn reap<A: IovaAllocator, B: MapBackend>(
        &mut self,
        i: usize,
        on: CpuId,
        ctx: &mut FlushCtx<'_, A, B>,
    ) -> Result<(), IovaError> {
        // Most unmaps find the oldest entry still waiting for a flush: that check is inline,
        // the freeing out of line (as a call, the check cost a third of the queue's work).
        let ring = &self.rings[i];
        if ring.head == ring.tail || ring.entries[ring.head].counter >= self.flush_finish_cnt {
            return Ok(());
        }
        self.reap_covered(i, on, ctx)
    }

    /// [`reap`](Self::reap) once its first entry is covered.
    #[inline(never)]
    fn reap_covered<A: IovaAllocator, B: MapBackend>(
        &mut self,
        i: usize,
        on: CpuId,
        ctx: &mut FlushCtx<'_, A, B>,
    ) -> Result<(), IovaError> {
        let finish = self.flush_finish_cnt;
        let ring = &mut self.rings[i];
        let mask = ring.mask();
        let mut result = Ok(());
        let mut reaped = 0;
        while ring.head != ring.tail {
            let e = ring.entries[ring.head];
            if e.counter >= finish {
                break;
            }
            if let Err(err) = ctx.free(on, &e.range)
                && result.is_ok()
            {
                result = Err(err);
            }
            ring.head = (ring.head + 1) & mask;
            reaped += 1;
        }
        // Counted once per reap, not per entry.
        self.stats.frees += reaped as u64;
        self.queued -= reaped;
        result
    }

    /// `fq_flush_timeout`: one flush, then every ring reaped on CPU `on`.
    fn flush_all<A: IovaAllocator, B: MapBackend>(
        &mut self,
        on: CpuId,
        ctx: &mut FlushCtx<'_, A, B>,
    ) -> Result<(), IovaError> {
        self.timer = None;
        if self.queued == 0 {
            return Ok(());
        }
        self.flush_iotlb(ctx);
        let mut result = Ok(());
        for i in 0..self.rings.len() {
            self.stats.lock_acquisitions += 1;
            let r = self.reap(i, on, ctx);
            if result.is_ok() {
                result = r;
            }
        }
        result
    }

    fn total_pending(&self) -> usize {
        debug_assert_eq!(self.queued, self.rings.iter().map(Ring::len).sum::<usize>());
        self.queued
    }
}

impl FlushPolicy for FlushQueue {
    // `iommu_dma_init_fq`: the queue belongs to the domain's cookie.
    const PER_DOMAIN: bool = true;

    fn on_unmap<A: IovaAllocator, B: MapBackend>(
        &mut self,
        ctx: &mut FlushCtx<'_, A, B>,
        cpu: CpuId,
        range: Unmapped,
    ) -> Result<(), IovaError> {
        self.stats.unmaps += 1;
        self.stats.lock_acquisitions += 1;
        // A ring per CPU; a CPU beyond them shares one (a compare, not a division, per unmap).
        let (c, n) = (cpu.index(), self.rings.len());
        let i = if c < n { c } else { c % n };
        let mut result = self.reap(i, cpu, ctx);
        if self.rings[i].full() {
            self.stats.flushes_full += 1;
            self.flush_iotlb(ctx);
            let r = self.reap(i, cpu, ctx);
            if result.is_ok() {
                result = r;
            }
        }
        let counter = self.flush_start_cnt;
        let ring = &mut self.rings[i];
        let tail = ring.tail;
        ring.entries[tail] = Entry { range, counter };
        ring.tail = (tail + 1) & ring.mask();
        self.queued += 1;
        self.stats.queue_appends += 1;
        if !self.dirty.contains(&range.domain) {
            self.dirty.push(range.domain);
        }
        let pending = self.total_pending() as u64;
        self.stats.max_pending = self.stats.max_pending.max(pending);
        if self.timer.is_none() {
            let at = match self.jiffies {
                Some(j) => j.deadline(ctx.now),
                None => ctx.now + self.timeout,
            };
            self.timer = Some((at, cpu));
            self.stats.timer_arms += 1;
        }
        result
    }

    fn on_wrap<A: IovaAllocator, B: MapBackend>(
        &mut self,
        _ctx: &mut FlushCtx<'_, A, B>,
    ) -> Result<(), IovaError> {
        Ok(())
    }

    fn on_tick<A: IovaAllocator, B: MapBackend>(
        &mut self,
        ctx: &mut FlushCtx<'_, A, B>,
    ) -> Result<(), IovaError> {
        match self.timer {
            Some((deadline, on)) if ctx.now >= deadline => {
                if self.total_pending() > 0 {
                    self.stats.flushes_timeout += 1;
                }
                self.flush_all(on, ctx)
            }
            _ => Ok(()),
        }
    }

    fn drain<A: IovaAllocator, B: MapBackend>(
        &mut self,
        ctx: &mut FlushCtx<'_, A, B>,
    ) -> Result<(), IovaError> {
        if self.total_pending() > 0 {
            self.stats.flushes_drain += 1;
        }
        let on = self.timer.map_or(CpuId::new(0), |(_, c)| c);
        self.flush_all(on, ctx)
    }

    fn pending(&self) -> usize {
        self.total_pending()
    }

    fn stats(&self) -> &FlushStats {
        &self.stats
    }

    fn covered_unmaps(&self) -> u64 {
        self.covered
    }

    fn next_deadline(&self) -> Option<Cycles> {
        self.timer.map(|(at, _)| at)
    }

    fn name(&self) -> &'static str {
        "flush_queue"
    }
}
