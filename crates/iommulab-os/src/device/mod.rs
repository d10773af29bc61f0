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

use iommulab_base::hash::FxHashMap;

use serde::{Deserialize, Serialize};

use iommulab_base::addr::{Iova, PAGE_4K};

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

/// Most pages a malicious device probes on each side of an unmapped page: 16 MiB, eight
/// level-1 tables' worth. Each unmap costs `2 × neighbours + 1` translations, so the bound
/// keeps a typo from becoming a run that never ends.
pub const MAX_NEIGHBOURS: u64 = 4096;

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

/// One live page: 8 bytes, so a chunk of them is 4 KiB. `count == 0`: not live.
#[derive(Clone, Copy, Debug, Default)]
struct LivePage {
    /// Live buffers that touch this page.
    count: u32,
    /// Byte extent inside the page covered by live buffers: `[lo, hi)` (at most 4096).
    lo: u16,
    hi: u16,
}

/// Pages per chunk of the live table: one 4 KiB chunk covers 2 MiB of DMA addresses.
const CHUNK_PAGES: usize = 512;

/// The chunk of device `device` holding page `pfn`.
type ChunkKey = (u16, u64);

/// Chunks remembered, direct-mapped by the chunk number's low bits.
const MEMO: usize = 16;

/// A memo line that matches no chunk (no device has 2^64 / 512 chunks).
const NO_CHUNK: (ChunkKey, u32) = ((u16::MAX, u64::MAX), 0);

fn memo_line(key: ChunkKey) -> usize {
    // The low bits of the chunk number, below MEMO.
    #[expect(clippy::cast_possible_truncation, reason = "masked below MEMO")]
    let i = (key.1 % MEMO as u64) as usize;
    i
}

fn chunk_key(device: u16, pfn: u64) -> ChunkKey {
    (device, pfn / CHUNK_PAGES as u64)
}

/// `pfn`'s index inside its chunk.
fn in_chunk(pfn: u64) -> usize {
    // Below CHUNK_PAGES, a usize.
    #[expect(clippy::cast_possible_truncation, reason = "below CHUNK_PAGES")]
    let i = (pfn % CHUNK_PAGES as u64) as usize;
    i
}

/// Tracks live mappings per device and page, and classifies accesses.
///
/// The live table is two-level, like a page table: a hash of (device, 2 MiB chunk) to a
/// directly indexed chunk of 512 pages, with the last 16 chunks used remembered (a
/// direct-mapped memo, like a small TLB). The DMA API updates it on every map and unmap and
/// the probes read it once per page, and DMA addresses cluster (allocators hand out
/// neighbouring IOVAs, a guest's identity addresses are its buffers'), so most updates index
/// a remembered chunk without hashing. Chunks are kept once made: memory is 4 KiB per 2 MiB
/// of DMA address space ever mapped.
#[derive(Debug, Clone)]
pub struct StaleOracle {
    index: FxHashMap<ChunkKey, u32>,
    chunks: Vec<[LivePage; CHUNK_PAGES]>,
    memo: [(ChunkKey, u32); MEMO],
    live_pages: usize,
    totals: AccessOutcome,
}

impl Default for StaleOracle {
    fn default() -> Self {
        Self {
            index: FxHashMap::default(),
            chunks: Vec::new(),
            memo: [NO_CHUNK; MEMO],
            live_pages: 0,
            totals: AccessOutcome::default(),
        }
    }
}

impl StaleOracle {
    /// An oracle that knows of no mapping.
    pub fn new() -> Self {
        Self::default()
    }

    /// The chunk of `key`, if it was ever made.
    fn find_chunk(&self, key: ChunkKey) -> Option<u32> {
        match self.memo[memo_line(key)] {
            (k, c) if k == key => Some(c),
            _ => self.index.get(&key).copied(),
        }
    }

    /// The chunk of `key`, made if needed, remembered as the last one used.
    fn chunk_mut(&mut self, key: ChunkKey) -> &mut [LivePage; CHUNK_PAGES] {
        let c = match self.find_chunk(key) {
            Some(c) => c,
            None => {
                // Fewer chunks than 2^32: each covers 2 MiB of one device's addresses.
                let c = u32::try_from(self.chunks.len()).unwrap_or(u32::MAX);
                self.chunks.push([LivePage::default(); CHUNK_PAGES]);
                self.index.insert(key, c);
                c
            }
        };
        self.memo[memo_line(key)] = (key, c);
        &mut self.chunks[c as usize]
    }

    fn page(&self, device: u16, addr: Iova) -> Option<&LivePage> {
        let pfn = addr.pfn(PAGE_4K).get();
        let c = self.find_chunk(chunk_key(device, pfn))?;
        Some(&self.chunks[c as usize][in_chunk(pfn)]).filter(|p| p.count > 0)
    }

