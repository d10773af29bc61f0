//! Files are written whole or not at all: a temporary file in the same folder, renamed into
//! place, so a reader (or a run killed half-way) never sees half a report
//! ([`iommulab::output`], the mechanism every output uses).

use std::fs;
use std::path::Path;

use iommulab::experiment::RunResult;
use serde::Serialize;

use crate::ReportError;

/// Creates `dir` and its parents.
pub(crate) fn create_dir(dir: &Path) -> Result<(), ReportError> {
    fs::create_dir_all(dir).map_err(|source| ReportError::CreateDir {
        path: dir.to_path_buf(),
        source,
    })
}

/// Writes `bytes` to `path` through the one output mechanism ([`iommulab::output`]): a
/// regular file whole or not at all (a temporary file beside it, renamed into place), a link's
/// target, a device in place, `-` to standard output. Creates missing folders.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), ReportError> {
    Ok(iommulab::output::write_output(path, bytes)?)
}

/// `value` as pretty JSON (two-space indent, no final newline), written atomically.
pub fn write_json<T: Serialize + ?Sized>(path: &Path, value: &T) -> Result<(), ReportError> {
    let text = serde_json::to_string_pretty(value).map_err(|source| ReportError::Json {
        path: path.to_path_buf(),
        source,
    })?;
    write_atomic(path, text.as_bytes())
}

/// Run results as CSV text: [`RunResult::CSV_HEADER`], then one row per run.
pub fn runs_csv(results: &[RunResult]) -> String {
    let mut s = String::from(RunResult::CSV_HEADER);
    s.push('\n');
    for r in results {
        s.push_str(&r.csv_row());
        s.push('\n');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_write_leaves_no_temp_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("sub").join("x.json");
        write_atomic(&p, b"{}").unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"{}");
        let names: Vec<_> = fs::read_dir(p.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 1, "{names:?}");
    }

    #[test]
    fn a_folder_path_is_refused_and_no_temp_file_stays() {
        let dir = tempfile::tempdir().unwrap();
        // `dir` itself exists as a folder: the rename onto it fails.
        let e = write_atomic(dir.path(), b"x").unwrap_err().to_string();
        assert!(!e.is_empty());
        let stray: Vec<_> = fs::read_dir(dir.path().parent().unwrap())
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().contains(".tmp-"))
            .filter(|e| {
                e.file_name()
                    .to_string_lossy()
                    .contains(&*dir.path().file_name().unwrap().to_string_lossy())
            })
            .collect();
        assert!(stray.is_empty());
    }
}
