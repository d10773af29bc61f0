//! The native binary trace format, `.iot` (version 1; byte layout in docs/trace-format.md).
//!
//! A file is a header (magic, version, device table, source text, CRC32), then blocks of up to
//! [`EVENTS_PER_BLOCK`] delta-encoded events, each block with its own CRC32, then a trailer
//! holding the total event count. Why this shape:
//!
//! - **Blocks** bound the reader's memory (one block buffer, reused) and let it check a CRC
//!   before decoding, so a flipped byte is an error, never a different trace. The delta state
//!   resets at every block, so blocks decode independently.
//! - **The trailer** makes truncation detectable even at a block boundary.
//! - **Deltas + LEB128 varints** keep a typical map/unmap trace near 10 bytes per event: time,
//!   DMA and physical addresses are zig-zag deltas against the previous event in the block, and
//!   CPU/device are written only when they change (in a context record).
//!
//! The reader decodes straight from the block buffer with no allocation per event: varints
//! are read eight bytes at a time without branching on their length, and everything rare
//! (block loads, device declarations, errors) sits in a cold out-of-line path
//! (`cargo bench --bench trace`, `trace/read_native`).
//!
//! Devices: events carry an index into the device table. The table is written in the header,
//! and may grow while writing ([`NativeWriter::set_devices`]): new names go into a context
//! record in the stream, so a converter from a text format (whose devices appear as it reads)
//! needs no second pass. [`EventSource::header`] on a [`NativeReader`] therefore gives the
//! devices seen so far, and the full table at the end.

use std::io::{self, Read, Write};
use std::path::PathBuf;

use super::{Event, EventKind, EventSource, TraceDir, TraceError, TraceHeader};

/// The 8 bytes a native trace starts with: a non-ASCII byte, `IOT`, CR LF, Ctrl-Z, LF (the PNG
/// trick: text-mode transfers and `type`-ing the file are detected).
pub const MAGIC: [u8; 8] = [0x89, b'I', b'O', b'T', b'\r', b'\n', 0x1a, b'\n'];

/// The format version this build writes and reads.
pub const VERSION: u16 = 1;

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

/// The writer closes a block early when its payload reaches this size.
const BLOCK_SOFT_LIMIT: usize = 1 << 20;

/// Most devices a table may hold (`Event::device` is a `u16`).
pub const MAX_DEVICES: usize = 1 << 16;

// Tag byte of an event record: kind in bits 0-3, dir in bits 4-5, dma/phys present in 6/7.
const TAG_KIND: u8 = 0x0f;
const TAG_DMA: u8 = 0x40;
const TAG_PHYS: u8 = 0x80;
// A tag whose kind nibble is 0xf is a context record; its high bits say what follows.
const CTX: u8 = 0x0f;
const CTX_DEVICES: u8 = 0x10;
const CTX_CPU: u8 = 0x20;
const CTX_DEVICE: u8 = 0x40;
const CTX_RESERVED: u8 = 0x80;

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

/// Appends `v` as an LEB128 varint.
#[inline]
fn put_varint(buf: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        buf.push(v.to_le_bytes()[0] | 0x80);
        v >>= 7;
    }
    buf.push(v.to_le_bytes()[0]);
}

/// Reads an LEB128 varint at `*pos`; `None` if it runs off the end or overflows 64 bits.
#[inline(always)]
fn get_varint(buf: &[u8], pos: &mut usize) -> Option<u64> {
    // Eight bytes at once when they are there (all but the last few bytes of a block):
    // branch-free, since varint lengths in a trace are unpredictable.
    if let Some(w) = buf.get(*pos..*pos + 8) {
        let w = u64::from_le_bytes(w.try_into().ok()?);
        let stops = !w & 0x8080_8080_8080_8080;
        if stops != 0 {
            let bytes = stops.trailing_zeros() / 8 + 1;
            let v = (w & 0x7f)
                | ((w >> 1) & (0x7f << 7))
                | ((w >> 2) & (0x7f << 14))
                | ((w >> 3) & (0x7f << 21))
                | ((w >> 4) & (0x7f << 28))
                | ((w >> 5) & (0x7f << 35))
                | ((w >> 6) & (0x7f << 42))
                | ((w >> 7) & (0x7f << 49));
            *pos += bytes as usize;
            return Some(v & (u64::MAX >> (64 - 7 * bytes)));
        }
    }
    get_varint_slow(buf, pos)
}

