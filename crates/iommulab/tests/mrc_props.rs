//! The one-pass hit-rate curves (S1.9) against per-quota simulation: on streams
//! without pinning, one-pass LRU (Fenwick stack distances) and OPT (truncated Mattson
//! stack) give the same hits, misses and refusals as running the map cache — and the
//! naive caches — once per quota, for every quota. With pinning, `mrc` falls back to
//! simulation.

use iommulab::addr::Pfn;
use iommulab::mrc::{MrcMethod, lru_one_pass, mrc, mrc_by_simulation, opt_one_pass, pinning_free};
use iommulab::testing::naive_cache::{NaiveKind, map_pages, naive_replay};
use iommulab::virt::{EvictionConfig, Lru, LruConfig, Opt, OptConfig, PageRef};
use proptest::prelude::*;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// `map g; unmap g`, sometimes `map g; map g; unmap g; unmap g` (nesting is not pinning).
fn stream(gs: &[(u64, bool)]) -> Vec<PageRef> {
    let mut v = Vec::new();
    for &(g, twice) in gs {
        let p = Pfn::new(g);
        v.push(PageRef::Map(p));
        if twice {
            v.push(PageRef::Map(p));
            v.push(PageRef::Unmap(p));
        }
        v.push(PageRef::Unmap(p));
    }
    v
}

fn assert_one_pass_equals_simulation(refs: &[PageRef], max: usize) {
    let quotas: Vec<usize> = (0..=max).collect();
    let lru = lru_one_pass(refs, max);
    let opt = opt_one_pass(refs, max);
    assert!(lru.exact && opt.exact);
    let lru_sim = mrc_by_simulation::<Lru>(refs, &quotas, &LruConfig::default()).unwrap();
    let opt_sim = mrc_by_simulation::<Opt>(refs, &quotas, &OptConfig::default()).unwrap();
    assert_eq!(lru.points, lru_sim.points, "LRU");
    assert_eq!(opt.points, opt_sim.points, "OPT");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn one_pass_curves_equal_per_quota_simulation_without_pinning(
        gs in prop::collection::vec((0u64..24, prop::bool::weighted(0.1)), 0..200),
        extra in 0usize..3,
    ) {
        let refs = stream(&gs);
        prop_assert!(pinning_free(&refs));
        let max = lru_one_pass(&refs, 0).distinct_pages + extra;
        assert_one_pass_equals_simulation(&refs, max);
        // And against the naive caches.
        let lru = lru_one_pass(&refs, max);
        let opt = opt_one_pass(&refs, max);
        let future = map_pages(&refs);
        for q in 0..=max {
            let (h, m, r) = naive_replay(&refs, q, &NaiveKind::Lru);
            let pt = lru.points[q];
            prop_assert_eq!((pt.hits, pt.misses, pt.refused), (h, m, r), "LRU q={}", q);
            let (h, m, r) = naive_replay(&refs, q, &NaiveKind::Opt { future: future.clone() });
            let pt = opt.points[q];
            prop_assert_eq!((pt.hits, pt.misses, pt.refused), (h, m, r), "OPT q={}", q);
        }
    }

    /// Truncating the curve at a smaller maximum changes nothing below it.
    #[test]
    fn truncated_curves_are_prefixes(
        gs in prop::collection::vec((0u64..24, Just(false)), 0..200),
        max in 0usize..10,
    ) {
        let refs = stream(&gs);
        let full = opt_one_pass(&refs, 30);
        let cut = opt_one_pass(&refs, max);
        prop_assert_eq!(&full.points[..=max], &cut.points[..]);
        let full = lru_one_pass(&refs, 30);
        let cut = lru_one_pass(&refs, max);
        prop_assert_eq!(&full.points[..=max], &cut.points[..]);
    }

    /// With pinning the one-pass result says it is not exact and `mrc` simulates.
    #[test]
    fn mrc_falls_back_to_simulation_with_pinning(
        gs in prop::collection::vec(0u64..10, 2..60),
        quota in 0usize..8,
    ) {
        // Map pages two at a time, then unmap both: the first is pinned at the second map.
        let mut refs = Vec::new();
        for w in gs.chunks(2) {
            for &g in w { refs.push(PageRef::Map(Pfn::new(g))); }
            for &g in w { refs.push(PageRef::Unmap(Pfn::new(g))); }
        }
        let exact = pinning_free(&refs);
        for cfg in [EvictionConfig::Lru(LruConfig::default()), EvictionConfig::Opt(OptConfig::default())] {
            let c = mrc(&refs, &cfg, Some(8)).unwrap();
            prop_assert!(c.exact);
            prop_assert_eq!(c.method == MrcMethod::StackDistance, exact);
            let kind = match cfg {
                EvictionConfig::Lru(_) => NaiveKind::Lru,
                _ => NaiveKind::Opt { future: map_pages(&refs) },
            };
            let (h, m, r) = naive_replay(&refs, quota, &kind);
            let pt = c.at(quota).unwrap();
            prop_assert_eq!((pt.hits, pt.misses, pt.refused), (h, m, r));
        }
    }
}

/// A bigger deterministic case: 30 000 maps over 600 pages, a mix of a hot set, loops and
/// random pages; every 13th quota plus the edges.
#[test]
fn one_pass_equals_simulation_on_a_large_mixed_stream() {
    let mut rng = SmallRng::seed_from_u64(7);
    let mut gs = Vec::new();
    for i in 0..30_000u64 {
        let g = match rng.gen_range(0..10) {
            0..=3 => rng.gen_range(0..40),    // hot set
            4..=7 => 100 + (i % 300),         // a ring of buffers
            _ => 400 + rng.gen_range(0..200), // cold
        };
        gs.push((g, false));
    }
    let refs = stream(&gs);
    let lru = lru_one_pass(&refs, 600);
    let opt = opt_one_pass(&refs, 600);
    let quotas: Vec<usize> = (0..=600)
        .filter(|q| q % 13 == 0 || *q < 3 || *q > 597)
        .collect();
    let lru_sim = mrc_by_simulation::<Lru>(&refs, &quotas, &LruConfig::default()).unwrap();
    let opt_sim = mrc_by_simulation::<Opt>(&refs, &quotas, &OptConfig::default()).unwrap();
    for (s, o) in [(&lru_sim, &lru), (&opt_sim, &opt)] {
        for pt in &s.points {
            assert_eq!(o.at(pt.quota), Some(pt), "{} q={}", o.policy, pt.quota);
        }
    }
    // Belady dominates LRU everywhere.
    for (a, b) in opt.points.iter().zip(&lru.points) {
        assert!(a.hits >= b.hits);
    }
}
