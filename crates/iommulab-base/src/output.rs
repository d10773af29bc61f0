//! Writing a file the user named as output: the one mechanism every writer uses (trace
//! conversion, run and bench results, reports, figures).
//!
//! - `-` is standard output.
//! - A symbolic link is followed: the link stays, its target gets the content.
//! - A target that exists and is not a regular file (a device node such as `/dev/null` or
//!   `/dev/full`, a FIFO), or anything under `/dev` or `/proc` (`/dev/stdout` redirected to a
//!   file), is written in place: replacing it would delete the node.
//! - Anything else (a regular file, or a name not there yet) is written whole or not at all:
//!   a temporary file beside the target, renamed over it when complete, so a reader (or a
//!   run stopped half-way) never sees half an output. Missing parent folders are created.
//!
//! [`check`] applies the same rules before a run starts, so an output that cannot be written
//! fails in milliseconds rather than after the run.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::temp::InFlight;

/// An output that cannot be written: what was being done, to which path, and why.
#[derive(Debug, thiserror::Error)]
#[error("cannot {what} {}: {error}", path.display())]
pub struct OutputError {
    /// What was being done (`write`, `create folder`, ...).
    pub what: &'static str,
    /// The path it was done to.
    pub path: PathBuf,
    /// Why it failed (`No space left on device` for `/dev/full`). Not an error `source`: the
    /// message holds it, and an error chain would print it twice.
    pub error: io::Error,
}

impl OutputError {
    fn new(what: &'static str, path: &Path, error: io::Error) -> Self {
        OutputError {
            what,
            path: path.to_owned(),
            error,
        }
    }
}

impl From<OutputError> for io::Error {
    fn from(e: OutputError) -> Self {
        io::Error::new(e.error.kind(), e.to_string())
    }
}

/// Where an output's bytes go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Destination {
    /// `-`: standard output.
    Stdout,
    /// An existing node that is not a regular file (device, FIFO), written in place.
    InPlace(PathBuf),
    /// A regular file (or a new name), replaced atomically through a temporary file. The path
    /// is the symbolic link's final target when the name was a link.
    Replace(PathBuf),
}

impl Destination {
    /// The path written (`-` for standard output).
    pub fn path(&self) -> &Path {
        match self {
            Destination::Stdout => Path::new("-"),
            Destination::InPlace(p) | Destination::Replace(p) => p,
        }
    }

    /// Whether the output is a regular file (an extension in its name means something).
    pub fn is_regular(&self) -> bool {
        matches!(self, Destination::Replace(_))
    }
}

/// Whether `path` names standard output.
pub fn is_stdout(path: &Path) -> bool {
    path.as_os_str() == "-"
}

/// `path` with its symbolic links followed to the final name (which need not exist yet).
fn follow_links(path: &Path) -> io::Result<PathBuf> {
    let mut p = path.to_path_buf();
    // Linux's own limit on links followed in one lookup (ELOOP past it).
    for _ in 0..40 {
        match fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_symlink() => {
                let to = fs::read_link(&p)?;
                p = match p.parent() {
                    Some(dir) if to.is_relative() => dir.join(to),
                    _ => to,
                };
            }
            _ => return Ok(p),
        }
    }
    Err(io::Error::other("too many levels of symbolic links"))
}

/// Where `path`'s bytes will go (see the module doc). A folder is refused.
pub fn destination(path: &Path) -> Result<Destination, OutputError> {
    if is_stdout(path) {
        return Ok(Destination::Stdout);
    }
    // The kernel follows the links (including /proc's, such as /dev/stdout, whose targets
    // are no path); only a regular file's final name is needed, for the temporary file
    // beside it.
    match fs::metadata(path) {
        Ok(m) if m.is_dir() => Err(OutputError::new(
            "write",
            path,
            io::Error::new(io::ErrorKind::IsADirectory, "it is a folder; name a file"),
        )),
        // /dev/stdout to a file the shell opened (`> out`, `>> log`): the shell's open file
        // is written, not replaced by a new one.
        Ok(m) if m.is_file() && !(path.starts_with("/dev") || path.starts_with("/proc")) => {
            Ok(Destination::Replace(
                fs::canonicalize(path).map_err(|e| OutputError::new("follow", path, e))?,
            ))
        }
        Ok(_) => Ok(Destination::InPlace(path.to_owned())),
        // Not there yet, or a link to a name not there yet: the file it names is created.
        // (A file where a folder should be is reported when the folders are created, naming
        // that file.)
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
            ) =>
        {
            Ok(Destination::Replace(
                follow_links(path).map_err(|e| OutputError::new("follow", path, e))?,
            ))
        }
        Err(e) => Err(OutputError::new("inspect", path, e)),
    }
}

