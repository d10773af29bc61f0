//! Trace files by name: [`open_trace`] picks the reader from the content (magic bytes) and the
//! extension, decompressing `.gz` and `.zst` transparently; [`create_trace`] picks the writer
//! from the extension and writes through an [`OutputFile`]: a temporary file that is renamed
//! into place on [`EventSink::finish`], so a failed conversion leaves no half-written output.
//!
//! The libCacheSim export (`.oracleGeneral`) replays the trace to find the pages each map
//! touches, so it lives a layer up, in the workload crate's `oracle_general` module; the
//! façade's `iommulab::create_trace` dispatches to it by name, as to the formats here.
//!
//! | extension | read | write |
//! |---|---|---|
//! | `.iot` | native ([`super::format`]) | native |
//! | `.csv` | CSV ([`super::csv`]) | CSV |
//! | `.oracleGeneral` | — | libCacheSim binary (workload crate, `oracle_general`) |
//! | `.oracleGeneral.csv` | — | libCacheSim CSV |
//! | any of these + `.gz` | gzip (multi-member) | gzip |
//! | any of these + `.zst` | zstd (multi-frame, pure Rust `ruzstd`) | no (use `zstd`) |
//!
//! Compression is detected by magic bytes (`1f 8b`, `28 b5 2f fd`), not only by name.

use std::cell::Cell;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Cursor, Read, Write};
use std::path::Path;
use std::rc::Rc;

use flate2::bufread::MultiGzDecoder;
use iommulab_base::output::{self, Output};
use ruzstd::decoding::{FrameDecoder, StreamingDecoder};

use super::csv::{BANNER, COLUMNS, CsvReader, CsvWriter};
use super::format::{MAGIC, NativeReader, NativeWriter};
use super::{Event, EventSource, TraceError, TraceFormat, TraceHeader};

const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

/// Where trace events go: a writer of one of the formats.
pub trait EventSink {
    /// Grows the device table to `devices`, which starts with the table given so far (the
    /// header's, then earlier calls). Text sources discover devices as they read;
    /// [`copy_events`] calls this whenever the source's table grows.
    fn set_devices(&mut self, devices: &[String]) -> Result<(), TraceError>;
    /// Appends one event.
    fn write(&mut self, e: &Event) -> Result<(), TraceError>;
    /// Completes the output (trailer, flush; for files, the rename into place).
    fn finish(self: Box<Self>) -> Result<(), TraceError>;
}

impl<W: Write> EventSink for NativeWriter<W> {
    fn set_devices(&mut self, devices: &[String]) -> Result<(), TraceError> {
        NativeWriter::set_devices(self, devices)
    }
    fn write(&mut self, e: &Event) -> Result<(), TraceError> {
        NativeWriter::write(self, e)
    }
    fn finish(self: Box<Self>) -> Result<(), TraceError> {
        NativeWriter::finish(*self).map(drop)
    }
}

impl<W: Write> EventSink for CsvWriter<W> {
    fn set_devices(&mut self, devices: &[String]) -> Result<(), TraceError> {
        CsvWriter::set_devices(self, devices)
    }
    fn write(&mut self, e: &Event) -> Result<(), TraceError> {
        CsvWriter::write(self, e)
    }
    fn finish(self: Box<Self>) -> Result<(), TraceError> {
        CsvWriter::finish(*self).map(drop)
    }
}

/// Copies every event of `src` into `dst`, growing `dst`'s device table as `src`'s grows.
/// Returns the number of events. Does not call [`EventSink::finish`].
pub fn copy_events(src: &mut dyn EventSource, dst: &mut dyn EventSink) -> Result<u64, TraceError> {
    let mut known = src.header().devices.len();
    dst.set_devices(&src.header().devices)?;
    let mut n = 0;
    let mut batch = Vec::new();
    while src.read_batch(&mut batch)? != 0 {
        // The header holds every device of the batch once the batch is read.
        if src.header().devices.len() != known {
            known = src.header().devices.len();
            dst.set_devices(&src.header().devices)?;
        }
        for e in &batch {
            dst.write(e)?;
        }
        n += batch.len() as u64;
    }
    if src.header().devices.len() != known {
        dst.set_devices(&src.header().devices)?;
    }
    Ok(n)
}

