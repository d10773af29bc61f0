//! Hit-rate (miss-ratio) curves of the guest map cache over every quota, in one pass
//! (S1.9: the paper's Figures 3 and 4 plot hit rate against quota from 0 to 100% of the
//! working set for FIFO, LRU, OPT, optimal batching and prefetching).
//!
//! LRU and OPT are *stack algorithms* (Mattson et al. 1970): the cache of size q is always
//! contained in the cache of size q + 1, so one pass that finds each map's *stack
//! distance* d gives the hits of every quota at once (a hit iff d ≤ q).
//!
//! - **LRU** ([`lru_one_pass`]): d − 1 is the number of distinct pages mapped since the
//!   previous map of the same page, counted by the workspace's one stack-distance counter,
//!   [`StackDistance`] (`iommulab-trace`, which `trace stats` runs too): O(N log D) time,
//!   memory proportional to the D distinct pages.
//! - **OPT** ([`opt_one_pass`]): Mattson's OPT stack with priority = next use (earlier next
//!   use stays higher). A map of x at depth d puts x on top and rotates the stack's prefix
//!   maxima of next use down to depth d. Only the top `max_quota` entries are kept — the
//!   top q entries of the stack *are* OPT's cache of size q, and nothing below depth M
//!   affects the top M — so the time is O(N · min(d, M)) with a branch-light linear scan,
//!   and memory O(N) for the next uses (8 bytes per map) plus 12 bytes per stack entry.
//!   The streamed curve of a trace (module `stream`, every quota) takes the critical
//!   markers of Bilardi, Ekanadham and Pattnaik (2017) instead: O(log D) per map for D
//!   distinct pages, no next uses (module `opt_markers`); Mattson's stack with block
//!   maxima (module `opt_stack`) is kept as the tests' reference.
//!
//! **Exactness.** The map cache equals these stack algorithms only when no page other than
//! the one being mapped is pinned at any map ("no pinning": each DMA is unmapped before the
//! next map, or the same page is mapped again). Then nothing is ever refused at a quota
//! ≥ 1, every cached page is evictable, LRU's order (pages rejoin E as most recent on
//! their last unmap) is the order of maps, and OPT is Belady's MIN. With pinning, victims
//! are restricted to E and maps can be refused, so neither is a stack algorithm: the
//! one-pass functions then return `exact: false`, and [`mrc`] falls back to
//! [`mrc_by_simulation`], one map-cache run per quota (`method: Simulation`). FIFO and the
//! batching policies are not stack algorithms and always use simulation.
//!
//! **Entry point for a trace**: [`hit_rate_curve`] (module `curve`) computes the curve of
//! any policy over either view of a trace — the page sequence (S1.9's method, default) or
//! the pinned map cache — at `0..=N` or listed quotas, choosing one pass or simulation;
//! `iommulab mrc`, Python's `iommulab.mrc` and the libCacheSim cross-check all call it. The
//! functions below are its parts, over a reference stream as given.

mod belady;
pub mod curve;
mod opt_markers;
#[cfg(test)]
mod opt_stack;
mod slot_tree;
mod stream;

pub use curve::{
    CurveError, CurveRequest, HitRateCurve, MAX_QUOTA, Quotas, hit_rate_curve,
    requests_hit_rate_curve, trace_hit_rate_curve, trace_page_refs,
};
pub use stream::curve_is_streamed;

use std::sync::Arc;

use iommulab_base::addr::{Gpa, Pfn};
use iommulab_trace::stack_distance::StackDistance;
use serde::{Deserialize, Serialize};

use crate::eviction::EvictionPolicy;
use crate::lookahead::NEVER;
use crate::{EvictionConfig, Lookahead, MapCache, PageMap, PageRef, Result, replay_into};

/// How a curve was computed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MrcMethod {
    /// One pass over stack distances (LRU, OPT).
    StackDistance,
    /// One cache run per quota (the map cache, or for `mrc --quotas` the flat caches of
    /// module `stream`).
    Simulation,
}

