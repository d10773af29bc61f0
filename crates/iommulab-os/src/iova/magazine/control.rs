//! The magazine caches beyond allocating and freeing: [`RangeControl`]'s counterparts
//! (`reserve`, `place`, `overlapping`, `peek_alloc`) and what a model adopting a kernel's
//! choices needs (`iommulab validate`'s one step, tests): where a cached range sits, taking
//! or adopting it, moving a whole magazine, a snapshot of every cached pfn.

use std::mem;

use serde::{Deserialize, Serialize};

use super::Magazine;
use super::cpu_caches::Mag;
use crate::iova::{IovaAllocator, IovaError, RangeControl};
use iommulab_base::addr::{CpuId, Iova, Pfn};

/// Where a cached range sits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "in")]
pub enum CacheSite {
    /// A CPU's `loaded` magazine; `top` when it is the pfn the next pop would take.
    Loaded {
        /// The CPU (cache index).
        cpu: u16,
        /// Whether it is on top (the last pushed).
        top: bool,
    },
    /// A CPU's `prev` magazine.
    Prev {
        /// The CPU (cache index).
        cpu: u16,
    },
    /// A full magazine in the depot (`index` 0 is the bottom; the last is popped first).
    Depot {
        /// Position in the depot's list.
        index: usize,
    },
}

/// A magazine slot, for [`Magazine::move_magazine`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MagSlot {
    /// A CPU's `loaded` magazine.
    Loaded(CpuId),
    /// A CPU's `prev` magazine.
    Prev(CpuId),
    /// The top of the depot (taking pops it, putting pushes).
    Depot,
}

/// Why a magazine could not be moved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MoveError {
    /// The bin does not exist.
    #[error("no size bin {0}")]
    NoBin(usize),
    /// The CPU has no caches.
    #[error("no CPU cache {0}")]
    NoCpu(usize),
    /// Nothing to take: an empty CPU magazine or an empty depot.
    #[error("nothing to move from {0:?}")]
    Empty(MagSlot),
    /// The destination CPU slot holds ranges (the depot takes any number).
    #[error("destination {0:?} is not empty")]
    Occupied(MagSlot),
}

/// Every cached pfn, by place: for tests, debugging and comparing two allocators.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheSnapshot {
    /// Per CPU, per bin: `[loaded, prev]`, bottom to top.
    pub cpus: Vec<Vec<[Vec<u64>; 2]>>,
    /// Per bin: the depot's magazines, bottom to top.
    pub depot: Vec<Vec<Vec<u64>>>,
}

impl<A: IovaAllocator> Magazine<A> {
    /// Reserves `[pfn, pfn + pages)` in the backing allocator (`reserve_iova`).
    pub fn reserve(&mut self, pfn: Pfn<Iova>, pages: u64) -> Result<(), IovaError>
    where
        A: RangeControl,
    {
        let r = self.inner.reserve(pfn, pages);
        self.sync();
        r
    }

    /// What [`Magazine::alloc_fast`] would return, changing nothing. The cache path is read
    /// in place; where the backing allocator would be exhausted and `flush_rcache` would
    /// flush, the answer comes from running the allocation on a clone (`O(state)`, rare).
    pub fn peek_alloc(
        &self,
        cpu: CpuId,
        pages: u64,
        limit: Pfn<Iova>,
        flush_rcache: bool,
    ) -> Option<Pfn<Iova>>
    where
        A: RangeControl,
    {
        if pages == 0 {
            return None;
        }
        let end = self.inner.space_end().get();
        let size = self.config.rounded_pages(pages);
        if let Some(bin) = self.config.bin(size)
            && let Some(max_pfn) = limit.get().min(end).checked_sub(size)
        {
            let [loaded, prev] = &self.cpus[self.cpu_index(cpu)].bins[bin];
            let from = if !loaded.pfns.is_empty() {
                Some(loaded)
            } else if !prev.pfns.is_empty() {
                Some(prev)
            } else {
                self.depot.full[bin].last()
            };
            if let Some(p) = from.and_then(|m| m.peek(max_pfn)) {
                return Some(Pfn::new(p));
            }
        }
        match self.inner.peek_alloc(size, limit) {
            Some(p) => Some(p),
            None if flush_rcache && self.cached_ranges() > 0 => {
                let mut c = self.clone();
                c.alloc_fast(cpu, pages, limit, true).ok()
            }
            None => None,
        }
    }

