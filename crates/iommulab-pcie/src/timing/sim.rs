//! The event loop of the S4.4 timing model.
//!
//! Send traffic needs no events: packets arrive from the client in order and every link
//! they cross sees them in that order, so each packet's DMA write trains are computed hop by
//! hop as it arrives. Receive and inter-host traffic have two merge points where trains from
//! different hosts meet out of order, so they are events, in time order:
//! - a read's completion train reaching the switch port towards the I/O bridge (hosts and
//!   paths merge there), then the PCIe link to the NIC (the two paths merge; served in the
//!   order trains left the switch: an approximation of at most a frame time);
//! - a read done at the NIC (a slot of the N frees, the next read issues);
//! - a packet leaving the NIC's transmit buffer (room to fetch another);
//! - a host's sending core having made the packet the NIC waits for ([`host_stack`]).
//!
//! Every stream has a core at each end ([`host_stack`]): the sender makes packets no faster
//! than its core and its TCP window allow, the receiver consumes them no faster than its
//! core; iperf counts a packet when the receiver has consumed it.
//!
//! The event queue holds at most `N + buffer + 1` entries, keys packed in a `u128` (time,
//! kind, id): no allocation per event in steady state.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use serde::{Deserialize, Serialize};

use iommulab_base::clock::saturating_u64;

use crate::timing::arbiter::Arbiter;
use crate::timing::host_stack::{self, CLIENT_GHZ, Next, Streams};
use crate::timing::link::{Link, Ps, Train};
use crate::timing::tlp_path::{BUFFER_IOVA, PathError, PathStats, TlpPath};
use crate::timing::{ExpEtherParams, TimingError};

/// Which way the data goes, as the paper names it (from the hosts' side).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// The client sends to the hosts: the NIC writes into host memory (posted writes).
    Send,
    /// The hosts send to the client: the NIC reads host memory (reads with round trips).
    Receive,
    /// Host 1 sends to the other hosts through the NIC's internal switch (Figure 11).
    InterHost,
}

/// One run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Scenario {
    /// Direction.
    pub direction: Direction,
    /// Greedy streams per host (their count is the host's demand); `len()` is the number
    /// of hosts. For `InterHost`, host 0 is the sender and `streams[0]` is ignored.
    pub streams: Vec<u32>,
    /// Per-VF QoS in the NIC (S4.3).
    pub qos: bool,
    /// Modeled seconds.
    pub duration_s: f64,
}

/// What a run measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SimResult {
    /// iperf goodput of each host, Gb/s (for `InterHost`, what each receiving host got;
    /// host 0's entry is 0).
    pub per_host_gbps: Vec<f64>,
    /// Their sum.
    pub total_gbps: f64,
    /// Packets consumed by the receiving hosts' iperf after the warm-up ([`WARM_UP`]).
    pub packets: u64,
    /// DMA reads completed.
    pub reads: u64,
    /// Events processed.
    pub events: u64,
    /// Mean read round trip (issue to last completion at the NIC), ns; 0 without reads.
    pub mean_read_rtt_ns: f64,
    /// The first read's round trip, in an idle system, ns; 0 without reads.
    pub unloaded_read_rtt_ns: f64,
    /// TLPs, frames and host IOMMU translations the functional path carried for the run
    /// (every DMA the run timed, counted there).
    pub path: PathStats,
    /// Busy fraction of the external wire (send: client → NIC; otherwise NIC → client).
    pub wire_utilization: f64,
}

/// The share of a run before the measurement starts: the links and the N reads fill in
/// the first microseconds, and counting from 0 would charge that to short runs.
pub const WARM_UP: f64 = 0.1;

const EV_CPL_AT_SWITCH: u128 = 0;
const EV_READ_DONE: u128 = 1;
const EV_PACKET_OUT: u128 = 2;
const EV_HOST_READY: u128 = 3;

#[derive(Clone, Copy, Debug, Default)]
struct Read {
    packet: u32,
    path: u8,
    issued: Ps,
    train: Train,
    /// Its completions as the functional path encoded them: count, PCIe and wire bytes.
    cpl_frames: u64,
    cpl_pcie: u64,
    cpl_wire: u64,
}

