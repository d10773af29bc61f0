//! The runner: drives a [`Workload`] through a [`DmaApi`] and keeps the two clocks.
//!
//! This is the only module that reads a wall clock. The modeled clock is derived
//! from counters: `io_path × I/Os + IOMMU CPU cycles + modeled kernel software`, and it
//! drives the flush timers, so a run is deterministic for a given configuration and seed.

use std::time::Instant;

use crate::addr::{Access, Bdf, CpuId, DmaDirection, Hpa, Iova, PAGE_4K};
use crate::clock::Cycles;
use crate::device::{AccessOutcome, DeviceMode};
use crate::dma::{DeviceHandle, DmaApi, DmaError, Native, SgEntry, Translation};
use crate::error::Error;
use crate::flush::{FlushPolicy, FlushStats};
use crate::hw::cost::CostModel;
use crate::hw::cpu_cache::{CpuCache, CpuCacheConfig, CpuCacheStats};
use crate::hw::unit::RemapUnit;
use crate::iova::{IovaAllocator, IovaStats};
use crate::workload::{DmaOp, OpSink, Segment, Workload};

use super::config::SoftwareClock;
use super::exposure::{self, Accounting};
use super::progress::{PROGRESS_EVERY, Progress};
use super::result::{ComponentStats, RunResult};

/// The modeled kernel-software cycles implied by the counters so far: every lock hand-off,
/// slab allocation, tree visit, bitmap word, magazine operation, queue append and timer arm
/// a kernel would make, at the preset's price, plus a fixed cost per DMA-API call.
pub fn modeled_software(
    cost: &CostModel,
    dma_calls: u64,
    iova: &IovaStats,
    flush: &FlushStats,
) -> Cycles {
    modeled_software_cached(cost, dma_calls, iova, flush, None)
}

/// [`modeled_software`], with the allocator's metadata accesses priced by the CPU cache
/// model when there is one: each logged line access at `l1_hit`, `l2_hit` or
/// `memory_access` by the level that served it, instead of the flat `tree_visit` and
/// `bitmap_word` prices.
pub fn modeled_software_cached(
    cost: &CostModel,
    dma_calls: u64,
    iova: &IovaStats,
    flush: &FlushStats,
    cache: Option<&CpuCacheStats>,
) -> Cycles {
    Cycles::new(
        dma_calls * cost.dma_api_call
            + allocator_cycles(cost, iova, cache.is_none())
            + flush_cycles(cost, flush)
            + cache.map_or(0, |c| cache_cycles(cost, c)),
    )
}

/// The kernel work an allocator's counters imply: locks, slab objects, tree rebalancing and
/// magazine operations, and its metadata accesses at the flat prices when `flat_metadata`
/// (without the CPU cache model).
#[inline(always)]
fn allocator_cycles(cost: &CostModel, iova: &IovaStats, flat_metadata: bool) -> u64 {
    let metadata = if flat_metadata {
        iova.tree_visits * cost.tree_visit + iova.bitmap_words * cost.bitmap_word
    } else {
        0
    };
    iova.lock_acquisitions * cost.lock_handoff
        + iova.slab_allocs * cost.slab_alloc
        + iova.slab_frees * cost.slab_free
        + metadata
        + iova.tree_rebalances * cost.tree_rebalance
        + iova.magazine_ops * cost.magazine_op
}

/// The kernel work a flush policy's counters imply: its locks, queue appends and timers.
#[inline(always)]
fn flush_cycles(cost: &CostModel, flush: &FlushStats) -> u64 {
    flush.lock_acquisitions * cost.lock_handoff
        + flush.queue_appends * cost.queue_append
        + flush.timer_arms * cost.timer_arm
}

/// The allocator's metadata line accesses, priced by the cache level that served each.
#[inline(always)]
fn cache_cycles(cost: &CostModel, c: &CpuCacheStats) -> u64 {
    c.l1_hits * cost.l1_hit + c.l2_hits * cost.l2_hit + c.misses * cost.memory_access
}

