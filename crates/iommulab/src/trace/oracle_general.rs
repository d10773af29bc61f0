//! Export to libCacheSim's `oracleGeneral` format, to study the physical pages a DMA trace
//! maps with libCacheSim's cache simulators (docs/trace-format.md, "libCacheSim export").
//!
//! Each request is 24 bytes, little-endian, packed (libCacheSim
//! `traceReader/customizedReader/oracleGeneralBin.h`):
//!
//! ```text
//! offset 0   u32 clock_time          event time in whole seconds (configurable unit)
//! offset 4   u64 obj_id              physical page number (phys >> 12)
//! offset 12  u32 obj_size            4096
//! offset 16  i64 next_access_vtime   1-based index of the next request for this obj_id,
//!                                    -1 if there is none
//! ```
//!
//! Requests are the mapping events in trace order: `map` and `alloc` give one request per
//! 4 KiB physical page they cover, a `map_sg` gives one per page of each of its `sg_seg`
//! segments. Events without a physical address are skipped ([`OracleGeneralWriter::skipped`]);
//! a mapping contributes at most [`MAX_PAGES_PER_MAP`] pages.
//!
//! `next_access_vtime` needs the future, so the writer keeps the requests in memory and
//! computes it in a reverse pass at [`OracleGeneralWriter::finish`]: 20 bytes per request
//! plus a hash map entry (about 32 bytes) per distinct page.
//!
//! The CSV variant has a header line `clock_time,obj_id,obj_size,next_access_vtime`; read it
//! with
//!
//! ```text
//! cachesim trace.oracleGeneral.csv csv lru 0.01 --ignore-obj-size 1 \
//!     -t "time-col=1,obj-id-col=2,obj-size-col=3,next-access-col=4,delimiter=,,has-header=true,obj-id-is-num=true"
//! ```
//!
//! and the binary one with `cachesim trace.oracleGeneral oracleGeneral lru 0.01`.

use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;

use super::{Event, EventKind, TraceError};

/// Bytes per binary request.
pub const RECORD_BYTES: usize = 24;

/// The page size requests are counted in.
pub const PAGE_BYTES: u64 = 4096;

/// Binary or CSV output.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OracleFormat {
    /// 24-byte packed records (`.oracleGeneral`).
    Binary,
    /// `clock_time,obj_id,obj_size,next_access_vtime` lines (`.oracleGeneral.csv`).
    Csv,
}

/// Most pages one mapping contributes (4 GiB): a corrupt or absurd `len` must not make an
/// export or a statistics pass run for hours.
pub const MAX_PAGES_PER_MAP: u64 = 1 << 20;

/// The 4 KiB pages `[addr, addr + len)` touches, at most [`MAX_PAGES_PER_MAP`]; a zero-length
/// range touches the page of `addr`. Saturates at the top of the address space.
pub(crate) fn pages(addr: u64, len: u64) -> std::ops::RangeInclusive<u64> {
    let first = addr / PAGE_BYTES;
    let last = addr.saturating_add(len.max(1) - 1) / PAGE_BYTES;
    first..=last.min(first + (MAX_PAGES_PER_MAP - 1))
}

/// Collects mapping requests and writes them as an oracleGeneral trace on `finish`.
///
/// # Examples
///
/// ```
/// use iommulab::trace::{Event, EventKind};
/// use iommulab::trace::oracle_general::{OracleFormat, OracleGeneralWriter};
///
/// let mut w = OracleGeneralWriter::new(Vec::new(), OracleFormat::Csv);
/// let mut e = Event::new(EventKind::Map);
/// e.phys = Some(0x5000);
/// e.len = 8192;
/// w.write(&e).unwrap();
/// w.write(&e).unwrap();
/// let text = String::from_utf8(w.finish().unwrap()).unwrap();
/// assert_eq!(
///     text,
///     "clock_time,obj_id,obj_size,next_access_vtime\n0,5,4096,3\n0,6,4096,4\n0,5,4096,-1\n0,6,4096,-1\n"
/// );
/// ```
#[derive(Debug)]
pub struct OracleGeneralWriter<W: Write> {
    inner: W,
    path: PathBuf,
    format: OracleFormat,
    time_unit_ns: u64,
    obj: Vec<u64>,
    time: Vec<u32>,
    /// `sg_seg` records still expected after a `map_sg` (counted) or `unmap_sg` (ignored).
    sg_left: u32,
    sg_counts: bool,
    skipped: u64,
}