/// One quota's outcome.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MrcPoint {
    /// The quota Q in pages.
    pub quota: usize,
    /// Map hits.
    pub hits: u64,
    /// Map misses (hypercalls).
    pub misses: u64,
    /// Refused maps.
    pub refused: u64,
}

impl MrcPoint {
    /// `hits / (hits + misses + refused)`, `None` without maps.
    pub fn hit_ratio(&self) -> Option<f64> {
        let maps = self.hits + self.misses + self.refused;
        (maps > 0).then(|| self.hits as f64 / maps as f64)
    }
}

/// A hit-rate curve: one point per quota.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MrcCurve {
    /// The policy's name (`lru`, `opt`, ...).
    pub policy: &'static str,
    /// How the points were computed.
    pub method: MrcMethod,
    /// Whether every point equals what the map cache counts at that quota. Always true for
    /// [`MrcMethod::Simulation`]; for one pass, true iff the stream has no pinning (see the
    /// [module docs](self)).
    pub exact: bool,
    /// Map requests in the stream.
    pub maps: u64,
    /// Distinct pages mapped (the working set of §4.2; quotas above it change nothing).
    pub distinct_pages: usize,
    /// Points in increasing quota order.
    pub points: Vec<MrcPoint>,
}

impl MrcCurve {
    /// The point for `quota`, if computed.
    pub fn at(&self, quota: usize) -> Option<&MrcPoint> {
        self.points
            .binary_search_by_key(&quota, |p| p.quota)
            .ok()
            .map(|i| &self.points[i])
    }
}

/// Dense page ids and the pinning check, from one pass over the stream.
struct Prepared {
    /// Dense id of each map request's page.
    ids: Vec<u32>,
    distinct: usize,
    pinning_free: bool,
}

#[allow(clippy::cast_possible_truncation)] // ids < distinct pages ≤ maps; checked below
fn prepare(refs: &[PageRef]) -> Prepared {
    let mut dense: PageMap<u64, u32> = PageMap::default();
    let mut ids = Vec::with_capacity(refs.len() / 2 + 1);
    // Refcount per id and the number of pinned pages, to check "no pinning".
    let mut rc: Vec<u32> = Vec::new();
    let mut pinned = 0usize;
    let mut pinning_free = true;
    for r in refs {
        match *r {
            PageRef::Map(g) => {
                let next = dense.len() as u32;
                let id = *dense.entry(g.get()).or_insert(next);
                if id == next {
                    // The stack-distance counter numbers up to 2^30 pages (4 TiB).
                    assert!(
                        (next as usize) < StackDistance::MAX_IDS,
                        "more than 2^30 distinct pages"
                    );
                    rc.push(0);
                }
                let c = &mut rc[id as usize];
                if pinned > usize::from(*c > 0) {
                    pinning_free = false;
                }
                if *c == 0 {
                    pinned += 1;
                }
                *c += 1;
                ids.push(id);
            }
            PageRef::Unmap(g) => {
                if let Some(&id) = dense.get(&g.get()) {
                    let c = &mut rc[id as usize];
                    if *c > 0 {
                        *c -= 1;
                        if *c == 0 {
                            pinned -= 1;
                        }
                    }
                }
            }
        }
    }
    Prepared {
        ids,
        distinct: dense.len(),
        pinning_free,
    }
}

/// Whether no page other than the one being mapped is pinned at any map of `refs` — the
/// condition under which the one-pass curves are exact.
pub fn pinning_free(refs: &[PageRef]) -> bool {
    prepare(refs).pinning_free
}

