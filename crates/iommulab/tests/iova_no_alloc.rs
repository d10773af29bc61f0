//! No heap allocation per operation in steady state for the allocators on their own, in the
//! shapes `benches/iova.rs` times: the magazine hit pair (FIFO pairs through `loaded`) and
//! the GapTree's random churn at 40,960 live ranges (its node pairs and range map reach
//! their size during the warm-up; afterwards a split reuses a released pair).

use iommulab::addr::{CpuId, Iova, Pfn};
use iommulab::iova::{GapTree, IovaAllocator, Magazine, MagazineConfig, RbTree};

#[global_allocator]
static ALLOC: alloc_counter::CountingAlloc = alloc_counter::CountingAlloc::new();

const END: u64 = 1 << 20;
const LIVE: usize = 40_960;

/// xorshift64: the slot each churn step frees.
fn next(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

/// Frees a random live range and allocates one, `steps` times; the heap allocations made.
fn churn<A: IovaAllocator>(a: &mut A, ring: &mut [Pfn<Iova>], x: &mut u64, steps: u64) -> u64 {
    let cpu = CpuId::new(0);
    let before = alloc_counter::this_thread();
    for _ in 0..steps {
        let i = usize::try_from(next(x) % ring.len() as u64).unwrap();
        a.free(cpu, ring[i], 1).unwrap();
        ring[i] = a.alloc(cpu, 1, Pfn::new(END)).unwrap();
    }
    alloc_counter::this_thread() - before
}

/// Frees the oldest range and allocates one, `steps` times; the heap allocations made.
fn fifo<A: IovaAllocator>(a: &mut A, ring: &mut [Pfn<Iova>], steps: usize) -> u64 {
    let cpu = CpuId::new(0);
    let before = alloc_counter::this_thread();
    for k in 0..steps {
        let i = k % ring.len();
        a.free(cpu, ring[i], 1).unwrap();
        ring[i] = a.alloc(cpu, 1, Pfn::new(END)).unwrap();
    }
    alloc_counter::this_thread() - before
}

fn filled<A: IovaAllocator>(a: &mut A, live: usize) -> Vec<Pfn<Iova>> {
    (0..live)
        .map(|_| a.alloc(CpuId::new(0), 1, Pfn::new(END)).unwrap())
        .collect()
}

#[test]
fn gap_tree_churn_allocates_nothing_in_steady_state() {
    let mut t = GapTree::new(Pfn::new(1), Pfn::new(END)).unwrap();
    let mut ring = filled(&mut t, LIVE);
    let mut x = 0x9e37_79b9_7f4a_7c15;
    churn(&mut t, &mut ring, &mut x, 200_000);
    let n = churn(&mut t, &mut ring, &mut x, 200_000);
    assert_eq!(
        n, 0,
        "gap-tree: {n} heap allocations in 200,000 churn steps"
    );
}

#[test]
fn magazine_hit_pairs_allocate_nothing() {
    let rb = RbTree::new(Pfn::new(1), Pfn::new(END)).unwrap();
    let mut m = Magazine::new(rb, MagazineConfig::default()).unwrap();
    let mut ring = filled(&mut m, 32);
    fifo(&mut m, &mut ring, 10_000);
    let hits = m.stats().cache_hits;
    let n = fifo(&mut m, &mut ring, 1_000_000);
    assert_eq!(n, 0, "magazine: {n} heap allocations in 1,000,000 pairs");
    assert_eq!(m.stats().cache_hits - hits, 1_000_000, "every pair a hit");
}