/// Labels that go into the result but do not change the run.
#[derive(Debug, Clone)]
pub struct RunLabels {
    /// Configuration label.
    pub config: String,
    /// Cost preset name.
    pub cost_preset: String,
    /// Workload seed.
    pub seed: u64,
    /// Bytes per I/O.
    pub io_size: u64,
    /// I/Os in flight.
    pub outstanding: u32,
    /// CPUs.
    pub cpus: u16,
    /// Device touches buffers.
    pub touch: bool,
}

/// What the runner remembers of a mapped slot.
#[derive(Clone, Debug, Default)]
struct Slot {
    live: bool,
    device: u16,
    /// The single mapping's DMA address and length (unused for scatter-gather).
    addr: Iova,
    len: u64,
    dir: Option<DmaDirection>,
    /// The scatter-gather list, if the slot was mapped with `map_sg`; its capacity is kept
    /// when the slot is reused, so steady state does not allocate.
    sg: Vec<SgEntry>,
    is_sg: bool,
}

const fn access_for(dir: DmaDirection) -> Access {
    match dir {
        DmaDirection::FromDevice => Access::Write,
        DmaDirection::ToDevice | DmaDirection::Bidirectional => Access::Read,
    }
}

fn slot_mut(slots: &mut Vec<Slot>, slot: u32) -> &mut Slot {
    let i = slot as usize;
    if i >= slots.len() {
        slots.resize_with(i + 1, Slot::default);
    }
    &mut slots[i]
}