/// The page-reference sequence of `refs` (S1.9's method: "recorded access patterns"):
/// every map is an independent reference, unmapped at once, so nothing is ever pinned and
/// the one-pass curves are exact. The paper's Figures 3–4 are this view; the map cache
/// with in-flight pages pinned is the other ([`mrc`] on `refs` itself).
pub fn page_sequence(refs: &[PageRef]) -> Vec<PageRef> {
    refs.iter()
        .filter_map(|r| match *r {
            PageRef::Map(g) => Some([PageRef::Map(g), PageRef::Unmap(g)]),
            PageRef::Unmap(_) => None,
        })
        .flatten()
        .collect()
}

/// Most pages with refcount > 0 at once (S1.2's |P|): a quota of this many pages never
/// refuses a map, whatever the policy.
pub fn max_pinned(refs: &[PageRef]) -> u64 {
    let mut rc: PageMap<Pfn<Gpa>, u32> = Default::default();
    let (mut now, mut most) = (0u64, 0u64);
    for r in refs {
        match *r {
            PageRef::Map(g) => {
                let c = rc.entry(g).or_insert(0);
                if *c == 0 {
                    now += 1;
                    most = most.max(now);
                }
                *c += 1;
            }
            PageRef::Unmap(g) => {
                if let Some(c) = rc.get_mut(&g)
                    && *c > 0
                {
                    *c -= 1;
                    if *c == 0 {
                        now -= 1;
                    }
                }
            }
        }
    }
    most
}

/// Distinct pages mapped in `refs`.
pub fn distinct_pages(refs: &[PageRef]) -> usize {
    prepare(refs).distinct
}

/// Turns a histogram of stack distances (`hist[d]` = maps at distance d, d ≥ 1) into
/// points for quotas `0..=max_quota`.
fn points_from_histogram(hist: &[u64], maps: u64, max_quota: usize) -> Vec<MrcPoint> {
    let mut points = Vec::with_capacity(max_quota + 1);
    points.push(MrcPoint {
        quota: 0,
        hits: 0,
        misses: 0,
        refused: maps,
    });
    let mut hits = 0;
    for q in 1..=max_quota {
        hits += hist.get(q).copied().unwrap_or(0);
        points.push(MrcPoint {
            quota: q,
            hits,
            misses: maps - hits,
            refused: 0,
        });
    }
    points
}

/// LRU hits for every quota `0..=max_quota` in one pass (O(N log N)); see the
/// [module docs](self) for when it is exact.
///
/// # Examples
/// ```
/// use iommulab_base::addr::Pfn;
/// use iommulab_virt::mrc::lru_one_pass;
/// use iommulab_virt::PageRef;
/// let refs: Vec<PageRef> = [1u64, 2, 1, 3, 2]
///     .iter()
///     .flat_map(|&g| [PageRef::Map(Pfn::new(g)), PageRef::Unmap(Pfn::new(g))])
///     .collect();
/// let c = lru_one_pass(&refs, 3);
/// assert!(c.exact);
/// let hits: Vec<u64> = c.points.iter().map(|p| p.hits).collect();
/// assert_eq!(hits, [0, 0, 1, 2]); // distances: 1 → 2, 2 → 3
/// ```
pub fn lru_one_pass(refs: &[PageRef], max_quota: usize) -> MrcCurve {
    let prep = prepare(refs);
    let n = prep.ids.len();
    let mut sd = StackDistance::default();
    let mut hist = vec![0u64; max_quota + 1];
    for &id in &prep.ids {
        // Distance d (other pages since the last map): a hit at every quota above d.
        if let Some(d) = sd.access(id)
            && let Some(h) = usize::try_from(d + 1).ok().and_then(|q| hist.get_mut(q))
        {
            *h += 1;
        }
    }
    MrcCurve {
        policy: "lru",
        method: MrcMethod::StackDistance,
        exact: prep.pinning_free,
        maps: n as u64,
        distinct_pages: prep.distinct,
        points: points_from_histogram(&hist, n as u64, max_quota),
    }
}

