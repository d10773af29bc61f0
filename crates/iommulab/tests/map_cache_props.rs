//! Model-based tests of the guest map cache (S1.2, S1.5): random `Map` / `Unmap` /
//! `SetQuota` sequences over a small page universe drive every eviction policy, and after
//! each step the cache must keep the invariants the `virt` docs promise:
//!
//! - |S| ≤ Q, except after a quota shrink blocked by pins: then every cached page is pinned
//!   and |S| never grows until it is back under Q;
//! - pinned pages are never evicted, and refcounts equal a model's;
//! - a refused map changes nothing;
//! - hits + misses + refused == maps.
//!
//! LRU and FIFO are checked step by step against `NaiveCache` (victims and exact eviction
//! order), OPT against the naive farthest-next-use scan (hit/miss/refusal per step), and
//! on no-pinning streams OPT beats LRU and FIFO and optimal batching beats OPT.

use std::collections::HashMap;
use std::sync::Arc;

use iommulab::addr::{Gpa, Pfn};
use iommulab::testing::naive_cache::{NaiveCache, NaiveKind, NaiveOutcome, map_pages};
use iommulab::virt::eviction::Dump;
use iommulab::virt::{
    EvictionPolicy, Fifo, FifoConfig, Lookahead, Lru, LruConfig, MapCache, MapOutcome, Opt,
    OptBatch, OptBatchConfig, OptConfig, PageRef, Prefetch, PrefetchConfig, replay,
};
use proptest::prelude::*;

// Counts allocations so `steady_state_replay_does_not_allocate` can prove none happen.
#[global_allocator]
static ALLOC: alloc_counter::CountingAlloc = alloc_counter::CountingAlloc::new();

#[derive(Clone, Copy, Debug)]
enum Op {
    Map(u64),
    Unmap(u64),
    SetQuota(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0u64..12).prop_map(Op::Map),
        5 => (0u64..12).prop_map(Op::Unmap),
        1 => (0usize..9).prop_map(Op::SetQuota),
    ]
}

fn p(g: u64) -> Pfn<Gpa> {
    Pfn::new(g)
}

fn refs_of(ops: &[Op]) -> Vec<PageRef> {
    ops.iter()
        .filter_map(|o| match *o {
            Op::Map(g) => Some(PageRef::Map(p(g))),
            Op::Unmap(g) => Some(PageRef::Unmap(p(g))),
            Op::SetQuota(_) => None,
        })
        .collect()
}

fn snapshot<E: EvictionPolicy>(c: &MapCache<E>) -> Vec<(Pfn<Gpa>, u32)> {
    let mut v: Vec<_> = c.pages().collect();
    v.sort();
    v
}

/// Drives `ops` through `MapCache<E>` and checks the invariants after every step.
fn check_invariants<E: EvictionPolicy>(
    quota: usize,
    ops: &[Op],
    config: &E::Config,
) -> Result<(), TestCaseError> {
    let la = Arc::new(Lookahead::from_refs(&refs_of(ops)));
    let mut c = MapCache::<E>::new(quota, config, Some(la)).unwrap();
    // The model's refcounts of cached pages.
    let mut model: HashMap<Pfn<Gpa>, u32> = HashMap::new();
    let mut over = false; // a shrink left |S| > Q
    for (step, &o) in ops.iter().enumerate() {
        let before = snapshot(&c);
        let len_before = c.len();
        let stats_before = *c.stats();
        let mut evicted: Vec<Pfn<Gpa>> = Vec::new();
        match o {
            Op::Map(g) => match c.map(p(g)) {
                MapOutcome::Hit => *model.get_mut(&p(g)).expect("hit on a cached page") += 1,
                MapOutcome::Miss { mapped, evicted: e } => {
                    prop_assert_eq!(mapped[0], p(g));
                    evicted.extend_from_slice(e);
                    for &x in e {
                        prop_assert_eq!(
                            model.remove(&x),
                            Some(0),
                            "step {}: evicted {:?}",
                            step,
                            x
                        );
                    }
                    prop_assert!(model.insert(p(g), 1).is_none());
                    for &x in &mapped[1..] {
                        prop_assert!(model.insert(x, 0).is_none(), "prefetched a cached page");
                    }
                }
                MapOutcome::Refused => {
                    prop_assert_eq!(
                        &snapshot(&c),
                        &before,
                        "step {}: refusal changed state",
                        step
                    );
                    prop_assert_eq!(c.stats().refused, stats_before.refused + 1);
                    prop_assert!(c.evictable() < (c.len() + 1).saturating_sub(c.quota()));
                }
            },
            Op::Unmap(g) => match c.unmap(p(g)) {
                Ok(u) => {
                    let r = model.get_mut(&p(g)).unwrap();
                    *r -= 1;
                    prop_assert_eq!(u.refcount, *r);
                    if let Some(x) = u.evicted {
                        prop_assert_eq!(model.remove(&x), Some(0));
                        evicted.push(x);
                    }
                }
                Err(_) => {
                    prop_assert!(model.get(&p(g)).is_none_or(|&r| r == 0));
                    prop_assert_eq!(&snapshot(&c), &before);
                }
            },
            Op::SetQuota(q) => {
                let out = c.set_quota(q);
                let over_quota = out.over_quota;
                for &x in out.evicted {
                    prop_assert_eq!(model.remove(&x), Some(0));
                    evicted.push(x);
                }
                over = over_quota > 0;
                prop_assert!(over_quota == 0 || c.evictable() == 0);
            }
        }
        c.check().map_err(TestCaseError::fail)?;
        let mut m: Vec<_> = model.iter().map(|(&g, &r)| (g, r)).collect();
        m.sort();
        prop_assert_eq!(&snapshot(&c), &m, "step {}: refcounts", step);
        let s = c.stats();
        prop_assert_eq!(s.hits + s.misses + s.refused, s.maps);
        prop_assert_eq!(s.evictions, stats_before.evictions + evicted.len() as u64);
        if c.len() > c.quota() {
            prop_assert!(
                over,
                "step {}: |S| = {} > Q = {} without a shrink",
                step,
                c.len(),
                c.quota()
            );
            prop_assert_eq!(c.evictable(), 0);
            prop_assert!(c.len() <= len_before || matches!(o, Op::SetQuota(_)));
        } else {
            over = false;
        }
    }
    Ok(())
}

