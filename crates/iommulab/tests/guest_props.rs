//! Property tests of the guest/host split (S1.1, S1.5–S1.7, S1.11): random hypercall
//! batches against the host, and random driver map/unmap/access/quota sequences through
//! `GuestDma` for every strategy, batching mode and online/offline policy. After every
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

use iommulab::addr::{Access, DmaDirection, Gpa, Perm, Pfn};
use iommulab::virt::{
    Batching, CacheOnly, EvictionPolicy, Fifo, FifoConfig, GuestConfig, GuestDma, Host, HostConfig,
    Hypercall, Lookahead, Lru, LruConfig, Opt, OptConfig, PageRef, Prefetch, PrefetchConfig,
    Strategy,
};
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
    let mut g =
        GuestDma::<E>::new(cfg, policy, la).map_err(|e| TestCaseError::fail(e.to_string()))?;
    let mut slots: Vec<Option<(Vec<u64>, DmaDirection, bool)>> = vec![None; 6];
    let mut q = quota;
    for &o in ops {
        match o {
            Op::Map {
                slot,
                page,
                len,
                dir,
            } => {
                if slots[slot].is_some() {
                    continue;
                }
                let pages: Vec<u64> = (page..(page + len).min(PAGES)).collect();
                let d = dir_of(dir);
                let snap = |g: &GuestDma<E>| {
                    let mut cp: Vec<(Pfn<Gpa>, u32)> =
                        g.cache().map(|c| c.pages().collect()).unwrap_or_default();
                    cp.sort();
                    let pins: Vec<u32> = (0..PAGES)
                        .map(|p| g.host().pin_count(Pfn::new(p)))
                        .collect();
                    (cp, pins, g.host().stats(), g.pending().clone())
                };
                let before = snap(&g);
                // Even slots hold DMA-allocated buffers (S1.11).
                let ok = g
                    .map_buffer(&pages, d, slot % 2 == 0)
                    .map_err(|e| TestCaseError::fail(e.to_string()))?;
                let one = pages.len() == 1;
                slots[slot] = Some((pages, d, ok));
                if !ok && one {
                    prop_assert_eq!(snap(&g), before, "a refused one-page map changed state");
                }
            }
            Op::Unmap(slot) => {
                if let Some((pages, d, true)) = slots[slot].take() {
                    g.unmap_buffer(&pages, d, slot % 2 == 0)
                        .map_err(|e| TestCaseError::fail(e.to_string()))?;
                }
            }
            Op::Access(slot) => {
                if let Some((pages, d, true)) = &slots[slot] {
                    let a = if *d == DmaDirection::ToDevice {
                        Access::Read
                    } else {
                        Access::Write
                    };
                    g.device_access(pages, a);
                }
            }
            Op::Quota(nq) => {
                g.set_quota(nq)
                    .map_err(|e| TestCaseError::fail(e.to_string()))?;
                q = nq;
            }
        }
        let r = g.result();
        prop_assert_eq!(r.hits + r.misses + r.refused, r.maps);
        prop_assert_eq!(r.faulted_accesses, 0);
        g.host().check().map_err(TestCaseError::fail)?;
        if let Some(c) = g.cache() {
            if strategy == Strategy::OnDemand {
                prop_assert!(
                    c.len() as u64 <= q.max(c.pinned() as u64),
                    "|S| {} > Q {}",
                    c.len(),
                    q
                );
                if cache_only == CacheOnly::All {
                    prop_assert!(
                        g.host().pinned() <= q.max(c.len() as u64 + g.pending().unmap.len() as u64)
                    );
                    prop_assert_eq!(
                        g.host().pinned(),
                        (c.len() + g.pending().unmap.len()) as u64
                    );
                }
            }
            for (p, rc) in c.pages() {
                if rc > 0 {
                    prop_assert!(g.host().pin_count(p) > 0, "pinned page {p:?} not mapped");
                }
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
    g.flush().map_err(|e| TestCaseError::fail(e.to_string()))?;
    g.host().check().map_err(TestCaseError::fail)?;
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
