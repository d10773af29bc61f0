//! Yassour, Ben-Yehuda & Wasserman, "On the DMA mapping problem in direct device
//! assignment" (SYSTOR 2010), Figures 3–6, on the built-in netperf-send and apache-sendfile
//! workloads, plus the intra-guest protection table of S1.11.
//!
//! - Figures 3–4 (S1.9, the paper's §4.2 method; [`hit_rate`]): the workload's
//!   *page-reference sequence* (its page maps in order, no pinning), the working set =
//!   distinct pages, and the hit rate of FIFO, LRU, OPT, optimal batching and prefetching at
//!   every integer quota from 0 to the working set (≤ 200 pages; else 41 points). LRU and
//!   OPT from the one-pass stack-distance curves (exact without pinning), the others from
//!   one map-cache run per quota. A second view replays the same stream *with* pinning
//!   (pages of in-flight DMAs cannot be evicted, so small quotas refuse maps), which the
//!   paper's simulation leaves out.
//! - Figures 5–6 ([`cpu`]): modeled CPU utilisation vs quota. The left end is the paper's
//!   "minimal quota (i.e., no caching allowed)": `single-use` mapping, every page map a map
//!   request and every driver unmap an unmap request, packed into hypercalls by the series'
//!   batching; then the map cache from the minimal quota that refuses no map (the most
//!   pages ever pinned at once) to the working set. Series: LRU (no batching), LRU with
//!   unmap piggyback, prefetching (with no caching there is nothing to prefetch into: the
//!   same as LRU), "batching" (LRU with map and unmap batching as S1.6 defines it: the
//!   driver maps a large buffer, a packet's head and fragments, with several calls and uses
//!   none until all are done, so the pieces share a map hypercall and an unmap hypercall)
//!   and "batching-ring-refill", an extension labelled as such (the driver changed to map
//!   each run of back-to-back maps, a receive-ring refill's separate buffers included, as
//!   one scatter-gather list and one hypercall). From full guest runs (hypercalls, host bookkeeping, VT-d PTE writes,
//!   write-buffer flushes and IOTLB invalidations, costs `kvm-2010`, S1.10): utilisation =
//!   modeled cycles / (payload bytes × 8 / link rate) / (2.66 GHz).
//! - Protection (S1.11; [`protection`]): stale device accesses per strategy.
//! - Sensitivity ([`sensitivity`]): each estimated price over its range, the CPU curves
//!   priced again from their counts, and where each claim's verdict holds on each stream.

pub mod claims;

use crate::claims::Claim;

use crate::Paper as _;

pub mod cpu;
pub mod hit_rate;
pub mod protection;
pub mod recorded;
pub mod sensitivity;
pub mod streams;
pub mod tuned;

use std::sync::Arc;

use serde::Serialize;

use super::{ReproOptions, Steps, guest_error};
use crate::ReproError as Error;
use iommulab::mrc;
use iommulab::virt::{
    CacheOnly, GuestConfig, GuestResult, Lookahead, PageRef, guest_page_refs, run_guest,
    working_set_pages,
};
use iommulab::workload::{
    ApacheSendfile, ApacheSendfileConfig, DuplexTx, InGuest, NetperfSend, NetperfSendConfig,
    NicDuplex, NicDuplexConfig, PacketSg, TxMapping,
};

pub use cpu::{CpuCurve, CpuSensitivity, PerPageInvalidation};
pub use hit_rate::{BatchCapAt, HitCurve, PrefetchAt, Sensitivity};
pub use protection::Protection;
pub use streams::StreamStats;
pub use tuned::{Shape, TunedParam, TunedResult};

/// The line of the reproductions' index.
pub const TITLE: &str = "Yassour, Ben-Yehuda & Wasserman 2010, On the DMA mapping problem in direct device \
assignment (Figures 3-6: hit rate and CPU vs quota; intra-guest protection)";

/// Yassour, Ben-Yehuda & Wasserman, "On the DMA mapping problem in direct device
/// assignment" (SYSTOR 2010): Figures 3–6 and the intra-guest protection table.
#[derive(Clone, Copy, Debug)]
pub struct Yassour2010;

