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
//! Requests are the **page sequence** of the trace (S1.9, the sequence `iommulab_virt::mrc`
//! computes curves on):
//! every 4 KiB physical page of every buffer the replay maps, in trace order — so libCacheSim
//! sees exactly the reference stream `iommulab mrc` computes curves on. The writer runs the
//! events through the replay's own [`TraceWorkload`] (the code `iommulab replay` and
//! `iommulab mrc` read traces with) and expands each map as the guest model does:
//!
//! - `map` and `alloc` give the pages of `[phys, phys + len)` (a `map` without a physical
//!   address uses its DMA address, as the replay does; one without a DMA address cannot be
//!   replayed and is skipped, [`OracleGeneralWriter::skipped`]);
//! - a `map_sg` gives the pages of each of its `sg_seg` segments, with the lengths the
//!   IOMMU merged spread over the segments that lack one; `unmap_sg` segments give none;
//! - `iommu:map` events (device `iommu`) are skipped once the trace shows another device:
//!   they repeat the `dma:` events' mappings, and counting both would double every page.
//!
//! A mapping contributes at most [`MAX_PAGES_PER_MAP`] pages (the guest model caps it too).
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

use std::collections::{HashMap, VecDeque};
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::{DmaOp, ReplayReport, TraceWorkload, Workload};
pub use iommulab_trace::pages::{MAX_PAGES_PER_MAP, PAGE_BYTES, pages};
use iommulab_trace::{
    Event, EventKind, EventSink, EventSource, OutputFile, TraceError, TraceHeader,
};

/// Bytes per binary request.
pub const RECORD_BYTES: usize = 24;

/// Binary or CSV output.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OracleFormat {
    /// 24-byte packed records (`.oracleGeneral`).
    Binary,
    /// `clock_time,obj_id,obj_size,next_access_vtime` lines (`.oracleGeneral.csv`).
    Csv,
}

/// Events the writer has been given and the replay has not read yet, as the replay's
/// [`EventSource`]; its device table is the one [`OracleGeneralWriter::set_devices`] was
/// given (the source's table after the batch being written, as the replay would see it).
#[derive(Debug, Default)]
struct Pending {
    header: TraceHeader,
    events: VecDeque<Event>,
}

impl EventSource for Pending {
    fn header(&self) -> &TraceHeader {
        &self.header
    }
    fn next_event(&mut self) -> Result<Option<Event>, TraceError> {
        Ok(self.events.pop_front())
    }
    fn read_batch(&mut self, out: &mut Vec<Event>) -> Result<usize, TraceError> {
        out.clear();
        out.extend(self.events.drain(..));
        Ok(out.len())
    }
}

