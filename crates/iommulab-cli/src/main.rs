//! The `iommulab` command-line tool.
fn main() {}
