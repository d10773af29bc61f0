//! # iommulab-repro
//!
//! Reproductions of published results: each reruns a paper's experiments on the iommulab
//! model and returns typed, serialisable data — everything the report's `results.json` and
//! CSV files hold, plus the numbers the paper published and its claims, judged here — for
//! the CLI (`iommulab reproduce`) and Python (`iommulab.reproduce`) to render (the
//! `iommulab-report` crate writes the pages).
//!
//! Every paper has one shape: a folder (`<paper>/mod.rs`: the run and its results;
//! `<paper>/claims.rs`: its claims and their judges; `sensitivity.rs` where it sweeps its
//! prices) and a type implementing [`Paper`], listed once in [`registry`].
//!
//! | reproduction | paper | module |
//! |---|---|---|
//! | `fujita2008` | Fujita & Mori 2008, Figure 4 (S0.6–S0.8) | [`fujita2008`] |
//! | `yassour2010` | Yassour, Ben-Yehuda & Wasserman 2010, Figures 3–6 (S1.1–S1.11) | [`yassour2010`] |
//! | `benyehuda2007` | Ben-Yehuda et al. 2007, Figures 2–7 (S2.1–S2.8) | [`benyehuda2007`] |
//! | `iosup` | Xen PV page tables vs the IOTLB and the IOSUP pool, Figures 6–9 (S3.1–S3.5) | [`iosup`] |
//! | `expether` | Suzuki et al. 2010, an SR-IOV NIC shared by hosts over ExpEther, Figures 9 and 11 (S4.1–S4.4) | [`expether`] |
//! | `peleg2015` | Peleg et al. 2015, the stock and per-core IOVA designs on 1–16 cores (P5.0–P5.7) | [`peleg2015`] |
//!
//! The crate sits above the library (`iommulab`), which never names it: the library's
//! errors are wrapped in [`ReproError`], never the reverse. The library never prints: a run
//! reports where it is through the optional callback of [`ReproOptions`], which may also
//! stop it.
#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations)]

pub mod benyehuda2007;
pub mod claims;
pub mod expether;
pub mod fujita2008;
pub mod iosup;
pub mod paper;
pub mod peleg2015;
pub mod registry;
pub mod sensitivity;
pub mod yassour2010;

use std::fmt;
use std::ops::ControlFlow;

use iommulab::virt::{GuestError, HypercallError};
use iommulab::{Progress, SharedProgressFn};

pub use benyehuda2007::BenYehuda2007Results;
pub use expether::ExpEtherResults;
pub use fujita2008::Fujita2008Results;
pub use iosup::IosupResults;
pub use paper::{Paper, ReproResults, Reproduction};
pub use peleg2015::Peleg2015Results;
pub use yassour2010::Yassour2010Results;

/// How to run a reproduction.
#[derive(Clone, Copy, Default)]
pub struct ReproOptions<'a> {
    /// The shorter run (fewer repeats, less modeled time, smaller workloads) for CI and a
    /// first look; the full run is what docs/reproductions holds.
    pub quick: bool,
    /// Called before each step with a [`Progress`] of steps (`done` of `total`, the step
    /// starting) and once with `done == total` at the end; `Break` stops the run with
    /// [`ReproError::Cancelled`] (Python's Ctrl-C). `None`: no reports.
    pub progress: Option<&'a SharedProgressFn<'a>>,
}

impl fmt::Debug for ReproOptions<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReproOptions")
            .field("quick", &self.quick)
            .field("progress", &self.progress.map(|_| "callback"))
            .finish()
    }
}

impl<'a> ReproOptions<'a> {
    /// Full (`quick = false`) or quick, without progress reports.
    pub const fn new(quick: bool) -> Self {
        ReproOptions {
            quick,
            progress: None,
        }
    }

    /// The same options with `progress` called before each step.
    #[must_use]
    pub const fn with_progress(self, progress: &'a SharedProgressFn<'a>) -> Self {
        ReproOptions {
            progress: Some(progress),
            ..self
        }
    }
}

