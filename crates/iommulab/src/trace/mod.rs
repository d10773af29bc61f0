//! DMA traces: the event model, the native binary format, CSV, Linux ftrace import,
//! statistics and export (docs/trace-format.md).
//!
//! Every reader is a stream ([`EventSource`]): a 100-million-event trace replays in constant
//! memory.

pub mod event;
pub mod ftrace;

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

pub use event::{Event, EventKind, TraceDir};

/// Errors reading or writing traces. Messages name the file, the line (text) or byte offset
/// (binary), and what was expected.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// A binary trace that is damaged: bad magic, unknown version, bad checksum, or a record
    /// that does not decode.
    #[error("{path}: corrupt trace at byte {offset}: {what}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// Byte offset of the problem (in the decompressed stream).
        offset: u64,
        /// What is wrong.
        what: String,
    },
    /// An I/O error.
    #[error("cannot read or write trace {path}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A text line that does not parse.
    #[error("{path}:{line}: expected {expected}, found {found:?}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: u64,
        /// What the parser expected.
        expected: String,
        /// The offending text (truncated to 120 characters).
        found: String,
    },
    /// A binary trace that ends in the middle of a record or before its trailer.
    #[error("{path}: truncated trace: ends at byte {offset} in the middle of {what}")]
    Truncated {
        /// The file.
        path: PathBuf,
        /// Byte offset where the data stopped.
        offset: u64,
        /// What was being read.
        what: String,
    },
    /// A format the file name or contents do not allow.
    #[error("{path}: {what}")]
    Unsupported {
        /// The file.
        path: PathBuf,
        /// What is unsupported, and what is.
        what: String,
    },
}

/// What a trace says about itself: its devices, and where it came from.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TraceHeader {
    /// Device names (`0000:3b:00.0`, `virtio0`, ...), indexed by [`Event::device`].
    pub devices: Vec<String>,
    /// Free text: the tool, kernel or workload that produced the trace.
    pub source: String,
}

/// A stream of trace events.
pub trait EventSource {
    /// The header (devices may grow while reading text formats; read it again at the end).
    fn header(&self) -> &TraceHeader;
    /// The next event, `Ok(None)` at a clean end.
    fn next_event(&mut self) -> Result<Option<Event>, TraceError>;
}
