//! # iommulab
//!
//! A software model of IOMMU hardware (Intel VT-d page tables, IOTLB, invalidation; the
//! Calgary and DART TCE units; a PCIe/SR-IOV bridge) and of the OS and hypervisor software
//! that drives it (the DMA API, IOVA allocators, IOTLB flush policies, guest map caches, Xen
//! PV DMA), with a modeled cycle clock and a measured wall clock.
//!
//! ```text
//!  workload ──► DMA operations ──► DmaApi ──────────────────► IOMMU model ──► statistics
//!  (generator     map/unmap/access   IOVA allocator            tables, IOTLB,   counters,
//!   or trace)                        + flush policy            invalidation,    modeled cycles,
//!                                    + dma-debug checker       fault log        wall time
//! ```
//!
//! | module | what it holds |
//! |---|---|
//! | [`addr`] | `Iova`, `Hpa`, `Gpa`, `Pfn<A>`, `PageSize`, `DmaDirection`, `Perm`, `Bdf` |
//! | [`clock`] | the modeled clock: `Cycles`, the CPU's `ClockRate` and their conversions |
//! | [`hash`] | the fast hasher of the hot integer-keyed tables |
//! | [`hw`] | the `RemapUnit` seam; VT-d tables, IOTLB, invalidation, fault log; Calgary and DART TCE units; [`hw::cost`] presets |
//! | [`iova`] | rbtree, bitmap and magazine IOVA allocators |
//! | [`flush`] | strict, deferred, per-lap and flush-queue IOTLB flush policies |
//! | [`dma`] | the DMA API (`map_single`, `map_sg`, ...) and the dma-debug checker |
//! | [`device`] | devices that issue DMA and the stale-access oracle |
//! | [`driver`] | the one driver: runs a workload through a `DmaApi`, a hooks type per system (bare metal, guest, Xen PV) |
//! | [`trace`] | DMA traces: event model, native format, CSV, Linux ftrace import, stats |
//! | [`workload`] | built-in generators of DMA operations, and trace replay ([`workload::TraceWorkload`]) |
//! | [`pcie`] | TLPs, configuration space, SR-IOV, the ExpEther bridge, multi-root sharing and its timing model (S4.1–S4.4) |
//! | [`virt`] | guests: the hypercall map backend, the host, the guest map cache and its eviction policies (S1.2–S1.5); Xen PV DMA and page types (S2.6, S3.x) |
//! | [`mrc`] | hit-rate (miss-ratio) curves over every quota of a trace, page sequence or pinned map cache; one pass for LRU and OPT (S1.9) |
//! | [`experiment`] | configs, the one place enums become types, the runner, results, trace recording; [`Progress`], the one progress report of runs, series and reproductions |
//! | [`validate`] | `iommulab validate`: the Linux 6.x IOVA allocator model against a real kernel's trace, allocation by allocation |
//!
//! The modules are layered, each layer its own crate (base → hw → os → virt; base → trace →
//! workload → os (the driver's input) and virt; this façade, [`experiment`] and [`Error`], on top; the reproductions, crate `iommulab-repro`, above it), so the
//! compiler refuses a lower layer that reaches up; docs/architecture.md has the map and
//! `tests/layering.rs` checks the manifests.
//!
//! Cargo features: `test-utils` exports the naive oracles in `testing`. Its rustdoc links are
//! checked by `make doc-check` (part of `make test`); `tests/docs_paths.rs` checks the paths docs/architecture.md names.
#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations)]

pub mod error;
pub mod experiment;
pub mod validate;

// The layers, re-exported under the module names the whole code base and its users know.
pub use iommulab_base::{addr, clock, hash, output, temp};
pub use iommulab_hw as hw;
pub use iommulab_os::{device, dma, driver, flush, iova};
pub use iommulab_pcie as pcie;
pub use iommulab_trace as trace;
pub use iommulab_virt as virt;
pub use iommulab_virt::{mrc, with_eviction, with_strategy};
pub use iommulab_workload as workload;

pub use error::{Error, Result};
/// The one progress report and callback of runs, series and reproductions.
pub use experiment::progress::{Progress, ProgressFn, ProgressUnit, SharedProgressFn, no_progress};

#[cfg(any(test, feature = "test-utils"))]
pub mod testing;

/// Creates a trace file for writing, the format chosen by the name: the trace crate's formats
/// (`.iot`, `.csv`; [`trace::create_trace`]) and the libCacheSim export (`.oracleGeneral`,
/// `.oracleGeneral.csv`; [`workload::oracle_general`], which replays the trace to find each
/// map's pages), each optionally `.gz`. Nothing appears at `path` until the sink's `finish`.
pub fn create_trace(
    path: &std::path::Path,
    header: &trace::TraceHeader,
) -> std::result::Result<Box<dyn trace::EventSink>, trace::TraceError> {
    if workload::oracle_general::format_of(path).is_some() {
        workload::oracle_general::create(path, header)
    } else {
        trace::create_trace(path, header)
    }
}
