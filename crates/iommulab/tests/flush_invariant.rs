//! The flush invariant, for every policy over every allocator it may run with (S0.6):
//! an IOVA is never handed out again while a stale IOTLB entry for it may exist.
//!
//! A small IOVA space (256 pages) forces reuse and wraps; the device touches every mapping
//! (so its translation is cached) and, like a malicious device, retries every address right
//! after its unmap. After every map we check that no page of the new range has an IOTLB entry
//! left over from an earlier mapping.
//!
//! The invariant is a property of the policy over the remapping-unit seam, so it is also
//! checked on units whose invalidation capabilities differ from the default VT-d: VT-d
//! without page-selective invalidation (`CAP.PSI` clear: page requests become domain ones)
//! and a flat-table unit whose cache can only be flushed whole ([`FlatUnit`]: every request
//! becomes a global flush).

use iommulab::addr::{Access, Bdf, CpuId, DmaDirection, Hpa, Iova, PAGE_4K, Pfn};
use iommulab::clock::{ClockRate, Cycles};
use iommulab::dma::{DeviceHandle, DmaApi, DmaConfig, Native, Translation};
use iommulab::flush::{
    Deferred, DeferredConfig, FlushPolicy, FlushQueue, FlushQueueConfig, PerLap, Strict,
};
use iommulab::hw::RemapUnit;
use iommulab::hw::cost::CostModel;
use iommulab::hw::vtd::{Vtd, VtdConfig};
use iommulab::iova::{Bitmap, IovaAllocator, Magazine, MagazineConfig, RbTree};
use iommulab::testing::flat_unit::FlatUnit;
use proptest::prelude::*;

const SPACE_END: u64 = 256;
const DMA_BITS: u8 = 20; // 2^20 bytes = 256 pages

#[derive(Debug, Clone)]
enum Op {
    Map {
        pages: u64,
        offset: u64,
        page: u64,
        write: bool,
        cpu: u16,
    },
    Unmap {
        index: usize,
    },
    Touch {
        index: usize,
    },
    Tick {
        us: u64,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (1u64..=4, 0u64..4096, 0u64..1000, any::<bool>(), 0u16..2)
            .prop_map(|(pages, offset, page, write, cpu)| Op::Map { pages, offset, page, write, cpu }),
        4 => any::<usize>().prop_map(|index| Op::Unmap { index }),
        2 => any::<usize>().prop_map(|index| Op::Touch { index }),
        1 => (0u64..20_000).prop_map(|us| Op::Tick { us }),
    ]
}

struct Live {
    addr: Iova,
    len: u64,
    dir: DmaDirection,
    cpu: CpuId,
}

fn iommu() -> Vtd {
    Vtd::new(VtdConfig {
        cost: CostModel::MODERN,
        ..VtdConfig::default()
    })
    .unwrap()
}

fn check<A: IovaAllocator, F: FlushPolicy>(
    a: A,
    f: F,
    ops: &[Op],
    expect_no_stale: bool,
) -> Result<(), TestCaseError> {
    check_on(iommu(), a, f, ops, expect_no_stale)
}

