//! The type 0 (endpoint) and type 1 (PCI-to-PCI bridge) headers, offsets 0x00-0x3f, with
//! each field's attribute from §7.5 and BARs sized by their read-only low bits.
//!
//! ```text
//!  0x00 Vendor ID (RO)      0x02 Device ID (RO)
//!  0x04 Command (RW bits)   0x06 Status (RO, RW1C error bits)
//!  0x08 Revision, Class (RO)            0x0e Header Type (RO): 0 endpoint, 1 bridge
//!  type 0: 0x10-0x24 BAR0-5, 0x2c Subsystem ids, 0x34 Capabilities Pointer, 0x3c Int Line/Pin
//!  type 1: 0x10-0x14 BAR0-1, 0x18 Primary/Secondary/Subordinate bus (RW),
//!          0x20 Memory Base/Limit (RW [15:4]), 0x24 Prefetchable Base/Limit, 0x3e Bridge Control
//! ```
//!
//! A BAR is sized by writing all ones and reading back: the bits below its size are read-only
//! zero, so what comes back is `!(size - 1) | type bits`.

use serde::{Deserialize, Serialize};

use crate::config::{ConfigError, ConfigSpace};

/// Command register bits software may set: I/O space, memory space, bus master, parity error
/// response, SERR# enable, interrupt disable.
pub const COMMAND_RW: u16 = 0x0547;
/// Command: memory space enable.
pub const COMMAND_MEMORY: u16 = 1 << 1;
/// Command: bus master enable (the function may issue DMA).
pub const COMMAND_BUS_MASTER: u16 = 1 << 2;
/// Status register error bits that are RW1C.
pub const STATUS_RW1C: u16 = 0xf900;
/// Status: capabilities list present.
pub const STATUS_CAP_LIST: u16 = 1 << 4;

/// Identification of a function.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ids {
    /// Vendor ID.
    pub vendor: u16,
    /// Device ID.
    pub device: u16,
    /// Revision ID.
    pub revision: u8,
    /// Class code (base class, subclass, programming interface), 24 bits.
    pub class: u32,
    /// Subsystem vendor ID (type 0 only).
    pub subsystem_vendor: u16,
    /// Subsystem ID (type 0 only).
    pub subsystem: u16,
}

/// What a BAR decodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BarKind {
    /// 32-bit memory BAR.
    Mem32,
    /// 64-bit memory BAR (uses this and the next BAR register).
    Mem64,
}

/// A memory BAR: its kind, size and whether it is prefetchable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bar {
    /// 32 or 64 bits.
    pub kind: BarKind,
    /// Bytes decoded: a power of two, at least 16.
    pub size: u64,
    /// Prefetchable.
    pub prefetchable: bool,
}

impl Bar {
    /// The type bits (3:0) of the low BAR register.
    pub const fn type_bits(&self) -> u32 {
        let t = match self.kind {
            BarKind::Mem32 => 0b000,
            BarKind::Mem64 => 0b100,
        };
        t | if self.prefetchable { 0b1000 } else { 0 }
    }

    /// Checks size and placement; `index` is the BAR register number, `regs` how many exist.
    pub fn validate(&self, index: usize, regs: usize) -> Result<(), ConfigError> {
        if !self.size.is_power_of_two() || self.size < 16 {
            return Err(ConfigError::Bar {
                index,
                why: "size must be a power of two of at least 16 bytes",
            });
        }
        let need = if self.kind == BarKind::Mem64 { 2 } else { 1 };
        if index + need > regs {
            return Err(ConfigError::Bar {
                index,
                why: "a 64-bit BAR needs this register and the next",
            });
        }
        if self.kind == BarKind::Mem32 && self.size > 1 << 31 {
            return Err(ConfigError::Bar {
                index,
                why: "a 32-bit BAR decodes at most 2 GiB",
            });
        }
        Ok(())
    }

    /// Installs the BAR's masks and type bits at register offset `at` (the first of one or
    /// two DWs): address bits at and above the size are RW, the rest RO.
    pub fn install(&self, cfg: &mut ConfigSpace, at: u16) -> Result<(), ConfigError> {
        let addr_mask = !(self.size - 1);
        cfg.set(at, 4, self.type_bits())?;
        cfg.set_masks(at, 4, (addr_mask as u32) & !0xf, 0)?;
        if self.kind == BarKind::Mem64 {
            cfg.set(at + 4, 4, 0)?;
            cfg.set_masks(at + 4, 4, (addr_mask >> 32) as u32, 0)?;
        }
        Ok(())
    }

