//! Behaviour tests of the remapping unit.

use super::*;

const D1: DomainId = DomainId::new(1);
const D2: DomainId = DomainId::new(2);

fn dev(n: u8) -> Bdf {
    Bdf::new(0, n, 0).unwrap()
}

fn cfg() -> VtdConfig {
    VtdConfig::default()
}

/// An IOMMU with domains 1 and 2, `dev(1)` attached to D1 and `dev(2)` to D2, and the
/// given `(domain, iova pfn, hpa pfn, pages, perm)` 4 KiB mappings.
fn iommu_with(cfg: VtdConfig, rows: &[(DomainId, u64, u64, u64, Perm)]) -> Vtd {
    let mut m = Vtd::new(cfg).unwrap();
    m.create_domain(D1).unwrap();
    m.create_domain(D2).unwrap();
    m.attach(dev(1), D1).unwrap();
    m.attach(dev(2), D2).unwrap();
    for &(d, iova, hpa, pages, perm) in rows {
        m.map_range(d, Pfn::new(iova), Pfn::new(hpa), pages, perm)
            .unwrap();
    }
    m
}

#[track_caller]
fn assert_translates(m: &mut Vtd, bdf: Bdf, iova: u64, access: Access, want: u64) {
    assert_eq!(
        m.translate(bdf, Iova::new(iova), access),
        Ok(Hpa::new(want))
    );
}

#[track_caller]
fn assert_faults(m: &mut Vtd, bdf: Bdf, iova: u64, access: Access, want: FaultReason) {
    let f = m.translate(bdf, Iova::new(iova), access).unwrap_err();
    assert_eq!(
        f,
        Fault {
            bdf,
            iova: Iova::new(iova),
            access,
            reason: want
        }
    );
}

/// S0.1, VT-d §9.8: a write through a read-only mapping faults with WriteDenied.
#[test]
fn write_to_read_only_page_faults_write_denied() {
    let mut m = iommu_with(cfg(), &[(D1, 0x10, 0x80, 1, Perm::Read)]);
    assert_translates(&mut m, dev(1), 0x10_008, Access::Read, 0x80_008);
    assert_faults(
        &mut m,
        dev(1),
        0x10_008,
        Access::Write,
        FaultReason::WriteDenied,
    );
    // The second faulting access hits the IOTLB: permission is checked on hits too.
    assert_faults(
        &mut m,
        dev(1),
        0x10_010,
        Access::Write,
        FaultReason::WriteDenied,
    );
    assert_eq!(m.stats().iotlb.hits, 2);
}

/// VT-d §9.8: a read through a write-only (FromDevice) mapping faults with ReadDenied.
#[test]
fn read_from_write_only_page_faults_read_denied() {
    let mut m = iommu_with(cfg(), &[(D1, 0x10, 0x80, 1, Perm::Write)]);
    assert_translates(&mut m, dev(1), 0x10_000, Access::Write, 0x80_000);
    assert_faults(
        &mut m,
        dev(1),
        0x10_000,
        Access::Read,
        FaultReason::ReadDenied,
    );
}

/// S3.2: a translate of an unmapped page faults NotPresent, is logged and counted, and
/// fills nothing into the IOTLB.
#[test]
fn translate_of_unmapped_page_faults_not_present_and_is_logged() {
    let mut m = iommu_with(cfg(), &[]);
    assert_faults(
        &mut m,
        dev(1),
        0x5000,
        Access::Read,
        FaultReason::NotPresent,
    );
    assert_eq!(m.faults().len(), 1);
    assert_eq!(m.faults()[0].reason, FaultReason::NotPresent);
    assert_eq!(m.stats().faults, 1);
    assert!(!m.iotlb_holds(D1, Pfn::new(5)));
}

/// S3.2: the root table is indexed by bus and the context table by devfn; a device whose
/// bus has no context table faults RootNotPresent, a device on a populated bus without a
/// context entry faults ContextNotPresent.
#[test]
fn unattached_device_faults_root_or_context_not_present() {
    let mut m = iommu_with(cfg(), &[(D1, 0, 0, 1, Perm::ReadWrite)]);
    let other_bus = Bdf::new(7, 1, 0).unwrap();
    assert_faults(
        &mut m,
        other_bus,
        0,
        Access::Read,
        FaultReason::RootNotPresent,
    );
    assert_faults(
        &mut m,
        dev(9),
        0,
        Access::Read,
        FaultReason::ContextNotPresent,
    );
    // Root-not-present stops after one fetch, context-not-present after two.
    assert_eq!(m.stats().walk_fetches, 3);
}

