//! Fujita & Mori 2008's report: `results.json`, `runs.json`, `results.csv`, `runs.csv`,
//! Figure 4 (SVG and PNG) and the markdown page that puts our numbers beside the published
//! ones and explains the differences from the mechanisms.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use iommulab::repro::fujita2008::{Aggregate, Fujita2008Results};

use crate::ReportError;
use crate::files::{runs_csv, write_atomic, write_json};
use crate::plot::{BarGroup, bar_chart};
use crate::table::{Cell, Table};

/// Writes `dir` (`OUT/fujita2008`); returns the markdown page's path.
pub(crate) fn render(dir: &Path, r: &Fujita2008Results) -> Result<PathBuf, ReportError> {
    write_json(&dir.join("results.json"), &r.results)?;
    write_json(&dir.join("runs.json"), &r.runs)?;
    write_atomic(&dir.join("runs.csv"), runs_csv(&r.runs).as_bytes())?;
    for t in tables(r) {
        if let Some(file) = t.file {
            write_atomic(&dir.join(file), t.to_csv().as_bytes())?;
        }
    }
    let agg = &r.results;
    let base_iops = agg
        .iter()
        .find(|b| b.config == "disabled")
        .map_or(1.0, |b| b.iops);
    let groups: Vec<BarGroup> = agg
        .iter()
        .map(|a| BarGroup {
            // A paper bar read off the prose is labelled so on the figure too.
            label: if a.paper_inferred {
                format!("{} (paper inferred)", a.config)
            } else {
                a.config.clone()
            },
            ours: a.relative_to_disabled.unwrap_or(0.0),
            ours_err: if base_iops > 0.0 {
                a.iops_stddev / base_iops
            } else {
                0.0
            },
            paper: a.paper_relative_to_disabled,
        })
        .collect();
    bar_chart(
        dir,
        "figure4",
        "Fujita & Mori 2008, Figure 4: IOPS relative to disabled",
        "relative IOPS",
        &groups,
    )?;
    let page = dir.join("README.md");
    write_atomic(&page, fujita2008_page(r).as_bytes())?;
    Ok(page)
}

/// `figure4` (`results.csv`): one row per configuration.
pub(crate) fn tables(r: &Fujita2008Results) -> Vec<Table> {
    let mut t = Table::new(
        "figure4",
        Some("results.csv"),
        &[
            "config",
            "allocator",
            "flush",
            "repeats",
            "ops",
            "iops",
            "iops_stddev",
            "relative_to_disabled",
            "paper_relative_to_disabled",
            "modeled_ns_per_op",
            "io_path_ns_per_op",
            "modeled_hw_ns_per_op",
            "modeled_sw_ns_per_op",
            "software_ns_per_op",
            "iotlb_flushes",
            "iotlb_invalidations",
            "write_buffer_flushes",
            "allocator_wraps",
            "peak_metadata_bytes",
            "stale_accesses",
            "unprotected_accesses",
            "malicious_unmaps",
            "paper_inferred",
        ],
    );
    for a in &r.results {
        t.push(vec![
            (&a.config).into(),
            (&a.allocator).into(),
            (&a.flush).into(),
            (a.repeats as u64).into(),
            a.ops.into(),
            Cell::float(a.iops, 1),
            Cell::float(a.iops_stddev, 1),
            Cell::Float(a.relative_to_disabled, 4),
            Cell::Float(a.paper_relative_to_disabled, 4),
            Cell::float(a.modeled_ns_per_op, 2),
            Cell::float(a.io_path_ns_per_op, 2),
            Cell::float(a.modeled_hw_ns_per_op, 2),
            Cell::float(a.modeled_sw_ns_per_op, 2),
            Cell::float(a.software_ns_per_op, 2),
            a.iotlb_flushes.into(),
            a.iotlb_invalidations.into(),
            a.write_buffer_flushes.into(),
            a.allocator_wraps.into(),
            a.peak_metadata_bytes.into(),
            a.stale_accesses.into(),
            a.unprotected_accesses.into(),
            a.malicious_unmaps.into(),
            u64::from(a.paper_inferred).into(),
        ]);
    }
    vec![t]
}

fn get<'a>(agg: &'a [Aggregate], name: &str) -> Option<&'a Aggregate> {
    agg.iter().find(|a| a.config == name)
}

/// The markdown page.
fn fujita2008_page(r: &Fujita2008Results) -> String {
    let agg = r.results.as_slice();
    let (seconds, repeats, security_seconds, quick) = (
        r.protocol.seconds,
        r.protocol.repeats,
        r.protocol.security_seconds,
        r.quick,
    );
    let paper_default_iops = r.paper.default_iops;
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
3-level tables). Software time is **modeled** from counted kernel primitives (see `crates/iommulab-hw/src/cost.rs`); \
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
            a.paper_relative_to_disabled.map_or("-".into(), |v| {
                if a.paper_inferred {
                    format!("{v:.2} (inferred)")
                } else {
                    format!("{v:.2}")
                }
            }),
            a.paper_source,
            a.iotlb_invalidations,
            a.iotlb_flushes,
            a.allocator_wraps,
        );
    }
    let _ = writeln!(
        p,
        "\nThe paper prints a number for disabled, default and bitmap only; the strict and strict-bitmap values \
marked *(inferred)* are read off its sentences (\"almost no difference\" from default; \"about 2%\" above \
strict), as the figure's labels say.\n"
    );
    let _ = writeln!(
        p,
        "Paper's absolute number: default ran {paper_default_iops:.1} IOPS; ours: {:.0}. The `vtd-2008` preset's \
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
        if a.config == "disabled" {
            // No IOMMU: nothing is translated, so nothing is stale; the device reaches all
            // memory, which is no protection at all.
            let _ = writeln!(
                p,
                "| {} | {} | none: no IOMMU, unprotected ({} probes of unmapped memory all reached it) | - | unbounded | {} | {} |",
                a.config, a.malicious_unmaps, a.unprotected_accesses, a.subpage_accesses, a.faults
            );
            continue;
        }
        let _ = writeln!(
            p,
            "| {} | {} | {} | {:.3} | {} | {} | {} |",
            a.config,
            a.malicious_unmaps,
            a.stale_accesses,
            a.stale_accesses as f64 / a.malicious_unmaps.max(1) as f64,
            a.max_pending,
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
