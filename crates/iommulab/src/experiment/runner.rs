//! The runner: drives a [`Workload`] through a [`DmaApi`] and keeps the two clocks.
//!
//! This is the only module that reads a wall clock. The modeled clock is derived
//! from counters: `io_path × I/Os + IOMMU CPU cycles + modeled kernel software`, and it
//! drives the flush timers, so a run is deterministic for a given configuration and seed.

use std::time::Instant;

use crate::addr::{Bdf, DmaDirection, Hpa, Iova, PAGE_4K};
use crate::clock::Cycles;
use crate::device::{AccessOutcome, DeviceMode};
use crate::dma::{DeviceHandle, DmaApi, DmaError, Native, Translation};
use crate::driver::{Driver, Hooks, Slot, access_for};
use crate::error::Error;
use crate::flush::{FlushPolicy, FlushStats};
use crate::hw::cost::CostModel;
use crate::hw::cpu_cache::{CpuCache, CpuCacheConfig, CpuCacheStats};
use crate::hw::unit::RemapUnit;
use crate::iova::{IovaAllocator, IovaStats};
use crate::workload::{DmaOp, Segment, Workload};

use super::config::SoftwareClock;
use super::cores::demand::{Counters, Demand};
use super::cores::{CoreModel, Scopes};
use super::exposure::{self, Accounting};
use super::progress::{PROGRESS_EVERY, Progress, ProgressFn};
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
    progress: &mut ProgressFn<'_>,
    acct: Option<&mut Accounting>,
    cores: Option<(CoreModel, Scopes)>,
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
    let mut hooks = BareMetal {
        device,
        cost,
        iommu_on,
        workload_now: Cycles::ZERO,
        cache,
        total,
        stop_at,
        progress,
        acct,
        cores: cores.map(|(model, scopes)| Cores {
            model,
            scopes,
            last_cpu: 0,
        }),
    };
    let mut driver = Driver::new(api, &devs, workload.slots(), &mut hooks);
    driver.run(workload)?;
    let (ios, access) = (driver.ios(), *driver.access());
    let BareMetal {
        mut cache,
        progress,
        mut acct,
        cores,
        ..
    } = hooks;
    let cores = cores.map(|c| c.model.finish());
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
    let _ = progress(&Progress::ios(ios, total));

    let mut result = summarise(
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
    );
    result.cores = cores;
    Ok(result)
}

/// What bare metal adds to the driver: a malicious device's extra accesses, the flush
/// timers by the modeled clock (or the workload's, if later), the CPU cache model, progress
/// and the end time, and per-device accounting when asked for.
struct BareMetal<'a> {
    device: DeviceMode,
    cost: CostModel,
    iommu_on: bool,
    /// The workload's own clock (trace timestamps), in cycles; timers fire by the later of
    /// it and the modeled clock.
    workload_now: Cycles,
    cache: Option<CpuCache>,
    total: u64,
    stop_at: Option<Cycles>,
    progress: &'a mut ProgressFn<'a>,
    /// Per-device accounting, when asked for ([`Accounting`]).
    acct: Option<&'a mut Accounting>,
    /// The many-core model, with more than one CPU.
    cores: Option<Cores>,
}

/// The many-core model as the runner feeds it.
struct Cores {
    model: CoreModel,
    scopes: Scopes,
    /// The CPU of the last op that named one: a device access or a tick is charged to it.
    last_cpu: u16,
}

impl BareMetal<'_> {
    /// The modeled clock after `ios` I/Os, or the workload's if that is later.
    #[inline(always)]
    fn now<A: IovaAllocator, F: FlushPolicy, U: RemapUnit>(
        &self,
        api: &DmaApi<A, F, Native<U>>,
        ios: u64,
    ) -> Cycles {
        let cache_stats = self.cache.as_ref().map(CpuCache::stats);
        modeled_now(api, &self.cost, ios, self.iommu_on, cache_stats).max(self.workload_now)
    }

    /// The time the flush timers and the end time run by: with the many-core model, the
    /// machine's clock ([`CoreModel::now`]: a timer is one for the whole machine, and the
    /// one-CPU clock, which sums every CPU's work, would fire it up to C times too often);
    /// otherwise the modeled clock. The workload's if that is later.
    #[inline(always)]
    fn timer_now<A: IovaAllocator, F: FlushPolicy, U: RemapUnit>(
        &self,
        api: &DmaApi<A, F, Native<U>>,
        ios: u64,
    ) -> Cycles {
        match &self.cores {
            Some(c) => Cycles::new(c.model.now()).max(self.workload_now),
            None => self.now(api, ios),
        }
    }
}

