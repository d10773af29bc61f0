//! `iommulab compare`: Linux strict vs lazy (and any configuration asked) on a trace, per
//! device and in total (`iommulab::experiment::compare`).

use anyhow::{Context, Result};
use iommulab::experiment::ExperimentConfig;
use iommulab::experiment::NamedConfig;
use iommulab::experiment::compare::{CompareReport, CompareRow, compare_trace, configs_for};

use crate::args::CompareArgs;
use crate::output::{column_widths, json_text, prepare_trace_outputs, preset_line, write_outs};
use crate::progress::ProgressBar;

/// A duration in ns for the table: `0`, `850 ns`, `12.3 us`, `10.1 ms`, `1.20 s`.
fn duration(ns: u64) -> String {
    let f = ns as f64;
    match ns {
        0 => "0".into(),
        1..=999 => format!("{ns} ns"),
        1_000..=999_999 => format!("{:.1} us", f / 1e3),
        1_000_000..=999_999_999 => format!("{:.1} ms", f / 1e6),
        _ => format!("{:.2} s", f / 1e9),
    }
}

/// A byte count for the table: `0`, `12 KiB`, `3.4 MiB`.
fn bytes(b: u64) -> String {
    let f = b as f64;
    if b == 0 {
        "0".into()
    } else if b < 1 << 20 {
        format!("{:.0} KiB", f / 1024.0)
    } else {
        format!("{:.1} MiB", f / (1024.0 * 1024.0))
    }
}

/// The comparison as a table: the preset line, the trace's duration, then a row per
/// configuration and device.
pub fn table(r: &CompareReport) -> String {
    let header = [
        "config",
        "device",
        "I/Os",
        "cpu ns/op",
        "extra CPU",
        "invalidations",
        "window p50",
        "p99",
        "max",
        "reachable",
        "pending",
    ];
    let cells = |name: &str, row: &CompareRow| {
        vec![
            name.to_string(),
            row.device.clone().unwrap_or_else(|| "total".into()),
            row.ios.to_string(),
            format!("{:.1}", row.cpu_ns_per_op),
            format!("{:.3}%", row.extra_cpu_share * 100.0),
            row.invalidations.to_string(),
            duration(row.exposure.p50_ns),
            duration(row.exposure.p99_ns),
            duration(row.exposure.max_ns),
            bytes(row.exposure.bytes),
            row.exposure.max_pending.to_string(),
        ]
    };
    let mut rows = Vec::new();
    for c in &r.configs {
        rows.push(cells(&c.name, &c.total));
        // One device is the total: its row would repeat it.
        if c.devices.len() > 1 {
            for d in &c.devices {
                rows.push(cells(&c.name, d));
            }
        }
    }
    let widths = column_widths(&header, &rows);
    let mut out = preset_line([r.preset.as_str()]);
    out.push_str(&format!(
        "trace: {} (last - first timestamp); cpu ns/op: modeled IOMMU work per map + unmap; \
         extra CPU: of one core over the trace; window: unmap to its invalidation\n",
        duration(r.duration_ns)
    ));
    let line = |cells: &[String], out: &mut String| {
        for (i, c) in cells.iter().enumerate() {
            if i < 2 {
                out.push_str(&format!("{:<w$}  ", c, w = widths[i]));
            } else {
                out.push_str(&format!("{:>w$}  ", c, w = widths[i]));
            }
        }
        while out.ends_with(' ') {
            out.pop();
        }
        out.push('\n');
    };
    line(&header.map(String::from), &mut out);
    for r in &rows {
        line(r, &mut out);
    }
    out
}

/// The comparison as CSV: one line per configuration and device (`total` for all).
pub fn csv(r: &CompareReport) -> String {
    let mut out = String::from(
        "preset,duration_ns,config,device,ios,cpu_ns_per_op,extra_cpu_share,invalidations,\
         p50_ns,p99_ns,max_ns,bytes,pages,max_pending,exposed_unmaps\n",
    );
    for c in &r.configs {
        for row in std::iter::once(&c.total).chain(&c.devices) {
            let e = &row.exposure;
            out.push_str(&format!(
                "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n",
                r.preset,
                r.duration_ns,
                c.name,
                row.device.as_deref().unwrap_or("total"),
                row.ios,
                row.cpu_ns_per_op,
                row.extra_cpu_share,
                row.invalidations,
                e.p50_ns,
                e.p99_ns,
                e.max_ns,
                e.bytes,
                e.pages,
                e.max_pending,
                e.exposed_unmaps,
            ));
        }
    }
    out
}

/// The configurations `args` asks for ([`configs_for`]), `--cost` pricing them all.
fn configs(args: &CompareArgs) -> Result<Vec<ExperimentConfig>> {
    let mut file = match &args.config_file {
        Some(path) => {
            let text = crate::cmd::read_text(path)?;
            let c = ExperimentConfig::from_file_text(path, &text)
                .with_context(|| format!("in {}", path.display()))?;
            Some(c)
        }
        None => None,
    };
    if let (Some(f), Some(c)) = (file.as_mut(), args.cost) {
        f.hardware.cost = c.into();
    }
    let asked: Vec<NamedConfig> = args.configs.iter().map(|&c| c.into()).collect();
    let mut out = configs_for(file, &asked).with_context(|| match &args.config_file {
        Some(p) => format!("in {}", p.display()),
        None => "in the configurations".into(),
    })?;
    if let Some(c) = args.cost {
        for cfg in &mut out {
            cfg.hardware.cost = c.into();
        }
    }
    Ok(out)
}

/// `iommulab compare`.
pub fn run(args: &CompareArgs, quiet: bool) -> Result<()> {
    prepare_trace_outputs(&args.out, &args.trace, args.config_file.as_deref())?;
    let cfgs = configs(args)?;
    let mut progress = ProgressBar::new(0, quiet);
    progress.start_run("compare");
    let report = compare_trace(
        &cfgs,
        || {
            Ok(iommulab::trace::open(
                &args.trace,
                args.read.format.into(),
                args.read.lenient,
            )?)
        },
        args.device.as_deref(),
        &mut |p| progress.show(p),
    )
    .map_err(anyhow::Error::from)
    .with_context(|| format!("comparing on {}", args.trace.display()))?;
    progress.finish();
    let json = json_text(&report)?;
    let csv = csv(&report);
    write_outs(&args.out, &json, Some(&csv))?;
    let text = if args.json {
        json
    } else if args.csv {
        csv
    } else {
        table(&report)
    };
    crate::print_stdout(&text)
}
