//! TCE remapping units (S2.1–S2.3): IBM **Calgary** and the PowerPC 970 **DART**.
//!
//! ```text
//!  translate(bdf, iova, access)
//!    │ bdf ──► its table (one I/O address space per table, shared by the devices of a bus)
//!    │ index = iova >> 12 ── index ≥ entries? ──► fault BeyondAddressWidth
//!    │ IOTLB[table, index] ──hit──► permission check ──► hpa
//!    │   miss
//!    └► one fetch: TCE[index] ──► decode (calgary.rs / dart.rs) ──► fill IOTLB ──► check ──► hpa
//! ```
//!
//! A TCE table is one contiguous array of Translation Control Entries indexed by I/O page
//! number (S2.1): no levels, one memory fetch per miss. The entry formats are bit-exact
//! ([`calgary::CalgaryTce`], 8 bytes, 48-bit reach; [`dart::DartTce`], 4 bytes, 36-bit reach,
//! so its table is half the size, S2.3). A "domain" of the [`RemapUnit`] seam is one TCE table.
//!
//! **Invalidation.** Calgary's cache cannot invalidate one entry: the only way is to quiesce
//! all DMA and flush the whole cache (S2.2). Its [`InvalidationCaps`] say so (no page- or
//! domain-selective invalidation, `flush_needs_quiesce`), and [`Tce::invalidate`] *widens*
//! any narrower request itself ([`InvalidationCaps::widen`]), so a Calgary run never
//! invalidates a single entry whatever the flush policy asks; each flush is Linux's
//! `tce_cache_blast` register sequence ([`TcePrices::calgary_blast`]). The deferred flush
//! Linux uses on Calgary (flush only when the next-fit allocator wraps, S2.4) is the existing
//! `iova/bitmap.rs` allocator with the `per_lap` flush policy, not something of this unit;
//! the per-unmap flush the paper abandoned is the same allocator with the strict policy.
//! DART (U4/CPC945) invalidates one entry at a time through a register (Linux's
//! `dart_tlb_invalidate_one`), and Linux does it *in the build*: every mapped entry is
//! invalidated as it is written, none on free ([`TceFormat::INVALIDATE_ON_BUILD`]); its caps
//! say page-selective of order 0, so a longer range asked by a flush policy becomes a whole
//! flush (without quiescing).
//!
//! Costs ([`price`]): a TCE write or clear is a store (`entry_store`), a build adds the
//! format's `build_sync`, invalidations are MMIO register reads and writes; a miss costs
//! `walk_fetch` of the cost model (device side). Nothing allocates per operation: the table
//! is allocated once per domain.

pub mod calgary;
pub mod dart;
pub mod price;

use std::fmt::Debug;
use std::marker::PhantomData;

use serde::{Deserialize, Serialize};

use crate::cost::CostModel;
use crate::error::{MapError, bytes};
use crate::fault::{Fault, FaultLog, FaultReason};
use crate::invalidate::{InvRequest, InvalidationInterface};
use crate::iotlb::{Iotlb, IotlbConfig, IotlbEntry};
use crate::stats::IommuStats;
use crate::unit::{InvalidationCaps, RemapUnit};
use iommulab_base::addr::{Access, Bdf, DomainId, Hpa, Iova, PAGE_4K, PageSize, Perm, Pfn};
use iommulab_base::clock::Cycles;

use calgary::CalgaryTce;
use dart::DartTce;
pub use price::TcePrices;

