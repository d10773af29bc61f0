//! The IOSUP report: `results.json`, `runs.csv` (group × minute), Figures 6–9 (SVG and PNG)
//! and the markdown page beside the published numbers.

use crate::page::data_and_figures;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use iommulab::virt::xen::UnmapFlush;
use iommulab_repro::iosup::{self, IosupResults};

use crate::ReportError;
use crate::files::{write_atomic, write_json};
use crate::plot::{BarGroup, LineSeries, bar_chart, line_chart};
use crate::table::{Cell, Table};

/// The figures, by file stem.
pub(crate) const FIGURES: [&str; 6] = [
    "figure6_iotlb_flushes",
    "figure7_alloc",
    "figure7_free",
    "figure7_levels",
    "figure8_pool_pre_enabled",
    "figure9_pool_dynamic_enabled",
];

/// The page of [`iommulab_repro::iosup`].
#[derive(Debug)]
pub(crate) struct IosupPage;

impl crate::page::Page for IosupPage {
    type Paper = iommulab_repro::iosup::Iosup;

    fn render(dir: &Path, r: &IosupResults) -> Result<PathBuf, ReportError> {
        render(dir, r)
    }

    fn tables(r: &IosupResults) -> Vec<Table> {
        tables(r)
    }

    fn files() -> Vec<String> {
        data_and_figures(&["results.json", "runs.csv", "groups.csv"], FIGURES)
    }
}

/// Writes `dir` (`OUT/iosup`); returns the markdown page's path.
pub(crate) fn render(dir: &Path, r: &IosupResults) -> Result<PathBuf, ReportError> {
    write_json(&dir.join("results.json"), r)?;
    for t in tables(r) {
        if let Some(file) = t.file {
            write_atomic(&dir.join(file), t.to_csv().as_bytes())?;
        }
    }
    let per_group = |f: &dyn Fn(&iosup::Row) -> f64| -> Vec<LineSeries> {
        r.groups
            .iter()
            .map(|g| LineSeries {
                label: g.group.clone(),
                points: r
                    .runs
                    .iter()
                    .filter(|x| x.group == g.group)
                    .map(|x| (f64::from(x.minute + 1), f(x)))
                    .collect(),
            })
            .collect()
    };
    line_chart(
        dir,
        FIGURES[0],
        "IOSUP Figure 6: flush_iotlb_qi calls per minute",
        "minute",
        "IOTLB flushes",
        &per_group(&|x| x.iotlb_flushes as f64),
    )?;
    line_chart(
        dir,
        FIGURES[1],
        "IOSUP Figure 7: page-table allocation time per minute (all levels)",
        "minute",
        "µs",
        &per_group(&|x| x.alloc_us.iter().sum()),
    )?;
    line_chart(
        dir,
        FIGURES[2],
        "IOSUP Figure 7: page-table free time per minute (all levels)",
        "minute",
        "µs",
        &per_group(&|x| x.free_us.iter().sum()),
    )?;
    bar_chart(
        dir,
        FIGURES[3],
        "IOSUP Figure 7: page-table time with the pool / without, per level (steady state)",
        "pre-enabled / disabled",
        &level_bars(r),
    )?;
    for (stem, group, title) in [
        (
            FIGURES[4],
            "cache-pre-enabled",
            "IOSUP Figure 8: pool pages, cache-pre-enabled",
        ),
        (
            FIGURES[5],
            "cache-dynamic-enabled",
            "IOSUP Figure 9: pool pages, cache-dynamic-enabled",
        ),
    ] {
        let series: Vec<LineSeries> = iosup::LEVELS
            .iter()
            .map(|l| LineSeries {
                label: l.name().into(),
                points: r
                    .runs
                    .iter()
                    .filter(|x| x.group == group)
                    .map(|x| (f64::from(x.minute + 1), x.pool_pages[l.index()] as f64))
                    .collect(),
            })
            .collect();
        line_chart(dir, stem, title, "minute", "pages in the pool", &series)?;
    }
    let page = dir.join("README.md");
    write_atomic(&page, iosup_page(r).as_bytes())?;
    Ok(page)
}

