//! Bit-exact VT-d table entries (legacy mode): root entry (§9.1), context entry (§9.3) and
//! second-level page-table entry (§9.8). S3.2: the root table is indexed by bus, the context
//! table by devfn, and the context entry points to the multi-level second-level tables
//! (S0.1: 8-byte entries, 512 per 4 KiB table).
//!
//! Only the fields the model uses have accessors; every other bit is written as zero (which
//! the spec requires of reserved bits).

// Bit-field extraction: every narrowing cast below is of a field already masked or shifted
// into range, which is the point of this module.
#![allow(clippy::cast_possible_truncation)]

use iommulab_base::addr::{DomainId, Hpa, Perm, Pfn};

/// Bits 51:12 of a 64-bit pointer field or second-level PTE: a 4 KiB frame number.
const ADDR_MASK: u64 = ((1 << 52) - 1) & !((1 << 12) - 1);
/// Bits 63:12 of a root or context entry's low qword (the spec allows HAW up to 63:12).
const PTR_MASK: u64 = !((1 << 12) - 1);

/// The largest 4 KiB frame number a second-level PTE can hold (bits 51:12): `2^40 - 1`.
pub const MAX_HPA_PFN: u64 = (1 << 40) - 1;

/// A root-table entry (VT-d §9.1, legacy mode), one per bus (S3.2).
///
/// ```text
///  127                                   64
/// ┌──────────────────────────────────────┐
/// │              reserved (0)            │
/// └──────────────────────────────────────┘
///  63                        12 11     1  0
/// ┌────────────────────────────┬────────┬──┐
/// │ context-table pointer (CTP)│  rsvd  │P │
/// └────────────────────────────┴────────┴──┘
/// ```
#[repr(transparent)]
#[derive(Clone, Copy, PartialEq, Eq, Default, Debug)]
pub struct RootEntry(u128);

impl RootEntry {
    /// The not-present entry.
    pub const EMPTY: RootEntry = RootEntry(0);

    /// A present entry pointing to the context table at frame `ctp`.
    pub const fn new(ctp: Pfn<Hpa>) -> Self {
        Self(((ctp.get() << 12) & PTR_MASK) as u128 | 1)
    }
    /// Rebuilds an entry from its two qwords as stored in memory (low qword first).
    pub const fn from_qwords(lo: u64, hi: u64) -> Self {
        Self(((hi as u128) << 64) | lo as u128)
    }
    /// The low and high qwords.
    pub const fn qwords(self) -> (u64, u64) {
        (self.lo(), (self.0 >> 64) as u64)
    }
    /// The raw 128 bits.
    pub const fn raw(self) -> u128 {
        self.0
    }
    const fn lo(self) -> u64 {
        (self.0 & u64::MAX as u128) as u64
    }
    /// Bit 0: present.
    pub const fn present(self) -> bool {
        self.lo() & 1 != 0
    }
    /// Bits 63:12: frame of the context table.
    pub const fn context_table(self) -> Pfn<Hpa> {
        Pfn::new((self.lo() & PTR_MASK) >> 12)
    }
}

/// A context-table entry (VT-d §9.3, legacy mode), one per devfn (S3.2).
///
/// ```text
///  127             88 87      72 71    67 66  64
/// ┌──────────────────┬──────────┬────────┬──────┐
/// │     reserved     │ DID 15:0 │ avail  │  AW  │   hi qword: DID = bits 23:8, AW = bits 2:0
/// └──────────────────┴──────────┴────────┴──────┘
///  63                        12 11     4 3   2  1   0
/// ┌────────────────────────────┬────────┬─────┬───┬───┐
/// │  SLPTPTR (second-level PT) │  rsvd  │ TT  │FPD│ P │
/// └────────────────────────────┴────────┴─────┴───┴───┘
/// ```
///
/// AW: 1 = 39-bit (3-level), 2 = 48-bit (4-level), 3 = 57-bit (5-level). TT = 0: untranslated
/// requests are translated through the second-level tables (the only type modeled).
#[repr(transparent)]
#[derive(Clone, Copy, PartialEq, Eq, Default, Debug)]
pub struct ContextEntry(u128);

