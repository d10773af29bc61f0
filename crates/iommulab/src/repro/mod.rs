//! Reproductions of published results: each reruns a paper's experiments on the model and
//! returns typed, serialisable data — everything the report's `results.json` and CSV files
//! hold, plus the numbers the paper published — for the CLI (`iommulab reproduce`) and
//! Python (`iommulab.reproduce`) to render (the `iommulab-report` crate writes the pages).
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
//! The library never prints: a run reports where it is through the optional callback of
//! [`ReproOptions`], which may also stop it.

pub mod benyehuda2007;
pub mod claims;
pub mod expether;
pub mod fujita2008;
pub mod iosup;
pub mod peleg2015;
pub mod sensitivity;
pub mod yassour2010;

use std::fmt;
use std::ops::ControlFlow;

use serde::Serialize;

use crate::Error;
use crate::experiment::{ConfigError, Progress, SharedProgressFn};
use crate::virt::{GuestError, HypercallError};

pub use benyehuda2007::BenYehuda2007Results;
pub use expether::ExpEtherResults;
pub use fujita2008::Fujita2008Results;
pub use iosup::IosupResults;
pub use peleg2015::Peleg2015Results;
pub use yassour2010::Yassour2010Results;

/// The reproductions that exist, in the order `all` runs them (Fujita & Mori first).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Reproduction {
    /// Fujita & Mori, "IOMMU performance evaluation in Linux" (2008): Figure 4.
    Fujita2008,
    /// Yassour, Ben-Yehuda & Wasserman, "On the DMA mapping problem in direct device
    /// assignment" (SYSTOR 2010): Figures 3–6 and the intra-guest protection table.
    Yassour2010,
    /// Ben-Yehuda et al., "The Price of Safety: Evaluating IOMMU Performance" (OLS 2007):
    /// Figures 2–7.
    BenYehuda2007,
    /// "Improving I/O performance of all peripheral devices on paravirtualized platforms"
    /// (IOSUP): Figures 6–9, lmbench fork+exit and netperf.
    Iosup,
    /// Suzuki et al., "Multi-Root Share of Single-Root I/O Virtualization (SR-IOV) Compliant
    /// PCI Express Device" (2010): Figures 9 and 11.
    ExpEther,
    /// Peleg, Morrison, Serebrin & Tsafrir, "Utilizing the IOMMU Scalably" (USENIX ATC
    /// 2015): throughput of the stock and per-core designs on 1–16 cores.
    Peleg2015,
}

impl Reproduction {
    /// Every reproduction, in the order `all` runs them.
    pub const ALL: [Reproduction; 6] = [
        Reproduction::Fujita2008,
        Reproduction::Yassour2010,
        Reproduction::BenYehuda2007,
        Reproduction::Iosup,
        Reproduction::ExpEther,
        Reproduction::Peleg2015,
    ];

    /// The name on the command line, in Python and as the report's folder.
    pub const fn name(self) -> &'static str {
        match self {
            Reproduction::Fujita2008 => "fujita2008",
            Reproduction::Yassour2010 => "yassour2010",
            Reproduction::BenYehuda2007 => "benyehuda2007",
            Reproduction::Iosup => "iosup",
            Reproduction::ExpEther => "expether",
            Reproduction::Peleg2015 => "peleg2015",
        }
    }

    /// The paper and what is reproduced (the line of `index.md`).
    pub const fn title(self) -> &'static str {
        match self {
            Reproduction::Fujita2008 => fujita2008::TITLE,
            Reproduction::Yassour2010 => yassour2010::TITLE,
            Reproduction::BenYehuda2007 => benyehuda2007::TITLE,
            Reproduction::Iosup => iosup::TITLE,
            Reproduction::ExpEther => expether::TITLE,
            Reproduction::Peleg2015 => peleg2015::TITLE,
        }
    }

    /// The reproductions a name selects: one, or every one for `all`.
    pub fn select(name: &str) -> Result<Vec<Reproduction>, ConfigError> {
        if name == "all" {
            return Ok(Self::ALL.to_vec());
        }
        Self::ALL
            .into_iter()
            .find(|r| r.name() == name)
            .map(|r| vec![r])
            .ok_or_else(|| ConfigError::Invalid {
                key: "reproduction".into(),
                value: name.into(),
                expected:
                    "one of fujita2008, yassour2010, benyehuda2007, iosup, expether, peleg2015, all"
                        .into(),
            })
    }

    /// Runs the reproduction.
    pub fn run(self, opts: &ReproOptions<'_>) -> Result<ReproResults, Error> {
        Ok(match self {
            Reproduction::Fujita2008 => ReproResults::Fujita2008(fujita2008::run(opts)?),
            Reproduction::Yassour2010 => ReproResults::Yassour2010(yassour2010::run(opts)?),
            Reproduction::BenYehuda2007 => ReproResults::BenYehuda2007(benyehuda2007::run(opts)?),
            Reproduction::Iosup => ReproResults::Iosup(Box::new(iosup::run(opts)?)),
            Reproduction::ExpEther => ReproResults::ExpEther(Box::new(expether::run(opts)?)),
            Reproduction::Peleg2015 => ReproResults::Peleg2015(Box::new(peleg2015::run(opts)?)),
        })
    }
}

