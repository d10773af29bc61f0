//! TCE units: bit-exact round trips for every field value, translation against a naive
//! model, Calgary never invalidating a single entry, and errors instead of panics.

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::calgary::{self, CalgaryTce};
use super::dart::{self, DartTce};
use super::*;

fn perm_of(i: u8) -> Perm {
    [Perm::Read, Perm::Write, Perm::ReadWrite][usize::from(i % 3)]
}

fn small() -> TceConfig {
    TceConfig {
        table_entries: 1 << 10,
        ..TceConfig::default()
    }
}

fn unit<F: TceFormat>() -> (Tce<F>, DomainId, Bdf) {
    let mut u = Tce::<F>::new(small()).unwrap();
    let (d, dev) = (DomainId::new(1), Bdf::new(0, 3, 0).unwrap());
    u.create_domain(d).unwrap();
    u.attach(dev, d).unwrap();
    (u, d, dev)
}

proptest! {
    /// Calgary: every field value survives encode → decode, and decode → encode gives back
    /// exactly the defined bits of any word.
    #[test]
    fn calgary_round_trip(rpn in 0u64..1 << calgary::RPN_BITS, hub in 0u8..64,
                          read: bool, write: bool, raw: u64) {
        let t = CalgaryTce { rpn, hub, write, read };
        prop_assert_eq!(CalgaryTce::from_raw(t.to_raw()), t);
        prop_assert_eq!(CalgaryTce::from_raw(raw).to_raw(), raw & calgary::DEFINED);
        prop_assert_eq!(t.to_raw() & !calgary::DEFINED, 0);
    }

    /// DART: the same for its 4-byte entry.
    #[test]
    fn dart_round_trip(rpn in 0u32..1 << dart::RPN_BITS, valid: bool, read_deny: bool,
                       write_deny: bool, raw: u32) {
        let t = DartTce { valid, read_deny, write_deny, rpn };
        prop_assert_eq!(DartTce::from_raw(t.to_raw()), t);
        prop_assert_eq!(DartTce::from_raw(raw).to_raw(), raw & dart::DEFINED);
    }

    /// Both formats: what `encode` writes, `decode` reads back.
    #[test]
    fn formats_round_trip_translations(frame in 0u64..1 << 24, p in 0u8..3, hub in 0u8..64) {
        let perm = perm_of(p);
        let c = CalgaryFormat::encode(Pfn::new(frame), perm, hub).unwrap();
        prop_assert_eq!(CalgaryFormat::decode(c), Some((Pfn::new(frame), perm)));
        let d = DartFormat::encode(Pfn::new(frame), perm, hub).unwrap();
        prop_assert_eq!(DartFormat::decode(d), Some((Pfn::new(frame), perm)));
    }

    /// A TCE unit translates like a map from page to (frame, perm), through any sequence
    /// of maps, unmaps and whole flushes (after which no stale entry survives).
    #[test]
    fn calgary_translates_like_a_naive_model(ops in prop::collection::vec(
        (0u8..3, 0u64..64, 1u64..4, 0u64..1 << 30, 0u8..3), 1..60)) {
        check_against_model::<CalgaryFormat>(&ops)?;
    }

    #[test]
    fn dart_translates_like_a_naive_model(ops in prop::collection::vec(
        (0u8..3, 0u64..64, 1u64..4, 0u64..1 << 20, 0u8..3), 1..60)) {
        check_against_model::<DartFormat>(&ops)?;
    }

    /// Whatever a flush policy asks for, Calgary performs only whole-cache flushes (S2.2).
    #[test]
    fn calgary_never_invalidates_a_single_entry(reqs in prop::collection::vec(
        (0u8..3, 0u64..1024, 0u8..6), 1..20)) {
        let (mut u, d, dev) = unit::<CalgaryFormat>();
        u.map_range(d, Pfn::new(0), Pfn::new(100), 8, Perm::ReadWrite).unwrap();
        for &(kind, pfn, order) in &reqs {
            let _ = u.translate(dev, Iova::new(pfn << 12), Access::Read);
            let r = match kind {
                0 => InvRequest::Page { domain: d, pfn: Pfn::new(pfn), order },
                1 => InvRequest::Domain(d),
                _ => InvRequest::Global,
            };
            u.invalidate(&[r]);
            prop_assert!(u.iotlb().is_empty());
        }
        let s = u.stats();
        prop_assert_eq!((s.inv_page, s.inv_domain), (0, 0));
        prop_assert_eq!(s.inv_global, reqs.len() as u64);
    }
}

