//! Model-based property tests of the IOVA allocators (S0.5): a proptest `Op`
//! sequence drives rbtree, bitmap, magazine<rbtree> and magazine<bitmap> side by side with
//! the naive oracle `NaiveIovaSpace`, and every step checks:
//!
//! - live allocations never overlap and lie in `[start, limit)` (rbtree ones size-aligned);
//! - the rbtree's ranges and the bitmap's used pages equal the oracle's;
//! - frees of live ranges succeed; for rbtree and bitmap, frees of anything else fail and
//!   change nothing;
//! - exhaustion is real: no fitting range existed (unless the rbtree's `max32_alloc_size`
//!   fast-fail applied);
//! - the bitmap never reuses a range freed in the current lap before it wraps (S0.6);
//! - counters add up: `allocs - frees == live`, `cache_hits + cache_misses == cacheable
//!   allocation attempts`.
//!
//! At the end everything is freed (magazines drained) and the whole space must be
//! allocatable again, page by page.

use iommulab::addr::{CpuId, Iova, Pfn};
use iommulab::clock::{ClockRate, Cycles};
use iommulab::iova::{
    Bitmap, IovaAllocator, IovaError, Magazine, MagazineConfig, RbTree, RbTree2626,
};
use iommulab::testing::naive_iova::NaiveIovaSpace;
use proptest::prelude::*;

/// The space under test: `[1, 512)`, with the 4 GiB boundary moved to 256.
const START: u64 = 1;
const END: u64 = 512;
const DMA32: u64 = 256;
const LIMITS: [u64; 4] = [100, DMA32, 400, END];

/// What the harness needs beyond the trait.
trait Subject: IovaAllocator {
    /// Pages an allocation of `pages` really takes.
    fn effective(&self, pages: u64) -> u64 {
        pages
    }
    /// Whether allocations are size-aligned.
    fn aligned(&self) -> bool;
    /// Whether frees of non-live ranges are detected.
    fn checks_frees(&self) -> bool {
        true
    }
    /// Whether `pages` is served by a cache.
    fn cacheable(&self, _pages: u64) -> bool {
        false
    }
    /// Whether an exhaustion of `pages` below `limit` may be the rbtree's fast fail.
    fn may_fast_fail(&self, _pages: u64, _limit: u64) -> bool {
        false
    }
    /// Checks internal invariants and agreement with the oracle.
    fn check(&self, oracle: &NaiveIovaSpace);
    /// Returns cached ranges to the backing allocator.
    fn drain(&mut self) {}
    /// Pages of the space the allocator never hands out.
    fn never_handed_out(&self) -> u64 {
        0
    }
}

/// Linux 2.6.26's allocator: sizes round up to a power of two (`alloc_iova`); a walk that
/// reaches the bottom fails without retrying above the cached node, so exhaustion with space
/// left elsewhere is its behaviour, not a bug; frees go by pfn (`find_iova`), so a wrong
/// length is not detected; and the space's first page is never handed out
/// (`IOVA_START_PFN + size + pad > limit_pfn`).
impl Subject for RbTree2626 {
    fn effective(&self, pages: u64) -> u64 {
        pages.next_power_of_two()
    }
    fn aligned(&self) -> bool {
        true
    }
    fn checks_frees(&self) -> bool {
        false
    }
    fn may_fast_fail(&self, _pages: u64, _limit: u64) -> bool {
        true
    }
    fn check(&self, oracle: &NaiveIovaSpace) {
        self.check_invariants().unwrap();
        let ranges: Vec<(u64, u64)> = self.ranges().iter().map(|(p, n)| (p.get(), *n)).collect();
        assert_eq!(ranges, oracle.ranges());
    }
    fn never_handed_out(&self) -> u64 {
        1
    }
}

