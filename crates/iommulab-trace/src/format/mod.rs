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
//! - **Columns** (`columns.rs`): inside a block every field is stored as a column — the tag
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
//! appear as it reads) needs no second pass. [`EventSource::header`](super::EventSource::header) on a [`NativeReader`]
//! therefore gives the devices seen so far, and the full table at the end.
//!
//! Layout: `header` (the file header and the rules every writer enforces), `block` (a block's
//! payload: preamble, tags, columns), `columns` (the column codec), `writer` and `reader`.

mod block;
mod columns;
mod header;
mod reader;
mod writer;

use std::io::{self, Read};

#[cfg(any(test, feature = "test-utils"))]
use super::{Event, EventKind, TraceDir, TraceHeader};
pub(crate) use header::{
    device_name_problem, event_problem, extend_devices, has_nents, header_problem,
};
pub use reader::NativeReader;
pub use writer::NativeWriter;

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

/// CRC32 of the concatenation of `parts`.
fn crc_of(parts: &[&[u8]]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    for p in parts {
        h.update(p);
    }
    h.finalize()
}

/// Why a header or record does not decode; turned into [`TraceError::Corrupt`] with the offset.
#[derive(Debug)]
struct Bad(&'static str);

/// Reads until `buf` is full or the input ends; how many bytes were read.
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
    use crate::{EventSource, TraceError};

    pub(super) fn encode(header: &TraceHeader, events: &[Event]) -> Vec<u8> {
        let mut w = NativeWriter::new(Vec::new(), header).unwrap();
        for e in events {
            w.write(e).unwrap();
        }
        w.finish().unwrap()
    }

    pub(super) fn decode_all(bytes: &[u8]) -> Result<(TraceHeader, Vec<Event>), TraceError> {
        let mut r = NativeReader::new(bytes, "t.iot".into())?;
        let mut v = Vec::new();
        while let Some(e) = r.next_event()? {
            v.push(e);
        }
        assert_eq!(r.events(), v.len() as u64);
        Ok((r.header().clone(), v))
    }

    /// The same through `read_batch`, mixed with `next_event` at block starts.
    pub(super) fn decode_batches(bytes: &[u8]) -> Result<Vec<Event>, TraceError> {
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

    /// The same through `read_columns`, mixed with `next_event` at block starts.
    fn decode_columns(bytes: &[u8]) -> Result<Vec<Event>, TraceError> {
        let mut r = NativeReader::new(bytes, "t.iot".into())?;
        let mut v = Vec::new();
        let mut cols = crate::EventColumns::default();
        loop {
            if let Some(e) = r.next_event()? {
                v.push(e);
            }
            if r.read_columns(&mut cols)? == 0 {
                assert!(cols.is_empty());
                break;
            }
            v.extend((0..cols.len()).map(|i| cols.get(i)));
        }
        assert_eq!(r.events(), v.len() as u64);
        Ok(v)
    }

    /// Blocks of `bytes` as (offset of the payload, payload length).
    pub(super) fn blocks(bytes: &[u8]) -> Vec<(usize, usize)> {
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
    pub(super) fn reseal(bytes: &mut [u8], payload: usize, len: usize) {
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
        assert_eq!(decode_columns(&bytes).unwrap(), ev);
        assert_eq!(decode_all(&bytes).unwrap(), (h, ev));
    }

    /// Reading field by field gives what reading rows gives, on every damaged trace too: the
    /// same events or the same error (changes behind a valid CRC reach the column checks).
    #[test]
    fn columns_read_what_rows_read() {
        let (h, ev) = synthetic(5_000, 4);
        let bytes = encode(&h, &ev);
        let same = |b: &[u8], what: &str| match (decode_batches(b), decode_columns(b)) {
            (Ok(rows), Ok(cols)) => assert_eq!(rows, cols, "{what}"),
            (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string(), "{what}"),
            (a, b) => panic!(
                "{what}: rows {:?}, columns {:?}",
                a.map(|v| v.len()),
                b.map(|v| v.len())
            ),
        };
        same(&bytes, "intact");
        let mut errors = 0;
        for (payload, len) in blocks(&bytes) {
            for i in (payload..payload + len).step_by(131) {
                let mut b = bytes.clone();
                b[i] ^= 0x81;
                reseal(&mut b, payload, len);
                errors += usize::from(decode_batches(&b).is_err());
                same(&b, &format!("byte {i}"));
            }
        }
        assert!(errors > 0, "some changes must reach the decoder's checks");
        for cut in (0..bytes.len()).step_by(1009) {
            same(&bytes[..cut], &format!("cut at {cut}"));
        }
    }
}
