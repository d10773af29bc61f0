//! `iommulab mrc`: the hit-rate curve of the guest map cache over a trace for one eviction
//! policy, over the page sequence (S1.9's method, default) or the pinned map cache
//! (`--pinning`); the library's `mrc::hit_rate_curve` does the work.

use std::fmt::Write as _;

use anyhow::{Context, Result};
use iommulab::mrc::{
    CurveError, CurveRequest, HitRateCurve, MrcMethod, Quotas, curve_is_streamed, hit_rate_curve,
    requests_hit_rate_curve, trace_hit_rate_curve, trace_page_refs,
};
use iommulab::trace::oracle_general::{OracleGeneralReader, is_oracle_general};

use clap::ValueEnum;
use iommulab_report::{Cell, Table};

use crate::args::{MrcArgs, TraceFormatArg};
use crate::cmd::trace::open_input;
use crate::output::{json_text, prepare_trace_outputs, write_outs};
use crate::progress::{NoEvents, Reading};

/// Longest curve the table prints whole; longer `0..=N` curves print a subset.
const FULL_TABLE_ROWS: usize = 41;

/// `iommulab mrc`.
pub fn run(args: &MrcArgs, quiet: bool) -> Result<()> {
    prepare_trace_outputs(&args.out, &args.trace, None)?;
    let quotas = match (&args.quotas, args.max_quota) {
        (Some(list), _) => Some(Quotas::List(list.clone())),
        (None, Some(n)) => Some(Quotas::UpTo(n)),
        (None, None) => None,
    };
    let req = CurveRequest {
        policy: args.policy.into(),
        pinning: args.pinning,
        quotas,
    };
    let reading = || format!("reading {}", args.trace.display());
    let curve = if is_oracle_general(&args.trace) {
        if args.read.format != TraceFormatArg::Auto {
            anyhow::bail!(
                "{}: named as libCacheSim's .oracleGeneral, which is read as such: drop --format",
                args.trace.display()
            );
        }
        let mut reader = OracleGeneralReader::open(&args.trace)?;
        let spinner = Reading::new(NoEvents::default(), reading(), quiet);
        let curve = requests_hit_rate_curve(&mut reader, &req).map_err(|e| match e {
            CurveError::Workload(w) => anyhow::Error::new(w).context(reading()),
            e => e.into(),
        })?;
        drop(spinner);
        curve
    } else if curve_is_streamed(&req) {
        let src = open_input(&args.trace, args.read.format, args.read.lenient)?;
        let src = Reading::new(src, reading(), quiet);
        // Simulated as the trace is read: the progress bar is the whole run.
        trace_hit_rate_curve(src, &req).map_err(|e| match e {
            CurveError::Workload(w) => anyhow::Error::new(w).context(reading()),
            e => e.into(),
        })?
    } else {
        let src = open_input(&args.trace, args.read.format, args.read.lenient)?;
        let src = Reading::new(src, reading(), quiet);
        let refs = trace_page_refs(src).with_context(reading)?;
        // A spinner while the curve is computed (a pinned curve simulates every quota).
        let policy = args
            .policy
            .to_possible_value()
            .map(|v| v.get_name().to_owned())
            .unwrap_or_default();
        let spinner = Reading::new(
            NoEvents::default(),
            format!("{policy} curve over {} page maps", refs.len()),
            quiet,
        );
        let curve = hit_rate_curve(&refs, &req)?;
        drop(spinner);
        curve
    };
    let json = json_text(&curve)?;
    let csv = csv(&curve);
    write_outs(&args.out, &json, Some(&csv))?;
    let text = if args.json {
        json
    } else if args.csv {
        csv
    } else {
        table(
            &curve,
            &args.trace.display().to_string(),
            args.quotas.is_some(),
        )
    };
    crate::print_stdout(&text)
}

