//! "No heap allocation per operation in steady state", proved with a counting
//! `#[global_allocator]` (the `alloc-counter` crate, the one place in the workspace allowed
//! unsafe code). Each allocator runs a warm-up of alloc/free pairs over a ring of 32
//! outstanding ranges of 1–4 pages, then 100 000 more pairs must not allocate at all.
//!
//! ```text
//! ring slot:  0   1   2  ...  31      each step frees slot i % 32 and refills it
//!            [a] [b] [c] ... [z]      with 1 + i % 4 pages
//! ```
//!
//! Two more in the shapes `benches/iova.rs` times: the magazine hit pair (one-page FIFO pairs
//! through `loaded`) and the GapTree's random churn at 40,960 live ranges (its node pairs and
//! range map reach their size in the warm-up; afterwards a split reuses a released pair).

use iommulab::addr::{CpuId, Iova, Pfn};
use iommulab::clock::{ClockRate, Cycles};
use iommulab::iova::{
    Bitmap, GapTree, IovaAllocator, Locked, Magazine, MagazineConfig, RangeControl, RbTree,
    RbTree2626, SharedMagazine,
};

#[global_allocator]
static ALLOC: alloc_counter::CountingAlloc = alloc_counter::CountingAlloc::new();

const END: u64 = 1 << 20;
const RING: usize = 32;
const WARM_UP: u64 = 200_000;
const MEASURED: u64 = 100_000;

/// Runs `pairs` alloc/free pairs through `alloc`/`free` closures over a fixed ring.
fn churn(
    ring: &mut [(Pfn<Iova>, u64); RING],
    from: u64,
    pairs: u64,
    mut alloc: impl FnMut(u64, u64) -> Pfn<Iova>,
    mut free: impl FnMut(Pfn<Iova>, u64),
) {
    for i in from..from + pairs {
        let slot = usize::try_from(i % RING as u64).unwrap();
        let (p, n) = ring[slot];
        if n != 0 {
            free(p, n);
        }
        let pages = 1 + i % 4;
        ring[slot] = (alloc(i, pages), pages);
    }
}

fn assert_steady_state_does_not_allocate<A: IovaAllocator>(mut a: A) {
    let cpu = CpuId::new(0);
    let mut ring = [(Pfn::new(0), 0); RING];
    let step = |a: &mut A, ring: &mut [(Pfn<Iova>, u64); RING], from, pairs| {
        let cell = std::cell::RefCell::new(&mut *a);
        churn(
            ring,
            from,
            pairs,
            |i, pages| {
                let mut a = cell.borrow_mut();
                if i % 1000 == 0 {
                    a.on_tick(Cycles::new(i * 10_000), ClockRate::GHZ_1); // 10 µs per pair at 1 GHz
                }
                a.alloc(cpu, pages, Pfn::new(END)).unwrap()
            },
            |p, n| cell.borrow_mut().free(cpu, p, n).unwrap(),
        );
    };
    step(&mut a, &mut ring, 0, WARM_UP);
    let before = alloc_counter::this_thread();
    step(&mut a, &mut ring, WARM_UP, MEASURED);
    let allocs = alloc_counter::this_thread() - before;
    assert_eq!(
        allocs,
        0,
        "{}: {allocs} heap allocations in steady state",
        a.name()
    );
    assert_eq!(a.stats().allocs - a.stats().frees, RING as u64);
}

fn rbtree() -> RbTree {
    RbTree::new(Pfn::new(1), Pfn::new(END)).unwrap()
}

fn bitmap() -> Bitmap {
    Bitmap::new(Pfn::new(1), Pfn::new(END)).unwrap()
}

/// S0.5's rbtree: nodes are recycled from the arena's free list.
#[test]
fn rbtree_steady_state_does_not_allocate() {
    assert_steady_state_does_not_allocate(rbtree());
}

/// The bitmap never allocates after construction.
#[test]
fn bitmap_steady_state_does_not_allocate() {
    assert_steady_state_does_not_allocate(bitmap());
}

/// Linux 2.6.26's allocator with its touched-line log on (as the CPU cache model runs it):
/// `find_iova` at unmap, `__free_iova`, the log cleared after every pair as the runner does.
#[test]
fn rbtree_2626_with_line_log_does_not_allocate() {
    let cpu = CpuId::new(0);
    let mut t = RbTree2626::new(Pfn::new(1), Pfn::new(END)).unwrap();
    t.reserve(Pfn::new(0xfee00), 0x100).unwrap();
    t.log_touched_lines(true);
    let mut ring = [(Pfn::new(0), 0); RING];
    let mut run = |t: &mut RbTree2626, from: u64, pairs: u64| {
        for i in from..from + pairs {
            let slot = usize::try_from(i % RING as u64).unwrap();
            let (p, n) = ring[slot];
            if n != 0 {
                t.lookup_on_unmap(cpu, p, n);
                t.free(cpu, p, n).unwrap();
            }
            let pages = 1 + i % 4;
            ring[slot] = (t.alloc(cpu, pages, Pfn::new(END)).unwrap(), pages);
            assert!(!t.touched_lines().is_empty());
            t.clear_touched_lines();
        }
    };
    run(&mut t, 0, WARM_UP);
    let before = alloc_counter::this_thread();
    run(&mut t, WARM_UP, MEASURED);
    let allocs = alloc_counter::this_thread() - before;
    assert_eq!(
        allocs, 0,
        "rbtree-2.6.26: {allocs} heap allocations in steady state"
    );
}

