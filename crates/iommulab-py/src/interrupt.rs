//! Ctrl-C during a run. A run releases the GIL, so CPython's SIGINT handler only sets a flag
//! that nothing reads until the run returns. Each run's progress callback (every
//! `PROGRESS_EVERY` I/Os, and between the runs of a batch) therefore takes the GIL and asks
//! for pending signals; a `KeyboardInterrupt` stops the run and is raised as itself.
//!
//! Signals reach the main thread only, so the runs of a sweep's worker threads never see
//! them: the main thread, interrupted while it waits, calls [`cancel_runs`], which stops
//! every run in flight at its next report.

use std::ops::ControlFlow;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use pyo3::prelude::*;

use crate::errors::PyErrWrap;

/// Bumped by [`cancel_runs`]: a run started in an earlier epoch stops.
static EPOCH: AtomicU64 = AtomicU64::new(0);

/// Stops every run in flight (in any thread) at its next progress report, with
/// `KeyboardInterrupt`. A sweep calls it when Ctrl-C interrupts its wait for worker threads.
#[pyfunction]
pub fn cancel_runs() {
    EPOCH.fetch_add(1, Ordering::SeqCst);
}

/// The watch over one call's runs.
pub struct Interrupt {
    epoch: u64,
    /// The exception a signal handler raised, to be raised again once the run is back.
    raised: Mutex<Option<PyErr>>,
}

impl Interrupt {
    /// A watch for runs starting now.
    pub fn new() -> Self {
        Interrupt {
            epoch: EPOCH.load(Ordering::SeqCst),
            raised: Mutex::new(None),
        }
    }

    /// Whether the runs go on: `Break` after [`cancel_runs`] or when a signal handler
    /// raised (Ctrl-C), whose exception is kept for [`Interrupt::error`].
    pub fn check(&self) -> ControlFlow<()> {
        if EPOCH.load(Ordering::Relaxed) != self.epoch {
            return ControlFlow::Break(());
        }
        Python::attach(|py| match py.check_signals() {
            Ok(()) => ControlFlow::Continue(()),
            Err(e) => {
                if let Ok(mut slot) = self.raised.lock() {
                    *slot = Some(e);
                }
                ControlFlow::Break(())
            }
        })
    }

    /// [`Interrupt::check`] between two runs, as the library's error.
    pub fn between_runs(&self) -> Result<(), iommulab::Error> {
        match self.check() {
            ControlFlow::Continue(()) => Ok(()),
            ControlFlow::Break(()) => Err(iommulab::Error::Cancelled),
        }
    }

    /// The exception for a run's error: the signal handler's own when the run was stopped
    /// by one (`KeyboardInterrupt`, or whatever a custom handler raised).
    pub fn error(&self, e: iommulab::Error) -> PyErr {
        if matches!(e, iommulab::Error::Cancelled)
            && let Some(raised) = self.raised.lock().ok().and_then(|mut s| s.take())
        {
            return raised;
        }
        PyErrWrap(e).into()
    }
}
