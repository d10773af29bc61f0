//! The native binary trace format, `.iot` (version 2; byte layout in docs/trace-format.md).
//!
//! A file is a header (magic, version, device table, source text, CRC32), then blocks of up to
//! [`EVENTS_PER_BLOCK`] events, each block with its own CRC32, then a trailer holding the total
//! event count. Why this shape:
//!
//! - **Blocks** bound the reader's memory (one block buffer and one decoded batch, reused) and
//!   let it check a CRC before decoding, so a flipped byte is an error, never a different
//!   trace. Blocks decode independently.
//! - **The trailer** makes truncation detectable even at a block boundary.
//! - **Columns** ([`columns`]): inside a block every field is stored as a column — the tag
//!   bytes (kind, direction, which addresses are present), then CPU, device, time, DMA
//!   address, physical address, length and `nents`, each bit-packed in miniblocks of 64
//!   values; time and addresses as deltas. A typical map/unmap trace costs ~12 bytes per
//!   event, and decoding is a handful of branch-free loops per block rather than a chain of
//!   data-dependent varint lengths per event: version 1 (LEB128 records) decoded ~20 M
//!   events/s on the reference VM, version 2 80–105 M through `read_batch` depending on
//!   the host's load (`cargo bench --bench trace`, BENCHMARKS.md).
//!
//! Devices: events carry an index into the device table. The table is written in the header,
//! and may grow while writing ([`NativeWriter::set_devices`]): new names are declared in the
//! preamble of the block being written, so a converter from a text format (whose devices
//! appear as it reads) needs no second pass. [`EventSource::header`] on a [`NativeReader`]
//! therefore gives the devices seen so far, and the full table at the end.

mod columns;

use std::io::{self, Read, Write};
use std::path::PathBuf;

use super::{Event, EventKind, EventSource, TraceDir, TraceError, TraceHeader};
use columns::{Column, Cursor, PAD, get_varint, put_column, put_varint};

/// The 8 bytes a native trace starts with: a non-ASCII byte, `IOT`, CR LF, Ctrl-Z, LF (the PNG
/// trick: text-mode transfers and `type`-ing the file are detected).
pub const MAGIC: [u8; 8] = [0x89, b'I', b'O', b'T', b'\r', b'\n', 0x1a, b'\n'];

/// The format version this build writes and reads.
pub const VERSION: u16 = 2;

/// Events per block the writer emits. The reader accepts up to [`MAX_BLOCK_EVENTS`].
pub const EVENTS_PER_BLOCK: u32 = 4096;

/// Largest event count a block may declare.
pub const MAX_BLOCK_EVENTS: u32 = 1 << 16;

/// Largest block payload, in bytes, a reader accepts (guards allocation on corrupt input).
pub const MAX_BLOCK_BYTES: u32 = 8 << 20;

/// Largest header payload, in bytes, a reader accepts.
pub const MAX_HEADER_BYTES: u32 = 16 << 20;

/// The block count value that marks the trailer.
const TRAILER_MARK: u32 = u32::MAX;

/// Most devices a table may hold (`Event::device` is a `u16`).
pub const MAX_DEVICES: usize = 1 << 16;

// Tag byte of an event: kind in bits 0-3, direction in bits 4-5, dma/phys present in 6/7.
const TAG_KIND: u8 = 0x0f;
const TAG_DMA: u8 = 0x40;
const TAG_PHYS: u8 = 0x80;

/// Checks a device table and source against the rules every writer enforces: at most
/// [`MAX_DEVICES`] names, each non-empty, unique, and free of `,`, `"` and control characters
/// (so CSV can carry it unquoted).
pub(crate) fn header_problem(devices: &[String]) -> Option<String> {
    if devices.len() > MAX_DEVICES {
        return Some(format!(
            "{} devices; a trace holds at most {MAX_DEVICES}",
            devices.len()
        ));
    }
    let mut seen = std::collections::HashSet::with_capacity(devices.len());
    for name in devices {
        if let Some(p) = device_name_problem(name) {
            return Some(p);
        }
        if !seen.insert(name.as_str()) {
            return Some(format!("device name {name:?} appears twice"));
        }
    }
    None
}

