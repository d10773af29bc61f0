//! [`MapError`]: a request to change I/O page tables that cannot be carried out (a caller or
//! configuration bug), shared by every remapping unit. Nothing changed when one is
//! returned. A device access the tables deny is not an error but a [`super::Fault`].

use crate::iotlb::IotlbConfigError;
use iommulab_base::addr::{Bdf, PAGE_4K, PageSize};

/// A caller or configuration bug: the request cannot be carried out and nothing changed.
/// Addresses in variants are byte addresses (`pfn × 4096`, saturating).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MapError {
    /// Some page of the requested range already has a mapping (of any size).
    #[error("iova {iova:#x} is already mapped")]
    AlreadyMapped {
        /// Lowest already-mapped page of the range.
        iova: u64,
    },
    /// The range reaches above the domain's input address width.
    #[error("iova {iova:#x} is beyond the {bits}-bit address width (set `levels` higher)")]
    BeyondAddressWidth {
        /// First page of the range that is out of reach.
        iova: u64,
        /// Address width in bits (39, 48 or 57).
        bits: u8,
    },
    /// The domain id is already in use.
    #[error("domain {domain:#x} already exists")]
    DomainExists {
        /// The domain id.
        domain: u16,
    },
    /// A host frame above the 52-bit address field of a second-level PTE.
    #[error("hpa {hpa:#x} does not fit in a second-level PTE (bits 51:12)")]
    HpaBeyondAddressWidth {
        /// First out-of-range host address.
        hpa: u64,
    },
    /// The IOTLB geometry is invalid.
    #[error(transparent)]
    Iotlb(#[from] IotlbConfigError),
    /// `levels` is not 3, 4 or 5.
    #[error("levels = {levels:#x}, expected 3, 4 or 5 (39-, 48- or 57-bit address width)")]
    Levels {
        /// The rejected level count.
        levels: u8,
    },
    /// IOVA or HPA not aligned to the page size of the mapping.
    #[error("iova {iova:#x} → hpa {hpa:#x} is not aligned to the {size:?} page size")]
    Misaligned {
        /// The requested IOVA.
        iova: u64,
        /// The requested HPA.
        hpa: u64,
        /// The requested page size.
        size: PageSize,
    },
    /// The device is not attached to any domain.
    #[error("device {bdf} is not attached to a domain")]
    NotAttached {
        /// The requester id.
        bdf: Bdf,
    },
    /// Some page of the range has no mapping.
    #[error("iova {iova:#x} is not mapped")]
    NotMapped {
        /// Lowest unmapped page of the range.
        iova: u64,
    },
    /// No domain with this id was created.
    #[error("domain {domain:#x} does not exist (create_domain first)")]
    NoSuchDomain {
        /// The domain id.
        domain: u16,
    },
    /// The page lies inside a super-page leaf, which can only be unmapped whole, by
    /// the unit's `unmap` at its first page.
    #[error("iova {iova:#x} lies inside a {size:?} super-page; unmap it whole at its first page")]
    PartialSuperPage {
        /// The requested page.
        iova: u64,
        /// Size of the leaf that maps it.
        size: PageSize,
    },
    /// A TCE table's size is not a power of two in `[1, 2^52]` entries.
    #[error("table_entries = {entries}, expected a power of two between 1 and 2^52")]
    TceTableSize {
        /// The rejected entry count.
        entries: u64,
    },
    /// A Calgary hub id wider than its 6-bit field (S2.2).
    #[error("hub_id = {hub}, but a Calgary TCE's hub id field has 6 bits (0..=63)")]
    TceHubId {
        /// The rejected hub id.
        hub: u8,
    },
    /// The range reaches past the end of a flat TCE table (S2.1): its index is out of table.
    #[error("iova {iova:#x} is past the end of the {entries}-entry TCE table")]
    TceIndexOutOfTable {
        /// First out-of-table address.
        iova: u64,
        /// Entries in the table.
        entries: u64,
    },
    /// A host frame beyond the reach of the TCE's real page number: 36 bits on DART (64 GB),
    /// 48 on Calgary (S2.2, S2.3). Never silently truncated.
    #[error("hpa {hpa:#x} is beyond this TCE's {bits}-bit reach")]
    FrameBeyondTceReach {
        /// First out-of-reach host address.
        hpa: u64,
        /// Host address bits the entry can express.
        bits: u32,
    },
}

/// Byte address of a 4 KiB page number, for messages (saturating: never wraps); any unit's
/// [`MapError`] names byte addresses.
pub fn bytes(pfn: u64) -> u64 {
    pfn.saturating_mul(PAGE_4K.bytes())
}
