//! Naive oracles and fixtures (feature `test-utils`), reused by tests and benches.

pub mod flat_unit;
pub mod naive;
pub mod naive_cache;
pub mod naive_iova;
pub mod ops;
