//! Yassour et al. 2010's report: `results.json`, `hit_rate.csv` (Figures 3–4), `cpu.csv`
//! (Figures 5–6), `cpu_sensitivity.csv`, the figures (SVG and PNG) and the markdown page.

mod page;

use crate::page::data_and_figures;
use std::path::{Path, PathBuf};

use iommulab_repro::yassour2010::hit_rate::PrefetchAt;
use iommulab_repro::yassour2010::{CpuCurve, HitCurve, Yassour2010Results};

use crate::ReportError;
use crate::files::{create_dir, write_atomic, write_json};
use crate::plot::{LineSeries, line_chart};
use crate::table::{Cell, Table};

/// The page of [`iommulab_repro::yassour2010`].
#[derive(Debug)]
pub(crate) struct Yassour2010Page;

impl crate::page::Page for Yassour2010Page {
    type Paper = iommulab_repro::yassour2010::Yassour2010;

    fn render(dir: &Path, r: &Yassour2010Results) -> Result<PathBuf, ReportError> {
        render(dir, r)
    }

    fn tables(r: &Yassour2010Results) -> Vec<Table> {
        tables(r)
    }

    fn files() -> Vec<String> {
        let mut stems = Vec::new();
        for (i, w) in ["netperf-send", "apache-sendfile"].iter().enumerate() {
            for (fig, kind) in [(3, "hit_rate"), (3, "hit_rate_pinned"), (5, "cpu")] {
                stems.push(format!("figure{}_{w}_{kind}", fig + i));
            }
        }
        for (i, w) in ["recorded-tcp-send", "recorded-httpd"].iter().enumerate() {
            for (fig, kind) in [(3, "hit_rate"), (5, "cpu")] {
                stems.push(format!("figure{}_{w}_{kind}", fig + i));
            }
        }
        data_and_figures(
            &[
                "results.json",
                "hit_rate.csv",
                "cpu.csv",
                "cpu_sensitivity.csv",
            ],
            stems,
        )
    }
}

/// Writes `dir` (`OUT/yassour2010`); returns the markdown page's path.
pub(crate) fn render(dir: &Path, r: &Yassour2010Results) -> Result<PathBuf, ReportError> {
    create_dir(dir)?;
    let res = &r.results;
    write_json(
        &dir.join("results.json"),
        &crate::claims::WithClaims {
            results: res,
            claims: &r.claims,
        },
    )?;
    for t in tables(r) {
        if let Some(file) = t.file {
            write_atomic(&dir.join(file), t.to_csv().as_bytes())?;
        }
    }
    for (i, w) in res.workloads.iter().enumerate() {
        let series = |pick: fn(&HitCurve) -> &Vec<f64>| -> Vec<LineSeries> {
            percent_series(
                w.policies
                    .iter()
                    .map(|p| (&p.policy, &p.quota_fraction, pick(p))),
            )
        };
        line_chart(
            dir,
            &format!("figure{}_{}_hit_rate", 3 + i, w.workload),
            &format!(
                "{}: hit rate vs quota (page-reference sequence)",
                w.workload
            ),
            "quota (% of working set)",
            "hit rate (%)",
            &series(|p| &p.hit_rate),
        )?;
        line_chart(
            dir,
            &format!("figure{}_{}_hit_rate_pinned", 3 + i, w.workload),
            &format!(
                "{}: hit rate vs quota with pinning (refused maps are misses)",
                w.workload
            ),
            "quota (% of working set)",
            "hit rate (%)",
            &series(|p| &p.hit_rate_pinned),
        )?;
    }
    for (i, w) in res.recorded.iter().enumerate() {
        line_chart(
            dir,
            &format!("figure{}_{}_hit_rate", 3 + i, w.workload),
            &format!(
                "{} ({}): hit rate vs quota (page-reference sequence)",
                w.workload, w.device
            ),
            "quota (% of working set)",
            "hit rate (%)",
            &percent_series(
                w.policies
                    .iter()
                    .map(|p| (&p.policy, &p.quota_fraction, &p.hit_rate)),
            ),
        )?;
    }
    // Figures 5–6 of each generated workload, then of each recording.
    let generated = res
        .workloads
        .iter()
        .map(|w| (&w.workload, &w.cpu))
        .enumerate();
    let recorded = res
        .recorded
        .iter()
        .map(|w| (&w.workload, &w.cpu))
        .enumerate();
    for (i, (workload, cpu)) in generated.chain(recorded) {
        cpu_chart(
            dir,
            &format!("figure{}_{}_cpu", 5 + i, workload),
            workload,
            cpu,
            res.cpus,
        )?;
    }
    let page = dir.join("README.md");
    write_atomic(&page, page::markdown(res, &r.claims).as_bytes())?;
    Ok(page)
}