fn check_against_model<F: TceFormat>(ops: &[(u8, u64, u64, u64, u8)]) -> Result<(), TestCaseError> {
    let (mut u, d, dev) = unit::<F>();
    let mut model: BTreeMap<u64, (u64, Perm)> = BTreeMap::new();
    for &(op, iova, pages, hpa, p) in ops {
        match op {
            0 => {
                let free = (iova..iova + pages).all(|i| !model.contains_key(&i));
                let r = u.map_range(d, Pfn::new(iova), Pfn::new(hpa), pages, perm_of(p));
                prop_assert_eq!(r.is_ok(), free);
                if free {
                    for i in 0..pages {
                        model.insert(iova + i, (hpa + i, perm_of(p)));
                    }
                }
            }
            1 => {
                let all = (iova..iova + pages).all(|i| model.contains_key(&i));
                let r = u.unmap_range(d, Pfn::new(iova), pages);
                prop_assert_eq!(r.is_ok(), all);
                if all {
                    for i in iova..iova + pages {
                        model.remove(&i);
                    }
                    // Invalidate as a driver must before reuse: widened to the unit's caps.
                    let req = u
                        .caps()
                        .widen(InvRequest::covering(d, Pfn::new(iova), pages));
                    u.invalidate(&[req]);
                }
            }
            _ => {}
        }
        for i in 0..70 {
            let want = model.get(&i).copied();
            prop_assert_eq!(
                u.lookup(d, Pfn::new(i)),
                want.map(|(f, p)| (Pfn::new(f), p))
            );
            let got = u.translate(dev, Iova::new((i << 12) | 0x5), Access::Read);
            match want {
                Some((f, p)) if p.allows(Access::Read) => {
                    prop_assert_eq!(got, Ok(Hpa::new((f << 12) | 0x5)));
                }
                Some(_) => prop_assert_eq!(got.unwrap_err().reason, FaultReason::ReadDenied),
                None => prop_assert_eq!(got.unwrap_err().reason, FaultReason::NotPresent),
            }
        }
    }
    Ok(())
}

#[test]
fn dart_refuses_frames_beyond_36_bits() {
    let (mut u, d, _) = unit::<DartFormat>();
    let e = u
        .map_range(d, Pfn::new(0), Pfn::new((1 << 24) - 1), 2, Perm::Read)
        .unwrap_err();
    assert_eq!(
        e,
        MapError::FrameBeyondTceReach {
            hpa: 1 << 36,
            bits: 36
        }
    );
    assert!(e.to_string().contains("36-bit reach"));
    assert_eq!(u.lookup(d, Pfn::new(0)), None, "nothing changed");
    // Calgary reaches 48 bits.
    let (mut c, d, _) = unit::<CalgaryFormat>();
    c.map_range(d, Pfn::new(0), Pfn::new(1 << 24), 1, Perm::Read)
        .unwrap();
    assert!(matches!(
        c.map_range(d, Pfn::new(1), Pfn::new(1 << 36), 1, Perm::Read),
        Err(MapError::FrameBeyondTceReach { bits: 48, .. })
    ));
}

#[test]
fn indices_out_of_table_are_errors_and_faults() {
    let (mut u, d, dev) = unit::<CalgaryFormat>();
    let e = u
        .map_range(d, Pfn::new(1023), Pfn::new(1), 2, Perm::Read)
        .unwrap_err();
    assert!(matches!(
        e,
        MapError::TceIndexOutOfTable { entries: 1024, .. }
    ));
    assert!(matches!(
        u.unmap_range(d, Pfn::new(u64::MAX), 1),
        Err(MapError::TceIndexOutOfTable { .. })
    ));
    let f = u
        .translate(dev, Iova::new(1024 << 12), Access::Read)
        .unwrap_err();
    assert_eq!(f.reason, FaultReason::BeyondAddressWidth);
    assert_eq!(u.address_bits(), 22);
}

