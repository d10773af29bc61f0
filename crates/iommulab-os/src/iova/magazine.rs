//! Linux's per-CPU IOVA range caches ("rcache", 4.7+, after Bonwick & Adams' magazines) over
//! any backing allocator (`drivers/iommu/iova.c`: `alloc_iova_fast`, `free_iova_fast`).
//!
//! Sizes below 2^`max_cached_pages_log2` pages are rounded up to a power of two; sizes up to
//! 2^`max_cached_pages_log2` (32) pages fall into `max_cached_pages_log2 + 1` (6) bins and are
//! cached, larger ones always go to the backing allocator. Each CPU holds two magazines of
//! `mag_size` (127) pfns per bin, `loaded` and `prev`; a depot per bin holds full magazines
//! (an unbounded list, mainline since 6.7), trimmed by a delayed work every
//! `depot_delay_ms` (100 ms) of simulated time: one magazine per bin per run goes back to the
//! backing allocator while the depot holds more magazines than there are CPUs. A miss
//! allocates the rounded size from the backing allocator; if that is exhausted, every CPU's
//! magazines and the depot are flushed back into it and the allocation is retried once
//! (`flush_rcache`, which dma-iommu sets on its full-mask attempt; always set here).
//!
//! Deviations from Linux:
//! - magazines are recycled through a spare list instead of `kmem_cache`; magazine
//!   allocation never fails, so `free_iova_fast`'s fall-back to `free_iova` never happens;
//! - a CPU number at or above `cpus` shares the caches of `cpu % cpus`;
//! - `iova_magazine_pop` takes a pfn with `pfn + size <= limit` exactly (Linux compares with
//!   the inclusive `limit_pfn - size`, one page stricter);
//! - the delayed work is modelled: a depot push schedules it at the time of the last
//!   [`IovaAllocator::on_tick`], and `on_tick` runs every run that has come due since.
//!
//! A magazine cannot detect a double free of a cached range without a search: `free` checks
//! only that the range lies inside the space. A double free is cached twice and handed out
//! twice; the DMA layer's dma-debug checker catches it. A free of a cached size with the
//! wrong length in the same bin (3 for 4) is accepted, as in Linux, which rounds the same way.
//!
//! Statistics ([`IovaAllocator::stats`]) are a combined view: `allocs`, `frees`, `failures`,
//! `cache_hits`, `cache_misses` and `magazine_ops` are the magazine's own (what callers asked
//! for; the backing allocator's own `allocs`/`frees` are in [`Magazine::inner`]);
//! `wraps`, `node_allocs`, `slab_allocs`, `slab_frees`, `tree_visits`, `tree_rebalances` and `bitmap_words` are the
//! backing allocator's; `lock_acquisitions` is the sum of per-CPU and depot locks taken here
//! and the backing allocator's lock; `peak_metadata_bytes` is the peak of the backing
//! allocator's metadata plus 1024 bytes per magazine held (every CPU's `loaded` and `prev`
//! and the depot's), as Linux's `struct iova_magazine`. `magazine_ops` counts pfn pushes and
//! pops and magazine moves to and from the depot. Every cacheable allocation is exactly one
//! `cache_hits` or one `cache_misses`.
//!
//! Complexity: a hit or a cached free is `O(1)` (a pop scans the magazine only when the top
//! pfn is above the limit); a depot exchange is `O(1)`; a flush is `O(cached ranges)`.

use std::mem;

use serde::{Deserialize, Serialize};

use super::{IovaAllocator, IovaError, IovaStats};
use crate::addr::{CpuId, Iova, Pfn};
use crate::clock::{ClockRate, Cycles};

/// Bytes of one magazine in Linux (`struct iova_magazine`, 127 pfns + size, a power of two).
pub const MAGAZINE_BYTES: u64 = 1024;

/// Knobs of the per-CPU range caches (the TOML table under `[magazine]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MagazineConfig {
    /// Simulated CPUs, each with its own magazines (`num_online_cpus`; also the depot trim
    /// floor). Default 1.
    pub cpus: usize,
    /// Pfns per magazine (`IOVA_MAG_SIZE`: 127 in mainline, 128 in 4.7).
    pub mag_size: usize,
    /// Depot trim period in ms (`IOVA_DEPOT_DELAY`, 100 ms).
    pub depot_delay_ms: u64,
    /// log2 of the largest cached size in pages (`IOVA_RANGE_CACHE_MAX_SIZE - 1` = 5:
    /// 32 pages, 128 KiB).
    pub max_cached_pages_log2: u32,
}

