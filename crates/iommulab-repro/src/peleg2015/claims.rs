//! Peleg et al. 2015's claims, judged on the many-core runs of `reproduce peleg2015`.
//!
//! Of the paper's numbers only its abstract's range is in this lab's sources (P5.0: the
//! scalable designs reach 88.5%–100% of the performance without an IOMMU), and that claim is
//! judged against it. The per-design throughputs and speedups of its figures are not, so the
//! other claims are the paper's findings as the sources state them (P5.1–P5.4: the stock
//! designs collapse on many cores, the per-core caches and the per-core deferred
//! invalidation that became Linux's magazines and flush queue scale), judged by direction
//! with the threshold in each rule; their published column says so.

use crate::claims::{Claim, ClaimSpec, Judgement, holds, judge_table, within_range};
use crate::peleg2015::Peleg2015Results;

/// What the published column says for every claim.
const NOT_CHECKABLE: &str =
    "direction only: the paper's per-design numbers are not in the sources (P5.0)";

/// The most cores the reproduction runs.
const TOP: u16 = 16;

/// Every claim, judged on `r`.
pub fn claims(r: &Peleg2015Results) -> Vec<Claim> {
    judge_table(CLAIMS, r)
}

/// The paper's claims, in the page's order (every claim judged at the top core count, 16).
pub const CLAIMS: &[ClaimSpec<Peleg2015Results>] = &[
    ClaimSpec {
        id: "stock-strict-collapses",
        section: "P5.1",
        claim: "With the stock allocator's one lock and strict invalidation, throughput stops growing long \
before 16 cores",
        published: NOT_CHECKABLE,
        inferred: false,
        judge: |r| collapses(r, "global-lock-strict"),
    },
    ClaimSpec {
        id: "stock-deferred-collapses",
        section: "P5.1",
        claim: "With the stock allocator's one lock and the global deferred-flush lock, throughput stops \
growing long before 16 cores",
        published: NOT_CHECKABLE,
        inferred: false,
        judge: |r| collapses(r, "global-lock-deferred"),
    },
    ClaimSpec {
        id: "per-core-scales",
        section: "P5.2",
        claim: "Per-core IOVA caches with per-core deferred invalidation scale with the cores",
        published: NOT_CHECKABLE,
        inferred: false,
        judge: per_core_scales,
    },
    ClaimSpec {
        id: "per-core-near-no-iommu",
        section: "abstract",
        claim: "The scalable designs achieve 88.5%–100% of the performance obtained without an IOMMU",
        published: "0.885–1.0 of no-IOMMU (all three designs, every benchmark; P5.0)",
        inferred: false,
        judge: per_core_near_no_iommu,
    },
    ClaimSpec {
        id: "invalidation-is-the-second-bottleneck",
        section: "P5.3",
        claim: "Scalable IOVA allocation alone is not enough: strict invalidation serialises the cores \
on the invalidation hardware",
        published: NOT_CHECKABLE,
        inferred: false,
        judge: invalidation_is_the_second_bottleneck,
    },
];

fn speedup(r: &Peleg2015Results, design: &str) -> f64 {
    r.record(design, TOP).map_or(f64::NAN, |x| x.speedup)
}

fn throughput(r: &Peleg2015Results, design: &str) -> f64 {
    r.record(design, TOP).map_or(f64::NAN, |x| x.throughput)
}

/// P5.1: a stock design's throughput on the most cores against one core's.
fn collapses(r: &Peleg2015Results, design: &str) -> Judgement {
    let s = speedup(r, design);
    holds(
        s <= 4.0,
        s <= 8.0,
        format!("{TOP} cores at most 4× one core's throughput: reproduced; at most 8×: partly"),
    )
    .with(format!("{s:.2}× one core on {TOP}"), why_of(r, design))
}

fn per_core_scales(r: &Peleg2015Results) -> Judgement {
    let s = speedup(r, "magazine-flush-queue");
    holds(
        s >= 12.0,
        s >= 8.0,
        format!("{TOP} cores at least 12× one core: reproduced; at least 8×: partly"),
    )
    .with(
        format!("{s:.2}× one core on {TOP}"),
        why_of(r, "magazine-flush-queue"),
    )
}

fn per_core_near_no_iommu(r: &Peleg2015Results) -> Judgement {
    let rel = r
        .record("magazine-flush-queue", TOP)
        .map_or(f64::NAN, |x| x.relative_to_no_iommu);
    within_range(rel, 0.885, 1.0, 0.1, "").with(
        format!("{rel:.2} of no-IOMMU on {TOP} cores (magazines + flush queue)"),
        "the per-packet cost that remains is the DMA-API call, the PTE writes and, per batch, \
one queued invalidation",
    )
}

fn invalidation_is_the_second_bottleneck(r: &Peleg2015Results) -> Judgement {
    let (fq, strict) = (
        throughput(r, "magazine-flush-queue"),
        throughput(r, "magazine-strict"),
    );
    let gain = if strict > 0.0 { fq / strict } else { f64::NAN };
    holds(
        gain >= 1.5,
        gain > 1.0,
        format!(
            "magazines + flush queue at least 1.5× magazines + strict on {TOP} cores: reproduced; above 1×: partly"
        ),
    )
    .with(format!("{gain:.2}×"), why_of(r, "magazine-strict"))
}

/// What the run says limits `design` on the most cores.
fn why_of(r: &Peleg2015Results, design: &str) -> String {
    let Some(x) = r.record(design, TOP) else {
        return "no run".into();
    };
    let s = &x.stats;
    let flush = if s.flush_lock.acquisitions > 0 {
        format!(
            "global flush lock busy {:.0}%; ",
            s.flush_lock.hold_cycles as f64 / s.makespan_cycles.max(1) as f64 * 100.0
        )
    } else {
        String::new()
    };
    format!(
        "on {TOP} cores: tree lock busy {:.0}% of the run, {:.0}% of CPU time waiting for it; \
{flush}invalidation queue depth {:.1} on average (max {}); {:.0} of {:.0} cycles per packet spent waiting",
        x.tree_lock_busy * 100.0,
        x.tree_lock_wait_share * 100.0,
        x.invalidation_depth_mean,
        x.invalidation_depth_max,
        s.wait_cycles_per_io,
        s.cpu_cycles_per_io
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table's words name the cores the judges read.
    #[test]
    fn the_tables_core_count_is_the_judges() {
        for c in CLAIMS.iter().filter(|c| c.id.contains("collapses")) {
            assert!(
                c.claim.ends_with(&format!("before {TOP} cores")),
                "{}",
                c.id
            );
        }
    }
}
