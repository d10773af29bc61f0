//! Capability lists: the PCI-compatible list (pointer at 0x34, entries in 0x40-0xff, each
//! `[id, next]`) and the extended list (from 0x100, each a DW header `id[15:0]
//! version[19:16] next[31:20]`), §7.5.3 and §7.9.
//!
//! Walking checks each pointer (aligned, in the area) and stops on a loop with a
//! [`ConfigError`], so a corrupt list is a reason, not a hang.

use crate::config::header::STATUS_CAP_LIST;
use crate::config::{ConfigError, ConfigSpace};

/// PCI-compatible capability ids used here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum CapabilityId {
    /// MSI (0x05).
    Msi = 0x05,
    /// PCI Express (0x10).
    PciExpress = 0x10,
}

/// Extended capability ids used here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u16)]
pub enum ExtCapabilityId {
    /// Alternative Routing-ID Interpretation (0x000e).
    Ari = 0x000e,
    /// Single Root I/O Virtualization (0x0010), S4.1.
    SrIov = 0x0010,
}

/// Appends a `len`-byte capability `id` to the list, after the last one (or at 0x40);
/// returns its offset. Its body bytes start RO and zero.
pub fn add(cfg: &mut ConfigSpace, id: u8, len: u16) -> Result<u16, ConfigError> {
    let caps = list(cfg)?;
    let at = match caps.last() {
        None => 0x40,
        Some(&(_, off)) => (off + cap_len(cfg, off)).next_multiple_of(4),
    };
    if at + len > 0x100 {
        return Err(ConfigError::NoRoom {
            len,
            area: "the PCI-compatible capability area",
            end: 0x100,
        });
    }
    cfg.set(at, 1, u32::from(id))?;
    cfg.set(at + 1, 1, 0)?;
    match caps.last() {
        None => cfg.set(0x34, 1, u32::from(at))?,
        Some(&(_, off)) => cfg.set(off + 1, 1, u32::from(at))?,
    }
    let status = cfg.read16(0x06) | STATUS_CAP_LIST;
    cfg.set(0x06, 2, u32::from(status))?;
    Ok(at)
}

/// Bytes of the capability at `off`, known from its id (the model builds only these).
fn cap_len(cfg: &ConfigSpace, off: u16) -> u16 {
    match cfg.read8(off) {
        0x05 => 24, // MSI with 64-bit address and per-vector masking
        0x10 => 0x3c,
        _ => 8,
    }
}

/// The PCI-compatible list as `(id, offset)` pairs, in list order.
pub fn list(cfg: &ConfigSpace) -> Result<Vec<(u8, u16)>, ConfigError> {
    let mut out = Vec::new();
    if cfg.read16(0x06) & STATUS_CAP_LIST == 0 {
        return Ok(out);
    }
    let mut at = 0x34u16;
    let mut p = u16::from(cfg.read8(0x34) & 0xfc);
    // Bits 1:0 of each pointer are reserved: masked, as software must.
    while p != 0 {
        if p < 0x40 {
            return Err(ConfigError::BadPointer {
                at,
                points_to: p,
                expected: "0x40..0x100",
            });
        }
        if out.iter().any(|&(_, o)| o == p) {
            return Err(ConfigError::Loop { offset: p });
        }
        out.push((cfg.read8(p), p));
        at = p + 1;
        p = u16::from(cfg.read8(p + 1) & 0xfc);
    }
    Ok(out)
}

/// The offset of capability `id`, if present.
pub fn find(cfg: &ConfigSpace, id: u8) -> Result<Option<u16>, ConfigError> {
    Ok(list(cfg)?
        .into_iter()
        .find(|&(i, _)| i == id)
        .map(|(_, o)| o))
}

/// Appends a `len`-byte extended capability (`id`, `version`) after the last one (or at
/// 0x100); returns its offset.
pub fn add_extended(
    cfg: &mut ConfigSpace,
    id: u16,
    version: u8,
    len: u16,
) -> Result<u16, ConfigError> {
    let caps = list_extended(cfg)?;
    let at = match caps.last() {
        None => 0x100,
        Some(&(_, off, l)) => (off + l).next_multiple_of(4),
    };
    if at + len > 0x1000 {
        return Err(ConfigError::NoRoom {
            len,
            area: "the extended capability area",
            end: 0x1000,
        });
    }
    // The length of each capability follows from its id (`ext_len`), as hardware knows its
    // own layout.
    cfg.set(at, 4, u32::from(id) | (u32::from(version & 0xf) << 16))?;
    if let Some(&(_, off, _)) = caps.last() {
        let h = cfg.read32(off);
        cfg.set(off, 4, (h & 0x000f_ffff) | (u32::from(at) << 20))?;
    }
    Ok(at)
}

/// Bytes of the extended capability `id` (the model builds only these).
fn ext_len(id: u16) -> u16 {
    match id {
        0x0010 => 0x40,
        0x000e => 8,
        _ => 4,
    }
}

/// The extended list as `(id, offset, length)`, in list order. An empty list is a header
/// of 0 at 0x100 (§7.9.2).
pub fn list_extended(cfg: &ConfigSpace) -> Result<Vec<(u16, u16, u16)>, ConfigError> {
    let mut out = Vec::new();
    let mut at = 0x100u16;
    let mut p = 0x100u16;
    loop {
        let h = cfg.read32(p);
        if h == 0 {
            break;
        }
        let id = (h & 0xffff) as u16;
        if out.iter().any(|&(_, o, _)| o == p) {
            return Err(ConfigError::Loop { offset: p });
        }
        out.push((id, p, ext_len(id)));
        let next = (h >> 20) as u16 & 0xffc;
        if next == 0 {
            break;
        }
        if next < 0x100 {
            return Err(ConfigError::BadPointer {
                at,
                points_to: next,
                expected: "0x100..0x1000",
            });
        }
        at = p;
        p = next;
    }
    Ok(out)
}

/// The offset of extended capability `id`, if present.
pub fn find_extended(cfg: &ConfigSpace, id: u16) -> Result<Option<u16>, ConfigError> {
    Ok(list_extended(cfg)?
        .into_iter()
        .find(|&(i, _, _)| i == id)
        .map(|(_, o, _)| o))
}
