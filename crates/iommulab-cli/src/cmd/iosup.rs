//! `iommulab iosup`: S3.5's three groups (no pool, pool from boot, pool when stable) with
//! the user's churn; the library's `repro::iosup::run_groups` does the work.

use std::fmt::Write as _;

use anyhow::Result;
use iommulab::virt::xen::UnmapFlush;
use iommulab_repro::iosup::{IosupResults, IosupRun, run_groups};

use crate::args::IosupArgs;
use crate::output::{json_text, write_outs};
use crate::progress::ProgressBar;

/// `iommulab iosup`.
pub fn run(args: &IosupArgs, quiet: bool) -> Result<()> {
    let mut run: IosupRun = crate::cmd::load_run(
        args.config.as_deref(),
        &args.set,
        Some("churn"),
        &args.out,
        "iommulab iosup",
    )?;
    if let Some(m) = args.minutes {
        run.churn.minutes = m;
    }
    if let Some(s) = args.stable_within {
        run.stable_within = s;
    }
    if args.coarse {
        run.setup.page_selective_invalidation = false;
    }
    if args.xsa78_fixed {
        run.setup.unmap_flush = UnmapFlush::Invalidates;
    }
    if args.coarse && run.setup.unmap_flush == UnmapFlush::Skipped {
        anyhow::bail!(
            "--coarse changes nothing on S3.5's Xen 4.2.1, whose type changes invalidate nothing: \
add --xsa78-fixed (or set setup.unmap_flush = \"invalidates\")"
        );
    }
    let bar = ProgressBar::steps("iosup", quiet);
    let total = 3 * u64::from(run.churn.minutes);
    let mut done = 0;
    let r = run_groups(&run, &mut |group, minute| {
        let _ = bar.show(&iommulab::Progress {
            unit: iommulab::ProgressUnit::Steps,
            done,
            total,
            step: &format!("{group}, minute {}", minute + 1),
        });
        done += 1;
        Ok(())
    });
    bar.finish();
    let r = r?;
    let json = json_text(&r)?;
    write_outs(&args.out, &json, None)?;
    crate::print_stdout(&if args.json { json } else { text_of(&r) })
}

/// The groups over the steady minutes, and the pool's effect in the functions.
fn text_of(r: &IosupResults) -> String {
    let c = &r.churn;
    let mut t = String::new();
    let browser = c.browser.as_ref().map_or_else(
        || "no browser loop".to_string(),
        |b| {
            format!(
                "a browser loop of {} s iterations growing to {} MB",
                b.iteration_s, b.memory_mb
            )
        },
    );
    let _ = writeln!(
        t,
        "IOSUP: {} minutes per group; {} process creations a minute, each living {}–{} s with {}–{} PTE pages; {browser}; \
         a NIC receiving {} Mb/s into a {}-buffer ring",
        c.minutes,
        c.forks_per_minute,
        c.lifetime_s.0,
        c.lifetime_s.1,
        c.pte_pages.0,
        c.pte_pages.1,
        c.stream_mbps,
        c.rx_ring,
    );
    let _ = writeln!(
        t,
        "the dynamic group's pool on at minute {} (its counter within {}% between two minutes); shrink when pool / in use > {} and pool + in use > {} pages; steady from minute {}\n",
        r.dynamic_minute + 1,
        r.stable_within * 100.0,
        r.dynamic_shrink.proportion,
        r.dynamic_shrink.total,
        r.steady_from + 1,
    );
    let _ = writeln!(
        t,
        "{}\n",
        match (r.setup.unmap_flush, r.setup.page_selective_invalidation) {
            (UnmapFlush::Skipped, _) => {
                "Xen 4.2.1 (S3.5's): a type change calls flush_iotlb_qi, which invalidates nothing (XSA-78); \
tables left cached: type changes whose frame the NIC's IOTLB still translated"
            }
            (UnmapFlush::Invalidates, true) => {
                "Xen with XSA-78's fix: a type change invalidates its page (page-selective)"
            }
            (UnmapFlush::Invalidates, false) => {
                "Xen with XSA-78's fix on a unit without page-selective invalidation: a type change invalidates \
the domain"
            }
        }
    );
    let header = [
        "group",
        "flush_iotlb_qi calls / min",
        "invalidations / min",
        "tables left cached / min",
        "alloc µs / min",
        "free µs / min",
        "most pool pages",
        "pages given back",
        "NIC IOTLB miss rate",
    ];
    let rows: Vec<Vec<String>> = r
        .groups
        .iter()
        .map(|g| {
            vec![
                g.group.clone(),
                format!("{:.1}", g.flushes_per_minute),
                format!("{:.1}", g.invalidations_per_minute),
                format!("{:.1}", g.tables_left_cached_per_minute),
                format!("{:.0}", g.alloc_us_per_minute),
                format!("{:.0}", g.free_us_per_minute),
                g.peak_pool_pages.to_string(),
                g.shrunk_pages.to_string(),
                format!("{:.4}", g.nic_iotlb_miss_rate),
            ]
        })
        .collect();
    let widths = crate::output::column_widths(&header, &rows);
    for line in std::iter::once(header.map(String::from).to_vec()).chain(rows) {
        let cells: Vec<String> = line
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(i, (cell, w))| {
                if i == 0 {
                    format!("{cell:<w$}")
                } else {
                    format!("{cell:>w$}")
                }
            })
            .collect();
        let _ = writeln!(t, "{}", cells.join("  "));
    }
    let _ = writeln!(
        t,
        "\nwith the pool from boot: the allocation functions' time {:+.1}%, the free functions' {:+.1}% (S3.5 measured −45.1% / −70.9%)",
        100.0 * r.alloc_change,
        100.0 * r.free_change
    );
    t
}
