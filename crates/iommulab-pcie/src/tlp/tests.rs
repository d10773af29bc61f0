//! Golden byte vectors derived by hand from the field layout of the PCI Express Base
//! Specification 2.1 §2.2 (each derivation is spelled out beside its bytes), round-trip
//! property tests, and malformed TLPs rejected with a reason.

use super::*;
use proptest::prelude::*;

fn bdf(bus: u8, dev: u8, func: u8) -> Bdf {
    Bdf::new(bus, dev, func).unwrap()
}

fn roundtrip(t: &Tlp<'_>) -> Vec<u8> {
    let mut buf = [0u8; MAX_TLP_BYTES];
    let n = t.encode(&mut buf).unwrap();
    assert_eq!(n, t.encoded_len());
    let back = Tlp::decode(&buf[..n]).unwrap();
    assert_eq!(&back, t);
    buf[..n].to_vec()
}

#[test]
fn golden_mrd_3dw() {
    // MRd, requester 01:00.0, tag 0x0c, 1 DW, First BE 1111b, address 0xf000_0010.
    // byte 0: Fmt 000b (3 DW, no data) | Type 0_0000b (memory)      = 0x00
    // byte 1: TC 000b, Attr[2] 0, TH 0                               = 0x00
    // byte 2: TD 0, EP 0, Attr 00b, AT 00b, Length[9:8] 00b          = 0x00
    // byte 3: Length[7:0] = 1                                        = 0x01
    // bytes 4-5: requester id 01:00.0 = bus 0x01, devfn 0x00         = 01 00
    // byte 6: tag                                                    = 0c
    // byte 7: Last DW BE 0000b (1 DW) | First DW BE 1111b            = 0x0f
    // bytes 8-11: address[31:2] | PH 00b                             = f0 00 00 10
    let t = Tlp::MemRead(MemRequest::new(bdf(1, 0, 0), 0x0c, 0xf000_0010, 1));
    assert_eq!(
        roundtrip(&t),
        [
            0x00, 0x00, 0x00, 0x01, 0x01, 0x00, 0x0c, 0x0f, 0xf0, 0x00, 0x00, 0x10
        ]
    );
}

#[test]
fn golden_mwr_4dw_no_snoop() {
    // MWr, requester 00:02.0, tag 0, 2 DW, BEs 1111b/1111b, address 0x1_2345_6788, No Snoop.
    // byte 0: Fmt 011b (4 DW, data) | Type 0_0000b                   = 0x60
    // byte 1: TC 0                                                   = 0x00
    // byte 2: Attr[0] (No Snoop) is bit 4                            = 0x10
    // byte 3: Length 2                                               = 0x02
    // bytes 4-5: 00:02.0 = bus 0x00, devfn 2 << 3 | 0 = 0x10         = 00 10
    // byte 6: tag 0; byte 7: Last BE 1111b | First BE 1111b          = 00 ff
    // bytes 8-11: address[63:32] = 0x0000_0001                       = 00 00 00 01
    // bytes 12-15: address[31:2] | 00b = 0x2345_6788                 = 23 45 67 88
    // bytes 16-23: the data
    let mut m = MemRequest::new(bdf(0, 2, 0), 0, 0x1_2345_6788, 2);
    m.attr.no_snoop = true;
    let data = [1, 2, 3, 4, 5, 6, 7, 8];
    let t = Tlp::MemWrite(m, &data);
    assert_eq!(
        roundtrip(&t),
        [
            0x60, 0x00, 0x10, 0x02, 0x00, 0x10, 0x00, 0xff, 0x00, 0x00, 0x00, 0x01, 0x23, 0x45,
            0x67, 0x88, 1, 2, 3, 4, 5, 6, 7, 8
        ]
    );
}

#[test]
fn golden_mwr_1024_dw_encodes_length_zero() {
    // Length 1024 DW is the 10-bit field 00_0000_0000b: byte 2 bits 1:0 = 00, byte 3 = 00.
    let data = [0xabu8; 4096];
    let t = Tlp::MemWrite(MemRequest::new(bdf(0, 1, 0), 7, 0x8000_0000, 1024), &data);
    let b = roundtrip(&t);
    assert_eq!(&b[..4], [0x40, 0x00, 0x00, 0x00]);
    assert_eq!(b.len(), 12 + 4096);
}

