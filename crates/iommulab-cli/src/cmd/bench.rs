//! `iommulab bench`: the pseudo-driver benchmark (S0.8).

use std::path::Path;

use anyhow::{Context, Result, bail};
use iommulab::device::DeviceMode;
use iommulab::experiment::{ExperimentConfig, NamedConfig, RunResult, Series, run_series};

use crate::args::BenchArgs;
use crate::output::{csv, json_one_or_many, out_flags, prepare_outputs, table, write_outs};
use crate::progress::ProgressBar;

/// Pages on each side of an unmapped page a malicious device probes, unless `--neighbours`
/// or the config file says otherwise.
pub const DEFAULT_NEIGHBOURS: u64 = 1;

/// Builds the base configuration from the TOML file (if any) and the flags. Only flags the
/// user actually passed override the file; the rest keep the file's values (or, without a
/// file, the defaults documented in `--help`).
pub fn base_config(args: &BenchArgs) -> Result<ExperimentConfig> {
    let mut cfg = match &args.config_file {
        Some(path) => {
            let text = crate::cmd::read_text(path)?;
            ExperimentConfig::from_toml(&text).with_context(|| format!("in {}", path.display()))?
        }
        None => ExperimentConfig::default(),
    };
    // The pseudo driver's flags: refused by name when the file's workload is another one.
    let flags = [
        ("--ops", args.ops.is_some()),
        ("--io-size", args.io_size.is_some()),
        ("--outstanding", args.outstanding.is_some()),
        ("--threads", args.threads.is_some()),
        ("--touch", args.touch),
    ];
    if let Some((flag, _)) = flags.iter().find(|(_, given)| *given)
        && cfg.pseudo_scsi().is_none()
    {
        bail!(
            "{flag} sets the pseudo driver's workload, but the configuration's workload is `{}`",
            cfg.workload_name()
        );
    }
    if let Some(w) = cfg.pseudo_scsi_mut() {
        if let Some(ops) = args.ops {
            w.ios = ops;
        }
        if let Some(v) = args.io_size {
            w.io_size = v;
        }
        if let Some(v) = args.outstanding {
            w.outstanding = v;
        }
        if let Some(v) = args.threads {
            w.cpus = v;
        }
        w.touch |= args.touch;
    }
    if args.ops.is_some() {
        // An explicit I/O count wins over a `duration_s` from the file.
        cfg.duration_s = None;
    }
    if let Some(d) = args.duration {
        cfg.duration_s = Some(d);
    }
    if let Some(v) = args.seed
        && let iommulab::experiment::WorkloadSpec::Generator(w) = &mut cfg.workload
    {
        w.set_seed(v);
    }
    if args.malicious {
        let file_neighbours = match cfg.device {
            DeviceMode::Malicious { neighbours } => neighbours,
            DeviceMode::Benign => DEFAULT_NEIGHBOURS,
        };
        cfg.device = DeviceMode::Malicious {
            neighbours: args.neighbours.unwrap_or(file_neighbours),
        };
    } else if let (Some(n), DeviceMode::Malicious { .. }) = (args.neighbours, cfg.device) {
        cfg.device = DeviceMode::Malicious { neighbours: n };
    }
    if let Some(c) = args.cost {
        cfg.hardware.cost = c.into();
    }
    if let Some(l) = args.levels {
        cfg.hardware.levels = Some(l);
    }
    if let Some(i) = args.invalidation {
        cfg.hardware.invalidation = Some(i.into());
    }
    if let Some(c) = args.software_clock {
        cfg.software_clock = c.into();
    }
    cfg.dma_debug |= args.dma_debug;
    if !args.configs.is_empty() {
        if !matches!(cfg.system, iommulab::experiment::SystemConfig::BareMetal) {
            // A guest or a Xen PV domain has its own fixed stack: the names would be dropped.
            bail!(
                "--config names bare-metal configurations, but the --config-file describes a {} \
                 system: give one or the other",
                cfg.system.kind_name()
            );
        }
        // Named configurations on the command line win over explicit mechanisms in the file.
        cfg.mechanisms = None;
    }
    match &args.config_file {
        Some(path) => cfg
            .validate()
            .with_context(|| format!("in {} (with the flags given)", path.display()))?,
        None => cfg.validate()?,
    }
    Ok(cfg)
}

/// Runs every configuration `repeats` times with seeds `seed..seed+repeats`
/// ([`run_series`]), with a progress bar.
pub fn run_configs(
    base: &ExperimentConfig,
    configs: &[NamedConfig],
    repeats: u32,
    quiet: bool,
) -> Result<Vec<RunResult>> {
    let per_run = match base.pseudo_scsi() {
        Some(w) if base.duration_s.is_none() => w.ios,
        _ => 0,
    };
    let mut bar = Bar(ProgressBar::new(
        per_run * configs.len() as u64 * u64::from(repeats),
        quiet,
    ));
    let results = run_series(base, configs, repeats, &mut bar)?;
    bar.0.finish();
    Ok(results)
}

/// The progress bar as a series' hooks.
struct Bar(ProgressBar);

impl Series for Bar {
    type Error = anyhow::Error;

    fn start(&mut self, cfg: &mut ExperimentConfig) -> Result<()> {
        self.0.start_run(cfg.configuration.name());
        Ok(())
    }

    fn progress(&mut self, p: &iommulab::Progress<'_>) -> std::ops::ControlFlow<()> {
        self.0.show(p)
    }

    fn failed(&mut self, cfg: &ExperimentConfig, e: iommulab::Error) -> anyhow::Error {
        anyhow::Error::new(e).context(format!("configuration `{}`", cfg.configuration.name()))
    }
}

/// `iommulab bench`.
pub fn run(args: &BenchArgs, quiet: bool) -> Result<()> {
    let inputs: Vec<(&str, &Path)> = args
        .config_file
        .iter()
        .map(|p| ("--config-file", p.as_path()))
        .collect();
    prepare_outputs(&out_flags(&args.out), &inputs)?;
    let base = base_config(args)?;
    let configs: Vec<NamedConfig> = if args.configs.is_empty() {
        if args.config_file.is_some() {
            vec![base.configuration]
        } else {
            NamedConfig::ALL.to_vec()
        }
    } else {
        args.configs.iter().map(|&c| c.into()).collect()
    };
    let results = run_configs(&base, &configs, args.repeats, quiet)?;
    let (json, csv) = (json_one_or_many(&results)?, csv(&results));
    write_outs(&args.out, &json, Some(&csv))?;
    let text = if args.json {
        json
    } else if args.csv {
        csv
    } else {
        table(&results)
    };
    crate::print_stdout(&text)
}
