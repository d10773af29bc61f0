//! A bench series: every named configuration `repeats` times with seeds `seed..seed+repeats`,
//! then `relative_to_disabled` filled within the series. The one place these rules live;
//! `iommulab bench`, Python's `run_batch` and the Fujita reproduction are callers that say
//! only what differs for them ([`Series`]: how a run starts, its progress, its errors).

use std::ops::ControlFlow;

use super::{ExperimentConfig, NamedConfig, Progress, RunResult, run_bench};
use crate::Error;

/// What a caller of [`run_series`] adds to the rules: each hook has a default, so a caller
/// writes only what it needs.
pub trait Series {
    /// The series' error: the library's, or the caller's own with the library's inside.
    type Error: From<Error>;

    /// Before each run: adjust its configuration (already the named one, at its seed), say
    /// that it starts, or stop the series with an error.
    fn start(&mut self, _cfg: &mut ExperimentConfig) -> Result<(), Self::Error> {
        Ok(())
    }

    /// A run's progress, its `step` the configuration running: `Break` stops it.
    fn progress(&mut self, _: &Progress<'_>) -> ControlFlow<()> {
        ControlFlow::Continue(())
    }

    /// A run failed: the error the series returns (say which configuration, say).
    fn failed(&mut self, _cfg: &ExperimentConfig, e: Error) -> Self::Error {
        e.into()
    }
}

/// No hooks: the rules alone.
#[derive(Debug, Default)]
pub struct Plain;

impl Series for Plain {
    type Error = Error;
}

/// Runs every configuration of `configs`, in order, `repeats` times each (run `r` at the base
/// seed plus `r`), and fills `relative_to_disabled` within the series.
pub fn run_series<S: Series>(
    base: &ExperimentConfig,
    configs: &[NamedConfig],
    repeats: u32,
    series: &mut S,
) -> Result<Vec<RunResult>, S::Error> {
    let mut results = Vec::with_capacity(configs.len() * repeats as usize);
    for &c in configs {
        for r in 0..repeats {
            let mut cfg = ExperimentConfig {
                configuration: c,
                ..base.with_seed_offset(u64::from(r))
            };
            series.start(&mut cfg)?;
            let step = c.name();
            match run_bench(&cfg, &mut |p| series.progress(&p.in_step(step))) {
                Ok(result) => results.push(result),
                Err(e) => return Err(series.failed(&cfg, e)),
            }
        }
    }
    RunResult::fill_relative(&mut results);
    Ok(results)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> ExperimentConfig {
        let mut cfg = ExperimentConfig::default();
        cfg.pseudo_scsi_mut().unwrap().ios = 200;
        cfg
    }

    #[test]
    fn every_configuration_repeats_at_consecutive_seeds_and_is_relative_to_disabled() {
        let configs = [NamedConfig::Disabled, NamedConfig::LinuxStrict];
        let runs = run_series(&base(), &configs, 3, &mut Plain).unwrap();
        let seen: Vec<(&str, u64)> = runs.iter().map(|r| (r.config.as_str(), r.seed)).collect();
        let seed = base().seed().unwrap();
        assert_eq!(
            seen,
            [
                ("disabled", seed),
                ("disabled", seed + 1),
                ("disabled", seed + 2),
                ("linux-strict", seed),
                ("linux-strict", seed + 1),
                ("linux-strict", seed + 2),
            ]
        );
        assert!(runs.iter().all(|r| r.relative_to_disabled.is_some()));
        let strict = runs[3].relative_to_disabled.unwrap();
        assert!(strict > 0.0 && strict < 1.0, "{strict}");
    }

    /// A caller's hooks: a changed configuration runs, and an error from `start` stops the
    /// series before the run.
    #[test]
    fn hooks_adjust_runs_and_stop_the_series() {
        struct Count(u32);
        impl Series for Count {
            type Error = Error;
            fn start(&mut self, cfg: &mut ExperimentConfig) -> Result<(), Error> {
                self.0 += 1;
                cfg.pseudo_scsi_mut().unwrap().ios = 10 * u64::from(self.0);
                Ok(())
            }
        }
        let mut hooks = Count(0);
        let runs = run_series(&base(), &[NamedConfig::Disabled], 2, &mut hooks).unwrap();
        assert_eq!(runs.iter().map(|r| r.ops).collect::<Vec<_>>(), [10, 20]);

        #[derive(Debug, PartialEq)]
        struct Stopped(String);
        impl From<Error> for Stopped {
            fn from(e: Error) -> Self {
                Stopped(e.to_string())
            }
        }
        struct Refuse;
        impl Series for Refuse {
            type Error = Stopped;
            fn start(&mut self, cfg: &mut ExperimentConfig) -> Result<(), Stopped> {
                Err(Stopped(format!("before {}", cfg.configuration.name())))
            }
        }
        let e = run_series(&base(), &[NamedConfig::Disabled], 1, &mut Refuse).unwrap_err();
        assert_eq!(e, Stopped("before disabled".into()));
    }
}
