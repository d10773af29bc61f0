//! `iommulab reproduce`: reruns a paper's experiments and writes `OUT/<paper>/` with JSON,
//! CSV, SVG/PNG figures and a markdown page that puts our numbers beside the published ones.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Result;
use iommulab::device::DeviceMode;
use iommulab::experiment::{BenchConfig, NamedConfig, RunResult};
use iommulab::hw::cost::CostPreset;
use serde::Serialize;

use crate::args::{Paper, ReproduceArgs};
use crate::cmd::bench::run_configs;
use crate::output::{csv, write_atomic};
use crate::plot::{BarGroup, bar_chart};

/// `iommulab reproduce`.
pub fn run(args: &ReproduceArgs, quiet: bool) -> Result<()> {
    let mut pages = Vec::new();
    if matches!(args.paper, Paper::Fujita2008 | Paper::All) {
        let page = fujita2008(&args.out, args.quick, quiet)?;
        crate::print_stdout(&format!("report: {}\n", page.display()))?;
        pages.push(("fujita2008", FUJITA2008_TITLE, page));
    }
    if matches!(args.paper, Paper::Yassour2010 | Paper::All) {
        let page = crate::cmd::yassour::yassour2010(&args.out, args.quick, quiet)?;
        crate::print_stdout(&format!("report: {}\n", page.display()))?;
        pages.push(("yassour2010", YASSOUR2010_TITLE, page));
    }
    if args.paper == Paper::All {
        let index = write_index(&args.out, &pages, args.quick)?;
        crate::print_stdout(&format!("index: {}\n", index.display()))?;
    }
    Ok(())
}

const FUJITA2008_TITLE: &str = "Fujita & Mori 2008, IOMMU performance evaluation in Linux (Figure 4: IOPS of the \
five configurations relative to disabled)";
const YASSOUR2010_TITLE: &str = "Yassour, Ben-Yehuda & Wasserman 2010, On the DMA mapping problem in direct device \
assignment (Figures 3-6: hit rate and CPU vs quota; intra-guest protection)";

/// Writes `out/index.md` and `out/index.html` linking every reproduction's page; returns the
/// markdown's path.
fn write_index(
    out: &Path,
    pages: &[(&str, &str, std::path::PathBuf)],
    quick: bool,
) -> Result<std::path::PathBuf> {
    let cmd = if quick {
        "iommulab reproduce all --quick"
    } else {
        "iommulab reproduce all"
    };
    let mut md = format!(
        "# iommulab reproductions\n\nRegenerate with `{cmd}`. Each page puts our numbers beside the published ones \
and explains the differences from the mechanisms.\n\n| paper | report | data |\n|---|---|---|\n"
    );
    let mut html = String::from(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>iommulab reproductions</title></head><body>\
<h1>iommulab reproductions</h1><ul>",
    );
    for (name, title, _) in pages {
        let _ = writeln!(
            md,
            "| {title} | [{name}/README.md]({name}/README.md) | [{name}/results.json]({name}/results.json) |"
        );
        let _ = write!(
            html,
            "<li>{title}: <a href=\"{name}/README.md\">report</a>, <a href=\"{name}/results.json\">results.json</a></li>"
        );
    }
    let _ = writeln!(md, "\nCommand: `{cmd}`.");
    html.push_str("</ul></body></html>\n");
    write_atomic(&out.join("index.html"), html.as_bytes())?;
    let index = out.join("index.md");
    write_atomic(&index, md.as_bytes())?;
    Ok(index)
}

/// What Fujita & Mori published for Figure 4 (S0.8), relative to `disabled`, and where each
/// number comes from in the paper's text.
const FUJITA2008_PAPER: [(NamedConfig, Option<f64>, &str); 6] = [
    (NamedConfig::Disabled, Some(1.0), "baseline"),
    (
        NamedConfig::Default,
        Some(0.80),
        "\"20% lower\"; 124,337.2 IOPS",
    ),
    (
        NamedConfig::Strict,
        Some(0.80),
        "\"almost no difference\" from default",
    ),
    (NamedConfig::Bitmap, Some(0.87), "\"reduced to 13%\""),
    (
        NamedConfig::StrictBitmap,
        Some(0.82),
        "\"about 2%\" above strict",
    ),
    (NamedConfig::Modern, None, "not in the paper (Linux ≥ 4.7)"),
];

