//! `iommulab run EXPERIMENT`: one experiment file through the library's one runner
//! (`experiment::run_experiment`), bare metal or guest, generator or trace.

use anyhow::{Context, Result};
use iommulab::experiment::{ExperimentConfig, RunResult, run_experiment};

use crate::args::RunArgs;
use crate::output::{csv, json_text, out_flags, prepare_outputs, table, write_outs};
use crate::progress::ProgressBar;

/// `iommulab run`.
pub fn run(args: &RunArgs, quiet: bool) -> Result<()> {
    let path = &args.experiment;
    prepare_outputs(&out_flags(&args.out), &[("the experiment", path)])?;
    let text = crate::cmd::read_text(path)?;
    let cfg = ExperimentConfig::from_file_text(path, &text)
        .with_context(|| format!("in {}", path.display()))?;
    cfg.validate()
        .with_context(|| format!("in {}", path.display()))?;
    let total = match cfg.pseudo_scsi() {
        Some(w) if cfg.duration_s.is_none() => w.ios,
        _ => 0,
    };
    let mut progress = ProgressBar::new(total, quiet);
    progress.start_run(&cfg.label());
    let result = run_experiment(&cfg, &mut |p| progress.show(p))
        .with_context(|| format!("running {}", path.display()))?;
    progress.finish();
    let json = json_text(&result)?;
    let csv = csv(std::slice::from_ref(&result));
    write_outs(&args.out, &json, Some(&csv))?;
    let text = if args.json {
        json
    } else if args.csv {
        csv
    } else {
        result_text(&result)
    };
    crate::print_stdout(&text)
}

/// One run's table row and the lines of the parts it has (guest, Xen PV, trace replay).
pub(crate) fn result_text(result: &RunResult) -> String {
    let mut t = table(std::slice::from_ref(result));
    if let Some(g) = &result.guest {
        t.push_str(&format!(
            "guest {} (eviction {}, quota {}, batching {}): {} page maps, {} hits, {} misses, \
             {} refused (hit rate {:.1}%); {} hypercalls ({:.2} pages each); CPU {:.1}% \
             ({:.1}% mapping), {:.0} Mb/s; {} stale accesses ({} writable)\n",
            g.strategy,
            if g.eviction.is_empty() {
                "-"
            } else {
                &g.eviction
            },
            g.quota,
            g.batching,
            g.maps,
            g.hits,
            g.misses,
            g.refused,
            g.hit_rate * 100.0,
            g.hypercalls,
            g.pages_per_hypercall,
            g.cpu_utilization * 100.0,
            g.mapping_cpu * 100.0,
            g.throughput_mbps,
            g.stale_accesses,
            g.stale_writes,
        ));
    }
    if let Some(x) = &result.xen_pv {
        t.push_str(&format!(
            "xen-pv {} on {}: {} pairs, {:.3} hypercalls per pair ({:.1}% of multicalls \
             single-entry, {:.2} entries each), {:.0} cycles per pair ({:.0} domain + {:.0} \
             hypervisor), {} whole flushes; retries of a lost buffer through: {} of {} at \
             once, {} of {} later; {} accesses to frames given away ({} page flips); \
             protects inside the domain: {}\n",
            x.option,
            x.unit,
            x.pairs,
            x.hypercalls_per_pair,
            100.0 * x.single_entry_fraction,
            x.mean_entries,
            x.cycles_per_pair,
            x.domain_cycles_per_pair,
            x.hypervisor_cycles_per_pair,
            x.whole_flushes,
            x.probes_through,
            x.probes,
            x.late_probes_through,
            x.late_probes,
            x.foreign_accesses,
            x.flips,
            if x.protects_within_domain {
                "yes"
            } else {
                "no"
            },
        ));
    }
    if let Some(c) = &result.cores {
        t.push_str(&format!(
            "cores {}: {:.0} I/Os per s ({:.2}x the one-CPU clock of the same work), {:.0} CPU cycles per I/O of which {:.0} waiting; tree lock {} acquisitions, {} contended, {:.0} wait cycles each on average; invalidation {} ({} batches, queue depth {:.2} mean, {} max)\n",
            c.cpus,
            c.throughput,
            c.work_cycles as f64 / c.makespan_cycles.max(1) as f64,
            c.cpu_cycles_per_io,
            c.wait_cycles_per_io,
            c.tree_lock.acquisitions,
            c.tree_lock.contended,
            c.tree_lock.wait_cycles as f64 / c.tree_lock.contended.max(1) as f64,
            match c.invalidation.interface {
                iommulab::hw::invalidate::InvalidationInterface::Register => "register",
                iommulab::hw::invalidate::InvalidationInterface::Queued => "queued",
            },
            c.invalidation.batches,
            c.invalidation.depth_sum as f64 / c.invalidation.batches.max(1) as f64,
            c.invalidation.max_depth,
        ));
    }
    if let Some(p) = &result.replay {
        t.push_str(&format!("trace: {}\n", replay_text(p)));
    }
    t
}

/// What a replay made of a trace, for people. The unmaps the replay implied (a map of an
/// address still mapped unmaps it first) are labelled, not counted as the trace's.
pub(crate) fn replay_text(p: &iommulab::workload::ReplayReport) -> String {
    let mut t = format!(
        "{} events, {} maps, {} unmaps",
        p.events,
        p.maps,
        p.unmaps.saturating_sub(p.remapped_live)
    );
    if p.remapped_live > 0 {
        t.push_str(&format!(
            " (+ {} implied by a map of a live address)",
            p.remapped_live
        ));
    }
    t.push_str(&format!(
        ", {} accesses replayed; {} unmatched unmaps, {} iommu events skipped",
        p.accesses, p.unmatched_unmaps, p.skipped_iommu_events
    ));
    if p.reordered_times > 0 {
        t.push_str(&format!(
            "; {} events out of time order (replayed in file order)",
            p.reordered_times
        ));
    }
    t
}
