//! A small model of Linux's page allocator and of a kmalloc slab, shared by the generators
//! that need realistic physical buffers (netperf, Apache, block).
//!
//! What matters for IOMMU experiments is *which physical pages come back*: Yassour et al.
//! (S1.8, §4.1) note that "since the Linux memory allocator recycles pages, there is high
//! likelihood that the same guest pages will be reused for socket buffers", which is what
//! makes a map cache work. Linux keeps a per-CPU list of free order-0 pages (the `pcp`
//! lists): `free_pages` puts a page at the hot end, `alloc_pages` takes the hottest page, an
//! empty list is refilled with `batch` pages from the buddy allocator and a list longer than
//! `high` gives its `batch` coldest pages back. This model keeps exactly that: one LIFO stack
//! per CPU over a global stack of free pages (the buddy allocator, reduced to order 0).
//!
//! Deviations: only order-0 pages; the global pool is a stack rather than a buddy tree (its
//! initial order is either ascending addresses or a seeded shuffle — an aged, fragmented
//! memory — see [`PageAllocConfig::scatter`]); no zones, watermarks or reclaim: running out
//! of pages is a configuration error the generators check up front.
//!
//! [`Slab`] models a kmalloc cache (SLUB): fixed-size objects carved from pages of the page
//! allocator, freed objects reused LIFO; slab pages are never given back (the steady state
//! of a busy cache). All operations are `O(1)` amortised except the refill and drain of a
//! per-CPU list (`O(batch)`), and none allocates heap memory after construction (the stacks
//! are sized to the pool) except [`Slab`] growing its free list by one page's objects.

use rand::SeedableRng;
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use serde::{Deserialize, Serialize};

use iommulab_base::addr::{CpuId, Hpa, PAGE_4K};

/// Physical base of the modeled memory (1 GiB, like [`super::pseudo_scsi`]'s pool).
pub const MEMORY_BASE: u64 = 0x4000_0000;

/// Parameters of [`PageAllocator`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PageAllocConfig {
    /// 4 KiB pages of memory the allocator manages (default 65536 = 256 MiB, a quarter of
    /// Yassour's 1 GB guest, §4: plenty for every default workload).
    pub pages: u64,
    /// Pages moved between a per-CPU list and the global pool at once (Linux's `pcp->batch`,
    /// 31 on any zone above 128 MiB in 2.6.x–6.x).
    pub pcp_batch: u32,
    /// Length above which a per-CPU list gives `pcp_batch` cold pages back (Linux's
    /// `pcp->high` = 6 × batch = 186 in 2.6.x).
    pub pcp_high: u32,
    /// Start from a seeded shuffle of the pages (memory after uptime: consecutive allocations
    /// are scattered) instead of ascending addresses (a freshly booted buddy allocator).
    pub scatter: bool,
}

impl Default for PageAllocConfig {
    fn default() -> Self {
        Self {
            pages: 65_536,
            pcp_batch: 31,
            pcp_high: 186,
            scatter: true,
        }
    }
}

/// Order-0 page allocator with per-CPU LIFO free lists (see the module doc).
#[derive(Debug, Clone)]
pub struct PageAllocator {
    /// Free pages not on any per-CPU list, as page indices; `pop` takes the next one.
    global: Vec<u64>,
    /// Per-CPU free lists: the end of each `Vec` is the hot end.
    pcp: Vec<Vec<u64>>,
    batch: usize,
    high: usize,
}

impl PageAllocator {
    /// An allocator over `cfg.pages` pages starting at [`MEMORY_BASE`], with one per-CPU list
    /// per CPU in `0..cpus`; `seed` drives the initial shuffle when `cfg.scatter` is set.
    ///
    /// # Examples
    /// ```
    /// use iommulab_base::addr::CpuId;
    /// use iommulab_workload::page_alloc::{PageAllocConfig, PageAllocator};
    /// let mut a = PageAllocator::new(&PageAllocConfig::default(), 1, 7);
    /// let p = a.alloc(CpuId::new(0)).unwrap();
    /// a.free(CpuId::new(0), p);
    /// assert_eq!(a.alloc(CpuId::new(0)), Some(p)); // LIFO: the same page comes back
    /// ```
    pub fn new(cfg: &PageAllocConfig, cpus: u16, seed: u64) -> Self {
        let n = usize::try_from(cfg.pages).unwrap_or(usize::MAX);
        let mut global: Vec<u64> = (0..cfg.pages).rev().collect();
        if cfg.scatter {
            global.shuffle(&mut SmallRng::seed_from_u64(seed));
        }
        let batch = (cfg.pcp_batch as usize).max(1);
        let high = (cfg.pcp_high as usize).max(batch);
        let pcp = (0..cpus.max(1))
            .map(|_| Vec::with_capacity((high + batch + 1).min(n.saturating_add(1))))
            .collect();
        Self {
            global,
            pcp,
            batch,
            high,
        }
    }

    /// The hottest free page of `cpu`'s list (refilled from the global pool when empty, after
    /// draining all per-CPU lists back to it if it is empty too), or `None` when memory is
    /// exhausted.
    pub fn alloc(&mut self, cpu: CpuId) -> Option<Hpa> {
        let cpus = self.pcp.len();
        let me = cpu.index() % cpus;
        if self.pcp[me].is_empty() {
            if self.global.is_empty() {
                // Under memory pressure Linux drains every CPU's list (`drain_all_pages`).
                for list in &mut self.pcp {
                    self.global.extend(list.drain(..).rev());
                }
            }
            // Refill in the global pool's order: the first page taken is allocated first.
            let take = self.batch.min(self.global.len());
            let from = self.global.len() - take;
            self.pcp[me].extend(self.global.drain(from..));
        }
        self.pcp[me]
            .pop()
            .map(|page| Hpa::new(MEMORY_BASE + page * PAGE_4K.bytes()))
    }