impl<W: Write> OracleGeneralWriter<W> {
    /// A writer to `w`; errors name `<output>`; time in seconds.
    pub fn new(w: W, format: OracleFormat) -> Self {
        Self::with_path(w, format, PathBuf::from("<output>"))
    }

    /// A writer whose errors name `path`.
    pub fn with_path(w: W, format: OracleFormat, path: PathBuf) -> Self {
        OracleGeneralWriter {
            inner: w,
            path,
            format,
            time_unit_ns: 1_000_000_000,
            obj: Vec::new(),
            time: Vec::new(),
            sg_left: 0,
            sg_counts: false,
            skipped: 0,
        }
    }

    /// Sets the unit of `clock_time` (default 1 s = 1e9 ns; times saturate at `u32::MAX`).
    pub fn with_time_unit_ns(mut self, unit: u64) -> Self {
        self.time_unit_ns = unit.max(1);
        self
    }

    /// Requests collected so far.
    pub fn requests(&self) -> usize {
        self.obj.len()
    }

    /// Mapping events skipped because they carry no physical address.
    pub fn skipped(&self) -> u64 {
        self.skipped
    }

    fn push(&mut self, e: &Event) {
        let Some(phys) = e.phys else {
            self.skipped += 1;
            return;
        };
        let t = u32::try_from(e.time_ns / self.time_unit_ns).unwrap_or(u32::MAX);
        for page in pages(phys, e.len) {
            self.obj.push(page);
            self.time.push(t);
        }
    }

    /// Takes one event (only mapping events make requests).
    pub fn write(&mut self, e: &Event) -> Result<(), TraceError> {
        match e.kind {
            EventKind::SgSeg if self.sg_left > 0 => {
                self.sg_left -= 1;
                if self.sg_counts {
                    self.push(e);
                }
            }
            EventKind::MapSg | EventKind::UnmapSg => {
                self.sg_left = e.nents;
                self.sg_counts = e.kind == EventKind::MapSg;
            }
            EventKind::Map | EventKind::Alloc => {
                self.sg_left = 0;
                self.push(e);
            }
            _ => self.sg_left = 0,
        }
        Ok(())
    }

    /// Computes `next_access_vtime`, writes every request, flushes, returns the writer.
    pub fn finish(mut self) -> Result<W, TraceError> {
        let n = self.obj.len();
        let mut next = vec![-1i64; n];
        let mut seen: HashMap<u64, usize> = HashMap::new();
        for i in (0..n).rev() {
            if let Some(j) = seen.insert(self.obj[i], i) {
                next[i] = i64::try_from(j + 1).unwrap_or(i64::MAX);
            }
        }
        drop(seen);
        let mut buf = Vec::with_capacity(64 * 1024 + 64);
        if self.format == OracleFormat::Csv {
            buf.extend_from_slice(b"clock_time,obj_id,obj_size,next_access_vtime\n");
        }
        let obj = std::mem::take(&mut self.obj);
        let time = std::mem::take(&mut self.time);
        for ((t, o), nx) in time.into_iter().zip(obj).zip(next) {
            match self.format {
                OracleFormat::Binary => {
                    buf.extend_from_slice(&t.to_le_bytes());
                    buf.extend_from_slice(&o.to_le_bytes());
                    buf.extend_from_slice(&4096u32.to_le_bytes());
                    buf.extend_from_slice(&nx.to_le_bytes());
                }
                OracleFormat::Csv => {
                    // Writing into a Vec cannot fail.
                    let _ = writeln!(buf, "{t},{o},4096,{nx}");
                }
            }
            if buf.len() >= 64 * 1024 {
                self.flush(&buf)?;
                buf.clear();
            }
        }
        self.flush(&buf)?;
        self.inner.flush().map_err(|source| TraceError::Io {
            path: self.path.clone(),
            source,
        })?;
        Ok(self.inner)
    }

