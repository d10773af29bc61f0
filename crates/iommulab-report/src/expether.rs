//! The ExpEther report (Suzuki et al. 2010): `results.json`, `runs.csv`, `sweep.csv`,
//! Figures 9 and 11, the receive bandwidth over N and the QoS demonstration (SVG and PNG),
//! and the markdown page beside the published numbers.

use crate::page::data_and_figures;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use iommulab::pcie::bridge::frame::wire_bytes;
use iommulab::pcie::timing::Direction;
use iommulab_repro::expether::{ExpEtherResults, Run};

use crate::ReportError;
use crate::files::{write_atomic, write_json};
use crate::plot::{BarGroup, LineSeries, bar_chart, line_chart};
use crate::table::{Cell, Table};

/// The figures, by file stem.
pub(crate) const FIGURES: [&str; 4] =
    ["figure9", "figure11", "receive_vs_outstanding_reads", "qos"];

fn dir_name(d: Direction) -> &'static str {
    match d {
        Direction::Send => "send",
        Direction::Receive => "receive",
        Direction::InterHost => "inter_host",
    }
}

fn find<'a>(
    r: &'a ExpEtherResults,
    figure: &str,
    d: Direction,
    hosts: u32,
    qos: bool,
) -> Option<&'a Run> {
    r.runs
        .iter()
        .find(|x| x.figure == figure && x.direction == d && x.hosts == hosts && x.qos == qos)
}

/// The page of [`iommulab_repro::expether`].
#[derive(Debug)]
pub(crate) struct ExpEtherPage;

impl crate::page::Page for ExpEtherPage {
    type Paper = iommulab_repro::expether::ExpEther;

    fn render(dir: &Path, r: &ExpEtherResults) -> Result<PathBuf, ReportError> {
        render(dir, r)
    }

    fn tables(r: &ExpEtherResults) -> Vec<Table> {
        tables(r)
    }

    fn files() -> Vec<String> {
        data_and_figures(&["results.json", "runs.csv", "sweep.csv"], FIGURES)
    }
}

/// Writes `dir` (`OUT/expether`); returns the markdown page's path.
pub(crate) fn render(dir: &Path, r: &ExpEtherResults) -> Result<PathBuf, ReportError> {
    write_json(&dir.join("results.json"), r)?;
    for t in tables(r) {
        if let Some(file) = t.file {
            write_atomic(&dir.join(file), t.to_csv().as_bytes())?;
        }
    }
    let mut fig9 = Vec::new();
    for (d, paper) in [
        (Direction::Send, r.paper.send_gbps),
        (Direction::Receive, r.paper.receive_gbps),
    ] {
        for h in 1..=3u32 {
            if let Some(x) = find(r, "9", d, h, false) {
                fig9.push(BarGroup {
                    label: format!("{} {h}", dir_name(d)),
                    ours: x.gbps,
                    ours_err: 0.0,
                    paper: Some(paper[h as usize - 1]),
                });
            }
        }
    }
    bar_chart(
        dir,
        FIGURES[0],
        "Figure 9: aggregate bandwidth, NIC shared by 1-3 hosts (ours vs paper)",
        "Gb/s",
        &fig9,
    )?;
    let fig11: Vec<BarGroup> = r
        .runs
        .iter()
        .filter(|x| x.figure == "11" && !x.qos)
        .flat_map(|x| {
            x.per_host_gbps
                .iter()
                .enumerate()
                .skip(1)
                .map(move |(i, g)| BarGroup {
                    label: format!("SV1→SV{} ({} hosts)", i + 1, x.hosts),
                    ours: *g,
                    ours_err: 0.0,
                    paper: None,
                })
        })
        .collect();
    bar_chart(
        dir,
        FIGURES[1],
        "Figure 11: inter-server bandwidth through the NIC's internal switch (ours)",
        "Gb/s",
        &fig11,
    )?;
    line_chart(
        dir,
        FIGURES[2],
        "Receive, 3 hosts: bandwidth over N outstanding DMA reads",
        "N (outstanding reads)",
        "Gb/s",
        &[
            LineSeries {
                label: "simulated".into(),
                points: r
                    .sweep
                    .iter()
                    .map(|s| (f64::from(s.outstanding_reads), s.gbps))
                    .collect(),
            },
            LineSeries {
                label: "N x read / round trip".into(),
                points: r
                    .sweep
                    .iter()
                    .filter(|s| s.limit_gbps <= 12.0)
                    .map(|s| (f64::from(s.outstanding_reads), s.limit_gbps))
                    .collect(),
            },
        ],
    )?;
    let mut qos = Vec::new();
    for x in r.runs.iter().filter(|x| x.figure == "qos-demo") {
        for (i, g) in x.per_host_gbps.iter().enumerate() {
            qos.push(BarGroup {
                // Short labels: twelve bars share the axis.
                label: format!(
                    "{} {}{}",
                    if x.direction == Direction::Send {
                        "snd"
                    } else {
                        "rcv"
                    },
                    i + 1,
                    if x.qos { " Q" } else { "" }
                ),
                ours: *g,
                ours_err: 0.0,
                paper: None,
            });
        }
    }
    bar_chart(
        dir,
        FIGURES[3],
        "Per-VF QoS (Q): host 1 runs 2 streams, hosts 2-3 one each; snd/rcv = send/receive",
        "Gb/s",
        &qos,
    )?;
    let page = dir.join("README.md");
    write_atomic(&page, page_text(r).as_bytes())?;
    Ok(page)
}

