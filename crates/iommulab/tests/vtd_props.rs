//! Model-based property tests: random map/unmap/translate sequences run through the VT-d
//! model ([`Vtd`]) and the naive `HashMap` oracle ([`NaiveTable`]) (S0.1, S0.3).
//!
//! After every step: `lookup` agrees with the oracle on every touched page; translations
//! agree whenever the IOTLB cannot be stale (every unmap is followed by an invalidation that
//! covers it); errors agree (lowest already-mapped / not-mapped page); counters add up.
//! Between an unmap and its invalidation the test also checks the hardware behaviour the
//! stale-access oracle relies on: a page the IOTLB still holds keeps translating to its old
//! frame.

use std::collections::BTreeSet;

use iommulab::addr::{Access, Bdf, DomainId, Hpa, Iova, PAGE_4K, Perm, Pfn};
use iommulab::hw::{Fault, InvRequest, IotlbConfig, Vtd, VtdConfig};
use iommulab::testing::naive::NaiveTable;
use proptest::prelude::*;

const D: DomainId = DomainId::new(5);

fn dev() -> Bdf {
    Bdf::new(0x3a, 2, 1).unwrap()
}

/// How the test invalidates after an unmap.
#[derive(Clone, Copy, Debug)]
enum Flush {
    /// `InvRequest::covering` the range (page-selective with mask, or domain-selective).
    Covering,
    /// One page-selective request per page.
    PerPage,
    /// Domain-selective.
    Domain,
    /// Global.
    Global,
}

#[derive(Clone, Debug)]
enum Op {
    Map {
        iova: u64,
        hpa: u64,
        pages: u64,
        perm: Perm,
    },
    Unmap {
        iova: u64,
        pages: u64,
        flush: Flush,
    },
    Translate {
        iova: u64,
        offset: u64,
        access: Access,
    },
}

/// Two windows of I/O pages: a low one (crossing leaf-table boundaries at 512) and one just
/// below the top of the smallest (39-bit) address space, so upper-level indices vary too.
fn iova_pfn() -> impl Strategy<Value = u64> {
    prop_oneof![3 => 0..1600u64, 1 => ((1u64 << 27) - 1100)..((1u64 << 27) - 64)]
}

fn perm() -> impl Strategy<Value = Perm> {
    prop_oneof![Just(Perm::Read), Just(Perm::Write), Just(Perm::ReadWrite)]
}

fn access() -> impl Strategy<Value = Access> {
    prop_oneof![Just(Access::Read), Just(Access::Write)]
}

fn flush() -> impl Strategy<Value = Flush> {
    prop_oneof![
        4 => Just(Flush::Covering),
        2 => Just(Flush::PerPage),
        1 => Just(Flush::Domain),
        1 => Just(Flush::Global),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (iova_pfn(), 0..(1u64 << 40) - 64, 1..64u64, perm())
            .prop_map(|(iova, hpa, pages, perm)| Op::Map { iova, hpa, pages, perm }),
        2 => (iova_pfn(), 1..64u64, flush())
            .prop_map(|(iova, pages, flush)| Op::Unmap { iova, pages, flush }),
        5 => (iova_pfn(), 0..4096u64, access())
            .prop_map(|(iova, offset, access)| Op::Translate { iova, offset, access }),
    ]
}

fn config() -> impl Strategy<Value = VtdConfig> {
    (
        3u8..=5,
        prop_oneof![Just((1, 4)), Just((4, 2)), Just((32, 8))],
    )
        .prop_map(|(levels, (sets, ways))| VtdConfig {
            levels,
            iotlb: IotlbConfig::new(sets, ways).unwrap(),
            context_cache_entries: 2,
            ..VtdConfig::default()
        })
}

fn pfn_iova(p: u64) -> Pfn<Iova> {
    Pfn::new(p)
}

