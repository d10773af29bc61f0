//! Hardware models behind one seam, [`RemapUnit`] ([`unit`](mod@unit)): what the DMA API, the flush
//! policies and a hypervisor's host need from any I/O remapping unit, with the unit's
//! invalidation capabilities as data ([`InvalidationCaps`]).
//!
//! | file | what it is | shared by |
//! |---|---|---|
//! | [`unit`](mod@unit) | the `RemapUnit` trait and `InvalidationCaps` | every unit |
//! | [`vtd`] | the Intel VT-d unit: root/context tables, second-level page tables, context cache | — |
//! | [`tce`] | the TCE units, Calgary and DART: one flat table per bus, bit-exact entries (S2.1–S2.3) | — |
//! | [`iotlb`] | set-associative, domain-tagged, LRU IOTLB | every unit |
//! | [`host_iommu`] | `HostIommu`: the hypervisor side's owner of a unit (domains, PTEs, invalidation, translation) | the KVM, Xen and ExpEther hosts |
//! | [`invalidate`] | invalidation requests (global/domain/page+mask), register vs queued | every unit |
//! | [`fault`] | `Fault`, `FaultReason` and the bounded fault log | every unit |
//! | [`memory`] | simulated physical memory holding translation tables | every unit |
//! | [`error`] | `MapError` | every unit |
//! | [`stats`] | `IommuStats` | every unit |
//! | [`cost`] | `CostModel` and its presets (cycles are `iommulab_base::clock::Cycles`) | everything |
//!
//! A [`Fault`] is an outcome, not an error: a device access that the tables deny
//! is recorded in the fault log and counted, as VT-d's primary fault logging does. A
//! [`MapError`] is a caller bug (overlap, not mapped, misaligned).

#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations)]

// The layers below are named by their crate paths (`iommulab_base::addr::Iova`), never aliased as
// local modules: a crate names only what its manifest lists, so the compiler enforces the layering
// (docs/architecture.md).

pub mod cost;
pub mod cpu_cache;
pub mod error;
pub mod fault;
pub mod host_iommu;
pub mod invalidate;
pub mod iotlb;
pub mod memory;
pub mod stats;
pub mod tce;
pub mod unit;
pub mod vtd;

pub use cost::{CostModel, CostPreset};
pub use cpu_cache::{CpuCache, CpuCacheConfig, CpuCacheStats};
pub use error::MapError;
pub use fault::{Fault, FaultReason};
pub use host_iommu::{HostIommu, HostIommuStats};
pub use invalidate::{InvRequest, InvalidationInterface};
pub use iotlb::{Iotlb, IotlbConfig, IotlbStats};
pub use stats::IommuStats;
pub use tce::{Calgary, Dart, TceConfig, TcePrices};
pub use unit::{InvalidationCaps, RemapUnit};
pub use vtd::{Vtd, VtdConfig};