fn parent(path: &Path) -> &Path {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// A temporary name beside `target`, hidden, unique in the process, ending in `suffix`.
pub fn temp_beside(target: &Path, suffix: &str) -> PathBuf {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    parent(target).join(format!(".{name}.tmp-{}-{n}{suffix}", std::process::id()))
}

/// Creates `dir` and its missing parents (the one rule for every output).
fn create_parents(target: &Path) -> Result<(), OutputError> {
    let dir = parent(target);
    fs::create_dir_all(dir).map_err(|e| OutputError::new("create folder", dir, e))
}

/// Checks before a run that `path` can be written, by the same rules as [`Output::create`]:
/// creates missing parent folders and a temporary file beside a regular target (removed
/// again), opens a device for writing. A FIFO is not opened (that waits for a reader).
pub fn check(path: &Path) -> Result<Destination, OutputError> {
    let dest = destination(path)?;
    match &dest {
        Destination::Stdout => {}
        Destination::InPlace(p) => {
            if !is_fifo(p) {
                OpenOptions::new()
                    .write(true)
                    .open(p)
                    .map_err(|e| OutputError::new("write", p, e))?;
            }
        }
        Destination::Replace(p) => {
            create_parents(p)?;
            let probe = temp_beside(p, "");
            let tmp = InFlight::new(&probe);
            File::create(tmp.path()).map_err(|e| OutputError::new("create", tmp.path(), e))?;
            let _ = fs::remove_file(tmp.path());
        }
    }
    Ok(dest)
}

#[cfg(unix)]
fn is_fifo(p: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    fs::metadata(p).is_ok_and(|m| m.file_type().is_fifo())
}

#[cfg(not(unix))]
fn is_fifo(_: &Path) -> bool {
    false
}

#[derive(Debug)]
enum Sink {
    Stdout(io::Stdout),
    InPlace(File),
    Temp(File, InFlight),
}

/// An output being written (see the module doc). [`Output::commit`] finishes it; dropped
/// before that, a temporary file is removed and the target is left as it was.
#[derive(Debug)]
pub struct Output {
    sink: Option<Sink>,
    path: PathBuf,
}

impl Output {
    /// Opens `path` for writing by the module's rules.
    pub fn create(path: &Path) -> Result<Self, OutputError> {
        let sink = match destination(path)? {
            Destination::Stdout => Sink::Stdout(io::stdout()),
            Destination::InPlace(p) => Sink::InPlace(
                // No truncation, no creation: the node is written as it is.
                OpenOptions::new()
                    .write(true)
                    .open(&p)
                    .map_err(|e| OutputError::new("write", &p, e))?,
            ),
            Destination::Replace(p) => {
                create_parents(&p)?;
                let tmp = InFlight::new(&temp_beside(&p, ""));
                let f = File::create(tmp.path())
                    .map_err(|e| OutputError::new("create", tmp.path(), e))?;
                return Ok(Output {
                    sink: Some(Sink::Temp(f, tmp)),
                    path: p,
                });
            }
        };
        Ok(Output {
            sink: Some(sink),
            path: path.to_owned(),
        })
    }

    /// The path written: the final target of a link, `-` for standard output.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn writer(&mut self) -> io::Result<&mut dyn Write> {
        match self.sink.as_mut() {
            Some(Sink::Stdout(s)) => Ok(s),
            Some(Sink::InPlace(f)) | Some(Sink::Temp(f, _)) => Ok(f),
            None => Err(io::Error::other("write after commit")),
        }
    }

    /// Flushes the bytes; a temporary file is synced and renamed over the target.
    pub fn commit(mut self) -> Result<(), OutputError> {
        let path = self.path.clone();
        let err = |what, e| OutputError::new(what, &path, e);
        match self.sink.take() {
            Some(Sink::Stdout(mut s)) => s.flush().map_err(|e| err("write", e)),
            Some(Sink::InPlace(mut f)) => f.flush().map_err(|e| err("write", e)),
            Some(Sink::Temp(f, tmp)) => {
                let done = f
                    .sync_all()
                    .map_err(|e| err("write", e))
                    .and_then(|()| tmp.rename_into_place(&path).map_err(|e| err("rename", e)));
                if done.is_err() {
                    let _ = fs::remove_file(tmp.path());
                }
                done
            }
            None => Ok(()),
        }
    }
}

