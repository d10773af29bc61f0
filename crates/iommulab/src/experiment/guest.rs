//! An experiment whose system is a guest: the workload (a generator or a trace) runs through
//! the guest's `DmaApi` over the hypercall backend (`virt::run_guest`). The offline eviction
//! policies (OPT, optimal batching) read the future from a first pass over the same workload:
//! generators are deterministic for their seed and a trace is reread, so both passes see the
//! same references.

use std::sync::Arc;
use std::time::Instant;

use crate::addr::{Gpa, Hpa};
use crate::error::Error;
use crate::virt::{GuestConfig, Lookahead, run_guest};
use crate::workload::{InGuest, TraceWorkload, Workload, WorkloadConfig};

use super::build::{WorkloadVisitor, labels_of, with_workload};
use super::config::{ExperimentConfig, TraceSpec};
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
) -> Result<RunResult, Error> {
    struct Refs<'a>(&'a GuestConfig);
    impl WorkloadVisitor for Refs<'_> {
        type Output = Arc<Lookahead>;
        fn visit<W: Workload<Phys = Hpa>>(self, w: W) -> Result<Arc<Lookahead>, Error> {
            let la = Lookahead::from_guest_maps(
                &mut InGuest::new(w),
                self.0.cache_only,
                self.0.guest_pages,
            )?;
            Ok(Arc::new(la))
        }
    }
    struct Run<'a> {
        cfg: &'a ExperimentConfig,
        g: &'a GuestConfig,
        lookahead: Option<Arc<Lookahead>>,
    }
    impl WorkloadVisitor for Run<'_> {
        type Output = RunResult;
        fn visit<W: Workload<Phys = Hpa>>(self, w: W) -> Result<RunResult, Error> {
            run(self.cfg, self.g, &mut InGuest::new(w), self.lookahead)
        }
    }
    let lookahead = if needs_lookahead(g) {
        Some(with_workload(w, Refs(g))?)
    } else {
        None
    };
    with_workload(w, Run { cfg, g, lookahead })
}

/// Replays a trace through the guest (`replay` filled).
pub(super) fn run_on_trace(
    cfg: &ExperimentConfig,
    g: &GuestConfig,
    t: &TraceSpec,
) -> Result<RunResult, Error> {
    let open = || -> Result<_, Error> {
        Ok(InGuest::new(TraceWorkload::new(crate::trace::open(
            &t.trace, t.format, t.lenient,
        )?)))
    };
    let lookahead = if needs_lookahead(g) {
        // Read straight into the 8-byte-per-map index: the stream is never held whole.
        let la = Lookahead::from_guest_maps(&mut open()?, g.cache_only, g.guest_pages)?;
        Some(Arc::new(la))
    } else {
        None
    };
    let mut w = open()?;
    let mut r = run(cfg, g, &mut w, lookahead)?;
    r.replay = Some(w.inner().report());
    Ok(r)
}

fn run<W: Workload<Phys = Gpa>>(
    cfg: &ExperimentConfig,
    g: &GuestConfig,
    w: &mut W,
    lookahead: Option<Arc<Lookahead>>,
) -> Result<RunResult, Error> {
    let start = Instant::now();
    let result = run_guest(w, g, lookahead)?;
    let wall = start.elapsed().as_secs_f64();
    Ok(RunResult::from_guest(
        labels_of(cfg),
        g.cost.clock,
        g.link_mbps,
        result,
        wall,
    ))
}
