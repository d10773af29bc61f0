//! Wall-clock speed of the IOVA allocators (quality numbers come from the CLI).
//!
//! Cases:
//! - `iova/alloc_free/{rbtree,bitmap,magazine+rbtree,magazine+bitmap,vm-allocator}`: 1-page
//!   alloc+free pairs over a 4 GiB space of 4 KiB pages, with a ring of 32 outstanding ranges
//!   (each pair frees the oldest and allocates a new one, so the pattern is FIFO, not LIFO).
//!   `vm-allocator` is rust-vmm's `AddressAllocator` (an interval tree, first match) doing
//!   the same with 4 KiB-aligned 4 KiB ranges, as a peer.
//! - `iova/alloc_free_40k_live/{rbtree,magazine+rbtree,bitmap}`: the same FIFO pairs with
//!   40,960 ranges outstanding, so the tree holds 40 K nodes (the 32-range ring above keeps
//!   it small enough to stay in L1).
//! - `iova/churn_40k_live/{rbtree,gap-tree}`: 40,960 ranges live; each step frees a random
//!   one and allocates one (Linux's 6.x walk from the cached node is linear in the live ranges
//!   it passes, so this is the slow case; `gap-tree` makes the same choices in
//!   `O(log space)`). `gap-tree` is in `alloc_free_40k_live` too.
//! - `iova/scaling/{shared_magazine,locked_rbtree}/{1,2}`: the same pairs from 1 and 2
//!   threads (one simulated CPU each) on `SharedMagazine<RbTree>` (per-CPU locks) and
//!   `Locked<RbTree>` (one lock, Linux before 4.7); the same total pairs per iteration. The
//!   threads are started once per sample and time their own loops after a barrier (the
//!   slowest thread's time counts), so thread start-up is not measured.
//!
//! Throughput is in pairs per second. Targets (the brief): magazine ≲ 20 ns, bitmap ≲ 50 ns,
//! rbtree ≲ 150 ns per pair.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use iommulab::addr::{CpuId, Iova, Pfn};
use iommulab::iova::{
    Bitmap, GapTree, IovaAllocator, Locked, Magazine, MagazineConfig, RbTree, SharedMagazine,
};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use vm_allocator::{AddressAllocator, AllocPolicy, RangeInclusive};

/// 4 GiB of 4 KiB pages.
const END: u64 = 1 << 20;
/// Outstanding ranges.
const RING: usize = 32;
/// Pairs per iteration of `alloc_free`.
const OPS: u64 = 1024;
/// Pairs per iteration of `scaling`, split between the threads.
const TOTAL: u64 = 1 << 16;

/// Live ranges of the 40 K cases.
const LIVE_40K: usize = 40_960;

/// Ring of outstanding ranges over any allocator.
struct Ring<A> {
    a: A,
    ring: Vec<Pfn<Iova>>,
    next: usize,
}

impl<A: IovaAllocator> Ring<A> {
    fn new(a: A) -> Self {
        Self::with_live(a, RING)
    }

    fn with_live(mut a: A, live: usize) -> Self {
        let cpu = CpuId::new(0);
        let ring = (0..live)
            .map(|_| a.alloc(cpu, 1, Pfn::new(END)).unwrap())
            .collect();
        Ring { a, ring, next: 0 }
    }

    #[inline]
    fn pairs(&mut self, n: u64) {
        let cpu = CpuId::new(0);
        for _ in 0..n {
            let old = self.ring[self.next];
            self.a.free(cpu, black_box(old), 1).unwrap();
            self.ring[self.next] = self.a.alloc(cpu, black_box(1), Pfn::new(END)).unwrap();
            // A compare, not `%`: a 64-bit division per pair would cost about what a
            // magazine hit does.
            self.next += 1;
            if self.next == self.ring.len() {
                self.next = 0;
            }
        }
    }

    /// Frees a random live range and allocates one, `n` times.
    fn churn(&mut self, n: u64, rng: &mut SmallRng) {
        let cpu = CpuId::new(0);
        for _ in 0..n {
            let i = rng.gen_range(0..self.ring.len());
            self.a.free(cpu, black_box(self.ring[i]), 1).unwrap();
            self.ring[i] = self.a.alloc(cpu, black_box(1), Pfn::new(END)).unwrap();
        }
    }
}

fn rbtree() -> RbTree {
    RbTree::new(Pfn::new(1), Pfn::new(END)).unwrap()
}

fn gap_tree() -> GapTree {
    GapTree::new(Pfn::new(1), Pfn::new(END)).unwrap()
}

fn bitmap() -> Bitmap {
    Bitmap::new(Pfn::new(1), Pfn::new(END)).unwrap()
}

