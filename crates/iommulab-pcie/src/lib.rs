//! PCI Express models for sharing one SR-IOV device among several hosts (S4.1–S4.4).
//!
//! | module | what it is | seed |
//! |---|---|---|
//! | [`tlp`] | transaction-layer packets, bit-exact encode/decode | S4.2 |
//! | [`config`] | configuration space: type 0/1 headers, capability lists, write masks | S4.1 |
//! | [`sriov`] | the SR-IOV extended capability: VF routing ids and VF BARs | S4.1 |
//! | [`function`] | a physical function and its virtual functions | S4.1 |
//! | [`bridge`] | ExpEther: TLPs in Ethernet frames, VLAN groups, keep-alive hot-plug, lossless transport; multi-root sharing of VFs | S4.2, S4.3 |
//! | [`timing`] | the discrete-event model of a 10 GbE SR-IOV NIC behind the bridges | S4.4 |
//!
//! The host side of a DMA is the hardware layer's [`iommulab_hw::RemapUnit`]: each host
//! keeps its own IOMMU model, and a VF's DMA goes through its host's (S4.3).

#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations)]

pub mod bridge;
pub mod config;
pub mod function;
pub mod sriov;
pub mod timing;
pub mod tlp;

#[cfg(test)]
mod sriov_tests;
