//! Traces: statistics, generation from a built-in workload, and hit-rate curves of the guest
//! map cache over a trace.

use std::path::PathBuf;

use iommulab::create_trace;
use iommulab::experiment::ConfigError;
use iommulab::iova::{ByteRange, DomainConfig};
use iommulab::mrc::{CurveRequest, Quotas, trace_hit_rate_curve};
use iommulab::trace::check::{CheckOptions, check, dma_mask_of_bits, parse_dma_mask};
use iommulab::trace::{TraceHeader, open, stats};
use iommulab::validate::{ValidateOptions, validate};
use iommulab::virt::EvictionConfig;
use iommulab::workload::WorkloadConfig;
use pyo3::prelude::*;
use pyo3::types::PyString;

use crate::args::{Int, opt};
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

/// Device DMA masks as the CLI's `--dma-mask DEVICE=MASK` takes them: an int (or a decimal
/// string) is a number of bits, 1 to 64; a string `"0x..."` is the mask itself. A mask of 0
/// would put every mapping beyond it, so it is refused too.
fn masks(list: Option<Vec<(String, Bound<'_, PyAny>)>>) -> PyResult<Vec<(String, u64)>> {
    let bad = |dev: &str, value: String| -> PyErr {
        PyErrWrap::from(ConfigError::Invalid {
            key: format!("dma_masks[{dev:?}]"),
            value,
            expected: "a number of bits, 1 to 64 (32 is the mask 0xffffffff, as the CLI's \
                       --dma-mask DEVICE=32), or a non-zero mask as a hex string like \"0xffffffff\""
                .into(),
        })
        .into()
    };
    let mut out = Vec::new();
    for (dev, v) in list.unwrap_or_default() {
        let mask = if let Ok(s) = v.cast::<PyString>() {
            let s = s.to_str()?;
            parse_dma_mask(s).ok_or_else(|| bad(&dev, s.trim().to_owned()))?
        } else if v.is_instance_of::<pyo3::types::PyBool>() {
            return Err(bad(&dev, v.repr()?.to_string()));
        } else {
            let n: Int = v.extract().map_err(|_| {
                bad(
                    &dev,
                    format!(
                        "{} of type {}",
                        v.repr().map(|r| r.to_string()).unwrap_or_default(),
                        v.get_type()
                            .name()
                            .map(|n| n.to_string())
                            .unwrap_or_default()
                    ),
                )
            })?;
            n.get::<u32>("")
                .ok()
                .and_then(dma_mask_of_bits)
                .ok_or_else(|| bad(&dev, v.str().map(|s| s.to_string()).unwrap_or_default()))?
        };
        out.push((dev, mask));
    }
    Ok(out)
}

/// `iommulab check --json`, as a dict: dma-debug of a recorded trace. `dma_masks` are as the
/// CLI's `--dma-mask` (see [`masks`]).
#[pyfunction]
#[pyo3(signature = (path, format="auto", lenient=false, dma_masks=None, iommu=true, max_findings=None, leaks=false, from_boot=false))]
#[allow(clippy::too_many_arguments)] // the Python keyword arguments
pub fn trace_check<'py>(
    py: Python<'py>,
    path: PathBuf,
    format: &str,
    lenient: bool,
    dma_masks: Option<Vec<(String, Bound<'py, PyAny>)>>,
    iommu: bool,
    max_findings: Option<Int>,
    leaks: bool,
    from_boot: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let format = trace_format(format)?;
    let mut opts = CheckOptions {
        dma_masks: masks(dma_masks)?,
        iommu,
        leaks,
        from_boot,
        ..CheckOptions::default()
    };
    if let Some(n) = opt::<usize>(max_findings.as_ref(), "max_findings")? {
        opts.max_findings = n;
    }
    let r =
        py.detach(|| -> Result<_, iommulab::Error> { Ok(check(&path, format, lenient, &opts)?) });
    to_py(py, &r.map_err(PyErrWrap::from)?)
}

/// `iommulab validate --json`, as a dict: the Linux 6.x IOVA allocator model against the
/// IOVAs a real kernel chose in an ftrace trace.
#[pyfunction]
#[pyo3(signature = (path, kernel="6.12", lazy=false, warmup=0.0, lenient=false, cpus=None,
    dma_masks=None, groups=None, start_pfn=Int::of(1), aperture_bits=Int::of(48), reserved=None,
    default_windows=true, forcedac=false, max_mismatches=Int::of(20)),
    text_signature = "(path, kernel='6.12', lazy=False, warmup=0.0, lenient=False, cpus=None, \
    dma_masks=None, groups=None, start_pfn=1, aperture_bits=48, reserved=None, \
    default_windows=True, forcedac=False, max_mismatches=20)")]