/// Collects mapping requests and writes them as an oracleGeneral trace on `finish`.
///
/// # Examples
///
/// ```
/// use iommulab_trace::{Event, EventKind};
/// use iommulab_workload::oracle_general::{OracleFormat, OracleGeneralWriter};
///
/// let mut w = OracleGeneralWriter::new(Vec::new(), OracleFormat::Csv);
/// w.set_devices(&["0000:01:00.0".to_owned()]);
/// let mut e = Event::new(EventKind::Map);
/// e.dma = Some(0xfff0_0000);
/// e.phys = Some(0x5000);
/// e.len = 8192;
/// w.write(&e).unwrap();
/// w.write(&e).unwrap(); // the address again: the replay closes the first mapping
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
    /// The replay reading the events given so far (boxed: it is large, and sinks are moved).
    replay: Box<TraceWorkload<Pending>>,
    /// `sg_seg` records still expected after a `map_sg`/`unmap_sg`: the replay reads a
    /// list's segments at once, so it runs only once they are all queued.
    sg_left: u32,
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
            replay: Box::new(TraceWorkload::new(Pending::default()).fed()),
            sg_left: 0,
        }
    }

    /// Sets the unit of `clock_time` (default 1 s = 1e9 ns; times saturate at `u32::MAX`).
    pub fn with_time_unit_ns(mut self, unit: u64) -> Self {
        self.time_unit_ns = unit.max(1);
        self
    }

    /// Sets the trace's device table (the replay skips `iommu` events once another device
    /// exists): the whole table so far, as [`EventSink::set_devices`] passes it.
    pub fn set_devices(&mut self, devices: &[String]) {
        self.replay.source_mut().header.devices = devices.to_vec();
    }

    /// Requests collected so far.
    pub fn requests(&self) -> usize {
        self.obj.len()
    }

    /// Mapping events the replay could not replay (no DMA address, or a `map_sg` without a
    /// segment address), which make no request.
    pub fn skipped(&self) -> u64 {
        self.replay.report().incomplete
    }

    /// What the replay made of the events so far (`iommu` events skipped, ...).
    pub fn report(&self) -> ReplayReport {
        self.replay.report()
    }

    /// Runs the replay over the queued events, appending the pages of each map.
    fn drain(&mut self) -> Result<(), TraceError> {
        // The queued events are one mapping (a map, or a map_sg with its segments): its
        // requests take the time of its first event.
        let Some(t) = self.replay.source_mut().events.front().map(|e| e.time_ns) else {
            return Ok(());
        };
        let t = u32::try_from(t / self.time_unit_ns).unwrap_or(u32::MAX);
        while let Some(op) = self.replay.next_op().map_err(|e| match e {
            crate::WorkloadError::Trace(t) => *t,
            other => TraceError::Invalid {
                path: self.path.clone(),
                what: other.to_string(),
            },
        })? {
            match op {
                DmaOp::Map { phys, len, .. } => self.obj.extend(pages(phys.get(), len)),
                DmaOp::MapSg { .. } => {
                    for s in self.replay.sg_segments() {
                        self.obj.extend(pages(s.phys.get(), s.len));
                    }
                }
                _ => {}
            }
            self.time.resize(self.obj.len(), t);
        }
        Ok(())
    }

    /// Takes one event (only mapping events make requests).
    pub fn write(&mut self, e: &Event) -> Result<(), TraceError> {
        match e.kind {
            EventKind::SgSeg if self.sg_left > 0 => self.sg_left -= 1,
            EventKind::MapSg | EventKind::UnmapSg => self.sg_left = e.nents,
            _ => self.sg_left = 0,
        }
        self.replay.source_mut().events.push_back(*e);
        if self.sg_left == 0 {
            self.drain()?;
        }
        Ok(())
    }

    /// Computes `next_access_vtime`, writes every request, flushes, returns the writer.
    pub fn finish(mut self) -> Result<W, TraceError> {
        // A scatter-gather list cut short by the end of the trace, as the replay reads it.
        self.drain()?;
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
            buf.extend_from_slice(iommulab_trace::csv::LIBCACHESIM_COLUMNS.as_bytes());
            buf.push(b'\n');
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

impl<W: Write> EventSink for OracleGeneralWriter<W> {
    /// The replay inside the writer skips `iommu` events once another device exists.
    fn set_devices(&mut self, devices: &[String]) -> Result<(), TraceError> {
        OracleGeneralWriter::set_devices(self, devices);
        Ok(())
    }
    fn write(&mut self, e: &Event) -> Result<(), TraceError> {
        OracleGeneralWriter::write(self, e)
    }
    fn finish(self: Box<Self>) -> Result<(), TraceError> {
        OracleGeneralWriter::finish(*self).map(drop)
    }
}

/// An export to a file: finishing it renames the file into place.
#[derive(Debug)]
struct OracleFile(OracleGeneralWriter<OutputFile>);

impl EventSink for OracleFile {
    fn set_devices(&mut self, devices: &[String]) -> Result<(), TraceError> {
        self.0.set_devices(devices);
        Ok(())
    }
    fn write(&mut self, e: &Event) -> Result<(), TraceError> {
        self.0.write(e)
    }
    fn finish(self: Box<Self>) -> Result<(), TraceError> {
        self.0.finish()?.commit()
    }
}

/// The export format a file name asks for: `.oracleGeneral` or `.oracleGeneral.csv`, either
/// optionally `.gz`; `None` for any other name.
pub fn format_of(path: &Path) -> Option<OracleFormat> {
    let (name, _) = iommulab_trace::io::name_parts(path);
    if name.ends_with(".oraclegeneral.csv") {
        Some(OracleFormat::Csv)
    } else if name.ends_with(".oraclegeneral") {
        Some(OracleFormat::Binary)
    } else {
        None
    }
}

/// Creates an oracleGeneral file at `path` (format by [`format_of`]; any other name is
/// refused), written through an [`OutputFile`]: nothing appears at `path` until
/// [`EventSink::finish`].
pub fn create(path: &Path, header: &TraceHeader) -> Result<Box<dyn EventSink>, TraceError> {
    let Some(format) = format_of(path) else {
        return Err(TraceError::Unsupported {
            path: path.to_owned(),
            what: "not an .oracleGeneral or .oracleGeneral.csv name".to_owned(),
        });
    };
    let mut w = OracleGeneralWriter::with_path(OutputFile::create(path)?, format, path.to_owned());
    w.set_devices(&header.devices);
    Ok(Box::new(OracleFile(w)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An event whose DMA address is its physical one (what identifies a mapping to the
    /// replay does not matter here).
    fn map(kind: EventKind, phys: Option<u64>, len: u64, nents: u32) -> Event {
        let mut e = Event::new(kind);
        e.phys = phys;
        e.dma = phys;
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

    /// `iommu:map` events repeat the `dma:` events' mappings: once the trace has another
    /// device they make no request (they would double every page).
    #[test]
    fn iommu_events_are_skipped_once_another_device_exists() {
        let mut w = OracleGeneralWriter::new(Vec::new(), OracleFormat::Binary);
        w.set_devices(&["iommu".to_owned(), "0000:00:04.0".to_owned()]);
        let mut iommu = map(EventKind::Map, Some(0x7000), 4096, 0);
        iommu.device = 0;
        let mut dma = map(EventKind::Map, Some(0x7000), 4096, 0);
        dma.device = 1;
        dma.dma = Some(0xffff_f000);
        w.write(&iommu).unwrap();
        w.write(&dma).unwrap();
        assert_eq!(w.report().skipped_iommu_events, 1);
        assert_eq!(records(&w.finish().unwrap()), [(0, 7, 4096, -1)]);
        // A trace of `iommu` events alone exports them.
        let mut w = OracleGeneralWriter::new(Vec::new(), OracleFormat::Binary);
        w.set_devices(&["iommu".to_owned()]);
        w.write(&iommu).unwrap();
        assert_eq!(records(&w.finish().unwrap()), [(0, 7, 4096, -1)]);
    }
}
