//! What a TCE unit's work costs the CPU, step by step, as Linux drives it (S2.1–S2.4).
//!
//! A TCE table lives in ordinary memory, so an entry write is a **store** (Linux's
//! `tce_build`/`tce_free` on Calgary, `dart_build`/`dart_free` on DART), not a VT-d
//! page-table update with its write-buffer flush. What differs between the units is what the
//! driver must do around the stores:
//!
//! - **Calgary** (x86-64, Linux 2.6.18–2.6.2x `arch/x86_64/kernel/pci-calgary.c` and
//!   `tce.c`): the bridge does not snoop the CPU's cache, so `tce_build` and `tce_free`
//!   follow every entry's store with `flush_tce` (`clflush` of its line; `wbinvd` on a CPU
//!   without it): a store and a line flush per entry, built or cleared (`entry_flush`); the
//!   cache can only be flushed whole, by `tce_cache_blast`: read the PHB's arbitration
//!   register (AER) and write 0 to it (stop DMA), read PLSSR (post the write), poll the split
//!   queue register until DMA has drained (`quiesce_polls` reads), write the TAR (the
//!   invalidation), write the AER back and read it (post). That is `3 + quiesce_polls` MMIO
//!   reads and 3 MMIO writes per flush.
//! - **DART** (U4/CPC945, Linux `arch/powerpc/sysdev/dart_iommu.c`): after a build's stores
//!   the driver makes them reach memory (`mb(); in_be32(dp); mb();`, later `dart_cache_sync`),
//!   then invalidates each built entry with `dart_tlb_invalidate_one`: a write of the control
//!   register and polls until the bit clears (`invalidate_polls` reads). A free is stores
//!   only ("we don't worry about flushing the TLB cache"): DART invalidates at map time.
//!
//! Prices are cycles at the cost model's clock; every one is an estimate with a range
//! ([`CALGARY_X460_PRICES`], [`DART_CPC945_PRICES`]) except the counts Linux's code fixes.

use serde::{Deserialize, Serialize};

use crate::cost::PriceSource;

/// Per-step prices of a TCE unit's work on the CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TcePrices {
    /// One entry stored into (or cleared in) the in-memory table.
    pub entry_store: u64,
    /// Per build (one map call), making its stores visible to a bridge that does not snoop
    /// the CPU's cache (0 where it does).
    pub build_sync: u64,
    /// Per entry stored or cleared, writing its cache line back to memory where the driver
    /// does so entry by entry (Calgary's `flush_tce`; 0 where it does not).
    #[serde(default)]
    pub entry_flush: u64,
    /// One uncached read of a bridge register: the CPU waits for the round trip.
    pub mmio_read: u64,
    /// One uncached (posted) write of a bridge register.
    pub mmio_write: u64,
    /// Split-queue polls per Calgary flush until DMA has drained (Linux gives up at 100).
    pub quiesce_polls: u64,
    /// Control-register polls per DART invalidation until it completes.
    pub invalidate_polls: u64,
}

impl TcePrices {
    /// Calgary on the paper's IBM x460 (3.0 GHz Paxville Xeons; the PHB sits behind the
    /// chipset's remote I/O link). Estimates; see [`CALGARY_X460_PRICES`].
    pub const CALGARY_X460: TcePrices = TcePrices {
        entry_store: 20,
        build_sync: 0,
        entry_flush: 324,
        mmio_read: 3000,
        mmio_write: 300,
        quiesce_polls: 1,
        invalidate_polls: 0,
    };

    /// DART in the U4/CPC945 north bridge (PowerPC 970), priced at the same clock.
    /// Estimates; see [`DART_CPC945_PRICES`].
    pub const DART_CPC945: TcePrices = TcePrices {
        entry_store: 20,
        build_sync: 300,
        entry_flush: 0,
        mmio_read: 1000,
        mmio_write: 300,
        quiesce_polls: 0,
        invalidate_polls: 1,
    };

    /// Calgary's `tce_cache_blast`: `3 + quiesce_polls` reads and 3 writes.
    pub const fn calgary_blast(&self) -> u64 {
        (3 + self.quiesce_polls) * self.mmio_read + 3 * self.mmio_write
    }

    /// DART's `dart_tlb_invalidate_one` (and `_all`): one write and its polls.
    pub const fn dart_invalidate(&self) -> u64 {
        self.mmio_write + self.invalidate_polls * self.mmio_read
    }

    /// The price named `field` (a [`PriceSource`] field), for sensitivity sweeps.
    pub fn get(&self, field: &str) -> Option<u64> {
        Some(match field {
            "entry_store" => self.entry_store,
            "build_sync" => self.build_sync,
            "entry_flush" => self.entry_flush,
            "mmio_read" => self.mmio_read,
            "mmio_write" => self.mmio_write,
            "quiesce_polls" => self.quiesce_polls,
            "invalidate_polls" => self.invalidate_polls,
            _ => return None,
        })
    }

