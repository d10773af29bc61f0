//! Configuration requests (CfgRd0/1, CfgWr0/1): PCI Express Base Specification 2.1 §2.2.7.
//!
//! ```text
//!  bytes 4-5 Requester ID   byte 6 Tag   byte 7 Last DW BE (0000b) | First DW BE
//!  bytes 8-9 Completer ID (bus, device/function)
//!  byte 10 [3:0] Extended Register Number   byte 11 [7:2] Register Number
//! ```
//!
//! §2.2.7 restricts them to TC 0, Attr 0, AT 00b, Length 1 and Last DW BE 0000b; receivers
//! may check, and this one does (each violation is a malformed TLP naming the field).
//! Type 0 targets a function on the bus below; type 1 is forwarded by bridges (S4.2: the
//! bridges and the Ethernet are a virtual switch that answers them).

use iommulab_base::addr::Bdf;
use serde::{Deserialize, Serialize};

use crate::tlp::header::{Dw0, FMT_3DW, FMT_3DW_DATA, TYPE_CFG0, TYPE_CFG1};
use crate::tlp::{AddressType, Attr, TlpError, check_len, read_id, write_id};

/// Type 0 (to a function on the link below) or type 1 (to be forwarded by a bridge).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConfigKind {
    /// CfgRd0 / CfgWr0.
    Type0,
    /// CfgRd1 / CfgWr1.
    Type1,
}

/// A configuration read or write header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ConfigRequest {
    /// Type 0 or 1.
    pub kind: ConfigKind,
    /// Who asks.
    pub requester: Bdf,
    /// Tag.
    pub tag: u8,
    /// The function addressed.
    pub target: Bdf,
    /// DW index into the 4 KiB configuration space, 0..1024 (byte offset / 4).
    pub register: u16,
    /// First DW byte enables (4 bits).
    pub first_be: u8,
}

impl ConfigRequest {
    /// Byte offset of the register in configuration space.
    pub const fn offset(&self) -> u16 {
        self.register * 4
    }

    #[inline(always)]
    pub(crate) fn validate(&self) -> Result<(), TlpError> {
        if self.register >= 1024 {
            return Err(TlpError::Field {
                byte: 10,
                field: "Extended Register Number",
                found: u32::from(self.register),
                expected: "a DW index below 1024",
            });
        }
        if self.first_be > 0xf {
            return Err(TlpError::Field {
                byte: 7,
                field: "First DW BE",
                found: u32::from(self.first_be),
                expected: "4 bits",
            });
        }
        Ok(())
    }

    #[inline(always)]
    pub(crate) fn encode(&self, data: Option<&[u8; 4]>, out: &mut [u8]) -> Result<(), TlpError> {
        self.validate()?;
        Dw0 {
            fmt: if data.is_some() {
                FMT_3DW_DATA
            } else {
                FMT_3DW
            },
            typ: match self.kind {
                ConfigKind::Type0 => TYPE_CFG0,
                ConfigKind::Type1 => TYPE_CFG1,
            },
            tc: 0,
            attr: Attr::NONE,
            poisoned: false,
            at: AddressType::Untranslated,
            length: 1,
        }
        .encode(out);
        write_id(out, 4, self.requester);
        out[6] = self.tag;
        out[7] = self.first_be;
        write_id(out, 8, self.target);
        out[10] = (self.register >> 6) as u8 & 0xf;
        out[11] = ((self.register & 0x3f) as u8) << 2;
        if let Some(d) = data {
            out[12..16].copy_from_slice(d);
        }
        Ok(())
    }

    #[inline(always)]
    pub(crate) fn decode(dw0: &Dw0, b: &[u8]) -> Result<(Self, Option<[u8; 4]>), TlpError> {
        let data = dw0.fmt == FMT_3DW_DATA;
        if dw0.length != 1 {
            return Err(TlpError::Field {
                byte: 3,
                field: "Length",
                found: u32::from(dw0.length),
                expected: "1 for a configuration request",
            });
        }
        check_len(b, 12, if data { 1 } else { 0 })?;
        if dw0.tc != 0 {
            return Err(TlpError::Field {
                byte: 1,
                field: "TC",
                found: u32::from(dw0.tc),
                expected: "0 for a configuration request",
            });
        }
        if dw0.attr.any() {
            return Err(TlpError::Field {
                byte: 2,
                field: "Attr",
                found: u32::from(dw0.attr.relaxed_ordering) << 1 | u32::from(dw0.attr.no_snoop),
                expected: "0 for a configuration request",
            });
        }
        if dw0.at != AddressType::Untranslated {
            return Err(TlpError::Field {
                byte: 2,
                field: "AT",
                found: u32::from(dw0.at.bits()),
                expected: "00b for a configuration request",
            });
        }
        if b[7] >> 4 != 0 {
            return Err(TlpError::Field {
                byte: 7,
                field: "Last DW BE",
                found: u32::from(b[7] >> 4),
                expected: "0000b for a configuration request",
            });
        }
        let c = ConfigRequest {
            kind: if dw0.typ == TYPE_CFG0 {
                ConfigKind::Type0
            } else {
                ConfigKind::Type1
            },
            requester: read_id(b, 4),
            tag: b[6],
            target: read_id(b, 8),
            // Byte 10 bits 7:4 and byte 11 bits 1:0 are reserved: ignored.
            register: (u16::from(b[10] & 0xf) << 6) | u16::from(b[11] >> 2),
            first_be: b[7] & 0xf,
        };
        let d = data.then(|| [b[12], b[13], b[14], b[15]]);
        Ok((c, d))
    }
}
