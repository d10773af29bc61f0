//! The DMA API (S0.4) and its dma-debug checker, end to end over the VT-d model.

use iommulab::addr::{Access, Bdf, CpuId, DmaDirection, Hpa, Iova, PAGE_4K, Pfn};
use iommulab::clock::ClockRate;
use iommulab::dma::{
    DeviceHandle, DmaApi, DmaConfig, DmaDebugError, DmaError, MapKind, Native, SgEntry, Translation,
};
use iommulab::flush::{Deferred, DeferredConfig, Strict};
use iommulab::hw::vtd::{FaultReason, Vtd, VtdConfig};
use iommulab::iova::RbTree;

const CPU: CpuId = CpuId::new(0);

fn api_with(translation: Translation) -> (DmaApi<RbTree, Strict>, DeviceHandle) {
    let cfg = DmaConfig {
        translation,
        dma_bits: 32,
        debug: true,
        oracle: true,
        forcedac: false,
    };
    let iova = RbTree::new(Pfn::new(1), Pfn::new(1 << 20)).unwrap();
    let mut api = DmaApi::new(
        cfg,
        Native::new(Vtd::new(VtdConfig::default()).unwrap()),
        iova,
        Strict::new(),
    );
    let dev = api.attach(Bdf::new(0, 3, 0).unwrap()).unwrap();
    (api, dev)
}

fn api() -> (DmaApi<RbTree, Strict>, DeviceHandle) {
    api_with(Translation::Iommu)
}

/// S0.4: the DMA address keeps the buffer's offset inside its page.
#[test]
fn map_single_keeps_the_sub_page_offset() {
    let (mut api, dev) = api();
    let a = api
        .map_single(
            dev,
            CPU,
            Hpa::new(0x1234_5c00),
            1024,
            DmaDirection::ToDevice,
        )
        .unwrap();
    assert_eq!(a.page_offset(PAGE_4K), 0xc00);
    assert_eq!(api.stats().pages_mapped, 1);
    // A buffer crossing a page boundary takes two I/O pages.
    let b = api
        .map_single(dev, CPU, Hpa::new(0x2000_0f00), 512, DmaDirection::ToDevice)
        .unwrap();
    assert_eq!(b.page_offset(PAGE_4K), 0xf00);
    assert_eq!(api.stats().pages_mapped, 3);
    // 4096 - 1024 bytes beside the first buffer, 8192 - 512 beside the second.
    assert_eq!(api.stats().exposed_bytes, 3072 + 7680);
}

/// Direction → permission: a device may not write into a to-device buffer.
#[test]
fn direction_sets_the_page_permission() {
    let (mut api, dev) = api();
    let a = api
        .map_single(dev, CPU, Hpa::new(0x5000), 4096, DmaDirection::ToDevice)
        .unwrap();
    assert_eq!(
        api.device_access(dev, a, 4096, Access::Read)
            .unwrap()
            .faulted,
        0
    );
    assert_eq!(
        api.device_access(dev, a, 4096, Access::Write)
            .unwrap()
            .faulted,
        1
    );
    let f = api.unit().faults().last().copied().unwrap();
    assert_eq!(f.reason, FaultReason::WriteDenied);
}

/// Passthrough ("disabled"): the DMA address is the physical address, and a device reaches
/// memory after the unmap too — no protection.
#[test]
fn passthrough_maps_identity_and_protects_nothing() {
    let (mut api, dev) = api_with(Translation::Passthrough);
    let a = api
        .map_single(
            dev,
            CPU,
            Hpa::new(0x7777_7400),
            1024,
            DmaDirection::FromDevice,
        )
        .unwrap();
    assert_eq!(a, Iova::new(0x7777_7400));
    api.unmap_single(dev, CPU, a, 1024, DmaDirection::FromDevice)
        .unwrap();
    let out = api.device_access(dev, a, 1024, Access::Write).unwrap();
    assert_eq!(out.stale, 1);
}