impl Subject for RbTree {
    fn aligned(&self) -> bool {
        true
    }
    fn may_fast_fail(&self, pages: u64, limit: u64) -> bool {
        limit.min(END) <= self.dma_32bit_pfn().get() && pages >= self.max32_alloc_size()
    }
    fn check(&self, oracle: &NaiveIovaSpace) {
        self.check_invariants().unwrap();
        let ranges: Vec<(u64, u64)> = self.ranges().iter().map(|(p, n)| (p.get(), *n)).collect();
        assert_eq!(ranges, oracle.ranges());
        assert_eq!(self.metadata_bytes(), 32 * oracle.len() as u64);
    }
}

impl Subject for Bitmap {
    fn aligned(&self) -> bool {
        false
    }
    fn check(&self, oracle: &NaiveIovaSpace) {
        assert_eq!(self.used_pages(), oracle.used_pages() as u64);
    }
}

impl<A: Subject> Subject for Magazine<A> {
    fn effective(&self, pages: u64) -> u64 {
        self.rounded_pages(pages)
    }
    fn aligned(&self) -> bool {
        self.inner().aligned()
    }
    fn checks_frees(&self) -> bool {
        false
    }
    fn cacheable(&self, pages: u64) -> bool {
        self.config().bin(self.rounded_pages(pages)).is_some()
    }
    fn may_fast_fail(&self, pages: u64, limit: u64) -> bool {
        self.inner().may_fast_fail(pages, limit)
    }
    fn check(&self, oracle: &NaiveIovaSpace) {
        let s = self.stats();
        assert!(s.lock_acquisitions >= self.inner().stats().lock_acquisitions);
        assert!(self.inner().stats().allocs - self.inner().stats().frees >= oracle.len() as u64);
    }
    fn drain(&mut self) {
        Magazine::drain(self);
        assert_eq!(self.cached_ranges(), 0);
    }
}

#[derive(Debug, Clone)]
enum Op {
    Alloc {
        cpu: u16,
        pages: u64,
        limit: u64,
    },
    Free {
        index: usize,
    },
    /// A free of a live range with a wrong start or length (`how` picks the mutation).
    BadFree {
        index: usize,
        how: u8,
    },
    /// A free of a range freed earlier.
    DoubleFree {
        index: usize,
    },
    Tick {
        ms: u64,
    },
}

fn op() -> impl Strategy<Value = Op> {
    let pages = prop_oneof![6 => 1u64..=4, 3 => 5u64..=20, 1 => 21u64..=40];
    prop_oneof![
        8 => (0u16..3, pages, prop::sample::select(LIMITS.to_vec()))
            .prop_map(|(cpu, pages, limit)| Op::Alloc { cpu, pages, limit }),
        5 => any::<usize>().prop_map(|index| Op::Free { index }),
        1 => (any::<usize>(), 0u8..4).prop_map(|(index, how)| Op::BadFree { index, how }),
        1 => any::<usize>().prop_map(|index| Op::DoubleFree { index }),
        1 => (0u64..250).prop_map(|ms| Op::Tick { ms }),
    ]
}

struct Live {
    pfn: u64,
    pages: u64,
    effective: u64,
    cpu: CpuId,
}

fn pfn(p: u64) -> Pfn<Iova> {
    Pfn::new(p)
}

