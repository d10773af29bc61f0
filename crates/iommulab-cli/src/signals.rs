//! Stopping on SIGINT, SIGTERM and SIGHUP: remove the temporary files being written (a trace
//! conversion, a report, a figure), say so if stderr still takes it, and exit with 128 + the
//! signal's number as a shell reports it (130, 143, 129). Without this the default action
//! killed the process mid-write and left the hidden temporary file behind.
//!
//! The work is done on a thread of its own (signal-hook's iterator), not in the signal
//! handler, and nothing in it can panic: the message is written with `write_all` and its
//! error ignored, so a closed or full stderr (a terminal hung up, `2>&-`, a pipe whose
//! reader is gone) cannot keep the process running.

use std::io::Write;

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

/// Installs the handling before returning. The handlers are registered on the thread that
/// reads them: if it cannot be started, or they cannot be registered, the default action
/// stays (which also ends the process, leaving temporary files behind).
pub fn stop_on_signal() {
    let (ready, installed) = std::sync::mpsc::sync_channel(1);
    let spawned = std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            let signals = Signals::new([SIGINT, SIGTERM, SIGHUP]);
            let _ = ready.send(());
            if let Some(signal) = signals.ok().and_then(|mut s| s.forever().next()) {
                stop(signal);
            }
        });
    if spawned.is_ok() {
        // The handlers are in place before any output is written.
        let _ = installed.recv();
    }
}

/// Removes the temporary files and exits; the registry's lock is held until the exit, so no
/// writer renames a file into place after this.
fn stop(signal: i32) -> ! {
    let (removed, _held) = iommulab::temp::remove_in_flight();
    let message = if removed > 0 {
        format!("\ninterrupted: removed {removed} unfinished output file(s)\n")
    } else {
        "\ninterrupted\n".to_owned()
    };
    let _ = std::io::stderr().write_all(message.as_bytes());
    std::process::exit(128 + signal)
}
