//! Runs: `run`, `bench` and `replay`, mirroring `iommulab bench` and `iommulab replay` by
//! calling the same library functions. The GIL is released while the core runs.

use std::path::PathBuf;

use iommulab::experiment::cores::{MAX_CPUS, MachineConfig};
use iommulab::experiment::{
    ConfigError, ExperimentConfig, NamedConfig, RunResult, Series, run_bench, run_series,
};
use iommulab::trace::{TraceFormat, open};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::args::{Int, opt};
use crate::convert::{
    bench_config, config_from_json, config_keys, dict_to_json, flat_dict, flatten, flatten_values,
    to_json, value_to_py,
};
use crate::errors::PyErrWrap;
use crate::interrupt::Interrupt;

/// What one run measured (the CLI's `--json` object).
#[pyclass(module = "iommulab", name = "RunResult", frozen)]
#[derive(Debug, Clone)]
pub struct PyRunResult(pub RunResult);

#[pymethods]
impl PyRunResult {
    /// Every field, as the CLI's `--json` prints it; with `flat=True`, nested `stats`
    /// become dotted keys (`stats.iommu.iotlb_hits`), one level, as DataFrame columns.
    #[pyo3(signature = (flat=false))]
    fn to_dict<'py>(&self, py: Python<'py>, flat: bool) -> PyResult<Bound<'py, PyDict>> {
        let v = to_json(&self.0)?;
        if flat {
            flat_dict(py, &v)
        } else {
            Ok(value_to_py(py, &v)?.cast_into::<PyDict>()?)
        }
    }
    /// Configuration label (`default`, `strict`, ..., `custom`).
    #[getter]
    fn config(&self) -> &str {
        &self.0.config
    }
    /// Allocator name.
    #[getter]
    fn allocator(&self) -> &str {
        &self.0.allocator
    }
    /// Flush policy name.
    #[getter]
    fn flush(&self) -> &str {
        &self.0.flush
    }
    /// Cost preset name.
    #[getter]
    fn cost_preset(&self) -> &str {
        &self.0.cost_preset
    }
    /// Workload seed.
    #[getter]
    fn seed(&self) -> u64 {
        self.0.seed
    }
    /// I/Os completed.
    #[getter]
    fn ops(&self) -> u64 {
        self.0.ops
    }
    /// I/Os per second of the modeled machine.
    #[getter]
    fn iops(&self) -> f64 {
        self.0.iops
    }
    /// `iops / iops(disabled)` when a disabled run is in the same batch.
    #[getter]
    fn relative_to_disabled(&self) -> Option<f64> {
        self.0.relative_to_disabled
    }
    /// Measured wall time of the run loop per I/O, in ns.
    #[getter]
    fn software_ns_per_op(&self) -> f64 {
        self.0.software_ns_per_op
    }
    /// Modeled time per I/O, in ns.
    #[getter]
    fn modeled_ns_per_op(&self) -> f64 {
        self.0.modeled_ns_per_op
    }
    /// IOTLB invalidation commands.
    #[getter]
    fn iotlb_invalidations(&self) -> u64 {
        self.0.iotlb_invalidations
    }
    /// Flush rounds the policy ran.
    #[getter]
    fn iotlb_flushes(&self) -> u64 {
        self.0.iotlb_flushes
    }
    /// Device accesses that succeeded through a mapping already unmapped.
    #[getter]
    fn stale_accesses(&self) -> u64 {
        self.0.stale_accesses
    }
    /// IOMMU faults recorded.
    #[getter]
    fn faults(&self) -> u64 {
        self.0.faults
    }
    /// Wall time of the run loop, in seconds.
    #[getter]
    fn wall_seconds(&self) -> f64 {
        self.0.wall_seconds
    }
    /// Modeled time of the run, in seconds.
    #[getter]
    fn modeled_seconds(&self) -> f64 {
        self.0.modeled_seconds
    }
    /// What the many-core model measured (`[machine]` or `cpus=`): throughput, CPU and
    /// waiting cycles per I/O, each shared lock's waits, holds and queue, the invalidation
    /// queue's depth; `None` for a run without it.
    #[getter]
    fn cores<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        self.0
            .cores
            .as_ref()
            .map(|c| Ok(value_to_py(py, &to_json(c)?)?.cast_into::<PyDict>()?))
            .transpose()
    }
    /// Any other field of [`Self::to_dict`] (`stats`, `peak_metadata_bytes`, ...).
    fn __getattr__<'py>(&self, py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyAny>> {
        let d = self.to_dict(py, false)?;
        d.get_item(name)?.ok_or_else(|| {
            pyo3::exceptions::PyAttributeError::new_err(format!(
                "'RunResult' object has no attribute '{name}'"
            ))
        })
    }
    /// A result from its JSON form (`json.dumps(r.to_dict())`): pickle's and `copy`'s way
    /// back (see `__reduce__`).
    #[staticmethod]
    fn from_json(py: Python<'_>, text: &str) -> PyResult<Self> {
        // Parsed by Python's `json`, whose floats round-trip exactly (serde_json's default
        // parser may be one ulp off, and a copy must equal its original).
        let value = dict_to_json(&py.import("json")?.call_method1("loads", (text,))?)?;
        serde_path_to_error::deserialize(&value)
            .map(PyRunResult)
            .map_err(|e| {
                pyo3::exceptions::PyValueError::new_err(format!(
                    "not a RunResult's JSON: key `{}`: {}",
                    e.path(),
                    e.inner()
                ))
            })
    }
    /// Pickling (and so `copy.deepcopy` and multiprocessing) rebuilds the result from its
    /// JSON form with `RunResult.from_json`.
    fn __reduce__<'py>(&self, py: Python<'py>) -> PyResult<(Bound<'py, PyAny>, (String,))> {
        let text = serde_json::to_string(&self.0)
            .map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))?;
        Ok((py.get_type::<Self>().getattr("from_json")?, (text,)))
    }
    /// Two results are equal when every field of `to_dict()` is.
    fn __eq__(&self, other: PyRef<'_, Self>) -> PyResult<bool> {
        // As the dicts compare (a NaN is None there, so a result equals itself).
        Ok(to_json(&self.0)? == to_json(&other.0)?)
    }
    fn __repr__(&self) -> String {
        format!(
            "RunResult(config={:?}, ops={}, iops={:.1}, modeled_ns_per_op={:.1})",
            self.0.config, self.0.ops, self.0.iops, self.0.modeled_ns_per_op
        )
    }
}

