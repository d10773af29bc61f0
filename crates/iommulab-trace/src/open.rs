//! Opening any trace the CLI and Python accept: native `.iot`, CSV, or Linux ftrace text,
//! each optionally `.gz`/`.zst` compressed, by content (or by an explicit format).

use std::io::BufRead;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::ftrace::{FtraceOptions, FtraceReader};
use super::io::{Content, name_parts, open_text, open_trace};
use super::oracle_general::is_oracle_general;
use super::{EventSource, TraceError};

/// A trace format to read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum TraceFormat {
    /// Decide from the contents: the native magic, our CSV banner or column line, otherwise
    /// ftrace text.
    #[default]
    Auto,
    /// iommulab native binary (`.iot`).
    Native,
    /// iommulab CSV.
    Csv,
    /// Linux ftrace text (`/sys/kernel/tracing/trace`, `trace_pipe`, `trace-cmd report`).
    Ftrace,
}

/// Opens `path` as Linux ftrace text (decompressing transparently).
pub fn open_ftrace(
    path: &Path,
    lenient: bool,
) -> Result<FtraceReader<Box<dyn BufRead>>, TraceError> {
    Ok(FtraceReader::new(
        open_text(path)?,
        path.to_owned(),
        FtraceOptions { lenient },
    ))
}

/// The format of `path`'s contents (never `Auto`): [`resolve`] with nothing asked for.
pub fn detect(path: &Path) -> Result<TraceFormat, TraceError> {
    resolve(path, TraceFormat::Auto)
}

impl TraceFormat {
    /// The format's name in messages ("an iommulab CSV trace").
    pub fn describe(self) -> &'static str {
        match self {
            TraceFormat::Auto => "any trace format",
            TraceFormat::Native => "an iommulab native trace (.iot)",
            TraceFormat::Csv => "an iommulab CSV trace",
            TraceFormat::Ftrace => "Linux ftrace text",
        }
    }
}

/// The format to read `path` as (never `Auto`): the one its contents and name show when
/// `asked` is `Auto`, otherwise `asked`, after checking that the contents agree. A format
/// asked for that the contents contradict is refused, not read as the other one silently,
/// and binary data that is no trace of ours is refused by its first NUL byte instead of
/// being parsed as a line of text.
pub fn resolve(path: &Path, asked: TraceFormat) -> Result<TraceFormat, TraceError> {
    if is_oracle_general(path) {
        return Err(TraceError::Unsupported {
            path: path.to_owned(),
            what: "a libCacheSim .oracleGeneral trace holds page requests, not DMA events: \
                   `iommulab mrc` and `iommulab trace stats` read it; the other commands need \
                   a trace of DMA events (native .iot, iommulab CSV or Linux ftrace text)"
                .to_owned(),
        });
    }
    let content = Content::sniff(path)?;
    let found = if asked == TraceFormat::Ftrace {
        // By content alone: an ftrace capture may be named anything, `.csv` included.
        content.format(None)
    } else {
        content.format(Some(&name_parts(path).0))
    };
    if asked != TraceFormat::Auto && asked != found {
        return Err(TraceError::Unsupported {
            path: path.to_owned(),
            what: format!(
                "asked to read {}, but its contents are {}: ask for that format, or let it \
                 be detected",
                asked.describe(),
                found.describe()
            ),
        });
    }
    if found == TraceFormat::Ftrace
        && let Content::Binary(offset) = content
    {
        return Err(TraceError::Unsupported {
            path: path.to_owned(),
            what: format!(
                "binary data (a NUL byte at byte {offset} of the decompressed contents), not a \
                 trace iommulab reads: native .iot, iommulab CSV or Linux ftrace text, and \
                 (for `mrc` and `trace stats`) libCacheSim's binary oracleGeneral, named \
                 .oracleGeneral or .oracleGeneral.bin"
            ),
        });
    }
    Ok(found)
}

