//! IOVA allocators (S0.5): who hands out I/O virtual page ranges.
//!
//! - [`rbtree::RbTree`]: Linux VT-d's red-black tree of used ranges, top-down next-fit from a
//!   cached node, one node per live range (nodes come from a recycled pool).
//! - [`bitmap::Bitmap`]: one bit per I/O page, next-fit upward from the last allocation,
//!   wrapping to the bottom; every wrap is counted (the per-lap flush hangs off it, S0.6).
//! - [`magazine::Magazine`]: Linux's per-CPU range caches ("rcache", since 4.7) over any
//!   allocator.
//! - [`domain::IovaDomain`]: one domain's space as Linux 6.x's dma-iommu sets it up
//!   (reserved windows, aperture) and allocates from it (below 4 GiB first for PCI).
//!
//! All ranges are page ranges `[pfn, pfn + pages)`; exhaustion is an error value.

pub mod bitmap;
pub mod domain;
pub mod gap_tree;
pub mod line_log;
pub mod magazine;
pub mod none;
pub mod rbtree;
pub mod rbtree_2626;
pub mod shared;

use serde::{Deserialize, Serialize};

use iommulab_base::addr::{CpuId, Iova, Pfn};
use iommulab_base::clock::{ClockRate, Cycles};

pub use bitmap::Bitmap;
pub use domain::{ByteRange, DeviceIova, DomainConfig, DomainError, IovaDomain};
pub use gap_tree::GapTree;
pub use line_log::LineLog;
pub use magazine::{
    CacheSite, CacheSnapshot, MagSlot, Magazine, MagazineConfig, MagazineConfigError, MoveError,
};
pub use none::NoIova;
pub use rbtree::{RbTree, SpaceError};
pub use rbtree_2626::RbTree2626;
pub use shared::{Locked, SharedMagazine};

/// Errors of an IOVA allocator.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IovaError {
    /// A free of a range that is not allocated exactly as given.
    #[error("free of {pages} page(s) at pfn {pfn:#x}, which is not an allocated range")]
    NotAllocated {
        /// First page of the range.
        pfn: u64,
        /// Length in pages.
        pages: u64,
    },
    /// No free range of the requested size below the limit.
    #[error("IOVA space exhausted: no free range of {pages} page(s) below pfn {limit:#x}")]
    Exhausted {
        /// Requested length in pages.
        pages: u64,
        /// Exclusive upper page limit of the request.
        limit: u64,
    },
    /// A range that cannot be placed or cached where asked: it overlaps a live or reserved
    /// range, leaves the space, or is not cached where named.
    #[error("{pages} page(s) at pfn {pfn:#x} are not free where asked")]
    NotFree {
        /// First page of the range.
        pfn: u64,
        /// Length in pages.
        pages: u64,
    },
    /// A range handed back for a domain that has no allocator (a caller's bug).
    #[error("no IOVA allocator for domain {domain}")]
    NoSuchDomain {
        /// The domain id.
        domain: u16,
    },
    /// A request for zero pages, or one that overflows the space.
    #[error("invalid IOVA request of {pages} page(s) (the space holds {space} pages)")]
    BadRequest {
        /// Requested length in pages.
        pages: u64,
        /// Pages in the space.
        space: u64,
    },
}

/// Counters every allocator keeps. Counters are plain `u64`s in a single-threaded run (L13).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IovaStats {
    /// Successful allocations.
    pub allocs: u64,
    /// Frees.
    pub frees: u64,
    /// Failed allocations (exhaustion).
    pub failures: u64,
    /// Times a next-fit allocator wrapped from the top back to the bottom of the space.
    pub wraps: u64,
    /// Metadata nodes taken from the system allocator (the rbtree's pool grows by this;
    /// recycled nodes do not count).
    pub node_allocs: u64,
    /// IOVA nodes a kernel would take from its slab cache: one per tree insert (rbtree).
    /// Recycled or not, Linux calls `alloc_iova_mem` for each; the modeled software clock
    /// charges `slab_alloc` for each.
    pub slab_allocs: u64,
    /// IOVA nodes a kernel would return to its slab cache: one per tree erase (rbtree).
    pub slab_frees: u64,
    /// Tree nodes visited during searches (rbtree), for the modeled software clock.
    pub tree_visits: u64,
    /// Rotations and recolourings (rbtree).
    pub tree_rebalances: u64,
    /// 64-bit bitmap words scanned (bitmap).
    pub bitmap_words: u64,
    /// Allocations served from a per-CPU magazine or the depot (magazine).
    pub cache_hits: u64,
    /// Allocations that fell through to the backing allocator (magazine).
    pub cache_misses: u64,
    /// Magazine pushes and pops (magazine).
    pub magazine_ops: u64,
    /// Lock acquisitions a kernel would make on this path (the global lock for rbtree and
    /// bitmap; per-CPU and depot locks for magazines).
    pub lock_acquisitions: u64,
    /// Of `lock_acquisitions`, the per-CPU locks (magazine): never contended, so the
    /// many-core model charges them to the CPU alone. Not serialised: a run's counters on
    /// disk stay as they were.
    #[serde(skip)]
    pub cpu_locks: u64,
    /// Of `lock_acquisitions`, the depot locks (magazine, one per size class shared by every
    /// CPU, `iova_rcache->lock`); the rest are the tree's (`iova_rbtree_lock`). Not serialised.
    #[serde(skip)]
    pub depot_locks: u64,
    /// Peak bytes of allocator metadata over the run.
    pub peak_metadata_bytes: u64,
}