#[test]
fn bad_configs_are_errors() {
    for entries in [0, 3, 1 << 53] {
        let cfg = TceConfig {
            table_entries: entries,
            ..TceConfig::default()
        };
        assert_eq!(
            Calgary::new(cfg).unwrap_err(),
            MapError::TceTableSize { entries }
        );
    }
    let cfg = TceConfig {
        hub_id: 64,
        ..small()
    };
    assert_eq!(
        Calgary::new(cfg).unwrap_err(),
        MapError::TceHubId { hub: 64 }
    );
}

/// The stale window of S2.4: after an unmap without a flush, the cached entry still
/// translates; the (whole) flush closes it, and costs Linux's quiesce-and-blast register
/// sequence on Calgary, one register write and poll on DART.
#[test]
fn stale_window_and_flush_costs() {
    let (mut u, d, dev) = unit::<CalgaryFormat>();
    u.map_range(d, Pfn::new(5), Pfn::new(9), 1, Perm::Write)
        .unwrap();
    assert!(u.translate(dev, Iova::new(5 << 12), Access::Write).is_ok());
    u.unmap_range(d, Pfn::new(5), 1).unwrap();
    assert!(u.cache_holds(d, Pfn::new(5)));
    assert!(u.translate(dev, Iova::new(5 << 12), Access::Write).is_ok());
    let before = u.cpu_cycles().get();
    u.invalidate(&[InvRequest::covering(d, Pfn::new(5), 1)]);
    let p = TcePrices::CALGARY_X460;
    assert_eq!(
        u.cpu_cycles().get() - before,
        4 * p.mmio_read + 3 * p.mmio_write
    );
    assert!(u.translate(dev, Iova::new(5 << 12), Access::Write).is_err());
    // DART invalidates the one entry, without quiescing.
    let (mut dart, d, _) = unit::<DartFormat>();
    let before = dart.cpu_cycles().get();
    dart.invalidate(&[InvRequest::covering(d, Pfn::new(5), 1)]);
    assert_eq!(dart.stats().inv_page, 1);
    let q = TcePrices::DART_CPC945;
    assert_eq!(dart.cpu_cycles().get() - before, q.mmio_write + q.mmio_read);
}

/// What a map + unmap of one page costs each unit as Linux drives it: Calgary two stores,
/// each with its line flush;
/// DART two stores, the build's sync and the entry's invalidation at map time (and the
/// stale entry is gone from DART's cache as soon as the slot is rebuilt, not at free).
#[test]
fn map_unmap_prices_differ_by_driver() {
    let (mut c, d, _) = unit::<CalgaryFormat>();
    c.map_range(d, Pfn::new(5), Pfn::new(9), 1, Perm::Write)
        .unwrap();
    c.unmap_range(d, Pfn::new(5), 1).unwrap();
    let p = TcePrices::CALGARY_X460;
    // tce_build and tce_free each flush the entry's line (flush_tce).
    assert_eq!(c.cpu_cycles().get(), 2 * (p.entry_store + p.entry_flush));
    assert!(p.entry_flush > 0);
    assert_eq!(c.stats().inv_page + c.stats().inv_global, 0);
    let (mut dart, d, dev) = unit::<DartFormat>();
    dart.map_range(d, Pfn::new(5), Pfn::new(9), 1, Perm::Write)
        .unwrap();
    assert!(
        dart.translate(dev, Iova::new(5 << 12), Access::Write)
            .is_ok()
    );
    dart.unmap_range(d, Pfn::new(5), 1).unwrap();
    let q = TcePrices::DART_CPC945;
    assert_eq!(
        dart.cpu_cycles().get(),
        2 * q.entry_store + q.build_sync + q.mmio_write + q.mmio_read
    );
    assert_eq!(dart.stats().inv_page, 1);
    // Freed without invalidation: the cached entry still translates until the slot is rebuilt.
    assert!(dart.cache_holds(d, Pfn::new(5)));
    dart.map_range(d, Pfn::new(5), Pfn::new(10), 1, Perm::Write)
        .unwrap();
    assert_eq!(
        dart.translate(dev, Iova::new(5 << 12), Access::Write),
        Ok(Hpa::new(10 << 12))
    );
}

/// DART's table is half Calgary's for the same I/O space (S2.3).
#[test]
fn dart_table_is_half_the_size() {
    let (c, _, _) = unit::<CalgaryFormat>();
    let (d, _, _) = unit::<DartFormat>();
    assert_eq!(c.table_bytes(), 8 * 1024);
    assert_eq!(d.table_bytes(), 4 * 1024);
}
