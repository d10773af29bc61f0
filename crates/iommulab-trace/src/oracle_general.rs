//! Reading libCacheSim's binary `oracleGeneral` traces (plain, `.gz` or `.zst`): a stream of
//! object requests, which `iommulab mrc` and `trace stats` take as 4 KiB page requests
//! (object id → page number), so any libCacheSim trace runs through iommulab and one file
//! feeds both tools. The writer (`trace convert` to `.oracleGeneral`) is the workload
//! crate's `oracle_general` module.
//!
//! Each request is 24 bytes, little-endian, packed (libCacheSim
//! `traceReader/customizedReader/oracle/oracleGeneralBin.h`, `oracleGeneralBin_read_one_req`):
//!
//! ```text
//! offset 0   u32 clock_time
//! offset 4   u64 obj_id
//! offset 12  u32 obj_size
//! offset 16  i64 next_access_vtime   (-1 or i64::MAX: never again)
//! ```
//!
//! Only `obj_id` is read: every object is one page, as libCacheSim counts them with
//! `ignore_obj_size` (a cache of Q objects); the next uses are recomputed where needed
//! (OPT), so a file whose `next_access_vtime` is absent or wrong gives the same curves.
//!
//! A file whose length is not a multiple of 24 bytes ends inside a request: an error that
//! names the byte offset (of the decompressed data) where the last request starts and how
//! many of its 24 bytes are there.

use std::io::{BufRead, Read};
use std::path::{Path, PathBuf};

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::TraceError;
use crate::io::{name_parts, open_text};
use crate::page_ids::PageIds;
use crate::stack_distance::ReuseCounter;
use crate::stats::Log2Histogram;

/// Bytes per request.
pub const RECORD_BYTES: usize = 24;

/// Requests per [`OracleGeneralReader::read_records`] batch: 96 KiB of records, read where
/// they are parsed while still in the core's cache. The kernel's copy into the buffer costs
/// about what a memory mapping of the file costs (page-table entries per 4 KiB page) at any
/// batch of 1,024–65,536 requests (BENCHMARKS.md), so the file is read, not mapped.
const BATCH: usize = 1 << 12;

/// What a request holds, for messages.
const RECORD: &str = "a 24-byte oracleGeneral request (u32 clock_time, u64 obj_id, u32 \
                      obj_size, i64 next_access_vtime)";

/// Whether `path` names a binary oracleGeneral trace: its name without `.gz`/`.zst` ends in
/// `.oracleGeneral` or `.oracleGeneral.bin` (libCacheSim's corpora use both), in any case.
pub fn is_oracle_general(path: &Path) -> bool {
    let (name, _) = name_parts(path);
    name.ends_with(".oraclegeneral") || name.ends_with(".oraclegeneral.bin")
}

/// A binary oracleGeneral trace, read a batch of requests at a time.
pub struct OracleGeneralReader {
    inner: Box<dyn BufRead>,
    path: PathBuf,
    /// Bytes of requests read so far (decompressed).
    offset: u64,
    buf: Vec<u8>,
    done: bool,
}

impl std::fmt::Debug for OracleGeneralReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OracleGeneralReader")
            .field("path", &self.path)
            .field("offset", &self.offset)
            .finish_non_exhaustive()
    }
}

/// The object id of one request (`record`: [`RECORD_BYTES`] bytes).
#[inline]
pub fn record_obj_id(record: &[u8]) -> u64 {
    let mut id = [0u8; 8];
    id.copy_from_slice(&record[4..12]);
    u64::from_le_bytes(id)
}

impl OracleGeneralReader {
    /// Opens `path` (decompressing `.gz`/`.zst`, detected by their magic bytes).
    ///
    /// # Errors
    /// [`TraceError::Io`] if it cannot be opened.
    pub fn open(path: &Path) -> Result<Self, TraceError> {
        Ok(Self::new(open_text(path)?, path.to_owned()))
    }

    /// Reads requests from `inner`; errors name `path`.
    pub fn new(inner: Box<dyn BufRead>, path: PathBuf) -> Self {
        Self {
            inner,
            path,
            offset: 0,
            buf: vec![0; BATCH * RECORD_BYTES],
            done: false,
        }
    }

    /// The file read.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Requests read so far.
    pub fn requests(&self) -> u64 {
        self.offset / RECORD_BYTES as u64
    }

