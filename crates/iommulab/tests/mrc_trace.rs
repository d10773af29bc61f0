//! Hit-rate curves of the committed real QEMU trace (`traces/`, see `real_trace.rs`) through
//! the library entry point `mrc::hit_rate_curve`:
//!
//! - the `.oracleGeneral` export's requests are exactly the page sequence the curves are
//!   computed on (same pages, same order): the trace holds `iommu:map` events repeating the
//!   `dma:` mappings, which both skip, and merged scatter-gather lists, which both expand
//!   the same way;
//! - the two views differ on a real trace: hundreds of pages are in flight, so the pinned map
//!   cache refuses maps and hits far less than the page sequence at small quotas.

use std::path::{Path, PathBuf};

use iommulab::create_trace;
use iommulab::mrc::{self, CurveRequest, MrcMethod, Quotas, hit_rate_curve, trace_page_refs};
use iommulab::trace::{
    Event, EventKind, MemorySource, TraceFormat, TraceHeader, copy_events, open,
};
use iommulab::virt::{EvictionConfig, LruConfig, PageRef};
use iommulab::workload::oracle_general::{OracleFormat, OracleGeneralWriter, RECORD_BYTES};

fn trace_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../traces/qemu-virtio-6.12.95+deb12-cloud-amd64.txt.zst")
}

fn refs() -> Vec<PageRef> {
    trace_page_refs(open(&trace_path(), TraceFormat::Auto, false).unwrap()).unwrap()
}

#[test]
fn oracle_general_export_is_the_page_sequence() {
    let seq: Vec<u64> = mrc::page_sequence(&refs())
        .iter()
        .filter_map(|r| match *r {
            PageRef::Map(g) => Some(g.get()),
            PageRef::Unmap(_) => None,
        })
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let og = dir.path().join("q.oracleGeneral");
    // As `iommulab trace convert` does.
    let mut src = open(&trace_path(), TraceFormat::Auto, false).unwrap();
    let mut dst = create_trace(&og, src.header()).unwrap();
    copy_events(&mut *src, &mut *dst).unwrap();
    dst.finish().unwrap();
    let bytes = std::fs::read(&og).unwrap();
    let exported: Vec<u64> = bytes
        .chunks(RECORD_BYTES)
        .map(|r| u64::from_le_bytes(r[4..12].try_into().unwrap()))
        .collect();
    assert!(seq.len() > 10_000, "{}", seq.len());
    assert_eq!(exported, seq);
}

#[test]
fn pinned_map_cache_hits_less_than_the_page_sequence_at_small_quotas() {
    let refs = refs();
    let req = |pinning| CurveRequest {
        policy: EvictionConfig::Lru(LruConfig::default()),
        pinning,
        quotas: Some(Quotas::List(vec![8, 64])),
    };
    let seq = hit_rate_curve(&refs, &req(false)).unwrap();
    let pinned = hit_rate_curve(&refs, &req(true)).unwrap();
    assert_eq!(
        (seq.method, pinned.method),
        (MrcMethod::StackDistance, MrcMethod::Simulation)
    );
    assert_eq!(
        (seq.maps, seq.distinct_pages),
        (pinned.maps, pinned.distinct_pages)
    );
    assert!(seq.max_pinned > Some(100), "{:?}", seq.max_pinned);
    for i in 0..2 {
        assert!(
            pinned.hit_rate[i] < seq.hit_rate[i],
            "quota {}: pinned {} vs page sequence {}",
            seq.quota[i],
            pinned.hit_rate[i],
            seq.hit_rate[i]
        );
        assert!(pinned.refused[i] > 0 && seq.refused[i] == 0);
    }
}

/// An event whose DMA address is its physical one (what identifies a mapping to the replay
/// does not matter here).
fn map(kind: EventKind, phys: Option<u64>, len: u64, nents: u32) -> Event {
    let mut e = Event::new(kind);
    e.phys = phys;
    e.dma = phys;
    e.len = len;
    e.nents = nents;
    e
}

/// Decodes 24-byte records into (time, obj, size, next).
fn records(bytes: &[u8]) -> Vec<(u32, u64, u32, i64)> {
    assert_eq!(bytes.len() % RECORD_BYTES, 0);
    bytes
        .chunks(RECORD_BYTES)
        .map(|r| {
            (
                u32::from_le_bytes(r[0..4].try_into().unwrap()),
                u64::from_le_bytes(r[4..12].try_into().unwrap()),
                u32::from_le_bytes(r[12..16].try_into().unwrap()),
                i64::from_le_bytes(r[16..24].try_into().unwrap()),
            )
        })
        .collect()
}

