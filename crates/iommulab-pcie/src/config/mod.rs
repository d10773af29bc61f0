//! Configuration space: 4 KiB per function, with a write mask per bit so a write never
//! changes a read-only field (PCI Express Base Specification 2.1 §7; S4.1: the PF, each VF
//! and each virtual endpoint of S4.3 has its own).
//!
//! | file | what it is |
//! |---|---|
//! | [`space`] | the bytes, the RW and RW1C masks, host writes with byte enables |
//! | [`header`] | type 0 (endpoint) and type 1 (bridge) headers, BARs |
//! | [`capability`] | the capability list (0x34) and the extended capability list (0x100) |
//! | [`pcie_cap`] | the PCI Express capability: max payload and max read request sizes |

// Bit-exact field packing: each narrowing cast keeps a field's low bits on purpose, and
// every value is range-checked before it is packed.
#![allow(clippy::cast_possible_truncation)]

pub mod capability;
pub mod header;
pub mod pcie_cap;
pub mod space;

#[cfg(test)]
mod tests;

pub use capability::{CapabilityId, ExtCapabilityId};
pub use header::{Bar, BarKind, Ids};
pub use pcie_cap::PortType;
pub use space::ConfigSpace;

/// Why a configuration space cannot be built or walked.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// A capability pointer points outside the capability area or is not DW-aligned.
    #[error(
        "capability pointer at offset {at:#x} is {points_to:#x}, expected a DW-aligned offset in {expected}"
    )]
    BadPointer {
        /// Offset of the pointer.
        at: u16,
        /// Its value.
        points_to: u16,
        /// The range it must fall in.
        expected: &'static str,
    },
    /// The capability list revisits an entry.
    #[error("capability list loops back to offset {offset:#x}")]
    Loop {
        /// The offset seen twice.
        offset: u16,
    },
    /// No room left for a capability.
    #[error("no room for a {len}-byte capability: {area} ends at {end:#x}")]
    NoRoom {
        /// Bytes asked for.
        len: u16,
        /// Which area.
        area: &'static str,
        /// Its end.
        end: u16,
    },
    /// A BAR that cannot exist.
    #[error("BAR {index}: {why}")]
    Bar {
        /// BAR index.
        index: usize,
        /// What is wrong.
        why: &'static str,
    },
    /// A register access outside the 4 KiB space or not naturally aligned.
    #[error(
        "configuration access at {offset:#x} of {len} bytes is outside the 4 KiB space or unaligned"
    )]
    Access {
        /// Offset.
        offset: u16,
        /// Width.
        len: u16,
    },
}