/// Why `name` cannot be a device name, if it cannot.
pub(crate) fn device_name_problem(name: &str) -> Option<String> {
    if name.is_empty() {
        Some("empty device name".to_owned())
    } else if name.chars().any(|c| c == ',' || c == '"' || c.is_control()) {
        Some(format!(
            "device name {name:?} contains a comma, quote or control character"
        ))
    } else {
        None
    }
}

/// Checks `extended` starts with `known`, and the table stays valid. Returns the new names.
pub(crate) fn extend_devices<'a>(
    known: &[String],
    extended: &'a [String],
) -> Result<&'a [String], String> {
    if extended.len() < known.len() || extended[..known.len()] != *known {
        return Err("the device table may only grow at its end".to_owned());
    }
    if let Some(p) = header_problem(extended) {
        return Err(p);
    }
    Ok(&extended[known.len()..])
}

/// Whether an event of `kind` carries `nents`.
#[inline]
pub(crate) const fn has_nents(kind: EventKind) -> bool {
    matches!(kind, EventKind::MapSg | EventKind::UnmapSg)
}

/// Why `e` cannot be written with a table of `devices` devices, if it cannot.
pub(crate) fn event_problem(e: &Event, devices: usize) -> Option<String> {
    if usize::from(e.device) >= devices {
        Some(format!(
            "event refers to device {}, but the table has {devices} devices",
            e.device
        ))
    } else if e.nents != 0 && !has_nents(e.kind) {
        Some(format!(
            "a {} event with nents = {} (only map_sg/unmap_sg carry nents)",
            e.kind.name(),
            e.nents
        ))
    } else {
        None
    }
}

fn crc_of(parts: &[&[u8]]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    for p in parts {
        h.update(p);
    }
    h.finalize()
}

fn put_str(buf: &mut Vec<u8>, s: &str) {
    put_varint(buf, s.len() as u64);
    buf.extend_from_slice(s.as_bytes());
}

/// The tag byte of `e`: kind, direction, and which of dma/phys it carries.
#[inline]
fn tag_of(e: &Event) -> u8 {
    let mut tag = (e.kind as u8) | ((e.dir as u8) << 4);
    if e.dma.is_some() {
        tag |= TAG_DMA;
    }
    if e.phys.is_some() {
        tag |= TAG_PHYS;
    }
    tag
}

