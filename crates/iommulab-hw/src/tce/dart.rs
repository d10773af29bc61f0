//! DART's 4-byte TCE (S2.3; PowerPC 970 with the U3/U4 or CPC945 bridge), bit-exact.
//!
//! The paper's Table 2, in IBM (MSB-0) bit numbers of a 32-bit word:
//!
//! | MSB-0 bits | LSB-0 bits | field | meaning |
//! |---|---|---|---|
//! | 0    | 31    | valid    | 1 ⇒ valid |
//! | 1    | 30    | R        | **0 ⇒ read allowed** |
//! | 2    | 29    | W        | **0 ⇒ write allowed** |
//! | 3:7  | 28:24 | reserved | must be 0 |
//! | 8:31 | 23:0  | RPN      | real page number: 24 bits, 36-bit (64 GB) reach |
//!
//! **Permission polarity, checked against Linux.** `arch/powerpc/sysdev/dart.h` defines only
//! `DARTMAP_VALID 0x80000000` and `DARTMAP_RPNMASK 0x00ffffff`, which are MSB-0 bit 0 and
//! bits 8:31: the paper's layout, in the other numbering. Linux defines no R or W bit and
//! writes `DARTMAP_VALID | (rpn & DARTMAP_RPNMASK)`, leaving bits 1 and 2 clear — which
//! under Table 2's inverted polarity means "read and write allowed", so Linux's DART
//! mappings are always bidirectional. The polarity is therefore *deny* bits: this model
//! encodes a read-only mapping by setting W (bit 2) and a write-only one by setting R
//! (bit 1), and an entry with both set is valid but admits nothing. A zero word is invalid,
//! as in Linux's cleared table.

use iommulab_base::addr::{Access, Hpa, Perm, Pfn};

/// Width of the real page number (S2.3): 24 bits of 4 KiB pages = 36-bit host addresses.
pub const RPN_BITS: u32 = 24;
const RPN_MASK: u32 = (1 << RPN_BITS) - 1;
const VALID: u32 = 1 << 31;
const READ_DENY: u32 = 1 << 30;
const WRITE_DENY: u32 = 1 << 29;
/// Every bit a DART TCE defines; the reserved bits 3:7 are written 0.
pub const DEFINED: u32 = VALID | READ_DENY | WRITE_DENY | RPN_MASK;

/// One decoded DART TCE.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct DartTce {
    /// Valid bit.
    pub valid: bool,
    /// R bit as stored: set ⇒ reads are **denied**.
    pub read_deny: bool,
    /// W bit as stored: set ⇒ writes are **denied**.
    pub write_deny: bool,
    /// Real page number (24 bits).
    pub rpn: u32,
}

impl DartTce {
    /// The valid entry mapping `frame` with `perm`; `None` if `frame` needs more than 24 bits
    /// (a host address at or above 64 GB, beyond DART's reach).
    pub fn new(frame: Pfn<Hpa>, perm: Perm) -> Option<Self> {
        let rpn = u32::try_from(frame.get())
            .ok()
            .filter(|r| r >> RPN_BITS == 0)?;
        Some(Self {
            valid: true,
            read_deny: !perm.read(),
            write_deny: !perm.write(),
            rpn,
        })
    }

    /// The 32-bit word (CPU order; the table is big-endian). Fields are masked to widths.
    pub const fn to_raw(self) -> u32 {
        (if self.valid { VALID } else { 0 })
            | (if self.read_deny { READ_DENY } else { 0 })
            | (if self.write_deny { WRITE_DENY } else { 0 })
            | (self.rpn & RPN_MASK)
    }

    /// Decodes a word; reserved bits are ignored.
    pub const fn from_raw(raw: u32) -> Self {
        Self {
            valid: raw & VALID != 0,
            read_deny: raw & READ_DENY != 0,
            write_deny: raw & WRITE_DENY != 0,
            rpn: raw & RPN_MASK,
        }
    }

    /// Whether a valid entry admits `access` (deny-bit polarity).
    pub const fn allows(self, access: Access) -> bool {
        self.valid
            && match access {
                Access::Read => !self.read_deny,
                Access::Write => !self.write_deny,
            }
    }

    /// The translation of a valid entry, with the permission it grants; `None` if invalid
    /// or if both deny bits are set (valid but admits nothing: not a [`Perm`]).
    pub const fn translation(self) -> Option<(Pfn<Hpa>, Perm)> {
        if !self.valid {
            return None;
        }
        match Perm::from_bits(!self.read_deny, !self.write_deny) {
            Some(p) => Some((Pfn::new(self.rpn as u64), p)),
            None => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What Linux writes (`DARTMAP_VALID | rpn`) decodes as read + write.
    #[test]
    fn linux_entries_are_bidirectional() {
        let linux = 0x8000_0000 | 0x12_3456;
        assert_eq!(
            DartTce::from_raw(linux).translation(),
            Some((Pfn::new(0x12_3456), Perm::ReadWrite))
        );
        assert_eq!(
            DartTce::new(Pfn::new(0x12_3456), Perm::ReadWrite).map(DartTce::to_raw),
            Some(linux)
        );
    }

    #[test]
    fn one_direction_sets_the_other_deny_bit() {
        let ro = DartTce::new(Pfn::new(5), Perm::Read).unwrap();
        assert_eq!(ro.to_raw(), 0x8000_0000 | 0x2000_0000 | 5);
        assert!(ro.allows(Access::Read) && !ro.allows(Access::Write));
        let wo = DartTce::new(Pfn::new(5), Perm::Write).unwrap();
        assert_eq!(wo.to_raw(), 0x8000_0000 | 0x4000_0000 | 5);
        assert_eq!(DartTce::from_raw(0).translation(), None);
    }

    #[test]
    fn frames_at_or_above_64_gb_are_refused() {
        assert!(DartTce::new(Pfn::new(1 << 24), Perm::Read).is_none());
        assert!(DartTce::new(Pfn::new((1 << 24) - 1), Perm::Read).is_some());
    }
}
