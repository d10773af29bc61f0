//! Process churn in a PV guest with an assigned NIC (S3.3–S3.5): S3.5's stress tool, a loop
//! that launches a browser, opens tabs one by one and closes it, one iteration every five
//! minutes, while 542.14 processes a minute are created and exit; and netperf's stream
//! arriving at the NIC. Each process builds and tears down its PAE page tables (one PGD,
//! four PMDs — Xen PV guests do not share the kernel PMD — and its PTE pages); the browser's
//! PTE pages grow with its memory over the iteration and are all freed when it closes.
//! Page-table pages change type (writable ↔ page table), which Xen mirrors in the I/O page
//! tables ([`IoProtection`]): unmap + IOTLB invalidation on the way in, remap on the way out.
//! With the IOSUP pool ([`PtPool`]) freed tables keep their type. Every allocation and free
//! is counted step by step ([`StepCounts`]), so its time is counts × prices, and each step
//! where Linux 3.2 runs it: in the allocation and free functions S3.5 times, or in the
//! mm-wide pin at fork and exec and unpin at exit ([`pt_work`](super::pt_work)'s docs).
//!
//! Figure 6's counter is a call counter in Xen's `flush_iotlb_qi` (S3.5 "a global counter is
//! placed into the function body"): Xen calls it for the unmap of a type change to a table
//! and for the remap of the change back, where it returns at once (a non-present entry is
//! not cached without caching mode), so both are counted ([`MinuteStats::iotlb_flushes`]);
//! the invalidations the hardware performs are [`MinuteStats::invalidations`]. In S3.5's Xen
//! 4.2.1 the unmap's call returns at once too ([`UnmapFlush::Skipped`]): nothing is
//! invalidated, and a table whose frame the NIC had cached stays writable by it
//! ([`MinuteStats::tables_left_cached`]).
//!
//! The page allocator hands out the most recently freed page first (Linux's per-CPU hot
//! lists), so a new page table often takes a frame the NIC just used, and that frame comes
//! back to the RX ring after the process exits, its IOTLB entry invalidated: that is how
//! page-table churn shows up in the device's IOTLB miss rate here.
//!
//! Time is simulated in ns: creations every `60 / forks_per_minute` s, each process living a
//! log-uniform draw from `lifetime_s`; the browser's PTE pages one by one over the
//! iteration; packets every `packet_bits / stream_mbps` µs. Each minute's counters are one
//! [`MinuteStats`]. In steady state nothing is allocated on the heap: process records and
//! their table lists are recycled.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use serde::{Deserialize, Serialize};

use iommulab_base::addr::{Access, Bdf, Gpa, Pfn};
use iommulab_hw::{RemapUnit, Vtd, VtdConfig};

use super::XenError;
use super::coupling::{IoProtection, UnmapFlush};
use super::iosup::{PtLevel, PtPool, ShrinkConfig};
use super::page_type::{PageType, PageTypes};
use super::pt_work::{PoolKeeps, StepCounts, alloc_steps_at, free_steps, free_steps_at_exit};
use super::{XenPvCosts, XenPvSetup};

/// When the pool is on (S3.5's groups).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum PoolMode {
    /// Never (`cache-disabled`).
    Disabled,
    /// From boot (`cache-pre-enabled`).
    PreEnabled,
    /// Switched on at the start of minute `minute`.
    Dynamic {
        /// The minute it is switched on.
        minute: u32,
    },
    /// Switched on once Figure 6's counter is stable (`cache-dynamic-enabled`, S3.5: "cache
    /// is enabled when IOTLB-flush becomes stable"): at the end of the first minute after
    /// the first whose count differs from the previous minute's by at most `within` of it.
    WhenStable {
        /// The largest relative change between two minutes that counts as stable.
        within: f64,
    },
}

/// S3.5's stress tool: the browser loop.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BrowserLoop {
    /// One iteration (launch, tabs, close), s (S3.5: five minutes).
    pub iteration_s: f64,
    /// The memory the loop uses in an iteration, MB (S3.5: 284.1 MB on average); the
    /// browser's memory grows to it as the tabs open.
    pub memory_mb: f64,
    /// PTE pages per 2 MiB of that memory (one PTE page maps 2 MiB under PAE; above 1 when
    /// mappings are sparse). Ours: 1.2, an estimate (1.0–1.5).
    pub pte_per_2mib: f64,
}

impl Default for BrowserLoop {
    fn default() -> Self {
        Self {
            iteration_s: 300.0,
            memory_mb: 284.1,
            pte_per_2mib: 1.2,
        }
    }
}

impl BrowserLoop {
    /// PTE pages the browser has at the end of an iteration.
    pub fn pte_pages(&self) -> u32 {
        let pages = (self.memory_mb / 2.0 * self.pte_per_2mib).ceil();
        if pages.is_finite() && pages >= 1.0 {
            #[expect(
                clippy::cast_possible_truncation,
                clippy::cast_sign_loss,
                reason = "a checked positive page count, far below u32::MAX"
            )]
            let n = pages.min(f64::from(u32::MAX)) as u32;
            n
        } else {
            1
        }
    }
}

