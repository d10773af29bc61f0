//! Values crossing the boundary. Configs arrive as TOML strings or dicts and always go through
//! the core's TOML schema (`ExperimentConfig::from_toml`), so Python, the CLI and config files share
//! one schema and one set of error messages. Results leave as dicts via JSON.

use iommulab::experiment::{ConfigError, ExperimentConfig};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyList, PyString};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::errors::PyErrWrap;

/// A dict (or any JSON-able mapping) as a TOML document: `None` values are left out, as
/// TOML has no null and every optional key defaults to "absent".
fn dict_to_toml(obj: &Bound<'_, PyAny>) -> PyResult<String> {
    let mut value = dict_to_json(obj)?;
    strip_nulls(&mut value);
    json_to_toml(value)
}

pub fn dict_to_json(obj: &Bound<'_, PyAny>) -> PyResult<serde_json::Value> {
    let json: String = obj
        .py()
        .import("json")?
        .call_method1("dumps", (obj,))?
        .extract()?;
    Ok(serde_json::from_str(&json)
        .map_err(|e| PyErrWrap::from(ConfigError::Parse(e.to_string())))?)
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

/// A TOML string, a dict, or `None` (the defaults) as TOML text.
pub fn toml_text(obj: Option<&Bound<'_, PyAny>>) -> PyResult<String> {
    match obj {
        None => Ok(String::new()),
        Some(o) if o.is_none() => Ok(String::new()),
        Some(o) if o.is_instance_of::<PyString>() => o.extract(),
        Some(o) if o.is_instance_of::<PyDict>() => dict_to_toml(o),
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
        Err(_) => {
            let text = json_to_toml(value)?;
            Ok(ExperimentConfig::from_toml(&text).map_err(PyErrWrap::from)?)
        }
    }
}

fn json_to_toml(value: serde_json::Value) -> PyResult<String> {
    let table: toml::Value = toml::Value::try_from(value)
        .map_err(|e| PyErrWrap::from(ConfigError::Parse(e.to_string())))?;
    Ok(toml::to_string(&table).map_err(|e| PyErrWrap::from(ConfigError::Parse(e.to_string())))?)
}

/// Any serde value of the core's schema from a TOML string or dict.
pub fn from_toml<T: DeserializeOwned>(obj: &Bound<'_, PyAny>) -> PyResult<T> {
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
