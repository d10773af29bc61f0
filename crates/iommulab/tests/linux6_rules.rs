//! Linux 6.x behaviours around the IOVA allocator, each pinned by the Linux rule it states
//! (the allocator's own rules are pinned next to the code: `iova/rbtree/`,
//! `iova/magazine/`, `iova/domain.rs`).

use iommulab::addr::Pfn;
use iommulab::addr::{Bdf, CpuId, DmaDirection, Hpa};
use iommulab::clock::{ClockRate, Cycles};
use iommulab::dma::{DmaApi, DmaConfig, Native};
use iommulab::experiment::{ExperimentConfig, no_progress, replay_trace};
use iommulab::flush::{FlushQueue, FlushQueueConfig};
use iommulab::hw::vtd::{Vtd, VtdConfig};
use iommulab::iova::{IovaAllocator, Magazine, MagazineConfig, RbTree};
use iommulab::trace::ftrace::{FtraceOptions, FtraceReader};

const C0: CpuId = CpuId::new(0);
const C1: CpuId = CpuId::new(1);

/// dma-iommu.c `fq_flush_timeout`: when the flush-queue timer fires, one IOTLB flush, then
/// `fq_ring_free` of *every* CPU's queue runs on the CPU running the timer, and each range's
/// `free_iova_fast` puts it in that CPU's rcache, whichever CPU queued it. The timer runs on
/// the CPU that armed it (`mod_timer` from `queue_iova`).
#[test]
fn flush_queue_timer_frees_into_the_timer_cpus_magazines() {
    let tree = RbTree::new(Pfn::new(1), Pfn::new(1 << 20)).unwrap();
    let mag = MagazineConfig {
        cpus: 2,
        ..MagazineConfig::default()
    };
    let mut api = DmaApi::new(
        DmaConfig::default(),
        Native::new(Vtd::new(VtdConfig::default()).unwrap()),
        Magazine::new(tree, mag).unwrap(),
        FlushQueue::new(FlushQueueConfig::default(), 2, ClockRate::GHZ_1),
    );
    let dev = api.attach(Bdf::new(0, 1, 0).unwrap()).unwrap();
    let dir = DmaDirection::ToDevice;
    let a = api
        .map_single(dev, C0, Hpa::new(0x10_0000), 4096, dir)
        .unwrap();
    let b = api
        .map_single(dev, C1, Hpa::new(0x20_0000), 4096, dir)
        .unwrap();
    api.unmap_single(dev, C0, a, 4096, dir).unwrap(); // arms the timer on CPU 0
    api.unmap_single(dev, C1, b, 4096, dir).unwrap();
    assert_eq!(
        api.allocator_of(dev).unwrap().cached_ranges(),
        0,
        "still queued"
    );
    // Armed at time 0: 10 ms is 3 jiffies at HZ = 250, so the timer fires at 12 ms
    // (`msecs_to_jiffies` rounds up), not at 10 or 11.
    api.tick(Cycles::new(11_999_999)).unwrap();
    assert_eq!(
        api.flush_policy_pending(),
        2,
        "the timer has not fired at 12 ms − 1 ns"
    );
    api.tick(Cycles::new(12_000_000)).unwrap();
    assert_eq!(api.flush_policy_pending(), 0);
    let snap = api.allocator_of(dev).unwrap().snapshot();
    let pfn = |x: iommulab::addr::Iova| x.get() >> 12;
    assert_eq!(
        snap.cpus[0][0][0],
        vec![pfn(a), pfn(b)],
        "both in CPU 0's loaded magazine"
    );
    assert!(
        snap.cpus[1][0].iter().all(Vec::is_empty),
        "nothing in CPU 1's"
    );
}

fn bare_api<F: iommulab::flush::FlushPolicy>(flush: F) -> DmaApi<Magazine<RbTree>, F> {
    let tree = RbTree::new(Pfn::new(1), Pfn::new(1 << 20)).unwrap();
    DmaApi::new(
        DmaConfig::default(),
        Native::new(Vtd::new(VtdConfig::default()).unwrap()),
        Magazine::new(tree, MagazineConfig::default()).unwrap(),
        flush,
    )
}