impl IovaStats {
    /// Adds `other` into `self` (sweeps aggregate runs); the peak is the max of both.
    pub fn merge(&mut self, other: &Self) {
        self.allocs += other.allocs;
        self.frees += other.frees;
        self.failures += other.failures;
        self.wraps += other.wraps;
        self.node_allocs += other.node_allocs;
        self.slab_allocs += other.slab_allocs;
        self.slab_frees += other.slab_frees;
        self.tree_visits += other.tree_visits;
        self.tree_rebalances += other.tree_rebalances;
        self.bitmap_words += other.bitmap_words;
        self.cache_hits += other.cache_hits;
        self.cache_misses += other.cache_misses;
        self.magazine_ops += other.magazine_ops;
        self.lock_acquisitions += other.lock_acquisitions;
        self.cpu_locks += other.cpu_locks;
        self.depot_locks += other.depot_locks;
        self.peak_metadata_bytes = self.peak_metadata_bytes.max(other.peak_metadata_bytes);
    }
}

/// Hands out and takes back ranges of I/O virtual pages.
///
/// Invariants every implementation keeps (tested generically in `tests/iova_props.rs`):
/// - two live allocations never overlap, and every allocation lies in `[start, limit)`;
/// - a freed range can be allocated again (space is returned);
/// - a free of anything but a live allocation, with its exact length, is an error and changes
///   nothing (magazines check what they can: see their module doc);
/// - exhaustion is `Err(IovaError::Exhausted)`, never a panic.
pub trait IovaAllocator: Clone {
    /// Allocates `pages` contiguous pages that end at or below `limit` (exclusive), on
    /// behalf of CPU `cpu` (only per-CPU caches care).
    fn alloc(&mut self, cpu: CpuId, pages: u64, limit: Pfn<Iova>) -> Result<Pfn<Iova>, IovaError>;

    /// `alloc` with Linux's `flush_rcache` flag (`alloc_iova_fast`): allocators with
    /// caches leave them alone on exhaustion when it is `false` (dma-iommu's first,
    /// below-4 GiB attempt). Others ignore it.
    fn alloc_fast(
        &mut self,
        cpu: CpuId,
        pages: u64,
        limit: Pfn<Iova>,
        flush_rcache: bool,
    ) -> Result<Pfn<Iova>, IovaError> {
        let _ = flush_rcache;
        self.alloc(cpu, pages, limit)
    }

    /// Returns `[pfn, pfn + pages)`, which must be a live allocation of exactly that size.
    fn free(&mut self, cpu: CpuId, pfn: Pfn<Iova>, pages: u64) -> Result<(), IovaError>;

    /// Lets time-driven housekeeping run (the magazine depot is trimmed every 100 ms of
    /// simulated time, turned into cycles at `clock`).
    fn on_tick(&mut self, now: Cycles, clock: ClockRate);

    /// The counters so far (by value: an allocator may keep some of them apart on its hot
    /// path and add them up here).
    fn stats(&self) -> IovaStats;

    /// Bytes of metadata the allocator holds now (peak is in the stats).
    fn metadata_bytes(&self) -> u64;

    /// The exclusive top of the space, in pages (the largest `limit` worth asking for).
    fn space_end(&self) -> Pfn<Iova>;

    /// A short name for tables and JSON (`rbtree`, `bitmap`, `magazine+rbtree`, ...).
    fn name(&self) -> &'static str;

    /// The driver unmapped `[pfn, pfn + pages)`: the allocator's work at unmap time, before
    /// the flush policy decides when to free it. Linux 2.6.26 looks the range up here
    /// (`find_iova` in `intel_unmap_single`); today's kernels and the bitmap do nothing.
    fn lookup_on_unmap(&mut self, cpu: CpuId, pfn: Pfn<Iova>, pages: u64) {
        let _ = (cpu, pfn, pages);
    }

    /// The allocator's log of the metadata lines it touches, if it has a line model (for
    /// the CPU cache model); `None` keeps the flat per-visit and per-word prices.
    fn line_log(&self) -> Option<&LineLog> {
        None
    }

