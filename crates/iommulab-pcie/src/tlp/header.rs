//! The fields every TLP header shares: DW0 (Fmt, Type, TC, Attr, TD, EP, AT, Length) as the
//! PCI Express Base Specification 2.1 §2.2.1 lays them out (S4.2 carries these bytes).
//!
//! ```text
//!  byte 0            byte 1              byte 2                 byte 3
//!  7 6 5 4 3 2 1 0   7 6 5 4 3 2 1 0     7  6  5 4  3 2  1 0    7 ... 0
//!  Fmt   Type        R TC    R A2 R TH   TD EP Attr AT   Len    Length[7:0]
//!                          (IDO)               (RO NS)   [9:8]
//! ```
//!
//! Bytes go on the link in this order (byte 0 first); each DW is big-endian.

use serde::{Deserialize, Serialize};

use crate::tlp::TlpError;

/// Fmt = 000b: 3 DW header, no data.
pub(crate) const FMT_3DW: u8 = 0b000;
/// Fmt = 001b: 4 DW header, no data.
pub(crate) const FMT_4DW: u8 = 0b001;
/// Fmt = 010b: 3 DW header, with data.
pub(crate) const FMT_3DW_DATA: u8 = 0b010;
/// Fmt = 011b: 4 DW header, with data.
pub(crate) const FMT_4DW_DATA: u8 = 0b011;
/// Fmt = 100b: a TLP prefix (not modeled).
pub(crate) const FMT_PREFIX: u8 = 0b100;

/// Type of memory requests (MRd with Fmt 00xb, MWr with Fmt 01xb).
pub(crate) const TYPE_MEM: u8 = 0b0_0000;
/// Type of configuration type 0 requests.
pub(crate) const TYPE_CFG0: u8 = 0b0_0100;
/// Type of configuration type 1 requests.
pub(crate) const TYPE_CFG1: u8 = 0b0_0101;
/// Type of completions (Cpl with Fmt 000b, CplD with Fmt 010b).
pub(crate) const TYPE_CPL: u8 = 0b0_1010;

/// The Attr field: Relaxed Ordering (`Attr[1]`), No Snoop (`Attr[0]`) and ID-Based Ordering
/// (`Attr[2]`, byte 1 bit 2).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Attr {
    /// `Attr[1]`: relaxed ordering.
    pub relaxed_ordering: bool,
    /// `Attr[0]`: no snoop.
    pub no_snoop: bool,
    /// `Attr[2]`: ID-based ordering.
    pub id_based_ordering: bool,
}

impl Attr {
    /// No attribute set (what configuration requests must carry).
    pub const NONE: Attr = Attr {
        relaxed_ordering: false,
        no_snoop: false,
        id_based_ordering: false,
    };

    /// Whether any bit is set.
    pub const fn any(self) -> bool {
        self.relaxed_ordering || self.no_snoop || self.id_based_ordering
    }
}

/// The AT field (byte 2 bits 3:2): how the address is to be interpreted (ATS).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AddressType {
    /// 00b: an untranslated address (an IOVA the IOMMU translates).
    #[default]
    Untranslated,
    /// 01b: a translation request (ATS).
    TranslationRequest,
    /// 10b: an address already translated by the device's ATC.
    Translated,
}

impl AddressType {
    pub(crate) const fn bits(self) -> u8 {
        match self {
            AddressType::Untranslated => 0b00,
            AddressType::TranslationRequest => 0b01,
            AddressType::Translated => 0b10,
        }
    }

    pub(crate) const fn from_bits(b: u8) -> Result<Self, TlpError> {
        match b {
            0b00 => Ok(AddressType::Untranslated),
            0b01 => Ok(AddressType::TranslationRequest),
            0b10 => Ok(AddressType::Translated),
            _ => Err(TlpError::Field {
                byte: 2,
                field: "AT",
                found: b as u32,
                expected: "00b, 01b or 10b (11b is reserved)",
            }),
        }
    }
}

/// DW0 decoded, before the type-specific bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Dw0 {
    pub fmt: u8,
    pub typ: u8,
    pub tc: u8,
    pub attr: Attr,
    pub poisoned: bool,
    pub at: AddressType,
    /// The raw 10-bit Length field (0 means 1024 DW).
    pub length: u16,
}

impl Dw0 {
    /// Decodes bytes 0..4; rejects what the model does not carry (prefixes, TH, TD).
    #[inline(always)]
    pub fn decode(b: &[u8]) -> Result<Self, TlpError> {
        if b.len() < 4 {
            return Err(TlpError::Truncated {
                needed: 4,
                got: b.len(),
            });
        }
        let fmt = b[0] >> 5;
        if fmt == FMT_PREFIX {
            return Err(TlpError::Field {
                byte: 0,
                field: "Fmt",
                found: u32::from(fmt),
                expected: "000b-011b (TLP prefixes are not modeled)",
            });
        }
        if fmt > FMT_4DW_DATA {
            return Err(TlpError::Field {
                byte: 0,
                field: "Fmt",
                found: u32::from(fmt),
                expected: "000b-011b (101b-111b are reserved)",
            });
        }
        if b[1] & 0x01 != 0 {
            return Err(TlpError::Field {
                byte: 1,
                field: "TH",
                found: 1,
                expected: "0 (TLP processing hints are not modeled)",
            });
        }
        if b[2] & 0x80 != 0 {
            return Err(TlpError::Field {
                byte: 2,
                field: "TD",
                found: 1,
                expected: "0 (ECRC digests are not modeled)",
            });
        }
        Ok(Dw0 {
            fmt,
            typ: b[0] & 0x1f,
            tc: (b[1] >> 4) & 0x7,
            attr: Attr {
                relaxed_ordering: b[2] & 0x20 != 0,
                no_snoop: b[2] & 0x10 != 0,
                id_based_ordering: b[1] & 0x04 != 0,
            },
            poisoned: b[2] & 0x40 != 0,
            at: AddressType::from_bits((b[2] >> 2) & 0x3)?,
            length: (u16::from(b[2] & 0x3) << 8) | u16::from(b[3]),
        })
    }

    /// Writes bytes 0..4 (reserved bits zero).
    #[inline(always)]
    pub fn encode(&self, out: &mut [u8]) {
        out[0] = (self.fmt << 5) | (self.typ & 0x1f);
        out[1] = ((self.tc & 0x7) << 4) | (u8::from(self.attr.id_based_ordering) << 2);
        out[2] = (u8::from(self.poisoned) << 6)
            | (u8::from(self.attr.relaxed_ordering) << 5)
            | (u8::from(self.attr.no_snoop) << 4)
            | (self.at.bits() << 2)
            | ((self.length >> 8) as u8 & 0x3);
        out[3] = (self.length & 0xff) as u8;
    }

    /// The Length field in DW (0 encodes 1024).
    #[inline]
    pub fn length_dw(&self) -> u16 {
        if self.length == 0 { 1024 } else { self.length }
    }
}

/// The 10-bit Length field for `dw` DW (1..=1024; 1024 encodes as 0).
#[inline]
pub(crate) const fn length_field(dw: u16) -> u16 {
    dw & 0x3ff
}