/// Figure 7 per level: the pre-enabled group's allocation and free time over the disabled
/// group's, in the steady-state minutes, per level and in all; the paper published the
/// totals only (1 − 0.451 and 1 − 0.709).
fn level_bars(r: &IosupResults) -> Vec<BarGroup> {
    let steady = |group: &str, f: &dyn Fn(&iosup::Row) -> f64| -> f64 {
        r.runs
            .iter()
            .filter(|x| x.group == group && x.minute >= r.steady_from)
            .map(f)
            .sum()
    };
    let ratio = |f: &dyn Fn(&iosup::Row) -> f64| {
        let off = steady("cache-disabled", f);
        if off > 0.0 {
            steady("cache-pre-enabled", f) / off
        } else {
            0.0
        }
    };
    let mut v = Vec::new();
    for (what, paper) in [
        ("alloc", 1.0 + r.paper.alloc_change),
        ("free", 1.0 + r.paper.free_change),
    ] {
        let of = |x: &iosup::Row| {
            if what == "alloc" {
                x.alloc_us
            } else {
                x.free_us
            }
        };
        for l in iosup::LEVELS {
            let i = l.index();
            v.push(BarGroup {
                label: format!("{} {what}", l.name()),
                ours: ratio(&|x| of(x)[i]),
                ours_err: 0.0,
                paper: None,
            });
        }
        v.push(BarGroup {
            label: format!("all {what}"),
            ours: ratio(&|x| of(x).iter().sum()),
            ours_err: 0.0,
            paper: Some(paper),
        });
    }
    v
}

/// `runs` (`runs.csv`): one row per group and minute; `groups`: the steady state.
pub(crate) fn tables(r: &IosupResults) -> Vec<Table> {
    let mut t = Table::new(
        "runs",
        Some("runs.csv"),
        &[
            "group",
            "minute",
            "iotlb_flushes",
            "invalidations",
            "tables_left_cached",
            "forks",
            "alloc_us_pgd",
            "alloc_us_pmd",
            "alloc_us_pte",
            "free_us_pgd",
            "free_us_pmd",
            "free_us_pte",
            "pool_pgd",
            "pool_pmd",
            "pool_pte",
            "shrunk",
            "packets",
            "nic_iotlb_miss_rate",
            "nic_walk_ns_per_packet",
        ],
    );
    for x in &r.runs {
        t.push(vec![
            (&x.group).into(),
            u64::from(x.minute).into(),
            x.iotlb_flushes.into(),
            x.invalidations.into(),
            x.tables_left_cached.into(),
            x.forks.into(),
            Cell::float(x.alloc_us[0], 2),
            Cell::float(x.alloc_us[1], 2),
            Cell::float(x.alloc_us[2], 2),
            Cell::float(x.free_us[0], 2),
            Cell::float(x.free_us[1], 2),
            Cell::float(x.free_us[2], 2),
            x.pool_pages[0].into(),
            x.pool_pages[1].into(),
            x.pool_pages[2].into(),
            x.shrunk.into(),
            x.packets.into(),
            Cell::float(x.nic_iotlb_miss_rate, 6),
            Cell::float(x.nic_walk_ns_per_packet, 3),
        ]);
    }
    let mut g = Table::new(
        "groups",
        Some("groups.csv"),
        &[
            "group",
            "flushes_per_minute",
            "invalidations_per_minute",
            "tables_left_cached_per_minute",
            "alloc_us_per_minute",
            "free_us_per_minute",
            "peak_pool_pages",
            "shrunk_pages",
            "nic_iotlb_miss_rate",
            "nic_walk_ns_per_packet",
        ],
    );
    for x in &r.groups {
        g.push(vec![
            (&x.group).into(),
            Cell::float(x.flushes_per_minute, 1),
            Cell::float(x.invalidations_per_minute, 1),
            Cell::float(x.tables_left_cached_per_minute, 1),
            Cell::float(x.alloc_us_per_minute, 1),
            Cell::float(x.free_us_per_minute, 1),
            x.peak_pool_pages.into(),
            x.shrunk_pages.into(),
            Cell::float(x.nic_iotlb_miss_rate, 6),
            Cell::float(x.nic_walk_ns_per_packet, 3),
        ]);
    }
    vec![t, g]
}

