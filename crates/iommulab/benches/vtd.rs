//! Wall-clock speed of the VT-d model's hot paths. Cases:
//!
//! - `vtd/map_unmap_4k`: `map` + `unmap` of one 4 KiB page on a 4-level table whose
//!   intermediate tables already exist (the steady state: no allocation).
//! - `vtd/map_unmap_range_64`: `map_range` + `unmap_range` of 64 pages.
//! - `vtd/translate_hit`: `translate` of a page the IOTLB and context cache hold.
//! - `vtd/translate_miss`: `translate` cycling over 4096 pages, far beyond the 256-entry IOTLB
//!   (LRU thrashes), so every call walks 4 levels.
//! - `iotlb/lookup_hit`, `iotlb/insert`: the IOTLB alone (32 × 8).
//!
//! Modeled cycles and hit ratios are not measured here; they come from the CLI.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use iommulab::addr::{Access, Bdf, DomainId, Hpa, Iova, PageSize, Perm, Pfn};
use iommulab::hw::iotlb::IotlbEntry;
use iommulab::hw::{Iotlb, IotlbConfig, Vtd, VtdConfig};

const D: DomainId = DomainId::new(1);

fn dev() -> Bdf {
    Bdf::new(0, 1, 0).unwrap()
}

fn setup(pages: u64) -> Vtd {
    let mut m = Vtd::new(VtdConfig::default()).unwrap();
    m.create_domain(D).unwrap();
    m.attach(dev(), D).unwrap();
    if pages > 0 {
        m.map_range(
            D,
            Pfn::new(0x10_0000),
            Pfn::<Hpa>::new(0x5000),
            pages,
            Perm::ReadWrite,
        )
        .unwrap();
    }
    m
}

fn vtd(c: &mut Criterion) {
    let mut g = c.benchmark_group("vtd");

    let mut m = setup(1); // builds the intermediate tables
    let pfn = Pfn::<Iova>::new(0x10_0001);
    g.bench_function("map_unmap_4k", |b| {
        b.iter(|| {
            m.map(
                D,
                black_box(pfn),
                Pfn::new(0x77),
                PageSize::Size4K,
                Perm::Read,
            )
            .unwrap();
            black_box(m.unmap(D, black_box(pfn)).unwrap());
        })
    });

    let mut m = setup(1);
    let start = Pfn::<Iova>::new(0x10_0100);
    g.bench_function("map_unmap_range_64", |b| {
        b.iter(|| {
            m.map_range(D, black_box(start), Pfn::new(0x77), 64, Perm::Read)
                .unwrap();
            m.unmap_range(D, black_box(start), 64).unwrap();
        })
    });

    let mut m = setup(1);
    let addr = Iova::new(0x10_0000 << 12 | 0x80);
    m.translate(dev(), addr, Access::Read).unwrap();
    g.bench_function("translate_hit", |b| {
        b.iter(|| black_box(m.translate(dev(), black_box(addr), Access::Read).unwrap()))
    });

    const N: u64 = 4096;
    let mut m = setup(N);
    let mut i = 0u64;
    g.bench_function("translate_miss", |b| {
        b.iter(|| {
            i = (i + 1) % N;
            let a = Iova::new((0x10_0000 + i) << 12);
            black_box(m.translate(dev(), black_box(a), Access::Write).unwrap())
        })
    });
    let s = m.stats().iotlb;
    assert!(
        s.hits * 100 <= s.lookups,
        "translate_miss should miss: {s:?}"
    );
    g.finish();
}

fn iotlb(c: &mut Criterion) {
    let mut g = c.benchmark_group("iotlb");
    let entry = |p: u64| IotlbEntry {
        domain: D,
        iova: Pfn::new(p),
        hpa: Pfn::new(p + 7),
        perm: Perm::Read,
        size: PageSize::Size4K,
    };
    let mut t = Iotlb::new(IotlbConfig::default()).unwrap();
    for p in 0..256 {
        t.insert(entry(p));
    }
    let mut i = 0u64;
    g.bench_function("lookup_hit", |b| {
        b.iter(|| {
            i = (i + 1) & 255;
            black_box(t.lookup(D, black_box(Pfn::new(i))))
        })
    });
    let mut i = 0u64;
    g.bench_function("insert", |b| {
        b.iter(|| {
            i += 1;
            t.insert(black_box(entry(i)));
        })
    });
    g.finish();
}

criterion_group!(benches, vtd, iotlb);
criterion_main!(benches);
