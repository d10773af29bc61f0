//! `iommulab replay`: a recorded or generated trace through one or more configurations.

use anyhow::{Context, Result, anyhow};
use iommulab::device::DeviceMode;
use iommulab::experiment::{
    ExperimentConfig, GuestSystemConfig, HardwareConfig, NamedConfig, ReplayOptions,
    ResolvedSystem, RunResult, SystemConfig, TraceSpec, WorkloadSpec, no_progress,
    replay_trace_with, run_experiment,
};
use iommulab::hw::cost::CostPreset;
use iommulab::trace::check::{CheckOptions, CheckReport, check};
use iommulab::workload::ReplayReport;
use serde::Serialize;

use crate::args::{ReplayArgs, StrategyArg};
use crate::cmd::trace::open_input;
use crate::output::{
    csv, json_one_or_many, json_text, prepare_trace_outputs, refuse_csv_outs, table, write_outs,
};
use crate::progress::ProgressBar;

/// One configuration's replay: the run's result (its `replay` part says what the replay made
/// of the trace), and the trace's name.
#[derive(Debug, Serialize)]
struct ReplayResult {
    trace: String,
    /// The cost preset the run is priced with.
    preset: String,
    #[serde(flatten)]
    run: RunResult,
    #[serde(skip)]
    replay: ReplayReport,
    /// What `iommulab check` finds in the trace (the driver's DMA-API misuse).
    check: CheckReport,
}

/// Findings `replay` prints (all are in the JSON).
const CHECK_PRINTED: usize = 10;

/// Runs `iommulab check` over the trace for the replay's report.
fn check_trace(args: &ReplayArgs) -> Result<CheckReport> {
    let opts = CheckOptions {
        max_findings: 1000,
        ..CheckOptions::default()
    };
    check(
        &args.trace,
        args.read.format.into(),
        args.read.lenient,
        &opts,
    )
    .with_context(|| format!("checking {}", args.trace.display()))
}

/// The replay's dma-debug lines: the counts by kind and the first findings.
fn check_text(c: &CheckReport) -> String {
    let kinds: Vec<String> = c
        .by_kind
        .iter()
        .map(|(k, n)| format!("{n} {}", k.name()))
        .collect();
    let mut t = format!(
        "dma-debug (iommulab check): {} findings{}\n",
        c.findings_total,
        if kinds.is_empty() {
            String::new()
        } else {
            format!(" ({})", kinds.join(", "))
        }
    );
    for f in c.findings.iter().take(CHECK_PRINTED) {
        t.push_str(&f.display_with(&c.trace));
        t.push('\n');
    }
    if c.findings_total > CHECK_PRINTED as u64 {
        t.push_str(&format!(
            "... `iommulab check {}` lists them all\n",
            c.trace
        ));
    }
    t
}

