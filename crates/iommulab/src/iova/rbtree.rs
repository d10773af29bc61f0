//! Placeholder, replaced by the real allocator.
/// Placeholder.
#[derive(Debug)]
pub struct RbTree;
