//! Placeholder, replaced by the real allocator.
/// Placeholder.
#[derive(Debug)]
pub struct Bitmap;