/// Converts the trace at `from` into `to` (formats by name, see the module doc). Returns the
/// number of events. On error, `to` is left untouched.
pub fn convert(from: &Path, to: &Path) -> Result<u64, TraceError> {
    let mut src = open_trace(from)?;
    let mut dst = create_trace(to, src.header())?;
    let n = copy_events(&mut *src, &mut *dst)?;
    dst.finish()?;
    Ok(n)
}

/// Lower-case file name of `path`, and whether it ends in `.gz`/`.zst` (stripped).
pub fn name_parts(path: &Path) -> (String, Option<&'static str>) {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_lowercase())
        .unwrap_or_default();
    for ext in [".gz", ".zst"] {
        if let Some(stem) = name.strip_suffix(ext) {
            return (stem.to_owned(), Some(ext));
        }
    }
    (name, None)
}

/// A zstd decoder that goes on across concatenated frames.
struct ZstdFrames<R: BufRead> {
    cur: Option<StreamingDecoder<R, FrameDecoder>>,
}

impl<R: BufRead> Read for ZstdFrames<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            let Some(dec) = self.cur.as_mut() else {
                return Ok(0);
            };
            let n = dec.read(buf)?;
            if n > 0 || buf.is_empty() {
                return Ok(n);
            }
            let Some(dec) = self.cur.take() else {
                return Ok(0);
            };
            let (mut src, frame) = dec.into_parts();
            if src.fill_buf()?.is_empty() {
                return Ok(0);
            }
            let next = StreamingDecoder::new_with_decoder(src, frame).map_err(io::Error::other)?;
            self.cur = Some(next);
        }
    }
}

/// Opens `path` as text (or bytes), decompressing `.gz`/`.zst` transparently (detected by
/// magic bytes). For importers of text formats such as Linux ftrace output.
pub fn open_text(path: &Path) -> Result<Box<dyn BufRead>, TraceError> {
    let io_err = |source| TraceError::Io {
        path: path.to_owned(),
        source,
    };
    let file = File::open(path).map_err(io_err)?;
    let total = file.metadata().map_err(io_err)?.len();
    let read = Rc::new(Cell::new(0));
    let counted = Counted {
        inner: file,
        read: Rc::clone(&read),
    };
    let mut r = BufReader::with_capacity(64 * 1024, counted);
    let head = r.fill_buf().map_err(io_err)?;
    if head.starts_with(&GZIP_MAGIC) {
        let gz = Decoded {
            inner: MultiGzDecoder::new(r),
            codec: "gzip",
            read,
            total,
        };
        Ok(Box::new(BufReader::with_capacity(64 * 1024, gz)))
    } else if head.starts_with(&ZSTD_MAGIC) {
        let dec = StreamingDecoder::new(r).map_err(|e| TraceError::Corrupt {
            path: path.to_owned(),
            offset: 0,
            what: format!("bad zstd frame header: {e}"),
        })?;
        let z = Decoded {
            inner: ZstdFrames { cur: Some(dec) },
            codec: "zstd",
            read,
            total,
        };
        Ok(Box::new(BufReader::with_capacity(64 * 1024, z)))
    } else {
        Ok(Box::new(r))
    }
}

/// A file that counts the bytes read from it, so a decompressor's error can say where in
/// the compressed file it stopped.
struct Counted<R> {
    inner: R,
    read: Rc<Cell<u64>>,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read.set(self.read.get() + n as u64);
        Ok(n)
    }
}

/// A decompressor whose errors say how far into the compressed file they came, and whether
/// the file had been read to its end (cut short) or not (damaged).
struct Decoded<D> {
    inner: D,
    codec: &'static str,
    read: Rc<Cell<u64>>,
    total: u64,
}