/// One run of the experiment a config describes (dict, TOML string, or `None` for the
/// defaults): any workload, system and hardware, as `iommulab run FILE`.
///
/// `cpus` (1 to 1024) runs the many-core model on that many CPUs, as `[machine] cpus`
/// does, and, for the pseudo driver, one stream per CPU (its `cpus`, and at least as many
/// I/Os in flight); the result's `cores` holds what the model measured.
#[pyfunction]
#[pyo3(
    signature = (config=None, cpus=None),
    text_signature = "(config=None, cpus=None)"
)]
pub fn run(
    py: Python<'_>,
    config: Option<&Bound<'_, PyAny>>,
    cpus: Option<Int>,
) -> PyResult<PyRunResult> {
    let mut cfg = bench_config(config)?;
    if let Some(cpus) = cpus {
        let n: u16 = cpus.range("cpus", 1, u128::from(MAX_CPUS))?;
        let machine = cfg.machine.get_or_insert_with(MachineConfig::default);
        machine.cpus = n;
        if let Some(w) = cfg.pseudo_scsi_mut() {
            w.cpus = n;
            w.outstanding = w.outstanding.max(u32::from(n));
        }
    }
    let stop = Interrupt::new();
    let r = py.detach(|| run_bench(&cfg, &mut |_| stop.check()));
    Ok(PyRunResult(r.map_err(|e| stop.error(e))?))
}

/// A bench series that Ctrl-C stops: between runs, and inside one.
struct Stoppable<'a>(&'a Interrupt);

