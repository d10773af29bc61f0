//! The Rust side of `scripts/bench_vs_linux_iova.sh`: one shape of `benches/iova.rs` on one
//! of iommulab's allocators, printing the same line as `scripts/linux-iova/bench.c`.
//!
//! ```sh
//! cargo run --release -p iommulab --example iova_shapes -- tree_churn 40960 2000 --alloc gap-tree
//! ```

mod shapes;

use anyhow::{Context, Result, bail};
use clap::{Parser, ValueEnum};
use iommulab::addr::Pfn;
use iommulab::iova::{GapTree, IovaAllocator, IovaError, Magazine, MagazineConfig, RbTree};

use shapes::{DMA_END, END, Outcome, Step, run, run_mixed};

/// Which shape, named as `bench.c` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
#[value(rename_all = "snake_case")]
enum Shape {
    /// FIFO alloc/free pairs on the tree (`alloc_iova` / `__free_iova`).
    TreeFifo,
    /// FIFO alloc/free pairs through the rcache (`alloc_iova_fast` / `free_iova_fast`).
    FastFifo,
    /// Free a random live range, allocate one, on the tree.
    TreeChurn,
    /// `tree_churn` with sizes of 1..=48 pages; a full space is a pfn-0 pick.
    TreeMixed,
    /// `tree_mixed` through the rcache.
    FastMixed,
    /// `tree_mixed` as dma-iommu allocates for a 36-bit mask: below 4 GiB, else below 64 GiB.
    TreeDma,
    /// `tree_dma` through the rcache (`flush_rcache` on the second attempt only).
    FastDma,
}

/// Which iommulab allocator runs the shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Alloc {
    /// `RbTree` (the 6.x walk).
    Rbtree,
    /// `GapTree` (the same choices in O(log n)).
    GapTree,
    /// `Magazine` over `RbTree` with `MagazineConfig::default()`.
    #[value(name = "magazine+rbtree")]
    MagazineRbtree,
}

#[derive(Debug, Parser)]
#[command(about = "One IOVA allocator shape, timed, with a checksum of every pfn handed out")]
struct Args {
    /// The shape.
    shape: Shape,
    /// Live ranges (the ring).
    live: usize,
    /// Timed steps (ops / 8 warm-up steps run first).
    ops: u64,
    /// The allocator (default: rbtree for tree_*, magazine+rbtree for fast_fifo).
    #[arg(long)]
    alloc: Option<Alloc>,
    /// Print every pfn handed out, one a line, instead of the summary.
    #[arg(long)]
    dump: bool,
}

/// What a shape runs: 1-page steps or mixed sizes (dma-iommu's two attempts or not).
#[derive(Clone, Copy, Debug)]
enum Shape1 {
    Pages(Step),
    Mixed { dma: bool },
}

fn go<A: IovaAllocator>(
    a: A,
    step: Shape1,
    live: usize,
    ops: u64,
    dump: bool,
) -> Result<Outcome, IovaError> {
    match step {
        Shape1::Pages(s) => run(a, s, live, ops, dump),
        Shape1::Mixed { dma } => run_mixed(a, live, ops, dump, dma),
    }
}

fn main() -> Result<()> {
    let args = Args::parse();
    if args.live == 0 || args.ops == 0 {
        bail!(
            "LIVE and OPS must be positive (got {} and {})",
            args.live,
            args.ops
        );
    }
    if args.live as u64 >= END / 2 {
        bail!(
            "LIVE = {} does not fit the space [1, 2^20) with room to move",
            args.live
        );
    }
    let alloc = args.alloc.unwrap_or(match args.shape {
        Shape::FastFifo | Shape::FastMixed | Shape::FastDma => Alloc::MagazineRbtree,
        Shape::TreeFifo | Shape::TreeChurn | Shape::TreeMixed | Shape::TreeDma => Alloc::Rbtree,
    });
    let step = match args.shape {
        Shape::TreeFifo | Shape::FastFifo => Shape1::Pages(Step::Fifo),
        Shape::TreeChurn => Shape1::Pages(Step::Churn),
        Shape::TreeMixed | Shape::FastMixed => Shape1::Mixed { dma: false },
        Shape::TreeDma | Shape::FastDma => Shape1::Mixed { dma: true },
    };
    let top = if matches!(step, Shape1::Mixed { dma: true }) {
        DMA_END
    } else {
        END
    };
    let (start, end) = (Pfn::new(1), Pfn::new(top));
    let (live, ops, dump) = (args.live, args.ops, args.dump);
    let out: Outcome = match alloc {
        Alloc::Rbtree => go(RbTree::new(start, end)?, step, live, ops, dump),
        Alloc::GapTree => go(GapTree::new(start, end)?, step, live, ops, dump),
        Alloc::MagazineRbtree => go(
            Magazine::new(RbTree::new(start, end)?, MagazineConfig::default())?,
            step,
            live,
            ops,
            dump,
        ),
    }
    .with_context(|| format!("{:?} on {alloc:?}", args.shape))?;
    if !args.dump {
        let shape = args
            .shape
            .to_possible_value()
            .map(|v| v.get_name().to_owned());
        let alloc_name = alloc.to_possible_value().map(|v| v.get_name().to_owned());
        let p = out.picks;
        println!(
            "shape={} live={} ops={} impl=iommulab-{} ns={:.2} count={} checksum={:016x} first={},{},{},{}",
            shape.unwrap_or_default(),
            args.live,
            args.ops,
            alloc_name.unwrap_or_default(),
            out.ns_per_op,
            p.count,
            p.checksum,
            p.first[0],
            p.first[1],
            p.first[2],
            p.first[3]
        );
    }
    Ok(())
}
