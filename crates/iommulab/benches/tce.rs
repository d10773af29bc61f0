//! Wall-clock speed of the TCE units (Calgary, DART, S2.1–S2.3) against VT-d on the same
//! configuration. Cases:
//!
//! - `tce_unit/map_unmap_4k/{vtd,calgary,dart}`: the unit alone, `map_range` + `unmap_range`
//!   of one page (VT-d with its intermediate tables already built: the steady state).
//! - `tce_unit/map_unmap_range_64/{vtd,calgary,dart}`: 64 pages.
//! - `tce_dma/map_unmap_4k/{vtd,calgary,dart}`: the whole software path of one
//!   `map_single` + `unmap_single` through the DMA API with the "bitmap" configuration
//!   (next-fit bitmap + per-lap flush: Linux's Calgary allocator, S2.4), 10,000 pairs per
//!   iteration.
//!
//! This measures iommulab's own code, not modeled cycles.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use iommulab::addr::{Bdf, CpuId, DmaDirection, DomainId, Hpa, Iova, Perm, Pfn};
use iommulab::dma::{DmaApi, DmaConfig, Native};
use iommulab::flush::PerLap;
use iommulab::hw::cost::CostModel;
use iommulab::hw::{Calgary, Dart, RemapUnit, TceConfig, Vtd, VtdConfig};
use iommulab::iova::Bitmap;

const D: DomainId = DomainId::new(1);
const PAIRS: u64 = 10_000;

fn vtd() -> Vtd {
    Vtd::new(VtdConfig {
        cost: CostModel::MODERN,
        ..VtdConfig::default()
    })
    .unwrap()
}

fn tce() -> TceConfig {
    TceConfig {
        cost: CostModel::MODERN,
        ..TceConfig::default()
    }
}

fn unit_case<U: RemapUnit>(c: &mut Criterion, name: &str, mut u: U) {
    u.create_domain(D).unwrap();
    u.attach(Bdf::new(0, 1, 0).unwrap(), D).unwrap();
    // Builds VT-d's intermediate tables around the benchmarked pages.
    u.map_range(D, Pfn::new(0x1000), Pfn::new(0x5000), 1, Perm::ReadWrite)
        .unwrap();
    let pfn = Pfn::<Iova>::new(0x1001);
    c.benchmark_group("tce_unit/map_unmap_4k")
        .bench_function(name, |b| {
            b.iter(|| {
                u.map_range(D, black_box(pfn), Pfn::<Hpa>::new(0x77), 1, Perm::Read)
                    .unwrap();
                u.unmap_range(D, black_box(pfn), 1).unwrap();
            })
        });
    let start = Pfn::<Iova>::new(0x1040);
    c.benchmark_group("tce_unit/map_unmap_range_64")
        .bench_function(name, |b| {
            b.iter(|| {
                u.map_range(D, black_box(start), Pfn::<Hpa>::new(0x77), 64, Perm::Read)
                    .unwrap();
                u.unmap_range(D, black_box(start), 64).unwrap();
            })
        });
}

fn dma_case<U: RemapUnit>(c: &mut Criterion, name: &str, u: U) {
    let bitmap = Bitmap::new(Pfn::new(1), Pfn::new(1 << 20)).unwrap();
    let mut api = DmaApi::new(DmaConfig::default(), Native::new(u), bitmap, PerLap::new());
    let dev = api.attach(Bdf::new(0, 1, 0).unwrap()).unwrap();
    let cpu = CpuId::new(0);
    let mut g = c.benchmark_group("tce_dma/map_unmap_4k");
    g.throughput(Throughput::Elements(PAIRS));
    g.bench_function(name, |b| {
        b.iter(|| {
            for i in 0..PAIRS {
                let phys = Hpa::new(0x4000_0000 + (i % 4096) * 4096);
                let a = api
                    .map_single(dev, cpu, phys, 4096, DmaDirection::ToDevice)
                    .unwrap();
                api.unmap_single(dev, cpu, black_box(a), 4096, DmaDirection::ToDevice)
                    .unwrap();
            }
        })
    });
}

fn units(c: &mut Criterion) {
    unit_case(c, "vtd", vtd());
    unit_case(c, "calgary", Calgary::new(tce()).unwrap());
    unit_case(c, "dart", Dart::new(tce()).unwrap());
    dma_case(c, "vtd", vtd());
    dma_case(c, "calgary", Calgary::new(tce()).unwrap());
    dma_case(c, "dart", Dart::new(tce()).unwrap());
}

criterion_group!(benches, units);
criterion_main!(benches);
