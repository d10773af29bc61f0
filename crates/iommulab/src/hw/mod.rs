//! Hardware models: the VT-d remapping unit (root/context tables, second-level page tables,
//! IOTLB, context cache, invalidation interfaces, fault recording) and the cost model.
//!
//! A [`Fault`] is an outcome, not an error (style L3): a device access that the tables deny
//! is recorded in the fault log and counted, as VT-d's primary fault logging does. A
//! [`MapError`] is a caller bug (overlap, not mapped, misaligned).

pub mod cost;
pub mod invalidate;
pub mod iotlb;
pub mod vtd;

pub use cost::{CostModel, CostPreset};
pub use invalidate::{InvRequest, InvalidationInterface};
pub use iotlb::{Iotlb, IotlbConfig, IotlbStats};
pub use vtd::{Fault, FaultReason, Iommu, IommuConfig, IommuStats, MapError};
