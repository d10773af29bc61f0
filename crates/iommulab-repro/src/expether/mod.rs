//! Suzuki et al., "Multi-Root Share of Single-Root I/O Virtualization (SR-IOV) Compliant PCI
//! Express Device" (2010), Figures 9 and 11 (S4.1–S4.4): a 10 GbE SR-IOV NIC, each VF given
//! to a different host through ExpEther bridges, measured with iperf at MTU 9000 for 60 s.
//!
//! **What runs.** The discrete-event model of [`iommulab::pcie::timing`]: the NIC's DMA writes
//! (send: the client sends to the hosts) and DMA reads with at most N outstanding (receive:
//! the hosts send to the client; inter-host: host 1 sends to hosts 2 and 3 through the NIC's
//! internal switch), every TLP in its own Ethernet frame over the two 10 GbE paths, with and
//! without per-VF QoS. The receive limit comes out of the mechanism S4.4 names, N reads of
//! Max_Read_Request_Size per Ethernet round trip; the sweep over N shows how many
//! outstanding reads remove it and what limits receive then.
//!
//! **Parameters.** Those the paper gives (10 GbE, two paths, MTU 9000, PCIe Gen1 x8 at the
//! bridge, 60 s) are used as given; the others (N, read and payload sizes, bridge, switch and
//! memory latencies, buffers) are estimates with their ranges in
//! [`iommulab::pcie::timing::ExpEtherParams`], chosen from what such hardware
//! does and never fitted to the figures. Each stream has a core at each end
//! ([`iommulab::pcie::timing::host_stack`]: Table I's clocks, estimated prices per packet and per
//! byte, a TCP window). What the model does not have (TCP's congestion control, descriptor
//! fetches, ACK traffic) is said on the page.

pub mod claims;

use crate::claims::Claim;

use serde::Serialize;

use super::{ReproOptions, Steps};
use crate::ReproError as Error;
use crate::ReproError;
use iommulab::pcie::timing::{
    self, Direction, ExpEtherParams, Scenario, completion_ceiling_gbps, read_limit_gbps,
    reads_to_remove_limit, simulate,
};

/// The line of the reproductions' index.
pub const TITLE: &str = "Suzuki et al. 2010, Multi-Root Share of an SR-IOV PCIe Device over ExpEther (Figures 9 and 11: send, receive and inter-host bandwidth of a 10 GbE NIC shared by 1-3 hosts)";

/// Suzuki et al., "Multi-Root Share of Single-Root I/O Virtualization (SR-IOV) Compliant
/// PCI Express Device" (2010): Figures 9 and 11.
#[derive(Clone, Copy, Debug)]
pub struct ExpEther;

impl crate::Paper for ExpEther {
    type Results = ExpEtherResults;
    const NAME: &'static str = "expether";
    const TITLE: &'static str = TITLE;

    fn run(opts: &ReproOptions<'_>) -> Result<ExpEtherResults, Error> {
        run(opts)
    }

    fn claims(r: &ExpEtherResults) -> &[Claim] {
        &r.claims
    }

    fn quick(r: &ExpEtherResults) -> bool {
        r.quick
    }
}

/// What the paper published (S4.4).
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Paper {
    /// Figure 9, send (client → hosts), aggregate Gb/s for 1, 2, 3 hosts.
    pub send_gbps: [f64; 3],
    /// Figure 9, receive (hosts → client), aggregate Gb/s for 1, 2, 3 hosts.
    pub receive_gbps: [f64; 3],
    /// Sharing efficiency at best (9.9 of 10 Gb/s).
    pub efficiency: f64,
    /// Seconds per measurement.
    pub duration_s: f64,
    /// MTU.
    pub mtu: u32,
}

/// S4.4's numbers. Figure 11 (inter-host) has no numbers in the text, only its cause: the
/// same read limit as receive.
pub const PAPER: Paper = Paper {
    send_gbps: [8.9, 9.9, 9.9],
    receive_gbps: [7.7, 6.1, 6.0],
    efficiency: 0.99,
    duration_s: 60.0,
    mtu: 9000,
};

