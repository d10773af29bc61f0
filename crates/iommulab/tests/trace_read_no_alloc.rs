//! Reading a trace allocates nothing per event in steady state, by either path: the
//! guest's page runs through `Workload::for_each_op` (`iommulab mrc`'s reading thread) and
//! the replay's `next_op` (`iommulab replay`), from memory and from a native `.iot`: twice
//! the events, the same allocations.
//! The trace keeps 64 buffers in flight, single buffers and scatter-gather lists, so every
//! table stops growing once warm.

use iommulab::trace::{
    Event, EventKind, EventSource, MemorySource, NativeReader, NativeWriter, TraceDir, TraceHeader,
};
use iommulab::virt::{CacheOnly, for_each_guest_page_run};
use iommulab::workload::{InGuest, TraceWorkload, Workload};

#[global_allocator]
static ALLOC: alloc_counter::CountingAlloc = alloc_counter::CountingAlloc::new();

/// `ios` I/Os of one device, 64 in flight: every fourth a two-segment list, the others a
/// single buffer of 1 to 4 pages, each with a device access, at 1 µs apart.
fn trace(ios: u64) -> Vec<Event> {
    let ev = |kind, i: u64| Event {
        time_ns: i * 1000,
        cpu: (i % 2) as u16,
        device: 0,
        kind,
        dir: TraceDir::ToDevice,
        dma: None,
        phys: None,
        len: 0,
        nents: 0,
    };
    let phys = |i: u64| 0x4000_0000 + (i * 7919 % 4096) * 4096;
    let mut out = Vec::new();
    let mut io = |i: u64, unmap: bool| {
        let dma = Some(0x1_0000_0000 + (i % 64) * 0x10_0000);
        if i.is_multiple_of(4) {
            let kind = if unmap {
                EventKind::UnmapSg
            } else {
                EventKind::MapSg
            };
            out.push(Event {
                nents: 2,
                len: 8192,
                ..ev(kind, i)
            });
            for s in 0..2 {
                out.push(Event {
                    dma: dma.map(|d| d + s * 4096),
                    phys: Some(phys(i) + s * 0x10_0000),
                    len: 4096,
                    ..ev(EventKind::SgSeg, i)
                });
            }
        } else if unmap {
            out.push(Event {
                dma,
                len: 64,
                ..ev(EventKind::Unmap, i)
            });
        } else {
            out.push(Event {
                dma,
                phys: Some(phys(i)),
                len: 4096 * (1 + i % 4),
                ..ev(EventKind::Map, i)
            });
            out.push(Event {
                dma,
                len: 8,
                ..ev(EventKind::DeviceRead, i)
            });
        }
    };
    for i in 0..ios + 64 {
        if i >= 64 {
            io(i - 64, true);
        }
        if i < ios {
            io(i, false);
        }
    }
    out
}

/// Heap allocations of reading a trace of `ios` I/Os to its end (the events built, and for
/// `native` written as a `.iot`, beforehand), and how many units of work (page runs or ops)
/// it made. The native reader hands the replay its blocks' columns as decoded
/// (`EventSource::read_columns`), the memory source rows it splits: both are counted.
fn allocations(ios: u64, by_runs: bool, native: bool) -> (u64, u64) {
    let header = TraceHeader {
        devices: vec!["0000:01:00.0".into()],
        source: "test".into(),
    };
    let events = trace(ios);
    if native {
        let mut out = NativeWriter::new(Vec::new(), &header).unwrap();
        events.iter().for_each(|e| out.write(e).unwrap());
        let bytes = out.finish().unwrap();
        let src = NativeReader::new(&bytes[..], "t.iot".into()).unwrap();
        count(TraceWorkload::new(src), by_runs)
    } else {
        count(
            TraceWorkload::new(MemorySource::new(header, events)),
            by_runs,
        )
    }
}

fn count<S: EventSource>(mut w: TraceWorkload<S>, by_runs: bool) -> (u64, u64) {
    let before = alloc_counter::this_thread();
    let mut made = 0u64;
    if by_runs {
        let mut g = InGuest::new(w.mappings_only());
        for_each_guest_page_run(&mut g, CacheOnly::All, |r| {
            std::hint::black_box(r);
            made += 1;
        })
        .unwrap();
    } else {
        while let Some(op) = w.next_op().unwrap() {
            std::hint::black_box((op, w.sg_segments()));
            made += 1;
        }
    }
    (alloc_counter::this_thread() - before, made)
}

#[test]
fn reading_a_trace_allocates_nothing_per_event() {
    for native in [false, true] {
        for by_runs in [true, false] {
            let (a, made_a) = allocations(50_000, by_runs, native);
            let (b, made_b) = allocations(100_000, by_runs, native);
            assert!(made_b > 2 * made_a - 200, "{made_a} → {made_b}");
            assert_eq!(
                b,
                a,
                "50,000 more I/Os ({}, {}): {a} → {b} allocations",
                if by_runs { "page runs" } else { "next_op" },
                if native { "native" } else { "memory" }
            );
        }
    }
}
