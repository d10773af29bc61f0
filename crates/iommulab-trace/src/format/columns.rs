//! The column codec of a native-trace block (format version 2, docs/trace-format.md).
//!
//! A block stores each event field as a column. A column is a run of **miniblocks** of up to
//! [`MINIBLOCK`] values: one width byte `w` (0 ..= 64), the miniblock's minimum as a varint,
//! then every value minus that minimum in exactly `w` bits, least significant bit first. This
//! is frame-of-reference bit packing (as in Parquet's `DELTA_BINARY_PACKED`): the decoder
//! runs one tight loop per miniblock with no branch on the data — one unaligned load, a shift
//! and a mask per value — which is what lets a reader decode 80–105 M events/s where LEB128
//! varints (one data-dependent length per field) did 20 M (`cargo bench --bench trace`).
//! A per-miniblock minimum and width keep one outlier (a long idle gap, a jump to another
//! device's IOVA space) from widening more than 64 values.
//!
//! Address and time columns are **delta** columns: a varint start value, then the wrapping
//! differences between neighbours (the first difference is 0), packed with the minimum taken
//! in signed order so that small steps either way stay narrow.

/// Values per miniblock.
pub(super) const MINIBLOCK: usize = 64;

/// Zero bytes a reader keeps after a block's payload, so the last value of a miniblock can
/// be read with one 16-byte load.
pub(super) const PAD: usize = 16;

/// How a column's miniblock minimum is ordered, and whether it holds deltas.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Column {
    /// Plain values; the minimum is unsigned and stored as a varint.
    Plain,
    /// A start value, then wrapping deltas whose minimum is signed (stored zig-zag).
    Delta,
}

/// Appends `v` as an LEB128 varint.
#[inline]
pub(super) fn put_varint(buf: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        buf.push(v.to_le_bytes()[0] | 0x80);
        v >>= 7;
    }
    buf.push(v.to_le_bytes()[0]);
}

