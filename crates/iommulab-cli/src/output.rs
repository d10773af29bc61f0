//! Output helpers: the bench table, and the checks every output passes before a run starts
//! (not also an input, writable). Files are written through one mechanism,
//! `iommulab::output` (via `iommulab_report::write_atomic`): a regular file whole or not at
//! all (a temporary file in the same folder, renamed into place), a link's target, a device
//! or FIFO in place, `-` to standard output.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use iommulab::experiment::RunResult;

pub use iommulab_report::{runs_csv as csv, write_atomic};

/// The file `p` names, as far as it can be known before it exists: its canonical path, or its
/// folder's canonical path and its name (an output is often not there yet).
fn identity(p: &Path) -> PathBuf {
    if let Ok(c) = std::fs::canonicalize(p) {
        return c;
    }
    let dir = match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    match (std::fs::canonicalize(dir), p.file_name()) {
        (Ok(d), Some(name)) => d.join(name),
        _ => std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf()),
    }
}

/// Checks every output before anything runs, so a run is not lost to an output it cannot
/// write: refuses an output that names one of the inputs or another output (the rename into
/// place would replace it with no warning), then checks each can be written
/// (`iommulab::output::check`: creates missing parent folders, probes the folder). Each entry
/// is the flag or role that names the path, and the path. A device or FIFO may be named
/// twice (`--out /dev/null --csv /dev/null`): nothing is replaced.
pub fn prepare_outputs(outputs: &[(&str, &Path)], inputs: &[(&str, &Path)]) -> Result<()> {
    refuse_overlap(outputs, inputs)?;
    for &(flag, out) in outputs {
        iommulab::output::check(out).with_context(|| format!("{flag} {}", out.display()))?;
    }
    Ok(())
}

fn refuse_overlap(outputs: &[(&str, &Path)], inputs: &[(&str, &Path)]) -> Result<()> {
    for (i, &(flag, out)) in outputs.iter().enumerate() {
        if iommulab::output::destination(out).is_ok_and(|d| !d.is_regular()) {
            continue;
        }
        let id = identity(out);
        let others = inputs
            .iter()
            .map(|&(what, p)| (what, p, "writing it would replace it"))
            .chain(
                outputs[i + 1..]
                    .iter()
                    .map(|&(what, p)| (what, p, "one would replace the other")),
            );
        for (what, p, consequence) in others {
            if identity(p) == id {
                bail!(
                    "{flag} {} is the same file as {what} {}: {consequence}; \
                     choose another output file",
                    out.display(),
                    p.display()
                );
            }
        }
    }
    Ok(())
}

fn fmt_count(v: u64) -> String {
    let s = v.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The line above every table: the cost preset its numbers are priced with.
pub fn preset_line<'a>(presets: impl IntoIterator<Item = &'a str>) -> String {
    let mut names: Vec<&str> = Vec::new();
    for p in presets {
        if !names.contains(&p) {
            names.push(p);
        }
    }
    if names.is_empty() {
        return String::new();
    }
    format!("preset: {}\n", names.join(", "))
}

/// The width of each column: its widest cell or its header.
pub fn column_widths(header: &[&str], rows: &[Vec<String>]) -> Vec<usize> {
    (0..header.len())
        .map(|i| {
            rows.iter()
                .map(|r| r[i].len())
                .chain([header[i].len()])
                .max()
                .unwrap_or(0)
        })
        .collect()
}

/// Checks a trace command's `--out` files before the run, against its inputs: the trace and
/// the `--config-file`, if any.
pub fn prepare_trace_outputs(
    outs: &[PathBuf],
    trace: &Path,
    config_file: Option<&Path>,
) -> Result<()> {
    let mut inputs = vec![("the trace", trace)];
    inputs.extend(config_file.map(|p| ("--config-file", p)));
    prepare_outputs(&out_flags(outs), &inputs)
}

/// The `--out` files as `prepare_outputs` names them.
pub fn out_flags(outs: &[PathBuf]) -> Vec<(&'static str, &Path)> {
    outs.iter().map(|p| ("--out", p.as_path())).collect()
}

/// What an `--out` file holds, chosen by its name: CSV for a name ending in `.csv`, JSON for
/// any other (`-`, standard output, included). One meaning on every command that writes
/// results.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutFormat {
    /// The command's `--json` output.
    Json,
    /// The command's `--csv` output.
    Csv,
}