/// Opens any trace as a stream of events. `lenient` skips malformed ftrace lines. The
/// format is [`resolve`]d first: an explicit one must match the contents.
pub fn open(
    path: &Path,
    format: TraceFormat,
    lenient: bool,
) -> Result<Box<dyn EventSource>, TraceError> {
    match resolve(path, format)? {
        TraceFormat::Ftrace => Ok(Box::new(open_ftrace(path, lenient)?)),
        _ => open_trace(path),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::synthetic;
    use crate::io::create_trace;

    /// `name` in `dir` holding `n` synthetic events in the format its extension names.
    fn trace_file(dir: &Path, name: &str, n: usize) -> std::path::PathBuf {
        let (h, ev) = synthetic(n, 3);
        let p = dir.join(name);
        let mut sink = create_trace(&p, &h).unwrap();
        sink.set_devices(&h.devices).unwrap();
        for e in &ev {
            sink.write(e).unwrap();
        }
        sink.finish().unwrap();
        p
    }

    fn refusal(path: &Path, asked: TraceFormat) -> String {
        match resolve(path, asked) {
            Err(e @ TraceError::Unsupported { .. }) => e.to_string(),
            other => panic!("{}: expected a refusal, got {other:?}", path.display()),
        }
    }

    #[test]
    fn a_format_asked_for_must_match_the_contents() {
        let dir = tempfile::tempdir().unwrap();
        let iot = trace_file(dir.path(), "t.iot", 10);
        let csv = trace_file(dir.path(), "t.csv", 10);
        let ftrace = dir.path().join("t.txt");
        std::fs::write(&ftrace, "# tracer: nop\n").unwrap();
        for (p, f) in [
            (&iot, TraceFormat::Native),
            (&csv, TraceFormat::Csv),
            (&ftrace, TraceFormat::Ftrace),
        ] {
            assert_eq!(resolve(p, TraceFormat::Auto).unwrap(), f);
            assert_eq!(resolve(p, f).unwrap(), f);
        }
        let e = refusal(&csv, TraceFormat::Native);
        assert!(
            e.contains("asked to read an iommulab native trace (.iot), but its contents are an iommulab CSV trace"),
            "{e}"
        );
        let e = refusal(&iot, TraceFormat::Ftrace);
        assert!(
            e.contains("its contents are an iommulab native trace"),
            "{e}"
        );
        let e = refusal(&ftrace, TraceFormat::Csv);
        assert!(e.contains("its contents are Linux ftrace text"), "{e}");
        // `open` refuses as `resolve` does, instead of reading the other format.
        assert!(open(&csv, TraceFormat::Native, false).is_err());
    }

    #[test]
    fn contents_decide_before_the_name() {
        let dir = tempfile::tempdir().unwrap();
        let csv = trace_file(dir.path(), "t.csv", 10);
        let iot = trace_file(dir.path(), "t.iot", 10);
        // Each renamed to the other's extension reads by what it holds.
        let csv_as_iot = dir.path().join("csv.iot");
        let iot_as_csv = dir.path().join("iot.csv");
        std::fs::rename(&csv, &csv_as_iot).unwrap();
        std::fs::rename(&iot, &iot_as_csv).unwrap();
        for (p, f) in [
            (&csv_as_iot, TraceFormat::Csv),
            (&iot_as_csv, TraceFormat::Native),
        ] {
            assert_eq!(resolve(p, TraceFormat::Auto).unwrap(), f);
            let mut r = open(p, TraceFormat::Auto, false).unwrap();
            let mut n = 0;
            while r.next_event().unwrap().is_some() {
                n += 1;
            }
            assert_eq!(n, 10, "{}", p.display());
        }
        // Text that is neither, named `.iot`, is reported by the native reader it claims.
        let text = dir.path().join("text.iot");
        std::fs::write(&text, "hello\n").unwrap();
        assert_eq!(
            resolve(&text, TraceFormat::Auto).unwrap(),
            TraceFormat::Native
        );
        let e = open(&text, TraceFormat::Auto, false)
            .map(|_| ())
            .unwrap_err();
        assert!(e.to_string().contains("byte 0"), "{e}");
    }

    #[test]
    fn binary_data_is_refused_at_its_first_nul_byte() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.bin");
        std::fs::write(&p, b"abc\0\0\0\x05").unwrap();
        for asked in [TraceFormat::Auto, TraceFormat::Ftrace] {
            let e = refusal(&p, asked);
            assert!(e.contains("a NUL byte at byte 3"), "{e}");
            assert!(e.contains("named .oracleGeneral"), "{e}");
        }
        // By its name, an oracleGeneral trace is pointed at the commands that read it.
        let og = dir.path().join("t.oracleGeneral.zst");
        std::fs::write(&og, b"abc\0\0\0\x05").unwrap();
        let e = refusal(&og, TraceFormat::Auto);
        assert!(
            e.contains("`iommulab mrc` and `iommulab trace stats` read it"),
            "{e}"
        );
    }

    #[test]
    fn a_csv_without_its_column_line_says_where_it_ends() {
        let dir = tempfile::tempdir().unwrap();
        let csv = trace_file(dir.path(), "t.csv", 0);
        let text = std::fs::read_to_string(&csv).unwrap();
        let empty = dir.path().join("empty.csv");
        std::fs::write(&empty, "").unwrap();
        let banner = dir.path().join("banner.csv");
        let two: String = text.lines().take(2).map(|l| format!("{l}\n")).collect();
        std::fs::write(&banner, two).unwrap();
        for (p, lines) in [(&empty, 0), (&banner, 2)] {
            match open(p, TraceFormat::Auto, false).map(|_| ()) {
                Err(TraceError::NoColumns { lines: n, .. }) => assert_eq!(n, lines),
                other => panic!("{}: {other:?}", p.display()),
            }
        }
        let lcs = dir.path().join("t.oracleGeneral.csv");
        std::fs::write(
            &lcs,
            "clock_time,obj_id,obj_size,next_access_vtime\n0,5,4096,-1\n",
        )
        .unwrap();
        let e = open(&lcs, TraceFormat::Auto, false)
            .map(|_| ())
            .unwrap_err();
        assert!(
            e.to_string().contains("these are libCacheSim's columns"),
            "{e}"
        );
    }
}