/// The whole curve as CSV: one line per quota, with the trace's totals on every line so
/// one file can be concatenated with others (several policies or traces) and still be read.
fn csv(c: &HitRateCurve) -> String {
    let mut t = Table::new(
        "mrc",
        None,
        &[
            "policy",
            "pinning",
            "quota",
            "hits",
            "misses",
            "refused",
            "hit_rate",
            "maps",
            "distinct_pages",
        ],
    );
    for i in 0..c.len() {
        t.push(vec![
            Cell::from(&c.policy),
            Cell::from(if c.pinning { "true" } else { "false" }),
            Cell::Int(c.quota[i] as u64),
            Cell::Int(c.hits[i]),
            Cell::Int(c.misses[i]),
            Cell::Int(c.refused[i]),
            Cell::float(c.hit_rate[i], 6),
            Cell::Int(c.maps),
            Cell::Int(c.distinct_pages as u64),
        ]);
    }
    t.to_csv()
}

/// Indices of the rows a long `0..=N` table shows: quota 0, powers of two below 10% of the
/// distinct pages (small quotas are where policies and views differ most), every 10% of
/// the distinct pages, and the last quota.
fn subset(c: &HitRateCurve) -> Vec<usize> {
    let last = c.quota.len() - 1;
    let mut rows = vec![0, last];
    let mut q = 1;
    while q < last && q * 10 < c.distinct_pages {
        rows.push(q);
        q *= 2;
    }
    for k in 1..=10 {
        let q = (c.distinct_pages * k).div_ceil(10);
        if q <= last {
            rows.push(q);
        }
    }
    rows.sort_unstable();
    rows.dedup();
    // In a `0..=N` curve the quota is the index.
    rows
}

/// The curve as a text table (all rows for a `--quotas` list or a short curve).
fn table(c: &HitRateCurve, trace: &str, listed: bool) -> String {
    let mut s = String::new();
    let view = if c.pinning {
        "pinned map cache (pages stay pinned while their DMA is in flight)"
    } else {
        "page sequence (each page map an independent reference, S1.9)"
    };
    let method = match c.method {
        MrcMethod::StackDistance => "one pass over stack distances",
        MrcMethod::Simulation => "one cache simulation per quota",
    };
    let _ = writeln!(s, "trace           {trace}");
    let _ = writeln!(s, "policy          {}", c.policy);
    let _ = writeln!(s, "view            {view}");
    let _ = writeln!(s, "method          {method}");
    let _ = writeln!(s, "page maps       {}", c.maps);
    let _ = writeln!(s, "distinct pages  {}", c.distinct_pages);
    match c.max_pinned {
        Some(n) => {
            let _ = writeln!(s, "max pinned      {n} pages at once");
        }
        None => {
            let _ = writeln!(
                s,
                "max pinned      not counted (the page sequence reads the maps alone; \
                 --pinning counts it)"
            );
        }
    }
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "{:>9} {:>11} {:>12} {:>12} {:>12} {:>9}",
        "quota", "% distinct", "hits", "misses", "refused", "hit rate"
    );
    let rows: Vec<usize> = if listed || c.len() <= FULL_TABLE_ROWS {
        (0..c.len()).collect()
    } else {
        subset(c)
    };
    for &i in &rows {
        let pct = if c.distinct_pages == 0 {
            0.0
        } else {
            100.0 * c.quota[i] as f64 / c.distinct_pages as f64
        };
        let _ = writeln!(
            s,
            "{:>9} {:>10.1}% {:>12} {:>12} {:>12} {:>9.4}",
            c.quota[i], pct, c.hits[i], c.misses[i], c.refused[i], c.hit_rate[i]
        );
    }
    if rows.len() < c.len() {
        let _ = writeln!(
            s,
            "\n{} of {} quotas shown (0, powers of two up to 10% of the distinct pages, then \
             every 10%, and the last); --json or --csv prints all, --quotas picks others",
            rows.len(),
            c.len()
        );
    }
    s
}