/// One TCE format: how an entry is encoded and what the cache can invalidate.
pub trait TceFormat: Copy + Debug + Default + Send + Sync + 'static {
    /// The unit's name (`RemapUnit::KIND`).
    const KIND: &'static str;
    /// Bytes per entry in the table.
    const ENTRY_BYTES: u64;
    /// Width of the real page number: frames at or above `2^RPN_BITS` are out of reach.
    const RPN_BITS: u32;
    /// Page-selective invalidation (largest order), if any.
    const PAGE_SELECTIVE: Option<u8>;
    /// Whether a whole-cache flush needs DMA quiesced first.
    const FLUSH_NEEDS_QUIESCE: bool;
    /// Whether Linux's driver invalidates each entry as it builds it (DART on U4).
    const INVALIDATE_ON_BUILD: bool;
    /// The unit's prices as Linux drives it ([`price`]).
    const PRICES: TcePrices;
    /// The raw entry for `frame` with `perm` (`None`: frame out of reach or hub too wide).
    fn encode(frame: Pfn<Hpa>, perm: Perm, hub: u8) -> Option<u64>;
    /// The translation a raw entry holds, `None` if invalid.
    fn decode(raw: u64) -> Option<(Pfn<Hpa>, Perm)>;
}

/// Calgary's entry format (S2.2).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CalgaryFormat;

impl TceFormat for CalgaryFormat {
    const KIND: &'static str = "calgary";
    const ENTRY_BYTES: u64 = 8;
    const RPN_BITS: u32 = calgary::RPN_BITS;
    const PAGE_SELECTIVE: Option<u8> = None;
    const FLUSH_NEEDS_QUIESCE: bool = true;
    const INVALIDATE_ON_BUILD: bool = false;
    const PRICES: TcePrices = TcePrices::CALGARY_X460;
    #[inline]
    fn encode(frame: Pfn<Hpa>, perm: Perm, hub: u8) -> Option<u64> {
        CalgaryTce::new(frame, perm, hub).map(CalgaryTce::to_raw)
    }
    #[inline]
    fn decode(raw: u64) -> Option<(Pfn<Hpa>, Perm)> {
        CalgaryTce::from_raw(raw).translation()
    }
}

/// DART's entry format (S2.3).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DartFormat;

impl TceFormat for DartFormat {
    const KIND: &'static str = "dart";
    const ENTRY_BYTES: u64 = 4;
    const RPN_BITS: u32 = dart::RPN_BITS;
    const PAGE_SELECTIVE: Option<u8> = Some(0);
    const FLUSH_NEEDS_QUIESCE: bool = false;
    const INVALIDATE_ON_BUILD: bool = true;
    const PRICES: TcePrices = TcePrices::DART_CPC945;
    #[inline]
    fn encode(frame: Pfn<Hpa>, perm: Perm, _hub: u8) -> Option<u64> {
        DartTce::new(frame, perm).map(|t| u64::from(t.to_raw()))
    }
    #[inline]
    fn decode(raw: u64) -> Option<(Pfn<Hpa>, Perm)> {
        #[expect(clippy::cast_possible_truncation, reason = "DART entries are 32-bit")]
        DartTce::from_raw(raw as u32).translation()
    }
}

/// The Calgary unit.
pub type Calgary = Tce<CalgaryFormat>;
/// The DART unit.
pub type Dart = Tce<DartFormat>;

/// Configuration of a TCE unit. `#[serde(default)]`: a TOML table may give any subset.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TceConfig {
    /// Entries per table, a power of two: the I/O address space is `entries × 4 KiB`.
    /// Default 2^20 (4 GiB): Calgary gives "somewhat less than a 4GB DMA address space"
    /// (S2.6); Linux's largest Calgary table is 8 MB of 8-byte entries.
    pub table_entries: u64,
    /// Hub id written in Calgary entries (MSB-0 bits 56:61); ignored by DART.
    pub hub_id: u8,
    /// Translation-cache geometry (S2.8; the paper gives none).
    pub iotlb: IotlbConfig,
    /// Fault records kept; later faults are only counted.
    pub fault_log_capacity: usize,
    /// The unit's per-step prices; `None`: the format's own ([`TcePrices::CALGARY_X460`],
    /// [`TcePrices::DART_CPC945`]).
    pub prices: Option<TcePrices>,
    /// Cycle costs (the clock, and `walk_fetch` for a miss).
    pub cost: CostModel,
}

impl Default for TceConfig {
    fn default() -> Self {
        Self {
            table_entries: 1 << 20,
            hub_id: 0,
            iotlb: IotlbConfig::default(),
            fault_log_capacity: 256,
            prices: None,
            cost: CostModel::MODERN,
        }
    }
}

