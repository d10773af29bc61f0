//! Experiments: the configuration schema, the one place configuration enums become types
//! ([`build`]), the runner that keeps the two clocks, the many-core model ([`cores`]), [`RunResult`], a bench [`series`], and
//! [`record`]: a built-in workload written out as a trace (it needs the IOVA allocator and the
//! workload registry, so it lives here, above both).

pub mod build;
pub mod compare;
pub mod config;
pub mod cores;
pub mod expether;
pub mod exposure;
mod guest;
pub mod progress;
pub mod pv_dma;
pub mod record;
pub mod result;
pub mod run_file;
pub mod runner;
pub mod series;

pub use build::{
    ReplayOptions, WorkloadVisitor, replay_trace, replay_trace_with, run_bench, run_experiment,
    run_workload, with_workload,
};
pub use config::{
    ConfigError, ExperimentConfig, GuestSystemConfig, HardwareConfig, Mechanisms, NamedConfig,
    Resolved, ResolvedSystem, SoftwareClock, SystemConfig, TraceSpec, UnitKind, WorkloadSpec,
    XenPvSystemConfig,
};
pub use progress::{
    PROGRESS_EVERY, Progress, ProgressFn, ProgressUnit, SharedProgressFn, no_progress,
};
pub use pv_dma::{PvDmaKind, PvDmaRun, PvDmaSpec, run_pv_dma, xen_2007_unit};
pub use result::{ComponentStats, RunResult};
pub use runner::RunLabels;
pub use series::{Plain, Series, run_series};
