//! Placeholder.
/// Placeholder.
#[derive(Debug)]
pub struct Iotlb;
/// Placeholder.
#[derive(Debug)]
pub struct IotlbConfig;
/// Placeholder.
#[derive(Debug)]
pub struct IotlbStats;
