//! Reading a native trace as a stream: the header, then one block at a time (checked against
//! its CRC, then decoded by [`super::block`]), then the trailer's event count.

use std::io::{self, Read};
use std::path::{Path, PathBuf};

use super::block::{self, Columns, Decoded};
use super::columns::PAD;
use super::{
    EVENTS_PER_BLOCK, MAX_BLOCK_BYTES, MAX_BLOCK_EVENTS, TRAILER_MARK, crc_of, fill, header,
};
use crate::{Event, EventColumns, EventSource, TraceError, TraceHeader};

/// Reads a native trace as a stream: one block in memory at a time, decoded column by column
/// into a batch of events ([`EventSource::read_batch`] hands that batch over without a copy).
#[derive(Debug)]
pub struct NativeReader<R: Read> {
    inner: R,
    path: PathBuf,
    header: TraceHeader,
    /// Bytes consumed from `inner` (the decompressed stream).
    offset: u64,
    /// Stream offset of `block[0]`.
    block_start: u64,
    /// The current block's payload, followed by [`PAD`] bytes.
    block: Vec<u8>,
    /// Payload bytes in `block`.
    block_len: usize,
    /// Events the current block declares.
    block_events: usize,
    cols: Columns,
    /// The decoded batch `next_event` serves from, and its next index.
    decoded: Vec<Event>,
    next: usize,
    /// Events in the blocks loaded so far (checked against the trailer).
    loaded: u64,
    /// Events returned so far.
    returned: u64,
    done: bool,
    failed: bool,
}

impl<R: Read> NativeReader<R> {
    /// Reads and checks the header of the trace in `r`. `path` names the file in errors only.
    pub fn new(mut r: R, path: PathBuf) -> Result<Self, TraceError> {
        let (header, offset) = header::read(&mut r, &path)?;
        Ok(NativeReader {
            inner: r,
            path,
            header,
            offset,
            block_start: offset,
            block: Vec::with_capacity(64 * 1024),
            block_len: 0,
            block_events: 0,
            cols: Columns::default(),
            decoded: Vec::with_capacity(EVENTS_PER_BLOCK as usize),
            next: 0,
            loaded: 0,
            returned: 0,
            done: false,
            failed: false,
        })
    }

    /// Events returned so far.
    pub fn events(&self) -> u64 {
        self.returned
    }

    /// Consumes the reader, returning the inner reader.
    pub fn into_inner(self) -> R {
        self.inner
    }

    fn io(&self, source: io::Error) -> TraceError {
        TraceError::Io {
            path: self.path.clone(),
            source,
        }
    }

    #[cold]
    fn corrupt(&self, offset: u64, what: impl Into<String>) -> TraceError {
        TraceError::Corrupt {
            path: self.path.clone(),
            offset,
            what: what.into(),
        }
    }

    #[cold]
    fn truncated(&self, offset: u64, what: &str) -> TraceError {
        TraceError::Truncated {
            path: self.path.clone(),
            offset,
            what: what.to_owned(),
        }
    }

    /// Reads `buf.len()` bytes or reports truncation in `what`.
    fn read_exact_at(&mut self, buf: &mut [u8], what: &str) -> Result<(), TraceError> {
        let got = fill(&mut self.inner, buf).map_err(|e| self.io(e))?;
        if got < buf.len() {
            return Err(self.truncated(self.offset + got as u64, what));
        }
        self.offset += got as u64;
        Ok(())
    }

    /// Loads the next block into `block`, or reads the trailer and sets `done`.
    fn load_block(&mut self) -> Result<(), TraceError> {
        let head_at = self.offset;
        let mut mark = [0u8; 4];
        self.read_exact_at(&mut mark, "a block header or the trailer")?;
        let count = u32::from_le_bytes(mark);
        if count == TRAILER_MARK {
            let mut rest = [0u8; 12];
            self.read_exact_at(&mut rest, "the trailer")?;
            let total = u64::from_le_bytes(rest[..8].try_into().unwrap_or_default());
            let crc = u32::from_le_bytes(rest[8..].try_into().unwrap_or_default());
            if crc_of(&[&mark, &rest[..8]]) != crc {
                return Err(self.corrupt(head_at, "trailer checksum mismatch"));
            }
            if total != self.loaded {
                return Err(self.corrupt(
                    head_at,
                    format!(
                        "the trailer counts {total} events but the blocks hold {}",
                        self.loaded
                    ),
                ));
            }
            let mut extra = [0u8; 1];
            let got = fill(&mut self.inner, &mut extra).map_err(|e| self.io(e))?;
            if got != 0 {
                return Err(self.corrupt(self.offset, "data after the trailer"));
            }
            self.done = true;
            return Ok(());
        }
        let mut rest = [0u8; 8];
        self.read_exact_at(&mut rest, "a block header")?;
        let len = u32::from_le_bytes(rest[..4].try_into().unwrap_or_default());
        let crc = u32::from_le_bytes(rest[4..].try_into().unwrap_or_default());
        if count > MAX_BLOCK_EVENTS || len > MAX_BLOCK_BYTES || len == 0 {
            return Err(self.corrupt(
                head_at,
                format!("block header claims {count} events in {len} bytes"),
            ));
        }
        let len = len as usize;
        let mut block = std::mem::take(&mut self.block);
        block.resize(len + PAD, 0);
        let r = self.read_exact_at(&mut block[..len], "a block");
        self.block_start = self.offset - if r.is_ok() { len as u64 } else { 0 };
        self.block = block;
        r?;
        if crc_of(&[&mark, &rest[..4], &self.block[..len]]) != crc {
            return Err(self.corrupt(head_at, "block checksum mismatch"));
        }
        self.block_len = len;
        self.block_events = count as usize;
        self.loaded += u64::from(count);
        Ok(())
    }

