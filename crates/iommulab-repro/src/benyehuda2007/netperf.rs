//! netperf `TCP_STREAM` on the receiving x460 (S2.7), as netperf runs it.
//!
//! **Segmentation.** netperf's `TCP_STREAM` leaves Nagle's algorithm on unless given `-D`
//! (`TCP_NODELAY`). With Nagle, a bulk sender holds a message smaller than the MSS while data
//! is unacknowledged, so the stream leaves in full MSS segments whatever the message size:
//! the receiver sees the same packets at 64 B as at 64 KiB. With `-D` each `send` leaves at
//! once: `⌈m / MSS⌉` packets per message (a labelled variant, [`NetperfModel::nodelay`]). TSO
//! is a sender's feature (the client's); the receiver's frames are MSS-sized either way, and
//! the 2007 receive path had no LRO, so the receiver sees every segment.
//!
//! **The sender's work per message.** netperf (on the e326 client, S2.7: 2 × 1.8 GHz
//! Opteron) calls `send()` once per message of `-m` bytes from one process: the system
//! call's entry and exit (`send_syscall`), the socket layer's per-call work (`sock_sendmsg`,
//! `lock_sock`/`release_sock`, `tcp_sendmsg`'s setup and its tail-skb check: `send_call`), the
//! copy from user space per byte (`send_copy_per_byte`). Nagle coalesces the data into full
//! segments but not the calls: the per-send cost stays per message, and each segment sent
//! costs `send_segment` (TCP and IP output, the driver's transmit and completion, the share
//! of the ACKs received). Below some message size that one CPU, not the link, sets the
//! rate, so the receiver's packet rate and CPU use fall with the message size. The
//! receiver's `recv()` size is netserver's own (`-M`), not the message: its per-call work is
//! in `rx_protocol`.
//!
//! **Work per packet, and who does it.** The receive path is split into the driver's part
//! (interrupt and NAPI share, descriptor handling, refill: `rx_driver`) and the protocol's
//! (IP, TCP, socket, wake-up, the `recv` call's share: `rx_protocol`); the copy to user space
//! is per byte; every `ack_every` packets an ACK is built (`ack_protocol`) and sent through
//! the driver (`ack_driver`). With the IOMMU, each packet maps and unmaps one receive buffer
//! and each ACK one transmit buffer.
//!
//! | scenario | CPUs (utilisation over) | work |
//! |---|---|---|
//! | bare metal | `bare_metal_cpus` (the x460's 8 cores) | softirq CPU: driver + protocol + ACKs + DMA pairs; the netperf process's CPU: the copy |
//! | dom0 | `dom0_cpus` | everything + Xen's event per packet + DMA pairs with their hypercalls |
//! | domU | dom0's + domU's vCPUs | dom0: driver, event, netback (its grant copy), the ACK's driver transmit, DMA pairs; domU: event, netfront, protocol, ACKs' protocol part, copy to user |
//!
//! The throughput is `min(link, the sender, the most loaded CPU group's limit)`; the utilisation is the
//! work done over every CPU of the scenario. The prices are estimates with ranges
//! ([`HARNESS_PRICES`]); the paper publishes none.

use serde::Serialize;

use iommulab::hw::cost::CostModel;

use super::{DmaCharge, NetperfRun, Scenario};