fn check_invariants(m: &Vtd, ok_translations: u64) {
    let s = m.stats();
    assert_eq!(s.iotlb.hits + s.iotlb.misses, s.iotlb.lookups);
    assert_eq!(ok_translations + s.faults, s.translations);
    assert_eq!(
        s.context_cache_hits + s.context_cache_misses,
        s.translations
    );
    assert_eq!(m.table_bytes(), s.table_pages * 4096);
}

fn run(cfg: VtdConfig, ops: &[Op]) {
    let mut m = Vtd::new(cfg).unwrap();
    m.create_domain(D).unwrap();
    m.attach(dev(), D).unwrap();
    let mut oracle = NaiveTable::new();
    let mut touched = BTreeSet::new();
    let mut ok_translations = 0;

    for op in ops {
        match *op {
            Op::Map {
                iova,
                hpa,
                pages,
                perm,
            } => {
                let got = m.map_range(D, pfn_iova(iova), Pfn::<Hpa>::new(hpa), pages, perm);
                let want = oracle.map(pfn_iova(iova), Pfn::new(hpa), pages, perm);
                assert_eq!(got, want, "{op:?}");
                touched.extend(iova..iova + pages);
            }
            Op::Unmap { iova, pages, flush } => {
                // The first page the IOTLB holds, with its mapping, before the PTEs go away.
                let held = (iova..iova + pages)
                    .find(|&p| m.iotlb_holds(D, pfn_iova(p)))
                    .and_then(|p| oracle.lookup(pfn_iova(p)).map(|l| (p, l)));
                let got = m.unmap_range(D, pfn_iova(iova), pages);
                let want = oracle.unmap(pfn_iova(iova), pages);
                assert_eq!(got, want, "{op:?}");
                touched.extend(iova..iova + pages);
                if got.is_err() {
                    continue;
                }
                // S0.3: the unmap left the IOTLB alone; a held page still translates.
                if let Some((p, (frame, perm))) = held {
                    assert!(m.iotlb_holds(D, pfn_iova(p)));
                    let a = if perm.read() {
                        Access::Read
                    } else {
                        Access::Write
                    };
                    let r = m.translate(dev(), pfn_iova(p).base(PAGE_4K), a);
                    assert_eq!(r, Ok(frame.base(PAGE_4K)), "stale entry for page {p:#x}");
                    ok_translations += 1;
                }
                let reqs: Vec<InvRequest> = match flush {
                    Flush::Covering => vec![InvRequest::covering(D, pfn_iova(iova), pages)],
                    Flush::PerPage => (iova..iova + pages)
                        .map(|p| InvRequest::Page {
                            domain: D,
                            pfn: pfn_iova(p),
                            order: 0,
                        })
                        .collect(),
                    Flush::Domain => vec![InvRequest::Domain(D)],
                    Flush::Global => vec![InvRequest::Global],
                };
                m.invalidate(&reqs);
                for p in iova..iova + pages {
                    assert!(
                        !m.iotlb_holds(D, pfn_iova(p)),
                        "page {p:#x} survived {flush:?}"
                    );
                }
            }
            Op::Translate {
                iova,
                offset,
                access,
            } => {
                let addr = Iova::new((iova << 12) | offset);
                let got = m.translate(dev(), addr, access);
                let want = oracle.translate(addr, access).map_err(|reason| Fault {
                    bdf: dev(),
                    iova: addr,
                    access,
                    reason,
                });
                assert_eq!(got, want, "{op:?}");
                ok_translations += u64::from(got.is_ok());
                touched.insert(iova);
            }
        }
        for &p in &touched {
            let got = m
                .lookup(D, pfn_iova(p))
                .map(|(frame, perm, _)| (frame, perm));
            assert_eq!(
                got,
                oracle.lookup(pfn_iova(p)),
                "lookup of page {p:#x} after {op:?}"
            );
        }
        check_invariants(&m, ok_translations);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// S0.1, S0.3: the multi-level tables, IOTLB and invalidation behave like a flat map
    /// whenever every unmap is invalidated.
    #[test]
    fn iommu_agrees_with_naive_table(cfg in config(), ops in prop::collection::vec(op(), 1..80)) {
        run(cfg, &ops);
    }
}