    /// Replaces `out` with the next block's events, as rows or columns (skipping blocks that
    /// only declare devices); 0 at the end of the trace.
    fn fill_batch<O: Decoded>(&mut self, out: &mut O) -> Result<usize, TraceError> {
        // Emptied only where no block follows: decoding a block of the usual size into
        // columns that hold one already writes them in place.
        loop {
            if self.done {
                out.begin(0);
                return Ok(0);
            }
            if self.failed {
                out.begin(0);
                return Err(self.corrupt(self.offset, "reading on after an error"));
            }
            let r = self.load_block().and_then(|()| {
                if self.done {
                    return Ok(());
                }
                let r = block::decode(
                    &self.block,
                    self.block_len,
                    self.block_events,
                    &mut self.cols,
                    &mut self.header.devices,
                    out,
                );
                r.map_err(|(at, what)| self.corrupt(self.block_start + at as u64, what))
            });
            if r.is_err() {
                self.failed = true;
                out.begin(0);
                r?;
            }
            if self.done {
                continue;
            }
            if out.len() != 0 {
                self.returned += out.len() as u64;
                return Ok(out.len());
            }
        }
    }

    /// [`EventSource::read_batch`] or [`EventSource::read_columns`]: the rest of a block
    /// `next_event` started on, else the next block.
    fn read_into<O: Decoded>(&mut self, out: &mut O) -> Result<usize, TraceError> {
        if self.next < self.decoded.len() {
            out.set_rows(&self.decoded[self.next..]);
            self.next = self.decoded.len();
            self.returned += out.len() as u64;
            return Ok(out.len());
        }
        self.fill_batch(out)
    }

    /// The slow half of `next_event`: decode the next block into `decoded`.
    #[cold]
    #[inline(never)]
    fn next_event_slow(&mut self) -> Result<Option<Event>, TraceError> {
        let mut batch = std::mem::take(&mut self.decoded);
        let r = self.fill_batch(&mut batch);
        // `fill_batch` counted the whole batch as returned; `next_event` counts one by one.
        self.returned -= batch.len() as u64;
        self.decoded = batch;
        self.next = 0;
        if r? == 0 {
            return Ok(None);
        }
        self.next = 1;
        self.returned += 1;
        Ok(Some(self.decoded[0]))
    }
}

impl<R: Read> EventSource for NativeReader<R> {
    fn header(&self) -> &TraceHeader {
        &self.header
    }

    fn source_path(&self) -> Option<&Path> {
        Some(&self.path)
    }

    #[inline]
    fn next_event(&mut self) -> Result<Option<Event>, TraceError> {
        if let Some(&e) = self.decoded.get(self.next) {
            self.next += 1;
            self.returned += 1;
            return Ok(Some(e));
        }
        self.next_event_slow()
    }

    fn read_batch(&mut self, out: &mut Vec<Event>) -> Result<usize, TraceError> {
        self.read_into(out)
    }

    fn read_columns(&mut self, out: &mut EventColumns) -> Result<usize, TraceError> {
        self.read_into(out)
    }
}

#[cfg(test)]
mod tests {
    use super::super::synthetic;
    use super::super::tests::{decode_all, encode};
    use crate::{TraceError, TraceHeader};

    #[test]
    fn truncation_at_every_offset_is_an_error() {
        let (h, ev) = synthetic(300, 3);
        let bytes = encode(&h, &ev);
        for cut in 0..bytes.len() {
            let r = decode_all(&bytes[..cut]);
            assert!(
                matches!(
                    r,
                    Err(TraceError::Truncated { .. } | TraceError::Corrupt { .. })
                ),
                "cut at {cut}: {r:?}"
            );
        }
    }

    #[test]
    fn flipped_byte_anywhere_is_an_error() {
        let (h, ev) = synthetic(300, 4);
        let bytes = encode(&h, &ev);
        for i in 0..bytes.len() {
            let mut b = bytes.clone();
            b[i] ^= 0x10;
            assert!(decode_all(&b).is_err(), "flip at {i}");
        }
    }

    #[test]
    fn data_after_trailer_is_corrupt() {
        let mut bytes = encode(&TraceHeader::default(), &[]);
        bytes.push(0);
        assert!(matches!(
            decode_all(&bytes),
            Err(TraceError::Corrupt { .. })
        ));
    }
}
