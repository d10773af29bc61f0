//! The `iommulab` command-line tool: thin argument parsing and output around the library.

mod args;
mod cmd;
mod output;
mod progress;
mod signals;

use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;
use clap::Parser;

use args::{Cli, Command};

/// Prints to stdout; a closed pipe (`| head`) is not an error (ripgrep).
pub(crate) fn print_stdout(text: &str) -> Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => Ok(r?),
    }
}

fn run(cli: Cli) -> Result<ExitCode> {
    let done = Ok(ExitCode::SUCCESS);
    match cli.command {
        Command::Check(a) => cmd::check::run(&a),
        Command::Validate(a) => cmd::validate::run(&a),
        Command::Bench(a) => cmd::bench::run(&a, cli.quiet).and(done),
        Command::Reproduce(a) => cmd::reproduce::run(&a, cli.quiet).and(done),
        Command::Run(a) => cmd::run::run(&a, cli.quiet).and(done),
        Command::Replay(a) => cmd::replay::run(&a, cli.quiet).and(done),
        Command::Compare(a) => cmd::compare::run(&a, cli.quiet).and(done),
        Command::Mrc(a) => cmd::mrc::run(&a, cli.quiet).and(done),
        Command::Expether(a) => cmd::expether::run(&a).and(done),
        Command::Iosup(a) => cmd::iosup::run(&a, cli.quiet).and(done),
        Command::Trace { command } => cmd::trace::run(&command, cli.quiet).and(done),
        Command::Completions { shell } => {
            use clap::CommandFactory;
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "iommulab", &mut script);
            print_stdout(&String::from_utf8_lossy(&script)).and(done)
        }
    }
}

fn main() -> ExitCode {
    // clap exits with code 2 and a clear message for a bad flag or value.
    let cli = Cli::parse();
    signals::stop_on_signal();
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            // Not `eprintln!`: it panics (exit 101) when stderr is closed or full; the exit
            // code still says what happened.
            let _ = writeln!(std::io::stderr(), "error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
