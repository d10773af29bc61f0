//! The PCI Express capability (id 0x10, §7.8): the port type, and the Device Control fields
//! that bound TLP sizes, Max_Payload_Size and Max_Read_Request_Size (S4.4: the read request
//! size and the number of outstanding reads set the receive limit).
//!
//! ```text
//!  +0x00 id 0x10, next      +0x02 PCI Express Capabilities (RO): version 2, port type [7:4]
//!  +0x04 Device Capabilities (RO): Max_Payload_Size Supported [2:0]
//!  +0x08 Device Control (RW): Max_Payload_Size [7:5], Max_Read_Request_Size [14:12]
//!  +0x0a Device Status (RW1C [3:0])
//! ```
//! Sizes are encoded as `128 << n` bytes, n = 0..=5 (128 B to 4 KiB).

use crate::config::capability::{self, CapabilityId};
use crate::config::{ConfigError, ConfigSpace};

/// Device/port type (PCI Express Capabilities bits 7:4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum PortType {
    /// PCI Express endpoint.
    Endpoint = 0b0000,
    /// Root port of a root complex.
    RootPort = 0b0100,
    /// Upstream port of a switch.
    SwitchUpstream = 0b0101,
    /// Downstream port of a switch.
    SwitchDownstream = 0b0110,
}

/// Length of the capability (version 2).
pub const LEN: u16 = 0x3c;

/// Adds the capability: `port`, and the largest payload supported, `128 << mps_supported`.
/// Device Control starts at 128-byte payloads and 512-byte read requests (the reset values).
pub fn add(cfg: &mut ConfigSpace, port: PortType, mps_supported: u8) -> Result<u16, ConfigError> {
    let at = capability::add(cfg, CapabilityId::PciExpress as u8, LEN)?;
    cfg.set(at + 2, 2, 0x0002 | (u32::from(port as u8) << 4))?;
    cfg.set(at + 4, 4, u32::from(mps_supported.min(5)))?;
    // Device Control: MPS 000b (128 B), MRRS 010b (512 B).
    cfg.set(at + 8, 2, 0b010 << 12)?;
    cfg.set_masks(at + 8, 2, 0x7fff, 0)?;
    cfg.set_masks(at + 0x0a, 2, 0, 0x000f)?;
    Ok(at)
}

fn decode_size(code: u16) -> u32 {
    // 110b and 111b are reserved; a device treats them as the largest size it supports.
    128 << code.min(5)
}

/// Max_Payload_Size in bytes, or `None` without the capability.
pub fn max_payload_size(cfg: &ConfigSpace) -> Result<Option<u32>, ConfigError> {
    let Some(at) = capability::find(cfg, CapabilityId::PciExpress as u8)? else {
        return Ok(None);
    };
    let ctl = cfg.read16(at + 8);
    let supported = (cfg.read32(at + 4) & 7) as u16;
    Ok(Some(decode_size(((ctl >> 5) & 7).min(supported))))
}

/// Max_Read_Request_Size in bytes, or `None` without the capability.
pub fn max_read_request_size(cfg: &ConfigSpace) -> Result<Option<u32>, ConfigError> {
    let Some(at) = capability::find(cfg, CapabilityId::PciExpress as u8)? else {
        return Ok(None);
    };
    Ok(Some(decode_size((cfg.read16(at + 8) >> 12) & 7)))
}
