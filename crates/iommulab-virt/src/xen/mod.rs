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
//! | `pt_work.rs` | [`StepCounts`]: a table's allocation and free step by step, priced; [`PoolKeeps`] |
//! | `churn.rs` | [`PvChurn`]: process creation and exit at a rate, with a NIC stream |
//! | `pv_dma/` | a PV domain's DMA layer on a hypervisor-owned IOMMU, multicalls and the S2.6 options (seed 002) |

pub mod churn;
pub mod coupling;
pub mod iosup;
pub mod page_type;
pub mod pt_work;
pub mod pv_dma;

use serde::{Deserialize, Serialize};

use iommulab_base::clock::{ClockRate, Cycles};
use iommulab_hw::{CostModel, InvalidationInterface, MapError};

pub use churn::{BrowserLoop, ChurnConfig, ChurnResult, MinuteStats, PoolMode, PvChurn};
pub use coupling::{CouplingStats, IoProtection, UnmapFlush};
pub use iosup::{PtLevel, PtPool, ShrinkConfig};
pub use page_type::{FrameType, PageType, PageTypes, TypeChange};
pub use pt_work::{PoolKeeps, StepCounts};

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

/// Prices of the guest kernel's and Xen's work around a page-table page and a packet, in
/// cycles, step by step ([`pt_work`]). **All but the clock are estimates** (the paper
/// publishes none): [`pt_work::XEN_PV_PRICES`] gives each one's reasoning and range.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct XenPvCosts {
    /// The CPU clock (S3.5's machine: Core i5-3470, 3.2 GHz).
    pub clock: ClockRate,
    /// A page from Linux's page allocator, per-CPU fast path.
    pub page_alloc: u64,
    /// A page back to it.
    pub page_free: u64,
    /// Clearing a 4 KiB page.
    pub zero_page: u64,
    /// `pgd_ctor` and the kernel PMD's copy: paid whether the page comes from the pool or not.
    pub pgd_ctor: u64,
    /// `pgd_dtor` (`pgd_list_del` under `pgd_lock`) in `pgd_free`: paid whether the page goes
    /// to the pool or not, as its constructor is.
    pub pgd_dtor: u64,
    /// A pin or unpin hypercall's trap into Xen and back (`MMUEXT_(UN)PIN_*`).
    pub hypercall: u64,
    /// Xen's validation (or devalidation) of one entry of a table.
    pub validate_entry: u64,
    /// One direct-map entry made read-only or writable (`update_va_mapping` in a batch).
    pub kernel_remap: u64,
    /// A pool push or pop under its lock.
    pub pool_op: u64,
    /// The type change writable → table under IOMMU protection: the I/O PTE cleared and Xen's
    /// IOTLB flush called (S3.3), returning at once where it invalidates nothing
    /// ([`UnmapFlush::Skipped`], S3.5's Xen 4.2.1).
    pub iommu_unmap: u64,
    /// The page-selective invalidation of such an unmap, submitted and waited for, where Xen
    /// performs it ([`UnmapFlush::Invalidates`]).
    pub iotlb_invalidate: u64,
    /// The change back: the I/O PTE set (no invalidation for a non-present entry).
    pub iommu_remap: u64,
    /// Mapping a received packet's buffer for the NIC (dom0's DMA layer).
    pub dma_map: u64,
    /// Unmapping it.
    pub dma_unmap: u64,
}

impl Default for XenPvCosts {
    fn default() -> Self {
        let m = CostModel::MODERN;
        Self {
            clock: ClockRate::ghz(3.2),
            page_alloc: 300,
            page_free: 250,
            zero_page: 1000,
            pgd_ctor: 1500,
            pgd_dtor: 200,
            hypercall: 1000,
            validate_entry: 8,
            kernel_remap: 500,
            pool_op: 60,
            iommu_unmap: m.pte_clear,
            iotlb_invalidate: m.inv_descriptor + m.inv_page + m.inv_wait,
            iommu_remap: m.pte_set,
            dma_map: 200,
            dma_unmap: 100,
        }
    }
}

impl XenPvCosts {
    /// `cycles` in ns at this clock.
    pub fn ns(&self, cycles: u64) -> f64 {
        self.clock.ns(Cycles::new(cycles))
    }

    /// The value of price `name` ([`pt_work::XEN_PV_PRICES`]' names), `None` if none.
    pub fn field(&self, name: &str) -> Option<u64> {
        Some(match name {
            "page_alloc" => self.page_alloc,
            "page_free" => self.page_free,
            "zero_page" => self.zero_page,
            "pgd_ctor" => self.pgd_ctor,
            "pgd_dtor" => self.pgd_dtor,
            "hypercall" => self.hypercall,
            "validate_entry" => self.validate_entry,
            "kernel_remap" => self.kernel_remap,
            "pool_op" => self.pool_op,
            "iommu_unmap" => self.iommu_unmap,
            "iotlb_invalidate" => self.iotlb_invalidate,
            "iommu_remap" => self.iommu_remap,
            "dma_map" => self.dma_map,
            "dma_unmap" => self.dma_unmap,
            _ => return None,
        })
    }

    /// These prices with price `name` set to `value` (`None` if there is no such price).
    pub fn with_field(mut self, name: &str, value: u64) -> Option<Self> {
        let f = match name {
            "page_alloc" => &mut self.page_alloc,
            "page_free" => &mut self.page_free,
            "zero_page" => &mut self.zero_page,
            "pgd_ctor" => &mut self.pgd_ctor,
            "pgd_dtor" => &mut self.pgd_dtor,
            "hypercall" => &mut self.hypercall,
            "validate_entry" => &mut self.validate_entry,
            "kernel_remap" => &mut self.kernel_remap,
            "pool_op" => &mut self.pool_op,
            "iommu_unmap" => &mut self.iommu_unmap,
            "iotlb_invalidate" => &mut self.iotlb_invalidate,
            "iommu_remap" => &mut self.iommu_remap,
            "dma_map" => &mut self.dma_map,
            "dma_unmap" => &mut self.dma_unmap,
            _ => return None,
        };
        *f = value;
        Some(self)
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
    /// Whether a page request invalidates that page alone (S3.3: "several page-based
    /// invalidations"). False models hardware that performs it domain-wide: Xen's
    /// `iommu_flush_iotlb_psi` falls back to a domain-selective flush where `CAP.PSI` is
    /// clear, and VT-d lets a unit invalidate more than a request asks.
    pub page_selective_invalidation: bool,
    /// Whether a type change's unmap invalidates at all: [`UnmapFlush::Skipped`] in S3.5's
    /// Xen 4.2.1, [`UnmapFlush::Invalidates`] from XSA-78's fix on.
    pub unmap_flush: UnmapFlush,
}

impl Default for XenPvSetup {
    fn default() -> Self {
        Self {
            cost: CostModel::MODERN,
            invalidation: InvalidationInterface::Queued,
            page_selective_invalidation: true,
            unmap_flush: UnmapFlush::Skipped,
        }
    }
}