/// dma-iommu.c `iommu_dma_init_domain` → `init_iova_domain`: every DMA domain has an
/// `iova_domain` of its own, so two devices in their own groups (ACS: one group per PCI
/// function) each get the top of their own space, while a device in the same group as
/// another (`iommu_group_get` → the group's default domain) shares its allocator.
#[test]
fn each_domain_has_its_own_iova_allocator() {
    let mut api = bare_api(FlushQueue::new(
        FlushQueueConfig::default(),
        1,
        ClockRate::GHZ_1,
    ));
    let a = api.attach(Bdf::new(0, 1, 0).unwrap()).unwrap();
    let b = api.attach(Bdf::new(0, 2, 0).unwrap()).unwrap();
    let c = api
        .attach_to_group_of(Bdf::new(0, 2, 1).unwrap(), b)
        .unwrap();
    let dir = DmaDirection::ToDevice;
    let map = |api: &mut DmaApi<_, _>, dev| {
        api.map_single(dev, C0, Hpa::new(0x10_0000), 4096, dir)
            .unwrap()
            .get()
    };
    let top = 0xffff_f000;
    assert_eq!(map(&mut api, a), top, "a's own space");
    assert_eq!(
        map(&mut api, b),
        top,
        "b's own space: the same address as a's"
    );
    assert_eq!(map(&mut api, c), top - 0x1000, "c shares b's space");
    assert_eq!(api.allocators().len(), 2);
    assert_eq!(api.domain_of(b), api.domain_of(c));
    assert_ne!(api.domain_of(a), api.domain_of(b));
    assert_eq!(api.allocator_stats().allocs, 3);
}

/// dma-iommu.c `iommu_dma_init_fq`: the flush queue hangs off the domain's cookie, so one
/// domain's unmaps never fill another's ring (`queue_iova` → `fq_full` on the domain's own
/// per-CPU ring) and a flush invalidates the queue's own domain only.
#[test]
fn flush_queues_are_per_domain() {
    let cfg = FlushQueueConfig {
        entries: 4, // a ring holds 3 ranges
        ..FlushQueueConfig::default()
    };
    let mut api = bare_api(FlushQueue::new(cfg, 1, ClockRate::GHZ_1));
    let a = api.attach(Bdf::new(0, 1, 0).unwrap()).unwrap();
    let b = api.attach(Bdf::new(0, 2, 0).unwrap()).unwrap();
    let dir = DmaDirection::ToDevice;
    for (dev, n) in [(a, 3u64), (b, 3)] {
        for i in 0..n {
            let addr = api
                .map_single(dev, C0, Hpa::new((i + 1) << 20), 4096, dir)
                .unwrap();
            api.unmap_single(dev, C0, addr, 4096, dir).unwrap();
        }
    }
    assert_eq!(api.flush_policies().len(), 2);
    assert_eq!(
        api.flush_policy_pending(),
        6,
        "two rings of 3; one shared ring would have flushed"
    );
    assert_eq!(api.flush_stats().flushes, 0);
    assert_eq!(api.unit().stats().inv_domain, 0);
}

/// 2.6.26 intel-iommu.c `add_unmap`: one `deferred_flush` array for every domain, freed into
/// each entry's own domain (`__free_iova(&deferred_flush[i].domain[j]->iovad, ...)`): the
/// deferred policy is one instance, shared.
#[test]
fn the_deferred_array_is_shared_by_every_domain() {
    use iommulab::flush::{Deferred, DeferredConfig};
    let mut api = bare_api(Deferred::new(DeferredConfig::default(), ClockRate::GHZ_1));
    let a = api.attach(Bdf::new(0, 1, 0).unwrap()).unwrap();
    let b = api.attach(Bdf::new(0, 2, 0).unwrap()).unwrap();
    let dir = DmaDirection::ToDevice;
    let x = api
        .map_single(a, C0, Hpa::new(0x10_0000), 4096, dir)
        .unwrap();
    let y = api
        .map_single(b, C0, Hpa::new(0x20_0000), 4096, dir)
        .unwrap();
    assert_eq!(x, y, "two spaces");
    api.unmap_single(a, C0, x, 4096, dir).unwrap();
    api.unmap_single(b, C0, y, 4096, dir).unwrap();
    assert_eq!(api.flush_policies().len(), 1);
    assert_eq!(api.flush_policy_pending(), 2);
    api.drain().unwrap();
    // Each range went back to its own domain's allocator.
    for dev in [a, b] {
        assert_eq!(api.allocator_of(dev).unwrap().stats().frees, 1);
    }
}

fn line(cpu: u16, ts: &str, body: &str) -> String {
    format!("          task-1     [{cpu:03}] ..... {ts}: {body}\n")
}

/// A trace on two CPUs: CPU 0 maps and unmaps a page, then CPU 1 maps one.
fn two_cpu_trace(header_cpus: Option<u32>) -> String {
    let mut t = String::from("# tracer: nop\n#\n");
    if let Some(n) = header_cpus {
        t.push_str(&format!(
            "# entries-in-buffer/entries-written: 4/4   #P:{n}\n"
        ));
    }
    let dev = "0000:00:04.0";
    t += &line(
        0,
        "1.000000",
        &format!(
            "dma_map_page: {dev} dir=TO_DEVICE dma_addr=fffff000 size=4096 phys_addr=1000000 attrs="
        ),
    );
    t += &line(
        0,
        "1.000100",
        &format!("dma_unmap_page: {dev} dir=TO_DEVICE dma_addr=fffff000 size=4096 attrs="),
    );
    t += &line(
        1,
        "1.000200",
        &format!(
            "dma_map_page: {dev} dir=TO_DEVICE dma_addr=ffffe000 size=4096 phys_addr=2000000 attrs="
        ),
    );
    t
}

