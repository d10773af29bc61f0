//! Figures 3–4 (S1.9): hit rate vs quota of every eviction policy on the page-reference
//! sequence (the paper's method), the same stream with pinning, prefetching's guesses, and
//! the one-socket sensitivity check.

use std::sync::Arc;

use serde::Serialize;

use super::{QUOTED, Spec, check_failed, round_quota};
use crate::ReproError as Error;
use crate::Steps;
use iommulab::mrc::{self, MrcMethod};
use iommulab::virt::{
    EvictionConfig, Lookahead, OptBatchConfig, PageRef, PrefetchConfig, replay_config,
};

/// Working sets up to this size get every integer quota.
pub const EVERY_QUOTA_UP_TO: u64 = 200;

/// One policy's hit-rate curve (Figures 3–4).
#[derive(Clone, Debug, Serialize)]
pub struct HitCurve {
    /// The eviction policy.
    pub policy: String,
    /// How `hit_rate` was computed (page sequence, no pinning: the paper's Figures 3–4).
    pub method: String,
    /// Quota as a fraction of the working set, per point.
    pub quota_fraction: Vec<f64>,
    /// Quota in pages, per point.
    pub quota_pages: Vec<u64>,
    /// Hits / page maps on the page sequence.
    pub hit_rate: Vec<f64>,
    /// The same stream with pinning (in-flight pages cannot be evicted; maps refused when
    /// every cached page is pinned, counted as non-hits): map-cache runs.
    pub hit_rate_pinned: Vec<f64>,
    /// Refused maps / page maps with pinning.
    pub refused_rate_pinned: Vec<f64>,
}

/// Prefetching at one quota of the page sequence: how good its guesses were (S1.4).
#[derive(Clone, Debug, Serialize)]
pub struct PrefetchAt {
    /// Quota as a fraction of the working set.
    pub quota_fraction: f64,
    /// Quota in pages.
    pub quota_pages: u64,
    /// Hits / page maps.
    pub hit_rate: f64,
    /// Map misses.
    pub misses: u64,
    /// Pages prefetched.
    pub prefetched: u64,
    /// Prefetched pages mapped before being evicted.
    pub prefetch_hits: u64,
}

/// The batch caps the sensitivity of Figures 3–4 runs: pages one miss's hypercall maps at
/// most, the missing page included (`None`: no cap). The paper gives none for either
/// batching policy; optimal batching runs uncapped, prefetching at 32 (ours).
pub const BATCH_CAPS: [Option<usize>; 4] = [Some(2), Some(8), Some(32), None];

/// Optimal batching and prefetching at the 10% quota with their batches capped.
#[derive(Clone, Debug, Serialize)]
pub struct BatchCapAt {
    /// Pages a miss maps at most (`None`: no cap).
    pub cap: Option<usize>,
    /// The 10% quota, pages.
    pub quota_pages: u64,
    /// Optimal batching's hit rate.
    pub opt_batch: f64,
    /// Prefetching's hit rate.
    pub prefetch: f64,
}

/// Optimal batching's and prefetching's hit rates on the page sequence at the 10% quota,
/// for each of [`BATCH_CAPS`].
pub(crate) fn batch_caps(
    workload: &str,
    seq: &[PageRef],
    ws: u64,
    steps: &mut Steps<'_, '_>,
) -> Result<Vec<BatchCapAt>, Error> {
    let q = round_quota(0.1, ws);
    steps.start(|| format!("{workload}: batch caps @{q} p"))?;
    let la = Arc::new(Lookahead::from_refs(seq));
    let mut out = Vec::with_capacity(BATCH_CAPS.len());
    for cap in BATCH_CAPS {
        let ob = EvictionConfig::OptBatch(OptBatchConfig {
            batch: cap,
            ..OptBatchConfig::default()
        });
        let pf = EvictionConfig::Prefetch(PrefetchConfig {
            max_batch: cap.unwrap_or(usize::MAX),
            ..PrefetchConfig::default()
        });
        let ob = replay_config(seq, to_usize(q), &ob, Some(la.clone()))?;
        let pf = replay_config(seq, to_usize(q), &pf, None)?;
        out.push(BatchCapAt {
            cap,
            quota_pages: q,
            opt_batch: ob.hit_ratio().unwrap_or(0.0),
            prefetch: pf.hit_ratio().unwrap_or(0.0),
        });
    }
    Ok(out)
}

/// `(quota fraction, quota pages, hit rate)`.
pub type Point = (f64, u64, f64);

/// The page-sequence hit rates of a smaller configuration at the quoted fractions.
#[derive(Clone, Debug, Serialize)]
pub struct Sensitivity {
    /// The workload.
    pub workload: String,
    /// Its parameters, in words.
    pub config: String,
    /// Distinct pages mapped.
    pub working_set_pages: u64,
    /// `(policy, [(quota fraction, quota pages, hit rate)])` on the page sequence.
    pub hit_rate: Vec<(String, Vec<Point>)>,
}

/// Integer quotas 0..=ws: all of them for small working sets, else 41 (2.5% steps), and
/// always the quoted fractions.
pub(crate) fn quotas(ws: u64) -> Vec<(f64, u64)> {
    let mut q: Vec<u64> = if ws <= EVERY_QUOTA_UP_TO {
        (0..=ws).collect()
    } else {
        (0..=40)
            .map(|i| round_quota(f64::from(i) / 40.0, ws))
            .collect()
    };
    q.extend(QUOTED.iter().map(|&f| round_quota(f, ws)));
    q.sort_unstable();
    q.dedup();
    q.into_iter()
        .map(|q| (q as f64 / ws.max(1) as f64, q))
        .collect()
}