impl crate::Paper for Yassour2010 {
    type Results = Yassour2010Results;
    const NAME: &'static str = "yassour2010";
    const TITLE: &'static str = TITLE;

    fn run(opts: &ReproOptions<'_>) -> Result<Yassour2010Results, Error> {
        run(opts)
    }

    fn claims(r: &Yassour2010Results) -> &[Claim] {
        &r.claims
    }

    fn quick(r: &Yassour2010Results) -> bool {
        r.results.quick
    }
}

/// The paper, as `results.json` names it.
pub const PAPER: &str = "Yassour, Ben-Yehuda, Wasserman: On the DMA mapping problem in direct device assignment (SYSTOR 2010)";

/// How CPU utilisation is computed from a guest run (S1.10's 2.66 GHz core).
pub const CPU_FORMULA: &str = "busy = mapping cycles + net_tx_per_kib x KiB sent; run time = max(bytes sent x 8 / link bps, busy / (cpus x 2.66e9 cycles/s)); cpu_utilization = busy / (cpus x 2.66e9 x run time) <= 1; throughput = bytes sent x 8 / run time";

/// The guest's CPUs in every run of the reproduction. The paper's machine is a dual-core
/// Core 2 Duo (S1.10) and "all tests saturated the 1GbE link" (§4.3); its guest's vCPU count
/// is not stated. With one vCPU the model's LRU without caching cannot fill the link (the
/// CPU-sensitivity table shows both).
pub const GUEST_CPUS: u32 = 2;

/// The guest configuration every run of the reproduction starts from: `kvm-2010`, 1 GbE,
/// [`GUEST_CPUS`].
pub(crate) fn guest_base() -> GuestConfig {
    GuestConfig {
        cpus: GUEST_CPUS,
        ..GuestConfig::default()
    }
}

/// The quota fractions the tables quote (the paper's findings are stated at 10%).
pub const QUOTED: [f64; 3] = [0.10, 0.25, 0.50];

/// A finding the paper states for Figures 3–6 (S1.9), with its number where it gives one.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct PaperFinding {
    /// A short key.
    pub id: &'static str,
    /// The paper's figures it is about.
    pub figures: &'static str,
    /// The finding, in the paper's words where quoted.
    pub claim: &'static str,
    /// The published number, if the paper gives one.
    pub value: Option<f64>,
    /// What `value` (or the claim) measures here.
    pub measure: &'static str,
}

/// The paper's findings on Figures 3–6 (S1.9), in the order the report's table lists them.
pub const PAPER_FINDINGS: [PaperFinding; 7] = [
    PaperFinding {
        id: "lru_fifo_low_quota",
        figures: "3-4",
        claim: "LRU and FIFO \"highly inefficient for low quotas\"",
        value: None,
        measure: "hit rate of LRU and FIFO at 10% and 50% quota",
    },
    PaperFinding {
        id: "opt_batch_at_10",
        figures: "3-4",
        claim: "optimal batching ≈ 100% hit rate at 10% quota",
        value: Some(1.0),
        measure: "hit rate of optimal batching at 10% quota",
    },
    PaperFinding {
        id: "prefetch_at_10",
        figures: "3-4",
        claim: "prefetching beats every non-batching policy, OPT included (netperf); ≈ 90% at 10% (Apache)",
        value: Some(0.9),
        measure: "hit rate of prefetching at 10% quota (Apache)",
    },
    PaperFinding {
        id: "cpu_at_minimal",
        figures: "5-6",
        claim: "high CPU at minimal quota (no caching) for every optimisation",
        value: None,
        measure: "CPU of every series with no caching",
    },
    PaperFinding {
        id: "piggyback_cpu",
        figures: "5-6",
        claim: "unmap piggyback ≈ 10% less CPU than LRU, less as the quota grows",
        value: Some(0.9),
        measure: "CPU of piggyback / CPU of LRU with no caching",
    },
    PaperFinding {
        id: "prefetch_cpu",
        figures: "5-6",
        claim: "prefetching reduces CPU further, its impact falls fast with the quota",
        value: None,
        measure: "CPU of prefetching / CPU of LRU",
    },
    PaperFinding {
        id: "batching_cpu",
        figures: "5-6",
        claim: "batching halves CPU at minimal quota",
        value: Some(0.5),
        measure: "CPU of batching / CPU of LRU with no caching",
    },
];