/// map_sg puts all segments in one IOVA range, each entry with its own DMA address.
#[test]
fn map_sg_maps_segments_contiguously_and_unmap_sg_returns_them() {
    let (mut api, dev) = api();
    let mut sg = [
        SgEntry {
            phys: Hpa::new(0x10_0000),
            len: 4096,
            dma: Iova::default(),
        },
        SgEntry {
            phys: Hpa::new(0x33_0200),
            len: 100,
            dma: Iova::default(),
        },
        SgEntry {
            phys: Hpa::new(0x44_0000),
            len: 8192,
            dma: Iova::default(),
        },
    ];
    assert_eq!(
        api.map_sg(dev, CPU, &mut sg, DmaDirection::Bidirectional)
            .unwrap(),
        3
    );
    let p0 = sg[0].dma.pfn(PAGE_4K);
    assert_eq!(sg[1].dma, Iova::new(p0.add(1).base(PAGE_4K).get() | 0x200));
    assert_eq!(sg[2].dma.pfn(PAGE_4K), p0.add(2));
    for e in &sg {
        assert_eq!(
            api.device_access(dev, e.dma, e.len, Access::Write)
                .unwrap()
                .faulted,
            0
        );
    }
    api.unmap_sg(dev, CPU, &sg, DmaDirection::Bidirectional)
        .unwrap();
    for e in &sg {
        assert_eq!(
            api.device_access(dev, e.dma, 1, Access::Read)
                .unwrap()
                .succeeded,
            0
        );
    }
    assert_eq!(api.allocator_stats().frees, 1);
}

/// dma-debug: every class of driver bug is an error, and a refused call changes nothing.
#[test]
fn dma_debug_reports_driver_bugs_and_leaves_state_unchanged() {
    let (mut api, dev) = api();
    let d = DmaDirection::ToDevice;
    let a = api.map_single(dev, CPU, Hpa::new(0x9000), 1024, d).unwrap();
    let before = (api.allocator_stats(), api.unit().stats().pte_clears);

    let never = Iova::new(0xdead_0000);
    assert_eq!(
        api.unmap_single(dev, CPU, never, 1024, d),
        Err(DmaError::Debug(DmaDebugError::NotMapped {
            device: 0,
            addr: never.get()
        }))
    );
    assert!(matches!(
        api.unmap_single(dev, CPU, a, 2048, d),
        Err(DmaError::Debug(DmaDebugError::LengthMismatch {
            mapped: 1024,
            unmapped: 2048,
            ..
        }))
    ));
    assert!(matches!(
        api.unmap_single(dev, CPU, a, 1024, DmaDirection::FromDevice),
        Err(DmaError::Debug(DmaDebugError::DirectionMismatch { .. }))
    ));
    let sg = [SgEntry {
        phys: Hpa::new(0x9000),
        len: 1024,
        dma: a,
    }];
    assert!(matches!(
        api.unmap_sg(dev, CPU, &sg, d),
        Err(DmaError::Debug(DmaDebugError::KindMismatch {
            mapped: MapKind::Single,
            ..
        }))
    ));
    // Nothing changed: the mapping still works and nothing was freed or cleared.
    assert_eq!(
        (api.allocator_stats(), api.unit().stats().pte_clears),
        before
    );
    assert_eq!(
        api.device_access(dev, a, 1024, Access::Read)
            .unwrap()
            .faulted,
        0
    );

    api.unmap_single(dev, CPU, a, 1024, d).unwrap();
    assert_eq!(
        api.unmap_single(dev, CPU, a, 1024, d),
        Err(DmaError::Debug(DmaDebugError::DoubleUnmap {
            device: 0,
            addr: a.get()
        }))
    );
    assert_eq!(api.debug().unwrap().stats().errors, 5);
    assert_eq!(api.stats().errors, 5);
}

