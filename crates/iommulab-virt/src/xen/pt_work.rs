//! A page-table allocation and a free broken into the steps Linux 3.2 (i386 PAE, Xen PV) and
//! Xen 4.2 perform (S3.1, S3.3–S3.4), counted per level so their time is counts × prices and
//! any price can be varied after a run (the page's sensitivity table).
//!
//! Allocation from the page allocator (no pool, or the pool empty):
//!
//! | step | where | counted in |
//! |---|---|---|
//! | take a page | `__get_free_page` (per-CPU list) | `page_alloc` |
//! | clear it | `__GFP_ZERO` / `clear_page` | `zero` |
//! | PGD only: kernel entries, `pgd_list`, the kernel PMD copy | `pgd_ctor`, `pgd_prepopulate_pmd` | `pgd_ctor` |
//! | map it read-only in the kernel's direct map | `make_lowmem_page_readonly` → `update_va_mapping` | `make_readonly` |
//! | pin (PTE pages and the PGD: `MMUEXT_PIN_L1/L3_TABLE`; a PMD is validated through its PGD) | `xen_pin_page`, `xen_do_pin` | `pin` |
//! | Xen's validation walk of every entry | `alloc_page_type` → `alloc_l1/l2/l3_table` | `validated_entries` |
//! | the type change writable → table: I/O PTE cleared, Xen's IOTLB flush called | `_get_page_type` → `iommu_unmap_page` → `dma_pte_clear_one` → `flush_iotlb_qi` | `iommu_unmap` |
//! | its page-selective invalidation, queued and waited for, where Xen performs it (not in S3.5's 4.2.1: [`UnmapFlush`]) | `queue_invalidate_iotlb`, `invalidate_sync` | `iotlb_invalidate` |
//!
//! Free to the page allocator: unpin (`MMUEXT_UNPIN_TABLE`; PMDs through their PGD), Xen's
//! devalidation walk (`__put_page_type` clears `PGT_validated` at type count 0 and calls
//! `free_page_type`), the direct map made writable again (`update_va_mapping` →
//! `get_page_type(writable)` → `iommu_map_page`, whose `flush_iotlb_qi` call returns at once:
//! a non-present entry is not cached without caching mode), the page freed (a PGD first runs
//! `pgd_dtor`, pool or not).
//!
//! With the IOSUP pool (S3.4) a freed table keeps its type: the page is never made writable,
//! so no type change, no I/O unmap or remap, no allocator and no clearing (its entries were
//! cleared when the process's mappings were torn down). It is still unpinned at exit and
//! pinned again at reuse, and Xen still devalidates and revalidates it: Xen drops
//! `PGT_validated` whenever a table's type count reaches 0 (Xen 4.2 `__put_page_type`), and
//! Linux unpins a process's tables in `xen_exit_mmap` before its free functions run.
//! [`PoolKeeps::Pin`] is the other reading (a pool that also keeps the pin and so the
//! validation), for the page's comparison.
//!
//! **Where each step runs.** S3.5 times the allocation and free *functions* (`pgd_alloc()`,
//! `pgd_free()` and their kin), and Linux 3.2 does much of a table's Xen work elsewhere:
//!
//! - `pgd_alloc` takes the PGD and its four PMDs (`preallocate_pmds`) before the new mm is
//!   pinned, and so does `copy_page_range` at fork and exec's first stack page
//!   (`get_arg_page`): those tables are made read-only, pinned and validated later, when
//!   `xen_dup_mmap` or `xen_activate_mm` pins the whole tree (`xen_pgd_pin`). A PTE page
//!   allocated once the mm is pinned (a fault in a running process) is pinned at once by the
//!   allocation's own hook (`__pte_alloc` → `xen_alloc_pte` → `xen_alloc_ptpage`).
//! - `exit_mmap` calls `arch_exit_mmap` → `xen_exit_mmap` → `xen_pgd_unpin` *before*
//!   `free_pgtables` and `pgd_free`: the unpin, Xen's devalidation and the direct map made
//!   writable again (with its I/O remap) all happen there, so at exit the free functions
//!   find the table unpinned (`xen_release_ptpage` does nothing) and only free it.
//!
//! [`alloc_steps_at`] and [`free_steps_at_exit`] split a table's steps between the
//! functions and those mm-wide passes; the pool's own shrink, inside the free path, stays
//! in the functions.

use serde::{Deserialize, Serialize};

use iommulab_hw::cost::PriceSource;

use super::iosup::PtLevel;
use super::{UnmapFlush, XenPvCosts};

