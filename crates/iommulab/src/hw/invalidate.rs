//! Placeholder.
/// Placeholder.
#[derive(Debug)]
pub enum InvRequest {}
/// Placeholder.
#[derive(Debug)]
pub enum InvalidationInterface {}