impl<D: Read> Read for Decoded<D> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.inner.read(buf).map_err(|e| {
            let at = self.read.get();
            let (codec, total) = (self.codec, self.total);
            let what = if at >= total && ran_out(&e) {
                // The decoder wanted more after the last byte: the file was cut short.
                format!(
                    "the {codec} data ends inside a block at byte {total}, the end of the \
                     file: it is cut short"
                )
            } else {
                // Read ahead in 64 KiB pieces: the damage is in the piece before `at`.
                format!(
                    "the {codec} data is damaged before compressed byte {at} of {total}: {}",
                    innermost(&e)
                )
            };
            io::Error::new(e.kind(), what)
        })
    }
}

/// Whether `e`, or any error it wraps, is an I/O error of running out of input.
fn ran_out(e: &io::Error) -> bool {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(c) = cur {
        if c.downcast_ref::<io::Error>()
            .is_some_and(|x| x.kind() == io::ErrorKind::UnexpectedEof)
        {
            return true;
        }
        cur = c.source();
    }
    false
}

/// The deepest cause of `e`, which decoders wrap several times over.
fn innermost(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cur = e;
    while let Some(next) = cur.source() {
        cur = next;
    }
    cur.to_string()
}

/// What a file's first decompressed bytes say it is, by content alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Content {
    /// The native format's magic.
    Native,
    /// Our CSV banner or column line (not any `#`: ftrace output starts with `# tracer:`).
    Csv,
    /// A NUL byte at this offset: binary data, which no text format holds.
    Binary(u64),
    /// Anything else: text, perhaps Linux ftrace output.
    Text,
}

impl Content {
    /// How many leading bytes [`Content::sniff`] reads.
    pub const HEAD: u64 = 4096;

    /// Classifies `head`, a file's first bytes.
    pub fn of(head: &[u8]) -> Content {
        if head.starts_with(&MAGIC) {
            Content::Native
        } else if head.starts_with(&BANNER.as_bytes()[..10])
            || head.starts_with(&COLUMNS.as_bytes()[..8])
        {
            Content::Csv
        } else if let Some(i) = head.iter().position(|&b| b == 0) {
            Content::Binary(i as u64)
        } else {
            Content::Text
        }
    }

    /// The format a file with these contents and this lower-case name (without `.gz`/`.zst`)
    /// is read as: the contents first (the native magic; our CSV banner or column line), so
    /// a CSV trace named `.iot` reads as CSV; then the name (`.iot`, `.csv`), so a damaged
    /// file is reported by the reader of the format it claims; else ftrace text. `None`: by
    /// the contents alone.
    pub fn format(self, name: Option<&str>) -> TraceFormat {
        let named = |ext: &str| name.is_some_and(|n| n.ends_with(ext));
        match self {
            Content::Native => TraceFormat::Native,
            Content::Csv => TraceFormat::Csv,
            _ if named(".iot") => TraceFormat::Native,
            _ if named(".csv") => TraceFormat::Csv,
            _ => TraceFormat::Ftrace,
        }
    }

    /// Reads up to [`Content::HEAD`] bytes of `path` (decompressed) and classifies them.
    pub fn sniff(path: &Path) -> Result<Content, TraceError> {
        let mut head = Vec::new();
        open_text(path)?
            .take(Self::HEAD)
            .read_to_end(&mut head)
            .map_err(|source| TraceError::Io {
                path: path.to_owned(),
                source,
            })?;
        Ok(Content::of(&head))
    }
}

/// Opens a trace for reading: native (`.iot`) or CSV, optionally `.gz`/`.zst` compressed.
/// The format comes from the content (the native magic; a CSV banner or column line), then
/// the name. Anything else is [`TraceError::Unsupported`]; Linux ftrace text goes through the
/// ftrace importer (which reads compressed files with [`open_text`]).
pub fn open_trace(path: &Path) -> Result<Box<dyn EventSource>, TraceError> {
    let mut r = open_text(path)?;
    // Read the first bytes in full (a decompressor may hand them over in pieces).
    let mut head = Vec::with_capacity(16);
    (&mut r)
        .take(16)
        .read_to_end(&mut head)
        .map_err(|source| TraceError::Io {
            path: path.to_owned(),
            source,
        })?;
    let format = Content::of(&head).format(Some(&name_parts(path).0));
    let r = Cursor::new(head).chain(r);
    match format {
        TraceFormat::Native => Ok(Box::new(NativeReader::new(r, path.to_owned())?)),
        TraceFormat::Csv => Ok(Box::new(CsvReader::new(r, path.to_owned())?)),
        _ => Err(TraceError::Unsupported {
            path: path.to_owned(),
            what: "not an iommulab trace: reads native .iot and CSV (.csv) traces, optionally \
                   compressed as .gz or .zst; import Linux ftrace text with the ftrace importer"
                .to_owned(),
        }),
    }
}