impl Default for MagazineConfig {
    fn default() -> Self {
        MagazineConfig {
            cpus: 1,
            mag_size: 127,
            depot_delay_ms: 100,
            max_cached_pages_log2: 5,
        }
    }
}

/// A [`MagazineConfig`] that cannot work.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MagazineConfigError {
    /// `cpus` is 0 or above 65536 (a [`CpuId`] is 16 bits).
    #[error("magazine.cpus = {0}: expected 1..=65536")]
    Cpus(usize),
    /// `mag_size` is 0 or above 65536.
    #[error("magazine.mag_size = {0}: expected 1..=65536 (Linux: 127)")]
    MagSize(usize),
    /// `max_cached_pages_log2` is above 20.
    #[error("magazine.max_cached_pages_log2 = {0}: expected 0..=20 (Linux: 5)")]
    MaxCached(u32),
}

impl MagazineConfig {
    /// Checks the knobs.
    pub fn validate(&self) -> Result<(), MagazineConfigError> {
        if self.cpus == 0 || self.cpus > 1 << 16 {
            return Err(MagazineConfigError::Cpus(self.cpus));
        }
        if self.mag_size == 0 || self.mag_size > 1 << 16 {
            return Err(MagazineConfigError::MagSize(self.mag_size));
        }
        if self.max_cached_pages_log2 > 20 {
            return Err(MagazineConfigError::MaxCached(self.max_cached_pages_log2));
        }
        Ok(())
    }

    /// Number of size bins (6 by default).
    pub fn bins(&self) -> usize {
        self.max_cached_pages_log2 as usize + 1
    }

    /// The size a request of `pages` takes: rounded up to a power of two below the largest
    /// cached size (`alloc_iova_fast`), unchanged otherwise.
    #[inline]
    pub fn rounded_pages(&self, pages: u64) -> u64 {
        if pages < 1 << self.max_cached_pages_log2 {
            pages.next_power_of_two()
        } else {
            pages
        }
    }

    /// The bin of a rounded size, `None` when it bypasses the caches.
    #[inline]
    pub fn bin(&self, rounded: u64) -> Option<usize> {
        if rounded.is_power_of_two() && rounded <= 1 << self.max_cached_pages_log2 {
            Some(rounded.trailing_zeros() as usize)
        } else {
            None
        }
    }

    /// Depot trim period in cycles at `clock`.
    pub(crate) fn delay_cycles(&self, clock: ClockRate) -> u64 {
        clock.cycles_from_ms(self.depot_delay_ms).get()
    }
}

/// One magazine: up to `mag_size` pfns of one size class (`struct iova_magazine`). The
/// `Vec` is created with room for `mag_size` and never grows past it.
#[derive(Debug)]
pub(crate) struct Mag {
    pfns: Vec<u64>,
}

impl Mag {
    fn new(cap: usize) -> Self {
        Mag {
            pfns: Vec::with_capacity(cap),
        }
    }

    /// `iova_magazine_pop`: the topmost pfn `<= max_pfn`, swap-removed.
    #[inline]
    fn pop(&mut self, max_pfn: u64) -> Option<u64> {
        if self.pfns.last().is_some_and(|&top| top <= max_pfn) {
            return self.pfns.pop();
        }
        let i = self.pfns.iter().rposition(|&p| p <= max_pfn)?;
        Some(self.pfns.swap_remove(i))
    }
}

/// What a CPU's own magazines could do for an allocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LocalGet {
    /// A pfn of the bin's size.
    Hit(u64),
    /// `loaded` held pfns but none below the limit: go to the backing allocator.
    Miss,
    /// Both magazines empty: try the depot.
    Empty,
}

/// One CPU's `loaded` and `prev` magazines for every bin (`struct iova_cpu_rcache`),
/// shared by [`Magazine`] and [`super::SharedMagazine`].
#[derive(Debug)]
pub(crate) struct CpuCaches {
    /// Per bin, `[loaded, prev]` inline: one indirection from the CPU to a magazine.
    bins: Vec<[Mag; 2]>,
}

impl CpuCaches {
    pub(crate) fn new(bins: usize, mag_size: usize) -> Self {
        CpuCaches {
            bins: (0..bins)
                .map(|_| [Mag::new(mag_size), Mag::new(mag_size)])
                .collect(),
        }
    }

