//! `iommulab trace import|stats|convert|generate`.

use std::path::Path;

use anyhow::{Context, Result, bail};
use iommulab::create_trace;
use iommulab::experiment::record::generate as generate_trace;
use iommulab::trace::{
    EventSource, TraceFormat, TraceHeader, copy_events, detect, open, open_ftrace, stats,
};
use iommulab::workload::WorkloadConfig;
use serde::Serialize;

use crate::args::{TraceCommand, TraceFormatArg, TraceGenerateArgs, TraceImportArgs, WorkloadArg};

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

/// `iommulab trace ...`.
pub fn run(command: &TraceCommand) -> Result<()> {
    match command {
        TraceCommand::Import(a) => import(a),
        TraceCommand::Stats(a) => {
            let mut src = open_input(&a.input, a.format, a.lenient)?;
            let s = stats(&mut *src)?;
            let text = if a.json {
                let mut t = serde_json::to_string_pretty(&s)?;
                t.push('\n');
                t
            } else {
                s.to_table()
            };
            crate::print_stdout(&text)
        }
        TraceCommand::Convert(a) => {
            let mut src = open_input(&a.input, a.format, a.lenient)?;
            let mut dst = create_trace(&a.output, src.header())?;
            let n = copy_events(&mut *src, &mut *dst)?;
            dst.finish()?;
            crate::print_stdout(&format!("{n} events written to {}\n", a.output.display()))
        }
        TraceCommand::Generate(a) => generate(a),
    }
}

#[derive(Serialize)]
struct ImportSummary {
    input: String,
    output: String,
    format: TraceFormat,
    events: u64,
}

fn import(a: &TraceImportArgs) -> Result<()> {
    let format = match a.format {
        TraceFormatArg::Auto => detect(&a.input)?,
        f => f.into(),
    };
    if format == TraceFormat::Ftrace {
        let mut src = open_ftrace(&a.input, a.lenient)?;
        let mut dst = create_trace(&a.output, src.header())?;
        let n = copy_events(&mut src, &mut *dst)?;
        dst.finish()?;
        let r = src.report();
        let mut text = format!(
            "{n} events from {} lines written to {}\n",
            r.lines,
            a.output.display()
        );
        text.push_str(&format!("{r:#?}\n"));
        return crate::print_stdout(&text);
    }
    let mut src = open(&a.input, format, a.lenient)?;
    let mut dst = create_trace(&a.output, src.header())?;
    let n = copy_events(&mut *src, &mut *dst)?;
    dst.finish()?;
    let summary = ImportSummary {
        input: a.input.display().to_string(),
        output: a.output.display().to_string(),
        format,
        events: n,
    };
    crate::print_stdout(&format!("{}\n", serde_json::to_string(&summary)?))
}

fn workload_config(w: WorkloadArg, seed: u64) -> WorkloadConfig {
    let all = WorkloadConfig::all_defaults();
    let name = match w {
        WorkloadArg::PseudoScsi => "pseudo-scsi",
        WorkloadArg::NetperfSend => "netperf-send",
        WorkloadArg::ApacheSendfile => "apache-sendfile",
        WorkloadArg::Block => "block",
        WorkloadArg::UniformRandom => "uniform-random",
    };
    let mut cfg = all
        .into_iter()
        .find(|c| c.name() == name)
        .unwrap_or_default();
    cfg.set_seed(seed);
    cfg
}

fn generate(a: &TraceGenerateArgs) -> Result<()> {
    if a.events == 0 {
        bail!("--events must be at least 1");
    }
    let cfg = workload_config(a.workload, a.seed);
    let header = TraceHeader {
        devices: Vec::new(),
        source: format!("iommulab trace generate {} --seed {}", cfg.name(), a.seed),
    };
    let mut sink = create_trace(&a.output, &header)?;
    let summary = generate_trace(&cfg, &mut *sink, a.events)
        .with_context(|| format!("generating {}", cfg.name()))?;
    sink.finish()?;
    crate::print_stdout(&format!(
        "{} events ({} workload operations) written to {}\n",
        summary.events,
        summary.ops,
        a.output.display()
    ))
}
