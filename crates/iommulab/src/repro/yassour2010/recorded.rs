//! Figures 3–4 on recorded traces (S1.9): the paper replayed page-reference sequences it had
//! recorded from netperf send and Apache; the two traces committed in `traces/` were recorded
//! the same way from a real Linux 6.12 guest under QEMU's VT-d model (`scripts/capture-qemu.sh`,
//! scenarios `yassour-tcp` and `yassour-httpd`; `traces/README.md` tells how). They are built
//! into the binary, so the reproduction needs no file.
//!
//! Each trace holds every device's DMA from boot; the figures use the NIC's alone (the e1000e,
//! `0000:00:05.0`), as the paper's traces were of the NIC driver's mappings. The page-reference
//! stream is read exactly as `iommulab mrc TRACE` reads it ([`trace_page_refs`]).

use std::io::{BufReader, Cursor, Read};
use std::path::PathBuf;

use serde::Serialize;

use super::hit_rate::{self, HitCurve, PrefetchAt};
use crate::Error;
use crate::mrc::{self, trace_page_refs};
use crate::repro::Steps;
use crate::trace::ftrace::{FtraceOptions, FtraceReader};
use crate::trace::{Event, EventSource, TraceError, TraceHeader};
use crate::virt::{EvictionConfig, PageRef};

/// A committed recording.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Recording {
    /// Short name (the series label).
    pub name: &'static str,
    /// The file under `traces/`.
    pub file: &'static str,
    /// What was recorded.
    pub what: &'static str,
    /// The generator this recording stands beside.
    pub generator: &'static str,
    /// The NIC whose mappings are the workload's.
    pub device: &'static str,
    /// The file's bytes (zstd).
    bytes: &'static [u8],
}

/// The two recordings of S1.9's workloads.
pub(crate) const RECORDINGS: [Recording; 2] = [
    Recording {
        name: "recorded-tcp-send",
        file: "traces/yassour-tcp-6.12.95+deb12-amd64.txt.zst",
        what: "a 48 MiB TCP send with a 64 KiB socket buffer (iperf3 -w 64K, the stand-in for \
               netperf TCP_STREAM, which Debian does not ship) over an e1000e with TSO",
        generator: "netperf-send",
        device: "0000:00:05.0",
        bytes: include_bytes!("../../../../../traces/yassour-tcp-6.12.95+deb12-amd64.txt.zst"),
    },
    Recording {
        name: "recorded-httpd",
        file: "traces/yassour-httpd-6.12.95+deb12-amd64.txt.zst",
        what: "busybox httpd serving 100 static pages of 2-64 KiB to 400 requests (the \
               stand-in for Apache serving static wiki pages) over an e1000e with TSO",
        generator: "apache-sendfile",
        device: "0000:00:05.0",
        bytes: include_bytes!("../../../../../traces/yassour-httpd-6.12.95+deb12-amd64.txt.zst"),
    },
];

/// One recording's Figures 3–4 results (an entry of `results.json`'s `recorded`).
#[derive(Clone, Debug, Serialize)]
pub struct RecordedResult {
    /// The series label.
    pub workload: String,
    /// The file under `traces/`.
    pub trace: String,
    /// What was recorded.
    pub recorded: String,
    /// The device whose mappings were replayed.
    pub device: String,
    /// The generator this recording stands beside.
    pub generator: String,
    /// Page maps of the page-reference stream.
    pub page_maps: u64,
    /// Distinct pages mapped.
    pub working_set_pages: u64,
    /// One hit-rate curve per eviction policy, as for the generators.
    pub policies: Vec<HitCurve>,
    /// Prefetching's guesses at the quoted quotas.
    pub prefetch: Vec<PrefetchAt>,
}

/// Events of one device only (the others' are dropped; `iommu:` records name none and are
/// skipped by the replay anyway).
struct OnlyDevice<S> {
    inner: S,
    device: &'static str,
}

impl<S: EventSource> EventSource for OnlyDevice<S> {
    fn header(&self) -> &TraceHeader {
        self.inner.header()
    }

    fn next_event(&mut self) -> Result<Option<Event>, TraceError> {
        while let Some(e) = self.inner.next_event()? {
            let name = self.inner.header().devices.get(usize::from(e.device));
            if name.is_some_and(|n| n == self.device) {
                return Ok(Some(e));
            }
        }
        Ok(None)
    }

    fn cpu_count(&self) -> Option<u32> {
        self.inner.cpu_count()
    }
}

impl Recording {
    /// The page references of the recording's NIC.
    pub(crate) fn refs(&self) -> Result<Vec<PageRef>, Error> {
        let bad = |e: std::io::Error| {
            Error::Trace(TraceError::Io {
                path: PathBuf::from(self.file),
                source: e,
            })
        };
        let mut text = Vec::new();
        ruzstd::decoding::StreamingDecoder::new(self.bytes)
            .map_err(|e| bad(std::io::Error::other(e)))?
            .read_to_end(&mut text)
            .map_err(bad)?;
        let reader = FtraceReader::new(
            BufReader::new(Cursor::new(text)),
            PathBuf::from(self.file),
            FtraceOptions { lenient: false },
        );
        Ok(trace_page_refs(OnlyDevice {
            inner: reader,
            device: self.device,
        })?)
    }

    /// Steps [`Recording::run`] reports.
    pub(crate) fn steps() -> u64 {
        (EvictionConfig::all_default().len() + super::QUOTED.len()) as u64
    }

    /// Every policy's curve and prefetching's guesses on the recording.
    pub(crate) fn run(&self, steps: &mut Steps<'_, '_>) -> Result<RecordedResult, Error> {
        let refs = self.refs()?;
        let seq = mrc::page_sequence(&refs);
        let ws = mrc::distinct_pages(&refs) as u64;
        let policies = hit_rate::policies(self.name, &seq, &refs, ws, steps)?;
        let prefetch = hit_rate::prefetch(self.name, &seq, ws, steps)?;
        Ok(RecordedResult {
            workload: self.name.into(),
            trace: self.file.into(),
            recorded: self.what.into(),
            device: self.device.into(),
            generator: self.generator.into(),
            page_maps: refs.iter().filter(|r| matches!(r, PageRef::Map(_))).count() as u64,
            working_set_pages: ws,
            policies,
            prefetch,
        })
    }
}