    /// Frees `page` (any address inside it) to the hot end of `cpu`'s list; a list longer
    /// than `pcp_high` returns its `pcp_batch` coldest pages to the global pool.
    pub fn free(&mut self, cpu: CpuId, page: Hpa) {
        let cpus = self.pcp.len();
        let list = &mut self.pcp[cpu.index() % cpus];
        list.push((page.get() - MEMORY_BASE) >> PAGE_4K.shift());
        if list.len() > self.high {
            let n = self.batch.min(list.len());
            // The coldest pages go back to the global pool (the buddy allocator), where
            // the next refill of any CPU finds them.
            self.global.extend(list.drain(..n).rev());
        }
    }

    /// Free pages in all lists.
    pub fn free_pages(&self) -> u64 {
        let on_lists: usize = self.pcp.iter().map(Vec::len).sum();
        (self.global.len() + on_lists) as u64
    }
}

/// A kmalloc cache of `object` bytes per object (SLUB-like, see the module doc).
#[derive(Debug, Clone)]
pub struct Slab {
    object: u64,
    /// Free objects; the end is the most recently freed.
    free: Vec<Hpa>,
    pages: u64,
}

impl Slab {
    /// A cache of `object`-byte objects (rounded up to a power of two, at most a page, as
    /// kmalloc's size classes are).
    pub fn new(object: u64) -> Self {
        Self {
            object: object.clamp(8, PAGE_4K.bytes()).next_power_of_two(),
            free: Vec::new(),
            pages: 0,
        }
    }

    /// Object size in bytes.
    pub fn object_size(&self) -> u64 {
        self.object
    }

    /// Pages the cache took from the page allocator so far.
    pub fn pages(&self) -> u64 {
        self.pages
    }

    /// The most recently freed object, or a fresh one from a new slab page.
    pub fn alloc(&mut self, pages: &mut PageAllocator, cpu: CpuId) -> Option<Hpa> {
        if self.free.is_empty() {
            let page = pages.alloc(cpu)?;
            self.pages += 1;
            let per_page = PAGE_4K.bytes() / self.object;
            // Highest object first, so the lowest is handed out first.
            for i in (0..per_page).rev() {
                self.free.push(Hpa::new(page.get() + i * self.object));
            }
        }
        self.free.pop()
    }

    /// Gives `obj` back (LIFO).
    pub fn free(&mut self, obj: Hpa) {
        self.free.push(obj);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(pages: u64, scatter: bool) -> PageAllocConfig {
        PageAllocConfig {
            pages,
            pcp_batch: 4,
            pcp_high: 8,
            scatter,
        }
    }

    /// S1.8: a freed page is the next one allocated on the same CPU (per-CPU LIFO lists).
    #[test]
    fn freed_page_comes_back_first() {
        let mut a = PageAllocator::new(&cfg(64, true), 2, 3);
        let c = CpuId::new(1);
        let p = a.alloc(c).unwrap();
        let q = a.alloc(c).unwrap();
        a.free(c, q);
        a.free(c, p);
        assert_eq!(a.alloc(c), Some(p));
        assert_eq!(a.alloc(c), Some(q));
    }

    #[test]
    fn unscattered_memory_hands_out_ascending_pages() {
        let mut a = PageAllocator::new(&cfg(16, false), 1, 0);
        let got: Vec<u64> = (0..6)
            .map(|_| a.alloc(CpuId::new(0)).unwrap().get())
            .collect();
        let want: Vec<u64> = (0..6).map(|i| MEMORY_BASE + i * 4096).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn exhausts_then_recovers_every_page() {
        let mut a = PageAllocator::new(&cfg(20, true), 3, 9);
        let mut got = Vec::new();
        for i in 0..20u16 {
            got.push((i % 3, a.alloc(CpuId::new(i % 3)).unwrap()));
        }
        assert_eq!(a.alloc(CpuId::new(0)), None);
        let mut sorted: Vec<u64> = got.iter().map(|(_, p)| p.get()).collect();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), 20, "no page handed out twice");
        for (c, p) in got {
            a.free(CpuId::new(c), p);
        }
        assert_eq!(a.free_pages(), 20);
        // A long per-CPU list drained some pages back to the global pool.
        assert!(a.pcp.iter().all(|l| l.len() <= 8));
    }

    #[test]
    fn slab_packs_objects_and_reuses_lifo() {
        let mut a = PageAllocator::new(&cfg(8, false), 1, 0);
        let mut s = Slab::new(1000);
        assert_eq!(s.object_size(), 1024);
        let c = CpuId::new(0);
        let objs: Vec<Hpa> = (0..5).map(|_| s.alloc(&mut a, c).unwrap()).collect();
        assert_eq!(s.pages(), 2);
        assert_eq!(objs[1].get() - objs[0].get(), 1024);
        assert_eq!(objs[0].page_offset(PAGE_4K), 0);
        s.free(objs[2]);
        assert_eq!(s.alloc(&mut a, c), Some(objs[2]));
    }
}
