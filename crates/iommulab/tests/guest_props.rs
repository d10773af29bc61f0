//! Property tests of the guest/host split (S1.1, S1.5–S1.7, S1.11): random hypercall
//! batches against the host, and random driver map/unmap/access/quota sequences through
//! the guest's DMA API (`Guest`: `DmaApi` over the `HypercallBackend`) for every strategy, batching mode and online/offline policy. After every
//! step:
//!
//! - a refused hypercall leaves the host unchanged; a refused driver map leaves guest and
//!   host unchanged (single-page buffers: nothing was mapped for it);
//! - the map cache holds |S| ≤ Q, the host never pins more than its quota;
//! - pinned (refcount > 0) cache pages are mapped in the host IOMMU and reachable by the
//!   device (never evicted);
//! - the host's pin table agrees with its IOMMU, and with the cache plus pending unmaps;
//! - hits + misses + refused = maps;
//! - `direct` makes no hypercall after setup; `single-use` and `shared` (not piggyback)
//!   give 0 stale accesses; no in-flight access ever faults.

use std::sync::Arc;

use iommulab::addr::{Access, CpuId, DmaDirection, Gpa, Perm, Pfn};
use iommulab::testing::ops::OpsWorkload;
use iommulab::trace::pages::MAX_PAGES_PER_MAP;
use iommulab::virt::strategy::{Direct, OnDemand, Persistent, Shared, SingleUse};
use iommulab::virt::{
    Batching, CacheOnly, EvictionPolicy, Fifo, FifoConfig, Guest, GuestConfig, GuestDriver,
    GuestError, GuestStrategy, Host, HostConfig, Hypercall, Lookahead, Lru, LruConfig, Opt,
    OptConfig, PageRef, Prefetch, PrefetchConfig, Strategy,
};
use iommulab::workload::DmaOp;
use proptest::prelude::*;
use proptest::strategy::Strategy as _;

const PAGES: u64 = 24;