/// What a pooled page keeps (S3.4 says "its type"; see the module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PoolKeeps {
    /// The type only: unpinned at exit and pinned (revalidated) at reuse, as Linux's exit
    /// path and Xen 4.2's type counts make it.
    #[default]
    Type,
    /// The type and the pin: neither unpinned nor revalidated (a pool outside Linux's
    /// exit path; the other reading).
    Pin,
}

/// How many times each step ran (one level, or summed).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepCounts {
    /// Pages taken from the page allocator.
    pub page_alloc: u64,
    /// Pages cleared.
    pub zero: u64,
    /// PGD constructors (paid from the pool too).
    pub pgd_ctor: u64,
    /// Direct-map entries made read-only.
    pub make_readonly: u64,
    /// Pin hypercalls.
    pub pin: u64,
    /// Entries Xen validated.
    pub validated_entries: u64,
    /// I/O PTEs cleared, each with a call of Xen's IOTLB flush.
    pub iommu_unmap: u64,
    /// Of those, the page-selective invalidations performed and waited for.
    #[serde(default)]
    pub iotlb_invalidate: u64,
    /// Tables taken from a pool.
    pub pool_pop: u64,
    /// Unpin hypercalls.
    pub unpin: u64,
    /// Entries Xen devalidated.
    pub devalidated_entries: u64,
    /// Direct-map entries made writable again.
    pub make_writable: u64,
    /// I/O PTEs set back (`flush_iotlb_qi` called, returning at once).
    pub iommu_remap: u64,
    /// PGD destructors (paid into the pool too).
    #[serde(default)]
    pub pgd_dtor: u64,
    /// Pages given back to the page allocator.
    pub page_free: u64,
    /// Tables put into a pool.
    pub pool_push: u64,
}

impl StepCounts {
    /// Cycles of the allocation steps at `c`'s prices.
    pub fn alloc_cycles(&self, c: &XenPvCosts) -> u64 {
        self.page_alloc * c.page_alloc
            + self.zero * c.zero_page
            + self.pgd_ctor * c.pgd_ctor
            + self.make_readonly * c.kernel_remap
            + self.pin * c.hypercall
            + self.validated_entries * c.validate_entry
            + self.iommu_unmap * c.iommu_unmap
            + self.iotlb_invalidate * c.iotlb_invalidate
            + self.pool_pop * c.pool_op
    }

    /// Cycles of the free steps at `c`'s prices.
    pub fn free_cycles(&self, c: &XenPvCosts) -> u64 {
        self.unpin * c.hypercall
            + self.devalidated_entries * c.validate_entry
            + self.make_writable * c.kernel_remap
            + self.iommu_remap * c.iommu_remap
            + self.pgd_dtor * c.pgd_dtor
            + self.page_free * c.page_free
            + self.pool_push * c.pool_op
    }

    /// `self + other`, step by step.
    pub fn add(&mut self, o: &StepCounts) {
        self.page_alloc += o.page_alloc;
        self.zero += o.zero;
        self.pgd_ctor += o.pgd_ctor;
        self.make_readonly += o.make_readonly;
        self.pin += o.pin;
        self.validated_entries += o.validated_entries;
        self.iommu_unmap += o.iommu_unmap;
        self.iotlb_invalidate += o.iotlb_invalidate;
        self.pool_pop += o.pool_pop;
        self.unpin += o.unpin;
        self.devalidated_entries += o.devalidated_entries;
        self.make_writable += o.make_writable;
        self.iommu_remap += o.iommu_remap;
        self.pgd_dtor += o.pgd_dtor;
        self.page_free += o.page_free;
        self.pool_push += o.pool_push;
    }
}

/// Entries Xen walks when it validates a table of `level` (i386 PAE: 4 in the PGD, 512 in a
/// PMD or a PTE page).
pub const fn entries(level: PtLevel) -> u64 {
    match level {
        PtLevel::Pgd => 4,
        PtLevel::Pmd | PtLevel::Pte => 512,
    }
}

/// Whether Linux pins a table of `level` with its own hypercall: PTE pages with split page
/// table locks (`xen_pin_page`, `USE_SPLIT_PTLOCKS`) and the PGD (`MMUEXT_PIN_L3_TABLE`);
/// a PMD gets its type when Xen validates the PGD entry that points to it.
pub const fn pinned_alone(level: PtLevel) -> bool {
    !matches!(level, PtLevel::Pmd)
}

