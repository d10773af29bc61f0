//! Reproductions: `iommulab reproduce` from Python. Runs `iommulab_repro` with the GIL
//! released and, with `out`, writes the same files as the CLI through `iommulab_report`.

use std::ops::ControlFlow;
use std::path::PathBuf;
use std::sync::Mutex;

use iommulab::Progress;
use iommulab_report::{Cell, ReportError, Table};
use iommulab_repro::{ReproOptions, ReproResults, Reproduction};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::convert::to_py;
use crate::errors::{PyErrWrap, report_error, repro_error};

/// Why a run ended early, inside the GIL-free section.
enum Failure {
    Run(iommulab_repro::ReproError),
    Report(ReportError),
}

/// One reproduction's outcome before it becomes Python objects.
struct Done {
    results: ReproResults,
    tables: Vec<Table>,
    page: Option<PathBuf>,
}

/// Runs the reproductions `name` selects (`fujita2008`, `yassour2010`, `benyehuda2007`,
/// `iosup`, `expether`, `peleg2015` or `all`).
///
/// Returns `{"reproductions": [...], "index": path | None}`; each reproduction is a dict with
/// `name`, `title`, `quick`, `data` (everything the library returned: `results` is the
/// content of `results.json`, `paper` the published numbers), `tables` (`{table: {column:
/// [values]}}`, the CSV files' rows at full precision plus the page's other tables),
/// `report` (the markdown page when `out` is given) and `files` (written, relative to
/// `out`). `progress(name, step, done, total)` is called before each step with the GIL
/// held; an exception it raises stops the run and propagates (so does Ctrl-C).
#[pyfunction]
#[pyo3(signature = (name, quick=false, out=None, progress=None))]
pub fn reproduce<'py>(
    py: Python<'py>,
    name: &str,
    quick: bool,
    out: Option<PathBuf>,
    progress: Option<Py<PyAny>>,
) -> PyResult<Bound<'py, PyDict>> {
    let selected = Reproduction::select(name).map_err(PyErrWrap::from)?;
    let raised: Mutex<Option<PyErr>> = Mutex::new(None);
    let outcome = py.detach(|| -> Result<(Vec<Done>, Option<PathBuf>), Failure> {
        // The reproduction running, for the callback's `name` (a report counts steps only).
        let running = std::cell::Cell::new(None::<Reproduction>);
        // Every step checks for Ctrl-C and calls the Python callback, if any, under the GIL.
        let report = |p: &Progress<'_>| -> ControlFlow<()> {
            Python::attach(|py| {
                let called = py.check_signals().and_then(|()| match &progress {
                    Some(f) => f
                        .call1(
                            py,
                            (
                                running.get().map_or("", Reproduction::name),
                                p.step,
                                p.done,
                                p.total,
                            ),
                        )
                        .map(drop),
                    None => Ok(()),
                });
                match called {
                    Ok(()) => ControlFlow::Continue(()),
                    Err(e) => {
                        if let Ok(mut slot) = raised.lock() {
                            *slot = Some(e);
                        }
                        ControlFlow::Break(())
                    }
                }
            })
        };
        let opts = ReproOptions::new(quick).with_progress(&report);
        let mut done = Vec::new();
        for r in &selected {
            running.set(Some(*r));
            let results = r.run(&opts).map_err(Failure::Run)?;
            let page = match &out {
                Some(dir) => Some(iommulab_report::render(dir, &results).map_err(Failure::Report)?),
                None => None,
            };
            let tables = iommulab_report::tables(&results).map_err(Failure::Report)?;
            done.push(Done {
                results,
                tables,
                page,
            });
        }
        let index = match &out {
            Some(dir) if selected.len() > 1 => {
                let scores: Vec<_> = done
                    .iter()
                    .map(|d| iommulab_report::Score::of(&d.results))
                    .collect();
                Some(iommulab_report::write_index(dir, &scores, quick).map_err(Failure::Report)?)
            }
            _ => None,
        };
        Ok((done, index))
    });
    if let Some(e) = raised.lock().ok().and_then(|mut s| s.take()) {
        return Err(e);
    }
    let (done, index) = outcome.map_err(|f| match f {
        Failure::Run(e) => repro_error(e),
        Failure::Report(e) => report_error(&e),
    })?;
    let list = PyList::empty(py);
    for d in &done {
        let r = d.results.reproduction();
        let item = PyDict::new(py);
        item.set_item("name", r.name())?;
        item.set_item("title", r.title())?;
        item.set_item("quick", d.results.quick())?;
        item.set_item("data", to_py(py, &d.results)?)?;
        let tables = PyDict::new(py);
        for t in &d.tables {
            tables.set_item(t.name, table_to_py(py, t)?)?;
        }
        item.set_item("tables", tables)?;
        item.set_item("report", d.page.as_ref())?;
        let files: Vec<String> = if out.is_some() {
            iommulab_report::files(r).map_err(|e| report_error(&e))?
        } else {
            Vec::new()
        };
        item.set_item("files", files)?;
        list.append(item)?;
    }
    let result = PyDict::new(py);
    result.set_item("reproductions", list)?;
    result.set_item("index", index)?;
    Ok(result)
}

/// A table as `{column: [values]}` (ints, floats, strings; `None` where the CSV is empty).
fn table_to_py<'py>(py: Python<'py>, t: &Table) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for (i, name) in t.columns.iter().enumerate() {
        let values = PyList::empty(py);
        for c in t.column(i) {
            match c {
                Cell::Str(s) => values.append(s)?,
                Cell::Int(v) => values.append(v)?,
                Cell::Float(v, _) => values.append(v)?,
            }
        }
        d.set_item(*name, values)?;
    }
    Ok(d)
}
