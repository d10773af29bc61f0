//! The exception tree: `IommulabError` and one subclass per kind of core error.
//! Messages are the CLI's: the error and its causes joined by `": "` (anyhow's `{e:#}`).

use std::io::ErrorKind;

use pyo3::exceptions::{
    PyException, PyFileExistsError, PyFileNotFoundError, PyIsADirectoryError, PyKeyboardInterrupt,
    PyOSError, PyPermissionError,
};
use pyo3::prelude::*;
use pyo3::{PyErr, create_exception};

create_exception!(
    iommulab,
    IommulabError,
    PyException,
    "Base class of every iommulab error."
);
create_exception!(
    iommulab,
    ConfigError,
    IommulabError,
    "A configuration key or value the schema does not allow (the message names the key and the allowed values)."
);
create_exception!(
    iommulab,
    TraceError,
    IommulabError,
    "A trace that cannot be read or written."
);
create_exception!(
    iommulab,
    DmaError,
    IommulabError,
    "The DMA layer refused an operation."
);
create_exception!(
    iommulab,
    IovaError,
    IommulabError,
    "An IOVA allocator error."
);
create_exception!(
    iommulab,
    VirtError,
    IommulabError,
    "A map-cache or eviction-policy error."
);
create_exception!(
    iommulab,
    MapError,
    IommulabError,
    "An I/O page-table error."
);

/// A core error on its way to Python (the orphan rule forbids `From<iommulab::Error> for PyErr`).
#[derive(Debug)]
pub struct PyErrWrap(pub iommulab::Error);

impl<E: Into<iommulab::Error>> From<E> for PyErrWrap {
    fn from(e: E) -> Self {
        PyErrWrap(e.into())
    }
}

/// The error and its causes, as the CLI prints them (`{e:#}` of anyhow).
pub fn message(e: &(dyn std::error::Error + 'static)) -> String {
    let mut msg = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        msg.push_str(": ");
        msg.push_str(&c.to_string());
        cause = c.source();
    }
    msg
}

/// The kind of the innermost I/O error of a chain that is the file system's: an error of the
/// OS, or one of the kinds it has. A decoder's error (a truncated `.gz` or `.zst` is
/// `UnexpectedEof` or `InvalidData` with no OS error) is the trace's content, not an I/O
/// failure: `None`, so it becomes `TraceError` like a truncated `.iot`.
fn io_kind(e: &(dyn std::error::Error + 'static)) -> Option<ErrorKind> {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(c) = cur {
        if let Some(io) = c.downcast_ref::<std::io::Error>() {
            let fs_kind = matches!(
                io.kind(),
                ErrorKind::NotFound
                    | ErrorKind::PermissionDenied
                    | ErrorKind::AlreadyExists
                    | ErrorKind::IsADirectory
            );
            return (fs_kind || io.raw_os_error().is_some()).then(|| io.kind());
        }
        cur = c.source();
    }
    None
}

impl From<PyErrWrap> for PyErr {
    fn from(w: PyErrWrap) -> PyErr {
        use iommulab::Error as E;
        let e = &w.0;
        let msg = message(e);
        // I/O errors become Python's own OSError subclasses (a missing trace is a
        // `FileNotFoundError`, as for `open()`).
        if let Some(kind) = io_kind(e) {
            return os_error(kind, msg);
        }
        match e {
            E::Config(_) | E::Magazine(_) | E::Space(_) => ConfigError::new_err(msg),
            E::Dma(_) => DmaError::new_err(msg),
            E::Iova(_) => IovaError::new_err(msg),
            E::Map(_) => MapError::new_err(msg),
            // A trace past the streamed curve's 32-bit numbering is a trace the call cannot take.
            E::Trace(_) | E::Curve(_) => TraceError::new_err(msg),
            E::Virt(_) | E::Guest(_) => VirtError::new_err(msg),
            // A Xen PV or timing model failure is a model bug, not a user error.
            E::Xen(_) | E::Timing(_) => IommulabError::new_err(msg),
            // A run stopped by `Interrupt` re-raises the signal's own exception; one stopped
            // by `cancel_runs()` (a sweep's Ctrl-C, seen by another thread) lands here.
            E::Cancelled => PyKeyboardInterrupt::new_err(msg),
        }
    }
}

/// A reproduction's error: the library's keeps its exception class; a cancelled
/// reproduction re-raises the callback's own exception (see `reproduce`), and a failed
/// self-check or a refused hypercall, like a Xen PV model failure, is a model bug, not a
/// user error.
pub fn repro_error(e: iommulab_repro::ReproError) -> PyErr {
    match e {
        iommulab_repro::ReproError::Model(e) => PyErrWrap(e).into(),
        e => IommulabError::new_err(message(&e)),
    }
}

/// The `OSError` subclass Python itself raises for `kind`.
fn os_error(kind: ErrorKind, msg: String) -> PyErr {
    match kind {
        ErrorKind::NotFound => PyFileNotFoundError::new_err(msg),
        ErrorKind::PermissionDenied => PyPermissionError::new_err(msg),
        ErrorKind::AlreadyExists => PyFileExistsError::new_err(msg),
        ErrorKind::IsADirectory => PyIsADirectoryError::new_err(msg),
        _ => PyOSError::new_err(msg),
    }
}

/// A report that could not be written: an `OSError` for file errors, else `IommulabError`.
pub fn report_error(e: &iommulab_report::ReportError) -> PyErr {
    let msg = message(e);
    match io_kind(e) {
        Some(kind) => os_error(kind, msg),
        None => IommulabError::new_err(msg),
    }
}

/// Registers the exception classes in the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("IommulabError", py.get_type::<IommulabError>())?;
    m.add("ConfigError", py.get_type::<ConfigError>())?;
    m.add("TraceError", py.get_type::<TraceError>())?;
    m.add("DmaError", py.get_type::<DmaError>())?;
    m.add("IovaError", py.get_type::<IovaError>())?;
    m.add("VirtError", py.get_type::<VirtError>())?;
    m.add("MapError", py.get_type::<MapError>())?;
    Ok(())
}
