//! Completions (Cpl, CplD): PCI Express Base Specification 2.1 §2.2.9.
//!
//! ```text
//!  bytes 4-5 Completer ID
//!  byte 6 [7:5] Completion Status  [4] BCM  [3:0] Byte Count[11:8]   byte 7 Byte Count[7:0]
//!  bytes 8-9 Requester ID   byte 10 Tag   byte 11 [6:0] Lower Address
//! ```
//!
//! A read of more than the completer's maximum payload comes back as several completions
//! (S4.4's receive limit: each of the NIC's outstanding reads waits for all of them).

use iommulab_base::addr::Bdf;
use serde::{Deserialize, Serialize};

use crate::tlp::header::{Dw0, FMT_3DW, FMT_3DW_DATA, TYPE_CPL, length_field};
use crate::tlp::{AddressType, Attr, TlpError, check_len, read_id, write_id};

/// Completion Status (byte 6 bits 7:5).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CompletionStatus {
    /// 000b: successful completion.
    Successful,
    /// 001b: unsupported request (e.g. an address no function claims).
    UnsupportedRequest,
    /// 010b: configuration request retry status.
    RetryStatus,
    /// 100b: completer abort.
    CompleterAbort,
}

impl CompletionStatus {
    #[inline]
    const fn bits(self) -> u8 {
        match self {
            CompletionStatus::Successful => 0b000,
            CompletionStatus::UnsupportedRequest => 0b001,
            CompletionStatus::RetryStatus => 0b010,
            CompletionStatus::CompleterAbort => 0b100,
        }
    }

    const fn from_bits(b: u8) -> Result<Self, TlpError> {
        match b {
            0b000 => Ok(CompletionStatus::Successful),
            0b001 => Ok(CompletionStatus::UnsupportedRequest),
            0b010 => Ok(CompletionStatus::RetryStatus),
            0b100 => Ok(CompletionStatus::CompleterAbort),
            _ => Err(TlpError::Field {
                byte: 6,
                field: "Completion Status",
                found: b as u32,
                expected: "000b, 001b, 010b or 100b (others are reserved)",
            }),
        }
    }
}

/// A completion header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Completion {
    /// Who completes.
    pub completer: Bdf,
    /// Status.
    pub status: CompletionStatus,
    /// BCM (set only by PCI-X completers).
    pub bcm: bool,
    /// Bytes left to return for the request, this completion's included: 1..=4096
    /// (4096 encodes as 0).
    pub byte_count: u16,
    /// The requester the completion is routed to.
    pub requester: Bdf,
    /// The request's tag.
    pub tag: u8,
    /// Lower 7 bits of the address of the first byte returned.
    pub lower_address: u8,
    /// Traffic class, 0..=7.
    pub tc: u8,
    /// Attributes (copied from the request).
    pub attr: Attr,
    /// EP: the data is poisoned.
    pub poisoned: bool,
}

impl Completion {
    /// A successful completion for `byte_count` bytes at `lower_address`, TC 0, no attributes.
    pub const fn new(
        completer: Bdf,
        requester: Bdf,
        tag: u8,
        byte_count: u16,
        lower_address: u8,
    ) -> Self {
        Completion {
            completer,
            status: CompletionStatus::Successful,
            bcm: false,
            byte_count,
            requester,
            tag,
            lower_address,
            tc: 0,
            attr: Attr::NONE,
            poisoned: false,
        }
    }