/// Writes a native trace. Events are buffered into blocks; nothing is complete until
/// [`NativeWriter::finish`] writes the trailer.
///
/// # Examples
///
/// ```
/// use iommulab::trace::{Event, EventKind, EventSource, TraceHeader};
/// use iommulab::trace::format::{NativeReader, NativeWriter};
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
        if let Some(what) = header_problem(&header.devices) {
            return Err(TraceError::Invalid { path, what });
        }
        let mut payload = Vec::new();
        put_varint(&mut payload, header.devices.len() as u64);
        for d in &header.devices {
            put_str(&mut payload, d);
        }
        put_str(&mut payload, &header.source);
        let Ok(len) = u32::try_from(payload.len()) else {
            return Err(TraceError::Invalid {
                path,
                what: "header larger than 4 GiB".to_owned(),
            });
        };
        let mut pending = Vec::with_capacity(payload.len() + 20);
        pending.extend_from_slice(&MAGIC);
        pending.extend_from_slice(&VERSION.to_le_bytes());
        pending.extend_from_slice(&0u16.to_le_bytes());
        pending.extend_from_slice(&len.to_le_bytes());
        pending.extend_from_slice(&payload);
        let crc = crc_of(&[&pending[8..]]);
        pending.extend_from_slice(&crc.to_le_bytes());
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

    /// Appends the column of `field`. Every event has a value in every column, so the
    /// reader needs no per-column cursor: where `field` is `None` the column repeats the
    /// previous value (before the first `Some`, the first `Some`'s), a zero delta that costs
    /// few bits.
    fn put_field(&mut self, kind: Column, field: impl Fn(&Event) -> Option<u64>) {
        let first = self.events.iter().find_map(&field).unwrap_or(0);
        self.values.clear();
        self.values
            .extend(self.events.iter().scan(first, |last, e| {
                *last = field(e).unwrap_or(*last);
                Some(*last)
            }));
        put_column(&mut self.block, &self.values, kind, &mut self.deltas);
    }

    /// Encodes the open block (docs/trace-format.md, "Blocks") and writes it.
    fn flush_block(&mut self) -> Result<(), TraceError> {
        self.write_pending()?;
        if self.events.is_empty() && self.declared.is_empty() {
            return Ok(());
        }
        self.block.clear();
        put_varint(&mut self.block, self.declared.len() as u64);
        for d in std::mem::take(&mut self.declared) {
            put_str(&mut self.block, &d);
        }
        self.block.extend(self.events.iter().map(tag_of));
        self.put_field(Column::Plain, |e| Some(u64::from(e.cpu)));
        self.put_field(Column::Plain, |e| Some(u64::from(e.device)));
        self.put_field(Column::Delta, |e| Some(e.time_ns));
        self.put_field(Column::Delta, |e| e.dma);
        self.put_field(Column::Delta, |e| e.phys);
        self.put_field(Column::Plain, |e| Some(e.len));
        self.put_field(Column::Plain, |e| Some(u64::from(e.nents)));
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

/// Why a header or record does not decode; turned into [`TraceError::Corrupt`] with the offset.
#[derive(Debug)]
struct Bad(&'static str);

/// Events a block is decoded in at a time: the 7 column buffers (7 × 256 × 8 bytes) stay in
/// L1 while the chunk's events are assembled from them.
const CHUNK: usize = 256;

/// The reader's reusable column buffers for one chunk: cpu, device, time, dma, phys, len,
/// nents (the block's column order).
#[derive(Debug)]
struct Columns(Box<[[u64; CHUNK]; 7]>);

impl Default for Columns {
    fn default() -> Self {
        Columns(Box::new([[0; CHUNK]; 7]))
    }
}

impl Columns {
    /// The first `k` values of each buffer, to fill.
    fn chunk_buffers(&mut self, k: usize) -> impl Iterator<Item = &mut [u64]> {
        self.0.iter_mut().map(move |b| &mut b[..k])
    }

    /// The first `k` values of each buffer, filled.
    fn chunk(&self, k: usize) -> [&[u64]; 7] {
        let b = &self.0;
        [
            &b[0][..k],
            &b[1][..k],
            &b[2][..k],
            &b[3][..k],
            &b[4][..k],
            &b[5][..k],
            &b[6][..k],
        ]
    }
}

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

fn fill<R: Read>(r: &mut R, buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

fn get_str(buf: &[u8], pos: &mut usize) -> Result<String, Bad> {
    let len = get_varint(buf, pos).ok_or(Bad("a malformed string length"))?;
    let end = usize::try_from(len)
        .ok()
        .and_then(|l| pos.checked_add(l))
        .filter(|&e| e <= buf.len())
        .ok_or(Bad("a string longer than its record"))?;
    let s = std::str::from_utf8(&buf[*pos..end]).map_err(|_| Bad("a name that is not UTF-8"))?;
    *pos = end;
    Ok(s.to_owned())
}

impl<R: Read> NativeReader<R> {
    /// Reads and checks the header of the trace in `r`. `path` names the file in errors only.
    pub fn new(mut r: R, path: PathBuf) -> Result<Self, TraceError> {
        let mut reader_offset = 0u64;
        let mut fixed = [0u8; 16];
        let got = fill(&mut r, &mut fixed).map_err(|source| TraceError::Io {
            path: path.clone(),
            source,
        })?;
        if got >= 8 && fixed[..8] != MAGIC || got < 8 && fixed[..got] != MAGIC[..got] {
            return Err(TraceError::Corrupt {
                path,
                offset: 0,
                what: "not a native iommulab trace (bad magic bytes)".to_owned(),
            });
        }
        if got < 16 {
            return Err(TraceError::Truncated {
                path,
                offset: got as u64,
                what: "the file header".to_owned(),
            });
        }
        reader_offset += 16;
        let version = u16::from_le_bytes([fixed[8], fixed[9]]);
        let flags = u16::from_le_bytes([fixed[10], fixed[11]]);
        let len = u32::from_le_bytes([fixed[12], fixed[13], fixed[14], fixed[15]]);
        if len > MAX_HEADER_BYTES {
            return Err(TraceError::Corrupt {
                path,
                offset: 12,
                what: format!("header length {len} exceeds {MAX_HEADER_BYTES}"),
            });
        }
        let mut payload = vec![0u8; len as usize + 4];
        let got = fill(&mut r, &mut payload).map_err(|source| TraceError::Io {
            path: path.clone(),
            source,
        })?;
        if got < payload.len() {
            return Err(TraceError::Truncated {
                path,
                offset: reader_offset + got as u64,
                what: "the file header".to_owned(),
            });
        }
        let (body, crc) = payload.split_at(len as usize);
        let want = u32::from_le_bytes([crc[0], crc[1], crc[2], crc[3]]);
        if crc_of(&[&fixed[8..], body]) != want {
            return Err(TraceError::Corrupt {
                path,
                offset: 8,
                what: "header checksum mismatch".to_owned(),
            });
        }
        if version != VERSION {
            let hint = if version < VERSION {
                " (convert it with the iommulab release that wrote it, e.g. to CSV)"
            } else {
                ""
            };
            return Err(TraceError::Unsupported {
                path,
                what: format!(
                    "native trace version {version}; this build reads version {VERSION}{hint}"
                ),
            });
        }
        if flags != 0 {
            return Err(TraceError::Unsupported {
                path,
                what: format!("native trace flags {flags:#x}; this build knows none"),
            });
        }
        let header = Self::parse_header(body).map_err(|Bad(what)| TraceError::Corrupt {
            path: path.clone(),
            offset: 16,
            what: format!("header: {what}"),
        })?;
        reader_offset += payload.len() as u64;
        Ok(NativeReader {
            inner: r,
            path,
            header,
            offset: reader_offset,
            block_start: reader_offset,
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

    fn parse_header(body: &[u8]) -> Result<TraceHeader, Bad> {
        let mut pos = 0;
        let n = get_varint(body, &mut pos).ok_or(Bad("malformed device count"))?;
        if n > MAX_DEVICES as u64 {
            return Err(Bad("more than 65536 devices"));
        }
        let mut devices = Vec::new();
        for _ in 0..n {
            devices.push(get_str(body, &mut pos)?);
        }
        let source = get_str(body, &mut pos)?;
        if pos != body.len() {
            return Err(Bad("bytes after the source text"));
        }
        Ok(TraceHeader { devices, source })
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

    /// Replaces `out` with the next block's events (skipping blocks that only declare
    /// devices); 0 at the end of the trace.
    fn fill_batch(&mut self, out: &mut Vec<Event>) -> Result<usize, TraceError> {
        out.clear();
        loop {
            if self.done {
                return Ok(0);
            }
            if self.failed {
                return Err(self.corrupt(self.offset, "reading on after an error"));
            }
            let r = self.load_block().and_then(|()| {
                if self.done {
                    return Ok(());
                }
                let r = decode_block(
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
                out.clear();
                r?;
            }
            if !out.is_empty() {
                self.returned += out.len() as u64;
                return Ok(out.len());
            }
        }
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

/// Every kind by its tag nibble; nibbles 11..=15 are rejected before this is indexed.
const KINDS: [EventKind; 16] = {
    let mut k = [EventKind::Map; 16];
    let mut i = 0;
    while i < EventKind::ALL.len() {
        k[i] = EventKind::ALL[i];
        i += 1;
    }
    k
};

const DIRS: [TraceDir; 4] = [
    TraceDir::Bidirectional,
    TraceDir::ToDevice,
    TraceDir::FromDevice,
    TraceDir::None,
];

/// Decodes a block payload (`buf[..end]`, padded) of `count` events into `out`: the device
/// declarations (appended to `devices`), the tag column, then the numeric columns, each
/// checked, then one branch-free pass that assembles the events. On error: the offset in the
/// block and what is wrong.
#[allow(clippy::cast_possible_truncation)] // cpu, device and nents are checked against their limits
fn decode_block(
    buf: &[u8],
    end: usize,
    count: usize,
    cols: &mut Columns,
    devices: &mut Vec<String>,
    out: &mut Vec<Event>,
) -> Result<(), (usize, &'static str)> {
    let body = &buf[..end];
    let mut pos = 0;
    let declared = get_varint(body, &mut pos).ok_or((0, "a malformed device declaration"))?;
    if declared > (MAX_DEVICES - devices.len()) as u64 {
        return Err((0, "a device declaration past 65536 devices"));
    }
    for _ in 0..declared {
        let at = pos;
        devices.push(get_str(body, &mut pos).map_err(|Bad(what)| (at, what))?);
    }
    let tags_at = pos;
    let tags = body
        .get(pos..pos + count)
        .ok_or((pos, "a tag column that runs past its block"))?;
    pos += count;
    // The checks below are folds without early exit, which vectorise; the position of a
    // problem is looked up only once one is known to exist.
    let max_kind = tags.iter().fold(0, |m, &t| m.max(t & TAG_KIND));
    if max_kind > EventKind::SyncForDevice as u8 {
        let i = tags.iter().position(|&t| t & TAG_KIND == max_kind);
        return Err((tags_at + i.unwrap_or(0), "an unknown event kind"));
    }
    // Find every column (checking its miniblock headers), then decode the block in chunks
    // of `CHUNK` events — every column's values for the chunk, checked, then assembled — so
    // the column buffers and the events being built stay in L1.
    let layout = [
        (Column::Plain, Some((1 << 16, "a cpu above 65535"))),
        (
            Column::Plain,
            Some((
                devices.len() as u64,
                "an event of a device not in the table",
            )),
        ),
        (Column::Delta, None),
        (Column::Delta, None),
        (Column::Delta, None),
        (Column::Plain, None),
        (Column::Plain, Some((1 << 32, "nents above 2^32 - 1"))),
    ];
    let mut cursors = [None; 7];
    let mut starts = [0; 7];
    for ((cursor, start), &(kind, _)) in cursors.iter_mut().zip(&mut starts).zip(&layout) {
        *start = pos;
        let r = Cursor::locate(buf, end, &mut pos, count, kind);
        *cursor = Some(r.map_err(|what| (pos, what))?);
    }
    if pos != end {
        return Err((pos, "bytes after the last column"));
    }
    let mut cursors = cursors.map(|c| c.unwrap_or(Cursor::EMPTY));
    out.clear();
    out.reserve(count);
    for (c, tags) in tags.chunks(CHUNK).enumerate() {
        let k = tags.len();
        let bufs = cols.chunk_buffers(k);
        for (((cursor, col), &(_, limit)), &start) in
            cursors.iter_mut().zip(bufs).zip(&layout).zip(&starts)
        {
            cursor.read(buf, end, col).map_err(|what| (start, what))?;
            if let Some((limit, what)) = limit
                // An OR is an upper bound on the max and vectorises (a u64 max does not on
                // baseline x86-64); the exact test runs only when the bound is not enough.
                && col.iter().fold(0, |a, &v| a | v) >= limit
                && col.iter().any(|&v| v >= limit)
            {
                return Err((start, what));
            }
        }
        let [cpu, device, time, dma, phys, len, nents] = cols.chunk(k);
        // `nents` is 0 except on map_sg/unmap_sg (kinds 2 and 3).
        let stray = |(&tag, &n): (&u8, &u64)| n * u64::from((tag & TAG_KIND).wrapping_sub(2) > 1);
        if tags.iter().zip(nents).map(stray).fold(0, |a, v| a | v) != 0 {
            let i = tags.iter().zip(nents).position(|t| stray(t) != 0);
            return Err((
                tags_at + c * CHUNK + i.unwrap_or(0),
                "nents on an event other than map_sg/unmap_sg",
            ));
        }
        let rows = tags
            .iter()
            .zip(cpu)
            .zip(device)
            .zip(time)
            .zip(dma)
            .zip(phys)
            .zip(len)
            .zip(nents);
        // Every column is dense, so this is a pure map over rows: no per-event state or
        // branch, and `extend` over zipped slices writes without a capacity check per event.
        out.extend(rows.map(
            |(((((((&tag, &cpu), &device), &time_ns), &dma), &phys), &len), &nents)| Event {
                time_ns,
                cpu: cpu as u16,
                device: device as u16,
                kind: KINDS[usize::from(tag & TAG_KIND)],
                dir: DIRS[usize::from((tag >> 4) & 3)],
                dma: (tag & TAG_DMA != 0).then_some(dma),
                phys: (tag & TAG_PHYS != 0).then_some(phys),
                len,
                nents: nents as u32,
            },
        ));
    }
    Ok(())
}

impl<R: Read> EventSource for NativeReader<R> {
    fn header(&self) -> &TraceHeader {
        &self.header
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
        if self.next < self.decoded.len() {
            // Events of a block `next_event` started on.
            out.clear();
            out.extend_from_slice(&self.decoded[self.next..]);
            self.next = self.decoded.len();
            self.returned += out.len() as u64;
            return Ok(out.len());
        }
        self.fill_batch(out)
    }
}

/// A small deterministic trace for tests and benches: `n` events of a block-storage-like
/// workload on 4 CPUs and 2 devices — map, device access, unmap of 4-64 KiB buffers with a
/// queue depth of 32, a top-down IOVA allocator, scattered physical pages, and an occasional
/// 4-segment `map_sg`/`unmap_sg`.
#[cfg(any(test, feature = "test-utils"))]
pub fn synthetic(n: usize, seed: u64) -> (TraceHeader, Vec<Event>) {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
    let header = TraceHeader {
        devices: vec!["0000:3b:00.0".into(), "0000:5e:00.1".into()],
        source: format!("synthetic(seed = {seed})"),
    };
    let mut out = Vec::with_capacity(n + 8);
    let mut live: std::collections::VecDeque<Vec<Event>> = std::collections::VecDeque::new();
    let mut time = 1_000_000u64;
    let mut iova_top = [0xffff_f000u64; 2];
    while out.len() < n {
        time += rng.gen_range(50..2_000);
        let cpu = rng.gen_range(0..4u16);
        let device = rng.gen_range(0..2u16);
        let dir = if rng.gen_bool(0.5) {
            TraceDir::ToDevice
        } else {
            TraceDir::FromDevice
        };
        if live.len() >= 32 || (!live.is_empty() && rng.gen_bool(0.3)) {
            let maps = live.pop_front().unwrap_or_default();
            for m in maps {
                let mut u = m;
                u.time_ns = time;
                u.cpu = cpu;
                u.kind = match m.kind {
                    EventKind::MapSg => EventKind::UnmapSg,
                    EventKind::Map => EventKind::Unmap,
                    k => k,
                };
                if u.kind == EventKind::Unmap {
                    u.phys = None;
                }
                if m.kind == EventKind::SgSeg {
                    u.dma = None;
                }
                out.push(u);
            }
            continue;
        }
        let d = usize::from(device);
        if rng.gen_bool(0.05) {
            let mut sg = Event::new(EventKind::MapSg);
            sg.time_ns = time;
            sg.cpu = cpu;
            sg.device = device;
            sg.dir = dir;
            sg.nents = 4;
            let mut group = vec![sg];
            let mut total = 0;
            for _ in 0..4 {
                let mut s = Event::new(EventKind::SgSeg);
                s.time_ns = time;
                s.cpu = cpu;
                s.device = device;
                s.dir = dir;
                s.len = 4096;
                iova_top[d] -= 4096;
                s.dma = Some(iova_top[d]);
                s.phys = Some(rng.gen_range(0x10_0000u64..0x4_0000_0000) & !0xfff);
                total += s.len;
                group.push(s);
            }
            group[0].len = total;
            out.extend_from_slice(&group);
            live.push_back(group);
            continue;
        }
        let len = 4096u64 << rng.gen_range(0..5);
        iova_top[d] -= len;
        if iova_top[d] < 0x1000_0000 {
            iova_top[d] = 0xffff_f000;
        }
        let mut m = Event::new(EventKind::Map);
        m.time_ns = time;
        m.cpu = cpu;
        m.device = device;
        m.dir = dir;
        m.dma = Some(iova_top[d]);
        m.phys = Some(rng.gen_range(0x10_0000u64..0x4_0000_0000) & !0xfff);
        m.len = len;
        out.push(m);
        if rng.gen_bool(0.5) {
            let mut a = m;
            a.kind = if dir == TraceDir::ToDevice {
                EventKind::DeviceRead
            } else {
                EventKind::DeviceWrite
            };
            a.time_ns = time + rng.gen_range(100..1_000);
            time = a.time_ns;
            a.phys = None;
            out.push(a);
        }
        live.push_back(vec![m]);
    }
    // Close every SG group that the cut would split.
    while matches!(out.last(), Some(e) if e.kind == EventKind::MapSg || e.kind == EventKind::UnmapSg)
    {
        out.pop();
    }
    (header, out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encode(header: &TraceHeader, events: &[Event]) -> Vec<u8> {
        let mut w = NativeWriter::new(Vec::new(), header).unwrap();
        for e in events {
            w.write(e).unwrap();
        }
        w.finish().unwrap()
    }

    fn decode_all(bytes: &[u8]) -> Result<(TraceHeader, Vec<Event>), TraceError> {
        let mut r = NativeReader::new(bytes, "t.iot".into())?;
        let mut v = Vec::new();
        while let Some(e) = r.next_event()? {
            v.push(e);
        }
        assert_eq!(r.events(), v.len() as u64);
        Ok((r.header().clone(), v))
    }

    /// The same through `read_batch`, mixed with `next_event` at block starts.
    fn decode_batches(bytes: &[u8]) -> Result<Vec<Event>, TraceError> {
        let mut r = NativeReader::new(bytes, "t.iot".into())?;
        let mut v = Vec::new();
        let mut batch = Vec::new();
        loop {
            if let Some(e) = r.next_event()? {
                v.push(e);
            }
            if r.read_batch(&mut batch)? == 0 {
                break;
            }
            v.extend_from_slice(&batch);
        }
        assert_eq!(r.events(), v.len() as u64);
        Ok(v)
    }

    /// Blocks of `bytes` as (offset of the payload, payload length).
    fn blocks(bytes: &[u8]) -> Vec<(usize, usize)> {
        let header_len = u32::from_le_bytes(bytes[12..16].try_into().unwrap()) as usize;
        let mut at = 16 + header_len + 4;
        let mut out = Vec::new();
        while u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) != TRAILER_MARK {
            let len = u32::from_le_bytes(bytes[at + 4..at + 8].try_into().unwrap()) as usize;
            out.push((at + 12, len));
            at += 12 + len;
        }
        out
    }

    /// Rewrites the CRC of the block whose payload starts at `payload` (after a deliberate
    /// change), so the decoder's own checks are what must catch it.
    fn reseal(bytes: &mut [u8], payload: usize, len: usize) {
        let head = payload - 12;
        let crc = crc_of(&[&bytes[head..head + 8], &bytes[payload..payload + len]]);
        bytes[head + 8..head + 12].copy_from_slice(&crc.to_le_bytes());
    }

    #[test]
    fn empty_trace_round_trips() {
        let h = TraceHeader::default();
        let bytes = encode(&h, &[]);
        assert_eq!(bytes.len(), 8 + 2 + 2 + 4 + 2 + 4 + 16);
        assert_eq!(decode_all(&bytes).unwrap(), (h, vec![]));
    }

    #[test]
    fn synthetic_trace_round_trips_across_blocks() {
        let (h, ev) = synthetic(10_000, 1);
        let bytes = encode(&h, &ev);
        assert_eq!(blocks(&bytes).len(), 3);
        assert_eq!(decode_batches(&bytes).unwrap(), ev);
        assert_eq!(decode_all(&bytes).unwrap(), (h, ev));
    }

    #[test]
    fn extreme_values_round_trip() {
        let h = TraceHeader {
            devices: vec!["a".into(), "b".into()],
            source: "extremes".into(),
        };
        let mut ev = Vec::new();
        for (i, v) in [0, 1, u64::MAX, 1 << 63, u64::MAX - 1, 4096, 0]
            .into_iter()
            .enumerate()
        {
            let mut e = Event::new(EventKind::ALL[i % EventKind::ALL.len()]);
            e.time_ns = v;
            e.cpu = if i % 2 == 0 { u16::MAX } else { 0 };
            e.device = u16::from(i % 2 == 1);
            e.dma = (i % 3 != 0).then_some(v.rotate_left(7));
            e.phys = (i % 2 == 0).then_some(!v);
            e.len = v ^ 0x5555;
            e.nents = if has_nents(e.kind) { u32::MAX } else { 0 };
            e.dir = DIRS[i % 4];
            ev.push(e);
        }
        let bytes = encode(&h, &ev);
        assert_eq!(decode_all(&bytes).unwrap(), (h, ev));
    }

    #[test]
    fn version_1_files_are_refused_by_name() {
        let mut bytes = encode(&TraceHeader::default(), &[]);
        bytes[8] = 1;
        let len = u32::from_le_bytes(bytes[12..16].try_into().unwrap()) as usize;
        let crc = crc_of(&[&bytes[8..16 + len]]);
        bytes[16 + len..20 + len].copy_from_slice(&crc.to_le_bytes());
        let err = decode_all(&bytes).unwrap_err().to_string();
        assert!(
            err.contains("native trace version 1; this build reads version 2"),
            "{err}"
        );
    }

    /// Content errors behind a valid CRC (a buggy writer, a crafted file) are reported with
    /// the offset, never a panic or a different trace.
    #[test]
    fn sealed_corruption_is_reported_not_decoded() {
        let (h, ev) = synthetic(300, 5);
        let bytes = encode(&h, &ev);
        let (payload, len) = blocks(&bytes)[0];
        // An unknown kind in the tag column (after the 1-byte empty device preamble).
        let mut b = bytes.clone();
        b[payload + 1 + 7] = (b[payload + 1 + 7] & 0xf0) | 0x0c;
        reseal(&mut b, payload, len);
        let err = decode_all(&b).unwrap_err();
        assert!(
            matches!(&err, TraceError::Corrupt { offset, what, .. }
                if *offset == (payload + 8) as u64 && what == "an unknown event kind"),
            "{err}"
        );
        // Every single-byte change anywhere in the payload: an error or some valid trace,
        // never a panic; and a block that still decodes holds exactly its declared count.
        for i in payload..payload + len {
            for x in [0x01, 0x80, 0xff] {
                let mut b = bytes.clone();
                b[i] ^= x;
                reseal(&mut b, payload, len);
                if let Ok((_, got)) = decode_all(&b) {
                    assert_eq!(got.len(), ev.len(), "byte {i} ^ {x:#x}");
                }
            }
        }
    }

    /// The size target of docs/trace-format.md: a realistic map/unmap trace stays under 16
    /// bytes per event.
    #[test]
    fn realistic_trace_costs_under_16_bytes_per_event() {
        let (h, ev) = synthetic(200_000, 7);
        let bytes = encode(&h, &ev);
        let per_event = bytes.len() as f64 / ev.len() as f64;
        eprintln!("native: {per_event:.2} bytes/event");
        assert!(per_event <= 16.0, "{per_event:.2} bytes/event");
    }

    #[test]
    fn devices_declared_mid_stream_are_read_back() {
        let h = TraceHeader {
            devices: vec!["a".into()],
            source: String::new(),
        };
        let mut w = NativeWriter::new(Vec::new(), &h).unwrap();
        let mut e = Event::new(EventKind::Map);
        w.write(&e).unwrap();
        w.set_devices(&["a".into(), "b".into()]).unwrap();
        e.device = 1;
        w.write(&e).unwrap();
        w.set_devices(&["a".into(), "b".into(), "c".into()])
            .unwrap();
        let bytes = w.finish().unwrap();
        let (h2, ev) = decode_all(&bytes).unwrap();
        assert_eq!(h2.devices, ["a", "b", "c"]);
        assert_eq!(ev.len(), 2);
        assert_eq!(ev[1].device, 1);
    }

    #[test]
    fn rejects_unknown_device_and_stray_nents() {
        let h = TraceHeader {
            devices: vec!["a".into()],
            source: String::new(),
        };
        let mut w = NativeWriter::new(Vec::new(), &h).unwrap();
        let mut e = Event::new(EventKind::Map);
        e.device = 1;
        assert!(matches!(w.write(&e), Err(TraceError::Invalid { .. })));
        e.device = 0;
        e.nents = 2;
        assert!(matches!(w.write(&e), Err(TraceError::Invalid { .. })));
        let bad = TraceHeader {
            devices: vec!["a,b".into()],
            source: String::new(),
        };
        assert!(matches!(
            NativeWriter::new(Vec::new(), &bad),
            Err(TraceError::Invalid { .. })
        ));
    }

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