/// One workload's results (an entry of `results.json`'s `workloads`).
#[derive(Clone, Debug, Serialize)]
pub struct WorkloadResult {
    /// `netperf-send` or `apache-sendfile`.
    pub workload: String,
    /// Its parameters, in words.
    pub config: String,
    /// Page maps of the page-reference stream.
    pub page_maps: u64,
    /// Distinct pages mapped.
    pub working_set_pages: u64,
    /// S1.8's formula for the working set.
    pub working_set_formula_pages: u64,
    /// Most pages pinned at once (the minimal quota of Figures 5–6).
    pub max_pinned_pages: u64,
    /// Figures 3–4: one hit-rate curve per eviction policy.
    pub policies: Vec<HitCurve>,
    /// Prefetching's guesses at the quoted quotas.
    pub prefetch: Vec<PrefetchAt>,
    /// Optimal batching and prefetching at the 10% quota with their batches capped.
    pub batch_caps: Vec<hit_rate::BatchCapAt>,
    /// Figures 5–6: one CPU curve per series.
    pub cpu: Vec<CpuCurve>,
    /// The configuration the CPU curves ran (Figure 6: large-file downloads, S1.9).
    pub cpu_config: String,
    /// Distinct pages of the CPU curves' run.
    pub cpu_working_set_pages: u64,
    /// Most pages pinned at once in the CPU curves' run (their minimal quota).
    pub cpu_max_pinned_pages: u64,
    /// S1.11: stale accesses per strategy.
    pub protection: Vec<Protection>,
}

/// Everything `results.json` holds.
#[derive(Clone, Debug, Serialize)]
pub struct Results {
    /// The paper.
    pub paper: &'static str,
    /// Whether this was the quick run.
    pub quick: bool,
    /// The cost preset of the guest runs.
    pub cost: &'static str,
    /// The link rate the CPU utilisation assumes.
    pub link_mbps: u64,
    /// The guest's CPUs (an input chosen from the paper: [`GUEST_CPUS`]).
    pub cpus: u32,
    /// Optimal batching's cap on the pages one miss maps, the paper's N + 1 (`None`: no cap,
    /// [`iommulab::virt::OptBatchConfig`]'s default: the paper gives no N, and its optimal
    /// batching replaces as many pages at once as the quota allows).
    pub opt_batch_pages: Option<usize>,
    /// Every price of the guest runs (`kvm-2010`).
    pub cost_model: iommulab::hw::CostModel,
    /// How CPU utilisation is computed.
    pub cpu_formula: &'static str,
    /// netperf-send, then apache-sendfile.
    pub workloads: Vec<WorkloadResult>,
    /// The page-sequence hit rates of a smaller configuration (one netperf socket).
    pub sensitivity: Vec<Sensitivity>,
    /// Figures 3–6 on the recorded traces (TCP send, then the web server).
    pub recorded: Vec<recorded::RecordedResult>,
    /// Each recording's stream beside its generator's, default, set up as recorded, and
    /// tuned to the recording (`nic-duplex`, each recording's `tuned`).
    pub streams: Vec<StreamStats>,
    /// The figure claims judged by the same rules on every stream, generators included
    /// (the headline ones, in [`Yassour2010Results::claims`], are judged on the recordings).
    pub claims_by_stream: Vec<claims::StreamClaim>,
    /// Each estimated price swept over its range: where each claim's verdict holds on
    /// each stream ([`sensitivity`]).
    pub price_sensitivity: Vec<crate::sensitivity::SensitivityRow>,
    /// The set-up numbers the page's prose quotes, from this run's configuration.
    pub setup_facts: SetupFacts,
}