    /// `__iova_rcache_get` before the depot: `loaded`, else swap in a non-empty `prev`.
    #[inline]
    pub(crate) fn get(&mut self, bin: usize, max_pfn: u64) -> LocalGet {
        let pair = &mut self.bins[bin];
        if pair[0].pfns.is_empty() {
            if pair[1].pfns.is_empty() {
                return LocalGet::Empty;
            }
            pair.swap(0, 1);
        }
        match pair[0].pop(max_pfn) {
            Some(p) => LocalGet::Hit(p),
            None => LocalGet::Miss,
        }
    }

    /// Installs a full magazine from the depot as `loaded` and pops from it; returns the
    /// old (empty) `loaded` for recycling.
    pub(crate) fn install(&mut self, bin: usize, full: Mag, max_pfn: u64) -> (Mag, Option<u64>) {
        let loaded = &mut self.bins[bin][0];
        let empty = mem::replace(loaded, full);
        let got = loaded.pop(max_pfn);
        (empty, got)
    }

    /// `__iova_rcache_insert` before the depot: push to `loaded`, else swap with a `prev`
    /// that has room. `false` when both are full.
    #[inline]
    pub(crate) fn put(&mut self, bin: usize, pfn: u64, mag_size: usize) -> bool {
        let pair = &mut self.bins[bin];
        if pair[0].pfns.len() >= mag_size {
            if pair[1].pfns.len() >= mag_size {
                return false;
            }
            pair.swap(0, 1);
        }
        pair[0].pfns.push(pfn);
        true
    }

    /// Both magazines full: `empty` becomes `loaded` and takes `pfn`; returns the full one.
    pub(crate) fn exchange(&mut self, bin: usize, empty: Mag, pfn: u64) -> Mag {
        let loaded = &mut self.bins[bin][0];
        let full = mem::replace(loaded, empty);
        loaded.pfns.push(pfn);
        full
    }

    /// Empties every magazine (`free_cpu_cached_iovas`), calling `f(bin, pfn)` per range.
    pub(crate) fn drain(&mut self, mut f: impl FnMut(usize, u64)) {
        for (bin, pair) in self.bins.iter_mut().enumerate() {
            for mag in pair {
                for p in mag.pfns.drain(..) {
                    f(bin, p);
                }
            }
        }
    }

    /// Ranges cached on this CPU.
    pub(crate) fn cached(&self) -> usize {
        self.bins.iter().flatten().map(|m| m.pfns.len()).sum()
    }
}

/// The depots of full magazines per bin (`struct iova_rcache`'s depot and delayed work),
/// plus the spare empty magazines they recycle.
#[derive(Debug)]
pub(crate) struct Depot {
    full: Vec<Vec<Mag>>,
    spare: Vec<Mag>,
    /// Per bin: when the trim work was scheduled (`None`: not pending).
    scheduled_at: Vec<Option<Cycles>>,
    /// The earliest of `scheduled_at` (None when nothing is scheduled), so the common tick
    /// with nothing due returns after one comparison.
    earliest: Option<Cycles>,
    /// The `now` of the last tick: depot pushes schedule the work at this time.
    last_now: Cycles,
    mag_size: usize,
    /// Full magazines held, over all bins.
    held: u64,
    /// Most full magazines ever held.
    peak_held: u64,
}

impl Depot {
    pub(crate) fn new(bins: usize, mag_size: usize) -> Self {
        Depot {
            full: (0..bins).map(|_| Vec::new()).collect(),
            spare: Vec::new(),
            scheduled_at: vec![None; bins],
            earliest: None,
            last_now: Cycles::ZERO,
            mag_size,
            held: 0,
            peak_held: 0,
        }
    }

    /// `iova_depot_push` + `schedule_delayed_work`.
    pub(crate) fn push(&mut self, bin: usize, mag: Mag) {
        self.full[bin].push(mag);
        self.held += 1;
        self.peak_held = self.peak_held.max(self.held);
        if self.scheduled_at[bin].is_none() {
            self.scheduled_at[bin] = Some(self.last_now);
            self.earliest = Some(
                self.earliest
                    .map_or(self.last_now, |e| e.min(self.last_now)),
            );
        }
    }