fn host_call() -> impl proptest::strategy::Strategy<Value = (Vec<u64>, Vec<u64>)> {
    (
        proptest::collection::vec(0u64..PAGES + 2, 0..4),
        proptest::collection::vec(0u64..PAGES + 2, 0..4),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Every refused hypercall leaves the host unchanged; served ones keep |pinned| ≤ Q.
    #[test]
    fn refused_hypercalls_change_nothing(calls in proptest::collection::vec(host_call(), 1..40), quota in 0u64..10) {
        let mut h = Host::new(HostConfig { guest_pages: PAGES, quota, ..HostConfig::default() });
        for (unmap, map) in calls {
            let call = Hypercall {
                unmap: unmap.iter().map(|&g| Pfn::new(g)).collect(),
                map: map.iter().map(|&g| (Pfn::new(g), Perm::Read)).collect(),
            };
            let before: Vec<u32> = (0..PAGES).map(|g| h.pin_count(Pfn::new(g))).collect();
            let (s0, p0) = (h.stats(), h.pinned());
            match h.hypercall(&call) {
                Ok(()) => prop_assert!(h.pinned() <= quota),
                Err(_) => {
                    let after: Vec<u32> = (0..PAGES).map(|g| h.pin_count(Pfn::new(g))).collect();
                    let mut s1 = h.stats();
                    prop_assert_eq!(s1.refused, s0.refused + 1);
                    s1.refused = s0.refused;
                    prop_assert_eq!((s1, h.pinned(), after), (s0, p0, before));
                }
            }
            h.check().map_err(TestCaseError::fail)?;
        }
    }
}

#[derive(Clone, Copy, Debug)]
enum Op {
    /// Map a buffer of `len` pages from `page` into slot `slot`, direction by `dir`.
    Map {
        slot: usize,
        page: u64,
        len: u64,
        dir: u8,
    },
    Unmap(usize),
    Access(usize),
    Quota(u64),
}

fn op() -> impl proptest::strategy::Strategy<Value = Op> {
    prop_oneof![
        6 => (0usize..6, 0u64..PAGES, 1u64..3, 0u8..3).prop_map(|(slot, page, len, dir)| Op::Map { slot, page, len, dir }),
        5 => (0usize..6).prop_map(Op::Unmap),
        2 => (0usize..6).prop_map(Op::Access),
        1 => (0u64..12).prop_map(Op::Quota),
    ]
}

fn dir_of(d: u8) -> DmaDirection {
    [
        DmaDirection::ToDevice,
        DmaDirection::FromDevice,
        DmaDirection::Bidirectional,
    ][d as usize]
}

const BATCHING: [Batching; 5] = [
    Batching::None,
    Batching::Map,
    Batching::Unmap,
    Batching::Piggyback,
    Batching::MapUnmap,
];

/// The cache-page map stream the ops produce (for OPT's lookahead), ignoring refusals.
fn refs_of(ops: &[Op]) -> Vec<PageRef> {
    let mut busy = [false; 6];
    let mut refs = Vec::new();
    for o in ops {
        match *o {
            Op::Map {
                slot, page, len, ..
            } if !busy[slot] => {
                busy[slot] = true;
                refs.extend((page..(page + len).min(PAGES)).map(|g| PageRef::Map(Pfn::new(g))));
            }
            Op::Unmap(slot) => busy[slot] = false,
            _ => {}
        }
    }
    refs
}

fn run_ops<E: EvictionPolicy>(
    ops: &[Op],
    strategy: Strategy,
    batching: Batching,
    quota: u64,
    cache_only: CacheOnly,
    policy: &E::Config,
    la: Option<Arc<Lookahead>>,
) -> Result<(), TestCaseError> {
    let cfg = GuestConfig {
        strategy,
        quota,
        batching,
        cache_only,
        guest_pages: PAGES,
        ..GuestConfig::default()
    };
    let fail = |e: GuestError| TestCaseError::fail(e.to_string());
    match strategy {
        Strategy::Direct => drive(ops, &cfg, Direct::new(&cfg)),
        Strategy::SingleUse => drive(ops, &cfg, SingleUse::new(&cfg)),
        Strategy::Shared => drive(ops, &cfg, Shared::new(&cfg)),
        Strategy::Persistent => drive(
            ops,
            &cfg,
            Persistent::<E>::new(&cfg, policy, la).map_err(fail)?,
        ),
        Strategy::OnDemand => drive(
            ops,
            &cfg,
            OnDemand::<E>::new(&cfg, policy, la).map_err(fail)?,
        ),
    }
}

fn drive<S: GuestStrategy>(ops: &[Op], cfg: &GuestConfig, s: S) -> Result<(), TestCaseError> {
    let fail = |e: GuestError| TestCaseError::fail(e.to_string());
    let (strategy, batching, cache_only) = (cfg.strategy, cfg.batching, cfg.cache_only);
    let mut g = Guest::new(cfg.clone(), s).map_err(fail)?;
    let mut d = g.driver(6);
    // Slots the test believes busy (mapped, refused or not, until their unmap).
    let mut busy = [false; 6];
    let mut dirs = [DmaDirection::ToDevice; 6];
    let mut q = cfg.quota;
    let cpu = CpuId::new(0);
    for &o in ops {
        let op = match o {
            Op::Map {
                slot,
                page,
                len,
                dir,
            } => {
                if busy[slot] {
                    continue;
                }
                busy[slot] = true;
                dirs[slot] = dir_of(dir);
                let end = (page + len).min(PAGES);
                DmaOp::Map {
                    slot: slot_id(slot),
                    cpu,
                    device: 0,
                    phys: Gpa::new(page << 12),
                    len: (end - page) << 12,
                    dir: dir_of(dir),
                    // Even slots hold DMA-allocated buffers (S1.11).
                    dma_alloc: slot % 2 == 0,
                }
            }
            Op::Unmap(slot) => {
                busy[slot] = false;
                DmaOp::Unmap {
                    slot: slot_id(slot),
                    cpu,
                }
            }
            Op::Access(slot) => DmaOp::Access {
                slot: slot_id(slot),
                access: if dirs[slot] == DmaDirection::ToDevice {
                    Access::Read
                } else {
                    Access::Write
                },
            },
            Op::Quota(nq) => {
                let (api, hooks) = d.parts_mut();
                hooks.set_quota(api, nq).map_err(fail)?;
                q = nq;
                continue;
            }
        };
        let snap = |d: &GuestDriver<'_, S>| {
            let b = d.api().backend();
            let mut cp = b.strategy().cached_pages();
            cp.sort();
            let pins: Vec<u32> = (0..PAGES)
                .map(|p| b.host().pin_count(Pfn::new(p)))
                .collect();
            (cp, pins, b.host().stats(), b.pending().clone())
        };
        let before = snap(&d);
        let refused_before = d.api().backend().counters().buffers_refused;
        d.step(op, &[]).map_err(fail)?;
        if let DmaOp::Map { len: 4096, .. } = op
            && d.api().backend().counters().buffers_refused > refused_before
        {
            prop_assert_eq!(snap(&d), before, "a refused one-page map changed state");
        }
        let r = d.hooks().result(d.api());
        let b = d.api().backend();
        prop_assert_eq!(r.hits + r.misses + r.refused, r.maps);
        prop_assert_eq!(r.faulted_accesses, 0);
        b.host().check().map_err(TestCaseError::fail)?;
        let cached = b.strategy().cached_pages();
        if strategy == Strategy::OnDemand {
            prop_assert!(r.cache.is_some(), "on-demand has a map cache");
            let len = cached.len() as u64;
            let pinned = cached.iter().filter(|&&(_, rc)| rc > 0).count() as u64;
            prop_assert!(len <= q.max(pinned), "|S| {} > Q {}", len, q);
            if cache_only == CacheOnly::All {
                let pending = b.pending().unmap.len() as u64;
                prop_assert!(b.host().pinned() <= q.max(len + pending));
                prop_assert_eq!(b.host().pinned(), len + pending);
            }
        }
        for (p, rc) in cached {
            if rc > 0 {
                prop_assert!(b.host().pin_count(p) > 0, "pinned page {p:?} not mapped");
            }
        }
        match strategy {
            Strategy::Direct => prop_assert_eq!(r.hypercalls, 0),
            Strategy::SingleUse | Strategy::Shared if batching != Batching::Piggyback => {
                prop_assert_eq!(r.stale_accesses, 0);
            }
            _ => {}
        }
    }
    drop(d);
    let mut w = OpsWorkload::default();
    g.run(&mut w).map_err(fail)?;
    g.backend().host().check().map_err(TestCaseError::fail)?;
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn guest_invariants_every_strategy(
        ops in proptest::collection::vec(op(), 1..80),
        quota in 0u64..10,
        s in 0usize..5,
        b in 0usize..BATCHING.len(),
        relax in 0usize..3,
    ) {
        let strategy = Strategy::ALL[s];
        let cache_only = [CacheOnly::All, CacheOnly::ReadOnly, CacheOnly::DmaAllocated][relax];
        let ops: Vec<Op> = if strategy == Strategy::OnDemand { ops } else { ops.into_iter().filter(|o| !matches!(o, Op::Quota(_))).collect() };
        run_ops::<Lru>(&ops, strategy, BATCHING[b], quota, cache_only, &LruConfig::default(), None)?;
        run_ops::<Fifo>(&ops, strategy, BATCHING[b], quota, cache_only, &FifoConfig::default(), None)?;
        run_ops::<Prefetch>(&ops, strategy, BATCHING[b], quota, cache_only, &PrefetchConfig::default(), None)?;
        if cache_only == CacheOnly::All {
            // OPT: the lookahead needs the exact map stream; quota changes do not alter it.
            let la = Arc::new(Lookahead::from_refs(&refs_of(&ops)));
            run_ops::<Opt>(&ops, strategy, BATCHING[b], quota, cache_only, &OptConfig::default(), Some(la))?;
        }
    }
}