/// Reads an LEB128 varint at `*pos`; `None` if it runs off the end of `buf` or overflows 64
/// bits. (Varints are rare in a version-2 block — one per miniblock — so this is the simple
/// byte loop.)
pub(super) fn get_varint(buf: &[u8], pos: &mut usize) -> Option<u64> {
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

const fn zigzag(d: i64) -> u64 {
    ((d << 1) ^ (d >> 63)) as u64
}

const fn unzigzag(z: u64) -> u64 {
    (z >> 1) ^ (z & 1).wrapping_neg()
}

/// Bits needed for `range` (0 for 0).
const fn width_of(range: u64) -> u32 {
    u64::BITS - range.leading_zeros()
}

/// Appends a column of `values` (`scratch` is reused for the deltas).
pub(super) fn put_column(buf: &mut Vec<u8>, values: &[u64], kind: Column, scratch: &mut Vec<u64>) {
    match kind {
        Column::Plain => put_miniblocks(buf, values, Column::Plain),
        Column::Delta => {
            let Some(&start) = values.first() else {
                return;
            };
            put_varint(buf, start);
            scratch.clear();
            scratch.push(0);
            scratch.extend(values.windows(2).map(|w| w[1].wrapping_sub(w[0])));
            put_miniblocks(buf, scratch, Column::Delta);
        }
    }
}

#[allow(clippy::cast_possible_truncation)] // w ≤ 64; bytes are taken off the accumulator
fn put_miniblocks(buf: &mut Vec<u8>, values: &[u64], kind: Column) {
    for mb in values.chunks(MINIBLOCK) {
        let (min, range) = match kind {
            Column::Plain => {
                let min = mb.iter().copied().min().unwrap_or(0);
                let max = mb.iter().copied().max().unwrap_or(0);
                (min, max - min)
            }
            Column::Delta => {
                let min = mb.iter().map(|&v| v as i64).min().unwrap_or(0);
                let max = mb.iter().map(|&v| v as i64).max().unwrap_or(0);
                (min as u64, max.wrapping_sub(min) as u64)
            }
        };
        let w = width_of(range);
        buf.push(w as u8);
        put_varint(
            buf,
            match kind {
                Column::Plain => min,
                Column::Delta => zigzag(min as i64),
            },
        );
        // Bit accumulator: flush whole bytes as they fill.
        let mut acc: u128 = 0;
        let mut bits = 0u32;
        for &v in mb {
            acc |= u128::from(v.wrapping_sub(min)) << bits;
            bits += w;
            while bits >= 8 {
                buf.push(acc as u8);
                acc >>= 8;
                bits -= 8;
            }
        }
        if bits > 0 {
            buf.push(acc as u8);
        }
    }
}

/// Why a column does not decode.
pub(super) type ColumnError = &'static str;

/// A position inside one column of a block, from which values are decoded a few miniblocks
/// at a time (a block is decoded in chunks that fit L1, column by column, then assembled).
#[derive(Clone, Copy, Debug)]
pub(super) struct Cursor {
    pos: usize,
    kind: Column,
    /// Running sum of a delta column.
    acc: u64,
}

impl Cursor {
    /// A cursor of an empty column.
    pub(super) const EMPTY: Cursor = Cursor {
        pos: 0,
        kind: Column::Plain,
        acc: 0,
    };

    /// A cursor at the column of `n` values starting at `*pos`, which is moved past the
    /// column after checking every miniblock header fits the block (`buf[..end]`). On error
    /// `*pos` is where the bad miniblock starts.
    pub(super) fn locate(
        buf: &[u8],
        end: usize,
        pos: &mut usize,
        n: usize,
        kind: Column,
    ) -> Result<Cursor, ColumnError> {
        let body = &buf[..end];
        let mut cursor = Cursor {
            pos: *pos,
            kind,
            acc: 0,
        };
        if n == 0 {
            return Ok(cursor);
        }
        if kind == Column::Delta {
            cursor.acc = get_varint(body, pos).ok_or("a malformed column start value")?;
            cursor.pos = *pos;
        }
        let mut left = n;
        while left > 0 {
            let k = left.min(MINIBLOCK);
            let (w, _, data) = miniblock_header(body, pos)?;
            let bytes = (k * w as usize).div_ceil(8);
            if data + bytes > end {
                return Err("a column that runs past its block");
            }
            *pos = data + bytes;
            left -= k;
        }
        Ok(cursor)
    }

    /// Decodes the next `out.len()` values (a multiple of [`MINIBLOCK`], except at the
    /// column's end). `buf` holds the block's payload in `buf[..end]` followed by at least
    /// [`PAD`] bytes; the headers were checked by [`Cursor::locate`].
    pub(super) fn read(
        &mut self,
        buf: &[u8],
        end: usize,
        out: &mut [u64],
    ) -> Result<(), ColumnError> {
        debug_assert!(buf.len() >= end + PAD);
        for chunk in out.chunks_mut(MINIBLOCK) {
            let (w, min, data) = miniblock_header(&buf[..end], &mut self.pos)?;
            let min = if self.kind == Column::Delta {
                unzigzag(min)
            } else {
                min
            };
            let bytes = (chunk.len() * w as usize).div_ceil(8);
            if data + bytes > end {
                return Err("a column that runs past its block");
            }
            let src = &buf[data..data + bytes + PAD];
            if self.kind == Column::Delta {
                unpack::<true>(src, w, min, chunk, &mut self.acc);
            } else {
                unpack::<false>(src, w, min, chunk, &mut self.acc);
            }
            self.pos = data + bytes;
        }
        Ok(())
    }
}

/// Reads a miniblock's width and minimum at `*pos`: `(width, raw minimum, offset of the
/// packed values)`. On error `*pos` is unchanged.
#[inline]
fn miniblock_header(body: &[u8], pos: &mut usize) -> Result<(u32, u64, usize), ColumnError> {
    let at = *pos;
    let w = u32::from(*body.get(at).ok_or("a column that runs past its block")?);
    if w > 64 {
        return Err("a miniblock wider than 64 bits");
    }
    let mut p = at + 1;
    let min = get_varint(body, &mut p).ok_or("a malformed miniblock minimum")?;
    Ok((w, min, p))
}

/// Decodes a whole column of `n` values at `*pos` into `out` (replacing its contents), and
/// moves `*pos` past it. On error `*pos` is where the bad miniblock starts.
#[cfg(test)]
pub(super) fn get_column(
    buf: &[u8],
    end: usize,
    pos: &mut usize,
    n: usize,
    kind: Column,
    out: &mut Vec<u64>,
) -> Result<(), ColumnError> {
    let mut cursor = Cursor::locate(buf, end, pos, n, kind)?;
    out.clear();
    out.resize(n, 0);
    cursor.read(buf, end, out)
}

/// Unpacks `out.len()` values of `w` bits from `src` (which extends [`PAD`] bytes past the
/// packed bits), adding `min`; with `DELTA`, each value is a difference added to the running
/// sum `acc`, and the sums are stored. Dispatches once per miniblock to a loop compiled for
/// that width, so every shift and byte offset inside it is a constant.
#[inline]
fn unpack<const DELTA: bool>(src: &[u8], w: u32, min: u64, out: &mut [u64], acc: &mut u64) {
    macro_rules! widths {
        ($($w:literal)*) => {
            match w {
                0 if !DELTA => out.fill(min),
                $($w => unpack_width::<$w, DELTA>(src, min, out, acc),)*
                _ => unpack_width::<0, DELTA>(src, min, out, acc),
            }
        };
    }
    widths!(1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31
        32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60
        61 62 63 64);
}

/// Value `j` of a run of `W`-bit values starting at `src[0]`, bit 0. With `W` and `j`
/// constants (an unrolled loop) this is one load, one shift and one mask.
#[inline(always)]
#[allow(clippy::cast_possible_truncation)] // the mask keeps the low W ≤ 64 bits
fn value_at<const W: usize>(src: &[u8], j: usize) -> u64 {
    if W == 0 {
        return 0;
    }
    let bit = j * W;
    let mask = u64::MAX >> (64 - W);
    if W <= 56 {
        let mut b = [0u8; 8];
        b.copy_from_slice(&src[bit / 8..bit / 8 + 8]);
        (u64::from_le_bytes(b) >> (bit % 8)) & mask
    } else {
        let mut b = [0u8; 16];
        b.copy_from_slice(&src[bit / 8..bit / 8 + 16]);
        (u128::from_le_bytes(b) >> (bit % 8)) as u64 & mask
    }
}

fn unpack_width<const W: usize, const DELTA: bool>(
    src: &[u8],
    min: u64,
    out: &mut [u64],
    acc: &mut u64,
) {
    let mut sum = *acc;
    let mut put = |o: &mut u64, v: u64| {
        let v = v.wrapping_add(min);
        if DELTA {
            sum = sum.wrapping_add(v);
            *o = sum;
        } else {
            *o = v;
        }
    };
    // Eight values take exactly `W` bytes: unroll by eight so offsets are constants.
    let mut groups = out.chunks_exact_mut(8);
    let mut base = 0;
    for group in &mut groups {
        let s = &src[base..base + W + PAD];
        for (j, o) in group.iter_mut().enumerate() {
            put(o, value_at::<W>(s, j));
        }
        base += W;
    }
    let s = &src[base..];
    for (j, o) in groups.into_remainder().iter_mut().enumerate() {
        put(o, value_at::<W>(s, j));
    }
    *acc = sum;
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn round_trip(values: &[u64], kind: Column) -> Vec<u64> {
        let mut buf = Vec::new();
        put_column(&mut buf, values, kind, &mut Vec::new());
        let end = buf.len();
        buf.resize(end + PAD, 0);
        let mut pos = 0;
        let mut out = Vec::new();
        get_column(&buf, end, &mut pos, values.len(), kind, &mut out).unwrap();
        assert_eq!(pos, end, "the column is consumed exactly");
        out
    }

    #[test]
    fn varint_round_trips_edges() {
        for v in [0, 1, 127, 128, 16383, 16384, u64::from(u32::MAX), u64::MAX] {
            let mut b = Vec::new();
            put_varint(&mut b, v);
            let mut pos = 0;
            assert_eq!(get_varint(&b, &mut pos), Some(v));
            assert_eq!(pos, b.len());
        }
        assert_eq!(get_varint(&[0xff; 11], &mut 0), None);
        assert_eq!(get_varint(&[0x80, 0x80], &mut 0), None);
        let mut ten = vec![0xff; 9];
        ten.push(0x02); // the 10th byte may only carry bit 63
        assert_eq!(get_varint(&ten, &mut 0), None);
    }

    #[test]
    fn every_width_round_trips() {
        for w in 0..=64u32 {
            let top = if w == 64 { u64::MAX } else { (1u64 << w) - 1 };
            let values: Vec<u64> = (0..130u64).map(|i| top.wrapping_mul(i % 3) / 2).collect();
            for kind in [Column::Plain, Column::Delta] {
                assert_eq!(round_trip(&values, kind), values, "w = {w}, {kind:?}");
            }
        }
    }

    #[test]
    fn packs_to_the_width_of_each_miniblock() {
        // 64 values in 0..16 and one outlier in the next miniblock: the first costs 4 bits each.
        let mut values: Vec<u64> = (0..64).map(|i| 1000 + i % 16).collect();
        values.push(u64::MAX);
        let mut buf = Vec::new();
        put_column(&mut buf, &values, Column::Plain, &mut Vec::new());
        // miniblock 1: width + varint(1000) (2 bytes) + 32 bytes; miniblock 2: width + 10-byte
        // varint minimum + 0 bits.
        assert_eq!(buf.len(), (1 + 2 + 32) + (1 + 10));
        assert_eq!(round_trip(&values, Column::Plain), values);
    }

    #[test]
    fn delta_columns_keep_descending_runs_narrow() {
        // A top-down IOVA allocator: every step is -4096.
        let values: Vec<u64> = (0..64u64).map(|i| 0xffff_f000 - i * 4096).collect();
        let mut buf = Vec::new();
        put_column(&mut buf, &values, Column::Delta, &mut Vec::new());
        // start varint (5 bytes), width 13 (0 ..= 4096 after the minimum -4096), 2-byte
        // minimum, 64 × 13 bits.
        assert_eq!(buf.len(), 5 + 1 + 2 + 104);
        assert_eq!(round_trip(&values, Column::Delta), values);
    }

    #[test]
    fn bad_columns_are_errors() {
        let mut buf = vec![65, 0];
        buf.resize(2 + PAD, 0);
        let mut out = Vec::new();
        let r = get_column(&buf, 2, &mut 0, 3, Column::Plain, &mut out);
        assert_eq!(r, Err("a miniblock wider than 64 bits"));
        // Width 8 for 3 values needs 3 bytes after the minimum; the block ends after 1.
        let mut buf = vec![8, 0, 7];
        buf.resize(3 + PAD, 0);
        let r = get_column(&buf, 3, &mut 0, 3, Column::Plain, &mut out);
        assert_eq!(r, Err("a column that runs past its block"));
        let r = get_column(&buf, 0, &mut 0, 3, Column::Plain, &mut out);
        assert_eq!(r, Err("a column that runs past its block"));
    }

    proptest! {
        #[test]
        fn columns_round_trip(values in proptest::collection::vec(any::<u64>(), 0..300),
                              small in proptest::collection::vec(0u64..5000, 0..300)) {
            for kind in [Column::Plain, Column::Delta] {
                prop_assert_eq!(round_trip(&values, kind), values.clone());
                prop_assert_eq!(round_trip(&small, kind), small.clone());
            }
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200),
                                       n in 0usize..300, delta in any::<bool>()) {
            let end = bytes.len();
            let mut buf = bytes;
            buf.resize(end + PAD, 0);
            let kind = if delta { Column::Delta } else { Column::Plain };
            let mut pos = 0;
            let r = get_column(&buf, end, &mut pos, n, kind, &mut Vec::new());
            prop_assert!(pos <= end || r.is_err());
        }
    }
}
