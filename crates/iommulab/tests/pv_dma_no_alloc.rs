//! No heap allocation per operation in steady state on a Xen PV domain's DMA path
//! (`virt::xen::pv_dma`): every option, with map, device access, unmap, a retry of the lost
//! buffer and page flips. Warm-up first (the multicall queue, the caching layer's bitmap and
//! the allocator reach their size), then 100 000 more I/Os must not allocate at all.

use iommulab::addr::{Access, Bdf, CpuId, DmaDirection, Gpa, Pfn};
use iommulab::dma::{DeviceHandle, DmaApi, DmaConfig};
use iommulab::flush::PerLap;
use iommulab::hw::{Calgary, CostModel, TceConfig};
use iommulab::iova::Bitmap;
use iommulab::virt::xen::pv_dma::{
    GrantPremap, Hypervisor, InAdvance, MapMulti, NeverFree, P2m, PreAllocate, PvDmaBackend,
    PvDmaOption, Streaming,
};

#[global_allocator]
static ALLOC: alloc_counter::CountingAlloc = alloc_counter::CountingAlloc::new();

const OUTSTANDING: u64 = 64;

type Api<S> = DmaApi<Bitmap, PerLap, PvDmaBackend<Calgary, S>>;

fn io<S: PvDmaOption>(
    api: &mut Api<S>,
    dev: DeviceHandle,
    ring: &mut [Option<(iommulab::addr::Iova, Gpa)>],
    i: u64,
) {
    let slot = usize::try_from(i % OUTSTANDING).unwrap();
    if let Some((a, phys)) = ring[slot].take() {
        api.unmap_single(dev, CpuId::new(0), a, 4096, DmaDirection::FromDevice)
            .unwrap();
        api.probe_unmapped(dev, a).unwrap();
        api.backend_mut().flip(Pfn::new(phys.get() >> 12)).unwrap();
    }
    let phys = Gpa::new(0x4000_0000 + (i % 4096) * 4096);
    let a = api
        .map_single(dev, CpuId::new(0), phys, 4096, DmaDirection::FromDevice)
        .unwrap();
    api.device_access(dev, a, 4096, Access::Write).unwrap();
    ring[slot] = Some((a, phys));
}

fn check<S: PvDmaOption>(option: S) {
    let unit = Calgary::new(TceConfig {
        cost: CostModel::XEN_2007,
        ..TceConfig::default()
    })
    .unwrap();
    let p2m = P2m::new(Pfn::new(1 << 20), 1 << 19, 1 << 12).unwrap();
    let backend = PvDmaBackend::new(Hypervisor::new(unit, p2m), option);
    let cfg = DmaConfig {
        translation: S::TRANSLATION,
        dma_bits: 32,
        oracle: false,
        ..DmaConfig::default()
    };
    let iova = Bitmap::new(Pfn::new(1), Pfn::new(1 << 20)).unwrap();
    let mut api = DmaApi::new(cfg, backend, iova, PerLap::new());
    let dev = api.attach(Bdf::new(0, 1, 0).unwrap()).unwrap();
    let mut ring = vec![None; usize::try_from(OUTSTANDING).unwrap()];
    for i in 0..20_000 {
        io(&mut api, dev, &mut ring, i);
    }
    let before = alloc_counter::this_thread();
    for i in 20_000..120_000 {
        io(&mut api, dev, &mut ring, i);
    }
    let n = alloc_counter::this_thread() - before;
    assert_eq!(n, 0, "{}: {n} allocations in 100 000 I/Os", S::NAME);
}

#[test]
fn the_pv_dma_path_does_not_allocate_per_operation() {
    check(Streaming);
    check(MapMulti::new(16));
    check(NeverFree);
    check(PreAllocate);
    check(InAdvance::default());
    check(GrantPremap);
}