/// Runs `workload` through `api` and returns the result.
///
/// `progress(done, total)` is called every [`PROGRESS_EVERY`] I/Os; when it says `Break`
/// the run ends with [`Error::Cancelled`]. With `stop_at`, the run ends at the first I/O
/// completed at or after that modeled time.
#[allow(clippy::too_many_arguments)]
pub fn run<A, F, U, W>(
    api: &mut DmaApi<A, F, Native<U>>,
    workload: &mut W,
    device: DeviceMode,
    software_clock: SoftwareClock,
    labels: RunLabels,
    stop_at: Option<Cycles>,
    cpu_cache: Option<CpuCacheConfig>,
    progress: &mut Progress<'_>,
    acct: Option<&mut Accounting>,
) -> Result<RunResult, Error>
where
    A: IovaAllocator,
    F: FlushPolicy,
    U: RemapUnit,
    // Bare metal: the buffers are host-physical (a guest's go through `InGuest`).
    W: Workload<Phys = Hpa>,
{
    let cost = *api.unit().cost();
    let n_devs = workload.devices().max(1);
    if n_devs > usize::from(crate::workload::MAX_DEVICES) {
        // Past the last bus two devices would share a requester ID (and one's mappings).
        return Err(crate::experiment::ConfigError::Invalid {
            key: "workload.devices".into(),
            value: n_devs.to_string(),
            expected: format!(
                "at most {} (31 devices on each of 256 buses)",
                crate::workload::MAX_DEVICES
            ),
        }
        .into());
    }
    let mut devs: Vec<DeviceHandle> = Vec::with_capacity(n_devs);
    for i in 0..n_devs {
        // Device i sits at 00:(i+1).0, then further buses when a bus is full.
        let n = u16::try_from(i).unwrap_or(u16::MAX);
        let bus = u8::try_from(n / 31).unwrap_or(u8::MAX);
        let dev = u8::try_from(n % 31 + 1).unwrap_or(1);
        let bdf = Bdf::new(bus, dev, 0).unwrap_or_default();
        devs.push(api.attach(bdf)?);
    }
    let mut slots: Vec<Slot> = Vec::new();
    slots.resize_with(workload.slots(), Slot::default);
    let total = workload.total_ios().unwrap_or(0);
    let iommu_on = api.config().translation == Translation::Iommu;
    // The CPU cache model, when asked for: the allocator logs the lines it touches and the
    // runner plays them, then the rest of the I/O path, through the caches after each I/O.
    let mut cache = match cpu_cache {
        Some(c) if iommu_on => {
            Some(
                CpuCache::new(c).map_err(|e| crate::experiment::ConfigError::Invalid {
                    key: "hardware.cpu_cache".into(),
                    value: format!("{c:?}"),
                    expected: e.to_string(),
                })?,
            )
        }
        _ => None,
    };
    for a in api.allocators_mut() {
        a.log_touched_lines(cache.is_some());
    }
    // An allocator without a line model keeps its flat prices.
    if !api.allocators().iter().any(IovaAllocator::logs_lines) {
        cache = None;
    }

    let start = Instant::now();
    let mut driver = Driver {
        api,
        devs: &devs,
        slots,
        device,
        cost,
        iommu_on,
        ios: 0,
        access: AccessOutcome::default(),
        workload_now: Cycles::ZERO,
        cache,
        total,
        stop_at,
        progress,
        stopped: false,
        error: None,
        acct,
    };
    // The workload hands its ops to the driver in a loop of its own (a generator makes
    // them there, a trace translates its events there), so no op is returned through a call.
    workload.for_each_op(&mut driver)?;
    let Driver {
        api,
        mut slots,
        ios,
        access,
        mut cache,
        progress,
        error,
        mut acct,
        ..
    } = driver;
    if let Some(e) = error {
        return Err(e);
    }
    // A run cut short (or a workload that leaves buffers mapped) still has I/Os in flight:
    // complete them, so every IOVA comes back.
    for s in slots.iter_mut().filter(|s| s.live) {
        s.live = false;
        let dev = device_of(&devs, s.device);
        let dir = s.dir.unwrap_or(DmaDirection::Bidirectional);
        if s.is_sg {
            api.unmap_sg(dev, CpuId::new(0), &s.sg, dir)?;
        } else {
            api.unmap_single(dev, CpuId::new(0), s.addr, s.len, dir)?;
        }
    }
    // Drain what is pending, so every IOVA is back and every stale window closed. (The
    // mappings still live at the trace's end are not I/Os of the trace: the accounting
    // starts after them, and charges the drain to the devices whose ranges it covers.)
    let before = acct
        .as_ref()
        .map(|_| exposure::snapshot(api, modeled_now(api, &cost, 0, iommu_on, None)));
    if let Some(a) = acct.as_deref_mut() {
        domain_cycles(api, &cost, cache.is_none(), &mut a.domain_before);
    }
    api.drain()?;
    if let (Some(a), Some(b)) = (acct, before) {
        a.before(b);
        domain_cycles(api, &cost, cache.is_none(), &mut a.domain_after);
        let now = exposure::snapshot(api, modeled_now(api, &cost, 0, iommu_on, None));
        a.after(api, now, None, 0);
    }
    if let Some(c) = cache.as_mut() {
        play_touched_lines(api, c);
    }
    let wall = start.elapsed().as_secs_f64();
    // The run is over: the last report's answer changes nothing.
    let _ = progress(ios, total);

    Ok(summarise(
        api,
        &cost,
        ios,
        wall,
        access,
        device,
        software_clock,
        labels,
        iommu_on,
        cache.as_ref().map(|c| *c.stats()),
    ))
}

/// The handle of the workload's device `d`; workloads with more devices than the run share
/// them round-robin (a compare, not a division, on the per-op path).
#[inline]
fn device_of(devs: &[DeviceHandle], d: u16) -> DeviceHandle {
    let (i, n) = (usize::from(d), devs.len());
    devs[if i < n { i } else { i % n }]
}

/// The run's state between ops: the sink the workload hands each op to.
struct Driver<'a, A: IovaAllocator, F: FlushPolicy, U: RemapUnit> {
    api: &'a mut DmaApi<A, F, Native<U>>,
    devs: &'a [DeviceHandle],
    slots: Vec<Slot>,
    device: DeviceMode,
    cost: CostModel,
    iommu_on: bool,
    /// I/Os completed (unmaps).
    ios: u64,
    access: AccessOutcome,
    /// The workload's own clock (trace timestamps), in cycles; timers fire by the later of
    /// it and the modeled clock.
    workload_now: Cycles,
    cache: Option<CpuCache>,
    total: u64,
    stop_at: Option<Cycles>,
    progress: &'a mut Progress<'a>,
    /// The run ends: the end time was reached, or an op failed (`error`).
    stopped: bool,
    error: Option<Error>,
    /// Per-device accounting, when asked for ([`Accounting`]).
    acct: Option<&'a mut Accounting>,
}

