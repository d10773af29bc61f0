//! iommulab's IOVA allocators hand out exactly the pfns Linux 6.12's `drivers/iommu/iova.c`
//! hands out. Every checksum below was printed by Linux's own allocator, compiled in user
//! space by `scripts/bench_vs_linux_iova.sh` (Debian `linux-source-6.12` 6.12.117-1~deb12u1):
//! `KEEP=1 scripts/bench_vs_linux_iova.sh 1` keeps its temporary directory, and there
//! `./bench1 SHAPE LIVE OPS` prints the line each constant comes from. The kernel source is
//! not needed here, so CI holds the model to Linux's choices without it.
//!
//! The shapes, RNG (splitmix64 from "iommulab") and checksum (FNV-1a over the pfns as 64-bit
//! words, in order: fill, `OPS / 8` warm-up steps, `OPS` steps) are `examples/iova_shapes/
//! shapes.rs`, the code the script runs; `scripts/linux-iova/bench.c` is the C twin.

#[allow(dead_code)]
#[path = "../examples/iova_shapes/shapes.rs"]
mod shapes;

use iommulab::addr::Pfn;
use iommulab::iova::{Bitmap, GapTree, IovaAllocator, Magazine, MagazineConfig, RbTree};
use shapes::{DMA_END, END, Picks, Step, run, run_mixed};

fn rbtree() -> RbTree {
    RbTree::new(Pfn::new(1), Pfn::new(END)).unwrap()
}

fn gap_tree() -> GapTree {
    GapTree::new(Pfn::new(1), Pfn::new(END)).unwrap()
}

fn magazine() -> Magazine<RbTree> {
    Magazine::new(rbtree(), MagazineConfig::default()).unwrap()
}

fn picks<A: IovaAllocator>(a: A, step: Option<Step>, live: usize, ops: u64) -> Picks {
    match step {
        Some(s) => run(a, s, live, ops, false),
        None => run_mixed(a, live, ops, false, false),
    }
    .unwrap()
    .picks
}

/// Linux's (count, checksum) for `bench1 SHAPE LIVE OPS`.
fn assert_linux(p: Picks, count: u64, checksum: u64, what: &str) {
    assert_eq!(
        (p.count, p.checksum),
        (count, checksum),
        "{what}: picks differ from Linux 6.12's"
    );
}

/// `tree_fifo 32 10000` and `fast_fifo 32 10000` (both 34f05037ecf5fc30: the tree reuses
/// the freed slot, the rcache hands it straight back), and `tree_fifo 4096 10000`.
#[test]
fn fifo_pairs_pick_what_linux_picks() {
    let c32 = 0x34f0_5037_ecf5_fc30;
    assert_linux(
        picks(rbtree(), Some(Step::Fifo), 32, 10_000),
        11_282,
        c32,
        "rbtree",
    );
    assert_linux(
        picks(gap_tree(), Some(Step::Fifo), 32, 10_000),
        11_282,
        c32,
        "gap-tree",
    );
    assert_linux(
        picks(magazine(), Some(Step::Fifo), 32, 10_000),
        11_282,
        c32,
        "magazine",
    );
    let c4k = 0x6cff_7ae1_fd2d_0870;
    assert_linux(
        picks(rbtree(), Some(Step::Fifo), 4096, 10_000),
        15_346,
        c4k,
        "rbtree",
    );
}

/// `tree_churn 4096 10000`: 1-page ranges, a random one freed each step, so the walk from
/// the cached node passes live ranges and both `__cached_rbnode_delete_update` branches run.
#[test]
fn random_churn_picks_what_linux_picks() {
    let c = 0x73ff_7da7_6219_c1a6;
    assert_linux(
        picks(rbtree(), Some(Step::Churn), 4096, 10_000),
        15_346,
        c,
        "rbtree",
    );
    assert_linux(
        picks(gap_tree(), Some(Step::Churn), 4096, 10_000),
        15_346,
        c,
        "gap-tree",
    );
}

/// `tree_mixed 4096 10000` and `fast_mixed 4096 10000`: sizes of 1..=48 pages (size
/// alignment; rcache bins, magazine swaps and depot pushes and pops; sizes above 32 pages
/// bypass the rcache).
#[test]
fn mixed_sizes_pick_what_linux_picks() {
    let c = 0xb00a_5c2e_f874_3c71;
    assert_linux(picks(rbtree(), None, 4096, 10_000), 15_346, c, "rbtree");
    assert_linux(picks(gap_tree(), None, 4096, 10_000), 15_346, c, "gap-tree");
    let c = 0x5c42_ee27_a80b_d849;
    assert_linux(picks(magazine(), None, 4096, 10_000), 15_346, c, "magazine");
}

/// `tree_mixed 30000 1000` and `fast_mixed 30000 1000`: the space fills, so allocations fail
/// (994 on the tree, pfn 0 in the checksum): the search's retry above the cached node,
/// `max32_alloc_size`, and for the rcache the flush of every magazine and the depot before
/// its one retry.
#[test]
fn a_full_space_fails_where_linux_fails() {
    let p = picks(rbtree(), None, 30_000, 1000);
    assert_eq!(p.failed, 994);
    assert_linux(p, 31_125, 0x324c_96e6_a205_f4c2, "rbtree");
    let p = picks(gap_tree(), None, 30_000, 1000);
    assert_linux(p, 31_125, 0x324c_96e6_a205_f4c2, "gap-tree");
    let p = picks(magazine(), None, 30_000, 1000);
    assert!(p.failed > 0);
    assert_linux(p, 31_125, 0x5a75_0463_c6bb_e275, "magazine");
}

/// `tree_dma 40960 1000` and `fast_dma 40960 1000`: dma-iommu's two attempts for a 36-bit
/// mask (below 4 GiB, then below 64 GiB; the rcache flushed only on the second) with the
/// space below 4 GiB nearly full, so about 1 step in 5 lands above it (207 and 241 of the
/// 1,125 steps in Linux's run): both cached nodes, `max32_alloc_size`'s fast failure, and
/// `iova_find_limit`'s anchor shortcut.
#[test]
fn dma_iommu_two_attempts_pick_what_linux_picks() {
    let tree = || RbTree::new(Pfn::new(1), Pfn::new(DMA_END)).unwrap();
    let c = 0x5858_fc2b_a1ce_862c;
    let p = run_mixed(tree(), 40_960, 1000, false, true).unwrap().picks;
    assert_linux(p, 42_085, c, "rbtree");
    let gap = GapTree::new(Pfn::new(1), Pfn::new(DMA_END)).unwrap();
    let p = run_mixed(gap, 40_960, 1000, false, true).unwrap().picks;
    assert_linux(p, 42_085, c, "gap-tree");
    let mag = Magazine::new(tree(), MagazineConfig::default()).unwrap();
    let p = run_mixed(mag, 40_960, 1000, false, true).unwrap().picks;
    assert_linux(p, 42_085, 0xe179_78b8_70d1_ea99, "magazine");
}

/// The checksum tells allocators apart: the bitmap (next-fit upward) does not match.
#[test]
fn another_policy_does_not_match() {
    let b = Bitmap::new(Pfn::new(1), Pfn::new(END)).unwrap();
    let p = picks(b, Some(Step::Churn), 4096, 10_000);
    assert_eq!(p.count, 15_346);
    assert_ne!(p.checksum, 0x73ff_7da7_6219_c1a6);
}