/// S3.2: detach clears the context entry and its cached copy; re-attach switches domains.
#[test]
fn detach_and_reattach_switch_the_context() {
    let mut m = iommu_with(
        cfg(),
        &[(D1, 0, 0x100, 1, Perm::Read), (D2, 0, 0x200, 1, Perm::Read)],
    );
    assert_translates(&mut m, dev(1), 0, Access::Read, 0x100_000);
    m.detach(dev(1)).unwrap();
    assert_eq!(m.detach(dev(1)), Err(MapError::NotAttached { bdf: dev(1) }));
    assert_faults(
        &mut m,
        dev(1),
        0,
        Access::Read,
        FaultReason::ContextNotPresent,
    );
    m.attach(dev(1), D2).unwrap();
    assert_eq!(m.domain_of(dev(1)), Some(D2));
    assert_translates(&mut m, dev(1), 0, Access::Read, 0x200_000);
}

/// S0.3: unmap does not touch the IOTLB; the stale entry keeps translating to the old frame
/// until a page-selective invalidation removes it. The stale-access oracle relies on this.
#[test]
fn stale_iotlb_entry_translates_after_unmap_until_invalidated() {
    let mut m = iommu_with(cfg(), &[(D1, 0x42, 0x99, 1, Perm::ReadWrite)]);
    assert_translates(&mut m, dev(1), 0x42_000, Access::Write, 0x99_000);
    assert_eq!(
        m.unmap(D1, Pfn::new(0x42)),
        Ok((Pfn::new(0x99), PageSize::Size4K))
    );
    assert_eq!(m.lookup(D1, Pfn::new(0x42)), None);
    assert!(m.iotlb_holds(D1, Pfn::new(0x42)));
    assert_translates(&mut m, dev(1), 0x42_000, Access::Write, 0x99_000);
    m.invalidate(&[InvRequest::covering(D1, Pfn::new(0x42), 1)]);
    assert!(!m.iotlb_holds(D1, Pfn::new(0x42)));
    assert_faults(
        &mut m,
        dev(1),
        0x42_000,
        Access::Write,
        FaultReason::NotPresent,
    );
}

/// S1.10: a non-present → present change needs no IOTLB flush: a fresh mapping translates
/// immediately, because not-present entries are never cached.
#[test]
fn new_mapping_is_visible_without_invalidation() {
    let mut m = iommu_with(cfg(), &[]);
    assert_faults(
        &mut m,
        dev(1),
        0x7000,
        Access::Read,
        FaultReason::NotPresent,
    );
    m.map(D1, Pfn::new(7), Pfn::new(8), PageSize::Size4K, Perm::Read)
        .unwrap();
    m.flush_write_buffer();
    assert_translates(&mut m, dev(1), 0x7000, Access::Read, 0x8000);
}

/// S1.10, S3.2: PSI with address mask invalidates exactly the aligned block.
#[test]
fn page_selective_invalidation_with_mask_removes_exactly_the_aligned_block() {
    let mut m = iommu_with(cfg(), &[(D1, 0, 0x1000, 32, Perm::Read)]);
    for p in 0..32 {
        m.translate(dev(1), Pfn::<Iova>::new(p).base(PAGE_4K), Access::Read)
            .unwrap();
    }
    //  0 ........ 16 ######## 24 ........ 32    order 3 at 21 → [16, 24)
    m.invalidate(&[InvRequest::Page {
        domain: D1,
        pfn: Pfn::new(21),
        order: 3,
    }]);
    for p in 0..32 {
        assert_eq!(
            m.iotlb_holds(D1, Pfn::new(p)),
            !(16..24).contains(&p),
            "page {p}"
        );
    }
    assert_eq!(m.stats().iotlb.invalidated_entries, 8);
    assert_eq!(m.stats().inv_page, 1);
}

/// S1.10: domain-selective invalidation leaves other domains' entries.
#[test]
fn domain_invalidation_leaves_other_domains_entries() {
    let mut m = iommu_with(
        cfg(),
        &[(D1, 0, 0x100, 4, Perm::Read), (D2, 0, 0x200, 4, Perm::Read)],
    );
    for p in 0..4 {
        let a = Pfn::<Iova>::new(p).base(PAGE_4K);
        m.translate(dev(1), a, Access::Read).unwrap();
        m.translate(dev(2), a, Access::Read).unwrap();
    }
    m.invalidate(&[InvRequest::Domain(D1)]);
    assert!((0..4).all(|p| !m.iotlb_holds(D1, Pfn::new(p))));
    assert!((0..4).all(|p| m.iotlb_holds(D2, Pfn::new(p))));
    m.invalidate(&[InvRequest::Global]);
    assert!((0..4).all(|p| !m.iotlb_holds(D2, Pfn::new(p))));
    let s = m.stats();
    assert_eq!((s.inv_domain, s.inv_global, s.inv_waits), (1, 1, 2));
}