fn to_usize(q: u64) -> usize {
    usize::try_from(q).unwrap_or(usize::MAX)
}

/// `(hit rate, refused rate)` per quota and the method, for `refs`: LRU and OPT by one
/// pass when exact (no pinning), else one map-cache run per quota.
fn hit_curve(
    refs: &[PageRef],
    cfg: &EvictionConfig,
    qs: &[(f64, u64)],
) -> Result<(Vec<f64>, Vec<f64>, String), Error> {
    let ws = mrc::distinct_pages(refs);
    let one = match cfg {
        EvictionConfig::Lru(_) => Some(mrc::lru_one_pass(refs, ws)),
        EvictionConfig::Opt(_) => Some(mrc::opt_one_pass(refs, ws)),
        _ => None,
    };
    let curve = match one {
        Some(c) if c.exact => c,
        _ => {
            let qv: Vec<usize> = qs.iter().map(|&(_, q)| to_usize(q)).collect();
            mrc::mrc_by_simulation_config(refs, &qv, cfg)?
        }
    };
    let method = match curve.method {
        MrcMethod::StackDistance => "one-pass stack distance",
        MrcMethod::Simulation => "map-cache run per quota",
    };
    let (mut hit, mut refused) = (Vec::new(), Vec::new());
    for &(_, q) in qs {
        let p = curve
            .at(to_usize(q))
            .ok_or_else(|| check_failed(format!("no hit-rate point at quota {q}")))?;
        let maps = (p.hits + p.misses + p.refused).max(1) as f64;
        hit.push(p.hits as f64 / maps);
        refused.push(p.refused as f64 / maps);
    }
    Ok((hit, refused, method.to_string()))
}

/// Every policy's curve on the page sequence `seq` and, with pinning, on `refs`.
pub(crate) fn policies(
    workload: &str,
    seq: &[PageRef],
    refs: &[PageRef],
    ws: u64,
    steps: &mut Steps<'_, '_>,
) -> Result<Vec<HitCurve>, Error> {
    let qs = quotas(ws);
    let mut out = Vec::new();
    for cfg in EvictionConfig::all_default() {
        steps.start(|| format!("{workload}: hit rate, {}", cfg.name()))?;
        let (hit, _, method) = hit_curve(seq, &cfg, &qs)?;
        let (hit_p, refused_p, _) = hit_curve(refs, &cfg, &qs)?;
        out.push(HitCurve {
            policy: cfg.name().to_string(),
            method,
            quota_fraction: qs.iter().map(|x| x.0).collect(),
            quota_pages: qs.iter().map(|x| x.1).collect(),
            hit_rate: hit,
            hit_rate_pinned: hit_p,
            refused_rate_pinned: refused_p,
        });
    }
    Ok(out)
}

/// Prefetching's guesses on the page sequence at each quoted quota.
pub(crate) fn prefetch(
    workload: &str,
    seq: &[PageRef],
    ws: u64,
    steps: &mut Steps<'_, '_>,
) -> Result<Vec<PrefetchAt>, Error> {
    let mut out = Vec::new();
    for f in QUOTED {
        let q = round_quota(f, ws);
        steps.start(|| format!("{workload}: prefetching @{q} p"))?;
        let st = replay_config(
            seq,
            to_usize(q),
            &EvictionConfig::Prefetch(Default::default()),
            None,
        )?;
        out.push(PrefetchAt {
            quota_fraction: f,
            quota_pages: q,
            hit_rate: st.hit_ratio().unwrap_or(0.0),
            misses: st.misses,
            prefetched: st.prefetched,
            prefetch_hits: st.prefetch_hits,
        });
    }
    Ok(out)
}

/// The page-sequence hit rates of `spec` at the quoted fractions only.
pub(crate) fn sensitivity(spec: &Spec, steps: &mut Steps<'_, '_>) -> Result<Sensitivity, Error> {
    let seq = mrc::page_sequence(&spec.refs()?);
    let ws = mrc::distinct_pages(&seq) as u64;
    let qs: Vec<(f64, u64)> = QUOTED.iter().map(|&f| (f, round_quota(f, ws))).collect();
    let mut hit_rate = Vec::new();
    for cfg in EvictionConfig::all_default() {
        steps.start(|| format!("sensitivity ({}): {}", spec.describe(), cfg.name()))?;
        let (h, _, _) = hit_curve(&seq, &cfg, &qs)?;
        hit_rate.push((
            cfg.name().to_string(),
            qs.iter().zip(h).map(|(&(f, q), h)| (f, q, h)).collect(),
        ));
    }
    Ok(Sensitivity {
        workload: spec.name().into(),
        config: spec.describe(),
        working_set_pages: ws,
        hit_rate,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_working_sets_get_every_quota_large_ones_41_plus_the_quoted() {
        let q = quotas(70);
        assert_eq!(q.len(), 71);
        assert_eq!(q[7], (0.1, 7));
        let q = quotas(1000);
        assert_eq!(q.first(), Some(&(0.0, 0)));
        assert_eq!(q.last(), Some(&(1.0, 1000)));
        // 2.5% steps include 10%, 25% and 50%.
        assert_eq!(q.len(), 41);
        let q = quotas(333);
        for f in QUOTED {
            assert!(q.iter().any(|&(_, p)| p == round_quota(f, 333)));
        }
    }
}