impl fmt::Display for Reproduction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What one reproduction returned.
#[derive(Clone, Debug, Serialize)]
#[serde(untagged)]
pub enum ReproResults {
    /// Fujita & Mori 2008.
    Fujita2008(Fujita2008Results),
    /// Yassour et al. 2010.
    Yassour2010(Yassour2010Results),
    /// Ben-Yehuda et al. 2007.
    BenYehuda2007(BenYehuda2007Results),
    /// IOSUP.
    Iosup(Box<IosupResults>),
    /// ExpEther (Suzuki et al. 2010).
    ExpEther(Box<ExpEtherResults>),
    /// Peleg et al. 2015.
    Peleg2015(Box<Peleg2015Results>),
}

impl ReproResults {
    /// Which reproduction this is.
    pub const fn reproduction(&self) -> Reproduction {
        match self {
            ReproResults::Fujita2008(_) => Reproduction::Fujita2008,
            ReproResults::Yassour2010(_) => Reproduction::Yassour2010,
            ReproResults::BenYehuda2007(_) => Reproduction::BenYehuda2007,
            ReproResults::Iosup(_) => Reproduction::Iosup,
            ReproResults::ExpEther(_) => Reproduction::ExpEther,
            ReproResults::Peleg2015(_) => Reproduction::Peleg2015,
        }
    }

    /// The paper's claims, judged on this run.
    pub fn claims(&self) -> &[claims::Claim] {
        match self {
            ReproResults::Fujita2008(r) => &r.claims,
            ReproResults::Yassour2010(r) => &r.claims,
            ReproResults::BenYehuda2007(r) => &r.claims,
            ReproResults::Iosup(r) => &r.claims,
            ReproResults::ExpEther(r) => &r.claims,
            ReproResults::Peleg2015(r) => &r.claims,
        }
    }

    /// Whether it was the shorter `quick` run.
    pub const fn quick(&self) -> bool {
        match self {
            ReproResults::Fujita2008(r) => r.quick,
            ReproResults::Yassour2010(r) => r.results.quick,
            ReproResults::BenYehuda2007(r) => r.quick,
            ReproResults::Iosup(r) => r.quick,
            ReproResults::ExpEther(r) => r.quick,
            ReproResults::Peleg2015(r) => r.quick,
        }
    }
}

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

/// Why a reproduction stopped (besides an error of the model itself).
#[derive(Debug, thiserror::Error)]
pub enum ReproError {
    /// The progress callback asked to stop.
    #[error("reproduction cancelled")]
    Cancelled,
    /// A check the reproduction makes on its own results failed (a model bug).
    #[error("{reproduction}: {what}")]
    Check {
        /// The reproduction.
        reproduction: Reproduction,
        /// What did not hold, with the values.
        what: String,
    },
    /// The host refused a hypercall the guest model believed valid (a model bug).
    #[error("host refused a hypercall: {0}")]
    Host(#[from] HypercallError),
    /// The Xen PV model refused a configuration or failed (a model bug).
    #[error(transparent)]
    Xen(#[from] crate::virt::xen::XenError),
    /// The ExpEther timing model refused its parameters (a model bug).
    #[error(transparent)]
    Timing(#[from] crate::pcie::timing::TimingError),
}

/// A guest run's error as the crate's.
pub(crate) fn guest_error(e: GuestError) -> Error {
    match e {
        GuestError::Cache(e) => Error::Virt(*e),
        GuestError::Workload(e) => e.into(),
        GuestError::Host(h) => ReproError::Host(h).into(),
        e => Error::Guest(Box::new(e)),
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
            [Reproduction::Yassour2010]
        );
        assert_eq!(Reproduction::select("all").unwrap(), Reproduction::ALL);
        let e = Reproduction::select("smith1999").unwrap_err().to_string();
        assert!(e.contains("smith1999") && e.contains("fujita2008"), "{e}");
    }

    #[test]
    fn steps_report_each_start_then_done_and_can_stop() {
        let seen = RefCell::new(Vec::new());
        let f = |p: &Progress<'_>| {
            assert_eq!(p.unit, crate::ProgressUnit::Steps);
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
