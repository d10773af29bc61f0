//! The Intel VT-d remapping unit (legacy mode): root table → context tables → second-level
//! page tables, with a context cache, an IOTLB, invalidation and fault recording (S3.2).
//!
//! ```text
//!  translate(bdf, iova, access)
//!    │ context cache ──miss──► root table[bus] ──► context table[devfn]      (2 fetches)
//!    │   → domain id, AW (levels), SLPTPTR
//!    │ iova beyond AW? ──► fault BeyondAddressWidth
//!    │ IOTLB[domain, pfn] ──hit──► permission check ──► hpa
//!    │   miss
//!    └► walk: one fetch per level (S0.1) ──► leaf ──► fill IOTLB ──► permission check ──► hpa
//! ```
//!
//! Software side: [`Vtd::map`] and [`Vtd::unmap`] write PTEs in simulated memory
//! ([`crate::memory`]) and charge `pte_set` / `pte_clear` to the CPU clock. They never touch the
//! IOTLB: after an unmap the old translation stays usable by the device until software issues
//! an invalidation (S0.3) — that window is what the flush policies trade against speed and the
//! stale-access oracle detects. A non-present → present change needs no invalidation, only a
//! write-buffer flush where `CAP.RWBF` is set (S1.10): [`Vtd::flush_write_buffer`].
//!
//! Clocks: CPU-side cycles (PTE writes, write-buffer flushes, invalidations) accumulate in
//! [`Vtd::cpu_cycles`]; device-side walk latency (`walk_fetch` per memory fetch) in
//! [`Vtd::device_cycles`].
//!
//! All domains share the configured number of levels. Translation types other than
//! "untranslated requests via second-level tables" (pass-through, device-TLB) and scalable
//! mode are not modeled.
//!
//! # Examples
//!
//! ```
//! use iommulab_base::addr::{Access, Bdf, DomainId, Hpa, Iova, PageSize, Perm, Pfn};
//! use iommulab_hw::{Vtd, VtdConfig, FaultReason};
//!
//! let mut mmu = Vtd::new(VtdConfig::default()).unwrap();
//! let (d, dev) = (DomainId::new(1), Bdf::new(0, 3, 0).unwrap());
//! mmu.create_domain(d).unwrap();
//! mmu.attach(dev, d).unwrap();
//! mmu.map(d, Pfn::new(0x10), Pfn::<Hpa>::new(0x99), PageSize::Size4K, Perm::Read).unwrap();
//! assert_eq!(mmu.translate(dev, Iova::new(0x10_123), Access::Read), Ok(Hpa::new(0x99_123)));
//! let f = mmu.translate(dev, Iova::new(0x10_123), Access::Write).unwrap_err();
//! assert_eq!(f.reason, FaultReason::WriteDenied);
//! ```

pub mod context_cache;
pub mod entry;
pub mod table;

use serde::{Deserialize, Serialize};

use crate::cost::CostModel;
use crate::error::bytes;
use crate::fault::FaultLog;
use crate::invalidate::{InvRequest, InvalidationInterface, MAX_ADDRESS_MASK};
use crate::iotlb::{Iotlb, IotlbConfig, IotlbEntry};
use crate::memory::TableMemory;
use crate::stats::IommuStats;
use crate::unit::{InvalidationCaps, RemapUnit};
use iommulab_base::addr::{Access, Bdf, DomainId, Hpa, Iova, PAGE_4K, PageSize, Perm, Pfn};
use iommulab_base::clock::Cycles;

use context_cache::{CachedContext, ContextCache};
use entry::{ContextEntry, MAX_HPA_PFN, RootEntry, SlPte};
use table::{RangeConflict, SlTable};

pub use crate::error::MapError;
pub use crate::fault::{Fault, FaultReason};

