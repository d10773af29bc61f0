//! The trace checker's IOMMU layer (`iommulab check`, and `iommulab replay`, which checks
//! the trace as it replays it) allocates nothing per event: the allocations it adds to the
//! DMA layer's are the same for twice as many events. The trace has no `iommu:` events, so
//! every map reaches the "not backed" path, where a finding beyond the first 64 held is only
//! counted. (The DMA layer's table of live mappings, a `BTreeMap`, allocates and frees nodes
//! as it churns: about one allocation per ten map/unmap pairs here.)

use iommulab::trace::check::{CheckOptions, check_source};
use iommulab::trace::{Event, EventKind, MemorySource, TraceDir, TraceHeader};

#[global_allocator]
static ALLOC: alloc_counter::CountingAlloc = alloc_counter::CountingAlloc::new();

/// `ios` map/unmap pairs of one device, 64 in flight, buffers of 1 to 4 pages.
fn trace(ios: u64) -> Vec<Event> {
    let mut out = Vec::new();
    let map = |i: u64| Event {
        time_ns: i * 1000,
        cpu: (i % 2) as u16,
        device: 0,
        kind: EventKind::Map,
        dir: TraceDir::ToDevice,
        dma: Some(0x1_0000_0000 + (i % 64) * 0x10_0000),
        phys: Some(0x4000_0000 + (i * 7919 % 4096) * 4096),
        len: 4096 * (1 + i % 4),
        nents: 0,
    };
    for i in 0..ios + 64 {
        if i >= 64 {
            let m = map(i - 64);
            out.push(Event {
                kind: EventKind::Unmap,
                time_ns: i * 1000 + 500,
                ..m
            });
        }
        if i < ios {
            out.push(map(i));
        }
    }
    out
}

/// Heap allocations of checking a trace of `ios` pairs (the events built beforehand), with
/// or without the IOMMU layer.
fn allocations_checking(ios: u64, iommu: bool) -> u64 {
    let header = TraceHeader {
        devices: vec!["0000:01:00.0".into()],
        source: "test".into(),
    };
    let mut src = MemorySource::new(header, trace(ios));
    let before = alloc_counter::this_thread();
    let options = CheckOptions {
        iommu,
        ..CheckOptions::default()
    };
    let report = check_source(&mut src, "t", &options).unwrap();
    let n = alloc_counter::this_thread() - before;
    assert!(report.is_clean(), "{}", report.to_text(5));
    n
}

#[test]
fn the_iommu_layer_check_allocates_nothing_per_event() {
    let added = |ios| allocations_checking(ios, true) - allocations_checking(ios, false);
    let (a, b) = (added(50_000), added(100_000));
    assert!(a > 0, "the held findings are allocated");
    assert_eq!(
        b, a,
        "50,000 more pairs: {a} → {b} allocations by the IOMMU layer"
    );
}