/// The harness's parameters, cycles at the x460's 3.0 GHz.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct NetperfModel {
    /// Link rate (1 GbE; an input).
    pub link_mbps: f64,
    /// TCP payload per full segment (1500-byte MTU − 52 bytes of IPv4 + TCP with timestamps).
    pub mss: u64,
    /// Wire bytes of a frame besides its payload: 66 header bytes, FCS 4, preamble 8,
    /// inter-frame gap 12.
    pub wire_overhead: u64,
    /// `netperf -D` (`TCP_NODELAY`): one send, one segment train; off: Nagle coalesces.
    pub nodelay: bool,
    /// Receive, driver's part per packet.
    pub rx_driver: f64,
    /// Receive, protocol's part per packet (without the copy).
    pub rx_protocol: f64,
    /// Copying received payload to user space, per byte.
    pub copy_per_byte: f64,
    /// Packets per ACK (delayed ACKs: every second segment).
    pub ack_every: u64,
    /// Building one ACK (TCP output, IP).
    pub ack_protocol: f64,
    /// Sending one ACK through the driver, with its transmit clean-up.
    pub ack_driver: f64,
    /// Xen: delivering an interrupt or notification to a domain as an event.
    pub xen_event: f64,
    /// Xen netback in dom0, per packet: the grant copy's setup and the ring and event work
    /// (the copied bytes are priced by `copy_per_byte`).
    pub netback_packet: f64,
    /// Xen netfront in domU, per packet: ring processing and buffer re-posting.
    pub netfront_packet: f64,
    /// One Xen hypercall (the streaming DMA API makes two per map + unmap pair, counted).
    pub hypercall: f64,
    /// CPUs of the bare-metal machine: the x460's 4 dual-core Paxvilles, hyper-threading off
    /// (S2.7's setup).
    pub bare_metal_cpus: u32,
    /// dom0's vCPUs doing the stream's work (an input: the paper does not say).
    pub dom0_cpus: u32,
    /// domU's vCPUs (an input).
    pub domu_cpus: u32,
    /// The sender's clock, GHz (S2.7: the e326's 1.8 GHz Opterons; netperf sends from one
    /// process, so one of its two CPUs).
    pub sender_ghz: f64,
    /// Sender, per `send()`: the system call's entry and exit.
    pub send_syscall: f64,
    /// Sender, per `send()`: the socket layer's per-call work.
    pub send_call: f64,
    /// Sender, per byte: the copy from user space.
    pub send_copy_per_byte: f64,
    /// Sender, per segment: TCP/IP output, the driver's transmit and completion, its share
    /// of the ACKs received.
    pub send_segment: f64,
}

impl Default for NetperfModel {
    fn default() -> Self {
        Self {
            link_mbps: 1000.0,
            mss: 1448,
            wire_overhead: 90,
            nodelay: false,
            rx_driver: 3000.0,
            rx_protocol: 4000.0,
            copy_per_byte: 1.0,
            ack_every: 2,
            ack_protocol: 1500.0,
            ack_driver: 1500.0,
            xen_event: 2000.0,
            netback_packet: 5000.0,
            netfront_packet: 3000.0,
            #[expect(clippy::cast_precision_loss, reason = "small integer")]
            hypercall: CostModel::XEN_2007.hypercall as f64,
            bare_metal_cpus: 8,
            dom0_cpus: 1,
            domu_cpus: 1,
            sender_ghz: 1.8,
            send_syscall: 250.0,
            send_call: 800.0,
            send_copy_per_byte: 1.0,
            send_segment: 5000.0,
        }
    }
}

/// One estimated harness price: its field, reasoning and plausible range.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct HarnessPrice {
    /// The [`NetperfModel`] field.
    pub field: &'static str,
    /// The reasoning.
    pub source: &'static str,
    /// Plausible range.
    pub range: (f64, f64),
}