impl<A: IovaAllocator, F: FlushPolicy, U: RemapUnit> OpSink<Hpa> for Driver<'_, A, F, U> {
    #[inline(always)]
    fn op(&mut self, op: DmaOp, sg: &[Segment]) {
        if self.stopped {
            return;
        }
        let r = if self.acct.is_some() {
            self.step_accounted(op, sg)
        } else {
            self.step(op, sg)
        };
        if let Err(e) = r {
            self.error = Some(e);
            self.stopped = true;
        }
    }

    #[inline(always)]
    fn stopped(&self) -> bool {
        self.stopped
    }
}

impl<A: IovaAllocator, F: FlushPolicy, U: RemapUnit> Driver<'_, A, F, U> {
    /// Runs one op; sets `stopped` at the end time.
    #[inline(always)]
    fn step(&mut self, op: DmaOp, sg: &[Segment]) -> Result<(), Error> {
        let api = &mut *self.api;
        match op {
            DmaOp::Map {
                slot,
                cpu,
                device: d,
                phys,
                len,
                dir,
                ..
            } => {
                let dev = device_of(self.devs, d);
                let addr = api.map_single(dev, cpu, phys, len, dir)?;
                if let DeviceMode::Malicious { .. } = self.device {
                    // Read what the sub-page mapping exposes: the last byte of the page.
                    let last = Iova::new(addr.align_down(PAGE_4K).get() | PAGE_4K.mask());
                    self.access
                        .merge(&api.device_access(dev, last, 1, access_for(dir))?);
                }
                let s = slot_mut(&mut self.slots, slot);
                s.live = true;
                s.device = d;
                s.addr = addr;
                s.len = len;
                s.dir = Some(dir);
                s.is_sg = false;
            }
            DmaOp::MapSg {
                slot,
                cpu,
                device: d,
                dir,
            } => {
                let dev = device_of(self.devs, d);
                let s = slot_mut(&mut self.slots, slot);
                s.sg.clear();
                s.sg.extend(sg.iter().map(|g| SgEntry {
                    phys: g.phys,
                    len: g.len,
                    dma: Iova::default(),
                }));
                api.map_sg(dev, cpu, &mut s.sg, dir)?;
                s.live = true;
                s.device = d;
                s.dir = Some(dir);
                s.is_sg = true;
            }
            DmaOp::Access { slot, access: a } => {
                let Some(s) = self.slots.get(slot as usize).filter(|s| s.live) else {
                    return Ok(());
                };
                let dev = device_of(self.devs, s.device);
                if s.is_sg {
                    for e in &s.sg {
                        self.access.merge(&api.device_access(dev, e.dma, e.len, a)?);
                    }
                } else {
                    self.access
                        .merge(&api.device_access(dev, s.addr, s.len, a)?);
                }
            }
            DmaOp::Unmap { slot, cpu } => {
                let Some(s) = self.slots.get_mut(slot as usize).filter(|s| s.live) else {
                    return Ok(());
                };
                s.live = false;
                let dev = device_of(self.devs, s.device);
                let dir = s.dir.unwrap_or(DmaDirection::Bidirectional);
                if s.is_sg {
                    api.unmap_sg(dev, cpu, &s.sg, dir)?;
                } else {
                    api.unmap_single(dev, cpu, s.addr, s.len, dir)?;
                }
                self.ios += 1;
                if let DeviceMode::Malicious { neighbours } = self.device {
                    if s.is_sg {
                        for e in &s.sg {
                            probe_after_unmap(api, dev, e.dma, dir, neighbours, &mut self.access)?;
                        }
                    } else {
                        probe_after_unmap(api, dev, s.addr, dir, neighbours, &mut self.access)?;
                    }
                }
                if let Some(c) = self.cache.as_mut() {
                    play_touched_lines(api, c);
                    c.io_path();
                }
                let now = self.now();
                self.api.tick(now)?;
                if self.ios.is_multiple_of(PROGRESS_EVERY)
                    && (self.progress)(self.ios, self.total).is_break()
                {
                    return Err(Error::Cancelled);
                }
                if self.stop_at.is_some_and(|stop| now >= stop) {
                    self.stopped = true;
                }
            }
            DmaOp::Tick { now_ns } => {
                self.workload_now = self.cost.clock.cycles_from_ns(now_ns);
                let now = self.now();
                self.api.tick(now)?;
            }
        }
        Ok(())
    }

    /// [`step`](Self::step), with the op's cycles, invalidations and exposure windows kept
    /// per device.
    fn step_accounted(&mut self, op: DmaOp, sg: &[Segment]) -> Result<(), Error> {
        let Some(acct) = self.acct.take() else {
            return self.step(op, sg);
        };
        let mut r = Ok(());
        if let DmaOp::Tick { now_ns } = op {
            // A flush timer due while the trace was idle fired at its deadline, not at the
            // next event: tick there first, so its windows close when the kernel's did.
            let clock = self.cost.clock;
            for _ in 0..=self.api.flush_policies().len() {
                let due = self
                    .api
                    .flush_policies()
                    .iter()
                    .filter_map(FlushPolicy::next_deadline)
                    .min();
                let Some(d) = due else { break };
                let d_ns = crate::clock::saturating_u64(clock.ns(d).ceil());
                if d_ns >= now_ns || d <= self.now() {
                    break;
                }
                r = self.account(acct, DmaOp::Tick { now_ns: d_ns }, sg);
                if r.is_err() {
                    break;
                }
            }
        }
        if r.is_ok() {
            r = self.account(acct, op, sg);
        }
        self.acct = Some(acct);
        r
    }

    /// One op with its accounting.
    fn account(&mut self, acct: &mut Accounting, op: DmaOp, sg: &[Segment]) -> Result<(), Error> {
        // The op's device, and for an unmap the pages it frees.
        let live = |slot: u32| self.slots.get(slot as usize).filter(|s| s.live);
        let (device, pages, unmap) = match op {
            DmaOp::Map { device, .. } | DmaOp::MapSg { device, .. } => (Some(device), 0, false),
            DmaOp::Access { slot, .. } => (live(slot).map(|s| s.device), 0, false),
            DmaOp::Unmap { slot, .. } => match live(slot) {
                Some(s) if s.is_sg => (Some(s.device), exposure::sg_pages(&s.sg), true),
                Some(s) => (
                    Some(s.device),
                    exposure::pages_of(s.addr.get(), s.len),
                    true,
                ),
                None => (None, 0, false),
            },
            DmaOp::Tick { now_ns } => {
                acct.at(now_ns);
                (None, 0, false)
            }
        };
        let tick = device.is_none();
        if tick {
            domain_cycles(
                self.api,
                &self.cost,
                self.cache.is_none(),
                &mut acct.domain_before,
            );
        }
        let cache = self.cache.as_ref().map(CpuCache::stats).copied();
        acct.before(exposure::snapshot(
            self.api,
            modeled_now(self.api, &self.cost, 0, self.iommu_on, cache.as_ref()),
        ));
        let r = self.step(op, sg);
        let cache = self.cache.as_ref().map(CpuCache::stats).copied();
        let now = exposure::snapshot(
            self.api,
            modeled_now(self.api, &self.cost, 0, self.iommu_on, cache.as_ref()),
        );
        if tick {
            domain_cycles(
                self.api,
                &self.cost,
                self.cache.is_none(),
                &mut acct.domain_after,
            );
        }
        let dev = device.map(|d| (d, device_of(self.devs, d)));
        acct.after(self.api, now, dev, pages);
        if let (true, Some(d)) = (unmap, device) {
            acct.io(d);
        }
        r
    }

    /// The modeled clock, or the workload's if that is later.
    #[inline(always)]
    fn now(&self) -> Cycles {
        let cache_stats = self.cache.as_ref().map(CpuCache::stats);
        modeled_now(self.api, &self.cost, self.ios, self.iommu_on, cache_stats)
            .max(self.workload_now)
    }
}