/// One run (a row of `runs`).
#[derive(Clone, Debug, Serialize)]
pub struct Run {
    /// Figure: `9` (send, receive) or `11` (inter-host); `qos-demo` for the unequal-demand
    /// runs that show what per-VF QoS does.
    pub figure: &'static str,
    /// `send`, `receive` or `inter_host`.
    pub direction: Direction,
    /// Hosts sharing the NIC (for inter-host: host 1 and the hosts it sends to).
    pub hosts: u32,
    /// Streams per host (equal in the paper's runs).
    pub streams: Vec<u32>,
    /// Per-VF QoS in the NIC.
    pub qos: bool,
    /// Aggregate iperf goodput, Gb/s.
    pub gbps: f64,
    /// Per host, Gb/s.
    pub per_host_gbps: Vec<f64>,
    /// Mean DMA read round trip, ns (0 for send).
    pub mean_read_rtt_ns: f64,
    /// Modeled seconds.
    pub duration_s: f64,
    /// Events the simulation processed.
    pub events: u64,
}

/// The receive limit explained.
#[derive(Clone, Debug, Serialize)]
pub struct ReadLimit {
    /// N, the outstanding reads of the default parameters.
    pub outstanding_reads: u32,
    /// Bytes per read (Max_Read_Request_Size).
    pub read_bytes: u32,
    /// Reads per packet.
    pub reads_per_packet: u32,
    /// A read's round trip in an idle system, ns (from the simulation).
    pub unloaded_rtt_ns: f64,
    /// Bridge passes on it (the simulator's path).
    pub bridge_passes: u32,
    /// Switch hops on it (one each way).
    pub switch_hops: u32,
    /// Its fixed latencies: bridge passes, switch hops and the memory read, ns.
    pub fixed_latency_ns: f64,
    /// The rest of it: serialization of the request and the completion train, ns.
    pub serialization_ns: f64,
    /// `N / RTT` reads a second as iperf goodput, Gb/s.
    pub limit_gbps: f64,
    /// The receive goodput the simulation gave (1 host).
    pub simulated_gbps: f64,
    /// The external wire's ceiling on goodput.
    pub line_goodput_gbps: f64,
    /// The ceiling of per-TLP Ethernet frames for 64-byte completions on both paths.
    pub completion_ceiling_gbps: f64,
    /// The fewest outstanding reads that remove the limit.
    pub reads_to_remove_limit: u32,
}

/// One point of the sweep over N (receive, 3 hosts).
#[derive(Clone, Debug, Serialize)]
pub struct SweepPoint {
    /// N.
    pub outstanding_reads: u32,
    /// Simulated aggregate goodput, Gb/s.
    pub gbps: f64,
    /// `N / RTT` from the unloaded round trip, Gb/s.
    pub limit_gbps: f64,
    /// Mean read round trip, ns (it grows once the links, not N, limit).
    pub mean_read_rtt_ns: f64,
}

/// One estimate at the ends of its range: what the 1-host send and receive runs give.
#[derive(Clone, Debug, Serialize)]
pub struct Sensitivity {
    /// The parameter's name in [`ExpEtherParams`].
    pub parameter: &'static str,
    /// Its default value.
    pub value: f64,
    /// The low and high ends of its estimated range.
    pub range: (f64, f64),
    /// Receive, 1 host, at the low and the high end, Gb/s.
    pub receive_gbps: (f64, f64),
    /// Send, 1 host, at the low and the high end, Gb/s.
    pub send_gbps: (f64, f64),
}

type Setter = fn(&mut ExpEtherParams, f64);