fn check_on<U: RemapUnit, A: IovaAllocator, F: FlushPolicy>(
    unit: U,
    a: A,
    f: F,
    ops: &[Op],
    expect_no_stale: bool,
) -> Result<(), TestCaseError> {
    let cfg = DmaConfig {
        translation: Translation::Iommu,
        dma_bits: DMA_BITS,
        debug: true,
        oracle: true,
        forcedac: false,
    };
    let mut api = DmaApi::new(cfg, Native::new(unit), a, f);
    let dev: DeviceHandle = api.attach(Bdf::new(0, 2, 0).unwrap()).unwrap();
    let domain = api.domain_of(dev).unwrap();
    let mut live: Vec<Live> = Vec::new();
    let mut now = Cycles::ZERO;
    for op in ops {
        match *op {
            Op::Map {
                pages,
                offset,
                page,
                write,
                cpu,
            } => {
                let len = pages * PAGE_4K.bytes() - offset.min(PAGE_4K.bytes() - 1);
                let phys =
                    Hpa::new(0x1_0000_0000 + page * PAGE_4K.bytes() + offset % PAGE_4K.bytes());
                let dir = if write {
                    DmaDirection::FromDevice
                } else {
                    DmaDirection::ToDevice
                };
                let cpu = CpuId::new(cpu);
                match api.map_single(dev, cpu, phys, len, dir) {
                    Ok(addr) => {
                        let n = PAGE_4K.pages_spanned(addr.page_offset(PAGE_4K), len);
                        for i in 0..n {
                            let pfn: Pfn<Iova> = addr.pfn(PAGE_4K).add(i);
                            prop_assert!(
                                !api.unit().cache_holds(domain, pfn),
                                "IOVA pfn {pfn} handed out again while a stale IOTLB entry exists"
                            );
                        }
                        live.push(Live {
                            addr,
                            len,
                            dir,
                            cpu,
                        });
                    }
                    Err(e) => {
                        // Only exhaustion of the tiny space is acceptable here.
                        prop_assert!(
                            matches!(e, iommulab::dma::DmaError::Iova(_)),
                            "unexpected error {e}"
                        );
                    }
                }
            }
            Op::Touch { index } if !live.is_empty() => {
                let l = &live[index % live.len()];
                let access = if l.dir == DmaDirection::FromDevice {
                    Access::Write
                } else {
                    Access::Read
                };
                let out = api.device_access(dev, l.addr, l.len, access).unwrap();
                prop_assert_eq!(out.faulted, 0, "a live mapping faulted");
            }
            Op::Unmap { index } if !live.is_empty() => {
                let l = live.swap_remove(index % live.len());
                api.unmap_single(dev, l.cpu, l.addr, l.len, l.dir).unwrap();
                let access = if l.dir == DmaDirection::FromDevice {
                    Access::Write
                } else {
                    Access::Read
                };
                // A malicious device retries the address at once.
                api.device_access(dev, l.addr, l.len, access).unwrap();
            }
            Op::Tick { us } => {
                now = now + Cycles::new(us * 3000);
                api.tick(now).unwrap();
            }
            _ => {}
        }
    }
    let stale = api.oracle().unwrap().totals().stale;
    if expect_no_stale {
        prop_assert_eq!(stale, 0);
    }
    // Every range comes back: unmap everything, drain, and the debug checker has nothing live.
    for l in live.drain(..) {
        api.unmap_single(dev, l.cpu, l.addr, l.len, l.dir).unwrap();
    }
    api.drain().unwrap();
    prop_assert_eq!(api.flush_policy_pending(), 0);
    prop_assert_eq!(api.debug().unwrap().stats().live, 0);
    let s = api.allocator_stats();
    prop_assert!(s.allocs >= s.frees);
    Ok(())
}

fn rbtree() -> RbTree {
    RbTree::new(Pfn::new(1), Pfn::new(SPACE_END)).unwrap()
}

fn bitmap() -> Bitmap {
    Bitmap::new(Pfn::new(1), Pfn::new(SPACE_END)).unwrap()
}

fn magazine() -> Magazine<RbTree> {
    Magazine::new(
        rbtree(),
        MagazineConfig {
            cpus: 2,
            ..MagazineConfig::default()
        },
    )
    .unwrap()
}

fn deferred() -> Deferred {
    Deferred::new(
        DeferredConfig {
            entries: 16,
            timeout_ms: 10,
        },
        ClockRate::ghz(3.0),
    )
}