/// The request stream is the page sequence the replay maps, event shape by event shape:
/// merged scatter-gather lengths spread, a `map` without a physical address at its DMA
/// address, one without a DMA address skipped, a list cut short by another event or by
/// the end of the trace.
#[test]
fn requests_are_the_replays_page_sequence() {
    let mut events = Vec::new();
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for i in 0..3000u64 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let page = (x >> 20) % 97;
        let phys = (0x100 + page) << 12 | (x & 0xfff);
        let len = 1 + (x >> 40) % 9000;
        let mut e = map(EventKind::Map, Some(phys), len, 0);
        e.time_ns = i * 700_000_000;
        e.device = u16::from(!x.is_multiple_of(7)); // device 0 is `iommu`
        match x % 11 {
            0 => e.phys = None,
            1 => e.dma = None,
            2 => e.kind = EventKind::Unmap,
            3 | 4 => {
                e.kind = EventKind::MapSg;
                e.nents = 1 + u32::try_from((x >> 8) % 4).unwrap();
                e.len = 3 * 4096;
                events.push(e);
                for k in 0..e.nents {
                    // Cut a list short now and then (x % 13 == 0).
                    if k == 2 && x.is_multiple_of(13) {
                        break;
                    }
                    let mut s = map(EventKind::SgSeg, Some(phys + u64::from(k) * 0x3000), 0, 0);
                    s.len = if k == 0 { 4096 } else { 0 };
                    s.time_ns = e.time_ns;
                    s.device = e.device;
                    events.push(s);
                }
                continue;
            }
            _ => {}
        }
        events.push(e);
    }
    // The last list is cut short by the end of the trace.
    events.push(map(EventKind::MapSg, None, 8192, 3));
    events.push(map(EventKind::SgSeg, Some(0x55_000), 4096, 0));
    let header = TraceHeader {
        devices: vec!["iommu".into(), "0000:00:04.0".into()],
        source: "test".into(),
    };
    let refs = trace_page_refs(MemorySource::new(header.clone(), events.clone())).unwrap();
    let want: Vec<u64> = refs
        .iter()
        .filter_map(|r| match *r {
            PageRef::Map(g) => Some(g.get()),
            PageRef::Unmap(_) => None,
        })
        .collect();
    let mut w = OracleGeneralWriter::new(Vec::new(), OracleFormat::Binary);
    w.set_devices(&header.devices);
    for e in &events {
        w.write(e).unwrap();
    }
    assert!(w.skipped() > 0 && w.report().skipped_iommu_events > 0);
    let got = records(&w.finish().unwrap());
    assert!(want.len() > 3000, "{}", want.len());
    assert_eq!(got.iter().map(|r| r.1).collect::<Vec<_>>(), want);
    // Each request carries its mapping's time; next_access_vtime points at the next.
    assert!(got.windows(2).all(|w| w[0].0 <= w[1].0));
    for (i, r) in got.iter().enumerate() {
        if r.3 > 0 {
            let j = usize::try_from(r.3 - 1).unwrap();
            assert!(j > i && got[j].1 == r.1 && got[i + 1..j].iter().all(|o| o.1 != r.1));
        }
    }
}

/// `iommulab mrc TRACE --quotas ..` at a few quotas simulates while reading the trace
/// (`trace_hit_rate_curve`): on the real trace (merged scatter-gather lists, duplicate
/// `iommu:` events, hundreds of pages in flight) its curves are the whole-trace ones.
#[test]
fn streamed_curves_of_the_real_trace_equal_the_whole_trace_ones() {
    use iommulab::mrc::{curve_is_streamed, trace_hit_rate_curve};
    use iommulab::virt::{FifoConfig, OptConfig};
    let refs = refs();
    for policy in [
        EvictionConfig::Lru(LruConfig::default()),
        EvictionConfig::Fifo(FifoConfig::default()),
        EvictionConfig::Opt(OptConfig::default()),
    ] {
        // A few quotas (simulated per quota), and every quota (one pass, FIFO per quota).
        for quotas in [Some(Quotas::List(vec![0, 8, 64, 512, 100_000])), None] {
            let req = CurveRequest {
                policy: policy.clone(),
                pinning: false,
                quotas,
            };
            assert!(curve_is_streamed(&req));
            let src = open(&trace_path(), TraceFormat::Auto, false).unwrap();
            let streamed = trace_hit_rate_curve(src, &req).unwrap();
            let mut whole = hit_rate_curve(&refs, &req).unwrap();
            // The page-request path reads no unmaps: the most pages in flight are unknown.
            assert_eq!(streamed.max_pinned, None);
            assert!(whole.max_pinned > Some(100));
            whole.max_pinned = None;
            whole.method = streamed.method;
            assert_eq!(streamed, whole, "{policy:?}");
            assert!(streamed.hits[2] > 0);
        }
    }
}