    /// `iova_depot_pop`.
    pub(crate) fn pop(&mut self, bin: usize) -> Option<Mag> {
        let m = self.full[bin].pop()?;
        self.held -= 1;
        Some(m)
    }

    /// An empty magazine: a recycled one, else a new one (`iova_magazine_alloc`).
    pub(crate) fn empty_mag(&mut self) -> Mag {
        self.spare.pop().unwrap_or_else(|| Mag::new(self.mag_size))
    }

    /// Takes back an emptied magazine (`iova_magazine_free`).
    pub(crate) fn recycle(&mut self, mut mag: Mag) {
        mag.pfns.clear();
        self.spare.push(mag);
    }

    /// Full magazines held now.
    pub(crate) fn held(&self) -> u64 {
        self.held
    }

    /// Most full magazines held at once.
    pub(crate) fn peak_held(&self) -> u64 {
        self.peak_held
    }

    /// Ranges cached in the depot.
    pub(crate) fn cached(&self) -> usize {
        self.full.iter().flatten().map(|m| m.pfns.len()).sum()
    }

    /// Runs every trim work that has come due by `now` (`iova_depot_work_func`): one
    /// magazine per run while the depot holds more than `cpus`; `f(bin, pfn)` frees a range.
    /// Returns whether any magazine was trimmed.
    pub(crate) fn tick(
        &mut self,
        now: Cycles,
        delay: u64,
        cpus: usize,
        mut f: impl FnMut(usize, u64),
    ) -> bool {
        self.last_now = now;
        match self.earliest {
            Some(e) if e.get().saturating_add(delay) <= now.get() => {}
            _ => return false,
        }
        let mut trimmed = false;
        for bin in 0..self.full.len() {
            while let Some(at) = self.scheduled_at[bin] {
                let due = at.get().saturating_add(delay);
                if due > now.get() {
                    break;
                }
                if self.full[bin].len() > cpus {
                    if let Some(mut mag) = self.pop(bin) {
                        for p in mag.pfns.drain(..) {
                            f(bin, p);
                        }
                        self.spare.push(mag);
                        trimmed = true;
                    }
                    // Reschedule; a zero delay runs once per tick.
                    self.scheduled_at[bin] = Some(Cycles::new(due.max(at.get() + 1)));
                    if delay == 0 {
                        break;
                    }
                } else {
                    self.scheduled_at[bin] = None;
                }
            }
        }
        self.earliest = self.scheduled_at.iter().flatten().copied().min();
        trimmed
    }

    /// Empties every depot (`free_global_cached_iovas`), calling `f(bin, pfn)` per range.
    pub(crate) fn drain(&mut self, mut f: impl FnMut(usize, u64)) {
        for bin in 0..self.full.len() {
            while let Some(mut mag) = self.pop(bin) {
                for p in mag.pfns.drain(..) {
                    f(bin, p);
                }
                self.spare.push(mag);
            }
        }
    }
}

/// Copies the backing allocator's counters into a combined view (see the module doc).
pub(crate) fn sync_view(view: &mut IovaStats, own_locks: u64, inner: &IovaStats) {
    view.wraps = inner.wraps;
    view.node_allocs = inner.node_allocs;
    view.slab_allocs = inner.slab_allocs;
    view.slab_frees = inner.slab_frees;
    view.tree_visits = inner.tree_visits;
    view.tree_rebalances = inner.tree_rebalances;
    view.bitmap_words = inner.bitmap_words;
    view.lock_acquisitions = own_locks + inner.lock_acquisitions;
}

/// The display name of a magazine over an allocator called `inner`.
pub(crate) fn combined_name(inner: &str) -> &'static str {
    match inner {
        "rbtree" => "magazine+rbtree",
        "bitmap" => "magazine+bitmap",
        _ => "magazine",
    }
}