/// Runs the same ops through `MapCache<E>` and a naive cache, comparing each step.
fn check_against_naive<E: EvictionPolicy + Dump>(
    quota: usize,
    ops: &[Op],
    config: &E::Config,
    kind: NaiveKind,
    exact_victims: bool,
) -> Result<(), TestCaseError> {
    let la = Arc::new(Lookahead::from_refs(&refs_of(ops)));
    let mut c = MapCache::<E>::new(quota, config, Some(la)).unwrap();
    let lru = kind == NaiveKind::Lru;
    let mut n = NaiveCache::new(kind, quota);
    for (step, &o) in ops.iter().enumerate() {
        match o {
            Op::Map(g) => {
                let real = c.map(p(g));
                let naive = n.map(p(g));
                match (real, &naive) {
                    (MapOutcome::Hit, NaiveOutcome::Hit)
                    | (MapOutcome::Refused, NaiveOutcome::Refused) => {}
                    (MapOutcome::Miss { evicted, .. }, NaiveOutcome::Miss(ne)) => {
                        if exact_victims {
                            prop_assert_eq!(evicted, &ne[..], "step {}", step);
                        } else {
                            prop_assert_eq!(evicted.len(), ne.len(), "step {}", step);
                        }
                    }
                    (r, _) => prop_assert!(false, "step {}: {:?} vs naive {:?}", step, r, naive),
                }
            }
            Op::Unmap(g) => {
                let real = c.unmap(p(g)).map(|u| u.evicted.is_some());
                let naive = n.unmap(p(g)).map(|e| e.is_some());
                prop_assert_eq!(real.is_ok(), naive.is_ok(), "step {}", step);
                if exact_victims {
                    prop_assert_eq!(real.ok(), naive.ok(), "step {}", step);
                }
            }
            Op::SetQuota(q) => {
                let real = c.set_quota(q).evicted.to_vec();
                let naive = n.set_quota(q);
                if exact_victims {
                    prop_assert_eq!(real, naive, "step {}", step);
                } else {
                    prop_assert_eq!(real.len(), naive.len(), "step {}", step);
                }
            }
        }
        if exact_victims {
            prop_assert_eq!(snapshot(&c), n.snapshot(), "step {}", step);
        }
        if lru {
            prop_assert_eq!(&c.eviction_order()[..], n.lru_order(), "step {}", step);
        }
    }
    let s = c.stats();
    prop_assert_eq!(
        (s.hits, s.misses, s.refused),
        (n.counts.0, n.counts.1, n.counts.2)
    );
    Ok(())
}

/// `map g; unmap g` per page: no pinning.
fn pairs(gs: &[u64]) -> Vec<PageRef> {
    gs.iter()
        .flat_map(|&g| [PageRef::Map(p(g)), PageRef::Unmap(p(g))])
        .collect()
}