impl Drop for Output {
    fn drop(&mut self) {
        if let Some(Sink::Temp(_, tmp)) = &self.sink {
            let _ = fs::remove_file(tmp.path());
        }
    }
}

impl Write for Output {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.writer()?.write(buf)
    }
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.writer()?.write_all(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.writer()?.flush()
    }
}

/// Writes `bytes` to `path` by the module's rules, whole or not at all for a regular file.
pub fn write_output(path: &Path, bytes: &[u8]) -> Result<(), OutputError> {
    let mut out = Output::create(path)?;
    let target = out.path().to_owned();
    out.write_all(bytes)
        .map_err(|e| OutputError::new("write", &target, e))?;
    out.commit()
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    /// A fresh folder, and the registry's test lock (see `temp::TEST_REGISTRY`).
    fn dir() -> (PathBuf, std::sync::MutexGuard<'static, ()>) {
        let one = crate::temp::TEST_REGISTRY
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        static N: AtomicU64 = AtomicU64::new(0);
        let d = std::env::temp_dir().join(format!(
            "iommulab-output-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        fs::create_dir_all(&d).unwrap();
        (d, one)
    }

    fn names(d: &Path) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn a_regular_file_is_replaced_whole_and_parents_created() {
        let (d, _one) = dir();
        let p = d.join("a").join("b").join("x.json");
        check(&p).unwrap();
        write_output(&p, b"{}").unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"{}");
        assert_eq!(names(p.parent().unwrap()), ["x.json"]);
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_symlink_stays_and_its_target_gets_the_content() {
        let (d, _one) = dir();
        let target = d.join("real.txt");
        fs::write(&target, "old").unwrap();
        let link = d.join("link.txt");
        std::os::unix::fs::symlink("real.txt", &link).unwrap();
        write_output(&link, b"new").unwrap();
        assert!(
            fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(fs::read(&target).unwrap(), b"new");
        // A dangling link: the file it names is created.
        let dangling = d.join("dangling");
        std::os::unix::fs::symlink("later.txt", &dangling).unwrap();
        write_output(&dangling, b"x").unwrap();
        assert_eq!(fs::read(d.join("later.txt")).unwrap(), b"x");
        assert!(
            fs::symlink_metadata(&dangling)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn devices_are_written_in_place_and_a_full_one_says_so() {
        let (d, _one) = dir();
        fs::remove_dir(&d).unwrap();
        assert_eq!(
            check(Path::new("/dev/null")).unwrap(),
            Destination::InPlace("/dev/null".into())
        );
        write_output(Path::new("/dev/null"), b"x").unwrap();
        // A /proc link whose target is no path (a pipe, a terminal) is opened, not followed.
        assert!(matches!(
            check(Path::new("/dev/stdout")),
            Ok(Destination::InPlace(_) | Destination::Replace(_))
        ));
        let e = write_output(Path::new("/dev/full"), b"x").unwrap_err();
        assert_eq!(e.error.raw_os_error(), Some(28), "{e}");
        assert!(e.to_string().contains("/dev/full"), "{e}");
        use std::os::unix::fs::FileTypeExt;
        assert!(
            fs::metadata("/dev/null")
                .unwrap()
                .file_type()
                .is_char_device()
        );
    }

    #[test]
    fn a_folder_or_an_unwritable_place_fails_the_check() {
        let (d, _one) = dir();
        let e = check(&d).unwrap_err();
        assert!(e.to_string().contains("folder"), "{e}");
        // A file where a parent folder should be.
        fs::write(d.join("f"), "").unwrap();
        assert!(check(&d.join("f").join("x")).is_err());
        assert_eq!(names(&d), ["f"]);
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn dropping_before_commit_leaves_the_target_alone() {
        let (d, _one) = dir();
        let p = d.join("x");
        fs::write(&p, "old").unwrap();
        let mut o = Output::create(&p).unwrap();
        o.write_all(b"new").unwrap();
        drop(o);
        assert_eq!(fs::read(&p).unwrap(), b"old");
        assert_eq!(names(&d), ["x"]);
        fs::remove_dir_all(&d).unwrap();
    }
}