/// Published absolute IOPS of `default` (S0.8).
const FUJITA2008_DEFAULT_IOPS: f64 = 124_337.2;

/// One configuration's aggregate over repeats, as written to `results.json`.
#[derive(Debug, Clone, Serialize)]
struct Aggregate {
    config: String,
    allocator: String,
    flush: String,
    repeats: usize,
    ops: u64,
    iops: f64,
    iops_stddev: f64,
    relative_to_disabled: Option<f64>,
    paper_relative_to_disabled: Option<f64>,
    paper_source: String,
    modeled_ns_per_op: f64,
    io_path_ns_per_op: f64,
    modeled_hw_ns_per_op: f64,
    modeled_sw_ns_per_op: f64,
    software_ns_per_op: f64,
    iotlb_flushes: u64,
    iotlb_invalidations: u64,
    write_buffer_flushes: u64,
    allocator_wraps: u64,
    peak_metadata_bytes: u64,
    modeled_seconds: f64,
    /// From the separate malicious-device run of the same configuration.
    stale_accesses: u64,
    malicious_unmaps: u64,
    subpage_accesses: u64,
    faults: u64,
    /// Most unmapped ranges waiting for an invalidation at once (malicious run): the window.
    max_pending: u64,
    /// Counted kernel primitives per I/O (timing runs).
    per_io: PerIo,
}

/// Counted kernel primitives per I/O: what the modeled software clock is made of.
#[derive(Debug, Clone, Copy, Default, Serialize)]
struct PerIo {
    tree_visits: f64,
    tree_rebalances: f64,
    slab_allocs: f64,
    bitmap_words: f64,
    lock_acquisitions: f64,
    magazine_ops: f64,
    invalidations: f64,
}

impl PerIo {
    fn of(r: &RunResult) -> Self {
        let n = r.ops.max(1) as f64;
        let i = &r.stats.iova;
        let f = &r.stats.flush;
        PerIo {
            tree_visits: i.tree_visits as f64 / n,
            tree_rebalances: i.tree_rebalances as f64 / n,
            slab_allocs: (i.slab_allocs + i.slab_frees) as f64 / n,
            bitmap_words: i.bitmap_words as f64 / n,
            lock_acquisitions: (i.lock_acquisitions + f.lock_acquisitions) as f64 / n,
            magazine_ops: i.magazine_ops as f64 / n,
            invalidations: r.iotlb_invalidations as f64 / n,
        }
    }
}

fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

fn stddev(v: &[f64]) -> f64 {
    if v.len() < 2 {
        return 0.0;
    }
    let m = mean(v);
    (v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (v.len() - 1) as f64).sqrt()
}

fn aggregate(timing: &[RunResult], security: &[RunResult]) -> Vec<Aggregate> {
    let mut out: Vec<Aggregate> = Vec::new();
    for (named, paper, source) in FUJITA2008_PAPER {
        let runs: Vec<&RunResult> = timing.iter().filter(|r| r.config == named.name()).collect();
        let Some(first) = runs.first() else { continue };
        let f = |g: fn(&RunResult) -> f64| mean(&runs.iter().map(|r| g(r)).collect::<Vec<_>>());
        let sum =
            |g: fn(&RunResult) -> u64| runs.iter().map(|r| g(r)).sum::<u64>() / runs.len() as u64;
        let iops: Vec<f64> = runs.iter().map(|r| r.iops).collect();
        let sec = security.iter().find(|r| r.config == named.name());
        out.push(Aggregate {
            config: named.name().into(),
            allocator: first.allocator.clone(),
            flush: first.flush.clone(),
            repeats: runs.len(),
            ops: sum(|r| r.ops),
            iops: mean(&iops),
            iops_stddev: stddev(&iops),
            relative_to_disabled: None,
            paper_relative_to_disabled: paper,
            paper_source: source.into(),
            modeled_ns_per_op: f(|r| r.modeled_ns_per_op),
            io_path_ns_per_op: f(|r| r.io_path_ns_per_op),
            modeled_hw_ns_per_op: f(|r| r.modeled_hw_ns_per_op),
            modeled_sw_ns_per_op: f(|r| r.modeled_sw_ns_per_op),
            software_ns_per_op: f(|r| r.software_ns_per_op),
            iotlb_flushes: sum(|r| r.iotlb_flushes),
            iotlb_invalidations: sum(|r| r.iotlb_invalidations),
            write_buffer_flushes: sum(|r| r.write_buffer_flushes),
            allocator_wraps: sum(|r| r.stats.iova.wraps),
            peak_metadata_bytes: runs
                .iter()
                .map(|r| r.peak_metadata_bytes)
                .max()
                .unwrap_or(0),
            modeled_seconds: f(|r| r.modeled_seconds),
            stale_accesses: sec.map_or(0, |r| r.stale_accesses),
            malicious_unmaps: sec.map_or(0, |r| r.ops),
            subpage_accesses: sec.map_or(0, |r| r.subpage_accesses),
            faults: sec.map_or(0, |r| r.faults),
            max_pending: sec.map_or(0, |r| r.stats.flush.max_pending),
            per_io: PerIo::of(first),
        });
    }
    let base = out.iter().find(|a| a.config == "disabled").map(|a| a.iops);
    if let Some(b) = base.filter(|b| *b > 0.0) {
        for a in &mut out {
            a.relative_to_disabled = Some(a.iops / b);
        }
    }
    out
}