/// The set-up numbers the page's explanations quote (the generators' and the policies'),
/// taken from the netperf configuration this run used and the constants the workloads and
/// policies run with, so the prose says what the run did.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct SetupFacts {
    /// From a packet's transmit completion to the ACK that frees its pages, µs.
    pub rtt_us: u32,
    /// The generators' link, Mb/s.
    pub link_mbps: u64,
    /// Each netperf socket's send buffer, bytes.
    pub send_buffer_bytes: u64,
    /// TCP payload of one TSO segment, bytes.
    pub segment_payload_bytes: u64,
    /// The time that payload alone takes on the link, µs (frame headers and gaps add more).
    pub segment_wire_us: f64,
    /// An skb head's slab object, bytes.
    pub head_object_bytes: u64,
    /// Head objects per slab page.
    pub heads_per_page: u64,
    /// Most payload pages one segment spans (a fragment each).
    pub max_payload_pages: u64,
    /// Followers prefetching remembers per page (S1.4).
    pub prefetch_followers: usize,
    /// How often a follower must have followed to be prefetched.
    pub prefetch_min_count: u32,
    /// Pages prefetching maps per miss at most, the missing page included.
    pub prefetch_max_batch: usize,
    /// Future map requests optimal batching scans on a miss for pages to map ahead.
    pub opt_batch_window: usize,
}

impl SetupFacts {
    /// The facts of netperf configuration `c`.
    pub fn of(c: &NetperfSendConfig) -> Self {
        let payload = iommulab::workload::packet_payload_bytes(c.mtu, c.tso);
        let prefetch = iommulab::virt::eviction::prefetch::PrefetchConfig::default();
        let page = iommulab::addr::PAGE_4K.bytes();
        Self {
            rtt_us: c.rtt_us,
            link_mbps: c.link_mbps,
            send_buffer_bytes: c.send_buffer,
            segment_payload_bytes: payload,
            segment_wire_us: payload as f64 * 8.0 / c.link_mbps.max(1) as f64,
            head_object_bytes: iommulab::workload::HEAD_OBJECT,
            heads_per_page: page / iommulab::workload::HEAD_OBJECT,
            max_payload_pages: iommulab::workload::max_payload_pages(payload),
            prefetch_followers: iommulab::virt::eviction::prefetch::FOLLOWERS,
            prefetch_min_count: prefetch.min_count,
            prefetch_max_batch: prefetch.max_batch,
            opt_batch_window: iommulab::virt::OptBatchConfig::default().window,
        }
    }
}

impl Results {
    /// The results of workload `name`.
    pub fn workload(&self, name: &str) -> Option<&WorkloadResult> {
        self.workloads.iter().find(|w| w.workload == name)
    }
}

/// What the reproduction returns.
#[derive(Clone, Debug, Serialize)]
pub struct Yassour2010Results {
    /// Everything `results.json` (and the CSV files) hold.
    pub results: Results,
    /// The paper's findings, beside which the report puts ours.
    pub paper: Vec<PaperFinding>,
    /// The paper's claims, judged on this run (`repro/claims/yassour2010.rs`,
    /// [`crate::claims`]).
    pub claims: Vec<crate::claims::Claim>,
}

/// A workload of the reproduction.
#[derive(Clone, Debug)]
pub(crate) enum Spec {
    Netperf(NetperfSendConfig),
    Apache(ApacheSendfileConfig),
    /// A sender beside its NIC's receive ring ([`tuned`]).
    Duplex(NicDuplexConfig),
}

/// Runs `$body` with `$w` bound to the generator of `$spec` inside a guest (the one place
/// the configuration becomes a concrete type).
macro_rules! with_spec {
    ($spec:expr, $w:ident => $body:expr) => {
        match $spec {
            Spec::Netperf(c) => {
                #[allow(unused_mut, reason = "a body that wraps the workload moves it")]
                let mut $w = InGuest::new(NetperfSend::new(*c)?);
                $body
            }
            Spec::Apache(c) => {
                #[allow(unused_mut, reason = "a body that wraps the workload moves it")]
                let mut $w = InGuest::new(ApacheSendfile::new(*c)?);
                $body
            }
            Spec::Duplex(c) => match c.tx {
                DuplexTx::NetperfSend(t) => {
                    #[allow(unused_mut, reason = "a body that wraps the workload moves it")]
                    let mut $w = InGuest::new(NicDuplex::new(NetperfSend::new(t)?, c)?);
                    $body
                }
                DuplexTx::ApacheSendfile(t) => {
                    #[allow(unused_mut, reason = "a body that wraps the workload moves it")]
                    let mut $w = InGuest::new(NicDuplex::new(ApacheSendfile::new(t)?, c)?);
                    $body
                }
            },
        }
    };
}