fn slot_id(slot: usize) -> u32 {
    u32::try_from(slot).expect("the test uses six slots")
}

/// A corrupt trace length (here 2^60 bytes) maps at most `MAX_PAGES_PER_MAP` pages, the
/// same cap as the trace statistics and the libCacheSim export, instead of allocating
/// without bound.
#[test]
fn a_huge_map_length_is_capped() {
    let cfg = GuestConfig {
        strategy: Strategy::Direct,
        guest_pages: 64,
        protection_oracle: false,
        ..GuestConfig::default()
    };
    let mut g = Guest::new(cfg.clone(), Direct::new(&cfg)).unwrap();
    let op = DmaOp::Map {
        slot: 0,
        cpu: CpuId::new(0),
        device: 0,
        phys: Gpa::new(0x1000),
        len: 1 << 60,
        dir: DmaDirection::ToDevice,
        dma_alloc: false,
    };
    g.driver(1).step(op, &[]).unwrap();
    let c = *g.backend().counters();
    assert_eq!(c.maps, MAX_PAGES_PER_MAP);
    // Pages beyond the 64-page guest are refused, so the buffer is.
    assert_eq!(
        (c.hits, c.refused, c.buffers_refused),
        (63, MAX_PAGES_PER_MAP - 63, 1)
    );
}