/// OPT (Belady) hits for every quota `0..=max_quota` in one pass over a truncated OPT
/// stack (O(N · min(d, max_quota))); see the [module docs](self) for when it is exact.
pub fn opt_one_pass(refs: &[PageRef], max_quota: usize) -> MrcCurve {
    let prep = prepare(refs);
    let n = prep.ids.len();
    // Next use per map request.
    let mut next = vec![NEVER; n];
    let mut last = vec![NEVER; prep.distinct];
    for (t, &id) in prep.ids.iter().enumerate().rev() {
        next[t] = last[id as usize];
        last[id as usize] = t as u64;
    }
    drop(last);
    let m = max_quota.min(prep.distinct);
    // The top `m` entries of the OPT stack: next use and page id, top first.
    let mut keys: Vec<u64> = Vec::with_capacity(m);
    let mut pages: Vec<u32> = Vec::with_capacity(m);
    let mut hist = vec![0u64; max_quota + 1];
    for (t, &x) in prep.ids.iter().enumerate() {
        let nx = next[t];
        if m == 0 {
            continue;
        }
        if pages.first() == Some(&x) {
            keys[0] = nx;
            hist[1] += 1;
            continue;
        }
        // x goes on top; the old top is carried down. At each depth the entry with the
        // earlier next use stays, the later one is carried, until x's old depth.
        let (mut ck, mut cp) = (nx, x);
        let mut found = false;
        for i in 0..pages.len() {
            let (k, p) = (keys[i], pages[i]);
            if p == x {
                keys[i] = ck;
                pages[i] = cp;
                hist[i + 1] += 1;
                found = true;
                break;
            }
            // Depth 1 always takes x; below, the earlier next use stays.
            let swap = i == 0 || ck < k;
            if swap {
                keys[i] = ck;
                pages[i] = cp;
                ck = k;
                cp = p;
            }
        }
        if !found && pages.len() < m {
            keys.push(ck);
            pages.push(cp);
        }
    }
    MrcCurve {
        policy: "opt",
        method: MrcMethod::StackDistance,
        exact: prep.pinning_free,
        maps: n as u64,
        distinct_pages: prep.distinct,
        points: points_from_histogram(&hist, n as u64, max_quota),
    }
}

/// The curve of policy `E` by replaying `refs` through a fresh `MapCache<E>` per quota
/// (exact for any stream and policy; O(|quotas| · N)). Builds the [`Lookahead`] once if
/// the policy is offline.
pub fn mrc_by_simulation<E: EvictionPolicy>(
    refs: &[PageRef],
    quotas: &[usize],
    config: &E::Config,
) -> Result<MrcCurve> {
    let la = E::OFFLINE.then(|| Arc::new(Lookahead::from_refs(refs)));
    let prep = prepare(refs);
    let mut points = Vec::with_capacity(quotas.len());
    for &q in quotas {
        let mut cache = MapCache::<E>::new(q, config, la.clone())?;
        replay_into(&mut cache, refs);
        let s = cache.stats();
        points.push(MrcPoint {
            quota: q,
            hits: s.hits,
            misses: s.misses,
            refused: s.refused,
        });
    }
    points.sort_by_key(|p| p.quota);
    Ok(MrcCurve {
        policy: E::NAME,
        method: MrcMethod::Simulation,
        exact: true,
        maps: prep.ids.len() as u64,
        distinct_pages: prep.distinct,
        points,
    })
}

/// [`mrc_by_simulation`] for a runtime [`EvictionConfig`].
pub fn mrc_by_simulation_config(
    refs: &[PageRef],
    quotas: &[usize],
    config: &EvictionConfig,
) -> Result<MrcCurve> {
    crate::with_eviction!(config, E, c => mrc_by_simulation::<E>(refs, quotas, c))
}

