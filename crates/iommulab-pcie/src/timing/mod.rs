//! The timing model of S4.4: a discrete-event model of a 10 GbE SR-IOV NIC shared by up to
//! three hosts through the ExpEther bridges, to reproduce Figures 9 and 11.
//!
//! | file | what it is |
//! |---|---|
//! | [`link`] | a link direction as a FIFO server; frame trains pipelined hop by hop |
//! | [`arbiter`] | which VF the NIC serves next, with and without per-VF QoS |
//! | [`sim`] | the event loop: DMA reads with N outstanding, posted writes, the wires |
//! | [`tlp_path`] | the functional path every DMA takes: VF, bridge, frames, switch, host IOMMU |
//! | [`host_stack`] | each stream's TCP work on one core at each end: per packet and per byte |
//! | [`experiment`] | one run as a user gives it (any subset of the parameters), with its limits |
//!
//! ```text
//!  client ══10 GbE══ NIC ══PCIe Gen1 x8══ I/O bridge ══2 × 10 GbE══ switch ══ host bridge ── host memory
//!  send:    client → NIC → posted MWr trains (≤ Max_Payload_Size) → host h
//!  receive: NIC ── MRd (≤ Max_Read_Request_Size, at most N outstanding) → host h
//!               ←─ CplD train (completion size each) ── one Ethernet round trip later
//!           NIC → client when all of a packet's reads are back
//!  inter-host: reads from host 1 as in receive; the NIC's internal switch; writes to host 2/3
//! ```
//!
//! Every TLP crosses the Ethernet in its own frame ([`crate::bridge::frame`]: 30 bytes of
//! header, 4 of FCS, 20 of preamble and gap). The receive limit is the mechanism S4.4 names:
//! with N reads of R bytes outstanding and a round trip of T, the NIC fetches at most
//! `N × R / T`; [`read_limit_gbps`] gives it, [`reads_to_remove_limit`] how many
//! outstanding reads remove it, and [`completion_ceiling_gbps`] what limits receive then.
//!
//! Parameters the paper gives: 10 GbE, two paths, MTU 9000, PCIe Gen1 x8 at the bridge, 60 s
//! runs, 1-3 hosts, the hosts' clocks (Table I, [`host_stack`]). Every other parameter is an estimate (see [`ExpEtherParams`]); none is
//! fitted to the paper's figures.

// Counts and sizes are validated (at most 256 reads, 1024 packets, 16 hosts, 8 paths) before
// they are narrowed.
#![allow(clippy::cast_possible_truncation)]

pub mod arbiter;
pub mod experiment;
pub mod host_stack;
pub mod link;
pub mod sim;
pub mod tlp_path;

use serde::{Deserialize, Serialize};

pub use experiment::{ExpEtherReport, ExpEtherRun, StreamEnd};
pub use sim::{Direction, Scenario, SimResult, simulate};

