//! [`IommuStats`]: the counters of a remapping unit, shared by every unit (fields a unit has
//! no use for stay 0).

use serde::{Deserialize, Serialize};

use crate::iotlb::IotlbStats;

/// Counters of the remapping unit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IommuStats {
    /// Leaf PTEs written present (one per 4 KiB page of `map_range`, one per `map`).
    pub pte_sets: u64,
    /// Leaf PTEs cleared.
    pub pte_clears: u64,
    /// Write-buffer flushes performed (only counted when `CAP.RWBF` is set).
    pub write_buffer_flushes: u64,
    /// Page-selective IOTLB invalidation requests.
    pub inv_page: u64,
    /// Domain-selective IOTLB invalidation requests.
    pub inv_domain: u64,
    /// Global IOTLB invalidation requests.
    pub inv_global: u64,
    /// Invalidation-wait descriptors (one per non-empty queued batch).
    pub inv_waits: u64,
    /// The IOTLB's own counters.
    pub iotlb: IotlbStats,
    /// Translations whose context came from the context cache.
    pub context_cache_hits: u64,
    /// Translations that fetched the root and context entries.
    pub context_cache_misses: u64,
    /// Memory fetches by the hardware: root, context and page-table entries.
    pub walk_fetches: u64,
    /// Calls to [`crate::RemapUnit::translate`].
    pub translations: u64,
    /// Translations that faulted (recorded or dropped).
    pub faults: u64,
    /// 4 KiB frames used by remapping tables (root, context and page tables).
    pub table_pages: u64,
}

impl IommuStats {
    /// Adds `other`'s counters to `self` (to aggregate runs).
    pub fn merge(&mut self, other: &Self) {
        self.pte_sets += other.pte_sets;
        self.pte_clears += other.pte_clears;
        self.write_buffer_flushes += other.write_buffer_flushes;
        self.inv_page += other.inv_page;
        self.inv_domain += other.inv_domain;
        self.inv_global += other.inv_global;
        self.inv_waits += other.inv_waits;
        self.iotlb.merge(&other.iotlb);
        self.context_cache_hits += other.context_cache_hits;
        self.context_cache_misses += other.context_cache_misses;
        self.walk_fetches += other.walk_fetches;
        self.translations += other.translations;
        self.faults += other.faults;
        self.table_pages += other.table_pages;
    }
}