type BareDriver<'d, 'h, A, F, U> = Driver<'d, A, F, Native<U>, BareMetal<'h>>;

impl<A: IovaAllocator, F: FlushPolicy, U: RemapUnit> Hooks<A, F, Native<U>> for BareMetal<'_> {
    type Error = Error;

    #[inline(always)]
    fn op(d: &mut BareDriver<'_, '_, A, F, U>, op: DmaOp, sg: &[Segment]) -> Result<(), Error> {
        if d.hooks().cores.is_some() {
            return step_on_cores(d, op, sg);
        }
        if d.hooks().acct.is_some() {
            step_accounted(d, op, sg)
        } else {
            d.step(op, sg)
        }
    }

    #[inline(always)]
    fn after_map(
        &mut self,
        api: &mut DmaApi<A, F, Native<U>>,
        dev: DeviceHandle,
        addr: Iova,
        dir: DmaDirection,
        access: &mut AccessOutcome,
    ) -> Result<(), Error> {
        if let DeviceMode::Malicious { .. } = self.device {
            // Read what the sub-page mapping exposes: the last byte of the page.
            let last = Iova::new(addr.align_down(PAGE_4K).get() | PAGE_4K.mask());
            access.merge(&api.device_access(dev, last, 1, access_for(dir))?);
        }
        Ok(())
    }

    #[inline(always)]
    fn after_unmap(
        &mut self,
        api: &mut DmaApi<A, F, Native<U>>,
        dev: DeviceHandle,
        s: &Slot<Hpa>,
        access: &mut AccessOutcome,
    ) -> Result<(), Error> {
        if let DeviceMode::Malicious { neighbours } = self.device {
            for (addr, _) in s.extents() {
                probe_after_unmap(api, dev, addr, s.dir(), neighbours, access)?;
            }
        }
        Ok(())
    }

    #[inline(always)]
    fn io_done(&mut self, api: &mut DmaApi<A, F, Native<U>>, ios: u64) -> Result<bool, Error> {
        if let Some(c) = self.cache.as_mut() {
            play_touched_lines(api, c);
            c.io_path();
        }
        let now = self.timer_now(api, ios);
        api.tick(now)?;
        if ios.is_multiple_of(PROGRESS_EVERY)
            && (self.progress)(&Progress::ios(ios, self.total)).is_break()
        {
            return Err(Error::Cancelled);
        }
        Ok(self.stop_at.is_some_and(|stop| now >= stop))
    }

    #[inline(always)]
    fn tick(
        &mut self,
        api: &mut DmaApi<A, F, Native<U>>,
        ios: u64,
        now_ns: u64,
    ) -> Result<(), Error> {
        self.workload_now = self.cost.clock.cycles_from_ns(now_ns);
        let now = self.timer_now(api, ios);
        api.tick(now)?;
        Ok(())
    }
}

/// One op, its demand handed to the many-core model: the one-CPU counters before and
/// after it, priced.
fn step_on_cores<A: IovaAllocator, F: FlushPolicy, U: RemapUnit>(
    d: &mut BareDriver<'_, '_, A, F, U>,
    op: DmaOp,
    sg: &[Segment],
) -> Result<(), Error> {
    let (cost, iommu_on) = (d.hooks().cost, d.hooks().iommu_on);
    let counters = |d: &BareDriver<'_, '_, A, F, U>| {
        let cache = d.hooks().cache.as_ref().map(CpuCache::stats);
        Counters::of(
            d.api(),
            modeled_now(d.api(), &cost, d.ios(), iommu_on, cache),
        )
    };
    let before = counters(d);
    if d.hooks().acct.is_some() {
        step_accounted(d, op, sg)?;
    } else {
        d.step(op, sg)?;
    }
    let after = counters(d);
    let Some(c) = d.hooks_mut().cores.as_mut() else {
        return Ok(());
    };
    let (cpu, io) = match op {
        DmaOp::Map { cpu, .. } | DmaOp::MapSg { cpu, .. } => (cpu_number(cpu), false),
        DmaOp::Unmap { cpu, .. } => (cpu_number(cpu), true),
        DmaOp::Access { .. } | DmaOp::Tick { .. } => (c.last_cpu, false),
    };
    c.last_cpu = cpu;
    c.model
        .push(cpu, Demand::between(&before, &after, &cost, c.scopes), io);
    Ok(())
}