/// The Xen the groups ran on, as the page names it.
fn xen_of(r: &IosupResults) -> &'static str {
    match r.setup.unmap_flush {
        UnmapFlush::Skipped => {
            "S3.5's Xen 4.2.1, whose type changes call the IOTLB flush without invalidating (XSA-78, \
fixed in 4.2.4)"
        }
        UnmapFlush::Invalidates => "a Xen whose type changes invalidate (XSA-78's fix, 4.2.4 on)",
    }
}

fn pct(x: f64) -> String {
    format!("{:+.1}%", x * 100.0)
}

/// The steps of one table's allocation and free at the run's prices: per level, from the
/// allocator and from the pool (cycles).
fn steps_table(r: &IosupResults) -> String {
    use iommulab::virt::xen::pt_work::{
        alloc_steps, alloc_steps_at, free_steps, free_steps_at_exit,
    };
    let c = &r.costs;
    let keeps = r.churn.pool_keeps;
    let flush = r.setup.unmap_flush;
    let mut p = String::from("| price | cycles | ns | range | source |\n|---|---:|---:|---|---|\n");
    for s in iosup::price_sources() {
        let v = c.field(s.field).unwrap_or(0);
        let range = s
            .range
            .map_or_else(|| "measured".to_string(), |(lo, hi)| format!("{lo}–{hi}"));
        let _ = writeln!(
            p,
            "| `{}` | {v} | {:.1} | {range} | {} |",
            s.field,
            c.ns(v),
            s.source.replace('|', "\\|")
        );
    }
    let _ = writeln!(
        p,
        "\nPer table at these prices, all of its work wherever it runs (cycles; a PMD is validated through its PGD, so it has no pin hypercall of its own; \
the PGD is a PAE L3 of 4 entries):\n\n| level | allocation from the allocator | from the pool | free to the allocator | into the pool |\n|---|---:|---:|---:|---:|"
    );
    for l in iosup::LEVELS {
        let _ = writeln!(
            p,
            "| {} | {} | {} | {} | {} |",
            l.name(),
            alloc_steps(l, false, keeps, flush).alloc_cycles(c),
            alloc_steps(l, true, keeps, flush).alloc_cycles(c),
            free_steps(l, false, keeps).free_cycles(c),
            free_steps(l, true, keeps).free_cycles(c),
        );
    }
    let _ = writeln!(
        p,
        "\nOf that, what runs in the allocation and free functions S3.5 times (cycles; a table freed at exit, and \
allocated before its mm's pin or, for a PTE page, after it):\n\n| level | allocation from the allocator, before / \
after the pin | from the pool, before / after | free to the allocator | into the pool |\n|---|---:|---:|---:|---:|"
    );
    for l in iosup::LEVELS {
        let alloc = |hit: bool, pinned: bool| {
            alloc_steps_at(l, hit, keeps, flush, pinned)
                .0
                .alloc_cycles(c)
        };
        let free = |pooled: bool| free_steps_at_exit(l, pooled, keeps).0.free_cycles(c);
        let after = |hit: bool| {
            if l == iommulab::virt::xen::PtLevel::Pte {
                alloc(hit, true).to_string()
            } else {
                "—".to_string()
            }
        };
        let _ = writeln!(
            p,
            "| {} | {} / {} | {} / {} | {} | {} |",
            l.name(),
            alloc(false, false),
            after(false),
            alloc(true, false),
            after(true),
            free(false),
            free(true),
        );
    }
    p
}

/// A verdict's letter in the sensitivity tables.
fn short(v: iommulab_repro::claims::Verdict) -> &'static str {
    match v.as_str() {
        "reproduced" => "R",
        "partly" => "P",
        "not reproduced" => "N",
        _ => "I",
    }
}

