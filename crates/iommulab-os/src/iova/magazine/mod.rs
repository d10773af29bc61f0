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
//! allocates the rounded size from the backing allocator; if that is exhausted and the caller
//! set `flush_rcache` ([`Magazine::alloc_fast`]), every CPU's magazines and the depot are
//! flushed back into it and the allocation is retried once. dma-iommu sets it on its
//! full-mask attempt only (`iommu_dma_alloc_iova`): the first, below-4 GiB attempt for a
//! wide-mask PCI device fails without draining. [`IovaAllocator::alloc`] is the full-mask
//! attempt (`flush_rcache = true`).
//!
//! A cached pfn serves a request when `pfn + size <= limit` (exclusive limit), which is
//! Linux's bound exactly: `alloc_iova_fast` passes `limit_pfn + 1`, `iova_rcache_get`
//! subtracts the size, and `iova_magazine_pop` takes a pfn `<=` that.
//!
//! Deviations from Linux:
//! - magazines are recycled through a spare list instead of `kmem_cache`; magazine
//!   allocation never fails, so `free_iova_fast`'s fall-back to `free_iova` never happens;
//! - a CPU number at or above `cpus` shares the caches of `cpu % cpus`;
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
//!
//! A file per part: `config.rs` (the knobs), `cpu_caches.rs` (a magazine and one CPU's
//! `loaded`/`prev` pair), `depot.rs` (the full magazines per bin and their trim work), this
//! file (the allocator: `alloc_iova_fast`, `free_iova_fast`, the combined statistics) and
//! `control.rs` (what `iommulab validate` and tests need besides allocating: the caches read
//! in place, a cached range located, taken or adopted, a magazine moved, exact placement).

mod config;
mod control;
mod cpu_caches;
mod depot;

pub use config::{MAGAZINE_BYTES, MagazineConfig, MagazineConfigError};
pub use control::{CacheSite, CacheSnapshot, MagSlot, MoveError};
pub(crate) use cpu_caches::{CpuCaches, LocalGet};
pub(crate) use depot::Depot;

use super::{IovaAllocator, IovaError, IovaStats};
use iommulab_base::addr::{CpuId, Iova, Pfn};
use iommulab_base::clock::{ClockRate, Cycles};

/// Counts of [`Magazine`]'s inlined paths: one counter per operation instead of the four
/// or five [`IovaStats`] fields each implies (stores are what a hit costs).
#[derive(Debug, Clone, Copy, Default)]
struct FastCounts {
    /// Allocations served by the top of `loaded`: each one per-CPU lock, one allocation,
    /// one cache hit, one magazine pop.
    hits: u64,
    /// Frees pushed onto `loaded`: each one per-CPU lock, one free, one magazine push.
    frees: u64,
}

