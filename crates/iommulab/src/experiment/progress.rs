//! Progress reports, and stopping a run, a series or a reproduction before its end.
//!
//! One notion for all of them: a [`Progress`] report (`done` of `total` [`ProgressUnit`]s,
//! and the step running) handed to a [`ProgressFn`] callback, which answers whether the work
//! goes on: `ControlFlow::Break` ends it with [`Error::Cancelled`] (a reproduction with
//! `ReproError::Cancelled`) instead of a result. This is how Python's Ctrl-C reaches a run
//! whose thread has released the GIL. A run reports every [`PROGRESS_EVERY`] I/Os
//! (`total` is 0 when the workload does not know it); a series names the configuration
//! running; a reproduction reports before each of its steps. Bare-metal runs are watched by
//! the runner, which counts completed I/Os anyway; a guest's or a Xen PV domain's run by
//! [`Watched`], around its workload. The CLI's bar and Python's callbacks render reports;
//! neither decides anything about the run.

use std::ops::ControlFlow;

use crate::error::Error;
use crate::workload::{DmaOp, Segment, Workload, WorkloadError};

/// What a report's `done` and `total` count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProgressUnit {
    /// A run's I/Os (its unmaps).
    Ios,
    /// A reproduction's steps (runs, sweeps, figures).
    Steps,
}

/// Where a run, a series or a reproduction is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Progress<'a> {
    /// Units finished.
    pub done: u64,
    /// Units in all; 0 when not known (a trace's length, a run for modeled time).
    pub total: u64,
    /// What `done` and `total` count.
    pub unit: ProgressUnit,
    /// The step running: a series' configuration (`strict`), a reproduction's step
    /// (`default, seed 2`; `done` at the end); empty for a lone run.
    pub step: &'a str,
}

impl<'a> Progress<'a> {
    /// A run's report: `done` of `total` I/Os.
    pub const fn ios(done: u64, total: u64) -> Self {
        Progress {
            done,
            total,
            unit: ProgressUnit::Ios,
            step: "",
        }
    }

    /// A reproduction's report: `done` of `total` steps, `step` starting.
    pub const fn steps(step: &'a str, done: u64, total: u64) -> Self {
        Progress {
            done,
            total,
            unit: ProgressUnit::Steps,
            step,
        }
    }

    /// The same report, naming `step` as the one running.
    #[must_use]
    pub const fn in_step(self, step: &'a str) -> Self {
        Progress { step, ..self }
    }
}

/// The progress callback every run, series and reproduction takes: `Break` stops it.
pub type ProgressFn<'a> = dyn FnMut(&Progress<'_>) -> ControlFlow<()> + 'a;

/// A [`ProgressFn`] called through a shared reference: a reproduction's steps share its
/// options, so its callback is `Fn` (a closure that counts keeps its count in a `Cell`).
pub type SharedProgressFn<'a> = dyn Fn(&Progress<'_>) -> ControlFlow<()> + 'a;

/// How often (in I/Os) a run reports progress.
pub const PROGRESS_EVERY: u64 = 1 << 14;

/// A [`ProgressFn`] that reports nowhere and never stops the work.
pub fn no_progress(_: &Progress<'_>) -> ControlFlow<()> {
    ControlFlow::Continue(())
}

/// A workload whose unmaps (its I/Os) are counted and reported to a [`ProgressFn`]: once the
/// callback says `Break`, the workload ends, and [`Watched::finish`] turns the run's
/// result into [`Error::Cancelled`].
pub struct Watched<'p, 'a, W> {
    inner: W,
    progress: &'p mut ProgressFn<'a>,
    done: u64,
    total: u64,
    cancelled: bool,
}

impl<W: std::fmt::Debug> std::fmt::Debug for Watched<'_, '_, W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watched")
            .field("inner", &self.inner)
            .field("done", &self.done)
            .field("cancelled", &self.cancelled)
            .finish_non_exhaustive()
    }
}

