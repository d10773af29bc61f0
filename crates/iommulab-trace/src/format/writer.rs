//! Writing a native trace: the header (with the first block, so creating a writer does no
//! I/O), blocks of [`EVENTS_PER_BLOCK`] events, and the trailer that [`NativeWriter::finish`]
//! writes.

use std::io::{self, Write};
use std::path::PathBuf;

use super::header::{event_problem, extend_devices};
use super::{EVENTS_PER_BLOCK, MAX_BLOCK_BYTES, TRAILER_MARK, block, crc_of, header};
use crate::{Event, TraceError, TraceHeader};

/// Writes a native trace. Events are buffered into blocks; nothing is complete until
/// [`NativeWriter::finish`] writes the trailer.
///
/// # Examples
///
/// ```
/// use iommulab_trace::{Event, EventKind, EventSource, TraceHeader};
/// use iommulab_trace::format::{NativeReader, NativeWriter};
///
/// let header = TraceHeader { devices: vec!["nvme0".into()], source: "doc".into() };
/// let mut w = NativeWriter::new(Vec::new(), &header).unwrap();
/// let mut e = Event::new(EventKind::Map);
/// e.dma = Some(0xffff_f000);
/// e.len = 4096;
/// w.write(&e).unwrap();
/// let bytes = w.finish().unwrap();
///
/// let mut r = NativeReader::new(&bytes[..], "mem.iot".into()).unwrap();
/// assert_eq!(r.header(), &header);
/// assert_eq!(r.next_event().unwrap(), Some(e));
/// assert_eq!(r.next_event().unwrap(), None);
/// ```
#[derive(Debug)]
pub struct NativeWriter<W: Write> {
    inner: W,
    path: PathBuf,
    devices: Vec<String>,
    /// Header bytes not yet written (written with the first block, so `new` does no I/O).
    pending: Vec<u8>,
    /// Device names declared since the last block: the next block's preamble.
    declared: Vec<String>,
    /// The open block's events.
    events: Vec<Event>,
    /// The encoded block payload (reused).
    block: Vec<u8>,
    /// One column's values, and its deltas (reused).
    values: Vec<u64>,
    deltas: Vec<u64>,
    total: u64,
}

impl<W: Write> NativeWriter<W> {
    /// A writer of a trace with `header` to `w`; errors name `<output>`.
    pub fn new(w: W, header: &TraceHeader) -> Result<Self, TraceError> {
        Self::with_path(w, header, PathBuf::from("<output>"))
    }

    /// A writer whose errors name `path`. Fails if the device table is invalid (see
    /// docs/trace-format.md: unique, non-empty names without `,` `"` or control characters).
    pub fn with_path(w: W, header: &TraceHeader, path: PathBuf) -> Result<Self, TraceError> {
        let pending = match header::encode(header) {
            Ok(bytes) => bytes,
            Err(what) => return Err(TraceError::Invalid { path, what }),
        };
        Ok(NativeWriter {
            inner: w,
            path,
            devices: header.devices.clone(),
            pending,
            declared: Vec::new(),
            events: Vec::with_capacity(EVENTS_PER_BLOCK as usize),
            block: Vec::with_capacity(64 * 1024),
            values: Vec::with_capacity(EVENTS_PER_BLOCK as usize),
            deltas: Vec::with_capacity(EVENTS_PER_BLOCK as usize),
            total: 0,
        })
    }

    /// The device table so far.
    pub fn devices(&self) -> &[String] {
        &self.devices
    }

    /// Events written so far.
    pub fn events(&self) -> u64 {
        self.total
    }

    /// Grows the device table to `devices` (which must start with the current table); the new
    /// names are declared in the preamble of the block being written.
    pub fn set_devices(&mut self, devices: &[String]) -> Result<(), TraceError> {
        let new = extend_devices(&self.devices, devices).map_err(|what| TraceError::Invalid {
            path: self.path.clone(),
            what,
        })?;
        self.declared.extend_from_slice(new);
        self.devices.extend_from_slice(new);
        Ok(())
    }

    /// Appends one event.
    pub fn write(&mut self, e: &Event) -> Result<(), TraceError> {
        if let Some(what) = event_problem(e, self.devices.len()) {
            return Err(TraceError::Invalid {
                path: self.path.clone(),
                what: format!("event {}: {what}", self.total),
            });
        }
        self.events.push(*e);
        self.total += 1;
        if self.events.len() >= EVENTS_PER_BLOCK as usize {
            self.flush_block()?;
        }
        Ok(())
    }

    fn io(&self, source: io::Error) -> TraceError {
        TraceError::Io {
            path: self.path.clone(),
            source,
        }
    }

    fn write_pending(&mut self) -> Result<(), TraceError> {
        if !self.pending.is_empty() {
            let r = self.inner.write_all(&self.pending);
            r.map_err(|e| self.io(e))?;
            self.pending = Vec::new();
        }
        Ok(())
    }

    /// Encodes the open block (docs/trace-format.md, "Blocks") and writes it.
    fn flush_block(&mut self) -> Result<(), TraceError> {
        self.write_pending()?;
        if self.events.is_empty() && self.declared.is_empty() {
            return Ok(());
        }
        block::encode(
            &mut self.block,
            &self.declared,
            &self.events,
            &mut self.values,
            &mut self.deltas,
        );
        self.declared.clear();
        let len = match u32::try_from(self.block.len()) {
            Ok(len) if len <= MAX_BLOCK_BYTES => len,
            _ => {
                return Err(TraceError::Invalid {
                    path: self.path.clone(),
                    what: format!(
                        "a block of {} bytes (device names declared at once too long); at most {MAX_BLOCK_BYTES}",
                        self.block.len()
                    ),
                });
            }
        };
        let count = u32::try_from(self.events.len())
            .unwrap_or(EVENTS_PER_BLOCK)
            .to_le_bytes();
        let len = len.to_le_bytes();
        let crc = crc_of(&[&count, &len, &self.block]).to_le_bytes();
        let mut head = [0u8; 12];
        head[..4].copy_from_slice(&count);
        head[4..8].copy_from_slice(&len);
        head[8..].copy_from_slice(&crc);
        let r = self
            .inner
            .write_all(&head)
            .and_then(|()| self.inner.write_all(&self.block));
        r.map_err(|e| self.io(e))?;
        self.events.clear();
        Ok(())
    }

    /// Writes the last block and the trailer, flushes, and returns the inner writer.
    pub fn finish(mut self) -> Result<W, TraceError> {
        self.flush_block()?;
        let mark = TRAILER_MARK.to_le_bytes();
        let total = self.total.to_le_bytes();
        let crc = crc_of(&[&mark, &total]).to_le_bytes();
        let mut t = [0u8; 16];
        t[..4].copy_from_slice(&mark);
        t[4..12].copy_from_slice(&total);
        t[12..].copy_from_slice(&crc);
        let r = self.inner.write_all(&t).and_then(|()| self.inner.flush());
        r.map_err(|e| self.io(e))?;
        Ok(self.inner)
    }
}