/// One churn run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ChurnConfig {
    /// Simulated minutes.
    pub minutes: u32,
    /// Process creations (and, in steady state, exits) per minute (S3.5: 542.14).
    pub forks_per_minute: f64,
    /// A process's lifetime, s: log-uniform between these (ours: 0.05–5 s, the loop's
    /// short-lived helpers; the paper gives the rates, not the lifetimes).
    pub lifetime_s: (f64, f64),
    /// PTE pages per short-lived process, uniform in this range (ours: 4–10, a small
    /// program's text, libraries, heap and stack at 2 MiB per PTE page).
    pub pte_pages: (u32, u32),
    /// Of a process's PTE pages, how many are allocated before its mm is pinned (ours: 1,
    /// exec's first stack page, `get_arg_page`, before `xen_activate_mm`; a fork's copied
    /// tables, `copy_page_range` before `xen_dup_mmap`, would add more). Their pinning runs
    /// in the mm-wide pin, the others' in their allocation (`pt_work::alloc_steps_at`).
    pub pte_before_pin: u32,
    /// The browser loop; `None`: short-lived processes only.
    pub browser: Option<BrowserLoop>,
    /// The pool.
    pub pool: PoolMode,
    /// What a pooled page keeps ([`PoolKeeps`]).
    pub pool_keeps: PoolKeeps,
    /// When the pool gives pages back; `None`: never. S3.5 adds the freeing to the
    /// `cache-dynamic-enabled` group only (its pre-enabled group keeps every page).
    pub shrink: Option<ShrinkConfig>,
    /// Guest memory in 4 KiB frames.
    pub guest_frames: u64,
    /// NIC receive stream in Mb/s (S3.5's netperf: 87.9).
    pub stream_mbps: f64,
    /// Bytes per received packet (a 1500-byte MTU's TCP payload).
    pub packet_bytes: u64,
    /// RX ring buffers, one page each.
    pub rx_ring: u32,
    /// Seed of the draws.
    pub seed: u64,
    /// Prices of the guest's and Xen's software work.
    pub costs: XenPvCosts,
}

impl Default for ChurnConfig {
    fn default() -> Self {
        Self {
            minutes: 30,
            forks_per_minute: 542.14,
            lifetime_s: (0.05, 5.0),
            pte_pages: (4, 10),
            pte_before_pin: 1,
            browser: Some(BrowserLoop::default()),
            pool: PoolMode::Disabled,
            pool_keeps: PoolKeeps::Type,
            shrink: None,
            guest_frames: 1 << 18,
            stream_mbps: 87.9,
            packet_bytes: 1448,
            rx_ring: 256,
            seed: 1,
            costs: XenPvCosts::default(),
        }
    }
}

/// One minute of a run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MinuteStats {
    /// The minute (0-based).
    pub minute: u32,
    /// Processes created.
    pub forks: u64,
    /// Processes that exited.
    pub exits: u64,
    /// Calls of Xen's `flush_iotlb_qi` for page-table type changes (Fig. 6's counter: the
    /// unmaps' calls, invalidating or not, and the remaps', which return at once).
    pub iotlb_flushes: u64,
    /// IOTLB invalidations the hardware performed (the unmaps', where Xen performs them).
    pub invalidations: u64,
    /// Type changes to a table after which the NIC's IOTLB still translated the frame: the
    /// NIC could write that page table until the entry was evicted (XSA-78).
    #[serde(default)]
    pub tables_left_cached: u64,
    /// Time in the page-table allocation functions per level (PGD, PMD, PTE), ns (Fig. 7).
    pub alloc_ns: [f64; 3],
    /// Time in the free functions per level, ns (Fig. 7).
    pub free_ns: [f64; 3],
    /// Allocation steps run in the allocation functions, per level.
    pub alloc_steps: [StepCounts; 3],
    /// Free steps run in the free functions, per level.
    pub free_steps: [StepCounts; 3],
    /// Allocation steps run when the whole mm is pinned (`xen_dup_mmap`,
    /// `xen_activate_mm`), per level of the table they are for.
    #[serde(default)]
    pub pin_steps: [StepCounts; 3],
    /// Free steps run when the exiting mm is unpinned (`xen_exit_mmap`), per level.
    #[serde(default)]
    pub unpin_steps: [StepCounts; 3],
    /// Pages in each level's pool at the end of the minute (Figs. 8–9).
    pub pooled: [u64; 3],
    /// The most pages in all pools at once during the minute.
    pub peak_pooled: u64,
    /// Tables of each level in use at the end of the minute.
    pub in_use: [u64; 3],
    /// Tables allocated per level (from a pool or from the page allocator).
    pub allocs: [u64; 3],
    /// Tables freed per level (into a pool or to the page allocator).
    pub frees: [u64; 3],
    /// Pages the pools gave back by shrinking.
    pub shrunk: u64,
    /// Whether the pool was on at the end of the minute.
    pub pool_on: bool,
    /// Packets the NIC received.
    pub packets: u64,
    /// Its IOTLB lookups that missed.
    pub iotlb_misses: u64,
    /// Its IOTLB lookups.
    pub iotlb_lookups: u64,
    /// Device-side translation time, ns (walks after misses).
    pub device_walk_ns: f64,
}

/// What a run left.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ChurnResult {
    /// Per minute.
    pub minutes: Vec<MinuteStats>,
    /// Most pages in all pools at once.
    pub peak_pooled: u64,
    /// Page-table allocations served by a pool.
    pub pool_hits: u64,
    /// Page-table allocations from the page allocator.
    pub buddy_allocs: u64,
    /// Pages the pools gave back by shrinking.
    pub shrunk: u64,
    /// Times the shrink rule gave pages back.
    pub shrink_events: u64,
    /// Per level, the largest `in_pool / in_use` right after a free into the pool (what the
    /// shrink rule compares with its proportion).
    pub max_proportion: [f64; 3],
    /// The minute the pool was switched on (`None`: never).
    pub enabled_minute: Option<u32>,
    /// Processes alive at the end (the browser included).
    pub alive_at_end: u64,
}

