//! Wall-clock speed of a Xen PV domain's DMA path (`virt::xen::pv_dma`, S2.5, S2.6) against
//! bare metal on the same unit. `pv_dma/map_unmap_4k/{native,<option>}` is one `map_single`
//! and one `unmap_single` of a 4 KiB buffer through the DMA API with the "bitmap"
//! configuration (next-fit bitmap, per-lap flush) on Calgary, 10,000 pairs per iteration:
//! `native` through the bare-metal backend, the others through the PV backend with each
//! option (multicalls built and applied by the hypervisor model, P2M checks).
//!
//! This measures iommulab's own code, not modeled cycles.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use iommulab::addr::{Bdf, CpuId, DmaDirection, Pfn, PhysAddr};
use iommulab::dma::{DmaApi, DmaConfig, MapBackend, Native};
use iommulab::flush::PerLap;
use iommulab::hw::cost::CostModel;
use iommulab::hw::{Calgary, TceConfig};
use iommulab::iova::Bitmap;
use iommulab::virt::xen::pv_dma::{
    GrantPremap, Hypervisor, InAdvance, MapMulti, NeverFree, P2m, PreAllocate, PvDmaBackend,
    PvDmaOption, Streaming,
};

const PAIRS: u64 = 10_000;

fn calgary() -> Calgary {
    Calgary::new(TceConfig {
        cost: CostModel::XEN_2007,
        ..TceConfig::default()
    })
    .unwrap()
}

fn case<B: MapBackend>(
    c: &mut Criterion,
    name: &str,
    backend: B,
    translation: iommulab::dma::Translation,
) {
    let bitmap = Bitmap::new(Pfn::new(1), Pfn::new(1 << 20)).unwrap();
    let cfg = DmaConfig {
        translation,
        ..DmaConfig::default()
    };
    let mut api = DmaApi::new(cfg, backend, bitmap, PerLap::new());
    let dev = api.attach(Bdf::new(0, 1, 0).unwrap()).unwrap();
    let cpu = CpuId::new(0);
    let mut g = c.benchmark_group("pv_dma/map_unmap_4k");
    g.throughput(Throughput::Elements(PAIRS));
    g.bench_function(name, |b| {
        b.iter(|| {
            for i in 0..PAIRS {
                let phys = B::Phys::new(0x4000_0000 + (i % 4096) * 4096);
                let a = api
                    .map_single(dev, cpu, black_box(phys), 4096, DmaDirection::ToDevice)
                    .unwrap();
                api.unmap_single(dev, cpu, a, 4096, DmaDirection::ToDevice)
                    .unwrap();
            }
        })
    });
}

fn pv<S: PvDmaOption>(c: &mut Criterion, option: S) {
    let p2m = P2m::new(Pfn::new(1 << 20), 1 << 19, 0).unwrap();
    let backend = PvDmaBackend::new(Hypervisor::new(calgary(), p2m), option);
    case(c, S::NAME, backend, S::TRANSLATION);
}

fn benches(c: &mut Criterion) {
    case::<Native<Calgary>>(
        c,
        "native",
        Native::new(calgary()),
        iommulab::dma::Translation::Iommu,
    );
    pv(c, Streaming);
    pv(c, MapMulti::new(16));
    pv(c, NeverFree);
    pv(c, PreAllocate);
    pv(c, InAdvance::default());
    pv(c, GrantPremap);
}

criterion_group!(pv_dma, benches);
criterion_main!(pv_dma);
