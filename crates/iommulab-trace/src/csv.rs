//! The CSV trace format: one event per line, for people, spreadsheets and pandas
//! (docs/trace-format.md, "CSV").
//!
//! ```text
//! # iommulab trace v1
//! # source: fio randread on nvme0
//! # device: 0000:3b:00.0
//! time_ns,cpu,device,kind,dir,dma,phys,len,nents
//! 1000,0,0000:3b:00.0,map,TO_DEVICE,0xfffff000,0x12345000,4096,0
//! 2500,0,0000:3b:00.0,unmap,TO_DEVICE,0xfffff000,,4096,0
//! ```
//!
//! - `device` is the device's name. `# device: NAME` comment lines declare the device table in
//!   order, so a native → CSV → native round trip keeps the same table; a reader also adds
//!   names it meets in data lines, in order of first appearance.
//! - `kind` is [`EventKind::name`], `dir` is [`TraceDir::linux_name`].
//! - `dma`/`phys` are `0x`-prefixed hex, or empty when absent. Readers also take decimal.
//! - `# source:` escapes `\` as `\\`, newline as `\n` and carriage return as `\r`.
//! - Other lines starting with `#`, and blank lines, are ignored.
//!
//! Hand-written (no `csv` crate): device names cannot contain `,` or `"`, so no field ever
//! needs quoting.

use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};

use super::format::{device_name_problem, event_problem, extend_devices, header_problem};
use super::{Event, EventKind, EventSource, TraceDir, TraceError, TraceHeader};

/// The column line every CSV trace has.
pub const COLUMNS: &str = "time_ns,cpu,device,kind,dir,dma,phys,len,nents";

/// The first line a writer emits (readers accept any comment there).
pub const BANNER: &str = "# iommulab trace v1";

/// The column line of libCacheSim's CSV (`.oracleGeneral.csv`), which `trace convert`
/// writes (the workload crate's `oracle_general`) and no reader here accepts.
pub const LIBCACHESIM_COLUMNS: &str = "clock_time,obj_id,obj_size,next_access_vtime";

const SOURCE_PREFIX: &str = "# source: ";
const DEVICE_PREFIX: &str = "# device: ";
const FLUSH_AT: usize = 64 * 1024;

fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c => out.push(c),
        }
    }
    out
}

fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut it = s.chars();
    while let Some(c) = it.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match it.next() {
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some(c) => out.push(c),
            None => out.push('\\'),
        }
    }
    out
}

/// Writes a CSV trace.
///
/// # Examples
///
/// ```
/// use iommulab_trace::{Event, EventKind, TraceHeader};
/// use iommulab_trace::csv::CsvWriter;
///
/// let header = TraceHeader { devices: vec!["nvme0".into()], source: String::new() };
/// let mut w = CsvWriter::new(Vec::new(), &header).unwrap();
/// let mut e = Event::new(EventKind::Map);
/// e.dma = Some(0x1000);
/// e.len = 4096;
/// w.write(&e).unwrap();
/// let text = String::from_utf8(w.finish().unwrap()).unwrap();
/// assert!(text.ends_with("0,0,nvme0,map,NONE,0x1000,,4096,0\n"));
/// ```
#[derive(Debug)]
pub struct CsvWriter<W: Write> {
    inner: W,
    path: PathBuf,
    devices: Vec<String>,
    buf: Vec<u8>,
    total: u64,
}

impl<W: Write> CsvWriter<W> {
    /// A writer of a trace with `header` to `w`; errors name `<output>`.
    pub fn new(w: W, header: &TraceHeader) -> Result<Self, TraceError> {
        Self::with_path(w, header, PathBuf::from("<output>"))
    }

