//! What a check finds: the kinds (each with the Linux check it corresponds to), and where.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A kind of finding. The DMA-layer kinds are the checks of Linux's `kernel/dma/debug.c`
/// (`CONFIG_DMA_API_DEBUG`) that a trace can show; [`FindingKind::linux_check`] gives the
/// message the kernel prints for each. The `iommu_*` kinds check the IOMMU layer's page-table
/// events against the DMA layer's calls (no Linux counterpart).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FindingKind {
    /// Unmap/free of an address the device never mapped (in this trace).
    UnmapNotMapped,
    /// Unmap/free of an address whose mapping was already unmapped.
    DoubleUnmap,
    /// Unmap of `DMA_MAPPING_ERROR`.
    UnmapInvalidAddress,
    /// Unmap size differs from the map's.
    UnmapSizeMismatch,
    /// Unmap direction differs from the map's.
    UnmapDirectionMismatch,
    /// Unmapped with another function than mapped (`dma_unmap_page` of a `dma_map_sg`
    /// entry, `dma_free` of a `dma_map_page`, ...).
    UnmapWrongFunction,
    /// `dma_free*` with another CPU address than its `dma_alloc*`.
    FreeCpuAddressMismatch,
    /// `dma_unmap_sg` with another entry count than its `dma_map_sg`.
    UnmapSgCountMismatch,
    /// `dma_unmap_sg` of another list (physical addresses) than its `dma_map_sg`.
    UnmapSgListMismatch,
    /// Sync of a range no mapping of the device overlaps.
    SyncNotMapped,
    /// Sync of a range a mapping only partly covers.
    SyncOutsideMapping,
    /// Sync with another direction than the mapping's.
    SyncDirectionMismatch,
    /// `dma_sync_*_for_cpu` of memory the device only reads.
    SyncReadOnlyForCpu,
    /// `dma_sync_*_for_device` of memory the device only writes.
    SyncWriteOnlyForDevice,
    /// A device-writable mapping whose first cacheline is already in a live device-writable
    /// mapping (Linux's active-cacheline tracking).
    OverlappingMapping,
    /// More than 7 overlapping mappings of one cacheline (Linux's overlap counter overflows).
    OverlapCounterOverflow,
    /// Mappings of a device still live at the end of the trace.
    Leak,
    /// A mapping that ends above the device's DMA mask.
    BeyondDmaMask,
    /// A DMA map whose IOVA pages no `iommu:map` covers.
    IommuMapMissing,
    /// A DMA unmap whose IOVA pages no `iommu:unmap` tears down.
    IommuUnmapMissing,
    /// An `iommu:map` no DMA map claims.
    IommuMapOrphan,
    /// An `iommu:unmap` no DMA unmap claims.
    IommuUnmapOrphan,
}

impl FindingKind {
    /// Every kind, in report order.
    pub const ALL: [FindingKind; 22] = [
        FindingKind::UnmapNotMapped,
        FindingKind::DoubleUnmap,
        FindingKind::UnmapInvalidAddress,
        FindingKind::UnmapSizeMismatch,
        FindingKind::UnmapDirectionMismatch,
        FindingKind::UnmapWrongFunction,
        FindingKind::FreeCpuAddressMismatch,
        FindingKind::UnmapSgCountMismatch,
        FindingKind::UnmapSgListMismatch,
        FindingKind::SyncNotMapped,
        FindingKind::SyncOutsideMapping,
        FindingKind::SyncDirectionMismatch,
        FindingKind::SyncReadOnlyForCpu,
        FindingKind::SyncWriteOnlyForDevice,
        FindingKind::OverlappingMapping,
        FindingKind::OverlapCounterOverflow,
        FindingKind::Leak,
        FindingKind::BeyondDmaMask,
        FindingKind::IommuMapMissing,
        FindingKind::IommuUnmapMissing,
        FindingKind::IommuMapOrphan,
        FindingKind::IommuUnmapOrphan,
    ];

