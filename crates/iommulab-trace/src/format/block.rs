//! A block's payload: the preamble declaring new devices, the tag column (kind, direction,
//! which addresses are present) and the seven numeric columns ([`super::columns`]), encoded
//! from a batch of events and decoded back in L1-sized chunks.

use super::columns::{Column, Cursor, get_varint, put_column, put_varint};
use super::header::{get_str, put_str};
use super::{Bad, MAX_DEVICES};
use crate::event_columns::{DIRS, EventColumns, KINDS, TAG_DMA, TAG_KIND, TAG_PHYS, tag_of};
use crate::{Event, EventKind};

/// Encodes a block payload into `out` (cleared first): the preamble declaring `declared`
/// devices, the tag column, then the numeric columns (docs/trace-format.md, "Blocks").
/// `values` and `deltas` are scratch buffers.
pub(super) fn encode(
    out: &mut Vec<u8>,
    declared: &[String],
    events: &[Event],
    values: &mut Vec<u64>,
    deltas: &mut Vec<u64>,
) {
    out.clear();
    put_varint(out, declared.len() as u64);
    for d in declared {
        put_str(out, d);
    }
    out.extend(events.iter().map(tag_of));
    put_field(out, events, values, deltas, Column::Plain, |e| {
        Some(u64::from(e.cpu))
    });
    put_field(out, events, values, deltas, Column::Plain, |e| {
        Some(u64::from(e.device))
    });
    put_field(out, events, values, deltas, Column::Delta, |e| {
        Some(e.time_ns)
    });
    put_field(out, events, values, deltas, Column::Delta, |e| e.dma);
    put_field(out, events, values, deltas, Column::Delta, |e| e.phys);
    put_field(out, events, values, deltas, Column::Plain, |e| Some(e.len));
    put_field(out, events, values, deltas, Column::Plain, |e| {
        Some(u64::from(e.nents))
    });
}

/// Appends the column of `field`. Every event has a value in every column, so the
/// reader needs no per-column cursor: where `field` is `None` the column repeats the
/// previous value (before the first `Some`, the first `Some`'s), a zero delta that costs
/// few bits.
fn put_field(
    out: &mut Vec<u8>,
    events: &[Event],
    values: &mut Vec<u64>,
    deltas: &mut Vec<u64>,
    kind: Column,
    field: impl Fn(&Event) -> Option<u64>,
) {
    let first = events.iter().find_map(&field).unwrap_or(0);
    values.clear();
    values.extend(events.iter().scan(first, |last, e| {
        *last = field(e).unwrap_or(*last);
        Some(*last)
    }));
    put_column(out, values, kind, deltas);
}

/// Events a block is decoded in at a time: the 7 column buffers (7 × 256 × 8 bytes) stay in
/// L1 while the chunk's events are assembled from them.
const CHUNK: usize = 256;

/// The reader's reusable column buffers for one chunk: cpu, device, time, dma, phys, len,
/// nents (the block's column order).
#[derive(Debug)]
pub(super) struct Columns(Box<[[u64; CHUNK]; 7]>);

impl Default for Columns {
    fn default() -> Self {
        Columns(Box::new([[0; CHUNK]; 7]))
    }
}

impl Columns {
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

/// Where a block's events go, a chunk of up to [`CHUNK`] at a time: assembled into
/// [`Event`] rows from the reader's L1-sized buffers, or decoded straight into the columns
/// of [`EventColumns`] (no copy).
pub(super) trait Decoded {
    /// Empties the output for a block of `count` events.
    fn begin(&mut self, count: usize);
    /// Events held.
    fn len(&self) -> usize;
    /// Replaces the events held with `rows` (the rest of a block `next_event` started on).
    fn set_rows(&mut self, rows: &[Event]);
    /// The buffers events `at..at + k` of the block's numeric columns (cpu, device, time,
    /// dma, phys, len, nents) are decoded into: `cols`' or the output's own.
    fn buffers<'a>(&'a mut self, cols: &'a mut Columns, at: usize, k: usize) -> [&'a mut [u64]; 7];
    /// Takes the chunk: its tags (kinds checked), and its values in the buffers (limits
    /// checked).
    fn commit(&mut self, cols: &Columns, tags: &[u8]);
}

impl Decoded for Vec<Event> {
    fn begin(&mut self, count: usize) {
        self.clear();
        self.reserve(count);
    }

    fn len(&self) -> usize {
        self.len()
    }

    fn set_rows(&mut self, rows: &[Event]) {
        self.clear();
        self.extend_from_slice(rows);
    }

    fn buffers<'a>(
        &'a mut self,
        cols: &'a mut Columns,
        _at: usize,
        k: usize,
    ) -> [&'a mut [u64]; 7] {
        cols.0.each_mut().map(|b| &mut b[..k])
    }

    #[allow(clippy::cast_possible_truncation)] // cpu, device and nents are checked against their limits
    fn commit(&mut self, cols: &Columns, tags: &[u8]) {
        let [cpu, device, time, dma, phys, len, nents] = cols.chunk(tags.len());
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
        self.extend(rows.map(
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
}

impl Decoded for EventColumns {
    fn begin(&mut self, count: usize) {
        self.begin_block(count);
    }

    fn len(&self) -> usize {
        self.len()
    }

    fn set_rows(&mut self, rows: &[Event]) {
        self.clear();
        self.extend_rows(rows);
    }

    fn buffers<'a>(
        &'a mut self,
        _cols: &'a mut Columns,
        at: usize,
        k: usize,
    ) -> [&'a mut [u64]; 7] {
        self.columns_mut(at, k)
    }

    fn commit(&mut self, _cols: &Columns, tags: &[u8]) {
        self.extend_tags(tags);
    }
}

/// Decodes a block payload (`buf[..end]`, padded) of `count` events into `out`: the device
/// declarations (appended to `devices`), the tag column, then the numeric columns, each
/// checked, then handed to `out` chunk by chunk. On error: the offset in the block and what
/// is wrong.
pub(super) fn decode<O: Decoded>(
    buf: &[u8],
    end: usize,
    count: usize,
    cols: &mut Columns,
    devices: &mut Vec<String>,
    out: &mut O,
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
    out.begin(count);
    for (c, tags) in tags.chunks(CHUNK).enumerate() {
        let k = tags.len();
        let mut bufs = out.buffers(cols, c * CHUNK, k);
        for (((cursor, col), &(_, limit)), &start) in cursors
            .iter_mut()
            .zip(bufs.iter_mut())
            .zip(&layout)
            .zip(&starts)
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
        let nents = &*bufs[6];
        // `nents` is 0 except on map_sg/unmap_sg (kinds 2 and 3).
        let stray = |(&tag, &n): (&u8, &u64)| n * u64::from((tag & TAG_KIND).wrapping_sub(2) > 1);
        if tags.iter().zip(nents).map(stray).fold(0, |a, v| a | v) != 0 {
            let i = tags.iter().zip(nents).position(|t| stray(t) != 0);
            return Err((
                tags_at + c * CHUNK + i.unwrap_or(0),
                "nents on an event other than map_sg/unmap_sg",
            ));
        }
        out.commit(cols, tags);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::header::has_nents;
    use super::super::tests::{blocks, decode_all, encode, reseal};
    use super::super::{NativeWriter, synthetic};
    use super::*;
    use crate::TraceError;
    use crate::TraceHeader;

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
}