fn base_config(args: &ReplayArgs) -> Result<ExperimentConfig> {
    let mut cfg = match &args.config_file {
        Some(path) => {
            let text = crate::cmd::read_text(path)?;
            ExperimentConfig::from_toml(&text).with_context(|| format!("in {}", path.display()))?
        }
        None => ExperimentConfig::default(),
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

/// `iommulab replay --strategy ...`: the trace through the guest model, as the experiment
/// its flags describe (a guest system, the trace as workload), run by the one runner.
fn run_guest_model(args: &ReplayArgs, strategy: StrategyArg, quiet: bool) -> Result<()> {
    let checked = check_trace(args)?;
    let exp = ExperimentConfig {
        system: SystemConfig::Guest(GuestSystemConfig {
            strategy: strategy.into(),
            quota: args.quota,
            eviction: args.eviction.into(),
            batching: args.batching.into(),
            guest_mib: args.guest_mib.max(1),
            ..GuestSystemConfig::default()
        }),
        hardware: HardwareConfig {
            cost: args
                .cost
                .map_or(HardwareConfig::default().cost, CostPreset::from),
            ..HardwareConfig::default()
        },
        workload: WorkloadSpec::Trace(TraceSpec {
            trace: args.trace.clone(),
            format: args.read.format.into(),
            lenient: args.read.lenient,
        }),
        ..ExperimentConfig::default()
    };
    let ResolvedSystem::Guest(cfg) = exp.resolve()?.system else {
        return Err(anyhow!(
            "internal: a guest experiment resolved to bare metal"
        ));
    };
    let run = run_experiment(&exp, &mut no_progress)
        .with_context(|| format!("replaying {} through the guest model", args.trace.display()))?;
    let (Some(r), Some(replay)) = (run.guest, run.replay) else {
        return Err(anyhow!(
            "internal: a guest run over a trace lacks its guest or replay part"
        ));
    };
    let out = serde_json::json!({
        "trace": args.trace.display().to_string(),
        "config": cfg,
        "result": r,
        "hits": r.hits,
        "misses": r.misses,
        "refused": r.refused,
        "hypercalls": r.hypercalls,
        "replay": replay,
        "check": checked,
    });
    let json = json_text(&out)?;
    write_outs(&args.out, &json, None)?;
    let text = if args.json {
        json
    } else {
        format!(
            "guest {} (eviction {}, quota {}, batching {}): {} page maps, {} hits, {} misses, {} refused (hit rate {:.1}%)\n\
             {} hypercalls ({:.2} pages each, max {}), {} IOTLB invalidations, {} write-buffer flushes\n\
             {} modeled cycles ({:.0} per map), CPU {:.1}% ({:.1}% mapping), {:.0} of {} Mb/s; {} stale accesses ({} writable)\n",
            r.strategy,
            if r.eviction.is_empty() {
                "-"
            } else {
                &r.eviction
            },
            r.quota,
            r.batching,
            r.maps,
            r.hits,
            r.misses,
            r.refused,
            r.hit_rate * 100.0,
            r.hypercalls,
            r.pages_per_hypercall,
            r.max_pages_per_hypercall,
            r.iotlb_invalidations,
            r.write_buffer_flushes,
            r.cycles,
            r.cycles_per_map,
            r.cpu_utilization * 100.0,
            r.mapping_cpu * 100.0,
            r.throughput_mbps,
            cfg.link_mbps,
            r.stale_accesses,
            r.stale_writes,
        ) + &if quiet {
            String::new()
        } else {
            check_text(&checked)
        }
    };
    crate::print_stdout(&text)
}

/// `iommulab replay --config-file F` whose `system` is a guest or a Xen PV domain: the trace
/// as that system's workload, run by the one runner (as `iommulab run` would with `[workload]
/// trace = ...`).
fn run_system(args: &ReplayArgs, base: ExperimentConfig, quiet: bool) -> Result<()> {
    if !args.configs.is_empty() {
        return Err(anyhow!(
            "--config names bare-metal configurations, but the --config-file describes a {} \
             system: give one or the other",
            base.system.kind_name()
        ));
    }
    let checked = check_trace(args)?;
    let exp = ExperimentConfig {
        workload: WorkloadSpec::Trace(TraceSpec {
            trace: args.trace.clone(),
            format: args.read.format.into(),
            lenient: args.read.lenient,
        }),
        ..base
    };
    let run = run_experiment(&exp, &mut no_progress).with_context(|| {
        format!(
            "replaying {} through the {} system of the --config-file",
            args.trace.display(),
            exp.system.kind_name()
        )
    })?;
    let Some(replay) = run.replay else {
        return Err(anyhow!(
            "internal: a run over a trace lacks its replay part"
        ));
    };
    let text = crate::cmd::run::result_text(&run)
        + &if quiet {
            String::new()
        } else {
            check_text(&checked)
        };
    let result = ReplayResult {
        trace: args.trace.display().to_string(),
        preset: run.cost_preset.clone(),
        run,
        replay,
        check: checked,
    };
    let json = json_text(&result)?;
    let csv = csv(std::slice::from_ref(&result.run));
    write_outs(&args.out, &json, Some(&csv))?;
    crate::print_stdout(if args.json {
        &json
    } else if args.csv {
        &csv
    } else {
        &text
    })
}

/// `iommulab replay`.
pub fn run(args: &ReplayArgs, quiet: bool) -> Result<()> {
    prepare_trace_outputs(&args.out, &args.trace, args.config_file.as_deref())?;
    let base = match args.strategy {
        Some(_) => None,
        None => Some(base_config(args)?),
    };
    let bare = base
        .as_ref()
        .is_some_and(|b| matches!(b.system, SystemConfig::BareMetal));
    if !bare && args.device.is_some() {
        return Err(anyhow!(
            "--device applies to the bare-metal configurations' replay; the guest model and \
             the other systems replay the whole trace"
        ));
    }
    if args.strategy.is_some() {
        if args.csv {
            return Err(anyhow!(
                "--csv: the guest model's replay (--strategy) has no CSV form; use --json"
            ));
        }
        refuse_csv_outs(&args.out, "the guest model's replay (--strategy)")?;
    }
    let base = match (args.strategy, base) {
        (Some(s), _) => return run_guest_model(args, s, quiet),
        (None, Some(b)) if !bare => return run_system(args, b, quiet),
        (None, Some(b)) => b,
        (None, None) => return Err(anyhow!("internal: no configuration")),
    };
    let configs: Vec<NamedConfig> = if !args.configs.is_empty() {
        args.configs.iter().map(|&c| c.into()).collect()
    } else if args.config_file.is_some() {
        vec![base.configuration]
    } else {
        vec![NamedConfig::LinuxLazy]
    };
    let checked = check_trace(args)?;
    let mut results = Vec::new();
    let mut progress = ProgressBar::new(0, quiet);
    for c in configs {
        let cfg = ExperimentConfig {
            configuration: c,
            ..base.clone()
        };
        let src = open_input(&args.trace, args.read.format, args.read.lenient)?;
        progress.start_run(c.name());
        let opts = ReplayOptions {
            device: args.device.as_deref(),
            accounting: None,
        };
        let (run, replay, _) = replay_trace_with(&cfg, src, &mut |p| progress.show(p), opts)
            .with_context(|| {
                format!("replaying {} through `{}`", args.trace.display(), c.name())
            })?;
        results.push(ReplayResult {
            trace: args.trace.display().to_string(),
            preset: run.cost_preset.clone(),
            run,
            replay,
            check: checked.clone(),
        });
    }
    progress.finish();
    let mut runs: Vec<RunResult> = results.iter().map(|r| r.run.clone()).collect();
    RunResult::fill_relative(&mut runs);
    for (r, run) in results.iter_mut().zip(runs.iter()) {
        r.run.relative_to_disabled = run.relative_to_disabled;
    }
    let (json, csv) = (json_one_or_many(&results)?, csv(&runs));
    write_outs(&args.out, &json, Some(&csv))?;
    let text = if args.csv {
        csv
    } else if args.json {
        json
    } else {
        let mut t = table(&runs);
        for r in &results {
            let p = &r.replay;
            t.push_str(&format!(
                "{}: {}\n",
                r.run.config,
                crate::cmd::run::replay_text(p)
            ));
        }
        if !quiet {
            t.push_str(&check_text(&checked));
        }
        t
    };
    crate::print_stdout(&text)
}