/// Per-CPU range caches over a backing allocator `A` (see the module doc).
///
/// # Examples
///
/// ```
/// use iommulab_base::addr::{CpuId, Pfn};
/// use iommulab_os::iova::{IovaAllocator, Magazine, MagazineConfig, RbTree};
///
/// let tree = RbTree::new(Pfn::new(1), Pfn::new(1 << 20)).unwrap();
/// let mut m = Magazine::new(tree, MagazineConfig::default()).unwrap();
/// let cpu = CpuId::new(0);
/// let a = m.alloc(cpu, 3, Pfn::new(1 << 20)).unwrap(); // a miss: 4 pages from the tree
/// m.free(cpu, a, 3).unwrap(); // cached on CPU 0
/// assert_eq!(m.alloc(cpu, 4, Pfn::new(1 << 20)).unwrap(), a); // a hit
/// assert_eq!((m.stats().cache_hits, m.stats().cache_misses), (1, 1));
/// assert_eq!(m.name(), "magazine+rbtree");
/// ```
#[derive(Debug)]
pub struct Magazine<A> {
    inner: A,
    config: MagazineConfig,
    cpus: Vec<CpuCaches>,
    depot: Depot,
    /// The combined view `stats()` returns; own counters are bumped in place, the backing
    /// allocator's are copied in after every call into it.
    view: IovaStats,
    /// Per-CPU and depot lock acquisitions (the view adds the backing allocator's).
    own_locks: u64,
    name: &'static str,
}

impl<A: IovaAllocator> Magazine<A> {
    /// Caches over `inner`, with `config` validated.
    pub fn new(inner: A, config: MagazineConfig) -> Result<Self, MagazineConfigError> {
        config.validate()?;
        let bins = config.bins();
        let name = combined_name(inner.name());
        let mut m = Magazine {
            cpus: (0..config.cpus)
                .map(|_| CpuCaches::new(bins, config.mag_size))
                .collect(),
            depot: Depot::new(bins, config.mag_size),
            inner,
            config,
            view: IovaStats::default(),
            own_locks: 0,
            name,
        };
        m.sync();
        Ok(m)
    }

    /// The backing allocator (its own stats count only what reached it).
    pub fn inner(&self) -> &A {
        &self.inner
    }

    /// Flushes the caches and returns the backing allocator.
    pub fn into_inner(mut self) -> A {
        self.drain();
        self.inner
    }

    /// The configuration.
    pub fn config(&self) -> &MagazineConfig {
        &self.config
    }

    /// The size an allocation of `pages` really takes (see [`MagazineConfig::rounded_pages`]).
    pub fn rounded_pages(&self, pages: u64) -> u64 {
        self.config.rounded_pages(pages)
    }

    /// Ranges held in per-CPU magazines and the depot.
    pub fn cached_ranges(&self) -> usize {
        self.cpus.iter().map(CpuCaches::cached).sum::<usize>() + self.depot.cached()
    }

    /// Full magazines in the depots.
    pub fn depot_magazines(&self) -> u64 {
        self.depot.held()
    }

    /// Returns every cached range to the backing allocator (`free_cpu_cached_iovas` for
    /// every CPU, then `free_global_cached_iovas`; Linux's `flush_rcache` path).
    pub fn drain(&mut self) {
        let Magazine {
            inner,
            cpus,
            depot,
            own_locks,
            ..
        } = self;
        for (c, caches) in cpus.iter_mut().enumerate() {
            *own_locks += 1;
            let cpu = cpu_id(c);
            caches.drain(|bin, pfn| free_cached(inner, cpu, bin, pfn));
        }
        *own_locks += depot.full.len() as u64;
        depot.drain(|bin, pfn| free_cached(inner, CpuId::new(0), bin, pfn));
        self.sync();
    }

    /// Copies the backing allocator's counters into the view and updates the peak.
    fn sync(&mut self) {
        sync_view(&mut self.view, self.own_locks, self.inner.stats());
        let mags = 2 * self.cpus.len() as u64 * self.config.bins() as u64 + self.depot.held();
        self.view.peak_metadata_bytes = self
            .view
            .peak_metadata_bytes
            .max(self.inner.stats().peak_metadata_bytes)
            .max(self.inner.metadata_bytes() + mags * MAGAZINE_BYTES);
    }

    #[inline]
    fn cpu_index(&self, cpu: CpuId) -> usize {
        cpu_slot(cpu, self.cpus.len())
    }

    /// The backing-allocator path, with one flush-and-retry on exhaustion.
    fn backing_alloc(
        &mut self,
        cpu: CpuId,
        size: u64,
        limit: Pfn<Iova>,
    ) -> Result<Pfn<Iova>, IovaError> {
        let mut r = self.inner.alloc(cpu, size, limit);
        if matches!(r, Err(IovaError::Exhausted { .. })) {
            self.drain();
            r = self.inner.alloc(cpu, size, limit);
        }
        match r {
            Ok(_) => self.view.allocs += 1,
            Err(IovaError::Exhausted { .. }) => self.view.failures += 1,
            Err(_) => {}
        }
        self.sync();
        r
    }
}

