//! Allocators shared by several threads, for the multi-thread scaling benchmark (S0.5: "one
//! lock protects all of it"; the 4.7 rcache commit: the rbtree lock "becomes contended").
//!
//! - [`Locked`]: any allocator behind one `Mutex`, the single-lock design of Linux before 4.7
//!   (`iova_rbtree_lock` around every alloc and free).
//! - [`SharedMagazine`]: the per-CPU range caches of [`super::magazine`] with Linux's lock
//!   layout: one lock per CPU (`iova_cpu_rcache.lock`), one for the depots (`iova_rcache.lock`)
//!   and the backing allocator's own lock. The cache logic is the same code as
//!   [`super::Magazine`] ([`super::magazine`]'s `CpuCaches` and `Depot`); only the locking
//!   differs. Each lock sits on its own 128-byte line (two adjacent 64-byte lines, for the
//!   adjacent-line prefetcher) so CPUs do not false-share.
//!
//! Lock order, as in Linux: a CPU's lock, then the depot's, then the backing allocator's; the
//! backing lock is never held while taking another. Deviations: the depot is one lock for all
//! bins (Linux: one per bin); Linux spinlocks with IRQs off, this uses `std::sync::Mutex`.
//! Counters are plain `u64`s kept under the lock they describe (no atomics on the hot path)
//! and summed by `stats()`, which takes every lock.
//!
//! Complexity: as the single-threaded types; a cache hit takes one uncontended lock.

use std::sync::{Mutex, MutexGuard, PoisonError};

use super::magazine::{
    CpuCaches, Depot, LocalGet, MAGAZINE_BYTES, MagazineConfig, MagazineConfigError, combined_name,
    cpu_slot, sync_view,
};
use super::{IovaAllocator, IovaError, IovaStats};
use iommulab_base::addr::{CpuId, Iova, Pfn};
use iommulab_base::clock::{ClockRate, Cycles};

/// A value on its own 128-byte cache-line pair.
#[repr(align(128))]
#[derive(Debug)]
struct Padded<T>(T);

/// Locks `m`, ignoring poisoning: a panic in another thread already fails the run, and the
/// allocator state is consistent between calls.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// An allocator behind one lock (Linux before 4.7).
///
/// # Examples
///
/// ```
/// use iommulab_base::addr::{CpuId, Pfn};
/// use iommulab_os::iova::{Locked, RbTree};
///
/// let t = Locked::new(RbTree::new(Pfn::new(1), Pfn::new(1 << 20)).unwrap());
/// std::thread::scope(|s| {
///     for c in 0..2 {
///         let t = &t;
///         s.spawn(move || {
///             let p = t.alloc(CpuId::new(c), 1, Pfn::new(1 << 20)).unwrap();
///             t.free(CpuId::new(c), p, 1).unwrap();
///         });
///     }
/// });
/// assert_eq!(t.stats().allocs, 2);
/// ```
#[derive(Debug)]
pub struct Locked<A> {
    inner: Padded<Mutex<A>>,
}

impl<A: IovaAllocator> Locked<A> {
    /// Puts `inner` behind a lock.
    pub fn new(inner: A) -> Self {
        Locked {
            inner: Padded(Mutex::new(inner)),
        }
    }

    /// [`IovaAllocator::alloc`] under the lock.
    pub fn alloc(&self, cpu: CpuId, pages: u64, limit: Pfn<Iova>) -> Result<Pfn<Iova>, IovaError> {
        lock(&self.inner.0).alloc(cpu, pages, limit)
    }

    /// [`IovaAllocator::free`] under the lock.
    pub fn free(&self, cpu: CpuId, pfn: Pfn<Iova>, pages: u64) -> Result<(), IovaError> {
        lock(&self.inner.0).free(cpu, pfn, pages)
    }

    /// [`IovaAllocator::on_tick`] under the lock.
    pub fn on_tick(&self, now: Cycles, clock: ClockRate) {
        lock(&self.inner.0).on_tick(now, clock);
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> IovaStats {
        lock(&self.inner.0).stats()
    }

    /// The inner allocator's name.
    pub fn name(&self) -> &'static str {
        lock(&self.inner.0).name()
    }