    /// A writer whose errors name `path`. Fails if the device table is invalid.
    pub fn with_path(w: W, header: &TraceHeader, path: PathBuf) -> Result<Self, TraceError> {
        if let Some(what) = header_problem(&header.devices) {
            return Err(TraceError::Invalid { path, what });
        }
        let mut buf = Vec::with_capacity(FLUSH_AT + 256);
        buf.extend_from_slice(BANNER.as_bytes());
        buf.push(b'\n');
        buf.extend_from_slice(SOURCE_PREFIX.as_bytes());
        buf.extend_from_slice(escape(&header.source).as_bytes());
        buf.push(b'\n');
        for d in &header.devices {
            buf.extend_from_slice(DEVICE_PREFIX.as_bytes());
            buf.extend_from_slice(d.as_bytes());
            buf.push(b'\n');
        }
        buf.extend_from_slice(COLUMNS.as_bytes());
        buf.push(b'\n');
        Ok(CsvWriter {
            inner: w,
            path,
            devices: header.devices.clone(),
            buf,
            total: 0,
        })
    }

    /// The device table so far.
    pub fn devices(&self) -> &[String] {
        &self.devices
    }

    /// Grows the device table to `devices` (which must start with the current table), as
    /// `# device:` lines at this point of the file.
    pub fn set_devices(&mut self, devices: &[String]) -> Result<(), TraceError> {
        let new = extend_devices(&self.devices, devices).map_err(|what| TraceError::Invalid {
            path: self.path.clone(),
            what,
        })?;
        for d in new {
            self.buf.extend_from_slice(DEVICE_PREFIX.as_bytes());
            self.buf.extend_from_slice(d.as_bytes());
            self.buf.push(b'\n');
        }
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
        let b = &mut self.buf;
        let name = &self.devices[usize::from(e.device)];
        // Writing into a Vec cannot fail.
        let _ = write!(
            b,
            "{},{},{},{},{},",
            e.time_ns,
            e.cpu,
            name,
            e.kind.name(),
            e.dir.linux_name()
        );
        if let Some(d) = e.dma {
            let _ = write!(b, "{d:#x}");
        }
        b.push(b',');
        if let Some(p) = e.phys {
            let _ = write!(b, "{p:#x}");
        }
        let _ = writeln!(b, ",{},{}", e.len, e.nents);
        self.total += 1;
        if self.buf.len() >= FLUSH_AT {
            self.flush_buf()?;
        }
        Ok(())
    }

    fn flush_buf(&mut self) -> Result<(), TraceError> {
        let r = self.inner.write_all(&self.buf);
        r.map_err(|source| TraceError::Io {
            path: self.path.clone(),
            source,
        })?;
        self.buf.clear();
        Ok(())
    }

    /// Writes what is buffered, flushes, and returns the inner writer.
    pub fn finish(mut self) -> Result<W, TraceError> {
        self.flush_buf()?;
        self.inner.flush().map_err(|source| TraceError::Io {
            path: self.path.clone(),
            source,
        })?;
        Ok(self.inner)
    }
}

/// Reads a CSV trace as a stream, one line at a time.
#[derive(Debug)]
pub struct CsvReader<R: BufRead> {
    inner: R,
    path: PathBuf,
    header: TraceHeader,
    index: HashMap<String, u16>,
    line: Vec<u8>,
    lineno: u64,
    /// The input has ended.
    done: bool,
}

/// What one column must hold, for error messages.
const EXPECT: [&str; 9] = [
    "time_ns: a decimal number of nanoseconds",
    "cpu: a CPU number (0-65535)",
    "device: a device name",
    "kind: map, unmap, map_sg, unmap_sg, sg_seg, device_read, device_write, alloc, free, \
     sync_for_cpu or sync_for_device",
    "dir: BIDIRECTIONAL, TO_DEVICE, FROM_DEVICE or NONE",
    "dma: empty or a 0x-prefixed hex address",
    "phys: empty or a 0x-prefixed hex address",
    "len: a decimal byte count",
    "nents: a decimal segment count",
];

fn parse_u64(s: &str) -> Option<u64> {
    if let Some(hex) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        if hex.is_empty() || hex.starts_with('+') {
            return None;
        }
        u64::from_str_radix(hex, 16).ok()
    } else if s.starts_with('+') {
        None
    } else {
        s.parse().ok()
    }
}