    fn flush(&mut self, buf: &[u8]) -> Result<(), TraceError> {
        self.inner.write_all(buf).map_err(|source| TraceError::Io {
            path: self.path.clone(),
            source,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(kind: EventKind, phys: Option<u64>, len: u64, nents: u32) -> Event {
        let mut e = Event::new(kind);
        e.phys = phys;
        e.len = len;
        e.nents = nents;
        e
    }

    /// Decodes 24-byte records into (time, obj, size, next).
    fn records(bytes: &[u8]) -> Vec<(u32, u64, u32, i64)> {
        assert_eq!(bytes.len() % RECORD_BYTES, 0);
        bytes
            .chunks(RECORD_BYTES)
            .map(|r| {
                (
                    u32::from_le_bytes(r[0..4].try_into().unwrap()),
                    u64::from_le_bytes(r[4..12].try_into().unwrap()),
                    u32::from_le_bytes(r[12..16].try_into().unwrap()),
                    i64::from_le_bytes(r[16..24].try_into().unwrap()),
                )
            })
            .collect()
    }

    #[test]
    fn binary_records_match_libcachesim_layout() {
        let mut w = OracleGeneralWriter::new(Vec::new(), OracleFormat::Binary);
        let mut e = map(EventKind::Map, Some(0x1000), 4096, 0);
        e.time_ns = 3_500_000_000;
        w.write(&e).unwrap();
        w.write(&map(EventKind::Unmap, Some(0x1000), 4096, 0))
            .unwrap();
        w.write(&map(EventKind::Alloc, Some(0x2fff), 2, 0)).unwrap();
        w.write(&map(EventKind::Map, Some(0x1800), 1, 0)).unwrap();
        let r = records(&w.finish().unwrap());
        assert_eq!(
            r,
            [
                (3, 1, 4096, 4),
                (0, 2, 4096, -1),
                (0, 3, 4096, -1),
                (0, 1, 4096, -1)
            ]
        );
    }

    #[test]
    fn map_sg_segments_count_and_unmap_sg_segments_do_not() {
        let mut w = OracleGeneralWriter::new(Vec::new(), OracleFormat::Binary);
        w.write(&map(EventKind::MapSg, None, 8192, 2)).unwrap();
        w.write(&map(EventKind::SgSeg, Some(0x10_000), 4096, 0))
            .unwrap();
        w.write(&map(EventKind::SgSeg, Some(0x20_000), 4096, 0))
            .unwrap();
        w.write(&map(EventKind::UnmapSg, None, 8192, 2)).unwrap();
        w.write(&map(EventKind::SgSeg, Some(0x10_000), 4096, 0))
            .unwrap();
        w.write(&map(EventKind::SgSeg, Some(0x20_000), 4096, 0))
            .unwrap();
        w.write(&map(EventKind::Map, None, 4096, 0)).unwrap();
        assert_eq!(w.skipped(), 1);
        let r = records(&w.finish().unwrap());
        assert_eq!(r, [(0, 0x10, 4096, -1), (0, 0x20, 4096, -1)]);
    }

    #[test]
    fn page_ranges_saturate() {
        assert_eq!(pages(0, 0), 0..=0);
        assert_eq!(pages(4095, 2), 0..=1);
        assert_eq!(
            pages(u64::MAX, u64::MAX),
            (u64::MAX / 4096)..=(u64::MAX / 4096)
        );
    }
}