/// A Figure 5–6 chart: CPU utilisation vs quota, one line per series.
fn cpu_chart(
    dir: &Path,
    name: &str,
    what: &str,
    curves: &[CpuCurve],
    cpus: u32,
) -> Result<(), ReportError> {
    line_chart(
        dir,
        name,
        &format!("{what}: CPU vs quota (0% = no caching; {cpus} vCPUs)"),
        "quota (% of working set)",
        "CPU utilisation (%)",
        &percent_series(
            curves
                .iter()
                .map(|c| (&c.series, &c.quota_fraction, &c.cpu_utilization)),
        ),
    )
}

/// One workload's (or recording's) CPU rows.
fn cpu_rows(cpu: &mut Table, workload: &str, curves: &[CpuCurve]) {
    for c in curves {
        for i in 0..c.cpu_utilization.len() {
            cpu.push(vec![
                workload.into(),
                (&c.series).into(),
                (&c.eviction).into(),
                (&c.batching).into(),
                (&c.mapping).into(),
                (&c.strategy[i]).into(),
                Cell::float(c.quota_fraction[i], 4),
                c.quota_pages[i].into(),
                Cell::float(c.cpu_utilization[i], 6),
                Cell::float(c.mapping_cpu[i], 6),
                Cell::float(c.throughput_mbps[i], 3),
                Cell::float(c.cpu_demand[i], 6),
                c.mapping_cycles[i].into(),
                c.stack_cycles[i].into(),
                c.sent_bytes[i].into(),
                Cell::float(c.hit_rate[i], 6),
                c.refused[i].into(),
                c.hypercalls[i].into(),
                Cell::float(c.pages_per_hypercall[i], 3),
                Cell::float(c.cycles_per_map[i], 1),
                c.page_maps[i].into(),
                c.iotlb_invalidations[i].into(),
            ]);
        }
    }
}

/// Line series in percent (both axes) from `(label, quota fractions, values)`.
fn percent_series<'a>(
    curves: impl Iterator<Item = (&'a String, &'a Vec<f64>, &'a Vec<f64>)>,
) -> Vec<LineSeries> {
    curves
        .map(|(label, x, y)| LineSeries {
            label: label.clone(),
            points: x
                .iter()
                .zip(y)
                .map(|(&f, &v)| (f * 100.0, v * 100.0))
                .collect(),
        })
        .collect()
}

/// One workload's (or recording's) hit-rate curves and prefetching rows.
fn curve_rows(
    hit: &mut Table,
    prefetch: &mut Table,
    workload: &str,
    policies: &[HitCurve],
    guesses: &[PrefetchAt],
) {
    for p in policies {
        for i in 0..p.hit_rate.len() {
            hit.push(vec![
                workload.into(),
                (&p.policy).into(),
                (&p.method).into(),
                Cell::float(p.quota_fraction[i], 4),
                p.quota_pages[i].into(),
                Cell::float(p.hit_rate[i], 6),
                Cell::float(p.hit_rate_pinned[i], 6),
                Cell::float(p.refused_rate_pinned[i], 6),
            ]);
        }
    }
    for a in guesses {
        prefetch.push(vec![
            workload.into(),
            Cell::float(a.quota_fraction, 4),
            a.quota_pages.into(),
            Cell::float(a.hit_rate, 6),
            a.misses.into(),
            a.prefetched.into(),
            a.prefetch_hits.into(),
        ]);
    }
}