/// Every estimate of [`ExpEtherParams`] with its range (the ranges its documentation
/// gives; headers: 40 without the TCP timestamp option, 52 with it).
// Values are whole numbers within u32 (the ranges below).
#[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
pub const ESTIMATES: [(&str, f64, f64, Setter); 14] = [
    ("outstanding_reads", 4.0, 16.0, |p, v| {
        p.outstanding_reads = v as u32
    }),
    ("max_read_request_bytes", 128.0, 4096.0, |p, v| {
        p.max_read_request_bytes = v as u32;
    }),
    ("max_payload_bytes", 128.0, 256.0, |p, v| {
        p.max_payload_bytes = v as u32
    }),
    ("completion_bytes", 64.0, 128.0, |p, v| {
        p.completion_bytes = v as u32
    }),
    ("bridge_ns", 300.0, 1000.0, |p, v| p.bridge_ns = v),
    ("switch_ns", 200.0, 1500.0, |p, v| p.switch_ns = v),
    ("host_memory_ns", 300.0, 700.0, |p, v| p.host_memory_ns = v),
    ("nic_buffer_packets", 2.0, 16.0, |p, v| {
        p.nic_buffer_packets = v as u32
    }),
    ("tcpip_header_bytes", 40.0, 52.0, |p, v| {
        p.tcpip_header_bytes = v as u32
    }),
    ("rx_cycles_per_packet", 5_000.0, 20_000.0, |p, v| {
        p.rx_cycles_per_packet = v
    }),
    ("rx_ns_per_byte", 0.18, 0.40, |p, v| p.rx_ns_per_byte = v),
    ("tx_cycles_per_packet", 2_500.0, 10_000.0, |p, v| {
        p.tx_cycles_per_packet = v
    }),
    ("tx_ns_per_byte", 0.08, 0.25, |p, v| p.tx_ns_per_byte = v),
    ("tcp_window_bytes", 65_536.0, 3_145_728.0, |p, v| {
        p.tcp_window_bytes = v as u32
    }),
];

/// The host prices of [`ESTIMATES`] (the cores at a stream's ends).
pub const HOST_PRICES: [&str; 4] = [
    "rx_cycles_per_packet",
    "rx_ns_per_byte",
    "tx_cycles_per_packet",
    "tx_ns_per_byte",
];

fn current(p: &ExpEtherParams, name: &str) -> f64 {
    match name {
        "outstanding_reads" => f64::from(p.outstanding_reads),
        "max_read_request_bytes" => f64::from(p.max_read_request_bytes),
        "max_payload_bytes" => f64::from(p.max_payload_bytes),
        "completion_bytes" => f64::from(p.completion_bytes),
        "bridge_ns" => p.bridge_ns,
        "switch_ns" => p.switch_ns,
        "host_memory_ns" => p.host_memory_ns,
        "nic_buffer_packets" => f64::from(p.nic_buffer_packets),
        "rx_cycles_per_packet" => p.rx_cycles_per_packet,
        "rx_ns_per_byte" => p.rx_ns_per_byte,
        "tx_cycles_per_packet" => p.tx_cycles_per_packet,
        "tx_ns_per_byte" => p.tx_ns_per_byte,
        "tcp_window_bytes" => f64::from(p.tcp_window_bytes),
        _ => f64::from(p.tcpip_header_bytes),
    }
}

/// One end of a stream and what its core sustains alone.
#[derive(Clone, Debug, Serialize)]
pub struct CoreLimit {
    /// `send` (the client sends) or `receive` (the servers send).
    pub direction: Direction,
    /// The machine (Table I).
    pub machine: &'static str,
    /// `sender` or `receiver`.
    pub end: &'static str,
    /// Its clock, GHz (Table I).
    pub ghz: f64,
    /// Its time per packet at the estimates, ns.
    pub ns_per_packet: f64,
    /// One stream's goodput at that pace, Gb/s.
    pub gbps: f64,
}

/// The hosts' own limit on one stream.
#[derive(Clone, Debug, Serialize)]
pub struct HostLimits {
    /// Each end of each stream of Figure 9.
    pub cores: Vec<CoreLimit>,
    /// Send, 1 host, with all four host prices at the cheap and at the dear end of their
    /// ranges at once, Gb/s.
    pub send_1_host_over_ranges: (f64, f64),
    /// Receive, 1 host, likewise, Gb/s.
    pub receive_1_host_over_ranges: (f64, f64),
}

fn core_limits(p: &ExpEtherParams) -> Vec<CoreLimit> {
    use timing::host_stack::{CLIENT_GHZ, SERVER_GHZ, core_limit_gbps, packet_cost_ps};
    let bytes = p.goodput_bytes_per_packet();
    let mut v = Vec::new();
    let machines = [
        ("server 1", SERVER_GHZ[0]),
        ("server 2", SERVER_GHZ[1]),
        ("server 3", SERVER_GHZ[2]),
    ];
    for direction in [Direction::Send, Direction::Receive] {
        for (machine, ghz) in std::iter::once(("client", CLIENT_GHZ)).chain(machines) {
            let sends = (machine == "client") == (direction == Direction::Send);
            let cost = if sends {
                packet_cost_ps(p.tx_cycles_per_packet, ghz, p.tx_ns_per_byte, bytes)
            } else {
                packet_cost_ps(p.rx_cycles_per_packet, ghz, p.rx_ns_per_byte, bytes)
            };
            v.push(CoreLimit {
                direction,
                machine,
                end: if sends { "sender" } else { "receiver" },
                ghz,
                ns_per_packet: cost as f64 / 1000.0,
                gbps: core_limit_gbps(bytes, cost),
            });
        }
    }
    v
}

