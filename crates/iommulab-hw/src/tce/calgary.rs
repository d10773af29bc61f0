//! Calgary's 8-byte TCE (S2.2), bit-exact.
//!
//! The paper's Table 1 numbers bits the IBM way, **bit 0 = most significant** (MSB-0):
//!
//! | MSB-0 bits | LSB-0 bits | field | meaning |
//! |---|---|---|---|
//! | 0:15  | 63:48 | unused   | must be 0 |
//! | 16:51 | 47:12 | RPN      | real page number: 36 bits, 48-bit (256 TB) reach |
//! | 52:55 | 11:8  | reserved | must be 0 |
//! | 56:61 | 7:2   | hub id   | which bus, when one table isolates several |
//! | 62    | 1     | W        | 1 ⇒ the device may write |
//! | 63    | 0     | R        | 1 ⇒ the device may read |
//!
//! R = W = 0 is an invalid (not present) translation. The LSB-0 column is how Linux's
//! `arch/x86/include/asm/tce.h` composes the value (`TCE_READ_SHIFT 0`, `TCE_WRITE_SHIFT 1`,
//! `TCE_HUBID_SHIFT 2`, `TCE_RPN_SHIFT 12`, `TCE_RPN_MASK 0x0000fffffffff000`) before storing
//! it big-endian: the two numberings describe the same word. [`CalgaryTce::to_raw`] returns
//! that CPU-order value.

use iommulab_base::addr::{Hpa, Perm, Pfn};

/// Width of the real page number (S2.2): 36 bits of 4 KiB pages = 48-bit host addresses.
pub const RPN_BITS: u32 = 36;
const RPN_SHIFT: u32 = 12;
const RPN_MASK: u64 = ((1 << RPN_BITS) - 1) << RPN_SHIFT;
const HUB_SHIFT: u32 = 2;
/// Width of the hub id (MSB-0 bits 56:61).
pub const HUB_BITS: u32 = 6;
const HUB_MASK: u64 = ((1 << HUB_BITS) - 1) << HUB_SHIFT;
const WRITE: u64 = 1 << 1;
const READ: u64 = 1;
/// Every bit a Calgary TCE defines; the rest (unused, reserved) are written 0.
pub const DEFINED: u64 = RPN_MASK | HUB_MASK | WRITE | READ;

/// One decoded Calgary TCE: every field, valid or not.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct CalgaryTce {
    /// Real page number (36 bits).
    pub rpn: u64,
    /// Hub id (6 bits).
    pub hub: u8,
    /// W: the device may write.
    pub write: bool,
    /// R: the device may read.
    pub read: bool,
}

impl CalgaryTce {
    /// The entry mapping `frame` with `perm` for hub `hub`; `None` if `frame` needs more than
    /// 36 bits or `hub` more than 6 (no silent truncation).
    pub fn new(frame: Pfn<Hpa>, perm: Perm, hub: u8) -> Option<Self> {
        (frame.get() >> RPN_BITS == 0 && u32::from(hub) >> HUB_BITS == 0).then_some(Self {
            rpn: frame.get(),
            hub,
            write: perm.write(),
            read: perm.read(),
        })
    }

    /// The 64-bit word (CPU order; the table stores it big-endian). Fields are masked to
    /// their widths.
    pub const fn to_raw(self) -> u64 {
        ((self.rpn << RPN_SHIFT) & RPN_MASK)
            | ((self.hub as u64) << HUB_SHIFT & HUB_MASK)
            | if self.write { WRITE } else { 0 }
            | if self.read { READ } else { 0 }
    }

    /// Decodes a word; unused and reserved bits are ignored.
    pub const fn from_raw(raw: u64) -> Self {
        Self {
            rpn: (raw & RPN_MASK) >> RPN_SHIFT,
            hub: ((raw & HUB_MASK) >> HUB_SHIFT) as u8,
            write: raw & WRITE != 0,
            read: raw & READ != 0,
        }
    }

    /// The translation, `None` when R = W = 0 (invalid, S2.2).
    pub const fn translation(self) -> Option<(Pfn<Hpa>, Perm)> {
        match Perm::from_bits(self.read, self.write) {
            Some(p) => Some((Pfn::new(self.rpn), p)),
            None => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_sit_where_table_1_and_linux_put_them() {
        let t = CalgaryTce {
            rpn: 0xF_FFFF_FFFF,
            hub: 0,
            write: false,
            read: false,
        };
        assert_eq!(t.to_raw(), 0x0000_FFFF_FFFF_F000); // Linux's TCE_RPN_MASK
        let h = CalgaryTce {
            hub: 0x3F,
            ..CalgaryTce::default()
        };
        assert_eq!(h.to_raw(), 0xFC); // MSB-0 bits 56:61
        let r = CalgaryTce {
            read: true,
            ..CalgaryTce::default()
        };
        assert_eq!(r.to_raw(), 1); // MSB-0 bit 63
        let w = CalgaryTce {
            write: true,
            ..CalgaryTce::default()
        };
        assert_eq!(w.to_raw(), 2); // MSB-0 bit 62
        assert_eq!(CalgaryTce::from_raw(0).translation(), None);
    }

    #[test]
    fn frames_beyond_36_bits_and_wide_hubs_are_refused() {
        assert!(CalgaryTce::new(Pfn::new(1 << 36), Perm::Read, 0).is_none());
        assert!(CalgaryTce::new(Pfn::new((1 << 36) - 1), Perm::Read, 63).is_some());
        assert!(CalgaryTce::new(Pfn::new(1), Perm::Read, 64).is_none());
    }
}