impl Spec {
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Spec::Netperf(_) => "netperf-send",
            Spec::Apache(_) => "apache-sendfile",
            Spec::Duplex(_) => "nic-duplex",
        }
    }

    fn describe(&self) -> String {
        match self {
            Spec::Netperf(c) => format!(
                "{} sockets × {} B send buffer, {} packets of {}",
                c.sockets,
                c.send_buffer,
                c.packets,
                if c.tso {
                    "up to 64 KiB (TSO)"
                } else {
                    "one MSS"
                }
            ),
            Spec::Apache(c) => format!(
                "{} requests over {} files (median {} KiB, at most {} KiB, Zipf {}, {} connections{})",
                c.requests,
                c.files,
                c.size_median / 1024,
                c.max_size / 1024,
                c.zipf_s,
                c.connections,
                if c.tso { ", TSO" } else { "" }
            ),
            Spec::Duplex(c) => {
                let tx = match c.tx {
                    DuplexTx::NetperfSend(t) => Spec::Netperf(t),
                    DuplexTx::ApacheSendfile(t) => Spec::Apache(t),
                };
                format!(
                    "{}: {}, beside a {}-buffer receive ring ({} B buffers, {} frames per poll{}), one frame received per {} B sent",
                    tx.name(),
                    tx.describe(),
                    c.rx.ring,
                    c.rx.buf_size,
                    c.rx.budget,
                    if c.rx.frame_len < c.rx.copybreak {
                        ", copybreak"
                    } else {
                        ""
                    },
                    c.tx_bytes_per_rx_frame
                )
            }
        }
    }

    /// The same workload with the driver mapping each packet as one scatter-gather list
    /// (the driver change batching needs, S1.6).
    pub(crate) fn with_sg(&self) -> Spec {
        self.with_sender(|m, _| *m = TxMapping::Sg)
    }

    /// The same workload with the driver taking its skb heads from a slab set aside for DMA
    /// (the driver change S1.11's "allocated for DMA" relaxation needs).
    pub(crate) fn with_heads_allocated_for_dma(&self) -> Spec {
        self.with_sender(|_, h| *h = true)
    }

    /// The same workload with its sender's mapping and head allocation changed by `f`.
    fn with_sender(&self, f: impl Fn(&mut TxMapping, &mut bool)) -> Spec {
        let netperf = |mut c: NetperfSendConfig| {
            f(&mut c.mapping, &mut c.heads_allocated_for_dma);
            c
        };
        let apache = |mut c: ApacheSendfileConfig| {
            f(&mut c.mapping, &mut c.heads_allocated_for_dma);
            c
        };
        match self {
            Spec::Netperf(c) => Spec::Netperf(netperf(*c)),
            Spec::Apache(c) => Spec::Apache(apache(*c)),
            Spec::Duplex(c) => {
                let tx = match c.tx {
                    DuplexTx::NetperfSend(t) => DuplexTx::NetperfSend(netperf(t)),
                    DuplexTx::ApacheSendfile(t) => DuplexTx::ApacheSendfile(apache(t)),
                };
                Spec::Duplex(NicDuplexConfig { tx, ..*c })
            }
        }
    }

    /// The statistics of this workload's stream `refs` (see [`streams`]).
    fn stream_stats(&self, stream: &str, refs: &[PageRef]) -> Result<StreamStats, Error> {
        with_spec!(self, w => streams::stats(stream, self.describe(), refs, &mut w))
    }

    pub(crate) fn refs(&self) -> Result<Vec<PageRef>, Error> {
        with_spec!(self, w => Ok(guest_page_refs(&mut w, CacheOnly::All)?))
    }

    pub(crate) fn run(
        &self,
        cfg: &GuestConfig,
        la: Option<Arc<Lookahead>>,
    ) -> Result<GuestResult, Error> {
        with_spec!(self, w => run_guest(&mut w, cfg, la).map_err(guest_error))
    }

    /// S1.8's formula: netperf `SendBuf × NumSendSockets`; Apache "the sum of the sizes of
    /// the files being served": each file's pages times the chance the run requests it at
    /// least once, `Σ_k (1 − (1 − p_k)^requests) × pages_k` over the Zipf law's `p_k` (the
    /// generator's own file sizes and popularity, not a count of the run). The sender beside
    /// its receive ring has no formula in S1.8: its measured count.
    fn formula_pages(&self, measured: u64) -> Result<u64, Error> {
        Ok(match self {
            Spec::Netperf(c) => working_set_pages(c.send_buffer, u64::from(c.sockets), 0, 0),
            Spec::Apache(c) => {
                let w = iommulab::workload::ApacheSendfile::new(*c)?;
                let zipf = iommulab::workload::zipf::Zipf::new(c.files as usize, c.zipf_s)
                    .map_err(|e| check_failed(format!("apache formula: {e}")))?;
                #[expect(clippy::cast_precision_loss, reason = "request and page counts")]
                let total: f64 = (0..c.files as usize)
                    .map(|k| {
                        let served = 1.0 - (1.0 - zipf.probability(k)).powf(c.requests as f64);
                        served * w.file_pages(k).len() as f64
                    })
                    .sum();
                #[expect(
                    clippy::cast_possible_truncation,
                    clippy::cast_sign_loss,
                    reason = "a page count"
                )]
                let pages = total.round() as u64;
                pages
            }
            Spec::Duplex(_) => measured,
        })
    }
}

