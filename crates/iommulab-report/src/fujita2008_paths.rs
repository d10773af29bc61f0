//! Fujita & Mori 2008, Figure 4 on each DMA API path of the pseudo driver (`dma_paths.json`,
//! `dma_paths.csv`, `figure4_paths.svg`/`.png` and the page's section): `dma_map_sg`, the
//! path a SCSI host adapter's driver takes (`scsi_dma_map`, S0.8), beside `dma_map_single`.
//! Every sentence is derived from the run's bars and flush counters.

use std::fmt::Write as _;
use std::path::Path;

use iommulab_repro::fujita2008::{DmaPathRun, Fujita2008Results, PAPER_BARS, TOLERANCE};

use crate::ReportError;
use crate::files::write_json;
use crate::plot::{BarGroup, bar_chart};
use crate::table::{Cell, Table};

/// The bars in Figure 4's order, with the paper's value and whether it is inferred.
const BARS: [(&str, f64, bool); 4] = [
    ("default", PAPER_BARS.default, false),
    ("strict", PAPER_BARS.strict, true),
    ("bitmap", PAPER_BARS.bitmap, false),
    ("strict-bitmap", PAPER_BARS.strict_bitmap, true),
];

fn bar(run: &DmaPathRun, i: usize) -> f64 {
    let b = &run.bars;
    [b.default, b.strict, b.bitmap, b.strict_bitmap][i]
}

fn bar_without_rwbf(run: &DmaPathRun, i: usize) -> f64 {
    let b = &run.bars_without_rwbf;
    [b.default, b.strict, b.bitmap, b.strict_bitmap][i]
}

fn near(a: f64, b: f64) -> bool {
    (a - b).abs() <= TOLERANCE + 1e-12
}

/// Writes `dma_paths.json` and the figure of both paths.
pub(crate) fn write_files(dir: &Path, r: &Fujita2008Results) -> Result<(), ReportError> {
    write_json(&dir.join("dma_paths.json"), &r.dma_paths)?;
    let mut groups = Vec::new();
    for (i, (name, paper, inferred)) in BARS.iter().enumerate() {
        for run in &r.dma_paths {
            groups.push(BarGroup {
                label: format!(
                    "{name} ({}){}",
                    run.dma_path,
                    if *inferred { ", paper inferred" } else { "" }
                ),
                ours: bar(run, i),
                ours_err: 0.0,
                paper: Some(*paper),
            });
        }
    }
    bar_chart(
        dir,
        "figure4_paths",
        "Figure 4 on each DMA API path: IOPS relative to disabled",
        "relative IOPS",
        &groups,
    )?;
    Ok(())
}

/// `dma_paths` (`dma_paths.csv`): one row per path and configuration.
pub(crate) fn table(r: &Fujita2008Results) -> Table {
    let mut t = Table::new(
        "dma_paths",
        Some("dma_paths.csv"),
        &[
            "dma_path",
            "config",
            "relative_to_disabled",
            "paper_relative_to_disabled",
            "paper_inferred",
            "within_tolerance",
            "relative_without_write_buffer_flush",
            "flush_unmaps",
            "flushes",
            "sg_flushes_at_once",
            "flushes_per_unmap",
        ],
    );
    for run in &r.dma_paths {
        for (i, (name, paper, inferred)) in BARS.iter().enumerate() {
            let f = run.flushes.iter().find(|f| f.config == *name);
            t.push(vec![
                (&run.dma_path).into(),
                (*name).into(),
                Cell::float(bar(run, i), 4),
                Cell::float(*paper, 2),
                u64::from(*inferred).into(),
                u64::from(run.within[i]).into(),
                Cell::float(bar_without_rwbf(run, i), 4),
                f.map_or(0, |f| f.unmaps).into(),
                f.map_or(0, |f| f.flushes).into(),
                f.map_or(0, |f| f.sg_flushes_at_once).into(),
                Cell::float(f.map_or(0.0, |f| f.flushes_per_unmap), 4),
            ]);
        }
    }
    t
}