    /// [`IovaAllocator::line_log`], mutably.
    fn line_log_mut(&mut self) -> Option<&mut LineLog> {
        None
    }

    /// Whether the allocator logs its metadata lines (so a CPU cache model can price them).
    fn logs_lines(&self) -> bool {
        self.line_log().is_some_and(LineLog::is_on)
    }

    /// Start or stop logging the cache lines the allocator's metadata accesses touch;
    /// allocators without a line model ignore it.
    fn log_touched_lines(&mut self, on: bool) {
        if let Some(l) = self.line_log_mut() {
            l.set(on);
        }
    }

    /// The lines touched since the last [`IovaAllocator::clear_touched_lines`], in the
    /// allocator's own numbering (a tree node's slot, a bitmap word's 64-byte line).
    fn touched_lines(&self) -> &[u64] {
        self.line_log().map_or(&[], LineLog::lines)
    }

    /// Empties the touched-line log.
    fn clear_touched_lines(&mut self) {
        if let Some(l) = self.line_log_mut() {
            l.clear();
        }
    }
}

/// An allocator that can say what it would hand out without doing it, and be told to take a
/// given range: the operations a replay that re-synchronises with a real kernel needs
/// (`iommulab validate`), and `reserve_iova` for the windows a domain never hands out.
/// Cloning is the snapshot: a clone is an independent copy of the whole state.
pub trait RangeControl: IovaAllocator + Clone {
    /// What `alloc(_, pages, limit)` would return, changing nothing (counters included);
    /// `None` where it would fail.
    fn peek_alloc(&self, pages: u64, limit: Pfn<Iova>) -> Option<Pfn<Iova>>;
    /// Allocates exactly `[pfn, pfn + pages)`, which must be free and inside the space
    /// ([`IovaError::NotFree`] otherwise).
    fn place(&mut self, pfn: Pfn<Iova>, pages: u64) -> Result<(), IovaError>;
    /// Marks `[pfn, pfn + pages)` as never to be handed out (`reserve_iova`).
    fn reserve(&mut self, pfn: Pfn<Iova>, pages: u64) -> Result<(), IovaError>;
    /// A live or reserved range overlapping `[pfn, pfn + pages)`, if any.
    fn overlapping(&self, pfn: Pfn<Iova>, pages: u64) -> Option<(Pfn<Iova>, u64)>;
}

impl RangeControl for RbTree {
    fn peek_alloc(&self, pages: u64, limit: Pfn<Iova>) -> Option<Pfn<Iova>> {
        RbTree::peek_alloc(self, pages, limit)
    }
    fn place(&mut self, pfn: Pfn<Iova>, pages: u64) -> Result<(), IovaError> {
        RbTree::place(self, pfn, pages)
    }
    fn reserve(&mut self, pfn: Pfn<Iova>, pages: u64) -> Result<(), IovaError> {
        RbTree::reserve(self, pfn, pages)
    }
    fn overlapping(&self, pfn: Pfn<Iova>, pages: u64) -> Option<(Pfn<Iova>, u64)> {
        RbTree::overlapping(self, pfn, pages)
    }
}

impl RangeControl for Bitmap {
    fn peek_alloc(&self, pages: u64, limit: Pfn<Iova>) -> Option<Pfn<Iova>> {
        let mut copy = self.clone();
        copy.alloc(CpuId::new(0), pages, limit).ok()
    }
    fn place(&mut self, pfn: Pfn<Iova>, pages: u64) -> Result<(), IovaError> {
        Bitmap::reserve_range(self, pfn, pages, true)
    }
    fn reserve(&mut self, pfn: Pfn<Iova>, pages: u64) -> Result<(), IovaError> {
        Bitmap::reserve_range(self, pfn, pages, false)
    }
    fn overlapping(&self, pfn: Pfn<Iova>, pages: u64) -> Option<(Pfn<Iova>, u64)> {
        Bitmap::first_used(self, pfn, pages).map(|p| (p, 1))
    }
}

/// Which allocator a configuration asks for (the configuration boundary).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AllocatorKind {
    /// [`RbTree`].
    Rbtree,
    /// [`Bitmap`].
    Bitmap,
    /// [`Magazine`] over [`RbTree`], as Linux since 4.7.
    Magazine,
    /// [`GapTree`]: the rbtree walk's choices in `O(log space)` (what a kernel could ship).
    #[serde(rename = "gap-tree")]
    GapTree,
}

impl AllocatorKind {
    /// Config/CLI name.
    pub const fn name(self) -> &'static str {
        match self {
            AllocatorKind::Rbtree => "rbtree",
            AllocatorKind::Bitmap => "bitmap",
            AllocatorKind::Magazine => "magazine",
            AllocatorKind::GapTree => "gap-tree",
        }
    }
}