impl Series for Stoppable<'_> {
    type Error = iommulab::Error;

    fn start(&mut self, _cfg: &mut ExperimentConfig) -> Result<(), iommulab::Error> {
        self.0.between_runs()
    }

    fn progress(&mut self, _: &iommulab::Progress<'_>) -> std::ops::ControlFlow<()> {
        self.0.check()
    }
}

/// `iommulab bench`: every named configuration in `configs` (default: all six), `repeats`
/// (1 to 100) times with seeds `seed..seed+repeats`, with `relative_to_disabled` filled. A
/// `base` that sets `configuration` or `mechanisms` runs that one configuration, as
/// `--config-file` does, unless `configs` names others.
#[pyfunction]
#[pyo3(
    signature = (configs=None, ops=None, seed=None, repeats=Int::of(1), base=None),
    text_signature = "(configs=None, ops=None, seed=None, repeats=1, base=None)"
)]
pub fn bench(
    py: Python<'_>,
    configs: Option<Vec<String>>,
    ops: Option<Int>,
    seed: Option<Int>,
    repeats: Int,
    base: Option<&Bound<'_, PyAny>>,
) -> PyResult<Vec<PyRunResult>> {
    // The CLI's ranges: `--ops` at least 1, `--repeats` 1..=100.
    let ops: Option<u64> = ops
        .map(|o| o.range("ops", 1, u64::MAX.into()))
        .transpose()?;
    let seed: Option<u64> = opt(seed.as_ref(), "seed")?;
    let repeats: u32 = repeats.range("repeats", 1, 100)?;
    let given = config_keys(base)?;
    let mut base_cfg = bench_config(base)?;
    let base = &mut base_cfg;
    if let Some(ops) = ops {
        let Some(w) = base.pseudo_scsi_mut() else {
            return Err(pyo3::exceptions::PyValueError::new_err(
                "ops sets the pseudo driver's I/O count, but the base's workload is another one",
            ));
        };
        w.ios = ops;
        base.duration_s = None;
    }
    if let iommulab::experiment::WorkloadSpec::Generator(w) = &mut base.workload {
        if let Some(s) = seed {
            w.set_seed(s);
        }
        // Seeds seed..seed+repeats must be distinct 64-bit values, not wrap to 0.
        let first = w.seed();
        if first.checked_add(u64::from(repeats - 1)).is_none() {
            return Err(PyErrWrap::from(ConfigError::Invalid {
                key: if seed.is_some() {
                    "seed"
                } else {
                    "workload.seed"
                }
                .into(),
                value: first.to_string(),
                expected: format!(
                    "at most {} with repeats={repeats} (seeds seed..seed+repeats fit in 64 bits)",
                    u64::MAX - u64::from(repeats - 1)
                ),
            })
            .into());
        }
    }
    let names: Vec<NamedConfig> = match configs {
        None if given
            .iter()
            .any(|k| k == "configuration" || k == "mechanisms") =>
        {
            vec![base.configuration]
        }
        None => NamedConfig::ALL.to_vec(),
        Some(cs) if cs.is_empty() => {
            return Err(PyErrWrap::from(ConfigError::Invalid {
                key: "configs".into(),
                value: "[]".into(),
                expected: format!(
                    "at least one of {} (or None for all six)",
                    NamedConfig::ALL.map(|c| c.name()).join(", ")
                ),
            })
            .into());
        }
        Some(cs) => {
            base.mechanisms = None;
            cs.iter()
                .map(|c| NamedConfig::parse(c))
                .collect::<Result<_, _>>()
                .map_err(PyErrWrap::from)?
        }
    };
    base.validate().map_err(PyErrWrap::from)?;
    let base = &*base;
    let stop = Interrupt::new();
    let results = py.detach(|| run_series(base, &names, repeats, &mut Stoppable(&stop)));
    Ok(results
        .map_err(|e| stop.error(e))?
        .into_iter()
        .map(PyRunResult)
        .collect())
}