#[derive(Clone, Copy, Debug, Default)]
struct Packet {
    /// Host whose memory the NIC reads (receive, inter-host source).
    src: usize,
    /// Host the packet is for (inter-host destination; receive: `src`).
    dst: usize,
    left_to_issue: u32,
    reads_out: u32,
}

impl Default for Train {
    fn default() -> Self {
        Train::at(0)
    }
}

fn ps(ns: f64) -> Ps {
    saturating_u64((ns * 1000.0).round())
}

struct Sim<'p> {
    p: &'p ExpEtherParams,
    dir: Direction,
    end: Ps,
    /// Deliveries before this are the pipeline's fill, not counted (a tenth of the run).
    warm: Ps,
    // Latencies.
    bridge: Ps,
    switch: Ps,
    memory: Ps,
    // Links.
    wire: Link,
    pcie_up: Link,
    pcie_down: Link,
    up: Vec<Link>,
    down: Vec<Link>,
    to_host: Vec<Vec<Link>>,
    from_host: Vec<Vec<Link>>,
    internal: Link,
    // The functional model every DMA goes through; the first error it reported.
    path: TlpPath,
    error: Option<PathError>,
    // State.
    arbiter: Arbiter,
    queue: BinaryHeap<Reverse<u128>>,
    reads: Vec<Read>,
    free_reads: Vec<u32>,
    packets: Vec<Packet>,
    free_packets: Vec<u32>,
    fetching: Option<u32>,
    /// The host the arbiter chose whose sender has not made the packet yet, and whether an
    /// event will retry it.
    waiting_for: Option<usize>,
    retry_pending: bool,
    /// Each host's streams: cores at both ends and the TCP window.
    stacks: Vec<Streams>,
    next_path: usize,
    delivered: Vec<u64>,
    stats_packets: u64,
    stats_reads: u64,
    events: u64,
    rtt_sum: u128,
    first_rtt: Option<Ps>,
}

/// Runs `s` on the model with parameters `p`.
pub fn simulate(p: &ExpEtherParams, s: &Scenario) -> Result<SimResult, TimingError> {
    p.validate()?;
    let hosts = s.streams.len();
    if hosts == 0 || hosts > 16 {
        return Err(TimingError::Param {
            name: "hosts",
            value: hosts as f64,
            expected: "1..=16",
        });
    }
    if s.direction == Direction::InterHost && hosts < 2 {
        return Err(TimingError::Param {
            name: "hosts",
            value: hosts as f64,
            expected: "at least 2 for inter-host traffic",
        });
    }
    if !(s.duration_s > 0.0 && s.duration_s <= 3600.0) {
        return Err(TimingError::Param {
            name: "duration_s",
            value: s.duration_s,
            expected: "0 < seconds <= 3600",
        });
    }
    let mut demand = s.streams.clone();
    if s.direction == Direction::InterHost {
        demand[0] = 0;
    }
    let eth = p.eth_gbps;
    let paths = usize::from(p.paths);
    let n = p.outstanding_reads as usize;
    let b = p.nic_buffer_packets as usize;
    let stacks = stream_ends(p, s, &demand);
    let mut sim = Sim {
        p,
        dir: s.direction,
        end: saturating_u64(s.duration_s * 1e12),
        warm: saturating_u64(s.duration_s * 1e12 * WARM_UP),
        bridge: ps(p.bridge_ns),
        switch: ps(p.switch_ns),
        memory: ps(p.host_memory_ns),
        wire: Link::new(eth),
        pcie_up: Link::new(p.pcie_gbps),
        pcie_down: Link::new(p.pcie_gbps),
        up: vec![Link::new(eth); paths],
        down: vec![Link::new(eth); paths],
        to_host: vec![vec![Link::new(eth); paths]; hosts],
        from_host: vec![vec![Link::new(eth); paths]; hosts],
        // The NIC's internal switch (inter-host): *estimate*, the port's line rate.
        internal: Link::new(eth),
        path: TlpPath::new(hosts)?,
        error: None,
        arbiter: Arbiter::new(&demand, s.qos),
        queue: BinaryHeap::with_capacity(n + b + 5),
        reads: vec![Read::default(); n],
        free_reads: (0..n as u32).rev().collect(),
        packets: vec![Packet::default(); b],
        free_packets: (0..b as u32).rev().collect(),
        fetching: None,
        waiting_for: None,
        retry_pending: false,
        stacks,
        next_path: 0,
        delivered: vec![0; hosts],
        stats_packets: 0,
        stats_reads: 0,
        events: 0,
        rtt_sum: 0,
        first_rtt: None,
    };
    match s.direction {
        Direction::Send => sim.run_send(),
        Direction::Receive | Direction::InterHost => sim.run_reads(),
    }
    if let Some(e) = sim.error.take() {
        return Err(e.into());
    }
    Ok(sim.result(s.duration_s))
}