/// The steps of allocating one table of `level`, from the pool (`hit`) or not, with `keeps`,
/// under Xen's unmap flush `flush` (whether the type change's IOTLB flush invalidates).
pub fn alloc_steps(level: PtLevel, hit: bool, keeps: PoolKeeps, flush: UnmapFlush) -> StepCounts {
    let pgd = u64::from(level == PtLevel::Pgd);
    let pin = u64::from(pinned_alone(level));
    let mut s = StepCounts {
        pgd_ctor: pgd,
        ..StepCounts::default()
    };
    if hit {
        s.pool_pop = 1;
        if keeps == PoolKeeps::Type {
            s.pin = pin;
            s.validated_entries = entries(level);
        }
    } else {
        s.page_alloc = 1;
        s.zero = 1;
        s.make_readonly = 1;
        s.pin = pin;
        s.validated_entries = entries(level);
        s.iommu_unmap = 1;
        s.iotlb_invalidate = u64::from(flush == UnmapFlush::Invalidates);
    }
    s
}

/// The steps of freeing one table of `level`, into the pool (`pooled`) or not.
pub fn free_steps(level: PtLevel, pooled: bool, keeps: PoolKeeps) -> StepCounts {
    let pin = u64::from(pinned_alone(level));
    let mut s = StepCounts {
        pgd_dtor: u64::from(level == PtLevel::Pgd),
        ..StepCounts::default()
    };
    if pooled {
        s.pool_push = 1;
        if keeps == PoolKeeps::Type {
            s.unpin = pin;
            s.devalidated_entries = entries(level);
        }
    } else {
        s.unpin = pin;
        s.devalidated_entries = entries(level);
        s.make_writable = 1;
        s.iommu_remap = 1;
        s.page_free = 1;
    }
    s
}

/// The steps of allocating one table of `level` split by where Linux 3.2 runs them (module
/// docs): `(in the allocation functions, in the mm-wide pin)`. `mm_pinned`: the table is
/// allocated into an mm already pinned, which only a PTE page of a running process is
/// (`xen_alloc_ptpage` pins it then); the PGD and its PMDs come before the pin.
pub fn alloc_steps_at(
    level: PtLevel,
    hit: bool,
    keeps: PoolKeeps,
    flush: UnmapFlush,
    mm_pinned: bool,
) -> (StepCounts, StepCounts) {
    let all = alloc_steps(level, hit, keeps, flush);
    if mm_pinned && level == PtLevel::Pte {
        return (all, StepCounts::default());
    }
    let at_pin = StepCounts {
        make_readonly: all.make_readonly,
        pin: all.pin,
        validated_entries: all.validated_entries,
        iommu_unmap: all.iommu_unmap,
        iotlb_invalidate: all.iotlb_invalidate,
        ..StepCounts::default()
    };
    let in_function = StepCounts {
        make_readonly: 0,
        pin: 0,
        validated_entries: 0,
        iommu_unmap: 0,
        iotlb_invalidate: 0,
        ..all
    };
    (in_function, at_pin)
}

/// The steps of freeing one table of `level` when its process exits, split by where Linux
/// 3.2 runs them (module docs): `(in the free functions, in xen_exit_mmap)`.
pub fn free_steps_at_exit(
    level: PtLevel,
    pooled: bool,
    keeps: PoolKeeps,
) -> (StepCounts, StepCounts) {
    let all = free_steps(level, pooled, keeps);
    let at_exit = StepCounts {
        unpin: all.unpin,
        devalidated_entries: all.devalidated_entries,
        make_writable: all.make_writable,
        iommu_remap: all.iommu_remap,
        ..StepCounts::default()
    };
    let in_function = StepCounts {
        unpin: 0,
        devalidated_entries: 0,
        make_writable: 0,
        iommu_remap: 0,
        ..all
    };
    (in_function, at_exit)
}

/// `steps` with the pins and validations of tables taken from the pool removed (the
/// [`PoolKeeps::Pin`] reading, applied to counts kept under [`PoolKeeps::Type`]): a table
/// from the allocator is made read-only where it is pinned, so the pins left are one per
/// read-only change.
pub fn without_pooled_pins(steps: &mut StepCounts, level: PtLevel) {
    steps.pin = steps.make_readonly * u64::from(pinned_alone(level));
    steps.validated_entries = steps.make_readonly * entries(level);
}

