//! Values crossing the boundary. Configs arrive as TOML strings or dicts and always go through
//! the core's TOML schema (`ExperimentConfig::from_toml`), so Python, the CLI and config files share
//! one schema and one set of error messages. Results leave as dicts via JSON.

use iommulab::experiment::{ConfigError, ExperimentConfig};
use pyo3::prelude::*;
use pyo3::types::{
    PyBool, PyDict, PyFloat, PyInt, PyList, PyMapping, PySequence, PyString, PyTuple,
};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::errors::PyErrWrap;

/// A config value (a dict, as a rule) as JSON. Walked here rather than through `json.dumps`
/// so that an error names the key (`workload.seed`, `reserved[0]`), NaN and infinities are
/// refused (JSON cannot hold them, and TOML's would only fail later, without the key), ints
/// up to 2**64-1 stay exact (a `RunResult.seed` may be that large), and NumPy scalars and
/// paths (`os.PathLike`) are taken as their values.
pub fn dict_to_json(obj: &Bound<'_, PyAny>) -> PyResult<serde_json::Value> {
    py_to_json(obj, "")
}

/// The path of `key` under `parent`, as the core's messages write it.
fn child(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        key.to_owned()
    } else {
        format!("{parent}.{key}")
    }
}

fn invalid(key: &str, value: impl Into<String>, expected: &str) -> PyErr {
    PyErrWrap::from(ConfigError::Invalid {
        key: if key.is_empty() {
            "config".into()
        } else {
            key.into()
        },
        value: value.into(),
        expected: expected.into(),
    })
    .into()
}

fn py_to_json(obj: &Bound<'_, PyAny>, path: &str) -> PyResult<serde_json::Value> {
    use serde_json::Value as V;
    if obj.is_none() {
        return Ok(V::Null);
    }
    if let Ok(b) = obj.cast::<PyBool>() {
        return Ok(V::Bool(b.is_true()));
    }
    if obj.is_instance_of::<PyInt>() {
        if let Ok(i) = obj.extract::<i64>() {
            return Ok(V::from(i));
        }
        if let Ok(u) = obj.extract::<u64>() {
            return Ok(V::from(u));
        }
        return Err(invalid(
            path,
            obj.str()?.to_string(),
            "an integer from -2**63 to 2**64-1 (64 bits)",
        ));
    }
    if obj.is_instance_of::<PyFloat>() {
        let f: f64 = obj.extract()?;
        return serde_json::Number::from_f64(f)
            .map(V::Number)
            .ok_or_else(|| {
                // The spelling of TOML's `nan`/`inf` errors (`invalid value "NaN" for duration_s`).
                let shown = if f.is_nan() {
                    "NaN"
                } else if f > 0.0 {
                    "inf"
                } else {
                    "-inf"
                };
                invalid(path, shown, "a finite number")
            });
    }
    if let Ok(s) = obj.cast::<PyString>() {
        return Ok(V::String(s.to_str()?.to_owned()));
    }
    if let Ok(d) = obj.cast::<PyDict>() {
        return mapping_to_json(d.iter(), path);
    }
    if let Ok(l) = obj.cast::<PyList>() {
        return seq_to_json(l.iter(), path);
    }
    if let Ok(t) = obj.cast::<PyTuple>() {
        return seq_to_json(t.iter(), path);
    }
    let py = obj.py();
    let module: String = obj
        .get_type()
        .getattr("__module__")?
        .extract()
        .unwrap_or_default();
    if (module == "numpy" || module.starts_with("numpy.")) && obj.hasattr("tolist")? {
        // A NumPy scalar's `tolist()` is its Python value (as `item()`), an array's the list.
        return py_to_json(&obj.call_method0("tolist")?, path);
    }
    if obj.hasattr("__fspath__")? {
        let s = py.import("os")?.call_method1("fsdecode", (obj,))?;
        return py_to_json(&s, path);
    }
    if obj.is_instance_of::<pyo3::types::PyBytes>() {
        return Err(invalid(
            path,
            obj.repr()?.to_string(),
            "a str (bytes are not a config value)",
        ));
    }
    if let Ok(m) = obj.cast::<PyMapping>() {
        let items = m.items()?;
        return mapping_to_json(
            items
                .iter()
                .map(|kv| -> PyResult<_> { kv.extract::<(Bound<'_, PyAny>, Bound<'_, PyAny>)>() })
                .collect::<PyResult<Vec<_>>>()?
                .into_iter(),
            path,
        );
    }
    if let Ok(s) = obj.cast::<PySequence>() {
        return seq_to_json(
            s.try_iter()?.collect::<PyResult<Vec<_>>>()?.into_iter(),
            path,
        );
    }
    Err(invalid(
        path,
        obj.repr()?.to_string(),
        &format!(
            "a bool, int, float, str, list or dict (not {})",
            obj.get_type().name()?
        ),
    ))
}

