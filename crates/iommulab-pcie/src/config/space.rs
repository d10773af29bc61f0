//! The bytes of a configuration space and what a host write may change.
//!
//! Every bit is one of: read-only (RO, and hardware-initialised, HwInit), read-write (RW) or
//! write-1-to-clear (RW1C), the attributes of §7.4. A host write (a CfgWr TLP) changes RW
//! bits to the written value and clears RW1C bits written with 1; nothing else. The device
//! itself sets fields through [`ConfigSpace::set`] (e.g. a status bit), bypassing the masks.

use crate::config::ConfigError;

/// Size of a PCI Express function's configuration space.
pub const CONFIG_SPACE_BYTES: usize = 4096;

/// One function's configuration space.
#[derive(Clone, PartialEq, Eq)]
pub struct ConfigSpace {
    bytes: Box<[u8; CONFIG_SPACE_BYTES]>,
    rw: Box<[u8; CONFIG_SPACE_BYTES]>,
    rw1c: Box<[u8; CONFIG_SPACE_BYTES]>,
}

impl std::fmt::Debug for ConfigSpace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConfigSpace")
            .field("vendor", &format_args!("{:#06x}", self.read16(0)))
            .field("device", &format_args!("{:#06x}", self.read16(2)))
            .field("header_type", &self.read8(0x0e))
            .finish_non_exhaustive()
    }
}

impl Default for ConfigSpace {
    fn default() -> Self {
        Self::zeroed()
    }
}

impl ConfigSpace {
    /// All zero and all read-only.
    pub fn zeroed() -> Self {
        ConfigSpace {
            bytes: Box::new([0; CONFIG_SPACE_BYTES]),
            rw: Box::new([0; CONFIG_SPACE_BYTES]),
            rw1c: Box::new([0; CONFIG_SPACE_BYTES]),
        }
    }

    fn check(offset: u16, len: u16) -> Result<usize, ConfigError> {
        let o = usize::from(offset);
        if o + usize::from(len) > CONFIG_SPACE_BYTES || !offset.is_multiple_of(len) {
            return Err(ConfigError::Access { offset, len });
        }
        Ok(o)
    }

    /// Byte at `offset` (`offset` < 4096, else 0xff as for an absent register).
    pub fn read8(&self, offset: u16) -> u8 {
        self.bytes.get(usize::from(offset)).copied().unwrap_or(0xff)
    }

    /// Little-endian 16 bits at `offset` (configuration registers are little-endian).
    pub fn read16(&self, offset: u16) -> u16 {
        u16::from_le_bytes([self.read8(offset), self.read8(offset + 1)])
    }

    /// Little-endian 32 bits at `offset`.
    pub fn read32(&self, offset: u16) -> u32 {
        u32::from_le_bytes([
            self.read8(offset),
            self.read8(offset + 1),
            self.read8(offset + 2),
            self.read8(offset + 3),
        ])
    }

    /// The DW at index `register` (what a CfgRd returns; bytes in register order).
    pub fn read_dw(&self, register: u16) -> [u8; 4] {
        self.read32(register * 4).to_le_bytes()
    }

    /// A host write of the DW at index `register` with byte enables `be` (a CfgWr): RW bits
    /// take the written value, RW1C bits written with 1 clear, the rest does not change.
    /// An index beyond the space is ignored (as hardware ignores it).
    pub fn write_dw(&mut self, register: u16, data: [u8; 4], be: u8) {
        let base = usize::from(register) * 4;
        if base + 4 > CONFIG_SPACE_BYTES {
            return;
        }
        for (i, d) in data.into_iter().enumerate() {
            if be & (1 << i) == 0 {
                continue;
            }
            let o = base + i;
            let old = self.bytes[o];
            let rw = self.rw[o];
            let rw1c = self.rw1c[o];
            self.bytes[o] = ((old & !rw) | (d & rw)) & !(d & rw1c);
        }
    }

    /// A host write of `len` (1, 2 or 4) bytes at `offset`, through [`ConfigSpace::write_dw`].
    pub fn write(&mut self, offset: u16, len: u16, value: u32) -> Result<(), ConfigError> {
        if !matches!(len, 1 | 2 | 4) {
            return Err(ConfigError::Access { offset, len });
        }
        Self::check(offset, len)?;
        let shift = offset % 4;
        let be = (((1u16 << len) - 1) << shift) as u8;
        let mut data = [0u8; 4];
        for i in 0..len {
            data[usize::from(shift + i)] = (value >> (8 * i)) as u8;
        }
        self.write_dw(offset / 4, data, be);
        Ok(())
    }

    /// The device sets `len` bytes at `offset` to `value`, whatever the masks (HwInit values
    /// and hardware-owned fields).
    pub fn set(&mut self, offset: u16, len: u16, value: u32) -> Result<(), ConfigError> {
        let o = Self::check(offset, len)?;
        for i in 0..usize::from(len) {
            self.bytes[o + i] = (value >> (8 * i)) as u8;
        }
        Ok(())
    }

    /// Declares the RW and RW1C bits of `len` bytes at `offset` (the rest is RO).
    pub fn set_masks(
        &mut self,
        offset: u16,
        len: u16,
        rw: u32,
        rw1c: u32,
    ) -> Result<(), ConfigError> {
        let o = Self::check(offset, len)?;
        for i in 0..usize::from(len) {
            self.rw[o + i] = (rw >> (8 * i)) as u8;
            self.rw1c[o + i] = (rw1c >> (8 * i)) as u8;
        }
        Ok(())
    }

    /// The RW mask byte at `offset`.
    pub fn rw_mask(&self, offset: u16) -> u8 {
        self.rw.get(usize::from(offset)).copied().unwrap_or(0)
    }

    /// The RW1C mask byte at `offset`.
    pub fn rw1c_mask(&self, offset: u16) -> u8 {
        self.rw1c.get(usize::from(offset)).copied().unwrap_or(0)
    }
}
