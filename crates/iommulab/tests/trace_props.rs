//! Property tests of the trace formats: arbitrary valid event sequences round-trip
//! exactly through native and CSV (and gzip); damaged input — arbitrary bytes, truncation,
//! a flipped byte — is an error, never a panic and never a shorter trace.

use std::io::Write;

use iommulab::trace::csv::{CsvReader, CsvWriter};
use iommulab::trace::format::{NativeReader, NativeWriter};
use iommulab::trace::{Event, EventKind, EventSource, TraceDir, TraceError, TraceHeader};
use proptest::prelude::*;

const SINGLE_KINDS: [EventKind; 8] = [
    EventKind::Map,
    EventKind::Unmap,
    EventKind::DeviceRead,
    EventKind::DeviceWrite,
    EventKind::Alloc,
    EventKind::Free,
    EventKind::SyncForCpu,
    EventKind::SyncForDevice,
];

fn header() -> impl Strategy<Value = TraceHeader> {
    (
        prop::collection::btree_set("[a-z0-9:._-]{1,12}", 1..5),
        any::<String>(),
    )
        .prop_map(|(devices, source)| TraceHeader {
            devices: devices.into_iter().collect(),
            source,
        })
}

fn dir() -> impl Strategy<Value = TraceDir> {
    (0u8..4).prop_map(|d| TraceDir::from_u8(d).expect("0..4"))
}

/// One event of `kind` with arbitrary fields (small or any values, to exercise both short and
/// long varints).
fn event(kind: EventKind, devices: u16) -> impl Strategy<Value = Event> {
    let num = prop_oneof![0u64..5000, any::<u64>()];
    (
        num.clone(),
        any::<u16>(),
        0..devices,
        dir(),
        prop::option::of(num.clone()),
        prop::option::of(num.clone()),
        num,
    )
        .prop_map(move |(time_ns, cpu, device, dir, dma, phys, len)| Event {
            time_ns,
            cpu,
            device,
            kind,
            dir,
            dma,
            phys,
            len,
            nents: 0,
        })
}

/// A single event, or a `map_sg`/`unmap_sg` followed by its `nents` segments.
fn item(devices: u16) -> impl Strategy<Value = Vec<Event>> {
    prop_oneof![
        3 => (0..SINGLE_KINDS.len()).prop_flat_map(move |k| event(SINGLE_KINDS[k], devices)).prop_map(|e| vec![e]),
        1 => (any::<bool>(), 0u32..4).prop_flat_map(move |(map, n)| {
            let kind = if map { EventKind::MapSg } else { EventKind::UnmapSg };
            (
                event(kind, devices),
                prop::collection::vec(event(EventKind::SgSeg, devices), n as usize),
            )
                .prop_map(move |(mut head, segs)| {
                    head.nents = n;
                    let mut v = vec![head];
                    v.extend(segs);
                    v
                })
        }),
    ]
}

fn trace() -> impl Strategy<Value = (TraceHeader, Vec<Event>)> {
    header().prop_flat_map(|h| {
        let n = u16::try_from(h.devices.len()).expect("few devices");
        (
            Just(h),
            prop::collection::vec(item(n), 0..60).prop_map(|v| v.concat()),
        )
    })
}

fn to_native(h: &TraceHeader, ev: &[Event]) -> Vec<u8> {
    let mut w = NativeWriter::new(Vec::new(), h).expect("valid header");
    for e in ev {
        w.write(e).expect("valid event");
    }
    w.finish().expect("in memory")
}

fn to_csv(h: &TraceHeader, ev: &[Event]) -> Vec<u8> {
    let mut w = CsvWriter::new(Vec::new(), h).expect("valid header");
    for e in ev {
        w.write(e).expect("valid event");
    }
    w.finish().expect("in memory")
}

/// Reads to the end; at most `limit` events (arbitrary input cannot make more).
fn drain(src: &mut dyn EventSource, limit: usize) -> Result<Vec<Event>, TraceError> {
    let mut v = Vec::new();
    while let Some(e) = src.next_event()? {
        v.push(e);
        assert!(v.len() <= limit, "more events than input bytes");
    }
    Ok(v)
}

fn read_native(bytes: &[u8]) -> Result<(TraceHeader, Vec<Event>), TraceError> {
    let mut r = NativeReader::new(bytes, "p.iot".into())?;
    let ev = drain(&mut r, bytes.len())?;
    Ok((r.header().clone(), ev))
}