impl ContextEntry {
    /// The not-present entry.
    pub const EMPTY: ContextEntry = ContextEntry(0);

    /// A present, translated (TT = 0) entry for `domain` whose `levels`-level second-level
    /// table is rooted at frame `slptptr`. `levels` must be 3, 4 or 5.
    pub const fn new(domain: DomainId, levels: u8, slptptr: Pfn<Hpa>) -> Self {
        let lo = ((slptptr.get() << 12) & PTR_MASK) | 1;
        let aw = (levels.saturating_sub(2) & 0x7) as u64;
        let hi = aw | ((domain.get() as u64) << 8);
        Self(((hi as u128) << 64) | lo as u128)
    }
    /// Rebuilds an entry from its two qwords as stored in memory (low qword first).
    pub const fn from_qwords(lo: u64, hi: u64) -> Self {
        Self(((hi as u128) << 64) | lo as u128)
    }
    /// The low and high qwords.
    pub const fn qwords(self) -> (u64, u64) {
        (self.lo(), self.hi())
    }
    /// The raw 128 bits.
    pub const fn raw(self) -> u128 {
        self.0
    }
    const fn lo(self) -> u64 {
        (self.0 & u64::MAX as u128) as u64
    }
    const fn hi(self) -> u64 {
        (self.0 >> 64) as u64
    }
    /// Bit 0: present.
    pub const fn present(self) -> bool {
        self.lo() & 1 != 0
    }
    /// Bit 1: fault processing disable (always 0 here: faults are recorded).
    pub const fn fault_processing_disable(self) -> bool {
        self.lo() & 2 != 0
    }
    /// Bits 3:2: translation type.
    pub const fn translation_type(self) -> u8 {
        ((self.lo() >> 2) & 0x3) as u8
    }
    /// Bits 63:12: frame of the top-level second-level page table.
    pub const fn slptptr(self) -> Pfn<Hpa> {
        Pfn::new((self.lo() & PTR_MASK) >> 12)
    }
    /// Bits 66:64: address width code (1, 2, 3 for 39, 48, 57 bits).
    pub const fn address_width(self) -> u8 {
        (self.hi() & 0x7) as u8
    }
    /// Levels of the second-level table implied by AW (`AW + 2`).
    pub const fn levels(self) -> u8 {
        self.address_width() + 2
    }
    /// Bits 87:72: domain id.
    pub const fn domain(self) -> DomainId {
        DomainId::new(((self.hi() >> 8) & 0xffff) as u16)
    }
}

/// A second-level page-table entry (VT-d §9.8), 8 bytes, 512 per table (S0.1).
///
/// ```text
///  63    52 51                                 12 11    8  7  6    2  1   0
/// ┌────────┬─────────────────────────────────────┬───────┬────┬──────┬───┬───┐
/// │ ignored│  ADDR: next table or page frame     │ ign.  │ PS │ rsvd │ W │ R │
/// └────────┴─────────────────────────────────────┴───────┴────┴──────┴───┴───┘
/// ```
///
/// An entry is present iff R or W is set. A non-leaf entry has R|W set and PS clear and points
/// to the next-level table; a leaf is any level-1 entry, or a level-2 (2 MiB) or level-3
/// (1 GiB) entry with PS set (VT-d §9.8 super pages).
#[repr(transparent)]
#[derive(Clone, Copy, PartialEq, Eq, Default, Debug)]
pub struct SlPte(u64);

impl SlPte {
    /// Bit 0: read.
    pub const READ: u64 = 1 << 0;
    /// Bit 1: write.
    pub const WRITE: u64 = 1 << 1;
    /// Bit 7: super page (in level-2 and level-3 entries).
    pub const PAGE_SIZE: u64 = 1 << 7;

    /// The not-present entry.
    pub const EMPTY: SlPte = SlPte(0);