/// Runs Figure 4 and writes `out/fujita2008/`; returns the markdown page's path.
fn fujita2008(out: &Path, quick: bool, quiet: bool) -> Result<std::path::PathBuf> {
    let dir = out.join("fujita2008");
    // S0.8: 30 s per run, mean of 5 runs, 1024-byte I/Os, one outstanding.
    let (seconds, repeats, security_seconds) = if quick {
        (10.0, 2, 0.5)
    } else {
        (30.0, 5, 2.0)
    };
    let base = BenchConfig {
        duration_s: Some(seconds),
        ..BenchConfig::default()
    };
    debug_assert_eq!(base.hardware.cost, CostPreset::Vtd2008);
    let configs = NamedConfig::ALL;
    let timing = run_configs(&base, &configs, repeats, quiet)?;
    // The security pass: the same configurations with a malicious device (a separate run,
    // because the device's page walks would add latency the paper's benchmark did not have).
    let security_base = BenchConfig {
        duration_s: Some(security_seconds),
        device: DeviceMode::Malicious { neighbours: 1 },
        ..base.clone()
    };
    let security = run_configs(&security_base, &configs, 1, quiet)?;
    let agg = aggregate(&timing, &security);

    let mut all = timing.clone();
    all.extend(security.iter().cloned());
    write_atomic(
        &dir.join("results.json"),
        serde_json::to_string_pretty(&agg)?.as_bytes(),
    )?;
    write_atomic(
        &dir.join("runs.json"),
        serde_json::to_string_pretty(&all)?.as_bytes(),
    )?;
    write_atomic(&dir.join("runs.csv"), csv(&all).as_bytes())?;
    write_atomic(&dir.join("results.csv"), aggregate_csv(&agg).as_bytes())?;
    let groups: Vec<BarGroup> = agg
        .iter()
        .map(|a| {
            let rel = a.relative_to_disabled.unwrap_or(0.0);
            let base_iops = agg
                .iter()
                .find(|b| b.config == "disabled")
                .map_or(1.0, |b| b.iops);
            BarGroup {
                label: a.config.clone(),
                ours: rel,
                ours_err: if base_iops > 0.0 {
                    a.iops_stddev / base_iops
                } else {
                    0.0
                },
                paper: a.paper_relative_to_disabled,
            }
        })
        .collect();
    bar_chart(
        &dir,
        "figure4",
        "Fujita & Mori 2008, Figure 4: IOPS relative to disabled",
        "relative IOPS",
        &groups,
    )?;
    let page = dir.join("README.md");
    write_atomic(
        &page,
        fujita2008_page(&agg, seconds, repeats, security_seconds, quick).as_bytes(),
    )?;
    Ok(page)
}