impl OutFormat {
    /// The format `path`'s name picks.
    pub fn of(path: &Path) -> Self {
        if path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("csv"))
        {
            OutFormat::Csv
        } else {
            OutFormat::Json
        }
    }
}

/// Refuses, before a run, an `--out FILE.csv` on a command (or a mode of one) that has no CSV
/// form.
pub fn refuse_csv_outs(outs: &[PathBuf], what: &str) -> Result<()> {
    if let Some(p) = outs.iter().find(|p| OutFormat::of(p) == OutFormat::Csv) {
        bail!(
            "--out {}: {what} has no CSV form (a `.csv` name asks for CSV); name the file              something else to get JSON",
            p.display()
        );
    }
    Ok(())
}

/// Writes each `--out` file whole, in the format its name picks: `json` or `csv` (the text
/// `--json` or `--csv` prints). A command without a CSV form passes `None` and has refused
/// `.csv` names before its run ([`refuse_csv_outs`]).
pub fn write_outs(outs: &[PathBuf], json: &str, csv: Option<&str>) -> Result<()> {
    for p in outs {
        let text = match (OutFormat::of(p), csv) {
            (OutFormat::Json, _) => json,
            (OutFormat::Csv, Some(c)) => c,
            (OutFormat::Csv, None) => {
                bail!(
                    "internal: --out {} asks for CSV, which this has not",
                    p.display()
                )
            }
        };
        write_atomic(p, text.as_bytes()).with_context(|| format!("--out {}", p.display()))?;
    }
    Ok(())
}

/// Pretty JSON with a final newline: one object for one item, an array for several (what
/// `--json` prints for one or several configurations).
pub fn json_one_or_many<T: serde::Serialize>(items: &[T]) -> Result<String> {
    let mut t = match items {
        [one] => serde_json::to_string_pretty(one)?,
        many => serde_json::to_string_pretty(many)?,
    };
    t.push('\n');
    Ok(t)
}

/// Pretty JSON with a final newline.
pub fn json_text<T: serde::Serialize + ?Sized>(value: &T) -> Result<String> {
    let mut t = serde_json::to_string_pretty(value)?;
    t.push('\n');
    Ok(t)
}

/// The bench table: the preset line, then one row per result.
pub fn table(results: &[RunResult]) -> String {
    let header = [
        "config",
        "ops",
        "sw ns/op",
        "model ns/op",
        "hw ns/op",
        "IOPS",
        "vs off",
        "inval",
        "flushes",
        "meta KiB",
        "stale",
        "faults",
    ];
    let rows: Vec<Vec<String>> = results
        .iter()
        .map(|r| {
            vec![
                r.config.clone(),
                fmt_count(r.ops),
                format!("{:.1}", r.software_ns_per_op),
                format!("{:.1}", r.modeled_ns_per_op),
                format!("{:.1}", r.modeled_hw_ns_per_op),
                // A Xen PV run models the DMA path's cycles but no I/O rate (its `iops` is
                // 0 by definition), so the column says so instead of a rate of 0.
                if r.xen_pv.is_some() {
                    "-".into()
                } else {
                    fmt_count(iommulab::clock::saturating_u64(r.iops.round()))
                },
                r.relative_to_disabled
                    .map(|v| format!("{v:.3}"))
                    .unwrap_or_else(|| "-".into()),
                fmt_count(r.iotlb_invalidations),
                fmt_count(r.iotlb_flushes),
                format!("{:.1}", r.peak_metadata_bytes as f64 / 1024.0),
                fmt_count(r.stale_accesses),
                fmt_count(r.faults),
            ]
        })
        .collect();
    let widths = column_widths(&header, &rows);
    let mut out = preset_line(results.iter().map(|r| r.cost_preset.as_str()));
    let line = |cells: &[&str], out: &mut String| {
        for (i, c) in cells.iter().enumerate() {
            if i == 0 {
                out.push_str(&format!("{:<w$}", c, w = widths[i]));
            } else {
                out.push_str(&format!("  {:>w$}", c, w = widths[i]));
            }
        }
        out.push('\n');
    };
    line(&header, &mut out);
    for r in &rows {
        let cells: Vec<&str> = r.iter().map(String::as_str).collect();
        line(&cells, &mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_get_thousands_separators() {
        assert_eq!(fmt_count(0), "0");
        assert_eq!(fmt_count(999), "999");
        assert_eq!(fmt_count(124_337), "124,337");
        assert_eq!(fmt_count(1_000_000), "1,000,000");
    }
}
