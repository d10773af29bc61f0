//! Figures 3–6 on recorded traces (S1.9): the paper replayed page-reference sequences it had
//! recorded from netperf send and Apache; the two traces committed in `traces/` were recorded
//! the same way from a real Linux 6.12 guest under QEMU's VT-d model (`scripts/capture-qemu.sh`,
//! scenarios `yassour-tcp` and `yassour-httpd`; `traces/README.md` tells how). They are built
//! into the binary, so the reproduction needs no file.
//!
//! Each trace holds every device's DMA from boot; the figures use the NIC's alone (the e1000e,
//! `0000:00:05.0`), as the paper's traces were of the NIC driver's mappings. The page-reference
//! stream is read exactly as `iommulab mrc TRACE` reads it ([`trace_page_refs`]).
//!
//! Figures 5–6 run the guest model on the NIC's calls as recorded (each `dma_map_page` a
//! buffer, TSO packets included); the `batching` series through
//! [`PacketSg`], which turns each run of back-to-back maps into
//! one scatter-gather list, the driver change batching needs (S1.6).

use std::io::{BufReader, Cursor, Read};
use std::path::PathBuf;

use serde::Serialize;

use super::cpu::{self, CpuCurve, CpuSensitivity, CpuWorkload, DriverMapping};
use super::guest_error;
use super::hit_rate::{self, HitCurve, PrefetchAt};
use crate::ReproError as Error;
use crate::Steps;
use iommulab::mrc::{self, trace_page_refs};
use iommulab::trace::ftrace::{FtraceOptions, FtraceReader};
use iommulab::trace::{Event, EventSource, MemorySource, TraceError, TraceHeader};
use iommulab::virt::{
    CacheOnly, EvictionConfig, GuestConfig, GuestResult, PageRef, guest_page_refs, run_guest,
};
use iommulab::workload::{InGuest, PacketSg, PacketSgStats, TraceWorkload};

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
        bytes: include_bytes!("../../../../traces/yassour-tcp-6.12.95+deb12-amd64.txt.zst"),
    },
    Recording {
        name: "recorded-httpd",
        file: "traces/yassour-httpd-6.12.95+deb12-amd64.txt.zst",
        what: "busybox httpd serving 100 static pages of 2-64 KiB to 400 requests (the \
               stand-in for Apache serving static wiki pages) over an e1000e with TSO",
        generator: "apache-sendfile",
        device: "0000:00:05.0",
        bytes: include_bytes!("../../../../traces/yassour-httpd-6.12.95+deb12-amd64.txt.zst"),
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
    /// Optimal batching and prefetching at the 10% quota with their batches capped.
    pub batch_caps: Vec<hit_rate::BatchCapAt>,
    /// Figures 5–6 on the recording: one CPU curve per series.
    pub cpu: Vec<CpuCurve>,
    /// Most pages pinned at once, with and without the driver's lists (the curves'
    /// minimal quota).
    pub cpu_max_pinned_pages: u64,
    /// How the batching series' driver change grouped the recording's maps.
    pub packet_sg: PacketSgStats,
    /// The no-caching claims over the estimated prices' ranges.
    pub cpu_sensitivity: Vec<CpuSensitivity>,
    /// The no-caching claims with one IOTLB invalidation per cleared PTE.
    pub per_page_invalidation: cpu::PerPageInvalidation,
    /// The `nic-duplex` generator tuned to this recording's statistics, with its hit rates
    /// ([`super::tuned`]).
    pub tuned: Option<super::TunedResult>,
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
    /// The recording's NIC events, read once, and the top of the memory they touch.
    fn load(&self) -> Result<(MemorySource, u64), Error> {
        let bad = |e: std::io::Error| {
            Error::from(TraceError::Io {
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
        let mut nic = OnlyDevice {
            inner: reader,
            device: self.device,
        };
        let mut events = Vec::new();
        while let Some(e) = nic.next_event()? {
            events.push(e);
        }
        let top = events
            .iter()
            // As the replay: a coherent allocation traced without its physical address
            // (`virt_addr=` format) stands at its DMA address.
            .filter_map(|e| Some(e.phys.or(e.dma)? + e.len.max(1)))
            .max()
            .unwrap_or(0);
        Ok((MemorySource::new(nic.header().clone(), events), top))
    }

    /// Reads the recording and what its steps need.
    pub(crate) fn prepare(&'static self) -> Result<PreparedRecording, Error> {
        let (nic, top) = self.load()?;
        // Read exactly as `iommulab mrc TRACE` reads a trace.
        let refs = trace_page_refs(nic.clone())?;
        let ws = mrc::distinct_pages(&refs) as u64;
        let w = Replayed {
            name: self.name,
            nic,
            // The recorded guest's memory: every buffer of the trace lies in it.
            guest_pages: top.div_ceil(4096).max(GuestConfig::default().guest_pages),
        };
        let plain = guest_page_refs(&mut w.workload(), CacheOnly::All)?;
        let mut listed = PacketSg::new(w.workload());
        let sg_refs = guest_page_refs(&mut listed, CacheOnly::All)?;
        let per_packet =
            guest_page_refs(&mut PacketSg::transmit_only(w.workload()), CacheOnly::All)?;
        Ok(PreparedRecording {
            rec: self,
            refs,
            ws,
            cpu_ws: mrc::distinct_pages(&plain) as u64,
            pinned: mrc::max_pinned(&plain)
                .max(mrc::max_pinned(&sg_refs))
                .max(mrc::max_pinned(&per_packet)),
            packet_sg: listed.stats(),
            w,
        })
    }
}

/// A recording read, with what its steps need.
pub(crate) struct PreparedRecording {
    rec: &'static Recording,
    refs: Vec<PageRef>,
    ws: u64,
    /// Distinct pages of the guest runs (the same pages as `refs`, counted by the guest).
    cpu_ws: u64,
    /// Most pages pinned at once, with and without the driver's lists.
    pinned: u64,
    packet_sg: PacketSgStats,
    w: Replayed,
}

impl PreparedRecording {
    /// The recording's stream statistics ([`super::streams`]).
    pub(crate) fn stream_stats(&self) -> Result<super::StreamStats, Error> {
        super::streams::stats(
            self.rec.name,
            self.rec.what.into(),
            &self.refs,
            &mut self.w.workload(),
        )
    }

    /// What the tuning reads off the recording's NIC operations ([`super::tuned`]).
    pub(crate) fn shape(&self) -> Result<super::Shape, Error> {
        super::tuned::shape(&mut self.w.workload())
    }

    /// The recording's name.
    pub(crate) fn name(&self) -> &'static str {
        self.rec.name
    }

    /// Steps [`PreparedRecording::run`] reports.
    pub(crate) fn steps(&self) -> u64 {
        (EvictionConfig::all_default().len() + super::QUOTED.len() + 1) as u64
            + cpu::steps(self.pinned, self.cpu_ws)
            + cpu::SENSITIVITY_STEPS
            + cpu::PER_PAGE_STEPS
    }

    /// Every policy's curve and prefetching's guesses on the recording, and the CPU curves.
    pub(crate) fn run(&self, steps: &mut Steps<'_, '_>) -> Result<RecordedResult, Error> {
        let (r, refs, ws) = (self.rec, &self.refs, self.ws);
        let seq = mrc::page_sequence(refs);
        let policies = hit_rate::policies(r.name, &seq, refs, ws, steps)?;
        let prefetch = hit_rate::prefetch(r.name, &seq, ws, steps)?;
        let batch_caps = hit_rate::batch_caps(r.name, &seq, ws, steps)?;
        let cpu = cpu::curves(&self.w, self.cpu_ws, self.pinned, steps)?;
        let cpu_sensitivity = cpu::sensitivity(&self.w, steps)?;
        let per_page_invalidation = cpu::per_page_invalidation(&self.w, steps)?;
        Ok(RecordedResult {
            workload: r.name.into(),
            trace: r.file.into(),
            recorded: r.what.into(),
            device: r.device.into(),
            generator: r.generator.into(),
            page_maps: refs.iter().filter(|r| matches!(r, PageRef::Map(_))).count() as u64,
            working_set_pages: ws,
            policies,
            prefetch,
            batch_caps,
            cpu,
            cpu_max_pinned_pages: self.pinned,
            packet_sg: self.packet_sg,
            cpu_sensitivity,
            per_page_invalidation,
            tuned: None,
        })
    }
}

/// A recording's NIC events as a guest workload.
struct Replayed {
    name: &'static str,
    nic: MemorySource,
    guest_pages: u64,
}

impl Replayed {
    fn workload(&self) -> InGuest<TraceWorkload<MemorySource>> {
        InGuest::new(TraceWorkload::new(self.nic.clone()))
    }
}

impl CpuWorkload for Replayed {
    fn label(&self) -> &str {
        self.name
    }

    fn run_cpu(&self, cfg: &GuestConfig, m: DriverMapping) -> Result<GuestResult, Error> {
        let cfg = &GuestConfig {
            guest_pages: self.guest_pages,
            ..cfg.clone()
        };
        let r = match m {
            DriverMapping::PerFragment => run_guest(&mut self.workload(), cfg, None),
            DriverMapping::PerPacket => {
                run_guest(&mut PacketSg::transmit_only(self.workload()), cfg, None)
            }
            DriverMapping::Runs => run_guest(&mut PacketSg::new(self.workload()), cfg, None),
        };
        r.map_err(guest_error)
    }
}