impl cpu::CpuWorkload for Spec {
    fn label(&self) -> &str {
        self.name()
    }

    fn run_cpu(&self, cfg: &GuestConfig, m: cpu::DriverMapping) -> Result<GuestResult, Error> {
        // The curves' series are online policies: no lookahead. A generator knows its
        // packets: per packet, it maps each as one list itself.
        match m {
            cpu::DriverMapping::PerFragment => self.run(cfg, None),
            cpu::DriverMapping::PerPacket => self.with_sg().run(cfg, None),
            cpu::DriverMapping::Runs => {
                with_spec!(self, w => run_guest(&mut PacketSg::new(w), cfg, None).map_err(guest_error))
            }
        }
    }
}

/// `round(f × ws)`: the quota at fraction `f` of the working set.
#[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
pub fn round_quota(f: f64, ws: u64) -> u64 {
    (f * ws as f64).round() as u64
}

/// A failed self-check of this reproduction.
pub(crate) fn check_failed(what: String) -> Error {
    super::ReproError::Check {
        reproduction: Yassour2010::NAME,
        what,
    }
}

/// A workload's page-reference stream and what the steps need from it.
struct Prepared {
    spec: Spec,
    refs: Vec<PageRef>,
    ws: u64,
    pinned: u64,
}

impl Prepared {
    fn new(spec: Spec) -> Result<Self, Error> {
        let refs = spec.refs()?;
        let ws = mrc::distinct_pages(&refs) as u64;
        let pinned = mrc::max_pinned(&refs);
        Ok(Prepared {
            spec,
            refs,
            ws,
            pinned,
        })
    }

    /// Progress steps of [`workload`] with the CPU curves on `cpu`.
    fn steps(&self, cpu: &Prepared) -> u64 {
        let policies = iommulab::virt::EvictionConfig::all_default().len() as u64;
        policies
            + QUOTED.len() as u64
            + 1 // the batch caps
            + cpu::steps(cpu.pinned, cpu.ws)
            + protection::CASES.len() as u64
    }
}