impl FastCounts {
    /// `view` with these counts added in.
    #[inline]
    fn add_to(self, mut view: IovaStats) -> IovaStats {
        view.allocs += self.hits;
        view.cache_hits += self.hits;
        view.frees += self.frees;
        view.magazine_ops += self.hits + self.frees;
        view.lock_acquisitions += self.hits + self.frees;
        view.cpu_locks += self.hits + self.frees;
        view
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
#[derive(Debug, Clone)]
pub struct Magazine<A> {
    inner: A,
    config: MagazineConfig,
    cpus: Vec<CpuCaches>,
    depot: Depot,
    /// The combined view `stats()` returns; own counters are bumped in place, the backing
    /// allocator's are copied in after every call into it.
    view: IovaStats,
    /// What the inlined hit and free paths did, kept apart from the view so that each
    /// bumps one counter (`stats()` adds them in).
    fast: FastCounts,
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
            depot: Depot::new(bins, config.mag_size, config.depot_delay_ms),
            inner,
            config,
            view: IovaStats::default(),
            fast: FastCounts::default(),
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
        self.view.cpu_locks += self.cpus.len() as u64;
        self.view.depot_locks += self.depot.full.len() as u64;
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

    /// `alloc_iova_fast(size, limit, flush_rcache)`: this CPU's caches, then the depot, then
    /// the backing allocator; when that is exhausted and `flush_rcache` is set, every cache
    /// is flushed into it and the allocation retried once. dma-iommu's first, below-4 GiB
    /// attempt for a wide-mask PCI device passes `false` (`iommu_dma_alloc_iova`), its
    /// full-mask attempt `true` ([`IovaAllocator::alloc`]).
    // `always`: left to itself the compiler calls this out of line and returns the
    // `Result` through memory; inlined, a hit pair costs 5.7 ns instead of 6.2 (the `iova`
    // bench, BENCHMARKS.md).
    #[inline(always)]
    pub fn alloc_fast(
        &mut self,
        cpu: CpuId,
        pages: u64,
        limit: Pfn<Iova>,
        flush_rcache: bool,
    ) -> Result<Pfn<Iova>, IovaError> {
        match self.loaded_hit(cpu, pages, limit) {
            Some(p) => Ok(p),
            None => self.alloc_slow(cpu, pages, limit, flush_rcache),
        }
    }

    /// The common case of [`Magazine::alloc_fast`], inlined into the caller: `loaded` holds
    /// a pfn and its top one is below the limit. `None` changes nothing; the whole path in
    /// [`Magazine::alloc_slow`] then decides (and takes the same hit or miss Linux would).
    #[inline(always)]
    fn loaded_hit(&mut self, cpu: CpuId, pages: u64, limit: Pfn<Iova>) -> Option<Pfn<Iova>> {
        let end = self.inner.space_end().get();
        let size = self.config.rounded_pages(pages);
        let bin = self.config.bin(size).filter(|_| pages > 0)?;
        let max_pfn = limit.get().min(end).checked_sub(size)?;
        let c = self.cpu_index(cpu);
        let p = self.cpus[c].pop_loaded_top(bin, max_pfn)?;
        self.fast.hits += 1;
        Some(Pfn::new(p))
    }

    /// [`Magazine::alloc_fast`] past its inlined hit: the swap with `prev`, a scan of
    /// `loaded`, the depot, the backing allocator.
    #[inline(never)]
    fn alloc_slow(
        &mut self,
        cpu: CpuId,
        pages: u64,
        limit: Pfn<Iova>,
        flush_rcache: bool,
    ) -> Result<Pfn<Iova>, IovaError> {
        let end = self.inner.space_end().get();
        if pages == 0 {
            return Err(IovaError::BadRequest { pages, space: end });
        }
        let size = self.config.rounded_pages(pages);
        if let Some(bin) = self.config.bin(size) {
            let c = self.cpu_index(cpu);
            self.own_locks += 1;
            self.view.lock_acquisitions += 1;
            self.view.cpu_locks += 1;
            if let Some(max_pfn) = limit.get().min(end).checked_sub(size) {
                let got = match self.cpus[c].get(bin, max_pfn) {
                    LocalGet::Hit(p) => Some(p),
                    LocalGet::Miss => None,
                    LocalGet::Empty => {
                        self.own_locks += 1;
                        self.view.lock_acquisitions += 1;
                        self.view.depot_locks += 1;
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
        self.backing_alloc(cpu, size, limit, flush_rcache)
    }

    /// Copies the backing allocator's counters into the view and updates the peak.
    fn sync(&mut self) {
        sync_view(&mut self.view, self.own_locks, &self.inner.stats());
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

    /// The backing-allocator path; on exhaustion, with `flush_rcache`, one flush of every
    /// cache and a retry.
    fn backing_alloc(
        &mut self,
        cpu: CpuId,
        size: u64,
        limit: Pfn<Iova>,
        flush_rcache: bool,
    ) -> Result<Pfn<Iova>, IovaError> {
        let mut r = self.inner.alloc(cpu, size, limit);
        if flush_rcache && matches!(r, Err(IovaError::Exhausted { .. })) {
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

    /// `free_iova_fast` past its inlined common case: a swap with `prev`, a full magazine to
    /// the depot, an uncached size, or a range outside the space.
    #[inline(never)]
    fn free_slow(&mut self, cpu: CpuId, pfn: Pfn<Iova>, pages: u64) -> Result<(), IovaError> {
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
        self.view.cpu_locks += 1;
        self.view.frees += 1;
        self.view.magazine_ops += 1;
        if !self.cpus[c].put(bin, p, self.config.mag_size) {
            self.own_locks += 1;
            self.view.lock_acquisitions += 1;
            self.view.depot_locks += 1;
            self.view.magazine_ops += 1;
            let empty = self.depot.empty_mag();
            let full = self.cpus[c].exchange(bin, empty, p);
            self.depot.push(bin, full);
            self.sync();
        }
        Ok(())
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
    /// `alloc_iova_fast(.., flush_rcache = true)`: the full-mask attempt of dma-iommu.
    #[inline(always)]
    fn alloc(&mut self, cpu: CpuId, pages: u64, limit: Pfn<Iova>) -> Result<Pfn<Iova>, IovaError> {
        Magazine::alloc_fast(self, cpu, pages, limit, true)
    }

    #[inline]
    fn alloc_fast(
        &mut self,
        cpu: CpuId,
        pages: u64,
        limit: Pfn<Iova>,
        flush_rcache: bool,
    ) -> Result<Pfn<Iova>, IovaError> {
        Magazine::alloc_fast(self, cpu, pages, limit, flush_rcache)
    }

    // `always`, as `alloc_fast`: the compiler otherwise calls it out of line from some
    // callers (`examples/iova_shapes`: 7.4 ns per hit pair, against 4.5–4.9 in `benches/iova.rs`).
    #[inline(always)]
    fn free(&mut self, cpu: CpuId, pfn: Pfn<Iova>, pages: u64) -> Result<(), IovaError> {
        // The common case inlined: a cached size, in the space, and room in `loaded`.
        let size = self.config.rounded_pages(pages);
        let p = pfn.get();
        if let Some(bin) = self.config.bin(size).filter(|_| pages > 0)
            && p != 0
            && p.checked_add(size)
                .is_some_and(|e| e <= self.inner.space_end().get())
        {
            let c = self.cpu_index(cpu);
            if self.cpus[c].push_loaded(bin, p, self.config.mag_size) {
                self.fast.frees += 1;
                return Ok(());
            }
        }
        self.free_slow(cpu, pfn, pages)
    }

    #[inline]
    fn on_tick(&mut self, now: Cycles, clock: ClockRate) {
        let Magazine {
            inner,
            depot,
            config,
            own_locks,
            ..
        } = self;
        let trimmed = depot.tick(now, clock, config.cpus, |bin, pfn| {
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

    fn stats(&self) -> IovaStats {
        self.fast.add_to(self.view)
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
        let s = m.stats();
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

    /// `alloc_iova_fast(.., flush_rcache = false)` (dma-iommu's first, below-4 GiB attempt)
    /// fails on exhaustion without draining any cache; with `true` it drains and retries.
    #[test]
    fn only_the_flush_rcache_attempt_drains() {
        let mut m = mag(5, 2, 127);
        let pfns: Vec<u64> = (0..4).map(|_| alloc(&mut m, C0, 1, 5).unwrap()).collect();
        for &p in &pfns {
            m.free(C0, Pfn::new(p), 1).unwrap();
        }
        assert!(m.alloc_fast(C1, 2, Pfn::new(5), false).is_err());
        assert_eq!(m.cached_ranges(), 4, "the first attempt does not drain");
        assert_eq!(m.alloc_fast(C1, 2, Pfn::new(5), true).map(Pfn::get), Ok(2));
        assert_eq!(m.cached_ranges(), 0);
    }

    /// `peek_alloc` predicts every allocation of a two-CPU churn, through loaded/prev swaps,
    /// depot exchanges, limits below cached pfns and exhaustion flushes, and changes nothing.
    #[test]
    fn peek_alloc_predicts_alloc_fast() {
        let mut m = mag(300, 2, 3);
        let mut live: Vec<(u64, u64)> = Vec::new();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for step in 0..6000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let cpu = CpuId::new(u16::from((x >> 40).is_multiple_of(2)));
            if !x.is_multiple_of(3) || live.is_empty() {
                let pages = 1 + (x >> 8) % 5;
                let limit = Pfn::new(if (x >> 20).is_multiple_of(4) {
                    150
                } else {
                    300
                });
                let flush = !(x >> 30).is_multiple_of(3);
                let (snap, stats) = (m.snapshot(), m.stats());
                let peek = m.peek_alloc(cpu, pages, limit, flush);
                assert_eq!((m.snapshot(), m.stats()), (snap, stats));
                let got = m.alloc_fast(cpu, pages, limit, flush).ok();
                assert_eq!(peek, got, "step {step}");
                if let Some(p) = got {
                    live.push((p.get(), pages));
                }
            } else {
                let i = usize::try_from((x >> 16) % live.len() as u64).unwrap();
                let (p, n) = live.swap_remove(i);
                m.free(cpu, Pfn::new(p), n).unwrap();
            }
        }
        assert!(m.stats().failures > 0 && m.stats().cache_hits > 0);
    }

    /// `locate` finds a cached range on this CPU (on top or not), on another CPU or in the
    /// depot; `take_cached` removes it from there and it stays allocated in the tree.
    #[test]
    fn locate_and_take_cached_ranges() {
        let mut m = mag(1024, 2, 2);
        let pfns: Vec<u64> = (0..6)
            .map(|_| alloc(&mut m, C0, 1, 1024).unwrap())
            .collect();
        for &p in &pfns[..5] {
            m.free(C0, Pfn::new(p), 1).unwrap();
        }
        m.free(C1, Pfn::new(pfns[5]), 1).unwrap();
        // CPU 0: loaded [p4], prev [p0 p1]; depot [p2 p3]; CPU 1: loaded [p5].
        let at = |m: &Magazine<RbTree>, cpu, i: usize| m.locate(cpu, Pfn::new(pfns[i]), 1);
        assert_eq!(at(&m, C0, 4), Some(CacheSite::Loaded { cpu: 0, top: true }));
        assert_eq!(at(&m, C0, 0), Some(CacheSite::Prev { cpu: 0 }));
        assert_eq!(at(&m, C0, 2), Some(CacheSite::Depot { index: 0 }));
        assert_eq!(at(&m, C0, 5), Some(CacheSite::Loaded { cpu: 1, top: true }));
        assert_eq!(m.locate(C0, Pfn::new(7), 1), None);
        assert_eq!(
            m.take_cached(C0, Pfn::new(pfns[2]), 1),
            Ok(CacheSite::Depot { index: 0 })
        );
        assert_eq!(
            m.take_cached(C0, Pfn::new(pfns[3]), 1),
            Ok(CacheSite::Depot { index: 0 })
        );
        assert_eq!(
            m.depot_magazines(),
            0,
            "the emptied depot magazine is recycled"
        );
        assert!(m.take_cached(C0, Pfn::new(pfns[3]), 1).is_err());
        assert_eq!(m.cached_ranges(), 4);
        assert_eq!(m.inner().len(), 6, "taken ranges stay allocated");
        assert!(m.overlapping(Pfn::new(pfns[3]), 1).is_some());
    }

    /// `adopt_cached` moves the whole magazine holding the range to the CPU's `loaded` slot
    /// (the depot's is handed over, the old `loaded` going to the depot; another CPU's is
    /// exchanged), or puts the range on top of `loaded` (the ranges above it go to the
    /// bottom), then takes the range: the next pop follows the adopted magazine.
    #[test]
    fn adopt_cached_takes_the_whole_magazine() {
        let mut m = mag(1024, 2, 2);
        let p: Vec<u64> = (0..6)
            .map(|_| alloc(&mut m, C0, 1, 1024).unwrap())
            .collect();
        for &x in &p[..5] {
            m.free(C0, Pfn::new(x), 1).unwrap();
        }
        m.free(C1, Pfn::new(p[5]), 1).unwrap();
        // CPU 0: loaded [p4], prev [p0 p1]; depot [[p2 p3]]; CPU 1: loaded [p5].
        assert_eq!(
            m.adopt_cached(C0, Pfn::new(p[2]), 1),
            Ok(CacheSite::Depot { index: 0 })
        );
        let s = m.snapshot();
        assert_eq!(s.cpus[0][0], [vec![p[3]], vec![p[0], p[1]]]);
        assert_eq!(
            s.depot[0],
            vec![vec![p[4]]],
            "the old loaded went to the depot"
        );
        assert_eq!(alloc(&mut m, C0, 1, 1024), Some(p[3]));
        // Another CPU's magazine is exchanged with this CPU's loaded (now empty).
        assert_eq!(
            m.adopt_cached(C0, Pfn::new(p[5]), 1),
            Ok(CacheSite::Loaded { cpu: 1, top: true })
        );
        let s = m.snapshot();
        assert_eq!((s.cpus[0][0][0].len(), s.cpus[1][0][0].len()), (0, 0));
        // Below the top of this CPU's loaded: the ranges above it go to the bottom.
        let mut m = mag(1024, 1, 4);
        let q: Vec<u64> = (0..3)
            .map(|_| alloc(&mut m, C0, 1, 1024).unwrap())
            .collect();
        for &x in &q {
            m.free(C0, Pfn::new(x), 1).unwrap();
        }
        assert_eq!(
            m.adopt_cached(C0, Pfn::new(q[0]), 1),
            Ok(CacheSite::Loaded { cpu: 0, top: false })
        );
        assert_eq!(m.snapshot().cpus[0][0][0], vec![q[1], q[2]]);
        assert_eq!(alloc(&mut m, C0, 1, 1024), Some(q[2]));
        assert_eq!(m.inner().len(), 3, "adopted ranges stay allocated");
        assert!(m.adopt_cached(C0, Pfn::new(q[0]), 1).is_err());
    }

    /// Magazines move between CPUs and the depot; a CPU slot must be empty to receive one.
    #[test]
    fn magazines_move_between_cpus_and_the_depot() {
        let mut m = mag(1024, 2, 4);
        let a = alloc(&mut m, C0, 1, 1024).unwrap();
        let b = alloc(&mut m, C0, 1, 1024).unwrap();
        m.free(C0, Pfn::new(a), 1).unwrap();
        m.free(C0, Pfn::new(b), 1).unwrap();
        m.move_magazine(0, MagSlot::Loaded(C0), MagSlot::Depot)
            .unwrap();
        assert_eq!(m.snapshot().depot[0], vec![vec![a, b]]);
        m.move_magazine(0, MagSlot::Depot, MagSlot::Prev(C1))
            .unwrap();
        assert_eq!(m.snapshot().cpus[1][0], [vec![], vec![a, b]]);
        assert_eq!(alloc(&mut m, C1, 1, 1024), Some(b), "CPU 1 swaps prev in");
        assert_eq!(
            m.move_magazine(0, MagSlot::Depot, MagSlot::Loaded(C0)),
            Err(MoveError::Empty(MagSlot::Depot))
        );
        assert_eq!(
            m.move_magazine(0, MagSlot::Loaded(C1), MagSlot::Loaded(C1)),
            Err(MoveError::Occupied(MagSlot::Loaded(C1)))
        );
        assert_eq!(
            m.move_magazine(9, MagSlot::Depot, MagSlot::Depot),
            Err(MoveError::NoBin(9))
        );
        let c = m.clone();
        assert_eq!(c.snapshot(), m.snapshot());
    }
}
