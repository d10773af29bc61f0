//! The ExpEther bridge (S4.2) and multi-root sharing of an SR-IOV device through it (S4.3).
//!
//! | file | what it is | seed |
//! |---|---|---|
//! | [`frame`] | TLPs in 802.1Q-tagged Ethernet frames, with FCS | S4.2 |
//! | [`switch`] | the VLAN-aware Ethernet: a host's bridge only hears its group | S4.2 |
//! | [`transport`] | lossless delivery: go-back-N with a congestion window | S4.2 |
//! | [`keepalive`] | hot-plug and hot-remove from keep-alive frames | S4.2 |
//! | [`host_side`] | the virtual PCIe switch a host sees | S4.2 |
//! | [`mrshare`] | virtual endpoints, address translation, VF DMA through the host's IOMMU | S4.3 |

// Frame and register packing: each narrowing cast keeps a field's low bits on purpose.
#![allow(clippy::cast_possible_truncation)]

pub mod frame;
pub mod host_side;
pub mod keepalive;
pub mod mrshare;
pub mod switch;
pub mod transport;

#[cfg(test)]
mod tests;