/// Configuration of the remapping unit. `#[serde(default)]`: a TOML table may give any subset.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct VtdConfig {
    /// Second-level table depth: 3, 4 or 5 (39-, 48-, 57-bit address width; AW = levels − 2).
    pub levels: u8,
    /// IOTLB geometry (S2.8).
    pub iotlb: IotlbConfig,
    /// Context-cache entries (fully associative, LRU); 0 disables it. 16 is an estimate.
    pub context_cache_entries: usize,
    /// How invalidations are submitted (S1.10).
    pub invalidation: InvalidationInterface,
    /// `CAP.RWBF`: whether the hardware needs a write-buffer flush after non-present → present
    /// PTE changes (S1.10). When false, [`Vtd::flush_write_buffer`] is a no-op.
    pub write_buffer_flush: bool,
    /// Fault records kept; later faults are only counted.
    pub fault_log_capacity: usize,
    /// `CAP.PSI`: page-selective IOTLB invalidation (up to [`MAX_ADDRESS_MASK`]). Without
    /// it a page request is performed as its domain's (what Linux's intel-iommu does when
    /// `cap_pgsel_inv` is clear).
    pub page_selective_invalidation: bool,
    /// Cycle costs.
    pub cost: CostModel,
}

impl Default for VtdConfig {
    fn default() -> Self {
        Self {
            levels: 4,
            iotlb: IotlbConfig::default(),
            context_cache_entries: 16,
            invalidation: InvalidationInterface::Queued,
            write_buffer_flush: true,
            fault_log_capacity: 256,
            page_selective_invalidation: true,
            cost: CostModel::MODERN,
        }
    }
}

/// The VT-d remapping unit with its tables in simulated memory.
#[derive(Debug, Clone)]
pub struct Vtd {
    cfg: VtdConfig,
    mem: TableMemory,
    /// Frame of the root table (`RTADDR`).
    root_table: Pfn<Hpa>,
    /// Each domain's second-level table, indexed by domain id: a `Vec`, not a map, so `map`
    /// and `unmap` find the table with one bounds-checked load.
    domains: Vec<Option<SlTable>>,
    iotlb: Iotlb,
    context_cache: ContextCache,
    faults: FaultLog,
    /// Counters except the IOTLB's and `table_pages`, which are read when asked.
    stats: IommuStats,
    cpu: Cycles,
    device: Cycles,
    /// The level-1 table the last `map_range`/`unmap_range` reached, keyed by the domain's
    /// root frame and the 2 MiB region: a simulator speed-up (no hardware has it), exact
    /// because tables are never freed; a super-page `map`, which may orphan a level-1
    /// table, clears it.
    leaf_hint: Option<(Pfn<Hpa>, u64, Pfn<Hpa>)>,
}