fn aggregate_csv(agg: &[Aggregate]) -> String {
    let mut s = String::from(
        "config,allocator,flush,repeats,ops,iops,iops_stddev,relative_to_disabled,paper_relative_to_disabled,\
modeled_ns_per_op,io_path_ns_per_op,modeled_hw_ns_per_op,modeled_sw_ns_per_op,software_ns_per_op,iotlb_flushes,\
iotlb_invalidations,write_buffer_flushes,allocator_wraps,peak_metadata_bytes,stale_accesses,malicious_unmaps\n",
    );
    let opt = |v: Option<f64>| v.map(|x| format!("{x:.4}")).unwrap_or_default();
    for a in agg {
        let _ = writeln!(
            s,
            "{},{},{},{},{},{:.1},{:.1},{},{},{:.2},{:.2},{:.2},{:.2},{:.2},{},{},{},{},{},{},{}",
            a.config,
            a.allocator,
            a.flush,
            a.repeats,
            a.ops,
            a.iops,
            a.iops_stddev,
            opt(a.relative_to_disabled),
            opt(a.paper_relative_to_disabled),
            a.modeled_ns_per_op,
            a.io_path_ns_per_op,
            a.modeled_hw_ns_per_op,
            a.modeled_sw_ns_per_op,
            a.software_ns_per_op,
            a.iotlb_flushes,
            a.iotlb_invalidations,
            a.write_buffer_flushes,
            a.allocator_wraps,
            a.peak_metadata_bytes,
            a.stale_accesses,
            a.malicious_unmaps,
        );
    }
    s
}

fn get<'a>(agg: &'a [Aggregate], name: &str) -> Option<&'a Aggregate> {
    agg.iter().find(|a| a.config == name)
}