/// The two workloads: netperf with 4 sockets (one socket's 18-page working set leaves
/// 10% = 2 pages and only 19 integer quotas), and Apache. Both send TSO segments: the
/// paper's NIC is the on-board e1000e on a 1 GbE link (S1.9), and e1000e turns TSO on at
/// probe and keeps it at 1000 Mb/s (Linux 2.6.26 `drivers/net/e1000e/netdev.c`), so a
/// packet is "a large buffer with multiple pages" (S1.6).
fn specs(quick: bool) -> (NetperfSendConfig, [Spec; 2]) {
    let netperf = NetperfSendConfig {
        packets: if quick { 2_000 } else { 200_000 },
        sockets: 4,
        tso: true,
        ..NetperfSendConfig::default()
    };
    let apache = ApacheSendfileConfig {
        requests: if quick { 400 } else { 20_000 },
        files: if quick { 200 } else { 1000 },
        tso: true,
        ..ApacheSendfileConfig::default()
    };
    (netperf, [Spec::Netperf(netperf), Spec::Apache(apache)])
}

/// The generators set up as the recordings were made (`scripts/capture-qemu.sh`): one
/// iperf3 stream with a 64 KiB socket buffer and TSO, 48 MiB (768 segments of 64 KiB); 400
/// requests over 100 files of 2–64 KiB (median 11.2 KiB, log σ 1.0: the capture's sizes),
/// page i asked with probability ∝ i^-1/2 (the capture's i = 100 u²: Zipf 0.5), one
/// connection at a time, TSO. Nothing here is fitted to a result.
fn as_recorded() -> [Spec; 2] {
    [
        Spec::Netperf(NetperfSendConfig {
            packets: 768,
            sockets: 1,
            send_buffer: 65_536,
            tso: true,
            ..NetperfSendConfig::default()
        }),
        Spec::Apache(ApacheSendfileConfig {
            requests: 400,
            files: 100,
            size_median: 11_513,
            size_sigma: 1.0,
            max_size: 65_536,
            zipf_s: 0.5,
            connections: 1,
            tso: true,
            ..ApacheSendfileConfig::default()
        }),
    ]
}

/// Figure 6's Apache: "the client is downloading various large files" (S1.9), where
/// Figure 4's served static wiki pages. The sizes are ours (the paper gives none): 16 files,
/// log-normal around 4 MiB (σ 0.5, at most 16 MiB), requested uniformly; TSO as in
/// [`specs`].
fn large_files(quick: bool) -> Spec {
    Spec::Apache(ApacheSendfileConfig {
        requests: if quick { 24 } else { 400 },
        files: 16,
        size_median: 4 << 20,
        size_sigma: 0.5,
        max_size: 16 << 20,
        zipf_s: 0.0,
        tso: true,
        ..ApacheSendfileConfig::default()
    })
}