fn hits<E: EvictionPolicy>(refs: &[PageRef], q: usize, cfg: &E::Config) -> u64 {
    let la = Arc::new(Lookahead::from_refs(refs));
    replay::<E>(refs, q, cfg, Some(la)).unwrap().hits
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn every_policy_keeps_the_map_cache_invariants(
        quota in 0usize..7,
        ops in prop::collection::vec(op(), 0..120),
    ) {
        check_invariants::<Fifo>(quota, &ops, &FifoConfig {})?;
        check_invariants::<Lru>(quota, &ops, &LruConfig {})?;
        check_invariants::<Opt>(quota, &ops, &OptConfig {})?;
        check_invariants::<OptBatch>(quota, &ops, &OptBatchConfig { batch: Some(4), window: 64 })?;
        check_invariants::<OptBatch>(quota, &ops, &OptBatchConfig { batch: None, window: 64 })?;
        check_invariants::<Prefetch>(quota, &ops, &PrefetchConfig { min_count: 1, max_batch: 4 })?;
        check_invariants::<Prefetch>(quota, &ops, &PrefetchConfig::default())?;
    }

    #[test]
    fn lru_and_fifo_match_the_naive_caches_step_by_step(
        quota in 0usize..7,
        ops in prop::collection::vec(op(), 0..120),
    ) {
        check_against_naive::<Lru>(quota, &ops, &LruConfig {}, NaiveKind::Lru, true)?;
        check_against_naive::<Fifo>(quota, &ops, &FifoConfig {}, NaiveKind::Fifo, true)?;
    }

    #[test]
    fn opt_matches_the_naive_farthest_next_use_scan(
        quota in 0usize..7,
        ops in prop::collection::vec(op(), 0..120),
    ) {
        let future = map_pages(&refs_of(&ops));
        // Ties between pages never mapped again may break either way: compare counts.
        check_against_naive::<Opt>(quota, &ops, &OptConfig {}, NaiveKind::Opt { future }, false)?;
    }

    /// S1.3: Belady's OPT is optimal without batching and pinning; optimal batching does
    /// at least as well as OPT.
    #[test]
    fn opt_beats_online_policies_and_batching_beats_opt(
        gs in prop::collection::vec(0u64..16, 0..200),
        quota in 1usize..12,
    ) {
        let refs = pairs(&gs);
        let opt = hits::<Opt>(&refs, quota, &OptConfig {});
        let lru = hits::<Lru>(&refs, quota, &LruConfig::default());
        prop_assert!(opt >= lru);
        let fifo = hits::<Fifo>(&refs, quota, &FifoConfig::default());
        prop_assert!(opt >= fifo);
        for batch in [Some(2), Some(4), Some(32), None] {
            let b = hits::<OptBatch>(&refs, quota, &OptBatchConfig { batch, window: 4096 });
            prop_assert!(b >= opt, "batch {:?}: {} < OPT {}", batch, b, opt);
        }
    }
}

/// A larger deterministic loop (the netperf shape: a ring of buffers reused in order): LRU
/// and FIFO thrash below the working set, OPT keeps Q − 1 of them, batching nearly all.
#[test]
fn cyclic_stream_orders_the_policies_as_in_figure_3() {
    let gs: Vec<u64> = (0..20_000).map(|i| i % 100).collect();
    let refs = pairs(&gs);
    let q = 10;
    let lru = hits::<Lru>(&refs, q, &LruConfig {});
    let fifo = hits::<Fifo>(&refs, q, &FifoConfig {});
    let opt = hits::<Opt>(&refs, q, &OptConfig {});
    let batch = hits::<OptBatch>(&refs, q, &OptBatchConfig::default());
    let pre = hits::<Prefetch>(&refs, q, &PrefetchConfig::default());
    assert_eq!((lru, fifo), (0, 0));
    assert!(opt > 1500 && opt < 2100, "opt {opt}");
    assert!(batch > 17_000, "batch {batch}");
    assert!(pre > 15_000, "prefetch {pre}");
}

/// Style L10: after a warm-up that has seen every page, replaying map/unmap pairs
/// allocates nothing, for every policy (outcomes borrow reusable buffers).
#[test]
fn steady_state_replay_does_not_allocate() {
    // 3 passes over a mix of a ring of 300 pages and a hot set; quota 100.
    let gs: Vec<u64> = (0..3000u64)
        .map(|i| if i % 3 == 0 { 1000 + i % 17 } else { i % 300 })
        .collect();
    let mut refs = pairs(&gs);
    refs.extend(pairs(&gs));
    refs.extend(pairs(&gs));
    let la = Arc::new(Lookahead::from_refs(&refs));
    let (warm, rest) = refs.split_at(refs.len() / 3);
    fn run<E: EvictionPolicy>(
        warm: &[PageRef],
        rest: &[PageRef],
        cfg: &E::Config,
        la: &Arc<Lookahead>,
    ) {
        let mut c = MapCache::<E>::new(100, cfg, Some(la.clone())).unwrap();
        iommulab::virt::replay_into(&mut c, warm);
        let before = alloc_counter::this_thread();
        iommulab::virt::replay_into(&mut c, rest);
        let n = alloc_counter::this_thread() - before;
        assert_eq!(n, 0, "{}: {n} allocations in steady state", E::NAME);
        assert!(c.stats().misses > 0 && c.stats().hits > 0);
    }
    run::<Lru>(warm, rest, &LruConfig::default(), &la);
    run::<Fifo>(warm, rest, &FifoConfig::default(), &la);
    run::<Opt>(warm, rest, &OptConfig::default(), &la);
    run::<OptBatch>(warm, rest, &OptBatchConfig::default(), &la);
    run::<Prefetch>(warm, rest, &PrefetchConfig::default(), &la);
}