/// Why a reproduction stopped.
#[derive(Debug, thiserror::Error)]
pub enum ReproError {
    /// The progress callback asked to stop.
    #[error("reproduction cancelled")]
    Cancelled,
    /// A check the reproduction makes on its own results failed (a model bug).
    #[error("{reproduction}: {what}")]
    Check {
        /// The reproduction's name.
        reproduction: &'static str,
        /// What did not hold, with the values.
        what: String,
    },
    /// The host refused a hypercall the guest model believed valid (a model bug).
    #[error("host refused a hypercall: {0}")]
    Host(#[from] HypercallError),
    /// The Xen PV model refused a configuration or failed (a model bug).
    #[error(transparent)]
    Xen(#[from] iommulab::virt::xen::XenError),
    /// The ExpEther timing model refused its parameters (a model bug).
    #[error(transparent)]
    Timing(#[from] iommulab::pcie::timing::TimingError),
    /// The library failed (a configuration it refused, a trace it cannot read, a model error).
    #[error(transparent)]
    Model(#[from] iommulab::Error),
}

/// The library's module errors, reached through [`iommulab::Error`]'s conversions (so a
/// configuration error stays one, with its message).
macro_rules! through_the_library {
    ($($t:ty),* $(,)?) => {$(
        impl From<$t> for ReproError {
            fn from(e: $t) -> Self {
                ReproError::Model(e.into())
            }
        }
    )*};
}

through_the_library!(
    iommulab::experiment::ConfigError,
    iommulab::dma::DmaError,
    iommulab::iova::IovaError,
    iommulab::hw::vtd::MapError,
    iommulab::trace::TraceError,
    iommulab::virt::Error,
    iommulab::workload::ParamError,
    iommulab::workload::WorkloadError,
    iommulab::mrc::CurveError,
);

/// A guest run's error as the crate's: a host's refusal of a hypercall the guest model
/// believed valid is the reproduction's (a model bug), the rest the library's.
pub(crate) fn guest_error(e: GuestError) -> ReproError {
    match e {
        GuestError::Host(h) => ReproError::Host(h),
        e => ReproError::Model(e.into()),
    }
}

/// Counts steps and reports them (the one place the callback is called).
#[derive(Debug)]
pub(crate) struct Steps<'o, 'a> {
    opts: &'o ReproOptions<'a>,
    done: u64,
    total: u64,
}

impl<'o, 'a> Steps<'o, 'a> {
    pub(crate) fn new(opts: &'o ReproOptions<'a>, total: u64) -> Self {
        Steps {
            opts,
            done: 0,
            total,
        }
    }

    fn report(&self, step: &str) -> Result<(), ReproError> {
        let Some(f) = self.opts.progress else {
            return Ok(());
        };
        match f(&Progress::steps(
            step,
            self.done.min(self.total),
            self.total,
        )) {
            ControlFlow::Continue(()) => Ok(()),
            ControlFlow::Break(()) => Err(ReproError::Cancelled),
        }
    }

    /// Reports the step starting (`label` is built only when someone listens).
    pub(crate) fn start(&mut self, label: impl FnOnce() -> String) -> Result<(), ReproError> {
        if self.opts.progress.is_some() {
            self.report(&label())?;
        }
        self.done += 1;
        Ok(())
    }

    /// Reports the end.
    pub(crate) fn finish(mut self) -> Result<(), ReproError> {
        self.done = self.total;
        self.report("done")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    #[test]
    fn names_select_one_or_all() {
        assert_eq!(
            Reproduction::select("yassour2010").unwrap(),
            [Reproduction::of::<yassour2010::Yassour2010>()]
        );
        assert_eq!(Reproduction::select("all").unwrap(), Reproduction::all());
        let e = Reproduction::select("smith1999").unwrap_err().to_string();
        assert!(e.contains("smith1999") && e.contains("fujita2008"), "{e}");
    }

    #[test]
    fn steps_report_each_start_then_done_and_can_stop() {
        let seen = RefCell::new(Vec::new());
        let f = |p: &Progress<'_>| {
            assert_eq!(p.unit, iommulab::ProgressUnit::Steps);
            seen.borrow_mut()
                .push((p.step.to_string(), p.done, p.total));
            if p.step == "stop" {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        };
        let opts = ReproOptions::new(true).with_progress(&f);
        let mut s = Steps::new(&opts, 2);
        s.start(|| "a".into()).unwrap();
        s.start(|| "b".into()).unwrap();
        s.finish().unwrap();
        assert_eq!(
            *seen.borrow(),
            [
                ("a".into(), 0, 2),
                ("b".into(), 1, 2),
                ("done".into(), 2, 2)
            ]
        );
        let mut s = Steps::new(&opts, 1);
        assert!(matches!(
            s.start(|| "stop".into()),
            Err(ReproError::Cancelled)
        ));
    }
}