    /// A copy with `field` set to `value` (`None`: no such field).
    pub fn with(mut self, field: &str, value: u64) -> Option<Self> {
        *match field {
            "entry_store" => &mut self.entry_store,
            "build_sync" => &mut self.build_sync,
            "entry_flush" => &mut self.entry_flush,
            "mmio_read" => &mut self.mmio_read,
            "mmio_write" => &mut self.mmio_write,
            "quiesce_polls" => &mut self.quiesce_polls,
            "invalidate_polls" => &mut self.invalidate_polls,
            _ => return None,
        } = value;
        Some(self)
    }
}

const fn estimate(field: &'static str, source: &'static str, lo: u64, hi: u64) -> PriceSource {
    PriceSource {
        field,
        source,
        range: Some((lo, hi)),
    }
}

const fn from_code(field: &'static str, source: &'static str) -> PriceSource {
    PriceSource {
        field,
        source,
        range: None,
    }
}

/// Where each of [`TcePrices::CALGARY_X460`]'s prices comes from.
pub const CALGARY_X460_PRICES: [PriceSource; 6] = [
    estimate(
        "entry_store",
        "estimate: tce_build/tce_free store one big-endian word (`*tp = cpu_to_be64(t)`): the store \
         itself (the line fill it needs, its line having been flushed, is in entry_flush)",
        5,
        300,
    ),
    from_code(
        "build_sync",
        "Linux's tce_build has no per-build barrier: its flushing is per entry (entry_flush)",
    ),
    estimate(
        "entry_flush",
        "tce.c: every store of tce_build and tce_free is followed by flush_tce, a clflush of the \
         entry's line (the bridge does not snoop); the dirty line goes back to memory and the next \
         store to it (next-fit: the next entry, same line) fills it again: one local memory round \
         trip, 108 ns on IBM's X3 chipset (realworldtech.com/x3-chipset/5) = 324 cycles at 3.0 GHz; \
         100 if the write-back is posted and the fill hidden, 700 if both are waited for",
        100,
        700,
    ),
    estimate(
        "mmio_read",
        "estimate: an uncached read of a Calgary PHB register, across the x460's chipset and remote I/O \
         link, ≈ 1 µs (0.33–2 µs)",
        1000,
        6000,
    ),
    estimate(
        "mmio_write",
        "estimate: a posted uncached store, ≈ 0.1 µs (0.03–0.33 µs)",
        100,
        1000,
    ),
    estimate(
        "quiesce_polls",
        "estimate: split-queue polls before DMA has drained; Linux's tce_cache_blast gives up at 100",
        1,
        100,
    ),
];

/// Where each of [`TcePrices::DART_CPC945`]'s prices comes from.
pub const DART_CPC945_PRICES: [PriceSource; 6] = [
    estimate(
        "entry_store",
        "estimate: dart_build/dart_free store one 4-byte word per entry (16 per line); as Calgary's",
        5,
        300,
    ),
    estimate(
        "build_sync",
        "estimate: dart_build's `mb(); in_be32(dp); mb();` (two syncs and a load of the table) after \
         each build",
        100,
        1000,
    ),
    from_code(
        "entry_flush",
        "dart_build and dart_free flush no line per entry: the build's sync (build_sync) makes its stores \
         visible",
    ),
    estimate(
        "mmio_read",
        "estimate: an uncached read of DART's control register in the north bridge itself (no I/O \
         link), ≈ 0.33 µs (0.1–1 µs)",
        300,
        3000,
    ),
    estimate(
        "mmio_write",
        "estimate: a posted uncached store, ≈ 0.1 µs (0.03–0.33 µs)",
        100,
        1000,
    ),
    estimate(
        "invalidate_polls",
        "estimate: polls of DART_CNTL until the invalidate-one bit clears (at least one read)",
        1,
        10,
    ),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blast_is_linux_register_sequence() {
        let p = TcePrices::CALGARY_X460;
        // readl AER, readl PLSSR, 1 poll, readl AER back; writel AER, writeq TAR, writel AER.
        assert_eq!(p.calgary_blast(), 4 * 3000 + 3 * 300);
        let d = TcePrices::DART_CPC945;
        assert_eq!(d.dart_invalidate(), 300 + 1000);
    }

    #[test]
    fn every_estimated_field_is_a_field_and_its_default_in_range() {
        for (p, table) in [
            (TcePrices::CALGARY_X460, &CALGARY_X460_PRICES),
            (TcePrices::DART_CPC945, &DART_CPC945_PRICES),
        ] {
            for s in table {
                let v = p.get(s.field).unwrap_or_else(|| panic!("{}", s.field));
                if let Some((lo, hi)) = s.range {
                    assert!((lo..=hi).contains(&v), "{} = {v}", s.field);
                }
                assert_eq!(
                    p.with(s.field, v + 1).and_then(|q| q.get(s.field)),
                    Some(v + 1)
                );
            }
        }
        assert_eq!(TcePrices::CALGARY_X460.get("nope"), None);
    }
}