/// The byte stream under a file sink: plain or gzip (by the name's `.gz`), written through
/// the one output mechanism ([`iommulab_base::output`]): a regular file under a temporary
/// name renamed into place by [`OutputFile::commit`] (dropped before that, the temporary file
/// is removed, so no half-written output is ever left behind); a link's target; a device,
/// FIFO or `-` (standard output) in place.
#[derive(Debug)]
pub struct OutputFile(Stream);

#[derive(Debug)]
enum Stream {
    Plain(Output),
    Gz(flate2::write::GzEncoder<Output>),
}

impl OutputFile {
    /// Creates the temporary file beside `path`, gzip-compressed if the name ends in `.gz`.
    /// `.zst` is refused (ruzstd only decodes).
    pub fn create(path: &Path) -> Result<Self, TraceError> {
        let (_, compression) = name_parts(path);
        if compression == Some(".zst") {
            return Err(TraceError::Unsupported {
                path: path.to_owned(),
                what: "cannot write .zst (ruzstd only decodes here): write .gz, or compress \
                       the output with `zstd`"
                    .to_owned(),
            });
        }
        let file = Output::create(path).map_err(|e| TraceError::Io {
            path: path.to_owned(),
            source: e.into(),
        })?;
        Ok(OutputFile(if compression == Some(".gz") {
            Stream::Gz(flate2::write::GzEncoder::new(
                file,
                flate2::Compression::default(),
            ))
        } else {
            Stream::Plain(file)
        }))
    }

    /// Finishes the compression, syncs, and renames the file into place.
    pub fn commit(self) -> Result<(), TraceError> {
        let target = match &self.0 {
            Stream::Plain(f) => f.path().to_owned(),
            Stream::Gz(g) => g.get_ref().path().to_owned(),
        };
        let file = match self.0 {
            Stream::Plain(f) => f,
            Stream::Gz(g) => g.finish().map_err(|source| TraceError::Io {
                path: target.clone(),
                source,
            })?,
        };
        file.commit().map_err(|e| TraceError::Io {
            path: target,
            source: e.into(),
        })
    }
}

impl Write for OutputFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match &mut self.0 {
            Stream::Plain(f) => f.write(buf),
            Stream::Gz(g) => g.write(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match &mut self.0 {
            Stream::Plain(f) => f.flush(),
            Stream::Gz(g) => g.flush(),
        }
    }
}

/// A sink writing to a file through [`OutputFile`].
#[derive(Debug)]
enum FileSink {
    Native(NativeWriter<OutputFile>),
    Csv(CsvWriter<OutputFile>),
}

impl FileSink {
    fn as_sink(&mut self) -> &mut dyn EventSink {
        match self {
            FileSink::Native(w) => w,
            FileSink::Csv(w) => w,
        }
    }
}

impl EventSink for FileSink {
    fn set_devices(&mut self, devices: &[String]) -> Result<(), TraceError> {
        self.as_sink().set_devices(devices)
    }
    fn write(&mut self, e: &Event) -> Result<(), TraceError> {
        self.as_sink().write(e)
    }
    fn finish(self: Box<Self>) -> Result<(), TraceError> {
        match *self {
            FileSink::Native(w) => w.finish()?,
            FileSink::Csv(w) => w.finish()?,
        }
        .commit()
    }
}

