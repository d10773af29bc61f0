//! Output helpers: files are written whole or not at all (a temporary file in the same
//! folder, renamed into place), and the bench table.

use std::fs;
use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};
use iommulab::experiment::RunResult;

/// Writes `bytes` to `path` atomically: a temp file beside it, then a rename.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    fs::create_dir_all(dir).with_context(|| format!("cannot create folder {}", dir.display()))?;
    let name = path
        .file_name()
        .with_context(|| format!("{} is not a file path", path.display()))?;
    let tmp = dir.join(format!(
        ".{}.tmp-{}",
        name.to_string_lossy(),
        std::process::id()
    ));
    let result = write_then_rename(&tmp, path, bytes);
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

fn write_then_rename(tmp: &Path, path: &Path, bytes: &[u8]) -> Result<()> {
    let mut f =
        fs::File::create(tmp).with_context(|| format!("cannot create {}", tmp.display()))?;
    f.write_all(bytes)
        .with_context(|| format!("cannot write {}", tmp.display()))?;
    f.sync_all().ok();
    fs::rename(tmp, path).with_context(|| format!("cannot move {} into place", path.display()))
}

/// Results as CSV text.
pub fn csv(results: &[RunResult]) -> String {
    let mut s = String::from(RunResult::CSV_HEADER);
    s.push('\n');
    for r in results {
        s.push_str(&r.csv_row());
        s.push('\n');
    }
    s
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

/// The bench table: one row per result.
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
                fmt_count(iommulab::clock::saturating_u64(r.iops.round())),
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
    let widths: Vec<usize> = (0..header.len())
        .map(|i| {
            rows.iter()
                .map(|r| r[i].len())
                .chain([header[i].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
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

    #[test]
    fn atomic_write_leaves_no_temp_file() {
        let dir = std::env::temp_dir().join(format!("iommulab-out-{}", std::process::id()));
        let p = dir.join("x.json");
        write_atomic(&p, b"{}").unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"{}");
        let names: Vec<_> = fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 1, "{names:?}");
        fs::remove_dir_all(&dir).unwrap();
    }
}
