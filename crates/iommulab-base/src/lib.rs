//! The base layer of iommulab: what every other layer speaks.
//!
//! | module | what it holds |
//! |---|---|
//! | [`addr`] | `Iova`, `Hpa`, `Gpa`, `Pfn<A>`, `PageSize`, `DmaDirection`, `Perm`, `Bdf` |
//! | [`clock`] | the modeled clock: `Cycles`, the CPU's `ClockRate` and their conversions |
//! | [`dma_debug`] | the rules of Linux's dma-debug, shared by the live checker and the trace checker |
//! | [`hash`] | the fast hasher of the hot integer-keyed tables |
//! | [`temp`] | temporary files in flight, removed when a signal stops the process |
//!
//! It depends on no other iommulab crate (docs/architecture.md, "Crates").
#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations)]

pub mod addr;
pub mod clock;
pub mod dma_debug;
pub mod hash;
pub mod output;
pub mod temp;
