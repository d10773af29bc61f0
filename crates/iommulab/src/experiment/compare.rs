//! `iommulab compare TRACE`: what Linux's strict and lazy modes (and any configurations
//! asked) cost on a recorded trace, per device and in total, and how long each unmapped
//! buffer stays reachable: one replay per configuration with [`Accounting`] on.
//!
//! Each number's time base:
//! - `cpu_ns_per_op`: the modeled CPU time of the IOMMU's work per I/O (a map and its unmap:
//!   DMA-API calls, IOVA allocator, flush policy, page-table writes, invalidations), at the
//!   preset's prices; the I/O path a machine without an IOMMU runs too is left out.
//! - `extra_cpu_share`: that work over the whole trace, as a share of one core over the
//!   trace's own duration (its last timestamp − its first).
//! - `exposure`: windows in the trace's time (10 µs resolution); flush timers fire by the
//!   trace's clock.

use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::trace::EventSource;

use super::build::{ReplayOptions, replay_trace_with};
use super::config::{ExperimentConfig, NamedConfig};
use super::exposure::{Account, Accounting, Exposure};
use super::progress::ProgressFn;

/// The configurations `compare` runs before any asked for: Linux 6.x strict and lazy.
pub const COMPARED: [NamedConfig; 2] = [NamedConfig::LinuxStrict, NamedConfig::LinuxLazy];

/// One row: a device's numbers, or the total's.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CompareRow {
    /// The device as the trace names it (absent for the total).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub device: Option<String>,
    /// I/Os (unmaps) replayed.
    pub ios: u64,
    /// Modeled CPU ns of the IOMMU's work per I/O (map + unmap).
    pub cpu_ns_per_op: f64,
    /// That work over the trace, as a share (0..1) of one core over the trace's duration.
    pub extra_cpu_share: f64,
    /// IOTLB invalidation requests.
    pub invalidations: u64,
    /// The exposure windows.
    pub exposure: Exposure,
}

/// One configuration's rows.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CompareConfig {
    /// The configuration's name.
    pub name: String,
    /// All devices together.
    pub total: CompareRow,
    /// One row per device with I/Os, in the trace's order.
    pub devices: Vec<CompareRow>,
}

/// What `compare` prints as JSON.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CompareReport {
    /// The cost preset every configuration is priced with.
    pub preset: String,
    /// The trace's duration, ns (last timestamp − first).
    pub duration_ns: u64,
    /// The configurations, in the order run.
    pub configs: Vec<CompareConfig>,
}

fn row(device: Option<String>, a: &Account, ns_per_cycle: f64, duration_ns: u64) -> CompareRow {
    let cpu_ns = a.cpu_cycles as f64 * ns_per_cycle;
    CompareRow {
        device,
        ios: a.ios,
        cpu_ns_per_op: if a.ios > 0 {
            cpu_ns / a.ios as f64
        } else {
            0.0
        },
        extra_cpu_share: if duration_ns > 0 {
            cpu_ns / duration_ns as f64
        } else {
            0.0
        },
        invalidations: a.invalidations,
        exposure: a.exposure(),
    }
}

/// Replays the trace `open()` gives (once per configuration) through each of `configs`,
/// keeping `device` alone when given, and returns the comparison. Every configuration must
/// be priced with the same preset (the report names one).
pub fn compare_trace<S: EventSource>(
    configs: &[ExperimentConfig],
    mut open: impl FnMut() -> Result<S, Error>,
    device: Option<&str>,
    progress: &mut ProgressFn<'_>,
) -> Result<CompareReport, Error> {
    let preset = configs
        .first()
        .map_or_else(String::new, |c| c.hardware.cost.name().to_string());
    if let Some(other) = configs
        .iter()
        .find(|c| c.hardware.cost.name() != preset.as_str())
    {
        return Err(super::ConfigError::Invalid {
            key: "hardware.cost".into(),
            value: other.hardware.cost.name().into(),
            expected: format!("{preset}, the preset of the other configurations compared"),
        }
        .into());
    }
    let mut out = Vec::with_capacity(configs.len());
    let mut duration_ns = 0;
    for cfg in configs {
        let mut acct = Accounting::default();
        let (run, _, names) = replay_trace_with(
            cfg,
            open()?,
            progress,
            ReplayOptions {
                device,
                accounting: Some(&mut acct),
            },
        )?;
        duration_ns = acct
            .last_ns
            .saturating_sub(acct.first_ns.unwrap_or(acct.last_ns));
        let ns_per_cycle = 1.0 / cfg.hardware.cost_model()?.clock.as_ghz();
        let devices = acct
            .devices
            .iter()
            .enumerate()
            .filter(|(_, a)| a.ios > 0 || a.cpu_cycles > 0)
            .map(|(i, a)| {
                let name = names.get(i).cloned().unwrap_or_else(|| format!("#{i}"));
                row(Some(name), a, ns_per_cycle, duration_ns)
            })
            .collect();
        out.push(CompareConfig {
            name: run.config,
            total: row(None, &acct.total, ns_per_cycle, duration_ns),
            devices,
        });
    }
    Ok(CompareReport {
        preset,
        duration_ns,
        configs: out,
    })
}

/// The configurations to compare given a configuration file (or Python config) `file` and
/// the names `asked`: [`compared_configs`] over the file's settings, then the file's own
/// configuration when it is not one of them already. The CLI and Python both build their
/// list here, so the same request gives the same runs.
pub fn configs_for(
    file: Option<ExperimentConfig>,
    asked: &[NamedConfig],
) -> Result<Vec<ExperimentConfig>, super::ConfigError> {
    if let Some(f) = &file
        && !matches!(f.system, super::SystemConfig::BareMetal)
    {
        return Err(super::ConfigError::Invalid {
            key: "system.kind".into(),
            value: f.system.kind_name().into(),
            expected: "\"bare-metal\": compare runs bare-metal configurations (a guest or Xen \
                       PV system replays a trace with `iommulab replay --config-file`)"
                .into(),
        });
    }
    let base = file.clone().unwrap_or_default();
    let mut out = compared_configs(&base, asked);
    if let Some(f) = file
        && !out
            .iter()
            .any(|c| c.label() == f.label() && c.mechanisms() == f.mechanisms())
    {
        out.push(f);
    }
    for c in &out {
        c.validate()?;
    }
    Ok(out)
}

/// The configurations to compare: [`COMPARED`], then `asked` not already among them, each
/// over `base` (its hardware, device and dma-debug settings).
pub fn compared_configs(base: &ExperimentConfig, asked: &[NamedConfig]) -> Vec<ExperimentConfig> {
    let mut names: Vec<NamedConfig> = COMPARED.to_vec();
    for &c in asked {
        if !names.contains(&c) {
            names.push(c);
        }
    }
    names
        .into_iter()
        .map(|c| ExperimentConfig {
            configuration: c,
            mechanisms: None,
            ..base.clone()
        })
        .collect()
}