/// dma-debug: mappings still live at detach are reported; the device is detached anyway and
/// every IOVA is back in the allocator.
#[test]
fn detach_reports_leaked_mappings_and_cleans_up() {
    let cfg = DmaConfig {
        translation: Translation::Iommu,
        dma_bits: 32,
        debug: true,
        oracle: false,
        forcedac: false,
    };
    let iova = RbTree::new(Pfn::new(1), Pfn::new(1 << 20)).unwrap();
    let deferred = Deferred::new(DeferredConfig::default(), ClockRate::ghz(3.0));
    let mut api = DmaApi::new(
        cfg,
        Native::new(Vtd::new(VtdConfig::default()).unwrap()),
        iova,
        deferred,
    );
    let dev = api.attach(Bdf::new(0, 3, 0).unwrap()).unwrap();
    let a = api
        .map_single(dev, CPU, Hpa::new(0x3000), 64, DmaDirection::ToDevice)
        .unwrap();
    let b = api
        .map_single(dev, CPU, Hpa::new(0x4000), 64, DmaDirection::ToDevice)
        .unwrap();
    assert_eq!(
        api.detach(dev),
        Err(DmaError::Debug(DmaDebugError::Leaked {
            device: 0,
            count: 2,
            first: a.get().min(b.get())
        }))
    );
    let s = api.allocator_stats();
    assert_eq!(s.allocs, s.frees, "every leaked IOVA was returned");
    assert_eq!(api.flush_policy_pending(), 0);
    assert!(matches!(
        api.map_single(dev, CPU, Hpa::new(0x3000), 64, DmaDirection::ToDevice),
        Err(DmaError::NoSuchDevice(0))
    ));
}

/// Zero-length and overflowing mappings are refused, never a panic.
#[test]
fn bad_lengths_are_errors() {
    let (mut api, dev) = api();
    assert!(matches!(
        api.map_single(dev, CPU, Hpa::new(0x1000), 0, DmaDirection::ToDevice),
        Err(DmaError::BadLength { .. })
    ));
    assert!(matches!(
        api.map_single(
            dev,
            CPU,
            Hpa::new(u64::MAX - 10),
            100,
            DmaDirection::ToDevice
        ),
        Err(DmaError::BadLength { .. })
    ));
    let mut empty: [SgEntry; 0] = [];
    assert_eq!(
        api.map_sg(dev, CPU, &mut empty, DmaDirection::ToDevice),
        Err(DmaError::EmptyScatterlist)
    );
}

/// Passthrough: the same buffer mapped twice has one DMA address (its physical one); that is
/// legal, and dma-debug tracks both mappings until both are unmapped (found by hypothesis:
/// `disabled` + `dma_debug` + several I/Os in flight).
#[test]
fn passthrough_allows_the_same_buffer_mapped_twice() {
    let (mut api, dev) = api_with(Translation::Passthrough);
    let d = DmaDirection::ToDevice;
    let a = api.map_single(dev, CPU, Hpa::new(0x9000), 4096, d).unwrap();
    let b = api.map_single(dev, CPU, Hpa::new(0x9000), 4096, d).unwrap();
    assert_eq!(a, b);
    assert_eq!(api.debug().unwrap().stats().live, 2);
    api.unmap_single(dev, CPU, a, 4096, d).unwrap();
    api.unmap_single(dev, CPU, b, 4096, d).unwrap();
    assert_eq!(
        api.unmap_single(dev, CPU, a, 4096, d),
        Err(DmaError::Debug(DmaDebugError::DoubleUnmap {
            device: 0,
            addr: a.get()
        }))
    );
}