/// Everything the reproduction produced.
#[derive(Clone, Debug, Serialize)]
pub struct ExpEtherResults {
    /// The shorter run.
    pub quick: bool,
    /// The model's parameters.
    pub params: ExpEtherParams,
    /// Figures 9 and 11, and the QoS demonstration.
    pub runs: Vec<Run>,
    /// The receive limit.
    pub read_limit: ReadLimit,
    /// Receive, 3 hosts, over N.
    pub sweep: Vec<SweepPoint>,
    /// Every estimate at the ends of its range.
    pub sensitivity: Vec<Sensitivity>,
    /// The hosts' cores: what each stream end sustains.
    pub host_limits: HostLimits,
    /// Best aggregate (send or receive, paper's runs) over the 10 Gb/s the NIC has.
    pub efficiency: f64,
    /// The external wire's goodput over its rate at this MTU: the TCP/IP and Ethernet
    /// overhead, which sets `efficiency` whenever send is wire-bound.
    pub header_efficiency: f64,
    /// Whether per-VF QoS changed any Figure 9 or 11 run by more than 0.005 Gb/s (in the
    /// paper's runs every host has one equally greedy stream).
    pub qos_changes_figures: bool,
    /// Receive (3 hosts) over N's estimated range, from the sweep: (lowest N, highest N,
    /// lowest Gb/s, highest Gb/s).
    pub receive_over_n_range: (u32, u32, f64, f64),
    /// The paper's numbers.
    pub paper: Paper,
    /// The paper's claims, judged on this run ([`claims`]).
    pub claims: Vec<crate::claims::Claim>,
}

/// N's estimated range (`ExpEtherParams::outstanding_reads`: 4–16; S4.4 names N, not its
/// value).
pub const N_RANGE: (u32, u32) = (4, 16);

/// The N of the sweep.
pub const SWEEP_N: [u32; 10] = [1, 2, 4, 6, 8, 10, 12, 16, 24, 32];

struct Spec {
    figure: &'static str,
    direction: Direction,
    streams: Vec<u32>,
    qos: bool,
}

fn specs() -> Vec<Spec> {
    let mut v = Vec::new();
    for qos in [false, true] {
        for direction in [Direction::Send, Direction::Receive] {
            for h in 1..=3 {
                v.push(Spec {
                    figure: "9",
                    direction,
                    streams: vec![1; h],
                    qos,
                });
            }
        }
        for h in 2..=3 {
            v.push(Spec {
                figure: "11",
                direction: Direction::InterHost,
                streams: vec![1; h],
                qos,
            });
        }
        for direction in [Direction::Send, Direction::Receive] {
            v.push(Spec {
                figure: "qos-demo",
                direction,
                streams: vec![2, 1, 1],
                qos,
            });
        }
    }
    v
}

fn direction_name(d: Direction) -> &'static str {
    match d {
        Direction::Send => "send",
        Direction::Receive => "receive",
        Direction::InterHost => "inter-host",
    }
}

