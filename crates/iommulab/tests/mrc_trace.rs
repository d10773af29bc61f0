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

use iommulab::mrc::{self, CurveRequest, MrcMethod, Quotas, hit_rate_curve, trace_page_refs};
use iommulab::trace::oracle_general::RECORD_BYTES;
use iommulab::trace::{TraceFormat, copy_events, create_trace, open};
use iommulab::virt::{EvictionConfig, LruConfig, PageRef};

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
    assert!(seq.max_pinned > 100, "{}", seq.max_pinned);
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