/// Every estimated price's range and the price-dependent claims' verdicts over it.
fn sensitivity_table(r: &IosupResults) -> String {
    let mut p = String::from("| price | run's value | range |");
    for id in iosup::PRICED_CLAIMS {
        let _ = write!(p, " `{id}` |");
    }
    p.push_str("\n|---|---:|---|");
    for _ in iosup::PRICED_CLAIMS {
        p.push_str("---|");
    }
    p.push('\n');
    for s in &r.sensitivity {
        let _ = write!(
            p,
            "| `{}` | {} | {}–{} |",
            s.price, s.value, s.range.0, s.range.1
        );
        for c in &s.claims {
            let whole = c.holds == s.range;
            let _ = write!(
                p,
                " {} / **{}** / {}{} |",
                short(c.verdicts[0]),
                short(c.verdicts[1]),
                short(c.verdicts[2]),
                if whole {
                    String::new()
                } else {
                    format!(" (holds {}–{})", c.holds.0, c.holds.1)
                }
            );
        }
        p.push('\n');
    }
    p
}

/// Every workload estimate's range: the groups rerun at each end, every claim re-judged.
/// A grid value with three significant digits, no trailing zeros.
fn sig(x: f64) -> String {
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "clamped to 0..=12 decimals"
    )]
    let digits = if x == 0.0 || !x.is_finite() {
        0
    } else {
        (2.0 - x.abs().log10().floor()).clamp(0.0, 12.0) as usize
    };
    let t = format!("{x:.digits$}");
    if t.contains('.') {
        t.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        t
    }
}

fn workload_table(r: &IosupResults) -> String {
    let mut p = String::from(
        "| estimate | run's value | range | most pool pages, pre-enabled / dynamic (low; **run**; high) | \
dynamic miss rate over disabled (low; **run**; high) | Figure 6's climb: disabled group's first minute over \
its steady rate (low; **run**; high) | verdicts that move (low / **run** / high; where the run's holds, between grid points) | basis |\n\
|---|---:|---|---|---|---|---|---|\n",
    );
    let num = |x: f64| {
        if x.fract() == 0.0 {
            format!("{x:.0}")
        } else {
            format!("{x}")
        }
    };
    let (run_pre, run_dyn) = (r.groups[1].peak_pool_pages, r.groups[2].peak_pool_pages);
    let run_left =
        r.groups[2].nic_iotlb_miss_rate / r.groups[0].nic_iotlb_miss_rate.max(f64::MIN_POSITIVE);
    let run_first = iosup::first_minute_share(r);
    for (s, e) in r
        .workload_sensitivity
        .iter()
        .zip(iosup::WORKLOAD_ESTIMATES.iter())
    {
        let moved: Vec<String> = s
            .claims
            .iter()
            .filter(|c| c.verdicts.iter().any(|&v| v != c.verdicts[1]))
            .map(|c| {
                let holds = s
                    .holds
                    .iter()
                    .find(|h| h.id == c.id)
                    .map_or_else(String::new, |h| {
                        format!(" (holds {}–{})", sig(h.from), sig(h.to))
                    });
                format!(
                    "`{}` {} / **{}** / {}{holds}",
                    c.id,
                    short(c.verdicts[0]),
                    short(c.verdicts[1]),
                    short(c.verdicts[2])
                )
            })
            .collect();
        let [(lo_pre, lo_dyn), (hi_pre, hi_dyn)] = s.pool_pages;
        let _ = writeln!(
            p,
            "| `{}` | {} | {}–{} | {lo_pre} / {lo_dyn}; **{run_pre} / {run_dyn}**; {hi_pre} / {hi_dyn} | \
{:.3}; **{run_left:.3}**; {:.3} | {:.2}; **{run_first:.2}**; {:.2} | {} | {} |",
            s.estimate,
            num(s.value),
            num(s.range.0),
            num(s.range.1),
            s.miss_rate_left[0],
            s.miss_rate_left[1],
            s.first_minute_share[0],
            s.first_minute_share[1],
            if moved.is_empty() {
                "none".to_owned()
            } else {
                moved.join("; ")
            },
            e.basis
        );
    }
    p
}