fn read_csv(bytes: &[u8]) -> Result<(TraceHeader, Vec<Event>), TraceError> {
    let mut r = CsvReader::new(bytes, "p.csv".into())?;
    let ev = drain(&mut r, bytes.len())?;
    Ok((r.header().clone(), ev))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Native → native is exact: same header, same events.
    #[test]
    fn native_round_trip_is_exact((h, ev) in trace()) {
        prop_assert_eq!(read_native(&to_native(&h, &ev)).unwrap(), (h, ev));
    }

    /// Native → CSV → native is exact, device table order included.
    #[test]
    fn csv_round_trip_is_exact((h, ev) in trace()) {
        let (h2, ev2) = read_native(&to_native(&h, &ev)).unwrap();
        let (h3, ev3) = read_csv(&to_csv(&h2, &ev2)).unwrap();
        let back = read_native(&to_native(&h3, &ev3)).unwrap();
        prop_assert_eq!(back, (h, ev));
    }

    /// Arbitrary bytes: an error or some events, never a panic.
    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let _ = read_native(&bytes);
        let _ = read_csv(&bytes);
    }

    /// Valid-looking input damaged in several places: still no panic.
    #[test]
    fn damaged_files_never_panic(
        (h, ev) in trace(),
        hits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
    ) {
        for mut bytes in [to_native(&h, &ev), to_csv(&h, &ev)] {
            for (i, b) in &hits {
                let i = i.index(bytes.len());
                bytes[i] = *b;
            }
            let _ = read_native(&bytes);
            let _ = read_csv(&bytes);
        }
    }

    /// A native file cut anywhere is an error (truncated or corrupt), never fewer events.
    #[test]
    fn truncated_native_is_an_error((h, ev) in trace(), cut in any::<prop::sample::Index>()) {
        let bytes = to_native(&h, &ev);
        let cut = cut.index(bytes.len());
        let r = read_native(&bytes[..cut]);
        prop_assert!(
            matches!(r, Err(TraceError::Truncated { .. } | TraceError::Corrupt { .. })),
            "cut at {} of {}: {:?}", cut, bytes.len(), r
        );
    }

    /// Any single changed byte of a native file is an error (the CRCs cover every byte).
    #[test]
    fn flipped_byte_is_an_error(
        (h, ev) in trace(),
        at in any::<prop::sample::Index>(),
        mask in 1u8..=255,
    ) {
        let mut bytes = to_native(&h, &ev);
        let i = at.index(bytes.len());
        bytes[i] ^= mask;
        let r = read_native(&bytes);
        prop_assert!(r.is_err(), "flip {:#x} at {}: {:?}", mask, i, r);
    }

    /// Stats invariants: each distinct page is cold exactly once, and every page mapping is
    /// either cold or has a reuse distance.
    #[test]
    fn stats_counters_add_up((h, mut ev) in trace()) {
        for e in &mut ev {
            e.len %= 1 << 16;
        }
        let bytes = to_native(&h, &ev);
        let s = iommulab::trace::stats(&mut NativeReader::new(&bytes[..], "p.iot".into()).unwrap()).unwrap();
        prop_assert_eq!(s.events, ev.len() as u64);
        // Generated device names are never `iommu`: everything is the DMA-API layer.
        prop_assert!(s.iommu.is_none());
        let d = &s.dma_api;
        prop_assert_eq!(d.reuse_cold, d.distinct_pages);
        prop_assert_eq!(d.page_maps, d.reuse_cold + d.reuse_distance.total());
        prop_assert_eq!(d.by_kind.values().sum::<u64>(), s.events);
        let maps = ev.iter().filter(|e| matches!(e.kind, EventKind::Map | EventKind::Alloc | EventKind::MapSg)).count();
        prop_assert_eq!(d.maps, maps as u64);
        prop_assert!(d.working_set_pages <= d.distinct_pages);
        // The devices' layers add up to the whole layer.
        prop_assert_eq!(s.dma_api_by_device.iter().map(|x| x.stats.maps).sum::<u64>(), d.maps);
        prop_assert_eq!(s.dma_api_by_device.iter().map(|x| x.stats.events).sum::<u64>(), d.events);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    /// A gzip-compressed native or CSV file (written by plain flate2) opens transparently.
    #[test]
    fn gzip_files_open_transparently((h, ev) in trace()) {
        let dir = tempfile::tempdir().unwrap();
        for (name, bytes) in [("t.iot.gz", to_native(&h, &ev)), ("t.csv.gz", to_csv(&h, &ev))] {
            let path = dir.path().join(name);
            let mut gz = flate2::write::GzEncoder::new(
                std::fs::File::create(&path).unwrap(),
                flate2::Compression::fast(),
            );
            gz.write_all(&bytes).unwrap();
            gz.finish().unwrap();
            let mut src = iommulab::trace::open_trace(&path).unwrap();
            let got = drain(&mut *src, usize::MAX).unwrap();
            prop_assert_eq!(src.header(), &h);
            prop_assert_eq!(&got, &ev);
        }
    }
}