fn flush_queue() -> FlushQueue {
    FlushQueue::new(
        FlushQueueConfig {
            entries: 16,
            ..FlushQueueConfig::default()
        },
        2,
        ClockRate::ghz(3.0),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn strict_over_rbtree_never_reuses_stale(ops in prop::collection::vec(op(), 1..300)) {
        check(rbtree(), Strict::new(), &ops, true)?;
    }

    #[test]
    fn strict_over_bitmap_never_reuses_stale(ops in prop::collection::vec(op(), 1..300)) {
        check(bitmap(), Strict::new(), &ops, true)?;
    }

    #[test]
    fn strict_over_magazine_never_reuses_stale(ops in prop::collection::vec(op(), 1..300)) {
        check(magazine(), Strict::new(), &ops, true)?;
    }

    #[test]
    fn deferred_over_rbtree_never_reuses_stale(ops in prop::collection::vec(op(), 1..300)) {
        check(rbtree(), deferred(), &ops, false)?;
    }

    #[test]
    fn deferred_over_magazine_never_reuses_stale(ops in prop::collection::vec(op(), 1..300)) {
        check(magazine(), deferred(), &ops, false)?;
    }

    #[test]
    fn per_lap_over_bitmap_never_reuses_stale(ops in prop::collection::vec(op(), 1..300)) {
        check(bitmap(), PerLap::new(), &ops, false)?;
    }

    #[test]
    fn flush_queue_over_magazine_never_reuses_stale(ops in prop::collection::vec(op(), 1..300)) {
        check(magazine(), flush_queue(), &ops, false)?;
    }

    #[test]
    fn flush_queue_over_rbtree_never_reuses_stale(ops in prop::collection::vec(op(), 1..300)) {
        check(rbtree(), flush_queue(), &ops, false)?;
    }

    #[test]
    fn every_policy_keeps_the_invariant_on_vtd_without_psi(ops in prop::collection::vec(op(), 1..300)) {
        check_on(vtd_without_psi(), magazine(), Strict::new(), &ops, true)?;
        check_on(vtd_without_psi(), rbtree(), deferred(), &ops, false)?;
        check_on(vtd_without_psi(), bitmap(), PerLap::new(), &ops, false)?;
        check_on(vtd_without_psi(), magazine(), flush_queue(), &ops, false)?;
    }

    #[test]
    fn every_policy_keeps_the_invariant_on_a_whole_flush_unit(ops in prop::collection::vec(op(), 1..300)) {
        check_on(FlatUnit::default(), rbtree(), Strict::new(), &ops, true)?;
        check_on(FlatUnit::default(), rbtree(), deferred(), &ops, false)?;
        check_on(FlatUnit::default(), bitmap(), PerLap::new(), &ops, false)?;
        check_on(FlatUnit::default(), magazine(), flush_queue(), &ops, false)?;
    }
}

fn vtd_without_psi() -> Vtd {
    Vtd::new(VtdConfig {
        cost: CostModel::MODERN,
        page_selective_invalidation: false,
        ..VtdConfig::default()
    })
    .unwrap()
}

/// The policy's requests are widened to what the unit can do, and counted as performed:
/// strict's page-selective invalidations are domain-selective on VT-d without `CAP.PSI`
/// and whole-cache flushes on a unit that has nothing narrower.
#[test]
fn strict_requests_are_widened_to_the_units_capabilities() {
    fn counts<U: RemapUnit>(unit: U) -> (u64, u64, u64) {
        let cfg = DmaConfig {
            translation: Translation::Iommu,
            dma_bits: DMA_BITS,
            debug: true,
            oracle: true,
            forcedac: false,
        };
        let mut api = DmaApi::new(cfg, Native::new(unit), rbtree(), Strict::new());
        let dev = api.attach(Bdf::new(0, 2, 0).unwrap()).unwrap();
        let cpu = CpuId::new(0);
        for i in 0..10u64 {
            let phys = Hpa::new(0x8000_0000 + i * 0x1000);
            let addr = api
                .map_single(dev, cpu, phys, 4096, DmaDirection::ToDevice)
                .unwrap();
            api.device_access(dev, addr, 4096, Access::Read).unwrap();
            api.unmap_single(dev, cpu, addr, 4096, DmaDirection::ToDevice)
                .unwrap();
            api.device_access(dev, addr, 4096, Access::Read).unwrap();
        }
        assert_eq!(api.oracle().unwrap().totals().stale, 0);
        let s = api.unit().stats();
        (s.inv_page, s.inv_domain, s.inv_global)
    }
    assert_eq!(counts(iommu()), (10, 0, 0));
    assert_eq!(counts(vtd_without_psi()), (0, 10, 0));
    assert_eq!(counts(FlatUnit::default()), (0, 0, 10));
}

/// The deferred window is real: a device retrying an address right after its unmap gets
/// through the stale IOTLB entry, and strict closes it.
#[test]
fn deferred_leaves_a_stale_window_that_strict_closes() {
    fn stale_after_unmap<F: FlushPolicy>(f: F) -> u64 {
        let cfg = DmaConfig {
            translation: Translation::Iommu,
            dma_bits: DMA_BITS,
            debug: true,
            oracle: true,
            forcedac: false,
        };
        let mut api = DmaApi::new(cfg, Native::new(iommu()), rbtree(), f);
        let dev = api.attach(Bdf::new(0, 2, 0).unwrap()).unwrap();
        let cpu = CpuId::new(0);
        let addr = api
            .map_single(
                dev,
                cpu,
                Hpa::new(0x8000_0000),
                1024,
                DmaDirection::ToDevice,
            )
            .unwrap();
        api.device_access(dev, addr, 1024, Access::Read).unwrap();
        api.unmap_single(dev, cpu, addr, 1024, DmaDirection::ToDevice)
            .unwrap();
        api.device_access(dev, addr, 1024, Access::Read).unwrap();
        api.oracle().unwrap().totals().stale
    }
    assert_eq!(stale_after_unmap(deferred()), 1);
    assert_eq!(stale_after_unmap(Strict::new()), 0);
}