/// Each domain's own modeled cycles into `out` (reused: no allocation once sized): its
/// allocator's, and its flush policy's when every domain has one.
fn domain_cycles<A: IovaAllocator, F: FlushPolicy, U: RemapUnit>(
    api: &DmaApi<A, F, Native<U>>,
    cost: &CostModel,
    flat_metadata: bool,
    out: &mut Vec<(u64, u64)>,
) {
    out.clear();
    let per_domain = F::PER_DOMAIN;
    let flushes = api.flush_policies();
    for (k, a) in api.allocators().iter().enumerate() {
        let (c, n) = match flushes.get(k) {
            Some(f) if per_domain => (flush_cycles(cost, f.stats()), f.stats().flushes),
            _ => (0, 0),
        };
        out.push((allocator_cycles(cost, &a.stats(), flat_metadata) + c, n));
    }
}

/// A malicious device retries the unmapped page at `addr` and `neighbours` pages on each side.
fn probe_after_unmap<A: IovaAllocator, F: FlushPolicy, U: RemapUnit>(
    api: &mut DmaApi<A, F, Native<U>>,
    dev: DeviceHandle,
    addr: Iova,
    dir: DmaDirection,
    neighbours: u64,
    access: &mut AccessOutcome,
) -> Result<(), DmaError> {
    let pfn = addr.pfn(PAGE_4K).get();
    let lo = pfn.saturating_sub(neighbours);
    for p in lo..=pfn.saturating_add(neighbours) {
        let a = if p == pfn {
            addr
        } else {
            Iova::new(p << PAGE_4K.shift())
        };
        access.merge(&api.device_access(dev, a, 1, access_for(dir))?);
    }
    Ok(())
}