fn run<A: Subject>(mut a: A, ops: &[Op]) {
    let mut oracle = NaiveIovaSpace::new(START, END);
    let mut live: Vec<Live> = Vec::new();
    let mut freed: Vec<(u64, u64, u64)> = Vec::new();
    let mut lap_freed: Vec<(u64, u64)> = Vec::new();
    let mut cacheable_attempts = 0u64;
    let mut now = 0u64;
    let is_bitmap = a.name() == "bitmap";
    for op in ops {
        match *op {
            Op::Alloc { cpu, pages, limit } => {
                let cpu = CpuId::new(cpu);
                let eff = a.effective(pages);
                let may_ff = a.may_fast_fail(eff, limit);
                let wraps = a.stats().wraps;
                if a.cacheable(pages) {
                    cacheable_attempts += 1;
                }
                match a.alloc(cpu, pages, pfn(limit)) {
                    Ok(p) => {
                        let p = p.get();
                        assert!(p >= START && p + eff <= limit.min(END), "{p:#x}+{eff}");
                        if a.aligned() {
                            assert_eq!(p % eff.next_power_of_two(), 0, "{p:#x} unaligned");
                        }
                        oracle.insert(p, eff).unwrap();
                        if is_bitmap {
                            if a.stats().wraps == wraps {
                                for &(q, n) in &lap_freed {
                                    assert!(
                                        p + eff <= q || q + n <= p,
                                        "[{p:#x}+{eff}) reuses [{q:#x}+{n}) freed this lap"
                                    );
                                }
                            } else {
                                lap_freed.clear();
                            }
                        }
                        live.push(Live {
                            pfn: p,
                            pages,
                            effective: eff,
                            cpu,
                        });
                    }
                    Err(IovaError::Exhausted { .. }) => {
                        if !may_ff {
                            assert!(
                                !oracle.fits(eff, limit, a.aligned()),
                                "exhausted although {eff} pages fit below {limit}"
                            );
                        }
                        if is_bitmap && a.stats().wraps != wraps {
                            lap_freed.clear();
                        }
                    }
                    Err(e) => panic!("unexpected {e}"),
                }
            }
            Op::Free { index } => {
                if live.is_empty() {
                    continue;
                }
                let l = live.swap_remove(index % live.len());
                a.free(l.cpu, pfn(l.pfn), l.pages).unwrap();
                assert!(oracle.remove(l.pfn, l.effective));
                freed.push((l.pfn, l.pages, l.effective));
                lap_freed.push((l.pfn, l.effective));
            }
            Op::BadFree { index, how } => {
                if live.is_empty() || !a.checks_frees() {
                    continue;
                }
                let l = &live[index % live.len()];
                let (p, n) = match how {
                    0 => (l.pfn, l.pages + 1),
                    1 => (l.pfn + 1, l.pages),
                    2 => (l.pfn, l.pages - 1),
                    _ => (l.pfn.saturating_sub(1), l.pages + 1),
                };
                if n == 0 || oracle.is_live(p, n) {
                    continue;
                }
                let before = a.stats();
                assert_eq!(
                    a.free(CpuId::new(0), pfn(p), n),
                    Err(IovaError::NotAllocated { pfn: p, pages: n })
                );
                assert_eq!(a.stats().frees, before.frees);
            }
            Op::DoubleFree { index } => {
                if freed.is_empty() || !a.checks_frees() {
                    continue;
                }
                let (p, n, eff) = freed[index % freed.len()];
                if oracle.is_live(p, eff) {
                    continue;
                }
                assert!(a.free(CpuId::new(0), pfn(p), n).is_err());
            }
            Op::Tick { ms } => {
                now += ms * 1_000_000;
                a.on_tick(Cycles::new(now), ClockRate::GHZ_1);
            }
        }
        // After every step.
        let s = a.stats();
        assert_eq!(s.allocs - s.frees, live.len() as u64, "{s:?}");
        assert_eq!(oracle.len(), live.len());
        assert_eq!(s.cache_hits + s.cache_misses, cacheable_attempts);
        assert!(s.peak_metadata_bytes >= a.metadata_bytes());
        a.check(&oracle);
    }
    // Space is returned: free everything, drain caches, then every page is allocatable.
    for l in live.drain(..) {
        a.free(l.cpu, pfn(l.pfn), l.pages).unwrap();
        assert!(oracle.remove(l.pfn, l.effective));
    }
    a.drain();
    a.check(&oracle);
    let mut got = NaiveIovaSpace::new(START, END);
    loop {
        match a.alloc(CpuId::new(0), 1, pfn(END)) {
            Ok(p) => got.insert(p.get(), 1).unwrap(),
            Err(IovaError::Exhausted { .. }) => break,
            Err(e) => panic!("unexpected {e}"),
        }
    }
    assert_eq!(got.used_pages() as u64, END - START - a.never_handed_out());
}