/// The model's parameters. Values marked *estimate* are not in the paper.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ExpEtherParams {
    /// Ethernet rate of each path and of the NIC's external port, Gb/s (paper: 10 GbE).
    pub eth_gbps: f64,
    /// Disjoint Ethernet paths between the bridges (paper: two switches, two paths).
    pub paths: u8,
    /// IP MTU, bytes (paper: 9000).
    pub mtu: u32,
    /// IP and TCP header bytes per packet, with the timestamp option: 20 + 20 + 12
    /// (*estimate*: Linux iperf defaults).
    pub tcpip_header_bytes: u32,
    /// Ethernet header bytes the NIC fetches with each packet (14, untagged).
    pub eth_header_bytes: u32,
    /// PCIe data rate between the NIC and the I/O-side bridge, Gb/s: Gen1 x8 after 8b/10b
    /// coding = 16 (paper: Gen1 x8).
    pub pcie_gbps: f64,
    /// Per-TLP link overhead on PCIe: framing (2), sequence number (2), LCRC (4) bytes.
    pub pcie_tlp_overhead_bytes: u32,
    /// Max_Payload_Size of the NIC's DMA writes, bytes (*estimate*: 128, range 128-256; the
    /// hosts' Intel X38/X48 root ports of the paper's Figure 8 support 128).
    pub max_payload_bytes: u32,
    /// Max_Read_Request_Size of the NIC's DMA reads, bytes (*estimate*: 512, the reset value
    /// of Device Control; range 128-4096).
    pub max_read_request_bytes: u32,
    /// Data per completion the host returns, bytes (*estimate*: 64, a cache line, the read
    /// completion boundary of Intel root complexes; range 64-128).
    pub completion_bytes: u32,
    /// N: DMA reads the NIC keeps outstanding (*estimate*: 8, range 4-16; S4.4 names N but not
    /// its value).
    pub outstanding_reads: u32,
    /// Latency of one pass through an ExpEther bridge (FPGA pipeline, PCIe and MAC), ns
    /// (*estimate*: 500, range 300-1000).
    pub bridge_ns: f64,
    /// Latency of a 10 GbE switch hop, port to port, ns (*estimate*: 500, range 200-1500).
    pub switch_ns: f64,
    /// Host memory read latency through the root complex, ns (*estimate*: 500, range 300-700).
    pub host_memory_ns: f64,
    /// Packets the NIC buffers on transmit and on receive (*estimate*: 4 jumbo frames).
    pub nic_buffer_packets: u32,
    /// A TCP receiver's work per packet besides the copy: interrupt, driver (RxD, buffer
    /// refill), IP and TCP input, an ACK every second packet, waking iperf and its
    /// `recv` call, CPU cycles (*estimate*: 10 000, range 5 000-20 000; per-packet work
    /// dominates 2.6-era Linux TCP receive, Menon and Zwaenepoel, USENIX ATC 2008; the range
    /// is wide because their counts are for other CPUs and 1500-byte packets, and the low
    /// end covers a driver aggregating packets before TCP).
    pub rx_cycles_per_packet: f64,
    /// A TCP receiver's copy to iperf's buffer, ns per payload byte (*estimate*: 0.25, that
    /// is 4 GB/s, range 0.18-0.40, 5.5-2.5 GB/s): the NIC's data arrives by DMA, so the copy
    /// reads it from memory through the Core 2's front-side bus (10.6 GB/s peak at 1333
    /// MHz; one core reads under 6 GB/s in the reviews cited in docs/sources.md).
    pub rx_ns_per_byte: f64,
    /// A TCP sender's work per packet besides the copy: the `send` call, TCP and IP output,
    /// the driver's descriptor and doorbell, freeing the sent buffer, the ACKs it takes in,
    /// CPU cycles (*estimate*: 5 000, range 2 500-10 000; cheaper than receive, no wake-up,
    /// ACKs one per two packets; the low end covers segmentation offload).
    pub tx_cycles_per_packet: f64,
    /// A TCP sender's copy from iperf's buffer (cache-warm: iperf sends the same buffer)
    /// into new socket buffers, ns per payload byte (*estimate*: 0.15, range 0.08-0.25:
    /// the destination's lines are fetched from memory before they are written).
    pub tx_ns_per_byte: f64,
    /// A stream's TCP window, bytes (*estimate*: 3 MiB, range 64 KiB-3 MiB: 2.6.18's
    /// largest autotuned receive buffer, `tcp_rmem` 4 MiB, of which `tcp_adv_win_scale` = 2
    /// advertises three quarters; the low end is the window before autotuning grows it).
    pub tcp_window_bytes: u32,
}

impl Default for ExpEtherParams {
    fn default() -> Self {
        ExpEtherParams {
            eth_gbps: 10.0,
            paths: 2,
            mtu: 9000,
            tcpip_header_bytes: 52,
            eth_header_bytes: 14,
            pcie_gbps: 16.0,
            pcie_tlp_overhead_bytes: 8,
            max_payload_bytes: 128,
            max_read_request_bytes: 512,
            completion_bytes: 64,
            outstanding_reads: 8,
            bridge_ns: 500.0,
            switch_ns: 500.0,
            host_memory_ns: 500.0,
            nic_buffer_packets: 4,
            rx_cycles_per_packet: 10_000.0,
            rx_ns_per_byte: 0.25,
            tx_cycles_per_packet: 5_000.0,
            tx_ns_per_byte: 0.15,
            tcp_window_bytes: 3 << 20,
        }
    }
}