fn dma_calls<A: IovaAllocator, F: FlushPolicy, U: RemapUnit>(api: &DmaApi<A, F, Native<U>>) -> u64 {
    let d = api.stats();
    d.maps + d.unmaps + d.map_sgs + d.unmap_sgs
}

/// Plays the lines every domain's allocator touched since the last call through the CPU
/// cache, and empties the logs (each allocator numbers its own lines, so two domains' lines
/// may alias in the one cache).
fn play_touched_lines<A: IovaAllocator, F: FlushPolicy, U: RemapUnit>(
    api: &mut DmaApi<A, F, Native<U>>,
    cache: &mut CpuCache,
) {
    for a in api.allocators_mut() {
        for &line in a.touched_lines() {
            cache.allocator_access(line);
        }
        a.clear_touched_lines();
    }
}

/// The modeled clock after `ios` I/Os: [`modeled_software_cached`] over every domain's
/// allocator and flush policy, plus the I/O path and the unit's CPU cycles. The price is
/// linear in the counters, so each part is priced on its own instead of their stats being
/// merged on every I/O; with the cache model the metadata accesses are priced once, from
/// the one cache every domain shares.
fn modeled_now<A: IovaAllocator, F: FlushPolicy, U: RemapUnit>(
    api: &DmaApi<A, F, Native<U>>,
    cost: &CostModel,
    ios: u64,
    iommu_on: bool,
    cache: Option<&CpuCacheStats>,
) -> Cycles {
    let io = Cycles::new(ios * cost.io_path);
    if !iommu_on {
        return io;
    }
    // The parts add as `Cycles` (saturating), as they did when each was priced whole.
    let mut c = io
        + api.unit().cpu_cycles()
        + Cycles::new(
            dma_calls(api) * cost.dma_api_call + cache.map_or(0, |c| cache_cycles(cost, c)),
        );
    for a in api.allocators() {
        c = c + Cycles::new(allocator_cycles(cost, &a.stats(), cache.is_none()));
    }
    for f in api.flush_policies() {
        c = c + Cycles::new(flush_cycles(cost, f.stats()));
    }
    c
}

