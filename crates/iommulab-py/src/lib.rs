//! `iommulab._native`: the private native module under the `iommulab` Python package.
//! Wrappers only convert and delegate to the core; configs cross as dicts or
//! TOML through the core's serde schema; the GIL is released during runs.

mod args;
mod convert;
mod errors;
mod interrupt;
mod reproduce;
mod run;
mod trace;

use pyo3::prelude::*;

/// The version of the core library (and of this package).
#[pyfunction]
fn version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<run::PyRunResult>()?;
    m.add_function(wrap_pyfunction!(run::run, m)?)?;
    m.add_function(wrap_pyfunction!(run::bench, m)?)?;
    m.add_function(wrap_pyfunction!(run::replay, m)?)?;
    m.add_function(wrap_pyfunction!(run::compare, m)?)?;
    m.add_function(wrap_pyfunction!(run::expether, m)?)?;
    m.add_function(wrap_pyfunction!(run::iosup, m)?)?;
    m.add_function(wrap_pyfunction!(run::validate, m)?)?;
    m.add_function(wrap_pyfunction!(run::run_batch, m)?)?;
    m.add_function(wrap_pyfunction!(interrupt::cancel_runs, m)?)?;
    m.add_function(wrap_pyfunction!(trace::trace_stats, m)?)?;
    m.add_function(wrap_pyfunction!(trace::trace_check, m)?)?;
    m.add_function(wrap_pyfunction!(trace::trace_validate, m)?)?;
    m.add_function(wrap_pyfunction!(trace::trace_generate, m)?)?;
    m.add_function(wrap_pyfunction!(trace::mrc, m)?)?;
    m.add_function(wrap_pyfunction!(reproduce::reproduce, m)?)?;
    m.add_function(wrap_pyfunction!(version, m)?)?;
    errors::register(m)?;
    Ok(())
}
