//! The TCE units (Calgary, DART, S2.1–S2.3) behind the experiment description: any
//! experiment runs on any unit (`[hardware] unit = ...`), Calgary never invalidates a single
//! entry whatever the flush policy, and the DMA path allocates nothing per operation on a
//! TCE unit either.

use iommulab::addr::{Access, Bdf, CpuId, DmaDirection, Hpa, Iova, Pfn};
use iommulab::clock::Cycles;
use iommulab::dma::{DmaApi, DmaConfig, Native};
use iommulab::experiment::{ExperimentConfig, UnitKind, no_progress, run_experiment};
use iommulab::flush::{FlushPolicy, PerLap, Strict};
use iommulab::hw::tce::{Tce, TceFormat};
use iommulab::hw::{Calgary, Dart, IommuStats, RemapUnit, TceConfig};
use iommulab::iova::{Bitmap, IovaAllocator, RbTree};

#[global_allocator]
static ALLOC: alloc_counter::CountingAlloc = alloc_counter::CountingAlloc::new();

fn run(configuration: &str, unit: UnitKind) -> iommulab::experiment::RunResult {
    let toml = format!(
        "configuration = \"{configuration}\"\n[hardware]\nunit = \"{}\"\n[workload]\nios = 3000\n",
        unit.name()
    );
    let c = ExperimentConfig::from_toml(&toml).unwrap();
    run_experiment(&c, &mut no_progress).unwrap()
}

/// Every named configuration runs on the three units; Calgary performs only whole flushes,
/// each paying the quiesce, so strict invalidation costs it more than VT-d.
#[test]
fn every_configuration_runs_on_every_unit() {
    for conf in ["default", "strict", "bitmap", "strict-bitmap", "modern"] {
        let vtd = run(conf, UnitKind::Vtd);
        let calgary = run(conf, UnitKind::Calgary);
        let dart = run(conf, UnitKind::Dart);
        for r in [&vtd, &calgary, &dart] {
            assert_eq!(r.ops, 3000, "{conf}");
            assert_eq!(r.faults, 0, "{conf}");
        }
        assert_eq!(calgary.config, format!("{conf}@calgary"));
        assert_eq!(vtd.config, conf);
        let s = calgary.stats.iommu;
        assert_eq!((s.inv_page, s.inv_domain), (0, 0), "{conf}: {s:?}");
        assert_eq!(calgary.stats.iommu.pte_sets, vtd.stats.iommu.pte_sets);
        assert_eq!(dart.stats.iommu.inv_domain, 0, "{conf}");
    }
    // Strict: one whole flush (with quiesce) per unmap on Calgary, one page flush on VT-d.
    let (v, c) = (
        run("strict", UnitKind::Vtd),
        run("strict", UnitKind::Calgary),
    );
    assert_eq!(c.stats.iommu.inv_global, v.stats.iommu.inv_page);
    assert!(c.modeled_hw_ns_per_op > v.modeled_hw_ns_per_op);
    // The S2.4 deferral (bitmap + per-lap flush): a handful of whole flushes, not one per I/O.
    assert!(run("bitmap", UnitKind::Calgary).stats.iommu.inv_global < 10);
}

/// A guest runs on whichever unit bare metal would (`[hardware] unit`): on VT-d, Calgary and
/// DART the guest's strategy makes the same hypercalls and requests, while the modeled cycles
/// are each unit's; a guest larger than a TCE table can cover is refused by name.
#[test]
fn a_guest_runs_on_every_unit() {
    let guest = |unit: UnitKind| {
        let toml = format!(
            "[hardware]\nunit = \"{}\"\n[system]\nkind = \"guest\"\nstrategy = \"single-use\"\n\
             [workload]\nkind = \"netperf-send\"\npackets = 2000\n",
            unit.name()
        );
        let c = ExperimentConfig::from_toml(&toml).unwrap();
        run_experiment(&c, &mut no_progress).unwrap().guest.unwrap()
    };
    let vtd = guest(UnitKind::Vtd);
    assert!(vtd.map_requests > 0 && vtd.unmap_requests > 0);
    for unit in [UnitKind::Calgary, UnitKind::Dart] {
        let g = guest(unit);
        assert_eq!(
            (g.hypercalls, g.map_requests, g.unmap_requests, g.hits),
            (
                vtd.hypercalls,
                vtd.map_requests,
                vtd.unmap_requests,
                vtd.hits
            ),
            "{unit:?}"
        );
        assert_eq!(g.faulted_accesses, 0, "{unit:?}");
        assert_ne!(g.cycles, vtd.cycles, "{unit:?}");
    }
    let e = ExperimentConfig::from_toml(
        "[hardware]\nunit = \"calgary\"\n[system]\nkind = \"guest\"\nguest_mib = 65536\n\
         [workload]\nkind = \"netperf-send\"\n",
    )
    .unwrap()
    .validate()
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("system.guest_mib") && e.contains("calgary"),
        "{e}"
    );
    let e = ExperimentConfig::from_toml("[hardware]\nunit = \"amd\"\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("hardware.unit") || e.contains("calgary"), "{e}");
}