    /// The next requests (up to 4,096), [`RECORD_BYTES`] bytes each ([`record_obj_id`]
    /// reads one's object id): empty only at the end.
    ///
    /// # Errors
    /// [`TraceError::Truncated`] for a file that ends inside a request (the offset where that
    /// request starts), [`TraceError::Io`] for a read that fails (a damaged `.gz`/`.zst`).
    pub fn read_records(&mut self) -> Result<&[u8], TraceError> {
        if self.done {
            return Ok(&[]);
        }
        let mut got = 0;
        while got < self.buf.len() {
            match self.inner.read(&mut self.buf[got..]) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(source) => {
                    self.done = true;
                    return Err(TraceError::Io {
                        path: self.path.clone(),
                        source,
                    });
                }
            }
        }
        let (bytes, full) = (&self.buf[..got], got == self.buf.len());
        let whole = bytes.len() / RECORD_BYTES * RECORD_BYTES;
        self.offset += whole as u64;
        if !full {
            self.done = true;
            if bytes.len() > whole {
                return Err(TraceError::Truncated {
                    path: self.path.clone(),
                    offset: self.offset,
                    what: format!(
                        "{RECORD}: the file ends {} bytes into it",
                        bytes.len() - whole
                    ),
                });
            }
        }
        Ok(&bytes[..whole])
    }

    /// Replaces `out`'s contents with the object ids of the next requests (up to 4,096),
    /// returning how many: 0 only at the end.
    ///
    /// # Errors
    /// As [`read_records`](Self::read_records).
    pub fn read_requests(&mut self, out: &mut Vec<u64>) -> Result<usize, TraceError> {
        out.clear();
        let records = self.read_records()?;
        out.extend(records.chunks_exact(RECORD_BYTES).map(record_obj_id));
        Ok(out.len())
    }
}

/// `trace stats` of a trace of page requests: what a request stream has (no devices, maps
/// or unmaps), counted as the DMA-API layer's page figures are.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestStats {
    /// The input format (`oracleGeneral`).
    pub format: String,
    /// Requests (one 4 KiB page each).
    pub requests: u64,
    /// Distinct pages (objects) requested.
    pub distinct_pages: u64,
    /// LRU stack distance of each repeated request: the distinct other pages requested since
    /// the same page's previous request.
    pub reuse_distance: Log2Histogram,
    /// First-time requests (infinite reuse distance).
    pub reuse_cold: u64,
}

impl RequestStats {
    /// A table for people.
    pub fn to_table(&self) -> String {
        let mut t = String::new();
        let _ = writeln!(t, "{:<26} {}", "format", self.format);
        let _ = writeln!(t, "{:<26} {}", "requests (4 KiB pages)", self.requests);
        let _ = writeln!(t, "{:<26} {}", "distinct pages", self.distinct_pages);
        let _ = writeln!(t, "  reuse distance (pages)");
        for (i, c) in self.reuse_distance.buckets.iter().enumerate() {
            if *c > 0 {
                let _ = writeln!(t, "    {:<22} {c}", Log2Histogram::label(i));
            }
        }
        let _ = writeln!(t, "    {:<22} {}", "cold", self.reuse_cold);
        t
    }
}

