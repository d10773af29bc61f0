//! Transaction-layer packets, bit-exact (PCI Express Base Specification 2.1 §2.2; S4.2
//! carries them in Ethernet frames): memory read and write with 3 DW and 4 DW headers,
//! configuration read and write of type 0 and 1, completions with and without data.
//!
//! | file | what it is |
//! |---|---|
//! | [`header`] | DW0, shared by every TLP: Fmt, Type, TC, Attr, EP, AT, Length |
//! | [`mem`] | memory requests (MRd, MWr), 32- and 64-bit addresses, byte-enable rules |
//! | [`config_request`] | configuration requests (CfgRd0/1, CfgWr0/1) |
//! | [`completion`] | completions (Cpl, CplD): status, byte count, lower address |
//!
//! [`Tlp::decode`] borrows the payload from the input and [`Tlp::encode`] writes into the
//! caller's buffer: neither allocates. A malformed TLP is rejected with a [`TlpError`]
//! naming the byte and field, never a panic. Not modeled (rejected with a reason): TLP
//! prefixes, ECRC digests (TD), processing hints (TH), I/O, message and atomic TLPs.
//! Tags are 8 bits (the extended-tag field of the 2.1 specification the paper cites).

// Bit-exact field packing: each narrowing cast keeps a field's low bits on purpose, and
// every value is range-checked before it is packed.
#![allow(clippy::cast_possible_truncation)]

pub mod completion;
pub mod config_request;
pub mod header;
pub mod mem;

#[cfg(test)]
mod tests;

use iommulab_base::addr::Bdf;

pub use completion::{Completion, CompletionStatus};
pub use config_request::{ConfigKind, ConfigRequest};
pub use header::{AddressType, Attr};
pub use mem::MemRequest;

use header::{
    Dw0, FMT_3DW, FMT_3DW_DATA, FMT_4DW, FMT_4DW_DATA, TYPE_CFG0, TYPE_CFG1, TYPE_CPL, TYPE_MEM,
};

/// The largest TLP the model encodes: a 4 DW header and 1024 DW of data.
pub const MAX_TLP_BYTES: usize = 16 + 4096;

/// Why bytes are not a well-formed TLP, or a TLP cannot be encoded.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TlpError {
    /// Fewer bytes than the header needs.
    #[error("truncated TLP: {needed} bytes needed for the header, {got} given")]
    Truncated {
        /// Bytes the header needs.
        needed: usize,
        /// Bytes given.
        got: usize,
    },
    /// A field holds a value the specification forbids (or the model does not carry).
    #[error("byte {byte}: {field} is {found:#x}, expected {expected}")]
    Field {
        /// Byte of the header holding the field (0-based, as the specification numbers them).
        byte: usize,
        /// The field's name in the specification.
        field: &'static str,
        /// The value found.
        found: u32,
        /// What the specification allows.
        expected: &'static str,
    },
    /// The Fmt/Type combination is not a TLP the model carries.
    #[error(
        "byte 0: Fmt {fmt:03b}b Type {typ:05b}b is not a modeled TLP (memory, configuration or completion)"
    )]
    UnsupportedType {
        /// Fmt.
        fmt: u8,
        /// Type.
        typ: u8,
    },
    /// The bytes after the header do not match the Length field.
    #[error(
        "Length field says {length_dw} DW of data ({expected} bytes in all), but the TLP has {got} bytes"
    )]
    LengthMismatch {
        /// The Length field (DW of data; 0 for a TLP without data).
        length_dw: u16,
        /// Header plus payload bytes the field implies.
        expected: usize,
        /// Bytes given.
        got: usize,
    },
    /// A memory request crosses a 4 KiB boundary (§2.2.7).
    #[error("memory request at {address:#x} for {bytes} bytes crosses a 4 KiB boundary")]
    CrossesPage {
        /// The request's address.
        address: u64,
        /// Its length in bytes.
        bytes: u32,
    },
    /// A 4 DW memory request for an address below 4 GiB (§2.2.4.1: requesters must use the
    /// 32-bit format there; the model rejects it).
    #[error(
        "bytes 8-11: a 64-bit address header for {address:#x}, below 4 GiB, where the 32-bit format is required"
    )]
    LongAddressBelow4G {
        /// The address.
        address: u64,
    },
    /// The output buffer is too short for [`Tlp::encode`].
    #[error("output buffer of {got} bytes, the TLP needs {needed}")]
    BufferTooSmall {
        /// Bytes needed.
        needed: usize,
        /// Bytes available.
        got: usize,
    },
}

