//! No heap allocation per operation in steady state on the guest path: a guest's driver
//! maps and unmaps through `DmaApi` → `HypercallBackend` (on-demand map cache, LRU) →
//! hypercalls → the host's VT-d, with the stale-access oracle on (its chunked live table
//! and the device's probes after each unmap) and with every batching mode. Warm-up first
//! (the map cache fills, the oracle's chunks and the host's tables exist), then 100 000
//! more driver calls must not allocate at all.

use iommulab::addr::{CpuId, DmaDirection, Gpa};
use iommulab::virt::strategy::OnDemand;
use iommulab::virt::{Batching, Guest, GuestConfig, GuestDriver, Lru, LruConfig};
use iommulab::workload::DmaOp;

#[global_allocator]
static ALLOC: alloc_counter::CountingAlloc = alloc_counter::CountingAlloc::new();

/// Maps and unmaps `pairs` one-page buffers cycling over 3 000 pages (a quota of 1 024, so
/// the map cache evicts), every 16th buffer mapped twice (nested, a second slot).
fn allocations_during(d: &mut GuestDriver<'_, OnDemand<Lru>>, from: u64, pairs: u64) -> u64 {
    let cpu = CpuId::new(0);
    let map = |slot, page: u64| DmaOp::Map {
        slot,
        cpu,
        device: 0,
        phys: Gpa::new((0x10_000 + page) << 12),
        len: 4096,
        dir: DmaDirection::ToDevice,
        dma_alloc: false,
    };
    let before = alloc_counter::this_thread();
    for i in from..from + pairs {
        let page = (i * 7) % 3000;
        d.step(map(0, page), &[]).unwrap();
        if i % 16 == 0 {
            d.step(map(1, page), &[]).unwrap();
            d.step(DmaOp::Unmap { slot: 1, cpu }, &[]).unwrap();
        }
        d.step(DmaOp::Unmap { slot: 0, cpu }, &[]).unwrap();
    }
    alloc_counter::this_thread() - before
}

#[test]
fn guest_path_does_not_allocate_in_steady_state() {
    for batching in [
        Batching::None,
        Batching::Map,
        Batching::Unmap,
        Batching::Piggyback,
        Batching::MapUnmap,
    ] {
        let cfg = GuestConfig {
            quota: 1024,
            batching,
            guest_pages: 1 << 18,
            protection_oracle: true,
            ..GuestConfig::default()
        };
        let s = OnDemand::<Lru>::new(&cfg, &LruConfig::default(), None).unwrap();
        let mut g = Guest::new(cfg, s).unwrap();
        let mut d = g.driver(2);
        allocations_during(&mut d, 0, 20_000);
        let n = allocations_during(&mut d, 20_000, 100_000);
        drop(d);
        assert_eq!(
            n, 0,
            "{batching:?}: {n} heap allocations in 100 000 steady-state driver calls"
        );
        assert!(g.result().hits > 0 && g.result().misses > 0);
    }
}