fn fujita2008_page(
    agg: &[Aggregate],
    seconds: f64,
    repeats: u32,
    security_seconds: f64,
    quick: bool,
) -> String {
    let mut p = String::new();
    let cmd = if quick {
        "iommulab reproduce fujita2008 --quick"
    } else {
        "iommulab reproduce fujita2008"
    };
    let _ = writeln!(
        p,
        "# Fujita & Mori 2008: IOMMU performance evaluation in Linux (Figure 4)\n"
    );
    let _ = writeln!(
        p,
        "Regenerate with `{cmd}`. Pseudo SCSI driver (S0.8): 1024-byte I/Os, one outstanding, each mapped \
and unmapped, no data moved; {seconds} s of modeled time per run, mean of {repeats} runs (seeds 1..{repeats}; without device accesses the modeled clock does not depend on the seed, \
so the spread is 0); \
cost preset `vtd-2008` (Core 2 Duo E6850 3.0 GHz, Q35 VT-d: register-based invalidation, write-buffer flushes, \
3-level tables). Software time is **modeled** from counted kernel primitives (see `crates/iommulab/src/hw/cost.rs`); \
the measured wall time of iommulab's own code is in the last column for comparison.\n"
    );
    let _ = writeln!(p, "![Figure 4](figure4.svg)\n");
    let _ = writeln!(
        p,
        "| config | mechanisms | IOPS (ours) | relative (ours) | relative (paper) | paper says | IOTLB invalidations | flush rounds | allocator wraps |"
    );
    let _ = writeln!(p, "|---|---|---:|---:|---:|---|---:|---:|---:|");
    for a in agg {
        let _ = writeln!(
            p,
            "| {} | {} + {} | {:.0} ± {:.0} | {} | {} | {} | {} | {} | {} |",
            a.config,
            a.allocator,
            a.flush,
            a.iops,
            a.iops_stddev,
            a.relative_to_disabled
                .map_or("-".into(), |v| format!("{v:.3}")),
            a.paper_relative_to_disabled
                .map_or("-".into(), |v| format!("{v:.2}")),
            a.paper_source,
            a.iotlb_invalidations,
            a.iotlb_flushes,
            a.allocator_wraps,
        );
    }
    let _ = writeln!(
        p,
        "\nPaper's absolute number: default ran {FUJITA2008_DEFAULT_IOPS:.1} IOPS; ours: {:.0}. The `vtd-2008` preset's \
`io_path` (the no-IOMMU cost of one I/O) is the one constant taken from the paper's results (its disabled rate, \
124,337.2 / 0.80); everything that separates the IOMMU configurations comes from counted mechanisms.\n",
        get(agg, "default").map_or(0.0, |a| a.iops)
    );

    let _ = writeln!(p, "## Where the time goes (modeled ns per I/O)\n");
    let _ = writeln!(
        p,
        "| config | total | I/O path | IOMMU hardware (PTE writes, write-buffer flush, invalidation) | kernel software (locks, slab, tree/bitmap, queues) | iommulab wall time (measured) |"
    );
    let _ = writeln!(p, "|---|---:|---:|---:|---:|---:|");
    for a in agg {
        let _ = writeln!(
            p,
            "| {} | {:.0} | {:.0} | {:.0} | {:.0} | {:.1} |",
            a.config,
            a.modeled_ns_per_op,
            a.io_path_ns_per_op,
            a.modeled_hw_ns_per_op,
            a.modeled_sw_ns_per_op,
            a.software_ns_per_op
        );
    }

    let _ = writeln!(
        p,
        "\nCounted kernel primitives per I/O (what the modeled software column is made of):\n"
    );
    let _ = writeln!(
        p,
        "| config | tree node visits | rotations/recolourings | slab allocs+frees | bitmap words | lock hand-offs | magazine ops | IOTLB invalidations |"
    );
    let _ = writeln!(p, "|---|---:|---:|---:|---:|---:|---:|---:|");
    for a in agg {
        let c = &a.per_io;
        let _ = writeln!(
            p,
            "| {} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.4} |",
            a.config,
            c.tree_visits,
            c.tree_rebalances,
            c.slab_allocs,
            c.bitmap_words,
            c.lock_acquisitions,
            c.magazine_ops,
            c.invalidations
        );
    }
    let _ = writeln!(p, "\n## Mechanism checks against the paper's text\n");
    if let Some(d) = get(agg, "default") {
        let per_flush_ms = if d.iotlb_flushes > 0 {
            d.modeled_seconds * 1e3 / d.iotlb_flushes as f64
        } else {
            0.0
        };
        let _ = writeln!(
            p,
            "- *\"the 250-entry array fills every 2 ms\"*: our default flushed {} times in {:.1} s, once every {:.2} ms \
(250 I/Os × {:.0} ns).",
            d.iotlb_flushes, d.modeled_seconds, per_flush_ms, d.modeled_ns_per_op
        );
    }
    if let Some(b) = get(agg, "bitmap") {
        // One lap = every page of the 4 GiB space once (pfn 0 is never handed out).
        let lap_pages = (1u64 << 20) - 1;
        let _ = writeln!(
            p,
            "- *\"bitmap flushes once per 2^20 maps, about every 8 s\"*: one lap of our bitmap is {lap_pages} one-page \
maps, {:.1} s at our {:.0} IOPS; it wrapped {} time(s) in {:.1} s of each run. Its metadata peaked at {} bytes \
(S0.5: 128 KiB).",
            lap_pages as f64 / b.iops.max(1.0),
            b.iops,
            b.allocator_wraps,
            b.modeled_seconds,
            b.peak_metadata_bytes
        );
    }
    if let Some(d) = get(agg, "default") {
        let _ = writeln!(
            p,
            "- *\"making default flush as rarely would need 2^20 iova nodes (40 MB)\"*: our red-black tree peaked at {} \
bytes of metadata with the 250-entry array; at our node size, 2^20 live ranges would take {:.1} MiB.",
            d.peak_metadata_bytes,
            (1u64 << 20) as f64 * iommulab::iova::rbtree::NODE_BYTES as f64 / (1024.0 * 1024.0)
        );
    }

    let _ = writeln!(
        p,
        "\n## What the flush policies leave open (malicious device, {security_seconds} s each)\n"
    );
    let _ = writeln!(
        p,
        "A separate run per configuration with a device that retries every just-unmapped page and its two neighbours, \
and reads the rest of each mapped page (the paper does not measure this; S0.6 only describes the windows).\n"
    );
    let _ = writeln!(
        p,
        "| config | unmaps | stale accesses | stale per unmap | window: most ranges awaiting invalidation | sub-page accesses | faults |"
    );
    let _ = writeln!(p, "|---|---:|---:|---:|---:|---:|---:|");
    for a in agg {
        let window = if a.config == "disabled" {
            "unbounded (no IOMMU)".to_string()
        } else {
            a.max_pending.to_string()
        };
        let _ = writeln!(
            p,
            "| {} | {} | {} | {:.3} | {} | {} | {} |",
            a.config,
            a.malicious_unmaps,
            a.stale_accesses,
            a.stale_accesses as f64 / a.malicious_unmaps.max(1) as f64,
            window,
            a.subpage_accesses,
            a.faults
        );
    }
    let _ = writeln!(
        p,
        "\nSub-page accesses: a 1024-byte buffer is mapped with its whole 4 KiB page, so while the mapping is live the \
device can read the other 3072 bytes of that page, under every configuration (the DMA address keeps the sub-page \
offset, S0.4; the paper does not discuss it)."
    );
    p.push_str(&explanation(agg));
    p
}