/// The format name of a trace, as the CLI's `--format`.
pub fn trace_format(name: &str) -> PyResult<TraceFormat> {
    Ok(match name {
        "auto" => TraceFormat::Auto,
        "ftrace" => TraceFormat::Ftrace,
        "csv" => TraceFormat::Csv,
        "native" => TraceFormat::Native,
        other => {
            return Err(PyErrWrap::from(iommulab::experiment::ConfigError::Invalid {
                key: "format".into(),
                value: other.into(),
                expected: "one of auto, ftrace, csv, native".into(),
            })
            .into());
        }
    })
}

/// `iommulab replay`: a trace through one configuration, with the CLI's defaults. Without a
/// config, as `iommulab replay TRACE`: the `linux-lazy` configuration on the `modern` cost
/// preset (the default preset of every entry point). A config (dict or TOML) is `--config-file`'s: its keys, and the schema's defaults
/// for the rest (configuration `default`, cost `modern`). The trace is the workload: a
/// config with `workload` or `duration_s` is refused.
#[pyfunction]
#[pyo3(signature = (trace, config=None, format="auto", lenient=false))]
pub fn replay(
    py: Python<'_>,
    trace: PathBuf,
    config: Option<&Bound<'_, PyAny>>,
    format: &str,
    lenient: bool,
) -> PyResult<PyRunResult> {
    let cfg = match config {
        Some(c) if !c.is_none() => bench_config(Some(c))?,
        _ => ExperimentConfig {
            configuration: NamedConfig::LinuxLazy,
            ..ExperimentConfig::default()
        },
    };
    // The replay reads the trace to its end and ignores these (the CLI's `--config-file` too):
    // refused rather than silently dropped.
    if let Some(k) = config_keys(config)?
        .into_iter()
        .find(|k| k == "workload" || k == "duration_s")
    {
        return Err(PyErrWrap::from(ConfigError::Invalid {
            key: k.clone(),
            value: "given".into(),
            expected: format!(
                "no `{k}` in a replay's config: the trace is the workload and is replayed to its end \
                 (run() takes a `workload` with `trace = PATH`)"
            ),
        })
        .into());
    }
    cfg.validate().map_err(PyErrWrap::from)?;
    let format = trace_format(format)?;
    let stop = Interrupt::new();
    let r = py.detach(|| -> Result<RunResult, iommulab::Error> {
        let src = open(&trace, format, lenient)?;
        Ok(iommulab::experiment::replay_trace(&cfg, src, &mut |_| stop.check())?.0)
    });
    Ok(PyRunResult(r.map_err(|e| stop.error(e))?))
}

/// `iommulab expether --json`, as a dict: S4.4's timing model (an SR-IOV NIC shared by
/// hosts over ExpEther) with `config`, a dict or TOML of the run (`direction`, `streams`,
/// `qos`, `duration_s`, a `params` table of any subset of the model's parameters; the rest
/// keep their estimates); `None` runs every default.
#[pyfunction]
#[pyo3(signature = (config=None))]
pub fn expether<'py>(
    py: Python<'py>,
    config: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let run: iommulab::pcie::timing::ExpEtherRun = match config {
        Some(c) if !c.is_none() => crate::convert::from_toml(c)?,
        _ => iommulab::pcie::timing::ExpEtherRun::default(),
    };
    let report = py
        .detach(|| iommulab::experiment::expether::run(&run))
        .map_err(PyErrWrap::from)?;
    crate::convert::to_py(py, &report)
}

/// `iommulab iosup --json`, as a dict: S3.5's three groups (no pool, pool from boot, pool
/// when stable) with `config`, a dict or TOML of the run (`churn`, `shrink`,
/// `stable_within`, `setup`; anything left out keeps the reproduction's value); `None`
/// runs the reproduction's workload. The GIL is released while it runs.
#[pyfunction]
#[pyo3(signature = (config=None))]
pub fn iosup<'py>(
    py: Python<'py>,
    config: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let run: iommulab_repro::iosup::IosupRun = match config {
        Some(c) if !c.is_none() => crate::convert::from_toml(c)?,
        _ => iommulab_repro::iosup::IosupRun::default(),
    };
    use iommulab_repro::ReproError;
    let stop = Interrupt::new();
    let r = py.detach(|| {
        iommulab_repro::iosup::run_groups(&run, &mut |_, _| match stop.check() {
            std::ops::ControlFlow::Continue(()) => Ok(()),
            std::ops::ControlFlow::Break(()) => Err(ReproError::Cancelled),
        })
    });
    let r = r.map_err(|e| match e {
        ReproError::Cancelled => stop.error(iommulab::Error::Cancelled),
        ReproError::Model(e) => stop.error(e),
        e => crate::errors::repro_error(e),
    })?;
    crate::convert::to_py(py, &r)
}