/// `runs` (`runs.csv`): every run; `sweep` (`sweep.csv`): receive over N.
pub(crate) fn tables(r: &ExpEtherResults) -> Vec<Table> {
    let mut runs = Table::new(
        "runs",
        Some("runs.csv"),
        &[
            "figure",
            "direction",
            "hosts",
            "streams",
            "qos",
            "gbps",
            "per_host_gbps",
            "mean_read_rtt_ns",
            "duration_s",
        ],
    );
    for x in &r.runs {
        let join = |v: &[String]| v.join(";");
        runs.push(vec![
            x.figure.into(),
            dir_name(x.direction).into(),
            u64::from(x.hosts).into(),
            (&join(&x.streams.iter().map(u32::to_string).collect::<Vec<_>>())).into(),
            (if x.qos { "true" } else { "false" }).into(),
            Cell::float(x.gbps, 3),
            (&join(
                &x.per_host_gbps
                    .iter()
                    .map(|g| format!("{g:.3}"))
                    .collect::<Vec<_>>(),
            ))
                .into(),
            Cell::float(x.mean_read_rtt_ns, 0),
            Cell::float(x.duration_s, 2),
        ]);
    }
    let mut sweep = Table::new(
        "sweep",
        Some("sweep.csv"),
        &[
            "outstanding_reads",
            "gbps",
            "limit_gbps",
            "mean_read_rtt_ns",
        ],
    );
    for s in &r.sweep {
        sweep.push(vec![
            u64::from(s.outstanding_reads).into(),
            Cell::float(s.gbps, 3),
            Cell::float(s.limit_gbps, 3),
            Cell::float(s.mean_read_rtt_ns, 0),
        ]);
    }
    vec![runs, sweep]
}

/// The hosts' cores: one at each end of every stream, and what each sustains.
fn host_section(s: &mut String, r: &ExpEtherResults) {
    let h = &r.host_limits;
    let _ = writeln!(
        s,
        "\n## The hosts: one core at each end of a stream\n\n\
Each iperf stream is processed by one core at each end (CentOS 5.4's 2.6.18 kernel has no multiqueue \
networking): the sender makes a packet per its cost and as the TCP window allows, the receiver consumes it per \
its cost, and iperf counts it then. A packet costs cycles (interrupt, driver, IP and TCP, ACKs, system call), \
scaled by the machine's clock from Table I, and nanoseconds per byte for the copy between the socket and \
iperf's buffer, bound by the Core 2's front-side bus and memory rather than its clock. Alone, each end sustains \
(`results.json`'s `host_limits`):\n\n\
| direction | machine | end | GHz | ns per packet | one stream, Gb/s |\n|---|---|---|---|---|---|"
    );
    for c in &h.cores {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {:.2} | {:.0} | {:.2} |",
            dir_name(c.direction),
            c.machine,
            c.end,
            c.ghz,
            c.ns_per_packet,
            c.gbps
        );
    }
    let _ = writeln!(
        s,
        "\nWith all four host prices at the cheap ends of their ranges at once, 1-host send is {:.2} Gb/s and receive \
{:.2}; at the dear ends, {:.2} and {:.2}.",
        h.send_1_host_over_ranges.0,
        h.receive_1_host_over_ranges.0,
        h.send_1_host_over_ranges.1,
        h.receive_1_host_over_ranges.1
    );
}