    /// Where `[pfn, pfn + pages)` sits in the caches: the CPU `cpu`'s own magazines first,
    /// then the other CPUs', then the depot. `None` when it is not cached.
    pub fn locate(&self, cpu: CpuId, pfn: Pfn<Iova>, pages: u64) -> Option<CacheSite> {
        let bin = self.config.bin(self.config.rounded_pages(pages))?;
        let p = pfn.get();
        let n = self.cpus.len();
        let first = self.cpu_index(cpu);
        for c in (0..n).map(|i| (first + i) % n) {
            let [loaded, prev] = &self.cpus[c].bins[bin];
            if let Some(i) = loaded.pfns.iter().rposition(|&x| x == p) {
                return Some(CacheSite::Loaded {
                    cpu: u16::try_from(c).unwrap_or(u16::MAX),
                    top: i + 1 == loaded.pfns.len(),
                });
            }
            if prev.pfns.contains(&p) {
                return Some(CacheSite::Prev {
                    cpu: u16::try_from(c).unwrap_or(u16::MAX),
                });
            }
        }
        let index = self.depot.full[bin]
            .iter()
            .rposition(|m| m.pfns.contains(&p))?;
        Some(CacheSite::Depot { index })
    }

    /// Where `[pfn, pfn + pages)` is cached and its size bin; [`IovaError::NotFree`] when it
    /// is not cached (or has no bin).
    fn cached_at(
        &self,
        cpu: CpuId,
        pfn: Pfn<Iova>,
        pages: u64,
    ) -> Result<(CacheSite, usize), IovaError> {
        let not_cached = || IovaError::NotFree {
            pfn: pfn.get(),
            pages,
        };
        let site = self.locate(cpu, pfn, pages).ok_or_else(not_cached)?;
        let bin = self
            .config
            .bin(self.config.rounded_pages(pages))
            .ok_or_else(not_cached)?;
        Ok((site, bin))
    }

    /// Takes `[pfn, pfn + pages)` out of the caches wherever [`Magazine::locate`] finds it
    /// (swap-removed, as `iova_magazine_pop` takes a pfn below the top), as if it had just
    /// been allocated from there; a depot magazine left empty is recycled. The range stays
    /// allocated in the backing allocator. [`IovaError::NotFree`] when it is not cached.
    pub fn take_cached(
        &mut self,
        cpu: CpuId,
        pfn: Pfn<Iova>,
        pages: u64,
    ) -> Result<CacheSite, IovaError> {
        let (site, bin) = self.cached_at(cpu, pfn, pages)?;
        let p = pfn.get();
        let take = |m: &mut Mag| {
            if let Some(i) = m.pfns.iter().rposition(|&x| x == p) {
                m.pfns.swap_remove(i);
            }
        };
        match site {
            CacheSite::Loaded { cpu: c, .. } => take(&mut self.cpus[usize::from(c)].bins[bin][0]),
            CacheSite::Prev { cpu: c } => take(&mut self.cpus[usize::from(c)].bins[bin][1]),
            CacheSite::Depot { index } => {
                let m = &mut self.depot.full[bin][index];
                take(m);
                if m.pfns.is_empty() {
                    let m = self.depot.full[bin].remove(index);
                    self.depot.held -= 1;
                    self.depot.recycle(m);
                }
            }
        }
        self.view.allocs += 1;
        self.view.cache_hits += 1;
        self.view.magazine_ops += 1;
        Ok(site)
    }

    /// [`Magazine::take_cached`] at magazine granularity, for a model adopting a kernel's
    /// choice (`iommulab validate`'s one step): the magazine holding `[pfn, pfn + pages)`
    /// becomes `cpu`'s `loaded` one, then the range is taken from it as `iova_magazine_pop`
    /// takes a pfn. A kernel CPU only ever allocates from its own magazines, so when the
    /// model holds the kernel's pick elsewhere, the whole magazine is what the model got
    /// wrong: the depot's is handed over as `__iova_rcache_get` does (`cpu`'s old `loaded`,
    /// if it holds ranges, goes to the depot), another CPU's is exchanged with `cpu`'s
    /// `loaded`, and `cpu`'s own `prev` is swapped in. Nothing is freed or lost.
    pub fn adopt_cached(
        &mut self,
        cpu: CpuId,
        pfn: Pfn<Iova>,
        pages: u64,
    ) -> Result<CacheSite, IovaError> {
        let (site, bin) = self.cached_at(cpu, pfn, pages)?;
        let c = self.cpu_index(cpu);
        match site {
            CacheSite::Loaded { cpu: o, top } if usize::from(o) == c => {
                if !top {
                    // The kernel popped the top of its `loaded`: the ranges the model holds
                    // above it were not there; they go to the bottom, still cached.
                    let m = &mut self.cpus[c].bins[bin][0].pfns;
                    if let Some(i) = m.iter().rposition(|&x| x == pfn.get()) {
                        let above = m.len() - 1 - i;
                        m.rotate_right(above);
                    }
                }
            }
            CacheSite::Prev { cpu: o } if usize::from(o) == c => self.cpus[c].bins[bin].swap(0, 1),
            CacheSite::Loaded { cpu: o, .. } | CacheSite::Prev { cpu: o } => {
                let slot = usize::from(matches!(site, CacheSite::Prev { .. }));
                let theirs =
                    mem::replace(&mut self.cpus[usize::from(o)].bins[bin][slot], Mag::new(0));
                let ours = mem::replace(&mut self.cpus[c].bins[bin][0], theirs);
                self.cpus[usize::from(o)].bins[bin][slot] = ours;
            }
            CacheSite::Depot { index } => {
                let m = self.depot.full[bin].remove(index);
                self.depot.held -= 1;
                let old = mem::replace(&mut self.cpus[c].bins[bin][0], m);
                if old.pfns.is_empty() {
                    self.depot.recycle(old);
                } else {
                    self.depot.push(bin, old);
                }
            }
        }
        let p = pfn.get();
        let loaded = &mut self.cpus[c].bins[bin][0];
        if let Some(i) = loaded.pfns.iter().rposition(|&x| x == p) {
            loaded.pfns.swap_remove(i);
        }
        self.view.allocs += 1;
        self.view.cache_hits += 1;
        self.view.magazine_ops += 1;
        self.sync();
        Ok(site)
    }