/// `steps` with the unpins and devalidations of tables put into the pool removed (as
/// [`without_pooled_pins`]): a table freed at exit to the allocator is made writable where
/// it is unpinned.
pub fn without_pooled_unpins(steps: &mut StepCounts, level: PtLevel) {
    steps.unpin = steps.make_writable * u64::from(pinned_alone(level));
    steps.devalidated_entries = steps.make_writable * entries(level);
}

/// Where each price of [`XenPvCosts`] comes from; `range` is the sensitivity table's.
pub const XEN_PV_PRICES: [PriceSource; 14] = [
    PriceSource {
        field: "page_alloc",
        source: "estimate: Linux's per-CPU free-list fast path (`buffered_rmqueue`), a few hundred cycles",
        range: Some((100, 500)),
    },
    PriceSource {
        field: "page_free",
        source: "estimate: `free_hot_cold_page` onto the per-CPU list",
        range: Some((100, 400)),
    },
    PriceSource {
        field: "zero_page",
        source: "estimate: `clear_page` of 4 KiB, in cache to from memory",
        range: Some((500, 1500)),
    },
    PriceSource {
        field: "pgd_ctor",
        source: "estimate: `pgd_ctor` (kernel entries, `pgd_list_add` under `pgd_lock`) and `pgd_prepopulate_pmd`'s copy of the kernel PMD (4 KiB)",
        range: Some((500, 3000)),
    },
    PriceSource {
        field: "pgd_dtor",
        source: "estimate: `pgd_dtor` in `pgd_free` (`pgd_list_del` under `pgd_lock` with interrupts off; Xen PV does not share the kernel PMD, so it runs)",
        range: Some((100, 600)),
    },
    PriceSource {
        field: "hypercall",
        source: "estimate: a 32-bit PV guest's trap into Xen and back (no VMCS), as `xen-2007`",
        range: Some((500, 2000)),
    },
    PriceSource {
        field: "validate_entry",
        source: "estimate: one empty entry in `alloc_l1_table`/`free_l1_table`'s loop (a load and a present-bit test)",
        range: Some((4, 20)),
    },
    PriceSource {
        field: "kernel_remap",
        source: "estimate: one `update_va_mapping` of the direct map in a multicall batch (Xen's `mod_l1_entry`, the type reference, one INVLPG)",
        range: Some((200, 1500)),
    },
    PriceSource {
        field: "pool_op",
        source: "estimate: a list push or pop under a spin lock",
        range: Some((30, 150)),
    },
    PriceSource {
        field: "iommu_unmap",
        source: "estimate (`modern`): an I/O PTE clear on coherent walks; Xen 4.2.1's `dma_pte_clear_one` passes the old PTE as not present, so `flush_iotlb_qi` returns at once (no caching mode) until XSA-78",
        range: Some((10, 200)),
    },
    PriceSource {
        field: "iotlb_invalidate",
        source: "estimate (`modern`): queued descriptor 50 + page invalidation 1000 + wait 500, where Xen performs it (XSA-78's fix); `modern` prices an invalidate-and-wait at 1,000–2,000",
        range: Some((1000, 3000)),
    },
    PriceSource {
        field: "iommu_remap",
        source: "estimate (`modern`): an I/O PTE set on coherent walks; `flush_iotlb_qi` returns at once for a non-present entry (Xen 4.x `qinval.c`)",
        range: Some((10, 200)),
    },
    PriceSource {
        field: "dma_map",
        source: "estimate: `xen_swiotlb_map_page` without bouncing (pfn → mfn, a contiguity check); dom0's memory is mapped in the I/O tables at boot (S2.3)",
        range: Some((100, 600)),
    },
    PriceSource {
        field: "dma_unmap",
        source: "estimate: `xen_swiotlb_unmap_page` without bouncing",
        range: Some((50, 300)),
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    /// S3.5's Xen 4.2.1: the type change's flush invalidates nothing.
    const X: UnmapFlush = UnmapFlush::Skipped;

    /// From the allocator every step runs once (entries per level); from the pool only the
    /// pop, the PGD's constructor and (keeping the type only) the pin with its walk.
    #[test]
    fn the_pool_skips_the_allocator_the_clearing_and_the_type_change() {
        let miss = alloc_steps(PtLevel::Pte, false, PoolKeeps::Type, X);
        assert_eq!(
            (miss.page_alloc, miss.zero, miss.pin, miss.iommu_unmap),
            (1, 1, 1, 1)
        );
        assert_eq!(miss.validated_entries, 512);
        // Only where Xen performs the invalidation is it a step of the allocation.
        assert_eq!(miss.iotlb_invalidate, 0);
        let fixed = alloc_steps(
            PtLevel::Pte,
            false,
            PoolKeeps::Type,
            UnmapFlush::Invalidates,
        );
        assert_eq!((fixed.iommu_unmap, fixed.iotlb_invalidate), (1, 1));
        let c = XenPvCosts::default();
        assert_eq!(
            fixed.alloc_cycles(&c) - miss.alloc_cycles(&c),
            c.iotlb_invalidate
        );
        let hit = alloc_steps(PtLevel::Pte, true, PoolKeeps::Type, X);
        assert_eq!((hit.page_alloc, hit.iommu_unmap, hit.pin), (0, 0, 1));
        let pinned = alloc_steps(PtLevel::Pte, true, PoolKeeps::Pin, X);
        assert_eq!((pinned.pin, pinned.validated_entries), (0, 0));
        // A PMD is validated through its PGD: no hypercall of its own.
        assert_eq!(alloc_steps(PtLevel::Pmd, false, PoolKeeps::Type, X).pin, 0);
        assert_eq!(
            alloc_steps(PtLevel::Pgd, true, PoolKeeps::Type, X).pgd_ctor,
            1
        );
        assert!(hit.alloc_cycles(&c) < miss.alloc_cycles(&c));
        let free = free_steps(PtLevel::Pte, false, PoolKeeps::Type);
        let pooled = free_steps(PtLevel::Pte, true, PoolKeeps::Type);
        assert_eq!(
            free.free_cycles(&c) - pooled.free_cycles(&c),
            c.kernel_remap + c.iommu_remap + c.page_free - c.pool_op
        );
        assert_eq!(
            (free.alloc_cycles(&c), miss.free_cycles(&c)),
            (0, 0),
            "alloc and free steps are priced apart"
        );
    }

    /// A table's steps split between the functions and the mm-wide passes add up to all of
    /// them; only a PTE page allocated into a pinned mm is pinned by its allocation, and at
    /// exit the free functions only give the page back (to the allocator or the pool).
    #[test]
    fn steps_split_by_where_linux_runs_them() {
        for level in PtLevel::ALL {
            for (hit, pinned) in [(false, false), (false, true), (true, false), (true, true)] {
                let (f, p) = alloc_steps_at(level, hit, PoolKeeps::Type, X, pinned);
                let mut sum = f;
                sum.add(&p);
                assert_eq!(sum, alloc_steps(level, hit, PoolKeeps::Type, X));
                let own = pinned && level == PtLevel::Pte;
                assert_eq!(
                    f.validated_entries > 0,
                    own,
                    "{level:?} hit {hit} pinned {pinned}"
                );
                assert_eq!(p == StepCounts::default(), own);
            }
            for pooled in [false, true] {
                let (f, x) = free_steps_at_exit(level, pooled, PoolKeeps::Type);
                let mut sum = f;
                sum.add(&x);
                assert_eq!(sum, free_steps(level, pooled, PoolKeeps::Type));
                let pgd = u64::from(level == PtLevel::Pgd);
                let expect = StepCounts {
                    page_free: u64::from(!pooled),
                    pool_push: u64::from(pooled),
                    pgd_dtor: pgd,
                    ..StepCounts::default()
                };
                assert_eq!(f, expect);
                assert_eq!(x.devalidated_entries, entries(level));
            }
        }
        // The pin reading drops exactly the pooled tables' pins: two misses and a hit.
        let mut s = StepCounts::default();
        for hit in [false, false, true] {
            s.add(&alloc_steps(PtLevel::Pte, hit, PoolKeeps::Type, X));
        }
        without_pooled_pins(&mut s, PtLevel::Pte);
        assert_eq!((s.pin, s.validated_entries), (2, 1024));
        let mut s = StepCounts::default();
        for pooled in [false, true, true] {
            s.add(&free_steps(PtLevel::Pgd, pooled, PoolKeeps::Type));
        }
        without_pooled_unpins(&mut s, PtLevel::Pgd);
        assert_eq!((s.unpin, s.devalidated_entries), (1, 4));
    }

    /// Every estimated price of `XenPvCosts` has a source and its default lies in its range.
    #[test]
    fn every_price_has_a_source_and_a_range_around_its_value() {
        let c = XenPvCosts::default();
        for p in XEN_PV_PRICES {
            let v = c.field(p.field).unwrap_or_else(|| panic!("{}", p.field));
            let (lo, hi) = p.range.unwrap();
            assert!(lo <= v && v <= hi, "{}: {v} outside {lo}–{hi}", p.field);
        }
    }
}