/// `iommulab compare --json`, as a dict: Linux strict vs lazy (and `configs`, and `config`'s
/// own configuration when given) on a trace, per device and in total. `config` (a dict or
/// TOML) is `--config-file`'s: its `[hardware]` prices every configuration.
#[pyfunction]
#[pyo3(signature = (path, configs=None, device=None, config=None, format="auto", lenient=false))]
#[allow(clippy::too_many_arguments)] // the Python keyword arguments
pub fn compare<'py>(
    py: Python<'py>,
    path: PathBuf,
    configs: Option<Vec<String>>,
    device: Option<String>,
    config: Option<&Bound<'py, PyAny>>,
    format: &str,
    lenient: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let file = match config {
        Some(c) if !c.is_none() => Some(bench_config(Some(c))?),
        _ => None,
    };
    let asked = configs
        .unwrap_or_default()
        .iter()
        .map(|c| NamedConfig::parse(c))
        .collect::<Result<Vec<_>, _>>()
        .map_err(PyErrWrap::from)?;
    let cfgs = iommulab::experiment::compare::configs_for(file, &asked).map_err(PyErrWrap::from)?;
    let format = trace_format(format)?;
    let stop = Interrupt::new();
    let r = py.detach(|| {
        iommulab::experiment::compare::compare_trace(
            &cfgs,
            || Ok(open(&path, format, lenient)?),
            device.as_deref(),
            &mut |_| stop.check(),
        )
    });
    crate::convert::to_py(py, &r.map_err(|e| stop.error(e))?)
}

/// Parses and validates a config without running it (raises `ConfigError`).
#[pyfunction]
#[pyo3(signature = (config=None))]
pub fn validate(config: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
    Ok(bench_config(config)?.validate().map_err(PyErrWrap::from)?)
}

