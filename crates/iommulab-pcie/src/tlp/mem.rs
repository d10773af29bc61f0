//! Memory requests (MRd, MWr): PCI Express Base Specification 2.1 §2.2.7.
//!
//! ```text
//!  bytes 4-5 Requester ID   byte 6 Tag   byte 7 Last DW BE [7:4] | First DW BE [3:0]
//!  3 DW: bytes 8-11  Address[31:2] | 00
//!  4 DW: bytes 8-11  Address[63:32]; bytes 12-15 Address[31:2] | 00
//! ```
//!
//! The encoder picks the 32-bit (3 DW) format below 4 GiB and the 64-bit one above, as
//! §2.2.4.1 requires of requesters; the decoder rejects a 64-bit header below 4 GiB. A
//! device's DMA (S4.1) is a memory request with the device's requester id: the host's IOMMU
//! translates its address (S4.3).

use iommulab_base::addr::Bdf;
use serde::{Deserialize, Serialize};

use crate::tlp::header::{
    Dw0, FMT_3DW, FMT_3DW_DATA, FMT_4DW, FMT_4DW_DATA, TYPE_MEM, length_field,
};
use crate::tlp::{AddressType, Attr, TlpError, check_len, read_id, write_id};

/// A memory read or write request header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct MemRequest {
    /// Who asks (the completer routes completions back by it; the IOMMU picks the domain by it).
    pub requester: Bdf,
    /// Tag: matches completions to the request.
    pub tag: u8,
    /// Byte address; DW-aligned (bits 1:0 are not carried).
    pub address: u64,
    /// Length in DW, 1..=1024.
    pub length_dw: u16,
    /// First DW byte enables (4 bits).
    pub first_be: u8,
    /// Last DW byte enables (4 bits; 0 when `length_dw == 1`).
    pub last_be: u8,
    /// Traffic class, 0..=7.
    pub tc: u8,
    /// Ordering and snoop attributes.
    pub attr: Attr,
    /// Address type (ATS).
    pub at: AddressType,
    /// EP: the data is poisoned.
    pub poisoned: bool,
}

impl MemRequest {
    /// A plain request: all bytes enabled, TC 0, no attributes, untranslated address.
    pub const fn new(requester: Bdf, tag: u8, address: u64, length_dw: u16) -> Self {
        MemRequest {
            requester,
            tag,
            address,
            length_dw,
            first_be: 0xf,
            last_be: if length_dw == 1 { 0 } else { 0xf },
            tc: 0,
            attr: Attr::NONE,
            at: AddressType::Untranslated,
            poisoned: false,
        }
    }

    /// Whether the 64-bit address format (4 DW header) is used.
    #[inline]
    pub const fn is_64bit(&self) -> bool {
        self.address > u32::MAX as u64
    }

    /// Header bytes: 12 or 16.
    #[inline]
    pub const fn header_len(&self) -> usize {
        if self.is_64bit() { 16 } else { 12 }
    }

    /// Bytes the request covers (`length_dw * 4`).
    #[inline]
    pub const fn bytes(&self) -> u32 {
        self.length_dw as u32 * 4
    }