    /// Records a live buffer `[addr, addr + len)` spanning `pages` pages.
    #[inline]
    pub fn on_map(&mut self, device: u16, addr: Iova, len: u64, pages: u64) {
        let first = addr.pfn(PAGE_4K).get();
        let start = addr.get();
        let end = start.saturating_add(len);
        for pfn in first..first.saturating_add(pages) {
            let page_base = pfn << PAGE_4K.shift();
            let lo = start.max(page_base) - page_base;
            let hi = end.min(page_base + PAGE_4K.bytes()) - page_base;
            // Both bounds lie in [0, 4096]: the buffer is clipped to the page.
            #[expect(clippy::cast_possible_truncation, reason = "at most 4096")]
            let (lo, hi) = (lo as u16, hi as u16);
            let p = &mut self.chunk_mut(chunk_key(device, pfn))[in_chunk(pfn)];
            if p.count == 0 {
                *p = LivePage { count: 1, lo, hi };
                self.live_pages += 1;
            } else {
                p.count += 1;
                p.lo = p.lo.min(lo);
                p.hi = p.hi.max(hi);
            }
        }
    }

    /// Forgets a buffer at `addr` spanning `pages` pages.
    #[inline]
    pub fn on_unmap(&mut self, device: u16, addr: Iova, pages: u64) {
        let first = addr.pfn(PAGE_4K).get();
        for pfn in first..first.saturating_add(pages) {
            let key = chunk_key(device, pfn);
            let Some(c) = self.find_chunk(key) else {
                continue;
            };
            self.memo[memo_line(key)] = (key, c);
            let p = &mut self.chunks[c as usize][in_chunk(pfn)];
            if p.count > 0 {
                p.count -= 1;
                if p.count == 0 {
                    self.live_pages -= 1;
                }
            }
        }
    }

    /// Whether any live buffer of `device` touches the page holding `addr`.
    #[inline]
    pub fn is_live(&self, device: u16, addr: Iova) -> bool {
        self.page(device, addr).is_some()
    }

    /// Classifies one page access at `addr` that the IOMMU let through (`ok`) or refused.
    pub fn classify(&mut self, device: u16, addr: Iova, ok: bool, out: &mut AccessOutcome) {
        let mut o = AccessOutcome::default();
        if !ok {
            o.faulted = 1;
        } else {
            o.succeeded = 1;
            match self.page(device, addr) {
                None => o.stale = 1,
                Some(p) => {
                    let off = addr.page_offset(PAGE_4K);
                    if off < u64::from(p.lo) || off >= u64::from(p.hi) {
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
    #[inline]
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
        self.live_pages
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

    /// The chunked live table against a plain map of (device, page) → (count, lo, hi): the
    /// same answers for buffers of any length and offset, across chunk boundaries and
    /// devices, in any order of maps, unmaps and accesses.
    mod against_naive {
        use super::*;
        use proptest::prelude::*;
        use std::collections::HashMap;

        #[derive(Clone, Debug)]
        enum Op {
            Map(u16, u64, u64),
            Unmap(usize),
            Access(u16, u64),
        }

        fn op() -> impl Strategy<Value = Op> {
            // Addresses around a 2 MiB chunk boundary and far away, so chunks are made,
            // shared and missed.
            let addr = prop_oneof![0x1f_f000u64..0x20_2000, 0x7fff_0000u64..0x7fff_4000];
            prop_oneof![
                3 => (0u16..3, addr.clone(), 1u64..9000).prop_map(|(d, a, l)| Op::Map(d, a, l)),
                2 => any::<usize>().prop_map(Op::Unmap),
                4 => (0u16..3, addr).prop_map(|(d, a)| Op::Access(d, a)),
            ]
        }

        proptest! {
            #[test]
            fn oracle_matches_naive_model(ops in proptest::collection::vec(op(), 1..200)) {
                let mut o = StaleOracle::new();
                let mut naive: HashMap<(u16, u64), (u32, u64, u64)> = HashMap::new();
                let mut live: Vec<(u16, u64, u64, u64)> = Vec::new();
                for op in ops {
                    match op {
                        Op::Map(d, a, len) => {
                            let pages = PAGE_4K.pages_spanned(a % 4096, len);
                            o.on_map(d, Iova::new(a), len, pages);
                            for i in 0..pages {
                                let base = ((a >> 12) + i) << 12;
                                let lo = a.max(base) - base;
                                let hi = (a + len).min(base + 4096) - base;
                                let e = naive.entry((d, (a >> 12) + i)).or_insert((0, lo, hi));
                                e.0 += 1;
                                e.1 = e.1.min(lo);
                                e.2 = e.2.max(hi);
                            }
                            live.push((d, a, len, pages));
                        }
                        Op::Unmap(k) if !live.is_empty() => {
                            let (d, a, _, pages) = live.swap_remove(k % live.len());
                            o.on_unmap(d, Iova::new(a), pages);
                            for i in 0..pages {
                                let key = (d, (a >> 12) + i);
                                let e = naive.get_mut(&key).unwrap();
                                e.0 -= 1;
                                if e.0 == 0 {
                                    naive.remove(&key);
                                }
                            }
                        }
                        Op::Unmap(_) => {}
                        Op::Access(d, a) => {
                            let mut out = AccessOutcome::default();
                            o.classify(d, Iova::new(a), true, &mut out);
                            let expect = match naive.get(&(d, a >> 12)) {
                                None => (1, 0),
                                Some(&(_, lo, hi)) => (0, u64::from(a % 4096 < lo || a % 4096 >= hi)),
                            };
                            prop_assert_eq!((out.stale, out.subpage), expect);
                            prop_assert_eq!(o.is_live(d, Iova::new(a)), naive.contains_key(&(d, a >> 12)));
                        }
                    }
                    prop_assert_eq!(o.live_pages(), naive.len());
                }
            }
        }
    }
}
