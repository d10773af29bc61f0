//! `iommulab replay`: a recorded or generated trace through one or more configurations.

use anyhow::{Context, Result};
use iommulab::device::DeviceMode;
use iommulab::experiment::{BenchConfig, NamedConfig, RunLabels, RunResult, run_workload};
use iommulab::hw::cost::CostPreset;
use iommulab::trace::replay::{ReplayReport, TraceWorkload};
use serde::Serialize;

use crate::args::ReplayArgs;
use crate::cmd::trace::open_input;
use crate::output::{table, write_atomic};
use crate::progress::Progress;

/// One configuration's replay: the run's result plus what the replay made of the trace.
#[derive(Debug, Serialize)]
struct ReplayResult {
    trace: String,
    #[serde(flatten)]
    run: RunResult,
    replay: ReplayReport,
}

fn base_config(args: &ReplayArgs) -> Result<BenchConfig> {
    let mut cfg = match &args.config_file {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read {}", path.display()))?;
            BenchConfig::from_toml(&text).with_context(|| format!("in {}", path.display()))?
        }
        None => {
            let mut c = BenchConfig::default();
            c.hardware.cost = CostPreset::Modern;
            c
        }
    };
    if let Some(c) = args.cost {
        cfg.hardware.cost = c.into();
    }
    if args.malicious {
        cfg.device = DeviceMode::Malicious { neighbours: 1 };
    }
    cfg.dma_debug |= args.dma_debug;
    if !args.configs.is_empty() {
        cfg.mechanisms = None;
    }
    cfg.validate()?;
    Ok(cfg)
}

/// `iommulab replay`.
pub fn run(args: &ReplayArgs, quiet: bool) -> Result<()> {
    let base = base_config(args)?;
    let configs: Vec<NamedConfig> = if !args.configs.is_empty() {
        args.configs.iter().map(|&c| c.into()).collect()
    } else if args.config_file.is_some() {
        vec![base.configuration]
    } else {
        vec![NamedConfig::Modern]
    };
    let mut results = Vec::new();
    let mut progress = Progress::new(0, quiet);
    for c in configs {
        let cfg = BenchConfig {
            configuration: c,
            ..base.clone()
        };
        let src = open_input(&args.trace, args.format, args.lenient)?;
        let mut w = TraceWorkload::new(src);
        let labels = RunLabels {
            config: cfg.label(),
            cost_preset: cfg.hardware.cost.name().to_string(),
            seed: 0,
            io_size: 0,
            outstanding: 0,
            cpus: 0,
            touch: false,
        };
        progress.start_run(c.name());
        let run = run_workload(&cfg, &mut w, labels, true, None, &mut |done, _| {
            progress.update(done)
        })
        .with_context(|| format!("replaying {} through `{}`", args.trace.display(), c.name()))?;
        results.push(ReplayResult {
            trace: args.trace.display().to_string(),
            run,
            replay: w.report(),
        });
    }
    progress.finish();
    let mut runs: Vec<RunResult> = results.iter().map(|r| r.run.clone()).collect();
    RunResult::fill_relative(&mut runs);
    for (r, run) in results.iter_mut().zip(runs.iter()) {
        r.run.relative_to_disabled = run.relative_to_disabled;
    }
    if let Some(path) = &args.out {
        write_atomic(path, serde_json::to_string_pretty(&results)?.as_bytes())?;
    }
    let text = if args.json {
        let mut t = if results.len() == 1 {
            serde_json::to_string_pretty(&results[0])?
        } else {
            serde_json::to_string_pretty(&results)?
        };
        t.push('\n');
        t
    } else {
        let mut t = table(&runs);
        for r in &results {
            let p = &r.replay;
            t.push_str(&format!(
                "{}: {} events, {} maps, {} unmaps, {} accesses replayed; {} unmatched unmaps, {} iommu events skipped\n",
                r.run.config, p.events, p.maps, p.unmaps, p.accesses, p.unmatched_unmaps, p.skipped_iommu_events
            ));
        }
        t
    };
    crate::print_stdout(&text)
}