/// Magazines are recycled through the depot's spare list.
#[test]
fn magazine_over_rbtree_steady_state_does_not_allocate() {
    let m = Magazine::new(rbtree(), MagazineConfig::default()).unwrap();
    assert_steady_state_does_not_allocate(m);
}

/// Small magazines force depot exchanges and trims on every few operations.
#[test]
fn magazine_with_depot_traffic_does_not_allocate() {
    let cfg = MagazineConfig {
        cpus: 1,
        mag_size: 3,
        depot_delay_ms: 1,
        ..MagazineConfig::default()
    };
    let m = Magazine::new(bitmap(), cfg).unwrap();
    assert_steady_state_does_not_allocate(m);
}

/// The concurrent variants, driven from one thread.
#[test]
fn shared_variants_do_not_allocate() {
    let cpu = CpuId::new(1);
    let locked = Locked::new(rbtree());
    let cfg = MagazineConfig {
        cpus: 2,
        ..MagazineConfig::default()
    };
    let shared = SharedMagazine::new(rbtree(), cfg).unwrap();
    let mut ring = [(Pfn::new(0), 0); RING];
    let alloc = |pages| locked.alloc(cpu, pages, Pfn::new(END)).unwrap();
    churn(
        &mut ring,
        0,
        WARM_UP,
        |_, n| alloc(n),
        |p, n| locked.free(cpu, p, n).unwrap(),
    );
    let mut ring2 = [(Pfn::new(0), 0); RING];
    let salloc = |pages| shared.alloc(cpu, pages, Pfn::new(END)).unwrap();
    churn(
        &mut ring2,
        0,
        WARM_UP,
        |_, n| salloc(n),
        |p, n| shared.free(cpu, p, n).unwrap(),
    );
    let before = alloc_counter::this_thread();
    churn(
        &mut ring,
        WARM_UP,
        MEASURED,
        |_, n| alloc(n),
        |p, n| locked.free(cpu, p, n).unwrap(),
    );
    churn(
        &mut ring2,
        WARM_UP,
        MEASURED,
        |_, n| salloc(n),
        |p, n| {
            shared.free(cpu, p, n).unwrap();
        },
    );
    assert_eq!(alloc_counter::this_thread() - before, 0);
}

/// The counter is live: a `Vec` allocation on this thread is seen.
#[test]
fn counter_sees_allocations() {
    let before = alloc_counter::this_thread();
    let v: Vec<u64> = std::hint::black_box(Vec::with_capacity(16));
    assert_eq!(alloc_counter::this_thread() - before, 1);
    assert!(alloc_counter::total() >= 1);
    drop(v);
}

/// xorshift64: the slot each churn step frees.
fn next_draw(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

/// Frees a random live range and allocates one, `steps` times; the heap allocations made.
fn random_steps<A: IovaAllocator>(
    a: &mut A,
    ring: &mut [Pfn<Iova>],
    x: &mut u64,
    steps: u64,
) -> u64 {
    let cpu = CpuId::new(0);
    let before = alloc_counter::this_thread();
    for _ in 0..steps {
        let i = usize::try_from(next_draw(x) % ring.len() as u64).unwrap();
        a.free(cpu, ring[i], 1).unwrap();
        ring[i] = a.alloc(cpu, 1, Pfn::new(END)).unwrap();
    }
    alloc_counter::this_thread() - before
}

/// Frees the oldest range and allocates one, `steps` times; the heap allocations made.
fn fifo_steps<A: IovaAllocator>(a: &mut A, ring: &mut [Pfn<Iova>], steps: usize) -> u64 {
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
    let mut ring = filled(&mut t, 40_960);
    let mut x = 0x9e37_79b9_7f4a_7c15;
    random_steps(&mut t, &mut ring, &mut x, 200_000);
    let n = random_steps(&mut t, &mut ring, &mut x, 200_000);
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
    fifo_steps(&mut m, &mut ring, 10_000);
    let hits = m.stats().cache_hits;
    let n = fifo_steps(&mut m, &mut ring, 1_000_000);
    assert_eq!(n, 0, "magazine: {n} heap allocations in 1,000,000 pairs");
    assert_eq!(m.stats().cache_hits - hits, 1_000_000, "every pair a hit");
}