    #[inline(always)]
    fn validate(&self, payload_dw: Option<u16>) -> Result<(), TlpError> {
        if self.byte_count == 0 || self.byte_count > 4096 {
            return Err(TlpError::Field {
                byte: 6,
                field: "Byte Count",
                found: u32::from(self.byte_count),
                expected: "1..=4096 bytes",
            });
        }
        if self.lower_address > 0x7f {
            return Err(TlpError::Field {
                byte: 11,
                field: "Lower Address",
                found: u32::from(self.lower_address),
                expected: "7 bits",
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
        if let Some(dw) = payload_dw {
            // §2.2.9: only a successful completion carries data.
            if self.status != CompletionStatus::Successful {
                return Err(TlpError::Field {
                    byte: 6,
                    field: "Completion Status",
                    found: u32::from(self.status.bits()),
                    expected: "000b (successful) for a completion with data",
                });
            }
            if dw == 0 || dw > 1024 {
                return Err(TlpError::Field {
                    byte: 3,
                    field: "Length",
                    found: u32::from(dw),
                    expected: "1..=1024 DW",
                });
            }
            // The data cannot exceed what is left of the request, counted in whole DWs
            // from the first byte's offset in its DW.
            let max_dw =
                (u32::from(self.lower_address & 3) + u32::from(self.byte_count)).div_ceil(4);
            if u32::from(dw) > max_dw {
                return Err(TlpError::Field {
                    byte: 3,
                    field: "Length",
                    found: u32::from(dw),
                    expected: "no more DW than Byte Count and Lower Address[1:0] leave",
                });
            }
        }
        Ok(())
    }

    #[inline(always)]
    pub(crate) fn encode(
        &self,
        payload: &[u8],
        data: bool,
        out: &mut [u8],
    ) -> Result<(), TlpError> {
        let dw = if data {
            if !payload.len().is_multiple_of(4) || payload.len() > 4096 {
                return Err(TlpError::LengthMismatch {
                    length_dw: (payload.len() / 4) as u16,
                    expected: 12 + payload.len().next_multiple_of(4),
                    got: 12 + payload.len(),
                });
            }
            Some((payload.len() / 4) as u16)
        } else {
            None
        };
        self.validate(dw)?;
        Dw0 {
            fmt: if data { FMT_3DW_DATA } else { FMT_3DW },
            typ: TYPE_CPL,
            tc: self.tc,
            attr: self.attr,
            poisoned: self.poisoned,
            at: AddressType::Untranslated,
            // Length is reserved in a completion without data.
            length: dw.map_or(0, length_field),
        }
        .encode(out);
        write_id(out, 4, self.completer);
        let bc = self.byte_count & 0xfff; // 4096 encodes as 0
        out[6] = (self.status.bits() << 5) | (u8::from(self.bcm) << 4) | (bc >> 8) as u8;
        out[7] = (bc & 0xff) as u8;
        write_id(out, 8, self.requester);
        out[10] = self.tag;
        out[11] = self.lower_address;
        out[12..12 + payload.len()].copy_from_slice(payload);
        Ok(())
    }

    #[inline(always)]
    pub(crate) fn decode<'a>(dw0: &Dw0, b: &'a [u8]) -> Result<(Self, &'a [u8]), TlpError> {
        let data = dw0.fmt == FMT_3DW_DATA;
        let dw = data.then(|| dw0.length_dw());
        check_len(b, 12, dw.unwrap_or(0))?;
        if dw0.at != AddressType::Untranslated {
            return Err(TlpError::Field {
                byte: 2,
                field: "AT",
                found: u32::from(dw0.at.bits()),
                expected: "00b for a completion",
            });
        }
        let bc = (u16::from(b[6] & 0xf) << 8) | u16::from(b[7]);
        let c = Completion {
            completer: read_id(b, 4),
            status: CompletionStatus::from_bits(b[6] >> 5)?,
            bcm: b[6] & 0x10 != 0,
            byte_count: if bc == 0 { 4096 } else { bc },
            requester: read_id(b, 8),
            tag: b[10],
            // Byte 11 bit 7 is reserved: ignored.
            lower_address: b[11] & 0x7f,
            tc: dw0.tc,
            attr: dw0.attr,
            poisoned: dw0.poisoned,
        };
        c.validate(dw)?;
        Ok((c, &b[12..]))
    }
}