/// Each host's streams with the cores at their two ends: the client sends (send) or
/// receives (receive); in inter-host traffic host 1 sends to the others.
fn stream_ends(p: &ExpEtherParams, s: &Scenario, demand: &[u32]) -> Vec<Streams> {
    let bytes = p.goodput_bytes_per_packet();
    let tx = |ghz| host_stack::packet_cost_ps(p.tx_cycles_per_packet, ghz, p.tx_ns_per_byte, bytes);
    let rx = |ghz| host_stack::packet_cost_ps(p.rx_cycles_per_packet, ghz, p.rx_ns_per_byte, bytes);
    demand
        .iter()
        .enumerate()
        .map(|(h, &streams)| {
            let server = host_stack::server_ghz(h);
            let (tx_cost, rx_cost) = match s.direction {
                Direction::Send => (tx(CLIENT_GHZ), rx(server)),
                Direction::Receive => (tx(server), rx(CLIENT_GHZ)),
                Direction::InterHost => (tx(host_stack::server_ghz(0)), rx(server)),
            };
            Streams::new(streams, p.window_packets(), tx_cost, rx_cost)
        })
        .collect()
}

impl Sim<'_> {
    fn push(&mut self, t: Ps, kind: u128, id: u32) {
        self.queue.push(Reverse(
            (u128::from(t) << 64) | (kind << 32) | u128::from(id),
        ));
    }

    /// The NIC writes one packet into host `h`'s memory from time `t`: a train of MWr TLPs
    /// of Max_Payload_Size over PCIe, spread over the paths, through the switch to the host's
    /// bridge. Returns when the last write reaches the host, and when the last leaves the NIC.
    fn write_packet(&mut self, t: Ps, h: usize, buffer: u64) -> (Ps, Ps) {
        let iova = BUFFER_IOVA + (buffer % 16) * 16384;
        let w = match self.path.write(
            h,
            iova,
            self.p.dma_bytes_per_packet(),
            self.p.max_payload_bytes,
        ) {
            Ok(w) => w,
            Err(e) => {
                self.error.get_or_insert(e);
                self.end = 0;
                return (Ps::MAX, t);
            }
        };
        let tlps = w.tlps;
        let pcie = self.pcie_up.send(
            Train::at(t),
            tlps,
            w.tlp + u64::from(self.p.pcie_tlp_overhead_bytes),
        );
        let wire = w.wire;
        let paths = self.up.len() as u64;
        let mut landed = 0;
        for (i, (up, to_host)) in self
            .up
            .iter_mut()
            .zip(self.to_host[h].iter_mut())
            .enumerate()
        {
            // Per-frame load balancing: path i carries every paths-th TLP.
            let k = tlps / paths + u64::from((i as u64) < tlps % paths);
            if k == 0 {
                continue;
            }
            let at = pcie.delay(self.bridge);
            let on_up = up.send(at, k, wire).delay(self.switch);
            let arrived = to_host.send(on_up, k, wire).delay(self.bridge);
            landed = landed.max(arrived.last);
        }
        (landed, pcie.last)
    }

    /// Send: the client transmits back to back while the NIC has buffer room; a buffer slot
    /// frees when the packet's writes have left the NIC (posted: no completion to wait for).
    fn run_send(&mut self) {
        let b = self.p.nic_buffer_packets as usize;
        let wire_bytes = u64::from(self.p.wire_bytes_per_packet());
        let mut slot_free: Vec<Ps> = vec![0; b];
        let mut k = 0usize;
        while let Some(h) = self.arbiter.pick() {
            // The client's core makes the packet (every earlier one is consumed below, so
            // the window is never unknown here); it goes on the wire once the NIC will have
            // room for it.
            let Next::At(made) = self.stacks[h].make() else {
                break;
            };
            let start = slot_free[k % b].max(made);
            let arrived = self.wire.send(Train::at(start), 1, wire_bytes).last;
            if arrived > self.end {
                break;
            }
            let (landed, left_nic) = self.write_packet(arrived, h, k as u64);
            slot_free[k % b] = left_nic;
            let consumed = self.stacks[h].consume(landed);
            if consumed <= self.end && consumed > self.warm {
                self.delivered[h] += u64::from(self.p.goodput_bytes_per_packet());
                self.stats_packets += 1;
            }
            k += 1;
        }
    }

    /// Receive and inter-host: the NIC fetches packets with DMA reads.
    fn run_reads(&mut self) {
        self.try_issue(0);
        while let Some(Reverse(key)) = self.queue.pop() {
            let t = (key >> 64) as Ps;
            if t > self.end {
                break;
            }
            self.events += 1;
            let id = (key & 0xffff_ffff) as u32;
            match (key >> 32) & 0xffff_ffff {
                EV_CPL_AT_SWITCH => self.cpl_at_switch(id),
                EV_READ_DONE => self.read_done(t, id),
                EV_PACKET_OUT => self.packet_out(t, id),
                _ => {
                    self.retry_pending = false;
                    self.try_issue(t);
                }
            }
        }
    }

    /// Issues reads while a slot of the N is free and the transmit buffer has room.
    fn try_issue(&mut self, now: Ps) {
        let mrrs = self.p.max_read_request_bytes;
        while let Some(&slot) = self.free_reads.last() {
            let pk = match self.fetching {
                Some(pk) if self.packets[pk as usize].left_to_issue > 0 => pk,
                _ => {
                    let Some(&pk) = self.free_packets.last() else {
                        return;
                    };
                    let Some(h) = self.waiting_for.take().or_else(|| self.arbiter.pick()) else {
                        return;
                    };
                    // The host's sending core must have made the packet: wait for it (an
                    // event when it will be made; a consumed packet when the window is
                    // closed), holding the arbiter's choice.
                    match self.stacks[h].peek() {
                        Next::At(t) if t <= now => {
                            self.stacks[h].make();
                        }
                        Next::At(t) => {
                            self.waiting_for = Some(h);
                            if !self.retry_pending {
                                self.retry_pending = true;
                                self.push(t, EV_HOST_READY, 0);
                            }
                            return;
                        }
                        Next::Blocked => {
                            self.waiting_for = Some(h);
                            return;
                        }
                    }
                    self.free_packets.pop();
                    let (src, dst) = match self.dir {
                        Direction::InterHost => (0, h),
                        _ => (h, h),
                    };
                    self.packets[pk as usize] = Packet {
                        src,
                        dst,
                        left_to_issue: self.p.dma_bytes_per_packet(),
                        reads_out: 0,
                    };
                    self.fetching = Some(pk);
                    pk
                }
            };
            self.free_reads.pop();
            let packet = &mut self.packets[pk as usize];
            // Reads are Max_Read_Request_Size, the packet's tail shorter (rounded up to
            // whole DW, as a DMA engine reads).
            let offset = self.p.dma_bytes_per_packet() - packet.left_to_issue;
            let bytes = packet.left_to_issue.min(mrrs).div_ceil(4) * 4;
            packet.left_to_issue = packet.left_to_issue.saturating_sub(mrrs);
            packet.reads_out += 1;
            let h = packet.src;
            let iova = BUFFER_IOVA + u64::from(pk % 16) * 16384 + u64::from(offset);
            let tlps = match self.path.read(h, iova, bytes, self.p.completion_bytes) {
                Ok(r) => r,
                Err(e) => {
                    self.error.get_or_insert(e);
                    self.queue.clear();
                    return;
                }
            };
            let oh = u64::from(self.p.pcie_tlp_overhead_bytes);
            let (mrd_pcie, mrd_wire) = (tlps.mrd_tlp + oh, tlps.mrd_wire);
            let (cpl_frames, cpl_pcie, cpl_wire) =
                (tlps.cpl_frames, tlps.cpl_tlp + oh, tlps.cpl_wire);
            // MRd: PCIe to the bridge, a path (round robin per request: the bridges balance
            // the two networks, S4.4), the switch, the host bridge. The completions come
            // back on the same path.
            let req = self
                .pcie_up
                .send(Train::at(now), 1, mrd_pcie)
                .delay(self.bridge);
            let path = self.next_path;
            self.next_path = (self.next_path + 1) % self.up.len();
            let at_switch = self.up[path].send(req, 1, mrd_wire).delay(self.switch);
            let at_host = self.to_host[h][path]
                .send(at_switch, 1, mrd_wire)
                .delay(self.bridge);
            // The root complex reads memory, then returns the data as a completion train.
            let ready = Train::at(at_host.last + self.memory + self.bridge);
            let back = self.from_host[h][path]
                .send(ready, cpl_frames, cpl_wire)
                .delay(self.switch);
            self.reads[slot as usize] = Read {
                packet: pk,
                path: path as u8,
                issued: now,
                train: back,
                cpl_frames,
                cpl_pcie,
                cpl_wire,
            };
            self.push(back.first, EV_CPL_AT_SWITCH, slot);
        }
    }

    fn cpl_at_switch(&mut self, slot: u32) {
        let r = self.reads[slot as usize];
        let at_bridge = self.down[usize::from(r.path)]
            .send(r.train, r.cpl_frames, r.cpl_wire)
            .delay(self.bridge);
        let at_nic = self.pcie_down.send(at_bridge, r.cpl_frames, r.cpl_pcie);
        self.push(at_nic.last, EV_READ_DONE, slot);
    }

    fn read_done(&mut self, now: Ps, slot: u32) {
        let r = self.reads[slot as usize];
        let rtt = now - r.issued;
        self.rtt_sum += u128::from(rtt);
        self.first_rtt.get_or_insert(rtt);
        self.stats_reads += 1;
        self.free_reads.push(slot);
        let pk = &mut self.packets[r.packet as usize];
        pk.reads_out -= 1;
        if pk.reads_out == 0 && pk.left_to_issue == 0 {
            // The whole packet is in the NIC: out on the wire (receive) or through the
            // internal switch (inter-host).
            let link = match self.dir {
                Direction::InterHost => &mut self.internal,
                _ => &mut self.wire,
            };
            let out = link.send(Train::at(now), 1, u64::from(self.p.wire_bytes_per_packet()));
            self.push(out.last, EV_PACKET_OUT, r.packet);
        }
        self.try_issue(now);
    }

    fn packet_out(&mut self, now: Ps, pk: u32) {
        let packet = self.packets[pk as usize];
        self.free_packets.push(pk);
        let landed = match self.dir {
            Direction::InterHost => self.write_packet(now, packet.dst, u64::from(pk)).0,
            _ => now,
        };
        let consumed = self.stacks[packet.dst].consume(landed);
        if consumed <= self.end && consumed > self.warm {
            self.delivered[packet.dst] += u64::from(self.p.goodput_bytes_per_packet());
            self.stats_packets += 1;
        }
        self.try_issue(now);
    }

    fn result(&self, duration_s: f64) -> SimResult {
        let per_host_gbps: Vec<f64> = self
            .delivered
            .iter()
            .map(|&b| b as f64 * 8.0 / (duration_s * (1.0 - WARM_UP)) / 1e9)
            .collect();
        SimResult {
            total_gbps: per_host_gbps.iter().sum(),
            per_host_gbps,
            packets: self.stats_packets,
            reads: self.stats_reads,
            events: self.events,
            mean_read_rtt_ns: if self.stats_reads == 0 {
                0.0
            } else {
                self.rtt_sum as f64 / self.stats_reads as f64 / 1000.0
            },
            unloaded_read_rtt_ns: self.first_rtt.map_or(0.0, |r| r as f64 / 1000.0),
            path: self.path.stats(),
            wire_utilization: self.wire.busy() as f64 / (duration_s * 1e12),
        }
    }
}
