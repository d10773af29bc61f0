//! Devices that issue DMA, and the stale-access oracle.
//!
//! The oracle knows which DMA mappings are live (the DMA layer tells it of every map and
//! unmap). Every device access is translated by the IOMMU model (IOTLB, then page walk) and
//! then classified:
//! - **stale**: the access succeeded but no live mapping covers that page — it went through
//!   an IOTLB entry left over after the unmap (deferred flushing's window), or, with the
//!   IOMMU disabled, straight to memory;
//! - **sub-page**: the access succeeded inside a live mapped page but outside every live
//!   buffer in it — bytes a sub-page mapping exposes beyond its buffer;
//! - **fault**: the IOMMU refused it.
//!
//! A malicious (or buggy) device, [`DeviceMode::Malicious`], retries every address right
//! after its unmap, and its neighbours, and reads the rest of each mapped page: what a
//! hostile device would do to exploit the windows that the flush policies leave open.

use crate::hash::FxHashMap;

use std::collections::hash_map::Entry;

use serde::{Deserialize, Serialize};

use crate::addr::{Iova, PAGE_4K};

/// How a device behaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum DeviceMode {
    /// Accesses only live buffers, once each when asked to touch them.
    #[default]
    Benign,
    /// After each unmap retries the unmapped page and `neighbours` pages on each side; while a
    /// buffer is mapped also reads the rest of its page.
    Malicious {
        /// Pages on each side of an unmapped page to probe.
        neighbours: u64,
    },
}

/// What one device access (over one or more pages) came to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccessOutcome {
    /// Page accesses the IOMMU let through (including stale and sub-page ones).
    pub succeeded: u64,
    /// Page accesses the IOMMU refused.
    pub faulted: u64,
    /// Successful page accesses with no live mapping: use after unmap.
    pub stale: u64,
    /// Successful page accesses inside a live page but outside its live buffers.
    pub subpage: u64,
}

impl AccessOutcome {
    /// Adds `other` into `self`.
    pub fn merge(&mut self, other: &Self) {
        self.succeeded += other.succeeded;
        self.faulted += other.faulted;
        self.stale += other.stale;
        self.subpage += other.subpage;
    }
}

#[derive(Clone, Copy, Debug)]
struct LivePage {
    /// Live buffers that touch this page.
    count: u32,
    /// Byte extent inside the page covered by live buffers: `[lo, hi)`.
    lo: u64,
    hi: u64,
}

/// Tracks live mappings per device and page, and classifies accesses.
#[derive(Debug, Default, Clone)]
pub struct StaleOracle {
    // Fx, not SipHash: one lookup per translated page on the probe paths.
    live: FxHashMap<(u16, u64), LivePage>,
    totals: AccessOutcome,
}

impl StaleOracle {
    /// An oracle that knows of no mapping.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records a live buffer `[addr, addr + len)` spanning `pages` pages.
    pub fn on_map(&mut self, device: u16, addr: Iova, len: u64, pages: u64) {
        let first = addr.pfn(PAGE_4K).get();
        let start = addr.get();
        let end = start.saturating_add(len);
        for i in 0..pages {
            let page_base = (first + i) << PAGE_4K.shift();
            let lo = start.max(page_base) - page_base;
            let hi = end.min(page_base + PAGE_4K.bytes()) - page_base;
            let e = self
                .live
                .entry((device, first + i))
                .or_insert(LivePage { count: 0, lo, hi });
            e.count += 1;
            e.lo = e.lo.min(lo);
            e.hi = e.hi.max(hi);
        }
    }

    /// Forgets a buffer at `addr` spanning `pages` pages.
    pub fn on_unmap(&mut self, device: u16, addr: Iova, pages: u64) {
        let first = addr.pfn(PAGE_4K).get();
        for i in 0..pages {
            // One lookup per page: the entry is decremented and, at zero, removed in place.
            if let Entry::Occupied(mut e) = self.live.entry((device, first + i)) {
                e.get_mut().count -= 1;
                if e.get().count == 0 {
                    e.remove();
                }
            }
        }
    }

    /// Whether any live buffer of `device` touches the page holding `addr`.
    pub fn is_live(&self, device: u16, addr: Iova) -> bool {
        self.live.contains_key(&(device, addr.pfn(PAGE_4K).get()))
    }

    /// Classifies one page access at `addr` that the IOMMU let through (`ok`) or refused.
    pub fn classify(&mut self, device: u16, addr: Iova, ok: bool, out: &mut AccessOutcome) {
        let mut o = AccessOutcome::default();
        if !ok {
            o.faulted = 1;
        } else {
            o.succeeded = 1;
            match self.live.get(&(device, addr.pfn(PAGE_4K).get())) {
                None => o.stale = 1,
                Some(p) => {
                    let off = addr.page_offset(PAGE_4K);
                    if off < p.lo || off >= p.hi {
                        o.subpage = 1;
                    }
                }
            }
        }
        out.merge(&o);
        self.totals.merge(&o);
    }

    /// Classifies an access to a page the caller knows no live mapping covers
    /// ([`StaleOracle::is_live`] was false): through the IOMMU it is stale (no lookup).
    pub fn classify_unmapped(&mut self, ok: bool, out: &mut AccessOutcome) {
        let o = AccessOutcome {
            succeeded: u64::from(ok),
            faulted: u64::from(!ok),
            stale: u64::from(ok),
            subpage: 0,
        };
        out.merge(&o);
        self.totals.merge(&o);
    }

    /// Everything classified so far.
    pub fn totals(&self) -> AccessOutcome {
        self.totals
    }

    /// Live pages tracked now.
    pub fn live_pages(&self) -> usize {
        self.live.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A page with a 1024-byte buffer at offset 0: bytes 1024.. are exposed, not stale.
    #[test]
    fn access_beyond_a_sub_page_buffer_is_subpage_not_stale() {
        let mut o = StaleOracle::new();
        o.on_map(0, Iova::new(0x5000), 1024, 1);
        let mut out = AccessOutcome::default();
        o.classify(0, Iova::new(0x5000), true, &mut out);
        o.classify(0, Iova::new(0x5400), true, &mut out);
        assert_eq!(
            out,
            AccessOutcome {
                succeeded: 2,
                faulted: 0,
                stale: 0,
                subpage: 1
            }
        );
    }

    #[test]
    fn access_after_unmap_that_succeeds_is_stale() {
        let mut o = StaleOracle::new();
        o.on_map(3, Iova::new(0x7000), 4096, 1);
        o.on_unmap(3, Iova::new(0x7000), 1);
        let mut out = AccessOutcome::default();
        o.classify(3, Iova::new(0x7000), true, &mut out);
        o.classify(3, Iova::new(0x7000), false, &mut out);
        assert_eq!(out.stale, 1);
        assert_eq!(out.faulted, 1);
        assert_eq!(o.totals(), out);
    }

    /// Two buffers sharing a page (passthrough): the page stays live until both are gone.
    #[test]
    fn shared_page_stays_live_until_last_buffer_unmapped() {
        let mut o = StaleOracle::new();
        o.on_map(0, Iova::new(0x1000), 512, 1);
        o.on_map(0, Iova::new(0x1800), 512, 1);
        o.on_unmap(0, Iova::new(0x1000), 1);
        assert!(o.is_live(0, Iova::new(0x1800)));
        o.on_unmap(0, Iova::new(0x1800), 1);
        assert!(!o.is_live(0, Iova::new(0x1800)));
        assert_eq!(o.live_pages(), 0);
    }
}
