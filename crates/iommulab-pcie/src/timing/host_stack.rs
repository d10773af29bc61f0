//! The hosts' own limit on a TCP stream: each stream's packets are processed by one core at
//! each end (S4.4's iperf runs on CentOS 5.4, 2.6.18: no multiqueue networking, one iperf
//! thread per connection), at a cost per packet (interrupt, driver, IP and TCP, ACKs, the
//! system call) and per byte (the copy between the socket and iperf's buffer).
//!
//! - The sender's core makes packet `k` of a stream once it has made packet `k − 1` and
//!   the receiver's window allows it: the receiver has consumed packet `k − W`, where `W` is
//!   the TCP window in packets. Between the two the packets wait in queues (the sender's
//!   transmit queue, the NIC, the receiver's ring and socket), so a stream runs at the
//!   slower of its two cores or at its share of the links, whichever is lower.
//! - The receiver's core takes each packet when it has landed (send: the NIC's DMA writes
//!   are done; receive: the frame is off the wire) and its core is free.
//!
//! Cycles per packet scale with each machine's clock (Table I: servers 2.83, 2.83 and 3.16
//! GHz, the client 2.66 GHz); the copy is priced in ns per byte, not cycles, because it is
//! bound by the Core 2's front-side bus and memory, not by its clock. Every price is an
//! estimate with a range in [`super::ExpEtherParams`].
//!
//! State is fixed-size arrays allocated once per run: no allocation per packet.

use crate::timing::link::Ps;

/// Table I's clocks, GHz: servers 1 and 2 a Core 2 Quad at 2.83, server 3 a Core 2 Duo at
/// 3.16. Hosts beyond the third (not in the paper) take server 3's clock.
pub const SERVER_GHZ: [f64; 3] = [2.83, 2.83, 3.16];

/// Table I: the client, a Core 2 at 2.66 GHz.
pub const CLIENT_GHZ: f64 = 2.66;

/// The clock of server `h` (0-based).
pub fn server_ghz(h: usize) -> f64 {
    SERVER_GHZ[h.min(SERVER_GHZ.len() - 1)]
}

/// A stream end's cost per packet, ps: `cycles` at `ghz` plus `ns_per_byte` for `bytes`.
pub fn packet_cost_ps(cycles: f64, ghz: f64, ns_per_byte: f64, bytes: u32) -> Ps {
    let ns = cycles / ghz + ns_per_byte * f64::from(bytes);
    iommulab_base::clock::saturating_u64((ns * 1000.0).round())
}

/// The goodput one stream's core sustains alone, Gb/s: `bytes` of payload per `cost_ps`.
pub fn core_limit_gbps(bytes: u32, cost_ps: Ps) -> f64 {
    f64::from(bytes) * 8.0 / (cost_ps as f64 / 1000.0)
}

/// One host's streams: the sending and receiving cores (one per stream) and the window.
#[derive(Clone, Debug)]
pub struct Streams {
    /// Sender's per-packet cost, ps.
    tx_cost: Ps,
    /// Receiver's per-packet cost, ps.
    rx_cost: Ps,
    /// When each sending core is next free.
    tx_free: Vec<Ps>,
    /// When each receiving core is next free.
    rx_free: Vec<Ps>,
    /// When each of the last `window` packets was consumed by the receiver (a ring).
    consumed: Vec<Ps>,
    /// Packets the sender has made.
    made: u64,
    /// Packets the receiver has consumed.
    done: u64,
}

/// What the sender can do with its next packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// The packet is ready at this time.
    At(Ps),
    /// The window is closed until a packet still in flight is consumed.
    Blocked,
}

impl Streams {
    /// `streams` streams (at least one core each end), each with a window of `window`
    /// packets.
    pub fn new(streams: u32, window: u32, tx_cost: Ps, rx_cost: Ps) -> Self {
        let s = streams.max(1) as usize;
        Streams {
            tx_cost,
            rx_cost,
            tx_free: vec![0; s],
            rx_free: vec![0; s],
            consumed: vec![0; s * window.max(1) as usize],
            made: 0,
            done: 0,
        }
    }

    /// When the sender's next packet is ready: its core (the one free first) is free and
    /// the window is open. Does not commit; [`Streams::make`] does.
    pub fn peek(&self) -> Next {
        let w = self.consumed.len() as u64;
        let open = if self.made < w {
            0
        } else if self.made - w < self.done {
            self.consumed[(self.made % w) as usize]
        } else {
            return Next::Blocked;
        };
        let core = self.tx_free.iter().copied().min().unwrap_or(0);
        Next::At(core.max(open).saturating_add(self.tx_cost))
    }

    /// Makes the sender's next packet (as [`Streams::peek`] said); returns when it is ready.
    pub fn make(&mut self) -> Next {
        let next = self.peek();
        if let Next::At(t) = next {
            let i = first_free(&self.tx_free);
            self.tx_free[i] = t;
            self.made += 1;
        }
        next
    }

    /// The receiver takes a packet that landed at `t`; returns when it has consumed it.
    /// Packets are taken in the order they were made.
    pub fn consume(&mut self, t: Ps) -> Ps {
        let i = first_free(&self.rx_free);
        let done = self.rx_free[i].max(t).saturating_add(self.rx_cost);
        self.rx_free[i] = done;
        let w = self.consumed.len() as u64;
        self.consumed[(self.done % w) as usize] = done;
        self.done += 1;
        done
    }
}

fn first_free(free: &[Ps]) -> usize {
    let mut best = 0;
    for (i, &f) in free.iter().enumerate() {
        if f < free[best] {
            best = i;
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_runs_at_its_slower_core_and_the_window_holds_the_sender_back() {
        // Sender 1 µs a packet, receiver 2 µs, window 2: the receiver sets the pace.
        let mut s = Streams::new(1, 2, 1_000_000, 2_000_000);
        assert_eq!(s.make(), Next::At(1_000_000));
        assert_eq!(s.make(), Next::At(2_000_000));
        // Two in flight, none consumed: the window is closed.
        assert_eq!(s.peek(), Next::Blocked);
        assert_eq!(s.consume(1_000_000), 3_000_000);
        // The third packet may be made once the first is consumed.
        assert_eq!(s.make(), Next::At(4_000_000));
        assert_eq!(s.consume(2_000_000), 5_000_000);
        assert_eq!(s.consume(4_000_000), 7_000_000);
        assert_eq!(s.make(), Next::At(6_000_000));
    }

    #[test]
    fn cycles_scale_with_the_clock_and_bytes_do_not() {
        // 10 000 cycles at 2.5 GHz = 4 µs, plus 1000 B at 0.25 ns = 250 ns.
        assert_eq!(packet_cost_ps(10_000.0, 2.5, 0.25, 1000), 4_250_000);
        assert_eq!(packet_cost_ps(10_000.0, 5.0, 0.25, 1000), 2_250_000);
        assert!((core_limit_gbps(1000, 1_000_000) - 8.0).abs() < 1e-12);
        assert_eq!(server_ghz(2), 3.16);
        assert_eq!(server_ghz(7), 3.16);
    }
}
