//! Progress reports, and stopping a run before its end.
//!
//! Every run takes a [`Progress`] callback. It is called every [`PROGRESS_EVERY`] I/Os with
//! `(done, total)` (`total` is 0 when the workload does not know it) and answers whether the
//! run goes on: `ControlFlow::Break` ends the run with [`Error::Cancelled`] instead of a
//! result. This is how Python's Ctrl-C reaches a run whose thread has released the GIL.
//! Bare-metal runs are watched by the runner, which counts completed I/Os anyway; a guest's
//! or a Xen PV domain's run by [`Watched`], around its workload.

use std::ops::ControlFlow;

use crate::error::Error;
use crate::workload::{DmaOp, Segment, Workload, WorkloadError};

/// The progress callback: `(done, total)` I/Os; `Break` stops the run.
pub type Progress<'a> = dyn FnMut(u64, u64) -> ControlFlow<()> + 'a;

/// How often (in I/Os) a run reports progress.
pub const PROGRESS_EVERY: u64 = 1 << 14;

/// A [`Progress`] that reports nowhere and never stops the run.
pub fn no_progress(_done: u64, _total: u64) -> ControlFlow<()> {
    ControlFlow::Continue(())
}

/// A workload whose unmaps (its I/Os) are counted and reported to a [`Progress`]: once the
/// callback says `Break`, the workload ends, and [`Watched::finish`] turns the run's
/// result into [`Error::Cancelled`].
pub struct Watched<'p, 'a, W> {
    inner: W,
    progress: &'p mut Progress<'a>,
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
    pub fn new(inner: W, progress: &'p mut Progress<'a>) -> Self {
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
        let _ = (self.progress)(self.done, self.total);
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
                && (self.progress)(self.done, self.total).is_break()
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
        let mut go_on = |done, total| {
            seen.push((done, total));
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

        let mut stop_at_second = |done, _| {
            if done >= 2 * PROGRESS_EVERY {
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
