//! Placeholder, replaced by the real allocator.
/// Placeholder.
#[derive(Debug)]
pub struct Magazine<A>(pub A);
/// Placeholder.
#[derive(Debug)]
pub struct MagazineConfig;
