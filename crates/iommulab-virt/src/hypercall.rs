//! The guest → host hypercall interface for DMA mappings (S1.1, S1.6): one hypercall
//! carries a batch of unmap and map requests, so a multi-page buffer (batch map), a
//! buffer's pages on completion (batch unmap) or the map cache's evictions riding on the
//! next map (unmap piggyback) cost one guest/host transition.
//!
//! The host ([`super::host::Host`]) applies a hypercall's **unmaps first, then its maps**,
//! so evictions that piggyback on a map make room under the quota for it. A request the
//! host refuses returns a [`HypercallError`] and changes nothing (validate, then apply).

use serde::{Deserialize, Serialize};

use iommulab_base::addr::{Gpa, Perm, Pfn};

/// One hypercall: pages to unmap (applied first), then pages to map with a permission.
///
/// Requests are per 4 KiB guest page and counted: the host keeps a pin count per page, so
/// mapping a page that is already mapped pins it once more (two in-flight DMAs of a
/// single-use guest), and it stays mapped until its count falls back to 0.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hypercall {
    /// Guest pages to unmap (pin count − 1; the PTE is cleared at 0).
    pub unmap: Vec<Pfn<Gpa>>,
    /// Guest pages to map (pin count + 1; the PTE is set at 1, widened if `perm` adds
    /// rights).
    pub map: Vec<(Pfn<Gpa>, Perm)>,
}

impl Hypercall {
    /// An empty hypercall.
    pub const fn new() -> Self {
        Self {
            unmap: Vec::new(),
            map: Vec::new(),
        }
    }

    /// Whether it carries no request (the guest does not send it).
    pub fn is_empty(&self) -> bool {
        self.unmap.is_empty() && self.map.is_empty()
    }

    /// Pages carried (unmaps + maps).
    pub fn pages(&self) -> usize {
        self.unmap.len() + self.map.len()
    }

    /// Empties both lists (keeps their buffers).
    pub fn clear(&mut self) {
        self.unmap.clear();
        self.map.clear();
    }
}

/// Why the host refused a hypercall. Nothing changed on the host.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[serde(tag = "error", rename_all = "snake_case")]
pub enum HypercallError {
    /// A page beyond the guest's memory.
    #[error("guest page {gfn:#x} is outside guest memory ({guest_pages:#x} pages)")]
    OutsideGuest {
        /// The page.
        gfn: u64,
        /// Pages of guest memory.
        guest_pages: u64,
    },
    /// Unmap of a page the host has not mapped for this guest (or already unmapped as
    /// many times as it was mapped).
    #[error("unmap of guest page {gfn:#x}, which the host has not mapped")]
    NotMapped {
        /// The page.
        gfn: u64,
    },
    /// The batch would leave more pages pinned than the quota allows.
    #[error("hypercall would pin {pinned} pages, above the quota of {quota}")]
    OverQuota {
        /// Pages pinned had the batch been applied.
        pinned: u64,
        /// The guest's quota.
        quota: u64,
    },
}

/// Counters of the host side of one guest.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostStats {
    /// Hypercalls served (refused ones not included).
    pub hypercalls: u64,
    /// Hypercalls refused.
    pub refused: u64,
    /// Map requests served (pages).
    pub map_requests: u64,
    /// Unmap requests served (pages).
    pub unmap_requests: u64,
    /// Most pages (unmaps + maps) carried by one served hypercall.
    pub max_pages_per_hypercall: u64,
    /// Leaf PTEs set (a page's first pin, or a permission widening).
    pub ptes_set: u64,
    /// Leaf PTEs cleared (a page's last unpin).
    pub ptes_cleared: u64,
    /// Page-selective IOTLB invalidations (one per cleared or widened PTE).
    pub iotlb_invalidations: u64,
    /// Write-buffer flushes (one per hypercall that set a PTE).
    pub write_buffer_flushes: u64,
    /// Modeled CPU cycles of the host: transitions and bookkeeping, plus the IOMMU's
    /// (PTE writes, flushes, invalidations).
    pub cycles: u64,
}

impl HostStats {
    /// Mean pages per served hypercall, `None` without hypercalls.
    pub fn pages_per_hypercall(&self) -> Option<f64> {
        (self.hypercalls > 0)
            .then(|| (self.map_requests + self.unmap_requests) as f64 / self.hypercalls as f64)
    }
}