fn parse_addr(s: &str) -> Option<Option<u64>> {
    if s.is_empty() {
        Some(None)
    } else {
        parse_u64(s).map(Some)
    }
}

fn shorten(s: &str) -> String {
    s.chars().take(120).collect()
}

impl<R: BufRead> CsvReader<R> {
    /// Reads the comment lines and the column line of the CSV trace in `r`. `path` names the
    /// file in errors only.
    pub fn new(r: R, path: PathBuf) -> Result<Self, TraceError> {
        let mut me = CsvReader {
            inner: r,
            path,
            header: TraceHeader::default(),
            index: HashMap::new(),
            line: Vec::with_capacity(256),
            lineno: 0,
            done: false,
        };
        loop {
            if !me.read_line()? {
                return Err(TraceError::NoColumns {
                    path: me.path,
                    lines: me.lineno,
                    columns: COLUMNS,
                });
            }
            let line = me.text()?;
            if line.starts_with('#') {
                let line = line.to_owned();
                me.comment(&line)?;
                continue;
            }
            if line.trim().is_empty() {
                continue;
            }
            if line != COLUMNS {
                let found = shorten(line);
                if line.starts_with(LIBCACHESIM_COLUMNS) {
                    let expected = format!(
                        "{COLUMNS} (these are libCacheSim's columns: `trace convert` writes \
                         .oracleGeneral.csv for libCacheSim and does not read it back)"
                    );
                    return Err(me.parse_err(found, &expected));
                }
                return Err(me.parse_err(found, COLUMNS));
            }
            return Ok(me);
        }
    }

    fn parse_err(&self, found: String, expected: &str) -> TraceError {
        TraceError::Parse {
            path: self.path.clone(),
            line: self.lineno,
            expected: expected.to_owned(),
            found,
        }
    }

    /// Reads the next line into `self.line` (without its line ending); false at the end.
    fn read_line(&mut self) -> Result<bool, TraceError> {
        self.line.clear();
        let n = self
            .inner
            .read_until(b'\n', &mut self.line)
            .map_err(|source| TraceError::Io {
                path: self.path.clone(),
                source,
            })?;
        if n == 0 {
            return Ok(false);
        }
        self.lineno += 1;
        if self.line.last() == Some(&b'\n') {
            self.line.pop();
            if self.line.last() == Some(&b'\r') {
                self.line.pop();
            }
        }
        Ok(true)
    }

    fn text(&self) -> Result<&str, TraceError> {
        std::str::from_utf8(&self.line).map_err(|_| TraceError::Parse {
            path: self.path.clone(),
            line: self.lineno,
            expected: "UTF-8 text".to_owned(),
            found: shorten(&String::from_utf8_lossy(&self.line)),
        })
    }

    fn comment(&mut self, line: &str) -> Result<(), TraceError> {
        if let Some(name) = line.strip_prefix(DEVICE_PREFIX) {
            if !self.index.contains_key(name) {
                self.add_device(name)?;
            }
        } else if let Some(src) = line.strip_prefix(SOURCE_PREFIX) {
            self.header.source = unescape(src);
        }
        Ok(())
    }

    fn add_device(&mut self, name: &str) -> Result<u16, TraceError> {
        if let Some(what) = device_name_problem(name) {
            return Err(self.parse_err(shorten(name), &format!("a device name ({what})")));
        }
        let Ok(i) = u16::try_from(self.header.devices.len()) else {
            return Err(self.parse_err(shorten(name), "at most 65536 distinct devices"));
        };
        self.header.devices.push(name.to_owned());
        self.index.insert(name.to_owned(), i);
        Ok(i)
    }