fn alloc_free(c: &mut Criterion) {
    let mut g = c.benchmark_group("iova/alloc_free");
    g.throughput(Throughput::Elements(OPS));
    let mut rb = Ring::new(rbtree());
    g.bench_function("rbtree", |b| b.iter(|| rb.pairs(OPS)));
    let mut bm = Ring::new(bitmap());
    g.bench_function("bitmap", |b| b.iter(|| bm.pairs(OPS)));
    let mut mr = Ring::new(Magazine::new(rbtree(), MagazineConfig::default()).unwrap());
    g.bench_function("magazine+rbtree", |b| b.iter(|| mr.pairs(OPS)));
    let mut mb = Ring::new(Magazine::new(bitmap(), MagazineConfig::default()).unwrap());
    g.bench_function("magazine+bitmap", |b| b.iter(|| mb.pairs(OPS)));

    let mut vm = AddressAllocator::new(0x1000, (END - 1) << 12).unwrap();
    let mut ring: Vec<RangeInclusive> = (0..RING)
        .map(|_| {
            vm.allocate(0x1000, 0x1000, AllocPolicy::FirstMatch)
                .unwrap()
        })
        .collect();
    let mut next = 0;
    g.bench_function("vm-allocator", |b| {
        b.iter(|| {
            for _ in 0..OPS {
                vm.free(black_box(&ring[next])).unwrap();
                ring[next] = vm
                    .allocate(black_box(0x1000), 0x1000, AllocPolicy::FirstMatch)
                    .unwrap();
                next = (next + 1) % RING;
            }
        });
    });
    g.finish();

    let mut g = c.benchmark_group("iova/alloc_free_40k_live");
    g.throughput(Throughput::Elements(OPS));
    let mut rb = Ring::with_live(rbtree(), LIVE_40K);
    g.bench_function("rbtree", |b| b.iter(|| rb.pairs(OPS)));
    let mut mr = Ring::with_live(
        Magazine::new(rbtree(), MagazineConfig::default()).unwrap(),
        LIVE_40K,
    );
    g.bench_function("magazine+rbtree", |b| b.iter(|| mr.pairs(OPS)));
    let mut bm = Ring::with_live(bitmap(), LIVE_40K);
    g.bench_function("bitmap", |b| b.iter(|| bm.pairs(OPS)));
    let mut gt = Ring::with_live(gap_tree(), LIVE_40K);
    g.bench_function("gap-tree", |b| b.iter(|| gt.pairs(OPS)));
    g.finish();

    let mut g = c.benchmark_group("iova/churn_40k_live");
    const CHURN: u64 = 64;
    g.throughput(Throughput::Elements(CHURN));
    g.sample_size(10);
    let mut rb = Ring::with_live(rbtree(), LIVE_40K);
    let mut rng = SmallRng::seed_from_u64(40_960);
    g.bench_function("rbtree", |b| b.iter(|| rb.churn(CHURN, &mut rng)));
    let mut gt = Ring::with_live(gap_tree(), LIVE_40K);
    let mut rng = SmallRng::seed_from_u64(40_960);
    g.bench_function("gap-tree", |b| b.iter(|| gt.churn(CHURN, &mut rng)));
    g.finish();
}

/// Runs `pairs` on each of `threads` threads started once, timing each thread's loop after a
/// barrier, `iters` times; the slowest thread's time.
fn timed_threads(threads: u16, iters: u64, run: impl Fn(CpuId) + Sync) -> std::time::Duration {
    let barrier = std::sync::Barrier::new(usize::from(threads));
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (barrier, run) = (&barrier, &run);
                s.spawn(move || {
                    barrier.wait();
                    let t0 = std::time::Instant::now();
                    for _ in 0..iters {
                        run(CpuId::new(t));
                    }
                    t0.elapsed()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap())
            .max()
            .unwrap_or_default()
    })
}

/// `pairs` alloc/free pairs on CPU `cpu` through `alloc`/`free`, with a ring of `RING`.
fn thread_pairs(
    cpu: CpuId,
    pairs: u64,
    alloc: impl Fn(CpuId) -> Pfn<Iova>,
    free: impl Fn(CpuId, Pfn<Iova>),
) {
    let mut ring: [Pfn<Iova>; RING] = std::array::from_fn(|_| alloc(cpu));
    let mut next = 0;
    for _ in 0..pairs {
        free(cpu, black_box(ring[next]));
        ring[next] = alloc(cpu);
        next = (next + 1) % RING;
    }
    for p in ring {
        free(cpu, p);
    }
}

fn scaling(c: &mut Criterion) {
    let mut g = c.benchmark_group("iova/scaling");
    g.throughput(Throughput::Elements(TOTAL));
    let cfg = MagazineConfig {
        cpus: 2,
        ..MagazineConfig::default()
    };
    let shared = SharedMagazine::new(rbtree(), cfg).unwrap();
    let locked = Locked::new(rbtree());
    for threads in [1u16, 2] {
        let per = TOTAL / u64::from(threads);
        g.bench_function(format!("shared_magazine/{threads}"), |b| {
            b.iter_custom(|iters| {
                timed_threads(threads, iters, |cpu| {
                    thread_pairs(
                        cpu,
                        per,
                        |cpu| shared.alloc(cpu, 1, Pfn::new(END)).unwrap(),
                        |cpu, p| shared.free(cpu, p, 1).unwrap(),
                    );
                })
            });
        });
        g.bench_function(format!("locked_rbtree/{threads}"), |b| {
            b.iter_custom(|iters| {
                timed_threads(threads, iters, |cpu| {
                    thread_pairs(
                        cpu,
                        per,
                        |cpu| locked.alloc(cpu, 1, Pfn::new(END)).unwrap(),
                        |cpu, p| locked.free(cpu, p, 1).unwrap(),
                    );
                })
            });
        });
    }
    g.finish();
}

criterion_group!(benches, alloc_free, scaling);
criterion_main!(benches);
