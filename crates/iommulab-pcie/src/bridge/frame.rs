//! TLPs in Ethernet frames (S4.2): the ExpEther bridges carry each TLP in an 802.1Q-tagged
//! frame between a host-side and an I/O-side bridge; the VLAN id groups a host with its
//! devices.
//!
//! ```text
//!  0  destination MAC (6)   6  source MAC (6)
//!  12 TPID 0x8100 (2)       14 TCI: PCP [15:13] DEI [12] VLAN id [11:0] (2)
//!  16 EtherType (2)         18 bridge header (12): kind (1), flags (1), TLP length (2),
//!                                                  sequence (4), cumulative ack (4)
//!  30 TLP bytes, padded to the 64-byte minimum frame     last 4: FCS (CRC-32)
//! ```
//!
//! The paper does not give ExpEther's frame format: the EtherType is IEEE 802's local
//! experimental 0x88b5 and the 12-byte bridge header is this model's (a sequence number and
//! a cumulative ack are what the lossless transport of [`super::transport`] needs).

use serde::{Deserialize, Serialize};

/// The EtherType the model uses (IEEE 802 local experimental EtherType 1).
pub const ETHERTYPE: u16 = 0x88b5;
/// 802.1Q tag protocol identifier.
pub const TPID: u16 = 0x8100;
/// Bytes before the TLP: Ethernet header with tag (18), EtherType (2)... as laid out above.
pub const HEADER_BYTES: usize = 30;
/// FCS bytes.
pub const FCS_BYTES: usize = 4;
/// Smallest frame on the wire, FCS included (shorter ones are padded).
pub const MIN_FRAME_BYTES: usize = 64;
/// Preamble, start delimiter and inter-frame gap: wire time every frame costs besides itself.
pub const WIRE_OVERHEAD_BYTES: usize = 20;

/// A MAC address.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Mac(pub [u8; 6]);

impl Mac {
    /// The broadcast address (keep-alive frames).
    pub const BROADCAST: Mac = Mac([0xff; 6]);

    /// A locally administered unicast address numbered `n` (for models and tests).
    pub const fn local(n: u16) -> Mac {
        let [a, b] = n.to_be_bytes();
        Mac([0x02, 0x00, 0x00, 0x45, a, b])
    }
}

/// What a frame carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FrameKind {
    /// A TLP, with a sequence number.
    Data,
    /// An acknowledgement only.
    Ack,
    /// A periodic keep-alive (S4.2: drives hot-plug and hot-remove).
    KeepAlive,
}

impl FrameKind {
    const fn code(self) -> u8 {
        match self {
            FrameKind::Data => 1,
            FrameKind::Ack => 2,
            FrameKind::KeepAlive => 3,
        }
    }
}

/// A decoded frame; the TLP borrows from the input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frame<'a> {
    /// Destination.
    pub dst: Mac,
    /// Source.
    pub src: Mac,
    /// VLAN id (12 bits).
    pub vlan: u16,
    /// Kind.
    pub kind: FrameKind,
    /// Sequence number of a data frame.
    pub seq: u32,
    /// Cumulative ack: the next sequence number the sender of this frame expects.
    pub ack: u32,
    /// The TLP of a data frame (empty otherwise).
    pub tlp: &'a [u8],
}

/// Why bytes are not a bridge frame.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// Shorter than the minimum or than its own length field says.
    #[error("frame of {got} bytes, at least {needed} needed")]
    Truncated {
        /// Bytes needed.
        needed: usize,
        /// Bytes given.
        got: usize,
    },
    /// A field that is not what a bridge frame holds.
    #[error("byte {byte}: {field} is {found:#x}, expected {expected}")]
    Field {
        /// Byte offset.
        byte: usize,
        /// Field name.
        field: &'static str,
        /// Value found.
        found: u32,
        /// What is allowed.
        expected: &'static str,
    },
    /// The FCS does not match the frame's bytes.
    #[error("FCS {found:#010x} does not match the frame (computed {computed:#010x})")]
    Fcs {
        /// FCS in the frame.
        found: u32,
        /// FCS computed.
        computed: u32,
    },
    /// The caller's buffer is too small.
    #[error("output buffer of {got} bytes, the frame needs {needed}")]
    BufferTooSmall {
        /// Needed.
        needed: usize,
        /// Given.
        got: usize,
    },
}

/// Bytes of the frame carrying a `tlp_bytes`-byte TLP, FCS included (padding counted).
pub const fn frame_bytes(tlp_bytes: usize) -> usize {
    let n = HEADER_BYTES + tlp_bytes + FCS_BYTES;
    if n < MIN_FRAME_BYTES {
        MIN_FRAME_BYTES
    } else {
        n
    }
}

