//! An experiment whose system is a guest: the workload (a generator or a trace) runs through
//! the guest's `DmaApi` over the hypercall backend (`virt::run_guest`), to a host driving the
//! configured remapping unit (`hardware.unit`, as bare metal's). The offline eviction
//! policies (OPT, optimal batching) read the future from a first pass over the same workload:
//! generators are deterministic for their seed and a trace is reread, so both passes see the
//! same references.

use std::sync::Arc;
use std::time::Instant;

use crate::addr::{Gpa, Hpa};
use crate::error::Error;
use crate::hw::{Calgary, Dart, TceConfig};
use crate::virt::{GuestConfig, Lookahead, run_guest, run_guest_on};
use crate::workload::{InGuest, TraceWorkload, Workload, WorkloadConfig};

use super::build::{WorkloadVisitor, labels_of, with_workload};
use super::config::{ExperimentConfig, TraceSpec, UnitKind};
use super::progress::{Progress, ProgressFn, Watched};
use super::result::RunResult;

/// Whether `g` needs the future (an offline policy on a caching strategy).
fn needs_lookahead(g: &GuestConfig) -> bool {
    g.eviction.is_offline() && g.strategy.caches()
}

/// Runs a generator through the guest.
pub(super) fn run_on_generator(
    cfg: &ExperimentConfig,
    g: &GuestConfig,
    w: &WorkloadConfig,
    progress: &mut ProgressFn<'_>,
) -> Result<RunResult, Error> {
    struct Refs<'a> {
        g: &'a GuestConfig,
        progress: &'a mut ProgressFn<'a>,
    }
    impl WorkloadVisitor for Refs<'_> {
        type Output = Arc<Lookahead>;
        fn visit<W: Workload<Phys = Hpa>>(self, w: W) -> Result<Arc<Lookahead>, Error> {
            let mut w = InGuest::new(Watched::new(w, self.progress));
            let la = Lookahead::from_guest_maps(&mut w, self.g.cache_only, self.g.guest_pages);
            let (la, _) = w.into_inner().finish(la.map_err(Error::from))?;
            Ok(Arc::new(la))
        }
    }
    struct Run<'a> {
        cfg: &'a ExperimentConfig,
        g: &'a GuestConfig,
        lookahead: Option<Arc<Lookahead>>,
        progress: &'a mut ProgressFn<'a>,
    }
    impl WorkloadVisitor for Run<'_> {
        type Output = RunResult;
        fn visit<W: Workload<Phys = Hpa>>(self, w: W) -> Result<RunResult, Error> {
            let mut w = InGuest::new(Watched::new(w, self.progress));
            let r = run(self.cfg, self.g, &mut w, self.lookahead);
            Ok(w.into_inner().finish(r)?.0)
        }
    }
    let lookahead = if needs_lookahead(g) {
        // The first pass only reads the future: it reports no I/Os done, but a stop ends it.
        let mut first = |p: &Progress<'_>| progress(&Progress::ios(0, p.total));
        Some(with_workload(
            w,
            Refs {
                g,
                progress: &mut first,
            },
        )?)
    } else {
        None
    };
    with_workload(
        w,
        Run {
            cfg,
            g,
            lookahead,
            progress,
        },
    )
}

/// Replays a trace through the guest (`replay` filled).
pub(super) fn run_on_trace(
    cfg: &ExperimentConfig,
    g: &GuestConfig,
    t: &TraceSpec,
    progress: &mut ProgressFn<'_>,
) -> Result<RunResult, Error> {
    let open = || -> Result<_, Error> {
        Ok(TraceWorkload::new(crate::trace::open(
            &t.trace, t.format, t.lenient,
        )?))
    };
    let lookahead = if needs_lookahead(g) {
        // Read straight into the 8-byte-per-map index: the stream is never held whole. The
        // first pass reports no I/Os done, but a stop ends it.
        let mut first = |p: &Progress<'_>| progress(&Progress::ios(0, p.total));
        let mut w = InGuest::new(Watched::new(open()?, &mut first));
        let la = Lookahead::from_guest_maps(&mut w, g.cache_only, g.guest_pages);
        let (la, _) = w.into_inner().finish(la.map_err(Error::from))?;
        Some(Arc::new(la))
    } else {
        None
    };
    let mut w = InGuest::new(Watched::new(open()?, progress));
    let r = run(cfg, g, &mut w, lookahead);
    let (mut r, w) = w.into_inner().finish(r)?;
    r.replay = Some(w.report());
    Ok(r)
}

fn run<W: Workload<Phys = Gpa>>(
    cfg: &ExperimentConfig,
    g: &GuestConfig,
    w: &mut W,
    lookahead: Option<Arc<Lookahead>>,
) -> Result<RunResult, Error> {
    let start = Instant::now();
    // The host's unit is the one bare metal would run on (`hardware.unit`).
    let result = match cfg.hardware.unit {
        UnitKind::Vtd => run_guest(w, g, lookahead)?,
        UnitKind::Calgary => run_guest_on(w, g, lookahead, Calgary::new(guest_tce(g))?)?,
        UnitKind::Dart => run_guest_on(w, g, lookahead, Dart::new(guest_tce(g))?)?,
    };
    let wall = start.elapsed().as_secs_f64();
    Ok(RunResult::from_guest(
        labels_of(cfg),
        g.cost.clock,
        result,
        wall,
    ))
}

/// A TCE unit for a guest's host: the host maps guest page n at I/O page n, so the flat table
/// covers the guest's memory (rounded up to a power of two; `resolve` bounds its size); the
/// guest's prices.
fn guest_tce(g: &GuestConfig) -> TceConfig {
    TceConfig {
        table_entries: g.guest_pages.next_power_of_two(),
        cost: g.cost,
        ..TceConfig::default()
    }
}