    fn parse_line(&mut self) -> Result<Event, TraceError> {
        // Split on a copy-free view; errors are built from the field text.
        let text = std::str::from_utf8(&self.line).map_err(|_| TraceError::Parse {
            path: self.path.clone(),
            line: self.lineno,
            expected: "UTF-8 text".to_owned(),
            found: shorten(&String::from_utf8_lossy(&self.line)),
        })?;
        let mut fields = [""; 9];
        let mut it = text.split(',');
        for (col, f) in fields.iter_mut().enumerate() {
            *f = it.next().ok_or_else(|| TraceError::Parse {
                path: self.path.clone(),
                line: self.lineno,
                expected: format!("9 columns ({COLUMNS}); column {} missing", col + 1),
                found: shorten(text),
            })?;
        }
        if it.next().is_some() {
            return Err(TraceError::Parse {
                path: self.path.clone(),
                line: self.lineno,
                expected: format!("9 columns ({COLUMNS})"),
                found: shorten(text),
            });
        }
        let bad = |col: usize| TraceError::Parse {
            path: self.path.clone(),
            line: self.lineno,
            expected: EXPECT[col].to_owned(),
            found: shorten(fields[col]),
        };
        let time_ns = parse_u64(fields[0]).ok_or_else(|| bad(0))?;
        let cpu = parse_u64(fields[1])
            .and_then(|c| u16::try_from(c).ok())
            .ok_or_else(|| bad(1))?;
        let kind = EventKind::from_name(fields[3]).ok_or_else(|| bad(3))?;
        let dir = TraceDir::from_linux_name(fields[4]).ok_or_else(|| bad(4))?;
        let dma = parse_addr(fields[5]).ok_or_else(|| bad(5))?;
        let phys = parse_addr(fields[6]).ok_or_else(|| bad(6))?;
        let len = parse_u64(fields[7]).ok_or_else(|| bad(7))?;
        let nents = parse_u64(fields[8])
            .and_then(|n| u32::try_from(n).ok())
            .ok_or_else(|| bad(8))?;
        if nents != 0 && !super::format::has_nents(kind) {
            return Err(TraceError::Parse {
                path: self.path.clone(),
                line: self.lineno,
                expected: "nents = 0 (only map_sg/unmap_sg carry nents)".to_owned(),
                found: fields[8].to_owned(),
            });
        }
        let name = fields[2];
        let device = match self.index.get(name) {
            Some(&d) => d,
            None => {
                let name = name.to_owned();
                self.add_device(&name)?
            }
        };
        Ok(Event {
            time_ns,
            cpu,
            device,
            kind,
            dir,
            dma,
            phys,
            len,
            nents,
        })
    }
}

impl<R: BufRead> EventSource for CsvReader<R> {
    fn header(&self) -> &TraceHeader {
        &self.header
    }

    fn source_path(&self) -> Option<&Path> {
        Some(&self.path)
    }