/// Why an ordering fails, or that it holds.
fn ordering_words(run: &DmaPathRun) -> String {
    let b = &run.bars;
    if run.ordering {
        return format!(
            "has the paper's ordering (bitmap {:.3} > strict-bitmap {:.3} > default {:.3} ≈ strict {:.3})",
            b.bitmap, b.strict_bitmap, b.default, b.strict
        );
    }
    let mut why = Vec::new();
    if b.bitmap <= b.strict_bitmap {
        why.push(format!(
            "bitmap {:.3} is not above strict-bitmap {:.3}",
            b.bitmap, b.strict_bitmap
        ));
    }
    if b.strict_bitmap <= b.default.max(b.strict) {
        why.push(format!(
            "strict-bitmap {:.3} is not above both default {:.3} and strict {:.3}",
            b.strict_bitmap, b.default, b.strict
        ));
    }
    if (b.default - b.strict).abs() > TOLERANCE {
        why.push(format!(
            "default and strict are {:.3} apart",
            (b.default - b.strict).abs()
        ));
    }
    format!("does not have the paper's ordering: {}", why.join("; "))
}

/// Which bars are within the tolerance, as words.
fn within_words(run: &DmaPathRun) -> String {
    let inside: Vec<&str> = BARS
        .iter()
        .zip(run.within)
        .filter(|(_, w)| *w)
        .map(|((n, ..), _)| *n)
        .collect();
    let n = inside.len();
    if n == 0 {
        "none of the four bars is within 0.02 of the paper's".to_string()
    } else {
        format!(
            "{n} of the four bars within {TOLERANCE} of the paper's ({})",
            inside.join(", ")
        )
    }
}

/// Why default and strict are (or are not) the same on `run`, from its flush counters.
fn default_vs_strict(run: &DmaPathRun) -> String {
    let f = |n: &str| run.flushes.iter().find(|f| f.config == n);
    let (Some(d), Some(s)) = (f("default"), f("strict")) else {
        return String::new();
    };
    let gap = (run.bars.default - run.bars.strict).abs();
    let same_code = d.unmaps > 0 && d.sg_flushes_at_once == d.unmaps;
    let rel = if gap <= TOLERANCE { "≈" } else { "≠" };
    let mut out = format!(
        "default {rel} strict ({:.3} vs {:.3}, {gap:.3} apart): default's flush policy issued {:.4} \
invalidations per unmap, {} of its {} unmaps flushed at once by `unmap_sg`; strict {:.4} per unmap.",
        run.bars.default,
        run.bars.strict,
        d.flushes_per_unmap,
        d.sg_flushes_at_once,
        d.unmaps,
        s.flushes_per_unmap
    );
    if same_code {
        let _ = write!(
            out,
            " Every unmap of default bypassed the deferred array, so default ran strict's unmap path: one \
page-selective invalidation and an immediate free per I/O{}.",
            if gap < 5e-4 {
                ", and the two bars are equal".to_string()
            } else {
                format!("; the bars still differ by {gap:.3}, from the rest of their counted work")
            }
        );
    } else if d.sg_flushes_at_once == 0 {
        let _ = write!(
            out,
            " No unmap of default bypassed the array: it batched {:.0} unmaps per invalidation, which is \
what separates it from strict.",
            if d.flushes > 0 {
                d.unmaps as f64 / d.flushes as f64
            } else {
                0.0
            }
        );
    }
    out
}

