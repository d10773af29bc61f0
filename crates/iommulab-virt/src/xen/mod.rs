//! Paravirtualised page tables against the IOTLB (seed 003: Xen PV page types and the IOSUP
//! page-table pool, S3.1–S3.5).
//!
//! ```text
//!  process fork/exit ──► page-table pages (PGD, PMD, PTE) ──► PtPool (IOSUP, S3.4)
//!                                                              │ miss / free without pool
//!                                                              ▼
//!                         PageTypes (S3.1): writable ↔ L1–L3, count, pin, validation
//!                                                              │ type change
//!                                                              ▼
//!                         IoProtection (S3.3): unmap + page-selective IOTLB invalidation,
//!                                              or remap, in the guest's VT-d domain
//!  NIC RX stream ──────────────────────────────► translate through the same IOTLB
//! ```
//!
//! | file | what it is |
//! |---|---|
//! | `page_type.rs` | [`PageTypes`]: per-frame type, type count, pinning, table validation |
//! | `coupling.rs` | [`IoProtection`]: the device's view of guest memory follows the types |
//! | `iosup.rs` | [`PtPool`]: per-level pools that keep freed tables typed; shrinking |
//! | `churn.rs` | [`PvChurn`]: process creation and exit at a rate, with a NIC stream |
//! | `pv_dma/` | a PV domain's DMA layer on a hypervisor-owned IOMMU, multicalls and the S2.6 options (seed 002) |

pub mod churn;
pub mod coupling;
pub mod iosup;
pub mod page_type;
pub mod pv_dma;

use serde::{Deserialize, Serialize};

use iommulab_base::clock::{ClockRate, Cycles};
use iommulab_hw::{CostModel, InvalidationInterface, MapError};

pub use churn::{ChurnConfig, ChurnResult, MinuteStats, PoolMode, PvChurn};
pub use coupling::{CouplingStats, IoProtection};
pub use iosup::{PtLevel, PtPool, ShrinkConfig};
pub use page_type::{FrameType, PageType, PageTypes, TypeChange};

/// Errors of the PV model. On any of them nothing changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum XenError {
    /// A frame beyond the guest's memory.
    #[error("frame {frame:#x} is outside the guest ({frames:#x} frames)")]
    OutsideGuest {
        /// The frame.
        frame: u64,
        /// The guest's frames.
        frames: u64,
    },
    /// A type change asked of a frame still referenced (or pinned) as another type.
    #[error("frame {frame:#x} is {have:?} with {count} reference(s): cannot become {want:?}")]
    TypeBusy {
        /// The frame.
        frame: u64,
        /// Its type.
        have: PageType,
        /// The type asked for.
        want: PageType,
        /// Its references.
        count: u32,
    },
    /// A new page table with an entry pointing outside the guest (S3.1).
    #[error("page table {table:#x}: slot {slot} points to frame {target:#x}, outside the guest")]
    BadEntry {
        /// The table's frame.
        table: u64,
        /// The entry's index.
        slot: usize,
        /// The frame it points to.
        target: u64,
    },
    /// A reference dropped that was never taken.
    #[error("frame {frame:#x}: type reference count would go below 0")]
    CountUnderflow {
        /// The frame.
        frame: u64,
    },
    /// More references than a count holds.
    #[error("frame {frame:#x}: type reference count overflows")]
    CountOverflow {
        /// The frame.
        frame: u64,
    },
    /// Pinning asked with a type that is not a page table.
    #[error("{ty:?} is not a page-table type")]
    NotATable {
        /// The type.
        ty: PageType,
    },
    /// Unpinning a frame that is not pinned.
    #[error("frame {frame:#x} is not pinned")]
    NotPinned {
        /// The frame.
        frame: u64,
    },
    /// The guest ran out of free frames.
    #[error("the guest ran out of free frames")]
    OutOfMemory,
    /// The NIC faulted on a buffer it was given (a model bug).
    #[error("the device faulted on its own buffer at frame {frame:#x}")]
    DeviceFault {
        /// The frame.
        frame: u64,
    },
    /// A churn configuration that cannot run.
    #[error("invalid churn configuration: expected {what}")]
    Config {
        /// What is expected.
        what: &'static str,
    },
    /// The I/O page tables refused a change (a model bug).
    #[error(transparent)]
    Map(#[from] MapError),
}

/// Prices of the guest kernel's and Xen's own work around a page-table page, in cycles.
/// **All are estimates** (the paper publishes none): each comment gives the plausible
/// range; the IOMMU's work is priced by the unit's [`CostModel`].
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct XenPvCosts {
    /// The CPU clock (S3.5's machine: 3.2 GHz).
    pub clock: ClockRate,
    /// A page from Linux's page allocator, per-CPU fast path (100–500).
    pub buddy_alloc: u64,
    /// A page back to it (100–400).
    pub buddy_free: u64,
    /// Clearing a 4 KiB page (500–1500).
    pub zero_page: u64,
    /// `pgd_ctor`: copying the kernel's PGD entries and listing the PGD (500–3000); paid
    /// whether the page comes from the pool or not.
    pub pgd_ctor: u64,
    /// The pin hypercall (`MMUEXT_PIN_Ln_TABLE`) round trip (500–2000).
    pub pin_hypercall: u64,
    /// Xen's validation of one entry of a table being pinned (4–20; 512 per table).
    pub validate_entry: u64,
    /// The unpin hypercall and the type change back to writable (500–2000).
    pub unpin_hypercall: u64,
    /// A pool push or pop under its lock (30–150).
    pub pool_op: u64,
}

impl Default for XenPvCosts {
    fn default() -> Self {
        Self {
            clock: ClockRate::ghz(3.2),
            buddy_alloc: 300,
            buddy_free: 250,
            zero_page: 1000,
            pgd_ctor: 1500,
            pin_hypercall: 1000,
            validate_entry: 8,
            unpin_hypercall: 1000,
            pool_op: 60,
        }
    }
}

impl XenPvCosts {
    /// `cycles` in ns at this clock.
    pub fn ns(&self, cycles: u64) -> f64 {
        self.clock.ns(Cycles::new(cycles))
    }
}

/// The hardware under the PV guest: S3.2's VT-d with queued, page-selective invalidation.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct XenPvSetup {
    /// IOMMU prices (`modern`: queued invalidation, coherent walks).
    pub cost: CostModel,
    /// How invalidations are submitted (S3.3: queued).
    pub invalidation: InvalidationInterface,
}

impl Default for XenPvSetup {
    fn default() -> Self {
        Self {
            cost: CostModel::MODERN,
            invalidation: InvalidationInterface::Queued,
        }
    }
}