impl Vtd {
    /// A remapping unit with an empty root table and no domains.
    pub fn new(cfg: VtdConfig) -> Result<Self, MapError> {
        if !(3..=5).contains(&cfg.levels) {
            return Err(MapError::Levels { levels: cfg.levels });
        }
        let iotlb = Iotlb::new(cfg.iotlb)?;
        let mut mem = TableMemory::new();
        let root_table = mem.alloc_frame();
        Ok(Self {
            cfg,
            mem,
            root_table,
            domains: Vec::new(),
            leaf_hint: None,
            iotlb,
            context_cache: ContextCache::new(cfg.context_cache_entries),
            faults: FaultLog::new(cfg.fault_log_capacity),
            stats: IommuStats::default(),
            cpu: Cycles::ZERO,
            device: Cycles::ZERO,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &VtdConfig {
        &self.cfg
    }

    /// Input address width of every domain, in bits.
    pub fn address_bits(&self) -> u8 {
        12 + 9 * self.cfg.levels
    }

    /// Creates an empty domain (allocates its top-level page table).
    pub fn create_domain(&mut self, id: DomainId) -> Result<(), MapError> {
        let i = usize::from(id.get());
        if self.domains.get(i).is_some_and(Option::is_some) {
            return Err(MapError::DomainExists { domain: id.get() });
        }
        if self.domains.len() <= i {
            self.domains.resize(i + 1, None);
        }
        self.domains[i] = Some(SlTable::new(&mut self.mem, self.cfg.levels));
        Ok(())
    }

    #[inline]
    fn domain(&self, id: DomainId) -> Result<SlTable, MapError> {
        self.domains
            .get(usize::from(id.get()))
            .copied()
            .flatten()
            .ok_or(MapError::NoSuchDomain { domain: id.get() })
    }

    /// Points `bdf` at `domain`: allocates the bus's context table if its root entry is not
    /// present, writes the context entry (domain id, AW, SLPTPTR) and invalidates that
    /// device's context-cache entry (S3.2). Re-attaching to another domain overwrites it.
    pub fn attach(&mut self, bdf: Bdf, domain: DomainId) -> Result<(), MapError> {
        let table = self.domain(domain)?;
        let bus = usize::from(bdf.bus());
        let root = RootEntry::from_qwords(
            self.mem.read(self.root_table, 2 * bus),
            self.mem.read(self.root_table, 2 * bus + 1),
        );
        let ctp = if root.present() {
            root.context_table()
        } else {
            let ctp = self.mem.alloc_frame();
            self.mem
                .write128(self.root_table, bus, RootEntry::new(ctp).qwords());
            ctp
        };
        let ce = ContextEntry::new(domain, table.levels(), table.root());
        self.mem
            .write128(ctp, usize::from(bdf.devfn()), ce.qwords());
        self.context_cache.invalidate(bdf);
        Ok(())
    }

    /// Clears `bdf`'s context entry (its DMA then faults `ContextNotPresent`) and invalidates
    /// its context-cache entry. The context table stays allocated.
    pub fn detach(&mut self, bdf: Bdf) -> Result<(), MapError> {
        let (root, ce) = self.read_context(bdf);
        if !root.present() || !ce.present() {
            return Err(MapError::NotAttached { bdf });
        }
        self.mem.write128(
            root.context_table(),
            usize::from(bdf.devfn()),
            ContextEntry::EMPTY.qwords(),
        );
        self.context_cache.invalidate(bdf);
        Ok(())
    }

    /// Reads the root entry for `bdf`'s bus and, if present, its context entry.
    fn read_context(&self, bdf: Bdf) -> (RootEntry, ContextEntry) {
        let (lo, hi) = self.mem.read128(self.root_table, usize::from(bdf.bus()));
        let root = RootEntry::from_qwords(lo, hi);
        if !root.present() {
            return (root, ContextEntry::EMPTY);
        }
        let (lo, hi) = self
            .mem
            .read128(root.context_table(), usize::from(bdf.devfn()));
        (root, ContextEntry::from_qwords(lo, hi))
    }

    /// The domain `bdf` is attached to, read from the tables (no cache, no stats).
    pub fn domain_of(&self, bdf: Bdf) -> Option<DomainId> {
        let (_, ce) = self.read_context(bdf);
        ce.present().then(|| ce.domain())
    }

    /// Checks that `[pfn, pfn + pages)` fits the domain's address width.
    fn check_width(&self, t: &SlTable, pfn: u64, pages: u64) -> Result<(), MapError> {
        let limit = t.page_limit();
        if pfn >= limit || pages > limit - pfn {
            return Err(MapError::BeyondAddressWidth {
                iova: bytes(pfn.max(limit)),
                bits: t.address_bits(),
            });
        }
        Ok(())
    }

    /// Checks that `[hpa, hpa + pages)` fits a PTE's address field.
    fn check_hpa(hpa: u64, pages: u64) -> Result<(), MapError> {
        let limit = MAX_HPA_PFN + 1;
        if hpa >= limit || pages > limit - hpa {
            return Err(MapError::HpaBeyondAddressWidth {
                hpa: bytes(hpa.max(limit)),
            });
        }
        Ok(())
    }

    /// Maps one page of `size` (a 4 KiB leaf, or a 2 MiB / 1 GiB super-page leaf with PS set
    /// at level 2 / 3). Page numbers are in 4 KiB units and both must be aligned to `size`.
    /// Charges one `pte_set`. Fails without change if any page of the range is mapped; a
    /// super-page may replace an empty lower table (which stays allocated, see [`table`]).
    pub fn map(
        &mut self,
        domain: DomainId,
        iova: Pfn<Iova>,
        hpa: Pfn<Hpa>,
        size: PageSize,
        perm: Perm,
    ) -> Result<(), MapError> {
        let t = self.domain(domain)?;
        let n = size.base_pages();
        if iova.get() & (n - 1) != 0 || hpa.get() & (n - 1) != 0 {
            return Err(MapError::Misaligned {
                iova: bytes(iova.get()),
                hpa: bytes(hpa.get()),
                size,
            });
        }
        self.check_width(&t, iova.get(), n)?;
        Self::check_hpa(hpa.get(), n)?;
        if size != PAGE_4K {
            // A super-page may replace (orphan) an empty level-1 table the hint points at.
            self.leaf_hint = None;
        }
        t.map(&mut self.mem, iova.get(), hpa, size, perm)
            .map_err(|p| MapError::AlreadyMapped { iova: bytes(p) })?;
        self.stats.pte_sets += 1;
        self.cpu.add(self.cfg.cost.pte_set);
        Ok(())
    }

    /// Maps `pages` 4 KiB pages `[iova, iova + pages)` → `[hpa, hpa + pages)`. Atomic: on
    /// error nothing changed (the range is checked first). Charges `pages × pte_set`.
    /// `pages == 0` does nothing.
    pub fn map_range(
        &mut self,
        domain: DomainId,
        iova: Pfn<Iova>,
        hpa: Pfn<Hpa>,
        pages: u64,
        perm: Perm,
    ) -> Result<(), MapError> {
        let t = self.domain(domain)?;
        if pages == 0 {
            return Ok(());
        }
        self.check_width(&t, iova.get(), pages)?;
        Self::check_hpa(hpa.get(), pages)?;
        if self.map_in_one_table(&t, iova.get(), hpa, pages, perm)? {
            self.stats.pte_sets += pages;
            self.cpu.add(self.cfg.cost.pte_set.saturating_mul(pages));
            return Ok(());
        }
        if let Some(p) = t.first_mapped(&self.mem, iova.get(), iova.get() + pages) {
            return Err(MapError::AlreadyMapped { iova: bytes(p) });
        }
        t.map_4k_range(&mut self.mem, iova.get(), hpa, pages, perm);
        self.stats.pte_sets += pages;
        self.cpu.add(self.cfg.cost.pte_set.saturating_mul(pages));
        Ok(())
    }

    /// The level-1 table holding page `p` of `t`, from the hint or a walk (allocating
    /// missing tables when `alloc`); `None` if a super-page or a hole is in the way.
    #[inline]
    fn leaf_table_of(&mut self, t: &SlTable, p: u64, alloc: bool) -> Option<Pfn<Hpa>> {
        let key = (t.root(), p >> table::BITS_PER_LEVEL);
        if let Some((root, region, table)) = self.leaf_hint
            && (root, region) == key
        {
            return Some(table);
        }
        let table = if alloc {
            t.leaf_table_alloc(&mut self.mem, p)?
        } else {
            t.leaf_table(&self.mem, p)?
        };
        self.leaf_hint = Some((key.0, key.1, table));
        Some(table)
    }

    /// `map_range` when the range lies in one level-1 table: one walk (or none, with the
    /// hint) instead of a check walk and a write walk. `Ok(false)`: take the general path.
    #[inline]
    fn map_in_one_table(
        &mut self,
        t: &SlTable,
        p: u64,
        hpa: Pfn<Hpa>,
        pages: u64,
        perm: Perm,
    ) -> Result<bool, MapError> {
        let i0 = table::index(p, 1);
        let Some(n) = usize::try_from(pages)
            .ok()
            .filter(|n| i0 + n <= table::ENTRIES_PER_TABLE)
        else {
            return Ok(false);
        };
        let Some(tb) = self.leaf_table_of(t, p, true) else {
            return Ok(false);
        };
        if let Some(k) = self.mem.table(tb)[i0..i0 + n]
            .iter()
            .position(|&e| SlPte::from_raw(e).present())
        {
            return Err(MapError::AlreadyMapped {
                iova: bytes(p + k as u64),
            });
        }
        let mut frame = hpa;
        for i in i0..i0 + n {
            self.mem.write(tb, i, SlPte::leaf(frame, perm, false).raw());
            frame = frame.add(1);
        }
        Ok(true)
    }

    /// `unmap_range` when the range lies in one level-1 table and is fully mapped there;
    /// `false`: take the general path (which also reports the error).
    #[inline]
    fn unmap_in_one_table(&mut self, t: &SlTable, p: u64, pages: u64) -> bool {
        let i0 = table::index(p, 1);
        let Some(n) = usize::try_from(pages)
            .ok()
            .filter(|n| i0 + n <= table::ENTRIES_PER_TABLE)
        else {
            return false;
        };
        let Some(tb) = self.leaf_table_of(t, p, false) else {
            return false;
        };
        if !self.mem.table(tb)[i0..i0 + n]
            .iter()
            .all(|&e| SlPte::from_raw(e).present())
        {
            return false;
        }
        for i in i0..i0 + n {
            self.mem.write(tb, i, 0);
        }
        true
    }

    /// Clears the leaf that maps `iova`, which must be the leaf's first page, and returns the
    /// leaf's first frame and size. Charges one `pte_clear`. Does **not** touch the IOTLB: a
    /// cached translation stays usable until an invalidation (S0.3).
    pub fn unmap(
        &mut self,
        domain: DomainId,
        iova: Pfn<Iova>,
    ) -> Result<(Pfn<Hpa>, PageSize), MapError> {
        let t = self.domain(domain)?;
        let p = iova.get();
        self.check_width(&t, p, 1)
            .map_err(|_| MapError::NotMapped { iova: bytes(p) })?;
        let s = t.find(&self.mem, p);
        if !s.pte.present() {
            return Err(MapError::NotMapped { iova: bytes(p) });
        }
        let size = match s.level {
            1 => PageSize::Size4K,
            2 => PageSize::Size2M,
            _ => PageSize::Size1G,
        };
        if p & (size.base_pages() - 1) != 0 {
            return Err(MapError::PartialSuperPage {
                iova: bytes(p),
                size,
            });
        }
        self.mem.write(s.table, s.index, 0);
        self.stats.pte_clears += 1;
        self.cpu.add(self.cfg.cost.pte_clear);
        Ok((s.pte.addr(), size))
    }

    /// Clears the 4 KiB leaves of `[iova, iova + pages)`; every page must be mapped by a 4 KiB
    /// leaf. Atomic: on error nothing changed. Charges `pages × pte_clear`. Does not touch the
    /// IOTLB. `pages == 0` does nothing.
    pub fn unmap_range(
        &mut self,
        domain: DomainId,
        iova: Pfn<Iova>,
        pages: u64,
    ) -> Result<(), MapError> {
        let t = self.domain(domain)?;
        if pages == 0 {
            return Ok(());
        }
        let p = iova.get();
        if let Err(MapError::BeyondAddressWidth { .. }) = self.check_width(&t, p, pages) {
            // The first page out of reach cannot be mapped.
            return Err(MapError::NotMapped {
                iova: bytes(p.max(t.page_limit())),
            });
        }
        if self.unmap_in_one_table(&t, p, pages) {
            self.stats.pte_clears += pages;
            self.cpu.add(self.cfg.cost.pte_clear.saturating_mul(pages));
            return Ok(());
        }
        t.check_4k_range(&self.mem, p, pages).map_err(|c| match c {
            RangeConflict::NotMapped(q) => MapError::NotMapped { iova: bytes(q) },
            RangeConflict::SuperPage(q, size) => MapError::PartialSuperPage {
                iova: bytes(q),
                size,
            },
        })?;
        t.clear_4k_range(&mut self.mem, p, pages);
        self.stats.pte_clears += pages;
        self.cpu.add(self.cfg.cost.pte_clear.saturating_mul(pages));
        Ok(())
    }

    /// Flushes the write buffer (`GCMD.WBF`), needed after non-present → present changes on
    /// hardware with `CAP.RWBF` (S1.10). Counted and charged only if
    /// [`VtdConfig::write_buffer_flush`] is set.
    pub fn flush_write_buffer(&mut self) {
        if self.cfg.write_buffer_flush {
            self.stats.write_buffer_flushes += 1;
            self.cpu.add(self.cfg.cost.write_buffer_flush);
        }
    }

    /// Submits `reqs` as one batch: applies each to the IOTLB, counts it, and charges the CPU
    /// per the configured interface (register: `inv_register_overhead` + hardware cost each;
    /// queued: `inv_descriptor` + hardware cost each, plus one `inv_wait`). An empty batch
    /// does nothing.
    pub fn invalidate(&mut self, reqs: &[InvRequest]) {
        if reqs.is_empty() {
            return;
        }
        for &r in reqs {
            debug_assert!(
                RemapUnit::caps(self).supports(r),
                "{r:?} is not supported: widen it with InvalidationCaps::widen"
            );
            match r {
                InvRequest::Global => self.stats.inv_global += 1,
                InvRequest::Domain(_) => self.stats.inv_domain += 1,
                InvRequest::Page { .. } => self.stats.inv_page += 1,
            }
            self.iotlb.invalidate(r);
        }
        if self.cfg.invalidation == InvalidationInterface::Queued {
            self.stats.inv_waits += 1;
        }
        self.cpu
            .add(self.cfg.invalidation.batch_cost(reqs, &self.cfg.cost));
    }

    /// Invalidates the whole context cache (global context-cache invalidation). Not needed
    /// after [`Vtd::attach`]/[`Vtd::detach`], which invalidate the device's entry.
    pub fn invalidate_context_cache(&mut self) {
        self.context_cache.invalidate_all();
    }

    /// Translates a device access as the hardware does (see the module diagram). Every
    /// memory fetch costs `walk_fetch` device cycles. A fault is recorded in the fault log
    /// (bounded; overflow counted), counted in the stats, and returned.
    pub fn translate(&mut self, bdf: Bdf, iova: Iova, access: Access) -> Result<Hpa, Fault> {
        self.stats.translations += 1;
        match self.translate_inner(bdf, iova, access) {
            Ok(hpa) => Ok(hpa),
            Err(reason) => {
                let f = Fault {
                    bdf,
                    iova,
                    access,
                    reason,
                };
                self.stats.faults += 1;
                self.faults.record(f);
                Err(f)
            }
        }
    }

    #[inline]
    fn fetches(&mut self, n: u32) {
        self.stats.walk_fetches += u64::from(n);
        self.device
            .add(self.cfg.cost.walk_fetch.saturating_mul(u64::from(n)));
    }

    fn translate_inner(
        &mut self,
        bdf: Bdf,
        iova: Iova,
        access: Access,
    ) -> Result<Hpa, FaultReason> {
        let ctx = match self.context_cache.lookup(bdf) {
            Some(c) => {
                self.stats.context_cache_hits += 1;
                c
            }
            None => {
                self.stats.context_cache_misses += 1;
                let (root, ce) = self.read_context(bdf);
                if !root.present() {
                    self.fetches(1);
                    return Err(FaultReason::RootNotPresent);
                }
                self.fetches(2);
                if !ce.present() {
                    return Err(FaultReason::ContextNotPresent);
                }
                let c = CachedContext {
                    domain: ce.domain(),
                    table: SlTable::from_root(ce.slptptr(), ce.levels()),
                };
                self.context_cache.insert(bdf, c);
                c
            }
        };
        let pfn = iova.pfn(PAGE_4K);
        if pfn.get() >= ctx.table.page_limit() {
            return Err(FaultReason::BeyondAddressWidth);
        }
        let (frame, perm) = match self.iotlb.lookup(ctx.domain, pfn) {
            Some(e) => (e.frame_of(pfn), e.perm),
            None => {
                let (leaf, fetches) = ctx.table.walk(&self.mem, pfn.get());
                self.fetches(fetches);
                let leaf = leaf.ok_or(FaultReason::NotPresent)?;
                // The leaf is cached whatever the access; the permission check follows.
                self.iotlb.insert(IotlbEntry {
                    domain: ctx.domain,
                    iova: leaf.iova,
                    hpa: leaf.hpa,
                    perm: leaf.perm,
                    size: leaf.size,
                });
                (leaf.frame_of(pfn.get()), leaf.perm)
            }
        };
        if !perm.allows(access) {
            return Err(match access {
                Access::Read => FaultReason::ReadDenied,
                Access::Write => FaultReason::WriteDenied,
            });
        }
        Ok(Hpa::new(
            frame.base(PAGE_4K).get() | iova.page_offset(PAGE_4K),
        ))
    }

    /// Software walk of `domain`'s tables for 4 KiB page `iova`: the frame it maps to (not
    /// the leaf base), the permission and the leaf size. No caches, no stats, no cycles.
    pub fn lookup(&self, domain: DomainId, iova: Pfn<Iova>) -> Option<(Pfn<Hpa>, Perm, PageSize)> {
        let t = self.domain(domain).ok()?;
        if iova.get() >= t.page_limit() {
            return None;
        }
        let (leaf, _) = t.walk(&self.mem, iova.get());
        leaf.map(|l| (l.frame_of(iova.get()), l.perm, l.size))
    }

    /// Whether any IOTLB entry (of any size) of `domain` covers 4 KiB page `iova`, without
    /// counting or touching LRU order: the flush invariant check.
    pub fn iotlb_holds(&self, domain: DomainId, iova: Pfn<Iova>) -> bool {
        self.iotlb.peek(domain, iova).is_some()
    }

    /// The IOTLB (read-only), for inspection.
    pub fn iotlb(&self) -> &Iotlb {
        &self.iotlb
    }

    /// A copy of the counters, including the IOTLB's and the table page count.
    pub fn stats(&self) -> IommuStats {
        IommuStats {
            iotlb: self.iotlb.stats(),
            table_pages: self.mem.frames(),
            ..self.stats
        }
    }

    /// Modeled CPU time of PTE sets and clears, write-buffer flushes and invalidations.
    pub fn cpu_cycles(&self) -> Cycles {
        self.cpu
    }

    /// Modeled device-side walk latency (`walk_fetch` per memory fetch).
    pub fn device_cycles(&self) -> Cycles {
        self.device
    }

    /// The recorded faults, oldest first (at most `fault_log_capacity`).
    pub fn faults(&self) -> &[Fault] {
        self.faults.records()
    }

    /// Faults that were counted but not recorded because the log was full.
    pub fn faults_dropped(&self) -> u64 {
        self.faults.dropped()
    }

    /// Bytes of remapping tables: 4096 × (root + context + page-table frames).
    pub fn table_bytes(&self) -> u64 {
        self.mem.frames() * PAGE_4K.bytes()
    }
}

/// VT-d behind the seam: every method is the inherent one of the same name.
impl RemapUnit for Vtd {
    const KIND: &'static str = "vtd";

    fn caps(&self) -> InvalidationCaps {
        InvalidationCaps {
            page_selective: self
                .cfg
                .page_selective_invalidation
                .then_some(MAX_ADDRESS_MASK),
            domain_selective: true,
            interface: self.cfg.invalidation,
            flush_needs_quiesce: false,
        }
    }
    fn cost(&self) -> &CostModel {
        &self.cfg.cost
    }
    fn address_bits(&self) -> u8 {
        Vtd::address_bits(self)
    }
    fn create_domain(&mut self, id: DomainId) -> Result<(), MapError> {
        Vtd::create_domain(self, id)
    }
    fn attach(&mut self, bdf: Bdf, domain: DomainId) -> Result<(), MapError> {
        Vtd::attach(self, bdf, domain)
    }
    fn detach(&mut self, bdf: Bdf) -> Result<(), MapError> {
        Vtd::detach(self, bdf)
    }
    fn domain_of(&self, bdf: Bdf) -> Option<DomainId> {
        Vtd::domain_of(self, bdf)
    }
    #[inline]
    fn map_range(
        &mut self,
        domain: DomainId,
        iova: Pfn<Iova>,
        hpa: Pfn<Hpa>,
        pages: u64,
        perm: Perm,
    ) -> Result<(), MapError> {
        Vtd::map_range(self, domain, iova, hpa, pages, perm)
    }
    #[inline]
    fn unmap_range(
        &mut self,
        domain: DomainId,
        iova: Pfn<Iova>,
        pages: u64,
    ) -> Result<(), MapError> {
        Vtd::unmap_range(self, domain, iova, pages)
    }
    #[inline]
    fn after_map(&mut self) {
        self.flush_write_buffer();
    }
    fn invalidate(&mut self, reqs: &[InvRequest]) {
        Vtd::invalidate(self, reqs);
    }
    #[inline]
    fn translate(&mut self, bdf: Bdf, iova: Iova, access: Access) -> Result<Hpa, Fault> {
        Vtd::translate(self, bdf, iova, access)
    }
    fn lookup(&self, domain: DomainId, iova: Pfn<Iova>) -> Option<(Pfn<Hpa>, Perm)> {
        Vtd::lookup(self, domain, iova).map(|(frame, perm, _)| (frame, perm))
    }
    fn cache_holds(&self, domain: DomainId, iova: Pfn<Iova>) -> bool {
        self.iotlb_holds(domain, iova)
    }
    fn stats(&self) -> IommuStats {
        Vtd::stats(self)
    }
    fn cpu_cycles(&self) -> Cycles {
        self.cpu
    }
    fn device_cycles(&self) -> Cycles {
        self.device
    }
    fn faults(&self) -> &[Fault] {
        Vtd::faults(self)
    }
    fn faults_dropped(&self) -> u64 {
        Vtd::faults_dropped(self)
    }
    fn table_bytes(&self) -> u64 {
        Vtd::table_bytes(self)
    }
}

#[cfg(test)]
mod tests;