/// [`get_varint`] near the end of the buffer, and for values of more than 56 bits.
#[inline(never)]
fn get_varint_slow(buf: &[u8], pos: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    let mut shift = 0;
    loop {
        let b = *buf.get(*pos)?;
        *pos += 1;
        if shift == 63 && b > 1 {
            return None;
        }
        v |= u64::from(b & 0x7f) << shift;
        if b < 0x80 {
            return Some(v);
        }
        shift += 7;
        if shift > 63 {
            return None;
        }
    }
}

/// Zig-zag encodes the wrapping difference `new - old`, so small steps either way are short.
#[inline]
fn zigzag_delta(new: u64, old: u64) -> u64 {
    let d = new.wrapping_sub(old) as i64;
    ((d << 1) ^ (d >> 63)) as u64
}

/// Inverse of [`zigzag_delta`].
#[inline(always)]
fn unzigzag_add(old: u64, z: u64) -> u64 {
    let d = (z >> 1) ^ (z & 1).wrapping_neg();
    old.wrapping_add(d)
}

/// The delta state, reset at every block.
#[derive(Clone, Copy, Debug, Default)]
struct Delta {
    time: u64,
    cpu: u16,
    device: u16,
    dma: u64,
    phys: u64,
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
    block: Vec<u8>,
    block_events: u32,
    total: u64,
    delta: Delta,
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
            block: Vec::with_capacity(64 * 1024),
            block_events: 0,
            total: 0,
            delta: Delta::default(),
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
    /// names are recorded in the stream at this point.
    pub fn set_devices(&mut self, devices: &[String]) -> Result<(), TraceError> {
        let new = extend_devices(&self.devices, devices).map_err(|what| TraceError::Invalid {
            path: self.path.clone(),
            what,
        })?;
        if new.is_empty() {
            return Ok(());
        }
        self.block.push(CTX | CTX_DEVICES);
        put_varint(&mut self.block, new.len() as u64);
        for d in new {
            put_str(&mut self.block, d);
        }
        self.devices.extend_from_slice(new);
        if self.block.len() >= BLOCK_SOFT_LIMIT {
            self.flush_block()?;
        }
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
        let b = &mut self.block;
        let st = &mut self.delta;
        if e.cpu != st.cpu || e.device != st.device {
            let mut ctx = CTX;
            if e.cpu != st.cpu {
                ctx |= CTX_CPU;
            }
            if e.device != st.device {
                ctx |= CTX_DEVICE;
            }
            b.push(ctx);
            if e.cpu != st.cpu {
                put_varint(b, u64::from(e.cpu));
            }
            if e.device != st.device {
                put_varint(b, u64::from(e.device));
            }
            st.cpu = e.cpu;
            st.device = e.device;
        }
        let mut tag = (e.kind as u8) | ((e.dir as u8) << 4);
        if e.dma.is_some() {
            tag |= TAG_DMA;
        }
        if e.phys.is_some() {
            tag |= TAG_PHYS;
        }
        b.push(tag);
        put_varint(b, zigzag_delta(e.time_ns, st.time));
        st.time = e.time_ns;
        if let Some(d) = e.dma {
            put_varint(b, zigzag_delta(d, st.dma));
            st.dma = d;
        }
        if let Some(p) = e.phys {
            put_varint(b, zigzag_delta(p, st.phys));
            st.phys = p;
        }
        put_varint(b, e.len);
        if has_nents(e.kind) {
            put_varint(b, u64::from(e.nents));
        }
        self.block_events += 1;
        self.total += 1;
        if self.block_events >= EVENTS_PER_BLOCK || self.block.len() >= BLOCK_SOFT_LIMIT {
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

    fn flush_block(&mut self) -> Result<(), TraceError> {
        self.write_pending()?;
        if self.block.is_empty() {
            return Ok(());
        }
        let Ok(len) = u32::try_from(self.block.len()) else {
            unreachable!("blocks are closed at {BLOCK_SOFT_LIMIT} bytes");
        };
        let count = self.block_events.to_le_bytes();
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
        self.block.clear();
        self.block_events = 0;
        self.delta = Delta::default();
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

/// Why a record does not decode; turned into [`TraceError::Corrupt`] with the offset.
#[derive(Debug)]
struct Bad(&'static str);

/// Reads a native trace as a stream: one block in memory at a time.
#[derive(Debug)]
pub struct NativeReader<R: Read> {
    inner: R,
    path: PathBuf,
    header: TraceHeader,
    /// `header.devices.len()`, cached for the hot path.
    devices: u32,
    /// Bytes consumed from `inner` (the decompressed stream).
    offset: u64,
    /// Stream offset of `block[0]`.
    block_start: u64,
    block: Vec<u8>,
    pos: usize,
    /// Events of the current block not yet returned.
    remaining: u32,
    delta: Delta,
    /// Events returned so far.
    total: u64,
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
            return Err(TraceError::Unsupported {
                path,
                what: format!("native trace version {version}; this build reads version {VERSION}"),
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
            devices: u32::try_from(header.devices.len()).unwrap_or(u32::MAX),
            header,
            offset: reader_offset,
            block_start: reader_offset,
            block: Vec::with_capacity(64 * 1024),
            pos: 0,
            remaining: 0,
            delta: Delta::default(),
            total: 0,
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
        self.total
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

    /// Loads the next block (or reads the trailer and sets `done`).
    fn load_block(&mut self) -> Result<(), TraceError> {
        // Context records after the last event of the previous block.
        self.skip_context_tail()?;
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
            if total != self.total {
                return Err(self.corrupt(
                    head_at,
                    format!(
                        "the trailer counts {total} events but the blocks hold {}",
                        self.total
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
        let mut block = std::mem::take(&mut self.block);
        block.clear();
        block.resize(len as usize, 0);
        let r = self.read_exact_at(&mut block, "a block");
        self.block_start = self.offset - if r.is_ok() { u64::from(len) } else { 0 };
        self.block = block;
        r?;
        if crc_of(&[&mark, &rest[..4], &self.block]) != crc {
            return Err(self.corrupt(head_at, "block checksum mismatch"));
        }
        self.pos = 0;
        self.remaining = count;
        self.delta = Delta::default();
        Ok(())
    }

    /// After the last event of a block: only context records may remain.
    fn skip_context_tail(&mut self) -> Result<(), TraceError> {
        while self.pos < self.block.len() {
            let at = self.pos;
            let tag = self.block[at];
            if tag & TAG_KIND != CTX {
                return Err(self.corrupt(
                    self.block_start + at as u64,
                    "more events in the block than its header counts",
                ));
            }
            self.pos += 1;
            self.context(tag, at)?;
        }
        Ok(())
    }

    /// Applies the context record whose tag (at `at`) was just read.
    #[cold]
    fn context(&mut self, tag: u8, at: usize) -> Result<(), TraceError> {
        let r = self.context_inner(tag);
        r.map_err(|Bad(what)| self.corrupt(self.block_start + at as u64, what))
    }

    fn context_inner(&mut self, tag: u8) -> Result<(), Bad> {
        if tag & CTX_RESERVED != 0 {
            return Err(Bad("a context record with reserved bits set"));
        }
        let buf = &self.block[..];
        let mut pos = self.pos;
        if tag & CTX_DEVICES != 0 {
            let n = get_varint(buf, &mut pos).ok_or(Bad("a malformed device count"))?;
            if n == 0 || n > (MAX_DEVICES - self.header.devices.len()) as u64 {
                return Err(Bad("a device declaration past 65536 devices"));
            }
            for _ in 0..n {
                let name = get_str(buf, &mut pos)?;
                self.header.devices.push(name);
            }
        }
        if tag & CTX_CPU != 0 {
            let cpu = get_varint(buf, &mut pos).ok_or(Bad("a malformed cpu"))?;
            self.delta.cpu = u16::try_from(cpu).map_err(|_| Bad("a cpu above 65535"))?;
        }
        if tag & CTX_DEVICE != 0 {
            let d = get_varint(buf, &mut pos).ok_or(Bad("a malformed device index"))?;
            self.delta.device = u16::try_from(d).map_err(|_| Bad("a device index above 65535"))?;
        }
        self.pos = pos;
        Ok(())
    }

    /// The slow half of `next_event`: load blocks, apply device declarations, build errors.
    #[cold]
    #[inline(never)]
    fn next_event_slow(&mut self) -> Result<Option<Event>, TraceError> {
        loop {
            // A block may hold only context records: load until one has an event.
            while self.remaining == 0 {
                if self.done {
                    return Ok(None);
                }
                if self.failed {
                    return Err(self.corrupt(self.offset, "reading on after an error"));
                }
                let r = self.load_block();
                if r.is_err() {
                    self.failed = true;
                    r?;
                }
            }
            let at = self.pos;
            let mut pos = at;
            let r = decode_event(&self.block, &mut pos, &mut self.delta, self.devices);
            match r {
                Ok(e) => {
                    self.pos = pos;
                    self.remaining -= 1;
                    self.total += 1;
                    return Ok(Some(e));
                }
                Err(Step::Context(ctx_at)) => {
                    // A device declaration (or a bad context record): the cold path.
                    let tag = self.block[ctx_at];
                    self.pos = ctx_at + 1;
                    if let Err(e) = self.context(tag, ctx_at) {
                        self.failed = true;
                        self.remaining = 0;
                        return Err(e);
                    }
                    self.devices = u32::try_from(self.header.devices.len()).unwrap_or(u32::MAX);
                }
                Err(Step::Bad(bad_at, what)) => {
                    self.failed = true;
                    self.remaining = 0;
                    return Err(self.corrupt(self.block_start + bad_at as u64, what));
                }
            }
        }
    }
}

/// Why [`decode_event`] stopped without an event.
#[derive(Debug)]
enum Step {
    /// A context record at this offset that the fast path does not handle.
    Context(usize),
    /// A record at this offset that does not decode.
    Bad(usize, &'static str),
}

/// Decodes the next event at `*pos`, applying the CPU/device context records before it.
/// `devices` is the size of the device table. On `Err`, `*pos` and `st` may have moved.
#[inline(always)]
fn decode_event(buf: &[u8], pos: &mut usize, st: &mut Delta, devices: u32) -> Result<Event, Step> {
    let mut at = *pos;
    let mut tag = *buf.get(at).ok_or(Step::Bad(
        at,
        "fewer events in the block than its header counts",
    ))?;
    *pos += 1;
    while tag & TAG_KIND == CTX {
        if tag & (CTX_DEVICES | CTX_RESERVED) != 0 {
            return Err(Step::Context(at));
        }
        let malformed = Step::Bad(at, "a malformed context record");
        if tag & CTX_CPU != 0 {
            let cpu = get_varint(buf, pos).ok_or(malformed)?;
            st.cpu = u16::try_from(cpu).map_err(|_| Step::Bad(at, "a cpu above 65535"))?;
        }
        if tag & CTX_DEVICE != 0 {
            let d = get_varint(buf, pos).ok_or(Step::Bad(at, "a malformed context record"))?;
            st.device = u16::try_from(d).map_err(|_| Step::Bad(at, "a device above 65535"))?;
        }
        at = *pos;
        tag = *buf.get(at).ok_or(Step::Bad(
            at,
            "fewer events in the block than its header counts",
        ))?;
        *pos += 1;
    }
    let malformed = || Step::Bad(at, "a malformed event record");
    let Some(kind) = EventKind::from_u8(tag & TAG_KIND) else {
        return Err(Step::Bad(at, "an unknown event kind"));
    };
    if u32::from(st.device) >= devices {
        return Err(Step::Bad(at, "an event of a device not in the table"));
    }
    let dir = match (tag >> 4) & 3 {
        0 => TraceDir::Bidirectional,
        1 => TraceDir::ToDevice,
        2 => TraceDir::FromDevice,
        _ => TraceDir::None,
    };
    st.time = unzigzag_add(st.time, get_varint(buf, pos).ok_or_else(malformed)?);
    let dma = if tag & TAG_DMA != 0 {
        st.dma = unzigzag_add(st.dma, get_varint(buf, pos).ok_or_else(malformed)?);
        Some(st.dma)
    } else {
        None
    };
    let phys = if tag & TAG_PHYS != 0 {
        st.phys = unzigzag_add(st.phys, get_varint(buf, pos).ok_or_else(malformed)?);
        Some(st.phys)
    } else {
        None
    };
    let len = get_varint(buf, pos).ok_or_else(malformed)?;
    let nents = if has_nents(kind) {
        let n = get_varint(buf, pos).ok_or_else(malformed)?;
        u32::try_from(n).map_err(|_| Step::Bad(at, "nents above 2^32"))?
    } else {
        0
    };
    Ok(Event {
        time_ns: st.time,
        cpu: st.cpu,
        device: st.device,
        kind,
        dir,
        dma,
        phys,
        len,
        nents,
    })
}

impl<R: Read> EventSource for NativeReader<R> {
    fn header(&self) -> &TraceHeader {
        &self.header
    }

    #[inline]
    fn next_event(&mut self) -> Result<Option<Event>, TraceError> {
        if self.remaining != 0 {
            let mut pos = self.pos;
            let mut st = self.delta;
            if let Ok(e) = decode_event(&self.block, &mut pos, &mut st, self.devices) {
                self.pos = pos;
                self.delta = st;
                self.remaining -= 1;
                self.total += 1;
                return Ok(Some(e));
            }
        }
        self.next_event_slow()
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
        Ok((r.header().clone(), v))
    }

    #[test]
    fn varint_round_trips_edges() {
        for v in [
            0,
            1,
            127,
            128,
            16383,
            16384,
            u64::from(u32::MAX),
            u64::MAX - 1,
            u64::MAX,
        ] {
            let mut b = Vec::new();
            put_varint(&mut b, v);
            let mut pos = 0;
            assert_eq!(get_varint(&b, &mut pos), Some(v));
            assert_eq!(pos, b.len());
        }
    }

    #[test]
    fn varint_rejects_overflow_and_runs_off_end() {
        let mut pos = 0;
        assert_eq!(get_varint(&[0xff; 11], &mut pos), None);
        let mut pos = 0;
        assert_eq!(get_varint(&[0x80, 0x80], &mut pos), None);
        let mut pos = 0;
        // 10th byte may only carry bit 63.
        let mut b = vec![0xff; 9];
        b.push(0x02);
        assert_eq!(get_varint(&b, &mut pos), None);
    }

    #[test]
    fn zigzag_is_exact_for_extremes() {
        for (new, old) in [(0, u64::MAX), (u64::MAX, 0), (5, 7), (7, 5), (1 << 63, 0)] {
            assert_eq!(unzigzag_add(old, zigzag_delta(new, old)), new);
        }
        assert_eq!(zigzag_delta(4096, 0), 8192);
        assert_eq!(zigzag_delta(0, 1), 1);
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
        assert_eq!(decode_all(&bytes).unwrap(), (h, ev));
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
