//! Lossless bridge-to-bridge delivery (S4.2): TLPs must not be lost on the Ethernet, so each
//! bridge pair runs a sliding-window transport over it, end to end.
//!
//! ```text
//!  Sender: [base ........ resend ........ next)   window ≤ min(cwnd, capacity)
//!           acked ↑     (re)sent up to here   queued up to here
//!  ack(n): everything below n arrived → base = n, cwnd grows
//!  timeout (no ack for rto): go back N → resend = base, cwnd = 1, ssthresh = cwnd / 2
//!  Receiver: accepts only seq == expected (in order), acks `expected` cumulatively
//! ```
//!
//! The paper cites its own congestion control (its reference 15, not described there); this model uses
//! go-back-N with slow start and additive increase / multiplicative decrease, the textbook
//! scheme with the properties S4.2 asks for: nothing lost, nothing duplicated, in order, and
//! a window that backs off when the network drops frames.
//!
//! The retransmission buffer is allocated once (`capacity` TLP slots); queueing and sending
//! copy into and out of it without allocating.

use serde::{Deserialize, Serialize};

use crate::tlp::MAX_TLP_BYTES;

/// Transport parameters.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct TransportConfig {
    /// Frames the sender buffers for retransmission (the window can never exceed it).
    pub capacity: u32,
    /// Initial slow-start threshold, frames.
    pub ssthresh: u32,
    /// Retransmission timeout, ns.
    pub rto_ns: u64,
}

impl Default for TransportConfig {
    fn default() -> Self {
        // Estimates: 256 frames of buffering; 100 µs timeout, tens of Ethernet round trips
        // of a few µs each.
        TransportConfig {
            capacity: 256,
            ssthresh: 64,
            rto_ns: 100_000,
        }
    }
}

/// Counters of a sender.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SenderStats {
    /// Frames sent for the first time.
    pub sent: u64,
    /// Frames sent again after a timeout.
    pub retransmitted: u64,
    /// Timeouts.
    pub timeouts: u64,
}

/// The window is full: the TLP was not queued (the bridge back-pressures PCIe).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("transport window full ({0} frames unacknowledged)")]
pub struct WindowFull(pub u32);

/// The sending side of one bridge-to-bridge connection.
#[derive(Debug, Clone)]
pub struct Sender {
    cfg: TransportConfig,
    slots: Vec<[u8; MAX_TLP_BYTES]>,
    lens: Vec<u16>,
    base: u32,
    resend: u32,
    next: u32,
    /// One past the highest sequence number ever sent.
    high: u32,
    cwnd: f64,
    ssthresh: f64,
    timer: Option<u64>,
    stats: SenderStats,
}

impl Sender {
    /// A sender with `cfg` (capacity at least 1).
    pub fn new(cfg: TransportConfig) -> Self {
        let cap = cfg.capacity.max(1);
        Sender {
            cfg: TransportConfig {
                capacity: cap,
                ..cfg
            },
            slots: vec![[0; MAX_TLP_BYTES]; cap as usize],
            lens: vec![0; cap as usize],
            base: 0,
            resend: 0,
            next: 0,
            high: 0,
            cwnd: 1.0,
            ssthresh: f64::from(cfg.ssthresh.max(1)),
            timer: None,
            stats: SenderStats::default(),
        }
    }

    /// Queues a TLP for delivery; `Err` when `capacity` frames are unacknowledged.
    pub fn queue(&mut self, tlp: &[u8]) -> Result<u32, WindowFull> {
        let outstanding = self.next.wrapping_sub(self.base);
        if outstanding >= self.cfg.capacity {
            return Err(WindowFull(outstanding));
        }
        let i = (self.next % self.cfg.capacity) as usize;
        let n = tlp.len().min(MAX_TLP_BYTES);
        self.slots[i][..n].copy_from_slice(&tlp[..n]);
        self.lens[i] = n as u16;
        let seq = self.next;
        self.next = self.next.wrapping_add(1);
        Ok(seq)
    }

    /// The next frame the congestion window allows on the wire now: `(seq, tlp)`.
    pub fn poll(&mut self, now: u64) -> Option<(u32, &[u8])> {
        let in_flight = self.resend.wrapping_sub(self.base);
        let pending = self.next.wrapping_sub(self.resend);
        if pending == 0 || f64::from(in_flight) >= self.cwnd.floor().max(1.0) {
            return None;
        }
        let seq = self.resend;
        // A sequence number below the highest ever sent is a retransmission.
        if seq.wrapping_sub(self.base) < self.high.wrapping_sub(self.base) {
            self.stats.retransmitted += 1;
        } else {
            self.stats.sent += 1;
            self.high = seq.wrapping_add(1);
        }
        self.resend = self.resend.wrapping_add(1);
        if self.timer.is_none() {
            self.timer = Some(now);
        }
        let i = (seq % self.cfg.capacity) as usize;
        Some((seq, &self.slots[i][..usize::from(self.lens[i])]))
    }

