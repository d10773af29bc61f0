//! DMA traces: the event model, the native binary format, CSV, Linux ftrace import,
//! statistics and export (docs/trace-format.md).
//!
//! Every reader is a stream ([`EventSource`]): a 100-million-event trace replays in constant
//! memory.

#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations)]

// The layers below are named by their crate paths (`iommulab_base::addr::Iova`), never aliased as
// local modules: a crate names only what its manifest lists, so the compiler enforces the layering
// (docs/architecture.md).

pub mod check;
pub mod csv;
pub mod event;
pub mod event_columns;
pub mod format;
pub mod ftrace;
pub mod io;
pub mod open;
pub mod oracle_general;
pub mod page_ids;
pub mod pages;
pub mod stack_distance;
pub mod stats;
mod stats_iommu;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub use csv::{CsvReader, CsvWriter};
pub use event::{Event, EventKind, TraceDir};
pub use event_columns::EventColumns;
pub use format::{NativeReader, NativeWriter};
pub use io::{EventSink, OutputFile, convert, copy_events, create_trace, open_text, open_trace};
pub use open::{TraceFormat, detect, open, open_ftrace, resolve};
pub use stats::{DeviceStats, DmaApiStats, IommuLayerStats, Log2Histogram, TraceStats, stats};

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
    /// An event or header that a trace cannot hold (unknown device index, duplicate device
    /// name, `nents` on a kind without segments, ...): a bug in the producer, found on write.
    #[error("{path}: cannot write trace: {what}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong, with the event's index.
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
    /// A text trace (CSV) that ends before its column line: empty, or only comments.
    #[error("{path}: ends after {lines} lines, before its column line {columns}")]
    NoColumns {
        /// The file.
        path: PathBuf,
        /// Lines read (0: the file is empty).
        lines: u64,
        /// The column line expected.
        columns: &'static str,
    },
    /// A trace whose replay would have no I/O: no DMA-API map, unmap or access event that
    /// makes an op (an unmap of nothing mapped makes none).
    #[error(
        "{path}: nothing to replay: no DMA-API map, unmap or access event that makes an op \
         ({events} events read)"
    )]
    NoDmaEvents {
        /// The file (`<trace>` for a source that is not one).
        path: PathBuf,
        /// Events read (all of them skipped, e.g. the IOMMU layer's).
        events: u64,
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

    /// The number of CPUs the trace says the machine had, if it says (ftrace's `#P:N`; known
    /// once the header has been read, i.e. after the first event).
    fn cpu_count(&self) -> Option<u32> {
        None
    }

    /// The file being read, if the source is one (for messages about the whole trace).
    fn source_path(&self) -> Option<&Path> {
        None
    }

    /// Replaces `out`'s contents with the next events (up to a few thousand), returning how
    /// many: 0 only at a clean end. Sources that decode in blocks (the native format) hand a
    /// whole block over at once; a loop over batches pays one call per block instead of one
    /// per event, which is what hot consumers (replay, statistics, conversion) use.
    fn read_batch(&mut self, out: &mut Vec<Event>) -> Result<usize, TraceError> {
        out.clear();
        while out.len() < BATCH {
            match self.next_event()? {
                Some(e) => out.push(e),
                None => break,
            }
        }
        Ok(out.len())
    }

    /// [`read_batch`](Self::read_batch), field by field: replaces `out`'s contents with the
    /// next events, returning how many (0 only at a clean end). The native reader hands its
    /// decoded columns over without assembling rows; the replay reads only the fields it
    /// uses. Other sources read a batch of rows and split it.
    fn read_columns(&mut self, out: &mut EventColumns) -> Result<usize, TraceError> {
        let mut rows = std::mem::take(&mut out.rows);
        let r = self.read_batch(&mut rows);
        out.clear();
        if r.is_ok() {
            out.extend_rows(&rows);
        }
        out.rows = rows;
        r
    }
}

/// Events per [`EventSource::read_batch`] of sources without a block structure of their own.
pub const BATCH: usize = 4096;

/// Events held in memory, as an [`EventSource`] (tests, small generated traces, Python).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemorySource {
    header: TraceHeader,
    events: Vec<Event>,
    pos: usize,
}

impl MemorySource {
    /// A source over `events` with device table `header`.
    pub fn new(header: TraceHeader, events: Vec<Event>) -> Self {
        Self {
            header,
            events,
            pos: 0,
        }
    }
}

impl EventSource for MemorySource {
    fn header(&self) -> &TraceHeader {
        &self.header
    }

    fn next_event(&mut self) -> Result<Option<Event>, TraceError> {
        let e = self.events.get(self.pos).copied();
        self.pos += usize::from(e.is_some());
        Ok(e)
    }

    fn read_batch(&mut self, out: &mut Vec<Event>) -> Result<usize, TraceError> {
        let rest = &self.events[self.pos..];
        let batch = &rest[..rest.len().min(BATCH)];
        out.clear();
        out.extend_from_slice(batch);
        self.pos += batch.len();
        Ok(batch.len())
    }
}

impl<S: EventSource + ?Sized> EventSource for Box<S> {
    fn header(&self) -> &TraceHeader {
        (**self).header()
    }

    fn next_event(&mut self) -> Result<Option<Event>, TraceError> {
        (**self).next_event()
    }

    fn read_batch(&mut self, out: &mut Vec<Event>) -> Result<usize, TraceError> {
        (**self).read_batch(out)
    }

    fn read_columns(&mut self, out: &mut EventColumns) -> Result<usize, TraceError> {
        (**self).read_columns(out)
    }

    fn cpu_count(&self) -> Option<u32> {
        (**self).cpu_count()
    }

    fn source_path(&self) -> Option<&Path> {
        (**self).source_path()
    }
}