/// S1.10: N page invalidations cost N×(overhead+hw) through registers and
/// N×(descriptor+hw) + one wait through the queue.
#[test]
fn register_vs_queued_invalidation_cost() {
    const N: u64 = 10;
    let reqs: Vec<InvRequest> = (0..N)
        .map(|p| InvRequest::Page {
            domain: D1,
            pfn: Pfn::new(p),
            order: 0,
        })
        .collect();
    let c = CostModel::MODERN;
    let mut reg = Vtd::new(VtdConfig {
        invalidation: InvalidationInterface::Register,
        ..cfg()
    })
    .unwrap();
    reg.invalidate(&reqs);
    assert_eq!(
        reg.cpu_cycles().get(),
        N * (c.inv_register_overhead + c.inv_page)
    );
    assert_eq!(reg.stats().inv_waits, 0);
    let mut q = Vtd::new(VtdConfig {
        invalidation: InvalidationInterface::Queued,
        ..cfg()
    })
    .unwrap();
    q.invalidate(&reqs);
    assert_eq!(
        q.cpu_cycles().get(),
        N * (c.inv_descriptor + c.inv_page) + c.inv_wait
    );
    assert_eq!((q.stats().inv_page, q.stats().inv_waits), (N, 1));
    q.invalidate(&[]);
    assert_eq!(q.stats().inv_waits, 1);
}

/// S0.1: 3/4/5 levels of 9 index bits reach 39/48/57 address bits and reject beyond.
#[test]
fn levels_reach_39_48_57_bits_and_reject_beyond() {
    for (levels, bits) in [(3u8, 39u8), (4, 48), (5, 57)] {
        let mut m = iommu_with(VtdConfig { levels, ..cfg() }, &[]);
        assert_eq!(m.address_bits(), bits);
        let last = (1u64 << (bits - 12)) - 1;
        m.map(
            D1,
            Pfn::new(last),
            Pfn::new(3),
            PageSize::Size4K,
            Perm::Read,
        )
        .unwrap();
        assert_translates(&mut m, dev(1), (last << 12) | 0xfff, Access::Read, 0x3fff);
        assert_eq!(m.stats().walk_fetches, 2 + u64::from(levels));
        assert_eq!(
            m.map(
                D1,
                Pfn::new(last + 1),
                Pfn::new(3),
                PageSize::Size4K,
                Perm::Read
            ),
            Err(MapError::BeyondAddressWidth {
                iova: 1 << bits,
                bits
            })
        );
        assert_eq!(
            m.map_range(D1, Pfn::new(last), Pfn::new(3), 2, Perm::Read),
            Err(MapError::BeyondAddressWidth {
                iova: 1 << bits,
                bits
            })
        );
        assert_faults(
            &mut m,
            dev(1),
            1 << bits,
            Access::Read,
            FaultReason::BeyondAddressWidth,
        );
    }
    assert_eq!(
        Vtd::new(VtdConfig { levels: 2, ..cfg() }).unwrap_err(),
        MapError::Levels { levels: 2 }
    );
    assert!(Vtd::new(VtdConfig { levels: 6, ..cfg() }).is_err());
}

/// VT-d §9.8: a 2 MiB leaf (PS at level 2) translates all 512 of its pages and a
/// 1 GiB leaf (PS at level 3) all 262,144, each with one IOTLB entry.
#[test]
fn super_pages_translate_all_their_pages() {
    let mut m = iommu_with(cfg(), &[]);
    m.map(
        D1,
        Pfn::new(512),
        Pfn::new(0x4_0000),
        PageSize::Size2M,
        Perm::Read,
    )
    .unwrap();
    m.map(
        D1,
        Pfn::new(1 << 18),
        Pfn::new(1 << 19),
        PageSize::Size1G,
        Perm::ReadWrite,
    )
    .unwrap();
    for p in 512..1024u64 {
        let want = (0x4_0000 + p - 512) << 12 | 0x18;
        assert_translates(&mut m, dev(1), p << 12 | 0x18, Access::Read, want);
    }
    for p in (1u64 << 18)..(2 << 18) {
        let want = ((1 << 19) + p - (1 << 18)) << 12;
        assert_translates(&mut m, dev(1), p << 12, Access::Write, want);
    }
    let s = m.stats();
    assert_eq!(s.iotlb.inserts, 2);
    assert_eq!(s.iotlb.misses, 2);
    assert_eq!(
        m.lookup(D1, Pfn::new(700)),
        Some((Pfn::new(0x4_0000 + 188), Perm::Read, PageSize::Size2M))
    );
    assert_faults(
        &mut m,
        dev(1),
        1024 << 12,
        Access::Read,
        FaultReason::NotPresent,
    );
}