impl<'p, 'a, W: Workload> Watched<'p, 'a, W> {
    /// Watches `inner`.
    pub fn new(inner: W, progress: &'p mut ProgressFn<'a>) -> Self {
        let total = inner.total_ios().unwrap_or(0);
        Watched {
            inner,
            progress,
            done: 0,
            total,
            cancelled: false,
        }
    }

    /// The watched workload.
    pub fn inner(&self) -> &W {
        &self.inner
    }

    /// The run's outcome: `result`, unless the callback stopped the run. Then what ran was
    /// only part of the workload: its numbers are not a result, and an error it ended with
    /// may be the cut's own (a guest's OPT finds fewer maps than its future holds).
    pub fn finish<T>(self, result: Result<T, Error>) -> Result<(T, W), Error> {
        if self.cancelled {
            return Err(Error::Cancelled);
        }
        let value = result?;
        // The run is over: the last report's answer changes nothing.
        let _ = (self.progress)(&Progress::ios(self.done, self.total));
        Ok((value, self.inner))
    }
}

impl<W: Workload> Workload for Watched<'_, '_, W> {
    type Phys = W::Phys;

    fn next_op(&mut self) -> Result<Option<DmaOp<W::Phys>>, WorkloadError> {
        if self.cancelled {
            return Ok(None);
        }
        let op = self.inner.next_op()?;
        if let Some(DmaOp::Unmap { .. }) = op {
            self.done += 1;
            if self.done.is_multiple_of(PROGRESS_EVERY)
                && (self.progress)(&Progress::ios(self.done, self.total)).is_break()
            {
                self.cancelled = true;
            }
        }
        Ok(op)
    }

    fn sg_segments(&self) -> &[Segment<W::Phys>] {
        self.inner.sg_segments()
    }

    fn slots(&self) -> usize {
        self.inner.slots()
    }

    fn devices(&self) -> usize {
        self.inner.devices()
    }

    fn total_ios(&self) -> Option<u64> {
        self.inner.total_ios()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::{PseudoScsi, PseudoScsiConfig};

    fn pseudo(ios: u64) -> PseudoScsi {
        PseudoScsi::new(PseudoScsiConfig {
            ios,
            ..PseudoScsiConfig::default()
        })
    }

    fn unmaps<W: Workload>(w: &mut W) -> u64 {
        let mut n = 0;
        while let Some(op) = w.next_op().unwrap() {
            n += u64::from(matches!(op, DmaOp::Unmap { .. }));
        }
        n
    }

    #[test]
    fn a_watched_workload_reports_its_ios_and_ends_when_told() {
        let mut seen = Vec::new();
        let mut go_on = |p: &Progress<'_>| {
            assert_eq!((p.unit, p.step), (ProgressUnit::Ios, ""));
            seen.push((p.done, p.total));
            ControlFlow::Continue(())
        };
        let mut w = Watched::new(pseudo(3 * PROGRESS_EVERY + 5), &mut go_on);
        assert_eq!(unmaps(&mut w), 3 * PROGRESS_EVERY + 5);
        assert!(w.finish(Ok(())).is_ok());
        let n = 3 * PROGRESS_EVERY + 5;
        assert_eq!(
            seen,
            [
                (PROGRESS_EVERY, n),
                (2 * PROGRESS_EVERY, n),
                (3 * PROGRESS_EVERY, n),
                (n, n)
            ]
        );

        let mut stop_at_second = |p: &Progress<'_>| {
            if p.done >= 2 * PROGRESS_EVERY {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        };
        let mut w = Watched::new(pseudo(10 * PROGRESS_EVERY), &mut stop_at_second);
        assert_eq!(
            unmaps(&mut w),
            2 * PROGRESS_EVERY,
            "the workload ends at the stop"
        );
        assert!(matches!(w.finish(Ok(())), Err(Error::Cancelled)));
    }
}