#[test]
fn golden_cfgrd0_extended_register() {
    // CfgRd0 from 00:00.0, tag 1, to 02:03.1, offset 0x104 (DW 0x41), First BE 1111b.
    // byte 0: Fmt 000b | Type 0_0100b                                = 0x04
    // bytes 1-2: TC, Attr, AT must be 0; byte 3: Length 1            = 00 00 01
    // bytes 4-5: requester 00:00.0; byte 6: tag 1; byte 7: BE 0|1111b = 00 00 01 0f
    // bytes 8-9: completer 02:03.1 = bus 0x02, devfn 3 << 3 | 1 = 0x19 = 02 19
    // byte 10: Extended Register Number = 0x41 >> 6 = 1              = 01
    // byte 11: Register Number = 0x41 & 0x3f = 1, in bits 7:2 → 0x04 = 04
    let t = Tlp::ConfigRead(ConfigRequest {
        kind: ConfigKind::Type0,
        requester: bdf(0, 0, 0),
        tag: 1,
        target: bdf(2, 3, 1),
        register: 0x104 / 4,
        first_be: 0xf,
    });
    assert_eq!(
        roundtrip(&t),
        [
            0x04, 0x00, 0x00, 0x01, 0x00, 0x00, 0x01, 0x0f, 0x02, 0x19, 0x01, 0x04
        ]
    );
}

#[test]
fn golden_cfgwr1() {
    // CfgWr1 to 05:00.0, register 0x10 (BAR0, DW 4), BE 1111b, data 0xffff_ffff (sizing).
    // byte 0: Fmt 010b | Type 0_0101b = 0100_0101b                   = 0x45
    // byte 11: Register Number 4 << 2                                = 0x10
    let t = Tlp::ConfigWrite(
        ConfigRequest {
            kind: ConfigKind::Type1,
            requester: bdf(0, 0, 0),
            tag: 2,
            target: bdf(5, 0, 0),
            register: 4,
            first_be: 0xf,
        },
        [0xff; 4],
    );
    assert_eq!(
        roundtrip(&t),
        [
            0x45, 0x00, 0x00, 0x01, 0x00, 0x00, 0x02, 0x0f, 0x05, 0x00, 0x00, 0x10, 0xff, 0xff,
            0xff, 0xff
        ]
    );
}

#[test]
fn golden_cpld_and_cpl_ur() {
    // CplD from 01:00.0 to 00:00.0, tag 0x0c, 64 bytes at lower address 0x10, 16 DW.
    // byte 0: Fmt 010b | Type 0_1010b = 0100_1010b                   = 0x4a
    // byte 3: Length 16                                              = 0x10
    // bytes 4-5: completer 01:00.0                                   = 01 00
    // byte 6: Status 000b, BCM 0, Byte Count[11:8] 0; byte 7: 64     = 00 40
    // bytes 8-9: requester 00:00.0; byte 10: tag; byte 11: 0x10      = 00 00 0c 10
    let data = [0x5a; 64];
    let c = Completion::new(bdf(1, 0, 0), bdf(0, 0, 0), 0x0c, 64, 0x10);
    let b = roundtrip(&Tlp::CompletionData(c, &data));
    assert_eq!(
        &b[..12],
        [
            0x4a, 0x00, 0x00, 0x10, 0x01, 0x00, 0x00, 0x40, 0x00, 0x00, 0x0c, 0x10
        ]
    );
    // Cpl (no data) with Unsupported Request, byte count 4:
    // byte 0: Fmt 000b | Type 0_1010b = 0x0a; byte 6: Status 001b << 5 = 0x20; byte 7: 4.
    let mut c = Completion::new(bdf(1, 0, 0), bdf(0, 0, 0), 3, 4, 0);
    c.status = CompletionStatus::UnsupportedRequest;
    assert_eq!(
        roundtrip(&Tlp::Completion(c)),
        [
            0x0a, 0x00, 0x00, 0x00, 0x01, 0x00, 0x20, 0x04, 0x00, 0x00, 0x03, 0x00
        ]
    );
    // Byte count 4096 encodes as 0.
    let c = Completion::new(bdf(1, 0, 0), bdf(0, 0, 0), 3, 4096, 0);
    let b = roundtrip(&Tlp::Completion(c));
    assert_eq!((b[6] & 0xf, b[7]), (0, 0));
}