/// Super-pages are unmapped whole at their first page; 4K operations inside fail.
#[test]
fn super_page_unmap_rules() {
    let mut m = iommu_with(cfg(), &[]);
    m.map(D1, Pfn::new(512), Pfn::new(0), PageSize::Size2M, Perm::Read)
        .unwrap();
    let partial = MapError::PartialSuperPage {
        iova: 513 << 12,
        size: PageSize::Size2M,
    };
    assert_eq!(m.unmap(D1, Pfn::new(513)), Err(partial.clone()));
    assert_eq!(m.unmap_range(D1, Pfn::new(513), 1), Err(partial));
    assert_eq!(
        m.map(D1, Pfn::new(600), Pfn::new(0), PageSize::Size4K, Perm::Read),
        Err(MapError::AlreadyMapped { iova: 600 << 12 })
    );
    assert_eq!(
        m.unmap(D1, Pfn::new(512)),
        Ok((Pfn::new(0), PageSize::Size2M))
    );
    assert_eq!(
        m.map(D1, Pfn::new(3), Pfn::new(512), PageSize::Size2M, Perm::Read),
        Err(MapError::Misaligned {
            iova: 3 << 12,
            hpa: 512 << 12,
            size: PageSize::Size2M
        })
    );
}

/// Caller bugs are errors and change nothing.
#[test]
fn map_and_unmap_errors_leave_tables_unchanged() {
    let mut m = iommu_with(cfg(), &[(D1, 10, 100, 1, Perm::Read)]);
    let before = m.stats();
    assert_eq!(
        m.map_range(D1, Pfn::new(5), Pfn::new(0), 10, Perm::Read),
        Err(MapError::AlreadyMapped { iova: 10 << 12 })
    );
    assert_eq!(m.lookup(D1, Pfn::new(5)), None);
    assert_eq!(
        m.unmap_range(D1, Pfn::new(9), 3),
        Err(MapError::NotMapped { iova: 9 << 12 })
    );
    assert!(m.lookup(D1, Pfn::new(10)).is_some());
    assert_eq!(
        m.unmap(D1, Pfn::new(11)),
        Err(MapError::NotMapped { iova: 11 << 12 })
    );
    assert_eq!(
        m.map(
            DomainId::new(7),
            Pfn::new(0),
            Pfn::new(0),
            PageSize::Size4K,
            Perm::Read
        ),
        Err(MapError::NoSuchDomain { domain: 7 })
    );
    assert_eq!(
        m.create_domain(D1),
        Err(MapError::DomainExists { domain: 1 })
    );
    assert_eq!(
        m.attach(dev(3), DomainId::new(7)),
        Err(MapError::NoSuchDomain { domain: 7 })
    );
    assert_eq!(
        m.map(
            D1,
            Pfn::new(0),
            Pfn::new(1 << 40),
            PageSize::Size4K,
            Perm::Read
        ),
        Err(MapError::HpaBeyondAddressWidth { hpa: 1 << 52 })
    );
    assert_eq!(m.stats(), before);
    assert_eq!(
        MapError::AlreadyMapped { iova: 0xa000 }.to_string(),
        "iova 0xa000 is already mapped"
    );
}

/// S3.2: a context-cache miss fetches the root and context entries (2 fetches); an IOTLB
/// miss walks one entry per level; an IOTLB hit fetches nothing.
#[test]
fn walk_fetches_and_device_cycles_follow_the_caches() {
    let mut m = iommu_with(cfg(), &[(D1, 0, 0, 1, Perm::Read)]);
    m.translate(dev(1), Iova::new(0), Access::Read).unwrap();
    let s = m.stats();
    assert_eq!((s.context_cache_misses, s.walk_fetches), (1, 2 + 4));
    m.translate(dev(1), Iova::new(8), Access::Read).unwrap();
    let s = m.stats();
    assert_eq!((s.context_cache_hits, s.walk_fetches), (1, 6));
    assert_eq!(m.device_cycles().get(), 6 * CostModel::MODERN.walk_fetch);
}