#[derive(Debug, Default)]
struct Process {
    tables: Vec<(PtLevel, Pfn<Gpa>)>,
}

/// The browser of the current iteration: its process, when it closes, and its PTE growth.
#[derive(Debug, Default)]
struct Browser {
    slot: Option<usize>,
    next_growth: u64,
    growth_every: u64,
    left_to_grow: u32,
    closes_at: u64,
}

/// A guest under churn (see the [module docs](self)).
#[derive(Debug)]
pub struct PvChurn<U> {
    cfg: ChurnConfig,
    unmap_flush: UnmapFlush,
    types: PageTypes,
    io: IoProtection<U>,
    pool: PtPool,
    free: Vec<Pfn<Gpa>>,
    ring: Vec<Pfn<Gpa>>,
    rng: u64,
    stats: ChurnResult,
    shrunk: Vec<Pfn<Gpa>>,
    clock: Clock,
    procs: Vec<Process>,
    spare: Vec<usize>,
    browser: Browser,
    last_flushes: Option<u64>,
}

/// Where the simulated time is: the next fork and packet, the live short-lived processes by
/// exit time, the next minute.
#[derive(Debug, Default)]
struct Clock {
    exits: BinaryHeap<Reverse<(u64, usize)>>,
    next_fork: u64,
    next_packet: u64,
    slot: usize,
    minute: u32,
}

/// A positive time in ns, rounded down (configurations are checked positive and finite).
fn whole_ns(ns: f64) -> u64 {
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "saturating float-to-int cast of a checked positive value"
    )]
    let n = ns as u64;
    n
}

/// The NIC's requester ID.
const NIC: Bdf = match Bdf::new(0, 3, 0) {
    Some(b) => b,
    None => panic!("valid BDF"),
};

impl PvChurn<Vtd> {
    /// A guest on the VT-d unit of `setup` (S3.2–S3.3: queued, page-selective invalidation).
    pub fn new(cfg: ChurnConfig, setup: &XenPvSetup) -> Result<Self, XenError> {
        let unit = Vtd::new(VtdConfig {
            cost: setup.cost,
            invalidation: setup.invalidation,
            page_selective_invalidation: setup.page_selective_invalidation,
            ..VtdConfig::default()
        })?;
        Self::with_unit(cfg, unit, setup.unmap_flush)
    }
}

impl<U: RemapUnit> PvChurn<U> {
    /// A guest on `unit` under Xen's unmap flush `unmap_flush`: every frame writable and
    /// mapped for the NIC, the RX ring filled.
    pub fn with_unit(cfg: ChurnConfig, unit: U, unmap_flush: UnmapFlush) -> Result<Self, XenError> {
        let frames = cfg.guest_frames;
        let positive = |x: f64| x > 0.0 && x.is_finite();
        let (lo, hi) = cfg.lifetime_s;
        if frames < 4096
            || !positive(cfg.forks_per_minute)
            || !positive(lo)
            || !positive(hi)
            || hi < lo
        {
            return Err(XenError::Config {
                what: "guest_frames >= 4096, finite forks_per_minute > 0 and lifetime_s (min, max) with 0 < min <= max",
            });
        }
        let stream_ok = cfg.stream_mbps == 0.0 || positive(cfg.stream_mbps);
        if cfg.pte_pages.0 > cfg.pte_pages.1 || !stream_ok || cfg.packet_bytes == 0 {
            return Err(XenError::Config {
                what: "pte_pages (min, max) with min <= max, stream_mbps >= 0, packet_bytes > 0",
            });
        }
        if let Some(b) = &cfg.browser
            && !(positive(b.iteration_s) && positive(b.memory_mb) && positive(b.pte_per_2mib))
        {
            return Err(XenError::Config {
                what: "browser iteration_s, memory_mb and pte_per_2mib finite and > 0",
            });
        }
        if let PoolMode::WhenStable { within } = cfg.pool
            && (!within.is_finite() || within < 0.0)
        {
            return Err(XenError::Config {
                what: "when-stable's within finite and >= 0",
            });
        }
        let mut types = PageTypes::new(frames);
        // Frame 0 is never handed out (a null frame is no table entry).
        let free: Vec<Pfn<Gpa>> = (1..frames).rev().map(Pfn::new).collect();
        for &f in &free {
            types.get_type(f, PageType::Writable)?;
            types.put_type(f)?;
        }
        let io = IoProtection::new(unit, &[NIC], frames, 1 << 20)?.with_unmap_flush(unmap_flush);
        let mut pool = PtPool::new(cfg.shrink);
        let mut stats = ChurnResult::default();
        if cfg.pool == PoolMode::PreEnabled {
            pool.enable();
            stats.enabled_minute = Some(0);
        }
        let mut me = Self {
            rng: cfg.seed ^ 0x9e37_79b9_7f4a_7c15,
            cfg,
            unmap_flush,
            types,
            io,
            pool,
            free,
            ring: Vec::new(),
            stats,
            shrunk: Vec::new(),
            clock: Clock::default(),
            procs: Vec::new(),
            spare: Vec::new(),
            browser: Browser::default(),
            last_flushes: None,
        };
        for _ in 0..me.cfg.rx_ring {
            let f = me.page()?;
            me.ring.push(f);
        }
        Ok(me)
    }

    fn page(&mut self) -> Result<Pfn<Gpa>, XenError> {
        self.free.pop().ok_or(XenError::OutOfMemory)
    }

