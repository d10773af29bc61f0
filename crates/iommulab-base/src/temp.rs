//! Temporary files in flight. Every writer that builds a file under a temporary name and
//! renames it into place (trace conversion, reports, figures) holds an [`InFlight`] for the
//! name while it writes, so a process stopped by a signal can remove them all
//! ([`remove_in_flight`], called by the CLI's handler) instead of leaving hidden files behind.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};

/// The temporary names being written, in every thread of the process.
static IN_FLIGHT: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

fn registry() -> MutexGuard<'static, Vec<PathBuf>> {
    // A writer that panicked left the list as it was: still a list of names.
    IN_FLIGHT.lock().unwrap_or_else(PoisonError::into_inner)
}

fn forget(list: &mut Vec<PathBuf>, path: &Path) {
    if let Some(i) = list.iter().rposition(|p| p == path) {
        list.swap_remove(i);
    }
}

/// A temporary file's registration, from before it is created until it is renamed into
/// place or dropped (the owner removes the file on its error paths, as before).
#[derive(Debug)]
pub struct InFlight {
    path: PathBuf,
}

impl InFlight {
    /// Registers `path` (call before creating the file).
    pub fn new(path: &Path) -> Self {
        registry().push(path.to_owned());
        InFlight {
            path: path.to_owned(),
        }
    }

    /// The temporary name.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Renames the file to `target` under the registry's lock, so [`remove_in_flight`] sees
    /// either the temporary file or none: it never removes a name a rename is about to use,
    /// and no rename follows it.
    pub fn rename_into_place(&self, target: &Path) -> io::Result<()> {
        let mut list = registry();
        fs::rename(&self.path, target)?;
        forget(&mut list, &self.path);
        Ok(())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        forget(&mut registry(), &self.path);
    }
}

/// Removes every temporary file in flight and returns the registry's lock: hold it until the
/// process exits, so no writer renames a file into place afterwards. Returns the number of
/// files removed with the lock.
pub fn remove_in_flight() -> (usize, MutexGuard<'static, Vec<PathBuf>>) {
    let mut list = registry();
    let removed = list
        .drain(..)
        .filter(|p| fs::remove_file(p).is_ok())
        .count();
    (removed, list)
}

/// Held by the tests that register temporary files: [`remove_in_flight`] in one test would
/// remove another's.
#[cfg(test)]
pub(crate) static TEST_REGISTRY: Mutex<()> = Mutex::new(());

#[cfg(test)]
mod tests {
    use super::*;

    /// One test holds the process-wide registry, so the steps run in order in it.
    #[test]
    fn in_flight_files_are_removed_and_finished_ones_kept() {
        let _one = TEST_REGISTRY.lock().unwrap_or_else(PoisonError::into_inner);
        let dir = std::env::temp_dir().join(format!("iommulab-temp-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let done = InFlight::new(&dir.join(".a.tmp"));
        fs::write(done.path(), "a").unwrap();
        done.rename_into_place(&dir.join("a")).unwrap();
        let open = InFlight::new(&dir.join(".b.tmp"));
        fs::write(open.path(), "b").unwrap();
        let dropped = InFlight::new(&dir.join(".c.tmp"));
        fs::write(dropped.path(), "c").unwrap();
        drop(dropped);
        let (removed, list) = remove_in_flight();
        assert_eq!(removed, 1);
        assert!(list.is_empty());
        drop(list);
        let mut left: Vec<String> = fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        // `.c.tmp` was dropped, not removed: its owner's error path removes it.
        assert_eq!(left, [".c.tmp", "a"]);
        drop(open);
        fs::remove_dir_all(&dir).unwrap();
    }
}