    /// A cumulative ack: the receiver expects `ack` next.
    pub fn on_ack(&mut self, ack: u32, now: u64) {
        let acked = ack.wrapping_sub(self.base);
        if acked == 0 || acked > self.next.wrapping_sub(self.base) {
            return; // duplicate or stale
        }
        for _ in 0..acked {
            if self.cwnd < self.ssthresh {
                self.cwnd += 1.0;
            } else {
                self.cwnd += 1.0 / self.cwnd;
            }
        }
        self.cwnd = self.cwnd.min(f64::from(self.cfg.capacity));
        self.base = ack;
        if self.resend.wrapping_sub(self.base) > self.next.wrapping_sub(self.base) {
            self.resend = self.base;
        }
        self.timer = (self.base != self.resend).then_some(now);
    }

    /// Checks the retransmission timer; on expiry goes back to the oldest unacknowledged
    /// frame and shrinks the window. Returns whether it fired.
    pub fn on_tick(&mut self, now: u64) -> bool {
        match self.timer {
            Some(t) if now.saturating_sub(t) >= self.cfg.rto_ns => {
                self.stats.timeouts += 1;
                self.ssthresh = (self.cwnd / 2.0).max(2.0);
                self.cwnd = 1.0;
                self.resend = self.base;
                self.timer = Some(now);
                true
            }
            _ => false,
        }
    }

    /// Whether every queued TLP has been acknowledged.
    pub fn idle(&self) -> bool {
        self.base == self.next
    }

    /// The congestion window, frames.
    pub fn cwnd(&self) -> f64 {
        self.cwnd
    }

    /// Counters.
    pub fn stats(&self) -> SenderStats {
        self.stats
    }
}

/// The receiving side: in-order delivery, cumulative acks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Receiver {
    expected: u32,
}

impl Receiver {
    /// A data frame arrived: `true` when it is the next in order (deliver it), `false` for
    /// a gap or a duplicate (discard it; go-back-N resends).
    pub fn on_data(&mut self, seq: u32) -> bool {
        if seq == self.expected {
            self.expected = self.expected.wrapping_add(1);
            true
        } else {
            false
        }
    }

    /// The cumulative ack to send back: the next sequence number expected.
    pub fn ack(&self) -> u32 {
        self.expected
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::VecDeque;

    /// Runs `n` TLPs through a lossy, delaying link in both directions; `drop(i)` says
    /// whether the i-th frame put on the data link is lost. Returns what arrived and the
    /// sender's counters.
    fn run(
        n: u32,
        drop: impl Fn(u64) -> bool,
        ack_drop: impl Fn(u64) -> bool,
    ) -> (Vec<u32>, SenderStats) {
        let cfg = TransportConfig {
            capacity: 16,
            ssthresh: 8,
            rto_ns: 50,
        };
        let mut s = Sender::new(cfg);
        let mut r = Receiver::default();
        let delay = 5u64;
        let mut data: VecDeque<(u64, u32, u32)> = VecDeque::new();
        let mut acks: VecDeque<(u64, u32)> = VecDeque::new();
        let (mut queued, mut put, mut acks_put) = (0u32, 0u64, 0u64);
        let mut got = Vec::new();
        for now in 0..1_000_000u64 {
            while queued < n && s.queue(&queued.to_be_bytes()).is_ok() {
                queued += 1;
            }
            s.on_tick(now);
            if let Some((seq, tlp)) = s.poll(now) {
                let v = u32::from_be_bytes(tlp.try_into().unwrap());
                if !drop(put) {
                    data.push_back((now + delay, seq, v));
                }
                put += 1;
            }
            while data.front().is_some_and(|d| d.0 <= now) {
                let (_, seq, v) = data.pop_front().unwrap();
                if r.on_data(seq) {
                    got.push(v);
                }
                if !ack_drop(acks_put) {
                    acks.push_back((now + delay, r.ack()));
                }
                acks_put += 1;
            }
            while acks.front().is_some_and(|a| a.0 <= now) {
                let (_, a) = acks.pop_front().unwrap();
                s.on_ack(a, now);
            }
            if queued == n && s.idle() {
                break;
            }
        }
        (got, s.stats())
    }

    #[test]
    fn a_clean_link_delivers_everything_once_without_retransmission() {
        let (got, st) = run(500, |_| false, |_| false);
        assert_eq!(got, (0..500).collect::<Vec<_>>());
        assert_eq!((st.retransmitted, st.timeouts, st.sent), (0, 0, 500));
    }

    #[test]
    fn lost_frames_are_resent_and_the_window_backs_off() {
        let (got, st) = run(500, |i| i % 37 == 5, |i| i % 53 == 7);
        assert_eq!(got, (0..500).collect::<Vec<_>>());
        assert!(st.timeouts > 0 && st.retransmitted > 0, "{st:?}");
    }

    proptest! {
        /// Whatever frames and acks the network drops (up to a third of them), every TLP
        /// arrives exactly once and in order.
        #[test]
        fn lossless_in_order_under_any_drop_pattern(
            drops in proptest::collection::vec(any::<bool>(), 64),
            ack_drops in proptest::collection::vec(any::<bool>(), 64),
            k in 3u64..8,
        ) {
            let lose = |v: &Vec<bool>, i: u64| i.is_multiple_of(k) && v[(i / k % 64) as usize];
            let (got, _) = run(300, |i| lose(&drops, i), |i| lose(&ack_drops, i));
            prop_assert_eq!(got, (0..300).collect::<Vec<_>>());
        }
    }
}