/// The cache index of `cpu` among `n` (no division on the common in-range path).
#[inline]
pub(crate) fn cpu_slot(cpu: CpuId, n: usize) -> usize {
    let i = cpu.index();
    if i < n { i } else { i % n }
}

/// `CpuId` of cache index `c` (`c < cpus <= 65536`).
#[allow(clippy::cast_possible_truncation)]
fn cpu_id(c: usize) -> CpuId {
    CpuId::new(c as u16)
}

/// Frees a cached range of bin `bin` into the backing allocator. An error here means a range
/// was cached twice (a double free the magazine cannot see, module doc); it is dropped.
fn free_cached<A: IovaAllocator>(inner: &mut A, cpu: CpuId, bin: usize, pfn: u64) {
    let _ = inner.free(cpu, Pfn::new(pfn), 1 << bin);
}

impl<A: IovaAllocator> IovaAllocator for Magazine<A> {
    fn alloc(&mut self, cpu: CpuId, pages: u64, limit: Pfn<Iova>) -> Result<Pfn<Iova>, IovaError> {
        let end = self.inner.space_end().get();
        if pages == 0 {
            return Err(IovaError::BadRequest { pages, space: end });
        }
        let size = self.config.rounded_pages(pages);
        if let Some(bin) = self.config.bin(size) {
            let c = self.cpu_index(cpu);
            self.own_locks += 1;
            self.view.lock_acquisitions += 1;
            if let Some(max_pfn) = limit.get().min(end).checked_sub(size) {
                let got = match self.cpus[c].get(bin, max_pfn) {
                    LocalGet::Hit(p) => Some(p),
                    LocalGet::Miss => None,
                    LocalGet::Empty => {
                        self.own_locks += 1;
                        self.view.lock_acquisitions += 1;
                        match self.depot.pop(bin) {
                            Some(full) => {
                                self.view.magazine_ops += 1;
                                let (empty, got) = self.cpus[c].install(bin, full, max_pfn);
                                self.depot.recycle(empty);
                                got
                            }
                            None => None,
                        }
                    }
                };
                if let Some(p) = got {
                    self.view.allocs += 1;
                    self.view.cache_hits += 1;
                    self.view.magazine_ops += 1;
                    return Ok(Pfn::new(p));
                }
            }
            self.view.cache_misses += 1;
        }
        self.backing_alloc(cpu, size, limit)
    }

    fn free(&mut self, cpu: CpuId, pfn: Pfn<Iova>, pages: u64) -> Result<(), IovaError> {
        let size = self.config.rounded_pages(pages);
        let Some(bin) = self.config.bin(size).filter(|_| pages > 0) else {
            let r = self.inner.free(cpu, pfn, pages);
            if r.is_ok() {
                self.view.frees += 1;
            }
            self.sync();
            return r;
        };
        let p = pfn.get();
        if p == 0
            || p.checked_add(size)
                .is_none_or(|e| e > self.inner.space_end().get())
        {
            return Err(IovaError::NotAllocated { pfn: p, pages });
        }
        let c = self.cpu_index(cpu);
        self.own_locks += 1;
        self.view.lock_acquisitions += 1;
        self.view.frees += 1;
        self.view.magazine_ops += 1;
        if !self.cpus[c].put(bin, p, self.config.mag_size) {
            self.own_locks += 1;
            self.view.lock_acquisitions += 1;
            self.view.magazine_ops += 1;
            let empty = self.depot.empty_mag();
            let full = self.cpus[c].exchange(bin, empty, p);
            self.depot.push(bin, full);
            self.sync();
        }
        Ok(())
    }

    fn on_tick(&mut self, now: Cycles, clock: ClockRate) {
        let delay = self.config.delay_cycles(clock);
        let Magazine {
            inner,
            depot,
            config,
            own_locks,
            ..
        } = self;
        let trimmed = depot.tick(now, delay, config.cpus, |bin, pfn| {
            free_cached(inner, CpuId::new(0), bin, pfn);
        });
        if trimmed {
            *own_locks += 1;
        }
        self.inner.on_tick(now, clock);
        if trimmed {
            self.sync();
        }
    }

    fn stats(&self) -> &IovaStats {
        &self.view
    }

