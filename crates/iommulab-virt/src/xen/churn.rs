//! Process churn in a PV guest with an assigned NIC (S3.3–S3.5): processes are created and
//! exit at a steady rate, each building and tearing down its PAE page tables (one PGD,
//! four PMDs — Xen PV guests do not share the kernel PMD — and a number of PTE pages),
//! while the NIC receives a netperf stream into a ring of buffers the driver refills from
//! the same page allocator. Page-table pages change type (writable ↔ page table), which
//! Xen mirrors in the I/O page tables ([`IoProtection`]): unmap + IOTLB invalidation on
//! the way in, remap on the way out. With the IOSUP pool ([`PtPool`]) freed tables keep
//! their type.
//!
//! The page allocator hands out the most recently freed page first (Linux's per-CPU hot
//! lists), so a new page table often takes a frame the NIC just used, and that frame comes
//! back to the RX ring after the process exits, its IOTLB entry invalidated: that is how
//! page-table churn shows up in the device's IOTLB miss rate here.
//!
//! Time is simulated: creations every `60 / forks_per_minute` s, exits `lifetime_s`
//! later, packets every `packet_bits / stream_mbps` µs; each minute's counters are one
//! [`MinuteStats`].

use serde::{Deserialize, Serialize};

use iommulab_base::addr::{Access, Bdf, Gpa, Pfn};
use iommulab_hw::{RemapUnit, Vtd, VtdConfig};

use super::XenError;
use super::coupling::IoProtection;
use super::iosup::{PtLevel, PtPool, ShrinkConfig};
use super::page_type::{PageType, PageTypes};
use super::{XenPvCosts, XenPvSetup};

/// When the pool is on (S3.5's groups).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum PoolMode {
    /// Never (`cache-disabled`).
    Disabled,
    /// From boot (`cache-pre-enabled`).
    PreEnabled,
    /// Switched on at the start of minute `minute` (`cache-dynamic-enabled`).
    Dynamic {
        /// The minute it is switched on.
        minute: u32,
    },
}

/// One churn run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ChurnConfig {
    /// Simulated minutes.
    pub minutes: u32,
    /// Process creations (and, in steady state, exits) per minute (S3.5: 542.14).
    pub forks_per_minute: f64,
    /// How long a process lives, in seconds (ours: Firefox tab processes of a 5-minute
    /// loop; the paper gives the rates, not the lifetimes).
    pub lifetime_s: f64,
    /// PTE pages per process, drawn uniformly from this range (ours: 8–40, 16–80 MiB
    /// mapped per process under PAE's 2 MiB per PTE page).
    pub pte_pages: (u32, u32),
    /// The pool.
    pub pool: PoolMode,
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
    /// Seed of the PTE-page draw.
    pub seed: u64,
    /// Prices of the guest's and Xen's software work.
    pub costs: XenPvCosts,
}

