//! `iommulab trace import|stats|convert|generate`.

use std::path::Path;

use anyhow::{Context, Result, bail};
use iommulab::create_trace;
use iommulab::experiment::record::generate as generate_trace;
use iommulab::trace::oracle_general::{OracleGeneralReader, is_oracle_general, request_stats};
use iommulab::trace::{
    EventSource, TraceFormat, TraceHeader, copy_events, open, open_ftrace, resolve, stats,
};
use iommulab::workload::WorkloadConfig;
use serde::Serialize;

use crate::args::{TraceCommand, TraceFormatArg, TraceGenerateArgs, TraceImportArgs, WorkloadArg};
use crate::output::{json_text, prepare_outputs};
use crate::progress::Reading;

impl From<TraceFormatArg> for TraceFormat {
    fn from(f: TraceFormatArg) -> Self {
        match f {
            TraceFormatArg::Auto => TraceFormat::Auto,
            TraceFormatArg::Ftrace => TraceFormat::Ftrace,
            TraceFormatArg::Csv => TraceFormat::Csv,
            TraceFormatArg::Native => TraceFormat::Native,
        }
    }
}

/// Opens any accepted trace as an event stream.
pub fn open_input(
    path: &Path,
    format: TraceFormatArg,
    lenient: bool,
) -> Result<Box<dyn EventSource>> {
    Ok(open(path, format.into(), lenient)?)
}

/// Prints `text` unless `quiet` (informational lines; results print regardless).
fn say(quiet: bool, text: &str) -> Result<()> {
    if quiet {
        Ok(())
    } else {
        crate::print_stdout(text)
    }
}

#[derive(Serialize)]
struct ConvertSummary {
    input: String,
    output: String,
    events: u64,
}

/// `iommulab trace ...`.
pub fn run(command: &TraceCommand, quiet: bool) -> Result<()> {
    match command {
        TraceCommand::Import(a) => import(a, quiet),
        TraceCommand::Stats(a) if is_oracle_general(&a.input) => {
            if a.read.format != TraceFormatArg::Auto {
                bail!(
                    "{}: named as libCacheSim's .oracleGeneral, which is read as such: drop \
                     --format",
                    a.input.display()
                );
            }
            let mut reader = OracleGeneralReader::open(&a.input)?;
            let spinner = Reading::new(
                crate::progress::NoEvents::default(),
                format!("reading {}", a.input.display()),
                quiet,
            );
            let s = request_stats(&mut reader)
                .with_context(|| format!("statistics of {}", a.input.display()))?;
            drop(spinner);
            let text = if a.json { json_text(&s)? } else { s.to_table() };
            crate::print_stdout(&text)
        }
        TraceCommand::Stats(a) => {
            let src = open_input(&a.input, a.read.format, a.read.lenient)?;
            let mut src = Reading::new(src, format!("reading {}", a.input.display()), quiet);
            let s =
                stats(&mut src).with_context(|| format!("statistics of {}", a.input.display()))?;
            drop(src);
            let text = if a.json { json_text(&s)? } else { s.to_table() };
            crate::print_stdout(&text)
        }
        TraceCommand::Convert(a) => {
            prepare_outputs(&[("-o", &a.out.output)], &[("the input", &a.input)])?;
            let src = open_input(&a.input, a.read.format, a.read.lenient)?;
            let mut src = Reading::new(src, format!("converting {}", a.input.display()), quiet);
            let mut dst = create_trace(&a.out.output, src.header())?;
            let n = copy_events(&mut src, &mut *dst)?;
            dst.finish()?;
            drop(src);
            if a.json {
                crate::print_stdout(&json_text(&ConvertSummary {
                    input: a.input.display().to_string(),
                    output: a.out.output.display().to_string(),
                    events: n,
                })?)
            } else {
                say(
                    quiet,
                    &format!("{n} events written to {}\n", a.out.output.display()),
                )
            }
        }
        TraceCommand::Generate(a) => generate(a, quiet),
    }
}

#[derive(Serialize)]
struct ImportSummary {
    input: String,
    output: String,
    format: TraceFormat,
    events: u64,
    /// The ftrace reader's report (lines, skipped, lost, per event name), for ftrace input.
    #[serde(skip_serializing_if = "Option::is_none")]
    ftrace: Option<iommulab::trace::ftrace::ImportReport>,
}