#[allow(clippy::too_many_arguments)]
fn summarise<A: IovaAllocator, F: FlushPolicy, U: RemapUnit>(
    api: &DmaApi<A, F, Native<U>>,
    cost: &CostModel,
    ios: u64,
    wall: f64,
    access: AccessOutcome,
    device: DeviceMode,
    software_clock: SoftwareClock,
    labels: RunLabels,
    iommu_on: bool,
    cache: Option<CpuCacheStats>,
) -> RunResult {
    let n = ios.max(1) as f64;
    let iommu = api.unit().stats();
    let iova = api.allocator_stats();
    let flush = api.flush_stats();
    let io_path = Cycles::new(ios * cost.io_path);
    let (hw, sw, devc) = if iommu_on {
        (
            api.unit().cpu_cycles(),
            modeled_software_cached(cost, dma_calls(api), &iova, &flush, cache.as_ref()),
            api.unit().device_cycles(),
        )
    } else {
        (Cycles::ZERO, Cycles::ZERO, Cycles::ZERO)
    };
    let per = |c: Cycles| cost.clock.ns(c) / n;
    let io_ns = per(io_path);
    let hw_ns = per(hw);
    let sw_ns = per(sw);
    let dev_ns = per(devc);
    let software_ns = wall * 1e9 / n;
    let modeled_ns = io_ns + hw_ns + sw_ns + dev_ns;
    let measured_ns = io_ns + hw_ns + dev_ns + if iommu_on { software_ns } else { 0.0 };
    let iops_of = |ns: f64| if ns > 0.0 { 1e9 / ns } else { 0.0 };
    let iops = match software_clock {
        SoftwareClock::Modeled => iops_of(modeled_ns),
        SoftwareClock::Measured => iops_of(measured_ns),
    };
    let (allocator, flush_name) = if iommu_on {
        (
            api.allocator_template().name().to_string(),
            api.flush_template().name().to_string(),
        )
    } else {
        ("none".to_string(), "none".to_string())
    };
    RunResult {
        config: labels.config,
        allocator,
        flush: flush_name,
        cost_preset: labels.cost_preset,
        seed: labels.seed,
        ops: ios,
        io_size: labels.io_size,
        outstanding: labels.outstanding,
        cpus: labels.cpus,
        touch: labels.touch,
        malicious: matches!(device, DeviceMode::Malicious { .. }),
        software_clock: match software_clock {
            SoftwareClock::Modeled => "modeled".into(),
            SoftwareClock::Measured => "measured".into(),
        },
        software_ns_per_op: software_ns,
        modeled_ns_per_op: modeled_ns,
        io_path_ns_per_op: io_ns,
        modeled_hw_ns_per_op: hw_ns,
        modeled_sw_ns_per_op: sw_ns,
        device_ns_per_op: dev_ns,
        iops,
        measured_iops: iops_of(measured_ns),
        relative_to_disabled: None,
        iotlb_invalidations: iommu.inv_page + iommu.inv_domain + iommu.inv_global,
        iotlb_flushes: flush.flushes,
        write_buffer_flushes: iommu.write_buffer_flushes,
        peak_metadata_bytes: iova.peak_metadata_bytes,
        stale_accesses: access.stale,
        subpage_accesses: access.subpage,
        exposed_bytes: api.stats().exposed_bytes,
        faults: iommu.faults,
        wall_seconds: wall,
        modeled_seconds: cost.clock.ns(io_path + hw + sw + devc) / 1e9,
        stats: ComponentStats {
            iommu,
            iova,
            flush,
            dma: *api.stats(),
            access,
            cpu_cache: cache,
        },
        guest: None,
        xen_pv: None,
        replay: None,
    }
}