#[test]
fn malformed_tlps_are_rejected_with_the_field() {
    let good = [
        0x00u8, 0x00, 0x00, 0x01, 0x01, 0x00, 0x0c, 0x0f, 0xf0, 0x00, 0x00, 0x10,
    ];
    assert!(Tlp::decode(&good).is_ok());
    let with = |i: usize, v: u8| {
        let mut b = good;
        b[i] = v;
        Tlp::decode(&b).unwrap_err().to_string()
    };
    // Last DW BE must be 0 for a 1 DW request.
    assert!(with(7, 0x1f).contains("Last DW BE"), "{}", with(7, 0x1f));
    // TD (ECRC) is not modeled; AT 11b is reserved; TH is not modeled.
    assert!(with(2, 0x80).contains("TD"));
    assert!(with(2, 0x0c).contains("AT"));
    assert!(with(1, 0x01).contains("TH"));
    // A TLP prefix and a message type.
    assert!(with(0, 0x80).contains("Fmt"));
    assert!(with(0, 0x30).contains("Type 10000b"));
    // Length 2 says the header is followed by nothing, but a 2 DW read at 0xf0000010 needs
    // contiguous enables: 0x0f then 0x?f with a non-zero last BE is fine; zero last BE is not.
    let e = with(3, 0x02);
    assert!(e.contains("Last DW BE") && e.contains("non-zero"), "{e}");
    // Truncated and over-long.
    assert!(matches!(
        Tlp::decode(&good[..11]),
        Err(TlpError::Truncated { .. })
    ));
    let mut long = good.to_vec();
    long.push(0);
    assert!(matches!(
        Tlp::decode(&long),
        Err(TlpError::LengthMismatch { .. })
    ));
    // A 4 KiB crossing: 2 DW at 0x...ffc.
    let mut b = good;
    b[3] = 2;
    b[7] = 0xff;
    b[10] = 0x0f;
    b[11] = 0xfc;
    assert!(matches!(Tlp::decode(&b), Err(TlpError::CrossesPage { .. })));
    // A 64-bit header for an address below 4 GiB.
    let b = [0x20, 0, 0, 1, 0, 0, 0, 0x0f, 0, 0, 0, 0, 0x10, 0, 0, 0];
    assert!(matches!(
        Tlp::decode(&b),
        Err(TlpError::LongAddressBelow4G { .. })
    ));
    // A configuration request with TC 1 and one with Length 2.
    let cfg = [0x04u8, 0x10, 0, 1, 0, 0, 1, 0x0f, 2, 0x19, 1, 4];
    assert!(Tlp::decode(&cfg).unwrap_err().to_string().contains("TC"));
    let cfg = [0x04u8, 0x00, 0, 2, 0, 0, 1, 0x0f, 2, 0x19, 1, 4];
    assert!(
        Tlp::decode(&cfg)
            .unwrap_err()
            .to_string()
            .contains("Length")
    );
    // A completion with data and status UR; a reserved completion status.
    let mut cpl = vec![0x4au8, 0, 0, 1, 1, 0, 0x20, 4, 0, 0, 3, 0];
    cpl.extend([0; 4]);
    assert!(
        Tlp::decode(&cpl)
            .unwrap_err()
            .to_string()
            .contains("Completion Status")
    );
    let cpl = [0x0au8, 0, 0, 0, 1, 0, 0x60, 4, 0, 0, 3, 0];
    assert!(
        Tlp::decode(&cpl)
            .unwrap_err()
            .to_string()
            .contains("reserved")
    );
    // CplD carrying more DW than the byte count leaves.
    let mut cpl = vec![0x4au8, 0, 0, 2, 1, 0, 0x00, 4, 0, 0, 3, 0];
    cpl.extend([0; 8]);
    assert!(
        Tlp::decode(&cpl)
            .unwrap_err()
            .to_string()
            .contains("Byte Count")
    );
}

#[test]
fn encode_checks_the_same_rules_and_the_buffer() {
    let mut buf = [0u8; 64];
    let m = MemRequest::new(bdf(0, 1, 0), 0, 0x1002, 1);
    assert!(
        Tlp::MemRead(m)
            .encode(&mut buf)
            .unwrap_err()
            .to_string()
            .contains("Address[1:0]")
    );
    let m = MemRequest::new(bdf(0, 1, 0), 0, 0x1000, 2);
    let e = Tlp::MemWrite(m, &[0; 4]).encode(&mut buf).unwrap_err();
    assert!(matches!(e, TlpError::LengthMismatch { .. }), "{e}");
    let e = Tlp::MemWrite(m, &[0; 8])
        .encode(&mut buf[..10])
        .unwrap_err();
    assert!(matches!(
        e,
        TlpError::BufferTooSmall {
            needed: 20,
            got: 10
        }
    ));
}

fn any_bdf() -> impl Strategy<Value = Bdf> {
    any::<u16>().prop_map(bdf_from_id)
}

fn any_attr() -> impl Strategy<Value = Attr> {
    (any::<bool>(), any::<bool>(), any::<bool>()).prop_map(|(r, n, i)| Attr {
        relaxed_ordering: r,
        no_snoop: n,
        id_based_ordering: i,
    })
}

fn any_at() -> impl Strategy<Value = AddressType> {
    prop_oneof![
        Just(AddressType::Untranslated),
        Just(AddressType::TranslationRequest),
        Just(AddressType::Translated)
    ]
}