/// The ftrace import report for people: its non-zero counters, then lines per event name.
fn report_text(r: &iommulab::trace::ftrace::ImportReport) -> Result<String> {
    let mut t = String::new();
    if let serde_json::Value::Object(m) = serde_json::to_value(r)? {
        for (k, v) in &m {
            if let Some(n) = v.as_u64().filter(|&n| n > 0) {
                t.push_str(&format!("  {:<28} {n}\n", k.replace('_', " ")));
            }
        }
    }
    if !r.by_event.is_empty() {
        t.push_str("  lines per event:\n");
        for (k, n) in &r.by_event {
            t.push_str(&format!("    {k:<28} {n}\n"));
        }
    }
    Ok(t)
}

fn import(a: &TraceImportArgs, quiet: bool) -> Result<()> {
    prepare_outputs(&[("-o", &a.out.output)], &[("the input", &a.input)])?;
    let format = resolve(&a.input, a.read.format.into())?;
    let what = format!("importing {}", a.input.display());
    let (n, ftrace) = if format == TraceFormat::Ftrace {
        let mut src = Reading::new(open_ftrace(&a.input, a.read.lenient)?, what, quiet);
        let mut dst = create_trace(&a.out.output, src.header())?;
        let n = copy_events(&mut src, &mut *dst)?;
        dst.finish()?;
        (n, Some(src.inner().report()))
    } else {
        let mut src = Reading::new(open(&a.input, format, a.read.lenient)?, what, quiet);
        let mut dst = create_trace(&a.out.output, src.header())?;
        let n = copy_events(&mut src, &mut *dst)?;
        dst.finish()?;
        (n, None)
    };
    let summary = ImportSummary {
        input: a.input.display().to_string(),
        output: a.out.output.display().to_string(),
        format,
        events: n,
        ftrace,
    };
    if a.json {
        return crate::print_stdout(&json_text(&summary)?);
    }
    let mut text = format!("{n} events written to {}\n", a.out.output.display());
    if let Some(r) = &summary.ftrace {
        text = format!(
            "{n} events from {} lines written to {}\n{}",
            r.lines,
            a.out.output.display(),
            report_text(r)?
        );
    }
    say(quiet, &text)
}

fn workload_config(w: WorkloadArg, seed: u64) -> WorkloadConfig {
    let all = WorkloadConfig::all_defaults();
    let name = match w {
        WorkloadArg::PseudoScsi => "pseudo-scsi",
        WorkloadArg::NetperfSend => "netperf-send",
        WorkloadArg::ApacheSendfile => "apache-sendfile",
        WorkloadArg::Block => "block",
        WorkloadArg::UniformRandom => "uniform-random",
        WorkloadArg::NetRx => "net-rx",
        WorkloadArg::NicDuplex => "nic-duplex",
    };
    let mut cfg = all
        .into_iter()
        .find(|c| c.name() == name)
        .unwrap_or_default();
    cfg.set_seed(seed);
    cfg
}

#[derive(Serialize)]
struct GenerateSummary {
    workload: String,
    seed: u64,
    output: String,
    events: u64,
    ops: u64,
}

fn generate(a: &TraceGenerateArgs, quiet: bool) -> Result<()> {
    if a.events == 0 {
        bail!("--events must be at least 1");
    }
    prepare_outputs(&[("-o", &a.out.output)], &[])?;
    let cfg = workload_config(a.workload, a.seed);
    let header = TraceHeader {
        devices: Vec::new(),
        source: format!("iommulab trace generate {} --seed {}", cfg.name(), a.seed),
    };
    let mut sink = create_trace(&a.out.output, &header)?;
    let summary = generate_trace(&cfg, &mut *sink, a.events)
        .with_context(|| format!("generating {}", cfg.name()))?;
    sink.finish()?;
    if a.json {
        return crate::print_stdout(&json_text(&GenerateSummary {
            workload: cfg.name().to_string(),
            seed: a.seed,
            output: a.out.output.display().to_string(),
            events: summary.events,
            ops: summary.ops,
        })?);
    }
    say(
        quiet,
        &format!(
            "{} events ({} workload operations) written to {}\n",
            summary.events,
            summary.ops,
            a.out.output.display()
        ),
    )
}
