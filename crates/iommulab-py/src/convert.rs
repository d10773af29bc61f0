//! Values crossing the boundary. Configs arrive as TOML strings or dicts and always go through
//! the core's TOML schema (`BenchConfig::from_toml`), so Python, the CLI and config files share
//! one schema and one set of error messages (style L12). Results leave as dicts via JSON.

use iommulab::experiment::{BenchConfig, ConfigError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::errors::PyErrWrap;

/// A dict (or any JSON-able mapping) as a TOML document: `None` values are left out, as
/// TOML has no null and every optional key defaults to "absent".
fn dict_to_toml(obj: &Bound<'_, PyAny>) -> PyResult<String> {
    let json: String = obj
        .py()
        .import("json")?
        .call_method1("dumps", (obj,))?
        .extract()?;
    let mut value: serde_json::Value = serde_json::from_str(&json)
        .map_err(|e| PyErrWrap::from(ConfigError::Parse(e.to_string())))?;
    strip_nulls(&mut value);
    let table: toml::Value = toml::Value::try_from(value)
        .map_err(|e| PyErrWrap::from(ConfigError::Parse(e.to_string())))?;
    Ok(toml::to_string(&table).map_err(|e| PyErrWrap::from(ConfigError::Parse(e.to_string())))?)
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
pub fn bench_config(obj: Option<&Bound<'_, PyAny>>) -> PyResult<BenchConfig> {
    let text = toml_text(obj)?;
    Ok(BenchConfig::from_toml(&text).map_err(PyErrWrap::from)?)
}

/// Any serde value of the core's schema from a TOML string or dict.
pub fn from_toml<T: DeserializeOwned>(obj: &Bound<'_, PyAny>) -> PyResult<T> {
    parse_toml(&toml_text(Some(obj))?)
}

/// Any serde value of the core's schema from TOML text.
pub fn parse_toml<T: DeserializeOwned>(text: &str) -> PyResult<T> {
    Ok(toml::from_str(text).map_err(|e| PyErrWrap::from(ConfigError::Parse(e.to_string())))?)
}

/// A serialisable value as a Python object (through JSON).
pub fn to_py<'py, T: Serialize>(py: Python<'py>, value: &T) -> PyResult<Bound<'py, PyAny>> {
    let json = serde_json::to_string(value)
        .map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))?;
    py.import("json")?.call_method1("loads", (json,))
}