/// A CPU's number (a [`crate::addr::CpuId`] is 16 bits).
#[inline(always)]
fn cpu_number(cpu: crate::addr::CpuId) -> u16 {
    u16::try_from(cpu.index()).unwrap_or(u16::MAX)
}

/// One op with the op's cycles, invalidations and exposure windows kept per device.
fn step_accounted<A: IovaAllocator, F: FlushPolicy, U: RemapUnit>(
    d: &mut BareDriver<'_, '_, A, F, U>,
    op: DmaOp,
    sg: &[Segment],
) -> Result<(), Error> {
    let Some(acct) = d.hooks_mut().acct.take() else {
        return d.step(op, sg);
    };
    let mut r = Ok(());
    if let DmaOp::Tick { now_ns } = op {
        // A flush timer due while the trace was idle fired at its deadline, not at the
        // next event: tick there first, so its windows close when the kernel's did.
        let clock = d.hooks().cost.clock;
        for _ in 0..=d.api().flush_policies().len() {
            let due = d
                .api()
                .flush_policies()
                .iter()
                .filter_map(FlushPolicy::next_deadline)
                .min();
            let Some(due) = due else { break };
            let d_ns = crate::clock::saturating_u64(clock.ns(due).ceil());
            if d_ns >= now_ns || due <= d.hooks().timer_now(d.api(), d.ios()) {
                break;
            }
            r = account(d, acct, DmaOp::Tick { now_ns: d_ns }, sg);
            if r.is_err() {
                break;
            }
        }
    }
    if r.is_ok() {
        r = account(d, acct, op, sg);
    }
    d.hooks_mut().acct = Some(acct);
    r
}

/// One op with its accounting.
fn account<A: IovaAllocator, F: FlushPolicy, U: RemapUnit>(
    d: &mut BareDriver<'_, '_, A, F, U>,
    acct: &mut Accounting,
    op: DmaOp,
    sg: &[Segment],
) -> Result<(), Error> {
    // The op's device, and for an unmap the pages it frees.
    let (device, pages, unmap) = match op {
        DmaOp::Map { device, .. } | DmaOp::MapSg { device, .. } => (Some(device), 0, false),
        DmaOp::Access { slot, .. } => (d.live(slot).map(Slot::device), 0, false),
        DmaOp::Unmap { slot, .. } => match d.live(slot) {
            Some(s) => match s.sg() {
                Some(list) => (Some(s.device()), exposure::sg_pages(list), true),
                None => (
                    Some(s.device()),
                    exposure::pages_of(s.addr().get(), s.bytes()),
                    true,
                ),
            },
            None => (None, 0, false),
        },
        DmaOp::Tick { now_ns } => {
            acct.at(now_ns);
            (None, 0, false)
        }
    };
    let tick = device.is_none();
    let (cost, flat) = (d.hooks().cost, d.hooks().cache.is_none());
    let iommu_on = d.hooks().iommu_on;
    if tick {
        domain_cycles(d.api(), &cost, flat, &mut acct.domain_before);
    }
    let snapshot = |d: &BareDriver<'_, '_, A, F, U>| {
        let cache = d.hooks().cache.as_ref().map(CpuCache::stats).copied();
        exposure::snapshot(
            d.api(),
            modeled_now(d.api(), &cost, 0, iommu_on, cache.as_ref()),
        )
    };
    acct.before(snapshot(d));
    let r = d.step(op, sg);
    let now = snapshot(d);
    if tick {
        domain_cycles(d.api(), &cost, flat, &mut acct.domain_after);
    }
    let dev = device.map(|x| (x, d.device(x)));
    acct.after(d.api(), now, dev, pages);
    if let (true, Some(x)) = (unmap, device) {
        acct.io(x);
    }
    r
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
        cores: None,
    }
}