fn mapping_to_json<'py>(
    items: impl Iterator<Item = (Bound<'py, PyAny>, Bound<'py, PyAny>)>,
    path: &str,
) -> PyResult<serde_json::Value> {
    let mut m = serde_json::Map::new();
    for (k, v) in items {
        let Ok(k) = k.cast::<PyString>() else {
            return Err(invalid(
                &child(path, &k.repr()?.to_string()),
                k.repr()?.to_string(),
                "a str key",
            ));
        };
        let k = k.to_str()?;
        m.insert(k.to_owned(), py_to_json(&v, &child(path, k))?);
    }
    Ok(serde_json::Value::Object(m))
}

fn seq_to_json<'py>(
    items: impl Iterator<Item = Bound<'py, PyAny>>,
    path: &str,
) -> PyResult<serde_json::Value> {
    items
        .enumerate()
        .map(|(i, x)| {
            let p = format!("{path}[{i}]");
            // TOML arrays have no null: a `None` in a list is an error here, with its key.
            if x.is_none() {
                return Err(invalid(&p, "None", "a value (a list cannot hold None)"));
            }
            py_to_json(&x, &p)
        })
        .collect::<PyResult<Vec<_>>>()
        .map(serde_json::Value::Array)
}

fn strip_nulls(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Object(m) => {
            m.retain(|_, x| !x.is_null());
            m.values_mut().for_each(strip_nulls);
        }
        serde_json::Value::Array(a) => a.iter_mut().for_each(strip_nulls),
        _ => {}
    }
}

/// A TOML string or `None` (the defaults) as TOML text; anything else but a dict is a
/// `TypeError`.
fn toml_text(obj: Option<&Bound<'_, PyAny>>) -> PyResult<String> {
    match obj {
        None => Ok(String::new()),
        Some(o) if o.is_none() => Ok(String::new()),
        Some(o) if o.is_instance_of::<PyString>() => o.extract(),
        Some(o) => Err(pyo3::exceptions::PyTypeError::new_err(format!(
            "a config is a dict or a TOML string, not {}",
            o.get_type().name()?
        ))),
    }
}

/// A bench configuration from a TOML string, a dict or `None`.
///
/// A dict is first deserialised straight from its JSON form (the same serde schema, and
/// the fast path of sweeps); if that fails it goes through TOML, so the error is exactly
/// the one the CLI gives for the same config in a file.
pub fn bench_config(obj: Option<&Bound<'_, PyAny>>) -> PyResult<ExperimentConfig> {
    if let Some(o) = obj.filter(|o| o.is_instance_of::<PyDict>()) {
        return config_from_json(dict_to_json(o)?);
    }
    let text = toml_text(obj)?;
    Ok(ExperimentConfig::from_toml(&text).map_err(PyErrWrap::from)?)
}

/// A bench configuration from the JSON form of a dict (see [`bench_config`]).
pub fn config_from_json(mut value: serde_json::Value) -> PyResult<ExperimentConfig> {
    strip_nulls(&mut value);
    match serde_json::from_value::<ExperimentConfig>(value.clone()) {
        Ok(cfg) => Ok(cfg),
        Err(_) => parse_value(value),
    }
}

/// A value of the core's schema from JSON, with the error the CLI gives for the same config
/// in a TOML file. An int of 2**63 or more has no TOML form (TOML's integers are i64, which
/// made the detour fail with "u64 value was too large" and no key): such a value is read
/// from the JSON itself, with the same `key `...`: ` message.
fn parse_value<T: DeserializeOwned>(mut value: serde_json::Value) -> PyResult<T> {
    strip_nulls(&mut value);
    let text = toml::Value::try_from(&value).and_then(|t| toml::to_string(&t));
    match text {
        Ok(text) => parse_toml(&text),
        Err(_) => serde_path_to_error::deserialize(&value).map_err(|e| {
            let path = e.path().to_string();
            let mut inner = e.into_inner().to_string();
            if inner == "u64 value was too large" {
                // The core reads a workload table through TOML, whose integers are i64.
                inner = "an integer above 2**63-1 (9223372036854775807), the largest this \
                         key takes (it is read as a TOML integer, which is signed 64-bit)"
                    .into();
            }
            let msg = if path.is_empty() || path == "." {
                inner
            } else {
                format!("key `{path}`: {inner}")
            };
            PyErrWrap::from(ConfigError::Parse(msg)).into()
        }),
    }
}