/// A parameter or scenario the model cannot run.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum TimingError {
    /// A parameter out of range.
    #[error("parameter {name} = {value}: expected {expected}")]
    Param {
        /// Its name.
        name: &'static str,
        /// Its value.
        value: f64,
        /// What is allowed.
        expected: &'static str,
    },
    /// The functional path refused a DMA.
    #[error(transparent)]
    Path(#[from] tlp_path::PathError),
}

impl ExpEtherParams {
    /// Checks every parameter.
    pub fn validate(&self) -> Result<(), TimingError> {
        let bad = |name, value: f64, expected| {
            Err(TimingError::Param {
                name,
                value,
                expected,
            })
        };
        let pow2 = |v: u32| v.is_power_of_two();
        if !(self.eth_gbps > 0.0 && self.eth_gbps.is_finite()) {
            return bad("eth_gbps", self.eth_gbps, "a positive rate");
        }
        if !(self.pcie_gbps > 0.0 && self.pcie_gbps.is_finite()) {
            return bad("pcie_gbps", self.pcie_gbps, "a positive rate");
        }
        if self.paths == 0 || self.paths > 8 {
            return bad("paths", f64::from(self.paths), "1..=8");
        }
        if !(576..=9216).contains(&self.mtu) {
            return bad("mtu", f64::from(self.mtu), "576..=9216 bytes");
        }
        if self.tcpip_header_bytes >= self.mtu {
            return bad(
                "tcpip_header_bytes",
                f64::from(self.tcpip_header_bytes),
                "below the MTU",
            );
        }
        if !pow2(self.max_payload_bytes) || !(128..=4096).contains(&self.max_payload_bytes) {
            return bad(
                "max_payload_bytes",
                f64::from(self.max_payload_bytes),
                "128, 256, ... 4096",
            );
        }
        if !pow2(self.max_read_request_bytes)
            || !(128..=4096).contains(&self.max_read_request_bytes)
        {
            return bad(
                "max_read_request_bytes",
                f64::from(self.max_read_request_bytes),
                "128, 256, ... 4096",
            );
        }
        if !pow2(self.completion_bytes)
            || self.completion_bytes < 64
            || self.completion_bytes > self.max_read_request_bytes
        {
            return bad(
                "completion_bytes",
                f64::from(self.completion_bytes),
                "64, 128, ... up to max_read_request_bytes",
            );
        }
        if self.outstanding_reads == 0 || self.outstanding_reads > 256 {
            return bad(
                "outstanding_reads",
                f64::from(self.outstanding_reads),
                "1..=256 (8-bit tags)",
            );
        }
        for (name, v) in [
            ("bridge_ns", self.bridge_ns),
            ("switch_ns", self.switch_ns),
            ("host_memory_ns", self.host_memory_ns),
        ] {
            if !(0.0..1e9).contains(&v) {
                return bad(name, v, "a latency in 0..1 s");
            }
        }
        if self.nic_buffer_packets == 0 || self.nic_buffer_packets > 1024 {
            return bad(
                "nic_buffer_packets",
                f64::from(self.nic_buffer_packets),
                "1..=1024",
            );
        }
        for (name, v) in [
            ("rx_cycles_per_packet", self.rx_cycles_per_packet),
            ("tx_cycles_per_packet", self.tx_cycles_per_packet),
        ] {
            if !(0.0..1e8).contains(&v) {
                return bad(name, v, "cycles in 0..1e8");
            }
        }
        for (name, v) in [
            ("rx_ns_per_byte", self.rx_ns_per_byte),
            ("tx_ns_per_byte", self.tx_ns_per_byte),
        ] {
            if !(0.0..1000.0).contains(&v) {
                return bad(name, v, "ns per byte in 0..1000");
            }
        }
        let w = self.tcp_window_bytes / self.goodput_bytes_per_packet();
        if !(1..=65_536).contains(&w) {
            return bad(
                "tcp_window_bytes",
                f64::from(self.tcp_window_bytes),
                "1 to 65536 packets' payload",
            );
        }
        Ok(())
    }

