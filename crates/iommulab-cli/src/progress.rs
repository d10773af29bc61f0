//! Progress bars and spinners on stderr: shown on a terminal, hidden with `--quiet` or when
//! stderr is not a TTY (so pipes, logs and tests see none). [`ProgressBar`] renders the
//! library's progress reports ([`iommulab::Progress`]); it decides nothing about a run.

use std::io::IsTerminal;
use std::ops::ControlFlow;

use indicatif::{ProgressDrawTarget, ProgressStyle};
use iommulab::trace::{Event, EventColumns, EventSource, TraceError, TraceHeader};
use iommulab::{Progress, ProgressUnit};

/// A bar on stderr showing the library's progress reports: over I/Os for a batch of runs, or
/// over a reproduction's steps.
#[derive(Debug)]
pub struct ProgressBar {
    bar: indicatif::ProgressBar,
    done_before: u64,
}

impl ProgressBar {
    /// A bar for `total` I/Os in all (0 = unknown: a spinner).
    pub fn new(total: u64, quiet: bool) -> Self {
        let bar = if total > 0 {
            indicatif::ProgressBar::new(total)
        } else {
            indicatif::ProgressBar::new_spinner()
        };
        if quiet || !std::io::stderr().is_terminal() {
            bar.set_draw_target(ProgressDrawTarget::hidden());
        }
        if let Ok(style) = ProgressStyle::with_template(
            "{msg:>16} [{bar:40}] {pos}/{len} I/Os ({per_sec}, eta {eta})",
        ) {
            bar.set_style(style.progress_chars("=> "));
        }
        Self {
            bar,
            done_before: 0,
        }
    }

    /// A bar over a reproduction's steps, labelled `name`.
    pub fn steps(name: &str, quiet: bool) -> Self {
        let bar = indicatif::ProgressBar::new(0);
        if quiet || !std::io::stderr().is_terminal() {
            bar.set_draw_target(ProgressDrawTarget::hidden());
        }
        if let Ok(style) =
            ProgressStyle::with_template("{prefix} [{bar:40}] {pos}/{len} steps (eta {eta}) {msg}")
        {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_prefix(name.to_string());
        Self {
            bar,
            done_before: 0,
        }
    }

    /// Names the run in progress.
    pub fn start_run(&mut self, name: &str) {
        self.done_before = self.bar.position();
        self.bar.set_message(name.to_string());
    }

    /// Shows a progress report: a run's I/Os add to the runs before it; a reproduction's
    /// steps set the bar and name the step. The run goes on: the CLI is stopped by Ctrl-C,
    /// which ends the process.
    pub fn show(&self, p: &Progress<'_>) -> ControlFlow<()> {
        match p.unit {
            ProgressUnit::Ios => self.bar.set_position(self.done_before + p.done),
            ProgressUnit::Steps => {
                self.bar.set_length(p.total);
                self.bar.set_position(p.done);
                self.bar.set_message(p.step.to_string());
            }
        }
        ControlFlow::Continue(())
    }

    /// Clears the bar.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

/// A spinner counting the records read from a trace (`trace stats|convert|import`, `mrc`):
/// their length is not known until the end. Hidden as [`ProgressBar`] is.
#[derive(Debug)]
pub struct Reading<S> {
    inner: S,
    bar: indicatif::ProgressBar,
    read: u64,
}

impl<S: EventSource> Reading<S> {
    /// Wraps `inner`; the spinner says `what` (`reading trace.iot`).
    pub fn new(inner: S, what: String, quiet: bool) -> Self {
        let bar = indicatif::ProgressBar::new_spinner();
        if quiet || !std::io::stderr().is_terminal() {
            bar.set_draw_target(ProgressDrawTarget::hidden());
        }
        if let Ok(style) =
            ProgressStyle::with_template("{spinner} {msg}: {human_pos} records ({per_sec})")
        {
            bar.set_style(style);
        }
        bar.set_message(what);
        bar.enable_steady_tick(std::time::Duration::from_millis(200));
        Self {
            inner,
            bar,
            read: 0,
        }
    }

    /// The wrapped source.
    pub fn inner(&self) -> &S {
        &self.inner
    }
}

impl<S> Drop for Reading<S> {
    fn drop(&mut self) {
        self.bar.finish_and_clear();
    }
}

impl<S: EventSource> EventSource for Reading<S> {
    fn header(&self) -> &TraceHeader {
        self.inner.header()
    }

    fn next_event(&mut self) -> Result<Option<Event>, TraceError> {
        let e = self.inner.next_event()?;
        if e.is_some() {
            self.read += 1;
            if self.read.is_multiple_of(4096) {
                self.bar.set_position(self.read);
            }
        }
        Ok(e)
    }

    fn cpu_count(&self) -> Option<u32> {
        self.inner.cpu_count()
    }

    fn source_path(&self) -> Option<&std::path::Path> {
        self.inner.source_path()
    }

    fn read_batch(&mut self, out: &mut Vec<Event>) -> Result<usize, TraceError> {
        let n = self.inner.read_batch(out)?;
        self.read += n as u64;
        self.bar.set_position(self.read);
        Ok(n)
    }

    fn read_columns(&mut self, out: &mut EventColumns) -> Result<usize, TraceError> {
        let n = self.inner.read_columns(out)?;
        self.read += n as u64;
        self.bar.set_position(self.read);
        Ok(n)
    }
}

/// An empty source, for a [`Reading`] spinner over work that is not reading a trace.
#[derive(Debug, Default)]
pub struct NoEvents(TraceHeader);

impl EventSource for NoEvents {
    fn header(&self) -> &TraceHeader {
        &self.0
    }
    fn next_event(&mut self) -> Result<Option<Event>, TraceError> {
        Ok(None)
    }
}