/// S1.11's probe after an unmap: nothing is probed while another live mapping covers the
/// page; once none does, a read through the stale IOTLB entry of a read-only mapping goes
/// through (stale) and a write does not, and the oracle counts the one stale access.
#[test]
fn probe_after_unmap_reports_what_the_stale_entry_lets_through() {
    let cfg = DmaConfig {
        translation: Translation::Iommu,
        dma_bits: 32,
        debug: false,
        oracle: true,
        forcedac: false,
    };
    let iova = RbTree::new(Pfn::new(1), Pfn::new(1 << 20)).unwrap();
    let deferred = Deferred::new(DeferredConfig::default(), ClockRate::ghz(3.0));
    let vtd = Native::new(Vtd::new(VtdConfig::default()).unwrap());
    let mut api = DmaApi::new(cfg, vtd, iova, deferred);
    let dev = api.attach(Bdf::new(0, 3, 0).unwrap()).unwrap();
    let dir = DmaDirection::ToDevice;
    let a = api.map_single(dev, CPU, Hpa::new(0x3000), 64, dir).unwrap();
    assert_eq!(
        api.probe_unmapped(dev, a).unwrap(),
        None,
        "live: not probed"
    );
    api.device_access(dev, a, 64, Access::Read).unwrap();
    api.unmap_single(dev, CPU, a, 64, dir).unwrap();
    assert_eq!(api.probe_unmapped(dev, a).unwrap(), Some((true, false)));
    let t = api.oracle().unwrap().totals();
    assert_eq!((t.stale, t.faulted), (1, 1));
}

/// 2.6.26's routing (v2.6.26 `drivers/pci/intel-iommu.c`): with `unmap_sg_at_once`, a
/// deferred policy invalidates and frees an `unmap_sg`'s range at once (one page
/// invalidation, nothing queued, no stale window) while `unmap_single` still queues; without
/// it both queue. A device retrying the list's address after its unmap faults only in the
/// first case.
#[test]
fn deferred_unmap_sg_at_once_bypasses_the_array_for_lists_only() {
    for at_once in [true, false] {
        let cfg = DmaConfig {
            translation: Translation::Iommu,
            dma_bits: 32,
            debug: true,
            oracle: true,
            forcedac: false,
        };
        let iova = RbTree::new(Pfn::new(1), Pfn::new(1 << 20)).unwrap();
        let deferred =
            Deferred::new(DeferredConfig::default(), ClockRate::ghz(3.0)).unmap_sg_at_once(at_once);
        let mut api = DmaApi::new(
            cfg,
            Native::new(Vtd::new(VtdConfig::default()).unwrap()),
            iova,
            deferred,
        );
        let dev = api.attach(Bdf::new(0, 3, 0).unwrap()).unwrap();
        let d = DmaDirection::FromDevice;
        let mut sg = [SgEntry {
            phys: Hpa::new(0x4_0400),
            len: 1024,
            dma: Iova::default(),
        }];
        api.map_sg(dev, CPU, &mut sg, d).unwrap();
        // The device uses the list, so its translation is cached.
        let used = api
            .device_access(dev, sg[0].dma, 1024, Access::Write)
            .unwrap();
        assert_eq!(used.succeeded, 1);
        api.unmap_sg(dev, CPU, &sg, d).unwrap();
        let stats = api.flush_stats();
        let unit = api.unit().stats();
        let retry = api.device_access(dev, sg[0].dma, 1, Access::Write).unwrap();
        if at_once {
            assert_eq!(api.flush_policy_pending(), 0, "nothing queued");
            assert_eq!((stats.flushes, stats.sg_flushes_at_once), (1, 1));
            assert_eq!((unit.inv_page, unit.inv_global), (1, 0));
            assert_eq!(api.allocator_stats().frees, 1, "freed at once");
            assert_eq!((retry.succeeded, retry.faulted), (0, 1));
        } else {
            assert_eq!(api.flush_policy_pending(), 1, "queued in the array");
            assert_eq!((stats.flushes, stats.sg_flushes_at_once), (0, 0));
            assert_eq!(unit.inv_page + unit.inv_global, 0);
            assert_eq!(retry.succeeded, 1, "the stale entry still translates");
        }
        // `unmap_single` is queued either way.
        let a = api
            .map_single(dev, CPU, Hpa::new(0x5_0000), 1024, d)
            .unwrap();
        api.unmap_single(dev, CPU, a, 1024, d).unwrap();
        assert_eq!(
            api.flush_policy_pending(),
            if at_once { 1 } else { 2 },
            "at_once = {at_once}"
        );
    }
}