/// Runs a list of configs (dicts) as one batch and returns the results as columns: a dict of
/// dotted result keys (as `RunResult.to_dict(flat=True)`) to one entry per config each. A
/// column whose values are all integers that fit an `i64`, all numbers, or all booleans comes
/// as `(dtype, bytes)` — `("<i8" | "<f8" | "|b1", little-endian values)`, for `numpy.frombuffer`
/// (building a DataFrame from them skips pandas' per-value type inference, most of a sweep's
/// Python-side cost); any other column as a list.
/// Every config is parsed and validated before any runs; the GIL is released for the runs.
/// With `validate_only`, returns `{}` after the checks.
#[pyfunction]
#[pyo3(signature = (configs, validate_only=false))]
pub fn run_batch<'py>(
    py: Python<'py>,
    configs: &Bound<'py, PyList>,
    validate_only: bool,
) -> PyResult<Bound<'py, PyDict>> {
    let cfgs = configs
        .iter()
        .enumerate()
        .map(|(i, c)| {
            if !c.is_instance_of::<PyDict>() {
                return Err(pyo3::exceptions::PyTypeError::new_err(format!(
                    "configs[{i}] is a {}, not a dict: run_batch takes config dicts \
                     (run() also takes TOML text)",
                    c.get_type().name()?
                )));
            }
            let cfg = config_from_json(dict_to_json(&c)?)?;
            cfg.validate().map_err(PyErrWrap::from)?;
            Ok(cfg)
        })
        .collect::<PyResult<Vec<ExperimentConfig>>>()?;
    let columns = PyDict::new(py);
    if validate_only || cfgs.is_empty() {
        return Ok(columns);
    }
    let stop = Interrupt::new();
    let results = py
        .detach(|| {
            cfgs.iter()
                .map(|c| {
                    stop.between_runs()?;
                    let r = run_bench(c, &mut |_| stop.check())?;
                    serde_json::to_value(&r)
                        .map_err(|e| iommulab::experiment::ConfigError::Parse(e.to_string()).into())
                })
                .collect::<Result<Vec<serde_json::Value>, iommulab::Error>>()
        })
        .map_err(|e| stop.error(e))?;
    // The optional parts (a guest's counters and its map cache, a trace's replay report)
    // change a result's columns; a batch of one shape takes the fast path (keys built once),
    // a mixed one (bare metal and guest, say) the union of the columns, null where absent.
    let shape = |v: &serde_json::Value| {
        (
            v.get("guest").is_some(),
            v.get("xen_pv").is_some(),
            v.get("replay").is_some(),
            v.pointer("/guest/cache")
                .is_some_and(serde_json::Value::is_object),
        )
    };
    let null = serde_json::Value::Null;
    let (keys, cols) = if results.iter().all(|r| shape(r) == shape(&results[0])) {
        let keys: Vec<String> = flatten(&results[0]).into_iter().map(|(k, _)| k).collect();
        let mut cols: Vec<Vec<&serde_json::Value>> =
            vec![Vec::with_capacity(results.len()); keys.len()];
        let mut leaves = Vec::with_capacity(keys.len());
        for r in &results {
            leaves.clear();
            flatten_values(r, &mut leaves);
            for (col, v) in cols.iter_mut().zip(&leaves) {
                col.push(v);
            }
        }
        (keys, cols)
    } else {
        let flat: Vec<Vec<(String, &serde_json::Value)>> = results.iter().map(flatten).collect();
        let mut keys: Vec<String> = Vec::new();
        let mut index = std::collections::HashMap::new();
        for (k, _) in flat.iter().flatten() {
            if !index.contains_key(k) {
                index.insert(k.clone(), keys.len());
                keys.push(k.clone());
            }
        }
        let mut cols: Vec<Vec<&serde_json::Value>> = vec![vec![&null; results.len()]; keys.len()];
        for (i, r) in flat.iter().enumerate() {
            for (k, v) in r {
                cols[index[k]][i] = v;
            }
        }
        (keys, cols)
    };
    for (k, col) in keys.into_iter().zip(cols) {
        columns.set_item(k, column_to_py(py, &col)?)?;
    }
    Ok(columns)
}

/// One result column: `(dtype, bytes)` when every value is an `i64`, a number or a boolean,
/// else a list (see [`run_batch`]).
fn column_to_py<'py>(py: Python<'py>, col: &[&serde_json::Value]) -> PyResult<Bound<'py, PyAny>> {
    use pyo3::types::{PyBytes, PyTuple};
    let typed = |dtype: &str, bytes: Vec<u8>| -> PyResult<Bound<'py, PyAny>> {
        let items = [
            dtype.into_pyobject(py)?.into_any(),
            PyBytes::new(py, &bytes).into_any(),
        ];
        Ok(PyTuple::new(py, items)?.into_any())
    };
    if let Some(ints) = col.iter().map(|v| v.as_i64()).collect::<Option<Vec<i64>>>() {
        return typed("<i8", ints.iter().flat_map(|i| i.to_le_bytes()).collect());
    }
    // Integers beyond i64 would lose precision as floats: those stay Python ints.
    let float = |v: &serde_json::Value| v.as_f64().filter(|_| !v.is_u64() && !v.is_i64());
    if let Some(fs) = col
        .iter()
        .map(|v| float(v).or_else(|| v.as_i64().map(|i| i as f64)))
        .collect::<Option<Vec<f64>>>()
    {
        return typed("<f8", fs.iter().flat_map(|f| f.to_le_bytes()).collect());
    }
    if let Some(bs) = col
        .iter()
        .map(|v| v.as_bool())
        .collect::<Option<Vec<bool>>>()
    {
        return typed("|b1", bs.iter().map(|&b| u8::from(b)).collect());
    }
    let items = col
        .iter()
        .map(|v| value_to_py(py, v))
        .collect::<PyResult<Vec<_>>>()?;
    Ok(PyList::new(py, items)?.into_any())
}