/// Runs Figures 3–6 and the protection table on both workloads, and the one-socket
/// sensitivity check.
fn run(opts: &ReproOptions<'_>) -> Result<Yassour2010Results, Error> {
    let (netperf, specs) = specs(opts.quick);
    let prepared = specs
        .into_iter()
        .map(Prepared::new)
        .collect::<Result<Vec<_>, _>>()?;
    let large = Prepared::new(large_files(opts.quick))?;
    let recordings = recorded::RECORDINGS
        .iter()
        .map(|r| r.prepare())
        .collect::<Result<Vec<_>, _>>()?;
    // Figure 5 runs the netperf stream of Figure 3; Figure 6 the large-file downloads.
    let cpu_of = |p: &Prepared| -> bool { matches!(p.spec, Spec::Apache(_)) };
    let sens_spec = Spec::Netperf(NetperfSendConfig {
        sockets: 1,
        ..netperf
    });
    let tuned = as_recorded();
    // The nic-duplex generators tuned to each recording's statistics.
    let duplex = recordings
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let shape = r.shape()?;
            let (cfg, params) = tuned::config(i, &shape);
            Ok((r.name(), shape, params, Spec::Duplex(cfg)))
        })
        .collect::<Result<Vec<_>, Error>>()?;
    let total = prepared
        .iter()
        .map(|p| p.steps(if cpu_of(p) { &large } else { p }))
        .sum::<u64>()
        + (1 + tuned.len() as u64 + duplex.len() as u64)
            * iommulab::virt::EvictionConfig::all_default().len() as u64
        + recordings.iter().map(|r| r.steps()).sum::<u64>();
    let mut steps = Steps::new(opts, total);
    let mut workloads = Vec::new();
    for p in &prepared {
        let cpu_p = if cpu_of(p) { &large } else { p };
        workloads.push(workload(p, cpu_p, &mut steps)?);
    }
    let mut sensitivity = vec![hit_rate::sensitivity(&sens_spec, &mut steps)?];
    for t in &tuned {
        let mut s = hit_rate::sensitivity(t, &mut steps)?;
        s.workload = format!("{} (as recorded)", t.name());
        sensitivity.push(s);
    }
    let mut recorded = recordings
        .iter()
        .map(|r| r.run(&mut steps))
        .collect::<Result<Vec<_>, _>>()?;
    for (r, (rec, shape, params, spec)) in recorded.iter_mut().zip(&duplex) {
        let mut hit_rate = hit_rate::sensitivity(spec, &mut steps)?;
        let stream = format!("{} (tuned to {rec})", spec.name());
        hit_rate.workload.clone_from(&stream);
        r.tuned = Some(TunedResult {
            recording: (*rec).into(),
            stream,
            shape: *shape,
            params: params.clone(),
            hit_rate,
        });
    }
    let mut streams = Vec::new();
    for (((rec, gen_p), t), (d, tr)) in recordings
        .iter()
        .zip(&prepared)
        .zip(&tuned)
        .zip(duplex.iter().zip(&recorded))
    {
        streams.push(rec.stream_stats()?);
        streams.push(gen_p.spec.stream_stats(gen_p.spec.name(), &gen_p.refs)?);
        let name = format!("{} (as recorded)", t.name());
        streams.push(t.stream_stats(&name, &t.refs()?)?);
        if let Some(tr) = &tr.tuned {
            streams.push(d.3.stream_stats(&tr.stream, &d.3.refs()?)?);
        }
    }
    steps.finish()?;
    let mut results = Results {
        paper: PAPER,
        quick: opts.quick,
        cost: "kvm-2010",
        link_mbps: guest_base().link_mbps,
        cpus: guest_base().cpus,
        opt_batch_pages: iommulab::virt::OptBatchConfig::default().batch,
        cost_model: guest_base().cost,
        cpu_formula: CPU_FORMULA,
        workloads,
        sensitivity,
        recorded,
        streams,
        claims_by_stream: Vec::new(),
        price_sensitivity: Vec::new(),
        setup_facts: SetupFacts::of(&netperf),
    };
    results.claims_by_stream = claims::claims_by_stream(&results);
    results.price_sensitivity = sensitivity::sweep(&results)?;
    Ok(Yassour2010Results {
        claims: claims::claims(&results),
        results,
        paper: PAPER_FINDINGS.to_vec(),
    })
}

/// One workload's figures: hit rates and protection on `p`, the CPU curves on `cpu_p`.
fn workload(
    p: &Prepared,
    cpu_p: &Prepared,
    steps: &mut Steps<'_, '_>,
) -> Result<WorkloadResult, Error> {
    let name = p.spec.name();
    let seq = mrc::page_sequence(&p.refs);
    let policies = hit_rate::policies(name, &seq, &p.refs, p.ws, steps)?;
    let prefetch = hit_rate::prefetch(name, &seq, p.ws, steps)?;
    let batch_caps = hit_rate::batch_caps(name, &seq, p.ws, steps)?;
    let cpu = cpu::curves(&cpu_p.spec, cpu_p.ws, cpu_p.pinned, steps)?;
    let protection = protection::table(&p.spec, p.ws, p.pinned, steps)?;
    Ok(WorkloadResult {
        workload: name.into(),
        config: p.spec.describe(),
        page_maps: p
            .refs
            .iter()
            .filter(|r| matches!(r, PageRef::Map(_)))
            .count() as u64,
        working_set_pages: p.ws,
        working_set_formula_pages: p.spec.formula_pages(p.ws)?,
        max_pinned_pages: p.pinned,
        policies,
        prefetch,
        batch_caps,
        cpu,
        cpu_config: cpu_p.spec.describe(),
        cpu_working_set_pages: cpu_p.ws,
        cpu_max_pinned_pages: cpu_p.pinned,
        protection,
    })
}
