//! Several traces of one boot as one history: a session carries the model from each trace
//! to the next and reports each trace and the total.

use super::*;

/// The reports of several traces of one boot, validated in order as one history.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MultiReport {
    /// One report per trace, in the order given (each scores its own allocations, with the
    /// model as the traces before it left it).
    pub traces: Vec<ValidateReport>,
    /// Every trace's allocations together (`trace` is "total").
    pub total: ValidateReport,
}

impl MultiReport {
    /// The human-readable report: each trace's, then the total's.
    pub fn to_text(&self) -> String {
        let mut t = String::new();
        for r in &self.traces {
            t.push_str(&r.to_text());
            t.push('\n');
        }
        t.push_str(&self.total.to_text());
        t
    }
}

/// Validates several traces of one boot (Linux ftrace text, optionally `.gz`/`.zst`), in the
/// order given: the model's domains, caches and live ranges carry over from each trace to the
/// next, so a range mapped in one and unmapped in a later one is known. Timestamps are the
/// traces' own (one boot, one clock).
pub fn validate_many(paths: &[&Path], options: &ValidateOptions) -> Result<MultiReport> {
    check_options(options)?;
    let options = &with_recorded_frees(paths, options)?;
    let mut session = Session::default();
    let mut traces = Vec::with_capacity(paths.len());
    for path in paths {
        let format = crate::trace::detect(path)?;
        if format != TraceFormat::Ftrace {
            return Err(not_ftrace(path, format));
        }
        let mut r = crate::trace::open_ftrace(path, options.lenient)?;
        traces.push(session.trace(&mut r, options)?);
    }
    let total = session.total(options)?;
    Ok(MultiReport { traces, total })
}

pub(super) fn not_ftrace(path: &Path, format: TraceFormat) -> Error {
    TraceError::Unsupported {
        path: path.to_owned(),
        what: format!(
            "validation reads Linux ftrace text (it needs the iommu: events' CPUs and lines), \
             and this file is {}",
            format.describe()
        ),
    }
    .into()
}

/// One or more traces of one boot replayed through one model.
#[derive(Debug, Default)]
pub(super) struct Session {
    v: Option<Validator>,
    /// The first trace's first timestamp (ns): later traces' times count from it.
    origin_ns: Option<u64>,
    cpus_from: String,
    skipped: Skipped,
    direct_mappings: u64,
}

impl Session {
    pub(super) fn trace<R: BufRead>(
        &mut self,
        r: &mut FtraceReader<R>,
        options: &ValidateOptions,
    ) -> Result<ValidateReport> {
        let path = r.path().to_owned();
        let mut grouper = Grouper::new(options.lenient, options.recorded_frees == Some(true));
        let mark = self.v.as_mut().map(Validator::begin_trace);
        let mut offset: Option<u64> = None;
        while let Some(e) = r.next_event()? {
            let header = r.header();
            let dev = usize::from(e.device);
            let is_iommu = header.devices.get(dev).is_some_and(|d| d == IOMMU_DEVICE);
            grouper.event(&e, r.line_number(), is_iommu, &path)?;
            if self.v.is_none() {
                // The header lines are all read by the first event.
                let (cpus, from) = match (r.header_cpus(), options.cpus) {
                    (Some(n), _) => (n as usize, "the trace's header (#P:N)"),
                    (None, Some(n)) => (n, "--cpus"),
                    (None, None) => (
                        options.domain.magazine.cpus,
                        "the domain config (the trace's header gives none)",
                    ),
                };
                from.clone_into(&mut self.cpus_from);
                let mut new = Validator::new(options, cpus)?;
                new.cpus_known = r.header_cpus().is_some() || options.cpus.is_some();
                self.v = Some(new);
            }
            let Some(v) = self.v.as_mut() else {
                continue;
            };
            if offset.is_none() {
                offset = Some(trace_offset(r, &mut self.origin_ns, v, &path)?);
            }
            while let Some(mut op) = grouper.pop_ready() {
                op.time_ns += offset.unwrap_or(0);
                v.apply(&op, r.header(), &path, &mut grouper.skipped)?;
            }
        }
        grouper.finish(&path)?;
        if self.v.is_none() {
            self.v = Some(Validator::new(
                options,
                r.header_cpus().map_or(1, |n| n as usize),
            )?);
        }
        let Some(v) = self.v.as_mut() else {
            unreachable!("set above");
        };
        while let Some(mut op) = grouper.pop_ready() {
            op.time_ns += offset.unwrap_or(0);
            v.apply(&op, r.header(), &path, &mut grouper.skipped)?;
        }
        grouper.skipped.malformed_lines = r.report().malformed_skipped;
        add_skipped(&mut self.skipped, &grouper.skipped);
        self.direct_mappings += grouper.direct_mappings;
        Ok(v.report(
            &path.display().to_string(),
            mark.unwrap_or_default(),
            self.cpus_from.clone(),
            grouper.skipped,
            grouper.direct_mappings,
        ))
    }

    /// Every trace's allocations as one report.
    pub(super) fn total(&mut self, options: &ValidateOptions) -> Result<ValidateReport> {
        if self.v.is_none() {
            self.v = Some(Validator::new(options, 1)?);
        }
        let Some(v) = self.v.as_mut() else {
            unreachable!("set above");
        };
        Ok(v.report(
            "total",
            TraceMark::default(),
            self.cpus_from.clone(),
            self.skipped.clone(),
            self.direct_mappings,
        ))
    }
}

/// How far this trace's times are from the session's first trace's (ns); checks that a later
/// trace has the first's CPU count and comes after it.
fn trace_offset<R: BufRead>(
    r: &FtraceReader<R>,
    origin: &mut Option<u64>,
    v: &Validator,
    path: &Path,
) -> Result<u64> {
    let first = r.first_timestamp_ns().unwrap_or(0);
    let Some(o) = *origin else {
        *origin = Some(first);
        return Ok(0);
    };
    if let Some(n) = r.header_cpus()
        && n as usize != v.cpus
    {
        return Err(error_at(
            path,
            r.line_number(),
            &format!(
                "a trace of the same boot as the ones before it ({} CPUs)",
                v.cpus
            ),
            format!("#P:{n}"),
        )
        .into());
    }
    if first < o {
        return Err(error_at(
            path,
            r.line_number(),
            "traces of one boot given in the order they were recorded (each starting after the first's start)",
            format!(
                "a first timestamp {:.6} s before the first trace's",
                (o - first) as f64 / 1e9
            ),
        )
        .into());
    }
    Ok(first - o)
}

fn add_skipped(total: &mut Skipped, s: &Skipped) {
    total.unclosed_map_runs += s.unclosed_map_runs;
    total.unclaimed_unmaps += s.unclaimed_unmaps;
    total.map_outside_run += s.map_outside_run;
    total.unknown_frees += s.unknown_frees;
    total.overlapping_allocations += s.overlapping_allocations;
    total.malformed_lines += s.malformed_lines;
}
