//! The OS side of iommulab: what a kernel runs to drive a remapping unit.
//!
//! | module | what it holds |
//! |---|---|
//! | [`iova`] | rbtree, bitmap and magazine IOVA allocators (pure software: they use only the base layer) |
//! | [`flush`] | strict, deferred, per-lap and flush-queue IOTLB flush policies |
//! | [`dma`] | the DMA API (`map_single`, `map_sg`, ...), its map backends (native; the hypercall one is in the virtualization crate) and the dma-debug checker |
//! | [`device`] | devices that issue DMA and the one stale-access oracle |
//! | [`driver`] | the one driver: a workload's ops through a DMA API, a hooks type per system |
//!
//! It depends on the base and hardware crates, and on the workload crate for the driver's
//! input.
#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations)]

// The layers below are named by their crate paths (`iommulab_base::addr::Iova`), never aliased as
// local modules: a crate names only what its manifest lists, so the compiler enforces the layering
// (docs/architecture.md).

pub mod device;
pub mod dma;
pub mod driver;
pub mod flush;
pub mod iova;