    /// Moves one magazine of size bin `bin` from `from` to `to`: a CPU slot gives up its
    /// magazine (an empty one takes its place) and must be empty to receive one; the depot
    /// gives its top magazine and takes any. What Linux does on `__iova_rcache_insert`'s
    /// depot push, `__iova_rcache_get`'s depot pop, and CPU hot-unplug, as one operation.
    pub fn move_magazine(
        &mut self,
        bin: usize,
        from: MagSlot,
        to: MagSlot,
    ) -> Result<(), MoveError> {
        if bin >= self.config.bins() {
            return Err(MoveError::NoBin(bin));
        }
        for slot in [from, to] {
            if let MagSlot::Loaded(c) | MagSlot::Prev(c) = slot
                && c.index() >= self.cpus.len()
            {
                return Err(MoveError::NoCpu(c.index()));
            }
        }
        let is_empty = |m: &Magazine<A>, s: MagSlot| match s {
            MagSlot::Loaded(c) => m.cpus[c.index()].bins[bin][0].pfns.is_empty(),
            MagSlot::Prev(c) => m.cpus[c.index()].bins[bin][1].pfns.is_empty(),
            MagSlot::Depot => m.depot.full[bin].is_empty(),
        };
        if is_empty(self, from) {
            return Err(MoveError::Empty(from));
        }
        if to != MagSlot::Depot && !is_empty(self, to) {
            return Err(MoveError::Occupied(to));
        }
        let moved = match from {
            MagSlot::Loaded(c) => {
                let e = self.depot.empty_mag();
                mem::replace(&mut self.cpus[c.index()].bins[bin][0], e)
            }
            MagSlot::Prev(c) => {
                let e = self.depot.empty_mag();
                mem::replace(&mut self.cpus[c.index()].bins[bin][1], e)
            }
            MagSlot::Depot => self.depot.pop(bin).ok_or(MoveError::Empty(from))?,
        };
        match to {
            MagSlot::Loaded(c) => {
                let old = mem::replace(&mut self.cpus[c.index()].bins[bin][0], moved);
                self.depot.recycle(old);
            }
            MagSlot::Prev(c) => {
                let old = mem::replace(&mut self.cpus[c.index()].bins[bin][1], moved);
                self.depot.recycle(old);
            }
            MagSlot::Depot => self.depot.push(bin, moved),
        }
        self.view.magazine_ops += 1;
        self.sync();
        Ok(())
    }

    /// Every cached pfn, by CPU, bin and magazine, and the depot's.
    pub fn snapshot(&self) -> CacheSnapshot {
        CacheSnapshot {
            cpus: self
                .cpus
                .iter()
                .map(|c| {
                    c.bins
                        .iter()
                        .map(|[l, p]| [l.pfns.clone(), p.pfns.clone()])
                        .collect()
                })
                .collect(),
            depot: self
                .depot
                .full
                .iter()
                .map(|b| b.iter().map(|m| m.pfns.clone()).collect())
                .collect(),
        }
    }

    /// Allocates exactly `[pfn, pfn + pages)` (rounded as an allocation of `pages` is) in the
    /// backing allocator, bypassing the caches: see [`RangeControl::place`].
    pub fn place(&mut self, pfn: Pfn<Iova>, pages: u64) -> Result<(), IovaError>
    where
        A: RangeControl,
    {
        let r = self.inner.place(pfn, self.config.rounded_pages(pages));
        if r.is_ok() {
            self.view.allocs += 1;
        }
        self.sync();
        r
    }

    /// The backing allocator's live or reserved range overlapping `[pfn, pfn + pages)`
    /// (rounded); cached ranges are live there too.
    pub fn overlapping(&self, pfn: Pfn<Iova>, pages: u64) -> Option<(Pfn<Iova>, u64)>
    where
        A: RangeControl,
    {
        self.inner
            .overlapping(pfn, self.config.rounded_pages(pages))
    }
}