impl Default for ChurnConfig {
    fn default() -> Self {
        Self {
            minutes: 30,
            forks_per_minute: 542.14,
            lifetime_s: 30.0,
            pte_pages: (8, 40),
            pool: PoolMode::Disabled,
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
    /// IOTLB invalidation requests for page-table type changes (Fig. 6).
    pub iotlb_flushes: u64,
    /// Page-table allocation time per level (PGD, PMD, PTE), ns (Fig. 7).
    pub alloc_ns: [f64; 3],
    /// Page-table free time per level, ns (Fig. 7).
    pub free_ns: [f64; 3],
    /// Pages in each level's pool at the end of the minute (Figs. 8–9).
    pub pooled: [u64; 3],
    /// Tables of each level in use at the end of the minute.
    pub in_use: [u64; 3],
    /// Tables allocated per level (from a pool or from the page allocator).
    pub allocs: [u64; 3],
    /// Tables freed per level (into a pool or to the page allocator).
    pub frees: [u64; 3],
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
    /// Per level, the largest `in_pool / in_use` right after a free into the pool (what the
    /// shrink rule compares with its proportion).
    pub max_proportion: [f64; 3],
    /// Processes alive at the end.
    pub alive_at_end: u64,
}

struct Process {
    exit_ns: u64,
    tables: Vec<(PtLevel, Pfn<Gpa>)>,
}

/// A guest under churn (see the [module docs](self)).
#[derive(Debug)]
pub struct PvChurn<U> {
    cfg: ChurnConfig,
    types: PageTypes,
    io: IoProtection<U>,
    pool: PtPool,
    free: Vec<Pfn<Gpa>>,
    ring: Vec<Pfn<Gpa>>,
    rng: u64,
    stats: ChurnResult,
    shrunk: Vec<Pfn<Gpa>>,
    clock: Clock,
}

/// Where the simulated time is: the next fork, packet and ring slot, the live processes
/// (oldest first: they exit in creation order), the next minute.
#[derive(Debug, Default)]
struct Clock {
    alive: std::collections::VecDeque<Process>,
    next_fork: u64,
    next_packet: u64,
    slot: usize,
    minute: u32,
}

impl std::fmt::Debug for Process {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Process")
            .field("exit_ns", &self.exit_ns)
            .field("tables", &self.tables.len())
            .finish()
    }
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
    /// A guest on the VT-d unit of `setup` (queued invalidation, page-selective, S3.2).
    pub fn new(cfg: ChurnConfig, setup: &XenPvSetup) -> Result<Self, XenError> {
        let unit = Vtd::new(VtdConfig {
            cost: setup.cost,
            invalidation: setup.invalidation,
            ..VtdConfig::default()
        })?;
        Self::with_unit(cfg, unit)
    }
}

impl<U: RemapUnit> PvChurn<U> {
    /// A guest on `unit`: every frame writable and mapped for the NIC, the RX ring filled.
    pub fn with_unit(cfg: ChurnConfig, unit: U) -> Result<Self, XenError> {
        let frames = cfg.guest_frames;
        let positive = |x: f64| x > 0.0 && x.is_finite();
        if frames < 4096 || !positive(cfg.forks_per_minute) || !positive(cfg.lifetime_s) {
            return Err(XenError::Config {
                what: "guest_frames >= 4096, finite forks_per_minute > 0 and lifetime_s > 0",
            });
        }
        let stream_ok = cfg.stream_mbps == 0.0 || positive(cfg.stream_mbps);
        if cfg.pte_pages.0 > cfg.pte_pages.1 || !stream_ok || cfg.packet_bytes == 0 {
            return Err(XenError::Config {
                what: "pte_pages (min, max) with min <= max, stream_mbps >= 0, packet_bytes > 0",
            });
        }
        let mut types = PageTypes::new(frames);
        // Frame 0 is never handed out (a null frame is no table entry).
        let free: Vec<Pfn<Gpa>> = (1..frames).rev().map(Pfn::new).collect();
        for &f in &free {
            types.get_type(f, PageType::Writable)?;
            types.put_type(f)?;
        }
        let io = IoProtection::new(unit, &[NIC], frames, 1 << 20)?;
        let mut pool = PtPool::new(cfg.shrink);
        if cfg.pool == PoolMode::PreEnabled {
            pool.enable();
        }
        let mut me = Self {
            rng: cfg.seed ^ 0x9e37_79b9_7f4a_7c15,
            cfg,
            types,
            io,
            pool,
            free,
            ring: Vec::new(),
            stats: ChurnResult::default(),
            shrunk: Vec::new(),
            clock: Clock::default(),
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

    fn draw(&mut self, lo: u32, hi: u32) -> u32 {
        // xorshift64*: deterministic per seed.
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        let r = self.rng.wrapping_mul(0x2545_f491_4f6c_dd1d);
        lo + u32::try_from(r % u64::from(hi - lo + 1)).unwrap_or(0)
    }

    fn ns(&self, cycles: u64) -> f64 {
        self.cfg.costs.ns(cycles)
    }

    /// A new page table of `level`: from the pool (still typed) or from the page allocator
    /// (zeroed, validated and pinned by Xen, its I/O PTE cleared and invalidated).
    fn alloc_table(&mut self, level: PtLevel, m: &mut MinuteStats) -> Result<Pfn<Gpa>, XenError> {
        let c = self.cfg.costs;
        let ctor = if level == PtLevel::Pgd { c.pgd_ctor } else { 0 };
        m.allocs[level.index()] += 1;
        if let Some(f) = self.pool.take(level) {
            self.stats.pool_hits += 1;
            m.alloc_ns[level.index()] += self.ns(c.pool_op + ctor);
            return Ok(f);
        }
        self.stats.buddy_allocs += 1;
        let f = self.page()?;
        let before = self.io.unit().cpu_cycles().get();
        // A new table points inside the guest (its entries are filled later by the
        // guest's mmu_update hypercalls): validation sees only valid entries.
        let change = self.types.pin_table(f, level.page_type(), &[])?;
        if let Some(ch) = change {
            let flushes = self.io.stats().iotlb_flushes;
            self.io.on_change(ch)?;
            m.iotlb_flushes += self.io.stats().iotlb_flushes - flushes;
        }
        let iommu = self.io.unit().cpu_cycles().get() - before;
        let sw = c.buddy_alloc + c.zero_page + ctor + c.pin_hypercall + 512 * c.validate_entry;
        m.alloc_ns[level.index()] += self.ns(sw) + self.ns(iommu);
        Ok(f)
    }

    /// Frees a page table: into its pool, or unpinned, made writable (its I/O PTE set back)
    /// and returned to the page allocator.
    fn free_table(
        &mut self,
        level: PtLevel,
        f: Pfn<Gpa>,
        m: &mut MinuteStats,
    ) -> Result<(), XenError> {
        let c = self.cfg.costs;
        m.frees[level.index()] += 1;
        if self.pool.give(level, f) {
            m.free_ns[level.index()] += self.ns(c.pool_op);
            self.shrunk.clear();
            let mut out = std::mem::take(&mut self.shrunk);
            self.pool.shrink(level, &mut out);
            for &g in &out {
                self.stats.shrunk += 1;
                // Giving a pooled page back costs what freeing it would have.
                let ns = self.release(g)?;
                m.free_ns[level.index()] += ns;
            }
            self.shrunk = out;
            return Ok(());
        }
        let ns = self.release(f)?;
        m.free_ns[level.index()] += ns;
        Ok(())
    }

    /// Unpins a table page, makes it writable again and frees it; its cost in ns.
    fn release(&mut self, f: Pfn<Gpa>) -> Result<f64, XenError> {
        let c = self.cfg.costs;
        let before = self.io.unit().cpu_cycles().get();
        self.types.unpin(f)?;
        if let Some(ch) = self.types.get_type(f, PageType::Writable)? {
            self.io.on_change(ch)?;
        }
        self.types.put_type(f)?;
        self.free.push(f);
        let iommu = self.io.unit().cpu_cycles().get() - before;
        Ok(self.ns(c.unpin_hypercall + c.buddy_free) + self.ns(iommu))
    }

    fn fork(&mut self, now_ns: u64, m: &mut MinuteStats) -> Result<Process, XenError> {
        let ptes = self.draw(self.cfg.pte_pages.0, self.cfg.pte_pages.1);
        let mut tables = Vec::with_capacity(5 + ptes as usize);
        tables.push((PtLevel::Pgd, self.alloc_table(PtLevel::Pgd, m)?));
        for _ in 0..4 {
            tables.push((PtLevel::Pmd, self.alloc_table(PtLevel::Pmd, m)?));
        }
        for _ in 0..ptes {
            tables.push((PtLevel::Pte, self.alloc_table(PtLevel::Pte, m)?));
        }
        m.forks += 1;
        Ok(Process {
            exit_ns: now_ns + whole_ns(self.cfg.lifetime_s * 1e9),
            tables,
        })
    }

    fn exit(&mut self, p: Process, m: &mut MinuteStats) -> Result<(), XenError> {
        for &(level, f) in p.tables.iter().rev() {
            self.free_table(level, f, m)?;
        }
        m.exits += 1;
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
            self.pool.enable();
        }
        let end = u64::from(minute + 1) * 60_000_000_000;
        let mut m = MinuteStats {
            minute,
            ..MinuteStats::default()
        };
        let tlb = self.io.unit().stats();
        let dev = self.io.unit().device_cycles().get();
        let ring = self.ring.len().max(1);
        loop {
            let c = &self.clock;
            let next_exit = c.alive.front().map_or(u64::MAX, |p| p.exit_ns);
            let t = c.next_fork.min(c.next_packet).min(next_exit);
            if t >= end {
                break;
            }
            if t == next_exit {
                let p = self.clock.alive.pop_front().ok_or(XenError::OutOfMemory)?;
                self.exit(p, &mut m)?;
            } else if t == self.clock.next_fork {
                let p = self.fork(t, &mut m)?;
                self.clock.alive.push_back(p);
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
        m.device_walk_ns = self.ns(self.io.unit().device_cycles().get() - dev);
        for l in PtLevel::ALL {
            m.pooled[l.index()] = self.pool.pooled(l);
            m.in_use[l.index()] = self.pool.in_use(l);
        }
        self.stats.peak_pooled = self.stats.peak_pooled.max(m.pooled.iter().sum());
        self.stats.minutes.push(m.clone());
        self.clock.minute += 1;
        Ok(m)
    }

    /// Everything so far.
    pub fn finish(mut self) -> ChurnResult {
        self.stats.alive_at_end = self.clock.alive.len() as u64;
        self.stats.max_proportion = PtLevel::ALL.map(|l| self.pool.max_proportion(l));
        self.stats
    }

    /// S3.3's invariant: no frame typed as a page or descriptor table is reachable by the
    /// device (tables, or a stale IOTLB entry), and every pooled page keeps its type.
    pub fn check(&self) -> Result<(), String> {
        for i in 0..self.types.len() {
            let f = Pfn::<Gpa>::new(i);
            let t = self.types.get(f).map_err(|e| e.to_string())?;
            if t.ty.protected() && self.io.device_can_reach(f) {
                return Err(format!(
                    "frame {i:#x} is {:?} and reachable by the device",
                    t.ty
                ));
            }
        }
        for (level, f) in self.pool.pooled_pages() {
            let t = self.types.get(f).map_err(|e| e.to_string())?;
            if t.ty != level.page_type() || !t.pinned {
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

    /// Runs up to `t_ns` of simulated time with `ops` forks/exits interleaved by the caller
    /// (property tests): forks one process and exits the oldest when `exit` is set.
    pub fn step(
        &mut self,
        fork: bool,
        exit_oldest: bool,
        alive: &mut Vec<Vec<(PtLevel, Pfn<Gpa>)>>,
    ) -> Result<(), XenError> {
        let mut m = MinuteStats::default();
        if fork {
            let p = self.fork(0, &mut m)?;
            alive.push(p.tables);
        }
        if exit_oldest && !alive.is_empty() {
            let tables = alive.remove(0);
            self.exit(Process { exit_ns: 0, tables }, &mut m)?;
        }
        let slot = usize::from(m.forks > 0) % self.ring.len().max(1);
        self.packet(slot, &mut m)
    }

    /// Switches the pool on now.
    pub fn enable_pool(&mut self) {
        self.pool.enable();
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
            pool,
            ..ChurnConfig::default()
        }
    }

    /// Without the pool every table page costs one IOTLB invalidation; with it from boot,
    /// only the pages the pool has not yet collected do (the first lifetime).
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
        let flushes = |r: &ChurnResult, m: usize| r.minutes[m].iotlb_flushes;
        assert!(flushes(&off, 2) > 10_000, "{}", flushes(&off, 2));
        // Only new peaks of tables in use still take pages from the allocator.
        assert!(
            flushes(&on, 2) * 100 < flushes(&off, 2),
            "minute 3: {} with the pool, {} without",
            flushes(&on, 2),
            flushes(&off, 2)
        );
        assert!(flushes(&on, 0) > 0, "the pool starts empty");
        assert!(on.pool_hits > 0 && off.pool_hits == 0);
        let alloc = |r: &ChurnResult| r.minutes[2].alloc_ns.iter().sum::<f64>();
        assert!(alloc(&on) < alloc(&off));
        assert!(on.minutes[2].packets > 400_000 && on.minutes[2].iotlb_lookups > 0);
    }

    /// The shrink rule runs only where a group is given one (S3.5: the dynamic group). It
    /// frees `in_pool − in_use` pages, so it needs a pool larger than the tables in use; a
    /// steady churn's pool holds only the swing of live tables, so it never fires, and the
    /// largest proportion seen says so (the rule itself: `iosup.rs`'s test).
    #[test]
    fn the_pool_gives_pages_back_only_with_a_shrink_config_past_its_thresholds() {
        let setup = XenPvSetup::default();
        let run = |shrink| {
            let cfg = ChurnConfig {
                minutes: 2,
                shrink,
                ..small(PoolMode::PreEnabled)
            };
            PvChurn::new(cfg, &setup).unwrap().run().unwrap()
        };
        let keep = run(None);
        assert_eq!(keep.shrunk, 0);
        let default = run(Some(ShrinkConfig::default()));
        assert_eq!(default.shrunk, 0);
        assert!(
            default.max_proportion.iter().all(|&p| p > 0.0 && p < 1.0),
            "{:?}",
            default.max_proportion
        );
        assert_eq!(default.peak_pooled, keep.peak_pooled);
        let m = &keep.minutes[1];
        assert!(
            m.frees.iter().all(|&f| f > 0) && m.in_use[1] == 4 * m.in_use[0],
            "{m:?}"
        );
    }

    proptest! {
        /// S3.3–S3.4's invariants under any interleaving of forks, exits and packets, with
        /// the pool switched on at any point: no page or descriptor table is reachable by
        /// the device, every pooled page keeps its table type (and pin), and no type count
        /// goes negative (`put_type` would refuse: the run would fail).
        #[test]
        fn no_table_is_ever_reachable_by_the_device(
            ops in proptest::collection::vec((any::<bool>(), any::<bool>()), 1..60),
            enable_at in 0usize..60,
        ) {
            let cfg = ChurnConfig { guest_frames: 8192, pte_pages: (1, 6), rx_ring: 16, ..ChurnConfig::default() };
            let mut g = PvChurn::new(cfg, &XenPvSetup::default()).unwrap();
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