/// `iova.c` keeps one rcache per CPU (`num_possible_cpus`): a range CPU 0 freed is not in
/// CPU 1's magazines. A replay takes the CPU count from the trace (`#P:2`), not from
/// `workload.cpus` (1), so CPU 1's map misses; without the header the config's
/// `magazine.cpus` (1) shares one cache and it hits.
#[test]
fn replay_takes_the_cpu_count_from_the_trace() {
    let cfg = ExperimentConfig::from_toml(
        "[mechanisms]\ntranslation = \"iommu\"\nallocator = \"magazine\"\nflush = { kind = \"strict\" }\n",
    )
    .unwrap();
    let hits = |header| {
        let text = two_cpu_trace(header);
        let r = FtraceReader::new(
            std::io::Cursor::new(text.into_bytes()),
            "t.txt".into(),
            FtraceOptions::default(),
        );
        let (run, _) = replay_trace(&cfg, r, &mut no_progress).unwrap();
        (run.stats.iova.cache_hits, run.stats.iova.cache_misses)
    };
    assert_eq!(hits(Some(2)), (0, 2), "two CPUs: CPU 1 misses");
    assert_eq!(hits(None), (1, 1), "one shared cache: CPU 1 hits");
}

/// dma-iommu.c `iommu_dma_alloc_iova`: `if (domain->geometry.force_aperture) dma_limit =
/// min(dma_limit, aperture_end)`. A 48-bit DMA mask on a 3-level VT-d table (39-bit
/// aperture) gets an IOVA the table can map, not one near 2^48.
#[test]
fn the_dma_limit_is_capped_at_the_domains_address_width() {
    let tree = RbTree::new(Pfn::new(1), Pfn::new(1 << 36)).unwrap();
    let vtd = Vtd::new(VtdConfig {
        levels: 3,
        ..VtdConfig::default()
    })
    .unwrap();
    // forcedac: no below-4 GiB first attempt, so the full limit shows.
    let cfg = DmaConfig {
        dma_bits: 48,
        forcedac: true,
        ..DmaConfig::default()
    };
    let mut api = DmaApi::new(cfg, Native::new(vtd), tree, iommulab::flush::Strict::new());
    let dev = api.attach(Bdf::new(0, 1, 0).unwrap()).unwrap();
    let a = api
        .map_single(dev, C0, Hpa::new(0x10_0000), 4096, DmaDirection::ToDevice)
        .unwrap();
    assert_eq!(a.get(), (1 << 39) - 4096, "the top of the 39-bit aperture");
}

/// dma-iommu.c `iommu_dma_alloc_iova`: `if (dma_limit > DMA_BIT_MASK(32) &&
/// dev->iommu->pci_32bit_workaround)` the first attempt is below 4 GiB (`flush_rcache =
/// false`); when it fails, `pci_32bit_workaround = false` and the device never tries below
/// 4 GiB again, even once space there is free. Here only 4 pages are left below 4 GiB.
#[test]
fn wide_mask_devices_try_below_4gib_first_until_it_fails_once() {
    let mut tree = RbTree::new(Pfn::new(1), Pfn::new(1 << 36)).unwrap();
    tree.reserve(Pfn::new(1), (1 << 20) - 1 - 4).unwrap();
    let vtd = Vtd::new(VtdConfig {
        levels: 4,
        ..VtdConfig::default()
    })
    .unwrap();
    let cfg = DmaConfig {
        dma_bits: 48,
        ..DmaConfig::default()
    };
    let mag = Magazine::new(tree, MagazineConfig::default()).unwrap();
    let mut api = DmaApi::new(cfg, Native::new(vtd), mag, iommulab::flush::Strict::new());
    let dev = api.attach(Bdf::new(0, 1, 0).unwrap()).unwrap();
    let dir = DmaDirection::ToDevice;
    let map = |api: &mut DmaApi<_, _>, len| {
        api.map_single(dev, C0, Hpa::new(0x10_0000), len, dir)
            .unwrap()
            .get()
    };
    let low: Vec<u64> = (0..4).map(|_| map(&mut api, 4096)).collect();
    assert_eq!(low, [0xffff_f000, 0xffff_e000, 0xffff_d000, 0xffff_c000]);
    assert_eq!(
        map(&mut api, 4096),
        (1 << 48) - 4096,
        "the 32-bit attempt failed"
    );
    api.unmap_single(dev, C0, iommulab::addr::Iova::new(0xffff_c000), 4096, dir)
        .unwrap();
    api.unmap_single(dev, C0, iommulab::addr::Iova::new(0xffff_d000), 4096, dir)
        .unwrap();
    // Two pages would fit at 0xffffc000 now, but the device no longer looks below 4 GiB.
    assert_eq!(map(&mut api, 8192), (1 << 48) - 4 * 4096);
}