    fn next_event(&mut self) -> Result<Option<Event>, TraceError> {
        while !self.done {
            if !self.read_line()? {
                self.done = true;
                break;
            }
            match self.line.first() {
                None => continue,
                Some(b'#') => {
                    let line = self.text()?.to_owned();
                    self.comment(&line)?;
                    continue;
                }
                Some(_) if self.line.iter().all(u8::is_ascii_whitespace) => continue,
                Some(_) => return self.parse_line().map(Some),
            }
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::synthetic;

    fn to_csv(h: &TraceHeader, ev: &[Event]) -> String {
        let mut w = CsvWriter::new(Vec::new(), h).unwrap();
        for e in ev {
            w.write(e).unwrap();
        }
        String::from_utf8(w.finish().unwrap()).unwrap()
    }

    fn read(text: &str) -> Result<(TraceHeader, Vec<Event>), TraceError> {
        let mut r = CsvReader::new(text.as_bytes(), "t.csv".into())?;
        let mut v = Vec::new();
        while let Some(e) = r.next_event()? {
            v.push(e);
        }
        Ok((r.header().clone(), v))
    }

    fn parse_error(text: &str) -> (u64, String, String) {
        match read(text) {
            Err(TraceError::Parse {
                line,
                expected,
                found,
                ..
            }) => (line, expected, found),
            other => panic!("expected a parse error, got {other:?}"),
        }
    }

    #[test]
    fn synthetic_trace_round_trips() {
        let (mut h, ev) = synthetic(5_000, 2);
        h.source = "multi\nline \\ source\r".into();
        assert_eq!(read(&to_csv(&h, &ev)).unwrap(), (h, ev));
    }

    #[test]
    fn writes_the_documented_layout() {
        let h = TraceHeader {
            devices: vec!["0000:3b:00.0".into()],
            source: "fio".into(),
        };
        let mut e = Event::new(EventKind::Map);
        e.time_ns = 1000;
        e.dir = TraceDir::ToDevice;
        e.dma = Some(0xffff_f000);
        e.phys = Some(0x1234_5000);
        e.len = 4096;
        let text = to_csv(&h, &[e]);
        assert_eq!(
            text,
            "# iommulab trace v1\n# source: fio\n# device: 0000:3b:00.0\n\
             time_ns,cpu,device,kind,dir,dma,phys,len,nents\n\
             1000,0,0000:3b:00.0,map,TO_DEVICE,0xfffff000,0x12345000,4096,0\n"
        );
    }

    #[test]
    fn builds_device_table_from_data_lines() {
        let text = "time_ns,cpu,device,kind,dir,dma,phys,len,nents\r\n\
                    1,0,b,map,NONE,0x10,,1,0\r\n\
                    \n\
                    2,0,a,map,NONE,16,,1,0\n\
                    3,1,b,unmap,NONE,0x10,,1,0\n";
        let (h, ev) = read(text).unwrap();
        assert_eq!(h.devices, ["b", "a"]);
        assert_eq!(ev.iter().map(|e| e.device).collect::<Vec<_>>(), [0, 1, 0]);
        assert_eq!(ev[1].dma, Some(16));
    }

    #[test]
    fn parse_errors_name_line_and_column() {
        let head = "time_ns,cpu,device,kind,dir,dma,phys,len,nents\n";
        let (line, expected, found) = parse_error(&format!(
            "{head}1,0,a,map,NONE,,,1,0\n2,0,a,mop,NONE,,,1,0\n"
        ));
        assert_eq!(line, 3);
        assert!(expected.starts_with("kind:"), "{expected}");
        assert_eq!(found, "mop");
        let (_, expected, found) = parse_error(&format!("{head}1,0,a,map,NONE,0xzz,,1,0\n"));
        assert!(expected.starts_with("dma:"));
        assert_eq!(found, "0xzz");
        let (_, expected, _) = parse_error(&format!("{head}1,0,a,map,NONE,,,1\n"));
        assert!(expected.contains("9 columns"));
        let (_, expected, _) = parse_error(&format!("{head}1,70000,a,map,NONE,,,1,0\n"));
        assert!(expected.starts_with("cpu:"));
        let (line, expected, _) = parse_error("time,cpu\n");
        assert_eq!(line, 1);
        assert_eq!(expected, COLUMNS);
        let (_, expected, _) = parse_error(&format!("{head}1,0,a,map,NONE,,,1,3\n"));
        assert!(expected.contains("nents"));
    }

    #[test]
    fn set_devices_emits_device_lines_mid_stream() {
        let mut w = CsvWriter::new(Vec::new(), &TraceHeader::default()).unwrap();
        w.set_devices(&["x".into(), "y".into()]).unwrap();
        let mut e = Event::new(EventKind::Free);
        e.device = 1;
        w.write(&e).unwrap();
        w.set_devices(&["x".into(), "y".into(), "z".into()])
            .unwrap();
        assert!(w.set_devices(&["q".into()]).is_err());
        let text = String::from_utf8(w.finish().unwrap()).unwrap();
        let (h, ev) = read(&text).unwrap();
        assert_eq!(h.devices, ["x", "y", "z"]);
        assert_eq!(ev[0].device, 1);
    }
}