/// A TCE remapping unit of format `F` ([`Calgary`] or [`Dart`]).
#[derive(Debug, Clone)]
pub struct Tce<F: TceFormat> {
    cfg: TceConfig,
    /// One table per domain, indexed by domain id (allocated once at `create_domain`).
    tables: Vec<Option<Box<[u64]>>>,
    /// The domain of each requester id.
    devices: Vec<Option<DomainId>>,
    iotlb: Iotlb,
    faults: FaultLog,
    stats: IommuStats,
    cpu: Cycles,
    device: Cycles,
    format: PhantomData<F>,
}

impl<F: TceFormat> Tce<F> {
    /// A unit with no tables. Errors: `table_entries` not a power of two in `[1, 2^52]`
    /// ([`MapError::TceTableSize`]), an invalid IOTLB geometry, or a hub id wider than 6 bits.
    pub fn new(cfg: TceConfig) -> Result<Self, MapError> {
        if !cfg.table_entries.is_power_of_two() || cfg.table_entries > 1 << 52 {
            return Err(MapError::TceTableSize {
                entries: cfg.table_entries,
            });
        }
        if u32::from(cfg.hub_id) >> calgary::HUB_BITS != 0 {
            return Err(MapError::TceHubId { hub: cfg.hub_id });
        }
        Ok(Self {
            iotlb: Iotlb::new(cfg.iotlb)?,
            faults: FaultLog::new(cfg.fault_log_capacity),
            cfg,
            tables: Vec::new(),
            devices: vec![None; 1 << 16],
            stats: IommuStats::default(),
            cpu: Cycles::ZERO,
            device: Cycles::ZERO,
            format: PhantomData,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &TceConfig {
        &self.cfg
    }

    /// The translation cache, for inspection.
    pub fn iotlb(&self) -> &Iotlb {
        &self.iotlb
    }

    /// The raw entry at `index` of `domain`'s table (`None`: no such table or index).
    pub fn raw_entry(&self, domain: DomainId, index: u64) -> Option<u64> {
        let t = self.tables.get(usize::from(domain.get()))?.as_ref()?;
        t.get(usize::try_from(index).ok()?).copied()
    }

    fn table_mut(&mut self, domain: DomainId) -> Result<&mut [u64], MapError> {
        self.tables
            .get_mut(usize::from(domain.get()))
            .and_then(Option::as_deref_mut)
            .ok_or(MapError::NoSuchDomain {
                domain: domain.get(),
            })
    }

    /// Checks `[iova, iova + pages)` lies in the table.
    fn check_index(&self, iova: Pfn<Iova>, pages: u64) -> Result<(), MapError> {
        let n = self.cfg.table_entries;
        if iova.get() >= n || pages > n - iova.get() {
            return Err(MapError::TceIndexOutOfTable {
                iova: bytes(iova.get().max(n)),
                entries: n,
            });
        }
        Ok(())
    }

    /// The entries `[iova, iova + pages)` of `domain`'s table.
    fn entries_mut(
        &mut self,
        domain: DomainId,
        iova: Pfn<Iova>,
        pages: u64,
    ) -> Result<&mut [u64], MapError> {
        self.check_index(iova, pages)?;
        let out = MapError::TceIndexOutOfTable {
            iova: bytes(iova.get()),
            entries: self.cfg.table_entries,
        };
        let start = usize::try_from(iova.get()).map_err(|_| out.clone())?;
        let end = usize::try_from(iova.get() + pages).map_err(|_| out.clone())?;
        self.table_mut(domain)?.get_mut(start..end).ok_or(out)
    }

    /// The prices in force.
    pub fn prices(&self) -> TcePrices {
        self.cfg.prices.unwrap_or(F::PRICES)
    }

    /// One invalidation as Linux's driver does it: Calgary's quiesce-and-blast, DART's
    /// register write and polls (one entry or all: the same sequence).
    fn charge_flush(&mut self) {
        let p = self.prices();
        self.cpu.add(if F::FLUSH_NEEDS_QUIESCE {
            p.calgary_blast()
        } else {
            p.dart_invalidate()
        });
    }
}

impl<F: TceFormat> RemapUnit for Tce<F> {
    const KIND: &'static str = F::KIND;

    fn caps(&self) -> InvalidationCaps {
        InvalidationCaps {
            page_selective: F::PAGE_SELECTIVE,
            domain_selective: false,
            interface: InvalidationInterface::Register,
            flush_needs_quiesce: F::FLUSH_NEEDS_QUIESCE,
        }
    }
    fn cost(&self) -> &CostModel {
        &self.cfg.cost
    }
    fn address_bits(&self) -> u8 {
        #[expect(clippy::cast_possible_truncation, reason = "entries <= 2^52")]
        let bits = self.cfg.table_entries.trailing_zeros() as u8;
        bits + 12
    }
    fn create_domain(&mut self, id: DomainId) -> Result<(), MapError> {
        let i = usize::from(id.get());
        if self.tables.len() <= i {
            self.tables.resize(i + 1, None);
        }
        if self.tables[i].is_some() {
            return Err(MapError::DomainExists { domain: id.get() });
        }
        let n = usize::try_from(self.cfg.table_entries).map_err(|_| MapError::TceTableSize {
            entries: self.cfg.table_entries,
        })?;
        self.tables[i] = Some(vec![0; n].into_boxed_slice());
        Ok(())
    }
    fn attach(&mut self, bdf: Bdf, domain: DomainId) -> Result<(), MapError> {
        self.table_mut(domain)?;
        self.devices[usize::from(bdf.source_id())] = Some(domain);
        Ok(())
    }
    fn detach(&mut self, bdf: Bdf) -> Result<(), MapError> {
        self.devices[usize::from(bdf.source_id())]
            .take()
            .map(|_| ())
            .ok_or(MapError::NotAttached { bdf })
    }
    fn domain_of(&self, bdf: Bdf) -> Option<DomainId> {
        self.devices[usize::from(bdf.source_id())]
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
        self.table_mut(domain)?;
        if pages == 0 {
            return Ok(());
        }
        // The last frame is the highest: if it encodes, every frame does (no truncation).
        let beyond = MapError::FrameBeyondTceReach {
            hpa: bytes(hpa.get().saturating_add(pages - 1)),
            bits: F::RPN_BITS + 12,
        };
        let last = hpa.checked_add(pages - 1).ok_or(beyond.clone())?;
        if F::encode(last, perm, self.cfg.hub_id).is_none() {
            return Err(beyond);
        }
        let hub = self.cfg.hub_id;
        let t = self.entries_mut(domain, iova, pages)?;
        if let Some(p) = t.iter().position(|&e| F::decode(e).is_some()) {
            return Err(MapError::AlreadyMapped {
                iova: bytes(iova.get() + p as u64),
            });
        }
        for (i, e) in t.iter_mut().enumerate() {
            *e = F::encode(hpa.add(i as u64), perm, hub).unwrap_or(0);
        }
        self.stats.pte_sets += pages;
        let p = self.prices();
        self.cpu.add(
            (p.entry_store + p.entry_flush)
                .saturating_mul(pages)
                .saturating_add(p.build_sync),
        );
        if F::INVALIDATE_ON_BUILD {
            // dart_build: each entry built is invalidated at once (so a free needs none).
            for i in 0..pages {
                let r = InvRequest::Page {
                    domain,
                    pfn: iova.add(i),
                    order: 0,
                };
                self.iotlb.invalidate(r);
                self.stats.inv_page += 1;
                self.charge_flush();
            }
        }
        Ok(())
    }
    #[inline]
    fn unmap_range(
        &mut self,
        domain: DomainId,
        iova: Pfn<Iova>,
        pages: u64,
    ) -> Result<(), MapError> {
        self.table_mut(domain)?;
        if pages == 0 {
            return Ok(());
        }
        let t = self.entries_mut(domain, iova, pages)?;
        if let Some(p) = t.iter().position(|&e| F::decode(e).is_none()) {
            return Err(MapError::NotMapped {
                iova: bytes(iova.get() + p as u64),
            });
        }
        t.fill(0);
        self.stats.pte_clears += pages;
        let p = self.prices();
        self.cpu
            .add((p.entry_store + p.entry_flush).saturating_mul(pages));
        Ok(())
    }
    fn after_map(&mut self) {}
    /// Performs each request widened to what the cache can do: on Calgary every request is
    /// a quiesce + whole-cache flush, so a single entry is never invalidated (S2.2).
    fn invalidate(&mut self, reqs: &[InvRequest]) {
        let caps = self.caps();
        for &r in reqs {
            let r = caps.widen(r);
            match r {
                InvRequest::Global => self.stats.inv_global += 1,
                InvRequest::Domain(_) => self.stats.inv_domain += 1,
                InvRequest::Page { .. } => self.stats.inv_page += 1,
            }
            self.iotlb.invalidate(r);
            self.charge_flush();
        }
    }
    #[inline]
    fn translate(&mut self, bdf: Bdf, iova: Iova, access: Access) -> Result<Hpa, Fault> {
        self.stats.translations += 1;
        let pfn = iova.pfn(PAGE_4K);
        let r = match self.devices[usize::from(bdf.source_id())] {
            None => Err(FaultReason::ContextNotPresent),
            Some(_) if pfn.get() >= self.cfg.table_entries => Err(FaultReason::BeyondAddressWidth),
            Some(d) => {
                let entry = match self.iotlb.lookup(d, pfn) {
                    Some(e) => Some((e.frame_of(pfn), e.perm)),
                    None => {
                        self.stats.walk_fetches += 1;
                        self.device.add(self.cfg.cost.walk_fetch);
                        let raw = self.raw_entry(d, pfn.get()).unwrap_or(0);
                        let e = F::decode(raw);
                        if let Some((frame, perm)) = e {
                            self.iotlb.insert(IotlbEntry {
                                domain: d,
                                iova: pfn,
                                hpa: frame,
                                perm,
                                size: PageSize::Size4K,
                            });
                        }
                        e
                    }
                };
                match entry {
                    None => Err(FaultReason::NotPresent),
                    Some((_, perm)) if !perm.allows(access) => Err(match access {
                        Access::Read => FaultReason::ReadDenied,
                        Access::Write => FaultReason::WriteDenied,
                    }),
                    Some((frame, _)) => Ok(Hpa::new(
                        frame.base(PAGE_4K).get() | iova.page_offset(PAGE_4K),
                    )),
                }
            }
        };
        r.map_err(|reason| {
            let f = Fault {
                bdf,
                iova,
                access,
                reason,
            };
            self.stats.faults += 1;
            self.faults.record(f);
            f
        })
    }
    fn lookup(&self, domain: DomainId, iova: Pfn<Iova>) -> Option<(Pfn<Hpa>, Perm)> {
        F::decode(self.raw_entry(domain, iova.get())?)
    }
    fn cache_holds(&self, domain: DomainId, iova: Pfn<Iova>) -> bool {
        self.iotlb.peek(domain, iova).is_some()
    }
    fn stats(&self) -> IommuStats {
        IommuStats {
            iotlb: self.iotlb.stats(),
            table_pages: self.table_bytes().div_ceil(PAGE_4K.bytes()),
            ..self.stats
        }
    }
    fn cpu_cycles(&self) -> Cycles {
        self.cpu
    }
    fn device_cycles(&self) -> Cycles {
        self.device
    }
    fn faults(&self) -> &[Fault] {
        self.faults.records()
    }
    fn faults_dropped(&self) -> u64 {
        self.faults.dropped()
    }
    fn table_bytes(&self) -> u64 {
        let n = self.tables.iter().filter(|t| t.is_some()).count() as u64;
        n * self.cfg.table_entries * F::ENTRY_BYTES
    }
}

#[cfg(test)]
mod tests;