    fn metadata_bytes(&self) -> u64 {
        let mags = 2 * self.cpus.len() as u64 * self.config.bins() as u64 + self.depot.held();
        self.inner.metadata_bytes() + mags * MAGAZINE_BYTES
    }

    fn space_end(&self) -> Pfn<Iova> {
        self.inner.space_end()
    }

    fn name(&self) -> &'static str {
        self.name
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::iova::{Bitmap, RbTree};

    const C0: CpuId = CpuId::new(0);
    const C1: CpuId = CpuId::new(1);

    fn mag(end: u64, cpus: usize, mag_size: usize) -> Magazine<RbTree> {
        let t = RbTree::new(Pfn::new(1), Pfn::new(end)).unwrap();
        let cfg = MagazineConfig {
            cpus,
            mag_size,
            ..MagazineConfig::default()
        };
        Magazine::new(t, cfg).unwrap()
    }

    fn alloc(m: &mut Magazine<RbTree>, cpu: CpuId, pages: u64, limit: u64) -> Option<u64> {
        m.alloc(cpu, pages, Pfn::new(limit)).ok().map(Pfn::get)
    }

    /// Sizes round up to powers of two below 32 pages; 33+ pages bypass the caches.
    #[test]
    fn rounds_sizes_into_six_bins() {
        let c = MagazineConfig::default();
        assert_eq!(c.bins(), 6);
        let got: Vec<_> = [1, 2, 3, 5, 17, 31, 32, 33, 64]
            .iter()
            .map(|&p| (c.rounded_pages(p), c.bin(c.rounded_pages(p))))
            .collect();
        assert_eq!(
            got,
            [
                (1, Some(0)),
                (2, Some(1)),
                (4, Some(2)),
                (8, Some(3)),
                (32, Some(5)),
                (32, Some(5)),
                (32, Some(5)),
                (33, None),
                (64, None)
            ]
        );
        assert_eq!(
            MagazineConfig { cpus: 0, ..c }.validate(),
            Err(MagazineConfigError::Cpus(0))
        );
    }

    /// A freed range is cached on its CPU and handed back to the next allocation there.
    ///
    /// ```text
    /// pfn ... 1020 1021 1022 1023 | 1024
    ///          [a   a    a    .]  |     a = 3 pages, really 4 (rounded)
    /// ```
    #[test]
    fn free_then_alloc_on_the_same_cpu_hits() {
        let mut m = mag(1024, 2, 127);
        let a = alloc(&mut m, C0, 3, 1024).unwrap();
        assert_eq!(a, 1020);
        m.free(C0, Pfn::new(a), 3).unwrap();
        assert_eq!(alloc(&mut m, C1, 3, 1024), Some(1016), "CPU 1 misses");
        assert_eq!(alloc(&mut m, C0, 4, 1024), Some(a), "CPU 0 hits");
        let s = *m.stats();
        assert_eq!(
            (s.allocs, s.frees, s.cache_hits, s.cache_misses),
            (3, 1, 1, 2)
        );
        assert_eq!(m.inner().stats().allocs, 2);
        // Per-CPU locks: 3 allocs + 1 free; depot locks: the 2 misses found both empty.
        assert_eq!(s.lock_acquisitions, 6 + m.inner().stats().lock_acquisitions);
        assert_eq!(m.inner().stats().lock_acquisitions, 2);
    }

    /// A cached pfn above the limit is not used: the magazine falls back to the backing.
    ///
    /// ```text
    /// pfn  ... 511 | 512 ... 1023 | 1024
    ///          b   |          a   |      limit 512 for the second request
    /// ```
    #[test]
    fn cached_pfn_above_the_limit_misses() {
        let mut m = mag(1024, 1, 127);
        let a = alloc(&mut m, C0, 1, 1024).unwrap();
        m.free(C0, Pfn::new(a), 1).unwrap();
        assert_eq!(alloc(&mut m, C0, 1, 512), Some(511));
        assert_eq!(m.stats().cache_misses, 2);
        assert_eq!(m.cached_ranges(), 1);
    }

    /// 33+ pages go straight to the backing allocator, both ways.
    #[test]
    fn large_ranges_bypass_the_caches() {
        let mut m = mag(1024, 1, 127);
        let a = alloc(&mut m, C0, 33, 1024).unwrap();
        m.free(C0, Pfn::new(a), 33).unwrap();
        assert_eq!(m.cached_ranges(), 0);
        assert_eq!(m.inner().stats().frees, 1);
        let s = m.stats();
        assert_eq!(
            (s.cache_hits, s.cache_misses, s.allocs, s.frees),
            (0, 0, 1, 1)
        );
        assert!(
            m.free(C0, Pfn::new(a), 33).is_err(),
            "the tree sees this one"
        );
    }