/// Creates a trace file for writing, the format chosen by the name (see the module doc). The
/// data goes to a temporary file beside `path`, renamed to `path` by
/// [`EventSink::finish`]; dropping the sink without finishing removes it.
///
/// An `.oracleGeneral` name is refused here with a pointer to the façade's
/// `iommulab::create_trace`, which writes it through the replay.
pub fn create_trace(path: &Path, header: &TraceHeader) -> Result<Box<dyn EventSink>, TraceError> {
    let (name, _) = name_parts(path);
    let unsupported = |what: &str| TraceError::Unsupported {
        path: path.to_owned(),
        what: what.to_owned(),
    };
    let native = if name.ends_with(".oraclegeneral") || name.ends_with(".oraclegeneral.csv") {
        return Err(unsupported(
            "the libCacheSim export replays the trace: write it with iommulab::create_trace \
             (the workload layer's oracle_general module)",
        ));
    } else if name.ends_with(".iot") {
        true
    } else if name.ends_with(".csv") {
        false
    } else if !output::destination(path)
        .map_err(|e| TraceError::Io {
            path: path.to_owned(),
            source: e.into(),
        })?
        .is_regular()
    {
        // `-`, a device or a FIFO named without a format: CSV, the text format, as a pipe or
        // a terminal expects.
        false
    } else {
        return Err(unsupported(
            "unknown output format: name it .iot, .csv, .oracleGeneral or \
             .oracleGeneral.csv (optionally + .gz)",
        ));
    };
    // Validate before creating any file.
    if let Some(what) = super::format::header_problem(&header.devices) {
        return Err(TraceError::Invalid {
            path: path.to_owned(),
            what,
        });
    }
    let out = OutputFile::create(path)?;
    let p = path.to_owned();
    let sink = if native {
        FileSink::Native(NativeWriter::with_path(out, header, p)?)
    } else {
        FileSink::Csv(CsvWriter::with_path(out, header, p)?)
    };
    Ok(Box::new(sink))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::synthetic;

    fn write_with(path: &Path, header: &TraceHeader, events: &[Event]) {
        let mut sink = create_trace(path, header).unwrap();
        sink.set_devices(&header.devices).unwrap();
        for e in events {
            sink.write(e).unwrap();
        }
        sink.finish().unwrap();
    }

    fn read_all(path: &Path) -> (TraceHeader, Vec<Event>) {
        let mut src = open_trace(path).unwrap();
        let mut v = Vec::new();
        while let Some(e) = src.next_event().unwrap() {
            v.push(e);
        }
        (src.header().clone(), v)
    }

    #[test]
    fn every_readable_format_round_trips_through_files() {
        let dir = tempfile::tempdir().unwrap();
        let (h, ev) = synthetic(3_000, 5);
        for name in ["t.iot", "t.csv", "t.iot.gz", "t.CSV.GZ"] {
            let p = dir.path().join(name);
            write_with(&p, &h, &ev);
            assert_eq!(read_all(&p), (h.clone(), ev.clone()), "{name}");
        }
        // Only the finished files remain: no temporaries.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 4);
    }

    #[test]
    fn compression_is_detected_by_content_not_name() {
        let dir = tempfile::tempdir().unwrap();
        let (h, ev) = synthetic(500, 6);
        let gz = dir.path().join("t.iot.gz");
        write_with(&gz, &h, &ev);
        let renamed = dir.path().join("mystery.bin");
        std::fs::rename(&gz, &renamed).unwrap();
        assert_eq!(read_all(&renamed), (h, ev));
    }

    #[test]
    fn reads_zstd_including_concatenated_frames() {
        use ruzstd::encoding::{CompressionLevel, compress_to_vec};
        let dir = tempfile::tempdir().unwrap();
        let (h, ev) = synthetic(2_000, 8);
        let csv = dir.path().join("t.csv");
        write_with(&csv, &h, &ev);
        let text = std::fs::read(&csv).unwrap();
        let (a, b) = text.split_at(text.len() / 2);
        let mut z = compress_to_vec(a, CompressionLevel::Fastest);
        z.extend(compress_to_vec(b, CompressionLevel::Fastest));
        let zst = dir.path().join("t.csv.zst");
        std::fs::write(&zst, z).unwrap();
        assert_eq!(read_all(&zst), (h, ev));
    }

    /// A compressed file cut short says so, with the file's length; one damaged inside says
    /// how far into the compressed file the decoder had read.
    #[test]
    fn a_compressed_trace_cut_short_or_damaged_says_where() {
        use ruzstd::encoding::{CompressionLevel, compress_to_vec};
        let dir = tempfile::tempdir().unwrap();
        let (h, ev) = synthetic(20_000, 9);
        let csv = dir.path().join("t.csv");
        write_with(&csv, &h, &ev);
        let gz = dir.path().join("t.csv.gz");
        write_with(&gz, &h, &ev);
        let z = compress_to_vec(&std::fs::read(&csv).unwrap()[..], CompressionLevel::Fastest);
        let gz = std::fs::read(&gz).unwrap();
        let read_err = |name: &str, bytes: &[u8]| {
            let p = dir.path().join(name);
            std::fs::write(&p, bytes).unwrap();
            let mut src = open_trace(&p).unwrap();
            loop {
                match src.next_event() {
                    Ok(Some(_)) => {}
                    Ok(None) => panic!("{name}: read to the end"),
                    Err(e) => break format!("{e}: {}", std::error::Error::source(&e).unwrap()),
                }
            }
        };
        for (name, whole, codec) in [("cut.csv.zst", &z, "zstd"), ("cut.csv.gz", &gz, "gzip")] {
            let cut = whole.len() / 2;
            let e = read_err(name, &whole[..cut]);
            assert!(
                e.contains(&format!(
                    "the {codec} data ends inside a block at byte {cut}"
                )) && e.contains("cut short"),
                "{e}"
            );
        }
        let mut damaged = z.clone();
        let mid = damaged.len() / 2;
        damaged[mid..mid + 64].fill(b'x');
        let e = read_err("damaged.csv.zst", &damaged);
        assert!(
            e.contains("the zstd data is damaged before compressed byte")
                && e.contains(&format!(" of {}", z.len())),
            "{e}"
        );
    }

    #[test]
    fn text_that_is_not_a_trace_is_unsupported() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("trace.txt");
        std::fs::write(
            &p,
            "# tracer: nop\n  fio-1234 [001] ....  12.3: dma_map_page: ...\n",
        )
        .unwrap();
        let err = open_trace(&p).err().unwrap();
        assert!(matches!(err, TraceError::Unsupported { .. }), "{err}");
        assert!(err.to_string().contains(".iot"), "{err}");
        let mut text = String::new();
        open_text(&p).unwrap().read_to_string(&mut text).unwrap();
        assert!(text.contains("dma_map_page"));
    }

    #[test]
    fn failed_conversion_leaves_no_output() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out.iot");
        let h = TraceHeader {
            devices: vec!["a".into()],
            source: String::new(),
        };
        let mut sink = create_trace(&out, &h).unwrap();
        let mut e = Event::new(crate::EventKind::Map);
        sink.write(&e).unwrap();
        e.device = 7;
        assert!(sink.write(&e).is_err());
        drop(sink);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        assert!(create_trace(&dir.path().join("x.zst"), &h).is_err());
        assert!(create_trace(&dir.path().join("x.txt"), &h).is_err());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn convert_grows_device_table_from_csv() {
        let dir = tempfile::tempdir().unwrap();
        let csv = dir.path().join("in.csv");
        std::fs::write(
            &csv,
            "time_ns,cpu,device,kind,dir,dma,phys,len,nents\n\
             1,0,b,map,NONE,0x10,0x20,1,0\n2,0,a,map,NONE,0x10,,1,0\n",
        )
        .unwrap();
        let iot = dir.path().join("out.iot");
        assert_eq!(convert(&csv, &iot).unwrap(), 2);
        let (h, ev) = read_all(&iot);
        assert_eq!(h.devices, ["b", "a"]);
        assert_eq!(ev[1].device, 1);
        // The libCacheSim export is a layer up (it replays): refused here, nothing written.
        let og = dir.path().join("out.oracleGeneral");
        let e = convert(&iot, &og).unwrap_err().to_string();
        assert!(e.contains("iommulab::create_trace"), "{e}");
        assert!(!og.exists());
    }
}