/// Where each estimated harness price comes from.
pub const HARNESS_PRICES: [HarnessPrice; 13] = [
    HarnessPrice {
        field: "rx_driver",
        source: "estimate: tg3/bnx2 interrupt and NAPI share, descriptor, skb allocation and refill ≈ 1 µs",
        range: (1500.0, 5000.0),
    },
    HarnessPrice {
        field: "rx_protocol",
        source: "estimate: IP + TCP receive, socket enqueue, wake-up and recv's share ≈ 1.3 µs",
        range: (2500.0, 7000.0),
    },
    HarnessPrice {
        field: "copy_per_byte",
        source: "estimate: copy_to_user at ≈ 3 GB/s (cache-cold source: the NIC wrote it)",
        range: (0.5, 2.0),
    },
    HarnessPrice {
        field: "ack_protocol",
        source: "estimate: tcp_send_ack's skb, TCP and IP output ≈ 0.5 µs",
        range: (800.0, 3000.0),
    },
    HarnessPrice {
        field: "ack_driver",
        source: "estimate: the driver's transmit and its completion ≈ 0.5 µs",
        range: (800.0, 3000.0),
    },
    HarnessPrice {
        field: "xen_event",
        source: "estimate: an event-channel upcall with virtual interrupt masking",
        range: (1000.0, 4000.0),
    },
    HarnessPrice {
        field: "netback_packet",
        source: "estimate: netback's per-packet grant-copy hypercall setup, bridge, ring and notification",
        range: (3000.0, 9000.0),
    },
    HarnessPrice {
        field: "netfront_packet",
        source: "estimate: netfront's ring processing and re-posting a grant",
        range: (1500.0, 5000.0),
    },
    HarnessPrice {
        field: "hypercall",
        source: "estimate: a Xen 3 paravirtual trap and return (int 0x82 / syscall path, no VMCS)",
        range: (500.0, 3000.0),
    },
    HarnessPrice {
        field: "send_syscall",
        source: "estimate: system call entry and exit on a 1.8 GHz K8 (lmbench's null call is a few tenths of a µs on \
CPUs of that era) ≈ 0.14 µs",
        range: (150.0, 500.0),
    },
    HarnessPrice {
        field: "send_call",
        source: "estimate: sys_sendto → sock_sendmsg → tcp_sendmsg per call: fd lookup, lock_sock/release_sock, the \
MSS and tail-skb checks, the Nagle test ≈ 0.45 µs",
        range: (400.0, 1500.0),
    },
    HarnessPrice {
        field: "send_copy_per_byte",
        source: "estimate: copy_from_user into the socket's skb (tg3 offloads the checksum) at ≈ 2 GB/s",
        range: (0.5, 2.0),
    },
    HarnessPrice {
        field: "send_segment",
        source: "estimate: tcp_write_xmit, IP output, dev_queue_xmit, the tg3 transmit and its completion, half an \
ACK's receive ≈ 2.8 µs at 1.8 GHz",
        range: (3000.0, 9000.0),
    },
];

impl NetperfModel {
    /// The price named `field`.
    pub fn get(&self, field: &str) -> Option<f64> {
        Some(*self.field(field)?)
    }

    /// A copy with `field` set to `value`.
    pub fn with(mut self, field: &str, value: f64) -> Option<Self> {
        *self.field_mut(field)? = value;
        Some(self)
    }

    fn field(&self, field: &str) -> Option<&f64> {
        Some(match field {
            "rx_driver" => &self.rx_driver,
            "rx_protocol" => &self.rx_protocol,
            "copy_per_byte" => &self.copy_per_byte,
            "ack_protocol" => &self.ack_protocol,
            "ack_driver" => &self.ack_driver,
            "xen_event" => &self.xen_event,
            "netback_packet" => &self.netback_packet,
            "netfront_packet" => &self.netfront_packet,
            "hypercall" => &self.hypercall,
            "send_syscall" => &self.send_syscall,
            "send_call" => &self.send_call,
            "send_copy_per_byte" => &self.send_copy_per_byte,
            "send_segment" => &self.send_segment,
            _ => return None,
        })
    }

    fn field_mut(&mut self, field: &str) -> Option<&mut f64> {
        Some(match field {
            "rx_driver" => &mut self.rx_driver,
            "rx_protocol" => &mut self.rx_protocol,
            "copy_per_byte" => &mut self.copy_per_byte,
            "ack_protocol" => &mut self.ack_protocol,
            "ack_driver" => &mut self.ack_driver,
            "xen_event" => &mut self.xen_event,
            "netback_packet" => &mut self.netback_packet,
            "netfront_packet" => &mut self.netfront_packet,
            "hypercall" => &mut self.hypercall,
            "send_syscall" => &mut self.send_syscall,
            "send_call" => &mut self.send_call,
            "send_copy_per_byte" => &mut self.send_copy_per_byte,
            "send_segment" => &mut self.send_segment,
            _ => return None,
        })
    }