fn page_text(r: &ExpEtherResults) -> String {
    let cmd = if r.quick {
        "iommulab reproduce expether --quick"
    } else {
        "iommulab reproduce expether"
    };
    let p = &r.params;
    let l = &r.read_limit;
    let secs = r
        .runs
        .iter()
        .find(|x| x.direction == Direction::Receive)
        .map_or(0.0, |x| x.duration_s);
    let send1 = find(r, "9", Direction::Send, 1, false).map_or(0.0, |x| x.gbps);
    // The slowest end of a stream in each direction (the hosts' cores).
    let slowest = |d: Direction| {
        r.host_limits
            .cores
            .iter()
            .filter(|c| c.direction == d)
            .min_by(|a, b| a.gbps.total_cmp(&b.gbps))
            .map_or(("?", "?", f64::NAN), |c| (c.machine, c.end, c.gbps))
    };
    let (slow_send, slow_recv) = (slowest(Direction::Send), slowest(Direction::Receive));
    // What the paths carry of MWr data: Max_Payload_Size per frame.
    let mps = p.max_payload_bytes as usize;
    let write_ceiling = p.eth_gbps * f64::from(p.paths) * mps as f64 / wire_bytes(12 + mps) as f64;
    // Whether the receive values N's range reaches hold the paper's (then N = 8's level
    // tells nothing about the model).
    let (_, _, lo, hi) = r.receive_over_n_range;
    let spans = r.paper.receive_gbps.iter().all(|g| (lo..=hi).contains(g));
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# Suzuki et al. 2010: an SR-IOV NIC shared by hosts over ExpEther (Figures 9 and 11)\n\n\
Regenerate with `{cmd}`. A 10 GbE SR-IOV NIC behind an ExpEther I/O-side bridge, each VF given to a different \
host (S4.1–S4.3), measured as the paper's iperf runs: MTU {}, {} s modeled per run after a tenth of it to \
fill the pipeline (the paper: 60 s; the model is in steady state within microseconds), 1–3 hosts. The numbers \
come from timing attached to the functional model (`iommulab_pcie::timing::tlp_path`): every DMA the NIC \
makes is a TLP its VF issues, which the I/O-side bridge gives the requester id of the host's virtual \
endpoint, an 802.1Q frame on the host's VLAN through the Ethernet switch, and a translation by the host's own \
IOMMU; a read's completions come back as TLPs the bridge routes to the VF. Each host enumerated its virtual \
endpoint through its virtual switch and mapped its buffers first. The event loop of `iommulab_pcie::timing` \
(S4.4) puts the bytes those TLPs and frames were encoded in on FIFO links: the NIC's DMA writes (send: the \
client sends to the hosts) and DMA reads with at most N outstanding (receive: the hosts send to the client; \
inter-host: server 1 sends to servers 2 and 3 through the NIC's internal switch), each TLP in its own Ethernet \
frame over {} × {} GbE paths, PCIe Gen1 x8 ({} Gb/s) between the NIC and the bridge.\n\n\
**Parameters.** Given by the paper: 10 GbE, two paths, MTU 9000, PCIe Gen1 x8, 60 s, and Table I's clocks \
(servers 1 and 2 a Core 2 Quad at 2.83 GHz, server 3 a Core 2 Duo at 3.16 GHz, the client a Core 2 at \
2.66 GHz). **Estimates** (not in the paper, not fitted to it; ranges and their basis in \
`crates/iommulab-pcie/src/timing/mod.rs`): N = {} outstanding reads (4–16), Max_Read_Request_Size {} B \
(128–4096), Max_Payload_Size {} B (128–256), {} B per read completion (64–128), {} ns per bridge pass \
(300–1000), {} ns per switch hop (200–1500), {} ns host memory read (300–700), {} packets of NIC buffer, {} B of \
IP+TCP headers per packet; a TCP receiver's {} cycles per packet (5000–20000) and {} ns per byte copied \
(0.18–0.40), a sender's {} cycles per packet (2500–10000) and {} ns per byte (0.08–0.25), a window of {} KiB \
(64–3072).\n",
        p.mtu,
        secs,
        p.paths,
        p.eth_gbps,
        p.pcie_gbps,
        p.outstanding_reads,
        p.max_read_request_bytes,
        p.max_payload_bytes,
        p.completion_bytes,
        p.bridge_ns,
        p.switch_ns,
        p.host_memory_ns,
        p.nic_buffer_packets,
        p.tcpip_header_bytes,
        p.rx_cycles_per_packet,
        p.rx_ns_per_byte,
        p.tx_cycles_per_packet,
        p.tx_ns_per_byte,
        p.tcp_window_bytes / 1024,
    );
    // A QoS column only when QoS changes a run: with equal demand it cannot.
    let qos_col = r.qos_changes_figures;
    let _ = writeln!(
        s,
        "## Figure 9, ours beside the paper\n\n![Figure 9](figure9.svg)\n\n| direction | hosts | ours, Gb/s | per host |{} the paper |\n|---|---|---|---|{}---|",
        if qos_col { " with per-VF QoS |" } else { "" },
        if qos_col { "---|" } else { "" }
    );
    for (d, paper) in [
        (Direction::Send, r.paper.send_gbps),
        (Direction::Receive, r.paper.receive_gbps),
    ] {
        for h in 1..=3u32 {
            let (Some(x), Some(q)) = (find(r, "9", d, h, false), find(r, "9", d, h, true)) else {
                continue;
            };
            let per: Vec<String> = x.per_host_gbps.iter().map(|g| format!("{g:.2}")).collect();
            let qos = if qos_col {
                format!(" {:.2} |", q.gbps)
            } else {
                String::new()
            };
            let _ = writeln!(
                s,
                "| {} | {h} | {:.2} | {} |{qos} {:.1} |",
                dir_name(d),
                x.gbps,
                per.join(" / "),
                paper[h as usize - 1]
            );
        }
    }
    if !qos_col {
        let _ = writeln!(
            s,
            "\nWith per-VF QoS every run of Figures 9 and 11 gives the same numbers as without (within 0.005 Gb/s; \
`runs.csv`, `qos` = true): each host runs one equally greedy stream, so first come, first served already gives \
equal shares. The QoS section below shows what QoS does with unequal demand."
        );
    }
    // Send is wire-bound, so its efficiency is the header overhead at this MTU.
    let by_construction = (r.efficiency - r.header_efficiency).abs() < 0.001;
    let _ = writeln!(
        s,
        "\nSharing efficiency, best aggregate over the NIC's 10 Gb/s: ours {:.1}%, the paper {:.0}%.{}\n",
        100.0 * r.efficiency,
        100.0 * r.paper.efficiency,
        if by_construction {
            format!(
                " The agreement holds by construction and is no evidence for the model: send is bound by the wire, \
and at MTU {} the TCP/IP and Ethernet headers leave ({} − {}) / {} = {:.1}% of the line rate as goodput, whatever \
the rest of the model does.",
                p.mtu,
                p.mtu,
                p.tcpip_header_bytes,
                p.wire_bytes_per_packet(),
                100.0 * r.header_efficiency
            )
        } else {
            String::new()
        }
    );
    let _ = writeln!(
        s,
        "## The receive limit: N reads per round trip\n\n\
In the receive direction the NIC reads each packet from host memory in {} reads of {} B and keeps at most N = {} \
outstanding; each waits a round trip over the Ethernet. The model's unloaded round trip is {:.0} ns ({} bridge \
passes at {:.0} ns, {} switch hops, one each way, at {:.0} ns, and the {:.0} ns memory read: {:.0} ns; the other \
{:.0} ns serialize the request and the completion train on the links), so the NIC can fetch \
N / RTT = {:.2} M reads/s, which is **{:.2} Gb/s** of iperf goodput; the simulation gives {:.2} Gb/s. The external \
wire would allow {:.2} Gb/s. With **{} outstanding reads** the limit is gone; receive then stops at {:.2} Gb/s, where \
{}-byte completions, each in its own Ethernet frame ({} wire bytes for {} of data), fill both paths.\n\n\
![receive over N](receive_vs_outstanding_reads.svg)\n\n| N | simulated, Gb/s | N × read / RTT, Gb/s | mean read RTT, ns |\n|---|---|---|---|",
        l.reads_per_packet,
        l.read_bytes,
        l.outstanding_reads,
        l.unloaded_rtt_ns,
        l.bridge_passes,
        p.bridge_ns,
        l.switch_hops,
        p.switch_ns,
        p.host_memory_ns,
        l.fixed_latency_ns,
        l.serialization_ns,
        f64::from(l.outstanding_reads) / l.unloaded_rtt_ns * 1e3,
        l.limit_gbps,
        l.simulated_gbps,
        l.line_goodput_gbps,
        l.reads_to_remove_limit,
        l.completion_ceiling_gbps,
        p.completion_bytes,
        wire_bytes(12 + p.completion_bytes as usize),
        p.completion_bytes
    );
    for x in &r.sweep {
        let _ = writeln!(
            s,
            "| {} | {:.2} | {:.2} | {:.0} |",
            x.outstanding_reads, x.gbps, x.limit_gbps, x.mean_read_rtt_ns
        );
    }
    host_section(&mut s, r);
    let _ = writeln!(
        s,
        "\n## Sensitivity: every estimate at both ends of its range\n\n\
One host, each estimate set to the low and then the high end of its range, the others at their defaults \
(`results.json`'s `sensitivity`). Send moves with what changes goodput per wire byte and with the hosts' \
prices once a core is slower than the wire; receive moves with everything that sets a read's round trip or its \
size.\n\n\
| estimate | default | range | receive, Gb/s (low / high) | send, Gb/s (low / high) |\n|---|---|---|---|---|"
    );
    for x in &r.sensitivity {
        let _ = writeln!(
            s,
            "| `{}` | {} | {}–{} | {:.2} / {:.2} | {:.2} / {:.2} |",
            x.parameter,
            x.value,
            x.range.0,
            x.range.1,
            x.receive_gbps.0,
            x.receive_gbps.1,
            x.send_gbps.0,
            x.send_gbps.1
        );
    }
    let reach = |paper: f64, pick: fn(&iommulab_repro::expether::Sensitivity) -> (f64, f64)| {
        let v: Vec<String> = r
            .sensitivity
            .iter()
            .filter(|x| {
                let (a, b) = pick(x);
                (a.min(b)..=a.max(b)).contains(&paper)
            })
            .map(|x| format!("`{}`", x.parameter))
            .collect();
        if v.is_empty() {
            "no single estimate".to_string()
        } else {
            v.join(", ")
        }
    };
    let _ = writeln!(
        s,
        "\nThe paper's 1-host send, {:.1} Gb/s, lies within the span of {}; its 1-host receive, {:.1} Gb/s, within \
the span of {}.",
        r.paper.send_gbps[0],
        reach(r.paper.send_gbps[0], |x| x.send_gbps),
        r.paper.receive_gbps[0],
        reach(r.paper.receive_gbps[0], |x| x.receive_gbps),
    );
    let _ = writeln!(
        s,
        "\n## Figure 11: inter-server traffic\n\n![Figure 11](figure11.svg)\n\n| hosts | server 1 → | ours, Gb/s | per receiving server |{}\n|---|---|---|---|{}",
        if qos_col { " with QoS |" } else { "" },
        if qos_col { "---|" } else { "" }
    );
    for h in 2..=3u32 {
        let (Some(x), Some(q)) = (
            find(r, "11", Direction::InterHost, h, false),
            find(r, "11", Direction::InterHost, h, true),
        ) else {
            continue;
        };
        let per: Vec<String> = x
            .per_host_gbps
            .iter()
            .skip(1)
            .map(|g| format!("{g:.2}"))
            .collect();
        let to = if h == 2 {
            "server 2"
        } else {
            "servers 2 and 3"
        };
        let qos = if qos_col {
            format!(" {:.2} |", q.gbps)
        } else {
            String::new()
        };
        let _ = writeln!(
            s,
            "| {h} | {to} | {:.2} | {} |{qos}",
            x.gbps,
            per.join(" / ")
        );
    }
    let _ = writeln!(
        s,
        "\nThe paper gives Figure 11 no numbers in its text, only its cause: the receive case's read limit. In the model \
server 1's packets are fetched with the same N reads, and the reads also queue behind the posted writes into \
servers 2 and 3 on the same PCIe link and paths (a read may not pass a posted write), so the round trip grows \
and inter-server traffic comes out below receive.\n\n\
## Per-VF QoS\n\n![QoS](qos.svg)\n\n| direction | QoS | per host, Gb/s (host 1 runs 2 streams) |\n|---|---|---|"
    );
    for x in r.runs.iter().filter(|x| x.figure == "qos-demo") {
        let per: Vec<String> = x.per_host_gbps.iter().map(|g| format!("{g:.2}")).collect();
        let _ = writeln!(
            s,
            "| {} | {} | {} |",
            dir_name(x.direction),
            if x.qos {
                "per-VF"
            } else {
                "none (first come, first served)"
            },
            per.join(" / ")
        );
    }
    let _ = writeln!(
        s,
        "\nWithout QoS the NIC serves traffic as it comes, so a host's share follows its demand; with per-VF QoS each VF \
gets one share. In the paper's runs every host ran one equally greedy stream, and the model then gives equal \
shares with or without QoS.\n\n{}\n\
## Differences, from the mechanisms\n\n\
- **Send, 1 host: ours {:.2}, the paper 8.9 Gb/s.** Nothing in the modeled path (NIC, PCIe, bridges, two paths) \
limits one host below the wire: posted writes need no round trip, and {}-byte writes, each in its own frame, \
can cross the two paths at {:.1} Gb/s. What can is the one stream's cores (the hosts section above): at the \
estimates the slowest, {}'s {}, sustains {:.2} Gb/s; with the host prices at the dear ends of their ranges \
1-host send is {:.2} Gb/s, so the prices' ranges {} the paper's 8.9. The paper does not say why one server got \
8.9, and the model does not choose the prices that would give it. With 2 and 3 hosts each stream needs only its \
share of the wire, and the wire is the limit, as in the paper (9.9).\n\
- **Receive: ours about {:.1} Gb/s for 1, 2 and 3 hosts at N = {}; the paper 7.7, 6.1, 6.0.** The level comes \
from N × read / round trip with estimated N, read size and latencies; it is not fitted. Over N's estimated range \
({}–{}) the model's receive spans {:.2}–{:.2} Gb/s (the sweep above), which {} the paper's three values, so the \
level at N = {} {}. The model has one NIC-wide limit of N reads, so more hosts share it without lowering the \
total; the paper's drop from one host to two is not explained in the paper, and this model has no mechanism \
for it. The hosts' cores do not give one: each stream has its own core at each end, and the slowest end in \
receive, {}'s {}, sustains {:.2} Gb/s, above the read limit even for one stream. Candidates the model \
does not have, because no source found says how the X3100 does them: whether N is per device or per VF, TCP \
interactions among the senders, the bridges' load balancing over the two paths. Descriptor fetches are not \
one: the vxge driver posts each packet's descriptor list by a doorbell naming its host address, so the NIC \
reads one list per packet before the data, whatever the number of hosts; if those reads took slots of the N \
they would lower receive by the same fraction for 1, 2 and 3 hosts, not make it fall from one host to two.\n\
- **Unequal shares in the 3-host send case** (the paper, without QoS): the model gives each server its own core \
at Table I's clock, so the servers differ, but in the 3-host send case each stream needs a third of the wire \
and every server's receiving core sustains far more (the hosts section), so a NIC serving traffic as it comes \
still splits it evenly. A stream held below its share would need a slower host than these prices give, or TCP \
dynamics (loss, window growth) the model does not have. The QoS demonstration above shows the mechanism with \
unequal demand.\n\
- **Not modeled**: TCP's congestion control and its ACK traffic through the NIC (the window is a fixed cap, \
large enough never to bind at the estimates); interrupt and core placement beyond one core per stream end; the \
NIC's descriptor traffic (the X3100's Linux driver, vxge, \
posts each packet's descriptor list with a doorbell naming its host address, so the NIC reads it before the \
data; the paper does not describe the NIC's descriptor prefetching, and the model does not guess it); the NIC's internal switch rate (taken as 10 Gb/s, an estimate); ExpEther's own \
congestion control at these loads (the paths are never overloaded, so the lossless transport of \
`iommulab_pcie::bridge::transport` never backs off).",
        crate::claims::section(&r.claims),
        send1,
        p.max_payload_bytes,
        write_ceiling,
        slow_send.0,
        slow_send.1,
        slow_send.2,
        r.host_limits.send_1_host_over_ranges.1,
        if (r.host_limits.send_1_host_over_ranges.1..=r.host_limits.send_1_host_over_ranges.0)
            .contains(&r.paper.send_gbps[0])
        {
            "span"
        } else {
            "do not reach"
        },
        l.simulated_gbps,
        l.outstanding_reads,
        r.receive_over_n_range.0,
        r.receive_over_n_range.1,
        r.receive_over_n_range.2,
        r.receive_over_n_range.3,
        if spans {
            "contains all of"
        } else {
            "does not contain all of"
        },
        l.outstanding_reads,
        if spans {
            "constrains nothing: the paper's values lie inside what N's range gives"
        } else {
            "is compared with values the range does not reach"
        },
        slow_recv.0,
        slow_recv.1,
        slow_recv.2,
    );
    s
}