    /// Its name in reports and JSON (`double_unmap`, ...).
    pub const fn name(self) -> &'static str {
        match self {
            FindingKind::UnmapNotMapped => "unmap_not_mapped",
            FindingKind::DoubleUnmap => "double_unmap",
            FindingKind::UnmapInvalidAddress => "unmap_invalid_address",
            FindingKind::UnmapSizeMismatch => "unmap_size_mismatch",
            FindingKind::UnmapDirectionMismatch => "unmap_direction_mismatch",
            FindingKind::UnmapWrongFunction => "unmap_wrong_function",
            FindingKind::FreeCpuAddressMismatch => "free_cpu_address_mismatch",
            FindingKind::UnmapSgCountMismatch => "unmap_sg_count_mismatch",
            FindingKind::UnmapSgListMismatch => "unmap_sg_list_mismatch",
            FindingKind::SyncNotMapped => "sync_not_mapped",
            FindingKind::SyncOutsideMapping => "sync_outside_mapping",
            FindingKind::SyncDirectionMismatch => "sync_direction_mismatch",
            FindingKind::SyncReadOnlyForCpu => "sync_read_only_for_cpu",
            FindingKind::SyncWriteOnlyForDevice => "sync_write_only_for_device",
            FindingKind::OverlappingMapping => "overlapping_mapping",
            FindingKind::OverlapCounterOverflow => "overlap_counter_overflow",
            FindingKind::Leak => "leak",
            FindingKind::BeyondDmaMask => "beyond_dma_mask",
            FindingKind::IommuMapMissing => "iommu_map_missing",
            FindingKind::IommuUnmapMissing => "iommu_unmap_missing",
            FindingKind::IommuMapOrphan => "iommu_map_orphan",
            FindingKind::IommuUnmapOrphan => "iommu_unmap_orphan",
        }
    }

    /// The Linux check this kind corresponds to: the function and the message it prints
    /// (`kernel/dma/debug.c` unless said otherwise).
    pub const fn linux_check(self) -> &'static str {
        match self {
            FindingKind::UnmapNotMapped | FindingKind::DoubleUnmap => {
                "check_unmap: \"device driver tries to free DMA memory it has not allocated\""
            }
            FindingKind::UnmapInvalidAddress => {
                "check_unmap: \"device driver tries to free an invalid DMA memory address\""
            }
            FindingKind::UnmapSizeMismatch => {
                "check_unmap: \"device driver frees DMA memory with different size\""
            }
            FindingKind::UnmapDirectionMismatch => {
                "check_unmap: \"device driver frees DMA memory with different direction\""
            }
            FindingKind::UnmapWrongFunction => {
                "check_unmap: \"device driver frees DMA memory with wrong function\""
            }
            FindingKind::FreeCpuAddressMismatch => {
                "check_unmap: \"device driver frees DMA memory with different CPU address\""
            }
            FindingKind::UnmapSgCountMismatch => {
                "check_unmap: \"device driver frees DMA sg list with different entry count\""
            }
            FindingKind::UnmapSgListMismatch => {
                "check_unmap (per sg entry): \"device driver tries to free DMA memory it has not allocated\""
            }
            FindingKind::SyncNotMapped => {
                "check_sync: \"device driver tries to sync DMA memory it has not allocated\""
            }
            FindingKind::SyncOutsideMapping => {
                "check_sync: \"device driver syncs DMA memory outside allocated range\" (Linux's containing match reports it as \"has not allocated\")"
            }
            FindingKind::SyncDirectionMismatch => {
                "check_sync: \"device driver syncs DMA memory with different direction\""
            }
            FindingKind::SyncReadOnlyForCpu => {
                "check_sync: \"device driver syncs device read-only DMA memory for cpu\""
            }
            FindingKind::SyncWriteOnlyForDevice => {
                "check_sync: \"device driver syncs device write-only DMA memory to device\""
            }
            FindingKind::OverlappingMapping => {
                "add_dma_entry: \"cacheline tracking EEXIST, overlapping mappings aren't supported\""
            }
            FindingKind::OverlapCounterOverflow => {
                "active_cacheline_inc_overlap: \"exceeded 7 overlapping mappings of cacheline\""
            }
            FindingKind::Leak => {
                "dma_debug_device_change: \"device driver has pending DMA allocations while released from device\""
            }
            FindingKind::BeyondDmaMask => {
                "kernel/dma/direct.h dma_direct_map_phys: \"DMA addr ... overflow (mask ..., bus limit ...)\" (not debug.c)"
            }
            FindingKind::IommuMapMissing
            | FindingKind::IommuUnmapMissing
            | FindingKind::IommuMapOrphan
            | FindingKind::IommuUnmapOrphan => {
                "none: iommulab's cross-check of iommu:map/iommu:unmap against the DMA layer"
            }
        }
    }

    /// Parses [`FindingKind::name`].
    pub fn from_name(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.name() == s)
    }
}

impl fmt::Display for FindingKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Where an event is in the trace, and who made it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Site {
    /// 1-based line of ftrace text, or 1-based record number of other formats
    /// ([`super::CheckReport::position`] says which).
    pub line: u64,
    /// The event as printed (`dma_unmap_page`), or the record kind (`unmap`).
    pub event: String,
    /// `TASK-PID` (ftrace text only).
    pub task: Option<String>,
    /// The CPU that made the call.
    pub cpu: u16,
    /// The context it ran in (`task`, `softirq`, `hardirq`, `nmi`), when the trace's flags
    /// column says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
    /// Nanoseconds since the trace's first event.
    pub time_ns: u64,
}

/// One finding.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    /// What.
    pub kind: FindingKind,
    /// The Linux check it corresponds to ([`FindingKind::linux_check`]).
    pub linux_check: String,
    /// The device's name (`iommu` for the orphan page-table events).
    pub device: String,
    /// The offending call.
    pub at: Site,
    /// The earlier event it conflicts with: the map (or alloc) for unmaps, syncs, leaks and
    /// overlaps; the first unmap for a double unmap.
    pub map: Option<Site>,
    /// The addresses, sizes and directions involved, in debug.c's bracket style.
    pub detail: String,
}

impl Finding {
    /// One line: `FILE:LINE: KIND device DEV (TASK, cpu N): DETAIL; mapped at FILE:LINE ...`.
    pub fn display_with(&self, file: &str) -> String {
        let who = |s: &Site| {
            let mut w = match &s.task {
                Some(t) => format!("{t}, cpu {}", s.cpu),
                None => format!("cpu {}", s.cpu),
            };
            // Interrupt contexts only: task context is the rule.
            if let Some(c) = s.context.as_deref().filter(|&c| c != "task") {
                w.push_str(", ");
                w.push_str(c);
            }
            w
        };
        let mut t = format!(
            "{file}:{}: {} {} {} ({}): {}",
            self.at.line,
            self.kind,
            self.at.event,
            self.device,
            who(&self.at),
            self.detail
        );
        if let Some(m) = &self.map {
            t.push_str(&format!("; {} at {file}:{} ({})", m.event, m.line, who(m)));
        }
        t.push_str(&format!("\n    linux: {}", self.linux_check));
        t
    }
}