/// The statistics of the requests `reader` reads: counts and LRU reuse distances (the
/// workspace's one stack-distance counter, as `trace stats` of a DMA trace).
///
/// # Errors
/// As [`OracleGeneralReader::read_requests`], and [`TraceError::Unsupported`] past 2^30
/// distinct pages.
pub fn request_stats(reader: &mut OracleGeneralReader) -> Result<RequestStats, TraceError> {
    let mut ids = PageIds::default();
    let mut reuse = ReuseCounter::default();
    let (mut batch, mut numbered) = (Vec::new(), Vec::new());
    let mut requests = 0u64;
    while reader.read_requests(&mut batch)? > 0 {
        numbered.clear();
        for &p in &batch {
            let Ok(r) = ids.run(p, p + 1) else {
                return Err(TraceError::Unsupported {
                    path: reader.path().to_owned(),
                    what: "more than 2^30 distinct pages, the most the statistics number"
                        .to_owned(),
                });
            };
            numbered.push(r.base + r.lo);
        }
        reuse.feed(&numbered);
        requests += batch.len() as u64;
    }
    Ok(RequestStats {
        format: "oracleGeneral".to_owned(),
        requests,
        distinct_pages: reuse.distinct(),
        reuse_distance: reuse.histogram,
        reuse_cold: reuse.cold,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(obj: u64) -> Vec<u8> {
        let mut r = Vec::new();
        r.extend_from_slice(&7u32.to_le_bytes());
        r.extend_from_slice(&obj.to_le_bytes());
        r.extend_from_slice(&4096u32.to_le_bytes());
        r.extend_from_slice(&(-1i64).to_le_bytes());
        r
    }

    fn read_all(bytes: Vec<u8>) -> Result<Vec<u64>, TraceError> {
        let mut r = OracleGeneralReader::new(
            Box::new(std::io::Cursor::new(bytes)),
            PathBuf::from("t.oracleGeneral"),
        );
        let (mut all, mut batch) = (Vec::new(), Vec::new());
        while r.read_requests(&mut batch)? > 0 {
            all.extend_from_slice(&batch);
        }
        Ok(all)
    }

    #[test]
    fn reads_object_ids_across_batches() {
        let ids: Vec<u64> = (0..(BATCH as u64 + 10))
            .map(|i| i * 3 % 1000 + (1 << 40))
            .collect();
        let bytes: Vec<u8> = ids.iter().flat_map(|&i| record(i)).collect();
        assert_eq!(read_all(bytes).unwrap(), ids);
        assert_eq!(read_all(Vec::new()).unwrap(), Vec::<u64>::new());
    }

    /// Plain, zstd and gzip files read the same requests (compression by magic bytes).
    #[test]
    fn compressed_files_read_the_same_requests() {
        use std::io::Write as _;
        let dir = tempfile::tempdir().unwrap();
        let ids: Vec<u64> = (0..5000u64).map(|i| i * 7 % 300).collect();
        let bytes: Vec<u8> = ids.iter().flat_map(|&i| record(i)).collect();
        let zst = ruzstd::encoding::compress_to_vec(
            &bytes[..],
            ruzstd::encoding::CompressionLevel::Fastest,
        );
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(&bytes).unwrap();
        for (name, data) in [
            ("t.oracleGeneral", bytes.clone()),
            ("t.oracleGeneral.zst", zst),
            ("t.oracleGeneral.bin.gz", gz.finish().unwrap()),
        ] {
            let p = dir.path().join(name);
            std::fs::write(&p, data).unwrap();
            assert!(is_oracle_general(&p));
            let mut r = OracleGeneralReader::open(&p).unwrap();
            let (mut all, mut batch) = (Vec::new(), Vec::new());
            while r.read_requests(&mut batch).unwrap() > 0 {
                all.extend_from_slice(&batch);
            }
            assert_eq!(all, ids, "{name}");
            assert_eq!(r.requests(), 5000);
        }
    }

    #[test]
    fn a_truncated_request_names_its_offset() {
        for cut in [1, 12, 23] {
            let mut bytes: Vec<u8> = [5u64, 6].iter().flat_map(|&i| record(i)).collect();
            bytes.extend_from_slice(&record(9)[..cut]);
            let e = read_all(bytes).unwrap_err().to_string();
            assert!(e.contains("t.oracleGeneral"), "{e}");
            assert!(e.contains("byte 48"), "{e}");
            assert!(e.contains("24-byte oracleGeneral request"), "{e}");
            assert!(e.contains(&format!("ends {cut} bytes into it")), "{e}");
        }
    }

    #[test]
    fn statistics_count_requests_pages_and_reuse() {
        let bytes: Vec<u8> = [5u64, 6, 5, 5, 1 << 50]
            .iter()
            .flat_map(|&i| record(i))
            .collect();
        let mut r = OracleGeneralReader::new(
            Box::new(std::io::Cursor::new(bytes)),
            PathBuf::from("t.oracleGeneral"),
        );
        let s = request_stats(&mut r).unwrap();
        assert_eq!((s.requests, s.distinct_pages, s.reuse_cold), (5, 3, 3));
        // Distances 1 (6 between) and 0.
        assert_eq!(s.reuse_distance.buckets, [1, 1]);
        assert!(
            s.to_table().contains("distinct pages             3"),
            "{}",
            s.to_table()
        );
    }

    #[test]
    fn names_are_recognised_with_any_case_and_compression() {
        for n in [
            "a.oracleGeneral",
            "w01.oracleGeneral.bin.zst",
            "x.ORACLEGENERAL.gz",
        ] {
            assert!(is_oracle_general(Path::new(n)), "{n}");
        }
        for n in ["a.oracleGeneral.csv", "a.iot", "oracleGeneral"] {
            assert!(!is_oracle_general(Path::new(n)), "{n}");
        }
    }
}