    fn next_random(&mut self) -> u64 {
        // xorshift64*: deterministic per seed.
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        self.rng.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn draw(&mut self, lo: u32, hi: u32) -> u32 {
        let r = self.next_random();
        lo + u32::try_from(r % u64::from(hi - lo + 1)).unwrap_or(0)
    }

    /// A lifetime in ns, log-uniform in `lifetime_s`.
    fn lifetime_ns(&mut self) -> u64 {
        let (lo, hi) = self.cfg.lifetime_s;
        let u = (self.next_random() >> 11) as f64 / (1u64 << 53) as f64;
        whole_ns(lo * (hi / lo).powf(u) * 1e9).max(1)
    }

    /// A new page table of `level`: from the pool (still typed) or from the page allocator
    /// (zeroed, made read-only, validated and pinned by Xen, its I/O PTE cleared and
    /// invalidated). `mm_pinned`: allocated into a running process's pinned mm, so the
    /// pinning is the allocation's own (`pt_work::alloc_steps_at`).
    fn alloc_table(
        &mut self,
        level: PtLevel,
        mm_pinned: bool,
        m: &mut MinuteStats,
    ) -> Result<Pfn<Gpa>, XenError> {
        let i = level.index();
        m.allocs[i] += 1;
        let keeps = self.cfg.pool_keeps;
        if let Some(f) = self.pool.take(level) {
            self.stats.pool_hits += 1;
            if keeps == PoolKeeps::Type {
                // Pinned again: same type, so no type change and nothing for the IOMMU.
                let change = self.types.pin_table(f, level.page_type(), &[])?;
                debug_assert!(change.is_none());
            }
            let (in_fn, at_pin) = alloc_steps_at(level, true, keeps, self.unmap_flush, mm_pinned);
            m.alloc_steps[i].add(&in_fn);
            m.pin_steps[i].add(&at_pin);
            return Ok(f);
        }
        self.stats.buddy_allocs += 1;
        let f = self.page()?;
        // A new table points inside the guest (its entries are filled later by the
        // guest's mmu_update hypercalls): validation sees only valid entries.
        let change = self.types.pin_table(f, level.page_type(), &[])?;
        let (mut in_fn, mut at_pin) =
            alloc_steps_at(level, false, keeps, self.unmap_flush, mm_pinned);
        let invalidated = match change {
            Some(ch) => self.mirror(ch, m)?,
            None => {
                // Already a table: no type change, nothing for the IOMMU.
                for s in [&mut in_fn, &mut at_pin] {
                    s.iommu_unmap = 0;
                    s.iotlb_invalidate = 0;
                }
                0
            }
        };
        // The invalidation is priced where the unit performed it.
        debug_assert_eq!(
            in_fn.iotlb_invalidate + at_pin.iotlb_invalidate,
            invalidated
        );
        m.alloc_steps[i].add(&in_fn);
        m.pin_steps[i].add(&at_pin);
        Ok(f)
    }

    /// Mirrors a type change in the I/O page tables and counts Figure 6's calls; returns the
    /// invalidations the unit performed.
    fn mirror(&mut self, ch: super::TypeChange, m: &mut MinuteStats) -> Result<u64, XenError> {
        let before = self.io.stats();
        self.io.on_change(ch)?;
        let after = self.io.stats();
        let inv = after.invalidations - before.invalidations;
        // Both `iommu_unmap_page` and `iommu_map_page` call `flush_iotlb_qi`, whether it
        // then invalidates or returns at once.
        let calls = after.unmapped - before.unmapped + after.remapped - before.remapped;
        m.invalidations += inv;
        m.iotlb_flushes += calls;
        m.tables_left_cached += after.left_cached - before.left_cached;
        Ok(inv)
    }

    /// Frees a page table: into its pool (unpinned but typed, or still pinned), or unpinned,
    /// made writable (its I/O PTE set back) and returned to the page allocator.
    fn free_table(
        &mut self,
        level: PtLevel,
        f: Pfn<Gpa>,
        m: &mut MinuteStats,
    ) -> Result<(), XenError> {
        let i = level.index();
        m.frees[i] += 1;
        let keeps = self.cfg.pool_keeps;
        if self.pool.give(level, f) {
            if keeps == PoolKeeps::Type {
                self.types.unpin(f)?;
            }
            let (in_fn, at_exit) = free_steps_at_exit(level, true, keeps);
            m.free_steps[i].add(&in_fn);
            m.unpin_steps[i].add(&at_exit);
            let mut out = std::mem::take(&mut self.shrunk);
            out.clear();
            self.pool.shrink(level, &mut out);
            if !out.is_empty() {
                self.stats.shrink_events += 1;
            }
            for &g in &out {
                self.stats.shrunk += 1;
                m.shrunk += 1;
                // A page given back pays what a free to the allocator pays, less the unpin
                // and the devalidation it already had when it joined the pool.
                let mut steps = free_steps(level, false, keeps);
                if keeps == PoolKeeps::Type {
                    steps.unpin = 0;
                    steps.devalidated_entries = 0;
                } else {
                    self.types.unpin(g)?;
                }
                self.release(g, m)?;
                m.free_steps[i].add(&steps);
            }
            self.shrunk = out;
            // The pools' size once the rule has run (what Figures 8–9 sample).
            let pooled: u64 = PtLevel::ALL.iter().map(|&l| self.pool.pooled(l)).sum();
            m.peak_pooled = m.peak_pooled.max(pooled);
            return Ok(());
        }
        self.types.unpin(f)?;
        self.release(f, m)?;
        let (in_fn, at_exit) = free_steps_at_exit(level, false, keeps);
        m.free_steps[i].add(&in_fn);
        m.unpin_steps[i].add(&at_exit);
        Ok(())
    }

    /// Makes an unpinned table page writable again and frees it.
    fn release(&mut self, f: Pfn<Gpa>, m: &mut MinuteStats) -> Result<(), XenError> {
        if let Some(ch) = self.types.get_type(f, PageType::Writable)? {
            self.mirror(ch, m)?;
        }
        self.types.put_type(f)?;
        self.free.push(f);
        Ok(())
    }

    /// A process with `ptes` PTE pages; returns its slot.
    fn fork(&mut self, ptes: u32, m: &mut MinuteStats) -> Result<usize, XenError> {
        let slot = match self.spare.pop() {
            Some(s) => s,
            None => {
                self.procs.push(Process::default());
                self.procs.len() - 1
            }
        };
        let mut tables = std::mem::take(&mut self.procs[slot].tables);
        tables.clear();
        // `pgd_alloc` takes the PGD and its PMDs, and exec its first stack page, before the
        // mm is pinned; the other PTE pages come at faults, into the pinned mm.
        tables.push((PtLevel::Pgd, self.alloc_table(PtLevel::Pgd, false, m)?));
        for _ in 0..4 {
            tables.push((PtLevel::Pmd, self.alloc_table(PtLevel::Pmd, false, m)?));
        }
        for k in 0..ptes {
            let pinned = k >= self.cfg.pte_before_pin;
            tables.push((PtLevel::Pte, self.alloc_table(PtLevel::Pte, pinned, m)?));
        }
        self.procs[slot].tables = tables;
        m.forks += 1;
        Ok(slot)
    }

    fn exit(&mut self, slot: usize, m: &mut MinuteStats) -> Result<(), XenError> {
        let tables = std::mem::take(&mut self.procs[slot].tables);
        for &(level, f) in tables.iter().rev() {
            self.free_table(level, f, m)?;
        }
        self.procs[slot].tables = tables;
        self.spare.push(slot);
        m.exits += 1;
        Ok(())
    }

    /// The browser grows one PTE page (a tab's memory).
    fn grow_browser(&mut self, m: &mut MinuteStats) -> Result<(), XenError> {
        if let Some(slot) = self.browser.slot {
            let f = self.alloc_table(PtLevel::Pte, true, m)?;
            self.procs[slot].tables.push((PtLevel::Pte, f));
        }
        Ok(())
    }

    /// The loop's next iteration at `now`: the browser closes (its tables freed) and a new
    /// one starts, its PTE pages to grow evenly over the iteration.
    fn next_iteration(&mut self, now: u64, m: &mut MinuteStats) -> Result<(), XenError> {
        let Some(b) = self.cfg.browser.clone() else {
            return Ok(());
        };
        if let Some(slot) = self.browser.slot.take() {
            self.exit(slot, m)?;
        }
        let (lo, _) = self.cfg.pte_pages;
        let slot = self.fork(lo, m)?;
        let iteration = whole_ns(b.iteration_s * 1e9).max(1);
        let grow = b.pte_pages().saturating_sub(lo).max(1);
        self.browser = Browser {
            slot: Some(slot),
            growth_every: (iteration / u64::from(grow)).max(1),
            next_growth: now + (iteration / u64::from(grow)).max(1),
            left_to_grow: grow,
            closes_at: now + iteration,
        };
        Ok(())
    }

    /// The NIC writes a packet into ring slot `slot`; the driver posts a fresh page from the
    /// page allocator in its place and hands the filled one up the stack, which frees it
    /// once the data is read (here: at once), so it is the hottest free page.
    fn packet(&mut self, slot: usize, m: &mut MinuteStats) -> Result<(), XenError> {
        let f = self.ring[slot];
        // A fault would be a model bug: ring pages are writable and mapped.
        self.io
            .dma(0, f, Access::Write)
            .map_err(|_| XenError::DeviceFault { frame: f.get() })?;
        self.ring[slot] = self.page()?;
        self.free.push(f);
        m.packets += 1;
        Ok(())
    }

    /// Runs `cfg.minutes` minutes.
    pub fn run(mut self) -> Result<ChurnResult, XenError> {
        while self.clock.minute < self.cfg.minutes {
            self.run_minute()?;
        }
        Ok(self.finish())
    }

    fn enable(&mut self, minute: u32) {
        if !self.pool.enabled() {
            self.pool.enable();
            self.stats.enabled_minute = Some(minute);
        }
    }

    /// Runs the next simulated minute and returns its counters (also kept for
    /// [`PvChurn::finish`]).
    pub fn run_minute(&mut self) -> Result<MinuteStats, XenError> {
        let fork_every = whole_ns(60e9 / self.cfg.forks_per_minute).max(1);
        let packet_every = if self.cfg.stream_mbps > 0.0 {
            whole_ns(self.cfg.packet_bytes as f64 * 8.0 / self.cfg.stream_mbps * 1e3).max(1)
        } else {
            u64::MAX
        };
        let minute = self.clock.minute;
        if self.cfg.pool == (PoolMode::Dynamic { minute }) {
            self.enable(minute);
        }
        let start = u64::from(minute) * 60_000_000_000;
        let end = start + 60_000_000_000;
        let mut m = MinuteStats {
            minute,
            ..MinuteStats::default()
        };
        if minute == 0 && self.cfg.browser.is_some() {
            self.next_iteration(0, &mut m)?;
        }
        let tlb = self.io.unit().stats();
        let dev = self.io.unit().device_cycles().get();
        let ring = self.ring.len().max(1);
        let has_browser = self.cfg.browser.is_some();
        loop {
            let c = &self.clock;
            let next_exit = c.exits.peek().map_or(u64::MAX, |Reverse((t, _))| *t);
            let (grow, close) = if has_browser {
                let b = &self.browser;
                let grow = if b.left_to_grow > 0 {
                    b.next_growth
                } else {
                    u64::MAX
                };
                (grow, b.closes_at)
            } else {
                (u64::MAX, u64::MAX)
            };
            let t = c
                .next_fork
                .min(c.next_packet)
                .min(next_exit)
                .min(grow)
                .min(close);
            if t >= end {
                break;
            }
            if t == next_exit {
                let Some(Reverse((_, slot))) = self.clock.exits.pop() else {
                    break;
                };
                self.exit(slot, &mut m)?;
            } else if t == close {
                self.next_iteration(t, &mut m)?;
            } else if t == grow {
                self.grow_browser(&mut m)?;
                self.browser.left_to_grow -= 1;
                self.browser.next_growth += self.browser.growth_every;
            } else if t == self.clock.next_fork {
                let (lo, hi) = self.cfg.pte_pages;
                let ptes = self.draw(lo, hi);
                let slot = self.fork(ptes, &mut m)?;
                let life = self.lifetime_ns();
                self.clock.exits.push(Reverse((t + life, slot)));
                self.clock.next_fork += fork_every;
            } else {
                self.packet(self.clock.slot, &mut m)?;
                self.clock.slot = (self.clock.slot + 1) % ring;
                self.clock.next_packet = self.clock.next_packet.saturating_add(packet_every);
            }
        }
        let now = self.io.unit().stats();
        m.iotlb_lookups = now.iotlb.lookups - tlb.iotlb.lookups;
        m.iotlb_misses = now.iotlb.misses - tlb.iotlb.misses;
        m.device_walk_ns = self
            .cfg
            .costs
            .ns(self.io.unit().device_cycles().get() - dev);
        let c = self.cfg.costs;
        for l in PtLevel::ALL {
            let i = l.index();
            m.pooled[i] = self.pool.pooled(l);
            m.in_use[i] = self.pool.in_use(l);
            m.alloc_ns[i] = c.ns(m.alloc_steps[i].alloc_cycles(&c));
            m.free_ns[i] = c.ns(m.free_steps[i].free_cycles(&c));
        }
        m.peak_pooled = m.peak_pooled.max(m.pooled.iter().sum());
        self.stats.peak_pooled = self.stats.peak_pooled.max(m.peak_pooled);
        // S3.5's dynamic group: switched on when the counter is stable.
        if let PoolMode::WhenStable { within } = self.cfg.pool
            && let Some(last) = self.last_flushes
            && !self.pool.enabled()
        {
            let change = (m.iotlb_flushes as f64 - last as f64).abs();
            if change <= within * last as f64 && last > 0 {
                self.enable(minute + 1);
            }
        }
        self.last_flushes = Some(m.iotlb_flushes);
        m.pool_on = self.pool.enabled();
        self.stats.minutes.push(m.clone());
        self.clock.minute += 1;
        Ok(m)
    }

    /// Everything so far.
    pub fn finish(mut self) -> ChurnResult {
        self.stats.alive_at_end =
            self.clock.exits.len() as u64 + u64::from(self.browser.slot.is_some());
        self.stats.max_proportion = PtLevel::ALL.map(|l| self.pool.max_proportion(l));
        self.stats
    }

    /// S3.3's invariant: no frame typed as a page or descriptor table is reachable by the
    /// device (tables, or a stale IOTLB entry), and every pooled page keeps its type (and,
    /// with [`PoolKeeps::Pin`], its pin).
    pub fn check(&self) -> Result<(), String> {
        for i in 0..self.types.len() {
            let f = Pfn::<Gpa>::new(i);
            let t = self.types.get(f).map_err(|e| e.to_string())?;
            let reachable = match self.unmap_flush {
                UnmapFlush::Invalidates => self.io.device_can_reach(f),
                // XSA-78: the IOTLB may still translate it; its I/O entry must be gone.
                UnmapFlush::Skipped => self.io.maps(f),
            };
            if t.ty.protected() && reachable {
                return Err(format!(
                    "frame {i:#x} is {:?} and reachable by the device",
                    t.ty
                ));
            }
        }
        let pinned = self.cfg.pool_keeps == PoolKeeps::Pin;
        for (level, f) in self.pool.pooled_pages() {
            let t = self.types.get(f).map_err(|e| e.to_string())?;
            if t.ty != level.page_type() || t.pinned != pinned {
                return Err(format!(
                    "pooled {} page {:#x} is {:?}",
                    level.name(),
                    f.get(),
                    t
                ));
            }
        }
        Ok(())
    }

    /// One step driven by the caller (property tests): forks one process and exits the
    /// oldest live one when asked, then the NIC receives a packet.
    pub fn step(
        &mut self,
        fork: bool,
        exit_oldest: bool,
        alive: &mut Vec<usize>,
    ) -> Result<(), XenError> {
        let mut m = MinuteStats::default();
        if fork {
            let (lo, hi) = self.cfg.pte_pages;
            let ptes = self.draw(lo, hi);
            alive.push(self.fork(ptes, &mut m)?);
        }
        if exit_oldest && !alive.is_empty() {
            let slot = alive.remove(0);
            self.exit(slot, &mut m)?;
        }
        let slot = usize::from(m.forks > 0) % self.ring.len().max(1);
        self.packet(slot, &mut m)
    }

    /// Switches the pool on now.
    pub fn enable_pool(&mut self) {
        self.pool.enable();
    }

    /// The unit (tests compare its cycles with the priced steps).
    pub fn unit(&self) -> &U {
        self.io.unit()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn small(pool: PoolMode) -> ChurnConfig {
        ChurnConfig {
            minutes: 3,
            guest_frames: 1 << 15,
            browser: None,
            pool,
            ..ChurnConfig::default()
        }
    }

    /// Without the pool every table page costs one IOTLB invalidation on the way in and one
    /// `flush_iotlb_qi` call on the way out; with it from boot, only the pages the pool has
    /// not yet collected do (the first lifetimes).
    #[test]
    fn the_pool_stops_the_flushes_once_it_holds_a_lifetime_of_tables() {
        let setup = XenPvSetup::default();
        let off = PvChurn::new(small(PoolMode::Disabled), &setup)
            .unwrap()
            .run()
            .unwrap();
        let on = PvChurn::new(small(PoolMode::PreEnabled), &setup)
            .unwrap()
            .run()
            .unwrap();
        let m = &off.minutes[2];
        let tables: u64 = m.allocs.iter().sum::<u64>() + m.frees.iter().sum::<u64>();
        assert_eq!(
            m.iotlb_flushes, tables,
            "one call per allocation and per free"
        );
        // Xen 4.2.1 invalidates nothing; with XSA-78's fix each allocation does.
        assert_eq!(m.invalidations, 0);
        let fixed = XenPvSetup {
            unmap_flush: UnmapFlush::Invalidates,
            ..setup
        };
        let f = PvChurn::new(small(PoolMode::Disabled), &fixed)
            .unwrap()
            .run()
            .unwrap();
        let fm = &f.minutes[2];
        assert_eq!(fm.invalidations, fm.allocs.iter().sum::<u64>());
        assert_eq!(
            (fm.iotlb_flushes, fm.tables_left_cached),
            (m.iotlb_flushes, 0)
        );
        assert!(
            m.tables_left_cached > 0,
            "frames the NIC had cached became tables"
        );
        assert!(m.iotlb_flushes > 5_000, "{}", m.iotlb_flushes);
        assert!(
            on.minutes[2].iotlb_flushes * 100 < m.iotlb_flushes,
            "minute 3: {} with the pool, {} without",
            on.minutes[2].iotlb_flushes,
            m.iotlb_flushes
        );
        assert!(on.minutes[0].iotlb_flushes > 0, "the pool starts empty");
        assert!(on.pool_hits > 0 && off.pool_hits == 0);
        let alloc = |r: &ChurnResult| r.minutes[2].alloc_ns.iter().sum::<f64>();
        assert!(alloc(&on) < alloc(&off));
        assert!(on.minutes[2].packets > 400_000 && on.minutes[2].iotlb_lookups > 0);
    }

    /// A page-selective request (S3.3) takes only the type-changed frame's translation; a unit
    /// that performs it domain-wide takes the NIC's too, so without the pool the NIC misses
    /// more, and the pool, which ends the type changes, takes the difference away.
    #[test]
    fn domain_wide_invalidation_takes_the_nics_translations() {
        let fine = XenPvSetup {
            unmap_flush: UnmapFlush::Invalidates,
            ..XenPvSetup::default()
        };
        let coarse = XenPvSetup {
            page_selective_invalidation: false,
            ..fine
        };
        let miss = |pool, setup: &XenPvSetup| {
            let r = PvChurn::new(small(pool), setup).unwrap().run().unwrap();
            let m = &r.minutes[2];
            (
                m.iotlb_misses as f64 / m.iotlb_lookups as f64,
                m.invalidations,
            )
        };
        let (off_fine, inv) = miss(PoolMode::Disabled, &fine);
        let (off_coarse, inv_coarse) = miss(PoolMode::Disabled, &coarse);
        let (on_fine, _) = miss(PoolMode::PreEnabled, &fine);
        let (on_coarse, _) = miss(PoolMode::PreEnabled, &coarse);
        assert_eq!(inv, inv_coarse, "the same requests, performed wider");
        assert!(off_coarse > off_fine + 0.05, "{off_coarse} vs {off_fine}");
        assert!(on_coarse < off_coarse - 0.05, "{on_coarse} vs {off_coarse}");
        assert!(
            (on_coarse - on_fine).abs() < 0.02,
            "{on_coarse} vs {on_fine}"
        );
        // Xen 4.2.1 sends no request at all, so the unit's granularity changes nothing.
        let old = XenPvSetup::default();
        let old_coarse = XenPvSetup {
            page_selective_invalidation: false,
            ..old
        };
        assert_eq!(
            miss(PoolMode::Disabled, &old),
            miss(PoolMode::Disabled, &old_coarse)
        );
        assert_eq!(miss(PoolMode::Disabled, &old).1, 0);
    }

    /// The IOMMU steps priced from the counts are what the VT-d unit charged: the type
    /// changes' PTE clears, their queued invalidations and waits where Xen performs them
    /// (XSA-78's fix; none in 4.2.1), and the remaps' PTE sets.
    #[test]
    fn priced_iommu_steps_match_the_units_cycles() {
        for unmap_flush in [UnmapFlush::Skipped, UnmapFlush::Invalidates] {
            let setup = XenPvSetup {
                unmap_flush,
                ..XenPvSetup::default()
            };
            let mut g = PvChurn::new(small(PoolMode::Disabled), &setup).unwrap();
            let boot = g.unit().cpu_cycles().get();
            let m = [g.run_minute().unwrap(), g.run_minute().unwrap()];
            let c = XenPvCosts::default();
            let steps = m.iter().flat_map(|m| {
                PtLevel::ALL.map(|l| {
                    let i = l.index();
                    let mut a = m.alloc_steps[i];
                    a.add(&m.pin_steps[i]);
                    let mut f = m.free_steps[i];
                    f.add(&m.unpin_steps[i]);
                    (a, f)
                })
            });
            let (mut priced, mut invalidations) = (0, 0);
            for (a, f) in steps {
                priced += a.iommu_unmap * c.iommu_unmap
                    + a.iotlb_invalidate * c.iotlb_invalidate
                    + f.iommu_remap * c.iommu_remap;
                invalidations += a.iotlb_invalidate;
            }
            assert!(priced > 0);
            assert_eq!(
                g.unit().cpu_cycles().get() - boot,
                priced,
                "{unmap_flush:?}"
            );
            let performed: u64 = m.iter().map(|m| m.invalidations).sum();
            assert_eq!(invalidations, performed, "{unmap_flush:?}");
        }
    }

    /// The browser's tables go to the pool when it closes; with the shrink rule (the dynamic
    /// group) the pool gives back what exceeds the tables in use, without it (pre-enabled)
    /// it keeps them.
    #[test]
    fn the_shrink_rule_fires_when_the_browser_closes() {
        let setup = XenPvSetup::default();
        let run = |shrink| {
            let cfg = ChurnConfig {
                minutes: 3,
                guest_frames: 1 << 15,
                browser: Some(BrowserLoop {
                    iteration_s: 60.0,
                    ..BrowserLoop::default()
                }),
                pool: PoolMode::PreEnabled,
                shrink,
                ..ChurnConfig::default()
            };
            PvChurn::new(cfg, &setup).unwrap().run().unwrap()
        };
        let keep = run(None);
        let shrink = run(Some(ShrinkConfig::default()));
        assert_eq!(keep.shrunk, 0);
        assert!(
            shrink.shrunk > 100 && shrink.shrink_events > 0,
            "{}",
            shrink.shrunk
        );
        assert!(
            keep.peak_pooled > BrowserLoop::default().pte_pages().into(),
            "the closed browser's PTE pages sit in the pool: {}",
            keep.peak_pooled
        );
        assert!(shrink.peak_pooled < keep.peak_pooled);
    }

    /// The dynamic group switches the pool on after the first minute whose counter is
    /// within the share of the previous one's, and from then on it flushes less.
    #[test]
    fn when_stable_switches_the_pool_on_from_the_counter() {
        let cfg = ChurnConfig {
            minutes: 4,
            ..small(PoolMode::WhenStable { within: 0.05 })
        };
        let r = PvChurn::new(cfg, &XenPvSetup::default())
            .unwrap()
            .run()
            .unwrap();
        let at = r.enabled_minute.expect("switched on");
        assert!((1..4).contains(&at), "{at}");
        let (a, b) = (&r.minutes[at as usize - 2], &r.minutes[at as usize - 1]);
        let change = (b.iotlb_flushes as f64 / a.iotlb_flushes as f64 - 1.0).abs();
        assert!(change <= 0.05, "{change}");
        assert!(r.minutes[3].iotlb_flushes * 10 < b.iotlb_flushes);
        assert!(!r.minutes[0].pool_on && r.minutes[3].pool_on);
    }

    #[test]
    fn bad_configurations_are_refused_with_what_is_expected() {
        let bad = ChurnConfig {
            lifetime_s: (2.0, 1.0),
            ..ChurnConfig::default()
        };
        let e = PvChurn::new(bad, &XenPvSetup::default()).unwrap_err();
        assert!(e.to_string().contains("lifetime_s"), "{e}");
        let bad = ChurnConfig {
            browser: Some(BrowserLoop {
                memory_mb: f64::NAN,
                ..BrowserLoop::default()
            }),
            ..ChurnConfig::default()
        };
        let e = PvChurn::new(bad, &XenPvSetup::default()).unwrap_err();
        assert!(e.to_string().contains("memory_mb"), "{e}");
    }

    proptest! {
        /// S3.3–S3.4's invariants under any interleaving of forks, exits and packets, with
        /// the pool switched on at any point, either reading of what it keeps and either
        /// Xen: no page or descriptor table is reachable by the device (under Xen 4.2.1 no
        /// table has an I/O entry; only a stale IOTLB entry may reach one), every pooled
        /// page keeps its table type, and no type count goes negative (`put_type` would
        /// refuse: the run fails).
        #[test]
        fn no_table_is_ever_reachable_by_the_device(
            ops in proptest::collection::vec((any::<bool>(), any::<bool>()), 1..60),
            enable_at in 0usize..60,
            pin in any::<bool>(),
            fixed in any::<bool>(),
        ) {
            let cfg = ChurnConfig {
                guest_frames: 8192,
                pte_pages: (1, 6),
                rx_ring: 16,
                pool_keeps: if pin { PoolKeeps::Pin } else { PoolKeeps::Type },
                shrink: Some(ShrinkConfig { proportion: 1.0, total: 4 }),
                ..ChurnConfig::default()
            };
            let setup = XenPvSetup {
                unmap_flush: if fixed { UnmapFlush::Invalidates } else { UnmapFlush::Skipped },
                ..XenPvSetup::default()
            };
            let mut g = PvChurn::new(cfg, &setup).unwrap();
            let mut alive = Vec::new();
            for (i, (fork, exit)) in ops.into_iter().enumerate() {
                if i == enable_at {
                    g.enable_pool();
                }
                g.step(fork, exit, &mut alive).unwrap();
                prop_assert!(g.check().is_ok(), "{:?}", g.check());
            }
        }
    }
}
