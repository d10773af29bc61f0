//! The software path of one `map_single` + `unmap_single` pair (4 KiB buffer, one thread):
//! IOVA allocation and free, page-table writes in the VT-d model, the flush policy's work.
//! The modeled hardware cycles are not time here: this measures iommulab's own code.
//!
//! Cases (group `dma/map_unmap_4k`): `modern` (magazines + flush queue), `bitmap` (per-lap),
//! `default` (rbtree + deferred 250/10 ms), `strict` (rbtree + strict), `strict-bitmap`.
//!
//! Group `dma/alloc_and_flush_4k` (called `dma/software_path_4k` until 2026-11-26, a name
//! that promised the whole software path): the same pairs without the page table, i.e. only
//! IOVA allocation, and at unmap the flush policy's bookkeeping and the deferred frees
//! (invalidations still go to the IOTLB model, which is what a flush costs the simulator;
//! they are rare except for strict). No PTE is written or cleared: the whole pair, page
//! table included, is `dma/map_unmap_4k`.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use iommulab::addr::{Bdf, CpuId, DmaDirection, Hpa, Pfn};
use iommulab::clock::{ClockRate, Cycles};
use iommulab::dma::{DmaApi, DmaConfig, Native};
use iommulab::flush::{
    Deferred, DeferredConfig, FlushPolicy, FlushQueue, FlushQueueConfig, PerLap, Strict,
};
use iommulab::hw::cost::CostModel;
use iommulab::hw::vtd::{Vtd, VtdConfig};
use iommulab::iova::{Bitmap, IovaAllocator, Magazine, MagazineConfig, RbTree};

const PAIRS: u64 = 10_000;

fn api<A: IovaAllocator, F: FlushPolicy>(a: A, f: F) -> DmaApi<A, F> {
    let iommu = Vtd::new(VtdConfig {
        cost: CostModel::MODERN,
        ..VtdConfig::default()
    })
    .unwrap();
    DmaApi::new(DmaConfig::default(), Native::new(iommu), a, f)
}

fn space() -> (Pfn<iommulab::addr::Iova>, Pfn<iommulab::addr::Iova>) {
    (Pfn::new(1), Pfn::new(1 << 20))
}

fn bench_one<A: IovaAllocator, F: FlushPolicy>(
    c: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    name: &str,
    mut api: DmaApi<A, F>,
) {
    let dev = api.attach(Bdf::new(0, 1, 0).unwrap()).unwrap();
    let cpu = CpuId::new(0);
    let mut i: u64 = 0;
    let mut now = Cycles::ZERO;
    c.bench_function(name, |b| {
        b.iter(|| {
            for _ in 0..PAIRS {
                i = i.wrapping_add(1);
                let phys = Hpa::new(0x4000_0000 + (i & 4095) * 4096);
                let a = api
                    .map_single(dev, cpu, black_box(phys), 4096, DmaDirection::ToDevice)
                    .unwrap();
                api.unmap_single(dev, cpu, a, 4096, DmaDirection::ToDevice)
                    .unwrap();
            }
            // 10 ms of simulated time per batch lets the timers run as they would.
            now = now + Cycles::new(30_000_000);
            api.tick(now).unwrap();
        })
    });
}

fn map_unmap(c: &mut Criterion) {
    let mut g = c.benchmark_group("dma/map_unmap_4k");
    g.throughput(Throughput::Elements(PAIRS));
    let (s, e) = space();
    let mag = MagazineConfig {
        cpus: 1,
        ..MagazineConfig::default()
    };
    bench_one(
        &mut g,
        "modern",
        api(
            Magazine::new(RbTree::new(s, e).unwrap(), mag).unwrap(),
            FlushQueue::new(FlushQueueConfig::default(), 1, ClockRate::ghz(3.0)),
        ),
    );
    bench_one(
        &mut g,
        "bitmap",
        api(Bitmap::new(s, e).unwrap(), PerLap::new()),
    );
    bench_one(
        &mut g,
        "default",
        api(
            RbTree::new(s, e).unwrap(),
            Deferred::new(DeferredConfig::default(), ClockRate::ghz(3.0)),
        ),
    );
    bench_one(
        &mut g,
        "strict",
        api(RbTree::new(s, e).unwrap(), Strict::new()),
    );
    bench_one(
        &mut g,
        "strict-bitmap",
        api(Bitmap::new(s, e).unwrap(), Strict::new()),
    );
    g.finish();
}

fn alloc_and_flush_one<A: IovaAllocator, F: FlushPolicy>(
    c: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    name: &str,
    a: A,
    mut f: F,
) {
    use iommulab::addr::{DomainId, PAGE_4K};
    use iommulab::flush::{FlushCtx, Unmapped};
    let mut iommu = Vtd::new(VtdConfig {
        cost: CostModel::MODERN,
        ..VtdConfig::default()
    })
    .unwrap();
    let domain = DomainId::new(1);
    iommu.create_domain(domain).unwrap();
    let mut iommu = Native::new(iommu);
    let cpu = CpuId::new(0);
    let limit = Pfn::new(1 << 20);
    let mut now = Cycles::ZERO;
    // Domain 1's allocator, as the DMA layer holds it.
    let mut a = [a];
    c.bench_function(name, |b| {
        b.iter(|| {
            for _ in 0..PAIRS {
                let pfn = a[0]
                    .alloc(cpu, black_box(PAGE_4K.pages_spanned(0, 4096)), limit)
                    .unwrap();
                let mut ctx = FlushCtx {
                    backend: &mut iommu,
                    iovas: &mut a,
                    now,
                };
                f.on_unmap(
                    &mut ctx,
                    cpu,
                    Unmapped {
                        domain,
                        pfn,
                        pages: 1,
                    },
                )
                .unwrap();
            }
            now = now + Cycles::new(30_000_000);
            let mut ctx = FlushCtx {
                backend: &mut iommu,
                iovas: &mut a,
                now,
            };
            f.on_tick(&mut ctx).unwrap();
            a[0].on_tick(now, ClockRate::ghz(3.0));
        })
    });
}

fn alloc_and_flush(c: &mut Criterion) {
    let mut g = c.benchmark_group("dma/alloc_and_flush_4k");
    g.throughput(Throughput::Elements(PAIRS));
    let (s, e) = space();
    let mag = MagazineConfig {
        cpus: 1,
        ..MagazineConfig::default()
    };
    alloc_and_flush_one(
        &mut g,
        "modern",
        Magazine::new(RbTree::new(s, e).unwrap(), mag).unwrap(),
        FlushQueue::new(FlushQueueConfig::default(), 1, ClockRate::ghz(3.0)),
    );
    alloc_and_flush_one(&mut g, "bitmap", Bitmap::new(s, e).unwrap(), PerLap::new());
    alloc_and_flush_one(
        &mut g,
        "default",
        RbTree::new(s, e).unwrap(),
        Deferred::new(DeferredConfig::default(), ClockRate::ghz(3.0)),
    );
    alloc_and_flush_one(&mut g, "strict", RbTree::new(s, e).unwrap(), Strict::new());
    g.finish();
}

criterion_group!(benches, map_unmap, alloc_and_flush);
criterion_main!(benches);