    /// A stream's TCP window in whole packets.
    pub fn window_packets(&self) -> u32 {
        (self.tcp_window_bytes / self.goodput_bytes_per_packet()).max(1)
    }

    /// Bytes the NIC moves by DMA per packet: the IP packet and its Ethernet header.
    pub fn dma_bytes_per_packet(&self) -> u32 {
        self.mtu + self.eth_header_bytes
    }

    /// Bytes of TCP payload (what iperf counts) per packet.
    pub fn goodput_bytes_per_packet(&self) -> u32 {
        self.mtu - self.tcpip_header_bytes
    }

    /// Bytes each packet occupies the external wire: frame, FCS, preamble and gap.
    pub fn wire_bytes_per_packet(&self) -> u32 {
        self.dma_bytes_per_packet() + 4 + 20
    }

    /// The external wire's ceiling on iperf's goodput, Gb/s (`MTU - headers` of each
    /// `MTU + 38` wire bytes at the line rate).
    pub fn line_goodput_gbps(&self) -> f64 {
        self.eth_gbps * f64::from(self.goodput_bytes_per_packet())
            / f64::from(self.wire_bytes_per_packet())
    }
}

/// Bridge passes on a DMA read's round trip as [`sim`] issues it: the I/O-side bridge up,
/// the host bridge in and out, the I/O-side bridge down.
pub const READ_BRIDGE_PASSES: u32 = 4;

/// Switch hops on a DMA read's round trip: one each way (the two bridges hang off one
/// switch per path).
pub const READ_SWITCH_HOPS: u32 = 2;

/// The fixed latencies of one read's round trip, ns: [`READ_BRIDGE_PASSES`] bridge
/// passes, [`READ_SWITCH_HOPS`] switch hops and the memory read; the rest of an unloaded
/// round trip is serialization on the links.
pub fn read_fixed_latency_ns(p: &ExpEtherParams) -> f64 {
    f64::from(READ_BRIDGE_PASSES) * p.bridge_ns
        + f64::from(READ_SWITCH_HOPS) * p.switch_ns
        + p.host_memory_ns
}

/// DMA reads per packet: each read is at most Max_Read_Request_Size.
pub fn reads_per_packet(p: &ExpEtherParams) -> u32 {
    p.dma_bytes_per_packet().div_ceil(p.max_read_request_bytes)
}

/// The receive limit of S4.4 as iperf goodput, Gb/s: N reads outstanding, each holding its
/// slot for a round trip of `rtt_ns` (use [`SimResult::unloaded_read_rtt_ns`]), so
/// `N / T` reads a second, [`reads_per_packet`] of them per packet.
pub fn read_limit_gbps(p: &ExpEtherParams, n: u32, rtt_ns: f64) -> f64 {
    let packets_per_ns = f64::from(n) / rtt_ns / f64::from(reads_per_packet(p));
    packets_per_ns * f64::from(p.goodput_bytes_per_packet()) * 8.0
}

/// The ceiling the Ethernet puts on reads whatever N: each completion of
/// [`ExpEtherParams::completion_bytes`] crosses in its own frame (30 + 12 + data + 4 bytes,
/// plus 20 of preamble and gap), on all paths, as iperf goodput in Gb/s.
pub fn completion_ceiling_gbps(p: &ExpEtherParams) -> f64 {
    let cpl = p.completion_bytes as usize;
    let data_gbps = p.eth_gbps * f64::from(p.paths) * cpl as f64
        / crate::bridge::frame::wire_bytes(12 + cpl) as f64;
    let read_bytes = f64::from(reads_per_packet(p) * p.max_read_request_bytes);
    data_gbps * f64::from(p.goodput_bytes_per_packet()) / read_bytes
}

/// The fewest outstanding reads whose limit reaches the lower of the external wire's and
/// the completions' ceilings (the point where N stops being what limits receive).
pub fn reads_to_remove_limit(p: &ExpEtherParams, rtt_ns: f64) -> u32 {
    let per_read = read_limit_gbps(p, 1, rtt_ns);
    let ceiling = p.line_goodput_gbps().min(completion_ceiling_gbps(p));
    (ceiling / per_read).ceil() as u32
}

#[cfg(test)]
mod tests;
