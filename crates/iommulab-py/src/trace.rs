//! Traces: statistics, generation from a built-in workload, and hit-rate curves of the guest
//! map cache over a trace.

use std::path::PathBuf;

use iommulab::experiment::ConfigError;
use iommulab::trace::{TraceHeader, create_trace, open, stats};
use iommulab::virt::EvictionConfig;
use iommulab::workload::TraceWorkload;
use iommulab::workload::WorkloadConfig;
use pyo3::prelude::*;
use pyo3::types::PyString;

use crate::convert::{from_toml, parse_toml, to_py};
use crate::errors::PyErrWrap;
use crate::run::trace_format;

/// `iommulab trace stats --json`, as a dict.
#[pyfunction]
#[pyo3(signature = (path, format="auto", lenient=false))]
pub fn trace_stats<'py>(
    py: Python<'py>,
    path: PathBuf,
    format: &str,
    lenient: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let format = trace_format(format)?;
    let s = py.detach(|| -> Result<_, iommulab::Error> {
        let mut src = open(&path, format, lenient)?;
        Ok(stats(&mut *src)?)
    });
    to_py(py, &s.map_err(PyErrWrap::from)?)
}

/// A workload config from its name (`pseudo-scsi`, `netperf-send`, ...) or a dict/TOML with
/// `kind`.
fn workload_config(obj: &Bound<'_, PyAny>) -> PyResult<WorkloadConfig> {
    if obj.is_instance_of::<PyString>() {
        let name: String = obj.extract()?;
        let all = WorkloadConfig::all_defaults();
        return all
            .iter()
            .find(|c| c.name() == name)
            .copied()
            .ok_or_else(|| {
                PyErrWrap::from(ConfigError::Invalid {
                    key: "workload".into(),
                    value: name,
                    expected: format!(
                        "one of {}",
                        all.iter().map(|c| c.name()).collect::<Vec<_>>().join(", ")
                    ),
                })
                .into()
            });
    }
    from_toml(obj)
}

/// `iommulab trace generate`: records `events` events of a built-in workload to `path`
/// (format from the extension). Returns the number of events written.
#[pyfunction]
#[pyo3(signature = (workload, events, path, seed=None))]
pub fn trace_generate(
    py: Python<'_>,
    workload: &Bound<'_, PyAny>,
    events: u64,
    path: PathBuf,
    seed: Option<u64>,
) -> PyResult<u64> {
    if events == 0 {
        return Err(PyErrWrap::from(ConfigError::Invalid {
            key: "events".into(),
            value: "0".into(),
            expected: "at least 1".into(),
        })
        .into());
    }
    let mut cfg = workload_config(workload)?;
    if let Some(s) = seed {
        cfg.set_seed(s);
    }
    let header = TraceHeader {
        devices: Vec::new(),
        source: format!("iommulab (python) trace generate {}", cfg.name()),
    };
    let n = py.detach(|| -> Result<u64, iommulab::Error> {
        let mut sink = create_trace(&path, &header)?;
        let summary = iommulab::experiment::record::generate(&cfg, &mut *sink, events)?;
        sink.finish()?;
        Ok(summary.events)
    });
    Ok(n.map_err(PyErrWrap::from)?)
}

/// The hit-rate curve of the guest map cache over a trace for one eviction policy (`lru`,
/// `opt`, `fifo`, ... or a dict with `kind`), quotas `0..=max_quota`.
#[pyfunction]
#[pyo3(signature = (trace, policy, max_quota=None, format="auto", lenient=false))]
pub fn mrc<'py>(
    py: Python<'py>,
    trace: PathBuf,
    policy: &Bound<'py, PyAny>,
    max_quota: Option<usize>,
    format: &str,
    lenient: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let config: EvictionConfig = if policy.is_instance_of::<PyString>() {
        let kind: String = policy.extract()?;
        parse_toml(&format!("kind = {}", toml::Value::String(kind)))?
    } else {
        from_toml(policy)?
    };
    let format = trace_format(format)?;
    let curve = py.detach(|| -> Result<_, iommulab::Error> {
        let src = open(&trace, format, lenient)?;
        let mut w = TraceWorkload::new(src);
        let refs = iommulab::virt::guest_page_refs(&mut w, iommulab::virt::CacheOnly::All)?;
        Ok(iommulab::mrc::mrc(&refs, &config, max_quota)?)
    });
    to_py(py, &curve.map_err(PyErrWrap::from)?)
}