/// One TLP; payloads borrow from the decoded bytes (or the caller's data when encoding).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tlp<'a> {
    /// Memory read request (MRd).
    MemRead(MemRequest),
    /// Memory write request (MWr) and its data (`length_dw * 4` bytes).
    MemWrite(MemRequest, &'a [u8]),
    /// Configuration read (CfgRd0 / CfgRd1).
    ConfigRead(ConfigRequest),
    /// Configuration write (CfgWr0 / CfgWr1) and its one DW of data.
    ConfigWrite(ConfigRequest, [u8; 4]),
    /// Completion without data (Cpl).
    Completion(Completion),
    /// Completion with data (CplD) and its data.
    CompletionData(Completion, &'a [u8]),
}

impl<'a> Tlp<'a> {
    /// Header plus payload bytes.
    #[inline]
    pub fn encoded_len(&self) -> usize {
        match self {
            Tlp::MemRead(m) => m.header_len(),
            Tlp::MemWrite(m, p) => m.header_len() + p.len(),
            Tlp::ConfigRead(_) => 12,
            Tlp::ConfigWrite(..) => 16,
            Tlp::Completion(_) => 12,
            Tlp::CompletionData(_, p) => 12 + p.len(),
        }
    }

    /// The requester (for a completion: the requester it answers).
    #[inline]
    pub fn requester(&self) -> Bdf {
        match self {
            Tlp::MemRead(m) | Tlp::MemWrite(m, _) => m.requester,
            Tlp::ConfigRead(c) | Tlp::ConfigWrite(c, _) => c.requester,
            Tlp::Completion(c) | Tlp::CompletionData(c, _) => c.requester,
        }
    }

    /// Writes the TLP into `out`; returns the bytes written. Checks every rule
    /// [`Tlp::decode`] checks, so what encodes decodes to the same TLP.
    #[inline]
    pub fn encode(&self, out: &mut [u8]) -> Result<usize, TlpError> {
        let n = self.encoded_len();
        if out.len() < n {
            return Err(TlpError::BufferTooSmall {
                needed: n,
                got: out.len(),
            });
        }
        match self {
            Tlp::MemRead(m) => m.encode(false, &[], out),
            Tlp::MemWrite(m, p) => m.encode(true, p, out),
            Tlp::ConfigRead(c) => c.encode(None, out),
            Tlp::ConfigWrite(c, d) => c.encode(Some(d), out),
            Tlp::Completion(c) => c.encode(&[], false, out),
            Tlp::CompletionData(c, p) => c.encode(p, true, out),
        }?;
        Ok(n)
    }

    /// Decodes exactly one TLP (header and payload, no framing, sequence number or LCRC):
    /// `bytes` must be exactly as long as the header and the Length field say.
    #[inline]
    pub fn decode(bytes: &'a [u8]) -> Result<Tlp<'a>, TlpError> {
        let dw0 = Dw0::decode(bytes)?;
        match (dw0.fmt, dw0.typ) {
            (FMT_3DW | FMT_4DW, TYPE_MEM) => {
                let (m, _) = MemRequest::decode(&dw0, bytes, false)?;
                Ok(Tlp::MemRead(m))
            }
            (FMT_3DW_DATA | FMT_4DW_DATA, TYPE_MEM) => {
                let (m, p) = MemRequest::decode(&dw0, bytes, true)?;
                Ok(Tlp::MemWrite(m, p))
            }
            (FMT_3DW, TYPE_CFG0 | TYPE_CFG1) => {
                let (c, _) = ConfigRequest::decode(&dw0, bytes)?;
                Ok(Tlp::ConfigRead(c))
            }
            (FMT_3DW_DATA, TYPE_CFG0 | TYPE_CFG1) => {
                let (c, d) = ConfigRequest::decode(&dw0, bytes)?;
                Ok(Tlp::ConfigWrite(c, d.unwrap_or_default()))
            }
            (FMT_3DW, TYPE_CPL) => Ok(Tlp::Completion(Completion::decode(&dw0, bytes)?.0)),
            (FMT_3DW_DATA, TYPE_CPL) => {
                let (c, p) = Completion::decode(&dw0, bytes)?;
                Ok(Tlp::CompletionData(c, p))
            }
            (fmt, typ) => Err(TlpError::UnsupportedType { fmt, typ }),
        }
    }
}

/// Checks that `bytes` is exactly `header + length_dw * 4` long.
#[inline]
pub(crate) fn check_len(bytes: &[u8], header: usize, length_dw: u16) -> Result<(), TlpError> {
    let expected = header + 4 * usize::from(length_dw);
    if bytes.len() == expected {
        Ok(())
    } else if bytes.len() < header {
        Err(TlpError::Truncated {
            needed: header,
            got: bytes.len(),
        })
    } else {
        Err(TlpError::LengthMismatch {
            length_dw,
            expected,
            got: bytes.len(),
        })
    }
}

/// A routing id (`bus << 8 | device << 3 | function`) as a [`Bdf`].
#[inline]
pub fn bdf_from_id(id: u16) -> Bdf {
    let [bus, devfn] = id.to_be_bytes();
    match Bdf::new(bus, devfn >> 3, devfn & 7) {
        Some(b) => b,
        // devfn >> 3 < 32 and devfn & 7 < 8 always hold.
        None => unreachable!("devfn {devfn:#x} always splits into a valid device and function"),
    }
}

/// Reads the 16-bit routing id at `b[i..i + 2]`.
#[inline]
pub(crate) fn read_id(b: &[u8], i: usize) -> Bdf {
    bdf_from_id(u16::from_be_bytes([b[i], b[i + 1]]))
}

/// Writes `bdf`'s routing id at `out[i..i + 2]`.
#[inline]
pub(crate) fn write_id(out: &mut [u8], i: usize, bdf: Bdf) {
    out[i..i + 2].copy_from_slice(&bdf.source_id().to_be_bytes());
}