fn iosup_page(r: &IosupResults) -> String {
    let mut p = String::new();
    let c = &r.churn;
    let b = c.browser.clone().unwrap_or_default();
    let _ = writeln!(
        p,
        "# IOSUP: Xen PV page tables vs the IOTLB (Figures 6–9)\n\nRegenerate with `iommulab reproduce iosup{}`. \
{} simulated minutes per group of S3.5's stress tool: a browser loop of {:.0}-second iterations (S3.5: five \
minutes; the browser's page tables grow with its memory to {:.1} MB, S3.5's average, at {:.1} PTE pages per 2 MiB, \
{} PTE pages, and are all freed when it closes) and {:.2} process creations per minute (S3.5), each process living \
a log-uniform {}–{} s with one PGD, four PMDs (a Xen PV PAE guest does not share the kernel PMD) and {}–{} PTE \
pages; a NIC receiving {:.1} Mb/s of {}-byte packets (S3.5's netperf rate) into a {}-buffer RX ring refilled from \
the same page allocator; VT-d with queued, page-selective invalidation (S3.2) under {}. The pool is on from boot \
(`cache-pre-enabled`) or switched on when Figure 6's counter is stable (`cache-dynamic-enabled`: two consecutive \
minutes within {:.0}% of each other; here at minute {}). Steady state = minutes {} on.\n",
        if r.quick { " --quick" } else { "" },
        c.minutes,
        b.iteration_s,
        b.memory_mb,
        b.pte_per_2mib,
        b.pte_pages(),
        c.forks_per_minute,
        c.lifetime_s.0,
        c.lifetime_s.1,
        c.pte_pages.0,
        c.pte_pages.1,
        c.stream_mbps,
        c.packet_bytes,
        c.rx_ring,
        xen_of(r),
        r.stable_within * 100.0,
        r.dynamic_minute + 1,
        r.steady_from + 1,
    );
    let _ = writeln!(p, "![Figure 6](figure6_iotlb_flushes.svg)\n");
    let _ = writeln!(
        p,
        "| group | `flush_iotlb_qi` calls / min | invalidations / min | tables left cached / min | page-table alloc µs / min | free µs / min | most pool pages | pages given back | NIC IOTLB miss rate | NIC walk ns / packet |"
    );
    let _ = writeln!(p, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for g in &r.groups {
        let _ = writeln!(
            p,
            "| {} | {:.1} | {:.1} | {:.1} | {:.0} | {:.0} | {} | {} | {:.5} | {:.3} |",
            g.group,
            g.flushes_per_minute,
            g.invalidations_per_minute,
            g.tables_left_cached_per_minute,
            g.alloc_us_per_minute,
            g.free_us_per_minute,
            g.peak_pool_pages,
            g.shrunk_pages,
            g.nic_iotlb_miss_rate,
            g.nic_walk_ns_per_packet
        );
    }
    let (off, pre, dynamic) = (&r.groups[0], &r.groups[1], &r.groups[2]);
    let n = &r.netperf;
    let _ = writeln!(p);
    p.push_str(&crate::claims::section(&r.claims));
    let _ = writeln!(
        p,
        "\n## A page-table allocation and free, step by step\n\nThe steps Linux 3.2 (i386 PAE) and Xen 4.2 run for one \
table, counted in the run (`results.json`: `groups[].alloc_steps`, `free_steps`) and priced here. From the \
allocator: take a page, clear it, map it read-only in the kernel's direct map (`update_va_mapping`), pin it \
(`MMUEXT_PIN_L1/L3_TABLE`) so Xen validates every entry (`alloc_page_type`), and the type change writable → \
table clears its I/O PTE and calls Xen's IOTLB flush (`_get_page_type` → `iommu_unmap_page` → \
`dma_pte_clear_one` → `flush_iotlb_qi`). In Xen 4.2.1 that call returns without invalidating: \
`dma_pte_clear_one` passes the cleared PTE as not present, and VT-d hardware caches no non-present entries \
(XSA-78 fixed it in 4.2.4; the fixed flush's queued invalidation and its wait are the price `iotlb_invalidate`, \
counted only where a run performs it). Freed: unpinned (Xen devalidates every entry: `__put_page_type` drops \
`PGT_validated` at type count 0), made writable again (`iommu_map_page`, whose `flush_iotlb_qi` call returns at \
once), given back. From the pool: the page keeps its type, so there is no allocator, no clearing, no direct-map \
change and nothing for the IOMMU; but Linux unpins a process's tables in `xen_exit_mmap` before its free functions \
run, so a pooled table is pinned, validated and devalidated again like any other.\n\n**Where each step runs.** \
S3.5 times the allocation and free functions (`pgd_alloc()`, `pgd_free()` and their kin), and Linux 3.2 runs much \
of a table's Xen work outside them. `pgd_alloc` takes the PGD and its four PMDs, and exec its first stack page, \
before the new mm is pinned: those tables are made read-only, pinned and validated when `xen_dup_mmap` or \
`xen_activate_mm` pins the whole mm. A PTE page allocated later (a fault in the running process) is pinned by the \
allocation's own hook (`xen_alloc_pte`). At exit, `exit_mmap` calls `xen_exit_mmap` before `free_pgtables` and \
`pgd_free`: the unpin, Xen's devalidation and the change back to writable (with its I/O remap) happen there, and \
the free functions only give the page back (`xen_release_ptpage` finds it unpinned). The run counts each step \
where it runs (`results.json`: `groups[].alloc_steps` and `free_steps` in the functions, `pin_steps` and \
`unpin_steps` in the mm-wide passes); Figure 7's claims are judged on the functions, and the claims table gives \
the whole work per table beside them.\n\n{}",
        steps_table(r)
    );
    let _ = writeln!(
        p,
        "\n## Sensitivity: every estimated price over its range\n\nThe model's decisions never look at a price, so \
each price-dependent claim is re-judged from the same counted steps at {} points across each price's range (the \
others at the run's values). Each cell: the verdict at the range's low end / **at the run's value** / at the high \
end (R reproduced, P partly, N not reproduced); *holds a–b*: the span around the run's value over which its \
verdict holds, when narrower than the range. The claims not in the table (flushes, pool size, miss rate) do not \
depend on any price; the next table varies what they do depend on.\n\n{}",
        iosup::SENSITIVITY_POINTS,
        sensitivity_table(r)
    );
    let _ = writeln!(
        p,
        "\n## Sensitivity: every workload estimate over its range\n\nWhat the groups run that S3.5 does not fix \
(its rates, the browser's memory and the loop's period are S3.5's). For each estimate the three groups are run \
again at each end of its range, the others at the run's values, and every claim is judged again by its rule (R \
reproduced, P partly, N not reproduced; claims whose verdict is the same at both ends are not listed).\n\n{}",
        workload_table(r)
    );
    let shrink = &r.dynamic_shrink;
    let tables_per_process = {
        let (lo, hi) = c.pte_pages;
        5.0 + f64::from(lo + hi) / 2.0
    };
    let (first_lo, first_hi) = r
        .workload_sensitivity
        .iter()
        .flat_map(|w| w.first_minute_share)
        .chain([iosup::first_minute_share(r)])
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), x| {
            (lo.min(x), hi.max(x))
        });
    let _ = writeln!(
        p,
        "\n## Why, mechanism by mechanism\n\n\
- **Flushes (Figure 6).** Without the pool each table allocated changes type writable → L1/L2/L3, and Xen clears \
its I/O PTE and calls `flush_iotlb_qi` for one page-selective invalidation (S3.3; in Xen 4.2.1 the call returns \
without one, see the miss rate below); each table freed changes back, and Xen's `iommu_map_page` calls \
`flush_iotlb_qi` too, which returns at once (a non-present entry is not cached). S3.5 counted calls in that \
function's body, so both count: {:.0} calls and {:.0} invalidations per minute here. With the \
pool, freed tables keep their type: only tables beyond what the pool holds still come from the allocator. The \
disabled curve is flat from its first minute: the processes' lifetimes ({}–{} s) are far shorter than a minute, \
and the browser's {} PTE pages per iteration are a small part of {:.0} processes × {:.1} tables a minute. The \
paper's curve climbs for five minutes; in this model a climb of that length would need frees lagging allocations \
by minutes, i.e. thousands of tables alive for minutes, which the paper's own pool bound (≤ {} pages) rules out \
for synchronized exits; the first iteration's slower start (a cold page cache) is not modeled. Over every \
workload estimate's range (the table above) the disabled group's first minute stays within {:.2}–{:.2} of its \
steady rate: no estimate in range makes the climb.\n\
- **CPU time (Figure 7).** In the functions, with the pool: allocation {}, free {} (paper: {} / {}). Most of a table's \
allocation is in its function (a process's PTE pages come at faults, after the mm's pin, and the pin and the \
I/O unmap come with them), and a pooled table still pays the pin hypercall and Xen's walk of its \
entries there. A free at exit is only the page given back: the unpin, the walk and the change back to writable \
ran before, in `xen_exit_mmap`, so the pool saves the allocator's free against its own push. Counting the \
mm-wide passes too, the free's saving would be small (the claims table gives both per table). A pool that also \
kept its pages pinned (the other reading, outside Linux's exit path) would give {} / {} at the same counts. Every \
price but the clock is an estimate: the sensitivity table shows over which range each verdict holds.\n\
- **Pool size (Figures 8–9).** The pools hold the tables freed beyond those in use: when the browser closes, its \
{} PTE pages go to the pool and the next browser takes them back as it grows. The shrink rule (S3.4: give back \
`in_pool − in_use` pages of a level when pool / in use exceeds {} and pool + in use exceeds {} pages; our \
thresholds, the paper tuned its own by trial and published none) runs in the dynamic group only, as S3.5 adds the \
freeing there: it gave back {} pages in {} events. Peaks: {} pages pre-enabled, {} dynamic (paper: ≤ {} / ≤ {}).\n\
- **lmbench fork+exit.** Its child (one PGD, four PMDs, {} PTE pages, ours) takes every table from the pool and \
gives it back: {:.1} µs of page-table work saved per fork+exit, against the paper's whole saving of {:.1} µs \
(inferred from 344 µs, −11%).\n\
- **SPECint.** The model runs no SPECint code: the pool can change a CPU-bound benchmark's time by at most the \
page-table CPU time it saves per second, {:.4}% here (all of it counted on the benchmark's core).\n\
- **netperf.** Under Xen 4.2 dom0's memory is mapped in the I/O page tables at boot (S2.3), so its DMA layer maps \
and unmaps each packet's buffer without touching the IOMMU (`xen_swiotlb_map_page`: pfn → mfn, a contiguity \
check): {:.1} ns per packet at our estimate. The NIC's IOTLB is what the pool can change: {:.4} of its lookups miss \
without the pool, {:.4} with it (dynamic), {:.4} pre-enabled; walk time per packet differs by {:+.3} ns between the \
disabled and the dynamic group and by {:+.3} ns between the two groups with the pool. At most {:.3} ns per packet \
is the pool's, {:.5}% of a {:.0} ns packet at the paper's rate. The model's NIC receives at fixed spacing, so its \
received rate is an input and not the verdict: the verdict compares the per-packet costs.",
        off.flushes_per_minute,
        off.invalidations_per_minute,
        c.lifetime_s.0,
        c.lifetime_s.1,
        b.pte_pages(),
        c.forks_per_minute,
        tables_per_process,
        r.paper.pool_pages_pre,
        first_lo,
        first_hi,
        pct(r.alloc_change),
        pct(r.free_change),
        pct(r.paper.alloc_change),
        pct(r.paper.free_change),
        pct(r.pin_reading.0),
        pct(r.pin_reading.1),
        b.pte_pages(),
        shrink.proportion,
        shrink.total,
        dynamic.shrunk_pages,
        dynamic.shrink_events,
        pre.peak_pool_pages,
        dynamic.peak_pool_pages,
        r.paper.pool_pages_pre,
        r.paper.pool_pages_dynamic,
        r.lmbench_pte_pages,
        r.fork_exit_saving_us,
        r.paper_fork_exit_saving_us,
        r.specint_bound * 100.0,
        n.map_unmap_ns,
        off.nic_iotlb_miss_rate,
        dynamic.nic_iotlb_miss_rate,
        pre.nic_iotlb_miss_rate,
        n.walk_ns_saved_per_packet,
        n.same_pool_spread_ns,
        n.iotlb_effect_ns,
        100.0 * n.throughput_change_bound,
        n.packet_ns,
    );
    let tables_left = |g: &iosup::GroupSummary| g.tables_left_cached_per_minute;
    let _ = match (r.setup.unmap_flush, &r.fixed_xen_miss_rates) {
        (UnmapFlush::Skipped, fixed) => {
            let _ = write!(
                p,
                "- **IOTLB miss rate (the abstract).** In S3.5's Xen 4.2.1 a type change's IOTLB flush invalidates \
nothing (above), so no type change takes a translation from the NIC and the pool has none to give back: {:.4} of \
its lookups miss without the pool, {:.4} dynamic, {:.4} pre-enabled. What it leaves open instead: {:.1} tables a \
minute without the pool ({:.1} dynamic, {:.1} pre-enabled) became page tables while the NIC's IOTLB still \
translated their frame, so the NIC could write them until the entry was evicted (XSA-78); the pool, by ending the \
type changes, ends those too.",
                off.nic_iotlb_miss_rate,
                dynamic.nic_iotlb_miss_rate,
                pre.nic_iotlb_miss_rate,
                tables_left(off),
                tables_left(dynamic),
                tables_left(pre),
            );
            if let Some(f) = fixed {
                let [o, pr, d] = f.page_selective;
                let [oc, prc, dc] = f.domain_wide;
                let _ = write!(
                    p,
                    " Rerun with XSA-78's fix: page-selective requests take only the table frame's own translation, \
and the NIC's ring thrashing its IOTLB sets the rate with the pool or without ({o:.4} / {d:.4} dynamic / {pr:.4} \
pre-enabled); on a unit that performs page requests domain-wide (Xen's fallback where `CAP.PSI` is clear; VT-d \
lets a unit invalidate more than asked) every type change takes the NIC's translations with it, and the pool, by \
ending the type changes, gives them back ({oc:.4} / {dc:.4} / {prc:.4})."
                );
            }
            writeln!(p)
        }
        (UnmapFlush::Invalidates, _) => writeln!(
            p,
            "- **IOTLB miss rate (the abstract).** Each type change invalidates the table frame's translation page \
by page (S3.3), which takes no other: the NIC loses an entry only when a table takes a frame of its RX ring, and its \
miss rate is set by the ring thrashing the IOTLB, with the pool or without ({:.4} / {:.4} dynamic / {:.4} \
pre-enabled).",
            off.nic_iotlb_miss_rate, dynamic.nic_iotlb_miss_rate, pre.nic_iotlb_miss_rate,
        ),
    };
    let _ = writeln!(
        p,
        "\n![Figure 7, per level](figure7_levels.svg)\n\n![Figure 7, allocation](figure7_alloc.svg)\n\n![Figure 7, free](figure7_free.svg)\n\n\
![Figure 8](figure8_pool_pre_enabled.svg)\n\n![Figure 9](figure9_pool_dynamic_enabled.svg)\n\n\
Data: `results.json` (with every step count and the sensitivity table), `runs.csv` (per group and minute: \
`flush_iotlb_qi` calls, invalidations, tables left cached, alloc/free µs per level, pool pages per level, pages given back, the NIC's \
packets, IOTLB miss rate and walk time), `groups.csv` (the table above)."
    );
    p
}