#[allow(clippy::too_many_arguments)] // the Python keyword arguments
pub fn trace_validate<'py>(
    py: Python<'py>,
    path: PathBuf,
    kernel: &str,
    lazy: bool,
    warmup: f64,
    lenient: bool,
    cpus: Option<Int>,
    dma_masks: Option<Vec<(String, Bound<'py, PyAny>)>>,
    groups: Option<Vec<Vec<String>>>,
    start_pfn: Int,
    aperture_bits: Int,
    reserved: Option<Vec<(Int, Int)>>,
    default_windows: bool,
    forcedac: bool,
    max_mismatches: Int,
) -> PyResult<Bound<'py, PyAny>> {
    let cpus: Option<usize> = opt(cpus.as_ref(), "cpus")?;
    let start_pfn: u64 = start_pfn.get("start_pfn")?;
    let aperture_bits: u32 = aperture_bits.get("aperture_bits")?;
    let max_mismatches: usize = max_mismatches.get("max_mismatches")?;
    let reserved = reserved
        .unwrap_or_default()
        .iter()
        .map(|(s, e)| {
            Ok((
                s.get::<u64>("reserved start")?,
                e.get::<u64>("reserved end")?,
            ))
        })
        .collect::<PyResult<Vec<(u64, u64)>>>()?;
    let mut domain = DomainConfig {
        start_pfn,
        aperture_bits,
        forcedac,
        ..DomainConfig::default()
    };
    if !default_windows {
        domain.reserved.clear();
    }
    for (start, end) in reserved {
        if start > end {
            return Err(PyErrWrap::from(iommulab::Error::from(ConfigError::Invalid {
                key: "reserved".into(),
                value: format!("({start:#x}, {end:#x})"),
                expected: "(start, end) inclusive byte addresses with start <= end".into(),
            }))
            .into());
        }
        domain.reserved.push(ByteRange { start, end });
    }
    let opts = ValidateOptions {
        kernel: kernel.to_owned(),
        lazy,
        warmup,
        lenient,
        domain,
        cpus,
        dma_masks: masks(dma_masks)?,
        groups: groups.unwrap_or_default(),
        max_mismatches,
        ..ValidateOptions::default()
    };
    let r = py.detach(|| validate(&path, &opts));
    to_py(py, &r.map_err(PyErrWrap::from)?)
}

/// A workload config from its name (`pseudo-scsi`, `netperf-send`, ...) or a dict with
/// `kind` (a string is always a name).
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

/// `iommulab trace generate`: records a built-in workload to `path` (format from the
/// extension) until at least `events` events are written. The operation that reaches the
/// limit is written whole and mappings still live are then unmapped, so the trace is closed
/// and may hold a few more events (the CLI's "N events (M workload operations)"). Returns
/// the number of events written.
#[pyfunction]
#[pyo3(signature = (workload, events, path, seed=None))]
pub fn trace_generate(
    py: Python<'_>,
    workload: &Bound<'_, PyAny>,
    events: Int,
    path: PathBuf,
    seed: Option<Int>,
) -> PyResult<u64> {
    let events: u64 = events.get("events")?;
    let seed: Option<u64> = opt(seed.as_ref(), "seed")?;
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
/// `opt`, `fifo`, `opt_batch` or `opt-batch`, `prefetch`, or a dict with `kind`), over the
/// page sequence (default) or the pinned map cache (`pinning=True`), at quotas
/// `0..=max_quota` (default: the trace's distinct pages) or the listed `quotas`: the
/// library's `mrc::hit_rate_curve`, as `iommulab mrc --json`.
#[pyfunction]
#[pyo3(signature = (trace, policy=None, pinning=false, max_quota=None, quotas=None, format="auto", lenient=false))]
#[allow(clippy::too_many_arguments)] // the Python keyword arguments
pub fn mrc<'py>(
    py: Python<'py>,
    trace: PathBuf,
    policy: Option<&Bound<'py, PyAny>>,
    pinning: bool,
    max_quota: Option<Int>,
    quotas: Option<Vec<Int>>,
    format: &str,
    lenient: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let max_quota: Option<usize> = opt(max_quota.as_ref(), "max_quota")?;
    let quotas: Option<Vec<usize>> = quotas
        .map(|q| q.iter().map(|i| i.get("quotas")).collect())
        .transpose()?;
    let policy: EvictionConfig = match policy {
        None => EvictionConfig::default(),
        Some(p) if p.is_instance_of::<PyString>() => {
            // The CLI spells it `opt-batch`, TOML `opt_batch`: accept both.
            let kind: String = p.extract::<String>()?.replace('-', "_");
            parse_toml(&format!("kind = {}", toml::Value::String(kind)))?
        }
        Some(p) => from_toml(p)?,
    };
    let quotas = match (max_quota, quotas) {
        (Some(_), Some(_)) => {
            return Err(PyErrWrap::from(ConfigError::Invalid {
                key: "max_quota".into(),
                value: "given with quotas".into(),
                expected: "either max_quota (every quota 0..=N) or quotas (a list), not both"
                    .into(),
            })
            .into());
        }
        (Some(n), None) => Some(Quotas::UpTo(n)),
        (None, Some(list)) => Some(Quotas::List(list)),
        (None, None) => None,
    };
    let req = CurveRequest {
        policy,
        pinning,
        quotas,
    };
    let format = trace_format(format)?;
    let curve = py.detach(|| -> Result<_, iommulab::Error> {
        Ok(trace_hit_rate_curve(open(&trace, format, lenient)?, &req)?)
    });
    to_py(py, &curve.map_err(PyErrWrap::from)?)
}