/// Bytes of wire time the frame costs (frame plus preamble and inter-frame gap).
pub const fn wire_bytes(tlp_bytes: usize) -> usize {
    frame_bytes(tlp_bytes) + WIRE_OVERHEAD_BYTES
}

impl Frame<'_> {
    /// Writes the frame (with padding and FCS) into `out`; returns its length.
    pub fn encode(&self, out: &mut [u8]) -> Result<usize, FrameError> {
        let n = frame_bytes(self.tlp.len());
        if out.len() < n {
            return Err(FrameError::BufferTooSmall {
                needed: n,
                got: out.len(),
            });
        }
        let tlp_len = u16::try_from(self.tlp.len()).map_err(|_| FrameError::Field {
            byte: 20,
            field: "TLP length",
            found: u32::MAX,
            expected: "at most 65535 bytes",
        })?;
        if self.vlan > 0xfff {
            return Err(FrameError::Field {
                byte: 14,
                field: "VLAN id",
                found: u32::from(self.vlan),
                expected: "12 bits",
            });
        }
        out[0..6].copy_from_slice(&self.dst.0);
        out[6..12].copy_from_slice(&self.src.0);
        out[12..14].copy_from_slice(&TPID.to_be_bytes());
        out[14..16].copy_from_slice(&self.vlan.to_be_bytes());
        out[16..18].copy_from_slice(&ETHERTYPE.to_be_bytes());
        out[18] = self.kind.code();
        out[19] = 0;
        out[20..22].copy_from_slice(&tlp_len.to_be_bytes());
        out[22..26].copy_from_slice(&self.seq.to_be_bytes());
        out[26..30].copy_from_slice(&self.ack.to_be_bytes());
        let end = HEADER_BYTES + self.tlp.len();
        out[HEADER_BYTES..end].copy_from_slice(self.tlp);
        out[end..n - FCS_BYTES].fill(0);
        let fcs = crc32fast::hash(&out[..n - FCS_BYTES]);
        out[n - FCS_BYTES..n].copy_from_slice(&fcs.to_le_bytes());
        Ok(n)
    }
}

impl<'a> Frame<'a> {
    /// Decodes a frame (FCS included), checking the tag, EtherType, kind, length and FCS.
    pub fn decode(b: &'a [u8]) -> Result<Frame<'a>, FrameError> {
        if b.len() < MIN_FRAME_BYTES {
            return Err(FrameError::Truncated {
                needed: MIN_FRAME_BYTES,
                got: b.len(),
            });
        }
        let body = &b[..b.len() - FCS_BYTES];
        let found = u32::from_le_bytes([
            b[b.len() - 4],
            b[b.len() - 3],
            b[b.len() - 2],
            b[b.len() - 1],
        ]);
        let computed = crc32fast::hash(body);
        if found != computed {
            return Err(FrameError::Fcs { found, computed });
        }
        let be16 = |i: usize| u16::from_be_bytes([b[i], b[i + 1]]);
        let be32 = |i: usize| u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        if be16(12) != TPID {
            return Err(FrameError::Field {
                byte: 12,
                field: "TPID",
                found: u32::from(be16(12)),
                expected: "0x8100 (an 802.1Q tag: bridges are grouped by VLAN)",
            });
        }
        if be16(16) != ETHERTYPE {
            return Err(FrameError::Field {
                byte: 16,
                field: "EtherType",
                found: u32::from(be16(16)),
                expected: "0x88b5",
            });
        }
        let kind = match b[18] {
            1 => FrameKind::Data,
            2 => FrameKind::Ack,
            3 => FrameKind::KeepAlive,
            k => {
                return Err(FrameError::Field {
                    byte: 18,
                    field: "kind",
                    found: u32::from(k),
                    expected: "1 (data), 2 (ack) or 3 (keep-alive)",
                });
            }
        };
        let len = usize::from(be16(20));
        if HEADER_BYTES + len > body.len() {
            return Err(FrameError::Truncated {
                needed: HEADER_BYTES + len + FCS_BYTES,
                got: b.len(),
            });
        }
        if kind != FrameKind::Data && len != 0 {
            return Err(FrameError::Field {
                byte: 20,
                field: "TLP length",
                found: len as u32,
                expected: "0 in an ack or keep-alive",
            });
        }
        let mut dst = [0; 6];
        dst.copy_from_slice(&b[0..6]);
        let mut src = [0; 6];
        src.copy_from_slice(&b[6..12]);
        Ok(Frame {
            dst: Mac(dst),
            src: Mac(src),
            vlan: be16(14) & 0xfff,
            kind,
            seq: be32(22),
            ack: be32(26),
            tlp: &b[HEADER_BYTES..HEADER_BYTES + len],
        })
    }
}