/// The page's section.
pub(crate) fn section(r: &Fujita2008Results) -> String {
    let mut p = String::new();
    let [first, ..] = r.dma_paths.as_slice() else {
        return p;
    };
    let _ = writeln!(p, "\n## Figure 4 on each DMA API path\n");
    let _ = writeln!(
        p,
        "The paper's benchmark is a pseudo driver emulating a SCSI host adapter (S0.8). A SCSI low-level driver \
maps a command's data with `scsi_dma_map()`, which is `dma_map_sg()` of its scatterlist (one 1024-byte entry here), \
and unmaps it with `dma_unmap_sg()`. In Linux 2.6.26's `drivers/pci/intel-iommu.c` only `intel_unmap_single` \
queues the range in the 250-entry array (`add_unmap`); `intel_unmap_sg` issues a page-selective IOTLB invalidation \
and `__free_iova` at once, whatever `intel_iommu=strict` says (docs/sources.md, X0.1). With \
`kernel = \"2.6.26\"` the model routes each call so (`dma_path = \"sg\"` in the workload); the tables above ran \
`dma_map_single` (`dma_path = \"single\"`). Bitmap and strict-bitmap are the paper's own patch, whose \
`unmap_sg` is not published: they keep their flush policy on both paths. Same protocol as above; the columns \
*without write-buffer flush* are one {} s run per configuration with `write_buffer_flush = 0`. Bold: within \
{TOLERANCE} of the paper.\n",
        r.protocol.sweep_seconds
    );
    let _ = writeln!(p, "![Figure 4 on each DMA API path](figure4_paths.svg)\n");
    let mut header = String::from("| config | paper |");
    let mut rule = String::from("|---|---:|");
    for run in &r.dma_paths {
        let _ = write!(
            header,
            " {} (ours) | without write-buffer flush |",
            run.dma_path
        );
        rule.push_str("---:|---:|");
    }
    let _ = writeln!(p, "{header}\n{rule}");
    for (i, (name, paper, inferred)) in BARS.iter().enumerate() {
        let _ = write!(
            p,
            "| {name} | {paper:.2}{} |",
            if *inferred { " (inferred)" } else { "" }
        );
        for run in &r.dma_paths {
            let v = bar(run, i);
            let w = bar_without_rwbf(run, i);
            let cell = |x: f64| {
                if near(x, *paper) {
                    format!("**{x:.3}**")
                } else {
                    format!("{x:.3}")
                }
            };
            let _ = write!(p, " {} | {} |", cell(v), cell(w));
        }
        p.push('\n');
    }
    let _ = writeln!(p, "\nCalls per path:\n");
    for run in &r.dma_paths {
        let _ = writeln!(p, "- `{}`: {}.", run.dma_path, run.calls);
    }
    let _ = writeln!(
        p,
        "\n| path | config | unmaps seen by the flush policy | invalidation rounds | flushed at once by `unmap_sg` | rounds per unmap |"
    );
    let _ = writeln!(p, "|---|---|---:|---:|---:|---:|");
    for run in &r.dma_paths {
        for f in &run.flushes {
            if f.config == "disabled" {
                continue;
            }
            let _ = writeln!(
                p,
                "| {} | {} | {} | {} | {} | {:.4} |",
                run.dma_path,
                f.config,
                f.unmaps,
                f.flushes,
                f.sg_flushes_at_once,
                f.flushes_per_unmap
            );
        }
    }
    p.push('\n');
    for run in &r.dma_paths {
        let _ = writeln!(
            p,
            "- **`{}`**: {}; {}. {}",
            run.dma_path,
            ordering_words(run),
            within_words(run),
            default_vs_strict(run)
        );
    }
    // What the unverified fact would change, from the no-RWBF bars.
    let outside: Vec<usize> = (0..4).filter(|&i| !first.within[i]).collect();
    if !outside.is_empty() {
        let closed: Vec<&str> = outside
            .iter()
            .filter(|&&i| near(bar_without_rwbf(first, i), BARS[i].1))
            .map(|&i| BARS[i].0)
            .collect();
        let open: Vec<&str> = outside
            .iter()
            .filter(|&&i| !near(bar_without_rwbf(first, i), BARS[i].1))
            .map(|&i| BARS[i].0)
            .collect();
        let wbf = r
            .prices
            .iter()
            .find(|x| x.field == "write_buffer_flush")
            .map_or(0, |x| x.value);
        let per_io = first
            .results
            .iter()
            .find(|a| a.config == "default")
            .map_or(0.0, |a| a.write_buffer_flushes as f64 / a.ops.max(1) as f64);
        let _ = writeln!(
            p,
            "\nOn the `{}` path, the bars outside the tolerance are {}. Default's runs issued {per_io:.2} write-buffer \
flushes per I/O at {wbf} cycles each (S1.10): 2.6.26 issues one after each map when the unit reports `CAP.RWBF`, \
and whether Q35's unit does is the unverified fact (docs/sources.md, X0.2). Without it (`write_buffer_flush = 0`) {} \
{}; {}.",
            first.dma_path,
            outside
                .iter()
                .map(|&i| BARS[i].0)
                .collect::<Vec<_>>()
                .join(", "),
            if closed.is_empty() {
                "none of them".to_string()
            } else {
                closed.join(", ")
            },
            if closed.len() == 1 {
                "would come within the tolerance"
            } else {
                "would come within it"
            },
            if open.is_empty() {
                "no other price keeps a bar out".to_string()
            } else {
                format!("{} would stay outside", open.join(", "))
            },
        );
    }
    p
}
