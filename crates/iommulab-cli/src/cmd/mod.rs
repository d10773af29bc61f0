//! One file per subcommand.

pub mod bench;
pub mod check;
pub mod compare;
pub mod expether;
pub mod iosup;
pub mod mrc;
pub mod replay;
pub mod reproduce;
pub mod run;
pub mod trace;
pub mod validate;

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow};

/// A configuration file's text. Bytes that are not UTF-8 are named by line and byte offset
/// (`read_to_string` said only "stream did not contain valid UTF-8").
pub fn read_text(path: &Path) -> Result<String> {
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        let bytes = e.as_bytes();
        let line = bytes[..at].iter().filter(|&&b| b == b'\n').count() + 1;
        anyhow!(
            "{}:{line}: expected UTF-8 text, found byte {:#04x} at byte offset {at}",
            path.display(),
            bytes[at]
        )
    })
}

/// A run of a model's own command (`expether`, `iosup`): its `--out` files checked first,
/// then the run file's text (if any) and `--set`s read into `T`'s schema (a plain NAME into
/// `default_table`), an error naming the file or `--set`.
pub fn load_run<T: serde::de::DeserializeOwned>(
    config: Option<&Path>,
    sets: &[String],
    default_table: Option<&str>,
    out: &[PathBuf],
    command: &str,
) -> Result<T> {
    let inputs: Vec<(&str, &Path)> = config.iter().map(|p| ("the run file", *p)).collect();
    crate::output::refuse_csv_outs(out, command)?;
    crate::output::prepare_outputs(&crate::output::out_flags(out), &inputs)?;
    let text = config.map(read_text).transpose()?;
    iommulab::experiment::run_file::load_with_sets(config, text.as_deref(), sets, default_table)
        .with_context(|| match config {
            Some(p) => format!("in {}", p.display()),
            None => "in --set".into(),
        })
}