    /// Loaded full → swap with prev; both full → loaded goes to the depot; an empty CPU
    /// takes a full magazine from the depot.
    #[test]
    fn full_magazines_move_through_the_depot() {
        let mut m = mag(1024, 2, 2);
        let pfns: Vec<u64> = (0..5)
            .map(|_| alloc(&mut m, C0, 1, 1024).unwrap())
            .collect();
        for &p in &pfns {
            m.free(C0, Pfn::new(p), 1).unwrap();
        }
        // loaded: [p4], prev: [p0 p1] (swapped in at p2), depot: [p2 p3] (exchanged at p4).
        assert_eq!(m.depot_magazines(), 1);
        assert_eq!(
            alloc(&mut m, C1, 1, 1024),
            Some(pfns[3]),
            "CPU 1 takes the depot's"
        );
        assert_eq!(m.depot_magazines(), 0);
        assert_eq!(m.stats().cache_hits, 1);
    }

    /// The depot is trimmed by one magazine per 100 ms while it holds more than `cpus`.
    #[test]
    fn depot_trims_one_magazine_per_period_down_to_cpus() {
        let mut m = mag(1 << 16, 1, 1);
        let pfns: Vec<u64> = (0..6)
            .map(|_| alloc(&mut m, C0, 1, 1 << 16).unwrap())
            .collect();
        for &p in &pfns {
            m.free(C0, Pfn::new(p), 1).unwrap();
        }
        // loaded + prev hold 2; the depot holds 4.
        assert_eq!(m.depot_magazines(), 4);
        let ms = |x: u64| Cycles::new(x * 1_000_000); // 1 GHz
        m.on_tick(ms(99), ClockRate::GHZ_1);
        assert_eq!(m.depot_magazines(), 4);
        m.on_tick(ms(100), ClockRate::GHZ_1);
        assert_eq!(m.depot_magazines(), 3);
        m.on_tick(ms(350), ClockRate::GHZ_1); // runs at 200 and 300 catch up
        assert_eq!(m.depot_magazines(), 1);
        m.on_tick(ms(1000), ClockRate::GHZ_1);
        assert_eq!(m.depot_magazines(), 1, "stops at num_online_cpus");
        assert_eq!(m.inner().stats().frees, 3);
    }

    /// When the backing allocator is exhausted, every cache is flushed into it and the
    /// allocation retried (`flush_rcache`).
    ///
    /// ```text
    /// pfn  1  2  3  4 | 5       all four cached on CPU 0; CPU 1 asks for 2 pages:
    ///        [b  b]   |         the flush empties CPU 0, b lands size-aligned at 2
    /// ```
    #[test]
    fn exhaustion_flushes_the_caches_and_retries() {
        let mut m = mag(5, 2, 127);
        let pfns: Vec<u64> = (0..4).map(|_| alloc(&mut m, C0, 1, 5).unwrap()).collect();
        assert_eq!(alloc(&mut m, C0, 1, 5), None);
        for &p in &pfns {
            m.free(C0, Pfn::new(p), 1).unwrap();
        }
        assert_eq!(m.cached_ranges(), 4);
        assert_eq!(alloc(&mut m, C1, 2, 5), Some(2));
        assert_eq!(m.cached_ranges(), 0);
        assert_eq!(m.stats().failures, 1);
        let m2 = m.into_inner();
        assert_eq!(m2.len(), 1);
    }

    /// Works over the bitmap too, and the name says so.
    #[test]
    fn wraps_a_bitmap() {
        let b = Bitmap::new(Pfn::new(1), Pfn::new(64)).unwrap();
        let mut m = Magazine::new(b, MagazineConfig::default()).unwrap();
        assert_eq!(m.name(), "magazine+bitmap");
        let a = m.alloc(C0, 1, Pfn::new(64)).unwrap();
        m.free(C0, a, 1).unwrap();
        assert_eq!(m.alloc(C0, 1, Pfn::new(64)).unwrap(), a);
        assert_eq!(m.metadata_bytes(), 8 + 12 * MAGAZINE_BYTES);
    }
}