    /// Segments per message of `m` bytes: with Nagle the stream's bytes in full segments
    /// (fractional), with `-D` each message's own.
    pub fn segments_per_message(&self, m: u64) -> f64 {
        #[expect(clippy::cast_precision_loss, reason = "small integers")]
        if self.nodelay {
            m.div_ceil(self.mss) as f64
        } else {
            m as f64 / self.mss as f64
        }
    }

    /// The packets per second the sender can send at message size `m`: one CPU at
    /// `sender_ghz` over its work per message, in the receiver's segments.
    pub fn sender_pps(&self, m: u64) -> f64 {
        #[expect(clippy::cast_precision_loss, reason = "small integers")]
        let per_message = self.send_syscall
            + self.send_call
            + m as f64 * self.send_copy_per_byte
            + self.segments_per_message(m) * self.send_segment;
        self.sender_ghz * 1e9 / per_message * self.segments_per_message(m)
    }

    /// Payload bytes per received segment at message size `m`.
    pub fn payload(&self, m: u64) -> f64 {
        #[expect(clippy::cast_precision_loss, reason = "small integers")]
        if self.nodelay {
            m as f64 / m.div_ceil(self.mss) as f64
        } else {
            self.mss as f64
        }
    }
}

/// One point: the throughput and utilisation of `scenario` at message size `m`.
/// `dma` is what one map + unmap pair costs where the IOMMU is on (`None`: off).
pub fn point(
    model: &NetperfModel,
    scenario: Scenario,
    m: u64,
    dma: Option<&DmaCharge>,
) -> NetperfRun {
    let clock = CostModel::VTD_2008.clock.as_ghz() * 1e9;
    let payload = model.payload(m);
    #[expect(clippy::cast_precision_loss, reason = "small integers")]
    let (ack_every, overhead) = (model.ack_every as f64, model.wire_overhead as f64);
    let link_pps = model.link_mbps * 1e6 / 8.0 / (payload + overhead);
    let copy = payload * model.copy_per_byte;
    // DMA pairs per packet: one receive buffer, and one ACK buffer every `ack_every`.
    let pairs_per_packet = 1.0 + 1.0 / ack_every;
    let (pair, xen_pair) = match dma {
        None => (0.0, 0.0),
        Some(d) => (
            d.bare_metal,
            d.bare_metal + d.hypercalls_per_pair * model.hypercall,
        ),
    };
    let m_ = model;
    let acks = (m_.ack_protocol + m_.ack_driver) / ack_every;
    // Per CPU group: (name, cycles per packet, CPUs that can do it in parallel).
    let groups: [(&str, f64, f64); 2] = match scenario {
        // One stream: the softirq CPU runs the driver and TCP (and the DMA layer); the
        // netperf process copies on another CPU.
        Scenario::BareMetal => [
            (
                "cpu",
                m_.rx_driver + m_.rx_protocol + acks + pair * pairs_per_packet,
                1.0,
            ),
            ("cpu", copy, f64::from(m_.bare_metal_cpus.max(2) - 1)),
        ],
        Scenario::Dom0 => [
            (
                "dom0",
                m_.rx_driver
                    + m_.rx_protocol
                    + acks
                    + copy
                    + m_.xen_event
                    + xen_pair * pairs_per_packet,
                f64::from(m_.dom0_cpus),
            ),
            ("dom0", 0.0, 1.0),
        ],
        // dom0 does the driver's work, netback and its grant copy, and sends domU's ACKs
        // through the driver (an event from netfront each); TCP and the copy to user space
        // are domU's.
        Scenario::DomU => [
            (
                "dom0",
                m_.rx_driver
                    + m_.xen_event
                    + m_.netback_packet
                    + copy
                    + (m_.ack_driver + m_.xen_event) / ack_every
                    + xen_pair * pairs_per_packet,
                f64::from(m_.dom0_cpus),
            ),
            (
                "domU",
                m_.xen_event
                    + m_.netfront_packet
                    + m_.rx_protocol
                    + m_.ack_protocol / ack_every
                    + copy,
                f64::from(m_.domu_cpus),
            ),
        ],
    };
    let cpus = match scenario {
        Scenario::BareMetal => m_.bare_metal_cpus.max(2),
        Scenario::Dom0 => m_.dom0_cpus,
        Scenario::DomU => m_.dom0_cpus + m_.domu_cpus,
    };
    let mut pps = link_pps;
    let mut bottleneck = "link";
    let sender = model.sender_pps(m);
    if sender < pps {
        pps = sender;
        bottleneck = "sender";
    }
    for &(name, cycles, n) in &groups {
        if cycles <= 0.0 {
            continue;
        }
        let limit = clock * n / cycles;
        if limit < pps {
            pps = limit;
            bottleneck = name;
        }
    }
    let busy: f64 = groups.iter().map(|&(_, c, _)| c * pps).sum();
    NetperfRun {
        scenario,
        unit: dma.map_or("calgary", |d| d.unit.as_str()).into(),
        iommu: dma.is_some(),
        message_size: m,
        throughput_mbps: pps * payload * 8.0 / 1e6,
        cpu_utilization: busy / (clock * f64::from(cpus)),
        cpus,
        bottleneck: bottleneck.into(),
        packets_per_second: pps,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sender's rate: per message, so it grows with the message size; `-D` adds a
    /// segment's work to every message.
    #[test]
    fn the_sender_pays_per_message() {
        let m = NetperfModel::default();
        assert!(m.sender_pps(64) < m.sender_pps(128));
        let d = NetperfModel { nodelay: true, ..m };
        // -D: more, smaller packets, fewer bytes.
        assert!(d.sender_pps(64) > m.sender_pps(64));
        assert!(d.sender_pps(64) * d.payload(64) < m.sender_pps(64) * m.payload(64));
        // One full segment per message: the same work either way.
        assert!((d.sender_pps(1448) - m.sender_pps(1448)).abs() < 1e-6);
        // 64 B: 250 + 800 + 64 + 64/1448 × 5000 cycles per message at 1.8 GHz.
        let per = 250.0 + 800.0 + 64.0 + 64.0 / 1448.0 * 5000.0;
        assert!((m.sender_pps(64) - 1.8e9 / per * 64.0 / 1448.0).abs() < 1e-6);
    }

    /// Nagle: full segments at every message size; `-D`: a 64-byte message is a packet.
    #[test]
    fn nagle_coalesces_and_nodelay_does_not() {
        let m = NetperfModel::default();
        assert!((m.payload(64) - 1448.0).abs() < 1e-9);
        assert!((m.payload(65536) - 1448.0).abs() < 1e-9);
        let d = NetperfModel { nodelay: true, ..m };
        assert!((d.payload(64) - 64.0).abs() < 1e-9);
        assert!((d.payload(2048) - 1024.0).abs() < 1e-9);
        let a = point(&m, Scenario::BareMetal, 64, None);
        let b = point(&d, Scenario::BareMetal, 64, None);
        assert!(a.throughput_mbps > 4.0 * b.throughput_mbps, "{a:?} {b:?}");
        assert_eq!(a.cpus, 8);
    }

    /// In domU, dom0 does not run TCP: its work per packet excludes the protocol's part.
    #[test]
    fn dom0_is_charged_only_its_own_work_in_domu() {
        // -D at 64 B: the CPUs, not the link, set the rate.
        let m = NetperfModel {
            nodelay: true,
            ..NetperfModel::default()
        };
        let base = point(&m, Scenario::DomU, 64, None);
        let more_tcp = NetperfModel {
            rx_protocol: m.rx_protocol * 2.0,
            domu_cpus: 8,
            ..m
        };
        let p = point(&more_tcp, Scenario::DomU, 64, None);
        // Only domU's work grew: dom0's load alone sets the rate, unchanged.
        assert_eq!(base.bottleneck, "dom0");
        assert!(
            (p.packets_per_second - base.packets_per_second).abs() < 1e-6,
            "{p:?} {base:?}"
        );
    }
}