/// The "why" section: states what the numbers show, computed from them, and the mechanisms.
fn explanation(agg: &[Aggregate]) -> String {
    let mut p =
        String::from("\n## Why our numbers differ from the paper's, mechanism by mechanism\n\n");
    let rel = |n: &str| {
        get(agg, n)
            .and_then(|a| a.relative_to_disabled)
            .unwrap_or(f64::NAN)
    };
    let (d, s, b, sb) = (
        rel("default"),
        rel("strict"),
        rel("bitmap"),
        rel("strict-bitmap"),
    );
    let _ = writeln!(
        p,
        "- **default vs strict**: ours {d:.3} vs {s:.3}; the paper saw almost no difference. In our model strict pays one \
register-based page invalidation per unmap ({} cycles in `vtd-2008`), while default pays one global invalidation per 250 \
unmaps plus the deferred array's lock, append and timer; so strict comes out {:.1}% below default. The paper's equality \
means that on the real machine the invalidation was not the dominant per-unmap cost, or that the deferred path's own \
costs (the extra global lock, 250 frees in a burst that evict the tree from cache) ate the saving. Our preset charges \
S1.10's 2,000-cycle IOTLB flush, measured on a later (2010) Core 2 platform.",
        iommulab::hw::cost::CostModel::VTD_2008.inv_page,
        (d - s) / d.max(1e-9) * 100.0
    );
    let _ = writeln!(
        p,
        "- **bitmap vs default**: ours {b:.3} vs {d:.3} (paper 0.87 vs 0.80). The bitmap avoids the slab allocation, the \
tree descent and rebalancing of every map and unmap, and flushes once per lap instead of once per 250 unmaps."
    );
    if let (Some(da), Some(ba)) = (get(agg, "default"), get(agg, "bitmap")) {
        // What per-visit cost would make our default/bitmap gap equal the paper's? A
        // sensitivity statement computed from the counts, not a constant we use.
        let io = da.io_path_ns_per_op;
        let paper_gap_ns = io / 0.80 - io / 0.87;
        let our_gap_ns = da.modeled_ns_per_op - ba.modeled_ns_per_op;
        let ghz = iommulab::hw::cost::CostModel::VTD_2008.clock.as_ghz();
        let visits = da.per_io.tree_visits.max(1e-9);
        let extra_cycles = (paper_gap_ns - our_gap_ns) * ghz / visits;
        let _ = writeln!(
            p,
            "  Per I/O our default costs {our_gap_ns:.0} ns more than bitmap; the paper's 0.80 vs 0.87 implies \
{paper_gap_ns:.0} ns. Our preset prices a tree-node visit at {} cycles (an L2 hit); default makes {:.1} visits per \
I/O, so the paper's gap corresponds to about {:.0} more cycles per visit, i.e. visits that miss to memory, which is \
plausible for a kernel whose caches the SCSI stack churns between I/Os. We leave the preset at the L2-hit figure \
rather than tune it to the paper; set `[hardware.cost_overrides] tree_visit` to explore.",
            iommulab::hw::cost::CostModel::VTD_2008.tree_visit,
            da.per_io.tree_visits,
            extra_cycles.max(0.0)
        );
    }
    let _ = writeln!(
        p,
        "- **strict-bitmap vs strict**: ours {sb:.3} vs {s:.3} (paper: about 2% apart). Both pay the same invalidation per \
unmap; the gap is the allocator alone: tree + slab versus a bitmap word scan."
    );
    let _ = writeln!(
        p,
        "- **stale windows**: strict and strict-bitmap show 0 stale accesses by construction; default's window is up to 250 \
unmaps or 10 ms, bitmap's a whole lap, modern's a 256-entry per-CPU ring or 10 ms; disabled has no protection at all, \
so every probe of an unmapped page succeeds."
    );
    p
}