/// L13: hits + misses == lookups; translations == successes + faults.
#[test]
fn stats_add_up() {
    let mut m = iommu_with(cfg(), &[(D1, 0, 0, 64, Perm::Read)]);
    let mut ok = 0;
    for i in 0..200u64 {
        let iova = Iova::new((i * 7 % 80) << 12);
        let access = if i % 5 == 0 {
            Access::Write
        } else {
            Access::Read
        };
        ok += u64::from(m.translate(dev(1), iova, access).is_ok());
    }
    let s = m.stats();
    assert_eq!(s.iotlb.hits + s.iotlb.misses, s.iotlb.lookups);
    assert_eq!(s.translations, 200);
    assert_eq!(ok + s.faults, s.translations);
    assert_eq!(
        s.context_cache_hits + s.context_cache_misses,
        s.translations
    );
    let mut sum = s;
    sum.merge(&s);
    assert_eq!(sum.translations, 400);
}

/// Primary fault logging is bounded; overflow is counted.
#[test]
fn fault_log_keeps_first_records_and_counts_overflow() {
    let mut m = iommu_with(
        VtdConfig {
            fault_log_capacity: 3,
            ..cfg()
        },
        &[],
    );
    for p in 0..10u64 {
        assert!(
            m.translate(dev(1), Iova::new(p << 12), Access::Read)
                .is_err()
        );
    }
    assert_eq!(m.faults().len(), 3);
    assert_eq!(m.faults()[2].iova, Iova::new(2 << 12));
    assert_eq!(m.faults_dropped(), 7);
    assert_eq!(m.stats().faults, 10);
}

/// S1.10: the write-buffer flush is counted and charged only where CAP.RWBF is set.
#[test]
fn write_buffer_flush_only_with_rwbf() {
    let cost = CostModel::VTD_2008;
    let mut m = Vtd::new(VtdConfig { cost, ..cfg() }).unwrap();
    m.flush_write_buffer();
    assert_eq!(
        (m.stats().write_buffer_flushes, m.cpu_cycles().get()),
        (1, 1200)
    );
    let mut m = Vtd::new(VtdConfig {
        cost,
        write_buffer_flush: false,
        ..cfg()
    })
    .unwrap();
    m.flush_write_buffer();
    assert_eq!(
        (m.stats().write_buffer_flushes, m.cpu_cycles().get()),
        (0, 0)
    );
}

/// S1.10: PTE sets and clears are charged per leaf to the CPU clock.
#[test]
fn pte_writes_are_charged_per_leaf() {
    let cost = CostModel::VTD_2008;
    let mut m = iommu_with(VtdConfig { cost, ..cfg() }, &[(D1, 0, 0, 3, Perm::Read)]);
    m.unmap_range(D1, Pfn::new(0), 2).unwrap();
    let s = m.stats();
    assert_eq!((s.pte_sets, s.pte_clears), (3, 2));
    assert_eq!(m.cpu_cycles().get(), 3 * 1400 + 2 * 1100);
}

/// S0.1, S3.2: table pages = root + context tables + one table per level per new path;
/// intermediate tables are kept after unmap.
#[test]
fn table_pages_count_root_context_and_page_tables() {
    let mut m = Vtd::new(cfg()).unwrap();
    assert_eq!(m.table_bytes(), 4096);
    m.create_domain(D1).unwrap();
    m.attach(dev(1), D1).unwrap();
    m.attach(dev(2), D1).unwrap(); // same bus: same context table
    assert_eq!(m.stats().table_pages, 3);
    m.map(D1, Pfn::new(0), Pfn::new(0), PageSize::Size4K, Perm::Read)
        .unwrap();
    assert_eq!(m.stats().table_pages, 6);
    m.unmap(D1, Pfn::new(0)).unwrap();
    assert_eq!(m.table_bytes(), 6 * 4096);
}

/// An IOTLB of one set and one way thrashes between two pages: every access misses.
#[test]
fn tiny_iotlb_evicts_and_walks_again() {
    let iotlb = IotlbConfig::new(1, 1).unwrap();
    let mut m = iommu_with(VtdConfig { iotlb, ..cfg() }, &[(D1, 0, 0, 2, Perm::Read)]);
    for i in 0..6u64 {
        m.translate(dev(1), Iova::new((i % 2) << 12), Access::Read)
            .unwrap();
    }
    let s = m.stats().iotlb;
    assert_eq!((s.misses, s.evictions), (6, 5));
}

/// The config round-trips through TOML with defaults filled in.
#[test]
fn config_deserialises_with_defaults() {
    let c: VtdConfig =
        toml::from_str("levels = 3\ninvalidation = \"register\"\n[iotlb]\nways = 4\n").unwrap();
    assert_eq!(c.levels, 3);
    assert_eq!(c.invalidation, InvalidationInterface::Register);
    assert_eq!(c.iotlb, IotlbConfig { sets: 32, ways: 4 });
    assert_eq!(c.cost, CostModel::MODERN);
}