    /// The rules of §2.2.5 and §2.2.7 a well-formed request obeys.
    #[inline(always)]
    pub(crate) fn validate(&self) -> Result<(), TlpError> {
        if self.length_dw == 0 || self.length_dw > 1024 {
            return Err(TlpError::Field {
                byte: 3,
                field: "Length",
                found: u32::from(self.length_dw),
                expected: "1..=1024 DW",
            });
        }
        if self.tc > 7 {
            return Err(TlpError::Field {
                byte: 1,
                field: "TC",
                found: u32::from(self.tc),
                expected: "0..=7",
            });
        }
        if self.address & 3 != 0 {
            return Err(TlpError::Field {
                byte: if self.is_64bit() { 15 } else { 11 },
                field: "Address[1:0]",
                found: (self.address & 3) as u32,
                expected: "a DW-aligned address",
            });
        }
        if self.first_be > 0xf || self.last_be > 0xf {
            return Err(TlpError::Field {
                byte: 7,
                field: "byte enables",
                found: u32::from(self.first_be.max(self.last_be)),
                expected: "4-bit First and Last DW BE",
            });
        }
        let be_byte = 7;
        if self.length_dw == 1 {
            if self.last_be != 0 {
                return Err(TlpError::Field {
                    byte: be_byte,
                    field: "Last DW BE",
                    found: u32::from(self.last_be),
                    expected: "0000b for a 1 DW request",
                });
            }
        } else {
            if self.first_be == 0 {
                return Err(TlpError::Field {
                    byte: be_byte,
                    field: "First DW BE",
                    found: 0,
                    expected: "non-zero when Length > 1 DW",
                });
            }
            if self.last_be == 0 {
                return Err(TlpError::Field {
                    byte: be_byte,
                    field: "Last DW BE",
                    found: 0,
                    expected: "non-zero when Length > 1 DW",
                });
            }
            // Non-contiguous enables are allowed only for 1 DW and QW-aligned 2 DW requests.
            let qw_aligned_2dw = self.length_dw == 2 && self.address & 7 == 0;
            if !qw_aligned_2dw {
                if !matches!(self.first_be, 0b1111 | 0b1110 | 0b1100 | 0b1000) {
                    return Err(TlpError::Field {
                        byte: be_byte,
                        field: "First DW BE",
                        found: u32::from(self.first_be),
                        expected: "contiguous enables reaching byte 3",
                    });
                }
                if !matches!(self.last_be, 0b1111 | 0b0111 | 0b0011 | 0b0001) {
                    return Err(TlpError::Field {
                        byte: be_byte,
                        field: "Last DW BE",
                        found: u32::from(self.last_be),
                        expected: "contiguous enables starting at byte 0",
                    });
                }
            }
        }
        if (self.address & 0xfff) + u64::from(self.bytes()) > 4096 {
            return Err(TlpError::CrossesPage {
                address: self.address,
                bytes: self.bytes(),
            });
        }
        Ok(())
    }

    #[inline(always)]
    pub(crate) fn encode(
        &self,
        data: bool,
        payload: &[u8],
        out: &mut [u8],
    ) -> Result<(), TlpError> {
        self.validate()?;
        let want = if data { self.bytes() as usize } else { 0 };
        if payload.len() != want {
            return Err(TlpError::LengthMismatch {
                length_dw: if data { self.length_dw } else { 0 },
                expected: self.header_len() + want,
                got: self.header_len() + payload.len(),
            });
        }
        let fmt = match (self.is_64bit(), data) {
            (false, false) => FMT_3DW,
            (true, false) => FMT_4DW,
            (false, true) => FMT_3DW_DATA,
            (true, true) => FMT_4DW_DATA,
        };
        Dw0 {
            fmt,
            typ: TYPE_MEM,
            tc: self.tc,
            attr: self.attr,
            poisoned: self.poisoned,
            at: self.at,
            length: length_field(self.length_dw),
        }
        .encode(out);
        write_id(out, 4, self.requester);
        out[6] = self.tag;
        out[7] = (self.last_be << 4) | self.first_be;
        let h = if self.is_64bit() {
            out[8..12].copy_from_slice(&((self.address >> 32) as u32).to_be_bytes());
            out[12..16].copy_from_slice(&(self.address as u32).to_be_bytes());
            16
        } else {
            out[8..12].copy_from_slice(&(self.address as u32).to_be_bytes());
            12
        };
        out[h..h + payload.len()].copy_from_slice(payload);
        Ok(())
    }

    #[inline(always)]
    pub(crate) fn decode<'a>(
        dw0: &Dw0,
        b: &'a [u8],
        data: bool,
    ) -> Result<(Self, &'a [u8]), TlpError> {
        let long = dw0.fmt & 1 == 1;
        let h = if long { 16 } else { 12 };
        let length_dw = dw0.length_dw();
        check_len(b, h, if data { length_dw } else { 0 })?;
        let address = if long {
            let hi = u32::from_be_bytes([b[8], b[9], b[10], b[11]]);
            let lo = u32::from_be_bytes([b[12], b[13], b[14], b[15]]) & !3;
            let a = (u64::from(hi) << 32) | u64::from(lo);
            if hi == 0 {
                return Err(TlpError::LongAddressBelow4G { address: a });
            }
            a
        } else {
            // Bits 1:0 of byte 11 are PH (reserved without TH): ignored.
            u64::from(u32::from_be_bytes([b[8], b[9], b[10], b[11]]) & !3)
        };
        let m = MemRequest {
            requester: read_id(b, 4),
            tag: b[6],
            address,
            length_dw,
            first_be: b[7] & 0xf,
            last_be: b[7] >> 4,
            tc: dw0.tc,
            attr: dw0.attr,
            at: dw0.at,
            poisoned: dw0.poisoned,
        };
        m.validate()?;
        Ok((m, &b[h..]))
    }
}