/// Runs the reproduction.
fn run(opts: &ReproOptions<'_>) -> Result<ExpEtherResults, Error> {
    // Every DMA crosses the functional path TLP by TLP, so modeled time costs; the runs
    // reach steady state within microseconds (a read's round trip is about 5 µs), so the
    // full run models 0.5 s per run (the paper: 60 s) and 0.1 s per sweep or sensitivity
    // point; the quick one 3 ms (20 ms for send, whose rate is counted in whole packets of
    // 7 µs: at 3 ms that rounds it by up to 0.3%) and 1 ms.
    let (duration_s, sweep_s) = if opts.quick {
        (0.003, 0.001)
    } else {
        (0.5, 0.1)
    };
    let run_s = |d: Direction| {
        if opts.quick && d == Direction::Send {
            0.02
        } else {
            duration_s
        }
    };
    let params = ExpEtherParams::default();
    let specs = specs();
    let mut steps = Steps::new(
        opts,
        (specs.len() + SWEEP_N.len() + ESTIMATES.len() + 1) as u64,
    );
    let mut runs = Vec::with_capacity(specs.len());
    for s in specs {
        steps.start(|| {
            format!(
                "figure {}: {}, {} hosts{}",
                s.figure,
                direction_name(s.direction),
                s.streams.len(),
                if s.qos { ", QoS" } else { "" }
            )
        })?;
        let r = simulate(
            &params,
            &Scenario {
                direction: s.direction,
                streams: s.streams.clone(),
                qos: s.qos,
                duration_s: run_s(s.direction),
            },
        )
        .map_err(ReproError::from)?;
        runs.push(Run {
            figure: s.figure,
            direction: s.direction,
            // At most 3 hosts (`specs`).
            hosts: u32::try_from(s.streams.len()).unwrap_or(u32::MAX),
            streams: s.streams,
            qos: s.qos,
            gbps: r.total_gbps,
            per_host_gbps: r.per_host_gbps,
            mean_read_rtt_ns: r.mean_read_rtt_ns,
            duration_s: run_s(s.direction),
            events: r.events,
        });
    }
    let rx1 = simulate(
        &params,
        &Scenario {
            direction: Direction::Receive,
            streams: vec![1],
            qos: false,
            duration_s,
        },
    )
    .map_err(ReproError::from)?;
    let rtt = rx1.unloaded_read_rtt_ns;
    let fixed = timing::read_fixed_latency_ns(&params);
    let read_limit = ReadLimit {
        bridge_passes: timing::READ_BRIDGE_PASSES,
        switch_hops: timing::READ_SWITCH_HOPS,
        fixed_latency_ns: fixed,
        serialization_ns: rtt - fixed,
        outstanding_reads: params.outstanding_reads,
        read_bytes: params.max_read_request_bytes,
        reads_per_packet: timing::reads_per_packet(&params),
        unloaded_rtt_ns: rtt,
        limit_gbps: read_limit_gbps(&params, params.outstanding_reads, rtt),
        simulated_gbps: rx1.total_gbps,
        line_goodput_gbps: params.line_goodput_gbps(),
        completion_ceiling_gbps: completion_ceiling_gbps(&params),
        reads_to_remove_limit: reads_to_remove_limit(&params, rtt),
    };
    let mut sweep = Vec::with_capacity(SWEEP_N.len());
    for n in SWEEP_N {
        steps.start(|| format!("receive, 3 hosts, N = {n}"))?;
        let p = ExpEtherParams {
            outstanding_reads: n,
            ..params.clone()
        };
        let r = simulate(
            &p,
            &Scenario {
                direction: Direction::Receive,
                streams: vec![1; 3],
                qos: false,
                duration_s: sweep_s,
            },
        )
        .map_err(ReproError::from)?;
        sweep.push(SweepPoint {
            outstanding_reads: n,
            gbps: r.total_gbps,
            limit_gbps: read_limit_gbps(&p, n, r.unloaded_read_rtt_ns),
            mean_read_rtt_ns: r.mean_read_rtt_ns,
        });
    }
    // One host's aggregate under `p`, the sweep's duration.
    let one_host = |p: &ExpEtherParams, direction: Direction| -> Result<f64, Error> {
        let r = simulate(
            p,
            &Scenario {
                direction,
                streams: vec![1],
                qos: false,
                duration_s: sweep_s,
            },
        )
        .map_err(ReproError::from)?;
        Ok(r.total_gbps)
    };
    let mut sensitivity = Vec::with_capacity(ESTIMATES.len());
    for (name, lo, hi, set) in ESTIMATES {
        steps.start(|| format!("sensitivity: {name} {lo}..{hi}"))?;
        let at = |v: f64, direction: Direction| -> Result<f64, Error> {
            let mut p = params.clone();
            set(&mut p, v);
            one_host(&p, direction)
        };
        sensitivity.push(Sensitivity {
            parameter: name,
            value: current(&params, name),
            range: (lo, hi),
            receive_gbps: (at(lo, Direction::Receive)?, at(hi, Direction::Receive)?),
            send_gbps: (at(lo, Direction::Send)?, at(hi, Direction::Send)?),
        });
    }
    steps.start(|| "host prices: all cheap, all dear".to_string())?;
    let over_ranges = |direction: Direction| -> Result<(f64, f64), Error> {
        let mut ends = [0.0; 2];
        for (end, pick_high) in ends.iter_mut().zip([false, true]) {
            let mut p = params.clone();
            for (name, lo, hi, set) in ESTIMATES {
                if HOST_PRICES.contains(&name) {
                    set(&mut p, if pick_high { hi } else { lo });
                }
            }
            *end = one_host(&p, direction)?;
        }
        Ok((ends[0], ends[1]))
    };
    let host_limits = HostLimits {
        cores: core_limits(&params),
        send_1_host_over_ranges: over_ranges(Direction::Send)?,
        receive_1_host_over_ranges: over_ranges(Direction::Receive)?,
    };
    let best = runs
        .iter()
        .filter(|r| r.figure == "9")
        .map(|r| r.gbps)
        .fold(0.0, f64::max);
    let qos_changes_figures = runs.iter().filter(|x| x.figure != "qos-demo").any(|x| {
        runs.iter()
            .find(|y| {
                y.figure == x.figure
                    && y.direction == x.direction
                    && y.hosts == x.hosts
                    && y.qos != x.qos
            })
            .is_some_and(|y| (y.gbps - x.gbps).abs() > 0.005)
    });
    let in_range: Vec<&SweepPoint> = sweep
        .iter()
        .filter(|s| (N_RANGE.0..=N_RANGE.1).contains(&s.outstanding_reads))
        .collect();
    let receive_over_n_range = (
        in_range.first().map_or(0, |s| s.outstanding_reads),
        in_range.last().map_or(0, |s| s.outstanding_reads),
        in_range
            .iter()
            .map(|s| s.gbps)
            .fold(f64::INFINITY, f64::min),
        in_range.iter().map(|s| s.gbps).fold(0.0, f64::max),
    );
    steps.finish()?;
    let mut r = ExpEtherResults {
        quick: opts.quick,
        efficiency: best / params.eth_gbps,
        header_efficiency: params.line_goodput_gbps() / params.eth_gbps,
        qos_changes_figures,
        receive_over_n_range,
        params,
        runs,
        read_limit,
        sweep,
        sensitivity,
        host_limits,
        paper: PAPER,
        claims: Vec::new(),
    };
    r.claims = claims::claims(&r);
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The quick run's headline numbers, pinned (default parameters).
    #[test]
    fn quick_headline() {
        let r = run(&ReproOptions::new(true)).unwrap();
        let fig9 = |d: Direction, h: u32, qos: bool| {
            r.runs
                .iter()
                .find(|x| x.figure == "9" && x.direction == d && x.hosts == h && x.qos == qos)
                .unwrap()
                .gbps
        };
        for h in 1..=3 {
            // Send: the external wire's goodput, (9000 - 52) / 9038 of 10 Gb/s, less the
            // pipeline's fill in 3 ms.
            let tx = fig9(Direction::Send, h, false);
            assert!((9.8..9.91).contains(&tx), "{h}: {tx}");
            // Receive: 8 reads of 512 B per ~4.6 µs round trip, 18 reads a packet.
            let rx = fig9(Direction::Receive, h, false);
            assert!((6.75..6.95).contains(&rx), "{h}: {rx}");
            assert_eq!(fig9(Direction::Receive, h, true), rx);
        }
        let l = &r.read_limit;
        assert!((4500.0..4750.0).contains(&l.unloaded_rtt_ns), "{l:?}");
        assert!(
            (l.simulated_gbps - l.limit_gbps).abs() < 0.05 * l.limit_gbps,
            "{l:?}"
        );
        assert_eq!(l.reads_to_remove_limit, 12);
        assert!((9.5..9.6).contains(&l.completion_ceiling_gbps), "{l:?}");
        // The sweep rises with N, then flattens at the completions' ceiling.
        for w in r.sweep.windows(2) {
            assert!(w[1].gbps >= w[0].gbps - 1e-9, "{w:?}");
        }
        let last = r.sweep.last().unwrap();
        assert!((last.gbps - l.completion_ceiling_gbps).abs() < 0.02 * l.completion_ceiling_gbps);
        // QoS: without it the host with two streams gets twice the others; with it, equal.
        let demo = |d: Direction, qos: bool| {
            r.runs
                .iter()
                .find(|x| x.figure == "qos-demo" && x.direction == d && x.qos == qos)
                .unwrap()
                .per_host_gbps
                .clone()
        };
        for d in [Direction::Send, Direction::Receive] {
            let (a, b) = (demo(d, false), demo(d, true));
            assert!((a[0] / a[1] - 2.0).abs() < 0.05, "{a:?}");
            assert!((b[0] / b[1] - 1.0).abs() < 0.05, "{b:?}");
        }
        // 2 × (6 of Figure 9 + 2 of Figure 11 + 2 QoS demonstrations).
        assert_eq!(r.runs.len(), 20);
        assert!((0.98..1.0).contains(&r.efficiency));
        // The efficiency is the header overhead at MTU 9000: (9000 − 52) / 9038.
        assert!((r.efficiency - r.header_efficiency).abs() < 0.01);
        assert!((r.header_efficiency - 8948.0 / 9038.0).abs() < 1e-9);
        // Equal demand: QoS changes no run of Figures 9 and 11.
        assert!(!r.qos_changes_figures);
        // One read's round trip: 4 bridge passes, 2 switch hops, the memory read (all 500
        // ns), the rest serialization.
        assert_eq!((l.bridge_passes, l.switch_hops), (4, 2));
        assert_eq!(l.fixed_latency_ns, 3500.0);
        assert!((l.fixed_latency_ns + l.serialization_ns - l.unloaded_rtt_ns).abs() < 1e-9);
        // Over N's range receive spans the paper's three values: N = 8 constrains nothing.
        let (lo_n, hi_n, lo, hi) = r.receive_over_n_range;
        assert_eq!((lo_n, hi_n), (4, 16));
        assert!(
            (3.4..3.5).contains(&lo) && (9.5..9.7).contains(&hi),
            "{lo} {hi}"
        );
        assert!(PAPER.receive_gbps.iter().all(|g| (lo..=hi).contains(g)));
        // Sensitivity: every estimate at both ends of its range. Receive rises with N and
        // with the read size and falls with the latencies; send, bound by the wire, moves
        // only with the headers (goodput per wire byte).
        assert_eq!(r.sensitivity.len(), ESTIMATES.len());
        let s = |name: &str| r.sensitivity.iter().find(|x| x.parameter == name).unwrap();
        for up in ["outstanding_reads", "max_read_request_bytes"] {
            let x = s(up);
            assert!(x.receive_gbps.1 > x.receive_gbps.0 + 1.0, "{x:?}");
        }
        for lat in ["bridge_ns", "switch_ns", "host_memory_ns"] {
            let x = s(lat);
            assert!(x.receive_gbps.1 < x.receive_gbps.0, "{x:?}");
            assert!((x.send_gbps.1 - x.send_gbps.0).abs() < 0.1, "{x:?}");
        }
        let hdr = s("tcpip_header_bytes");
        assert!(hdr.send_gbps.0 > hdr.send_gbps.1, "{hdr:?}");
        // The hosts: a core at each end of each stream; at the estimates every one is faster
        // than the wire, so no Figure 9 run is bound by a host, and the dearer a host price,
        // the lower 1-host send once a core is slower than the wire.
        let h = &r.host_limits;
        assert_eq!(h.cores.len(), 8);
        let line = r.read_limit.line_goodput_gbps;
        assert!(h.cores.iter().all(|c| c.gbps > line), "{h:?}");
        for price in HOST_PRICES {
            let x = s(price);
            assert!(x.send_gbps.1 <= x.send_gbps.0 + 0.02, "{x:?}");
        }
        let (cheap, dear) = h.send_1_host_over_ranges;
        assert!(dear < cheap - 1.0, "{h:?}");
        // Server 1's receiving core is the slowest end of a send stream; alone at the dear
        // ends it sets 1-host send.
        let slowest = h
            .cores
            .iter()
            .filter(|c| c.direction == Direction::Send)
            .min_by(|a, b| a.gbps.total_cmp(&b.gbps))
            .unwrap();
        assert_eq!((slowest.machine, slowest.end), ("server 1", "receiver"));
    }
}