fn rbtree() -> RbTree {
    RbTree::with_dma32_boundary(pfn(START), pfn(END), pfn(DMA32)).unwrap()
}

fn bitmap() -> Bitmap {
    Bitmap::new(pfn(START), pfn(END)).unwrap()
}

fn mag_config() -> MagazineConfig {
    MagazineConfig {
        cpus: 2,
        mag_size: 4,
        ..MagazineConfig::default()
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(192))]

    #[test]
    fn rbtree_matches_the_oracle(ops in prop::collection::vec(op(), 1..150)) {
        run(rbtree(), &ops);
    }

    #[test]
    fn bitmap_matches_the_oracle(ops in prop::collection::vec(op(), 1..150)) {
        run(bitmap(), &ops);
    }

    #[test]
    fn rbtree_2626_matches_the_oracle(ops in prop::collection::vec(op(), 1..150)) {
        // The 2.6.26 cached node serves the inclusive 32-bit limit, `DMA32 - 1`.
        run(
            RbTree2626::with_dma32_boundary(pfn(START), pfn(END), pfn(DMA32 - 1)).unwrap(),
            &ops,
        );
    }

    #[test]
    fn magazine_over_rbtree_keeps_the_invariants(ops in prop::collection::vec(op(), 1..150)) {
        run(Magazine::new(rbtree(), mag_config()).unwrap(), &ops);
    }

    #[test]
    fn magazine_over_bitmap_keeps_the_invariants(ops in prop::collection::vec(op(), 1..150)) {
        run(Magazine::new(bitmap(), mag_config()).unwrap(), &ops);
    }
}

/// Exhaustion of the rbtree is an error value, and a full-space aligned allocation works
/// again once everything is freed.
///
/// ```text
/// pfn  1 ........ 255 | 256 ........ 511 | 512
///      [ c: 128+64+... pages ] [ a: 256 aligned ]
/// ```
#[test]
fn rbtree_exhaustion_returns_exhausted() {
    let mut t = rbtree();
    let cpu = CpuId::new(0);
    let a = t.alloc(cpu, 256, pfn(END)).unwrap();
    assert_eq!(a.get(), 256);
    assert_eq!(
        t.alloc(cpu, 256, pfn(END)),
        Err(IovaError::Exhausted {
            pages: 256,
            limit: END
        })
    );
    let mut n = 0;
    while t.alloc(cpu, 1, pfn(END)).is_ok() {
        n += 1;
    }
    assert_eq!(n, 255);
    assert_eq!(t.stats().failures, 2);
}

/// Every lap of the bitmap is counted. Fujita's pattern (map, then unmap at once, S0.8)
/// wraps exactly once per lap; with ranges still outstanding at the wrap, GART's rule adds
/// wraps (freeing last lap's ranges above the hint pushes the hint to the top).
///
/// ```text
/// pfn  1 ........................ 511 | 512
///      [x]→ → → → → → → → → → → → [x] |   one range walks up; wrap; repeat
/// ```
#[test]
fn bitmap_counts_every_wrap() {
    let cpu = CpuId::new(0);
    let mut b = bitmap();
    for _ in 0..(END - START) * 10 {
        let p = b.alloc(cpu, 1, pfn(END)).unwrap();
        b.free(cpu, p, 1).unwrap();
    }
    // 10 laps of 511 pages; the first starts at the bottom without a wrap.
    assert_eq!(b.stats().wraps, 9);

    let mut b = bitmap();
    let mut ring = std::collections::VecDeque::new();
    for _ in 0..(END - START) * 10 {
        ring.push_back(b.alloc(cpu, 1, pfn(END)).unwrap());
        if ring.len() > 8 {
            b.free(cpu, ring.pop_front().unwrap(), 1).unwrap();
        }
    }
    let wraps = b.stats().wraps;
    assert!((10..=9 * 9).contains(&wraps), "{wraps}");
}