const ENTRIES: u64 = 1 << 14;

fn io_loop<A: IovaAllocator, F: FlushPolicy, U: RemapUnit>(
    api: &mut DmaApi<A, F, Native<U>>,
    dev: iommulab::dma::DeviceHandle,
    ring: &mut [Option<Iova>; 4],
    from: u64,
    ios: u64,
) -> u64 {
    let before = alloc_counter::this_thread();
    let cpu = CpuId::new(0);
    for i in from..from + ios {
        let slot = usize::try_from(i % 4).unwrap();
        if let Some(a) = ring[slot].take() {
            api.unmap_single(dev, cpu, a, 1024, DmaDirection::ToDevice)
                .unwrap();
        }
        let phys = Hpa::new(0x4000_0000 + (i % 4096) * 4096);
        let a = api
            .map_single(dev, cpu, phys, 1024, DmaDirection::ToDevice)
            .unwrap();
        api.device_access(dev, a, 1024, Access::Read).unwrap();
        ring[slot] = Some(a);
        if i % 256 == 0 {
            api.tick(Cycles::new(i * 10_000)).unwrap();
        }
    }
    alloc_counter::this_thread() - before
}

fn no_alloc<Fmt: TceFormat, A: IovaAllocator, F: FlushPolicy>(a: A, f: F) -> IommuStats {
    let unit = Tce::<Fmt>::new(TceConfig {
        table_entries: ENTRIES,
        ..TceConfig::default()
    })
    .unwrap();
    let mut api = DmaApi::new(DmaConfig::default(), Native::new(unit), a, f);
    let dev = api.attach(Bdf::new(0, 1, 0).unwrap()).unwrap();
    let mut ring = [None; 4];
    // Warm-up: the bitmap wraps its 2^14 pages twice.
    io_loop(&mut api, dev, &mut ring, 0, 40_000);
    let n = io_loop(&mut api, dev, &mut ring, 40_000, 20_000);
    assert_eq!(n, 0, "{}: {n} allocations in 20 000 I/Os", Fmt::KIND);
    api.unit().stats()
}

fn space() -> (Pfn<Iova>, Pfn<Iova>) {
    (Pfn::new(1), Pfn::new(ENTRIES))
}

#[test]
fn calgary_bitmap_per_lap_does_not_allocate() {
    let (s, e) = space();
    let st = no_alloc::<iommulab::hw::tce::CalgaryFormat, _, _>(
        Bitmap::new(s, e).unwrap(),
        PerLap::new(),
    );
    assert_eq!(st.inv_page, 0);
    // 60 000 I/Os over a 2^14-entry table, ≈ 3.7 laps: one whole flush per wrap (S2.4), and
    // with 4 ranges outstanding up to 4 extra wraps per lap (the GART free rule, iova/bitmap.rs).
    assert!((3..=4 * 4).contains(&st.inv_global), "{st:?}");
}

#[test]
fn dart_strict_rbtree_does_not_allocate() {
    let (s, e) = space();
    let st =
        no_alloc::<iommulab::hw::tce::DartFormat, _, _>(RbTree::new(s, e).unwrap(), Strict::new());
    // DART invalidates each entry as it builds it (Linux's dart_build: 60 000 maps), and the
    // strict policy asks for one more per unmap (59 996), each a dart_tlb_invalidate_one.
    assert_eq!(st.inv_page, 60_000 + 59_996);
    assert!(Calgary::new(TceConfig::default()).is_ok() && Dart::new(TceConfig::default()).is_ok());
}