/// The top-level keys a config (a dict or TOML text) sets, `None` values left out. Call it
/// after the config parsed: a TOML string that does not parse sets no keys here.
pub fn config_keys(obj: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<String>> {
    Ok(match obj {
        Some(o) if o.is_instance_of::<PyDict>() => {
            let mut keys = Vec::new();
            for (k, v) in o.cast::<PyDict>()?.iter() {
                if !v.is_none() {
                    keys.push(k.str()?.to_string());
                }
            }
            keys
        }
        Some(o) if o.is_instance_of::<PyString>() => o
            .extract::<String>()?
            .parse::<toml::Table>()
            .map(|t| t.keys().cloned().collect())
            .unwrap_or_default(),
        _ => Vec::new(),
    })
}

/// Any serde value of the core's schema from a TOML string or dict.
pub fn from_toml<T: DeserializeOwned>(obj: &Bound<'_, PyAny>) -> PyResult<T> {
    if obj.is_instance_of::<PyDict>() {
        return parse_value(dict_to_json(obj)?);
    }
    parse_toml(&toml_text(Some(obj))?)
}

/// Any serde value of the core's schema from TOML text.
pub fn parse_toml<T: DeserializeOwned>(text: &str) -> PyResult<T> {
    Ok(iommulab::experiment::config::from_toml_with_path(text).map_err(PyErrWrap::from)?)
}

/// A serialisable value as a Python object (through `serde_json::Value`).
pub fn to_py<'py, T: Serialize>(py: Python<'py>, value: &T) -> PyResult<Bound<'py, PyAny>> {
    value_to_py(py, &to_json(value)?)
}

/// A serialisable value as a JSON value.
pub fn to_json<T: Serialize>(value: &T) -> PyResult<serde_json::Value> {
    serde_json::to_value(value).map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))
}

/// A JSON value as the Python object `json.loads` would give.
pub fn value_to_py<'py>(py: Python<'py>, v: &serde_json::Value) -> PyResult<Bound<'py, PyAny>> {
    use serde_json::Value as V;
    Ok(match v {
        V::Null => py.None().into_bound(py),
        V::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        V::Number(n) => match (n.as_u64(), n.as_i64()) {
            (Some(u), _) => u.into_pyobject(py)?.into_any(),
            (None, Some(i)) => i.into_pyobject(py)?.into_any(),
            _ => n.as_f64().unwrap_or(f64::NAN).into_pyobject(py)?.into_any(),
        },
        V::String(s) => PyString::new(py, s).into_any(),
        V::Array(a) => {
            let items = a
                .iter()
                .map(|x| value_to_py(py, x))
                .collect::<PyResult<Vec<_>>>()?;
            PyList::new(py, items)?.into_any()
        }
        V::Object(m) => {
            let d = PyDict::new(py);
            for (k, x) in m {
                d.set_item(k, value_to_py(py, x)?)?;
            }
            d.into_any()
        }
    })
}

/// A JSON object's leaves with dotted keys (`stats.iommu.walks`), in order.
pub fn flatten(v: &serde_json::Value) -> Vec<(String, &serde_json::Value)> {
    fn walk<'v>(
        out: &mut Vec<(String, &'v serde_json::Value)>,
        prefix: &str,
        v: &'v serde_json::Value,
    ) {
        match v {
            serde_json::Value::Object(m) => {
                for (k, x) in m {
                    let key = if prefix.is_empty() {
                        k.clone()
                    } else {
                        format!("{prefix}.{k}")
                    };
                    walk(out, &key, x);
                }
            }
            other => out.push((prefix.to_string(), other)),
        }
    }
    let mut out = Vec::new();
    walk(&mut out, "", v);
    out
}

/// The leaf values of `v` in [`flatten`]'s order, without building their keys (a batch of
/// results with the same shape needs the keys once).
pub fn flatten_values<'v>(v: &'v serde_json::Value, out: &mut Vec<&'v serde_json::Value>) {
    match v {
        serde_json::Value::Object(m) => m.values().for_each(|x| flatten_values(x, out)),
        other => out.push(other),
    }
}

/// A JSON object as a flat dict: nested objects become dotted keys (`stats.iommu.walks`).
pub fn flat_dict<'py>(py: Python<'py>, v: &serde_json::Value) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for (k, x) in flatten(v) {
        d.set_item(k, value_to_py(py, x)?)?;
    }
    Ok(d)
}