    /// The address programmed in the BAR at offset `at` (type bits removed).
    pub fn address(&self, cfg: &ConfigSpace, at: u16) -> u64 {
        let lo = u64::from(cfg.read32(at) & !0xf);
        match self.kind {
            BarKind::Mem32 => lo,
            BarKind::Mem64 => lo | (u64::from(cfg.read32(at + 4)) << 32),
        }
    }
}

/// Offset of BAR register `i`.
pub const fn bar_offset(i: usize) -> u16 {
    0x10 + 4 * i as u16
}

fn common(cfg: &mut ConfigSpace, ids: &Ids, header_type: u8) -> Result<(), ConfigError> {
    cfg.set(0x00, 2, u32::from(ids.vendor))?;
    cfg.set(0x02, 2, u32::from(ids.device))?;
    cfg.set_masks(0x04, 2, u32::from(COMMAND_RW), 0)?;
    cfg.set_masks(0x06, 2, 0, u32::from(STATUS_RW1C))?;
    cfg.set(0x08, 1, u32::from(ids.revision))?;
    cfg.set(0x09, 1, ids.class & 0xff)?;
    cfg.set(0x0a, 2, (ids.class >> 8) & 0xffff)?;
    // Cache Line Size is RW; Latency Timer is RO 0 on PCI Express.
    cfg.set_masks(0x0c, 1, 0xff, 0)?;
    cfg.set(0x0e, 1, u32::from(header_type))?;
    // Interrupt Line is RW (software's note of the routing); Interrupt Pin RO.
    cfg.set_masks(0x3c, 1, 0xff, 0)?;
    Ok(())
}

/// A type 0 header with `bars` (`bars[i]` at BAR register `i`; a 64-bit BAR takes `i + 1` too)
/// and interrupt pin `pin` (0 none, 1 INTA# ...).
pub fn type0(ids: &Ids, bars: &[(usize, Bar)], pin: u8) -> Result<ConfigSpace, ConfigError> {
    let mut cfg = ConfigSpace::zeroed();
    common(&mut cfg, ids, 0x00)?;
    let mut used = [false; 6];
    for &(i, bar) in bars {
        bar.validate(i, 6)?;
        let n = if bar.kind == BarKind::Mem64 { 2 } else { 1 };
        if used[i..i + n].iter().any(|u| *u) {
            return Err(ConfigError::Bar {
                index: i,
                why: "overlaps another BAR",
            });
        }
        used[i..i + n].fill(true);
        bar.install(&mut cfg, bar_offset(i))?;
    }
    cfg.set(0x2c, 2, u32::from(ids.subsystem_vendor))?;
    cfg.set(0x2e, 2, u32::from(ids.subsystem))?;
    cfg.set(0x3d, 1, u32::from(pin))?;
    Ok(cfg)
}

/// A type 1 header (a bridge or switch port) with no BARs and no I/O window: bus numbers,
/// the memory window and the prefetchable window (64-bit) are RW.
pub fn type1(ids: &Ids) -> Result<ConfigSpace, ConfigError> {
    let mut cfg = ConfigSpace::zeroed();
    common(&mut cfg, ids, 0x01)?;
    // Primary, secondary, subordinate bus numbers.
    cfg.set_masks(0x18, 4, 0x00ff_ffff, 0)?;
    // Secondary Status error bits.
    cfg.set_masks(0x1e, 2, 0, u32::from(STATUS_RW1C))?;
    // Memory Base and Limit: bits 15:4 are address bits 31:20.
    cfg.set_masks(0x20, 4, 0xfff0_fff0, 0)?;
    // Prefetchable Base and Limit, with 1 in bits 3:0 (64-bit decode) and the upper halves.
    cfg.set(0x24, 4, 0x0001_0001)?;
    cfg.set_masks(0x24, 4, 0xfff0_fff0, 0)?;
    cfg.set_masks(0x28, 4, 0xffff_ffff, 0)?;
    cfg.set_masks(0x2c, 4, 0xffff_ffff, 0)?;
    // Bridge Control: parity, SERR#, ISA, VGA, VGA 16, master abort mode, secondary reset.
    cfg.set_masks(0x3e, 2, 0x007f, 0)?;
    Ok(cfg)
}

/// A type 1 header's secondary and subordinate bus numbers.
pub fn bus_range(cfg: &ConfigSpace) -> (u8, u8) {
    (cfg.read8(0x19), cfg.read8(0x1a))
}

/// A type 1 header's memory window `[base, limit]` (inclusive, 1 MiB granules), or `None` when
/// the limit is below the base (the window is closed).
pub fn memory_window(cfg: &ConfigSpace) -> Option<(u64, u64)> {
    let base = u64::from(cfg.read16(0x20) & 0xfff0) << 16;
    let limit = (u64::from(cfg.read16(0x22) & 0xfff0) << 16) | 0xf_ffff;
    (limit >= base).then_some((base, limit))
}