    /// Wraps raw bits as read from a table.
    pub const fn from_raw(raw: u64) -> Self {
        Self(raw)
    }
    /// The raw bits as written to a table.
    pub const fn raw(self) -> u64 {
        self.0
    }
    /// A leaf mapping frame `hpa` with `perm`; `super_page` sets PS (for 2 MiB / 1 GiB leaves).
    pub const fn leaf(hpa: Pfn<Hpa>, perm: Perm, super_page: bool) -> Self {
        let ps = if super_page { Self::PAGE_SIZE } else { 0 };
        Self(((hpa.get() << 12) & ADDR_MASK) | ps | perm as u64)
    }
    /// A non-leaf entry (R|W) pointing to the table at frame `next`.
    pub const fn table(next: Pfn<Hpa>) -> Self {
        Self(((next.get() << 12) & ADDR_MASK) | Self::READ | Self::WRITE)
    }
    /// R or W set.
    pub const fn present(self) -> bool {
        self.0 & (Self::READ | Self::WRITE) != 0
    }
    /// Bit 7 (meaningful at levels 2 and 3 only).
    pub const fn super_page(self) -> bool {
        self.0 & Self::PAGE_SIZE != 0
    }
    /// Bits 51:12: the frame this entry points to.
    pub const fn addr(self) -> Pfn<Hpa> {
        Pfn::new((self.0 & ADDR_MASK) >> 12)
    }
    /// The R/W bits as a permission; `None` when not present.
    pub const fn perm(self) -> Option<Perm> {
        Perm::from_bits(self.0 & Self::READ != 0, self.0 & Self::WRITE != 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// VT-d §9.1: P is bit 0, the context-table pointer bits 63:12.
    #[test]
    fn root_entry_bits_match_spec() {
        let r = RootEntry::new(Pfn::new(0xabcde));
        assert_eq!(r.raw(), 0xabcd_e001);
        assert!(r.present());
        assert_eq!(r.context_table(), Pfn::new(0xabcde));
        assert!(!RootEntry::EMPTY.present());
        let (lo, hi) = r.qwords();
        assert_eq!(RootEntry::from_qwords(lo, hi), r);
    }

    /// VT-d §9.3: AW in bits 66:64, DID in bits 87:72, SLPTPTR in 63:12, P bit 0, TT 3:2.
    #[test]
    fn context_entry_bits_match_spec() {
        let c = ContextEntry::new(DomainId::new(0xbeef), 4, Pfn::new(0x12345));
        assert_eq!(c.qwords(), (0x1234_5001, 0x00be_ef02));
        assert_eq!(c.raw() >> 64, 0x00be_ef02);
        assert!(c.present());
        assert!(!c.fault_processing_disable());
        assert_eq!(c.translation_type(), 0);
        assert_eq!(c.address_width(), 2);
        assert_eq!(c.levels(), 4);
        assert_eq!(c.domain(), DomainId::new(0xbeef));
        assert_eq!(c.slptptr(), Pfn::new(0x12345));
        assert_eq!(
            ContextEntry::new(DomainId::new(1), 3, Pfn::new(1)).address_width(),
            1
        );
        assert_eq!(
            ContextEntry::new(DomainId::new(1), 5, Pfn::new(1)).address_width(),
            3
        );
    }

    /// VT-d §9.8: R bit 0, W bit 1, PS bit 7, address 51:12; non-leaf entries are R|W.
    #[test]
    fn second_level_pte_bits_match_spec() {
        let l = SlPte::leaf(Pfn::new(MAX_HPA_PFN), Perm::Write, false);
        assert_eq!(l.raw(), 0x000f_ffff_ffff_f002);
        assert_eq!(l.perm(), Some(Perm::Write));
        assert!(!l.super_page());
        let s = SlPte::leaf(Pfn::new(0x200), Perm::ReadWrite, true);
        assert_eq!(s.raw(), 0x20_0083);
        assert!(s.super_page());
        let t = SlPte::table(Pfn::new(0x42));
        assert_eq!(t.raw(), 0x42_003);
        assert_eq!(t.addr(), Pfn::new(0x42));
        assert!(!SlPte::EMPTY.present());
        assert_eq!(SlPte::EMPTY.perm(), None);
    }
}
