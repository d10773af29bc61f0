//! Opening any trace the CLI and Python accept: native `.iot`, CSV, or Linux ftrace text,
//! each optionally `.gz`/`.zst` compressed, by content (or by an explicit format).

use std::io::BufRead;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::ftrace::{FtraceOptions, FtraceReader};
use super::io::{open_text, open_trace};
use super::{EventSource, TraceError};

/// A trace format to read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum TraceFormat {
    /// Decide from the contents: the native magic, our CSV banner or column line, otherwise
    /// ftrace text.
    #[default]
    Auto,
    /// iommulab native binary (`.iot`).
    Native,
    /// iommulab CSV.
    Csv,
    /// Linux ftrace text (`/sys/kernel/tracing/trace`, `trace_pipe`, `trace-cmd report`).
    Ftrace,
}

/// Opens `path` as Linux ftrace text (decompressing transparently).
pub fn open_ftrace(
    path: &Path,
    lenient: bool,
) -> Result<FtraceReader<Box<dyn BufRead>>, TraceError> {
    Ok(FtraceReader::new(
        open_text(path)?,
        path.to_owned(),
        FtraceOptions { lenient },
    ))
}

/// The format of `path`'s contents (never `Auto`).
pub fn detect(path: &Path) -> Result<TraceFormat, TraceError> {
    match open_trace(path) {
        Ok(_) => {
            let mut r = open_text(path)?;
            let head = r.fill_buf().map_err(|source| TraceError::Io {
                path: path.to_owned(),
                source,
            })?;
            Ok(if head.starts_with(&super::format::MAGIC) {
                TraceFormat::Native
            } else {
                TraceFormat::Csv
            })
        }
        Err(TraceError::Unsupported { .. }) => Ok(TraceFormat::Ftrace),
        Err(e) => Err(e),
    }
}

/// Opens any trace as a stream of events. `lenient` skips malformed ftrace lines.
pub fn open(
    path: &Path,
    format: TraceFormat,
    lenient: bool,
) -> Result<Box<dyn EventSource>, TraceError> {
    match format {
        TraceFormat::Native | TraceFormat::Csv => open_trace(path),
        TraceFormat::Ftrace => Ok(Box::new(open_ftrace(path, lenient)?)),
        TraceFormat::Auto => match open_trace(path) {
            Err(TraceError::Unsupported { .. }) => Ok(Box::new(open_ftrace(path, lenient)?)),
            other => other,
        },
    }
}
