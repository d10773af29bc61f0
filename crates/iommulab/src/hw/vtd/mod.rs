//! Placeholder.
/// Placeholder.
#[derive(Debug)]
pub struct Fault;
/// Placeholder.
#[derive(Debug)]
pub enum FaultReason {}
/// Placeholder.
#[derive(Debug)]
pub struct Iommu;
/// Placeholder.
#[derive(Debug)]
pub struct IommuConfig;
/// Placeholder.
#[derive(Debug)]
pub struct IommuStats;
/// Placeholder.
#[derive(Debug)]
pub enum MapError {}