/// The hit-rate curve of `config`'s policy over the stream `refs` *as given* (pinned pages
/// stay pinned) for quotas `0..=max_quota` (default: the number of distinct pages, past
/// which nothing changes). For a trace, prefer [`hit_rate_curve`], which also offers the
/// page-sequence view.
///
/// LRU and OPT use one pass when the stream has no pinning, else (and for every other
/// policy) one simulation per quota; the result's `method` says which.
pub fn mrc(
    refs: &[PageRef],
    config: &EvictionConfig,
    max_quota: Option<usize>,
) -> Result<MrcCurve> {
    let max = max_quota.unwrap_or_else(|| distinct_pages(refs));
    let one_pass = match config {
        EvictionConfig::Lru(_) => Some(lru_one_pass(refs, max)),
        EvictionConfig::Opt(_) => Some(opt_one_pass(refs, max)),
        _ => None,
    };
    match one_pass {
        Some(c) if c.exact => Ok(c),
        _ => {
            let quotas: Vec<usize> = (0..=max).collect();
            mrc_by_simulation_config(refs, &quotas, config)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{LruConfig, OptConfig};
    use iommulab_base::addr::Pfn;

    fn pairs(gs: &[u64]) -> Vec<PageRef> {
        gs.iter()
            .flat_map(|&g| [PageRef::Map(Pfn::new(g)), PageRef::Unmap(Pfn::new(g))])
            .collect()
    }

    fn hits(c: &MrcCurve) -> Vec<u64> {
        c.points.iter().map(|p| p.hits).collect()
    }

    /// One pass equals one simulation per quota on a no-pinning stream.
    #[test]
    fn one_pass_curves_match_simulation_on_a_small_stream() {
        let refs = pairs(&[1, 2, 3, 4, 1, 2, 5, 1, 2, 3, 4, 5]);
        let quotas: Vec<usize> = (0..=5).collect();
        let lru = lru_one_pass(&refs, 5);
        let opt = opt_one_pass(&refs, 5);
        assert!(lru.exact && opt.exact);
        let lru_sim = mrc_by_simulation::<crate::Lru>(&refs, &quotas, &LruConfig {}).unwrap();
        let opt_sim = mrc_by_simulation::<crate::Opt>(&refs, &quotas, &OptConfig {}).unwrap();
        assert_eq!(lru.points, lru_sim.points);
        assert_eq!(opt.points, opt_sim.points);
        // The textbook string: OPT faults 7 / 6 times with 3 / 4 frames, LRU 10 / 8.
        assert_eq!((hits(&opt)[3], hits(&opt)[4]), (5, 6));
        assert_eq!((hits(&lru)[3], hits(&lru)[4]), (2, 4));
    }

    /// With a second page pinned at a map the curve is not exact and `mrc` simulates.
    #[test]
    fn pinning_makes_one_pass_inexact_and_mrc_falls_back() {
        let p = |g| Pfn::new(g);
        let refs = vec![
            PageRef::Map(p(1)),
            PageRef::Map(p(2)),
            PageRef::Unmap(p(1)),
            PageRef::Unmap(p(2)),
            PageRef::Map(p(1)),
            PageRef::Unmap(p(1)),
        ];
        assert!(!pinning_free(&refs));
        assert!(!lru_one_pass(&refs, 2).exact);
        let c = mrc(&refs, &EvictionConfig::Lru(LruConfig {}), None).unwrap();
        assert_eq!(c.method, MrcMethod::Simulation);
        assert!(c.exact);
        // Quota 1: the map of 2 is refused (1 is pinned), then 1 hits.
        assert_eq!(
            *c.at(1).unwrap(),
            MrcPoint {
                quota: 1,
                hits: 1,
                misses: 1,
                refused: 1
            }
        );
    }

    /// Remapping the page being mapped (refcount 2) is not pinning.
    #[test]
    fn nested_maps_of_one_page_keep_the_curve_exact() {
        let p = |g| Pfn::new(g);
        let refs = vec![
            PageRef::Map(p(1)),
            PageRef::Map(p(1)),
            PageRef::Unmap(p(1)),
            PageRef::Unmap(p(1)),
            PageRef::Map(p(2)),
            PageRef::Unmap(p(2)),
        ];
        assert!(pinning_free(&refs));
    }
}
