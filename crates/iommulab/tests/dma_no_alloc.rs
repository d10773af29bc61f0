//! No heap allocation per operation in steady state, for the whole DMA path: every
//! allocator × flush-policy combination the configurations use, with map, device access,
//! unmap and timer ticks. Warm-up first (tables, magazines, queues reach their size), then
//! 100 000 more I/Os must not allocate at all. The dma-debug checker and the stale-access
//! oracle keep hash maps and are off here, as they are in benchmarks.

use iommulab::addr::{Access, Bdf, CpuId, DmaDirection, Hpa, Iova, Pfn};
use iommulab::clock::{ClockRate, Cycles};
use iommulab::dma::{DmaApi, DmaConfig, Native};
use iommulab::flush::{
    Deferred, DeferredConfig, FlushPolicy, FlushQueue, FlushQueueConfig, PerLap, Strict,
};
use iommulab::hw::cost::CostModel;
use iommulab::hw::vtd::{Vtd, VtdConfig};
use iommulab::iova::{Bitmap, IovaAllocator, Magazine, MagazineConfig, RbTree};

#[global_allocator]
static ALLOC: alloc_counter::CountingAlloc = alloc_counter::CountingAlloc::new();

const OUTSTANDING: usize = 4;
const CPUS: u16 = 2;

/// Runs `ios` I/Os with `OUTSTANDING` in flight and returns the heap allocations made.
fn allocations_during<A: IovaAllocator, F: FlushPolicy>(
    api: &mut DmaApi<A, F>,
    dev: iommulab::dma::DeviceHandle,
    ring: &mut [Option<(Iova, CpuId)>; OUTSTANDING],
    from: u64,
    ios: u64,
    now: &mut Cycles,
) -> u64 {
    let before = alloc_counter::this_thread();
    for i in from..from + ios {
        let slot = usize::try_from(i % OUTSTANDING as u64).unwrap();
        if let Some((a, cpu)) = ring[slot].take() {
            api.unmap_single(dev, cpu, a, 1024, DmaDirection::ToDevice)
                .unwrap();
        }
        let cpu = CpuId::new(u16::try_from(i % u64::from(CPUS)).unwrap());
        let phys = Hpa::new(0x4000_0000 + (i % 4096) * 4096 + (i % 4) * 1024);
        let a = api
            .map_single(dev, cpu, phys, 1024, DmaDirection::ToDevice)
            .unwrap();
        api.device_access(dev, a, 1024, Access::Read).unwrap();
        ring[slot] = Some((a, cpu));
        if i % 256 == 0 {
            // 1 ms of simulated time every 256 I/Os: timers fire as in a real run.
            *now = *now + Cycles::new(3_000_000);
            api.tick(*now).unwrap();
        }
    }
    alloc_counter::this_thread() - before
}

fn check<A: IovaAllocator, F: FlushPolicy>(name: &str, a: A, f: F) {
    let iommu = Vtd::new(VtdConfig {
        cost: CostModel::VTD_2008,
        ..VtdConfig::default()
    })
    .unwrap();
    let mut api = DmaApi::new(DmaConfig::default(), Native::new(iommu), a, f);
    let dev = api.attach(Bdf::new(0, 1, 0).unwrap()).unwrap();
    let mut ring = [None; OUTSTANDING];
    let mut now = Cycles::ZERO;
    // Warm-up long enough for the bitmap to wrap (2^20 pages) and every queue to cycle.
    allocations_during(&mut api, dev, &mut ring, 0, 1_200_000, &mut now);
    let n = allocations_during(&mut api, dev, &mut ring, 1_200_000, 100_000, &mut now);
    assert_eq!(
        n, 0,
        "{name}: {n} heap allocations in 100 000 steady-state I/Os"
    );
}

fn space() -> (Pfn<Iova>, Pfn<Iova>) {
    (Pfn::new(1), Pfn::new(1 << 20))
}

#[test]
fn default_rbtree_deferred_does_not_allocate() {
    let (s, e) = space();
    check(
        "default",
        RbTree::new(s, e).unwrap(),
        Deferred::new(DeferredConfig::default(), ClockRate::ghz(3.0)),
    );
}

#[test]
fn strict_rbtree_does_not_allocate() {
    let (s, e) = space();
    check("strict", RbTree::new(s, e).unwrap(), Strict::new());
}

#[test]
fn bitmap_per_lap_does_not_allocate() {
    let (s, e) = space();
    check("bitmap", Bitmap::new(s, e).unwrap(), PerLap::new());
}

#[test]
fn strict_bitmap_does_not_allocate() {
    let (s, e) = space();
    check("strict-bitmap", Bitmap::new(s, e).unwrap(), Strict::new());
}

#[test]
fn modern_magazine_flush_queue_does_not_allocate() {
    let (s, e) = space();
    let mag = MagazineConfig {
        cpus: usize::from(CPUS),
        ..MagazineConfig::default()
    };
    check(
        "modern",
        Magazine::new(RbTree::new(s, e).unwrap(), mag).unwrap(),
        FlushQueue::new(
            FlushQueueConfig::default(),
            usize::from(CPUS),
            ClockRate::ghz(3.0),
        ),
    );
}

/// The counter is live: the same loop with the dma-debug checker on does allocate (its hash
/// map), so a zero above is a real zero.
#[test]
fn counter_sees_the_debug_checkers_allocations() {
    let (s, e) = space();
    let iommu = Vtd::new(VtdConfig::default()).unwrap();
    let cfg = DmaConfig {
        debug: true,
        ..DmaConfig::default()
    };
    let mut api = DmaApi::new(
        cfg,
        Native::new(iommu),
        RbTree::new(s, e).unwrap(),
        Strict::new(),
    );
    let dev = api.attach(Bdf::new(0, 1, 0).unwrap()).unwrap();
    let mut ring = [None; OUTSTANDING];
    let mut now = Cycles::ZERO;
    assert!(allocations_during(&mut api, dev, &mut ring, 0, 1000, &mut now) > 0);
}
