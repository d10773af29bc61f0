//! [`MapError`]: a request to change I/O page tables that cannot be carried out (a caller or
//! configuration bug), shared by every remapping unit. Nothing changed when one is
//! returned. A device access the tables deny is not an error but a [`super::Fault`].

use crate::addr::{Bdf, PAGE_4K, PageSize};
use crate::iotlb::IotlbConfigError;

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
}

/// Byte address of a 4 KiB page number, for messages (saturating: never wraps); any unit's
/// [`MapError`] names byte addresses.
pub fn bytes(pfn: u64) -> u64 {
    pfn.saturating_mul(PAGE_4K.bytes())
}