/// Every well-formed memory request: any length, any page, any DW offset that stays in the
/// page, and byte enables the rules allow for that length and alignment.
fn any_mem() -> impl Strategy<Value = MemRequest> {
    (
        1u16..=1024,
        any::<u64>(),
        any_bdf(),
        any::<u8>(),
        0u8..8,
        any_attr(),
        any_at(),
        any::<bool>(),
    )
        .prop_flat_map(|(len, a, requester, tag, tc, attr, at, poisoned)| {
            let max_off_dw = 1024 - u64::from(len);
            (0..=max_off_dw, 0u8..16, 0u8..16, any::<bool>()).prop_map(move |(off, fb, lb, low)| {
                // Half the requests below 4 GiB (3 DW header), half above.
                let page = if low {
                    a & 0xffff_f000 & 0xffff_ffff
                } else {
                    (a | 1 << 32) & !0xfff
                };
                let address = page | (off * 4);
                let (first_be, last_be) = match len {
                    1 => (fb, 0),
                    2 if address & 7 == 0 => (fb.max(1), lb.max(1)),
                    _ => (
                        [0xf, 0xe, 0xc, 0x8][fb as usize % 4],
                        [0xf, 0x7, 0x3, 0x1][lb as usize % 4],
                    ),
                };
                MemRequest {
                    requester,
                    tag,
                    address,
                    length_dw: len,
                    first_be,
                    last_be,
                    tc,
                    attr,
                    at,
                    poisoned,
                }
            })
        })
}

proptest! {
    #[test]
    fn memory_requests_round_trip(m in any_mem(), seed in any::<u8>()) {
        let payload: Vec<u8> = (0..m.bytes()).map(|i| (i as u8).wrapping_add(seed)).collect();
        for t in [Tlp::MemRead(m), Tlp::MemWrite(m, &payload)] {
            let mut buf = [0u8; MAX_TLP_BYTES];
            let n = t.encode(&mut buf).unwrap();
            prop_assert_eq!(n, m.header_len() + if matches!(t, Tlp::MemWrite(..)) { payload.len() } else { 0 });
            prop_assert_eq!(Tlp::decode(&buf[..n]).unwrap(), t);
        }
    }

    #[test]
    fn config_requests_round_trip(
        type1 in any::<bool>(), requester in any_bdf(), target in any_bdf(), tag in any::<u8>(),
        register in 0u16..1024, first_be in 0u8..16, data in any::<[u8; 4]>(),
    ) {
        let c = ConfigRequest {
            kind: if type1 { ConfigKind::Type1 } else { ConfigKind::Type0 },
            requester, tag, target, register, first_be,
        };
        for t in [Tlp::ConfigRead(c), Tlp::ConfigWrite(c, data)] {
            let mut buf = [0u8; 16];
            let n = t.encode(&mut buf).unwrap();
            prop_assert_eq!(Tlp::decode(&buf[..n]).unwrap(), t);
        }
    }

    #[test]
    fn completions_round_trip(
        completer in any_bdf(), requester in any_bdf(), tag in any::<u8>(), byte_count in 1u16..=4096,
        lower_address in 0u8..128, tc in 0u8..8, attr in any_attr(), poisoned in any::<bool>(),
        bcm in any::<bool>(), dw_frac in 0.0f64..1.0,
    ) {
        let c = Completion { completer, status: CompletionStatus::Successful, bcm, byte_count,
            requester, tag, lower_address, tc, attr, poisoned };
        let max_dw = ((u32::from(lower_address & 3) + u32::from(byte_count)).div_ceil(4)).min(1024);
        let dw = 1 + ((f64::from(max_dw - 1)) * dw_frac) as usize;
        let payload = vec![0xa5u8; dw * 4];
        for t in [Tlp::Completion(c), Tlp::CompletionData(c, &payload)] {
            let mut buf = [0u8; MAX_TLP_BYTES];
            let n = t.encode(&mut buf).unwrap();
            prop_assert_eq!(Tlp::decode(&buf[..n]).unwrap(), t);
        }
    }

    /// Any bytes at all: decoding returns a TLP or a reason, never panics; and what decodes
    /// re-encodes to bytes that decode to the same TLP (reserved bits cleared).
    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
        if let Ok(t) = Tlp::decode(&bytes) {
            let mut buf = [0u8; MAX_TLP_BYTES];
            let n = t.encode(&mut buf).unwrap();
            prop_assert_eq!(Tlp::decode(&buf[..n]).unwrap(), t);
        }
    }

    /// Reserved bits are ignored by the receiver (§2.2.1), not treated as malformed.
    #[test]
    fn reserved_bits_are_ignored(m in any_mem(), r in 0u8..8) {
        let t = Tlp::MemRead(m);
        let mut buf = [0u8; 16];
        let n = t.encode(&mut buf).unwrap();
        // byte 1 bits 7, 3 and 1 are reserved (T9, T8, LN in later revisions).
        buf[1] |= ((r & 1) << 7) | ((r & 2) << 2) | (r & 4) >> 1;
        prop_assert_eq!(Tlp::decode(&buf[..n]).unwrap(), t);
    }
}
