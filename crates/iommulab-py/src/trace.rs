//! Traces: statistics, generation from a built-in workload, and hit-rate curves of the guest
//! map cache over a trace.

use std::path::PathBuf;

use iommulab::addr::{Gpa, PAGE_4K, Pfn};
use iommulab::experiment::{ConfigError, WorkloadVisitor, with_workload};
use iommulab::trace::record::{RecordSummary, record};
use iommulab::trace::replay::TraceWorkload;
use iommulab::trace::{EventSink, TraceHeader, create_trace, open, stats};
use iommulab::virt::{EvictionConfig, PageRef};
use iommulab::workload::{DmaOp, Workload, WorkloadConfig};
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

/// Lets a generator run until the recorder has its events (as `iommulab trace generate`).
fn unbounded(cfg: &mut WorkloadConfig) {
    match cfg {
        WorkloadConfig::PseudoScsi(c) => c.ios = u64::MAX,
        WorkloadConfig::NetperfSend(c) => c.packets = u64::MAX,
        WorkloadConfig::ApacheSendfile(c) => c.requests = u64::MAX,
        WorkloadConfig::Block(c) => c.requests = u64::MAX,
        WorkloadConfig::UniformRandom(c) => c.ios = u64::MAX,
    }
}

struct Recorder<'a> {
    sink: &'a mut dyn EventSink,
    events: u64,
}

impl WorkloadVisitor for Recorder<'_> {
    type Output = RecordSummary;
    fn visit<W: Workload>(self, mut w: W) -> iommulab::Result<Self::Output> {
        let names: Vec<String> = (0..w.devices().max(1)).map(|i| format!("sim{i}")).collect();
        self.sink.set_devices(&names)?;
        record(&mut w, self.sink, self.events, 1000)
    }
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
    unbounded(&mut cfg);
    let header = TraceHeader {
        devices: Vec::new(),
        source: format!("iommulab (python) trace generate {}", cfg.name()),
    };
    let n = py.detach(|| -> Result<u64, iommulab::Error> {
        let mut sink = create_trace(&path, &header)?;
        let summary = with_workload(
            &cfg,
            Recorder {
                sink: &mut *sink,
                events,
            },
        )?;
        sink.finish()?;
        Ok(summary.events)
    });
    Ok(n.map_err(PyErrWrap::from)?)
}

/// The guest-page reference stream of a workload: each map (single or scatter-gather) maps
/// every 4 KiB page its buffer spans, each unmap unmaps them again.
// TODO(core): belongs in `virt` (e.g. `virt::page_refs(&mut impl Workload)`); kept here
// until the virt owner adds it.
fn page_refs<W: Workload>(w: &mut W) -> Result<Vec<PageRef>, iommulab::Error> {
    let mut slots: Vec<Vec<u64>> = vec![Vec::new(); w.slots().max(1)];
    let mut refs = Vec::new();
    let span = |phys: iommulab::addr::Hpa, len: u64, pages: &mut Vec<u64>| {
        let first = phys.pfn(PAGE_4K).get();
        let n = PAGE_4K.pages_spanned(phys.page_offset(PAGE_4K), len);
        pages.extend(first..first + n);
    };
    while let Some(op) = w.next_op()? {
        let (slot, map) = match op {
            DmaOp::Map {
                slot, phys, len, ..
            } => {
                let s = slot as usize;
                if s >= slots.len() {
                    slots.resize(s + 1, Vec::new());
                }
                slots[s].clear();
                span(phys, len, &mut slots[s]);
                (s, true)
            }
            DmaOp::MapSg { slot, .. } => {
                let s = slot as usize;
                if s >= slots.len() {
                    slots.resize(s + 1, Vec::new());
                }
                slots[s].clear();
                for seg in w.sg_segments() {
                    span(seg.phys, seg.len, &mut slots[s]);
                }
                (s, true)
            }
            DmaOp::Unmap { slot, .. } => (slot as usize, false),
            DmaOp::Access { .. } | DmaOp::Tick { .. } => continue,
        };
        let Some(pages) = slots.get(slot) else {
            continue;
        };
        refs.extend(pages.iter().map(|&g| {
            let g = Pfn::<Gpa>::new(g);
            if map {
                PageRef::Map(g)
            } else {
                PageRef::Unmap(g)
            }
        }));
    }
    Ok(refs)
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
        let refs = page_refs(&mut w)?;
        Ok(iommulab::mrc::mrc(&refs, &config, max_quota)?)
    });
    to_py(py, &curve.map_err(PyErrWrap::from)?)
}