/// `hit_rate` (`hit_rate.csv`, Figures 3–4) and `cpu` (`cpu.csv`, Figures 5–6), one row
/// per point; `prefetch`, `protection` and `sensitivity` (the page's other tables, no file).
pub(crate) fn tables(r: &Yassour2010Results) -> Vec<Table> {
    let res = &r.results;
    let mut hit = Table::new(
        "hit_rate",
        Some("hit_rate.csv"),
        &[
            "workload",
            "policy",
            "method",
            "quota_fraction",
            "quota_pages",
            "hit_rate",
            "hit_rate_pinned",
            "refused_rate_pinned",
        ],
    );
    let mut cpu = Table::new(
        "cpu",
        Some("cpu.csv"),
        &[
            "workload",
            "series",
            "eviction",
            "batching",
            "mapping",
            "strategy",
            "quota_fraction",
            "quota_pages",
            "cpu_utilization",
            "mapping_cpu",
            "throughput_mbps",
            "cpu_demand",
            "mapping_cycles",
            "stack_cycles",
            "sent_bytes",
            "hit_rate",
            "refused",
            "hypercalls",
            "pages_per_hypercall",
            "cycles_per_map",
            "page_maps",
            "iotlb_invalidations",
        ],
    );
    let mut prefetch = Table::new(
        "prefetch",
        None,
        &[
            "workload",
            "quota_fraction",
            "quota_pages",
            "hit_rate",
            "misses",
            "prefetched",
            "prefetch_hits",
        ],
    );
    let mut protection = Table::new(
        "protection",
        None,
        &[
            "workload",
            "strategy",
            "cache_only",
            "quota",
            "hit_rate",
            "hypercalls",
            "cpu_utilization",
            "stale_accesses",
            "stale_writes",
        ],
    );
    for w in &res.workloads {
        let name = || Cell::from(&w.workload);
        curve_rows(
            &mut hit,
            &mut prefetch,
            &w.workload,
            &w.policies,
            &w.prefetch,
        );
        cpu_rows(&mut cpu, &w.workload, &w.cpu);
        for p in &w.protection {
            protection.push(vec![
                name(),
                (&p.strategy).into(),
                (&p.cache_only).into(),
                p.quota.into(),
                Cell::float(p.hit_rate, 6),
                p.hypercalls.into(),
                Cell::float(p.cpu_utilization, 6),
                p.stale_accesses.into(),
                p.stale_writes.into(),
            ]);
        }
    }
    let mut cpu_sens = Table::new(
        "cpu_sensitivity",
        Some("cpu_sensitivity.csv"),
        &[
            "workload",
            "host_call_bookkeeping",
            "net_tx_per_kib",
            "cpus",
            "lru_cpu",
            "lru_throughput_mbps",
            "piggyback_cpu",
            "batching_cpu",
            "batching_throughput_mbps",
            "piggyback_busy_ratio",
            "batching_busy_ratio",
        ],
    );
    // The recorded traces' Figures 3–6, under their own workload names.
    for w in &res.recorded {
        curve_rows(
            &mut hit,
            &mut prefetch,
            &w.workload,
            &w.policies,
            &w.prefetch,
        );
        cpu_rows(&mut cpu, &w.workload, &w.cpu);
        for s in &w.cpu_sensitivity {
            cpu_sens.push(vec![
                (&w.workload).into(),
                s.host_call_bookkeeping.into(),
                s.net_tx_per_kib.into(),
                u64::from(s.cpus).into(),
                Cell::float(s.lru_cpu, 6),
                Cell::float(s.lru_throughput_mbps, 3),
                Cell::float(s.piggyback_cpu, 6),
                Cell::float(s.batching_cpu, 6),
                Cell::float(s.batching_throughput_mbps, 3),
                Cell::float(s.piggyback_busy_ratio, 6),
                Cell::float(s.batching_busy_ratio, 6),
            ]);
        }
    }
    let mut sensitivity = Table::new(
        "sensitivity",
        None,
        &[
            "workload",
            "config",
            "working_set_pages",
            "policy",
            "quota_fraction",
            "quota_pages",
            "hit_rate",
        ],
    );
    for s in res.sensitivity.iter().chain(
        res.recorded
            .iter()
            .filter_map(|r| r.tuned.as_ref().map(|t| &t.hit_rate)),
    ) {
        for (policy, points) in &s.hit_rate {
            for &(f, q, h) in points {
                sensitivity.push(vec![
                    (&s.workload).into(),
                    (&s.config).into(),
                    s.working_set_pages.into(),
                    policy.into(),
                    Cell::float(f, 4),
                    q.into(),
                    Cell::float(h, 6),
                ]);
            }
        }
    }
    let mut tuned = Table::new(
        "tuned",
        None,
        &["recording", "stream", "key", "value", "from"],
    );
    for t in res.recorded.iter().filter_map(|r| r.tuned.as_ref()) {
        for p in &t.params {
            tuned.push(vec![
                (&t.recording).into(),
                (&t.stream).into(),
                (&p.key).into(),
                (&p.value).into(),
                (&p.from).into(),
            ]);
        }
    }
    vec![hit, cpu, cpu_sens, prefetch, protection, sensitivity, tuned]
}
