//! Signals and a broken stderr: SIGINT, SIGTERM and SIGHUP end the process within a second
//! with 128 + the signal's number, their temporary files removed and no output written
//! afterwards, whether stderr is open or closed (a terminal hung up, a reader gone); an error
//! printed to a closed or full stderr still exits 1, not with a panic.
#![cfg(unix)]

use std::fs;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn spawn(args: &[&str], out: &Path, stderr_closed: bool) -> Child {
    let mut child = Command::new(assert_cmd::cargo::cargo_bin!("iommulab"))
        .args(args)
        .arg(out)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    if stderr_closed {
        // The read end goes away: every write to stderr fails with EPIPE.
        drop(child.stderr.take());
    }
    child
}

fn kill(child: &Child, signal: &str) {
    let status = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(child.id().to_string())
        .status()
        .unwrap();
    assert!(status.success());
}

/// The exit code, waiting at most a second after the signal.
fn exit_within_a_second(child: &mut Child, what: &str) -> Option<i32> {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status.code();
        }
        if start.elapsed() > Duration::from_secs(1) {
            let _ = child.kill();
            panic!("{what}: still running a second after the signal");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn names(dir: &Path) -> Vec<String> {
    fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

/// A trace being written (its temporary file has bytes), stopped by each signal with stderr
/// open and closed.
#[test]
fn every_signal_stops_a_writer_with_stderr_open_or_closed() {
    let args = [
        "trace",
        "generate",
        "uniform-random",
        "--events",
        "1000000000",
        "-q",
        "-o",
    ];
    for (signal, code) in [("INT", 130), ("TERM", 143), ("HUP", 129)] {
        for stderr_closed in [false, true] {
            let what = format!("SIG{signal}, stderr closed: {stderr_closed}");
            let dir = tempfile::tempdir().unwrap();
            let out = dir.path().join("big.iot");
            let mut child = spawn(&args, &out, stderr_closed);
            let start = Instant::now();
            while !fs::read_dir(dir.path())
                .unwrap()
                .any(|e| e.unwrap().metadata().unwrap().len() > 0)
            {
                assert!(
                    start.elapsed() < Duration::from_secs(60),
                    "{what}: no output"
                );
                std::thread::sleep(Duration::from_millis(10));
            }
            kill(&child, signal);
            assert_eq!(
                exit_within_a_second(&mut child, &what),
                Some(code),
                "{what}"
            );
            assert!(
                names(dir.path()).is_empty(),
                "{what}: {:?}",
                names(dir.path())
            );
        }
    }
}

/// A run whose output is written at its end: after a hang-up with stderr gone, the process
/// ends and the output never appears (before, the run went on and wrote it).
#[test]
fn a_hang_up_during_a_run_writes_no_output_afterwards() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("results.json");
    let args = [
        "bench",
        "-q",
        "--config",
        "modern",
        "--ops",
        "1000000000",
        "--out",
    ];
    let mut child = spawn(&args, &out, true);
    // The handler is installed before the output check, which runs before the bench.
    std::thread::sleep(Duration::from_millis(300));
    assert!(child.try_wait().unwrap().is_none(), "the bench ended early");
    kill(&child, "HUP");
    assert_eq!(exit_within_a_second(&mut child, "SIGHUP"), Some(129));
    std::thread::sleep(Duration::from_millis(200));
    assert!(names(dir.path()).is_empty(), "{:?}", names(dir.path()));
}

/// An error message that cannot be printed (stderr full or closed) still exits 1.
#[test]
fn an_error_to_a_full_or_closed_stderr_exits_1() {
    let bin = assert_cmd::cargo::cargo_bin!("iommulab");
    let full = Command::new(bin)
        .args(["trace", "stats", "/nonexistent/trace.iot"])
        .stderr(
            fs::OpenOptions::new()
                .write(true)
                .open("/dev/full")
                .unwrap(),
        )
        .status()
        .unwrap();
    assert_eq!(full.code(), Some(1));
    let mut closed = Command::new(bin)
        .args(["trace", "stats", "/nonexistent/trace.iot"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(closed.stderr.take());
    assert_eq!(closed.wait().unwrap().code(), Some(1));
}