    /// The inner allocator.
    pub fn into_inner(self) -> A {
        self.inner
            .0
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// One CPU's caches and the counters of what happened under its lock.
#[derive(Debug)]
struct CpuSlot {
    caches: CpuCaches,
    stats: IovaStats,
}

/// The backing allocator and the counters of what happened under its lock.
#[derive(Debug)]
struct Backing<A> {
    alloc: A,
    stats: IovaStats,
}

/// Per-CPU range caches usable from many threads through `&self` (see the module doc).
///
/// # Examples
///
/// ```
/// use iommulab_base::addr::{CpuId, Pfn};
/// use iommulab_os::iova::{MagazineConfig, RbTree, SharedMagazine};
///
/// let tree = RbTree::new(Pfn::new(1), Pfn::new(1 << 20)).unwrap();
/// let cfg = MagazineConfig { cpus: 2, ..MagazineConfig::default() };
/// let m = SharedMagazine::new(tree, cfg).unwrap();
/// std::thread::scope(|s| {
///     for c in 0..2 {
///         let m = &m;
///         s.spawn(move || {
///             for _ in 0..1000 {
///                 let p = m.alloc(CpuId::new(c), 1, Pfn::new(1 << 20)).unwrap();
///                 m.free(CpuId::new(c), p, 1).unwrap();
///             }
///         });
///     }
/// });
/// let s = m.stats();
/// assert_eq!((s.allocs, s.cache_misses), (2000, 2));
/// ```
#[derive(Debug)]
pub struct SharedMagazine<A> {
    cpus: Box<[Padded<Mutex<CpuSlot>>]>,
    depot: Padded<Mutex<Depot>>,
    backing: Padded<Mutex<Backing<A>>>,
    config: MagazineConfig,
    end: u64,
    name: &'static str,
}

impl<A: IovaAllocator> SharedMagazine<A> {
    /// Caches over `inner`, with `config` validated.
    pub fn new(inner: A, config: MagazineConfig) -> Result<Self, MagazineConfigError> {
        config.validate()?;
        let bins = config.bins();
        Ok(SharedMagazine {
            cpus: (0..config.cpus)
                .map(|_| {
                    Padded(Mutex::new(CpuSlot {
                        caches: CpuCaches::new(bins, config.mag_size),
                        stats: IovaStats::default(),
                    }))
                })
                .collect(),
            depot: Padded(Mutex::new(Depot::new(
                bins,
                config.mag_size,
                config.depot_delay_ms,
            ))),
            end: inner.space_end().get(),
            name: combined_name(inner.name()),
            backing: Padded(Mutex::new(Backing {
                alloc: inner,
                stats: IovaStats::default(),
            })),
            config,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &MagazineConfig {
        &self.config
    }

    /// A name like `magazine+rbtree`.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The exclusive top of the space.
    pub fn space_end(&self) -> Pfn<Iova> {
        Pfn::new(self.end)
    }

    /// [`IovaAllocator::alloc`] through CPU `cpu`'s caches.
    pub fn alloc(&self, cpu: CpuId, pages: u64, limit: Pfn<Iova>) -> Result<Pfn<Iova>, IovaError> {
        if pages == 0 {
            return Err(IovaError::BadRequest {
                pages,
                space: self.end,
            });
        }
        let size = self.config.rounded_pages(pages);
        if let Some(bin) = self.config.bin(size) {
            let mut slot = lock(&self.cpus[cpu_slot(cpu, self.cpus.len())].0);
            let slot = &mut *slot;
            slot.stats.lock_acquisitions += 1;
            if let Some(max_pfn) = limit.get().min(self.end).checked_sub(size) {
                let got = match slot.caches.get(bin, max_pfn) {
                    LocalGet::Hit(p) => Some(p),
                    LocalGet::Miss => None,
                    LocalGet::Empty => {
                        let mut depot = lock(&self.depot.0);
                        slot.stats.lock_acquisitions += 1;
                        match depot.pop(bin) {
                            Some(full) => {
                                slot.stats.magazine_ops += 1;
                                let (empty, got) = slot.caches.install(bin, full, max_pfn);
                                depot.recycle(empty);
                                got
                            }
                            None => None,
                        }
                    }
                };
                if let Some(p) = got {
                    slot.stats.allocs += 1;
                    slot.stats.cache_hits += 1;
                    slot.stats.magazine_ops += 1;
                    return Ok(Pfn::new(p));
                }
            }
            slot.stats.cache_misses += 1;
        }
        let r = self.backing_alloc(cpu, size, limit);
        if matches!(r, Err(IovaError::Exhausted { .. })) {
            self.drain();
            return self.backing_alloc(cpu, size, limit).inspect_err(|e| {
                if matches!(e, IovaError::Exhausted { .. }) {
                    lock(&self.backing.0).stats.failures += 1;
                }
            });
        }
        r
    }

    fn backing_alloc(
        &self,
        cpu: CpuId,
        size: u64,
        limit: Pfn<Iova>,
    ) -> Result<Pfn<Iova>, IovaError> {
        let mut b = lock(&self.backing.0);
        let r = b.alloc.alloc(cpu, size, limit);
        if r.is_ok() {
            b.stats.allocs += 1;
        }
        r
    }

    /// [`IovaAllocator::free`] into CPU `cpu`'s caches (same checks as [`super::Magazine`]).
    pub fn free(&self, cpu: CpuId, pfn: Pfn<Iova>, pages: u64) -> Result<(), IovaError> {
        let size = self.config.rounded_pages(pages);
        let Some(bin) = self.config.bin(size).filter(|_| pages > 0) else {
            let mut b = lock(&self.backing.0);
            let r = b.alloc.free(cpu, pfn, pages);
            if r.is_ok() {
                b.stats.frees += 1;
            }
            return r;
        };
        let p = pfn.get();
        if p == 0 || p.checked_add(size).is_none_or(|e| e > self.end) {
            return Err(IovaError::NotAllocated { pfn: p, pages });
        }
        let mut slot = lock(&self.cpus[cpu_slot(cpu, self.cpus.len())].0);
        let slot = &mut *slot;
        slot.stats.lock_acquisitions += 1;
        slot.stats.frees += 1;
        slot.stats.magazine_ops += 1;
        if !slot.caches.put(bin, p, self.config.mag_size) {
            let mut depot = lock(&self.depot.0);
            slot.stats.lock_acquisitions += 1;
            slot.stats.magazine_ops += 1;
            let empty = depot.empty_mag();
            let full = slot.caches.exchange(bin, empty, p);
            depot.push(bin, full);
        }
        Ok(())
    }

    /// Runs the depot trim work that has come due (see [`super::Magazine`]).
    pub fn on_tick(&self, now: Cycles, clock: ClockRate) {
        let mut depot = lock(&self.depot.0);
        let mut b = lock(&self.backing.0);
        let Backing { alloc, stats } = &mut *b;
        if depot.tick(now, clock, self.config.cpus, |bin, pfn| {
            let _ = alloc.free(CpuId::new(0), Pfn::new(pfn), 1 << bin);
        }) {
            stats.lock_acquisitions += 1;
        }
        alloc.on_tick(now, clock);
    }

    /// Returns every cached range to the backing allocator (Linux's `flush_rcache`).
    pub fn drain(&self) {
        for (c, slot) in self.cpus.iter().enumerate() {
            let mut slot = lock(&slot.0);
            slot.stats.lock_acquisitions += 1;
            let mut b = lock(&self.backing.0);
            let cpu = CpuId::new(u16::try_from(c).unwrap_or(u16::MAX));
            slot.caches.drain(|bin, pfn| {
                let _ = b.alloc.free(cpu, Pfn::new(pfn), 1 << bin);
            });
        }
        let mut depot = lock(&self.depot.0);
        let mut b = lock(&self.backing.0);
        b.stats.lock_acquisitions += 1;
        depot.drain(|bin, pfn| {
            let _ = b.alloc.free(CpuId::new(0), Pfn::new(pfn), 1 << bin);
        });
    }

    /// Ranges held in per-CPU magazines and the depot.
    pub fn cached_ranges(&self) -> usize {
        let cpus: usize = self.cpus.iter().map(|s| lock(&s.0).caches.cached()).sum();
        cpus + lock(&self.depot.0).cached()
    }

    /// The combined counters, as [`super::Magazine`] presents them. The peak metadata is an
    /// upper bound: the backing allocator's peak plus every magazine at the depot's peak.
    pub fn stats(&self) -> IovaStats {
        let mut view = IovaStats::default();
        for s in self.cpus.iter() {
            view.merge(&lock(&s.0).stats);
        }
        let depot_peak = lock(&self.depot.0).peak_held();
        let b = lock(&self.backing.0);
        view.merge(&b.stats);
        let own_locks = view.lock_acquisitions;
        sync_view(&mut view, own_locks, &b.alloc.stats());
        let mags = 2 * self.cpus.len() as u64 * self.config.bins() as u64 + depot_peak;
        view.peak_metadata_bytes = b.alloc.stats().peak_metadata_bytes + mags * MAGAZINE_BYTES;
        view
    }

    /// Bytes of metadata held now: the backing allocator's plus 1024 per magazine.
    pub fn metadata_bytes(&self) -> u64 {
        let held = lock(&self.depot.0).held();
        let mags = 2 * self.cpus.len() as u64 * self.config.bins() as u64 + held;
        lock(&self.backing.0).alloc.metadata_bytes() + mags * MAGAZINE_BYTES
    }

    /// Flushes the caches and returns the backing allocator.
    pub fn into_inner(self) -> A {
        self.drain();
        self.backing
            .0
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner)
            .alloc
    }
}
